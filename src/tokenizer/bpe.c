/* Byte-level BPE from a Hugging Face tokenizer.json; see bpe.h and
 * docs/tokenizer.md.
 *
 * Encoding follows the tokenizers pipeline:
 *   1. added tokens whose `normalized` is false are cut out of the raw text
 *      (leftmost, longest first; lstrip/rstrip/single_word honoured);
 *   2. the remaining pieces are normalized (none or NFC, via utf8proc);
 *   3. added tokens whose `normalized` is true are cut out of those;
 *   4. each pre-tokenizer splits the pieces (Split with a PCRE2 regex in UTF
 *      + UCP mode, ByteLevel with its GPT-2 regex and add_prefix_space);
 *   5. every pre-token goes through BPE (whole pre-token first when
 *      ignore_merges, else merges lowest rank first, leftmost on ties);
 *   6. the post-processor's template adds BOS/EOS ids.
 * The model works on raw bytes: each vocabulary string is mapped back through
 * the GPT-2 byte<->unicode table once at load, so a pre-token's bytes are
 * looked up directly. */
#include "tokenizer/bpe.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <cJSON.h>
#include <limits.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "util/err.h"

/* ---- GPT-2 byte <-> unicode table ---- */

static int byte_cp[256];  /* byte -> code point */
static int cp_byte[512];  /* code point (< 512) -> byte, or -1 */
static int table_ready;

static void byte_table_init(void) {
  if (table_ready) return;
  int n = 0;
  for (int i = 0; i < 512; i++) cp_byte[i] = -1;
  for (int b = 0; b < 256; b++) {
    int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    byte_cp[b] = printable ? b : 256 + n++;
    cp_byte[byte_cp[b]] = b;
  }
  table_ready = 1;
}

/* Decodes one UTF-8 code point at s (len > 0, assumed valid); returns its length. */
static int utf8_decode(const unsigned char *s, size_t len, int32_t *cp) {
  utf8proc_int32_t c;
  utf8proc_ssize_t k = utf8proc_iterate(s, (utf8proc_ssize_t)len, &c);
  if (k <= 0) { *cp = s[0]; return 1; }
  *cp = c;
  return (int)k;
}

/* ---- growable byte buffer ---- */

typedef struct {
  char *p;
  size_t len, cap;
} sbuf;

static int sb_put(sbuf *b, const void *data, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (b->len + n + 1 > cap) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return 0;
    b->p = p;
    b->cap = cap;
  }
  if (n) memcpy(b->p + b->len, data, n);
  b->len += n;
  b->p[b->len] = 0;
  return 1;
}

/* ---- hash tables ---- */

static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

static uint64_t hash_u64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb3f99a82e2d1ull;
  return x ^ (x >> 33);
}

typedef struct {
  char *bytes; /* the token as the model matches it (owned): byte-level strings mapped back to bytes */
  uint32_t len;
  int present, raw; /* raw: not a byte-level string (see unmap_string_raw) */
  char *text;       /* what it decodes to when that differs from bytes (SentencePiece style), else NULL */
  uint32_t text_len;
} token;

typedef struct {
  int32_t id;
  char *content, *match; /* as written; as matched (normalized when `normalized`) */
  size_t len, match_len;
  int special, lstrip, rstrip, normalized, single_word;
} added_token;

enum { PRE_SPLIT, PRE_BYTELEVEL, PRE_METASPACE };
enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER };

/* One normalizer step: NFC, Prepend(str) or Replace(from -> to). */
enum { NORM_NFC, NORM_PREPEND, NORM_REPLACE };
typedef struct {
  int kind;
  char *from, *to; /* Prepend: to; Replace: from -> to */
} norm_step;
enum { SPLIT_ISOLATED, SPLIT_REMOVED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT };

typedef struct {
  int kind, behavior, add_prefix_space;
  pcre2_code *re; /* NULL: ByteLevel without use_regex */
  /* Metaspace: spaces become `rep`, prepended per prepend_scheme; split:
   * a new piece starts before each `rep` */
  char rep[8];
  int prepend, split;
} pretok;

struct wisp_bpe {
  int n_ids;
  token *tokens;
  int32_t *vslots; /* vocab: bytes -> id, open addressing, -1 empty */
  size_t vcap;
  uint64_t *mkeys; /* merges: (left << 32 | right) + 1, 0 empty */
  int32_t *mrank, *mnew;
  size_t mcap;
  int32_t byte_id[256];
  int32_t unk;
  int ignore_merges;
  /* byte_level: strings go through the GPT-2 byte table (a ByteLevel
   * pre-tokenizer or decoder); otherwise they are plain UTF-8 and a BPE
   * word starts as characters (SentencePiece style) */
  int byte_level, byte_fallback, fuse_unk;
  int32_t fallback_id[256]; /* <0xXX> tokens, -1 when absent */
  norm_step *norm;
  int n_norm;
  int strip_start; /* the decoder drops this many leading spaces of a decoded text */
  added_token *added;
  int n_added;
  uint8_t first[2][256]; /* [normalized pass][byte]: some added token starts with it */
  pretok *pre;
  int n_pre;
  int32_t *prefix, *suffix;
  int n_prefix, n_suffix;
};

static int32_t vocab_get(const wisp_bpe *b, const char *s, size_t n) {
  if (!b->vcap) return -1;
  size_t mask = b->vcap - 1, i = (size_t)hash_bytes(s, n) & mask;
  for (;;) {
    int32_t id = b->vslots[i];
    if (id < 0) return -1;
    const token *t = &b->tokens[id];
    if (t->len == n && !memcmp(t->bytes, s, n)) return id;
    i = (i + 1) & mask;
  }
}

static void vocab_put(wisp_bpe *b, int32_t id) {
  const token *t = &b->tokens[id];
  if (vocab_get(b, t->bytes, t->len) >= 0) return; /* first one wins */
  size_t mask = b->vcap - 1, i = (size_t)hash_bytes(t->bytes, t->len) & mask;
  while (b->vslots[i] >= 0) i = (i + 1) & mask;
  b->vslots[i] = id;
}

static int merge_get(const wisp_bpe *b, int32_t l, int32_t r, int32_t *rank, int32_t *nid) {
  if (!b->mcap) return 0;
  uint64_t key = (((uint64_t)(uint32_t)l << 32) | (uint32_t)r) + 1;
  size_t mask = b->mcap - 1, i = (size_t)hash_u64(key) & mask;
  for (;;) {
    if (b->mkeys[i] == 0) return 0;
    if (b->mkeys[i] == key) {
      *rank = b->mrank[i];
      *nid = b->mnew[i];
      return 1;
    }
    i = (i + 1) & mask;
  }
}

static void merge_put(wisp_bpe *b, int32_t l, int32_t r, int32_t rank, int32_t nid) {
  int32_t r0, n0;
  if (merge_get(b, l, r, &r0, &n0)) return; /* a repeated merge keeps its first rank */
  uint64_t key = (((uint64_t)(uint32_t)l << 32) | (uint32_t)r) + 1;
  size_t mask = b->mcap - 1, i = (size_t)hash_u64(key) & mask;
  while (b->mkeys[i]) i = (i + 1) & mask;
  b->mkeys[i] = key;
  b->mrank[i] = rank;
  b->mnew[i] = nid;
}

static size_t pow2_at_least(size_t n) {
  size_t c = 16;
  while (c < n) c *= 2;
  return c;
}

/* Maps a byte-level vocabulary string back to bytes, as the ByteLevel
 * decoder does: when every char is in the GPT-2 table each becomes its byte;
 * otherwise the string is kept as its own UTF-8 bytes and *raw is set (such
 * a token can never come out of byte-level pre-tokenization). A tokenizer
 * that is not byte-level keeps every string as it is. */
static int unmap_string_raw(int byte_level, const char *s, sbuf *out, int *raw) {
  out->len = 0;
  size_t n = strlen(s), i = 0;
  if (raw) *raw = 0;
  if (!byte_level) return sb_put(out, s, n);
  if (!sb_put(out, "", 0)) return 0;
  while (i < n) {
    int32_t cp;
    int k = utf8_decode((const unsigned char *)s + i, n - i, &cp);
    if (!(cp >= 0 && cp < 512 && cp_byte[cp] >= 0)) {
      if (raw) *raw = 1;
      out->len = 0;
      return sb_put(out, s, n);
    }
    char c = (char)cp_byte[cp];
    if (!sb_put(out, &c, 1)) return 0;
    i += (size_t)k;
  }
  return 1;
}

static int unmap_string(const wisp_bpe *b, const char *s, sbuf *out) {
  return unmap_string_raw(b->byte_level, s, out, NULL);
}

/* ---- normalization ---- */

static wisp_status nfc(const char *s, size_t n, char **out, size_t *out_len) {
  utf8proc_uint8_t *dst = NULL;
  utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &dst,
                                    UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  if (r < 0) return wisp_fail(WISP_EINVAL, "NFC normalization failed: %s", utf8proc_errmsg(r));
  *out = (char *)dst;
  *out_len = (size_t)r;
  return WISP_OK;
}

/* s[0..n) with every `from` replaced by `to`; malloc'd. */
static char *replace_all(const char *s, size_t n, const char *from, const char *to, size_t *out_len) {
  size_t fl = strlen(from), tl = strlen(to), count = 0;
  for (size_t i = 0; i + fl <= n;) {
    if (!memcmp(s + i, from, fl)) { count++; i += fl; }
    else i++;
  }
  char *out = malloc(n + count * tl + 1), *o = out;
  if (!out) return NULL;
  for (size_t i = 0; i < n;) {
    if (i + fl <= n && !memcmp(s + i, from, fl)) {
      memcpy(o, to, tl);
      o += tl;
      i += fl;
    } else {
      *o++ = s[i++];
    }
  }
  *o = 0;
  *out_len = (size_t)(o - out);
  return out;
}

/* The normalizer's steps in order; *out is malloc'd. */
static wisp_status normalize(const norm_step *steps, int n_steps, const char *s, size_t n, char **out, size_t *out_len) {
  char *cur = malloc(n + 1);
  if (!cur) return wisp_fail(WISP_ENOMEM, "out of memory");
  memcpy(cur, s, n);
  cur[n] = 0;
  for (int i = 0; i < n_steps; i++) {
    const norm_step *q = &steps[i];
    char *next = NULL;
    size_t nl = 0;
    if (q->kind == NORM_NFC) {
      wisp_status st = nfc(cur, n, &next, &nl);
      if (st) { free(cur); return st; }
    } else if (q->kind == NORM_PREPEND) {
      if (n == 0) continue; /* as tokenizers: an empty piece stays empty */
      size_t pl = strlen(q->to);
      if ((next = malloc(pl + n + 1))) {
        memcpy(next, q->to, pl);
        memcpy(next + pl, cur, n + 1);
        nl = pl + n;
      }
    } else {
      next = replace_all(cur, n, q->from, q->to, &nl);
    }
    free(cur);
    if (!next) return wisp_fail(WISP_ENOMEM, "out of memory");
    cur = next;
    n = nl;
  }
  *out = cur;
  *out_len = n;
  return WISP_OK;
}

/* ---- loading ---- */

static int json_flag(const cJSON *o, const char *key, int def) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (cJSON_IsBool(v)) return cJSON_IsTrue(v);
  return def;
}

/* Oniguruma's \s is Unicode White_Space; PCRE2's (with UCP) also takes
 * U+180E. Writing the class out makes both engines agree. */
#define WHITE_SPACE "\\t\\n\\x0b\\f\\r\\x20\\x85\\xa0\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"

static char *oniguruma_spaces(const char *pat) {
  size_t n = strlen(pat), cap = (n / 2 + 1) * (sizeof WHITE_SPACE + 4) + n + 1; /* every \\s may grow */
  char *out = malloc(cap), *o = out;
  if (!out) return NULL;
  int in_class = 0;
  for (size_t i = 0; i < n; i++) {
    char c = pat[i];
    if (c == '\\' && i + 1 < n) {
      char d = pat[i + 1];
      i++;
      if (d == 's' || (d == 'S' && !in_class)) {
        o += sprintf(o, "%s%s%s", in_class ? "" : d == 'S' ? "[^" : "[", WHITE_SPACE, in_class ? "" : "]");
        continue;
      }
      *o++ = c;
      *o++ = d;
      continue;
    }
    if (c == '[') in_class++;
    else if (c == ']' && in_class) in_class--;
    *o++ = c;
  }
  *o = 0;
  return out;
}

static wisp_status compile_re(const char *pat, int literal, const char *label, pcre2_code **out) {
  int err;
  PCRE2_SIZE at;
  char *own = literal ? NULL : oniguruma_spaces(pat);
  if (!literal && !own) return wisp_fail(WISP_ENOMEM, "out of memory");
  if (own) pat = own;
  uint32_t opts = literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP;
  pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, opts, &err, &at, NULL);
  free(own);
  if (!re) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return wisp_fail(WISP_EUNSUPPORTED, "%s: pre-tokenizer regex does not compile with PCRE2 at offset %zu: %s", label,
                     (size_t)at, (const char *)msg);
  }
  pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional: falls back to the interpreter */
  *out = re;
  return WISP_OK;
}

static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static wisp_status add_pretok(wisp_bpe *b, const cJSON *p, const char *label, int *has_bytelevel) {
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
  if (!cJSON_IsString(type)) return wisp_fail(WISP_EFORMAT, "%s: pre_tokenizer without a type", label);
  const char *t = type->valuestring;
  if (!strcmp(t, "Sequence")) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(p, "pretokenizers"), *e;
    if (!cJSON_IsArray(list)) return wisp_fail(WISP_EFORMAT, "%s: Sequence pre_tokenizer without 'pretokenizers'", label);
    cJSON_ArrayForEach(e, list) {
      wisp_status st = add_pretok(b, e, label, has_bytelevel);
      if (st) return st;
    }
    return WISP_OK;
  }
  pretok *np = realloc(b->pre, sizeof(pretok) * (size_t)(b->n_pre + 1));
  if (!np) return wisp_fail(WISP_ENOMEM, "out of memory");
  b->pre = np;
  pretok *q = &b->pre[b->n_pre];
  memset(q, 0, sizeof *q);
  if (!strcmp(t, "ByteLevel")) {
    q->kind = PRE_BYTELEVEL;
    q->add_prefix_space = json_flag(p, "add_prefix_space", 1);
    *has_bytelevel = 1;
    b->n_pre++;
    if (json_flag(p, "use_regex", 1)) return compile_re(GPT2_PATTERN, 0, label, &q->re);
    return WISP_OK;
  }
  if (!strcmp(t, "Metaspace")) {
    q->kind = PRE_METASPACE;
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(p, "replacement");
    const cJSON *scheme = cJSON_GetObjectItemCaseSensitive(p, "prepend_scheme");
    snprintf(q->rep, sizeof q->rep, "%s", cJSON_IsString(r) ? r->valuestring : "\xe2\x96\x81");
    if (!q->rep[0] || strlen(q->rep) > 4)
      return wisp_fail(WISP_EFORMAT, "%s: Metaspace replacement must be one character", label);
    /* older files say add_prefix_space instead of prepend_scheme */
    q->prepend = json_flag(p, "add_prefix_space", 1) ? PREPEND_ALWAYS : PREPEND_NEVER;
    if (cJSON_IsString(scheme)) {
      if (!strcmp(scheme->valuestring, "always")) q->prepend = PREPEND_ALWAYS;
      else if (!strcmp(scheme->valuestring, "first")) q->prepend = PREPEND_FIRST;
      else if (!strcmp(scheme->valuestring, "never")) q->prepend = PREPEND_NEVER;
      else return wisp_fail(WISP_EUNSUPPORTED, "%s: Metaspace prepend_scheme '%s' is not supported", label,
                            scheme->valuestring);
    }
    q->split = json_flag(p, "split", 1);
    b->n_pre++;
    return WISP_OK;
  }
  if (!strcmp(t, "Split")) {
    q->kind = PRE_SPLIT;
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(p, "pattern");
    const cJSON *rx = cJSON_GetObjectItemCaseSensitive(pat, "Regex"), *lit = cJSON_GetObjectItemCaseSensitive(pat, "String");
    const cJSON *beh = cJSON_GetObjectItemCaseSensitive(p, "behavior");
    if (!cJSON_IsString(rx) && !cJSON_IsString(lit))
      return wisp_fail(WISP_EFORMAT, "%s: Split pre_tokenizer needs pattern.Regex or pattern.String", label);
    if (json_flag(p, "invert", 0))
      return wisp_fail(WISP_EUNSUPPORTED, "%s: Split pre_tokenizer with invert=true is not supported", label);
    const char *bs = cJSON_IsString(beh) ? beh->valuestring : "Isolated";
    if (!strcmp(bs, "Isolated")) q->behavior = SPLIT_ISOLATED;
    else if (!strcmp(bs, "Removed")) q->behavior = SPLIT_REMOVED;
    else if (!strcmp(bs, "MergedWithPrevious")) q->behavior = SPLIT_MERGED_PREV;
    else if (!strcmp(bs, "MergedWithNext")) q->behavior = SPLIT_MERGED_NEXT;
    else return wisp_fail(WISP_EUNSUPPORTED, "%s: Split behavior '%s' is not supported", label, bs);
    b->n_pre++;
    return compile_re(cJSON_IsString(rx) ? rx->valuestring : lit->valuestring, !cJSON_IsString(rx), label, &q->re);
  }
  return wisp_fail(WISP_EUNSUPPORTED,
                   "%s: pre_tokenizer type '%s' is not supported (Split, ByteLevel, Metaspace, Sequence)", label, t);
}

static wisp_status add_norm(wisp_bpe *b, int kind, const char *from, const char *to) {
  norm_step *p = realloc(b->norm, sizeof(norm_step) * (size_t)(b->n_norm + 1));
  if (!p) return wisp_fail(WISP_ENOMEM, "out of memory");
  b->norm = p;
  norm_step *q = &p[b->n_norm++];
  q->kind = kind;
  q->from = from ? strdup(from) : NULL;
  q->to = to ? strdup(to) : NULL;
  if ((from && !q->from) || (to && !q->to)) return wisp_fail(WISP_ENOMEM, "out of memory");
  return WISP_OK;
}

static wisp_status load_normalizer(wisp_bpe *b, const cJSON *n, const char *label) {
  if (!n || cJSON_IsNull(n)) return WISP_OK;
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(n, "type");
  if (!cJSON_IsString(type)) return wisp_fail(WISP_EFORMAT, "%s: normalizer without a type", label);
  if (!strcmp(type->valuestring, "NFC")) return add_norm(b, NORM_NFC, NULL, NULL);
  if (!strcmp(type->valuestring, "Prepend")) { /* SentencePiece's dummy prefix: "▁" before a non-empty piece */
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(n, "prepend");
    if (!cJSON_IsString(p)) return wisp_fail(WISP_EFORMAT, "%s: Prepend normalizer without 'prepend'", label);
    return add_norm(b, NORM_PREPEND, NULL, p->valuestring);
  }
  if (!strcmp(type->valuestring, "Replace")) { /* " " -> "▁" */
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(n, "pattern");
    const cJSON *str = cJSON_GetObjectItemCaseSensitive(pat, "String"), *c = cJSON_GetObjectItemCaseSensitive(n, "content");
    if (!cJSON_IsString(str) || !str->valuestring[0] || !cJSON_IsString(c))
      return wisp_fail(WISP_EUNSUPPORTED, "%s: Replace normalizer needs pattern.String and content (a Regex pattern "
                       "is not supported)", label);
    return add_norm(b, NORM_REPLACE, str->valuestring, c->valuestring);
  }
  if (!strcmp(type->valuestring, "Sequence")) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers"), *e;
    cJSON_ArrayForEach(e, list) {
      wisp_status st = load_normalizer(b, e, label);
      if (st) return st;
    }
    return WISP_OK;
  }
  return wisp_fail(WISP_EUNSUPPORTED,
                   "%s: normalizer '%s' is not supported (wisp supports NFC, Prepend, Replace and Sequence)", label,
                   type->valuestring);
}

static int32_t lookup_content(const wisp_bpe *b, const char *s);

static wisp_status add_ids(int32_t **arr, int *n, const cJSON *ids) {
  const cJSON *e;
  cJSON_ArrayForEach(e, ids) {
    if (!cJSON_IsNumber(e)) continue;
    if (!(e->valuedouble >= 0 && e->valuedouble <= 2147483647.0))
      return wisp_fail(WISP_EFORMAT, "post_processor: special token id %g is out of range", e->valuedouble);
    int32_t *p = realloc(*arr, sizeof(int32_t) * (size_t)(*n + 1));
    if (!p) return wisp_fail(WISP_ENOMEM, "out of memory");
    *arr = p;
    p[(*n)++] = (int32_t)e->valuedouble;
  }
  return WISP_OK;
}

static wisp_status load_post(wisp_bpe *b, const cJSON *p, const char *label) {
  if (!p || cJSON_IsNull(p)) return WISP_OK;
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
  if (!cJSON_IsString(type)) return wisp_fail(WISP_EFORMAT, "%s: post_processor without a type", label);
  const char *t = type->valuestring;
  if (!strcmp(t, "ByteLevel")) return WISP_OK; /* offsets only */
  if (!strcmp(t, "Sequence")) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(p, "processors"), *e;
    cJSON_ArrayForEach(e, list) {
      wisp_status st = load_post(b, e, label);
      if (st) return st;
    }
    return WISP_OK;
  }
  if (strcmp(t, "TemplateProcessing"))
    return wisp_fail(WISP_EUNSUPPORTED, "%s: post_processor '%s' is not supported (TemplateProcessing, ByteLevel)",
                     label, t);
  const cJSON *single = cJSON_GetObjectItemCaseSensitive(p, "single"), *specials = cJSON_GetObjectItemCaseSensitive(p, "special_tokens"), *e;
  int seen_seq = 0;
  cJSON_ArrayForEach(e, single) {
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(e, "SpecialToken");
    if (cJSON_GetObjectItemCaseSensitive(e, "Sequence")) { seen_seq = 1; continue; }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(sp, "id");
    if (!cJSON_IsString(id)) return wisp_fail(WISP_EFORMAT, "%s: TemplateProcessing item without an id", label);
    const cJSON *def = cJSON_GetObjectItemCaseSensitive(specials, id->valuestring);
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(def, "ids");
    wisp_status st;
    if (cJSON_IsArray(ids)) {
      st = seen_seq ? add_ids(&b->suffix, &b->n_suffix, ids) : add_ids(&b->prefix, &b->n_prefix, ids);
    } else {
      int32_t v = lookup_content(b, id->valuestring);
      if (v < 0) return wisp_fail(WISP_EFORMAT, "%s: TemplateProcessing token '%s' is unknown", label, id->valuestring);
      cJSON *tmp = cJSON_CreateIntArray(&(int){v}, 1);
      st = seen_seq ? add_ids(&b->suffix, &b->n_suffix, tmp) : add_ids(&b->prefix, &b->n_prefix, tmp);
      cJSON_Delete(tmp);
    }
    if (st) return st;
  }
  return WISP_OK;
}

static int32_t lookup_content(const wisp_bpe *b, const char *s) {
  for (int i = 0; i < b->n_added; i++)
    if (!strcmp(b->added[i].content, s)) return b->added[i].id;
  return vocab_get(b, s, strlen(s));
}

static wisp_status grow_ids(wisp_bpe *b, int32_t id) {
  if (id < b->n_ids) return WISP_OK;
  int n = b->n_ids ? b->n_ids : 256;
  while (n <= id) n *= 2;
  token *t = realloc(b->tokens, sizeof(token) * (size_t)n);
  if (!t) return wisp_fail(WISP_ENOMEM, "out of memory");
  memset(t + b->n_ids, 0, sizeof(token) * (size_t)(n - b->n_ids));
  b->tokens = t;
  b->n_ids = n;
  return WISP_OK;
}

static wisp_status set_token(wisp_bpe *b, int32_t id, const char *str, sbuf *tmp, const char *label) {
  if (id < 0 || id > 16777216) return wisp_fail(WISP_EFORMAT, "%s: token id %d is out of range", label, (int)id);
  wisp_status st = grow_ids(b, id);
  if (st) return st;
  int raw;
  if (!unmap_string_raw(b->byte_level, str, tmp, &raw)) return wisp_fail(WISP_ENOMEM, "out of memory");
  token *t = &b->tokens[id];
  t->raw = raw;
  free(t->bytes);
  t->bytes = malloc(tmp->len + 1);
  if (!t->bytes) return wisp_fail(WISP_ENOMEM, "out of memory");
  memcpy(t->bytes, tmp->p, tmp->len + 1);
  t->len = (uint32_t)tmp->len;
  t->present = 1;
  return WISP_OK;
}

static int by_match_len(const void *x, const void *y) {
  const added_token *a = x, *b = y;
  if (a->match_len != b->match_len) return a->match_len > b->match_len ? -1 : 1;
  return a->id < b->id ? -1 : a->id > b->id;
}

/* 1 when node or a step of its Sequence has this type. */
static int json_has_type(const cJSON *node, const char *type) {
  if (!cJSON_IsObject(node)) return 0;
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(node, "type");
  if (cJSON_IsString(t) && !strcmp(t->valuestring, type)) return 1;
  const char *lists[] = {"pretokenizers", "decoders"};
  for (int i = 0; i < 2; i++) {
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(node, lists[i])) if (json_has_type(e, type)) return 1;
  }
  return 0;
}

/* What the decoder does to each token: string replacements in order (the
 * Replace and Metaspace decoders), <0xXX> -> that byte (ByteFallback); and
 * to the whole text: leading spaces dropped (Strip, Metaspace). Fuse joins
 * the tokens, which concatenation does anyway. */
#define MAX_DEC_REPLACE 8
typedef struct {
  const char *from[MAX_DEC_REPLACE], *to[MAX_DEC_REPLACE];
  int n_replace, byte_fallback;
} dec_info;

static wisp_status load_decoder(wisp_bpe *b, const cJSON *d, const char *label, dec_info *di) {
  if (!d || cJSON_IsNull(d)) return WISP_OK;
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(d, "type");
  const char *t = cJSON_IsString(type) ? type->valuestring : "?";
  if (!strcmp(t, "Sequence")) {
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(d, "decoders")) {
      wisp_status st = load_decoder(b, e, label, di);
      if (st) return st;
    }
    return WISP_OK;
  }
  if (!strcmp(t, "ByteLevel") || !strcmp(t, "Fuse")) return WISP_OK;
  if (!strcmp(t, "ByteFallback")) {
    di->byte_fallback = 1;
    return WISP_OK;
  }
  if (!strcmp(t, "Replace") || !strcmp(t, "Metaspace")) {
    const char *from, *to = " ";
    if (!strcmp(t, "Replace")) {
      const cJSON *str = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(d, "pattern"), "String");
      const cJSON *c = cJSON_GetObjectItemCaseSensitive(d, "content");
      if (!cJSON_IsString(str) || !str->valuestring[0] || !cJSON_IsString(c))
        return wisp_fail(WISP_EUNSUPPORTED, "%s: Replace decoder needs pattern.String and content", label);
      from = str->valuestring;
      to = c->valuestring;
    } else {
      const cJSON *r = cJSON_GetObjectItemCaseSensitive(d, "replacement");
      const cJSON *scheme = cJSON_GetObjectItemCaseSensitive(d, "prepend_scheme");
      from = cJSON_IsString(r) ? r->valuestring : "\xe2\x96\x81";
      if (!from[0]) return wisp_fail(WISP_EFORMAT, "%s: Metaspace decoder with an empty replacement", label);
      int prepend = cJSON_IsString(scheme) ? strcmp(scheme->valuestring, "never") != 0 : json_flag(d, "add_prefix_space", 1);
      if (prepend && b->strip_start < 1) b->strip_start = 1; /* the first token's leading space */
    }
    if (di->n_replace == MAX_DEC_REPLACE) return wisp_fail(WISP_EUNSUPPORTED, "%s: too many Replace decoders", label);
    di->from[di->n_replace] = from;
    di->to[di->n_replace++] = to;
    return WISP_OK;
  }
  if (!strcmp(t, "Strip")) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(d, "content");
    const cJSON *start = cJSON_GetObjectItemCaseSensitive(d, "start"), *stop = cJSON_GetObjectItemCaseSensitive(d, "stop");
    if (!cJSON_IsString(c) || strcmp(c->valuestring, " ") || !cJSON_IsNumber(start) || start->valuedouble < 0 ||
        start->valuedouble > 64 || (cJSON_IsNumber(stop) && stop->valuedouble != 0))
      return wisp_fail(WISP_EUNSUPPORTED, "%s: Strip decoder is supported for content \" \" with stop 0 only", label);
    b->strip_start = (int)start->valuedouble;
    return WISP_OK;
  }
  return wisp_fail(WISP_EUNSUPPORTED,
                   "%s: decoder '%s' is not supported (ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace)",
                   label, t);
}

/* The value of a "<0xXX>" token string, else -1. */
static int byte_token_value(const char *s, size_t n) {
  if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; i++) {
    char c = s[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/* Each token's decoded text, where the decoder changes it. */
static wisp_status decode_texts(wisp_bpe *b, const dec_info *di) {
  for (int i = 0; i < b->n_ids; i++) {
    token *t = &b->tokens[i];
    if (!t->present) continue;
    int v = di->byte_fallback ? byte_token_value(t->bytes, t->len) : -1;
    size_t n = t->len;
    char *cur = NULL;
    if (v >= 0) {
      if ((cur = malloc(2))) cur[0] = (char)v, cur[1] = 0, n = 1;
    } else if (di->n_replace) {
      cur = malloc(n + 1);
      if (cur) memcpy(cur, t->bytes, n + 1);
      for (int r = 0; cur && r < di->n_replace; r++) {
        char *next = replace_all(cur, n, di->from[r], di->to[r], &n);
        free(cur);
        cur = next;
      }
    } else {
      continue;
    }
    if (!cur) return wisp_fail(WISP_ENOMEM, "out of memory");
    t->text = cur;
    t->text_len = (uint32_t)n;
  }
  return WISP_OK;
}

static wisp_status load(wisp_bpe *b, const cJSON *root, const char *label) {
  wisp_status st;
  sbuf tmp = {0};
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
  if (!cJSON_IsObject(model)) return wisp_fail(WISP_EFORMAT, "%s: missing object 'model'", label);
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
  if (cJSON_IsString(type) && strcmp(type->valuestring, "BPE"))
    return wisp_fail(WISP_EUNSUPPORTED, "%s: tokenizer model type '%s' is not supported (wisp supports byte-level BPE only)",
                     label, type->valuestring);
  const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab"), *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
  if (!cJSON_IsObject(vocab)) return wisp_fail(WISP_EFORMAT, "%s: model.vocab must be an object", label);
  if (!cJSON_IsArray(merges)) return wisp_fail(WISP_EFORMAT, "%s: model.merges must be an array", label);
  const char *unsupported[] = {"continuing_subword_prefix", "end_of_word_suffix"};
  for (int i = 0; i < 2; i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(model, unsupported[i]);
    if (cJSON_IsString(v) && v->valuestring[0])
      return wisp_fail(WISP_EUNSUPPORTED, "%s: model.%s is not supported", label, unsupported[i]);
  }
  b->ignore_merges = json_flag(model, "ignore_merges", 0);
  b->byte_fallback = json_flag(model, "byte_fallback", 0);
  b->fuse_unk = json_flag(model, "fuse_unk", 0);
  b->byte_level = json_has_type(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), "ByteLevel") ||
                  json_has_type(cJSON_GetObjectItemCaseSensitive(root, "decoder"), "ByteLevel");
  /* vocabulary */
  const cJSON *e;
  int nv = 0;
  cJSON_ArrayForEach(e, vocab) {
    /* range first: casting an out-of-range double to int is undefined (found by fuzz_tokenizer_json) */
    if (!cJSON_IsNumber(e) || !(e->valuedouble >= -2147483648.0 && e->valuedouble <= 2147483647.0) ||
        e->valuedouble != (double)(int32_t)e->valuedouble) {
      st = wisp_fail(WISP_EFORMAT, "%s: model.vocab['%s'] must be an integer id", label, e->string);
      goto done; /* not return: tmp may hold memory (leak found by fuzz_tokenizer_json) */
    }
    if ((st = set_token(b, (int32_t)e->valuedouble, e->string, &tmp, label))) goto done;
    nv++;
  }
  /* added tokens (they may extend the id space) */
  const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
  int na = cJSON_IsArray(added) ? cJSON_GetArraySize(added) : 0;
  b->added = calloc((size_t)na + 1, sizeof(added_token));
  if (!b->added) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto done; }
  cJSON_ArrayForEach(e, added) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id"), *content = cJSON_GetObjectItemCaseSensitive(e, "content");
    if (!cJSON_IsNumber(id) || !cJSON_IsString(content) || !content->valuestring[0] ||
        !(id->valuedouble >= -1.0 && id->valuedouble <= 16777217.0)) {
      st = wisp_fail(WISP_EFORMAT, "%s: added_tokens[%d] needs an integer id and a non-empty content", label, b->n_added);
      goto done;
    }
    added_token *a = &b->added[b->n_added++];
    a->id = (int32_t)id->valuedouble;
    a->special = json_flag(e, "special", 0);
    a->lstrip = json_flag(e, "lstrip", 0);
    a->rstrip = json_flag(e, "rstrip", 0);
    a->single_word = json_flag(e, "single_word", 0);
    a->normalized = json_flag(e, "normalized", !a->special);
    a->len = strlen(content->valuestring);
    a->content = strdup(content->valuestring);
    if (!a->content) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto done; }
    if (a->id < 0 || a->id > 16777216) { st = wisp_fail(WISP_EFORMAT, "%s: added token id out of range", label); goto done; }
    if ((st = grow_ids(b, a->id))) goto done;
    token *t = &b->tokens[a->id];
    /* An added token decodes to its content. */
    free(t->bytes);
    t->bytes = malloc(a->len + 1);
    if (!t->bytes) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto done; }
    memcpy(t->bytes, a->content, a->len + 1);
    t->len = (uint32_t)a->len;
    t->present = 1;
  }
  /* Trim n_ids to the largest id + 1. */
  int top = 0;
  for (int i = 0; i < b->n_ids; i++)
    if (b->tokens[i].present) top = i + 1;
  b->n_ids = top;
  b->vcap = pow2_at_least((size_t)top * 2 + 2);
  b->vslots = malloc(sizeof(int32_t) * b->vcap);
  if (!b->vslots) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto done; }
  for (size_t i = 0; i < b->vcap; i++) b->vslots[i] = -1;
  /* Model vocabulary first so that it wins over an added token with the same bytes. */
  cJSON_ArrayForEach(e, vocab) {
    int32_t id = (int32_t)e->valuedouble;
    if (!unmap_string(b, e->string, &tmp)) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto done; }
    if (b->tokens[id].len == tmp.len && !memcmp(b->tokens[id].bytes, tmp.p, tmp.len)) vocab_put(b, id);
  }
  for (int i = 0; i < 256; i++) {
    char c = (char)i, name[8];
    b->byte_id[i] = vocab_get(b, &c, 1);
    if (b->byte_id[i] >= 0 && b->tokens[b->byte_id[i]].raw) b->byte_id[i] = -1;
    snprintf(name, sizeof name, "<0x%02X>", i);
    b->fallback_id[i] = b->byte_fallback ? vocab_get(b, name, 6) : -1;
  }
  b->unk = -1;
  const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
  if (cJSON_IsString(unk)) {
    if (!unmap_string(b, unk->valuestring, &tmp)) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto done; }
    b->unk = vocab_get(b, tmp.p, tmp.len);
  }
  /* merges */
  int nm = cJSON_GetArraySize(merges);
  b->mcap = pow2_at_least((size_t)nm * 2 + 2);
  b->mkeys = calloc(b->mcap, sizeof(uint64_t));
  b->mrank = malloc(sizeof(int32_t) * b->mcap);
  b->mnew = malloc(sizeof(int32_t) * b->mcap);
  if (!b->mkeys || !b->mrank || !b->mnew) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto done; }
  int rank = 0;
  sbuf l = {0}, r = {0};
  cJSON_ArrayForEach(e, merges) {
    const char *ls = NULL, *rs = NULL;
    char *split = NULL;
    if (cJSON_IsString(e)) {
      split = strdup(e->valuestring);
      char *sp = split ? strchr(split, ' ') : NULL;
      if (sp && !strchr(sp + 1, ' ')) {
        *sp = 0;
        ls = split;
        rs = sp + 1;
      }
    } else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(cJSON_GetArrayItem(e, 0)) &&
               cJSON_IsString(cJSON_GetArrayItem(e, 1))) {
      ls = cJSON_GetArrayItem(e, 0)->valuestring;
      rs = cJSON_GetArrayItem(e, 1)->valuestring;
    }
    if (!ls) {
      free(split);
      free(l.p);
      free(r.p);
      st = wisp_fail(WISP_EFORMAT, "%s: model.merges[%d] must be \"a b\" or [\"a\", \"b\"]", label, rank);
      goto done;
    }
    int ok = unmap_string(b, ls, &l) && unmap_string(b, rs, &r);
    int32_t li = ok ? vocab_get(b, l.p, l.len) : -1, ri = ok ? vocab_get(b, r.p, r.len) : -1, ni = -1;
    if (ok && li >= 0 && ri >= 0 && sb_put(&l, r.p, r.len)) ni = vocab_get(b, l.p, l.len);
    if (li < 0 || ri < 0 || ni < 0) {
      st = wisp_fail(WISP_EFORMAT, "%s: model.merges[%d] ('%s' '%s') uses or makes a token not in the vocabulary",
                     label, rank, ls, rs);
      free(split);
      free(l.p);
      free(r.p);
      goto done;
    }
    merge_put(b, li, ri, rank, ni);
    free(split);
    rank++;
  }
  free(l.p);
  free(r.p);
  /* added-token match strings: the normalized form for normalized ones */
  if ((st = load_normalizer(b, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), label))) goto done;
  for (int i = 0; i < b->n_added; i++) {
    added_token *a = &b->added[i];
    if (a->normalized && b->n_norm) {
      if ((st = normalize(b->norm, b->n_norm, a->content, a->len, &a->match, &a->match_len))) goto done;
      if (!a->match_len) { /* normalized to nothing: matches as written */
        free(a->match);
        a->match = NULL;
      }
    }
    if (!a->match) {
      a->match = strdup(a->content);
      a->match_len = a->len;
      if (!a->match) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto done; }
    }
  }
  qsort(b->added, (size_t)b->n_added, sizeof(added_token), by_match_len);
  for (int i = 0; i < b->n_added; i++) b->first[b->added[i].normalized][(unsigned char)b->added[i].match[0]] = 1;
  /* pre-tokenizers */
  const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
  int has_bytelevel = 0;
  if (pre && !cJSON_IsNull(pre) && (st = add_pretok(b, pre, label, &has_bytelevel))) goto done;
  dec_info di = {0};
  if ((st = load_decoder(b, cJSON_GetObjectItemCaseSensitive(root, "decoder"), label, &di))) goto done;
  if (!b->byte_level && (st = decode_texts(b, &di))) goto done;
  st = load_post(b, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), label);
  (void)nv;
done:
  free(tmp.p);
  return st;
}

wisp_status wisp_bpe_load(const char *json, const char *label, wisp_bpe **out) {
  *out = NULL;
  byte_table_init();
  const char *err_at = NULL;
  cJSON *root = cJSON_ParseWithOpts(json, &err_at, 0);
  if (!root) {
    long at = err_at ? (long)(err_at - json) : -1;
    return wisp_fail(WISP_EFORMAT, "%s: malformed JSON near byte %ld", label, at);
  }
  wisp_bpe *b = calloc(1, sizeof *b);
  wisp_status st = b ? load(b, root, label) : wisp_fail(WISP_ENOMEM, "out of memory");
  cJSON_Delete(root);
  if (st) {
    wisp_bpe_free(b);
    return st;
  }
  *out = b;
  return WISP_OK;
}

void wisp_bpe_free(wisp_bpe *b) {
  if (!b) return;
  for (int i = 0; i < b->n_ids; i++) {
    free(b->tokens[i].bytes);
    free(b->tokens[i].text);
  }
  for (int i = 0; i < b->n_norm; i++) {
    free(b->norm[i].from);
    free(b->norm[i].to);
  }
  free(b->norm);
  /* n_ids may have been trimmed below the allocation: free the rest too */
  free(b->tokens);
  free(b->vslots);
  free(b->mkeys);
  free(b->mrank);
  free(b->mnew);
  for (int i = 0; i < b->n_added; i++) {
    free(b->added[i].content);
    free(b->added[i].match);
  }
  free(b->added);
  for (int i = 0; i < b->n_pre; i++) pcre2_code_free(b->pre[i].re);
  free(b->pre);
  free(b->prefix);
  free(b->suffix);
  free(b);
}

/* ---- encoding ---- */

/* A list of pieces: byte ranges of `buf`; id >= 0 marks an added token. */
typedef struct {
  sbuf buf;
  size_t *start, *len;
  int32_t *id;
  int n, cap;
} plist;

static int pl_add(plist *p, const char *s, size_t n, int32_t id) {
  if (p->n == p->cap) {
    int cap = p->cap ? p->cap * 2 : 16;
    size_t *a = realloc(p->start, sizeof(size_t) * (size_t)cap);
    if (!a) return 0;
    p->start = a;
    size_t *b = realloc(p->len, sizeof(size_t) * (size_t)cap);
    if (!b) return 0;
    p->len = b;
    int32_t *c = realloc(p->id, sizeof(int32_t) * (size_t)cap);
    if (!c) return 0;
    p->id = c;
    p->cap = cap;
  }
  p->start[p->n] = p->buf.len;
  p->len[p->n] = n;
  p->id[p->n] = id;
  p->n++;
  return sb_put(&p->buf, s, n);
}

/* Appends bytes to the last piece (which must be the buffer's last bytes). */
static int pl_extend(plist *p, const char *s, size_t n) {
  p->len[p->n - 1] += n;
  return sb_put(&p->buf, s, n);
}

static void pl_free(plist *p) {
  free(p->buf.p);
  free(p->start);
  free(p->len);
  free(p->id);
  memset(p, 0, sizeof *p);
}

static void pl_swap(plist *a, plist *b) {
  plist t = *a;
  *a = *b;
  *b = t;
}

static int is_ws(int32_t c) { /* Unicode White_Space, as Rust's char::is_whitespace */
  return (c >= 9 && c <= 13) || c == 32 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static int is_word(int32_t c) {
  if (c == '_') return 1;
  utf8proc_category_t k = utf8proc_category(c);
  return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_ND) || k == UTF8PROC_CATEGORY_NL ||
         k == UTF8PROC_CATEGORY_PC;
}

/* Code point that ends at s[end) (end > 0). */
static int32_t cp_before(const char *s, size_t end, size_t *start) {
  size_t i = end - 1;
  while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
  int32_t c;
  utf8_decode((const unsigned char *)s + i, end - i, &c);
  if (start) *start = i;
  return c;
}

/* Splits piece s[0..n) on the added tokens of one pass (normalized == pass). */
static int split_added(const wisp_bpe *b, int pass, const char *s, size_t n, plist *out) {
  size_t from = 0, pos = 0;
  while (pos < n) {
    const added_token *hit = NULL;
    /* leftmost: scan positions; longest: tokens are sorted longest first.
     * As tokenizers' non-overlapping leftmost-longest search, a match that
     * single_word rejects is skipped over, not retried shorter. */
    while (pos < n && !hit) {
      if (!b->first[pass][(unsigned char)s[pos]]) { pos++; continue; }
      for (int i = 0; i < b->n_added; i++) {
        const added_token *a = &b->added[i];
        if (a->normalized != pass || a->match_len > n - pos || a->match[0] != s[pos]) continue;
        if (memcmp(a->match, s + pos, a->match_len)) continue;
        hit = a;
        break;
      }
      if (!hit) { pos++; continue; }
      if (hit->single_word) {
        int32_t c = 0;
        int word_before = pos > 0 && is_word(cp_before(s, pos, NULL)), word_after = 0;
        if (pos + hit->match_len < n) {
          utf8_decode((const unsigned char *)s + pos + hit->match_len, n - pos - hit->match_len, &c);
          word_after = is_word(c);
        }
        if (word_before || word_after) {
          pos += hit->match_len;
          hit = NULL;
        }
      }
    }
    if (!hit) break;
    size_t start = pos, stop = pos + hit->match_len;
    if (hit->lstrip) {
      while (start > from) {
        size_t ps;
        int32_t c = cp_before(s, start, &ps);
        if (!is_ws(c)) break;
        start = ps;
      }
    }
    if (hit->rstrip) {
      while (stop < n) {
        int32_t c;
        int k = utf8_decode((const unsigned char *)s + stop, n - stop, &c);
        if (!is_ws(c)) break;
        stop += (size_t)k;
      }
    }
    if (start > from && !pl_add(out, s + from, start - from, -1)) return 0;
    if (!pl_add(out, "", 0, hit->id)) return 0;
    from = pos = stop;
  }
  if (from < n && !pl_add(out, s + from, n - from, -1)) return 0;
  return 1;
}

/* Metaspace: spaces become the replacement, which is prepended (always, or
 * only to the piece at the start of the text: `first`) unless the piece
 * starts with it; with split, each replacement starts a new piece. */
static int metaspace(const pretok *q, const char *s, size_t n, int at_start, plist *out) {
  size_t rl = strlen(q->rep), len;
  char *t = replace_all(s, n, " ", q->rep, &len);
  if (!t) return 0;
  int ok = 1;
  int prepend = q->prepend == PREPEND_ALWAYS || (q->prepend == PREPEND_FIRST && at_start);
  if (prepend && !(len >= rl && !memcmp(t, q->rep, rl))) {
    char *u = malloc(len + rl + 1);
    if (!u) { free(t); return 0; }
    memcpy(u, q->rep, rl);
    memcpy(u + rl, t, len + 1);
    free(t);
    t = u;
    len += rl;
  }
  if (!q->split) {
    ok = len == 0 || pl_add(out, t, len, -1);
  } else { /* MergedWithNext on the replacement */
    size_t from = 0;
    for (size_t i = 1; ok && i + rl <= len; i++)
      if (!memcmp(t + i, q->rep, rl)) {
        ok = pl_add(out, t + from, i - from, -1);
        from = i;
      }
    if (ok && from < len) ok = pl_add(out, t + from, len - from, -1);
  }
  free(t);
  return ok;
}

/* Applies one pre-tokenizer to a text piece (at_start: it begins the text). */
static int pretokenize(const pretok *q, pcre2_match_data *md, const char *s, size_t n, int at_start, plist *out) {
  if (q->kind == PRE_METASPACE) return metaspace(q, s, n, at_start, out);
  char *own = NULL;
  if (q->kind == PRE_BYTELEVEL && q->add_prefix_space && (n == 0 || s[0] != ' ')) {
    own = malloc(n + 2);
    if (!own) return 0;
    own[0] = ' ';
    memcpy(own + 1, s, n);
    s = own;
    n++;
  }
  int ok = 1;
  if (!q->re) {
    ok = n == 0 || pl_add(out, s, n, -1);
    free(own);
    return ok;
  }
  size_t pos = 0, gap = 0;
  int behavior = q->kind == PRE_BYTELEVEL ? SPLIT_ISOLATED : q->behavior;
  int pending_next = 0; /* MergedWithNext: a match waiting for what follows */
  while (pos <= n && ok) {
    int rc = pcre2_match(q->re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, md, NULL);
    if (rc < 0) break;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    size_t ms = ov[0], me = ov[1];
    if (me == ms) { /* empty match: step one character */
      if (ms >= n) break;
      int32_t c;
      pos = ms + (size_t)utf8_decode((const unsigned char *)s + ms, n - ms, &c);
      continue;
    }
    if (ms > gap) {
      if (pending_next) ok = pl_extend(out, s + gap, ms - gap);
      else ok = pl_add(out, s + gap, ms - gap, -1);
      pending_next = 0;
    }
    if (!ok) break;
    switch (behavior) {
    case SPLIT_ISOLATED: ok = pl_add(out, s + ms, me - ms, -1); break;
    case SPLIT_REMOVED: break;
    case SPLIT_MERGED_PREV:
      if (out->n > 0 && ms > gap) ok = pl_extend(out, s + ms, me - ms);
      else ok = pl_add(out, s + ms, me - ms, -1);
      break;
    case SPLIT_MERGED_NEXT: /* joins the following non-match piece */
      ok = pl_add(out, s + ms, me - ms, -1);
      pending_next = 1;
      break;
    }
    gap = pos = me;
  }
  if (ok && gap < n) {
    if (pending_next) ok = pl_extend(out, s + gap, n - gap);
    else ok = pl_add(out, s + gap, n - gap, -1);
  }
  free(own);
  return ok;
}

typedef struct {
  int32_t id, prev, next;
} sym;

typedef struct {
  int32_t rank, pos, nid;
} hent;

static int h_less(const hent *a, const hent *b) { return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos; }

static void h_push(hent *h, int *n, hent e) {
  int i = (*n)++;
  h[i] = e;
  while (i > 0) {
    int p = (i - 1) / 2;
    if (!h_less(&h[i], &h[p])) break;
    hent t = h[i]; h[i] = h[p]; h[p] = t;
    i = p;
  }
}

static hent h_pop(hent *h, int *n) {
  hent top = h[0];
  h[0] = h[--(*n)];
  int i = 0;
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < *n && h_less(&h[l], &h[m])) m = l;
    if (r < *n && h_less(&h[r], &h[m])) m = r;
    if (m == i) break;
    hent t = h[i]; h[i] = h[m]; h[m] = t;
    i = m;
  }
  return top;
}

typedef struct {
  int32_t *p;
  int n, cap;
} idvec;

static int iv_push(idvec *v, int32_t id) {
  if (v->n == v->cap) {
    int cap = v->cap ? v->cap * 2 : 64;
    int32_t *p = realloc(v->p, sizeof(int32_t) * (size_t)cap);
    if (!p) return 0;
    v->p = p;
    v->cap = cap;
  }
  v->p[v->n++] = id;
  return 1;
}

/* BPE of one pre-token's bytes. */
static int bpe_word(const wisp_bpe *b, const char *s, size_t n, idvec *out) {
  if (n == 0) return 1;
  if (b->ignore_merges) {
    int32_t id = vocab_get(b, s, n);
    if (id >= 0 && !b->tokens[id].raw) return iv_push(out, id);
  }
  sym *w = malloc(sizeof(sym) * n);
  hent *h = malloc(sizeof(hent) * (n + 1) * 2);
  if (!w || !h) { free(w); free(h); return 0; }
  int m = 0;
  /* The word starts as bytes (byte-level) or characters; a character with
   * no token becomes its <0xXX> byte tokens (byte_fallback), else unk
   * (consecutive unks fused into one with fuse_unk), else is dropped. */
  for (size_t i = 0, k; i < n; i += k) {
    int32_t id, ids[4] = {-1, -1, -1, -1};
    int nid = 1;
    k = 1;
    if (b->byte_level) {
      id = b->byte_id[(unsigned char)s[i]];
    } else {
      int32_t cp;
      k = (size_t)utf8_decode((const unsigned char *)s + i, n - i, &cp);
      id = vocab_get(b, s + i, k);
    }
    if (id < 0 && b->byte_fallback) {
      nid = (int)k;
      for (size_t j = 0; j < k && nid; j++)
        if ((ids[j] = b->fallback_id[(unsigned char)s[i + j]]) < 0) nid = 0;
      if (!nid) nid = 1;
      else id = ids[0];
    }
    if (id < 0) {
      id = b->unk;
      if (id >= 0 && b->fuse_unk && m > 0 && w[m - 1].id == id) continue;
    }
    if (id < 0) continue; /* as tokenizers: no token and no unk: dropped */
    if (nid == 1) ids[0] = id;
    for (int j = 0; j < nid; j++) {
      w[m].id = ids[j];
      w[m].prev = m - 1;
      w[m].next = -1;
      if (m > 0) w[m - 1].next = m;
      m++;
    }
  }
  int hn = 0;
  for (int i = 0; i + 1 < m; i++) {
    int32_t rank, nid;
    if (merge_get(b, w[i].id, w[i + 1].id, &rank, &nid)) h_push(h, &hn, (hent){rank, i, nid});
  }
  while (hn > 0) {
    hent top = h_pop(h, &hn);
    sym *a = &w[top.pos];
    if (a->id < 0 || a->next < 0) continue;
    int32_t rank, nid;
    if (!merge_get(b, a->id, w[a->next].id, &rank, &nid) || nid != top.nid) continue;
    sym *c = &w[a->next];
    a->id = nid;
    a->next = c->next;
    if (c->next >= 0) w[c->next].prev = top.pos;
    c->id = -1;
    if (a->prev >= 0 && merge_get(b, w[a->prev].id, a->id, &rank, &nid)) h_push(h, &hn, (hent){rank, a->prev, nid});
    if (a->next >= 0 && merge_get(b, a->id, w[a->next].id, &rank, &nid)) h_push(h, &hn, (hent){rank, top.pos, nid});
  }
  int ok = 1;
  for (int i = 0; m > 0 && i >= 0 && ok; i = w[i].next) ok = iv_push(out, w[i].id);
  free(w);
  free(h);
  return ok;
}

wisp_status wisp_bpe_encode(const wisp_bpe *b, const char *text, size_t len, int add_special, int32_t **ids, int *n) {
  *ids = NULL;
  *n = 0;
  if (len > (size_t)INT_MAX) return wisp_fail(WISP_EINVAL, "text too long");
  {
    /* The pipeline, like tokenizers' Rust strings, needs valid UTF-8. */
    size_t i = 0;
    while (i < len) {
      utf8proc_int32_t c;
      utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)text + i, (utf8proc_ssize_t)(len - i), &c);
      if (k <= 0) return wisp_fail(WISP_EINVAL, "text is not valid UTF-8 (byte %zu)", i);
      i += (size_t)k;
    }
  }
  plist a = {0}, c = {0};
  idvec v = {0};
  pcre2_match_data *md = NULL;
  wisp_status st = WISP_OK;
  int ok = 1;
  for (int i = 0; add_special && i < b->n_prefix; i++) ok = ok && iv_push(&v, b->prefix[i]);
  /* 1. non-normalized added tokens on the raw text */
  ok = ok && split_added(b, 0, text, len, &a);
  /* 2-3. normalize, then normalized added tokens */
  for (int i = 0; ok && i < a.n; i++) {
    if (a.id[i] >= 0) { ok = pl_add(&c, "", 0, a.id[i]); continue; }
    const char *s = a.buf.p + a.start[i];
    size_t sl = a.len[i];
    char *norm = NULL;
    if (b->n_norm) {
      if ((st = normalize(b->norm, b->n_norm, s, sl, &norm, &sl))) goto done;
      s = norm;
    }
    ok = split_added(b, 1, s, sl, &c);
    free(norm);
  }
  pl_swap(&a, &c);
  /* 4. pre-tokenizers */
  for (int p = 0; ok && p < b->n_pre; p++) {
    const pretok *q = &b->pre[p];
    if (q->re && !md) {
      md = pcre2_match_data_create(8, NULL);
      if (!md) ok = 0;
    }
    c.n = 0;
    c.buf.len = 0;
    for (int i = 0; ok && i < a.n; i++) {
      if (a.id[i] >= 0) ok = pl_add(&c, "", 0, a.id[i]);
      else ok = pretokenize(q, md, a.buf.p + a.start[i], a.len[i], i == 0, &c);
    }
    pl_swap(&a, &c);
  }
  /* 5. BPE */
  for (int i = 0; ok && i < a.n; i++) {
    if (a.id[i] >= 0) ok = iv_push(&v, a.id[i]);
    else ok = bpe_word(b, a.buf.p + a.start[i], a.len[i], &v);
  }
  /* 6. post-processor */
  for (int i = 0; add_special && ok && i < b->n_suffix; i++) ok = iv_push(&v, b->suffix[i]);
  if (!ok) st = wisp_fail(WISP_ENOMEM, "out of memory encoding %zu bytes", len);
done:
  pl_free(&a);
  pl_free(&c);
  pcre2_match_data_free(md);
  if (st) {
    free(v.p);
    return st;
  }
  if (!v.p) v.p = malloc(sizeof(int32_t));
  if (!v.p) return wisp_fail(WISP_ENOMEM, "out of memory");
  *ids = v.p;
  *n = v.n;
  return WISP_OK;
}

const char *wisp_bpe_token(const wisp_bpe *b, int32_t id, size_t *len) {
  if (id < 0 || id >= b->n_ids || !b->tokens[id].present) {
    *len = 0;
    return NULL;
  }
  if (b->tokens[id].text) {
    *len = b->tokens[id].text_len;
    return b->tokens[id].text;
  }
  *len = b->tokens[id].len;
  return b->tokens[id].bytes;
}

int wisp_bpe_strip_start(const wisp_bpe *b) { return b->strip_start; }

int32_t wisp_bpe_token_id(const wisp_bpe *b, const char *content) { return lookup_content(b, content); }

int wisp_bpe_is_special(const wisp_bpe *b, int32_t id) {
  for (int i = 0; i < b->n_added; i++)
    if (b->added[i].id == id) return b->added[i].special;
  return 0;
}

int wisp_bpe_n_ids(const wisp_bpe *b) { return b->n_ids; }

int32_t wisp_bpe_bos(const wisp_bpe *b) { return b->n_prefix ? b->prefix[0] : -1; }

void wisp_bpe_template_ids(const wisp_bpe *b, const int32_t **prefix, int *n_prefix, const int32_t **suffix,
                           int *n_suffix) {
  *prefix = b->prefix;
  *n_prefix = b->n_prefix;
  *suffix = b->suffix;
  *n_suffix = b->n_suffix;
}
