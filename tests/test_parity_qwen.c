/* Qwen 3.5 parity with Hugging Face transformers (Qwen3_5ForCausalLM).
 *
 * tests/parity/qwen35-small/ holds a small random Qwen3_5ForCausalLM
 * (model.safetensors + config.json: hidden 128, 3 linear_attention + 1
 * full_attention layers, vocab 512), the prompts, and the logits/greedy
 * tokens transformers computed: ref_f32.json from the HF weights, ref_q4.json
 * and ref_q4k.json from the weights dequantized out of wisp's q4 / q4k
 * artifacts, with {q4,q4k}_weights.sha256 recording those artifacts' bytes.
 * All are produced on the GPU machine by tests/parity/run_device.sh. The test
 * converts the checkpoint, runs `wisp logits` and requires max|diff| <= 1e-3 *
 * max|ref| per prompt and identical greedy tokens. It FAILS while the files
 * are absent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity_compare.h"
#include "test.h"
#include "util/file.h"

#define QWEN_SMALL_DIR "tests/parity/qwen35-small"

static void check_qwen_small(const char *quant) {
  char art[600], out[600], ref[600], cmd[4096], log[8192], msg[2048], sha[600];
  snprintf(art, sizeof art, "%s/qparity_%s", test_tmpdir(), quant);
  snprintf(out, sizeof out, "%s/qparity_%s.json", test_tmpdir(), quant);
  snprintf(ref, sizeof ref, QWEN_SMALL_DIR "/ref_%s.json", quant);
  CHECKF(wisp_path_exists(ref), "%s is missing: run tests/parity/run_device.sh (CONFIGS=qwen35-small) on the GPU "
                                "machine and commit its qwen35-small/ output", ref);
  snprintf(cmd, sizeof cmd, "%s convert " QWEN_SMALL_DIR " -o %s --quant %s --quiet", test_wisp_bin(), art, quant);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "convert: %s", log);
  snprintf(sha, sizeof sha, QWEN_SMALL_DIR "/%s_weights.sha256", quant);
  if (strcmp(quant, "f32") && wisp_path_exists(sha)) {
    char *want = NULL, *manifest = NULL, mpath[700];
    snprintf(mpath, sizeof mpath, "%s/manifest.json", art);
    int same = wisp_read_file(sha, &want, NULL) == WISP_OK && wisp_read_file(mpath, &manifest, NULL) == WISP_OK &&
               strlen(want) >= 64;
    if (same) {
      want[64] = 0;
      same = strstr(manifest, want) != NULL;
    }
    free(want);
    free(manifest);
    CHECKF(same, "the %s conversion's weights differ from the ones ref_%s.json was computed from "
                 "(quantizer changed?): rerun tests/parity/run_device.sh", quant, quant);
  }
  int g = parity_greedy_len(ref);
  CHECKF(g >= 0, "%s: no greedy array", ref);
  snprintf(cmd, sizeof cmd, "%s logits --backend cpu --profile exact -m %s --prompts " QWEN_SMALL_DIR "/prompts.json -o %s --greedy %d",
           test_wisp_bin(), art, out, g);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "logits: %s", log);
  CHECKF(parity_compare_files(ref, out, 1e-3, msg, sizeof msg), "qwen35-small %s vs HF: %s", quant, msg);
}

TEST(parity_qwen35_small_hf_reference) {
  CHECKF(wisp_path_exists(QWEN_SMALL_DIR "/model.safetensors") && wisp_path_exists(QWEN_SMALL_DIR "/config.json") &&
             wisp_path_exists(QWEN_SMALL_DIR "/prompts.json"),
         QWEN_SMALL_DIR "/{model.safetensors,config.json,prompts.json} are missing: run tests/parity/run_device.sh "
                        "(CONFIGS=qwen35-small) on the GPU machine and commit its qwen35-small/ output there");
  check_qwen_small("f32");
  if (test_failed_now()) return;
  check_qwen_small("q4");
  if (test_failed_now()) return;
  check_qwen_small("q4k");
}
