#!/usr/bin/env bash
# On the GPU machine (see tools/device-bundle.sh): A/B of whole decode runs
# (`wisp bench`, batch 1, prompt 128 + 256 decode) under several settings,
# one line each, so one device call compares them end to end (the repeat
# profile of tools/device-probe.sh gives per-kernel costs, this the tok/s).
#   AB="label:ENV=V,ENV=V label2:X=1"   settings (X=1: the defaults)
#   MODELS="seed qwen08 lfm350"         which models (built when missing)
set -uo pipefail
W=.dev/wisp
mkdir -p models
model_dir() { # name -> artifact directory (built on first use)
  case $1 in
    seed) [ -d models/seed ] || $W gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json -o models/seed --force --seed 1 >/dev/null 2>&1
          echo models/seed ;;
    qwen08|qwen2b|lfm350)
      local cfg quant
      case $1 in qwen08) cfg=qwen35-0.8b quant=q4k ;; qwen2b) cfg=qwen35-2b quant=q4k ;; lfm350) cfg=lfm2-350m quant=q4 ;; esac
      local a=/tmp/wq/$cfg/art_$quant
      if [ ! -d "$a" ]; then
        python3 tests/parity/hf_reference.py build --config "$cfg" --seed 1234 --out /tmp/wq/$cfg/hf >/dev/null 2>&1 &&
          $W convert /tmp/wq/$cfg/hf -o "$a" --force --quant $quant --quiet >/dev/null 2>&1
      fi
      echo "$a" ;;
  esac
}
for m in ${MODELS:-seed qwen08}; do
  dir=$(model_dir "$m")
  [ -d "$dir" ] || { echo "$m: no artifact"; continue; }
  for s in ${AB:-plan:X=1}; do
    printf '%-8s %-28s ' "$m" "${s%%:*}"
    env $(echo "${s#*:}" | tr "," " ") $W bench -m "$dir" --backend webgpu --prompt 128 --decode 256 --batch 1 ${BENCH_ARGS:-} -o /tmp/ab.json --force 2>/dev/null |
      grep -o "decode: .*" | head -1
  done
done
