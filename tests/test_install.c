/* wisp loads nothing from the working directory, runs as a copy anywhere,
 * and installs: `make install` into a temporary prefix, then the example
 * chat program (examples/chat.c) built with pkg-config and run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "util/file.h"
#include "backend/webgpu/wgpu_loader.h"
#include "wisp.h"

#define DEFAULT_DIR "models/default"
#define CMD_CAP 16384

/* A fresh directory of the test's own under the run's scratch directory
 * (which every test shares), as an absolute path. */
static int own_dir(char *out, size_t cap) {
  static int n;
  char *r = realpath(test_tmpdir(), NULL);
  int ok = r && (size_t)snprintf(out, cap, "%s/install-%d", r, ++n) < cap && mkdir(out, 0755) == 0;
  free(r);
  return ok;
}

/* The absolute path of p into out (cap bytes); 0 on failure. */
static int abs_path(const char *p, char *out, size_t cap) {
  if (p == test_tmpdir()) return own_dir(out, cap);
  char *r = realpath(p, NULL);
  int ok = r && strlen(r) < cap;
  if (ok) snprintf(out, cap, "%s", r);
  free(r);
  return ok;
}

/* A copy of the binary under test in DIR/bin, and DIR/work: a working
 * directory full of look-alike files that must all be ignored. */
static int make_copy_and_trap(const char *dir, char *bin, size_t cap) {
  char cmd[CMD_CAP], out[2048];
  snprintf(bin, cap, "%s/bin/wisp", dir);
  snprintf(cmd, sizeof cmd,
           "set -e; mkdir -p %s/bin %s/work/profiles %s/work/kernels %s/work/src/backend/webgpu/kernels; cp %s %s; "
           "cd %s/work; echo '{broken' > profiles/default.json; echo '{broken' > kernels/registry.json; "
           "echo '{broken' > default; echo 'broken' > src/backend/webgpu/kernels/matmul_q4.wgsl",
           dir, dir, dir, dir, test_wisp_bin(), bin, dir);
  return test_run(cmd, out, sizeof out) == 0;
}

TEST(install_copied_binary_ignores_the_working_directory) {
  if (!wisp_path_exists(DEFAULT_DIR "/manifest.json")) SKIP("no %s", DEFAULT_DIR);
  char dir[1024], bin[1100], model[1024], cmd[CMD_CAP], out[4096], want[4096];
  CHECK(abs_path(test_tmpdir(), dir, sizeof dir) && abs_path(DEFAULT_DIR, model, sizeof model));
  CHECK(make_copy_and_trap(dir, bin, sizeof bin));
  /* generation and the plan: the same as the binary in its tree */
  snprintf(cmd, sizeof cmd, "(%s run --backend cpu --profile exact -m %s -p 'In the beginning' -n 8 --temp 0 2>/dev/null)", test_wisp_bin(), model);
  CHECKF(test_run(cmd, want, sizeof want) == 0, "%s", want);
  snprintf(cmd, sizeof cmd, "(cd %s/work && %s run --backend cpu --profile exact -m %s -p 'In the beginning' -n 8 --temp 0 2>/dev/null)", dir, bin, model);
  CHECKF(test_run(cmd, out, sizeof out) == 0 && !strcmp(out, want), "copy in a trapped directory:\n%s\nexpected:\n%s", out,
         want);
  snprintf(cmd, sizeof cmd, "%s plan --backend cpu --profile exact -m %s | grep -A1 '^plan '", test_wisp_bin(), model);
  CHECK(test_run(cmd, want, sizeof want) == 0);
  snprintf(cmd, sizeof cmd, "cd %s/work && %s plan --backend cpu -m %s --profile default | grep -A1 '^plan '", dir, bin, model);
  CHECKF(test_run(cmd, out, sizeof out) == 0 && !strcmp(out, want), "%s\nexpected:\n%s", out, want);
  /* an explicit registry file is honoured (and this one is broken) */
  snprintf(cmd, sizeof cmd, "cd %s/work && %s plan --backend cpu --profile exact -m %s --registry kernels/registry.json", dir, bin, model);
  CHECKF(test_run(cmd, out, sizeof out) != 0 && strstr(out, "kernels/registry.json") && !strstr(out, "builtin:"), "%s", out);
  /* so is an explicit profile path */
  snprintf(cmd, sizeof cmd, "cd %s/work && %s plan --backend cpu -m %s --profile profiles/default.json", dir, bin, model);
  CHECKF(test_run(cmd, out, sizeof out) != 0 && strstr(out, "profiles/default.json"), "%s", out);
}

/* Builds DIR/planted.c into `so`: a library whose constructor writes
 * `marker`, so that a test can see whether anything loaded it. */
static int build_planted(const char *dir, const char *so, const char *marker) {
  char cmd[CMD_CAP], out[4096];
  snprintf(cmd, sizeof cmd,
           "set -e; mkdir -p $(dirname %s); "
           "printf '#include <stdio.h>\\n__attribute__((constructor)) static void planted(void) {\\n"
           "  FILE *f = fopen(\"%s\", \"w\"); if (f) { fputs(\"loaded\", f); fclose(f); }\\n}\\n' > %s/planted.c; "
           "cc -shared -fPIC -o %s %s/planted.c",
           so, marker, dir, so, dir);
  int rc = test_run(cmd, out, sizeof out);
  if (rc != 0) fprintf(stderr, "building the planted library: %s\n", out);
  return rc == 0;
}

/* A library planted in the working directory (where the old loader looked
 * first) or beside a copied executable (DIR/.cache/webgpu, DIR/lib/wisp,
 * DIR/bin, for DIR/bin/wisp) is never loaded: its constructor would write a
 * marker. A model planted at DIR/models/default is never read: the copy
 * takes the default model from where it was built. */
TEST(install_webgpu_library_never_from_the_working_directory) {
  char dir[1024], bin[1100], cmd[CMD_CAP], out[4096], marker[1100], so[1200];
  CHECK(abs_path(test_tmpdir(), dir, sizeof dir));
  CHECK(make_copy_and_trap(dir, bin, sizeof bin));
  snprintf(marker, sizeof marker, "%s/MARKER", dir);
  snprintf(so, sizeof so, "%s/work/libwebgpu_wrapper.so", dir);
  CHECK(build_planted(dir, so, marker));
  snprintf(cmd, sizeof cmd,
           "set -e; cd %s; for d in work/.cache/webgpu work/lib/wisp .cache/webgpu lib/wisp lib/wisp/../../bin wisp; do "
           "mkdir -p $d; cp %s $d/; done; mkdir -p models/default; echo '{planted' > models/default/manifest.json; "
           "chmod -R go-w .",
           dir, so);
  CHECKF(test_run(cmd, out, sizeof out) == 0, "planting: %s", out);
  snprintf(cmd, sizeof cmd, "cd %s/work && env -u WISP_WEBGPU_LIB %s devices", dir, bin);
  test_run(cmd, out, sizeof out);
  CHECKF(!wisp_path_exists(marker), "wisp devices loaded a planted library: %s", out);
  CHECKF(!strstr(out, dir), "wisp devices looked beside the copy: %s", out);
  /* the default model: the build tree's, not the plant (which would fail to parse) */
  if (wisp_path_exists(DEFAULT_DIR "/manifest.json")) {
    snprintf(cmd, sizeof cmd, "cd %s/work && env -u WISP_WEBGPU_LIB %s run --backend cpu --profile exact -p 'In the beginning' -n 2 --temp 0", dir, bin);
    CHECKF(test_run(cmd, out, sizeof out) == 0 && !strstr(out, "planted") && !strstr(out, dir), "%s", out);
    CHECKF(!wisp_path_exists(marker), "wisp run loaded a planted library: %s", out);
  }
  /* control: named explicitly, the same library is loaded (so the check above can fail) */
  snprintf(cmd, sizeof cmd, "cd %s/work && WISP_WEBGPU_LIB=%s %s devices", dir, so, bin);
  test_run(cmd, out, sizeof out);
  CHECKF(wisp_path_exists(marker), "the planted library does not write its marker: %s", out);
}

/* A library that others could have replaced is refused with one line, even
 * when named by WISP_WEBGPU_LIB: writable by other users, or (as root, who
 * can give it away) owned by another user. */
TEST(install_webgpu_library_writable_by_others_is_refused) {
  char dir[1024], cmd[CMD_CAP], out[4096], marker[1100], so[1200];
  CHECK(abs_path(test_tmpdir(), dir, sizeof dir));
  snprintf(marker, sizeof marker, "%s/MARKER", dir);
  snprintf(so, sizeof so, "%s/lib/libwebgpu_wrapper.so", dir);
  CHECK(build_planted(dir, so, marker));
  snprintf(cmd, sizeof cmd, "chmod go-w %s %s/lib && chmod o+w %s && WISP_WEBGPU_LIB=%s %s devices", dir, dir, so, so,
           test_wisp_bin());
  int rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 1 && strstr(out, "not trusted") && strstr(out, "writable by other users"), "exit %d: %s", rc, out);
  CHECKF(strchr(out, '\n') == out + strlen(out) - 1, "not one line: %s", out);
  CHECKF(!wisp_path_exists(marker), "a library writable by others was loaded: %s", out);
  /* the directory holding it, writable by others, is refused the same way */
  snprintf(cmd, sizeof cmd, "chmod o-w %s && chmod o+w %s/lib && WISP_WEBGPU_LIB=%s %s devices", so, dir, so,
           test_wisp_bin());
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 1 && strstr(out, "not trusted") && !wisp_path_exists(marker), "exit %d: %s", rc, out);
  if (geteuid() != 0) SKIP("not root: a library owned by another user cannot be made here (CI runs as root)");
  snprintf(cmd, sizeof cmd, "chmod o-w %s/lib && chown 65534 %s && WISP_WEBGPU_LIB=%s %s devices", dir, so, so,
           test_wisp_bin());
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 1 && strstr(out, "belongs to user 65534") && !wisp_path_exists(marker), "exit %d: %s", rc, out);
}

/* Under a root that has no Dawn (a copied binary whose tree or prefix has
 * none), the search fails saying where it looked and how to name one. */
TEST(install_webgpu_search_without_library_says_how_to_point_at_one) {
  char dir[1024], path[4096];
  CHECK(abs_path(test_tmpdir(), dir, sizeof dir));
  CHECK(wisp_wgpu_find_in(dir, path, sizeof path) == WISP_EDEVICE);
  const char *e = wisp_last_error();
  CHECKF(strstr(e, "not found") && strstr(e, "WISP_WEBGPU_LIB=") && strstr(e, dir) && !strchr(e, '\n'), "%s", e);
}

/* make install into a temporary prefix; the example chat program builds
 * against it with pkg-config alone and chats on the installed default
 * model; the installed wisp runs from anywhere. */
TEST(install_prefix_example_builds_and_chats) {
  if (!wisp_path_exists(DEFAULT_DIR "/manifest.json")) SKIP("no %s", DEFAULT_DIR);
  char dir[1024], src[1024], cmd[CMD_CAP], out[16384];
  CHECK(abs_path(test_tmpdir(), dir, sizeof dir) && abs_path(".", src, sizeof src));
  /* the plain build tree (the install is of an optimised build, whichever binary is under test) */
  snprintf(cmd, sizeof cmd, "make -s lib install BUILD=build PREFIX=%s/prefix 2>&1 | grep -v '^CC\\|^LD'", dir);
  CHECKF(test_run(cmd, out, sizeof out) == 0 && strstr(out, "installed wisp in"), "%s", out);
  const char *files[] = {"bin/wisp", "lib/libwisp.so", "lib/libwisp.so.0", "lib/libwisp.so." WISP_VERSION,
                         "lib/libwisp.a", "include/wisp.h", "lib/pkgconfig/wisp.pc",
                         "share/wisp/models/default/manifest.json"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char p[1200];
    snprintf(p, sizeof p, "%s/prefix/%s", dir, files[i]);
    CHECKF(wisp_path_exists(p), "make install did not install %s", files[i]);
  }
  /* the versioned file and its two links; wisp.pc is valid and names the version */
  snprintf(cmd, sizeof cmd, "cd %s/prefix/lib && readlink libwisp.so libwisp.so.0", dir);
  CHECKF(test_run(cmd, out, sizeof out) == 0 && !strcmp(out, "libwisp.so.0\nlibwisp.so." WISP_VERSION "\n"), "%s", out);
  snprintf(cmd, sizeof cmd,
           "export PKG_CONFIG_PATH=%s/prefix/lib/pkgconfig && pkg-config --validate wisp && pkg-config --modversion wisp",
           dir);
  CHECKF(test_run(cmd, out, sizeof out) == 0 && !strcmp(out, WISP_VERSION "\n"), "pkg-config: %s", out);
  snprintf(cmd, sizeof cmd,
           "cd %s && export PKG_CONFIG_PATH=%s/prefix/lib/pkgconfig && "
           "cc -std=c11 -Wall -Wextra -Werror %s/examples/chat.c $(pkg-config --cflags --libs wisp) -o chat",
           dir, dir, src);
  CHECKF(test_run(cmd, out, sizeof out) == 0, "building the example: %s", out);
  snprintf(cmd, sizeof cmd,
           "cd %s && printf 'Who made the heaven?\\nAnd the earth?\\n' | LD_LIBRARY_PATH=%s/prefix/lib "
           "./chat %s/prefix/share/wisp/models/default cpu",
           dir, dir, dir);
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s", out);
  int turns = 0;
  for (const char *p = out; (p = strstr(p, " reply tokens")); p++) turns++;
  CHECKF(turns == 2 && strstr(out, "chat template lfm2"), "%s", out);
  /* the program runs against libwisp.so.0 and the library it loaded says its version */
  CHECKF(strstr(out, "wisp " WISP_VERSION ", "), "%s", out);
  snprintf(cmd, sizeof cmd, "readelf -d %s/chat | grep NEEDED | grep -c 'libwisp.so.0'", dir);
  CHECKF(test_run(cmd, out, sizeof out) == 0 && !strcmp(out, "1\n"), "the example does not need libwisp.so.0: %s", out);
  /* the installed CLI finds its default model and runs from another directory */
  snprintf(cmd, sizeof cmd, "cd / && %s/prefix/bin/wisp run --backend cpu --profile exact -p 'In the beginning' -n 4 --temp 0", dir);
  CHECKF(test_run(cmd, out, sizeof out) == 0 && strstr(out, "share/wisp/models/default"), "%s", out);
}
