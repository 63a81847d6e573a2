/* libFuzzer harness: the option parser every wisp command uses
 * (src/cli/opts.c). The input is an argument list, arguments separated by
 * NUL bytes, parsed against a table with every kind of option (flag,
 * string, int, int64, number, repeatable list) and room for positionals;
 * the strict number readers are also checked on every argument: what they
 * accept must be plain decimal text, finite and inside the range. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/opts.h"

#define MAX_ARGS 64

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  /* Help text is part of what is exercised, not of the report; the error
   * lines on stderr are silenced by running with -close_fd_mask=2 (make
   * fuzz does), which keeps libFuzzer's own reports. */
  if (!freopen("/dev/null", "w", stdout)) abort();
  return 0;
}

/* What the readers accepted must look like a decimal number. */
static void check_readers(const char *a) {
  int64_t i;
  double d;
  if (cli_read_i64(a, -1000, 1000000, &i)) {
    if (i < -1000 || i > 1000000 || i != strtoll(a, NULL, 10)) abort();
    for (const char *p = a; *p; p++)
      if (!(*p >= '0' && *p <= '9') && !(p == a && (*p == '-' || *p == '+'))) abort();
  }
  if (cli_read_num(a, -1e6, 1e6, &d)) {
    if (!isfinite(d) || d < -1e6 || d > 1e6) abort();
    if (strpbrk(a, "xXnNiI \t\n")) abort(); /* hex, nan, inf, spaces */
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = malloc(size + 1);
  if (!buf) return 0;
  memcpy(buf, data, size);
  buf[size] = 0;
  char *argv[MAX_ARGS + 1];
  int argc = 0;
  argv[argc++] = "fuzz";
  for (size_t at = 0; at <= size && argc < MAX_ARGS;) {
    argv[argc++] = buf + at;
    check_readers(buf + at);
    at += strlen(buf + at) + 1;
  }
  argv[argc] = NULL;

  const char *s = NULL, *pos[2];
  int flag = 0, n = 0, n_pos = 0;
  int64_t big = 0;
  double num = 0;
  cli_list list = {0};
  const cli_opt opts[] = {
      {"-f|--flag|-cnv", CLI_FLAG, &flag, 0, 0, NULL, "a flag"},
      {"-s|--str", CLI_STR, &s, 0, 0, "TEXT", "a string"},
      {"-n|--n-predict", CLI_INT, &n, -1, 1e9, "N", "an int"},
      {"--seed", CLI_I64, &big, -1, 9.2e18, "S", "an int64"},
      {"--temp", CLI_NUM, &num, 0, 100, "T", "a number"},
      {"--cap", CLI_LIST, &list, 0, 0, "K=V", "a list"},
  };
  const cli_spec spec = {"fuzz", "[options] [A [B]]", "about", opts, (int)(sizeof opts / sizeof opts[0]), pos, 2, &n_pos};
  int rc = cli_parse(&spec, argc, argv);
  if (rc != CLI_CONTINUE && rc != 0 && rc != 2) abort();
  if (rc == CLI_CONTINUE) {
    /* Every stored value is inside its range, every positional one of argv. */
    if (n < -1 || n > 1000000000 || big < -1 || !(num >= 0 && num <= 100) || n_pos < 0 || n_pos > 2) abort();
    if (list.n < 0 || list.n > CLI_LIST_MAX) abort();
    for (int i = 0; i < n_pos; i++)
      if (!pos[i]) abort();
  }
  free(buf);
  return 0;
}
