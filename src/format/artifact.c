/* Manifest parsing and structural validation of an artifact; see artifact.h.
 * Every error names the file and the JSON field or section at fault. */
#include "format/artifact.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/tensor.h"
#include "format/weight_source.h"
#include "util/err.h"
#include "util/file.h"

static wisp_status get_int(const cJSON *obj, const char *key, const char *label, const char *path,
                           int required, int min, int *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!v) {
    if (!required) return WISP_OK;
    return wisp_fail(WISP_EFORMAT, "%s: missing field %s.%s", label, path, key);
  }
  if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < min)
    return wisp_fail(WISP_EFORMAT, "%s: field %s.%s must be an integer >= %d", label, path, key, min);
  if (v->valuedouble > 2147483647.0) /* an integer, but past what an int holds */
    return wisp_fail(WISP_EFORMAT, "%s: field %s.%s is %.0f, too large (at most 2147483647)", label, path, key,
                     v->valuedouble);
  *out = (int)v->valuedouble;
  return WISP_OK;
}

static wisp_status get_u64(const cJSON *obj, const char *key, const char *label, const char *path,
                           uint64_t *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!v) return wisp_fail(WISP_EFORMAT, "%s: missing field %s.%s", label, path, key);
  if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble) ||
      v->valuedouble > 9007199254740992.0)
    return wisp_fail(WISP_EFORMAT, "%s: field %s.%s must be a non-negative integer", label, path, key);
  *out = (uint64_t)v->valuedouble;
  return WISP_OK;
}

wisp_status wisp_shape_rope_pairs(const cJSON *shape, const char *where, int *out) {
  const cJSON *rp = cJSON_GetObjectItemCaseSensitive(shape, "ropePairs");
  *out = WISP_ROPE_HALVES;
  if (rp && cJSON_IsString(rp) && !strcmp(rp->valuestring, "adjacent")) *out = WISP_ROPE_ADJACENT;
  else if (rp && !(cJSON_IsString(rp) && !strcmp(rp->valuestring, "halves")))
    return wisp_fail(WISP_EFORMAT, "%s.ropePairs must be \"halves\" or \"adjacent\"", where);
  return WISP_OK;
}

static wisp_status parse_shape(const cJSON *shape, const char *label, wisp_shape *s) {
  if (!cJSON_IsObject(shape)) return wisp_fail(WISP_EFORMAT, "%s: missing object runtime.shape", label);
  const cJSON *lt = cJSON_GetObjectItemCaseSensitive(shape, "layerTypes");
  if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) == 0)
    return wisp_fail(WISP_EFORMAT, "%s: runtime.shape.layerTypes must be a non-empty array", label);
  s->n_layers = cJSON_GetArraySize(lt);
  s->layer_types = calloc((size_t)s->n_layers, sizeof(int));
  if (!s->layer_types) return wisp_fail(WISP_ENOMEM, "out of memory");
  int i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, lt) {
    if (!cJSON_IsString(e))
      return wisp_fail(WISP_EFORMAT, "%s: runtime.shape.layerTypes[%d] must be a string", label, i);
    if (!strcmp(e->valuestring, "conv")) s->layer_types[i] = WISP_LAYER_CONV;
    else if (!strcmp(e->valuestring, "attention") || !strcmp(e->valuestring, "full_attention"))
      s->layer_types[i] = WISP_LAYER_ATTENTION;
    else if (!strcmp(e->valuestring, "linear_attention")) s->layer_types[i] = WISP_LAYER_LINEAR;
    else
      return wisp_fail(WISP_EFORMAT, "%s: unknown layer type '%s' at runtime.shape.layerTypes[%d]", label,
                       e->valuestring, i);
    i++;
  }
  const char *p = "runtime.shape";
  wisp_status st;
  if ((st = get_int(shape, "hidden", label, p, 1, 1, &s->hidden)) ||
      (st = get_int(shape, "ffn", label, p, 1, 1, &s->ffn)) ||
      (st = get_int(shape, "vocab", label, p, 1, 1, &s->vocab)) ||
      (st = get_int(shape, "heads", label, p, 1, 1, &s->heads)) ||
      (st = get_int(shape, "kvHeads", label, p, 1, 1, &s->kv_heads)) ||
      (st = get_int(shape, "headDim", label, p, 1, 2, &s->head_dim)) ||
      (st = get_int(shape, "convCache", label, p, 1, 1, &s->conv_cache)))
    return st;
  s->quant_bits = 4;
  s->quant_block = 32;
  if ((st = get_int(shape, "quantBits", label, p, 0, 1, &s->quant_bits)) ||
      (st = get_int(shape, "quantBlock", label, p, 0, 1, &s->quant_block)))
    return st;
  if (s->quant_bits != 4 || s->quant_block != 32)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: runtime.shape quantBits=%d quantBlock=%d: only 4-bit blocks of 32 are supported",
                     label, s->quant_bits, s->quant_block);
  if ((st = get_int(shape, "linearKeyHeads", label, p, 0, 0, &s->lin_k_heads)) ||
      (st = get_int(shape, "linearValueHeads", label, p, 0, 0, &s->lin_v_heads)) ||
      (st = get_int(shape, "linearKeyDim", label, p, 0, 0, &s->lin_k_dim)) ||
      (st = get_int(shape, "linearValueDim", label, p, 0, 0, &s->lin_v_dim)) ||
      (st = get_int(shape, "rotaryDim", label, p, 0, 0, &s->rotary_dim)))
    return st;
  char where[600];
  snprintf(where, sizeof where, "%s: runtime.shape", label);
  if ((st = wisp_shape_rope_pairs(shape, where, &s->rope_pairs))) return st;
  if (s->heads % s->kv_heads != 0)
    return wisp_fail(WISP_EFORMAT, "%s: runtime.shape.heads (%d) must be a multiple of kvHeads (%d)", label,
                     s->heads, s->kv_heads);
  if (s->head_dim % 2)
    return wisp_fail(WISP_EFORMAT, "%s: runtime.shape.headDim (%d) must be even", label, s->head_dim);
  if (s->hidden % 32 || s->ffn % 32)
    return wisp_fail(WISP_EFORMAT, "%s: runtime.shape hidden (%d) and ffn (%d) must be multiples of 32", label,
                     s->hidden, s->ffn);
  return WISP_OK;
}

/* Two sections may share bytes only when they are the same byte range and
 * name a tied pair: embed.X and head.X. */
static int is_tied_pair(const char *a, const char *b) {
  const char *sa = NULL, *sb = NULL;
  if (!strncmp(a, "embed.", 6)) sa = a + 6;
  if (!strncmp(a, "head.", 5)) sa = a + 5;
  if (!strncmp(b, "embed.", 6)) sb = b + 6;
  if (!strncmp(b, "head.", 5)) sb = b + 5;
  return sa && sb && strcmp(a, b) != 0 && !strcmp(sa, sb);
}

static int by_offset(const void *x, const void *y) {
  const wisp_section *a = *(wisp_section *const *)x, *b = *(wisp_section *const *)y;
  if (a->offset != b->offset) return a->offset < b->offset ? -1 : 1;
  return a->bytes < b->bytes ? -1 : (a->bytes > b->bytes);
}

static wisp_status parse_sections(wisp_artifact *a, const char *label) {
  const cJSON *secs = cJSON_GetObjectItemCaseSensitive(a->runtime, "sections");
  if (!cJSON_IsArray(secs)) return wisp_fail(WISP_EFORMAT, "%s: runtime.sections must be an array", label);
  int n = cJSON_GetArraySize(secs);
  a->sections = calloc((size_t)n + 1, sizeof(wisp_section));
  if (!a->sections) return wisp_fail(WISP_ENOMEM, "out of memory");
  const cJSON *e;
  cJSON_ArrayForEach(e, secs) {
    int i = a->n_sections;
    char path[64];
    snprintf(path, sizeof path, "runtime.sections[%d]", i);
    if (!cJSON_IsObject(e)) return wisp_fail(WISP_EFORMAT, "%s: %s must be an object", label, path);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
    if (!cJSON_IsString(name) || !name->valuestring[0])
      return wisp_fail(WISP_EFORMAT, "%s: %s.name must be a non-empty string", label, path);
    wisp_section *s = &a->sections[i];
    s->name = strdup(name->valuestring);
    if (!s->name) return wisp_fail(WISP_ENOMEM, "out of memory");
    a->n_sections++;
    wisp_status st;
    if ((st = get_u64(e, "offset", label, path, &s->offset)) || (st = get_u64(e, "bytes", label, path, &s->bytes)))
      return st;
    if (s->offset + s->bytes > a->weight_bytes)
      return wisp_fail(WISP_EFORMAT,
                       "%s: section '%s' ends at byte %llu, past weightBytes %llu", label, s->name,
                       (unsigned long long)(s->offset + s->bytes), (unsigned long long)a->weight_bytes);
    for (int j = 0; j < i; j++)
      if (!strcmp(a->sections[j].name, s->name))
        return wisp_fail(WISP_EFORMAT, "%s: section '%s' is listed twice", label, s->name);
  }
  /* Overlap check on a sorted copy of pointers: neighbours in offset order. */
  wisp_section **sorted = malloc(sizeof(*sorted) * ((size_t)a->n_sections + 1));
  if (!sorted) return wisp_fail(WISP_ENOMEM, "out of memory");
  for (int i = 0; i < a->n_sections; i++) sorted[i] = &a->sections[i];
  qsort(sorted, (size_t)a->n_sections, sizeof(*sorted), by_offset);
  wisp_status st = WISP_OK;
  /* Track the furthest-reaching earlier section so nested overlaps are seen. */
  const wisp_section *reach = NULL;
  for (int i = 0; i < a->n_sections && !st; i++) {
    const wisp_section *s = sorted[i];
    if (s->bytes == 0) continue;
    if (reach && s->offset < reach->offset + reach->bytes) {
      int same_range = s->offset == reach->offset && s->bytes == reach->bytes;
      if (!(same_range && is_tied_pair(s->name, reach->name)))
        st = wisp_fail(WISP_EFORMAT, "%s: sections '%s' and '%s' overlap (and are not a tied embed/head pair)",
                       label, reach->name, s->name);
    }
    if (!reach || s->offset + s->bytes > reach->offset + reach->bytes) reach = s;
  }
  free(sorted);
  return st;
}

static wisp_status parse_wisp_extension(wisp_artifact *a, const char *label) {
  /* Defaults describe the seed manifest: an LFM2 hybrid with LFM2's rope
   * base and norm epsilon, byte-level tokens. */
  snprintf(a->architecture, sizeof a->architecture, "%s", WISP_DEFAULT_ARCHITECTURE);
  snprintf(a->tokenizer, sizeof a->tokenizer, "byte");
  a->rope_theta = 1000000.0;
  a->norm_eps = 1e-5;
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(a->manifest, "wisp");
  if (!w) return WISP_OK;
  if (!cJSON_IsObject(w)) return wisp_fail(WISP_EFORMAT, "%s: field 'wisp' must be an object", label);
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(w, "architecture");
  if (v) {
    if (!cJSON_IsString(v)) return wisp_fail(WISP_EFORMAT, "%s: wisp.architecture must be a string", label);
    snprintf(a->architecture, sizeof a->architecture, "%s", v->valuestring);
  }
  v = cJSON_GetObjectItemCaseSensitive(w, "tokenizer");
  if (v) {
    if (!cJSON_IsString(v)) return wisp_fail(WISP_EFORMAT, "%s: wisp.tokenizer must be a string", label);
    snprintf(a->tokenizer, sizeof a->tokenizer, "%s", v->valuestring);
  }
  v = cJSON_GetObjectItemCaseSensitive(w, "tokenizerFiles");
  if (v) {
    const cJSON *f;
    if (!cJSON_IsObject(v)) return wisp_fail(WISP_EFORMAT, "%s: wisp.tokenizerFiles must be an object", label);
    cJSON_ArrayForEach(f, v) {
      if (!cJSON_IsString(f) || !f->valuestring[0] || strchr(f->valuestring, '/'))
        return wisp_fail(WISP_EFORMAT, "%s: wisp.tokenizerFiles.%s must be a file name in the artifact directory", label,
                         f->string);
    }
  }
  v = cJSON_GetObjectItemCaseSensitive(w, "ropeTheta");
  if (v) {
    if (!cJSON_IsNumber(v) || v->valuedouble <= 0)
      return wisp_fail(WISP_EFORMAT, "%s: wisp.ropeTheta must be a positive number", label);
    a->rope_theta = v->valuedouble;
  }
  v = cJSON_GetObjectItemCaseSensitive(w, "normEps");
  if (v) {
    if (!cJSON_IsNumber(v) || v->valuedouble <= 0 || v->valuedouble > 1)
      return wisp_fail(WISP_EFORMAT, "%s: wisp.normEps must be a number in (0, 1]", label);
    a->norm_eps = v->valuedouble;
  }
  return WISP_OK;
}

wisp_status wisp_manifest_parse(const char *text, const char *label, wisp_artifact **out) {
  *out = NULL;
  wisp_artifact *a = calloc(1, sizeof *a);
  if (!a) return wisp_fail(WISP_ENOMEM, "out of memory");
  const char *err_at = NULL;
  a->manifest = cJSON_ParseWithOpts(text, &err_at, 1);
  wisp_status st = WISP_OK;
  if (!a->manifest) {
    long at = err_at ? (long)(err_at - text) : -1;
    st = wisp_fail(WISP_EFORMAT, "%s: malformed JSON near byte %ld", label, at);
    goto fail;
  }
  a->runtime = cJSON_GetObjectItemCaseSensitive(a->manifest, "runtime");
  if (!cJSON_IsObject(a->runtime)) {
    st = wisp_fail(WISP_EFORMAT, "%s: missing object 'runtime'", label);
    goto fail;
  }
  if ((st = parse_shape(cJSON_GetObjectItemCaseSensitive(a->runtime, "shape"), label, &a->shape))) goto fail;
  if ((st = get_u64(a->runtime, "weightBytes", label, "runtime", &a->weight_bytes))) goto fail;
  if ((st = parse_sections(a, label))) goto fail;
  if ((st = parse_wisp_extension(a, label))) goto fail;
  a->max_positions = 2048;
  if ((st = get_int(a->runtime, "maxPositions", label, "runtime", 0, 1, &a->max_positions))) goto fail;
  *out = a;
  return WISP_OK;
fail:
  wisp_artifact_free(a);
  return st;
}

wisp_status wisp_artifact_open_dir(const char *dir, wisp_artifact **out) {
  *out = NULL;
  char path[4096];
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  char *text = NULL;
  wisp_status st = wisp_read_file(path, &text, NULL);
  if (st) return st;
  wisp_artifact *a = NULL;
  st = wisp_manifest_parse(text, path, &a);
  free(text);
  if (st) return st;
  a->dir = strdup(dir);
  snprintf(path, sizeof path, "%s/weights.bin", dir);
  if ((st = wisp_weights_open(path, &a->weights, &a->weights_len))) goto fail;
  if (a->weights_len != a->weight_bytes) {
    st = wisp_fail(WISP_EFORMAT, "%s: %zu bytes, but the manifest's weightBytes is %llu (%s)", path,
                   a->weights_len, (unsigned long long)a->weight_bytes,
                   a->weights_len < a->weight_bytes ? "truncated" : "oversized");
    goto fail;
  }
  if (!strcmp(a->tokenizer, "bpe")) { /* the tokenizer file must be there */
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a->manifest, "wisp"),
                                                          "tokenizerFiles");
    const cJSON *tj = cJSON_GetObjectItemCaseSensitive(files, "tokenizer");
    snprintf(path, sizeof path, "%s/%s", dir, cJSON_IsString(tj) ? tj->valuestring : "tokenizer.json");
    if (!wisp_path_exists(path)) {
      st = wisp_fail(WISP_EFORMAT, "%s: wisp.tokenizer is 'bpe' but %s is missing", dir, path);
      goto fail;
    }
  }
  *out = a;
  return WISP_OK;
fail:
  wisp_artifact_free(a);
  return st;
}

void wisp_artifact_free(wisp_artifact *a) {
  if (!a) return;
  wisp_weights_close(a->weights, a->weights_len);
  if (a->gguf && a->gguf_free) a->gguf_free(a->gguf);
  for (int i = 0; i < a->n_sections; i++) {
    free(a->sections[i].name);
    free(a->sections[i].origin);
    free(a->sections[i].resident);
    free(a->sections[i].parts);
  }
  free(a->sections);
  free(a->shape.layer_types);
  cJSON_Delete(a->manifest);
  free(a->dir);
  free(a);
}

const wisp_section *wisp_artifact_section(const wisp_artifact *a, const char *name) {
  for (int i = 0; i < a->n_sections; i++)
    if (!strcmp(a->sections[i].name, name)) return &a->sections[i];
  return NULL;
}

wisp_status wisp_artifact_bytes(const wisp_artifact *a, const char *name, uint64_t expect_bytes,
                                const uint8_t **data) {
  const wisp_section *s = wisp_artifact_section(a, name);
  const char *dir = a->dir ? a->dir : "artifact";
  if (!s) return wisp_fail(WISP_EFORMAT, "%s: missing section '%s'", dir, name);
  if (expect_bytes && s->bytes != expect_bytes)
    return wisp_fail(WISP_EFORMAT, "%s: section '%s' has %llu bytes, the shape needs %llu (wrong shape)", dir, name,
                     (unsigned long long)s->bytes, (unsigned long long)expect_bytes);
  if (s->offset % 4)
    return wisp_fail(WISP_EFORMAT, "%s: section '%s' offset %llu is not 4-byte aligned", dir, name,
                     (unsigned long long)s->offset);
  *data = wisp_section_data(a, s);
  return WISP_OK;
}

wisp_status wisp_artifact_bytes_resident(const wisp_artifact *a, const char *name, uint64_t expect_bytes,
                                         const uint8_t **data) {
  wisp_status st = wisp_artifact_bytes(a, name, expect_bytes, data);
  if (st || !*data) return st;
  wisp_section *s = (wisp_section *)wisp_artifact_section(a, name);
  if (wisp_weights_resident(*data, (size_t)s->bytes)) return WISP_OK;
  /* a streamed section (format/weight_source.h): read it in once, kept
   * with the section until the artifact is freed */
  if (!s->resident) {
    uint8_t *copy = malloc(s->bytes ? (size_t)s->bytes : 1);
    if (!copy) return wisp_fail(WISP_ENOMEM, "out of memory reading section '%s'", name);
    if ((st = wisp_weights_read(copy, *data, (size_t)s->bytes))) {
      free(copy);
      return st;
    }
    s->resident = copy;
  }
  *data = s->resident;
  return WISP_OK;
}

const uint8_t *wisp_section_data(const wisp_artifact *a, const wisp_section *s) {
  if (s->data) return s->data;
  return a->weights ? a->weights + s->offset : NULL;
}
