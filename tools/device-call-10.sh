#!/usr/bin/env bash
# Tenth session's device call (tools/device-bundle.sh first): the persistent
# Qwen 3.5 decode (persist_deltanet_attn.wgsl) on the H200 against the op-by-op path.
# For each QWEN_CONFIGS shape (random weights from the real configuration,
# Q4_K, as tools/device-qwen-profile.sh builds them): 64 greedy tokens on
# the CPU and on WebGPU (persistent, the default) compared; then `wisp bench`
# (prompt 128, decode 256) at AB_BATCHES tokens a submit (1 64) for each of
# AB_VARIANTS ("default" WISP_WEBGPU_PERSIST=0), alternated REPS times; VARIANTS
# (comma-separated VAR=value) once each at VBATCH tokens a submit (1).
# Receipts of the default under $OUT/receipts (RECEIPTS=0: none); CHECK=0
# skips the token comparison.
set -uo pipefail
OUT=${1:-/tmp/call10}
mkdir -p "$OUT/receipts"
. tools/device-env.sh
W=.dev/wisp
say() { echo "== $* ($(date +%T))"; }
# SEED=1: the seed-shaped LFM2 persistent decode first (batch 1 and 64), its path's check.
if [ "${SEED:-0}" = 1 ]; then
  [ -d models/seed ] || $W gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json -o models/seed --force --seed 1 >/dev/null 2>&1
  for bt in 1 64 1 64; do
    printf 'seed       batch %-3s ' "$bt"
    $W bench -m models/seed --backend webgpu --prompt 128 --decode 256 --batch $bt -o /tmp/s.json --force 2>/dev/null | head -1
  done
fi
for cfg in ${QWEN_CONFIGS:-qwen35-0.8b qwen35-2b}; do
  A=/tmp/wq/$cfg/art_q4k
  [ -d "$A" ] && continue
  say "build $cfg"
  (python3 tests/parity/hf_reference.py build --config "$cfg" --seed 1234 --out /tmp/wq/$cfg/hf >/dev/null 2>&1 &&
    $W convert /tmp/wq/$cfg/hf -o "$A" --force --quant q4k --quiet) &
done
wait
say "built"
for cfg in ${QWEN_CONFIGS:-qwen35-0.8b qwen35-2b}; do
  A=/tmp/wq/$cfg/art_q4k
  [ -d "$A" ] || { echo "$cfg: no artifact"; continue; }
  say "$cfg"
  if [ "${CHECK:-1}" = 1 ]; then
  WISP_WEBGPU_PERSIST_DEBUG=1 $W bench -m "$A" --backend webgpu --prompt 16 --decode 8 -o /tmp/dbg.json --force 2>&1 |
    grep -E "persistent|probe" | head -4
  a=$($W run -m "$A" -p Hello -n 64 --temp 0 --ids --ignore-eos --backend cpu -t 16 2>&1 >/dev/null | grep "generated ids")
  # WISP_WEBGPU_PERSIST=1: the persistent decode at wisp run's batches of 1 too
  b=$(WISP_WEBGPU_PERSIST=1 $W run -m "$A" -p Hello -n 64 --temp 0 --ids --ignore-eos --backend webgpu 2>&1 >/dev/null | grep "generated ids")
  c=$($W run -m "$A" -p Hello -n 64 --temp 0 --ids --ignore-eos --backend webgpu 2>&1 >/dev/null | grep "generated ids")
  if [ -n "$a" ] && [ "$a" = "$c" ]; then echo "$cfg: 64 greedy tokens identical (cpu vs webgpu default)"; else echo "$cfg: default DIFFERS"; fi
  if [ -n "$a" ] && [ "$a" = "$b" ]; then echo "$cfg: 64 greedy tokens identical (cpu vs webgpu persistent)"; else
    echo "$cfg: DIFFER"; echo "$a" | cut -c1-300; echo "$b" | cut -c1-300; fi
  fi
  for rep in $(seq "${REPS:-2}"); do
    for v in ${AB_VARIANTS:-default WISP_WEBGPU_PERSIST=0}; do
      for bt in ${AB_BATCHES:-1 64}; do
        envs=""; [ "$v" = default ] || envs=$(echo "$v" | tr ',' ' ')
        printf '%-10s %-22s batch %-3s ' "$cfg" "$v" "$bt"
        env $envs $W bench -m "$A" --backend webgpu --prompt 128 --decode 256 --batch "$bt" -o /tmp/x.json --force 2>/dev/null | head -1
      done
    done
  done
  for v in ${VARIANTS:-}; do
    printf '%-10s %-40s batch %-3s ' "$cfg" "$v" "${VBATCH:-1}"
    env $(echo "$v" | tr ',' ' ') $W bench -m "$A" --backend webgpu --prompt 128 --decode 256 --batch "${VBATCH:-1}" -o /tmp/x.json --force 2>/dev/null | head -1
  done
  [ "${RECEIPTS:-1}" = 1 ] || continue
  $W bench -m "$A" --backend webgpu --prompt 128 --decode 256 --batch 1 -o "$OUT/receipts/h200-$cfg-q4k-webgpu-decode-batch1-persistent.json" --force 2>&1 | tail -1
  $W bench -m "$A" --backend webgpu --prompt 128 --decode 256 --profile throughput -o "$OUT/receipts/h200-$cfg-q4k-webgpu-decode-throughput-persistent.json" --force 2>&1 | tail -1
done
say "done"
