/* Small file helpers: whole-file reads, read-only memory maps, sha256. */
#ifndef WISP_FILE_H
#define WISP_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "wisp.h"

/* The most any whole-file read takes (64 MiB): JSON (manifests, configs,
 * profiles, plans, the safetensors index), tokenizer files, chat templates,
 * text for tokenize and perplexity. The largest tokenizer.json of a released
 * model is about 33 MB. Prompts have their own, smaller limit (the
 * context's, cli/commands.h). */
#define WISP_FILE_MAX ((size_t)64 << 20)

/* Reads a whole file into a NUL-terminated malloc'd buffer: the one way
 * wisp reads a path, so every reader fails the same precise way ("is a
 * directory, not a file", "cannot open: No such file or directory", ...).
 * Pipes and FIFOs are read to their end. A "builtin:" path is served from
 * the files built into the library (util/builtin.h). At most WISP_FILE_MAX
 * bytes: a larger file is refused before it is read, a longer stream as
 * soon as it passes the limit (WISP_EINVAL, one line). */
wisp_status wisp_read_file(const char *path, char **data, size_t *len);
/* The same with a limit of `max` bytes. */
wisp_status wisp_read_file_max(const char *path, size_t max, char **data, size_t *len);
/* The same for an open descriptor (standard input); `name` is for messages. */
wisp_status wisp_read_fd(int fd, const char *name, size_t max, char **data, size_t *len);
/* Maps a regular file read-only (same errors as wisp_read_file). An empty
 * file maps to (NULL, 0). */
wisp_status wisp_map_file(const char *path, const uint8_t **data, size_t *len);
void wisp_unmap_file(const uint8_t *data, size_t len);
/* Writes data to path atomically: PATH.tmp-PID, synced, renamed over path
 * only when path is absent or a regular file (util/target.h); a write error
 * (a full disk) fails and leaves path as it was. */
wisp_status wisp_write_file_atomic(const char *path, const void *data, size_t len);
/* sha256 of a buffer as 64 lowercase hex digits + NUL. */
void wisp_sha256_hex(const void *data, size_t len, char out[65]);
int wisp_path_exists(const char *path);
/* 1 when path names a regular file (following links), not a directory. */
int wisp_is_regular_file(const char *path);

#endif
