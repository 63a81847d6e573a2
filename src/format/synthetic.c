/* Synthetic artifact generation; see synthetic.h.
 *
 * Magnitudes are chosen so activations stay finite and the output is not
 * degenerate: Q4 nibbles are uniform (std ~4.6 around the zero point) and
 * the block scale sets the weight std to about 0.6/sqrt(fan_in); norm
 * weights are near 1, conv taps of order 0.5. */
#include "format/synthetic.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/artifact.h"
#include "format/layout.h"
#include "format/tensor.h"
#include "format/writer.h"
#include "util/err.h"

typedef struct { uint64_t s; } rng;

static uint64_t next_u64(rng *r) { /* splitmix64 */
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static float next_unit(rng *r) { return (float)((next_u64(r) >> 40) * (1.0 / 16777216.0)); } /* [0,1) */

static rng rng_for(uint64_t seed, const char *name) {
  uint64_t h = 1469598103934665603ull ^ seed; /* FNV-1a over the name */
  for (const char *p = name; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
  rng r = {h};
  next_u64(&r);
  return r;
}

static int ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && !strcmp(s + a - b, suffix);
}

/* Input width of the matrix a section belongs to (for the scale). */
static int fan_in(const wisp_shape *sh, const char *name) {
  if (strstr(name, "mlp.down.kquant") || strstr(name, "mlp.down.kscales")) return sh->hidden;
  if (strstr(name, "mlp.down")) return sh->ffn;
  if (strstr(name, "attn.o_proj")) return sh->heads * sh->head_dim;
  return sh->hidden;
}

/* The transposed down copy: dequantize L.mlp.down from the bytes already
 * generated, transpose to [ffn][hidden] and quantize again. */
static wisp_status fill_down_transposed(const wisp_artifact *a, const uint8_t *buf, const char *name, uint8_t *out,
                                        size_t bytes, int want_scales) {
  int layer = atoi(name + 1);
  char qn[64], sn[64];
  snprintf(qn, sizeof qn, "L%d.mlp.down.quant", layer);
  snprintf(sn, sizeof sn, "L%d.mlp.down.scales", layer);
  const wisp_section *qs = wisp_artifact_section(a, qn), *ss = wisp_artifact_section(a, sn);
  const int H = a->shape.hidden, F = a->shape.ffn;
  if (!qs || !ss) return wisp_fail(WISP_EFORMAT, "section '%s' needs '%s' and '%s'", name, qn, sn);
  if (bytes != (want_scales ? wisp_q4_scale_bytes(F, H) : wisp_q4_quant_bytes(F, H)))
    return wisp_fail(WISP_EFORMAT, "section '%s' has %zu bytes, the shape needs a [%d x %d] Q4 matrix", name, bytes,
                     F, H);
  wisp_matrix down = {.type = WISP_W_Q4, .rows = H, .cols = F, .q = buf + qs->offset,
                      .scales = (const float *)(buf + ss->offset)};
  float *dense = malloc(sizeof(float) * (size_t)H * F), *t = malloc(sizeof(float) * (size_t)H * F);
  uint8_t *q = malloc(wisp_q4_quant_bytes(F, H));
  float *s = malloc(wisp_q4_scale_bytes(F, H));
  wisp_status st = WISP_OK;
  if (!dense || !t || !q || !s) st = wisp_fail(WISP_ENOMEM, "out of memory");
  else {
    for (int r = 0; r < H; r++) wisp_matrix_row_f32(&down, r, dense + (size_t)r * F);
    for (int r = 0; r < H; r++)
      for (int c = 0; c < F; c++) t[(size_t)c * H + r] = dense[(size_t)r * F + c];
    wisp_quantize_q4(t, F, H, q, s);
    memcpy(out, want_scales ? (void *)s : (void *)q, bytes);
  }
  free(dense);
  free(t);
  free(q);
  free(s);
  return st;
}

static wisp_status fill_section(const wisp_artifact *a, const wisp_section *sec, uint64_t seed, uint8_t *buf) {
  const wisp_shape *sh = &a->shape;
  const char *name = sec->name;
  uint8_t *out = buf + sec->offset;
  size_t bytes = (size_t)sec->bytes;
  rng r = rng_for(seed, name);
  if (ends_with(name, ".kquant")) return fill_down_transposed(a, buf, name, out, bytes, 0);
  if (ends_with(name, ".kscales")) return fill_down_transposed(a, buf, name, out, bytes, 1);
  if (ends_with(name, ".quant")) {
    for (size_t i = 0; i < bytes; i++) out[i] = (uint8_t)(next_u64(&r) & 0xFF);
    return WISP_OK;
  }
  if (ends_with(name, ".zero_points")) {
    for (size_t i = 0; i < bytes; i++) {
      int lo = 7 + (int)(next_u64(&r) % 3), hi = 7 + (int)(next_u64(&r) % 3);
      out[i] = (uint8_t)(lo | (hi << 4));
    }
    return WISP_OK;
  }
  if (bytes % 4) return wisp_fail(WISP_EFORMAT, "section '%s': %zu bytes is not a whole number of f32", name, bytes);
  float *f = (float *)out;
  size_t n = bytes / 4;
  if (ends_with(name, ".scales")) {
    float base = 0.6f / sqrtf((float)fan_in(sh, name)) / 4.6f;
    for (size_t i = 0; i < n; i++) f[i] = base * (0.8f + 0.4f * next_unit(&r));
    return WISP_OK;
  }
  if (ends_with(name, ".weight")) { /* an f32 matrix */
    float amp = 0.6f / sqrtf((float)fan_in(sh, name)) * 1.7320508f;
    for (size_t i = 0; i < n; i++) f[i] = amp * (2.0f * next_unit(&r) - 1.0f);
    return WISP_OK;
  }
  if (ends_with(name, "norm")) {
    for (size_t i = 0; i < n; i++) f[i] = 0.9f + 0.2f * next_unit(&r);
    return WISP_OK;
  }
  if (ends_with(name, ".taps")) {
    for (size_t i = 0; i < n; i++) f[i] = 0.5f * (2.0f * next_unit(&r) - 1.0f);
    return WISP_OK;
  }
  if (!strncmp(name, "rope.", 5)) {
    if (n % (size_t)(sh->head_dim / 2))
      return wisp_fail(WISP_EFORMAT, "section '%s': %zu floats is not a whole number of rows of %d", name, n,
                       sh->head_dim / 2);
    int is_sin = strstr(name, "sin") != NULL;
    wisp_rope_table(a->rope_theta, sh->head_dim, (int)(n / (size_t)(sh->head_dim / 2)), is_sin ? NULL : f,
                    is_sin ? f : NULL);
    return WISP_OK;
  }
  return wisp_fail(WISP_EUNSUPPORTED, "don't know how to synthesize section '%s'", name);
}

/* Orders sections so that kquant/kscales come after the down matrices they
 * are derived from; tied sections (same bytes) are filled once. */
static int derived(const char *name) { return ends_with(name, ".kquant") || ends_with(name, ".kscales"); }

wisp_status wisp_synthetic_write(const char *manifest_text, const char *label, const char *out_dir, uint64_t seed) {
  wisp_artifact *a = NULL;
  wisp_status st = wisp_manifest_parse(manifest_text, label, &a);
  if (st) return st;
  uint8_t *buf = calloc(1, a->weight_bytes ? (size_t)a->weight_bytes : 1);
  wisp_writer *w = NULL;
  if (!buf) { st = wisp_fail(WISP_ENOMEM, "out of memory for %llu bytes", (unsigned long long)a->weight_bytes); goto done; }
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < a->n_sections; i++) {
      const wisp_section *s = &a->sections[i];
      if (derived(s->name) != pass) continue;
      if (!strncmp(s->name, "head.", 5) && strcmp(s->name, "head.norm")) {
        /* head.* tied to embed.* (same range) gets embed's bytes. */
        char twin[128];
        snprintf(twin, sizeof twin, "embed.%s", s->name + 5);
        const wisp_section *e = wisp_artifact_section(a, twin);
        if (e && e->offset == s->offset && e->bytes == s->bytes) continue;
      }
      if ((st = fill_section(a, s, seed, buf))) {
        wisp_error_prefix("%s", label);
        goto done;
      }
    }
  }
  if ((st = wisp_writer_begin(out_dir, a->weight_bytes, &w))) goto done;
  if ((st = wisp_writer_put(w, 0, buf, (size_t)a->weight_bytes))) goto done;
  /* The output manifest: the input unchanged plus wisp's own fields. */
  cJSON *ext = cJSON_GetObjectItemCaseSensitive(a->manifest, "wisp");
  if (!ext) ext = cJSON_AddObjectToObject(a->manifest, "wisp");
  if (!cJSON_GetObjectItemCaseSensitive(ext, "architecture")) cJSON_AddStringToObject(ext, "architecture", a->architecture);
  if (!cJSON_GetObjectItemCaseSensitive(ext, "tokenizer")) cJSON_AddStringToObject(ext, "tokenizer", a->tokenizer);
  if (!cJSON_GetObjectItemCaseSensitive(ext, "ropeTheta")) cJSON_AddNumberToObject(ext, "ropeTheta", a->rope_theta);
  if (!cJSON_GetObjectItemCaseSensitive(ext, "normEps")) cJSON_AddNumberToObject(ext, "normEps", a->norm_eps);
  cJSON_DeleteItemFromObjectCaseSensitive(ext, "synthetic");
  cJSON *syn = cJSON_AddObjectToObject(ext, "synthetic");
  cJSON_AddNumberToObject(syn, "seed", (double)seed);
  st = wisp_writer_commit(w, a->manifest);
  w = NULL;
done:
  if (w) wisp_writer_abort(w);
  free(buf);
  wisp_artifact_free(a);
  return st;
}

char *wisp_synthetic_with_context(const char *manifest_text, const char *label, int context) {
  cJSON *m = cJSON_Parse(manifest_text);
  cJSON *rt = cJSON_GetObjectItemCaseSensitive(m, "runtime");
  cJSON *sections = cJSON_GetObjectItemCaseSensitive(rt, "sections");
  if (!cJSON_IsArray(sections) || context < 1) {
    cJSON_Delete(m);
    wisp_fail(WISP_EFORMAT, "%s: %s", label, context < 1 ? "a context must be at least 1 position"
                                                       : "no runtime.sections to make a longer context from");
    return NULL;
  }
  for (int i = cJSON_GetArraySize(sections) - 1; i >= 0; i--) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(sections, i), "name");
    if (cJSON_IsString(name) && !strncmp(name->valuestring, "rope.", 5) && strcmp(name->valuestring, "rope.freq"))
      cJSON_DeleteItemFromArray(sections, i); /* its bytes stay in weights.bin, unread */
  }
  cJSON_DeleteItemFromObjectCaseSensitive(rt, "maxPositions");
  cJSON_AddNumberToObject(rt, "maxPositions", context);
  char *text = cJSON_PrintUnformatted(m);
  cJSON_Delete(m);
  if (!text) wisp_fail(WISP_ENOMEM, "out of memory");
  return text;
}

char *wisp_synthetic_small_manifest(void) {
  int types[6] = {WISP_LAYER_CONV, WISP_LAYER_CONV, WISP_LAYER_ATTENTION, WISP_LAYER_CONV, WISP_LAYER_ATTENTION,
                  WISP_LAYER_CONV};
  wisp_shape sh = {.n_layers = 6, .layer_types = types, .hidden = 64, .ffn = 128, .vocab = 512, .heads = 4,
                   .kv_heads = 2, .head_dim = 16, .conv_cache = 3, .quant_bits = 4, .quant_block = 32};
  wisp_layout_options o = {.f32 = 0, .tied = 1, .down_transposed = 1, .rope_rows = 256, .rope_ext_rows = 512};
  cJSON *sections = NULL;
  uint64_t total = 0;
  if (wisp_layout_lfm2(&sh, &o, &sections, &total)) return NULL;
  cJSON *root = cJSON_CreateObject(), *rt = cJSON_AddObjectToObject(root, "runtime");
  cJSON *shape = cJSON_AddObjectToObject(rt, "shape");
  const char *names[6] = {"conv", "conv", "attention", "conv", "attention", "conv"};
  cJSON_AddItemToObject(shape, "layerTypes", cJSON_CreateStringArray(names, 6));
  cJSON_AddNumberToObject(shape, "hidden", sh.hidden);
  cJSON_AddNumberToObject(shape, "ffn", sh.ffn);
  cJSON_AddNumberToObject(shape, "vocab", sh.vocab);
  cJSON_AddNumberToObject(shape, "heads", sh.heads);
  cJSON_AddNumberToObject(shape, "kvHeads", sh.kv_heads);
  cJSON_AddNumberToObject(shape, "headDim", sh.head_dim);
  cJSON_AddNumberToObject(shape, "convCache", sh.conv_cache);
  cJSON_AddNumberToObject(shape, "quantBits", 4);
  cJSON_AddNumberToObject(shape, "quantBlock", 32);
  cJSON_AddStringToObject(rt, "weightsUrl", "/weights.bin");
  cJSON_AddNumberToObject(rt, "weightBytes", (double)total);
  cJSON_AddItemToObject(rt, "sections", sections);
  cJSON_AddNumberToObject(rt, "maxQueries", 1);
  cJSON_AddNumberToObject(rt, "maxPositions", 512);
  cJSON_AddNumberToObject(rt, "planPosition", 256);
  cJSON_AddNumberToObject(rt, "maxTotalPositions", 512);
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  return text;
}
