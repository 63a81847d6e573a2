#!/usr/bin/env bash
# Installs the Debian packages wisp builds against, only when one is missing,
# so a second `make` on a ready machine costs nothing.
set -euo pipefail
need=()
for pkg in build-essential libcjson-dev libssl-dev libpcre2-dev libutf8proc-dev libmicrohttpd-dev python3 chromium; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "deps: installing ${need[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
# WebGPU backend: pinned Dawn library and (on CPU machines) Mesa lavapipe.
"$(dirname "$0")/webgpu-deps.sh"
