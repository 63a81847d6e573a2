#!/bin/bash
# ab.sh OUT FILE ROUNDS BIN... : whole-model runs of each binary in turn, ROUNDS times
# (A0 = main at c238b48, B2 = branch q40 at ae7f344, copied to /tmp/q40/wisp-NAME).
out=$1; f=$2; rounds=$3; shift 3
for r in $(seq 1 $rounds); do
  for b in "$@"; do
    line=$(/tmp/q40/wisp-$b bench -m /tmp/g1/$f.gguf --backend cpu -t 2 -p 128 -n 64 -o /tmp/q40/r-$b.json --force 2>&1 | grep "^prefill:")
    echo "$f $b $r $line" | tee -a $out
  done
done
