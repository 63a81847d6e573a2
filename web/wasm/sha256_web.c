/* wisp_sha256_hex (util/file.h) in the browser: WebCrypto's SHA-256
 * (crypto.subtle.digest), which web/wisp.js imports as wisp.sha256. The
 * digest is asynchronous in the page, so the import suspends the module
 * (JSPI) until it is ready. */
#include <stdint.h>
#include <stdio.h>

#include "util/file.h"

__attribute__((import_module("wisp"), import_name("sha256")))
void wisp_js_sha256(const void *data, size_t len, uint8_t digest[32]);

void wisp_sha256_hex(const void *data, size_t len, char out[65]) {
  uint8_t md[32];
  wisp_js_sha256(data, len, md);
  for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
  out[64] = 0;
}
