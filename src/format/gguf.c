/* GGUF v3 reader and writer; see gguf.h. Written from the public format
 * description; every read is bounds-checked against the file length. */
#include "format/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/qblocks.h"
#include "format/safetensors.h"
#include "format/tensor.h"
#include "format/weight_source.h"
#include "util/err.h"
#include "util/target.h"
#include "util/file.h"

/* ---- reading ---- */

typedef struct {
  const uint8_t *p;
  size_t len, at;
  const char *label;
} rd;

static wisp_status need(rd *r, uint64_t n, const char *what) {
  if (n > r->len - r->at)
    return wisp_fail(WISP_EFORMAT, "%s: truncated %s at byte %zu (file has %zu bytes)", r->label, what, r->at, r->len);
  return WISP_OK;
}

static uint64_t le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static wisp_status rd_u32(rd *r, uint32_t *v, const char *what) {
  wisp_status st = need(r, 4, what);
  if (st) return st;
  *v = (uint32_t)le(r->p + r->at, 4);
  r->at += 4;
  return WISP_OK;
}

static wisp_status rd_u64(rd *r, uint64_t *v, const char *what) {
  wisp_status st = need(r, 8, what);
  if (st) return st;
  *v = le(r->p + r->at, 8);
  r->at += 8;
  return WISP_OK;
}

static wisp_status rd_str(rd *r, wisp_gguf_str *s, const char *what) {
  wisp_status st;
  if ((st = rd_u64(r, &s->len, what)) || (st = need(r, s->len, what))) return st;
  s->s = (const char *)r->p + r->at;
  r->at += (size_t)s->len;
  return WISP_OK;
}

static char *str_dup(wisp_gguf_str s) {
  char *d = malloc((size_t)s.len + 1);
  if (!d) return NULL;
  memcpy(d, s.s, (size_t)s.len);
  d[s.len] = 0;
  return d;
}

static int scalar_size(uint32_t t) {
  switch (t) {
    case WISP_GGUF_UINT8: case WISP_GGUF_INT8: case WISP_GGUF_BOOL: return 1;
    case WISP_GGUF_UINT16: case WISP_GGUF_INT16: return 2;
    case WISP_GGUF_UINT32: case WISP_GGUF_INT32: case WISP_GGUF_FLOAT32: return 4;
    case WISP_GGUF_UINT64: case WISP_GGUF_INT64: case WISP_GGUF_FLOAT64: return 8;
    default: return 0;
  }
}

static void scalar_value(uint32_t t, const uint8_t *p, wisp_gguf_kv *kv) {
  uint64_t raw = le(p, scalar_size(t));
  switch (t) {
    case WISP_GGUF_INT8: kv->num.i = (int8_t)raw; break;
    case WISP_GGUF_INT16: kv->num.i = (int16_t)raw; break;
    case WISP_GGUF_INT32: kv->num.i = (int32_t)raw; break;
    case WISP_GGUF_INT64: kv->num.i = (int64_t)raw; break;
    case WISP_GGUF_FLOAT32: { uint32_t b = (uint32_t)raw; float f; memcpy(&f, &b, 4); kv->num.f = f; break; }
    case WISP_GGUF_FLOAT64: { double f; memcpy(&f, &raw, 8); kv->num.f = f; break; }
    default: kv->num.u = raw; break;
  }
}

/* Skips (validating) an array value of element type t; nested arrays allowed
 * up to a small depth. Used for arrays of arrays, which wisp does not keep. */
static wisp_status skip_array(rd *r, int depth, const char *key) {
  uint32_t t;
  uint64_t n;
  wisp_status st;
  if (depth > 4) return wisp_fail(WISP_EFORMAT, "%s: metadata '%s': arrays nested too deeply", r->label, key);
  if ((st = rd_u32(r, &t, "array type")) || (st = rd_u64(r, &n, "array length"))) return st;
  if (t == WISP_GGUF_STRING || t == WISP_GGUF_ARRAY) {
    for (uint64_t i = 0; i < n; i++) {
      if (t == WISP_GGUF_STRING) {
        wisp_gguf_str s;
        if ((st = rd_str(r, &s, "array string"))) return st;
      } else if ((st = skip_array(r, depth + 1, key))) {
        return st;
      }
    }
    return WISP_OK;
  }
  int sz = scalar_size(t);
  if (!sz) return wisp_fail(WISP_EFORMAT, "%s: metadata '%s': unknown array element type %u", r->label, key, t);
  if (n > (r->len - r->at) / (uint64_t)sz) return need(r, (uint64_t)-1, "array data");
  r->at += (size_t)(n * (uint64_t)sz);
  return WISP_OK;
}

static wisp_status read_kv(rd *r, wisp_gguf_kv *kv) {
  wisp_gguf_str key;
  wisp_status st;
  if ((st = rd_str(r, &key, "metadata key"))) return st;
  if (!(kv->key = str_dup(key))) return wisp_fail(WISP_ENOMEM, "out of memory");
  if ((st = rd_u32(r, &kv->type, "metadata value type"))) return st;
  if (kv->type == WISP_GGUF_STRING) return rd_str(r, &kv->str, "metadata string");
  if (kv->type == WISP_GGUF_ARRAY) {
    size_t start = r->at;
    if ((st = rd_u32(r, &kv->arr_type, "array type")) || (st = rd_u64(r, &kv->n, "array length"))) return st;
    if (kv->arr_type == WISP_GGUF_ARRAY) { /* kept as an opaque, validated value */
      r->at = start;
      kv->n = 0;
      return skip_array(r, 0, kv->key);
    }
    if (kv->arr_type == WISP_GGUF_STRING) {
      /* each string takes at least 8 bytes: bounds the allocation */
      if (kv->n > (r->len - r->at) / 8) return need(r, (uint64_t)-1, "string array");
      kv->strs = malloc(sizeof(wisp_gguf_str) * ((size_t)kv->n + 1));
      if (!kv->strs) return wisp_fail(WISP_ENOMEM, "out of memory");
      for (uint64_t i = 0; i < kv->n; i++)
        if ((st = rd_str(r, &kv->strs[i], "array string"))) return st;
      return WISP_OK;
    }
    int sz = scalar_size(kv->arr_type);
    if (!sz)
      return wisp_fail(WISP_EFORMAT, "%s: metadata '%s': unknown array element type %u", r->label, kv->key,
                       kv->arr_type);
    if (kv->n > (r->len - r->at) / (uint64_t)sz) return need(r, (uint64_t)-1, "array data");
    kv->arr = r->p + r->at;
    r->at += (size_t)(kv->n * (uint64_t)sz);
    return WISP_OK;
  }
  int sz = scalar_size(kv->type);
  if (!sz) return wisp_fail(WISP_EFORMAT, "%s: metadata '%s': unknown value type %u", r->label, kv->key, kv->type);
  if ((st = need(r, (uint64_t)sz, "metadata value"))) return st;
  scalar_value(kv->type, r->p + r->at, kv);
  r->at += (size_t)sz;
  return WISP_OK;
}

int wisp_ggml_block(uint32_t type, size_t *bytes) {
  size_t b = 0;
  int n = 0;
  switch (type) {
    case WISP_GGML_F32: n = 1; b = 4; break;
    case WISP_GGML_F16: case WISP_GGML_BF16: n = 1; b = 2; break;
    case WISP_GGML_Q4_0: n = 32; b = 18; break;
    case WISP_GGML_Q4_1: n = 32; b = 20; break;
    case WISP_GGML_Q8_0: n = 32; b = 34; break;
    case WISP_GGML_Q5_0: n = 32; b = WISP_Q5_0_BYTES; break;
    case WISP_GGML_Q5_1: n = 32; b = WISP_Q5_1_BYTES; break;
    case WISP_GGML_Q2_K: n = 256; b = WISP_Q2K_BYTES; break;
    case WISP_GGML_Q3_K: n = 256; b = WISP_Q3K_BYTES; break;
    case WISP_GGML_Q4_K: n = 256; b = 144; break;
    case WISP_GGML_Q5_K: n = 256; b = WISP_Q5K_BYTES; break;
    case WISP_GGML_Q6_K: n = 256; b = 210; break;
    default: break;
  }
  if (bytes) *bytes = b;
  return n;
}

const char *wisp_ggml_type_name(uint32_t type) {
  switch (type) {
    case WISP_GGML_F32: return "F32";
    case WISP_GGML_F16: return "F16";
    case WISP_GGML_BF16: return "BF16";
    case WISP_GGML_Q4_0: return "Q4_0";
    case WISP_GGML_Q4_1: return "Q4_1";
    case WISP_GGML_Q5_0: return "Q5_0";
    case WISP_GGML_Q5_1: return "Q5_1";
    case WISP_GGML_Q8_0: return "Q8_0";
    case WISP_GGML_Q2_K: return "Q2_K";
    case WISP_GGML_Q3_K: return "Q3_K";
    case WISP_GGML_Q4_K: return "Q4_K";
    case WISP_GGML_Q5_K: return "Q5_K";
    case WISP_GGML_Q6_K: return "Q6_K";
    default: return "unknown";
  }
}

/* Names of the ggml types wisp does not read, for the error that refuses
 * them (ggml.h's type ids); NULL for an id ggml does not define either. */
static const char *ggml_unread_type_name(uint32_t type) {
  static const char *const names[] = {
      [9] = "Q8_1",     [15] = "Q8_K",   [16] = "IQ2_XXS", [17] = "IQ2_XS", [18] = "IQ3_XXS", [19] = "IQ1_S",
      [20] = "IQ4_NL",  [21] = "IQ3_S",  [22] = "IQ2_S",   [23] = "IQ4_XS", [24] = "I8",      [25] = "I16",
      [26] = "I32",     [27] = "I64",    [28] = "F64",     [29] = "IQ1_M",  [34] = "TQ1_0",   [35] = "TQ2_0",
      [39] = "MXFP4"};
  return type < sizeof names / sizeof names[0] ? names[type] : NULL;
}

static int by_name(const void *a, const void *b) {
  return strcmp((*(const wisp_gguf_tensor *const *)a)->name, (*(const wisp_gguf_tensor *const *)b)->name);
}

static wisp_status read_tensor(rd *r, wisp_gguf_tensor *t, uint64_t index) {
  wisp_gguf_str name;
  uint32_t nd;
  wisp_status st;
  if ((st = rd_str(r, &name, "tensor name"))) return st;
  if (!(t->name = str_dup(name))) return wisp_fail(WISP_ENOMEM, "out of memory");
  if ((st = rd_u32(r, &nd, "tensor dimension count"))) return st;
  if (nd < 1 || nd > WISP_GGUF_MAX_DIMS)
    return wisp_fail(WISP_EFORMAT, "%s: tensor %llu '%s' has %u dimensions (1 to %d allowed)", r->label,
                     (unsigned long long)index, t->name, nd, WISP_GGUF_MAX_DIMS);
  t->n_dims = (int)nd;
  t->numel = 1;
  for (int d = 0; d < WISP_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
  for (int d = 0; d < t->n_dims; d++) {
    if ((st = rd_u64(r, &t->ne[d], "tensor dimensions"))) return st;
    if (t->ne[d] == 0 || t->ne[d] > (1ull << 40) || t->numel > (1ull << 50) / t->ne[d])
      return wisp_fail(WISP_EFORMAT, "%s: tensor '%s' has an invalid dimension %llu", r->label, t->name,
                       (unsigned long long)t->ne[d]);
    t->numel *= t->ne[d];
  }
  if ((st = rd_u32(r, &t->type, "tensor type")) || (st = rd_u64(r, &t->offset, "tensor offset"))) return st;
  size_t bb;
  int bn = wisp_ggml_block(t->type, &bb);
  if (!bn) {
    const char *known = ggml_unread_type_name(t->type);
    return wisp_fail(WISP_EUNSUPPORTED,
                     "%s: tensor '%s' has ggml type %u (%s), which wisp cannot read (it reads F32, F16, BF16, Q4_0, Q4_1, "
                     "Q5_0, Q5_1, Q8_0, Q2_K to Q6_K); requantize the file with llama.cpp's llama-quantize to Q4_K_M, "
                     "Q8_0 or F16",
                     r->label, t->name, t->type, known ? known : "not a ggml type");
  }
  if (t->ne[0] % (uint64_t)bn)
    return wisp_fail(WISP_EFORMAT, "%s: tensor '%s' (%s) has a row of %llu elements, not a multiple of its block %d",
                     r->label, t->name, wisp_ggml_type_name(t->type), (unsigned long long)t->ne[0], bn);
  t->bytes = t->numel / (uint64_t)bn * bb;
  return WISP_OK;
}

/* Parses the header from `head` (head_len bytes: the whole file, or its
 * first bytes read into memory when the file is streamed,
 * format/weight_source.h); the tensors' data lies in the file at data. */
static wisp_status parse_image(const uint8_t *head, size_t head_len, const uint8_t *data, size_t len, const char *label,
                               wisp_gguf **out) {
  *out = NULL;
  wisp_gguf *g = calloc(1, sizeof *g);
  if (!g || !(g->label = strdup(label))) { free(g); return wisp_fail(WISP_ENOMEM, "out of memory"); }
  g->map = data;
  g->len = len;
  rd r = {head, head_len, 0, g->label};
  wisp_status st;
  uint32_t magic;
  if (head_len < 4 || memcmp(head, "GGUF", 4)) {
    st = wisp_fail(WISP_EFORMAT, "%s: not a GGUF file (bad magic; expected \"GGUF\")", label);
    goto fail;
  }
  if ((st = rd_u32(&r, &magic, "header")) || (st = rd_u32(&r, &g->version, "header"))) goto fail;
  if (g->version != 3 && g->version != 2) {
    st = wisp_fail(WISP_EUNSUPPORTED, "%s: GGUF version %u is not supported (wisp reads version 3, and 2)", label,
                   g->version);
    goto fail;
  }
  if ((st = rd_u64(&r, &g->n_tensors, "header")) || (st = rd_u64(&r, &g->n_kv, "header"))) goto fail;
  /* Each key-value takes at least 12 bytes and each tensor info 24: bounds
   * the allocations by the file size. */
  if (g->n_kv > len / 12 || g->n_tensors > len / 24) {
    st = wisp_fail(WISP_EFORMAT, "%s: truncated or corrupt header: it claims %llu metadata entries and %llu tensors, more than the file can hold",
                   label, (unsigned long long)g->n_kv, (unsigned long long)g->n_tensors);
    goto fail;
  }
  g->kv = calloc((size_t)g->n_kv + 1, sizeof *g->kv);
  g->tensors = calloc((size_t)g->n_tensors + 1, sizeof *g->tensors);
  if (!g->kv || !g->tensors) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto fail; }
  uint64_t n_kv = g->n_kv;
  g->n_kv = 0;
  for (uint64_t i = 0; i < n_kv; i++) {
    g->n_kv++;
    if ((st = read_kv(&r, &g->kv[i]))) goto fail;
  }
  g->alignment = 32;
  const wisp_gguf_kv *al = wisp_gguf_kv_find(g, "general.alignment");
  if (al) {
    if (al->type != WISP_GGUF_UINT32 || al->num.u == 0 || (al->num.u & (al->num.u - 1)) || al->num.u > 65536) {
      st = wisp_fail(WISP_EFORMAT, "%s: general.alignment must be a u32 power of two (at most 65536)", label);
      goto fail;
    }
    g->alignment = al->num.u;
  }
  uint64_t n_t = g->n_tensors;
  g->n_tensors = 0;
  for (uint64_t i = 0; i < n_t; i++) {
    g->n_tensors++;
    if ((st = read_tensor(&r, &g->tensors[i], i))) goto fail;
  }
  g->data_offset = (r.at + g->alignment - 1) / g->alignment * g->alignment;
  if (g->n_tensors && g->data_offset > len) {
    st = wisp_fail(WISP_EFORMAT, "%s: truncated: the tensor data section would start at byte %llu, past the end (%zu)",
                   label, (unsigned long long)g->data_offset, len);
    goto fail;
  }
  for (uint64_t i = 0; i < g->n_tensors; i++) {
    wisp_gguf_tensor *t = &g->tensors[i];
    if (t->offset % g->alignment) {
      st = wisp_fail(WISP_EFORMAT, "%s: tensor '%s' offset %llu is not a multiple of the alignment %llu", label,
                     t->name, (unsigned long long)t->offset, (unsigned long long)g->alignment);
      goto fail;
    }
    uint64_t avail = len - g->data_offset;
    if (t->offset > avail || t->bytes > avail - t->offset) {
      st = wisp_fail(WISP_EFORMAT, "%s: tensor '%s' data (%llu bytes at offset %llu) runs past the end of the file (%zu bytes): the file is truncated, copy or download it again",
                     label, t->name, (unsigned long long)t->bytes, (unsigned long long)(g->data_offset + t->offset),
                     len);
      goto fail;
    }
    t->data = data + g->data_offset + t->offset;
  }
  if (g->n_tensors > 1) {
    wisp_gguf_tensor **s = malloc(sizeof(*s) * (size_t)g->n_tensors);
    if (!s) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto fail; }
    for (uint64_t i = 0; i < g->n_tensors; i++) s[i] = &g->tensors[i];
    qsort(s, (size_t)g->n_tensors, sizeof(*s), by_name);
    st = WISP_OK;
    for (uint64_t i = 1; i < g->n_tensors && !st; i++)
      if (!strcmp(s[i]->name, s[i - 1]->name))
        st = wisp_fail(WISP_EFORMAT, "%s: tensor '%s' is listed twice", label, s[i]->name);
    free(s);
    if (st) goto fail;
  }
  *out = g;
  return WISP_OK;
fail:
  wisp_gguf_close(g);
  return st;
}

wisp_status wisp_gguf_parse(const uint8_t *data, size_t len, const char *label, wisp_gguf **out) {
  return parse_image(data, len, data, len, label, out);
}

/* The most header a streamed file's parse reads into memory. */
#define MAX_STREAMED_HEADER ((size_t)256 << 20)

wisp_status wisp_gguf_open(const char *path, wisp_gguf **out) {
  const uint8_t *data = NULL;
  size_t len = 0;
  wisp_status st = wisp_weights_open(path, &data, &len);
  if (st) return st;
  if (wisp_weights_resident(data, len)) {
    st = wisp_gguf_parse(data, len, path, out);
  } else {
    /* streamed: the header (metadata and tensor infos) is read into memory,
     * kept while the file is open (the metadata's strings point into it);
     * its size is found by parsing a prefix that doubles until it holds it */
    uint8_t *head = NULL;
    for (size_t n = (size_t)8 << 20;; n *= 2) {
      if (n > len) n = len;
      free(head);
      head = malloc(n ? n : 1);
      if (!head) { st = wisp_fail(WISP_ENOMEM, "out of memory reading %s", path); break; }
      if ((st = wisp_weights_read(head, data, n))) break;
      st = parse_image(head, n, data, len, path, out);
      if (!st || n == len || n >= MAX_STREAMED_HEADER) break;
    }
    if (!st) (*out)->head = head;
    else free(head);
  }
  if (st) { wisp_weights_close(data, len); return st; }
  (*out)->mapped = 1;
  return WISP_OK;
}

void wisp_gguf_close(wisp_gguf *g) {
  if (!g) return;
  for (uint64_t i = 0; g->kv && i < g->n_kv; i++) {
    free(g->kv[i].key);
    free(g->kv[i].strs);
  }
  for (uint64_t i = 0; g->tensors && i < g->n_tensors; i++) free(g->tensors[i].name);
  free(g->kv);
  free(g->tensors);
  if (g->mapped) wisp_weights_close(g->map, g->len);
  free(g->head);
  free(g->label);
  free(g);
}

const wisp_gguf_kv *wisp_gguf_kv_find(const wisp_gguf *g, const char *key) {
  for (uint64_t i = 0; g->kv && i < g->n_kv; i++)
    if (g->kv[i].key && !strcmp(g->kv[i].key, key)) return &g->kv[i];
  return NULL;
}

static int is_int_type(uint32_t t) {
  return t <= WISP_GGUF_INT32 || t == WISP_GGUF_BOOL || t == WISP_GGUF_UINT64 || t == WISP_GGUF_INT64;
}
static int is_signed(uint32_t t) {
  return t == WISP_GGUF_INT8 || t == WISP_GGUF_INT16 || t == WISP_GGUF_INT32 || t == WISP_GGUF_INT64;
}

int wisp_gguf_get_int(const wisp_gguf *g, const char *key, int64_t *out) {
  const wisp_gguf_kv *kv = wisp_gguf_kv_find(g, key);
  if (!kv || !is_int_type(kv->type)) return 0;
  *out = is_signed(kv->type) ? kv->num.i : (int64_t)kv->num.u;
  return 1;
}

int wisp_gguf_get_float(const wisp_gguf *g, const char *key, double *out) {
  const wisp_gguf_kv *kv = wisp_gguf_kv_find(g, key);
  if (!kv) return 0;
  if (kv->type == WISP_GGUF_FLOAT32 || kv->type == WISP_GGUF_FLOAT64) { *out = kv->num.f; return 1; }
  int64_t v;
  if (!wisp_gguf_get_int(g, key, &v)) return 0;
  *out = (double)v;
  return 1;
}

int64_t wisp_gguf_arr_int(const wisp_gguf_kv *kv, uint64_t i) {
  if (kv->type != WISP_GGUF_ARRAY || !kv->arr || i >= kv->n) return 0;
  int sz = scalar_size(kv->arr_type);
  wisp_gguf_kv tmp = {0};
  scalar_value(kv->arr_type, kv->arr + i * (uint64_t)sz, &tmp);
  if (kv->arr_type == WISP_GGUF_FLOAT32 || kv->arr_type == WISP_GGUF_FLOAT64) return (int64_t)tmp.num.f;
  return is_signed(kv->arr_type) ? tmp.num.i : (int64_t)tmp.num.u;
}

double wisp_gguf_arr_float(const wisp_gguf_kv *kv, uint64_t i) {
  if (kv->type != WISP_GGUF_ARRAY || !kv->arr || i >= kv->n) return 0;
  wisp_gguf_kv tmp = {0};
  scalar_value(kv->arr_type, kv->arr + i * (uint64_t)scalar_size(kv->arr_type), &tmp);
  if (kv->arr_type == WISP_GGUF_FLOAT32 || kv->arr_type == WISP_GGUF_FLOAT64) return tmp.num.f;
  return is_signed(kv->arr_type) ? (double)tmp.num.i : (double)tmp.num.u;
}

const wisp_gguf_tensor *wisp_gguf_tensor_find(const wisp_gguf *g, const char *name) {
  for (uint64_t i = 0; i < g->n_tensors; i++)
    if (!strcmp(g->tensors[i].name, name)) return &g->tensors[i];
  return NULL;
}

static float f16_at(const uint8_t *p) { return wisp_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* Q6_K super-block (210 bytes): ql[128] low 4 bits, qh[64] high 2 bits,
 * scales[16] int8 (one per 16 elements), d f16. Within each half of 128
 * elements, element 32k + l (k = 0..3, l < 32) takes ql[l + 32*(k&1)]'s low
 * (k < 2) or high (k >= 2) nibble and bits 2k..2k+1 of qh[l]; q - 32 scaled
 * by d * scales[8*half + 2k + l/16]. */
static wisp_status read_f32_from(const wisp_gguf *g, const wisp_gguf_tensor *t, const uint8_t *p, float *out);

wisp_status wisp_gguf_read_f32(const wisp_gguf *g, const wisp_gguf_tensor *t, float *out) {
  void *owned = NULL; /* the tensor read in, when streamed (format/weight_source.h) */
  const uint8_t *p = wisp_weights_borrow(t->data, (size_t)t->bytes, &owned);
  if (!p) return WISP_ENOMEM;
  wisp_status st = read_f32_from(g, t, p, out);
  free(owned);
  return st;
}

static wisp_status read_f32_from(const wisp_gguf *g, const wisp_gguf_tensor *t, const uint8_t *p, float *out) {
  uint64_t n = t->numel;
  switch (t->type) {
    case WISP_GGML_F32: memcpy(out, p, (size_t)n * 4); return WISP_OK;
    case WISP_GGML_F16: for (uint64_t i = 0; i < n; i++) out[i] = f16_at(p + 2 * i); return WISP_OK;
    case WISP_GGML_BF16:
      for (uint64_t i = 0; i < n; i++) out[i] = wisp_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
      return WISP_OK;
    case WISP_GGML_Q4_0: /* d f16, 16 bytes: element j low nibble of byte j, j+16 its high nibble; (q-8)*d */
      for (uint64_t b = 0; b < n / 32; b++, p += 18) {
        float d = f16_at(p);
        for (int j = 0; j < 16; j++) {
          out[b * 32 + j] = d * (float)((p[2 + j] & 15) - 8);
          out[b * 32 + j + 16] = d * (float)((p[2 + j] >> 4) - 8);
        }
      }
      return WISP_OK;
    case WISP_GGML_Q4_1: /* d f16, m f16, then Q4_0's nibbles; q*d + m */
      for (uint64_t b = 0; b < n / 32; b++, p += 20) {
        float d = f16_at(p), m = f16_at(p + 2);
        for (int j = 0; j < 16; j++) {
          out[b * 32 + j] = d * (float)(p[4 + j] & 15) + m;
          out[b * 32 + j + 16] = d * (float)(p[4 + j] >> 4) + m;
        }
      }
      return WISP_OK;
    case WISP_GGML_Q8_0:
      for (uint64_t b = 0; b < n / 32; b++, p += 34) {
        float d = f16_at(p);
        for (int j = 0; j < 32; j++) out[b * 32 + j] = d * (float)(int8_t)p[2 + j];
      }
      return WISP_OK;
    case WISP_GGML_Q4_K:
      for (uint64_t b = 0; b < n / 256; b++) wisp_q4k_block_f32(p + b * 144, out + b * 256);
      return WISP_OK;
    case WISP_GGML_Q6_K:
      for (uint64_t b = 0; b < n / 256; b++) wisp_q6k_block_f32(p + b * WISP_Q6K_BYTES, out + b * 256);
      return WISP_OK;
    case WISP_GGML_Q5_0:
      for (uint64_t b = 0; b < n / 32; b++) wisp_q5_0_block_f32(p + b * WISP_Q5_0_BYTES, out + b * 32);
      return WISP_OK;
    case WISP_GGML_Q5_1:
      for (uint64_t b = 0; b < n / 32; b++) wisp_q5_1_block_f32(p + b * WISP_Q5_1_BYTES, out + b * 32);
      return WISP_OK;
    case WISP_GGML_Q2_K:
      for (uint64_t b = 0; b < n / 256; b++) wisp_q2k_block_f32(p + b * WISP_Q2K_BYTES, out + b * 256);
      return WISP_OK;
    case WISP_GGML_Q3_K:
      for (uint64_t b = 0; b < n / 256; b++) wisp_q3k_block_f32(p + b * WISP_Q3K_BYTES, out + b * 256);
      return WISP_OK;
    case WISP_GGML_Q5_K:
      for (uint64_t b = 0; b < n / 256; b++) wisp_q5k_block_f32(p + b * WISP_Q5K_BYTES, out + b * 256);
      return WISP_OK;
    default:
      return wisp_fail(WISP_EUNSUPPORTED, "%s: tensor '%s' has unsupported ggml type %u", g->label, t->name, t->type);
  }
}

void wisp_quantize_q8_0(const float *x, size_t n, uint8_t *out) {
  for (size_t b = 0; b < n / 32; b++, x += 32, out += 34) {
    float amax = 0;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127.0f;
    uint16_t hd = wisp_f32_to_f16(d);
    out[0] = (uint8_t)hd;
    out[1] = (uint8_t)(hd >> 8);
    float id = d > 0 ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++) {
      long q = lrintf(x[j] * id);
      out[2 + j] = (uint8_t)(int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
    }
  }
}

/* ---- writing ---- */

typedef struct {
  uint8_t *p;
  size_t len, cap;
  int oom;
} buf;

static void put(buf *b, const void *d, size_t n) {
  if (b->oom || n == 0) return; /* n == 0: d may be NULL (an empty part, e.g. no metadata) */
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) { b->oom = 1; return; }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, d, n);
  b->len += n;
}
static void put_u32(buf *b, uint32_t v) { uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)}; put(b, x, 4); }
static void put_u64(buf *b, uint64_t v) { put_u32(b, (uint32_t)v); put_u32(b, (uint32_t)(v >> 32)); }
static void put_s(buf *b, const char *s) { size_t n = strlen(s); put_u64(b, n); put(b, s, n); }

typedef struct {
  char *name;
  int n_dims;
  uint64_t ne[WISP_GGUF_MAX_DIMS];
  uint32_t type;
  uint8_t *data;
  size_t bytes;
} wtensor;

struct wisp_gguf_writer {
  buf kv;
  uint64_t n_kv;
  wtensor *t;
  size_t n_t, cap_t;
};

wisp_gguf_writer *wisp_gguf_writer_new(void) { return calloc(1, sizeof(wisp_gguf_writer)); }

void wisp_gguf_writer_free(wisp_gguf_writer *w) {
  if (!w) return;
  for (size_t i = 0; i < w->n_t; i++) { free(w->t[i].name); free(w->t[i].data); }
  free(w->t);
  free(w->kv.p);
  free(w);
}

static void key(wisp_gguf_writer *w, const char *k, uint32_t type) { put_s(&w->kv, k); put_u32(&w->kv, type); w->n_kv++; }
void wisp_gguf_put_u32(wisp_gguf_writer *w, const char *k, uint32_t v) { key(w, k, WISP_GGUF_UINT32); put_u32(&w->kv, v); }
void wisp_gguf_put_i32(wisp_gguf_writer *w, const char *k, int32_t v) { key(w, k, WISP_GGUF_INT32); put_u32(&w->kv, (uint32_t)v); }
void wisp_gguf_put_f32(wisp_gguf_writer *w, const char *k, float v) {
  uint32_t b;
  memcpy(&b, &v, 4);
  key(w, k, WISP_GGUF_FLOAT32);
  put_u32(&w->kv, b);
}
void wisp_gguf_put_bool(wisp_gguf_writer *w, const char *k, int v) { uint8_t x = v != 0; key(w, k, WISP_GGUF_BOOL); put(&w->kv, &x, 1); }
void wisp_gguf_put_str(wisp_gguf_writer *w, const char *k, const char *v) { key(w, k, WISP_GGUF_STRING); put_s(&w->kv, v); }
void wisp_gguf_put_arr_str(wisp_gguf_writer *w, const char *k, const char *const *v, uint64_t n) {
  key(w, k, WISP_GGUF_ARRAY);
  put_u32(&w->kv, WISP_GGUF_STRING);
  put_u64(&w->kv, n);
  for (uint64_t i = 0; i < n; i++) put_s(&w->kv, v[i]);
}
void wisp_gguf_put_arr_i32(wisp_gguf_writer *w, const char *k, const int32_t *v, uint64_t n) {
  key(w, k, WISP_GGUF_ARRAY);
  put_u32(&w->kv, WISP_GGUF_INT32);
  put_u64(&w->kv, n);
  for (uint64_t i = 0; i < n; i++) put_u32(&w->kv, (uint32_t)v[i]);
}
void wisp_gguf_put_arr_f32(wisp_gguf_writer *w, const char *k, const float *v, uint64_t n) {
  key(w, k, WISP_GGUF_ARRAY);
  put_u32(&w->kv, WISP_GGUF_FLOAT32);
  put_u64(&w->kv, n);
  for (uint64_t i = 0; i < n; i++) {
    uint32_t b;
    memcpy(&b, &v[i], 4);
    put_u32(&w->kv, b);
  }
}

wisp_status wisp_gguf_add_tensor(wisp_gguf_writer *w, const char *name, int n_dims, const uint64_t *ne, uint32_t type,
                                 const void *data, size_t bytes) {
  if (w->n_t == w->cap_t) {
    size_t cap = w->cap_t ? 2 * w->cap_t : 64;
    wtensor *t = realloc(w->t, cap * sizeof *t);
    if (!t) return wisp_fail(WISP_ENOMEM, "out of memory");
    w->t = t;
    w->cap_t = cap;
  }
  wtensor *t = &w->t[w->n_t];
  memset(t, 0, sizeof *t);
  t->name = strdup(name);
  t->data = malloc(bytes ? bytes : 1);
  if (!t->name || !t->data) { free(t->name); free(t->data); return wisp_fail(WISP_ENOMEM, "out of memory"); }
  memcpy(t->data, data, bytes);
  t->n_dims = n_dims;
  for (int d = 0; d < n_dims; d++) t->ne[d] = ne[d];
  t->type = type;
  t->bytes = bytes;
  w->n_t++;
  return WISP_OK;
}

wisp_status wisp_gguf_writer_write(wisp_gguf_writer *w, const char *path) {
  const uint64_t align = 32;
  buf h = {0};
  put(&h, "GGUF", 4);
  put_u32(&h, 3);
  put_u64(&h, w->n_t);
  put_u64(&h, w->n_kv);
  put(&h, w->kv.p, w->kv.len);
  uint64_t off = 0;
  for (size_t i = 0; i < w->n_t; i++) {
    put_s(&h, w->t[i].name);
    put_u32(&h, (uint32_t)w->t[i].n_dims);
    for (int d = 0; d < w->t[i].n_dims; d++) put_u64(&h, w->t[i].ne[d]);
    put_u32(&h, w->t[i].type);
    put_u64(&h, off);
    off += (w->t[i].bytes + align - 1) / align * align;
  }
  static const uint8_t zeros[64];
  while (h.len % align) put(&h, zeros, 1);
  if (h.oom || w->kv.oom) { free(h.p); return wisp_fail(WISP_ENOMEM, "out of memory"); }
  char tmp[4200];
  int fd;
  wisp_status cst = wisp_target_create_temp(path, tmp, sizeof tmp, &fd);
  if (cst) { free(h.p); return cst; }
  FILE *f = fdopen(fd, "wb");
  if (!f) { close(fd); unlink(tmp); free(h.p); return wisp_fail(WISP_EIO, "%s: cannot create: %s", tmp, strerror(errno)); }
  int ok = fwrite(h.p, 1, h.len, f) == h.len;
  free(h.p);
  for (size_t i = 0; ok && i < w->n_t; i++) {
    ok = fwrite(w->t[i].data, 1, w->t[i].bytes, f) == w->t[i].bytes;
    size_t pad = (size_t)((align - w->t[i].bytes % align) % align);
    if (ok && pad) ok = fwrite(zeros, 1, pad, f) == pad;
  }
  if (fflush(f) != 0 || fsync(fileno(f)) != 0) ok = 0;
  if (fclose(f) != 0) ok = 0;
  if (!ok) { unlink(tmp); return wisp_fail(WISP_EIO, "%s: write failed: %s", tmp, strerror(errno)); }
  return wisp_target_replace(tmp, path); /* only over a regular file (util/target.h) */
}
