/* Helpers shared by the cmd_*.c files. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "format/synthetic.h"
#include "format/writer.h"
#include "util/env.h"
#include "engine/engine.h" /* wisp_backend_auto_why, through the engine's door */
#include "util/err.h"
#include "util/file.h"
#include "util/paths.h"
#include "util/target.h"
#include "wisp.h"

const char *cli_profile_or_fast(const char *given) { return given && *given ? given : CLI_FAST_PROFILE; }

void cli_backend_why(const char *asked, const char *got, char *out, size_t cap) {
  if (asked && !strcmp(asked, "auto")) snprintf(out, cap, "%s: --backend auto (the default), %s", got, wisp_backend_auto_why());
  else snprintf(out, cap, "%s: named by --backend %s", got, asked ? asked : "cpu");
}

void cli_profile_why(const char *given, char *out, size_t cap) {
  if (given && (!strcmp(given, "exact") || !strcmp(given, "profiles/exact")))
    snprintf(out, cap, "named by --profile %s (the reference path: the f32 products)", given);
  else if (given && *given) snprintf(out, cap, "named by --profile %s", given);
  else snprintf(out, cap, "the default: the fast profile (%s: integer products where the rules allow them); "
                          "--profile exact runs the reference path", CLI_FAST_PROFILE);
}

int cli_error(const char *cmd) {
  fprintf(stderr, "wisp %s: %s\n", cmd, wisp_last_error());
  return 1;
}

/* The default model, under the trusted root (util/paths.h) only: an
 * installed one (PREFIX/share/wisp/models/default), the tree's
 * models/default (the trained LFM2 of docs/default-model.md), or the tree's
 * seed-shaped synthetic model, generated on first use. Never beside a
 * copied executable: whoever can write there could plant a model. The one
 * found must pass wisp_check_trusted, as must its manifest and weights. */
static int has_manifest(const char *dir) {
  char manifest[PATH_MAX + 96];
  snprintf(manifest, sizeof manifest, "%s/manifest.json", dir);
  return wisp_path_exists(manifest);
}

static const char *trusted_model(const char *dir) {
  static const char *const files[] = {"", "/manifest.json", "/weights.bin"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char p[PATH_MAX + 96];
    snprintf(p, sizeof p, "%s%s", dir, files[i]);
    if ((i == 0 || wisp_path_exists(p)) && wisp_check_trusted(p, "default model")) return NULL;
  }
  return dir;
}

const char *cli_default_model(void) {
  static char path[PATH_MAX + 64];
  const char *root = wisp_trusted_root();
  snprintf(path, sizeof path, "%s/share/wisp/models/default", root);
  if (has_manifest(path)) return trusted_model(path);
  snprintf(path, sizeof path, "%s/models/default", root);
  if (has_manifest(path)) return trusted_model(path);
  snprintf(path, sizeof path, "%s/models/synthetic-seed", root);
  if (has_manifest(path)) return trusted_model(path);
  /* First use: generate the built-in default from the seed-shaped manifest. */
  char seed_manifest[PATH_MAX + 96], models[PATH_MAX + 16];
  snprintf(seed_manifest, sizeof seed_manifest, "%s/assets/lfm2-hybrid-q4.manifest.json", root);
  snprintf(models, sizeof models, "%s/models", root);
  char *text = NULL;
  if (!wisp_path_exists(seed_manifest)) {
    wisp_fail(WISP_EIO, "no default model where wisp was built or installed (none in %s/share/wisp/models/default or "
              "%s/models/default); pass -m DIR", root, root);
    return NULL;
  }
  if (wisp_check_trusted(root, "default model")) return NULL;
  if (wisp_read_file(seed_manifest, &text, NULL)) return NULL;
  if (mkdir(models, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "wisp: cannot create %s: %s\n", models, strerror(errno));
    free(text);
    return NULL;
  }
  fprintf(stderr, "wisp: generating the built-in default model (seed-shaped synthetic LFM2) in %s ...\n", path);
  wisp_status st = wisp_synthetic_write(text, seed_manifest, path, 1);
  free(text);
  return st ? NULL : path;
}

/* ---- wisp --version ------------------------------------------------------ */

/* The Dawn build comes from the VERSION file that scripts/webgpu-deps.sh
 * writes beside the library (the pinned package name@version), found where
 * the WebGPU loader looks: $WISP_WEBGPU_LIB's directory, else PREFIX/lib/wisp/
 * or the build tree's .cache/webgpu/. Nothing is loaded, so no GPU is needed. */
int cli_print_version(void) {
  printf("wisp %s\n", WISP_VERSION);
  char path[PATH_MAX + 32];
  const char *lib = wisp_env_webgpu_lib();
  if (lib) {
    snprintf(path, sizeof path, "%s", lib);
    char *slash = strrchr(path, '/');
    if (slash) snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "VERSION");
    else snprintf(path, sizeof path, "VERSION");
  } else {
    /* the installed copy (PREFIX/lib/wisp), else the build tree's cache */
    snprintf(path, sizeof path, "%s/lib/wisp/VERSION", wisp_trusted_root());
    if (!wisp_path_exists(path)) snprintf(path, sizeof path, "%s/.cache/webgpu/VERSION", wisp_trusted_root());
  }
  char *text = NULL;
  if (wisp_read_file(path, &text, NULL) == WISP_OK) {
    text[strcspn(text, "\r\n")] = 0;
    printf("dawn: %s (%s)\n", text[0] ? text : "unknown build", path);
  } else {
    printf("dawn: not installed (%s; scripts/webgpu-deps.sh fetches it)\n", wisp_last_error());
  }
  free(text);
  return 0;
}

/* ---- the overwrite rule of every writer ------------------------------------ */

/* The targets this process holds the lock of, released at exit. */
#define MAX_CLAIMS 4
static char g_claims[MAX_CLAIMS][PATH_MAX];
static int g_n_claims;

static void release_claims(void) {
  for (int i = 0; i < g_n_claims; i++) wisp_target_unlock(g_claims[i]);
  g_n_claims = 0;
}

int cli_claim_target(const char *cmd, const char *path, int is_dir, int force) {
  if (g_n_claims >= MAX_CLAIMS || strlen(path) >= PATH_MAX - 16) {
    fprintf(stderr, "wisp %s: %s: cannot claim the target\n", cmd, path);
    return 2;
  }
  /* The target is checked before the lock is taken, so that a refused one
   * (a device such as /dev/full, a FIFO) is left without a lock file beside
   * it, and again under the lock, where another writer may have been. */
  if ((is_dir ? wisp_writer_check_target(path, force) : wisp_target_check_file(path, force)) ||
      wisp_target_lock(path)) {
    fprintf(stderr, "wisp %s: %s\n", cmd, wisp_last_error());
    return 2;
  }
  if (g_n_claims == 0) atexit(release_claims);
  snprintf(g_claims[g_n_claims++], sizeof g_claims[0], "%s", path);
  char lock[PATH_MAX + 32];
  wisp_target_lock_path(path, lock, sizeof lock);
  cli_remove_on_interrupt(lock, NULL, 0);
  wisp_status st = is_dir ? wisp_writer_check_target(path, force) : wisp_target_check_file(path, force);
  if (st) {
    fprintf(stderr, "wisp %s: %s\n", cmd, wisp_last_error());
    return 2;
  }
  return 0;
}

/* ---- temporary files removed on Ctrl-C ------------------------------------- */

/* The paths are formatted when registered, so that the handler only calls
 * unlink and rmdir (both async-signal-safe). */
#define MAX_DOOMED 48
static char g_doomed[MAX_DOOMED][PATH_MAX + 320];
static int g_doomed_is_dir[MAX_DOOMED];
static volatile sig_atomic_t g_n_doomed;

static void remove_doomed(int sig) {
  for (int i = 0; i < g_n_doomed; i++)
    if (!g_doomed_is_dir[i]) unlink(g_doomed[i]);
  for (int i = 0; i < g_n_doomed; i++)
    if (g_doomed_is_dir[i]) rmdir(g_doomed[i]);
  signal(sig, SIG_DFL);
  raise(sig);
}

static void doom(const char *path, int is_dir) {
  if (g_n_doomed >= MAX_DOOMED) return;
  snprintf(g_doomed[g_n_doomed], sizeof g_doomed[0], "%s", path);
  g_doomed_is_dir[g_n_doomed] = is_dir;
  g_n_doomed = g_n_doomed + 1;
}

void cli_remove_on_interrupt(const char *path, const char *const *names, int n_names) {
  char p[PATH_MAX + 300];
  if (strlen(path) >= PATH_MAX) return;
  const int pid = (int)getpid();
  if (!names) {
    doom(path, 0);
  } else {
    for (int i = 0; i < n_names; i++) {
      snprintf(p, sizeof p, "%s/%s", path, names[i]);
      doom(p, 0);
      snprintf(p, sizeof p, "%s/%s.tmp-%d", path, names[i], pid); /* wisp_write_file_atomic's name */
      doom(p, 0);
    }
    doom(path, 1);
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = remove_doomed;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
}

void cli_interrupt_forget(void) {
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGHUP, SIG_DFL);
  g_n_doomed = 0;
}

size_t cli_prompt_limit(int context) {
  return (size_t)(context > 0 ? context : 1) * CLI_PROMPT_BYTES_PER_POSITION + 4096;
}

void cli_warn_threads(const char *cmd, long threads) {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores > 0 && threads > cores)
    fprintf(stderr, "wisp %s: warning: -t %ld is more threads than the %ld cores online; the extra threads wait for a "
            "core and slow every step (-t 0, the default, takes one per physical core available)\n", cmd, threads, cores);
}

/* ---- prompts from files and standard input --------------------------------- */

wisp_status cli_read_text(const char *path, size_t max, char **text, size_t *len) {
  if (!strcmp(path, "-")) return wisp_read_fd(0, "standard input", max, text, len);
  return wisp_read_file_max(path, max, text, len);
}
