/* `wisp convert HF_DIR -o DIR --quant f32|q4|q4k`: the CLI over
 * format/hf_import.c, which imports a Hugging Face LFM2, Qwen3, Llama or
 * Qwen 3.5 (text) checkpoint (config.json + safetensors), or a GGUF file,
 * into a wisp artifact. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "format/gguf_artifact.h"
#include "format/hf_import.h"
#include "util/file.h"

static const char *const k_about =
    "  HF_DIR holds config.json and model.safetensors (or model.safetensors.index.json + shards)\n"
    "  of an Lfm2ForCausalLM, Qwen3ForCausalLM, LlamaForCausalLM or Qwen3_5ForCausalLM;\n"
    "  FILE.gguf: a GGUF v3 file of architecture lfm2, qwen3, llama or qwen35 (docs/gguf.md);\n"
    "  from a GGUF, --quant keep (the default) keeps every matrix in its stored type\n"
    "  (F32, F16, Q8_0, Q4_K as they are, Q4_0 as wisp q4; Q4_1, BF16, Q6_K as f32)\n"
    "  --quant q4 (default): Q4 matrices, Q4Z embed/head; q4k: Q4_K matrices (those whose\n"
    "  input width is a multiple of 256; others Q4), Q4Z embed/head; f32: every weight as f32;\n"
    "  f16: every matrix and embed/head as IEEE half; q8_0: every matrix and embed/head as\n"
    "  ggml Q8_0 (needs input widths that are multiples of 32).\n"
    "  The artifact is written as DIR.partial-PID/ and renamed when complete (Ctrl-C removes it);\n"
    "  an existing non-empty DIR is replaced only with --force, and only if it is an artifact.";

int cmd_convert(int argc, char **argv) {
  const char *hf_dir = NULL, *out_dir = NULL, *quant = NULL, *pos[1];
  int quiet = 0, force = 0, n_pos = 0;
  const cli_opt opts[] = {
      {"-o|--out|--output", CLI_STR, &out_dir, 0, 0, "DIR", "the artifact directory to write"},
      {"--quant", CLI_STR, &quant, 0, 0, "Q", "f32, q4 (default), q4k, f16 or q8_0; keep (the default for a GGUF)"},
      {"-q|--quiet", CLI_FLAG, &quiet, 0, 0, NULL, "no progress lines"},
      {"--force", CLI_FLAG, &force, 0, 0, NULL, "replace an existing artifact at DIR"},
  };
  const cli_spec spec = {"convert", "(HF_DIR | FILE.gguf) -o DIR [--quant f32|q4|q4k|f16|q8_0|keep] [--quiet] [--force]",
                         k_about, opts, (int)(sizeof opts / sizeof opts[0]), pos, 1, &n_pos};
  int pr = cli_parse(&spec, argc, argv);
  if (pr != CLI_CONTINUE) return pr;
  if (n_pos) hf_dir = pos[0];
  if (!hf_dir || !out_dir) {
    fprintf(stderr, "wisp convert: give the source (HF_DIR or FILE.gguf) and -o DIR (see wisp convert --help)\n");
    return 2;
  }
  if (cli_claim_target("convert", out_dir, 1, force)) return 2;
  const int gguf_input = wisp_is_regular_file(hf_dir);
  if (!quant) quant = gguf_input ? "keep" : "q4";
  if (!strcmp(quant, "keep") && !gguf_input) {
    fprintf(stderr, "wisp convert: --quant keep is for a GGUF source; a Hugging Face checkpoint takes f32, q4, q4k, f16 or q8_0\n");
    return 2;
  }
  if (strcmp(quant, "keep") && strcmp(quant, "f32") && strcmp(quant, "q4") && strcmp(quant, "q4k") && strcmp(quant, "f16") &&
      strcmp(quant, "q8_0")) {
    fprintf(stderr, "wisp convert: --quant must be f32, q4, q4k, f16, q8_0 or keep, not '%s'\n", quant);
    return 2;
  }
  /* Ctrl-C removes the temporary directories (the writer's and the GGUF
   * tokenizer's) with whatever they hold so far. */
  static const char *const tmp_files[] = {"weights.bin", "manifest.json", "tokenizer.json", "tokenizer_config.json",
                                          "generation_config.json"};
  char partial[4200], tok_dir[4200];
  snprintf(partial, sizeof partial, "%s.partial-%d", out_dir, (int)getpid()); /* format/writer.h's name */
  snprintf(tok_dir, sizeof tok_dir, "%s.gguf-tokenizer-%d", out_dir, (int)getpid());
  cli_remove_on_interrupt(partial, tmp_files, 5);
  cli_remove_on_interrupt(tok_dir, tmp_files + 2, 3);
  const wisp_hf_import_options io = {
      .source = hf_dir, .out_dir = out_dir, .quant = quant, .quiet = quiet, .gguf_tokenizer_dir = tok_dir};
  wisp_status rc = !strcmp(quant, "keep") ? wisp_gguf_convert_keep(hf_dir, out_dir, quiet) : wisp_hf_import(&io);
  cli_interrupt_forget();
  return rc ? cli_error("convert") : 0;
}
