/* Every read has a limit (issue 31): a prompt from a file or standard input
 * and a chat line at most cli_prompt_limit bytes of the context, any other
 * whole-file read (JSON, tokenizer files, text) at most WISP_FILE_MAX.
 * Past it: one line, and the read stops there, so /dev/zero, `yes` and a
 * 2 GB sparse file (no disk: truncate) are refused without reading them. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "util/file.h"
#include "wisp.h"

#define DEFAULT_MODEL "models/default"

static int one_line(const char *out) {
  size_t n = strlen(out);
  return n > 0 && strchr(out, '\n') == out + n - 1;
}

TEST(limits_prompt_from_dev_zero_yes_and_a_sparse_file) {
  if (access(DEFAULT_MODEL "/manifest.json", R_OK)) SKIP("no %s", DEFAULT_MODEL);
  char cmd[4096], out[4096], sparse[1100];
  /* -c 256: the limit is 256 x 32 + 4096 bytes */
  snprintf(cmd, sizeof cmd, "%s run --backend cpu --profile exact -m %s -c 256 -f /dev/zero -n 4", test_wisp_bin(), DEFAULT_MODEL);
  int rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 1 && strstr(out, "/dev/zero: more than 12288 bytes") && one_line(out), "exit %d: %s", rc, out);
  snprintf(cmd, sizeof cmd, "yes | %s run --backend cpu --profile exact -m %s -c 256 -p - -n 4", test_wisp_bin(), DEFAULT_MODEL);
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 1 && strstr(out, "standard input: more than 12288 bytes") && one_line(out), "exit %d: %s", rc, out);
  snprintf(sparse, sizeof sparse, "%s/sparse-2g.txt", test_tmpdir());
  snprintf(cmd, sizeof cmd, "truncate -s 2G %s && %s run --backend cpu --profile exact -m %s -f %s -n 4", sparse, test_wisp_bin(), DEFAULT_MODEL, sparse);
  rc = test_run(cmd, out, sizeof out);
  unlink(sparse);
  CHECKF(rc == 1 && strstr(out, "2147483648 bytes, over the limit") && one_line(out), "exit %d: %s", rc, out);
  /* the same file through standard input: refused from its size too */
  snprintf(cmd, sizeof cmd, "truncate -s 2G %s && %s run --backend cpu --profile exact -m %s -p - -n 4 < %s", sparse, test_wisp_bin(), DEFAULT_MODEL,
           sparse);
  rc = test_run(cmd, out, sizeof out);
  unlink(sparse);
  CHECKF(rc == 1 && strstr(out, "over the limit") && one_line(out), "exit %d: %s", rc, out);
  /* control: a prompt under the limit is read */
  snprintf(cmd, sizeof cmd, "head -c 2000 /dev/zero | tr '\\\\0' a | %s run --backend cpu --profile exact -m %s -c 256 -p - -n 1 --temp 0",
           test_wisp_bin(), DEFAULT_MODEL);
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 0 && strstr(out, "prompt tokens"), "exit %d: %s", rc, out);
}

/* A chat line past the limit is refused (read to its newline and dropped)
 * and the conversation goes on with the next line. */
TEST(limits_chat_line_too_long_is_refused_and_chat_goes_on) {
  if (access(DEFAULT_MODEL "/manifest.json", R_OK)) SKIP("no %s", DEFAULT_MODEL);
  char cmd[4096], out[8192];
  snprintf(cmd, sizeof cmd,
           "(head -c 100000 /dev/zero | tr '\\\\0' a; echo; echo hello) | %s run --backend cpu --profile exact -m %s -c 256 --chat -n 2 --temp 0",
           test_wisp_bin(), DEFAULT_MODEL);
  int rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 0 && strstr(out, "[turn refused: the line is longer than 12288 bytes") && strstr(out, "[reply 1:"),
         "exit %d: %s", rc, out);
}

/* The limits are stated where a user looks: wisp --help and wisp run --help. */
TEST(limits_are_stated_in_help) {
  char cmd[1024], out[16384];
  snprintf(cmd, sizeof cmd, "%s --help", test_wisp_bin());
  CHECK(test_run(cmd, out, sizeof out) == 0);
  CHECKF(strstr(out, "32 bytes per position") && strstr(out, "64 MiB"), "%s", out);
  snprintf(cmd, sizeof cmd, "%s run --help", test_wisp_bin());
  CHECK(test_run(cmd, out, sizeof out) == 0);
  CHECKF(strstr(out, "32 bytes per position"), "%s", out);
}

/* Whole-file reads (JSON, tokenizer files): WISP_FILE_MAX. */
TEST(limits_whole_file_reads_stop_at_the_file_limit) {
  char *data = NULL, sparse[1100];
  size_t len = 0;
  CHECK(wisp_read_file("/dev/zero", &data, &len) == WISP_EINVAL && !data);
  CHECKF(strstr(wisp_last_error(), "more than 67108864 bytes"), "%s", wisp_last_error());
  snprintf(sparse, sizeof sparse, "%s/sparse-2g.json", test_tmpdir());
  int fd = open(sparse, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  CHECK(fd >= 0);
  int ok = ftruncate(fd, (off_t)2 << 30) == 0;
  close(fd);
  CHECK(ok);
  wisp_status st = wisp_read_file(sparse, &data, &len);
  unlink(sparse);
  CHECK(st == WISP_EINVAL && !data);
  CHECKF(strstr(wisp_last_error(), "2147483648 bytes, over the limit of 67108864"), "%s", wisp_last_error());
  /* a smaller limit, and a file within it */
  CHECK(wisp_read_file_max("/dev/zero", 10, &data, &len) == WISP_EINVAL);
  CHECK(wisp_read_file_max("builtin:kernels/registry.json", 10, &data, &len) == WISP_OK);
  free(data);
}

/* `wisp info` on an artifact whose tokenizer.json is a 2 GB sparse file:
 * refused at once, one line. */
TEST(limits_sparse_tokenizer_json_is_refused) {
  if (access(DEFAULT_MODEL "/manifest.json", R_OK)) SKIP("no %s", DEFAULT_MODEL);
  char cmd[4096], out[4096];
  snprintf(cmd, sizeof cmd,
           "set -e; d=%s/sparse-tok; rm -rf $d; mkdir $d; cp %s/manifest.json %s/weights.bin %s/tokenizer_config.json $d/; "
           "truncate -s 2G $d/tokenizer.json; %s tokenize -m $d -p hello",
           test_tmpdir(), DEFAULT_MODEL, DEFAULT_MODEL, DEFAULT_MODEL, test_wisp_bin());
  int rc = test_run(cmd, out, sizeof out);
  CHECKF(rc != 0 && strstr(out, "tokenizer.json: 2147483648 bytes, over the limit") && one_line(out), "exit %d: %s", rc,
         out);
}
