/* The session tuning string (tuning.h): one table of every key, what it
 * sets and the values it takes. */
#include "backend/tuning.h"
#include "backend/tuning_fields.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

typedef enum {
  T_UINT,  /* N in [lo, hi] into a uint32_t (or int: is_int) */
  T_PAIR,  /* AxB, each in [lo, hi], into two uint32_t */
  T_OFF,   /* 0 (sets the int to 1: a switch turned off) or 1 (leaves it 0) */
  T_ON,    /* 1 sets the int to 1, 0 leaves it 0 */
  T_SPECIAL
} kind;

/* A row of the table: the key, how its value is read, where it goes in
 * wisp_tuning, its default, and two marks:
 * - `def`: the value the backend takes when the key is not given (filled
 *   into a zero field by wisp_tuning_fill_defaults; all 0: no number, the
 *   backend decides by the device, the matrix or the plan, as the docs say);
 * - `plan`: the backend setting (wisp_backend_settings) the key replaces
 *   when given; wisp_tuning_over_plan applies that one rule;
 * - `caps`: the fusions (caps.h WISP_FUSE_*) the device's caps lose when
 *   the key is given (fuse=0, fuseArgmax=0): wisp_tuning_over_caps, before
 *   the plan is resolved;
 * - `test`: a key for tests only (a path forced, a fault injected), left out
 *   of every listing (wisp_tuning_list).
 * Apart from dawnToggles (opening the device: wisp_tuning_device_request),
 * a key reaches the backend only at configure, in the settings object. */
typedef struct {
  const char *key;
  kind k;
  size_t off, off2; /* offsetof into wisp_tuning */
  unsigned lo, hi;
  int is_int;
  const char *values; /* for the error message */
  unsigned def[5];
  size_t plan, plan2; /* 1 + offsetof into wisp_backend_settings; 0: none */
  uint32_t caps;      /* fusions the caps lose when the key is given */
  int test;
} entry;

#define W(f) offsetof(wisp_tuning, webgpu.f)
#define T(f) offsetof(wisp_tuning, f)
#define P(f) (1 + offsetof(wisp_backend_settings, f))
#define TEST_KEY .test = 1
#define NO_DEFAULT .def = {0}

static const entry k_keys[] = {
    {"prefillChunk", T_UINT, T(prefill_chunk), 0, 1, 4096, 1, "1..4096", NO_DEFAULT},
    {"decodeKick", T_UINT, T(decode_kick), 0, 1, 1 << 20, 1, "a positive number", NO_DEFAULT},
    /* a caps key too: the caps lose has_avx2, so the plan picks the scalar variants */
    {"cpuScalar", T_ON, T(cpu_scalar), 0, 0, 0, 1, "0 or 1", NO_DEFAULT},
    {"kvGrow", T_OFF, T(kv_fixed), 0, 0, 0, 1, "0 or 1", NO_DEFAULT},
    /* webgpu: paths on and off */
    {"persist", T_SPECIAL, W(persist), 0, 0, 0, 1, "0 or 1", NO_DEFAULT},
    {"fuse", T_OFF, W(no_fuse), 0, 0, 0, 1, "0 or 1", NO_DEFAULT, .caps = ~0u},
    {"fuseArgmax", T_OFF, W(no_fuse_argmax), 0, 0, 0, 1, "0 or 1", NO_DEFAULT, .caps = WISP_FUSE_HEAD_ARGMAX},
    {"xstage", T_OFF, W(no_xstage), 0, 0, 0, 1, "0 or 1", NO_DEFAULT},
    {"rowsShared", T_OFF, W(no_rows_shared), 0, 0, 0, 1, "0 or 1", NO_DEFAULT},
    {"rowsQ4K", T_OFF, W(no_rows_q4k), 0, 0, 0, 1, "0 or 1", NO_DEFAULT},
    {"rowsStage", T_ON, W(rows_stage_always), 0, 0, 0, 1, "0 or 1", NO_DEFAULT},
    /* 1: attn_prefill.wgsl, 2: attn_flash_tiled.wgsl (subgroups; 1.1-1.5x attn_flash.wgsl
     * in prefills of 512-4,096 tokens on the H200: bench/results/h200-20261205), else
     * attn_flash.wgsl */
    {"attnPrefill", T_UINT, W(attn_prefill), 0, 0, 2, 1, "0, 1 or 2", .def = {2}},
    /* query rows a lane group of attn_flash_tiled.wgsl takes: 2 reads each K and V
     * vec4 once for two rows. Unset: 2 for head dims of 256 (H100, 4,096-token
     * prefills: 1.02-1.05x, bench/results/h100-prefill-20261206/), else 1 (head
     * dim 64, 4,096 tokens: two rows measured 0.91-0.92x of one in the kernel's
     * earlier form, bench/results/h100-seedfix-20261206/) */
    {"attnRows", T_UINT, W(attn_rows), 0, 1, 2, 1, "1 or 2", NO_DEFAULT},
    /* kv=f16 turns f16 caches on over the plan's f32; kv=f32 leaves the plan's choice */
    {"kv", T_SPECIAL, W(kv_f16), 0, 0, 0, 1, "f32 or f16", NO_DEFAULT, .plan = P(kv_f16)},
    {"prefetch", T_SPECIAL, W(prefetch), 0, 0, 0, 1, "0 or 1", NO_DEFAULT},
    {"i8", T_SPECIAL, W(i8_mode), 0, 0, 0, 1, "0 or 1", NO_DEFAULT},
    {"i8Fuseq", T_ON, W(i8_fuseq), 0, 0, 0, 1, "0 or 1", NO_DEFAULT},
    /* webgpu: geometry */
    {"matvec", T_PAIR, W(matvec_wg), W(matvec_rows), 1, 1024, 0, "WGxROWS", .def = {128, 4}, .plan = P(matvec_wg), .plan2 = P(matvec_rows)},
    /* the head: 34 vs 43 us at 16 rows on the H200 (seed shape) */
    {"matvecBigRows", T_UINT, W(matvec_big_rows), 0, 1, 16, 0, "1..16", .def = {8}},
    /* no default: wgpu_products_tiled.c picks the tile by the product's size */
    {"matmul", T_PAIR, W(matmul_tm), W(matmul_tn), 4, 256, 0, "TMxTN", NO_DEFAULT},
    {"matmulTile", T_PAIR, W(matmul_rm), W(matmul_rn), 1, 8, 0, "RMxRN", NO_DEFAULT},
    {"attnSplits", T_UINT, W(attn_max_splits), 0, 1, 1024, 0, "1..1024", .def = {32}, .plan = P(flash_blocks)},
    /* past attnSplits: a split per TILES 32-key tiles, up to MOST (at or below attnSplits: off) */
    {"attnSplitsLong", T_PAIR, W(attn_long_tiles), W(attn_long_most), 1, 1024, 0, "TILESxMOST", .def = {4, 256}},
    /* one-token attention over KEYS or more keys by attn_decode_long.wgsl, split for about
     * WORKGROUPS workgroups (KEYS 0: never). H100, op by op (persist=0), against attn_decode:
     * seed shape at depth 8,192 829 -> 928 tok/s, 32,768 469 -> 658; the 0.8B gated hybrid 461 -> 471,
     * 260 -> 324 (bench/results/h100-session-20261206/depth.txt); at 4,096 (beside a compiler, so
     * noisy) seed 821 / 878 -> 846 / 1,045, the hybrid 336 / 392 -> 362 / 359
     * (bench/results/h100-attn-long-20261206-2/threshold.txt). Below 4,096 not measured */
    {"attnLong", T_SPECIAL, W(attn_decode_long_min), W(attn_decode_long_wgs), 0, 1u << 30, 0,
     "KEYS or KEYSxWORKGROUPS (0: never)", .def = {4096, 1024}},
    {"headChunks", T_UINT, W(head_chunks), 0, 1, 256, 0, "1..256", NO_DEFAULT},
    {"rowsNt", T_UINT, W(rows_nt), 0, 1, 64, 0, "1..64", .def = {64}},
    /* the batched step's integer product (matvec_i8_rows.wgsl) for steps of
     * MIN..MAX rows. H100, seq_probe, against the paths before it: S = 1
     * 1.52x (seed shape) / 1.14x / 0.94x (the 0.8B / 2B gated hybrids), S = 8
     * 1.27-1.68x, S = 16 1.06-1.38x, S = 24 0.90-1.02x, S = 32 0.91-0.98x:
     * up to 16 (bench/results/h100-rows-i8-20261206/) */
    {"rowsI8", T_SPECIAL, W(rows_i8_min), W(rows_i8_max), 0, 64, 0, "MAX or MINxMAX, 1..64 (0: never)", .def = {1, 16}},
    {"rowsI8Rpl", T_UINT, W(rows_i8_rpl), 0, 1, 8, 0, "1..8", .def = {2}},
    {"rowsI8Fuse", T_OFF, W(no_rows_i8_fuse), 0, 0, 0, 1, "0 or 1", NO_DEFAULT},
    {"rowsPrefill", T_UINT, W(rows_prefill), 0, 0, 64, 0, "0..64 (0: never)", NO_DEFAULT},
    {"dnSlice", T_SPECIAL, W(dn_cols), W(dn_groups), 1, 1024, 0, "COLS or COLSxGROUPS (powers of two)", .def = {16, 0}},
    /* the chunked Gated DeltaNet for calls of this many tokens or more (wgpu_deltanet_chunked.c) */
    {"dnChunkMin", T_UINT, W(dn_chunk_min), 0, 1, 1u << 30, 0, "a positive number", .def = {16}},
    {"dnChunkCols", T_UINT, W(dn_chunk_cols), 0, 4, 32, 0, "4, 8, 16 or 32", .def = {16}},
    {"dnPrepShared", T_OFF, W(no_dn_prep_shared), 0, 0, 0, 1, "0 or 1", NO_DEFAULT},
    {"dnChunkUnroll", T_UINT, W(dn_chunk_unroll), 0, 1, 4, 1, "1..4", .def = {4}},
    {"q4kSbCols", T_SPECIAL, W(q4k_sb_cols), 0, 0, 1 << 20, 1, "a number of columns (0: never)", NO_DEFAULT},
    /* 2 rows a lane group from here: faster on the H200 for the 0.8B and 2B hybrids */
    {"q4kRows2Rows", T_UINT, W(q4k_rows2_rows), 0, 1, 1u << 30, 0, "a positive number", .def = {2048}},
    {"q4kLg", T_UINT, W(q4k_lg), 0, 1, 256, 0, "1..256", NO_DEFAULT},
    {"q4kMatvec", T_PAIR, W(q4k_mv_wg), W(q4k_mv_rows), 1, 1024, 0, "WGxROWS", .def = {128, 0}},
    {"q4kFused", T_PAIR, W(q4k_fused_cols), W(q4k_fused_tpc), 1, 1024, 0, "COLSxTPC", NO_DEFAULT},
    {"i8MinN", T_UINT, W(i8_min_n), 0, 1, 1 << 20, 0, "a positive number", .def = {2}},
    /* 64 tokens a tile (half for fewer than 128 tokens, wgpu_products_i8.c): H100,
     * three Q4 / Q4_K models (hidden 1,024 and 2,048), prefill 512-4,096 against
     * 64x32x4x4x2 in one call: 1.01-1.31x (bench/results/h100-seedfix-20261206/receipt) */
    {"matmulI8", T_SPECIAL, W(i8_geometry), 0, 1, 1024, 0, "TMxTNxRMxRNxKB", .def = {64, 64, 4, 4, 2}},
    /* webgpu: the persistent decode */
    {"persistGrid", T_UINT, W(persist_grid), 0, 1, 1024, 0, "1..1024", NO_DEFAULT},
    {"persistSplits", T_UINT, W(persist_splits), 0, 1, 64, 0, "1..64", NO_DEFAULT},
    {"persistMinSteps", T_UINT, W(persist_min_steps), 0, 1, 1 << 20, 0, "a positive number", NO_DEFAULT},
    /* no limit: with the streamed attention (persistOpt bit 256) the
     * persistent decode is the faster at every depth measured (H100, depth
     * 32,768: seed shape 1,073 tok/s against 680 op by op, the 0.8B gated hybrid
     * 561 against 336; bench/results/h100-stream-20261206/). N: past N keys
     * op by op */
    {"persistMaxKeys", T_UINT, W(persist_max_keys), 0, 0, 1u << 30, 0, "a number of keys (0: no limit)", .def = {0}},
    {"persistRp", T_SPECIAL, W(persist_rp), 0, 0, 0, 0, "1, 2 or 4", NO_DEFAULT},
    {"persistSplit", T_UINT, W(persist_split), 0, 1, 1, 0, "1", NO_DEFAULT, TEST_KEY},
    /* persist.wgsl's OPT bits 1 + 8: measured best on the seed shape; 64: the
     * attention's 256-key chunks where a split holds 64 keys or more (bit 16
     * at every depth from 2,048 on the H200: seed 1,303 -> 1,807 tok/s at
     * 2,048, the 0.8B gated hybrid +2 / +4 / +9 % at 2,048 / 8,192 / 32,768;
     * bench/results/h200-20261205/attn-long); 256: a task's keys streamed
     * (attn_stream; H100, seed shape at 8,192: 1,098-1,122 -> 1,617-1,670
     * tok/s, the 0.8B gated hybrid 473-479 -> 729-731; bench/results/h100-stream-20261206/);
     * 512: its value loads issued with its key loads (seed shape +3 % at
     * 8,192, +4 % at 32,768) */
    {"persistOpt", T_SPECIAL, W(persist_opt), 0, 0, 1023, 0, "0..1023", .def = {969}},
    {"persistFail", T_UINT, W(persist_fail), 0, 1, 1 << 20, 0, "a positive number (a run, from 1)", NO_DEFAULT, TEST_KEY},
    /* timing probes only: the tokens are wrong (bench/probes-h100.sh phases) */
    {"persistSkip", T_UINT, W(persist_skip), 0, 1, 1023, 0, "1..1023 (bit 1 << work kind)", NO_DEFAULT, TEST_KEY},
    /* webgpu: the device */
    {"dawnToggles", T_SPECIAL, W(toggles), 0, 0, 0, 0, "a:b:... (Dawn toggle names)", NO_DEFAULT},
};
#define N_KEYS (sizeof k_keys / sizeof k_keys[0])
_Static_assert(N_KEYS <= 64, "wisp_wgpu_backend_opts.given has a bit a key");

/* A whole decimal number in [lo, hi]. */
static int number(const char *s, unsigned lo, unsigned hi, unsigned *out) {
  char *end;
  if (!*s || *s == '-' || *s == '+') return 0;
  unsigned long v = strtoul(s, &end, 10);
  if (*end || v < lo || v > hi) return 0;
  *out = (unsigned)v;
  return 1;
}

/* "AxBx..." with n numbers, each in [lo, hi]. */
static int numbers(const char *s, int n, unsigned lo, unsigned hi, unsigned *out) {
  char buf[64];
  if (strlen(s) >= sizeof buf) return 0;
  snprintf(buf, sizeof buf, "%s", s);
  char *p = buf;
  for (int i = 0; i < n; i++) {
    char *x = strchr(p, 'x');
    if ((x != NULL) != (i + 1 < n)) return 0;
    if (x) *x = 0;
    if (!number(p, lo, hi, &out[i])) return 0;
    p = x ? x + 1 : p;
  }
  return 1;
}

static int pow2(unsigned x) { return x && !(x & (x - 1)); }

/* The keys whose values are not a plain number, pair or switch. */
static int special(const entry *e, const char *v, wisp_tuning *t, char *store) {
  wisp_wgpu_backend_opts *o = &t->webgpu;
  unsigned n[5];
  if (!strcmp(e->key, "persist")) {
    if (strcmp(v, "0") && strcmp(v, "1")) return 0;
    o->persist = v[0] == '1' ? 1 : -1;
  } else if (!strcmp(e->key, "kv")) {
    if (strcmp(v, "f16") && strcmp(v, "f32")) return 0;
    o->kv_f16 = !strcmp(v, "f16");
    if (!o->kv_f16) return 2; /* f32: nothing given (the plan's choice stays) */
  } else if (!strcmp(e->key, "prefetch")) {
    if (strcmp(v, "0") && strcmp(v, "1")) return 0;
    o->prefetch = v[0] == '1' ? 1 : -1;
  } else if (!strcmp(e->key, "i8")) {
    if (strcmp(v, "0") && strcmp(v, "1")) return 0;
    o->i8_mode = v[0] == '1' ? 2 : 3;
  } else if (!strcmp(e->key, "dnSlice")) {
    if (numbers(v, 2, 1, 1024, n) && pow2(n[0]) && pow2(n[1])) o->dn_cols = n[0], o->dn_groups = n[1];
    else if (number(v, 1, 1024, n) && pow2(n[0])) o->dn_cols = n[0], o->dn_groups = 0;
    else return 0;
  } else if (!strcmp(e->key, "q4kSbCols")) {
    if (!number(v, 0, e->hi, n)) return 0;
    o->q4k_sb_cols = n[0] ? (int)n[0] : -1;
  } else if (!strcmp(e->key, "matmulI8")) {
    if (!numbers(v, 5, e->lo, e->hi, o->i8_geometry)) return 0;
  } else if (!strcmp(e->key, "persistRp")) {
    if (!number(v, 1, 4, n) || n[0] == 3) return 0;
    o->persist_rp = n[0];
  } else if (!strcmp(e->key, "persistOpt")) {
    if (!number(v, 0, e->hi, n)) return 0;
    o->persist_opt = n[0];
  } else if (!strcmp(e->key, "attnLong")) { /* KEYS alone keeps the default workgroups */
    if (numbers(v, 2, e->lo, e->hi, n)) o->attn_decode_long_min = n[0], o->attn_decode_long_wgs = n[1];
    else if (number(v, e->lo, e->hi, n)) o->attn_decode_long_min = n[0], o->attn_decode_long_wgs = e->def[1];
    else return 0;
  } else if (!strcmp(e->key, "rowsI8")) { /* MAX alone keeps the default MIN */
    if (numbers(v, 2, 1, e->hi, n) && n[0] <= n[1]) o->rows_i8_min = n[0], o->rows_i8_max = n[1];
    else if (number(v, e->lo, e->hi, n)) o->rows_i8_min = e->def[0], o->rows_i8_max = n[0];
    else return 0;
  } else if (!strcmp(e->key, "dawnToggles")) {
    if (!*v || strchr(v, ' ')) return 0;
    o->toggles = store; /* the copy kept in the wisp_tuning */
  }
  return 1;
}

static wisp_status set(wisp_tuning *t, const char *key, const char *v) {
  for (size_t i = 0; i < N_KEYS; i++) {
    const entry *e = &k_keys[i];
    if (strcmp(e->key, key)) continue;
    char *base = (char *)t;
    unsigned n[2];
    int ok = 1;
    switch (e->k) {
      case T_UINT:
        ok = number(v, e->lo, e->hi, n);
        if (ok && e->is_int) *(int *)(base + e->off) = (int)n[0];
        else if (ok) *(uint32_t *)(base + e->off) = n[0];
        break;
      case T_PAIR:
        ok = numbers(v, 2, e->lo, e->hi, n);
        if (ok) *(uint32_t *)(base + e->off) = n[0], *(uint32_t *)(base + e->off2) = n[1];
        break;
      case T_OFF:
      case T_ON:
        ok = !strcmp(v, "0") || !strcmp(v, "1");
        if (ok) *(int *)(base + e->off) = e->k == T_OFF ? v[0] == '0' : v[0] == '1';
        break;
      case T_SPECIAL:
        if (!strcmp(key, "dawnToggles")) snprintf(t->toggles, sizeof t->toggles, "%s", v);
        ok = special(e, v, t, t->toggles);
        break;
    }
    if (!ok) return wisp_fail(WISP_EINVAL, "tuning: %s=%s: expected %s", key, v, e->values);
    if (ok == 1) t->webgpu.given |= 1ull << i;
    return WISP_OK;
  }
  char keys[1024];
  wisp_tuning_list(keys, sizeof keys);
  return wisp_fail(WISP_EINVAL, "tuning: unknown key '%s' (keys: %s; docs/configuration.md)", key, keys);
}

wisp_status wisp_tuning_parse(const char *text, wisp_tuning *out) {
  memset(out, 0, sizeof *out);
  if (!text || !*text) return WISP_OK;
  char buf[1024];
  if (strlen(text) >= sizeof buf) return wisp_fail(WISP_EINVAL, "tuning: longer than %zu characters", sizeof buf - 1);
  snprintf(buf, sizeof buf, "%s", text);
  for (char *save = NULL, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(item, '=');
    if (!eq || eq == item) return wisp_fail(WISP_EINVAL, "tuning: '%s' is not key=value", item);
    *eq = 0;
    wisp_status st = set(out, item, eq + 1);
    if (st) return st;
  }
  return WISP_OK;
}

wisp_status wisp_tuning_new(const char *text, wisp_tuning **out) {
  *out = malloc(sizeof **out);
  if (!*out) return wisp_fail(WISP_ENOMEM, "out of memory");
  wisp_status st = wisp_tuning_parse(text, *out);
  if (st) {
    free(*out);
    *out = NULL;
  }
  return st;
}

void wisp_tuning_free(wisp_tuning *t) { free(t); }

void wisp_tuning_session(const wisp_tuning *t, wisp_tuning_session_keys *out) {
  out->prefill_chunk = t->prefill_chunk;
  out->decode_kick = t->decode_kick;
  out->kv_fixed = t->kv_fixed;
}

/* Values the key's default writes: matmulI8's five, a pair's two, else one. */
static int n_values(const entry *e) { return !strcmp(e->key, "matmulI8") ? 5 : e->off2 ? 2 : 1; }
static uint32_t *value_at(char *base, const entry *e, int j) {
  return e->off2 ? (uint32_t *)(base + (j ? e->off2 : e->off)) : (uint32_t *)(base + e->off) + j;
}

void wisp_tuning_fill_defaults(wisp_wgpu_backend_opts *o) {
  wisp_tuning t;
  memset(&t, 0, sizeof t);
  t.webgpu = *o;
  char *base = (char *)&t;
  for (size_t i = 0; i < N_KEYS; i++) {
    const entry *e = &k_keys[i];
    if (o->given >> i & 1) continue;
    for (int j = 0; j < n_values(e); j++)
      if (!*value_at(base, e, j)) *value_at(base, e, j) = e->def[j];
  }
  *o = t.webgpu;
}

void wisp_tuning_default_of(const char *key, uint32_t out[5]) {
  memset(out, 0, 5 * sizeof *out);
  for (size_t i = 0; i < N_KEYS; i++)
    if (!strcmp(k_keys[i].key, key)) memcpy(out, k_keys[i].def, sizeof k_keys[i].def);
}

int wisp_tuning_given(const wisp_wgpu_backend_opts *o, const char *key) {
  for (size_t i = 0; i < N_KEYS; i++)
    if (!strcmp(k_keys[i].key, key)) return (int)(o->given >> i & 1);
  return 0;
}

/* The one rule between the two: a key given in the tuning string replaces
 * the plan's value of the setting it names (a sweep measures the geometry
 * it gives, not the plan's). */
void wisp_tuning_over_plan(const wisp_tuning *t, wisp_backend_settings *s) {
  const char *base = (const char *)t;
  for (size_t i = 0; i < N_KEYS; i++) {
    const entry *e = &k_keys[i];
    if (!e->plan || !(t->webgpu.given >> i & 1)) continue;
    *(int *)((char *)s + e->plan - 1) = (int)*(const uint32_t *)(base + e->off);
    if (e->plan2) *(int *)((char *)s + e->plan2 - 1) = (int)*(const uint32_t *)(base + e->off2);
  }
}

void wisp_tuning_over_caps(const wisp_tuning *t, wisp_device_caps *caps) {
  for (size_t i = 0; i < N_KEYS; i++) {
    const entry *e = &k_keys[i];
    /* a switch given as 1 (its field 0) leaves the caps as they are */
    if (e->caps && (t->webgpu.given >> i & 1) && *(const int *)((const char *)t + e->off)) caps->fusions &= ~e->caps;
  }
  if (t->cpu_scalar) caps->has_avx2 = 0; /* the cpu backend's scalar kernels (configure) */
}

void wisp_tuning_device_request(const wisp_tuning *t, wisp_device_request *out) {
  out->dawn_toggles = t->webgpu.toggles;
}

const wisp_wgpu_backend_opts *wisp_tuning_webgpu(const wisp_tuning *t) { return &t->webgpu; }
int wisp_tuning_cpu_scalar(const wisp_tuning *t) { return t->cpu_scalar; }

void wisp_tuning_list(char *out, size_t cap) {
  size_t n = 0;
  out[0] = 0;
  for (size_t i = 0; i < N_KEYS && n < cap; i++) {
    if (k_keys[i].test) continue;
    int w = snprintf(out + n, cap - n, "%s%s", n ? ", " : "", k_keys[i].key);
    if (w < 0) break;
    n += (size_t)w;
  }
}

int wisp_tuning_key_is_test(const char *key) {
  for (size_t i = 0; i < N_KEYS; i++)
    if (!strcmp(k_keys[i].key, key)) return k_keys[i].test;
  return -1;
}
