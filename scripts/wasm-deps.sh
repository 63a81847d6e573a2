#!/usr/bin/env bash
# Sets up the WebAssembly build (`make wasm`, docs/browser.md), all from
# Debian's archive:
#   - the toolchain: clang-19, lld-19, llvm-19 (llvm-ar) and libclang-rt-19-dev-wasm32
#     (bookworm) and wasi-libc from bookworm-backports (bookworm's own is too
#     old for clang 19), installed only when missing;
#   - cJSON, utf8proc and PCRE2 for wasm32-wasi, built from their Debian
#     source packages (the versions the native build links), and libmd's
#     SHA-256 (the browser's streamed digest check: web/wasm/), into
#     $WASM_DEPS (default build/wasm/deps): lib/*.a and include/.
# The source packages come through apt with a private source list (deb-src
# lines for the mirror the machine already uses), so the system's apt
# configuration is not changed; apt checks them against the signed index.
# A second run on a ready machine does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${WASM_DEPS:-build/wasm/deps}
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo

# ---- toolchain ------------------------------------------------------------
need=()
for pkg in clang-19 lld-19 llvm-19 libclang-rt-19-dev-wasm32 dpkg-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "wasm-deps: installing ${need[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
# wasi-libc: the bookworm-backports build (2024), which clang 19 links against.
wasi_ver=$(dpkg-query -W -f='${Version}' wasi-libc 2>/dev/null || true)
if [ -z "$wasi_ver" ] || dpkg --compare-versions "$wasi_ver" lt 0.0~git20240708; then
  if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    mirror=$(grep -rhoE 'https?://[^ ]+/debian/?' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null | head -n1 || true)
    mirror=${mirror:-http://deb.debian.org/debian}
    echo "wasm-deps: adding bookworm-backports from $mirror" >&2
    printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$mirror" | $SUDO tee /etc/apt/sources.list.d/wisp-bookworm-backports.sources >/dev/null
  fi
  echo "wasm-deps: installing wasi-libc from bookworm-backports" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq -t bookworm-backports wasi-libc
fi

# ---- libraries ------------------------------------------------------------
STAMP="$OUT/.built-v3"
[ -f "$STAMP" ] && exit 0
rm -rf "$OUT" && mkdir -p "$OUT/lib" "$OUT/include" "$OUT/src/lists/partial"
SRC=$(cd "$OUT/src" && pwd)
mirror=$(grep -rhoE 'https?://[^ ]+/debian/?' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null | grep -v security | head -n1 || true)
mirror=${mirror:-http://deb.debian.org/debian}
printf 'deb-src %s bookworm main\ndeb-src %s bookworm-updates main\n' "$mirror" "$mirror" >"$SRC/sources.list"
APT=(-o "Dir::Etc::SourceList=$SRC/sources.list" -o Dir::Etc::SourceParts=/nonexistent
     -o "Dir::State::Lists=$SRC/lists" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
echo "wasm-deps: fetching the Debian sources of cjson, utf8proc, pcre2, libmd" >&2
apt-get "${APT[@]}" update -qq
(cd "$SRC" && apt-get "${APT[@]}" source -qq --download-only cjson utf8proc pcre2 libmd >/dev/null)
for dsc in "$SRC"/*.dsc; do (cd "$SRC" && dpkg-source --no-check -x "$(basename "$dsc")" >/dev/null); done

CC="clang-19 --target=wasm32-wasi --sysroot=/usr -O2"
# A fresh clone's `make test` waits for this before its builds start: the
# files of all four libraries compile as many at a time as there are cores
# (the slowest, pcre2_match.c and pcre2_compile.c, first), then each
# library is archived. A failed compile ends the script (wait's status).
par=$(nproc 2>/dev/null || echo 2)
compile() { # library cflags source: in the background, at most $par at once
  while [ "$(jobs -rp | wc -l)" -ge "$par" ]; do wait -n; done
  $CC $2 -c "$3" -o "$SRC/obj-$1-$(basename "${3%.c}").o" &
}

echo "wasm-deps: building cJSON, utf8proc, PCRE2 for wasm32-wasi" >&2
u=$(echo "$SRC"/utf8proc-*/)
compile utf8proc "-w -DUTF8PROC_STATIC" "$u/utf8proc.c"
c=$(echo "$SRC"/cjson-*/)
compile cjson "-w" "$c/cJSON.c"

p=$(echo "$SRC"/pcre2-*/src)
cp "$p/config.h.generic" "$p/config.h"
cp "$p/pcre2.h.generic" "$p/pcre2.h"
cp "$p/pcre2_chartables.c.dist" "$p/pcre2_chartables.c"
# (pcre2_ucptables.c is included by pcre2_tables.c)
for f in match compile auto_possess chartables config context convert dfa_match error extuni find_bracket \
         maketables match_data newline ord2utf pattern_info script_run serialize string_utils \
         study substitute substring tables ucd valid_utf xclass jit_compile; do
  compile pcre2-8 "-w -DHAVE_CONFIG_H -DPCRE2_CODE_UNIT_WIDTH=8 -DPCRE2_STATIC -DSUPPORT_UNICODE -I$p" "$p/pcre2_$f.c"
done

# libmd: only sha2.c, which needs nothing of its configure (an empty config.h)
m=$(echo "$SRC"/libmd-*/)
mkdir -p "$SRC/libmd-config" && : >"$SRC/libmd-config/config.h"
compile md "-w -I$SRC/libmd-config -I$m/include" "$m/src/sha2.c"

for pid in $(jobs -p); do wait "$pid"; done
for lib in utf8proc cjson pcre2-8 md; do llvm-ar-19 rcs "$OUT/lib/lib$lib.a" "$SRC"/obj-"$lib"-*.o; done
mkdir -p "$OUT/include/cjson" && cp "$c/cJSON.h" "$OUT/include/cjson/"
cp "$u/utf8proc.h" "$OUT/include/"
cp "$p/pcre2.h" "$OUT/include/"
cp "$m/include/sha2.h" "$OUT/include/"
touch "$STAMP"
echo "wasm-deps: libraries in $OUT" >&2
