/* Writers never destroy what wisp did not make (issue 31): a file is
 * renamed into place only over a regular file, never over a device, FIFO,
 * symbolic link or directory; --force replaces only an artifact wisp wrote
 * and removes only an artifact's files; one writer per target; a write
 * error (stdout included) is an error. No test here writes near /dev/null
 * or /dev/full: a device is made in the scratch directory (as root), and
 * /dev/full is only the target of a refusal that comes before any write,
 * or a redirected standard output. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixtures.h"
#include "test.h"
#include "util/file.h"

#define DEFAULT_MODEL "models/default"
#define CAP 8192

static int one_line(const char *out) {
  size_t n = strlen(out);
  return n > 0 && strchr(out, '\n') == out + n - 1;
}

/* Nothing of a writer (PATH.tmp-*, PATH.wisp-lock, PATH.partial-*) beside path. */
static int no_leftovers(const char *path) {
  char cmd[2048], out[2048];
  snprintf(cmd, sizeof cmd, "ls -d %s.tmp-* %s.wisp-lock %s.partial-* 2>/dev/null | wc -l", path, path, path);
  return test_run(cmd, out, sizeof out) == 0 && atoi(out) == 0;
}

static int export_to(const char *target, const char *extra, char *out) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s export-gguf %s -o %s %s", test_wisp_bin(), fixture_small_model(), target, extra);
  return test_run(cmd, out, CAP);
}

TEST(safe_write_refuses_fifo_symlink_and_directory_targets) {
  char dir[1024], fifo[1100], link[1100], real[1100], empty[1100], out[CAP];
  snprintf(dir, sizeof dir, "%s/sw-targets", test_tmpdir());
  CHECK(mkdir(dir, 0755) == 0);
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  snprintf(link, sizeof link, "%s/link", dir);
  snprintf(real, sizeof real, "%s/real", dir);
  snprintf(empty, sizeof empty, "%s/empty-dir", dir);
  CHECK(mkfifo(fifo, 0644) == 0 && mkdir(empty, 0755) == 0);
  FILE *f = fopen(real, "w");
  CHECK(f && fputs("keep\n", f) >= 0 && fclose(f) == 0);
  CHECK(symlink(real, link) == 0);
  struct stat sb;
  /* a FIFO, with --force: refused; still a FIFO */
  int rc = export_to(fifo, "--force", out);
  CHECKF(rc == 2 && strstr(out, "is a FIFO") && one_line(out), "exit %d: %s", rc, out);
  CHECK(lstat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode) && no_leftovers(fifo));
  /* a symbolic link, with --force: refused; the link and its target untouched */
  rc = export_to(link, "--force", out);
  CHECKF(rc == 2 && strstr(out, "is a symbolic link") && one_line(out), "exit %d: %s", rc, out);
  char *kept = NULL;
  CHECK(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode) && wisp_read_file(real, &kept, NULL) == WISP_OK);
  int same = !strcmp(kept, "keep\n");
  free(kept);
  CHECK(same && no_leftovers(link));
  /* an empty directory is not a file: refused before anything is written */
  rc = export_to(empty, "", out);
  CHECKF(rc == 2 && strstr(out, "is a directory") && one_line(out), "exit %d: %s", rc, out);
  CHECK(no_leftovers(empty) && rmdir(empty) == 0); /* rmdir: it was still empty */
  /* the same rule for the other file writers */
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s logits --backend cpu -m %s --tokens 1 -o %s --force", test_wisp_bin(), fixture_small_model(), fifo);
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 2 && strstr(out, "is a FIFO"), "exit %d: %s", rc, out);
  snprintf(cmd, sizeof cmd, "%s bench --backend cpu --profile exact -m %s -p 2 -n 1 -o %s --force", test_wisp_bin(), fixture_small_model(), link);
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 2 && strstr(out, "is a symbolic link"), "exit %d: %s", rc, out);
  /* control: a regular file is replaced with --force */
  rc = export_to(real, "--force", out);
  CHECKF(rc == 0 && no_leftovers(real), "exit %d: %s", rc, out);
}

/* A device as the target, with --force: refused before any write. As root
 * (CI) the device is a copy of /dev/full's node made in the scratch
 * directory, which the old writer would have replaced; otherwise /dev/full
 * itself, which a user cannot replace anyway, and the root case is skipped. */
TEST(safe_write_refuses_a_device_even_as_root) {
  char out[CAP];
  int rc = export_to("/dev/full", "--force", out);
  CHECKF(rc == 2 && strstr(out, "/dev/full is a character device") && one_line(out), "exit %d: %s", rc, out);
  CHECK(!wisp_path_exists("/dev/full.wisp-lock"));
  if (geteuid() != 0) SKIP("not root: a device node cannot be made here (CI runs as root)");
  char dev[1100];
  snprintf(dev, sizeof dev, "%s/sw-full", test_tmpdir());
  CHECK(mknod(dev, S_IFCHR | 0666, makedev(1, 7)) == 0);
  rc = export_to(dev, "--force", out);
  struct stat sb;
  CHECKF(rc == 2 && strstr(out, "is a character device") && one_line(out), "exit %d: %s", rc, out);
  CHECK(lstat(dev, &sb) == 0 && S_ISCHR(sb.st_mode) && no_leftovers(dev));
  unlink(dev);
}

/* --force replaces an artifact wisp wrote and nothing else: not a directory
 * whose manifest.json lacks wisp's mark, not an artifact with a file of the
 * user's beside it. Nothing is removed when refused. */
TEST(safe_write_force_removes_only_an_artifact) {
  char dir[1100], cmd[4096], out[CAP], notes[1200];
  snprintf(dir, sizeof dir, "%s/sw-notart", test_tmpdir());
  snprintf(cmd, sizeof cmd, "mkdir %s && echo '{}' > %s/manifest.json && echo mine > %s/notes.txt", dir, dir, dir);
  CHECK(test_run(cmd, out, sizeof out) == 0);
  snprintf(notes, sizeof notes, "%s/notes.txt", dir);
  snprintf(cmd, sizeof cmd, "%s gen-synthetic --small -o %s --force", test_wisp_bin(), dir);
  int rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 2 && strstr(out, "is not an artifact wisp wrote") && one_line(out), "exit %d: %s", rc, out);
  CHECK(wisp_path_exists(notes) && no_leftovers(dir));
  /* an artifact wisp wrote, with the user's notes.txt beside it */
  snprintf(dir, sizeof dir, "%s/sw-art", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s gen-synthetic --small -o %s && echo mine > %s/notes.txt", test_wisp_bin(), dir, dir);
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s", out);
  snprintf(notes, sizeof notes, "%s/notes.txt", dir);
  snprintf(cmd, sizeof cmd, "%s gen-synthetic --small -o %s --seed 2 --force", test_wisp_bin(), dir);
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 2 && strstr(out, "holds notes.txt") && one_line(out), "exit %d: %s", rc, out);
  CHECK(wisp_path_exists(notes));
  /* convert follows the same rule */
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --force", test_wisp_bin(), fixture_small_model(), dir);
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 2 && strstr(out, "holds notes.txt"), "exit %d: %s", rc, out);
  /* control: without the notes, --force replaces it */
  unlink(notes);
  snprintf(cmd, sizeof cmd, "%s gen-synthetic --small -o %s --seed 2 --force", test_wisp_bin(), dir);
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 0 && no_leftovers(dir), "exit %d: %s", rc, out);
}

/* One writer per target: a lock held by a running process refuses the
 * second writer, naming it; a lock whose process is gone is taken over;
 * two writers started together: one writes, the other says why not. */
TEST(safe_write_one_writer_per_target) {
  char dir[1100], lock[1200], cmd[16384], out[CAP];
  snprintf(dir, sizeof dir, "%s/sw-lock", test_tmpdir());
  snprintf(lock, sizeof lock, "%s.wisp-lock", dir);
  FILE *f = fopen(lock, "w");
  CHECK(f && fprintf(f, "%d\n", (int)getpid()) > 0 && fclose(f) == 0); /* this test's process: alive */
  snprintf(cmd, sizeof cmd, "%s gen-synthetic --small -o %s", test_wisp_bin(), dir);
  int rc = test_run(cmd, out, sizeof out);
  char pid[32];
  snprintf(pid, sizeof pid, "(pid %d)", (int)getpid());
  CHECKF(rc == 2 && strstr(out, "another wisp") && strstr(out, pid) && one_line(out), "exit %d: %s", rc, out);
  CHECK(!wisp_path_exists(dir) && wisp_path_exists(lock));
  /* a process that has ended: its lock is stale */
  pid_t gone = fork();
  CHECK(gone >= 0);
  if (gone == 0) _exit(0);
  while (waitpid(gone, NULL, 0) < 0 && errno == EINTR) {}
  f = fopen(lock, "w");
  CHECK(f && fprintf(f, "%d\n", (int)gone) > 0 && fclose(f) == 0);
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 0 && wisp_path_exists(dir) && no_leftovers(dir), "exit %d: %s", rc, out);
  /* two at once, to a new target: exactly one succeeds; the other is
   * refused, by the lock or (if the first was done) by the overwrite rule */
  snprintf(dir, sizeof dir, "%s/sw-race", test_tmpdir());
  snprintf(cmd, sizeof cmd,
           "%s gen-synthetic --small -o %s > %s.a 2>&1 & %s gen-synthetic --small -o %s --seed 2 > %s.b 2>&1 & "
           "wait %%1; a=$?; wait %%2; b=$?; echo \"$a $b\"; cat %s.a %s.b",
           test_wisp_bin(), dir, dir, test_wisp_bin(), dir, dir, dir, dir);
  CHECK(test_run(cmd, out, sizeof out) == 0);
  int a = -1, b = -1;
  CHECK(sscanf(out, "%d %d", &a, &b) == 2);
  CHECKF((a == 0) != (b == 0) && (a == 2 || b == 2), "%s", out);
  CHECKF(strstr(out, "another wisp") || strstr(out, "already exists"), "%s", out);
  CHECK(no_leftovers(dir));
}

/* Write errors are errors: standard output on a full device (the shell
 * opens /dev/full; wisp only writes to it), and a file past the size
 * limit (ulimit -f, SIGXFSZ ignored: write fails with EFBIG). */
TEST(safe_write_errors_are_errors) {
  char cmd[4096], out[CAP];
  if (wisp_path_exists(DEFAULT_MODEL "/manifest.json")) {
    snprintf(cmd, sizeof cmd, "{ %s run --backend cpu --profile exact -m %s -p hello -n 2 > /dev/full; }", test_wisp_bin(), DEFAULT_MODEL);
    int rc = test_run(cmd, out, sizeof out);
    CHECKF(rc == 1 && strstr(out, "wisp: writing standard output"), "exit %d: %s", rc, out);
  }
  snprintf(cmd, sizeof cmd, "{ %s tokenize -m %s -p hello > /dev/full; }", test_wisp_bin(), fixture_small_model());
  int rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 1 && strstr(out, "wisp: writing standard output: No space left on device") && one_line(out),
         "exit %d: %s", rc, out);
  char gg[1100];
  snprintf(gg, sizeof gg, "%s/sw-fsize.gguf", test_tmpdir());
  snprintf(cmd, sizeof cmd, "trap '' XFSZ; ulimit -f 8; %s export-gguf %s -o %s", test_wisp_bin(), fixture_small_model(),
           gg);
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 1 && strstr(out, "write failed") && one_line(out), "exit %d: %s", rc, out);
  CHECK(!wisp_path_exists(gg) && no_leftovers(gg));
}

/* A symbolic link planted under the writer's temporary name (DIR.partial-PID:
 * `exec` keeps the shell's pid) is neither followed nor emptied: the files
 * it points at stay, and the writer fails with one line. */
TEST(safe_write_planted_temporary_link_is_not_followed) {
  char dir[1100], cmd[8192], out[CAP];
  char *tmp = realpath(test_tmpdir(), NULL); /* the link must resolve from where it lies */
  CHECK(tmp);
  snprintf(dir, sizeof dir, "%s/sw-plant", tmp);
  free(tmp);
  snprintf(cmd, sizeof cmd,
           "mkdir -p %s/victim && echo mine > %s/victim/precious && "
           "sh -c 'ln -s %s/victim %s/out.partial-$$ && exec %s gen-synthetic --small -o %s/out'",
           dir, dir, dir, dir, test_wisp_bin(), dir);
  int rc = test_run(cmd, out, sizeof out);
  char precious[1200];
  snprintf(precious, sizeof precious, "%s/victim/precious", dir);
  CHECKF(rc == 1 && strstr(out, "cannot create directory"), "exit %d: %s", rc, out);
  CHECKF(wisp_path_exists(precious), "the writer emptied the directory a planted link points at: %s", out);
}

/* The same for convert's temporary tokenizer directory (DIR.gguf-tokenizer-PID,
 * from a GGUF source): a planted link there is refused, and the files of
 * the directory it points at stay. */
TEST(safe_write_planted_tokenizer_link_is_not_followed) {
  char dir[1100], cmd[8192], out[CAP];
  char *tmp = realpath(test_tmpdir(), NULL);
  CHECK(tmp);
  snprintf(dir, sizeof dir, "%s/sw-plant-tok", tmp);
  free(tmp);
  snprintf(cmd, sizeof cmd,
           "mkdir -p %s/victim && echo mine > %s/victim/tokenizer.json && %s export-gguf %s -o %s/m.gguf && "
           "sh -c 'ln -s %s/victim %s/out.gguf-tokenizer-$$ && exec %s convert %s/m.gguf -o %s/out --quant f32'",
           dir, dir, test_wisp_bin(), fixture_small_model(), dir, dir, dir, test_wisp_bin(), dir, dir);
  int rc = test_run(cmd, out, sizeof out);
  char kept[1200];
  snprintf(kept, sizeof kept, "%s/victim/tokenizer.json", dir);
  CHECKF(rc == 1 && strstr(out, "cannot create directory"), "exit %d: %s", rc, out);
  CHECKF(wisp_path_exists(kept), "convert removed a file through a planted link: %s", out);
  char target[1200];
  snprintf(target, sizeof target, "%s/out", dir);
  CHECK(!wisp_path_exists(target) && no_leftovers(target)); /* and left nothing of its own */
}
