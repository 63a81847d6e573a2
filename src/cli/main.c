/* wisp command-line entry: dispatches `wisp <command> [args]` to cmd_*.c. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

typedef struct {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *help;
} command;

static const command k_commands[] = {
    {"run", cmd_run, "generate text: [-m DIR] -p TEXT -n N [--temp T --top-k K --top-p P --seed S --ids --ignore-eos]"},
    {"bench", cmd_bench, "fixed prompt/decode workload, writes a JSON receipt under bench/results/"},
    {"gen-synthetic", cmd_gen_synthetic, "--like MANIFEST -o DIR [--seed N] [--small]: seeded synthetic artifact"},
    {"convert", cmd_convert, "(HF_DIR | FILE.gguf) -o DIR --quant f32|q4|q4k: import a Hugging Face checkpoint or a GGUF file"},
    {"logits", cmd_logits, "-m DIR (--prompts FILE | --tokens 1,2,3) [-o OUT] [--greedy N]: final-position logits (parity)"},
    {"perplexity", cmd_perplexity, "-m DIR -f FILE [--max-tokens N] [--window W]: mean next-token NLL and perplexity"},
    {"plan", cmd_plan, "[-m DIR] [--profile P] [--backend cpu|webgpu] [--json]: the execution plan run/bench execute"},
    {"tokenize", cmd_tokenize, "(-m DIR | --tokenizer FILE) [--no-special] (-p TEXT | --corpus FILE | --decode IDS)"},
    {"info", cmd_info, "-m DIR: validate an artifact and print its shape and sections"},
    {"verify", cmd_verify, "DIR: re-hash every section and weights.bin against the manifest's sha256 digests"},
    {"export-gguf", cmd_export_gguf, "DIR -o FILE.gguf: write an artifact as a GGUF v3 file (llama.cpp names)"},
    {"devices", cmd_devices, "list WebGPU adapters with their features and limits"},
    {"registry", cmd_registry, "check [FILE] [--kernels-dir DIR] [--strict]: validate a kernel registry"},
    {"kernels", cmd_kernels, "digest FILE.wgsl ENTRY: print a kernel's sha256 digest (profile addKernels)"},
    {"profile", cmd_profile, "check FILE [--profiles-dir DIR] [--no-digests]: validate a runtime profile"},
    {"plan-file", cmd_plan_file, "--shape MANIFEST [--profile P] [--backend cpu|webgpu] [--json]: resolve a plan"},
};

static void usage(FILE *f) {
  fprintf(f, "usage: wisp <command> [options]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
    fprintf(f, "  %-14s %s\n", k_commands[i].name, k_commands[i].help);
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
    if (!strcmp(argv[1], k_commands[i].name)) return k_commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "wisp: unknown command '%s' (try 'wisp --help')\n", argv[1]);
  return 2;
}
