#!/usr/bin/env bash
# Builds the web UI (web/) into OUT, unless OUT already holds the build of the same
# sources: the key is a hash of web/'s package-lock.json, configuration and src/, kept in
# OUT/../web-dist.key. So every CMake preset shares one build, and `make test` builds the
# UI once per change of its sources, not once per preset. npm ci runs only when the
# lockfile changed since node_modules was installed.
# Usage: scripts/build-web.sh OUT
set -euo pipefail
out="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
web="$root/web"
mkdir -p "$(dirname "$out")"
exec 9>"$out.lock"
flock 9

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "build-web: node and npm are needed to build the UI (scripts/install-deps.sh installs them)" >&2
  exit 1
fi

key=$(cd "$web" && { cat package-lock.json package.json vite.config.ts tsconfig.json index.html;
                      find src -type f ! -name '*.test.ts' | LC_ALL=C sort | xargs cat; } | sha256sum | cut -d' ' -f1)
if [[ -f "$out/index.html" && -f "$out.key" && "$(cat "$out.key")" == "$key" ]]; then
  exit 0
fi

lock=$(sha256sum "$web/package-lock.json" | cut -d' ' -f1)
if [[ ! -f "$web/node_modules/.baton-lock" || "$(cat "$web/node_modules/.baton-lock")" != "$lock" ]]; then
  echo "build-web: npm ci"
  (cd "$web" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$lock" > "$web/node_modules/.baton-lock"
fi
echo "build-web: building the UI into $out"
tmp="$out.tmp"
rm -rf "$tmp"
(cd "$web" && npx tsc --noEmit && BATON_WEB_OUT="$tmp" npx vite build --logLevel warn)
rm -rf "$out"
mv "$tmp" "$out"
echo "$key" > "$out.key"
