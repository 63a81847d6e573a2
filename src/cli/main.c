/* wisp command-line entry: dispatches `wisp <command> [args]` to cmd_*.c;
 * `wisp --help` lists the commands and the common options, `wisp --version`
 * the version and the Dawn build the WebGPU backend would load, `wisp help
 * COMMAND` the command's own help. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"

typedef struct {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *help;
} command;

static const command k_commands[] = {
    {"run", cmd_run, "generate text: [-m DIR] (-p TEXT | -p - | -f FILE) [-n N] [sampling], or --chat"},
    {"serve", cmd_serve, "[-m DIR] [--port N] [--parallel N] [--api-key KEY]: an OpenAI-compatible HTTP server"},
    {"bench", cmd_bench, "[-m DIR] [-p N] [-n N]: timed prompt/decode workload, a JSON receipt in bench/results/"},
    {"gen-synthetic", cmd_gen_synthetic, "(--like MANIFEST | --small) -o DIR [--seed N]: seeded synthetic artifact"},
    {"convert", cmd_convert, "(HF_DIR | FILE.gguf) -o DIR [--quant Q]: import a Hugging Face checkpoint or a GGUF file"},
    {"logits", cmd_logits, "[-m DIR] (--prompts FILE | --tokens 1,2,3) [-o OUT] [--greedy N]: final-position logits"},
    {"perplexity", cmd_perplexity, "[-m DIR] -f FILE [--max-tokens N] [--window W]: mean next-token NLL and perplexity"},
    {"plan", cmd_plan, "[-m DIR] [--profile P] [--backend cpu|webgpu] [--json]: the execution plan run/bench execute"},
    {"tokenize", cmd_tokenize, "[-m DIR | --tokenizer FILE] (-p TEXT | -f FILE | --corpus FILE | --decode IDS)"},
    {"info", cmd_info, "[-m DIR | DIR] [--verify]: validate an artifact and print its shape and sections"},
    {"verify", cmd_verify, "[-m DIR | DIR]: re-hash every section and weights.bin against the manifest's sha256s"},
    {"export-gguf", cmd_export_gguf, "[-m DIR | DIR] -o FILE.gguf [--q8_0] [--force]: write an artifact as GGUF v3"},
    {"devices", cmd_devices, "list WebGPU adapters with their features and limits"},
    {"registry", cmd_registry, "check [FILE] [--kernels-dir DIR] [--strict]: validate a kernel registry"},
    {"kernels", cmd_kernels, "digest FILE.wgsl ENTRY: print a kernel's sha256 digest (profile addKernels)"},
    {"profile", cmd_profile, "check FILE [--profiles-dir DIR] [--no-digests]: validate a runtime profile"},
    {"tune", cmd_tune, "-m DIR [--budget S] [--quick] [--dry-run]: sweep kernel geometries, write this device's tuned entry"},
    {"plan-file", cmd_plan_file, "--shape MANIFEST [--profile P] [--backend cpu|webgpu] [--json]: resolve a plan"},
};

static void usage(FILE *f) {
  fprintf(f, "usage: wisp <command> [options]    (wisp <command> --help: all of its options)\n\ncommands:\n");
  for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
    fprintf(f, "  %-14s %s\n", k_commands[i].name, k_commands[i].help);
  fprintf(f, "\ncommon options:\n%s", cli_common_help);
  fprintf(f, "\nrun options (also in wisp run --help):\n"
             "  -p, --prompt TEXT   the prompt (\"-\": read it from standard input); -f, --file FILE\n"
             "  -n, --n-predict N   tokens to generate (-1: until EOS or the end of the context)\n"
             "  -c, --ctx-size N    context length (at most the model's; 0: the model's)\n"
             "  --temp T --top-k K --top-p P --min-p P --repeat-penalty R --repeat-last-n N\n"
             "  -s, --seed S        sampling seed (-1: random, printed)\n"
             "  --chat, -cnv, -i    interactive chat; -sys, --system TEXT: its system message\n"
             "  --context-shift     chat: drop the oldest turns when the context is full\n"
             "\nlimits: a prompt from -f FILE or -p -, and a --chat line, at most 32 bytes per position of the\n"
             "context + 4 KiB; any other file read whole (JSON, tokenizer files, text) at most 64 MiB\n"
             "\nwisp --version: the version and the Dawn (WebGPU) build\n");
}

/* Whatever a command printed must have reached standard output: a full
 * disk or /dev/full is an error (exit 1, one line), not a silent success.
 * stdout is flushed here, so the error is seen even when the command never
 * flushed it itself. (Not closed: a command that printed nothing succeeds
 * with standard output closed, as coreutils' do.) */
static int finish_stdout(int rc) {
  errno = 0;
  const int flush_failed = fflush(stdout) != 0;
  const int err = errno;
  if (!flush_failed && !ferror(stdout)) return rc;
  fprintf(stderr, "wisp: writing standard output: %s\n", flush_failed && err ? strerror(err) : "write error");
  return rc ? rc : 1;
}

static int dispatch(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
    /* `wisp help COMMAND` is `wisp COMMAND --help` */
    if (argc == 3 && !strcmp(argv[1], "help"))
      for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        if (!strcmp(argv[2], k_commands[i].name)) return k_commands[i].fn(2, (char *[]){argv[2], "--help", NULL});
    if (argc == 3 && !strcmp(argv[1], "help")) {
      fprintf(stderr, "wisp: unknown command '%s' (try 'wisp --help')\n", argv[2]);
      return 2;
    }
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) return cli_print_version();
  for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
    if (!strcmp(argv[1], k_commands[i].name)) return k_commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "wisp: unknown command '%s' (try 'wisp --help')\n", argv[1]);
  return 2;
}

int main(int argc, char **argv) { return finish_stdout(dispatch(argc, argv)); }
