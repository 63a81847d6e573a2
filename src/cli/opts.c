/* The option parser every command uses; see opts.h. */
#include "cli/opts.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

const char *const cli_common_help =
    "  -m, --model DIR     the model artifact (default: models/default, else the built-in\n"
    "                      synthetic model) for run, bench, perplexity, plan, tokenize,\n"
    "                      logits, info, verify and export-gguf\n"
    "  --backend B         auto (default: a GPU adapter, else the CPU), cpu or webgpu\n"
    "  --profile P         a runtime profile (profiles/, or a file); run, bench, serve and\n"
    "                      plan default to the fast one (throughput), exact is the reference\n"
    "  -t, --threads N     CPU threads (0: one per physical core available)\n"
    "  -o, --output PATH   where a writer puts its result; an existing non-empty target\n"
    "                      is refused unless --force (an empty directory is accepted)\n"
    "  -h, --help          every command takes it: its usage and all of its options\n";

/* Integer text: [+-]?[0-9]+ and nothing else. */
int cli_read_i64(const char *text, int64_t lo, int64_t hi, int64_t *out) {
  const char *p = text;
  if (*p == '+' || *p == '-') p++;
  if (!*p) return 0;
  for (const char *q = p; *q; q++)
    if (*q < '0' || *q > '9') return 0;
  errno = 0;
  char *end;
  long long v = strtoll(text, &end, 10);
  if (errno == ERANGE || *end || v < lo || v > hi) return 0;
  *out = (int64_t)v;
  return 1;
}

/* Number text: [+-]? digits [. digits] [e [+-] digits], at least one digit
 * before the exponent; strtod alone would take nan, inf, hex and spaces. */
int cli_read_num(const char *text, double lo, double hi, double *out) {
  const char *p = text;
  int digits = 0;
  if (*p == '+' || *p == '-') p++;
  while (*p >= '0' && *p <= '9') p++, digits++;
  if (*p == '.') {
    p++;
    while (*p >= '0' && *p <= '9') p++, digits++;
  }
  if (!digits) return 0;
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '+' || *p == '-') p++;
    if (!(*p >= '0' && *p <= '9')) return 0;
    while (*p >= '0' && *p <= '9') p++;
  }
  if (*p) return 0;
  errno = 0;
  double v = strtod(text, NULL);
  if (errno == ERANGE || !isfinite(v) || v < lo || v > hi) return 0;
  *out = v;
  return 1;
}

/* Whether `arg` (up to len chars) is one of the '|'-separated names. */
static int has_name(const char *names, const char *arg, size_t len) {
  for (const char *p = names; *p;) {
    const char *bar = strchr(p, '|');
    size_t n = bar ? (size_t)(bar - p) : strlen(p);
    if (n == len && !strncmp(p, arg, len)) return 1;
    p += n + (bar ? 1 : 0);
  }
  return 0;
}

/* The option's names for messages: "-n/--n-predict". */
static const char *shown(const cli_opt *o, char *buf, size_t cap) {
  snprintf(buf, cap, "%s", o->names);
  for (char *c = buf; *c; c++)
    if (*c == '|') *c = '/';
  return buf;
}

static int set_value(const cli_spec *s, const cli_opt *o, const char *v) {
  char nm[128];
  int64_t i;
  double d;
  switch (o->kind) {
  case CLI_STR:
    *(const char **)o->dst = v;
    return 1;
  case CLI_LIST: {
    cli_list *l = o->dst;
    if (l->n == CLI_LIST_MAX) {
      fprintf(stderr, "wisp %s: %s given more than %d times\n", s->cmd, shown(o, nm, sizeof nm), CLI_LIST_MAX);
      return 0;
    }
    l->v[l->n++] = v;
    return 1;
  }
  case CLI_INT:
  case CLI_I64:
    if (!cli_read_i64(v, (int64_t)o->lo, (int64_t)o->hi, &i)) {
      fprintf(stderr, "wisp %s: %s needs an integer in [%.0f, %.0f], got '%s'\n", s->cmd, shown(o, nm, sizeof nm),
              o->lo, o->hi, v);
      return 0;
    }
    if (o->kind == CLI_INT) *(int *)o->dst = (int)i;
    else *(int64_t *)o->dst = i;
    return 1;
  case CLI_NUM:
    if (!cli_read_num(v, o->lo, o->hi, &d)) {
      fprintf(stderr, "wisp %s: %s needs a number in [%g, %g], got '%s'\n", s->cmd, shown(o, nm, sizeof nm), o->lo,
              o->hi, v);
      return 0;
    }
    *(double *)o->dst = d;
    return 1;
  case CLI_FLAG:
    break;
  }
  return 0;
}

int cli_parse(const cli_spec *s, int argc, char **argv) {
  if (s->n_pos) *s->n_pos = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      cli_help(s, stdout);
      return 0;
    }
    if (a[0] != '-' || !a[1]) { /* positional (a lone "-" too) */
      if (!s->pos || !s->n_pos || *s->n_pos >= s->max_pos) {
        fprintf(stderr, "wisp %s: unexpected argument '%s' (see wisp %s --help)\n", s->cmd, a, s->cmd);
        return 2;
      }
      s->pos[(*s->n_pos)++] = a;
      continue;
    }
    /* "--name=value" is "--name value" */
    const char *eq = !strncmp(a, "--", 2) ? strchr(a, '=') : NULL;
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    const cli_opt *o = NULL;
    for (int k = 0; k < s->n_opts && !o; k++)
      if (has_name(s->opts[k].names, a, len)) o = &s->opts[k];
    if (!o) {
      fprintf(stderr, "wisp %s: unknown option '%.*s' (see wisp %s --help)\n", s->cmd, (int)len, a, s->cmd);
      return 2;
    }
    char nm[128];
    if (o->kind == CLI_FLAG) {
      if (eq) {
        fprintf(stderr, "wisp %s: %s takes no value\n", s->cmd, shown(o, nm, sizeof nm));
        return 2;
      }
      *(int *)o->dst = 1;
      continue;
    }
    const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
    if (!v) {
      fprintf(stderr, "wisp %s: %s needs a value (%s)\n", s->cmd, shown(o, nm, sizeof nm), o->arg ? o->arg : "VALUE");
      return 2;
    }
    if (!set_value(s, o, v)) return 2;
  }
  return CLI_CONTINUE;
}

/* Under --tuning: the keys for users (the table's; its test-only keys are
 * left out), wrapped under the help column. */
static void tuning_keys(FILE *f) {
  char keys[2048];
  wisp_session_tuning_keys(keys, sizeof keys);
  fprintf(f, "  %-24s keys:", "");
  int col = 33;
  for (char *save = NULL, *k = strtok_r(keys, ", ", &save); k; k = strtok_r(NULL, ", ", &save)) {
    if (col + 1 + (int)strlen(k) > 79) fprintf(f, "\n  %-24s", ""), col = 26;
    col += fprintf(f, " %s", k);
  }
  fprintf(f, "\n");
}

void cli_help(const cli_spec *s, FILE *f) {
  fprintf(f, "usage: wisp %s %s\n", s->cmd, s->synopsis ? s->synopsis : "[options]");
  if (s->about) fprintf(f, "\n%s\n", s->about);
  fprintf(f, "\noptions:\n");
  for (int k = 0; k < s->n_opts; k++) {
    const cli_opt *o = &s->opts[k];
    /* "-n|--n-predict" + "N" -> "-n, --n-predict N" */
    char left[160] = "";
    size_t n = 0;
    for (const char *p = o->names; *p && n + 3 < sizeof left; p++) {
      if (*p == '|') { left[n++] = ','; left[n++] = ' '; }
      else left[n++] = *p;
    }
    left[n] = 0;
    if (o->arg) snprintf(left + n, sizeof left - n, " %s", o->arg);
    if (strlen(left) > 24) fprintf(f, "  %s\n  %-24s %s\n", left, "", o->help);
    else fprintf(f, "  %-24s %s\n", left, o->help);
    if (!strcmp(o->names, "--tuning")) tuning_keys(f);
  }
  fprintf(f, "  %-24s %s\n", "-h, --help", "print this help and exit");
}
