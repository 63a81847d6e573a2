#!/usr/bin/env bash
# The browser build against native on this machine (docs/browser.md, "Speed"):
# `wisp bench` with the same prompt and decode lengths on
#   native webgpu (Dawn on Mesa's lavapipe), native cpu,
#   the page's webgpu (Chromium's SwiftShader), the page's cpu (wasm SIMD, one thread),
# (the reference profile, which the page runs), ROUNDS rounds interleaved, each receipt kept under OUT (default
# bench/results/browser-HOST-DATE/), and a table of the medians printed.
#   tools/bench-browser.sh [OUT]
# Env: WISP (build/wisp), MODEL (models/default), PROMPT (16), DECODE (64), ROUNDS (3).
# Needs build/wasm (make wasm), chromium and tests/web/node_modules (scripts/deps.sh).
#
# MODEL=qwen2b: instead, a Qwen 3.5 2B-shaped synthetic Q4_K model (made
# under models/qwen2b on first use: tools/make-qwen35-shape.py, then
# `wisp convert --quant q4k`; about 1.2 GB, 7.5 GB of f32 on the way) run
# once in the page on WebGPU with its weights streamed from the URL
# (tests/web/run-page.mjs): DECODE (default 4) greedy tokens after PROMPT_TEXT,
# the text compared with the native cpu backend's; OUT/page-webgpu.json
# holds the wasm memory peak, the GPU buffer peak, the weights' size and the times.
set -euo pipefail
cd "$(dirname "$0")/.."
W=${WISP:-build/wisp}
MODEL=${MODEL:-models/default}
if [ "$MODEL" = qwen2b ]; then
  Q=${QWEN2B:-models/qwen2b}
  N=${DECODE:-4}
  P=${PROMPT_TEXT:-In the beginning}
  OUT=${1:-bench/results/browser-qwen2b-$(hostname -s)-$(date -u +%Y%m%d-%H%M)}
  [ -x "$W" ] && [ -f build/wasm/wisp.wasm ] || { echo "bench-browser: needs $W and build/wasm (make build/wisp wasm)" >&2; exit 1; }
  if [ ! -f "$Q/weights.bin" ]; then
    python3 tools/make-qwen35-shape.py "$Q-hf" 2b
    "$W" convert "$Q-hf" -o "$Q" --quant q4k --quiet
    rm -rf "$Q-hf"
  fi
  mkdir -p "$OUT"
  uptime >"$OUT/load-before.txt"
  /usr/bin/time -v "$W" run -m "$Q" --backend cpu --profile exact -p "$P" -n "$N" --temp 0 \
    >"$OUT/native-cpu.txt" 2>"$OUT/native-cpu-stderr.txt"
  node tests/web/run-page.mjs build/wasm "$Q" "$OUT/page-webgpu.json" "$P" "$N" "$OUT/native-cpu.txt"
  uptime >"$OUT/load-after.txt"
  exit 0
fi
PROMPT=${PROMPT:-16}
DECODE=${DECODE:-64}
ROUNDS=${ROUNDS:-3}
OUT=${1:-bench/results/browser-$(hostname -s)-$(date -u +%Y%m%d-%H%M)}
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/share/vulkan/icd.d/lvp_icd.json}
[ -x "$W" ] && [ -f build/wasm/wisp.wasm ] || { echo "bench-browser: needs $W and build/wasm (make build/wisp wasm)" >&2; exit 1; }
mkdir -p "$OUT"
uptime >"$OUT/load-before.txt"
for r in $(seq 1 "$ROUNDS"); do
  for b in webgpu cpu; do
    "$W" bench -m "$MODEL" --backend "$b" --profile exact -p "$PROMPT" -n "$DECODE" -o "$OUT/native-$b-$r.json" --force >/dev/null 2>&1
  done
  node tests/web/bench-page.mjs build/wasm "$MODEL" "$OUT/round-$r" "$PROMPT" "$DECODE" webgpu cpu
  for b in webgpu cpu; do mv "$OUT/round-$r/page-$b.json" "$OUT/page-$b-$r.json"; done
  rmdir "$OUT/round-$r"
done
uptime >"$OUT/load-after.txt"
node -e '
const fs = require("fs"), dir = process.argv[1];
const med = (v) => { v.sort((a, b) => a - b); return v[Math.floor(v.length / 2)]; };
console.log("| run | prefill tok/s | decode tok/s |\n|---|---|---|");
for (const k of ["native-webgpu", "native-cpu", "page-webgpu", "page-cpu"]) {
  const rs = fs.readdirSync(dir).filter((f) => f.startsWith(k + "-")).map((f) => JSON.parse(fs.readFileSync(dir + "/" + f)));
  console.log(`| ${k} | ${med(rs.map((r) => r.prefill.tok_per_s)).toFixed(1)} | ${med(rs.map((r) => r.decode.tok_per_s)).toFixed(1)} |`);
}' "$OUT"
echo "load: $(cat "$OUT/load-before.txt") / $(cat "$OUT/load-after.txt")"
