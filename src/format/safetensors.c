/* safetensors reader; see safetensors.h. */
#include "format/safetensors.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/file.h"

/* Headers beyond this are refused (the format's own readers use 100 MB). */
#define MAX_HEADER_BYTES (100u * 1024u * 1024u)

static const struct {
  const char *name;
  wisp_st_dtype type;
  size_t size;
} k_dtypes[] = {
    {"F32", WISP_ST_F32, 4},      {"F16", WISP_ST_F16, 2},         {"BF16", WISP_ST_BF16, 2},
    {"F64", WISP_ST_F64, 8},      {"I64", WISP_ST_I64, 8},         {"I32", WISP_ST_I32, 4},
    {"I16", WISP_ST_I16, 2},      {"I8", WISP_ST_I8, 1},           {"U64", WISP_ST_U64, 8},
    {"U32", WISP_ST_U32, 4},      {"U16", WISP_ST_U16, 2},         {"U8", WISP_ST_U8, 1},
    {"BOOL", WISP_ST_BOOL, 1},    {"F8_E4M3", WISP_ST_F8_E4M3, 1}, {"F8_E5M2", WISP_ST_F8_E5M2, 1},
};
#define N_DTYPES (sizeof k_dtypes / sizeof k_dtypes[0])

const char *wisp_st_dtype_name(wisp_st_dtype t) {
  for (size_t i = 0; i < N_DTYPES; i++)
    if (k_dtypes[i].type == t) return k_dtypes[i].name;
  return "?";
}

size_t wisp_st_dtype_size(wisp_st_dtype t) {
  for (size_t i = 0; i < N_DTYPES; i++)
    if (k_dtypes[i].type == t) return k_dtypes[i].size;
  return 0;
}

float wisp_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31;
  uint32_t exp = (h >> 10) & 31, man = h & 1023u, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else { /* subnormal: renormalise */
      int e = -1;
      do { man <<= 1; e++; } while (!(man & 1024u));
      bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 1023u) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

float wisp_bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

const char *wisp_st_shape_str(const int64_t *shape, int ndim, char *buf, size_t cap) {
  size_t n = 0;
  if (cap == 0) return buf;
  buf[0] = 0;
  n += (size_t)snprintf(buf + n, cap - n, "[");
  for (int i = 0; i < ndim && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
  return buf;
}

void wisp_safetensors_close(wisp_safetensors *st) {
  if (!st) return;
  for (int i = 0; i < st->n_files; i++) {
    wisp_unmap_file(st->files[i].map, st->files[i].len);
    free(st->files[i].path);
  }
  for (int i = 0; i < st->n_tensors; i++) free(st->tensors[i].name);
  free(st->files);
  free(st->tensors);
  free(st);
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const wisp_st_tensor *)a)->name, ((const wisp_st_tensor *)b)->name);
}

static int by_begin(const void *a, const void *b) {
  const wisp_st_tensor *x = *(wisp_st_tensor *const *)a, *y = *(wisp_st_tensor *const *)b;
  if (x->data != y->data) return x->data < y->data ? -1 : 1;
  return x->bytes < y->bytes ? -1 : (x->bytes > y->bytes);
}

static wisp_status get_index(const cJSON *v, uint64_t *out) {
  if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble) ||
      v->valuedouble > 9007199254740992.0)
    return WISP_EFORMAT;
  *out = (uint64_t)v->valuedouble;
  return WISP_OK;
}

/* Parses one tensor entry of the header into t (name already set). */
static wisp_status parse_entry(const char *path, const cJSON *e, const uint8_t *data, uint64_t data_len,
                               wisp_st_tensor *t) {
  const char *name = t->name;
  if (!cJSON_IsObject(e))
    return wisp_fail(WISP_EFORMAT, "%s: tensor '%s': header entry must be an object", path, name);
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
  if (!cJSON_IsString(dt)) return wisp_fail(WISP_EFORMAT, "%s: tensor '%s': missing string 'dtype'", path, name);
  size_t esize = 0;
  for (size_t i = 0; i < N_DTYPES; i++)
    if (!strcmp(dt->valuestring, k_dtypes[i].name)) { t->dtype = k_dtypes[i].type; esize = k_dtypes[i].size; }
  if (!esize) return wisp_fail(WISP_EFORMAT, "%s: tensor '%s': unknown dtype '%s'", path, name, dt->valuestring);
  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
  if (!cJSON_IsArray(shape)) return wisp_fail(WISP_EFORMAT, "%s: tensor '%s': missing array 'shape'", path, name);
  int nd = cJSON_GetArraySize(shape);
  if (nd > WISP_ST_MAX_DIMS)
    return wisp_fail(WISP_EFORMAT, "%s: tensor '%s': %d dimensions (at most %d supported)", path, name, nd,
                     WISP_ST_MAX_DIMS);
  t->ndim = nd;
  /* numel * esize must not overflow: keep it below 2^62 while multiplying. */
  uint64_t numel = 1;
  int i = 0;
  const cJSON *d;
  cJSON_ArrayForEach(d, shape) {
    uint64_t v;
    if (get_index(d, &v))
      return wisp_fail(WISP_EFORMAT, "%s: tensor '%s': shape[%d] must be a non-negative integer", path, name, i);
    if (v > 0 && numel > (UINT64_C(1) << 62) / v)
      return wisp_fail(WISP_EFORMAT, "%s: tensor '%s': shape is too large", path, name);
    t->shape[i++] = (int64_t)v;
    numel *= v;
  }
  t->numel = numel;
  const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
  uint64_t b, en;
  if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || get_index(cJSON_GetArrayItem(off, 0), &b) ||
      get_index(cJSON_GetArrayItem(off, 1), &en))
    return wisp_fail(WISP_EFORMAT, "%s: tensor '%s': data_offsets must be two non-negative integers", path, name);
  if (en < b)
    return wisp_fail(WISP_EFORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] end before they begin", path, name,
                     (unsigned long long)b, (unsigned long long)en);
  if (en > data_len)
    return wisp_fail(WISP_EFORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] pass the end of the data (%llu bytes)",
                     path, name, (unsigned long long)b, (unsigned long long)en, (unsigned long long)data_len);
  char sbuf[128];
  if (en - b != numel * esize)
    return wisp_fail(WISP_EFORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes, but %s %s needs %llu",
                     path, name, (unsigned long long)b, (unsigned long long)en, (unsigned long long)(en - b),
                     dt->valuestring, wisp_st_shape_str(t->shape, nd, sbuf, sizeof sbuf),
                     (unsigned long long)(numel * esize));
  t->data = data + b;
  t->bytes = en - b;
  return WISP_OK;
}

/* Appends the tensors of one mapped file to st (file index fi). */
static wisp_status parse_file(wisp_safetensors *st, int fi) {
  const char *path = st->files[fi].path;
  const uint8_t *map = st->files[fi].map;
  size_t len = st->files[fi].len;
  if (len < 8)
    return wisp_fail(WISP_EFORMAT, "%s: truncated header: the file has %zu bytes, the header length alone needs 8",
                     path, len);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | map[i];
  if (hlen > len - 8)
    return wisp_fail(WISP_EFORMAT, "%s: header length %llu passes the end of the file (%zu bytes)", path,
                     (unsigned long long)hlen, len);
  if (hlen > MAX_HEADER_BYTES)
    return wisp_fail(WISP_EFORMAT, "%s: header length %llu is implausibly large", path, (unsigned long long)hlen);
  if (hlen < 2 || map[8] != '{')
    return wisp_fail(WISP_EFORMAT, "%s: header is not a JSON object", path);
  char *text = malloc((size_t)hlen + 1);
  if (!text) return wisp_fail(WISP_ENOMEM, "out of memory");
  memcpy(text, map + 8, (size_t)hlen);
  text[hlen] = 0;
  const char *err_at = NULL;
  cJSON *root = cJSON_ParseWithOpts(text, &err_at, 1);
  if (!root || !cJSON_IsObject(root)) {
    long at = root ? 0 : (err_at ? (long)(err_at - text) : -1);
    free(text);
    cJSON_Delete(root);
    return wisp_fail(WISP_EFORMAT, "%s: header is malformed JSON near byte %ld", path, at + 8);
  }
  free(text);
  const uint8_t *data = map + 8 + hlen;
  uint64_t data_len = len - 8 - hlen;
  int n_new = cJSON_GetArraySize(root);
  wisp_status rc = WISP_OK;
  wisp_st_tensor *grown = realloc(st->tensors, sizeof(wisp_st_tensor) * ((size_t)st->n_tensors + (size_t)n_new + 1));
  if (!grown) { cJSON_Delete(root); return wisp_fail(WISP_ENOMEM, "out of memory"); }
  st->tensors = grown;
  int first = st->n_tensors;
  const cJSON *e;
  cJSON_ArrayForEach(e, root) {
    if (!e->string) continue;
    if (!strcmp(e->string, "__metadata__")) continue;
    wisp_st_tensor *t = &st->tensors[st->n_tensors];
    memset(t, 0, sizeof *t);
    t->name = strdup(e->string);
    if (!t->name) { rc = wisp_fail(WISP_ENOMEM, "out of memory"); break; }
    t->file = fi;
    st->n_tensors++;
    if ((rc = parse_entry(path, e, data, data_len, t))) break;
  }
  cJSON_Delete(root);
  if (rc) return rc;
  /* Overlap check within this file: sort by start, track the furthest end. */
  int n = st->n_tensors - first;
  wisp_st_tensor **sorted = malloc(sizeof(*sorted) * ((size_t)n + 1));
  if (!sorted) return wisp_fail(WISP_ENOMEM, "out of memory");
  for (int i = 0; i < n; i++) sorted[i] = &st->tensors[first + i];
  qsort(sorted, (size_t)n, sizeof *sorted, by_begin);
  const wisp_st_tensor *reach = NULL;
  for (int i = 0; i < n && !rc; i++) {
    const wisp_st_tensor *t = sorted[i];
    if (t->bytes == 0) continue;
    if (reach && t->data < reach->data + reach->bytes)
      rc = wisp_fail(WISP_EFORMAT, "%s: tensors '%s' and '%s' overlap (data_offsets [%llu, %llu] and [%llu, %llu])",
                     path, reach->name, t->name, (unsigned long long)(reach->data - data),
                     (unsigned long long)(reach->data - data + reach->bytes), (unsigned long long)(t->data - data),
                     (unsigned long long)(t->data - data + t->bytes));
    if (!reach || t->data + t->bytes > reach->data + reach->bytes) reach = t;
  }
  free(sorted);
  return rc;
}

static wisp_status add_file(wisp_safetensors *st, const char *path) {
  wisp_st_file *grown = realloc(st->files, sizeof(wisp_st_file) * ((size_t)st->n_files + 1));
  if (!grown) return wisp_fail(WISP_ENOMEM, "out of memory");
  st->files = grown;
  wisp_st_file *f = &st->files[st->n_files];
  memset(f, 0, sizeof *f);
  f->path = strdup(path);
  if (!f->path) return wisp_fail(WISP_ENOMEM, "out of memory");
  st->n_files++;
  wisp_status rc = wisp_map_file(path, &f->map, &f->len);
  if (rc) return rc;
  return parse_file(st, st->n_files - 1);
}

/* Sorts by name and rejects a name that appears twice (across shards). */
static wisp_status finish(wisp_safetensors *st) {
  qsort(st->tensors, (size_t)st->n_tensors, sizeof(wisp_st_tensor), by_name);
  for (int i = 1; i < st->n_tensors; i++)
    if (!strcmp(st->tensors[i].name, st->tensors[i - 1].name))
      return wisp_fail(WISP_EFORMAT, "tensor '%s' appears in both %s and %s", st->tensors[i].name,
                       st->files[st->tensors[i - 1].file].path, st->files[st->tensors[i].file].path);
  return WISP_OK;
}

wisp_status wisp_safetensors_open_file(const char *path, wisp_safetensors **out) {
  *out = NULL;
  wisp_safetensors *st = calloc(1, sizeof *st);
  if (!st) return wisp_fail(WISP_ENOMEM, "out of memory");
  wisp_status rc = add_file(st, path);
  if (!rc) rc = finish(st);
  if (rc) { wisp_safetensors_close(st); return rc; }
  *out = st;
  return WISP_OK;
}

static wisp_status open_index(const char *dir, const char *index_path, wisp_safetensors *st) {
  char *text = NULL;
  wisp_status rc = wisp_read_file(index_path, &text, NULL);
  if (rc) return rc;
  cJSON *root = cJSON_Parse(text);
  free(text);
  const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
  if (!root || !cJSON_IsObject(map) || cJSON_GetArraySize(map) == 0) {
    cJSON_Delete(root);
    return wisp_fail(WISP_EFORMAT, "%s: malformed index (needs a non-empty object 'weight_map')", index_path);
  }
  char path[8192];
  const cJSON *e;
  /* Open each distinct shard once, in order of first mention. */
  cJSON_ArrayForEach(e, map) {
    if (!cJSON_IsString(e) || !e->valuestring[0] || strstr(e->valuestring, "..") || e->valuestring[0] == '/') {
      rc = wisp_fail(WISP_EFORMAT, "%s: weight_map entry '%s' must name a shard file inside %s", index_path,
                     e->string ? e->string : "?", dir);
      break;
    }
    snprintf(path, sizeof path, "%s/%s", dir, e->valuestring);
    int seen = 0;
    for (int i = 0; i < st->n_files && !seen; i++) seen = !strcmp(st->files[i].path, path);
    if (!seen && (rc = add_file(st, path))) break;
  }
  if (!rc) rc = finish(st);
  /* Every tensor the index names must be in the shard it names. */
  if (!rc) {
    cJSON_ArrayForEach(e, map) {
      const wisp_st_tensor *t = wisp_safetensors_find(st, e->string);
      snprintf(path, sizeof path, "%s/%s", dir, e->valuestring);
      if (!t || strcmp(st->files[t->file].path, path)) {
        rc = wisp_fail(WISP_EFORMAT, "%s: tensor '%s' is mapped to %s but is not in it", index_path, e->string, path);
        break;
      }
    }
  }
  cJSON_Delete(root);
  return rc;
}

wisp_status wisp_safetensors_open_dir(const char *dir, wisp_safetensors **out) {
  *out = NULL;
  char path[8192];
  snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
  if (wisp_path_exists(path)) {
    wisp_safetensors *st = calloc(1, sizeof *st);
    if (!st) return wisp_fail(WISP_ENOMEM, "out of memory");
    wisp_status rc = open_index(dir, path, st);
    if (rc) { wisp_safetensors_close(st); return rc; }
    *out = st;
    return WISP_OK;
  }
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  if (!wisp_path_exists(path))
    return wisp_fail(WISP_EIO, "%s: no model.safetensors or model.safetensors.index.json", dir);
  return wisp_safetensors_open_file(path, out);
}

const wisp_st_tensor *wisp_safetensors_find(const wisp_safetensors *st, const char *name) {
  int lo = 0, hi = st->n_tensors - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    int c = strcmp(st->tensors[mid].name, name);
    if (!c) return &st->tensors[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return NULL;
}

const char *wisp_safetensors_file_of(const wisp_safetensors *st, const wisp_st_tensor *t) {
  return st->files[t->file].path;
}

wisp_status wisp_safetensors_read_f32(const wisp_safetensors *st, const wisp_st_tensor *t, float *out) {
  const uint8_t *p = t->data;
  switch (t->dtype) {
    case WISP_ST_F32:
      if (t->bytes) memcpy(out, p, (size_t)t->bytes); /* little-endian hosts only, like the rest of wisp */
      return WISP_OK;
    case WISP_ST_F16:
      for (uint64_t i = 0; i < t->numel; i++) out[i] = wisp_f16_to_f32((uint16_t)(p[2 * i] | (p[2 * i + 1] << 8)));
      return WISP_OK;
    case WISP_ST_BF16:
      for (uint64_t i = 0; i < t->numel; i++) out[i] = wisp_bf16_to_f32((uint16_t)(p[2 * i] | (p[2 * i + 1] << 8)));
      return WISP_OK;
    default:
      return wisp_fail(WISP_EUNSUPPORTED, "%s: tensor '%s' has dtype %s; only F32, F16 and BF16 are supported",
                       wisp_safetensors_file_of(st, t), t->name, wisp_st_dtype_name(t->dtype));
  }
}
