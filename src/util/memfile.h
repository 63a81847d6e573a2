/* Files held in memory under a path: a model opened from a GGUF keeps the
 * tokenizer files it derives from the GGUF's metadata here, under
 * FILE.gguf/tokenizer.json and the like, so that every reader that takes a
 * path (wisp_read_file, wisp_path_exists: the tokenizer, the chat template,
 * the generation config) finds them without a file being written. Such a
 * path can never name a real file: FILE.gguf is a file, not a directory.
 * Entries are counted: two opens of one GGUF share an entry, the last drop
 * removes it. Thread-safe. */
#ifndef WISP_MEMFILE_H
#define WISP_MEMFILE_H

#include <stddef.h>

#include "wisp.h"

/* Adds (or counts once more) `path` holding a copy of data[len]. */
wisp_status wisp_memfile_put(const char *path, const char *data, size_t len);
/* Drops one count of `path`; the entry goes with the last. */
void wisp_memfile_drop(const char *path);
/* A malloc'd NUL-terminated copy of the file; 0 when there is no such entry. */
int wisp_memfile_read(const char *path, char **data, size_t *len);
int wisp_memfile_exists(const char *path);

#endif
