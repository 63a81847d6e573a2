/* Shared by the chat-side harnesses (tokenizer_config.json,
 * generation_config.json, chat templates): one fixed byte-level BPE
 * tokenizer with the special tokens chat templates use, built once, and the
 * checks every harness runs on a parsed configuration. Header-only: each
 * harness is one translation unit. */
#ifndef FUZZ_CHAT_FIXTURE_H
#define FUZZ_CHAT_FIXTURE_H

#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/chat.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tok_settings.h"
#include "tokenizer/tokenizer.h"

/* GPT-2's byte-to-character map: printable Latin-1 bytes are themselves, the
 * others move to U+0100 and up, in byte order. */
static inline void fx_byte_char(int b, char out[4]) {
  int cp = b;
  if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) {
    int n = 0;
    for (int x = 0; x < b; x++)
      if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) n++;
    cp = 256 + n;
  }
  if (cp < 0x80) { out[0] = (char)cp; out[1] = 0; }
  else { out[0] = (char)(0xC0 | cp >> 6); out[1] = (char)(0x80 | (cp & 63)); out[2] = 0; }
}

/* Ids 0-255 the bytes, then the special tokens below; the post-processor
 * adds <|startoftext|> (LFM2's BOS). */
static const char *const fx_specials[] = {"<|pad|>",  "<|startoftext|>", "<|endoftext|>", "<|im_start|>",
                                          "<|im_end|>", "<think>",       "</think>"};
enum { FX_N_SPECIALS = 7, FX_BOS = 257 };

static inline wisp_tokenizer *fx_tokenizer(void) {
  static wisp_tokenizer *t;
  if (t) return t;
  cJSON *root = cJSON_CreateObject(), *model = cJSON_AddObjectToObject(root, "model");
  cJSON_AddStringToObject(model, "type", "BPE");
  cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
  cJSON_AddArrayToObject(model, "merges");
  for (int b = 0; b < 256; b++) {
    char c[4];
    fx_byte_char(b, c);
    cJSON_AddNumberToObject(vocab, c, b);
  }
  cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
  for (int i = 0; i < FX_N_SPECIALS; i++) {
    cJSON *a = cJSON_CreateObject();
    cJSON_AddNumberToObject(a, "id", 256 + i);
    cJSON_AddStringToObject(a, "content", fx_specials[i]);
    cJSON_AddBoolToObject(a, "special", 1);
    cJSON_AddItemToArray(added, a);
  }
  cJSON *pre = cJSON_AddObjectToObject(root, "pre_tokenizer");
  cJSON_AddStringToObject(pre, "type", "ByteLevel");
  cJSON_AddBoolToObject(pre, "add_prefix_space", 0);
  cJSON_AddStringToObject(cJSON_AddObjectToObject(root, "decoder"), "type", "ByteLevel");
  cJSON *pp = cJSON_AddObjectToObject(root, "post_processor");
  cJSON_AddStringToObject(pp, "type", "TemplateProcessing");
  cJSON *single = cJSON_AddArrayToObject(pp, "single"), *item = cJSON_CreateObject();
  cJSON_AddStringToObject(cJSON_AddObjectToObject(item, "SpecialToken"), "id", "<|startoftext|>");
  cJSON_AddItemToArray(single, item);
  item = cJSON_CreateObject();
  cJSON_AddStringToObject(cJSON_AddObjectToObject(item, "Sequence"), "id", "A");
  cJSON_AddItemToArray(single, item);
  cJSON *def = cJSON_AddObjectToObject(cJSON_AddObjectToObject(pp, "special_tokens"), "<|startoftext|>");
  cJSON_AddItemToObject(def, "ids", cJSON_CreateIntArray((const int[]){FX_BOS}, 1));
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!text || wisp_tokenizer_from_json(text, "fixture", &t)) {
    fprintf(stderr, "fuzz fixture: the tokenizer does not load\n");
    abort();
  }
  free(text);
  return t;
}

/* A NUL-terminated copy of the fuzzer's bytes. */
static inline char *fx_text(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s) return NULL;
  memcpy(s, data, size);
  s[size] = 0;
  return s;
}

/* Encodes a rendering and checks what must hold for any text: it decodes
 * back byte for byte (the byte-level fixture has no normalizer). */
static inline void fx_encode_text(const wisp_tokenizer *t, const char *text) {
  int32_t *ids = NULL;
  int nid = 0;
  if (!wisp_tokenizer_encode_n(t, text, strlen(text), 0, &ids, &nid)) {
    char *back = NULL;
    size_t len = 0;
    if (!wisp_tokenizer_decode(t, ids, nid, &back, &len)) {
      if (len != strlen(text) || memcmp(back, text, len)) abort();
      free(back);
    }
    free(ids);
  }
}

/* Renders a conversation, its first and a later turn with a template, and
 * encodes what renders. Errors are allowed (a template may refuse the
 * conversation); a rendering must be a string. */
static inline void fx_render_and_encode(const wisp_tokenizer *t, const wisp_chat_tmpl *tm, const wisp_chat_message *m,
                                        int n, int think) {
  const char *system = NULL, *user = "hi";
  for (int i = 0; i < n; i++) {
    if (!strcmp(m[i].role, "system")) system = m[i].content;
    if (!strcmp(m[i].role, "user")) user = m[i].content;
  }
  char *texts[3] = {NULL, NULL, NULL};
  wisp_status st[3] = {wisp_chat_tmpl_messages(tm, m, n, 1, think, &texts[0]),
                       wisp_chat_tmpl_turn(tm, 1, system, user, think, &texts[1]),
                       wisp_chat_tmpl_turn(tm, 0, system, user, think, &texts[2])};
  for (int i = 0; i < 3; i++) {
    if (!st[i] == !texts[i]) abort(); /* text exactly when it succeeds */
    if (!texts[i]) continue;
    fx_encode_text(t, texts[i]);
    free(texts[i]);
  }
}

static inline void fx_check_ids(const wisp_tokenizer *t, const wisp_chat_info *ci, const wisp_tok_settings *ts) {
  int vocab = wisp_tokenizer_vocab_size(t);
  for (int i = 0; i < ci->n_stop; i++)
    if (ci->stop[i] < 0) abort();
  if (ts->bos >= vocab || ts->eos >= vocab || ts->pad >= vocab) abort();
  for (int i = 0; i < ts->n_extra_stop; i++)
    if (ts->extra_stop[i] < 0 || ts->extra_stop[i] >= vocab) abort();
  if (!ts->add_bos || ts->bos != FX_BOS) abort(); /* the fixture's post-processor adds BOS */
}

#endif
