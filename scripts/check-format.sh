#!/usr/bin/env bash
# Lists the C++ files under src/ tests/ fuzz/ bench/ that are not clang-format clean
# (.clang-format at the repository root) and exits 1 when there is one, 0 when none.
# Uses Debian's clang-format (scripts/install-deps.sh test installs it); `make format`
# fixes what it lists.
# Usage: scripts/check-format.sh [REPO_ROOT]   (default: the repository holding this script)
set -euo pipefail

root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$root"

clang_format="${CLANG_FORMAT:-clang-format}"
if ! command -v "$clang_format" >/dev/null 2>&1; then
  echo "check-format: $clang_format not found (install it: scripts/install-deps.sh test)" >&2
  exit 2
fi

dirs=()
for d in src tests fuzz bench; do
  [[ -d "$d" ]] && dirs+=("$d")
done
if ((${#dirs[@]} == 0)); then
  echo "check-format: no src/ tests/ fuzz/ bench/ under $root" >&2
  exit 2
fi

unclean=()
while IFS= read -r -d '' file; do
  # --dry-run -Werror: a non-zero exit when formatting would change the file.
  if ! "$clang_format" --dry-run -Werror --style=file "$file" >/dev/null 2>&1; then
    unclean+=("$file")
  fi
done < <(find "${dirs[@]}" -type f \( -name '*.h' -o -name '*.cc' \) -print0 | sort -z)

if ((${#unclean[@]} > 0)); then
  echo "check-format: ${#unclean[@]} file(s) not clang-format clean (make format fixes them):" >&2
  printf '%s\n' "${unclean[@]}"
  exit 1
fi
echo "check-format: every file is clang-format clean" >&2
