#!/usr/bin/env bash
# Fixtures for the ggml block types, made by llama.cpp's own llama-quantize
# (tests/test_ggml_blocks.c reads them; committed under tests/data/quant/).
# llama-quantize quantizes on the CPU, so any machine makes the same bytes:
#   bash tools/make-quant-fixtures.sh            # here: writes tests/data/quant/
# (the CPU build of llama.cpp, step 1, takes 10-25 min on 2 cores; LC keeps it).
# On the GPU machine instead (16 cores build it in a few minutes), after
# `SLIM=1 tools/device.sh bundle` and a copy of ../shared/peers/llama.cpp's
# build.sh and source tarball into .peer/ (in .git/info/exclude): the command
# `W=.dev/wisp bash tools/make-quant-fixtures.sh "$OUT/quant"`, carry
# [".dev", ".gl", ".cache/webgpu", ".peer"]; then copy $OUT/quant into
# tests/data/quant/ (about 150 KB in all).
#
# What it does:
#  1. builds llama-quantize (.peer/build.sh cpu $LC; LC default /tmp/llama.cpp-cpu,
#     kept while the machine stays warm);
#  2. makes the small Qwen 2 checkpoint of tools/gemma-qwen2-oracle.py
#     (random weights, seed 33, written with torch alone: Debian's
#     python3-torch will do; hidden 128, FFN 256, so that blk.*.ffn_down rows
#     are 256 wide, one K super-block), `wisp convert --quant f32`,
#     `wisp export-gguf`: an F32 GGUF;
#  3. `llama-quantize --pure` of it to each type below, and the whole model
#     to Q4_K_M (llama.cpp's mix of Q4_K, Q6_K and Q5_0 / Q8_0 fallbacks for
#     rows that are not 256 wide) as qwen2-small-q4_k_m.gguf;
#  4. runs the Q4_K_M file in place on both backends (`wisp logits`, the
#     same greedy ids expected; a line each in the output);
#  5. from each file, the first ROWS (16) rows of blk.0.ffn_down.weight as
#     TYPE.bin (the bytes as llama.cpp wrote them), the same rows of the F32
#     file as f32.bin, and fixtures.txt: one line per fixture,
#     "FILE GGML_TYPE_NUMBER ROWS COLS" (f32.bin first).
# Environment: W (the wisp binary, default build/wisp), LC, PEER (the folder
# holding build.sh and the source tarball, default .peer), ROWS, PY (a
# python3 with torch; default the first of python3 and /usr/bin/python3 that
# has it).
set -euo pipefail
OUT=${1:-tests/data/quant}
W=${W:-build/wisp}
LC=${LC:-/tmp/llama.cpp-cpu}
PEER=${PEER:-.peer}
[ -f "$PEER/build.sh" ] || PEER=../shared/peers/llama.cpp
ROWS=${ROWS:-16}
TYPES=${TYPES:-"Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K BF16 F16"}

# the bundle's libraries and the machine's Vulkan driver (tools/device.sh setup_env)
if [ -d .dev/lib ]; then
  for f in .gl/*.deb; do dpkg -x "$f" / 2>/dev/null || true; done
  ldconfig 2>/dev/null || true
  export LD_LIBRARY_PATH=$PWD/.dev/lib VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  export WISP_WEBGPU_LIB=$PWD/.cache/webgpu/libwebgpu_wrapper.so
fi

if [ ! -x "$LC/build/bin/llama-quantize" ]; then
  [ -f "$PEER/build.sh" ] || { echo "no $PEER/build.sh: copy ../shared/peers/llama.cpp there (see the header)"; exit 1; }
  echo "building llama-quantize in $LC ..."
  bash "$PEER/build.sh" cpu "$LC" > /tmp/make-quant-fixtures-build.log 2>&1 ||
    { tail -30 /tmp/make-quant-fixtures-build.log; exit 1; }
fi
Q=$LC/build/bin/llama-quantize
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$OUT"

PY=${PY:-}
if [ -z "$PY" ]; then
  for p in python3 /usr/bin/python3; do "$p" -c 'import torch' 2> /dev/null && { PY=$p; break; }; done
fi
[ -n "$PY" ] || { echo "no python3 with torch (apt-get install python3-torch)"; exit 1; }
"$PY" tools/gemma-qwen2-oracle.py build --arch qwen2 --shape small --seed 33 --torch-only --out "$tmp/hf" \
  > "$tmp/hf.log" 2>&1 || { tail -20 "$tmp/hf.log"; exit 1; }
"$W" convert "$tmp/hf" -o "$tmp/art" --quant f32 --quiet
"$W" export-gguf -m "$tmp/art" -o "$tmp/F32.gguf"

for t in $TYPES; do
  "$Q" --pure "$tmp/F32.gguf" "$tmp/$t.gguf" "$t" > "$tmp/$t.log" 2>&1 || { tail -20 "$tmp/$t.log"; exit 1; }
done
"$Q" "$tmp/F32.gguf" "$OUT/qwen2-small-q4_k_m.gguf" Q4_K_M > "$tmp/mix.log" 2>&1 || { tail -20 "$tmp/mix.log"; exit 1; }

# 4. the mixed file, run in place on both backends
for be in cpu webgpu; do
  echo "Q4_K_M in place, $be: $("$W" logits -m "$OUT/qwen2-small-q4_k_m.gguf" --backend "$be" --tokens 1,5,9,3,7 --greedy 16 2>&1 |
    grep -o '"greedy": \[[^]]*\]' || echo FAILED)"
done

# 5. the rows of one tensor from each file (a GGUF reader of a few lines:
# header, metadata skipped by type, tensor infos, aligned data)
python3 - "$tmp" "$OUT" "$ROWS" F32 $TYPES <<'EOF'
import struct, sys
tmp, out, rows, names = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
BLOCK = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 10: (256, 84),
         11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 30: (1, 2)}
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

def read(path):
    b = open(path, 'rb').read()
    at = 0
    def take(fmt):
        nonlocal at
        v = struct.unpack_from('<' + fmt, b, at)
        at += struct.calcsize('<' + fmt)
        return v[0]
    def string():
        nonlocal at
        n = take('Q'); s = b[at:at + n].decode('utf-8', 'replace'); at += n
        return s
    def value(t):
        nonlocal at
        if t == 8: return string()
        if t == 9:
            et, n = take('I'), take('Q')
            return [value(et) for _ in range(n)]
        v = b[at:at + SCALAR[t]]; at += SCALAR[t]
        return v
    assert b[:4] == b'GGUF', path
    at = 4
    take('I'); nt = take('Q'); nkv = take('Q')
    align = 32
    for _ in range(nkv):
        k = string(); v = value(take('I'))
        if k == 'general.alignment': align = struct.unpack('<I', v)[0]
    infos = {}
    for _ in range(nt):
        name = string(); nd = take('I'); ne = [take('Q') for _ in range(nd)]
        infos[name] = (ne, take('I'), take('Q'))
    data = (at + align - 1) // align * align
    return b, data, infos

with open(out + '/fixtures.txt', 'w') as f:
    for n in names:
        b, data, infos = read(f'{tmp}/{n}.gguf')
        ne, t, off = infos['blk.0.ffn_down.weight']
        blk, nbytes = BLOCK[t]
        row = ne[0] // blk * nbytes
        fn = n.lower() + '.bin'
        open(f'{out}/{fn}', 'wb').write(b[data + off:data + off + rows * row])
        f.write(f'{fn} {t} {rows} {ne[0]}\n')
        print(f'{n}: blk.0.ffn_down.weight ggml type {t}, {rows} x {ne[0]} -> {fn}')
EOF
ls -la "$OUT"
