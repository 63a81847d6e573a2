#!/bin/bash
# Seed-shape exact batch-1 decode of several wisp binaries, alternated
# (device machine; carry .dev .gl .cache/webgpu, .dev/bins.txz holding
# wisp_<rev> binaries): which commit moved it.
#   REPS=3 bash bench/bisect-decode-h200.sh OUT
# An older binary without the `exact` profile name gets profiles/default.
set -u
OUT=${1:?OUT}
[ -f .dev/bins.txz ] && tar xJf .dev/bins.txz -C .dev
WISP_DEVICE_LIB=1 source tools/device.sh # setup_env, model_dir
setup_env > /dev/null
a=$(model_dir seed)
BINS=${BINS:-$(cd .dev && ls wisp_* | sort)}
for rep in $(seq "${REPS:-3}"); do
  for b in $BINS; do
    prof=exact
    grep -q "exact: the reference path" <(".dev/$b" bench --help 2>&1) || prof=profiles/default
    r=$OUT/$b-$rep.json
    line=$(".dev/$b" bench -m "$a" --backend webgpu --prompt 128 --decode 256 --batch 1 --profile $prof -o "$r" 2>/dev/null | grep "decode:" | head -1)
    printf '%-14s %s %s\n' "$b" "$rep" "$line" | tee -a "$OUT/bisect.txt"
  done
done
