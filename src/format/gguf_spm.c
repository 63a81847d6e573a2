/* A SentencePiece vocabulary in GGUF (tokenizer.ggml.model = llama) as the
 * tokenizer.json Hugging Face writes for Llama 2 style tokenizers; see
 * gguf_spm.h and docs/tokenizer.md ("SentencePiece vocabularies"). */
#include "format/gguf_spm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf_text_index.h"
#include "format/json_text.h"
#include "util/err.h"

/* ---- merges ---- */

typedef struct {
  float score;
  int32_t result, left, right;
} merge;

static int by_priority(const void *pa, const void *pb) {
  const merge *a = pa, *b = pb;
  if (a->score != b->score) return a->score > b->score ? -1 : 1;
  if (a->result != b->result) return a->result < b->result ? -1 : 1;
  if (a->left != b->left) return a->left < b->left ? -1 : 1;
  return (a->right > b->right) - (a->right < b->right);
}

/* SentencePiece's BPE joins the adjacent pair whose joined text is the
 * token with the highest score. As merges: every split of every token into
 * two tokens, ordered by the joined token's score (then its id), which is how
 * Hugging Face's converter writes Llama's tokenizer.json. */
static wisp_status make_merges(const wisp_gguf_kv *tok, const wisp_gguf_kv *scores, const wisp_text_index *x, merge **out,
                               size_t *n_out) {
  size_t n = 0, cap = 1024;
  merge *m = malloc(sizeof(merge) * cap);
  if (!m) return wisp_fail(WISP_ENOMEM, "out of memory");
  for (uint64_t id = 0; id < tok->n; id++) {
    const wisp_gguf_str *t = &tok->strs[id];
    if (wisp_text_index_get(x, t->s, (size_t)t->len) != (int32_t)id) continue; /* a repeated text */
    for (size_t j = 1; j < t->len; j++) {
      if (((unsigned char)t->s[j] & 0xC0) == 0x80) continue; /* split between characters only */
      int32_t l = wisp_text_index_get(x, t->s, j), r = l < 0 ? -1 : wisp_text_index_get(x, t->s + j, (size_t)t->len - j);
      if (r < 0) continue;
      if (n == cap) {
        merge *p = realloc(m, sizeof(merge) * (cap *= 2));
        if (!p) { free(m); return wisp_fail(WISP_ENOMEM, "out of memory"); }
        m = p;
      }
      m[n++] = (merge){scores ? (float)wisp_gguf_arr_float(scores, id) : 0.0f, (int32_t)id, l, r};
    }
  }
  qsort(m, n, sizeof(merge), by_priority);
  *out = m;
  *n_out = n;
  return WISP_OK;
}

/* ---- tokenizer.json ---- */

static cJSON *str_of(const wisp_gguf_str *s) {
  char *d = malloc((size_t)s->len + 1);
  if (!d) return NULL;
  memcpy(d, s->s, (size_t)s->len);
  d[s->len] = 0;
  cJSON *j = cJSON_CreateString(d);
  free(d);
  return j;
}

static cJSON *replace_step(const char *from, const char *to) {
  cJSON *r = cJSON_CreateObject();
  cJSON_AddStringToObject(r, "type", "Replace");
  cJSON_AddStringToObject(cJSON_AddObjectToObject(r, "pattern"), "String", from);
  cJSON_AddStringToObject(r, "content", to);
  return r;
}

static cJSON *typed(const char *type) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "type", type);
  return o;
}

int wisp_gguf_spm_add_space_prefix(const wisp_gguf *g) {
  const wisp_gguf_kv *k = wisp_gguf_kv_find(g, "tokenizer.ggml.add_space_prefix");
  int64_t v;
  return k && wisp_gguf_get_int(g, "tokenizer.ggml.add_space_prefix", &v) ? v != 0 : 1;
}

wisp_status wisp_gguf_spm_json(const wisp_gguf *g, const wisp_gguf_kv *tok, const wisp_gguf_kv *types, cJSON **out) {
  *out = NULL;
  const wisp_gguf_kv *scores = wisp_gguf_kv_find(g, "tokenizer.ggml.scores");
  if (scores && (scores->type != WISP_GGUF_ARRAY || !scores->arr || scores->n != tok->n ||
                 (scores->arr_type != WISP_GGUF_FLOAT32 && scores->arr_type != WISP_GGUF_FLOAT64)))
    return wisp_fail(WISP_EFORMAT, "%s: tokenizer.ggml.scores must be a float array as long as the tokens", g->label);
  if (tok->n > 16777216) return wisp_fail(WISP_EFORMAT, "%s: %llu tokens is too many", g->label, (unsigned long long)tok->n);
  wisp_text_index x = {0};
  if (!wisp_text_index_build(&x, tok, NULL, NULL)) return wisp_fail(WISP_ENOMEM, "out of memory");
  merge *m = NULL;
  size_t nm = 0;
  wisp_status st = make_merges(tok, scores, &x, &m, &nm);
  if (st) {
    wisp_text_index_free(&x);
    return st;
  }
  const int prefix = wisp_gguf_spm_add_space_prefix(g);
  int64_t unk = 0; /* llama.cpp's default for SentencePiece vocabularies */
  wisp_gguf_get_int(g, "tokenizer.ggml.unknown_token_id", &unk);
  if (unk < 0 || (uint64_t)unk >= tok->n) unk = -1; /* also the default 0 of an empty vocabulary (fuzz_gguf_vocab) */

  cJSON *root = cJSON_CreateObject(), *model = cJSON_AddObjectToObject(root, "model");
  cJSON_AddStringToObject(model, "type", "BPE");
  cJSON_AddBoolToObject(model, "byte_fallback", 1);
  cJSON_AddBoolToObject(model, "fuse_unk", 1);
  if (unk >= 0) cJSON_AddItemToObject(model, "unk_token", str_of(&tok->strs[unk]));
  /* vocab and merges written as JSON text (format/json_text.h) */
  wisp_json_text vocab = {0}, merges = {0};
  wisp_json_text_raw(&vocab, "{", 1);
  cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
  for (uint64_t id = 0; id < tok->n; id++) {
    const wisp_gguf_str *t = &tok->strs[id];
    int64_t type = types ? wisp_gguf_arr_int(types, id) : 1;
    if (wisp_text_index_get(&x, t->s, (size_t)t->len) == (int32_t)id)
      wisp_json_text_member_int(&vocab, t->s, (size_t)t->len, (int64_t)id);
    /* unknown, control and user-defined tokens are cut out of the text as they are */
    if (type == 2 || type == 3 || type == 4) {
      cJSON *s = str_of(t);
      if (!s) { st = wisp_fail(WISP_ENOMEM, "out of memory"); break; }
      cJSON *a = cJSON_CreateObject();
      cJSON_AddNumberToObject(a, "id", (double)id);
      cJSON_AddItemToObject(a, "content", s);
      cJSON_AddBoolToObject(a, "single_word", 0);
      cJSON_AddBoolToObject(a, "lstrip", 0);
      cJSON_AddBoolToObject(a, "rstrip", 0);
      cJSON_AddBoolToObject(a, "normalized", 0);
      cJSON_AddBoolToObject(a, "special", type != 4);
      cJSON_AddItemToArray(added, a);
    }
  }
  wisp_json_text_raw(&vocab, "}", 1);
  wisp_json_text_raw(&merges, "[", 1);
  for (size_t i = 0; !st && i < nm; i++) {
    const wisp_gguf_str *l = &tok->strs[m[i].left], *r = &tok->strs[m[i].right];
    wisp_json_text_comma(&merges);
    wisp_json_text_raw(&merges, "[", 1);
    wisp_json_text_str(&merges, l->s, (size_t)l->len);
    wisp_json_text_raw(&merges, ",", 1);
    wisp_json_text_str(&merges, r->s, (size_t)r->len);
    wisp_json_text_raw(&merges, "]", 1);
  }
  wisp_json_text_raw(&merges, "]", 1);
  free(m);
  wisp_text_index_free(&x);
  const int put = wisp_json_text_put(&vocab, model, "vocab") & wisp_json_text_put(&merges, model, "merges");
  if (!st && !put) st = wisp_fail(WISP_ENOMEM, "out of memory for the tokenizer of %s", g->label);
  /* spaces are "▁"; the dummy prefix puts one before each piece of text
   * (the start, and after a special token), as llama.cpp's add_space_prefix */
  cJSON *norm = cJSON_AddObjectToObject(root, "normalizer");
  cJSON_AddStringToObject(norm, "type", "Sequence");
  cJSON *steps = cJSON_AddArrayToObject(norm, "normalizers");
  if (prefix) {
    cJSON *p = typed("Prepend");
    cJSON_AddStringToObject(p, "prepend", WISP_SPM_SPACE);
    cJSON_AddItemToArray(steps, p);
  }
  cJSON_AddItemToArray(steps, replace_step(" ", WISP_SPM_SPACE));
  cJSON_AddNullToObject(root, "pre_tokenizer");
  cJSON *dec = cJSON_AddObjectToObject(root, "decoder");
  cJSON_AddStringToObject(dec, "type", "Sequence");
  cJSON *ds = cJSON_AddArrayToObject(dec, "decoders");
  cJSON_AddItemToArray(ds, replace_step(WISP_SPM_SPACE, " "));
  cJSON_AddItemToArray(ds, typed("ByteFallback"));
  cJSON_AddItemToArray(ds, typed("Fuse"));
  if (prefix) {
    cJSON *sp = typed("Strip");
    cJSON_AddStringToObject(sp, "content", " ");
    cJSON_AddNumberToObject(sp, "start", 1);
    cJSON_AddNumberToObject(sp, "stop", 0);
    cJSON_AddItemToArray(ds, sp);
  }
  if (st) {
    cJSON_Delete(root);
    return st;
  }
  *out = root;
  return WISP_OK;
}

/* ---- export: tokenizer.json -> GGUF vocabulary ---- */

/* The byte of a "<0xXX>" token, else -1. */
static int byte_value_of(const char *s) {
  unsigned v;
  char end;
  if (strlen(s) != 6 || sscanf(s, "<0x%2X%c", &v, &end) != 2 || end != '>') return -1;
  return (int)v;
}

static int has_type(const cJSON *node, const char *type) {
  if (!cJSON_IsObject(node)) return 0;
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(node, "type");
  if (cJSON_IsString(t) && !strcmp(t->valuestring, type)) return 1;
  const char *lists[] = {"pretokenizers", "decoders", "normalizers"};
  for (int i = 0; i < 3; i++) {
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(node, lists[i])) if (has_type(e, type)) return 1;
  }
  return 0;
}

/* A Metaspace pre-tokenizer (in a Sequence or alone) that prepends. */
static int metaspace_prepends(const cJSON *node) {
  if (!cJSON_IsObject(node)) return 0;
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(node, "type");
  if (cJSON_IsString(t) && !strcmp(t->valuestring, "Metaspace")) {
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(node, "prepend_scheme");
    if (cJSON_IsString(s)) return strcmp(s->valuestring, "never") != 0;
    return !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(node, "add_prefix_space"));
  }
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(node, "pretokenizers")) if (metaspace_prepends(e)) return 1;
  return 0;
}

int wisp_spm_is_sentencepiece(const cJSON *root) {
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
  return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback")) &&
         !has_type(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), "ByteLevel") &&
         !has_type(cJSON_GetObjectItemCaseSensitive(root, "decoder"), "ByteLevel");
}

/* The left and right of merge e ("a b" or ["a", "b"]) joined, in buf. */
static int merge_result(const cJSON *e, char *buf, size_t cap) {
  if (cJSON_IsString(e)) {
    const char *s = e->valuestring, *sp = strchr(s, ' ');
    if (!sp || strlen(s) >= cap) return 0;
    memcpy(buf, s, (size_t)(sp - s));
    strcpy(buf + (sp - s), sp + 1);
    return 1;
  }
  const char *a = cJSON_GetStringValue(cJSON_GetArrayItem(e, 0)), *b = cJSON_GetStringValue(cJSON_GetArrayItem(e, 1));
  size_t la = a ? strlen(a) : 0, lb = b ? strlen(b) : 0;
  if (!a || !b || la + lb >= cap) return 0;
  memcpy(buf, a, la);
  memcpy(buf + la, b, lb + 1);
  return 1;
}

typedef struct {
  const char *text;
  int id;
} named_id;

static int by_text(const void *a, const void *b) { return strcmp(((const named_id *)a)->text, ((const named_id *)b)->text); }

void wisp_spm_vocab_free(wisp_spm_vocab *v) {
  free(v->tokens);
  free(v->scores);
  free(v->types);
  free(v->pad);
  memset(v, 0, sizeof *v);
}

wisp_status wisp_spm_vocab_from_json(const cJSON *root, int n, const char *label, wisp_spm_vocab *v) {
  memset(v, 0, sizeof *v);
  v->unk = -1;
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
  const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab"), *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
  if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges))
    return wisp_fail(WISP_EFORMAT, "%s: needs model.vocab and model.merges", label);
  v->n = n;
  v->tokens = calloc((size_t)n + 1, sizeof *v->tokens);
  v->scores = calloc((size_t)n + 1, sizeof *v->scores);
  v->types = calloc((size_t)n + 1, sizeof *v->types);
  v->pad = calloc((size_t)n + 1, 24);
  if (!v->tokens || !v->scores || !v->types || !v->pad) {
    wisp_spm_vocab_free(v);
    return wisp_fail(WISP_ENOMEM, "out of memory");
  }
  const cJSON *e;
  cJSON_ArrayForEach(e, vocab) {
    double d = cJSON_GetNumberValue(e);
    if (d >= 0 && d < n && !v->tokens[(int)d]) {
      v->tokens[(int)d] = e->string;
      v->types[(int)d] = byte_value_of(e->string) >= 0 ? 6 : 1;
    }
  }
  const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
  const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
  cJSON_ArrayForEach(e, added) {
    double d = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "id"));
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "content");
    if (!(d >= 0 && d < n) || !cJSON_IsString(c)) continue;
    v->tokens[(int)d] = c->valuestring;
    v->types[(int)d] = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special")) ? 3 : 4;
  }
  for (int i = 0; i < n; i++) {
    if (!v->tokens[i]) {
      snprintf(v->pad + (size_t)i * 24, 24, "[PAD%d]", i);
      v->tokens[i] = v->pad + (size_t)i * 24;
      v->types[i] = 5; /* unused */
    }
    if (cJSON_IsString(unk) && !strcmp(v->tokens[i], unk->valuestring) && v->unk < 0) {
      v->unk = i;
      v->types[i] = 2;
    }
  }
  /* Scores that make llama.cpp's highest-score-first merging pick what the
   * merge ranks pick: a token made by merge rank r scores -r; tokens no
   * merge makes (characters, bytes, specials) score below every merge. */
  const int nm = cJSON_GetArraySize(merges);
  for (int i = 0; i < n; i++) v->scores[i] = v->types[i] == 1 ? -(float)nm - (float)i : 0.0f;
  /* vocabulary strings sorted, to find each merge's result */
  const int nv = cJSON_GetArraySize(vocab);
  named_id *sorted = malloc(sizeof(named_id) * ((size_t)nv + 1));
  if (!sorted) {
    wisp_spm_vocab_free(v);
    return wisp_fail(WISP_ENOMEM, "out of memory");
  }
  int k = 0;
  cJSON_ArrayForEach(e, vocab) sorted[k++] = (named_id){e->string, (int)cJSON_GetNumberValue(e)};
  qsort(sorted, (size_t)k, sizeof(named_id), by_text);
  char buf[1024];
  int rank = 0;
  cJSON_ArrayForEach(e, merges) {
    named_id key = {buf, 0};
    const named_id *hit = merge_result(e, buf, sizeof buf) ? bsearch(&key, sorted, (size_t)k, sizeof(named_id), by_text) : NULL;
    int d = hit ? hit->id : -1;
    if (d >= 0 && d < n && v->types[d] == 1 && v->scores[d] < -(float)rank) v->scores[d] = -(float)rank;
    rank++;
  }
  free(sorted);
  v->add_space_prefix = has_type(cJSON_GetObjectItemCaseSensitive(root, "normalizer"), "Prepend") ||
                        metaspace_prepends(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"));
  return WISP_OK;
}
