#!/bin/bash
# Gemma 3 1B-shaped parity, taken apart (device machine; carry .dev .gl
# .cache/webgpu): transformers against the oracle's own torch forward layer
# by layer, and wisp (cpu, webgpu) against both, on the real configuration
# with random weights; then the small shape's local round trip.
#   bash bench/gemma-diag-h200.sh OUT
set -u
OUT=${1:?OUT}
WISP_DEVICE_LIB=1 source tools/device.sh # setup_env, W
setup_env > /dev/null
O=tools/gemma-qwen2-oracle.py C=tests/parity/compare.py d=/tmp/gdiag
rm -rf $d; mkdir -p $d
{
  python3 $O build --arch gemma3 --shape real --out $d/hf
  python3 $O layers --hf $d/hf --prompts $d/hf/prompts.json --prompt 1
  python3 $O reference --hf $d/hf --prompts $d/hf/prompts.json --out $d/ref_hf.json --greedy 8 --device cuda
  python3 $O reference --hf $d/hf --prompts $d/hf/prompts.json --out $d/ref_torch.json --greedy 8 --device cuda --torch-only
  echo "-- transformers vs torch forward"; python3 $C $d/ref_hf.json $d/ref_torch.json
  $W convert $d/hf -o $d/art --quant f32 --quiet
  for be in cpu webgpu; do
    $W logits -m $d/art --prompts $d/hf/prompts.json --greedy 8 --backend $be --profile exact -t 16 -o $d/wisp_$be.json --force
    echo "-- transformers vs wisp $be"; python3 $C $d/ref_hf.json $d/wisp_$be.json
    echo "-- torch forward vs wisp $be"; python3 $C $d/ref_torch.json $d/wisp_$be.json
  done
  cp $d/hf/config.json $OUT/gemma-config.json
  echo "-- small shape, torch forward round trip"
  python3 $O check --arch gemma3 --wisp $W --work /tmp/gsmall --backends "cpu webgpu"
} > $OUT/gemma-diag.txt 2>&1
grep -v "Loading weights" $OUT/gemma-diag.txt | tail -80
