/* The one option parser of every `wisp <command>`: each command describes
 * its options in a table (names, kind, where the value goes, range, help)
 * and cli_parse() does the rest the same way everywhere:
 *   - `-h`/`--help` prints the command's usage and every option, exit 0;
 *   - `--name VALUE` and `--name=VALUE`; several names per option
 *     ("-n|--n-predict"), so old names stay as aliases;
 *   - numbers are strict: decimal only, no nan/inf, no trailing garbage,
 *     inside the option's range, else one line naming the option, exit 2;
 *   - words without a leading '-' are positional arguments (a lone "-" is
 *     one too: "read standard input").
 * Also the strict number readers themselves, for values that arrive in
 * other ways (comma-separated id lists). */
#ifndef WISP_CLI_OPTS_H
#define WISP_CLI_OPTS_H

#include <stdint.h>
#include <stdio.h>

typedef enum {
  CLI_FLAG,   /* int *: set to 1 */
  CLI_STR,    /* const char **: the value as given */
  CLI_INT,    /* int *: an integer in [lo, hi] */
  CLI_I64,    /* int64_t *: an integer in [lo, hi] (seeds) */
  CLI_NUM,    /* double *: a finite decimal number in [lo, hi] */
  CLI_LIST,   /* cli_list *: every value of a repeatable option */
} cli_kind;

#define CLI_LIST_MAX 32
typedef struct {
  const char *v[CLI_LIST_MAX];
  int n;
} cli_list;

typedef struct {
  const char *names; /* "-n|--n-predict": the first long name is shown first in help */
  cli_kind kind;
  void *dst;
  double lo, hi;     /* numbers: the accepted range (inclusive) */
  const char *arg;   /* the value's name in help ("N", "DIR"); NULL for flags */
  const char *help;
} cli_opt;

typedef struct {
  const char *cmd;        /* "run", "registry check" */
  const char *synopsis;   /* after "usage: wisp CMD " */
  const char *about;      /* paragraph(s) printed before the options; may be NULL */
  const cli_opt *opts;
  int n_opts;
  const char **pos;       /* room for positional arguments; NULL: none accepted */
  int max_pos;
  int *n_pos;
} cli_spec;

enum { CLI_CONTINUE = -1 };
/* Parses argv[1..argc-1] (argv[0] is the command's name). Returns
 * CLI_CONTINUE when the command should run, else the exit status to return
 * at once: 0 after printing help, 2 after a one-line error on stderr. */
int cli_parse(const cli_spec *spec, int argc, char **argv);
/* Prints the command's usage and option table. */
void cli_help(const cli_spec *spec, FILE *f);

/* Strict readers; return 1 and store, or 0 (nothing printed). Integers are
 * decimal with an optional sign; numbers are decimal with an optional
 * fraction and exponent; both reject empty text, spaces, nan, inf, hex and
 * anything trailing, and values outside [lo, hi]. */
int cli_read_i64(const char *text, int64_t lo, int64_t hi, int64_t *out);
int cli_read_num(const char *text, double lo, double hi, double *out);

/* The common options, listed by `wisp --help`. */
extern const char *const cli_common_help;

#endif
