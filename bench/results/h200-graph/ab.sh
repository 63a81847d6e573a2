#!/usr/bin/env bash
# Speed A/B of two wisp builds on the same artifacts, in one call:
#   base = .dev/wisp_prev (the build before the change; registry, profiles and WGSL are built in)
#   new  = .dev/wisp  (run from the repository root)
# Artifacts: seed shape q4 (gen-synthetic), Qwen 3.5 0.8B and 2B q4k (hf_reference.py + convert).
# Workloads: decode 128+256 at batch 1 and with the throughput profile; prefill 1024.
# Each (artifact, workload) runs base, new, base, new; receipts of every run go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/ab}; mkdir -p "$OUT"
ROOT=$PWD
for f in .gl/*.deb; do dpkg -x "$f" / 2>/dev/null; done; ldconfig 2>/dev/null
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export WISP_WEBGPU_LIB=$ROOT/.cache/webgpu/libwebgpu_wrapper.so
say() { echo "== $* ($(date +%T))"; }
B() { (cd "$ROOT" && LD_LIBRARY_PATH=$ROOT/.dev/lib .dev/wisp_prev "$@"); }
N() { (cd "$ROOT" && LD_LIBRARY_PATH=$ROOT/.dev/lib .dev/wisp "$@"); }
A=/tmp/art; mkdir -p $A
[ -d $A/seed ] || B gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json -o $A/seed --seed 1 >/dev/null 2>&1
for cfg in ${QWEN:-qwen35-0.8b qwen35-2b}; do
  [ -d $A/$cfg ] && continue
  (python3 tests/parity/hf_reference.py build --config "$cfg" --seed 1234 --out /tmp/hf/$cfg >/dev/null 2>&1 &&
   B convert /tmp/hf/$cfg -o $A/$cfg --quant q4k --quiet) &
done
wait; say built; ls $A
for m in ${MODELS:-seed qwen35-0.8b qwen35-2b}; do
  [ -d $A/$m ] || { echo "$m: no artifact"; continue; }
  for w in batch1 throughput prefill1024; do
    case $w in
      batch1) args="--prompt 128 --decode 256 --batch 1";;
      throughput) args="--prompt 128 --decode 256 --profile throughput";;
      prefill1024) args="--prompt 1024 --decode 16";;
    esac
    for rep in 1 2; do
      for who in base new; do
        f=$OUT/$m-$w-$who-$rep.json
        if [ $who = base ]; then line=$(B bench -m $A/$m --backend webgpu $args -o $f 2>/dev/null | head -1)
        else line=$(N bench -m $A/$m --backend webgpu $args -o $f 2>/dev/null | head -1); fi
        printf '%-12s %-12s %-5s %s %s\n' $m $w $who $rep "$line" | tee -a $OUT/ab.txt
      done
    done
  done
done
say done
