/* One entry point per `wisp <command>`; each lives in its own cmd_*.c file.
 * A command returns the process exit status and prints its own errors as one
 * line on stderr ("wisp <command>: <what went wrong>"). */
#ifndef WISP_CLI_COMMANDS_H
#define WISP_CLI_COMMANDS_H

int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_gen_synthetic(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_export_gguf(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_registry(int argc, char **argv);
int cmd_kernels(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_plan_file(int argc, char **argv);

/* Prints "wisp <cmd>: <last error>" to stderr and returns 1. */
int cli_error(const char *cmd);
/* The built-in default model's directory: models/default (the trained LFM2,
 * docs/default-model.md) when present, else models/synthetic-seed, generated
 * on first use; NULL (with the error set) when it cannot be made. */
const char *cli_default_model(void);

#endif
