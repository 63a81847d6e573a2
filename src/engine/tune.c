/* The tuner (tune.h): the sweep list from the plan and the registry, the
 * measurements on a bench device (backend/factory.h, wisp_bench_*), the
 * receipt, and this device's entry written into manifest.json. */
#include "engine/tune.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/factory.h"
#include "backend/tuning.h"
#include "engine/internal.h"
#include "engine/plan_apply.h"
#include "engine/session.h"
#include "engine/tune_accept.h"
#include "plan/pjson.h"
#include "plan/registry.h"
#include "plan/tuned.h"
#include "util/err.h"
#include "util/file.h"
#include "util/target.h"

#define MAX_CLASSES 48
#define MAX_CANDS 32
#define MAX_ROUNDS 16

typedef enum { K_MATVEC, K_PREFILL, K_ATTN } class_kind;
static const char *const k_kind_name[] = {"matvec", "prefill", "attn"};
/* A class's name: KIND:SHAPE, the integer prefill product "prefill_i8:SHAPE". */
static const char *kind_label(class_kind k, int i8) { return k == K_PREFILL && i8 ? "prefill_i8" : k_kind_name[k]; }

typedef struct {
  unsigned v[5]; /* matvec: WG, ROWS; prefill f32: TM, TN; prefill i8: TM TN RM RN KB; attn: blocks */
  char label[32];
  int is_default;
  /* results */
  double samples[MAX_ROUNDS];
  int rounds, reps;
  double median_ns, spread;
  char status[128];
} cand;

typedef struct {
  class_kind kind;
  char name[64];      /* "matvec:attn_qkv", "prefill:mlp_down", "attn:1024" */
  char shape[32];     /* "attn_qkv" */
  char section[32];   /* "attn.qkv" */
  int layer;          /* the first layer with it (-1: the epilogue's head) */
  int rows, cols;
  char variant[72];   /* the plan's variant */
  int subgroups;      /* the variant requires subgroups */
  int i8;             /* prefill: the integer product (TMxTNxRMxRNxKB) */
  int positions;      /* attn: the depth */
  int tokens;         /* prefill: tokens a product */
  int weight;         /* layers that run this product (the plan's groups) */
  int n;
  cand c[MAX_CANDS];
  int best;           /* index of the chosen candidate, -1 none */
} tclass;

typedef struct {
  const wisp_tune_options *o;
  wisp_model *m;
  wisp_model_shape shape;
  wisp_bench_device *dev;
  wisp_device_caps caps;
  int timestamps;
  int n;
  tclass cl[MAX_CLASSES];
  int total, done;
  double t0;
  int out_of_budget;
} tuner;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the sweep list ---------------------------------------------------- */

static int has_override(const wisp_variant *v, const char *a, const char *b) {
  const wisp_meta *m = v ? wisp_variant_meta(v, "overrides") : NULL;
  return m && m->type == WISP_META_STR && strstr(m->str, a) && strstr(m->str, b);
}

static int requires_subgroups(const wisp_variant *v) {
  for (int i = 0; v && i < v->n_requires; i++)
    if (!strcmp(v->requires[i], "subgroups")) return 1;
  return 0;
}

static void add_cand(tclass *c, const unsigned *v, int nv, int is_default) {
  for (int i = 0; i < c->n; i++)
    if (!memcmp(c->c[i].v, v, sizeof(unsigned) * (size_t)nv)) {
      c->c[i].is_default |= is_default;
      return;
    }
  if (c->n == MAX_CANDS) return;
  cand *x = &c->c[c->n++];
  memset(x, 0, sizeof *x);
  memcpy(x->v, v, sizeof(unsigned) * (size_t)nv);
  x->is_default = is_default;
  if (nv == 2 && !v[0] && !v[1]) snprintf(x->label, sizeof x->label, "by-size"); /* matmul's own choice */
  else if (nv == 1) snprintf(x->label, sizeof x->label, "%u", v[0]);
  else if (nv == 2) snprintf(x->label, sizeof x->label, "%ux%u", v[0], v[1]);
  else snprintf(x->label, sizeof x->label, "%ux%ux%ux%ux%u", v[0], v[1], v[2], v[3], v[4]);
}

/* The default first: every class has its baseline even when the budget
 * runs out, and the rest is compared with it. */
static void default_first(tclass *c) {
  for (int i = 1; i < c->n; i++)
    if (c->c[i].is_default) {
      cand t = c->c[0];
      c->c[0] = c->c[i];
      c->c[i] = t;
      return;
    }
}

/* One-token products: WG x ROWS as matvec.wgsl takes them (ROWS <= 16 and
 * <= WG; WG within the device's limit, a multiple of the subgroup size
 * with subgroups, else a power of two). */
static void matvec_cands(tuner *T, tclass *c) {
  static const unsigned wg_full[] = {64, 128, 256, 512, 1024}, rows_full[] = {1, 2, 4, 8, 16};
  static const unsigned wg_quick[] = {64}, rows_quick[] = {4};
  const unsigned *wg = T->o->quick ? wg_quick : wg_full, *rows = T->o->quick ? rows_quick : rows_full;
  const int nwg = T->o->quick ? 1 : 5, nrows = T->o->quick ? 1 : 5;
  uint32_t def[5];
  wisp_tuning_default_of("matvec", def);
  add_cand(c, (unsigned[]){def[0], def[1]}, 2, 1);
  const unsigned lanes = T->caps.has_subgroups && T->caps.subgroup_size > 0 ? (unsigned)T->caps.subgroup_size : 1;
  for (int i = 0; i < nwg; i++)
    for (int j = 0; j < nrows; j++) {
      if (wg[i] > (unsigned)T->caps.max_workgroup_size || rows[j] > wg[i]) continue;
      if (c->subgroups ? wg[i] % lanes : (wg[i] & (wg[i] - 1))) continue;
      add_cand(c, (unsigned[]){wg[i], rows[j]}, 2, 0);
    }
  default_first(c);
}

static void prefill_cands(tuner *T, tclass *c) {
  if (c->i8) {
    uint32_t d[5];
    wisp_tuning_default_of("matmulI8", d);
    add_cand(c, (unsigned[]){d[0], d[1], d[2], d[3], d[4]}, 5, 1);
    static const unsigned g[][5] = {{64, 32, 4, 4, 2}, {64, 64, 4, 4, 2}, {32, 32, 4, 4, 2}, {128, 32, 4, 4, 2},
                                    {64, 64, 4, 8, 2}, {64, 64, 8, 4, 2}, {64, 64, 4, 4, 4}, {128, 64, 8, 4, 2}};
    const int ng = T->o->quick ? 1 : 8;
    for (int i = 0; i < ng; i++) add_cand(c, g[i], 5, 0);
  } else {
    uint32_t d[5];
    wisp_tuning_default_of("matmul", d);
    add_cand(c, (unsigned[]){d[0], d[1]}, 2, 1);
    static const unsigned g[][2] = {{32, 32}, {64, 64}, {128, 32}, {32, 64}};
    const int ng = T->o->quick ? 1 : 4;
    for (int i = 0; i < ng; i++) add_cand(c, g[i], 2, 0);
  }
  default_first(c);
}

static void attn_cands(tuner *T, tclass *c) {
  uint32_t def[5];
  wisp_tuning_default_of("attnSplits", def);
  add_cand(c, (unsigned[]){def[0]}, 1, 1);
  static const unsigned full[] = {1, 2, 4, 8, 16, 32, 64}, quick[] = {4};
  const unsigned *b = T->o->quick ? quick : full;
  for (int i = 0; i < (T->o->quick ? 1 : 7); i++) add_cand(c, &b[i], 1, 0);
  default_first(c);
}

static tclass *find_class(tuner *T, class_kind k, int i8, const char *shape) {
  char name[64];
  snprintf(name, sizeof name, "%s:%s", kind_label(k, i8), shape);
  for (int i = 0; i < T->n; i++)
    if (!strcmp(T->cl[i].name, name)) return &T->cl[i];
  return NULL;
}

static tclass *new_class(tuner *T, class_kind k, int i8, const char *shape) {
  char name[64];
  snprintf(name, sizeof name, "%s:%s", kind_label(k, i8), shape);
  if (find_class(T, k, i8, shape)) return NULL;
  if (T->n == MAX_CLASSES) return NULL;
  tclass *c = &T->cl[T->n++];
  memset(c, 0, sizeof *c);
  c->kind = k;
  c->best = -1;
  snprintf(c->name, sizeof c->name, "%s", name);
  snprintf(c->shape, sizeof c->shape, "%s", shape);
  return c;
}

/* The products of one phase of a plan that take a geometry. */
static void classes_of_phase(tuner *T, const wisp_plan *p, const wisp_registry *reg, int ph) {
  const wisp_plan_phase *P = &p->phases[ph];
  const wisp_operation *mm = wisp_registry_op(reg, "matmul");
  for (int g = -1; g <= P->n_groups; g++) {
    const wisp_plan_op *ops = g < 0 ? P->prologue : g == P->n_groups ? P->epilogue : P->groups[g].ops;
    const int n_ops = g < 0 ? P->n_prologue : g == P->n_groups ? P->n_epilogue : P->groups[g].n_ops;
    const int layer = g >= 0 && g < P->n_groups ? P->groups[g].layers[0] : -1;
    for (int i = 0; i < n_ops; i++) {
      const wisp_plan_op *op = &ops[i];
      if (strcmp(op->op, "matmul") || !op->section[0]) continue;
      const char *slash = strchr(op->kernel, '/');
      const wisp_variant *v = slash && mm ? wisp_registry_variant(mm, slash + 1) : NULL;
      const int i8 = v && has_override(v, "RM", "KB");
      if (ph == WISP_PHASE_DECODE ? !has_override(v, "WG", "ROWS") : !has_override(v, "TM", "TN")) continue;
      /* a matrix's own WG x ROWS reaches matvec.wgsl / matvec_nosg.wgsl only
       * (the Q4_K kernels take theirs from tuning q4kMatvec, for every matrix) */
      if (ph == WISP_PHASE_DECODE && (!v->wgsl || (strcmp(v->wgsl, "matvec.wgsl") && strcmp(v->wgsl, "matvec_nosg.wgsl"))))
        continue;
      char shape[32];
      snprintf(shape, sizeof shape, "%s", op->section);
      for (char *q = shape; *q; q++)
        if (*q == '.') *q = '_';
      const class_kind kind = ph == WISP_PHASE_DECODE ? K_MATVEC : K_PREFILL;
      const int layers = g >= 0 && g < P->n_groups ? P->groups[g].n_layers : 1;
      tclass *had = find_class(T, kind, ph == WISP_PHASE_PREFILL && i8, shape);
      if (had) {
        if (!strcmp(had->variant, slash + 1)) had->weight += layers;
        continue;
      }
      tclass *c = new_class(T, kind, ph == WISP_PHASE_PREFILL && i8, shape);
      if (!c) continue;
      c->weight = layers;
      snprintf(c->section, sizeof c->section, "%s", op->section);
      snprintf(c->variant, sizeof c->variant, "%s", slash + 1);
      c->layer = layer;
      c->rows = op->rows;
      c->cols = op->cols;
      c->subgroups = requires_subgroups(v);
      c->i8 = i8;
      /* a prefill product as a prompt runs it: the tokens of one forward
       * call of a one-slot session (--quick: a few, for lavapipe) */
      c->tokens = T->o->quick ? 16 : wisp_session_prefill_chunk(&T->m->graph, &T->caps, 1);
      if (ph == WISP_PHASE_DECODE) matvec_cands(T, c);
      else prefill_cands(T, c);
    }
  }
}

static int has_op(const wisp_plan *p, const char *name) {
  const wisp_plan_phase *P = &p->phases[WISP_PHASE_DECODE];
  for (int g = 0; g < P->n_groups; g++)
    for (int i = 0; i < P->groups[g].n_ops; i++)
      if (!strcmp(P->groups[g].ops[i].op, name)) return 1;
  return 0;
}

static wisp_status build_list(tuner *T) {
  wisp_registry *reg = NULL;
  wisp_registry_options ropt = {.kernels_dir = WISP_DEFAULT_KERNELS_DIR};
  wisp_status st = wisp_registry_load(WISP_DEFAULT_REGISTRY, &ropt, &reg);
  if (st) return st;
  /* the fast profile (the CLI's default) and the reference one: their
   * prefill products differ (integer, f32); decode is the same */
  const char *profiles[2] = {"throughput", "default"};
  for (int k = 0; k < (T->o->quick ? 1 : 2) && !st; k++) {
    wisp_plan *p = NULL;
    if ((st = wisp_engine_resolve_plan(T->m, &T->caps, profiles[k], NULL, &p))) break;
    classes_of_phase(T, p, reg, WISP_PHASE_DECODE);
    classes_of_phase(T, p, reg, WISP_PHASE_PREFILL);
    if (k == 0 && has_op(p, "attention")) {
      /* attention splits by context length, up to the model's maximum and
       * below the keys from which attn_decode_long runs (tuning attnLong:
       * it splits by its own rule, so flashBlocks changes nothing there) */
      static const int full[] = {256, 1024, 2048, 4096, 8192}, quick[] = {64};
      const int max = T->m->arch->max_positions(T->m->weights);
      uint32_t long_from[5];
      wisp_tuning_default_of("attnLong", long_from);
      for (int i = 0; i < (T->o->quick ? 1 : 5); i++) {
        const int pos = T->o->quick ? quick[i] : full[i];
        if (pos >= max || (long_from[0] && (uint32_t)pos + 1 >= long_from[0])) continue;
        char nm[16];
        snprintf(nm, sizeof nm, "%d", pos);
        tclass *c = new_class(T, K_ATTN, 0, nm);
        if (!c) continue;
        c->positions = pos;
        attn_cands(T, c);
      }
    }
    wisp_plan_free(p);
  }
  wisp_registry_free(reg);
  if (T->o->quick) { /* one class of each kind: a sweep of seconds on lavapipe (make test) */
    int kept = 0, seen[3] = {0, 0, 0};
    for (int i = 0; i < T->n; i++) {
      const int k = T->cl[i].kind;
      if (seen[k]++) continue;
      if (kept != i) T->cl[kept] = T->cl[i];
      kept++;
    }
    T->n = kept;
  }
  for (int i = 0; i < T->n; i++) T->total += T->cl[i].n;
  return st;
}

/* ---- measuring ----------------------------------------------------------- */

typedef struct {
  wisp_backend *be;
  wisp_matrix W;
  wisp_buf *x, *y, *k, *v, *qkv, *out;
  wisp_vector cosv, sinv;
  float *rope;
  wisp_attention_args a;
  int tokens;
  class_kind kind;
} rig;

static void record_once(rig *r) {
  if (r->kind == K_ATTN) r->be->attention(r->be, &r->a);
  else r->be->matmul(r->be, &r->W, r->x, 0, r->tokens, r->y, 0);
}

static uint32_t g_lcg = 12345u;
static float rnd(void) {
  g_lcg = g_lcg * 1664525u + 1013904223u;
  return (float)((g_lcg >> 8) & 0xffff) / 65536.0f - 0.5f;
}

static wisp_buf *random_buf(wisp_backend *be, size_t n) {
  wisp_buf *b = be->buf_new(be, n);
  if (!b) return NULL;
  float *h = malloc(sizeof(float) * n);
  if (!h) return b;
  for (size_t i = 0; i < n; i++) h[i] = rnd();
  if (be->buf_write) be->buf_write(be, b, 0, n, h);
  free(h);
  return b;
}

/* One round: reps ops recorded, then a device sync; the time of one op. */
static wisp_status round_ns(tuner *T, rig *r, int reps, double *ns) {
  const uint64_t g0 = wisp_bench_device_gpu_ns(T->dev);
  const double w0 = now_s();
  for (int i = 0; i < reps; i++) record_once(r);
  wisp_status st = r->be->sync(r->be);
  const double w1 = now_s();
  if (st) return st;
  const uint64_t g1 = wisp_bench_device_gpu_ns(T->dev);
  *ns = T->timestamps ? (double)(g1 - g0) / reps : (w1 - w0) * 1e9 / reps;
  return WISP_OK;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void summarize(cand *c) {
  double s[MAX_ROUNDS];
  memcpy(s, c->samples, sizeof(double) * (size_t)c->rounds);
  qsort(s, (size_t)c->rounds, sizeof *s, cmp_double);
  c->median_ns = c->rounds % 2 ? s[c->rounds / 2] : 0.5 * (s[c->rounds / 2 - 1] + s[c->rounds / 2]);
  c->spread = c->median_ns > 0 ? 0.5 * (s[c->rounds - 1] - s[0]) / c->median_ns : 0;
}

/* Times one candidate: a warm-up round (compiles the kernel), reps chosen
 * so that a round is long enough to time, then rounds until the spread is
 * below the difference to the best so far (or small), at most MAX_ROUNDS. */
static wisp_status measure(tuner *T, rig *r, cand *c, double best_ns) {
  double ns;
  wisp_status st = round_ns(T, r, 1, &ns);
  if (st) return st;
  const double target = T->timestamps ? 2e5 : 2e6; /* ns a round: GPU time, or wall time around a sync */
  int reps = T->o->quick ? 2 : 4;
  if (!T->o->quick) {
    if ((st = round_ns(T, r, reps, &ns))) return st;
    if (ns * reps < target) reps = (int)fmin(256, ceil(target / fmax(ns, 1.0)));
  }
  const int min_rounds = 3, max_rounds = T->o->quick ? 3 : MAX_ROUNDS;
  c->reps = reps;
  c->rounds = 0;
  snprintf(c->status, sizeof c->status, "ok");
  while (c->rounds < max_rounds) {
    if ((st = round_ns(T, r, reps, &c->samples[c->rounds]))) return st;
    c->rounds++;
    if (c->rounds < min_rounds) continue;
    summarize(c);
    if (c->spread <= 0.02) break;
    if (best_ns > 0 && fabs(c->median_ns - best_ns) / best_ns > 2 * c->spread) break;
  }
  summarize(c);
  if (c->spread > 0.02 && best_ns > 0 && fabs(c->median_ns - best_ns) / best_ns <= 2 * c->spread)
    snprintf(c->status, sizeof c->status, "ok (within the noise of the best: spread %.1f%%)", 100 * c->spread);
  return WISP_OK;
}

static void progress(tuner *T, const tclass *c, const cand *x) {
  if (!T->o->progress) return;
  const int width = 30, fill = T->total ? T->done * width / T->total : width;
  char bar[64];
  for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
  bar[width] = 0;
  fprintf(T->o->progress, "\rtune [%s] %3d/%-3d %-24.24s %-18.18s", bar, T->done, T->total, c ? c->name : "done",
          x ? x->label : "");
  if (!c) fputc('\n', T->o->progress);
  fflush(T->o->progress);
}

static void rig_free(rig *r) {
  wisp_backend *be = r->be;
  if (!be) return;
  wisp_buf *bufs[] = {r->x, r->y, r->k, r->v, r->qkv, r->out};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
    if (bufs[i]) be->buf_free(be, bufs[i]);
  free(r->rope);
  be->destroy(be);
  memset(r, 0, sizeof *r);
}

/* A geometry within the noise of the default buys nothing and may cost
 * (the default is what every test and receipt ran), so the default stays
 * unless it is beaten beyond it. */
int wisp_tune_beats_default(double best_ns, double best_spread, double default_ns, double default_spread) {
  return best_ns < default_ns * (1 - fmax(0.02, best_spread + default_spread));
}

/* A candidate with times to compare: measured, not failed or skipped. */
static int timed_ok(const cand *x) { return x->rounds && !strncmp(x->status, "ok", 2); }

/* The class's choice back to its default where the best measured is not
 * faster than the default beyond the margin. */
static void keep_default_unless_beaten(tclass *c) {
  if (c->best < 0) return;
  const cand *b = &c->c[c->best];
  for (int j = 0; j < c->n; j++)
    if (c->c[j].is_default && timed_ok(&c->c[j]) &&
        !wisp_tune_beats_default(b->median_ns, b->spread, c->c[j].median_ns, c->c[j].spread))
      c->best = j;
}

/* A backend on the bench device with this candidate's geometry, and the
 * buffers and matrix of the class. */
static wisp_status rig_make(tuner *T, const tclass *c, const cand *x, rig *r) {
  memset(r, 0, sizeof *r);
  r->kind = c->kind;
  /* The candidate's geometry as a session's tuning string gives it, through
   * the one settings object; persist=0: single products and attentions. */
  char keys[128] = "persist=0";
  /* (a geometry of 0s: the kernel's own choice, no key) */
  if (c->kind == K_PREFILL && c->i8 && x->v[0])
    snprintf(keys, sizeof keys, "persist=0,matmulI8=%ux%ux%ux%ux%u", x->v[0], x->v[1], x->v[2], x->v[3], x->v[4]);
  if (c->kind == K_PREFILL && !c->i8 && x->v[0]) snprintf(keys, sizeof keys, "persist=0,matmul=%ux%u", x->v[0], x->v[1]);
  wisp_tuning *t = NULL;
  wisp_status st = wisp_tuning_new(keys, &t);
  if (!st) st = wisp_bench_backend_new(T->dev, &r->be);
  if (!st) {
    wisp_backend_settings s;
    wisp_backend_settings_default(&s);
    if (c->kind == K_ATTN) s.flash_blocks = (int)x->v[0];
    s.tuning = t;
    if (r->be->configure) st = r->be->configure(r->be, &s);
  }
  wisp_tuning_free(t);
  if (st) return st;
  wisp_backend *be = r->be;
  if (c->kind == K_ATTN) {
    const wisp_model_shape *m = &T->shape;
    const int P = c->positions, D = m->head_dim, H = m->heads, KV = m->kv_heads;
    const size_t half = (size_t)D / 2, rows = (size_t)P + 1;
    r->rope = malloc(sizeof(float) * 2 * rows * half);
    if (!r->rope) return wisp_fail(WISP_ENOMEM, "out of memory");
    for (size_t i = 0; i < 2 * rows * half; i++) r->rope[i] = i < rows * half ? 1.0f : 0.0f; /* cos 1, sin 0 */
    r->cosv = (wisp_vector){(int)(rows * half), r->rope, NULL};
    r->sinv = (wisp_vector){(int)(rows * half), r->rope + rows * half, NULL};
    if ((st = be->prepare_vector(be, &r->cosv)) || (st = be->prepare_vector(be, &r->sinv))) return st;
    r->qkv = random_buf(be, (size_t)(H + 2 * KV) * D);
    r->k = be->kv_buf_new ? be->kv_buf_new(be, rows * KV * D) : be->buf_new(be, rows * KV * D);
    r->v = be->kv_buf_new ? be->kv_buf_new(be, rows * KV * D) : be->buf_new(be, rows * KV * D);
    r->out = be->buf_new(be, (size_t)H * D);
    if (!r->qkv || !r->k || !r->v || !r->out) return wisp_fail(WISP_ENOMEM, "out of device memory for attention at %d", P);
    r->a = (wisp_attention_args){.qkv = r->qkv, .n = 1, .pos0 = P, .heads = H, .kv_heads = KV, .head_dim = D,
                                 .eps = 1e-6f, .rope_cos = &r->cosv, .rope_sin = &r->sinv, .k_cache = r->k,
                                 .v_cache = r->v, .out = r->out};
    return WISP_OK;
  }
  const wisp_matrix *src = wisp_graph_matrix(&T->m->graph, c->layer, c->section);
  if (!src) return wisp_fail(WISP_EINVAL, "tune: no matrix %s at layer %d", c->section, c->layer);
  r->W = *src;
  r->W.device = NULL;
  memset(r->W.choice, 0, sizeof r->W.choice);
  const int ph = c->kind == K_MATVEC ? WISP_PHASE_DECODE : WISP_PHASE_PREFILL;
  snprintf(r->W.choice[ph].variant, sizeof r->W.choice[ph].variant, "%s", c->variant);
  if (c->kind == K_MATVEC) {
    r->W.choice[ph].workgroup_size = (int)x->v[0];
    r->W.choice[ph].rows_per_subgroup = (int)x->v[1];
  }
  if ((st = be->prepare_matrix(be, &r->W))) return st;
  r->tokens = c->kind == K_MATVEC ? 1 : c->tokens;
  r->x = random_buf(be, (size_t)r->tokens * (size_t)c->cols);
  r->y = be->buf_new(be, (size_t)r->tokens * (size_t)c->rows);
  if (!r->x || !r->y) return wisp_fail(WISP_ENOMEM, "out of device memory for %s", c->name);
  return WISP_OK;
}

static void sweep(tuner *T) {
  for (int i = 0; i < T->n; i++) {
    tclass *c = &T->cl[i];
    for (int j = 0; j < c->n; j++) {
      cand *x = &c->c[j];
      progress(T, c, x);
      T->done++;
      if (j > 0 && T->o->budget_s > 0 && now_s() - T->t0 > T->o->budget_s) {
        T->out_of_budget = 1;
        snprintf(x->status, sizeof x->status, "skipped: over the budget of %g s", T->o->budget_s);
        continue;
      }
      rig r;
      const double best = c->best >= 0 ? c->c[c->best].median_ns : 0;
      wisp_status st = rig_make(T, c, x, &r);
      if (!st) st = measure(T, &r, x, best);
      if (st) {
        snprintf(x->status, sizeof x->status, "failed: %.118s", wisp_last_error());
        x->rounds = 0;
      } else if (c->best < 0 || x->median_ns < c->c[c->best].median_ns) {
        c->best = j;
      }
      rig_free(&r);
    }
  }
  progress(T, NULL, NULL);
  for (int i = 0; i < T->n; i++) keep_default_unless_beaten(&T->cl[i]);
}

/* ---- the entry, the receipt ---------------------------------------------- */

static cJSON *geometry_json(const tuner *T, const tclass *c, const cand *x) {
  cJSON *g = cJSON_CreateObject();
  cJSON_AddNumberToObject(g, "workgroupSize", x->v[0]);
  if (c->subgroups && T->caps.has_subgroups) cJSON_AddNumberToObject(g, "subgroupSize", T->caps.subgroup_size);
  cJSON_AddNumberToObject(g, "rowsPerSubgroup", x->v[1]);
  cJSON_AddNumberToObject(g, "subgroupsPerRow", 1);
  return g;
}

/* The knee: the smallest workgroup (then fewest rows) whose time is within
 * the noise of the best: past it a bigger workgroup buys nothing. */
static int knee_of(const tclass *c) {
  if (c->best < 0) return -1;
  const cand *b = &c->c[c->best];
  const double limit = b->median_ns * (1 + fmax(b->spread, 0.02));
  int k = c->best;
  for (int j = 0; j < c->n; j++) {
    const cand *x = &c->c[j];
    if (!x->rounds || x->median_ns > limit) continue;
    if (x->v[0] < c->c[k].v[0] || (x->v[0] == c->c[k].v[0] && x->v[1] < c->c[k].v[1])) k = j;
  }
  return k;
}

/* The time of tile `label` (NULL: each class's default) summed over the
 * prefill classes of kind i8, each weighted by the layers that run it, and
 * the largest spread among them; 0 unless every class measured it. */
static int tile_total(const tuner *T, int i8, const char *label, double *total, double *spread) {
  *total = *spread = 0;
  for (int i = 0; i < T->n; i++) {
    const tclass *c = &T->cl[i];
    if (c->kind != K_PREFILL || c->i8 != i8) continue;
    const cand *x = NULL;
    for (int k = 0; k < c->n && !x; k++)
      if ((label ? !strcmp(c->c[k].label, label) : c->c[k].is_default) && timed_ok(&c->c[k])) x = &c->c[k];
    if (!x) return 0;
    *total += x->median_ns * (c->weight > 0 ? c->weight : 1);
    *spread = fmax(*spread, x->spread);
  }
  return 1;
}

/* The backend runs one prefill tile for every product: the tile whose time
 * summed over the prefill classes of that kind (each weighted by the
 * layers that run it) is least, among the tiles measured in every class;
 * 0 when that is the default (nothing to write), when nothing was
 * measured, or when it does not beat the default tile beyond the noise. */
static int best_tile(const tuner *T, int i8, char *out, size_t cap) {
  const tclass *first = NULL;
  for (int i = 0; i < T->n && !first; i++)
    if (T->cl[i].kind == K_PREFILL && T->cl[i].i8 == i8) first = &T->cl[i];
  if (!first) return 0;
  int best = -1;
  double best_total = 0, best_spread = 0, total, spread;
  for (int j = 0; j < first->n; j++)
    if (tile_total(T, i8, first->c[j].label, &total, &spread) && (best < 0 || total < best_total))
      best = j, best_total = total, best_spread = spread;
  if (best < 0 || first->c[best].is_default) return 0;
  /* the chosen tile must beat the default's total beyond the noise (each
   * class's largest spread standing for the totals') */
  if (tile_total(T, i8, NULL, &total, &spread) && !wisp_tune_beats_default(best_total, best_spread, total, spread)) return 0;
  snprintf(out, cap, "%s", first->c[best].label);
  return 1;
}

static cJSON *device_json(const tuner *T) {
  cJSON *d = cJSON_CreateObject();
  cJSON_AddStringToObject(d, "vendor", T->caps.vendor);
  cJSON_AddNumberToObject(d, "vendorId", T->caps.vendor_id);
  cJSON_AddNumberToObject(d, "deviceId", T->caps.device_id);
  cJSON_AddStringToObject(d, "driver", T->caps.driver);
  cJSON_AddStringToObject(d, "name", T->caps.name);
  cJSON_AddStringToObject(d, "wisp", WISP_VERSION);
  return d;
}

static cJSON *entry_json(const tuner *T) {
  cJSON *e = cJSON_CreateObject();
  cJSON_AddItemToObject(e, "device", device_json(T));
  cJSON_AddStringToObject(e, "timing", T->timestamps ? "gpu-timestamps" : "wall");
  cJSON *cand_j = cJSON_AddObjectToObject(e, "candidate");
  cJSON *mv = cJSON_AddObjectToObject(cand_j, "matvec");
  cJSON *knee = cJSON_AddArrayToObject(e, "knee");
  cJSON *fo = cJSON_AddArrayToObject(e, "flashOptima");
  cJSON *pre = cJSON_AddArrayToObject(e, "prefill");
  int flash = 0, flash_pos = 0;
  for (int i = 0; i < T->n; i++) {
    const tclass *c = &T->cl[i];
    if (c->best < 0) continue;
    const cand *b = &c->c[c->best];
    /* a product whose default won writes nothing: neither its candidate
     * nor its knee (which the plan would take where no candidate is) */
    if (c->kind == K_MATVEC && b->is_default) continue;
    if (c->kind == K_MATVEC) {
      cJSON *s = cJSON_AddObjectToObject(mv, c->shape);
      cJSON_AddItemToObject(s, "geometry", geometry_json(T, c, b));
      cJSON_AddStringToObject(s, "variant", c->variant);
      const int k = knee_of(c);
      cJSON *kn = cJSON_CreateObject();
      cJSON_AddStringToObject(kn, "shape", c->shape);
      cJSON_AddItemToObject(kn, "geometry", geometry_json(T, c, &c->c[k]));
      cJSON_AddItemToArray(knee, kn);
    } else if (c->kind == K_ATTN) {
      cJSON *f = cJSON_CreateObject();
      cJSON_AddNumberToObject(f, "positions", c->positions);
      cJSON_AddNumberToObject(f, "blocks", b->v[0]);
      cJSON_AddItemToArray(fo, f);
      /* the plan's one flashBlocks: the optimum at the deepest context measured up to the default context */
      if (c->positions <= WISP_DEFAULT_CONTEXT && c->positions >= flash_pos) flash = (int)b->v[0], flash_pos = c->positions;
    } else {
      cJSON *p = cJSON_CreateObject();
      cJSON_AddStringToObject(p, "shape", c->shape);
      cJSON_AddStringToObject(p, "variant", c->variant);
      cJSON_AddStringToObject(p, "tile", b->label); /* TMxTN (by-size: matmul's own), or TMxTNxRMxRNxKB */
      cJSON_AddItemToArray(pre, p);
    }
  }
  if (flash) cJSON_AddNumberToObject(cand_j, "flashBlocks", flash);
  char tile[32];
  if (best_tile(T, 0, tile, sizeof tile)) cJSON_AddStringToObject(cand_j, "prefillTile", tile);
  if (best_tile(T, 1, tile, sizeof tile)) cJSON_AddStringToObject(cand_j, "prefillTileI8", tile);
  return e;
}

static cJSON *receipt_json(const tuner *T, int measured) {
  cJSON *r = cJSON_CreateObject();
  cJSON_AddStringToObject(r, "what", measured ? "wisp tune: every measurement" : "wisp tune --dry-run: what would be swept");
  cJSON_AddStringToObject(r, "model", T->o->model_dir);
  cJSON_AddItemToObject(r, "device", device_json(T));
  cJSON_AddStringToObject(r, "timing", T->timestamps ? "gpu-timestamps" : "wall (around a device sync)");
  cJSON_AddBoolToObject(r, "quick", T->o->quick);
  cJSON_AddNumberToObject(r, "budget_s", T->o->budget_s);
  if (measured) {
    cJSON_AddNumberToObject(r, "seconds", now_s() - T->t0);
    cJSON_AddBoolToObject(r, "out_of_budget", T->out_of_budget);
  }
  cJSON *cls = cJSON_AddArrayToObject(r, "classes");
  for (int i = 0; i < T->n; i++) {
    const tclass *c = &T->cl[i];
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "class", c->name);
    cJSON_AddStringToObject(j, "kind", kind_label(c->kind, c->i8));
    if (c->kind != K_ATTN) {
      cJSON_AddStringToObject(j, "shape", c->shape);
      cJSON_AddStringToObject(j, "variant", c->variant);
      cJSON_AddNumberToObject(j, "rows", c->rows);
      cJSON_AddNumberToObject(j, "cols", c->cols);
    }
    if (c->kind == K_PREFILL) cJSON_AddNumberToObject(j, "tokens", c->tokens);
    if (c->kind == K_ATTN) cJSON_AddNumberToObject(j, "positions", c->positions);
    cJSON_AddStringToObject(j, "geometry", c->kind == K_MATVEC ? "WGxROWS" : c->kind == K_ATTN ? "blocks"
                                           : c->i8 ? "TMxTNxRMxRNxKB" : "TMxTN");
    cJSON *cs = cJSON_AddArrayToObject(j, "candidates");
    const cand *def = NULL;
    for (int k = 0; k < c->n; k++) {
      const cand *x = &c->c[k];
      if (x->is_default) def = x;
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "geometry", x->label);
      cJSON_AddBoolToObject(o, "default", x->is_default);
      if (measured) {
        cJSON_AddStringToObject(o, "status", x->status[0] ? x->status : "not run");
        if (x->rounds) {
          cJSON_AddNumberToObject(o, "median_ns", x->median_ns);
          cJSON_AddNumberToObject(o, "spread", x->spread);
          cJSON_AddNumberToObject(o, "rounds", x->rounds);
          cJSON_AddNumberToObject(o, "reps", x->reps);
          cJSON *s = cJSON_AddArrayToObject(o, "samples_ns");
          for (int q = 0; q < x->rounds; q++) cJSON_AddItemToArray(s, cJSON_CreateNumber(x->samples[q]));
        }
      }
      cJSON_AddItemToArray(cs, o);
    }
    if (measured && c->best >= 0) {
      const cand *b = &c->c[c->best];
      cJSON_AddStringToObject(j, "chosen", b->label);
      cJSON_AddNumberToObject(j, "chosen_ns", b->median_ns);
      if (def && def->rounds) {
        cJSON_AddStringToObject(j, "default", def->label);
        cJSON_AddNumberToObject(j, "default_ns", def->median_ns);
        cJSON_AddNumberToObject(j, "speedup", def->median_ns / b->median_ns);
      }
      if (c->kind == K_MATVEC) cJSON_AddStringToObject(j, "knee", c->c[knee_of(c)].label);
    }
    cJSON_AddItemToArray(cls, j);
  }
  return r;
}

/* Replaces this device's entry for this wisp version (other devices' and
 * other versions' stay) and writes manifest.json in place atomically: a
 * temporary beside it, synced, renamed over it, under the target's lock. */
static wisp_status write_manifest(const tuner *T, cJSON *entry, char *path, size_t cap) {
  wisp_path(path, cap, "%s/manifest.json", T->o->model_dir);
  size_t len = 0;
  char *text = wisp_slurp(path, &len);
  if (!text) return WISP_EIO; /* wisp_slurp said why */
  cJSON *man = NULL;
  wisp_status st = wisp_json_parse(path, text, len, &man);
  free(text);
  if (st) return st;
  cJSON *tuned = cJSON_GetObjectItemCaseSensitive(man, "tuned");
  if (!tuned) tuned = cJSON_AddArrayToObject(man, "tuned");
  if (!cJSON_IsArray(tuned)) {
    cJSON_Delete(man);
    return wisp_fail(WISP_EFORMAT, "%s: tuned: expected an array", path);
  }
  for (cJSON *e = tuned->child, *next; e; e = next) {
    next = e->next;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(e, "device");
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(d, "wisp");
    if (wisp_tuned_same_device(e, &T->caps) && cJSON_IsString(w) && !strcmp(w->valuestring, WISP_VERSION))
      cJSON_Delete(cJSON_DetachItemViaPointer(tuned, e));
  }
  cJSON_AddItemToArray(tuned, cJSON_Duplicate(entry, 1));
  char *out = cJSON_Print(man);
  cJSON_Delete(man);
  if (!out) return wisp_fail(WISP_ENOMEM, "out of memory");
  if (!(st = wisp_target_lock(path))) {
    const size_t n = strlen(out);
    out[n] = 0;
    char *nl = malloc(n + 2);
    if (nl) {
      memcpy(nl, out, n);
      nl[n] = '\n';
      st = wisp_write_file_atomic(path, nl, n + 1);
      free(nl);
    } else {
      st = wisp_fail(WISP_ENOMEM, "out of memory");
    }
    wisp_target_unlock(path);
  }
  cJSON_free(out);
  return st;
}

static cJSON *ab_json(const wisp_tune_ab *ab, const char *profile, const char *kept) {
  cJSON *a = cJSON_CreateObject();
  cJSON_AddStringToObject(a, "what", "sessions with and without the entry, alternated rounds");
  cJSON_AddStringToObject(a, "profile", profile);
  cJSON_AddNumberToObject(a, "rounds", ab->rounds);
  cJSON_AddNumberToObject(a, "prefillTokens", ab->prefill_tokens);
  cJSON_AddNumberToObject(a, "prefillDefault", ab->prefill_tps[0]);
  cJSON_AddNumberToObject(a, "prefillTuned", ab->prefill_tps[1]);
  cJSON_AddNumberToObject(a, "decodeDefault", ab->decode_tps[0]);
  cJSON_AddNumberToObject(a, "decodeTuned", ab->decode_tps[1]);
  cJSON_AddNumberToObject(a, "decodeSpreadDefault", ab->decode_spread[0]);
  cJSON_AddStringToObject(a, "kept", kept);
  return a;
}

/* Tuned is never slower: the entry against the default end to end. Each
 * part of the entry must pay for itself where it acts (wisp_tune_drop_losers);
 * what loses is taken out and the rest measured again, twice at most, and
 * if a part still loses every choice goes (the plan then runs its
 * defaults; the receipt keeps what was measured). */
static wisp_status accept(tuner *T, cJSON *e) {
  wisp_tune_ab ab;
  /* the prefill of one forward call of a one-slot session, as the products were timed */
  const int chunk = wisp_session_prefill_chunk(&T->m->graph, &T->caps, 1);
  const int half = T->m->arch->max_positions(T->m->weights) / 2;
  const int np = chunk < half ? chunk : half;
  if (T->o->progress) fprintf(T->o->progress, "tune: the tuned entry against the default, end to end...\n");
  wisp_status st = wisp_tune_accept(T->m, e, "throughput", np, 128, 5, &ab);
  if (st) return st;
  char kept[400] = "all", part[200];
  for (int pass = 0; pass < 2 && wisp_tune_drop_losers(e, &ab, part, sizeof part); pass++) {
    const size_t at = pass ? strlen(kept) : 0; /* the first pass replaces "all" */
    snprintf(kept + at, sizeof kept - at, "%s%s", pass ? "; then " : "all but ", part);
    if ((st = wisp_tune_accept(T->m, e, "throughput", np, 128, 5, &ab))) return st;
  }
  if (wisp_tune_drop_losers(e, &ab, NULL, 0)) { /* still slower after two passes: every choice goes */
    const wisp_tune_ab every = {.prefill_slower = 1, .decode_slower = 1};
    wisp_tune_drop_losers(e, &every, NULL, 0);
    snprintf(kept, sizeof kept, "none: the tuned choices were slower end to end; the plan runs its defaults");
  }
  cJSON *cand = cJSON_GetObjectItemCaseSensitive(e, "candidate");
  cJSON_AddItemToObject(e, "acceptance", ab_json(&ab, "throughput", kept));
  /* The f32 tile acts only under the reference profile (--profile exact),
   * which the runs above do not plan: its prefill, with and without it. */
  if (cJSON_GetObjectItemCaseSensitive(cand, "prefillTile")) {
    wisp_tune_ab ex;
    if ((st = wisp_tune_accept(T->m, e, "default", np, 16, 5, &ex))) return st;
    if (ex.prefill_slower) cJSON_DeleteItemFromObjectCaseSensitive(cand, "prefillTile");
    cJSON_AddItemToObject(e, "acceptanceExact",
                          ab_json(&ex, "exact", ex.prefill_slower ? "no f32 prefill tile (the exact prefill was slower with it)" : "all"));
  }
  return WISP_OK;
}

static void list_dry(const tuner *T) {
  FILE *f = T->o->listing ? T->o->listing : stdout;
  fprintf(f, "wisp tune --dry-run: %s on %s (0x%04x:0x%04x, driver '%s'); timing by %s\n", T->o->model_dir,
          T->caps.name, T->caps.vendor_id, T->caps.device_id, T->caps.driver,
          T->timestamps ? "GPU timestamps" : "wall time around a device sync");
  for (int i = 0; i < T->n; i++) {
    const tclass *c = &T->cl[i];
    if (c->kind == K_ATTN) fprintf(f, "  %-26s %-34s blocks:", c->name, "attention, one token");
    else {
      char what[64];
      snprintf(what, sizeof what, "%dx%d %.40s", c->rows, c->cols, c->variant);
      fprintf(f, "  %-26s %-34s %s:", c->name, what, c->kind == K_MATVEC ? "WGxROWS" : c->i8 ? "TMxTNxRMxRNxKB" : "TMxTN");
    }
    for (int j = 0; j < c->n; j++) fprintf(f, " %s%s", c->c[j].label, c->c[j].is_default ? "*" : "");
    fprintf(f, "\n");
  }
  fprintf(f, "%d shape classes, %d geometries (* the default, always measured first)\n", T->n, T->total);
}

wisp_status wisp_tune_run(const wisp_tune_options *o, cJSON **receipt) {
  if (receipt) *receipt = NULL;
  tuner *T = calloc(1, sizeof *T);
  if (!T) return wisp_fail(WISP_ENOMEM, "out of memory");
  T->o = o;
  T->t0 = now_s();
  wisp_status st = wisp_model_open(o->model_dir, &T->m);
  if (!st && T->m->artifact->gguf)
    st = wisp_fail(WISP_EINVAL, "%s is a GGUF file: tune writes into an artifact's manifest.json (wisp convert it first)",
                   o->model_dir);
  if (!st) st = T->m->arch->plan_shape(T->m->weights, &T->shape);
  if (!st) st = wisp_bench_device_open(&T->dev);
  if (!st) {
    T->timestamps = wisp_bench_device_timestamps(T->dev);
    wisp_backend *be = NULL;
    if (!(st = wisp_bench_backend_new(T->dev, &be))) {
      be->caps(be, &T->caps);
      be->destroy(be);
    }
  }
  if (!st) st = build_list(T);
  if (!st && o->dry_run) list_dry(T);
  if (!st && !o->dry_run) {
    sweep(T);
    cJSON *e = entry_json(T);
    if (!o->quick) st = accept(T, e);
    char path[1100];
    if (!o->no_write) st = write_manifest(T, e, path, sizeof path);
    if (!st && receipt) {
      *receipt = receipt_json(T, 1);
      cJSON_AddItemToObject(*receipt, "entry", e);
      e = NULL;
      if (!o->no_write) cJSON_AddStringToObject(*receipt, "manifest", path);
    }
    cJSON_Delete(e);
  } else if (!st && receipt) {
    *receipt = receipt_json(T, 0);
  }
  wisp_bench_device_close(T->dev);
  wisp_model_close(T->m);
  free(T);
  return st;
}
