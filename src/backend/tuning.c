/* The session tuning string (tuning.h): one table of every key, what it
 * sets and the values it takes. */
#include "backend/tuning.h"

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

typedef struct {
  const char *key;
  kind k;
  size_t off, off2; /* offsetof into wisp_tuning */
  unsigned lo, hi;
  int is_int;
  const char *values; /* for the error message */
} entry;

#define W(f) offsetof(wisp_tuning, webgpu.f)
#define T(f) offsetof(wisp_tuning, f)

static const entry k_keys[] = {
    {"prefillChunk", T_UINT, T(prefill_chunk), 0, 1, 4096, 1, "1..4096"},
    {"decodeKick", T_UINT, T(decode_kick), 0, 1, 1 << 20, 1, "a positive number"},
    {"cpuScalar", T_ON, T(cpu_scalar), 0, 0, 0, 1, "0 or 1"},
    {"kvGrow", T_OFF, T(kv_fixed), 0, 0, 0, 1, "0 or 1"},
    /* webgpu: paths on and off */
    {"persist", T_SPECIAL, W(persist), 0, 0, 0, 1, "0 or 1"},
    {"fuse", T_OFF, W(no_fuse), 0, 0, 0, 1, "0 or 1"},
    {"fuseArgmax", T_OFF, W(no_fuse_argmax), 0, 0, 0, 1, "0 or 1"},
    {"xstage", T_OFF, W(no_xstage), 0, 0, 0, 1, "0 or 1"},
    {"rowsShared", T_OFF, W(no_rows_shared), 0, 0, 0, 1, "0 or 1"},
    {"rowsQ4K", T_ON, W(rows_q4k), 0, 0, 0, 1, "0 or 1"},
    {"rowsStage", T_ON, W(rows_stage_always), 0, 0, 0, 1, "0 or 1"},
    {"attnPrefill", T_ON, W(attn_prefill), 0, 0, 0, 1, "0 or 1"},
    {"kv", T_SPECIAL, W(kv_f16), 0, 0, 0, 1, "f32 or f16"},
    {"prefetch", T_SPECIAL, W(prefetch), 0, 0, 0, 1, "0 or 1"},
    {"i8", T_SPECIAL, W(i8_mode), 0, 0, 0, 1, "0 or 1"},
    {"i8Fuseq", T_ON, W(i8_fuseq), 0, 0, 0, 1, "0 or 1"},
    /* webgpu: geometry */
    {"matvec", T_PAIR, W(matvec_wg), W(matvec_rows), 1, 1024, 0, "WGxROWS"},
    {"matvecBigRows", T_UINT, W(matvec_big_rows), 0, 1, 16, 0, "1..16"},
    {"matmul", T_PAIR, W(matmul_tm), W(matmul_tn), 4, 256, 0, "TMxTN"},
    {"attnSplits", T_UINT, W(attn_max_splits), 0, 1, 1024, 0, "1..1024"},
    {"headChunks", T_UINT, W(head_chunks), 0, 1, 256, 0, "1..256"},
    {"rowsNt", T_UINT, W(rows_nt), 0, 1, 8, 0, "1..8"},
    {"dnSlice", T_SPECIAL, W(dn_cols), W(dn_groups), 1, 1024, 0, "COLS or COLSxGROUPS (powers of two)"},
    {"q4kSbCols", T_SPECIAL, W(q4k_sb_cols), 0, 0, 1 << 20, 1, "a number of columns (0: never)"},
    {"q4kRows2Rows", T_UINT, W(q4k_rows2_rows), 0, 1, 1u << 30, 0, "a positive number"},
    {"q4kLg", T_UINT, W(q4k_lg), 0, 1, 256, 0, "1..256"},
    {"q4kMatvec", T_PAIR, W(q4k_mv_wg), W(q4k_mv_rows), 1, 1024, 0, "WGxROWS"},
    {"q4kFused", T_PAIR, W(q4k_fused_cols), W(q4k_fused_tpc), 1, 1024, 0, "COLSxTPC"},
    {"i8MinN", T_UINT, W(i8_min_n), 0, 1, 1 << 20, 0, "a positive number"},
    {"matmulI8", T_SPECIAL, W(i8_geometry), 0, 1, 1024, 0, "TMxTNxRMxRNxKB"},
    /* webgpu: the persistent decode */
    {"persistGrid", T_UINT, W(persist_grid), 0, 1, 1024, 0, "1..1024"},
    {"persistSplits", T_UINT, W(persist_splits), 0, 1, 16, 0, "1..16"},
    {"persistMinSteps", T_UINT, W(persist_min_steps), 0, 1, 1 << 20, 0, "a positive number"},
    {"persistRp", T_SPECIAL, W(persist_rp), 0, 0, 0, 0, "1, 2 or 4"},
    {"persistSplit", T_UINT, W(persist_split), 0, 1, 1, 0, "1"},
    {"persistOpt", T_SPECIAL, W(persist_opt), 0, 0, 255, 0, "0..255"},
    {"persistFail", T_UINT, W(persist_fail), 0, 1, 1 << 20, 0, "a positive number (a run, from 1)"},
    /* webgpu: the device */
    {"dawnToggles", T_SPECIAL, W(toggles), 0, 0, 0, 0, "a:b:... (Dawn toggle names)"},
};

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
    o->persist_opt_given = 1;
  } else if (!strcmp(e->key, "dawnToggles")) {
    if (!*v || strchr(v, ' ')) return 0;
    o->toggles = store; /* the copy kept in the wisp_tuning */
  }
  return 1;
}

static wisp_status set(wisp_tuning *t, const char *key, const char *v) {
  for (size_t i = 0; i < sizeof k_keys / sizeof k_keys[0]; i++) {
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
    /* A tuning geometry replaces the plan's own (that is what a sweep measures). */
    if (!strcmp(key, "matvec")) t->webgpu.geometry_over_plan = 1;
    if (!strcmp(key, "attnSplits")) t->webgpu.splits_over_plan = 1;
    return WISP_OK;
  }
  return wisp_fail(WISP_EINVAL, "tuning: unknown key '%s' (docs/configuration.md lists them)", key);
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
