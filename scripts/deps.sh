#!/usr/bin/env bash
# Installs the Debian packages wisp builds against, only when one is missing,
# so a second `make` on a ready machine costs nothing.
set -euo pipefail
need=()
for pkg in build-essential libcjson-dev libssl-dev libpcre2-dev libutf8proc-dev libmicrohttpd-dev python3 nodejs chromium; do
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
# The browser build (make wasm, docs/browser.md): clang-19 and wasi-libc, and
# cJSON, utf8proc, PCRE2 built for wasm32 from their Debian sources.
"$(dirname "$0")/wasm-deps.sh"
# wisp serve's client and browser tests (tests/server/): node and npm (Debian's
# nodejs and npm when there is no node yet) and the npm packages pinned by
# tests/server/package-lock.json (the OpenAI client, playwright-core), again
# only when the lock file changed since the last install.
cd "$(dirname "$0")/.."
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "deps: installing nodejs and npm" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm
fi
if [ ! -f tests/server/node_modules/.package-lock.json ] ||
   [ tests/server/package-lock.json -nt tests/server/node_modules/.package-lock.json ]; then
  echo "deps: npm ci in tests/server" >&2
  (cd tests/server && npm ci --no-audit --no-fund --loglevel=error)
fi
# The page test of the browser build (tests/web/: playwright-core, pinned by
# tests/web/package-lock.json), the same way.
if [ ! -f tests/web/node_modules/.package-lock.json ] ||
   [ tests/web/package-lock.json -nt tests/web/node_modules/.package-lock.json ]; then
  echo "deps: npm ci in tests/web" >&2
  (cd tests/web && npm ci --no-audit --no-fund --loglevel=error)
fi
