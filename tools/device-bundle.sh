#!/usr/bin/env bash
# Packs build/wisp and the shared libraries the GPU machine lacks into .dev/
# (ignored by git) so the device tool can carry them: `carry: [".dev"]`, then
# `LD_LIBRARY_PATH=$PWD/.dev/lib .dev/wisp ...` there.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s -j"$(nproc)" build/wisp
rm -rf .dev && mkdir -p .dev/lib
make -s -j"$(nproc)" build/wisp_tests build/grid_probe build/phase_probe build/stream_probe
cp build/wisp build/wisp_tests build/grid_probe build/phase_probe build/stream_probe .dev/
for lib in libcjson.so.1 libcrypto.so.3 libutf8proc.so.2 libpcre2-8.so.0; do
  cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')" .dev/lib/
done
# Which tree the binaries are of: device logs print it (tools/device-env.sh).
echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src include tests || echo +dirty) $(date -u +%FT%TZ)" > .dev/COMMIT
ls -la .dev .dev/lib
