/* The kernel variants of kernels/registry.json (and the profile kernels)
 * that the WebGPU backend runs, each with the WGSL file it loads for it.
 * wisp_session_new checks every op of the plan against this table (through
 * wisp_backend.check_kernel), so that the registry's variant is what runs:
 * a variant the backend does not know, or one whose WGSL file differs from
 * the one the backend would load, is a one-line error at session creation
 * instead of the backend quietly running its own choice. A new variant in
 * the registry needs its row here. */
#include <stdio.h>
#include <string.h>

#include "backend/webgpu/wgpu_core.h"
#include "backend/webgpu/wgpu_variants.h"
#include "util/err.h"

typedef struct {
  const char *op, *variant, *wgsl;
} known;

static const known k_known[] = {
    {"embed", "wgsl_gather_q4", "embed.wgsl"},
    {"embed", "wgsl_gather_f32", "embed.wgsl"},
    {"embed", "wgsl_gather_f16", "embed.wgsl"},
    {"embed", "wgsl_gather_q8_0", "embed.wgsl"},
    {"matmul", "wgsl_matvec_subgroup_f16", "matvec.wgsl"},
    {"matmul", "wgsl_matvec_f16", "matvec_nosg.wgsl"},
    {"matmul", "wgsl_tiled_f16", "matmul.wgsl"},
    {"matmul", "wgsl_matvec_subgroup_q8_0", "matvec.wgsl"},
    {"matmul", "wgsl_matvec_q8_0", "matvec_nosg.wgsl"},
    {"matmul", "wgsl_tiled_q8_0", "matmul.wgsl"},
    {"embed", "wgsl_gather_q6k", "embed.wgsl"},
    {"matmul", "wgsl_matvec_subgroup_q6k", "matvec.wgsl"},
    {"matmul", "wgsl_matvec_q6k", "matvec_nosg.wgsl"},
    {"matmul", "wgsl_tiled_q6k", "matmul.wgsl"},
    {"embed", "wgsl_gather_q5k", "embed.wgsl"},
    {"matmul", "wgsl_matvec_subgroup_q5k", "matvec.wgsl"},
    {"matmul", "wgsl_matvec_q5k", "matvec_nosg.wgsl"},
    {"matmul", "wgsl_tiled_q5k", "matmul.wgsl"},
    {"embed", "wgsl_gather_q3k", "embed.wgsl"},
    {"matmul", "wgsl_matvec_subgroup_q3k", "matvec.wgsl"},
    {"matmul", "wgsl_matvec_q3k", "matvec_nosg.wgsl"},
    {"matmul", "wgsl_tiled_q3k", "matmul.wgsl"},
    {"embed", "wgsl_gather_q2k", "embed.wgsl"},
    {"matmul", "wgsl_matvec_subgroup_q2k", "matvec.wgsl"},
    {"matmul", "wgsl_matvec_q2k", "matvec_nosg.wgsl"},
    {"matmul", "wgsl_tiled_q2k", "matmul.wgsl"},
    {"embed", "wgsl_gather_q4_0", "embed.wgsl"},
    {"matmul", "wgsl_matvec_subgroup_q4_0", "matvec.wgsl"},
    {"matmul", "wgsl_matvec_q4_0", "matvec_nosg.wgsl"},
    {"matmul", "wgsl_tiled_q4_0", "matmul.wgsl"},
    {"embed", "wgsl_gather_q4_1", "embed.wgsl"},
    {"matmul", "wgsl_matvec_subgroup_q4_1", "matvec.wgsl"},
    {"matmul", "wgsl_matvec_q4_1", "matvec_nosg.wgsl"},
    {"matmul", "wgsl_tiled_q4_1", "matmul.wgsl"},
    {"embed", "wgsl_gather_q5_0", "embed.wgsl"},
    {"matmul", "wgsl_matvec_subgroup_q5_0", "matvec.wgsl"},
    {"matmul", "wgsl_matvec_q5_0", "matvec_nosg.wgsl"},
    {"matmul", "wgsl_tiled_q5_0", "matmul.wgsl"},
    {"embed", "wgsl_gather_q5_1", "embed.wgsl"},
    {"matmul", "wgsl_matvec_subgroup_q5_1", "matvec.wgsl"},
    {"matmul", "wgsl_matvec_q5_1", "matvec_nosg.wgsl"},
    {"matmul", "wgsl_tiled_q5_1", "matmul.wgsl"},
    {"embed", "wgsl_gather_bf16", "embed.wgsl"},
    {"matmul", "wgsl_matvec_subgroup_bf16", "matvec.wgsl"},
    {"matmul", "wgsl_matvec_bf16", "matvec_nosg.wgsl"},
    {"matmul", "wgsl_tiled_bf16", "matmul.wgsl"},
    {"rmsnorm", "wgsl_subgroup", "rmsnorm.wgsl"},
    {"rmsnorm", "wgsl", "rmsnorm_nosg.wgsl"},
    {"matmul", "wgsl_matvec_subgroup_q4", "matvec.wgsl"},
    {"matmul", "wgsl_matvec_q4", "matvec_nosg.wgsl"},
    {"matmul", "wgsl_tiled_q4", "matmul.wgsl"},
    {"matmul", "wgsl_tiled_q4_i8", "matmul_i8.wgsl"},
    {"matmul", "wgsl_tiled_q4k_i8", "matmul_i8.wgsl"},
    {"matmul", "wgsl_tiled_q8_0_i8", "matmul_i8.wgsl"},
    {"matmul", "wgsl_matvec_subgroup_f32", "matvec.wgsl"},
    {"matmul", "wgsl_matvec_f32", "matvec_nosg.wgsl"},
    {"matmul", "wgsl_tiled_f32", "matmul.wgsl"},
    {"matmul", "wgsl_q4_matvec_basic_subgroup", "q4_matvec.wgsl"},
    {"matmul", "wgsl_q4_matvec_basic", "q4_matvec_nosg.wgsl"},
    {"matmul", "wgsl_matvec_subgroup_q4k", "q4k_matvec.wgsl"},
    {"matmul", "wgsl_matvec_q4k_superblock", "q4k_sb.wgsl"},
    {"matmul", "wgsl_matvec_q4k", "q4k_matvec_nosg.wgsl"},
    {"matmul", "wgsl_q4k_metal_simd16", "fused_matmul_q4_metal_simd16.wgsl"},
    {"matmul", "wgsl_tiled_q4k", "matmul.wgsl"},
    {"matmul", "profile:fused_matmul_q4_metal_simd16", "fused_matmul_q4_metal_simd16.wgsl"},
    {"shortconv", "wgsl_fused_in_proj_subgroup", "matvec_conv.wgsl"},
    {"shortconv", "wgsl_fused_in_proj", "matvec_conv_nosg.wgsl"},
    {"shortconv", "wgsl", "shortconv.wgsl"},
    {"attention", "wgsl_flash_decode", "attn_decode.wgsl"},
    {"attention", "wgsl_flash_decode_kv16", "attn_decode.wgsl"},
    {"attention", "wgsl_flash_prefill", "attn_flash.wgsl"},
    {"attention", "wgsl_tiled_prefill", "attn_prefill.wgsl"},
    {"attention", "wgsl_flash_tiled_prefill", "attn_flash_tiled.wgsl"},
    {"attention", "wgsl_flash_prefill_kv16", "attn_flash.wgsl"},
    {"attention_gated", "wgsl_flash", "attn_flash.wgsl"},
    {"attention_gated", "wgsl_decode_head256_gate", "attention_decode_online_head256_f16kv_output_gate.wgsl"},
    {"attention_gated", "profile:attention_decode_online_head256_f16kv_output_gate",
     "attention_decode_online_head256_f16kv_output_gate.wgsl"},
    {"gated_deltanet", "wgsl_recurrent", "dn_recur.wgsl"},
    {"swiglu", "wgsl", "swiglu.wgsl"},
    {"geglu", "wgsl", "rowops.wgsl"},
    {"add_bias", "wgsl", "rowops.wgsl"},
    {"add", "wgsl", "rowops.wgsl"},
    {"scale", "wgsl", "rowops.wgsl"},
    {"sample", "wgsl_device", "sample.wgsl"},
};

wisp_status wisp_wgpu_check_kernel(wisp_backend *be, const char *op, const char *variant, const char *wgsl) {
  (void)be;
  for (size_t i = 0; i < sizeof k_known / sizeof k_known[0]; i++) {
    const known *k = &k_known[i];
    if (strcmp(k->op, op) || strcmp(k->variant, variant)) continue;
    if (wgsl && *wgsl && strcmp(wgsl, k->wgsl))
      return wisp_fail(WISP_EUNSUPPORTED, "the plan names %s for %s/%s, but the webgpu backend runs %s for it", wgsl,
                       op, variant, k->wgsl);
    return WISP_OK;
  }
  return wisp_fail(WISP_EUNSUPPORTED, "the plan chose kernel %s/%s%s%s%s, which the webgpu backend does not have", op,
                   variant, wgsl && *wgsl ? " (" : "", wgsl && *wgsl ? wgsl : "", wgsl && *wgsl ? ")" : "");
}
