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
int cmd_tune(int argc, char **argv);

/* The defaults a user gets without flags (run, bench, serve, plan): the
 * backend "auto" (a real GPU, else the CPU; backend/factory.c says which on
 * stderr) and the fast profile (throughput: the integer products on the CPU,
 * batched decode on a GPU). `--profile exact` is the reference path. */
#define CLI_DEFAULT_BACKEND "auto"
#define CLI_FAST_PROFILE "throughput"
/* The profile a command hands the session: `given`, else the fast one. */
const char *cli_profile_or_fast(const char *given);
/* One line for `wisp plan` on why this backend runs: the flag that named
 * it, or what "auto" found. */
void cli_backend_why(const char *asked, const char *got, char *out, size_t cap);
/* One line on why this profile runs: named by --profile, or the default. */
void cli_profile_why(const char *given, char *out, size_t cap);

/* Prints "wisp <cmd>: <last error>" to stderr and returns 1. */
int cli_error(const char *cmd);
/* The built-in default model's directory: models/default (the trained LFM2,
 * docs/default-model.md) when present, else models/synthetic-seed, generated
 * on first use; NULL (with the error set) when it cannot be made. */
const char *cli_default_model(void);

/* `wisp --version`: the version and the Dawn build (no GPU needed). */
int cli_print_version(void);
/* The one overwrite rule of every writer (convert, gen-synthetic,
 * export-gguf, bench -o, logits -o): takes the target's lock (a second
 * writer to the same target is refused, util/target.h; the lock goes at
 * exit or on Ctrl-C), then checks the target: a file writer (is_dir 0) may
 * write where nothing is, over an empty regular file, or over any regular
 * file with --force, never over a directory, device, FIFO, socket or
 * symbolic link; an artifact writer (is_dir 1) where nothing is, into an
 * empty directory, or with --force over an artifact wisp wrote
 * (format/writer.h). Returns 0, or prints one line and returns 2 (the exit
 * status). */
int cli_claim_target(const char *cmd, const char *path, int is_dir, int force);
/* Until cli_interrupt_forget(), SIGINT/SIGTERM/SIGHUP remove a temporary
 * file (names NULL) or a temporary directory holding files with these
 * names (and their wisp_write_file_atomic twins), then end the process as
 * the signal would: an interrupted writer leaves nothing behind. May be
 * called several times; at most 48 paths in all. */
void cli_remove_on_interrupt(const char *path, const char *const *names, int n_names);
void cli_interrupt_forget(void);
/* A prompt or text file: a path, or "-" for standard input; at most `max`
 * bytes (util/file.h's WISP_FILE_MAX, or cli_prompt_limit), past which it is
 * a one-line error and the read stops. */
wisp_status cli_read_text(const char *path, size_t max, char **text, size_t *len);
/* -t N beyond the cores online: one warning line on stderr (the run goes
 * on; oversubscription is legitimate in a measurement, and costly by
 * accident). */
void cli_warn_threads(const char *cmd, long threads);
/* The longest prompt or chat line, in bytes, for a context of `context`
 * tokens: 32 bytes a position (a token of these vocabularies is a few bytes,
 * rarely more than 16; the margin is for runs of spaces or symbols that one
 * long token covers) plus 4 KiB. Longer text could not fit the context. */
#define CLI_PROMPT_BYTES_PER_POSITION 32
size_t cli_prompt_limit(int context);

#endif
