/* Bytes of `wisp serve` answers (response.h). */
#include "server/response.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

void srv_buf_put(srv_buf *b, const char *p, size_t n) {
  if (b->failed) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = (b->n + n + 1) * 2;
    char *s = realloc(b->s, cap);
    if (!s) { b->failed = 1; return; }
    b->s = s;
    b->cap = cap;
  }
  memcpy(b->s + b->n, p, n);
  b->n += n;
  b->s[b->n] = 0;
}

void srv_buf_puts(srv_buf *b, const char *s) { srv_buf_put(b, s, strlen(s)); }

void srv_buf_free(srv_buf *b) {
  free(b->s);
  memset(b, 0, sizeof *b);
}

void srv_sse_event(srv_buf *b, const char *json) {
  srv_buf_puts(b, "data: ");
  srv_buf_puts(b, json);
  srv_buf_puts(b, "\n\n");
}

void srv_sse_done(srv_buf *b) { srv_buf_puts(b, "data: [DONE]\n\n"); }

char *srv_error_json(const srv_error *e) {
  cJSON *root = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(root, "error");
  if (!err) { cJSON_Delete(root); return NULL; }
  cJSON_AddStringToObject(err, "message", e->message);
  cJSON_AddStringToObject(err, "type", e->type ? e->type : "server_error");
  if (e->param[0]) cJSON_AddStringToObject(err, "param", e->param);
  else cJSON_AddNullToObject(err, "param");
  if (e->code) cJSON_AddStringToObject(err, "code", e->code);
  else cJSON_AddNullToObject(err, "code");
  char *s = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return s;
}

/* The length of the valid UTF-8 sequence at p[0..n), or 0. */
static size_t valid_seq(const unsigned char *p, size_t n) {
  size_t k = p[0] < 0x80 ? 1 : (p[0] & 0xE0) == 0xC0 ? 2 : (p[0] & 0xF0) == 0xE0 ? 3 : (p[0] & 0xF8) == 0xF0 ? 4 : 0;
  if (!k || k > n) return 0;
  return wisp_utf8_valid((const char *)p, k) ? k : 0;
}

char *srv_utf8_sanitize(const char *p, size_t n) {
  char *out = malloc(n * 3 + 1); /* each bad byte grows to the 3 bytes of U+FFFD */
  if (!out) return NULL;
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    size_t k = valid_seq((const unsigned char *)p + i, n - i);
    if (k && !(k == 1 && p[i] == 0)) {
      memcpy(out + o, p + i, k);
      o += k;
      i += k;
    } else {
      memcpy(out + o, "\xEF\xBF\xBD", 3);
      o += 3;
      i++;
    }
  }
  out[o] = 0;
  return out;
}
