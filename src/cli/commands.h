/* One entry point per `wisp <command>`; each lives in its own cmd_*.c file.
 * A command returns the process exit status and prints its own errors as one
 * line on stderr ("wisp <command>: <what went wrong>"). */
#ifndef WISP_CLI_COMMANDS_H
#define WISP_CLI_COMMANDS_H

#include <stddef.h>

#include "wisp.h"


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
int cmd_serve(int argc, char **argv);

/* Prints "wisp <cmd>: <last error>" to stderr and returns 1. */
int cli_error(const char *cmd);
/* The built-in default model's directory: models/default (the trained LFM2,
 * docs/default-model.md) when present, else models/synthetic-seed, generated
 * on first use; NULL (with the error set) when it cannot be made. */
const char *cli_default_model(void);

/* `wisp --version`: the version and the Dawn build (no GPU needed). */
int cli_print_version(void);
/* The one overwrite rule of every writer (convert, gen-synthetic,
 * export-gguf, bench -o, logits -o): a path that does not exist, an empty
 * file or an empty directory may be written; anything else only with
 * --force. Returns 0, or prints one line and returns 2 (the exit status). */
int cli_check_target(const char *cmd, const char *path, int force);
/* 1 for an empty directory or an empty regular file. */
int cli_is_empty(const char *path);
/* Until cli_interrupt_forget(), SIGINT/SIGTERM/SIGHUP remove a temporary
 * file (names NULL) or a temporary directory holding files with these
 * names (and their wisp_write_file_atomic twins), then end the process as
 * the signal would: an interrupted writer leaves nothing behind. May be
 * called several times; at most 48 paths in all. */
void cli_remove_on_interrupt(const char *path, const char *const *names, int n_names);
void cli_interrupt_forget(void);
/* A prompt or text file: a path, or "-" for standard input. */
wisp_status cli_read_text(const char *path, char **text, size_t *len);

#endif
