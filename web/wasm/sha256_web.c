/* wisp_sha256_hex (util/file.h) in the browser: libmd's SHA-256 (Debian's
 * libmd, built for wasm32 by scripts/wasm-deps.sh), which, unlike
 * WebCrypto's one-shot digest, also hashes a streamed section chunk by
 * chunk (weight_source_web.c). */
#include <sha2.h>
#include <stdint.h>
#include <stdio.h>

#include "util/file.h"

void wisp_sha256_hex(const void *data, size_t len, char out[65]) {
  SHA2_CTX c;
  SHA256Init(&c);
  SHA256Update(&c, data, len);
  uint8_t md[SHA256_DIGEST_LENGTH];
  SHA256Final(md, &c);
  for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
  out[64] = 0;
}
