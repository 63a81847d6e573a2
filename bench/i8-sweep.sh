#!/usr/bin/env bash
# The integer prefill product (matmul_i8.wgsl) over tile geometries, wisp
# alone (no peer: nothing here is a ratio to llama.cpp). Each binary of
# BINS (tools/prod_probe builds, from .dev) times each geometry of GEOMS on
# the Qwen 3.5 2B and 0.8B product shapes (SHAPES) at TOKENS tokens, TYPES
# weights, with GPU timestamps (REPS repetitions).
# Here: SLIM=1 tools/device.sh bundle; make build/prod_probe; cp it to .dev
# (other builds as .dev/prod_probe_NAME). There: `bash bench/i8-sweep.sh "$OUT"`,
# carry [".dev", ".gl", ".cache/webgpu"]. Back: OUT/i8-sweep.jsonl (a line a
# binary x geometry) and OUT/i8-sweep.txt (ms a shape, the fraction of DP4A's
# peak, the sum over the shapes).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-/tmp/i8-sweep}}
mkdir -p "$OUT"
WISP_DEVICE_LIB=1 source tools/device.sh
setup_env
BINS=${BINS:-prod_probe}
TYPES=${TYPES:-q4k}
TOKENS=${TOKENS:-1024}
REPS=${REPS:-5}
SHAPES=${SHAPES:-12288x2048 2048x6144 6144x2048 2048x2048 7168x1024 1024x3584 6144x1024}
GEOMS=${GEOMS:-64x32x4x4x2 64x32x4x4x4 64x64x4x4x2 128x32x4x4x2 64x64x4x8x2 64x64x8x4x2 128x64x8x8x2}
args=()
for sh in $SHAPES; do args+=(--shape "$sh"); done
for tk in $TOKENS; do args+=(--tokens "$tk"); done
: > "$OUT/i8-sweep.jsonl"
for b in $BINS; do
  [ -x ".dev/$b" ] || { echo "no .dev/$b"; continue; }
  for g in $GEOMS; do
    r=$(".dev/$b" --int8-only --types "$TYPES" --reps "$REPS" "${args[@]}" --tuning "matmulI8=$g" 2> "$OUT/err-$b-$g.log" | tr -d '\n')
    [ -n "$r" ] || { echo "$b $g: $(tail -1 "$OUT/err-$b-$g.log")"; continue; }
    echo "{\"bin\": \"$b\", \"geometry\": \"$g\", \"probe\": $r}" >> "$OUT/i8-sweep.jsonl"
  done
done
python3 - "$OUT" << 'PYEOF' | tee "$OUT/i8-sweep.txt"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/i8-sweep.jsonl") if l.strip()]
for r in rows:
    res = r["probe"]["results"]
    tot = sum(x["ms"] for x in res)
    cells = " ".join("%s:%.3f/%.2f" % ("%dx%dx%d" % (x["rows"], x["cols"], x["tokens"]), x["ms"], x["fraction_of_peak"]) for x in res)
    print("%-14s %-14s total %.3f ms | %s" % (r["bin"], r["geometry"], tot, cells))
PYEOF
