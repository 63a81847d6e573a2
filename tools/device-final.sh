#!/usr/bin/env bash
# On the GPU machine: the runs behind a session's closing note, in two
# parts so that each fits one device call (the machine stays warm between
# them, and /tmp/wq keeps the converted models):
#   tools/device-final.sh parity OUT   Qwen 3.5 2B (f32, q4k) and 0.8B (q4k)
#                                      against transformers, CPU and WebGPU
#   tools/device-final.sh speed OUT    tools/device-speed.sh receipts
# OUT gets logs, receipts and one tarball of both (the device returns at most
# 8 files).
set -uo pipefail
PART=$1
OUT=${2:-bench/results}
mkdir -p "$OUT"
. tools/device-env.sh
case $PART in
  parity)
    CONFIGS="qwen35-2b" QUANTS="f32 q4k" BACKENDS="cpu webgpu" REF_DEVICE=cuda THREADS=16 \
      timeout 420 bash tests/parity/run_device.sh .dev/wisp /tmp/unused /tmp/wq > "$OUT/parity-qwen35-2b.log" 2>&1
    CONFIGS="qwen35-0.8b" QUANTS="q4k" BACKENDS="webgpu" REF_DEVICE=cuda THREADS=16 \
      timeout 150 bash tests/parity/run_device.sh .dev/wisp /tmp/unused /tmp/wq > "$OUT/parity-qwen35-0.8b.log" 2>&1
    grep -A20 "== summary" "$OUT"/parity-*.log
    ;;
  speed)
    timeout 560 bash tools/device-speed.sh "$OUT" 2>&1 | tee "$OUT/speed.log"
    ;;
esac
tar czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")"
