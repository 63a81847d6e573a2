/* Tokenizer dispatch (byte-level or BPE), the streaming decoder and UTF-8
 * helpers; see tokenizer.h. The byte kind lives here; BPE is bpe.c. */
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/bpe.h"
#include "util/err.h"
#include "util/file.h"

enum { KIND_BYTE, KIND_BPE };

struct wisp_tokenizer {
  int kind;
  int vocab;
  wisp_bpe *bpe;
  char byte_piece[256]; /* byte kind: byte i at [i] */
};

wisp_status wisp_tokenizer_new(const char *kind, int vocab, wisp_tokenizer **out) {
  *out = NULL;
  if (!strcmp(kind, "bpe"))
    return wisp_fail(WISP_EINVAL, "a 'bpe' tokenizer is made from its tokenizer.json (wisp_tokenizer_from_file)");
  if (strcmp(kind, "byte") != 0) return wisp_fail(WISP_EUNSUPPORTED, "unknown tokenizer kind '%s'", kind);
  if (vocab < 256) return wisp_fail(WISP_EFORMAT, "a byte tokenizer needs a vocabulary of at least 256, not %d", vocab);
  wisp_tokenizer *t = calloc(1, sizeof *t);
  if (!t) return wisp_fail(WISP_ENOMEM, "out of memory");
  t->kind = KIND_BYTE;
  t->vocab = vocab;
  for (int i = 0; i < 256; i++) t->byte_piece[i] = (char)i;
  *out = t;
  return WISP_OK;
}

wisp_status wisp_tokenizer_from_json(const char *json, const char *label, wisp_tokenizer **out) {
  *out = NULL;
  wisp_tokenizer *t = calloc(1, sizeof *t);
  if (!t) return wisp_fail(WISP_ENOMEM, "out of memory");
  wisp_status st = wisp_bpe_load(json, label, &t->bpe);
  if (st) {
    free(t);
    return st;
  }
  t->kind = KIND_BPE;
  t->vocab = wisp_bpe_n_ids(t->bpe);
  *out = t;
  return WISP_OK;
}

wisp_status wisp_tokenizer_from_file(const char *path, wisp_tokenizer **out) {
  *out = NULL;
  char *text = NULL;
  wisp_status st = wisp_read_file(path, &text, NULL);
  if (st) return st;
  st = wisp_tokenizer_from_json(text, path, out);
  free(text);
  return st;
}

int wisp_tokenizer_artifact_file(const char *dir, const cJSON *manifest, const char *which, char *path, size_t cap) {
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(manifest, "wisp");
  const cJSON *files = cJSON_GetObjectItemCaseSensitive(w, "tokenizerFiles");
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(files, which);
  const char *name = NULL;
  if (cJSON_IsString(f)) name = f->valuestring;
  else /* not named: the Hugging Face names */
    name = !strcmp(which, "tokenizer") ? "tokenizer.json"
           : !strcmp(which, "config") ? "tokenizer_config.json"
           : !strcmp(which, "generation") ? "generation_config.json" : NULL;
  if (!name || strchr(name, '/')) return 0;
  snprintf(path, cap, "%s/%s", dir, name);
  return wisp_path_exists(path);
}

wisp_status wisp_tokenizer_for_artifact(const char *dir, const char *kind, const cJSON *manifest, int vocab,
                                        wisp_tokenizer **out) {
  *out = NULL;
  if (strcmp(kind, "bpe")) {
    wisp_status st = wisp_tokenizer_new(kind, vocab, out);
    if (st) wisp_error_prefix("%s", dir ? dir : "artifact"); /* the one line names the model */
    return st;
  }
  char path[4096];
  if (!wisp_tokenizer_artifact_file(dir ? dir : ".", manifest, "tokenizer", path, sizeof path))
    return wisp_fail(WISP_EFORMAT, "%s: wisp.tokenizer is 'bpe' but the tokenizer file (%s) is missing",
                     dir ? dir : "artifact", path);
  return wisp_tokenizer_from_file(path, out);
}

void wisp_tokenizer_free(wisp_tokenizer *t) {
  if (!t) return;
  wisp_bpe_free(t->bpe);
  free(t);
}

wisp_status wisp_tokenizer_encode_n(const wisp_tokenizer *t, const char *text, size_t len, int add_special,
                                    int32_t **ids, int *n) {
  if (t->kind == KIND_BPE) return wisp_bpe_encode(t->bpe, text, len, add_special, ids, n);
  *ids = malloc(sizeof(int32_t) * (len ? len : 1));
  if (!*ids) return wisp_fail(WISP_ENOMEM, "out of memory");
  for (size_t i = 0; i < len; i++) (*ids)[i] = (uint8_t)text[i];
  *n = (int)len;
  return WISP_OK;
}

wisp_status wisp_tokenizer_encode(const wisp_tokenizer *t, const char *text, int32_t **ids, int *n) {
  return wisp_tokenizer_encode_n(t, text, strlen(text), 1, ids, n);
}

const char *wisp_tokenizer_token_bytes(const wisp_tokenizer *t, int32_t id, size_t *len) {
  if (t->kind == KIND_BPE) return wisp_bpe_token(t->bpe, id, len);
  if (id >= 0 && id < 256) {
    *len = 1;
    return &t->byte_piece[id];
  }
  *len = 0;
  return NULL;
}

wisp_status wisp_tokenizer_decode(const wisp_tokenizer *t, const int32_t *ids, int n, char **out, size_t *len) {
  size_t total = 0, l;
  for (int i = 0; i < n; i++)
    if (wisp_tokenizer_token_bytes(t, ids[i], &l)) total += l;
  char *p = malloc(total + 1);
  if (!p) return wisp_fail(WISP_ENOMEM, "out of memory");
  size_t at = 0;
  for (int i = 0; i < n; i++) {
    const char *b = wisp_tokenizer_token_bytes(t, ids[i], &l);
    if (b) memcpy(p + at, b, l), at += l;
  }
  p[at] = 0;
  /* SentencePiece style: drop the space the dummy prefix put before the first word */
  size_t strip = 0;
  for (int k = t->kind == KIND_BPE ? wisp_bpe_strip_start(t->bpe) : 0; k > 0 && strip < at && p[strip] == ' '; k--)
    strip++;
  if (strip) memmove(p, p + strip, at - strip + 1), at -= strip;
  *out = p;
  if (len) *len = at;
  return WISP_OK;
}

size_t wisp_tokenizer_piece(const wisp_tokenizer *t, int32_t id, char *out, size_t cap) {
  if (cap == 0) return 0;
  size_t l;
  const char *b = wisp_tokenizer_token_bytes(t, id, &l);
  if (!b) {
    if (t->kind == KIND_BPE) return 0;
    int n = snprintf(out, cap, "<|%d|>", (int)id);
    return n < 0 ? 0 : ((size_t)n < cap ? (size_t)n : cap - 1);
  }
  if (l > cap) l = cap;
  memcpy(out, b, l);
  return l;
}

int32_t wisp_tokenizer_token_id(const wisp_tokenizer *t, const char *content) {
  if (t->kind == KIND_BPE) return wisp_bpe_token_id(t->bpe, content);
  return strlen(content) == 1 ? (uint8_t)content[0] : -1;
}

int wisp_tokenizer_is_special(const wisp_tokenizer *t, int32_t id) {
  return t->kind == KIND_BPE ? wisp_bpe_is_special(t->bpe, id) : 0;
}

int wisp_tokenizer_vocab_size(const wisp_tokenizer *t) { return t->vocab; }

int32_t wisp_tokenizer_bos(const wisp_tokenizer *t) { return t->kind == KIND_BPE ? wisp_bpe_bos(t->bpe) : -1; }

void wisp_tokenizer_template_ids(const wisp_tokenizer *t, const int32_t **prefix, int *n_prefix,
                                 const int32_t **suffix, int *n_suffix) {
  *prefix = *suffix = NULL;
  *n_prefix = *n_suffix = 0;
  if (t->kind == KIND_BPE) wisp_bpe_template_ids(t->bpe, prefix, n_prefix, suffix, n_suffix);
}

const char *wisp_tokenizer_kind(const wisp_tokenizer *t) { return t->kind == KIND_BPE ? "bpe" : "byte"; }

/* ---- UTF-8 ---- */

/* Length a lead byte announces (0 for a continuation or invalid byte). */
static int utf8_need(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

/* Whether c may be the second byte after lead (excludes overlongs, surrogates, > U+10FFFF). */
static int utf8_second_ok(unsigned char lead, unsigned char c) {
  if ((c & 0xC0) != 0x80) return 0;
  if (lead == 0xE0) return c >= 0xA0;
  if (lead == 0xED) return c <= 0x9F;
  if (lead == 0xF0) return c >= 0x90;
  if (lead == 0xF4) return c <= 0x8F;
  return 1;
}

int wisp_utf8_valid(const char *s, size_t len) {
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0;
  while (i < len) {
    int k = utf8_need(u[i]);
    if (!k || i + (size_t)k > len) return 0;
    if (k > 1 && !utf8_second_ok(u[i], u[i + 1])) return 0;
    for (int j = 2; j < k; j++)
      if ((u[i + j] & 0xC0) != 0x80) return 0;
    i += (size_t)k;
  }
  return 1;
}

size_t wisp_utf8_complete_prefix(const char *s, size_t len) {
  const unsigned char *u = (const unsigned char *)s;
  /* Find the last lead byte among the final 3 bytes. */
  for (size_t back = 1; back <= 3 && back <= len; back++) {
    size_t i = len - back;
    if ((u[i] & 0xC0) == 0x80) continue;
    int k = utf8_need(u[i]);
    if (k <= (int)back) return len; /* complete, ASCII, or invalid: nothing to wait for */
    /* The bytes seen so far must be a valid start for it to be worth waiting. */
    if (back >= 2 && !utf8_second_ok(u[i], u[i + 1])) return len;
    for (size_t j = i + 2; j < len; j++)
      if ((u[j] & 0xC0) != 0x80) return len;
    return i;
  }
  return len;
}

/* ---- streaming decoder ---- */

void wisp_stream_init(wisp_stream_decoder *d, const wisp_tokenizer *t) {
  memset(d, 0, sizeof *d);
  d->tok = t;
}

wisp_status wisp_stream_push(wisp_stream_decoder *d, int32_t id, const char **out, size_t *out_len) {
  /* Drop what was returned last time, keep the held tail. */
  if (d->held < d->len) memmove(d->buf, d->buf + d->held, d->len - d->held);
  d->len -= d->held;
  d->held = 0;
  size_t l;
  const char *b = wisp_tokenizer_token_bytes(d->tok, id, &l);
  if (!b) l = 0;
  if (d->len + l > d->cap) {
    size_t cap = d->cap ? d->cap : 64;
    while (cap < d->len + l) cap *= 2;
    char *p = realloc(d->buf, cap);
    if (!p) return wisp_fail(WISP_ENOMEM, "out of memory");
    d->buf = p;
    d->cap = cap;
  }
  if (l) memcpy(d->buf + d->len, b, l);
  d->len += l;
  if (!d->buf) { /* nothing pushed yet */
    *out = "";
    *out_len = 0;
    return WISP_OK;
  }
  size_t ready = wisp_utf8_complete_prefix(d->buf, d->len);
  *out = d->buf;
  *out_len = ready;
  d->held = ready; /* bytes [0, ready) are handed out; the rest waits */
  return WISP_OK;
}

void wisp_stream_flush(wisp_stream_decoder *d, const char **out, size_t *out_len) {
  if (!d->buf) {
    *out = "";
    *out_len = 0;
    return;
  }
  *out = d->buf + d->held;
  *out_len = d->len - d->held;
  d->held = d->len;
}

void wisp_stream_free(wisp_stream_decoder *d) {
  free(d->buf);
  memset(d, 0, sizeof *d);
}
