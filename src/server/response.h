/* The bytes `wisp serve` writes: a growing buffer, Server-Sent Events
 * framing ("data: JSON" and a blank line; "data: [DONE]" at the end, as
 * OpenAI streams), the OpenAI error body, and text made safe for JSON. */
#ifndef WISP_SERVER_RESPONSE_H
#define WISP_SERVER_RESPONSE_H

#include <stddef.h>

#include "server/request.h"

typedef struct {
  char *s;
  size_t n, cap;
  int failed; /* an allocation failed; the buffer stops growing */
} srv_buf;

void srv_buf_put(srv_buf *b, const char *p, size_t n);
void srv_buf_puts(srv_buf *b, const char *s);
void srv_buf_free(srv_buf *b);

/* Appends one event: "data: " json "\n\n". json must hold no newline
 * (cJSON_PrintUnformatted's output never does). */
void srv_sse_event(srv_buf *b, const char *json);
/* Appends the end of an OpenAI stream: "data: [DONE]\n\n". */
void srv_sse_done(srv_buf *b);

/* {"error":{"message","type","param","code"}} (malloc'd); NULL when out of memory. */
char *srv_error_json(const srv_error *e);

/* A NUL-terminated copy of p[0..n) that is valid UTF-8: each byte that does
 * not start a whole, valid sequence becomes U+FFFD (a token's bytes may be
 * part of a character). */
char *srv_utf8_sanitize(const char *p, size_t n);

#endif
