/* The library's version and the option structs' init functions and reader
 * (include/wisp.h, "Option structs grow"; options.h). */
#include "api/options.h"

#include <string.h>

#include "util/err.h"

const char *wisp_version(void) { return WISP_VERSION; }

wisp_status wisp_options_take(const void *src, void *dst, size_t dst_size, size_t first_size, const char *what) {
  memset(dst, 0, dst_size);
  if (!src) return WISP_OK;
  size_t size;
  memcpy(&size, src, sizeof size); /* every options struct starts with its size */
  if (size == 0) size = first_size;
  if (size < first_size || size > dst_size)
    return wisp_fail(WISP_EINVAL, "%s: size %zu is neither 0 nor a size this library knows (%zu to %zu)", what, size,
                     first_size, dst_size);
  memcpy(dst, src, size);
  memcpy(dst, &dst_size, sizeof dst_size); /* the copy is whole now */
  return WISP_OK;
}

/* Every field's default is zero; the init functions say so once per struct
 * and set the size that marks the struct as this header's. */
#define DEFINE_INIT(T, name)                                                                                           \
  void name(T *o) {                                                                                                    \
    if (!o) return;                                                                                                    \
    memset(o, 0, sizeof *o);                                                                                           \
    o->size = sizeof *o;                                                                                               \
  }

DEFINE_INIT(wisp_session_options, wisp_session_options_init)
DEFINE_INIT(wisp_generate_options, wisp_generate_options_init)
DEFINE_INIT(wisp_text_options, wisp_text_options_init)
DEFINE_INIT(wisp_step_options, wisp_step_options_init)
DEFINE_INIT(wisp_sched_options, wisp_sched_options_init)
DEFINE_INIT(wisp_sched_request, wisp_sched_request_init)
