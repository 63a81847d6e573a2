/* Smaller things a user meets (issue 31, item 6): a flipped byte in
 * weights.bin and a broken tokenizer.json fail run/info/verify, a too-large
 * manifest integer says so, tokenize --decode takes tokenize's own output,
 * --repeat-last-n -1, -t beyond the cores, `wisp help run`, --profile that
 * means the same file wherever wisp runs, bench receipts never beside a
 * copied executable nor through a symbolic link. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixtures.h"
#include "test.h"
#include "util/file.h"

#define DEFAULT_MODEL "models/default"
#define CAP 16384

static int one_line(const char *out) {
  size_t n = strlen(out);
  return n > 0 && strchr(out, '\n') == out + n - 1;
}

/* Runs fmt with three string arguments (a command up to 8 KiB). */
static int sh(char *out, const char *fmt, const char *a, const char *b, const char *c) {
  char *cmd = NULL;
  if (asprintf(&cmd, fmt, a, b, c) < 0) return -1;
  int rc = test_run(cmd, out, CAP);
  free(cmd);
  return rc;
}

TEST(edges_flipped_weight_byte_fails_run_and_info) {
  const char *d = fixture_variant("edges_flipped", NULL, 0);
  CHECK(d);
  char out[CAP];
  /* control: the intact copy opens */
  CHECKF(sh(out, "%s info -m %s", test_wisp_bin(), d, "") == 0, "%s", out);
  char path[1024];
  snprintf(path, sizeof path, "%s/weights.bin", d);
  FILE *f = fopen(path, "r+b");
  CHECK(f);
  CHECK(fseek(f, 777, SEEK_SET) == 0);
  int c = fgetc(f);
  CHECK(c != EOF && fseek(f, 777, SEEK_SET) == 0 && fputc(c ^ 0x01, f) != EOF && fclose(f) == 0);
  int rc = sh(out, "%s run --backend cpu --profile exact -m %s -p hello -n 2 --temp 0", test_wisp_bin(), d, "");
  CHECKF(rc == 1 && strstr(out, "does not match its sha256") && one_line(out), "exit %d: %s", rc, out);
  rc = sh(out, "%s info -m %s", test_wisp_bin(), d, "");
  CHECKF(rc == 1 && strstr(out, "does not match its sha256") && one_line(out), "exit %d: %s", rc, out);
}

TEST(edges_broken_tokenizer_fails_info_and_verify) {
  if (!wisp_path_exists(DEFAULT_MODEL "/tokenizer.json")) SKIP("no %s", DEFAULT_MODEL);
  char out[CAP], dir[1024];
  snprintf(dir, sizeof dir, "%s/edges_tok", test_tmpdir());
  CHECK(sh(out, "mkdir %s && cp %s/* %s/", dir, DEFAULT_MODEL, dir) == 0);
  CHECKF(sh(out, "%s verify %s", test_wisp_bin(), dir, "") == 0, "%s", out); /* control */
  CHECK(sh(out, "printf '{\"model\": {\"type\": \"BPE\", \"vocab\": {' > %s/tokenizer.json", dir, "", "") == 0);
  int rc = sh(out, "%s info -m %s", test_wisp_bin(), dir, "");
  CHECKF(rc == 1 && strstr(out, "tokenizer.json: malformed JSON"), "exit %d: %s", rc, out);
  rc = sh(out, "%s verify %s", test_wisp_bin(), dir, "");
  CHECKF(rc == 1 && strstr(out, "tokenizer.json: malformed JSON") && strstr(out, "1 problem"), "exit %d: %s", rc, out);
}

static void edit_huge_hidden(cJSON *m) {
  cJSON *shape = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "runtime"), "shape");
  cJSON_ReplaceItemInObjectCaseSensitive(shape, "hidden", cJSON_CreateNumber(2147483648.0));
}

TEST(edges_manifest_integer_too_large_says_so) {
  const char *d = fixture_variant("edges_hidden", edit_huge_hidden, 0);
  CHECK(d);
  char out[CAP];
  int rc = sh(out, "%s info -m %s", test_wisp_bin(), d, "");
  CHECKF(rc == 1 && strstr(out, "runtime.shape.hidden is 2147483648, too large (at most 2147483647)") && one_line(out),
         "exit %d: %s", rc, out);
}

TEST(edges_decode_takes_tokenize_output_and_the_empty_list) {
  char out[CAP], ids[CAP], want[CAP];
  const char *m = fixture_small_model();
  CHECKF(sh(ids, "%s tokenize -m %s -p 'hello world'", test_wisp_bin(), m, "") == 0 && ids[0] == '[', "%s", ids);
  ids[strcspn(ids, "\n")] = 0;
  /* tokenize's own output, as printed and with spaces after the commas */
  CHECKF(sh(want, "%s tokenize -m %s --decode '%s'", test_wisp_bin(), m, ids) == 0 && strstr(want, "hello world"), "%s",
         want);
  char spaced[CAP] = "";
  for (const char *p = ids; *p; p++) strncat(spaced, *p == ',' ? ", " : (char[]){*p, 0}, sizeof spaced - strlen(spaced) - 1);
  CHECKF(sh(out, "%s tokenize -m %s --decode '%s'", test_wisp_bin(), m, spaced) == 0 && !strcmp(out, want), "%s vs %s",
         out, want);
  /* the empty list: an empty text's ids */
  CHECKF(sh(out, "%s tokenize -m %s --no-special -p ''", test_wisp_bin(), m, "") == 0 && !strcmp(out, "[]\n"), "%s", out);
  CHECKF(sh(out, "%s tokenize -m %s --decode '[]'", test_wisp_bin(), m, "") == 0 && !strcmp(out, ""), "'%s'", out);
  CHECKF(sh(out, "%s tokenize -m %s --decode ''", test_wisp_bin(), m, "") == 0 && !strcmp(out, ""), "'%s'", out);
  /* still strict: an unclosed list, a trailing comma */
  CHECKF(sh(out, "%s tokenize -m %s --decode '[1,2'", test_wisp_bin(), m, "") == 1 && one_line(out), "%s", out);
  CHECKF(sh(out, "%s tokenize -m %s --decode '1,2,'", test_wisp_bin(), m, "") == 1 && one_line(out), "%s", out);
}

/* -1 is the whole context: the same tokens as naming the context's size,
 * and (with a strong penalty) not those of a window of 1. */
TEST(edges_repeat_last_n_minus_one_is_the_context) {
  char all[CAP], ctx[CAP], one[CAP];
  const char *m = fixture_small_model();
  const char *opts = "-p 'a b a b a b a b' -n 24 --temp 0 --repeat-penalty 3 -c 64 --ids";
  CHECKF(sh(all, "%s run --backend cpu --profile exact -m %s %s --repeat-last-n -1 2>&1 | grep 'generated ids'", test_wisp_bin(), m, opts) == 0, "%s",
         all);
  CHECKF(sh(ctx, "%s run --backend cpu --profile exact -m %s %s --repeat-last-n 64 2>&1 | grep 'generated ids'", test_wisp_bin(), m, opts) == 0, "%s",
         ctx);
  CHECKF(!strcmp(all, ctx), "-1:\n%s\n64:\n%s", all, ctx);
  CHECKF(sh(one, "%s run --backend cpu --profile exact -m %s %s --repeat-last-n 1 2>&1 | grep 'generated ids'", test_wisp_bin(), m, opts) == 0, "%s",
         one);
  CHECKF(strcmp(all, one), "the window changes nothing here, so the test cannot tell: %s", one);
  int rc = sh(all, "%s run --backend cpu --profile exact -m %s -p hi -n 1 --repeat-last-n -2", test_wisp_bin(), m, "");
  CHECKF(rc == 2, "exit %d: %s", rc, all);
}

TEST(edges_threads_beyond_the_cores_warn) {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores >= 1024) SKIP("%ld cores: -t 1024 is not beyond them", cores);
  char out[CAP];
  int rc = sh(out, "%s run --backend cpu --profile exact -m %s -p hi -n 1 --temp 0 -t 1024", test_wisp_bin(), fixture_small_model(), "");
  CHECKF(rc == 0 && strstr(out, "warning: -t 1024 is more threads than the"), "exit %d: %s", rc, out);
  char n[32];
  snprintf(n, sizeof n, "%ld", cores);
  rc = sh(out, "%s run --backend cpu --profile exact -m %s -p hi -n 1 --temp 0 -t %s", test_wisp_bin(), fixture_small_model(), n);
  CHECKF(rc == 0 && !strstr(out, "warning"), "exit %d: %s", rc, out);
}

TEST(edges_help_command_is_the_command_help) {
  char a[CAP], b[CAP];
  CHECK(sh(a, "%s help run", test_wisp_bin(), "", "") == 0);
  CHECK(sh(b, "%s run --help", test_wisp_bin(), "", "") == 0);
  CHECKF(!strcmp(a, b) && strstr(a, "usage: wisp run"), "%s", a);
  CHECKF(sh(a, "%s help nothing-such", test_wisp_bin(), "", "") == 2 && one_line(a), "%s", a);
}

/* --profile means the same wherever wisp runs: a .json name is that file
 * (here a broken one, refused naming it), any other name the built-in. */
TEST(edges_profile_resolution_ignores_the_working_directory) {
  char out[CAP], want[CAP], dir[1024], model[1024];
  char *r = realpath(fixture_small_model(), NULL);
  CHECK(r);
  snprintf(model, sizeof model, "%s", r);
  free(r);
  r = realpath(test_tmpdir(), NULL);
  CHECK(r);
  snprintf(dir, sizeof dir, "%s/edges_prof", r);
  free(r);
  CHECK(sh(out, "mkdir -p %s/with/profiles %s/without && echo '{broken' > %s/with/profiles/throughput.json", dir, dir,
           dir) == 0);
  char bin[1024];
  r = realpath(test_wisp_bin(), NULL);
  CHECK(r);
  snprintf(bin, sizeof bin, "%s", r);
  free(r);
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "cd %s/without && %s plan --backend cpu -m %s --profile throughput | head -n 2", dir, bin, model);
  CHECKF(test_run(cmd, want, sizeof want) == 0 && strstr(want, "profile profiles/throughput"), "%s", want);
  snprintf(cmd, sizeof cmd, "cd %s/with && %s plan --backend cpu -m %s --profile throughput | head -n 2", dir, bin, model);
  CHECKF(test_run(cmd, out, sizeof out) == 0 && !strcmp(out, want), "%s", out);
  snprintf(cmd, sizeof cmd, "cd %s/with && %s plan --backend cpu -m %s --profile profiles/throughput | head -n 2", dir, bin, model);
  CHECKF(test_run(cmd, out, sizeof out) == 0 && !strcmp(out, want), "%s", out);
  /* a .json name is a file: read (and broken) where it exists, missing elsewhere */
  snprintf(cmd, sizeof cmd, "cd %s/with && %s plan --backend cpu -m %s --profile profiles/throughput.json", dir, bin, model);
  CHECKF(test_run(cmd, out, sizeof out) == 1 && strstr(out, "profiles/throughput.json") && one_line(out), "%s", out);
  snprintf(cmd, sizeof cmd, "cd %s/without && %s plan --backend cpu -m %s --profile profiles/throughput.json", dir, bin, model);
  CHECKF(test_run(cmd, out, sizeof out) == 1 && strstr(out, "no such file") && one_line(out), "%s", out);
}

/* bench without -o: the receipt goes under WISP_HOME (or the tree wisp was
 * built in), never beside a copied executable; a symbolic link where the
 * receipt directory should be is refused, not followed. */
TEST(edges_bench_receipts_not_beside_a_copy_nor_through_a_link) {
  char out[CAP], dir[1024], cmd[8192];
  char *r = realpath(test_tmpdir(), NULL);
  CHECK(r);
  snprintf(dir, sizeof dir, "%s/edges_bench", r);
  free(r);
  /* DIR/bin/wisp (the copy), DIR/bench -> DIR/elsewhere (a plant), DIR/home (WISP_HOME) */
  snprintf(cmd, sizeof cmd, "mkdir -p %s/bin %s/elsewhere %s/home && cp %s %s/bin/wisp && ln -s %s/elsewhere %s/bench",
           dir, dir, dir, test_wisp_bin(), dir, dir, dir);
  CHECK(test_run(cmd, out, sizeof out) == 0);
  snprintf(cmd, sizeof cmd, "cd %s && WISP_HOME=%s/home %s/bin/wisp bench --backend cpu --profile exact -m %s -p 2 -n 1 --no-warmup", dir, dir, dir,
           fixture_small_model());
  char *m = realpath(fixture_small_model(), NULL);
  CHECK(m);
  snprintf(cmd, sizeof cmd, "cd %s && WISP_HOME=%s/home %s/bin/wisp bench --backend cpu --profile exact -m %s -p 2 -n 1 --no-warmup", dir, dir, dir, m);
  int rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 0 && strstr(out, "/home/bench/results/"), "exit %d: %s", rc, out);
  snprintf(cmd, sizeof cmd, "ls -A %s/elsewhere | wc -l", dir);
  CHECK(test_run(cmd, out, sizeof out) == 0 && atoi(out) == 0);
  /* WISP_HOME whose bench/ is a symbolic link: refused */
  snprintf(cmd, sizeof cmd, "cd %s && WISP_HOME=%s %s/bin/wisp bench --backend cpu --profile exact -m %s -p 2 -n 1 --no-warmup", dir, dir, dir, m);
  free(m);
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 1 && strstr(out, "symbolic link"), "exit %d: %s", rc, out);
  snprintf(cmd, sizeof cmd, "ls -A %s/elsewhere | wc -l", dir);
  CHECK(test_run(cmd, out, sizeof out) == 0 && atoi(out) == 0);
}

/* top_p 0 and top_p 1 both mean off (include/wisp.h says so for every
 * struct): the same seeded tokens, and not those of a tight nucleus. */
TEST(edges_top_p_zero_and_one_are_both_off) {
  char zero[CAP], one[CAP], tight[CAP];
  const char *m = fixture_small_model();
  const char *opts = "-p 'Once upon' -n 24 --temp 1.5 --seed 7 --top-k 0 --min-p 0 --ids";
  CHECK(sh(zero, "%s run -m %s %s --top-p 0 2>&1 | grep 'generated ids'", test_wisp_bin(), m, opts) == 0);
  CHECK(sh(one, "%s run --backend cpu --profile exact -m %s %s --top-p 1 2>&1 | grep 'generated ids'", test_wisp_bin(), m, opts) == 0);
  CHECKF(!strcmp(zero, one), "top-p 0:\n%s\ntop-p 1:\n%s", zero, one);
  CHECK(sh(tight, "%s run --backend cpu --profile exact -m %s %s --top-p 0.05 2>&1 | grep 'generated ids'", test_wisp_bin(), m, opts) == 0);
  CHECKF(strcmp(zero, tight), "a tight nucleus changes nothing here, so the test cannot tell: %s", tight);
}
