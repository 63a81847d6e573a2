/* Writes an artifact without ever leaving a half one behind: everything goes
 * into DIR.partial-PID/ and is renamed to DIR only when complete. */
#ifndef WISP_WRITER_H
#define WISP_WRITER_H

#include <cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "wisp.h"

typedef struct wisp_writer wisp_writer;

/* Whether an artifact may be written at dir: WISP_OK when nothing is there
 * or an empty directory; with `force`, also an artifact wisp wrote (its
 * manifest.json carries wisp.weightsSha256, the mark wisp_writer_commit
 * puts) that holds nothing but an artifact's files (manifest.json,
 * weights.bin, tokenizer.json, tokenizer_config.json,
 * generation_config.json), which are all --force removes. Anything else
 * (a file, a symbolic link, another directory, an artifact with a
 * notes.txt beside it) is refused with one line, force or not. */
wisp_status wisp_writer_check_target(const char *dir, int force);
/* Starts an artifact whose weights.bin has exactly total_bytes. */
wisp_status wisp_writer_begin(const char *dir, uint64_t total_bytes, wisp_writer **out);
wisp_status wisp_writer_put(wisp_writer *w, uint64_t offset, const void *data, size_t bytes);
/* Puts the bytes of a section named in runtime.sections of `manifest`. */
wisp_status wisp_writer_put_section(wisp_writer *w, const cJSON *manifest, const char *name, const void *data,
                                    size_t bytes);
/* Copies the file at src_path into the artifact as `name` (a plain file
 * name, not manifest.json or weights.bin); it appears with the rest at commit. */
wisp_status wisp_writer_add_file(wisp_writer *w, const char *name, const char *src_path);
/* Records sha256 of weights.bin as manifest.wisp.weightsSha256 and of each
 * section as runtime.sections[i].sha256, writes
 * manifest.json, renames the directory into place (over an empty
 * directory or a replaceable artifact, wisp_writer_check_target with force;
 * never over one that appeared meanwhile: RENAME_NOREPLACE) and frees the
 * writer.
 * The manifest stays owned by the caller. */
wisp_status wisp_writer_commit(wisp_writer *w, cJSON *manifest);
/* Removes the partial directory and frees the writer. */
void wisp_writer_abort(wisp_writer *w);

#endif
