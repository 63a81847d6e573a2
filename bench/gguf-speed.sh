#!/usr/bin/env bash
# The speed of GGUF files in place against `wisp convert` of each (quant types
# kept), on WebGPU, alternated REPS times: issue 33's "within 5 %" check alone,
# for files bench/realfile-h200.sh already made on the warm machine.
#   bash bench/gguf-speed.sh OUT FILE.gguf...      (on the device machine)
# Receipts: OUT/NAME/bench-{gguf,art}-REP.json; one line a run on stdout.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${1:?usage: bench/gguf-speed.sh OUT FILE.gguf...}
shift
REPS=${REPS:-2}
WISP_DEVICE_LIB=1 source tools/device.sh
setup_env > /dev/null
W=$PWD/.dev/wisp
for g in "$@"; do
  name=$(basename "$(dirname "$(dirname "$g")")")-$(basename "$(dirname "$g")")
  d=$OUT/$name art=/tmp/gguf-speed-$name
  mkdir -p "$d"
  "$W" plan -m "$g" > "$d/plan.txt" 2>&1
  "$W" convert "$g" -o "$art" --quiet --force > "$d/convert.log" 2>&1 || { tail -2 "$d/convert.log"; continue; }
  for rep in $(seq "$REPS"); do
    for form in gguf art; do
      src=$g; [ $form = art ] && src=$art
      "$W" bench -m "$src" --backend webgpu -p 512 -n 128 -o "$d/bench-$form-$rep.json" --force \
        > "$d/bench-$form-$rep.txt" 2> /dev/null
      echo "$name $form $rep: $(head -1 "$d/bench-$form-$rep.txt")"
    done
  done
  rm -rf "$art"
done
