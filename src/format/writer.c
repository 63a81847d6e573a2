/* Artifact writer; see writer.h. */
#include "format/writer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/err.h"
#include "util/file.h"

struct wisp_writer {
  char dir[4096], tmp[4200];
  int fd;
  uint64_t total;
};

/* Removes a temporary directory and the files in it. Only a real
 * directory: a symbolic link planted under the temporary's name is not
 * followed (O_NOFOLLOW), so nothing outside is removed. */
static void remove_dir_files(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  DIR *d = fdopendir(fd);
  if (!d) { close(fd); return; }
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlinkat(fd, e->d_name, 0);
  closedir(d);
  rmdir(dir);
}

/* Every file an artifact directory may hold: what --force may remove. */
static const char *const k_artifact_files[] = {"manifest.json", "weights.bin", "tokenizer.json",
                                               "tokenizer_config.json", "generation_config.json"};
#define N_ARTIFACT_FILES (sizeof k_artifact_files / sizeof k_artifact_files[0])

/* Whether dir/manifest.json carries the writer's mark, wisp.weightsSha256. */
static int made_by_wisp(const char *dir) {
  char path[8192], *text = NULL;
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  if (wisp_read_file(path, &text, NULL)) return 0;
  cJSON *m = cJSON_Parse(text);
  free(text);
  const cJSON *mark = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "wisp"), "weightsSha256");
  const int ok = cJSON_IsString(mark);
  cJSON_Delete(m);
  return ok;
}

wisp_status wisp_writer_check_target(const char *dir, int force) {
  struct stat sb;
  if (lstat(dir, &sb) != 0) {
    if (errno == ENOENT) return WISP_OK;
    return wisp_fail(WISP_EIO, "%s: %s", dir, strerror(errno));
  }
  if (S_ISLNK(sb.st_mode))
    return wisp_fail(WISP_EIO, "%s is a symbolic link; wisp does not write through one (name its target)", dir);
  if (!S_ISDIR(sb.st_mode)) return wisp_fail(WISP_EIO, "%s exists and is not a directory; not overwriting", dir);
  DIR *d = opendir(dir);
  if (!d) return wisp_fail(WISP_EIO, "%s: cannot read: %s", dir, strerror(errno));
  wisp_status st = WISP_OK;
  int empty = 1, mark_checked = 0;
  struct dirent *e;
  while (!st && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    empty = 0;
    if (!force) {
      st = wisp_fail(WISP_EIO, "%s already exists and is not empty; not overwriting (--force replaces an artifact wisp "
                     "wrote)", dir);
      break;
    }
    if (!mark_checked++ && !made_by_wisp(dir)) {
      st = wisp_fail(WISP_EIO, "%s is not an artifact wisp wrote (no manifest.json with wisp.weightsSha256); not "
                     "replacing it, even with --force", dir);
      break;
    }
    size_t i = 0;
    while (i < N_ARTIFACT_FILES && strcmp(e->d_name, k_artifact_files[i])) i++;
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (i == N_ARTIFACT_FILES || lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
      st = wisp_fail(WISP_EIO, "%s holds %s, which is not an artifact's file; not replacing it, even with --force", dir,
                     e->d_name);
  }
  closedir(d);
  (void)empty;
  return st;
}

wisp_status wisp_writer_begin(const char *dir, uint64_t total, wisp_writer **out) {
  *out = NULL;
  wisp_writer *w = calloc(1, sizeof *w);
  if (!w) return wisp_fail(WISP_ENOMEM, "out of memory");
  snprintf(w->dir, sizeof w->dir, "%s", dir);
  snprintf(w->tmp, sizeof w->tmp, "%s.partial-%d", dir, (int)getpid());
  w->total = total;
  remove_dir_files(w->tmp);
  if (mkdir(w->tmp, 0755) != 0) {
    wisp_status st = wisp_fail(WISP_EIO, "%s: cannot create directory: %s", w->tmp, strerror(errno));
    free(w);
    return st;
  }
  char path[8192];
  snprintf(path, sizeof path, "%s/weights.bin", w->tmp);
  w->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (w->fd < 0 || ftruncate(w->fd, (off_t)total) != 0) {
    wisp_status st = wisp_fail(WISP_EIO, "%s: cannot create %llu bytes: %s", path, (unsigned long long)total,
                               strerror(errno));
    wisp_writer_abort(w);
    return st;
  }
  *out = w;
  return WISP_OK;
}

wisp_status wisp_writer_put(wisp_writer *w, uint64_t offset, const void *data, size_t bytes) {
  if (offset + bytes > w->total)
    return wisp_fail(WISP_EINVAL, "write of %zu bytes at %llu passes the end (%llu)", bytes,
                     (unsigned long long)offset, (unsigned long long)w->total);
  const uint8_t *p = data;
  while (bytes > 0) {
    ssize_t n = pwrite(w->fd, p, bytes, (off_t)offset);
    if (n <= 0) return wisp_fail(WISP_EIO, "%s/weights.bin: write failed: %s", w->tmp, strerror(errno));
    p += n;
    bytes -= (size_t)n;
    offset += (uint64_t)n;
  }
  return WISP_OK;
}

wisp_status wisp_writer_put_section(wisp_writer *w, const cJSON *manifest, const char *name, const void *data,
                                    size_t bytes) {
  const cJSON *runtime = cJSON_GetObjectItemCaseSensitive(manifest, "runtime");
  const cJSON *secs = cJSON_GetObjectItemCaseSensitive(runtime, "sections");
  const cJSON *e;
  cJSON_ArrayForEach(e, secs) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
    if (!cJSON_IsString(n) || strcmp(n->valuestring, name)) continue;
    double sz = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "bytes"));
    if ((double)bytes != sz)
      return wisp_fail(WISP_EINVAL, "section '%s': %zu bytes given, layout has %.0f", name, bytes, sz);
    return wisp_writer_put(w, (uint64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "offset")), data,
                           bytes);
  }
  return wisp_fail(WISP_EINVAL, "section '%s' is not in the layout", name);
}

wisp_status wisp_writer_add_file(wisp_writer *w, const char *name, const char *src_path) {
  if (!name[0] || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, "manifest.json") ||
      !strcmp(name, "weights.bin"))
    return wisp_fail(WISP_EINVAL, "'%s' cannot be added to an artifact", name);
  char *data = NULL;
  size_t len = 0;
  wisp_status st = wisp_read_file(src_path, &data, &len);
  if (st) return st;
  char path[8192];
  snprintf(path, sizeof path, "%s/%s", w->tmp, name);
  st = wisp_write_file_atomic(path, data, len);
  free(data);
  return st;
}

wisp_status wisp_writer_commit(wisp_writer *w, cJSON *manifest) {
  wisp_status st = WISP_OK;
  char path[8192];
  if (fsync(w->fd) != 0) { st = wisp_fail(WISP_EIO, "%s: fsync failed", w->tmp); goto fail; }
  close(w->fd);
  w->fd = -1;
  snprintf(path, sizeof path, "%s/weights.bin", w->tmp);
  const uint8_t *data;
  size_t len;
  if ((st = wisp_map_file(path, &data, &len))) goto fail;
  char hex[65];
  wisp_sha256_hex(data, len, hex);
  /* Each section's digest beside it (runtime.sections[i].sha256). */
  const cJSON *secs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(manifest, "runtime"), "sections");
  cJSON *e;
  cJSON_ArrayForEach(e, secs) {
    double off = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "offset"));
    double sz = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "bytes"));
    cJSON_DeleteItemFromObjectCaseSensitive(e, "sha256");
    if (!(off >= 0 && sz >= 0 && off + sz <= (double)len)) continue;
    char sh[65];
    wisp_sha256_hex(data ? data + (size_t)off : (const uint8_t *)"", (size_t)sz, sh);
    cJSON_AddStringToObject(e, "sha256", sh);
  }
  wisp_unmap_file(data, len);
  cJSON *ext = cJSON_GetObjectItemCaseSensitive(manifest, "wisp");
  if (!ext) ext = cJSON_AddObjectToObject(manifest, "wisp");
  cJSON_DeleteItemFromObjectCaseSensitive(ext, "weightsSha256");
  cJSON_AddStringToObject(ext, "weightsSha256", hex);
  char *text = cJSON_Print(manifest);
  if (!text) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto fail; }
  snprintf(path, sizeof path, "%s/manifest.json", w->tmp);
  st = wisp_write_file_atomic(path, text, strlen(text));
  free(text);
  if (st) goto fail;
  /* Replace an empty directory, or an artifact wisp wrote holding only an
   * artifact's files (whether to is the caller's decision: the CLI asks for
   * --force), never anything else; only those files are removed. */
  struct stat sb;
  if (lstat(w->dir, &sb) == 0 && !(S_ISDIR(sb.st_mode) && rmdir(w->dir) == 0)) {
    if ((st = wisp_writer_check_target(w->dir, 1))) goto fail;
    for (size_t i = 0; i < N_ARTIFACT_FILES; i++) {
      snprintf(path, sizeof path, "%s/%s", w->dir, k_artifact_files[i]);
      unlink(path);
    }
    if (rmdir(w->dir) != 0) {
      st = wisp_fail(WISP_EIO, "%s: cannot remove the old artifact: %s", w->dir, strerror(errno));
      goto fail;
    }
  }
  /* RENAME_NOREPLACE: a directory that appeared meanwhile is not replaced. */
  if (renameat2(AT_FDCWD, w->tmp, AT_FDCWD, w->dir, RENAME_NOREPLACE) != 0) {
    st = wisp_fail(WISP_EIO, "cannot rename %s to %s: %s", w->tmp, w->dir, strerror(errno));
    goto fail;
  }
  free(w);
  return WISP_OK;
fail:
  wisp_writer_abort(w);
  return st;
}

void wisp_writer_abort(wisp_writer *w) {
  if (!w) return;
  if (w->fd >= 0) close(w->fd);
  remove_dir_files(w->tmp);
  free(w);
}
