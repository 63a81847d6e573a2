/* scripts/embed-wgsl.sh: every kernel is embedded, and the shared helper
 * files (`// #include "x.wgsli"`) are inlined, not left as comments. */
#include <string.h>

#include "backend/webgpu/wgsl_kernels.h"
#include "test.h"

TEST(wgsl_embed_inlines_includes) {
  int n = 0;
  for (int i = 0; wisp_wgsl_kernel_name(i); i++) {
    const char *text = wisp_wgsl_kernel(wisp_wgsl_kernel_name(i));
    CHECKF(text && strstr(text, "@compute"), "kernel %s has no compute entry", wisp_wgsl_kernel_name(i));
    CHECKF(!strstr(text, "// #include \""), "kernel %s still holds an include line", wisp_wgsl_kernel_name(i));
    n++;
  }
  CHECK(n > 20);
  /* the helpers each including kernel calls are there */
  const struct { const char *kernel, *fn; } uses[] = {
      {"matvec", "fn input_scale("}, {"matvec_conv", "fn unit_dot("}, {"q4k_matvec", "fn scale_min("},
      {"q4k_fused", "fn scale_min("}, {"dn_recur", "fn col_sum("},     {"dn_decode", "fn wg_sum2_sg("},
      {"attn_decode", "fn wg_sum2_sg("}, {"attn_gated_decode", "fn wg_sum2_sg("}, {"dn_norm", "fn wg_sum2_sg("},
      {"q4k_matvec_nosg", "fn q4k_wscale_min("}, {"matmul", "fn q4k_wbyte("},
      {"quant_x8", "fn quant_block("}, {"matmul_i8", "fn quant_block("},
  };
  for (size_t i = 0; i < sizeof uses / sizeof uses[0]; i++) {
    const char *text = wisp_wgsl_kernel(uses[i].kernel);
    CHECKF(text && strstr(text, uses[i].fn), "%s lacks %s", uses[i].kernel, uses[i].fn);
  }
}
