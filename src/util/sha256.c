/* wisp_sha256_hex (util/file.h) from OpenSSL's libcrypto. A file of its own
 * so that the browser build (make wasm) can take WebCrypto's instead
 * (web/wasm/sha256_web.c). */
#include <openssl/evp.h>
#include <stdio.h>

#include "util/file.h"

void wisp_sha256_hex(const void *data, size_t len, char out[65]) {
  unsigned char md[32];
  unsigned int n = 0;
  EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
  for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
  out[64] = 0;
}
