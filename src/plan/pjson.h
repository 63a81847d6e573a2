/* JSON helpers shared by the registry, profile and plan code: loading a file
 * with line/column parse errors and duplicate-key detection, sha256 digests,
 * and the canonical JSON form (sorted keys, no whitespace) hashed into plan
 * ids. Errors follow util/err.h: one line naming the file and JSON path. */
#ifndef WISP_PLAN_PJSON_H
#define WISP_PLAN_PJSON_H

#include <stddef.h>
#include <cJSON.h>

#include "util/file.h"
#include "wisp.h"

/* Reads a whole file (NUL-terminated, malloc'd). NULL + wisp_fail on error. */
char *wisp_slurp(const char *path, size_t *len);
int wisp_file_exists(const char *path);
/* Parses `path` as JSON; rejects duplicate object keys anywhere. */
wisp_status wisp_json_load(const char *path, cJSON **out);
/* Same for an in-memory text; `name` is used in messages. */
wisp_status wisp_json_parse(const char *name, const char *text, size_t len, cJSON **out);

/* Lower-case hex sha256 (65 bytes with NUL). */
wisp_status wisp_sha256_file_hex(const char *path, char hex[65]);

/* Canonical JSON: object keys sorted bytewise, no whitespace, integral
 * numbers printed as integers, others with %.17g. malloc'd. */
char *wisp_json_canonical(const cJSON *j);

/* JSON type name for messages ("string", "number", ...). */
const char *wisp_json_type(const cJSON *j);
/* 1 when j is a number with an integral value. */
int wisp_json_is_int(const cJSON *j);


/* A bump allocator: everything is released by wisp_arena_free. Allocations
 * are zeroed. NULL on out-of-memory. */
typedef struct wisp_arena wisp_arena;
void *wisp_arena_alloc(wisp_arena **a, size_t n);
char *wisp_arena_strdup(wisp_arena **a, const char *s);
void wisp_arena_free(wisp_arena *a);

/* snprintf without compile-time truncation warnings (paths are cut to cap). */
void wisp_path(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Whether WGSL source declares `fn ENTRY(`. */
int wisp_wgsl_has_entry(const char *src, const char *entry);

#endif
