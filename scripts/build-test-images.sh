#!/usr/bin/env bash
# Builds the small local images the container tests use, without any registry, and
# imports them into Podman's storage; an image already there is kept (the cache):
#
#   localhost/busybox:latest    from the host's busybox-static (≈ 2 MB, < 1 s)
#   localhost/debian:bookworm   debootstrap --variant=minbase from the Debian archive the
#                               host's apt uses (≈ 200 MB, ≈ 40 s, once per machine)
#
# Usage: scripts/build-test-images.sh [busybox|debian ...]   (default: both)
# BATON_REBUILD_IMAGES=1 rebuilds them.
set -euo pipefail

images=("$@")
((${#images[@]})) || images=(busybox debian)

exists() { [[ "${BATON_REBUILD_IMAGES:-0}" != 1 ]] && podman image exists "$1"; }

work="$(mktemp -d "${TMPDIR:-/tmp}/baton-images.XXXXXX")"
trap 'rm -rf "$work"' EXIT

build_busybox() {
  local ref=localhost/busybox:latest
  if exists "$ref"; then echo "build-test-images: $ref is cached"; return; fi
  local bb
  bb="$(command -v busybox || true)"
  [[ -x /bin/busybox ]] && bb=/bin/busybox
  if [[ -z "$bb" ]] || ! file_is_static "$bb"; then
    echo "build-test-images: needs the static busybox (apt-get install busybox-static)" >&2
    return 1
  fi
  local root="$work/busybox"
  mkdir -p "$root/bin" "$root/tmp" "$root/etc" "$root/root"
  chmod 1777 "$root/tmp"
  cp "$bb" "$root/bin/busybox"
  local applet
  for applet in $("$root/bin/busybox" --list); do
    [[ "$applet" == busybox ]] || ln -sf busybox "$root/bin/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
  tar -C "$root" -c . | podman import --change 'ENV PATH=/bin' --change 'CMD ["/bin/sh"]' - "$ref" >/dev/null
  echo "build-test-images: built $ref"
}

file_is_static() {
  # busybox-static's binary runs in an empty root; a dynamic one would not.
  ! ldd "$1" >/dev/null 2>&1
}

debian_mirror() {
  # The archive (not security, not third-party repositories) from apt's active sources.
  local files=() url
  [[ -f /etc/apt/sources.list ]] && files+=(/etc/apt/sources.list)
  for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -f "$f" ]] && files+=("$f")
  done
  url=""
  if ((${#files[@]})); then
    url="$(grep -hE '^[[:space:]]*(deb|URIs:)' "${files[@]}" | grep -oE 'https?://[^ ]+' |
      grep -E '/debian/?$' | head -n 1 || true)"
  fi
  echo "${url:-http://deb.debian.org/debian}"
}

build_debian() {
  local ref=localhost/debian:bookworm
  if exists "$ref"; then echo "build-test-images: $ref is cached"; return; fi
  local root="$work/debian" mirror
  mirror="$(debian_mirror)"
  echo "build-test-images: debootstrap bookworm from $mirror (once per machine)"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -n 20 "$work/debootstrap.log" >&2
    return 1
  }
  rm -rf "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"*
  tar -C "$root" -c . | podman import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' - "$ref" >/dev/null
  echo "build-test-images: built $ref"
}

for image in "${images[@]}"; do
  case "$image" in
    busybox) build_busybox ;;
    debian) build_debian ;;
    *) echo "build-test-images: unknown image $image (busybox, debian)" >&2; exit 2 ;;
  esac
done
