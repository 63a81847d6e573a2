/* Reading a caller's option struct (include/wisp.h, "Option structs grow"):
 * each public options struct starts with a size_t `size`, 0 for the
 * struct's first layout or sizeof(the struct) as the caller's header has it.
 * (The init functions that set it are src/api/options.c.) */
#ifndef WISP_UTIL_OPTIONS_H
#define WISP_UTIL_OPTIONS_H

#include <stddef.h>

#include "wisp.h"

/* Copies the caller's struct `src` (NULL: every field's default, zero) into
 * `dst`, the library's own struct of dst_size bytes, zeroing the fields the
 * caller's struct predates. first_size is the size of the struct's first
 * layout, which `size` 0 stands for. A size outside first_size..dst_size is
 * WISP_EINVAL, naming `what` (the struct's type name). */
wisp_status wisp_options_take(const void *src, void *dst, size_t dst_size, size_t first_size, const char *what);

/* The size of each struct's first layout (what `size` 0 means). When a field
 * is added at the end of a struct, its entry here becomes offsetof(the
 * struct, the new field), so callers built before the field keep working. */
#define WISP_SESSION_OPTIONS_FIRST_SIZE sizeof(wisp_session_options)
#define WISP_GENERATE_OPTIONS_FIRST_SIZE sizeof(wisp_generate_options)
#define WISP_TEXT_OPTIONS_FIRST_SIZE sizeof(wisp_text_options)
#define WISP_STEP_OPTIONS_FIRST_SIZE sizeof(wisp_step_options)
#define WISP_SCHED_OPTIONS_FIRST_SIZE sizeof(wisp_sched_options)
#define WISP_SCHED_REQUEST_FIRST_SIZE sizeof(wisp_sched_request)

/* wisp_options_take for one public struct type T: `src` is a const T *, `dst` a T *. */
#define WISP_TAKE_OPTIONS(T, FIRST, src, dst) wisp_options_take((src), (dst), sizeof(T), (FIRST), #T)

#endif
