/* Reading a caller's option struct: util/options.h. */
#include "util/options.h"

#include <string.h>

#include "util/err.h"

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
