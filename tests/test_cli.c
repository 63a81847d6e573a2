/* The command line as a user meets it (issue 20): --help on every command,
 * strict numbers, one -m convention, llama.cpp's habits, precise file
 * errors, non-finite logits, the overwrite rule, the results directory,
 * chat that survives bad turns and Ctrl-C, writers that clean up on Ctrl-C,
 * and the shipped model's digests. Interrupts are sent to children spawned
 * here, at points the test can see (an output marker, a FIFO opened), never
 * after a sleep. */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixtures.h"
#include "st_fixture.h"
#include "format/artifact.h"
#include "test.h"
#include "util/file.h"

#define DEFAULT_MODEL "models/default"

static int run_cmd(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int run_cmd(char *out, size_t cap, const char *fmt, ...) {
  char cmd[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  return test_run(cmd, out, cap);
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

TEST(cli_help_on_every_command) {
  static const char *const cmds[] = {"run", "bench", "gen-synthetic", "convert", "logits", "perplexity", "plan",
                                     "tokenize", "info", "verify", "export-gguf", "devices", "registry check",
                                     "kernels digest", "profile check", "plan-file", "serve", "tune"};
  char out[16384];
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    for (int form = 0; form < 2; form++) {
      int rc = run_cmd(out, sizeof out, "%s %s %s", test_wisp_bin(), cmds[i], form ? "--help" : "-h");
      CHECKF(rc == 0 && strstr(out, "usage: wisp "), "wisp %s --help: rc %d: %s", cmds[i], rc, out);
    }
  }
  /* run's help lists every option it takes */
  CHECK(run_cmd(out, sizeof out, "%s run --help", test_wisp_bin()) == 0);
  static const char *const run_opts[] = {"--model", "--prompt", "--file", "--n-predict", "--ctx-size", "--threads",
                                         "--backend", "--profile", "--temp", "--top-k", "--top-p", "--min-p",
                                         "--repeat-penalty", "--repeat-last-n", "--seed", "--ignore-eos", "--ids",
                                         "--chat", "-cnv", "-i,", "-sys", "--think", "--context-shift", "--help"};
  for (size_t i = 0; i < sizeof run_opts / sizeof run_opts[0]; i++)
    CHECKF(strstr(out, run_opts[i]), "run --help lacks %s", run_opts[i]);
  /* wisp --help: every command and the common options */
  CHECK(run_cmd(out, sizeof out, "%s --help", test_wisp_bin()) == 0);
  static const char *const top[] = {"run ", "bench ", "gen-synthetic", "convert ", "logits ", "perplexity ", "plan ",
                                    "tokenize ", "info ", "verify ", "export-gguf", "devices", "registry", "kernels",
                                    "profile", "plan-file", "serve ", "tune ", "--chat", "-c, --ctx-size", "-t, --threads", "--min-p",
                                    "--repeat-penalty", "--backend", "--profile", "-sys", "--force", "--version"};
  for (size_t i = 0; i < sizeof top / sizeof top[0]; i++) CHECKF(strstr(out, top[i]), "wisp --help lacks %s", top[i]);
  CHECK(run_cmd(out, sizeof out, "%s --version", test_wisp_bin()) == 0);
  CHECKF(!strncmp(out, "wisp ", 5) && strstr(out, "\ndawn: "), "%s", out);
}

TEST(cli_numbers_are_strict) {
  static const struct { const char *args, *names; } bad[] = {
      {"run -n nan", "-n/--n-predict"},       {"run -n 2.5", "-n/--n-predict"},
      {"run -n 0x10", "-n/--n-predict"},     {"run -n 16abc", "-n/--n-predict"},
      {"run -n -2", "-n/--n-predict"},       {"run -t inf", "-t/--threads"},
      {"run -c nan", "-c/--ctx-size"},       {"run --seed nan", "-s/--seed"},
      {"run --seed 1e3", "-s/--seed"},       {"run --top-k ' 5'", "--top-k"},
      {"run --temp nan", "--temp"},          {"run --temp inf", "--temp"},
      {"run --temp 0x1p3", "--temp"},        {"run --top-p 1.5", "--top-p"},
      {"run --min-p=-0.1", "--min-p"},       {"run --repeat-penalty 1e999", "--repeat-penalty"},
      {"logits --tokens 1 --greedy abc", "--greedy"}, {"bench -p 0", "-p/--n-prompt/--prompt"},
      {"bench --decode nan", "-n/--n-gen/--decode"}, {"perplexity -f x --window 1", "--window"},
      {"gen-synthetic --small -o x --seed -5", "--seed"}, {"plan-file --prefill-tokens 1.5", "--prefill-tokens"},
  };
  char out[4096];
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = run_cmd(out, sizeof out, "%s %s", test_wisp_bin(), bad[i].args);
    CHECKF(rc == 2 && count_lines(out) == 1 && strstr(out, bad[i].names), "wisp %s: rc %d: %s", bad[i].args, rc, out);
  }
  /* unknown options and missing values: one line, exit 2 */
  CHECK(run_cmd(out, sizeof out, "%s info --bogus", test_wisp_bin()) == 2 && count_lines(out) == 1);
  CHECK(run_cmd(out, sizeof out, "%s run --backend cpu --profile exact -n", test_wisp_bin()) == 2 && strstr(out, "needs a value"));
}

TEST(cli_decode_ids_outside_the_vocabulary) {
  char out[4096];
  int rc = run_cmd(out, sizeof out, "%s tokenize -m %s --decode 99999,-1", test_wisp_bin(), DEFAULT_MODEL);
  CHECKF(rc == 1 && strstr(out, "id 99999 is outside the vocabulary"), "rc %d: %s", rc, out);
  rc = run_cmd(out, sizeof out, "%s tokenize -m %s --decode 5,-1", test_wisp_bin(), DEFAULT_MODEL);
  CHECKF(rc == 1 && strstr(out, "id -1 is outside"), "rc %d: %s", rc, out);
  rc = run_cmd(out, sizeof out, "%s tokenize -m %s --decode 1,x", test_wisp_bin(), DEFAULT_MODEL);
  CHECKF(rc == 1 && strstr(out, "comma-separated decimal ids"), "rc %d: %s", rc, out);
  rc = run_cmd(out, sizeof out, "%s tokenize -m %s --decode 301,359", test_wisp_bin(), DEFAULT_MODEL);
  CHECKF(rc == 0 && out[0], "rc %d: %s", rc, out);
}

TEST(cli_model_convention_is_the_same_everywhere) {
  char out[16384], out2[16384];
  /* -m DIR and DIR alike for info and verify */
  CHECKF(run_cmd(out, sizeof out, "%s info %s", test_wisp_bin(), DEFAULT_MODEL) == 0 && strstr(out, "architecture:"),
         "%s", out);
  CHECKF(run_cmd(out, sizeof out, "%s info -m %s", test_wisp_bin(), DEFAULT_MODEL) == 0, "%s", out);
  /* the default model where a model is optional: tokenize, logits */
  CHECKF(run_cmd(out, sizeof out, "%s tokenize -p hello", test_wisp_bin()) == 0 && out[0] == '[', "%s", out);
  CHECK(run_cmd(out2, sizeof out2, "%s tokenize -m %s -p hello", test_wisp_bin(), DEFAULT_MODEL) == 0);
  CHECKF(!strcmp(out, out2), "%s vs %s", out, out2);
  CHECKF(run_cmd(out, sizeof out, "%s logits --backend cpu --tokens 1,2", test_wisp_bin()) == 0 && strstr(out, "\"logits\""), "%s",
         out);
}

/* The shipped model carries its digests: verify passes and agrees with info --verify. */
TEST(cli_verify_default_model) {
  char out[16384], out2[16384];
  int rc = run_cmd(out, sizeof out, "%s verify %s", test_wisp_bin(), DEFAULT_MODEL);
  CHECKF(rc == 0 && strstr(out, "verified"), "rc %d: %s", rc, out);
  rc = run_cmd(out2, sizeof out2, "%s info --verify -m %s", test_wisp_bin(), DEFAULT_MODEL);
  CHECKF(rc == 0, "%s", out2);
  const char *a = strstr(out, "(sha256 "), *b = strstr(out2, "sha256:");
  CHECK(a && b);
  b += 7;
  while (*b == ' ') b++;
  CHECKF(!strncmp(a + 8, b, 64), "verify: %s\ninfo: %s", out, out2);
}

TEST(cli_llama_cpp_habits) {
  char out[16384], out2[16384];
  const char *file = fixture_write("prompt.txt", "And it came to pass");
  /* -f FILE and -p - give what -p TEXT gives */
  CHECK(run_cmd(out, sizeof out, "%s run --backend cpu --profile exact -m %s -p 'And it came to pass' -n 6 --temp 0 --ids", test_wisp_bin(),
                DEFAULT_MODEL) == 0);
  CHECK(run_cmd(out2, sizeof out2, "%s run --backend cpu --profile exact -m %s -f %s -n 6 --temp 0 --ids", test_wisp_bin(), DEFAULT_MODEL, file) == 0);
  /* the same ids (the line up to its end; timings follow) */
#define SAME_IDS(a, b) (a && b && strcspn(a, "\n") == strcspn(b, "\n") && !strncmp(a, b, strcspn(a, "\n")))
  const char *g1 = strstr(out, "generated ids:"), *g2 = strstr(out2, "generated ids:");
  CHECKF(SAME_IDS(g1, g2), "%s\n---\n%s", out, out2);
  CHECK(run_cmd(out2, sizeof out2, "printf 'And it came to pass' | %s run --backend cpu --profile exact -m %s -p - -n 6 --temp 0 --ids",
                test_wisp_bin(), DEFAULT_MODEL) == 0);
  g2 = strstr(out2, "generated ids:");
  CHECKF(SAME_IDS(g1, g2), "%s\n---\n%s", out, out2);
  /* -n -1: until the end of the context (-c 12) when EOS is ignored */
  CHECK(run_cmd(out, sizeof out, "%s run --backend cpu --profile exact -m %s -p 'And it came to pass' -c 12 -n -1 --ignore-eos --temp 0 --ids",
                test_wisp_bin(), DEFAULT_MODEL) == 0);
  g1 = strstr(out, "generated ids:");
  CHECKF(g1, "%s", out);
  int ids = 0;
  for (const char *p = g1 + 14; *p && *p != '\n'; p++) ids += *p == ' ';
  CHECKF(ids == 12 - 6, "%d ids: %s", ids, out); /* 6 prompt tokens (BOS + 5) */
  /* --seed -1 (the default) picks a seed and prints it */
  CHECK(run_cmd(out, sizeof out, "%s run --backend cpu --profile exact -m %s -n 2 --seed -1 --temp 0.8", test_wisp_bin(), DEFAULT_MODEL) == 0);
  CHECKF(strstr(out, " | seed "), "%s", out);
  /* -cnv and -i are --chat */
  CHECKF(run_cmd(out, sizeof out, "printf 'hi\\n' | %s run --backend cpu --profile exact -m %s -cnv -n 3", test_wisp_bin(), DEFAULT_MODEL) == 0 &&
             strstr(out, "[reply 1:"), "%s", out);
  CHECKF(run_cmd(out, sizeof out, "printf 'hi\\n' | %s run --backend cpu --profile exact -m %s -i -n 3", test_wisp_bin(), DEFAULT_MODEL) == 0 &&
             strstr(out, "[reply 1:"), "%s", out);
  /* -c above the model's maximum names the maximum; -sys needs --chat */
  CHECKF(run_cmd(out, sizeof out, "%s run --backend cpu --profile exact -m %s -c 100000", test_wisp_bin(), DEFAULT_MODEL) == 1 &&
             strstr(out, "maximum context of 512"), "%s", out);
  CHECKF(run_cmd(out, sizeof out, "%s run --backend cpu --profile exact -m %s -sys hi", test_wisp_bin(), DEFAULT_MODEL) == 2 &&
             strstr(out, "needs --chat"), "%s", out);
  /* bench: -p N -n N, and the old names */
  char r1[600], r2[600];
  snprintf(r1, sizeof r1, "%s/b1.json", test_tmpdir());
  snprintf(r2, sizeof r2, "%s/b2.json", test_tmpdir());
  CHECKF(run_cmd(out, sizeof out, "%s bench --backend cpu --profile exact -m %s -p 4 -n 3 --no-warmup -o %s", test_wisp_bin(), DEFAULT_MODEL, r1) == 0,
         "%s", out);
  CHECKF(run_cmd(out, sizeof out, "%s bench --backend cpu --profile exact -m %s --prompt 4 --decode 3 --no-warmup -o %s", test_wisp_bin(),
                 DEFAULT_MODEL, r2) == 0, "%s", out);
  char *t1 = NULL, *t2 = NULL;
  CHECK(wisp_read_file(r1, &t1, NULL) == 0 && wisp_read_file(r2, &t2, NULL) == 0);
  int same = strstr(t1, "\"prompt_tokens\":\t4") && strstr(t1, "\"decode_tokens\":\t3") &&
             strstr(t2, "\"prompt_tokens\":\t4") && strstr(t2, "\"decode_tokens\":\t3");
  free(t1);
  free(t2);
  CHECK(same);
  /* bench --temp: the decode samples (wisp run's top-k / top-p / min-p by
   * default, seed 1), says so in the receipt, and makes other tokens than
   * the greedy decode; the same seed makes the same ones */
  char r3[600], r4[600], r5[600];
  snprintf(r3, sizeof r3, "%s/b3.json", test_tmpdir());
  snprintf(r4, sizeof r4, "%s/b4.json", test_tmpdir());
  snprintf(r5, sizeof r5, "%s/b5.json", test_tmpdir());
  const char *runs[3][2] = {{r3, ""}, {r4, "--temp 1.5"}, {r5, "--temp 1.5 --seed 1"}};
  for (int i = 0; i < 3; i++)
    CHECKF(run_cmd(out, sizeof out, "%s bench --backend cpu --profile exact -m %s -p 4 -n 24 --no-warmup %s -o %s",
                   test_wisp_bin(), DEFAULT_MODEL, runs[i][1], runs[i][0]) == 0, "%s", out);
  char *t[3] = {NULL, NULL, NULL};
  const char *fp[3] = {NULL, NULL, NULL};
  for (int i = 0; i < 3; i++) {
    CHECK(wisp_read_file(runs[i][0], &t[i], NULL) == 0);
    fp[i] = t[i] ? strstr(t[i], "\"output_fingerprint\"") : NULL;
    CHECK(fp[i] != NULL);
  }
  if (fp[0] && fp[1] && fp[2]) {
    CHECKF(strstr(t[0], "\"sampling\":\t{\n\t\t\"temperature\":\t0\n"), "%s", t[0]);
    CHECKF(strstr(t[1], "\"temperature\":\t1.5,\n\t\t\"top_k\":\t40,\n\t\t\"top_p\":\t0.95,\n\t\t\"min_p\":\t0.05,"),
           "%s", t[1]);
    CHECK(strncmp(fp[0], fp[1], 90) != 0);
    CHECK(strncmp(fp[1], fp[2], 90) == 0);
  }
  for (int i = 0; i < 3; i++) free(t[i]);
}

TEST(cli_files_say_what_is_wrong) {
  char out[4096];
  CHECKF(run_cmd(out, sizeof out, "%s perplexity --backend cpu -m %s -f /tmp", test_wisp_bin(), DEFAULT_MODEL) == 1 &&
             strstr(out, "/tmp: is a directory") && count_lines(out) == 1, "%s", out);
  CHECKF(run_cmd(out, sizeof out, "%s tokenize --tokenizer /tmp -p x", test_wisp_bin()) == 1 &&
             strstr(out, "/tmp: is a directory"), "%s", out);
  char dir[600];
  snprintf(dir, sizeof dir, "%s/dir_manifest", test_tmpdir());
  CHECK(run_cmd(NULL, 0, "mkdir -p %s/manifest.json", dir) == 0);
  CHECKF(run_cmd(out, sizeof out, "%s info %s", test_wisp_bin(), dir) == 1 && strstr(out, "is a directory"), "%s", out);
  CHECKF(run_cmd(out, sizeof out, "%s run --backend cpu --profile exact -m %s -f /nonexistent/x", test_wisp_bin(), DEFAULT_MODEL) == 1 &&
             strstr(out, "No such file"), "%s", out);
}

/* A copy of the small model whose first f32 section is NaN. */
static const char *nan_model(void) {
  const char *dir = fixture_variant("nan_model", NULL, 0);
  if (!dir) return NULL;
  wisp_artifact *a = NULL;
  if (wisp_artifact_open(dir, &a)) return NULL;
  uint64_t off = 0, bytes = 0;
  for (int i = 0; i < a->n_sections && !bytes; i++) {
    const char *n = a->sections[i].name;
    size_t l = strlen(n);
    if (l > 7 && !strcmp(n + l - 7, ".scales")) { /* f32: Q4 block scales */
      off = a->sections[i].offset;
      bytes = a->sections[i].bytes;
    }
  }
  wisp_artifact_free(a);
  if (!bytes) return NULL;
  char path[700];
  snprintf(path, sizeof path, "%s/weights.bin", dir);
  int fd = open(path, O_WRONLY);
  if (fd < 0) return NULL;
  const float nan = __builtin_nanf("");
  for (uint64_t k = 0; k < bytes; k += 4)
    if (pwrite(fd, &nan, 4, (off_t)(off + k)) != 4) { close(fd); return NULL; }
  close(fd);
  return fixture_rehash(dir) == 0 ? dir : NULL; /* NaN on purpose: recorded, so the model opens */
}

TEST(cli_non_finite_logits_are_errors) {
  const char *dir = nan_model();
  CHECK(dir);
  char out[8192];
  int rc = run_cmd(out, sizeof out, "%s run --backend cpu --profile exact -m %s -p hello -n 8 --temp 0", test_wisp_bin(), dir);
  CHECKF(rc == 1 && strstr(out, "non-finite logit"), "rc %d: %s", rc, out);
  const char *text = fixture_write("ppl.txt", "hello there, hello again");
  rc = run_cmd(out, sizeof out, "%s perplexity --backend cpu -m %s -f %s", test_wisp_bin(), dir, text);
  CHECKF(rc == 1 && !strstr(out, "nan") && !strstr(out, "{"), "rc %d: %s", rc, out);
  /* a healthy model's JSON line parses */
  rc = run_cmd(out, sizeof out, "%s perplexity --backend cpu -m %s -f %s", test_wisp_bin(), fixture_small_model(), text);
  cJSON *j = rc == 0 && strchr(out, '{') ? cJSON_Parse(strchr(out, '{')) : NULL;
  int ok = j && cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(j, "nll"));
  cJSON_Delete(j);
  CHECKF(ok, "rc %d: %s", rc, out);
}

/* Non-finite logits met inside the decode loop (no prompt evaluated first,
 * so no host-side check saw them): generation stops with an error instead
 * of emitting whatever id an argmax over NaN gives. */
TEST(cli_decode_loop_stops_at_non_finite_logits) {
  const char *dir = nan_model();
  CHECK(dir);
  wisp_model *m = NULL;
  wisp_session *s = NULL;
  CHECKF(wisp_model_open(dir, &m) == WISP_OK, "%s", wisp_last_error());
  wisp_session_options so = {.backend = "cpu", .threads = 1};
  if (wisp_session_new(m, &so, &s) != WISP_OK) { wisp_model_close(m); CHECKF(0, "%s", wisp_last_error()); }
  int32_t out[8];
  int n = 0;
  wisp_generate_options go = {.batch = 4};
  wisp_status st = wisp_session_generate(s, 1, 8, &go, out, &n);
  char msg[512];
  snprintf(msg, sizeof msg, "%s", st ? wisp_last_error() : "");
  wisp_session_free(s);
  wisp_model_close(m);
  CHECKF(st != WISP_OK && strstr(msg, "non-finite logits"), "status %d, %d tokens: %s", (int)st, n, msg);
}

TEST(cli_one_overwrite_rule) {
  char out[8192], path[700];
  const char *src = fixture_small_model();
  /* gen-synthetic / convert targets: an empty directory is fine */
  snprintf(path, sizeof path, "%s/ow_empty", test_tmpdir());
  CHECK(mkdir(path, 0755) == 0);
  CHECKF(run_cmd(out, sizeof out, "%s gen-synthetic --small -o %s", test_wisp_bin(), path) == 0, "%s", out);
  /* now it is an artifact: refused, then replaced with --force */
  CHECKF(run_cmd(out, sizeof out, "%s gen-synthetic --small -o %s", test_wisp_bin(), path) == 2 &&
             strstr(out, "--force"), "%s", out);
  CHECKF(run_cmd(out, sizeof out, "%s gen-synthetic --small -o %s --seed 3 --force", test_wisp_bin(), path) == 0,
         "%s", out);
  /* export-gguf: an existing file is kept without --force */
  snprintf(path, sizeof path, "%s/ow.gguf", test_tmpdir());
  CHECK(run_cmd(NULL, 0, "echo keep > %s", path) == 0);
  CHECKF(run_cmd(out, sizeof out, "%s export-gguf %s -o %s", test_wisp_bin(), src, path) == 2 &&
             strstr(out, "not overwriting"), "%s", out);
  char *kept = NULL;
  CHECK(wisp_read_file(path, &kept, NULL) == 0);
  int same = !strcmp(kept, "keep\n");
  free(kept);
  CHECK(same);
  CHECKF(run_cmd(out, sizeof out, "%s export-gguf %s -o %s --force", test_wisp_bin(), src, path) == 0, "%s", out);
  /* bench -o and logits -o follow the same rule */
  CHECKF(run_cmd(out, sizeof out, "%s bench --backend cpu --profile exact -m %s -p 2 -n 1 -o %s", test_wisp_bin(), src, path) == 2, "%s", out);
  CHECKF(run_cmd(out, sizeof out, "%s logits --backend cpu -m %s --tokens 1 -o %s", test_wisp_bin(), src, path) == 2, "%s", out);
}

/* bench's receipts go to bench/results of the wisp tree (here $WISP_HOME),
 * not into the directory bench runs in. */
TEST(cli_bench_results_directory) {
  char out[8192], home[700], cwd[700], abs_model[1400], here[600];
  CHECK(getcwd(here, sizeof here));
  snprintf(home, sizeof home, "%s/%s/home", here, test_tmpdir());
  snprintf(cwd, sizeof cwd, "%s/%s/elsewhere", here, test_tmpdir());
  snprintf(abs_model, sizeof abs_model, "%s/%s", here, fixture_small_model());
  CHECK(mkdir(home, 0755) == 0 && mkdir(cwd, 0755) == 0);
  /* a wisp tree of its own: the data directories, linked */
  CHECK(run_cmd(NULL, 0, "ln -s %s/kernels %s/profiles %s/assets %s/src %s/", here, here, here, here, home) == 0);
  char bin[800];
  snprintf(bin, sizeof bin, "%s%s%s", test_wisp_bin()[0] == '/' ? "" : here, test_wisp_bin()[0] == '/' ? "" : "/",
           test_wisp_bin());
  int rc = run_cmd(out, sizeof out, "cd %s && WISP_HOME=%s %s bench --backend cpu --profile exact -m %s -p 2 -n 1 --no-warmup", cwd, home, bin,
                   abs_model);
  CHECKF(rc == 0, "%s", out);
  char p[900];
  snprintf(p, sizeof p, "%s/bench", cwd);
  CHECKF(!wisp_path_exists(p), "bench wrote %s", p);
  snprintf(p, sizeof p, "receipt: %s/bench/results/", home);
  CHECKF(strstr(out, p), "%s", out);
}

TEST(cli_chat_keeps_the_session) {
  char out[32768];
  /* a line that is not UTF-8 is refused; the next turn is answered */
  int rc = run_cmd(out, sizeof out, "printf 'hello\\n\\377\\376\\nagain\\n' | %s run --backend cpu --profile exact -m %s --chat -n 4 --temp 0",
                   test_wisp_bin(), DEFAULT_MODEL);
  CHECKF(rc == 0 && strstr(out, "not valid UTF-8") && strstr(out, "[reply 2:"), "rc %d: %s", rc, out);
  /* a turn past the context is refused (and says how to shift) */
  rc = run_cmd(out, sizeof out,
               "printf 'one two three four five six seven eight nine ten eleven twelve thirteen fourteen\\nhi\\n' | "
               "%s run --backend cpu --profile exact -m %s --chat -c 20 -n 2 --temp 0", test_wisp_bin(), DEFAULT_MODEL);
  CHECKF(rc == 0 && strstr(out, "[turn refused: this turn") && strstr(out, "--context-shift") &&
             strstr(out, "[reply 1:"), "rc %d: %s", rc, out);
  /* --context-shift drops the oldest turns instead */
  rc = run_cmd(out, sizeof out,
               "printf 'In the beginning\\nAnd God said\\nLet there be light\\nand there was light\\n' | "
               "%s run --backend cpu --profile exact -m %s --chat -c 40 -n 6 --temp 0 --context-shift", test_wisp_bin(), DEFAULT_MODEL);
  CHECKF(rc == 0 && strstr(out, "[context full: dropped the oldest") && strstr(out, "[reply 4:") &&
             !strstr(out, "turn refused"), "rc %d: %s", rc, out);
}

/* ---- children driven through pipes ---- */

typedef struct {
  pid_t pid;
  int in, out, err; /* our ends */
  int out_w;        /* a writer end of the child's stdout, to fill it */
} child;

static int spawn(child *c, char *const argv[]) {
  int pin[2], pout[2], perr[2];
  if (pipe(pin) || pipe(pout) || pipe(perr)) return -1;
  c->pid = fork();
  if (c->pid < 0) return -1;
  if (c->pid == 0) {
    dup2(pin[0], 0);
    dup2(pout[1], 1);
    dup2(perr[1], 2);
    close(pin[1]);
    close(pout[0]);
    close(perr[0]);
    execv(argv[0], argv);
    _exit(127);
  }
  close(pin[0]);
  close(perr[1]);
  c->in = pin[1];
  c->out = pout[0];
  c->out_w = pout[1];
  c->err = perr[0];
  return 0;
}

/* How long a child may stay silent before the test gives up on it as
 * hung: a guard against a test that never ends, far beyond any wait a
 * loaded machine causes (the child answers in milliseconds). */
#define CHILD_SILENCE_S 300

/* Reads the child's stderr into err (appending) until `marker` appears,
 * discarding its stdout meanwhile (so that it never blocks on it) when
 * drain is set; 0 on end of file or after CHILD_SILENCE_S seconds without
 * a byte (noted in err). */
static int pump(child *c, char *err, size_t cap, size_t *len, const char *marker, int drain) {
  while (!strstr(err, marker)) {
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(c->err, &fds);
    if (drain) FD_SET(c->out, &fds);
    int mx = c->err > c->out ? c->err : c->out;
    struct timeval idle = {CHILD_SILENCE_S, 0};
    int ready = select(mx + 1, &fds, NULL, NULL, &idle);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return 0;
    }
    if (ready == 0) {
      snprintf(err + *len, cap - *len, "\n[the child wrote nothing for %d s while the test waited for '%s']",
               CHILD_SILENCE_S, marker);
      return 0;
    }
    if (drain && FD_ISSET(c->out, &fds)) {
      char tmp[8192];
      if (read(c->out, tmp, sizeof tmp) < 0 && errno != EINTR) return 0;
    }
    if (FD_ISSET(c->err, &fds)) {
      if (*len + 1 >= cap) return 0;
      ssize_t n = read(c->err, err + *len, cap - 1 - *len);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return 0;
      *len += (size_t)n;
      err[*len] = 0;
    }
  }
  return 1;
}

/* Ends a child the test has given up on (kill, reap, close), so that a
 * failed check leaves no process behind and no wait that never returns. */
static void abandon(child *c) {
  kill(c->pid, SIGKILL);
  while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR) {}
  close(c->in);
  close(c->out);
  close(c->out_w);
  close(c->err);
}

static int finish(child *c) {
  int st;
  close(c->in);
  close(c->out);
  close(c->out_w);
  close(c->err);
  while (waitpid(c->pid, &st, 0) < 0 && errno == EINTR) {}
  return st;
}

/* Ctrl-C stops the reply being written and the session goes on; Ctrl-C at
 * the prompt ends it. The reply cannot end first: --ignore-eos -n -1 runs
 * it to the end of the context, and its stdout is a pipe kept nearly full,
 * so it blocks after its first bytes until this test reads. */
TEST(cli_chat_ctrl_c) {
  char bin[700];
  snprintf(bin, sizeof bin, "%s", test_wisp_bin());
  char *argv[] = {bin, "run", "--backend", "cpu", "--profile", "exact", "-m", DEFAULT_MODEL, "--chat", "-n", "-1", "--ignore-eos", "--temp", "0", NULL};
  child c;
  CHECK(spawn(&c, argv) == 0);
  /* Fill the child's stdout but for 64 bytes, room for a token or two: two
   * pages (a pipe holds whole pages), the second 64 bytes short. */
  static const char fill[4096];
  const size_t filled = 4096 + 4096 - 64;
  char err[32768] = "";
  size_t elen = 0;
#define CHILD_CHECK(cond, ...)                                                                                         \
  do {                                                                                                                 \
    if (!(cond)) {                                                                                                     \
      abandon(&c);                                                                                                     \
      CHECKF(0, __VA_ARGS__);                                                                                          \
    }                                                                                                                  \
  } while (0)
  CHILD_CHECK(fcntl(c.out, F_SETPIPE_SZ, 8192) == 8192, "F_SETPIPE_SZ");
  CHILD_CHECK(fcntl(c.out_w, F_SETFL, O_NONBLOCK) == 0, "O_NONBLOCK");
  CHILD_CHECK(write(c.out_w, fill, 4096) == 4096 && write(c.out_w, fill, 4096 - 64) == 4096 - 64, "filling the pipe");
  CHILD_CHECK(pump(&c, err, sizeof err, &elen, "Ctrl-C stops a reply", 0), "%s", err);
  CHILD_CHECK(write(c.in, "And it came to pass\n", 20) == 20, "writing the prompt");
  /* Reply bytes in the pipe: the child is writing its reply. Polled for a
   * condition; only a child silent for CHILD_SILENCE_S is taken as hung. */
  for (int polls = 0;; polls++) {
    int avail = 0;
    CHILD_CHECK(ioctl(c.out, FIONREAD, &avail) == 0, "FIONREAD");
    if ((size_t)avail > filled) break;
    CHILD_CHECK(polls < CHILD_SILENCE_S * 1000 && waitpid(c.pid, NULL, WNOHANG) == 0,
                "the child wrote no reply (ended, or silent for %d s): %s", CHILD_SILENCE_S, err);
    usleep(1000);
  }
  kill(c.pid, SIGINT);
  CHILD_CHECK(pump(&c, err, sizeof err, &elen, "; interrupted]", 1), "%s", err);
  CHILD_CHECK(write(c.in, "again\n", 6) == 6, "writing the second prompt");
  CHILD_CHECK(pump(&c, err, sizeof err, &elen, "[reply 2:", 1), "%s", err);
#undef CHILD_CHECK
  /* now at the prompt (or about to be): Ctrl-C ends the session, exit 0,
   * with its standard input still open (so not by end of input) */
  kill(c.pid, SIGINT);
  int st;
  while (waitpid(c.pid, &st, 0) < 0 && errno == EINTR) {}
  CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, err);
  close(c.in);
  close(c.out);
  close(c.out_w);
  close(c.err);
}

/* Whether test_tmpdir() holds an entry whose name starts with prefix. */
static int tmp_has(const char *prefix) {
  char out[4096];
  run_cmd(out, sizeof out, "ls -a %s", test_tmpdir());
  for (const char *p = out; (p = strstr(p, prefix)); p++)
    if (p == out || p[-1] == '\n') return 1;
  return 0;
}

/* SIGINT while convert writes: its tokenizer.json is a FIFO, which convert
 * reads twice, first to check it (fed here) and then to copy it into
 * DIR.partial-PID/, where it waits for a writer that never comes. Once that
 * directory exists the child cannot finish; SIGINT must leave nothing. */
TEST(cli_convert_ctrl_c_removes_temporaries) {
  char hf[700], out_dir[700], fifo[800];
  snprintf(hf, sizeof hf, "%s/hf_sigint", test_tmpdir());
  snprintf(out_dir, sizeof out_dir, "%s/sigint_art", test_tmpdir());
  snprintf(fifo, sizeof fifo, "%s/tokenizer.json", hf);
  CHECK(mkdir(hf, 0755) == 0 && fx_write_tiny_lfm2(hf, NULL) == 0);
  CHECK(mkfifo(fifo, 0644) == 0);
  char bin[700];
  snprintf(bin, sizeof bin, "%s", test_wisp_bin());
  char *argv[] = {bin, "convert", hf, "-o", out_dir, "--quant", "f32", NULL};
  child c;
  CHECK(spawn(&c, argv) == 0);
  static const char json[] = "{\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true},"
                             "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"c\":2},\"merges\":[]}}";
  int fd = open(fifo, O_WRONLY); /* returns when convert opens it the first time */
  CHECK(fd >= 0);
  CHECK(write(fd, json, sizeof json - 1) == (ssize_t)(sizeof json - 1));
  close(fd);
  char partial[800];
  snprintf(partial, sizeof partial, "%s.partial-%d", out_dir, (int)c.pid);
  while (!wisp_path_exists(partial)) {
    int st;
    CHECKF(waitpid(c.pid, &st, WNOHANG) == 0, "convert ended before writing (status %d)", st);
    usleep(1000); /* polling for a condition; no time limit is assumed */
  }
  kill(c.pid, SIGINT);
  int st = finish(&c);
  CHECKF(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT, "status %d", st);
  CHECKF(!tmp_has("sigint_art"), "left behind in %s", test_tmpdir());
}

/* The same for export-gguf. Its temporary is created afresh (O_EXCL), so
 * the child is held inside the write instead: a preloaded fsync (built here
 * with cc) opens a FIFO for reading, which blocks until this test opens it
 * for writing, and then waits on it until the test closes its end; the
 * temporary, complete, exists by then. */
TEST(cli_export_gguf_ctrl_c_removes_temporary) {
  char out[800], tmp[900], gate_fifo[800], so[800], cmd[4096], log[4096];
  snprintf(out, sizeof out, "%s/sigint.gguf", test_tmpdir());
  snprintf(gate_fifo, sizeof gate_fifo, "%s/fsync-gate", test_tmpdir());
  snprintf(so, sizeof so, "%s/fsync_gate.so", test_tmpdir());
  snprintf(cmd, sizeof cmd,
           "printf '#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <fcntl.h>\n#include <unistd.h>\n"
           "int fsync(int fd) {\n  int g = open(\"%s\", O_RDONLY);\n  char c;\n  if (g >= 0) { (void)!read(g, &c, 1); close(g); }\n"
           "  int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, \"fsync\");\n  return real(fd);\n}\n' > %s.c && "
           "cc -shared -fPIC -o %s %s.c -ldl",
           gate_fifo, so, so, so);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "building the fsync gate: %s", log);
  CHECK(mkfifo(gate_fifo, 0644) == 0);
  char bin[700], preload[900];
  snprintf(bin, sizeof bin, "%s", test_wisp_bin());
  snprintf(preload, sizeof preload, "LD_PRELOAD=%s", so);
  char *argv[] = {bin, "export-gguf", (char *)fixture_small_model(), "-o", out, NULL};
  char *envp[] = {preload, "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0", NULL};
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    execve(argv[0], argv, envp);
    _exit(127);
  }
  snprintf(tmp, sizeof tmp, "%s.tmp-%d", out, (int)pid);
  /* open returns when the writer is in its fsync; the writer then waits in
   * read until this end closes, so it cannot finish (and rename its
   * temporary) before the signal: no race with the check below. */
  int fd = open(gate_fifo, O_WRONLY);
  const int tmp_existed = fd >= 0 && wisp_path_exists(tmp);
  kill(pid, SIGINT); /* before any check can return: a failing test leaves no writer behind */
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  if (fd >= 0) close(fd);
  CHECK(fd >= 0);
  CHECKF(tmp_existed, "no temporary %s while the writer syncs it", tmp);
  CHECKF(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT, "status %d", st);
  char lock[900];
  snprintf(lock, sizeof lock, "%s.wisp-lock", out);
  CHECKF(!wisp_path_exists(tmp) && !wisp_path_exists(out) && !wisp_path_exists(lock), "%s, %s or %s left behind", tmp,
         out, lock);
}

/* gen-synthetic --context: the small shape (512 positions, stored rope
 * tables) made for 2,048 positions computes its tables instead: the same
 * greedy ids where both reach, and a prompt past 512 runs where the stored
 * tables refuse it. */
TEST(cli_gen_synthetic_context) {
  char out[8192], a[700], b[700], ida[1024] = "", idb[1024] = "";
  snprintf(a, sizeof a, "%s/ctx_stored", test_tmpdir());
  snprintf(b, sizeof b, "%s/ctx_2048", test_tmpdir());
  CHECKF(run_cmd(out, sizeof out, "%s gen-synthetic --small -o %s --seed 4", test_wisp_bin(), a) == 0, "%s", out);
  CHECKF(run_cmd(out, sizeof out, "%s gen-synthetic --small --context 2048 -o %s --seed 4", test_wisp_bin(), b) == 0,
         "%s", out);
  const char *dirs[2] = {a, b};
  char *ids[2] = {ida, idb};
  for (int i = 0; i < 2; i++) {
    CHECKF(run_cmd(out, sizeof out, "%s run -m %s -p 'one two three' -n 12 --temp 0 --ids --backend cpu -t 1",
                   test_wisp_bin(), dirs[i]) == 0, "%s", out);
    const char *g = strstr(out, "generated ids:");
    CHECKF(g, "no ids: %s", out);
    snprintf(ids[i], sizeof ida, "%.*s", (int)strcspn(g, "\n"), g);
  }
  CHECKF(!strcmp(ida, idb), "stored tables: %s; computed: %s", ida, idb);
  char receipt[800];
  snprintf(receipt, sizeof receipt, "%s/ctx.json", test_tmpdir());
  CHECKF(run_cmd(out, sizeof out, "%s bench -m %s --backend cpu -t 1 -p 1000 -n 2 -o %s --force", test_wisp_bin(), b,
                 receipt) == 0, "%s", out);
  CHECKF(run_cmd(out, sizeof out, "%s bench -m %s --backend cpu -t 1 -p 1000 -n 2 -o %s --force", test_wisp_bin(), a,
                 receipt) != 0 && strstr(out, "context of 512"), "%s", out);
  CHECKF(run_cmd(out, sizeof out, "%s gen-synthetic --small --context 0 -o %s/ctx_bad", test_wisp_bin(),
                 test_tmpdir()) == 2 && strstr(out, "--context"), "%s", out);
}
