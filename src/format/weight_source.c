/* Model files mapped into memory: the native weight source (weight_source.h).
 * The browser build replaces this file with web/wasm/weight_source_web.c. */
#include "format/weight_source.h"

#include <string.h>

#include "util/file.h"

wisp_status wisp_weights_open(const char *path, const uint8_t **data, size_t *len) {
  return wisp_map_file(path, data, len);
}

void wisp_weights_close(const uint8_t *data, size_t len) { wisp_unmap_file(data, len); }

int wisp_weights_resident(const void *p, size_t n) {
  (void)p;
  (void)n;
  return 1;
}

wisp_status wisp_weights_read(void *dst, const void *p, size_t n) {
  if (n) memcpy(dst, p, n);
  return WISP_OK;
}

const void *wisp_weights_borrow(const void *p, size_t n, void **owned) {
  (void)n;
  *owned = NULL;
  return p;
}

wisp_status wisp_weights_sha256_hex(const void *p, size_t n, char out[65]) {
  wisp_sha256_hex(n ? p : "", n, out);
  return WISP_OK;
}
