#!/bin/bash
# Seed-shape exact batch-1 decode of several wisp binaries, alternated
# (device machine; carry .dev .gl .cache/webgpu, .dev/bins.txz holding
# wisp_<rev> binaries): which commit moved it.
#   REPS=3 bash bench/bisect-decode-h200.sh OUT
# An older binary without the `exact` profile name gets profiles/default.
set -u
OUT=${1:?OUT}
[ -d .dev/lib ] || { mkdir -p .dev/lib && tar xJf .dev/lib.txz -C .dev; }
[ -f .dev/bins.txz ] && tar xJf .dev/bins.txz -C .dev
for f in .gl/*.deb; do dpkg -x "$f" / 2>/dev/null; done; ldconfig 2>/dev/null
export LD_LIBRARY_PATH=$PWD/.dev/lib VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export WISP_WEBGPU_LIB=$PWD/.cache/webgpu/libwebgpu_wrapper.so
[ -d models/seed ] || .dev/wisp gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json -o models/seed --seed 1 > /dev/null 2>&1
BINS=${BINS:-$(cd .dev && ls wisp_* | sort)}
for rep in $(seq "${REPS:-3}"); do
  for b in $BINS; do
    prof=exact
    grep -q "exact: the reference path" <(".dev/$b" bench --help 2>&1) || prof=profiles/default
    r=$OUT/$b-$rep.json
    line=$(".dev/$b" bench -m models/seed --backend webgpu --prompt 128 --decode 256 --batch 1 --profile $prof -o "$r" 2>/dev/null | grep "decode:" | head -1)
    printf '%-14s %s %s\n' "$b" "$rep" "$line" | tee -a "$OUT/bisect.txt"
  done
done
