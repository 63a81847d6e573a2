#!/usr/bin/env bash
# Mutation check: do the tests fail when the code is wrong?
#
# Each entry of the list below is one small, plausible bug (the sign of an
# epsilon, a position off by one, a scale read from the wrong byte, ...),
# written as an exact piece of source text and its replacement, with the
# test filters (build/wisp_tests FILTER) that should catch it. One at a
# time, the mutation is applied to a scratch copy of the committed tree (a
# git worktree under /tmp, never this working tree), the test binary is
# rebuilt and the filters run: the mutation is "caught" when a test fails
# "SURVIVED" when every test passes ("INVALID" when the mutated tree does
# not build, which is no evidence either).
# Every mutation on the list must be caught.
#
#   tools/mutate.sh [-j JOBS] [-o REPORT] [NAME...]
#     -j JOBS    make -j for the rebuilds (default 2)
#     -o REPORT  also write the results to REPORT (tools/mutate-report.txt)
#     NAME...    only these mutations (default: all)
#   exit status: 0 when every mutation was caught, 1 when one was not
#
# The scratch tree starts from this tree's build/ (sources unchanged since
# that build keep their time stamps, so only what differs is rebuilt), and
# first runs every filter unmutated: they must all pass there, or a failure
# would be no evidence. It is not part of `make test` (each mutation is a
# rebuild and a few tests, minutes for the list).
set -euo pipefail
# The whole script is one function, read before it runs: bash reads a
# script as it goes, so editing this file during a run must not change it.
main() {
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=2 report=
while getopts "j:o:" opt; do
  case $opt in
    j) jobs=$OPTARG ;;
    o) report=$OPTARG ;;
    *) sed -n '/^#   tools/,/^#   exit/p' "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))

# ---- the list: NAME | FILE | FROM | TO | FILTERS (space-separated) ----------
# FROM must occur in FILE (every occurrence is replaced); a tab separates
# the fields.
mutations() {
  cat <<'LIST'
eps_sign	src/backend/cpu/cpu_backend.c	sqrtf((float)(ss / j->dim) + j->eps)	sqrtf((float)(ss / j->dim) - j->eps)	cpu_rmsnorm_eps
rope_position	src/backend/cpu/cpu_attention.c	*cs = j->cos + (size_t)pos * half, *sn = j->sin + (size_t)pos * half	*cs = j->cos + (size_t)j->pos0 * half, *sn = j->sin + (size_t)j->pos0 * half	cpu_attention_matches_reference
softmax_stabilisation	src/backend/cpu/cpu_attention.c	scores[p] = expf(scores[p] - mx);	scores[p] = expf(scores[p]);	cpu_attention_matches_reference
kv_append_position	src/backend/cpu/cpu_attention.c	cache_put(j, j->kc, pos, h, kd);	cache_put(j, j->kc, j->pos0, h, kd);	cpu_attention_matches_reference lfm2_prefill_equals
q4_scale_unpack	src/backend/cpu/cpu_kernels.c	total = _mm256_fmadd_ps(_mm256_set1_ps(s[b]), acc, total);	total = _mm256_fmadd_ps(_mm256_set1_ps(s[b & ~1]), acc, total);	cpu_simd_kernels_match_scalar
q4_quantizer_levels	src/format/tensor.c	float d = amax / 7.0f;	float d = amax / 3.5f;	q4_roundtrip_error_is_bounded
q4k_scale_unpack	src/format/tensor.c	*sc = (b[j + 4] & 15) | ((b[j - 4] >> 6) << 4);	*sc = (b[j + 4] & 15) | ((b[j - 4] >> 6) << 3);	q4k_simd_kernels_match_scalar q4k_layout_roundtrip qwen3_5_q4k_artifact
q4k_nibble_unpack	src/backend/cpu/cpu_kernels.c	unpack_q4k_64(blk + 16 + 32 * c, lo, hi);	unpack_q4k_64(blk + 16 + 32 * (c ^ 1), lo, hi);	q4k_simd_kernels_match_scalar
q8_0_scale_unpack	src/backend/cpu/cpu_kernels.c	float d = wisp_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));	float d = wisp_f16_to_f32((uint16_t)(blk[1] | blk[0] << 8));	quant_q8_0 quant_f16_q8_0_avx2 qwen3_5_f16_q8_0
q8_0_dequant_scale	src/format/quant.c	float d = wisp_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));	float d = wisp_f16_to_f32((uint16_t)(blk[1] | blk[0] << 8));	quant_q8_0_roundtrip gguf_q8_0
top_p_off	src/backend/sampling.c	if (p->top_p > 0 && p->top_p < 1) {	if (0) {	sampler_truncation_matches_distribution
top_p_inverted	src/backend/sampling.c	if (mass >= p->top_p * total) lo = mid;	if (mass >= (1 - p->top_p) * total) lo = mid;	sampler_truncation_matches_distribution
top_k_off_by_one	src/backend/sampling.c	if (cnt >= p->top_k) lo = mid;	if (cnt > p->top_k) lo = mid;	sampler_truncation_matches_distribution
min_p_inverted	src/backend/sampling.c	t = fmaxf(t, logf(p->min_p));	t = fmaxf(t, logf(1 - p->min_p));	sampler_truncation_matches_distribution
temperature_ignored	src/backend/sampling.c	inv_t = 1.0f / p->temperature;	inv_t = 1.0f;	sampler_truncation_matches_distribution sampler_temperature
repeat_penalty_negative	src/backend/sampling.c	logits[t] > 0 ? logits[t] * inv : logits[t] * penalty;	logits[t] > 0 ? logits[t] * inv : logits[t] * inv;	sampler_top_p_min_p_and_penalty
repeat_penalty_positive	src/backend/sampling.c	const float inv = 1.0f / penalty;	const float inv = penalty;	sampler_top_p_min_p_and_penalty
conv_state_shift	src/backend/cpu/cpu_shortconv.c	for (int k = 0; k + 1 < S; k++) st[k] = st[k + 1];	for (int k = 1; k + 1 < S; k++) st[k] = st[k + 1];	cpu_shortconv lfm2_prefill_equals
conv_state_after_prefill	src/backend/cpu/cpu_shortconv.c	const float *x = sconv_input(&j, n - S + s);	const float *x = sconv_input(&j, n - S + s - 1);	cpu_shortconv lfm2_prefill_equals
deltanet_decay	src/backend/cpu/cpu_gated_deltanet.c	*g = -expf(a->a_log->data[h]) * softplus(av + a->dt_bias->data[h]);	*g = -expf(a->a_log->data[h]) * softplus(av - a->dt_bias->data[h]);	qwen3_5_tiny_model_matches_independent_reference
gguf_q8_0_read	src/format/gguf.c	for (int j = 0; j < 32; j++) out[b * 32 + j] = d * (float)(int8_t)p[2 + j];	for (int j = 0; j < 32; j++) out[b * 32 + j] = d * (float)(int8_t)p[1 + j];	gguf_roundtrip_f32
gguf_q8_0_export_levels	src/format/gguf.c	float d = amax / 127.0f;	float d = amax / 63.0f;	gguf_roundtrip_f32
wgsl_rmsnorm_eps_sign	src/backend/webgpu/kernels/rmsnorm.wgsl	sqrt(t / f32(p.n) + p.eps)	sqrt(t / f32(p.n) - p.eps)	webgpu_rmsnorm webgpu_backend_rmsnorm
wgsl_rmsnorm_nosg_eps_sign	src/backend/webgpu/kernels/rmsnorm_nosg.wgsl	/ f32(p.n) + p.eps);	/ f32(p.n) - p.eps);	webgpu_rmsnorm webgpu_backend_rmsnorm
wgsl_top_p_inverted	src/backend/webgpu/kernels/sample.wgsl	if (reduce_sum(li, mass) >= p.top_p * total) {	if (reduce_sum(li, mass) >= (1.0 - p.top_p) * total) {	decode_loop_webgpu_sampler_matches_reference
deltanet_decay_step	src/backend/cpu/cpu_gated_deltanet.c	dn_value(j, t, h), expf(g), beta, kv, o);	dn_value(j, t, h), expf(0.5f * g), beta, kv, o);	qwen3_5_tiny_model_matches_independent_reference cpu_deltanet_op_prefill
wgsl_dn_chunk_decay	src/backend/webgpu/kernels/dn_chunk_prep.wgsl	gam[li] = exp(ghi[li] + glo[li]);	gam[li] = exp(0.5 * (ghi[li] + glo[li]));	webgpu_dn_chunked
wgsl_dn_chunk_last_decay	src/backend/webgpu/kernels/dn_chunk_state.wgsl	acc[j] = gl * S[i * CB + e];	acc[j] = S[i * CB + e];	webgpu_dn_chunked
wgsl_dn_chunk_solve	src/backend/webgpu/kernels/dn_chunk_prep.wgsl	for (var s = 0u; s < t; s++) {	for (var s = 1u; s < t; s++) {	webgpu_dn_chunked
wgsl_dn_conv_ring	src/backend/webgpu/kernels/dn_conv.wgsl	state[ring + (p.pos0 + t) % L] = proj[t * p.row + ch];	state[ring + (p.pos0 + t + 1u) % L] = proj[t * p.row + ch];	webgpu_dn_chunked webgpu_qwen_gated_deltanet
LIST
}

selected=("$@")
is_selected() {
  [ ${#selected[@]} -eq 0 ] && return 0
  local s
  for s in "${selected[@]}"; do [ "$s" = "$1" ] && return 0; done
  return 1
}

scratch=$(mktemp -d /tmp/wisp-mutate.XXXXXX)
rmdir "$scratch"
cleanup() { git -C "$root" worktree remove --force "$scratch" >/dev/null 2>&1 || rm -rf "$scratch"; }
trap cleanup EXIT
git worktree add --detach -q "$scratch" HEAD
# The build of this tree seeds the scratch build: a source identical to this
# tree's keeps this tree's time stamp, so make rebuilds only what differs.
if [ -d build/obj ]; then
  mkdir -p "$scratch/build"
  cp -a build/obj build/gen "$scratch/build/" 2>/dev/null || true
  cp -a build/libwisp.a build/wisp build/wisp_tests "$scratch/build/" 2>/dev/null || true
  git ls-files -z | while IFS= read -r -d '' f; do
    [ -f "$f" ] && cmp -s "$f" "$scratch/$f" && touch -r "$f" "$scratch/$f"
  done
fi
[ -d .cache/webgpu ] && mkdir -p "$scratch/.cache" && ln -s "$root/.cache/webgpu" "$scratch/.cache/webgpu"
cd "$scratch"
# the WebGPU tests of WGSL mutations run on lavapipe where there is no GPU (docs/testing.md)
lvp=/usr/share/vulkan/icd.d/lvp_icd.json
[ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$lvp" ] && export VK_DRIVER_FILES=$lvp

build() { make -s -j"$jobs" build/wisp build/wisp_tests >build/mutate-build.log 2>&1; }
# Runs the tests of filter $1. Status 0: all passed; 1: one failed (its
# name printed); 2: none ran (no such test, or all skipped: no evidence).
run_filter() {
  local out rc=0 fails
  out=$(timeout 900 build/wisp_tests "$1" 2>&1) || rc=$?
  if [ $rc -ne 0 ] || ! grep -q ' passed, 0 failed' <<<"$out"; then
    fails=$(grep -o '^FAIL [A-Za-z0-9_]*' <<<"$out" | sed 's/^FAIL //' | tr '\n' ' ')
    echo "${fails:-exit status $rc}"
    return 1
  fi
  if grep -q '^0 passed' <<<"$out"; then echo "no test ran (all skipped or none matched)"; return 2; fi
  return 0
}

results=()
say() { echo "$1"; results+=("$1"); }

echo "== building the scratch tree ($scratch)"
build || { cat build/mutate-build.log; echo "mutate: the unmutated tree does not build" >&2; exit 2; }
echo "== baseline: every filter passes unmutated"
filters=$(mutations | while IFS=$'\t' read -r name _ _ _ tests; do if is_selected "$name"; then echo "$tests"; fi; done |
  tr ' ' '\n' | sort -u)
for f in $filters; do
  if ! why=$(run_filter "$f"); then
    echo "mutate: filter '$f' does not pass on the unmutated tree: $why" >&2
    exit 2
  fi
  echo "ok $f"
done

survived=0 total=0
while IFS=$'\t' read -r name file from to tests; do
  is_selected "$name" || continue
  total=$((total + 1))
  python3 - "$file" "$from" "$to" <<'PY' || { say "INVALID  $name: '$from' is not in $file"; survived=$((survived + 1)); continue; }
import sys
path, old, new = sys.argv[1:4]
s = open(path).read()
if old not in s:
    sys.exit(1)
open(path, "w").write(s.replace(old, new))
PY
  caught=
  if ! build; then # a mutation that does not compile says nothing about the tests
    git checkout -q -- "$file"
    say "INVALID  $name ($file): the mutated tree does not build ($(grep -m1 'error' build/mutate-build.log || true))"
    survived=$((survived + 1))
    continue
  fi
  for f in $tests; do
    rc=0
    why=$(run_filter "$f") || rc=$?
    if [ $rc -eq 1 ]; then caught="$why"; break; fi
  done
  git checkout -q -- "$file"
  if [ -n "$caught" ]; then
    say "caught   $name ($file) by $caught"
  else
    say "SURVIVED $name ($file): $tests all passed"
    survived=$((survived + 1))
  fi
done < <(mutations)

summary="$((total - survived)) of $total mutations caught"
echo "$summary"
if [ -n "$report" ]; then
  {
    echo "# tools/mutate.sh: $(git -C "$root" rev-parse --short HEAD), $(uname -m), make -j$jobs"
    printf '%s\n' "${results[@]}"
    echo "$summary"
  } >"$root/$report"
fi
[ "$survived" -eq 0 ]
}
main "$@"
exit $?
