/* JSON text written directly (json_text.h). */
#include "format/json_text.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(wisp_json_text *t, size_t more) {
  if (t->failed) return 0;
  if (t->len + more + 1 <= t->cap) return 1;
  size_t cap = t->cap ? t->cap : 4096;
  while (cap < t->len + more + 1) cap *= 2;
  char *s = realloc(t->s, cap);
  if (!s) {
    t->failed = 1;
    return 0;
  }
  t->s = s;
  t->cap = cap;
  return 1;
}

void wisp_json_text_raw(wisp_json_text *t, const char *s, size_t n) {
  if (!reserve(t, n)) return;
  memcpy(t->s + t->len, s, n);
  t->len += n;
}

void wisp_json_text_str(wisp_json_text *t, const char *s, size_t n) {
  const char *nul = memchr(s, 0, n);
  if (nul) n = (size_t)(nul - s);
  if (!reserve(t, 6 * n + 2)) return; /* at most \u00XX a byte */
  char *o = t->s + t->len;
  *o++ = '"';
  for (size_t i = 0; i < n; i++) {
    const unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      *o++ = '\\';
      *o++ = (char)c;
    } else if (c < 0x20) {
      static const char hex[] = "0123456789abcdef";
      const char *named = c == '\b' ? "\\b" : c == '\f' ? "\\f" : c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
      if (named) {
        *o++ = named[0];
        *o++ = named[1];
      } else {
        memcpy(o, "\\u00", 4);
        o[4] = hex[c >> 4];
        o[5] = hex[c & 15];
        o += 6;
      }
    } else {
      *o++ = (char)c;
    }
  }
  *o++ = '"';
  t->len = (size_t)(o - t->s);
}

void wisp_json_text_int(wisp_json_text *t, int64_t v) {
  char num[24];
  int n = snprintf(num, sizeof num, "%" PRId64, v);
  wisp_json_text_raw(t, num, (size_t)n);
}

void wisp_json_text_comma(wisp_json_text *t) {
  if (t->len && t->s[t->len - 1] != '{' && t->s[t->len - 1] != '[') wisp_json_text_raw(t, ",", 1);
}

void wisp_json_text_member_int(wisp_json_text *t, const char *key, size_t n, int64_t v) {
  wisp_json_text_comma(t);
  wisp_json_text_str(t, key, n);
  wisp_json_text_raw(t, ":", 1);
  wisp_json_text_int(t, v);
}

int wisp_json_text_put(wisp_json_text *t, cJSON *obj, const char *name) {
  int ok = reserve(t, 0);
  if (ok) {
    t->s[t->len] = '\0';
    ok = cJSON_AddRawToObject(obj, name, t->s) != NULL;
  }
  free(t->s);
  *t = (wisp_json_text){0};
  return ok;
}
