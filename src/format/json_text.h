/* JSON text written directly, for the two big arrays of a tokenizer.json
 * made from a GGUF vocabulary (the vocab object and the merges list): a
 * cJSON tree of 150k-260k tokens and as many merges is half a million
 * small allocations, built only to be printed and parsed again, and most of
 * a GGUF's open time. The text goes into the tree as one raw item
 * (cJSON_AddRawToObject), so the rest of the file stays a cJSON tree. */
#ifndef WISP_FORMAT_JSON_TEXT_H
#define WISP_FORMAT_JSON_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

typedef struct {
  char *s;
  size_t len, cap;
  int failed; /* out of memory: every later call does nothing */
} wisp_json_text;

/* Raw characters, as they are. */
void wisp_json_text_raw(wisp_json_text *t, const char *s, size_t n);
/* A JSON string of the bytes s[0..n) up to the first NUL (as a C string
 * would hold them): quotes, backslashes and control characters escaped,
 * every other byte as it is (as cJSON prints). */
void wisp_json_text_str(wisp_json_text *t, const char *s, size_t n);
void wisp_json_text_int(wisp_json_text *t, int64_t v);
/* A comma, unless the text is empty or has just opened an object or array. */
void wisp_json_text_comma(wisp_json_text *t);
/* An object member "KEY": v (KEY the n bytes at key, as _str writes them),
 * after a comma where one is due. */
void wisp_json_text_member_int(wisp_json_text *t, const char *key, size_t n, int64_t v);
/* The text as obj's member `name` (a raw item, printed as it is); the
 * buffer is freed either way. 1 when added, 0 when out of memory. */
int wisp_json_text_put(wisp_json_text *t, cJSON *obj, const char *name);

#endif
