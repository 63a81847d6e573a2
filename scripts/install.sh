#!/usr/bin/env bash
# Installs a built wisp under a prefix (`make install PREFIX=DIR` runs this):
#   PREFIX/bin/wisp                      the command-line tool
#   PREFIX/lib/libwisp.so.VERSION        the shared library (include/wisp.h), with
#   PREFIX/lib/libwisp.so.0, libwisp.so  the links a program runs with and links to
#   PREFIX/lib/libwisp.a                 the static library
#   PREFIX/include/wisp.h
#   PREFIX/lib/pkgconfig/wisp.pc         pkg-config --cflags --libs wisp
#   PREFIX/share/wisp/models/default     the default model, when the tree has it
#   PREFIX/share/wisp/web                the browser page (wisp serve's /local), when make wasm built it
#   PREFIX/lib/wisp/libwebgpu_wrapper.so the Dawn library, when the tree has it
#                                        (.cache/webgpu, scripts/webgpu-deps.sh),
#                                        with its licence (Apache-2.0)
# The registry, profiles and WGSL are inside the library: nothing else is needed.
#   scripts/install.sh PREFIX BUILD
set -euo pipefail
prefix=$1 build=$2
cd "$(dirname "$0")/.."
case "$prefix" in /*) ;; *) prefix="$(pwd)/$prefix";; esac
for f in "$build/wisp" "$build/libwisp.a" "$build/libwisp.so"; do
  [ -f "$f" ] || { echo "install: $f is not built (run make)" >&2; exit 1; }
done
# The version string alone: the quoted value of WISP_VERSION, never what follows it on the line.
version=$(sed -n 's/^#define WISP_VERSION "\([0-9][0-9.]*\)".*/\1/p' include/wisp.h)
[ -n "$version" ] || { echo "install: no WISP_VERSION \"MAJOR.MINOR.PATCH\" in include/wisp.h" >&2; exit 1; }
major=${version%%.*}
install -d "$prefix/bin" "$prefix/lib/pkgconfig" "$prefix/include" "$prefix/share/wisp"
install -m 755 "$build/wisp" "$prefix/bin/wisp"
install -m 755 "$build/libwisp.so" "$prefix/lib/libwisp.so.$version"
ln -sfn "libwisp.so.$version" "$prefix/lib/libwisp.so.$major"
ln -sfn "libwisp.so.$major" "$prefix/lib/libwisp.so"
install -m 644 "$build/libwisp.a" "$prefix/lib/libwisp.a"
install -m 644 include/wisp.h "$prefix/include/wisp.h"
cat > "$prefix/lib/pkgconfig/wisp.pc.tmp" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: wisp
Description: C11 runtime for local LLM inference (CPU and WebGPU)
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -lwisp
Libs.private: ${WISP_LIBS_PRIVATE:--lcjson -lpcre2-8 -lutf8proc -lcrypto -lm -ldl -pthread}
PC
mv "$prefix/lib/pkgconfig/wisp.pc.tmp" "$prefix/lib/pkgconfig/wisp.pc"
if [ -f models/default/manifest.json ]; then
  rm -rf "$prefix/share/wisp/models/default.tmp"
  install -d "$prefix/share/wisp/models/default.tmp"
  install -m 644 models/default/* "$prefix/share/wisp/models/default.tmp/"
  rm -rf "$prefix/share/wisp/models/default"
  mv "$prefix/share/wisp/models/default.tmp" "$prefix/share/wisp/models/default"
else
  echo "install: no models/default in this tree; the default model is not installed" >&2
fi
# The browser page that `wisp serve` serves at /local (docs/browser.md), when
# `make wasm` has built it.
if [ -f build/wasm/wisp.wasm ] && [ -f build/wasm/index.html ]; then
  rm -rf "$prefix/share/wisp/web.tmp"
  install -d "$prefix/share/wisp/web.tmp"
  install -m 644 build/wasm/index.html build/wasm/wisp.js build/wasm/wasi.js build/wasm/wgpu.js build/wasm/wisp.wasm \
    "$prefix/share/wisp/web.tmp/"
  rm -rf "$prefix/share/wisp/web"
  mv "$prefix/share/wisp/web.tmp" "$prefix/share/wisp/web"
else
  echo "install: no build/wasm (make wasm); wisp serve's /local page is not installed" >&2
fi
dawn=.cache/webgpu/libwebgpu_wrapper.so
if [ -f "$dawn" ]; then
  install -d "$prefix/lib/wisp"
  install -m 755 "$dawn" "$prefix/lib/wisp/libwebgpu_wrapper.so"
  [ -f .cache/webgpu/LICENSE ] && install -m 644 .cache/webgpu/LICENSE "$prefix/lib/wisp/LICENSE.dawn"
  [ -f .cache/webgpu/VERSION ] && install -m 644 .cache/webgpu/VERSION "$prefix/lib/wisp/VERSION"
  {
    echo "libwebgpu_wrapper.so is a build of Dawn (https://dawn.googlesource.com/dawn), taken unchanged"
    echo "from the npm package $(cat .cache/webgpu/VERSION 2>/dev/null || echo bun-webgpu-linux-x64),"
    echo "licensed Apache-2.0 (https://www.apache.org/licenses/LICENSE-2.0; the package's own"
    echo "LICENSE file, when it was fetched, is LICENSE.dawn beside this note)."
    echo "wisp loads it at run time with dlopen; see docs/webgpu.md."
  } > "$prefix/lib/wisp/NOTICE.dawn"
else
  echo "install: no $dawn (scripts/webgpu-deps.sh); the installed wisp runs the CPU backend only" >&2
fi
echo "installed wisp in $prefix"
