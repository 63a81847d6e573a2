/* Jinja evaluation: runs the tree of jinja_parse.c over values of
 * jinja_value.c, with jinja2's semantics where templates can see them:
 *   - a for loop's body is a new scope each iteration (a set inside it is
 *     gone after the iteration); if bodies are not scopes;
 *   - loop.index0/index/first/last/length/revindex/revindex0/previtem/
 *     nextitem; break and continue (the loopcontrols extension);
 *   - a missing dict key or attribute is undefined (prints as nothing, is
 *     false), and using an attribute of an undefined value is an error;
 *   - set on ns.attr needs a namespace() (the immutable sandbox forbids
 *     changing anything else).
 * Every loop iteration and macro call is a step; a render fails past
 * WISP_JINJA_MAX_STEPS, past WISP_JINJA_MAX_MEMORY bytes or past
 * WISP_JINJA_MAX_OUTPUT bytes of output. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja_internal.h"
#include "util/err.h"

struct jj_frame {
  jj_frame *parent;
  const char **names;
  jv *vals;
  int n, cap;
};

struct jj_ctx {
  jj_arena a;
  jj_buf *out;     /* where text goes now (a macro call or set block renders into its own) */
  long steps;
  int depth, macro_depth;
  int loopctl;     /* 1: break, 2: continue, pending */
  int failed;
  time_t now;
  jj_frame *root;
};

enum { MAX_MACRO_DEPTH = 20 };

jj_arena *jj_ctx_arena(jj_ctx *c) { return &c->a; }
time_t jj_ctx_now(jj_ctx *c) { return c->now; }

int jj_error(jj_ctx *c, const jnode *at, const char *fmt, ...) {
  if (c->failed) return -1;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  for (char *p = msg; *p; p++) /* one line */
    if (*p == '\n' || *p == '\r') *p = ' ';
  c->failed = 1;
  if (at) wisp_fail(WISP_EFORMAT, "chat template %d:%d: %s", at->line, at->col, msg);
  else wisp_fail(WISP_EFORMAT, "chat template: %s", msg);
  return -1;
}

static int oom(jj_ctx *c, const jnode *at) {
  return jj_error(c, at, "the render needs more than %zu MiB of memory", WISP_JINJA_MAX_MEMORY >> 20);
}

int jj_step(jj_ctx *c, const jnode *at) {
  if (++c->steps > WISP_JINJA_MAX_STEPS)
    return jj_error(c, at, "more than %d loop iterations and macro calls", WISP_JINJA_MAX_STEPS);
  return 0;
}

/* ---- variables ---- */
static jv *frame_slot(jj_frame *f, const char *name) {
  for (int i = 0; i < f->n; i++)
    if (!strcmp(f->names[i], name)) return &f->vals[i];
  return NULL;
}

static int frame_set(jj_ctx *c, jj_frame *f, const char *name, jv v) {
  jv *slot = frame_slot(f, name);
  if (slot) { *slot = v; return 0; }
  if (f->n == f->cap) {
    int cap = f->cap ? 2 * f->cap : 8;
    const char **nn = jj_alloc(&c->a, (size_t)cap * sizeof *nn);
    jv *nv = jj_alloc(&c->a, (size_t)cap * sizeof *nv);
    if (!nn || !nv) return -1;
    if (f->n) { memcpy(nn, f->names, (size_t)f->n * sizeof *nn); memcpy(nv, f->vals, (size_t)f->n * sizeof *nv); }
    f->names = nn;
    f->vals = nv;
    f->cap = cap;
  }
  f->names[f->n] = name;
  f->vals[f->n++] = v;
  return 0;
}

static jj_frame *frame_new(jj_ctx *c, jj_frame *parent) {
  jj_frame *f = jj_alloc(&c->a, sizeof *f);
  if (f) f->parent = parent;
  return f;
}

static jv lookup(jj_frame *f, const char *name) {
  for (; f; f = f->parent) {
    jv *v = frame_slot(f, name);
    if (v) return *v;
  }
  jv g;
  if (!jj_global(name, strlen(name), &g)) return g;
  return jv_undef(name);
}

/* ---- expressions ---- */
static int eval(jj_ctx *c, const jnode *n, jj_frame *f, jv *out);
static int exec_body(jj_ctx *c, jnode *const *body, int n, jj_frame *f);

int jj_str(jj_ctx *c, const jnode *at, jv v, jv *out) {
  if (v.t == JV_STR) { *out = v; return 0; }
  jj_buf b = {.a = &c->a, .limit = WISP_JINJA_MAX_OUTPUT};
  jv_to_str(&b, v);
  if (b.failed) return oom(c, at);
  *out = jv_str(b.p ? b.p : "", b.n);
  return 0;
}

static int undefined_error(jj_ctx *c, const jnode *at, jv v) {
  if (v.u.s.p) return jj_error(c, at, "'%.*s' is undefined", (int)v.u.s.n, v.u.s.p);
  return jj_error(c, at, "a value is undefined");
}

static const char *undef_name(jj_ctx *c, const char *s, size_t n) { return jj_strndup(&c->a, s, n); }

/* obj.name / obj[key] without a method: a dict entry, or undefined. */
static int get_item(jj_ctx *c, const jnode *at, jv obj, jv key, jv *out) {
  switch (obj.t) {
  case JV_UNDEF: return undefined_error(c, at, obj);
  case JV_DICT: case JV_NS: {
    const jv *v = jv_dict_find(obj.u.d, key);
    *out = v ? *v : jv_undef(key.t == JV_STR ? undef_name(c, key.u.s.p, key.u.s.n) : NULL);
    return 0;
  }
  case JV_LIST: case JV_STR: {
    if (key.t != JV_INT && key.t != JV_BOOL) { *out = jv_undef(NULL); return 0; }
    long long i = key.t == JV_INT ? key.u.i : key.u.b;
    long long len = obj.t == JV_LIST ? obj.u.l->n : (long long)jv_utf8_len(obj.u.s.p, obj.u.s.n);
    if (i < 0) i += len;
    if (i < 0 || i >= len) { *out = jv_undef(NULL); return 0; }
    if (obj.t == JV_LIST) { *out = obj.u.l->v[i]; return 0; }
    size_t b0 = jv_utf8_offset(obj.u.s.p, obj.u.s.n, (size_t)i), b1 = jv_utf8_offset(obj.u.s.p, obj.u.s.n, (size_t)i + 1);
    *out = jv_str(obj.u.s.p + b0, b1 - b0);
    return 0;
  }
  default: *out = jv_undef(NULL); return 0;
  }
}

/* Python's slice bounds for a sequence of len items. */
static int slice_bounds(jj_ctx *c, const jnode *at, const jv *b, long long len, long long *start, long long *stop,
                        long long *step) {
  for (int i = 0; i < 3; i++)
    if (b[i].t != JV_UNDEF && b[i].t != JV_NONE && b[i].t != JV_INT)
      return jj_error(c, at, "slice indices must be integers or none, not %s", jv_type_name(b[i]));
  *step = b[2].t == JV_INT ? b[2].u.i : 1;
  if (*step == 0) return jj_error(c, at, "slice step cannot be zero");
  long long lo = *step < 0 ? -1 : 0, hi = *step < 0 ? len - 1 : len;
  for (int i = 0; i < 2; i++) {
    long long *dst = i ? stop : start;
    if (b[i].t != JV_INT) { *dst = (*step < 0) == (i == 0) ? hi : lo; continue; }
    long long v = b[i].u.i;
    if (v < 0) { v += len; if (v < lo) v = lo; }
    else if (v > hi) v = hi;
    *dst = v;
  }
  return 0;
}

static int eval_slice(jj_ctx *c, const jnode *n, jv obj, const jv *bounds, jv *out) {
  if (obj.t == JV_UNDEF) return undefined_error(c, n, obj);
  if (obj.t != JV_LIST && obj.t != JV_STR) return jj_error(c, n, "cannot slice a %s", jv_type_name(obj));
  int ascii = 1;
  if (obj.t == JV_STR)
    for (size_t i = 0; i < obj.u.s.n && ascii; i++) ascii = !((unsigned char)obj.u.s.p[i] & 0x80);
  long long len = obj.t == JV_LIST ? obj.u.l->n : ascii ? (long long)obj.u.s.n : (long long)jv_utf8_len(obj.u.s.p, obj.u.s.n);
  long long start = 0, stop = 0, step = 1;
  if (slice_bounds(c, n, bounds, len, &start, &stop, &step)) return -1;
  if (obj.t == JV_LIST) {
    jv_list *l = jv_list_new(&c->a, 0);
    if (!l) return oom(c, n);
    for (long long i = start; step > 0 ? i < stop : i > stop; i += step)
      if (jv_list_push(&c->a, l, obj.u.l->v[i])) return oom(c, n);
    out->t = JV_LIST;
    out->u.l = l;
    return 0;
  }
  if (step == 1 && ascii) { *out = jv_str(obj.u.s.p + start, stop > start ? (size_t)(stop - start) : 0); return 0; }
  /* by code point: the byte offset of each */
  size_t *off = jj_alloc(&c->a, ((size_t)len + 1) * sizeof *off);
  char *s = jj_alloc(&c->a, obj.u.s.n + 1);
  if (!off || !s) return oom(c, n);
  long long k = 0;
  for (size_t b = 0; b < obj.u.s.n; b++)
    if (((unsigned char)obj.u.s.p[b] & 0xC0) != 0x80) off[k++] = b;
  off[len] = obj.u.s.n;
  size_t m = 0;
  for (long long i = start; step > 0 ? i < stop : i > stop; i += step) {
    size_t w = off[i + 1] - off[i];
    memcpy(s + m, obj.u.s.p + off[i], w);
    m += w;
  }
  *out = jv_str(s, m);
  return 0;
}

/* Evaluated call arguments. */
typedef struct {
  jv *pos, *kwv;
  const char **kwn;
  int npos, nkw;
} args;

static int eval_args(jj_ctx *c, const jnode *n, jj_frame *f, args *a) {
  memset(a, 0, sizeof *a);
  if (!n->nv) return 0;
  a->pos = jj_alloc(&c->a, (size_t)n->nv * sizeof *a->pos);
  a->kwv = jj_alloc(&c->a, (size_t)n->nv * sizeof *a->kwv);
  a->kwn = jj_alloc(&c->a, (size_t)n->nv * sizeof *a->kwn);
  if (!a->pos || !a->kwv || !a->kwn) return oom(c, n);
  for (int i = 0; i < n->nv; i++) {
    jv v;
    if (eval(c, n->v[i], f, &v)) return -1;
    if (n->vname && n->vname[i]) {
      a->kwn[a->nkw] = n->vname[i];
      a->kwv[a->nkw++] = v;
    } else {
      if (a->nkw) return jj_error(c, n->v[i], "a positional argument after a keyword argument");
      a->pos[a->npos++] = v;
    }
  }
  return 0;
}

int jj_call_macro(jj_ctx *c, const jnode *at, jv macro, const jv *pos, int npos, const char **kwn, const jv *kwv,
                  int nkw, jv *out) {
  const jnode *m = macro.u.macro;
  if (jj_step(c, at)) return -1;
  if (c->macro_depth >= MAX_MACRO_DEPTH) return jj_error(c, at, "macro calls nested more than %d deep", MAX_MACRO_DEPTH);
  if (npos > m->ntargets) return jj_error(c, at, "macro '%s' takes at most %d arguments", m->s, m->ntargets);
  jj_frame *f = frame_new(c, c->root);
  if (!f) return oom(c, at);
  for (int i = 0; i < m->ntargets; i++) {
    jv v = jv_undef(m->targets[i]);
    int given = 0;
    if (i < npos) { v = pos[i]; given = 1; }
    for (int k = 0; k < nkw; k++)
      if (!strcmp(kwn[k], m->targets[i])) { v = kwv[k]; given = 1; }
    if (!given && m->v[i] && eval(c, m->v[i], f, &v)) return -1;
    if (frame_set(c, f, m->targets[i], v)) return oom(c, at);
  }
  for (int k = 0; k < nkw; k++) {
    int known = 0;
    for (int i = 0; i < m->ntargets; i++) known |= !strcmp(kwn[k], m->targets[i]);
    if (!known) return jj_error(c, at, "macro '%s' has no parameter '%s'", m->s, kwn[k]);
  }
  jj_buf b = {.a = &c->a, .limit = WISP_JINJA_MAX_OUTPUT};
  jj_buf *saved = c->out;
  c->out = &b;
  c->macro_depth++;
  int rc = exec_body(c, m->body, m->nbody, f);
  c->macro_depth--;
  c->out = saved;
  c->loopctl = 0;
  if (rc) return -1;
  if (b.failed) return jj_error(c, at, "the output is over %zu MiB", WISP_JINJA_MAX_OUTPUT >> 20);
  *out = jv_str(b.p ? b.p : "", b.n);
  return 0;
}

static int eval_call(jj_ctx *c, const jnode *n, jj_frame *f, jv *out) {
  args a;
  if (n->a->k == E_ATTR) { /* obj.method(args) */
    jv obj;
    if (eval(c, n->a->a, f, &obj) || eval_args(c, n, f, &a)) return -1;
    int rc = jj_method(c, n, obj, n->a->s, a.pos, a.npos, a.kwn, a.kwv, a.nkw, out);
    if (rc <= 0) return rc;
    jv callee; /* not a method: an attribute holding a macro, say */
    if (get_item(c, n->a, obj, jv_str(n->a->s, n->a->sn), &callee)) return -1;
    if (callee.t == JV_MACRO) return jj_call_macro(c, n, callee, a.pos, a.npos, a.kwn, a.kwv, a.nkw, out);
    if (obj.t == JV_UNDEF) return undefined_error(c, n, obj);
    return jj_error(c, n, "unsupported method '%s' of a %s", n->a->s, jv_type_name(obj));
  }
  jv callee;
  if (eval(c, n->a, f, &callee) || eval_args(c, n, f, &a)) return -1;
  if (callee.t == JV_MACRO) return jj_call_macro(c, n, callee, a.pos, a.npos, a.kwn, a.kwv, a.nkw, out);
  if (callee.t == JV_FUNC) return jj_call_global(c, n, callee.u.func, a.pos, a.npos, a.kwn, a.kwv, a.nkw, out);
  if (callee.t == JV_UNDEF) {
    if (n->a->k == E_NAME) return jj_error(c, n, "unsupported function '%s'", n->a->s);
    return undefined_error(c, n, callee);
  }
  return jj_error(c, n, "a %s is not callable", jv_type_name(callee));
}

static int num_of(jv v, double *d, long long *i, int *is_int) {
  if (v.t == JV_INT || v.t == JV_BOOL) { *i = v.t == JV_INT ? v.u.i : v.u.b; *d = (double)*i; *is_int = 1; return 1; }
  if (v.t == JV_FLOAT) { *d = v.u.f; *is_int = 0; return 1; }
  return 0;
}

static int compare(jj_ctx *c, const jnode *n, jv a, jv b, int *cmp) {
  double x = 0, y = 0;
  long long i = 0, j = 0;
  int ii = 0, ji = 0;
  if (num_of(a, &x, &i, &ii) && num_of(b, &y, &j, &ji)) {
    if (ii && ji) *cmp = (i > j) - (i < j);
    else *cmp = (x > y) - (x < y);
    return 0;
  }
  if (a.t == JV_STR && b.t == JV_STR) { /* UTF-8 byte order is code point order */
    size_t m = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
    int r = memcmp(a.u.s.p, b.u.s.p, m);
    *cmp = r ? (r > 0) - (r < 0) : (a.u.s.n > b.u.s.n) - (a.u.s.n < b.u.s.n);
    return 0;
  }
  return jj_error(c, n, "cannot compare a %s with a %s", jv_type_name(a), jv_type_name(b));
}

/* x in y */
static int contains(jj_ctx *c, const jnode *n, jv needle, jv hay, int *r) {
  switch (hay.t) {
  case JV_STR:
    if (needle.t != JV_STR) return jj_error(c, n, "'in <string>' needs a string on the left, not a %s", jv_type_name(needle));
    *r = needle.u.s.n == 0 || memmem(hay.u.s.p, hay.u.s.n, needle.u.s.p, needle.u.s.n) != NULL;
    return 0;
  case JV_LIST:
    *r = 0;
    for (int i = 0; i < hay.u.l->n && !*r; i++) *r = jv_equal(hay.u.l->v[i], needle);
    return 0;
  case JV_DICT: case JV_NS: *r = jv_dict_find(hay.u.d, needle) != NULL; return 0;
  case JV_UNDEF: return undefined_error(c, n, hay);
  default: return jj_error(c, n, "a %s is not a container", jv_type_name(hay));
  }
}

static int concat(jj_ctx *c, const jnode *n, jv a, jv b, jv *out) {
  if (a.t == JV_UNDEF && b.t == JV_UNDEF) { *out = jv_str("", 0); return 0; }
  jj_buf buf = {.a = &c->a, .limit = WISP_JINJA_MAX_OUTPUT};
  jv_to_str(&buf, a);
  jv_to_str(&buf, b);
  if (buf.failed) return oom(c, n);
  *out = jv_str(buf.p ? buf.p : "", buf.n);
  return 0;
}

static int arith(jj_ctx *c, const jnode *n, int op, jv a, jv b, jv *out) {
  if (a.t == JV_UNDEF) return undefined_error(c, n, a);
  if (b.t == JV_UNDEF) return undefined_error(c, n, b);
  if (op == OP_ADD && a.t == JV_STR && b.t == JV_STR) return concat(c, n, a, b, out);
  if (op == OP_ADD && a.t == JV_LIST && b.t == JV_LIST) {
    jv_list *l = jv_list_new(&c->a, a.u.l->n + b.u.l->n);
    if (!l) return oom(c, n);
    for (int i = 0; i < a.u.l->n; i++) l->v[l->n++] = a.u.l->v[i];
    for (int i = 0; i < b.u.l->n; i++) l->v[l->n++] = b.u.l->v[i];
    out->t = JV_LIST;
    out->u.l = l;
    return 0;
  }
  double x = 0, y = 0;
  long long i = 0, j = 0;
  int ii = 0, ji = 0;
  if (op == OP_MUL && ((a.t == JV_STR && num_of(b, &y, &j, &ji) && ji) || (b.t == JV_STR && num_of(a, &x, &i, &ii) && ii))) {
    jv s = a.t == JV_STR ? a : b;
    long long times = a.t == JV_STR ? j : i;
    if (times <= 0 || !s.u.s.n) { *out = jv_str("", 0); return 0; }
    if ((unsigned long long)times > WISP_JINJA_MAX_OUTPUT / s.u.s.n) return oom(c, n);
    char *p = jj_alloc(&c->a, s.u.s.n * (size_t)times + 1);
    if (!p) return oom(c, n);
    for (long long k = 0; k < times; k++) memcpy(p + (size_t)k * s.u.s.n, s.u.s.p, s.u.s.n);
    *out = jv_str(p, s.u.s.n * (size_t)times);
    return 0;
  }
  if (!num_of(a, &x, &i, &ii) || !num_of(b, &y, &j, &ji)) {
    static const char *const names[] = {"", "+", "-", "*", "/", "//", "%", "**"};
    return jj_error(c, n, "unsupported operand types for %s: %s and %s", names[op], jv_type_name(a), jv_type_name(b));
  }
  int ints = ii && ji;
  switch (op) {
  case OP_ADD:
    if (ints) { if (__builtin_add_overflow(i, j, &i)) goto overflow; *out = jv_int(i); }
    else *out = jv_float(x + y);
    return 0;
  case OP_SUB:
    if (ints) { if (__builtin_sub_overflow(i, j, &i)) goto overflow; *out = jv_int(i); }
    else *out = jv_float(x - y);
    return 0;
  case OP_MUL:
    if (ints) { if (__builtin_mul_overflow(i, j, &i)) goto overflow; *out = jv_int(i); }
    else *out = jv_float(x * y);
    return 0;
  case OP_DIV:
    if (y == 0) return jj_error(c, n, "division by zero");
    *out = jv_float(x / y);
    return 0;
  case OP_FLOORDIV: case OP_MOD:
    if (y == 0) return jj_error(c, n, "division by zero");
    if (ints) {
      if (i == INT64_MIN && j == -1) goto overflow;
      long long q = i / j, r = i % j;
      if (r && ((r < 0) != (j < 0))) { q--; r += j; } /* Python rounds toward -inf */
      *out = jv_int(op == OP_MOD ? r : q);
    } else {
      double r = fmod(x, y);
      if (r && ((r < 0) != (y < 0))) r += y;
      *out = jv_float(op == OP_MOD ? r : floor((x - r) / y + 0.5));
      if (op == OP_FLOORDIV) out->u.f = floor(x / y);
    }
    return 0;
  case OP_POW:
    if (ints && j >= 0) {
      long long r = 1;
      for (long long k = 0; k < j; k++)
        if (__builtin_mul_overflow(r, i, &r)) goto overflow;
        else if (r == 0 || r == 1) break;
      if (r == -1 && j % 2 == 0) r = 1;
      *out = jv_int(r);
    } else *out = jv_float(pow(x, y));
    return 0;
  }
  return jj_error(c, n, "unknown operator");
overflow:
  return jj_error(c, n, "integer overflow");
}

static int eval_bin(jj_ctx *c, const jnode *n, jj_frame *f, jv *out) {
  jv a, b;
  if (eval(c, n->a, f, &a) || eval(c, n->b, f, &b)) return -1;
  int r = 0, cmp = 0;
  switch (n->op) {
  case OP_CONCAT: return concat(c, n, a, b, out);
  case OP_EQ: *out = jv_bool(jv_equal(a, b)); return 0;
  case OP_NE: *out = jv_bool(!jv_equal(a, b)); return 0;
  case OP_LT: case OP_GT: case OP_LE: case OP_GE:
    if (a.t == JV_UNDEF) return undefined_error(c, n, a);
    if (b.t == JV_UNDEF) return undefined_error(c, n, b);
    if (compare(c, n, a, b, &cmp)) return -1;
    *out = jv_bool(n->op == OP_LT ? cmp < 0 : n->op == OP_GT ? cmp > 0 : n->op == OP_LE ? cmp <= 0 : cmp >= 0);
    return 0;
  case OP_IN: case OP_NOTIN:
    if (contains(c, n, a, b, &r)) return -1;
    *out = jv_bool(n->op == OP_IN ? r : !r);
    return 0;
  default: return arith(c, n, n->op, a, b, out);
  }
}

static int eval(jj_ctx *c, const jnode *n, jj_frame *f, jv *out) {
  if (c->failed) return -1;
  if (++c->depth > 4 * WISP_JINJA_MAX_DEPTH * (MAX_MACRO_DEPTH + 1)) return jj_error(c, n, "evaluation nested too deep");
  int rc = 0;
  jv a, b;
  switch (n->k) {
  case E_LIT: *out = n->lit; break;
  case E_NAME: *out = lookup(f, n->s); break;
  case E_ATTR:
    if (!(rc = eval(c, n->a, f, &a))) {
      if (a.t == JV_NONE || a.t == JV_BOOL || a.t == JV_INT || a.t == JV_FLOAT || a.t == JV_STR || a.t == JV_LIST)
        *out = jv_undef(n->s); /* no such attribute */
      else rc = get_item(c, n, a, jv_str(n->s, n->sn), out);
    }
    break;
  case E_ITEM:
    if (!(rc = eval(c, n->a, f, &a)) && !(rc = eval(c, n->b, f, &b))) {
      if (a.t == JV_NONE) *out = jv_undef(NULL);
      else rc = get_item(c, n, a, b, out);
    }
    break;
  case E_SLICE: {
    jv bounds[3] = {jv_undef(NULL), jv_undef(NULL), jv_undef(NULL)};
    if ((rc = eval(c, n->a, f, &a))) break;
    for (int i = 0; i < 3 && !rc; i++)
      if (n->v[i]) rc = eval(c, n->v[i], f, &bounds[i]);
    if (!rc) rc = eval_slice(c, n, a, bounds, out);
    break;
  }
  case E_CALL: rc = eval_call(c, n, f, out); break;
  case E_FILTER: {
    args ar;
    if (!(rc = eval(c, n->a, f, &a)) && !(rc = eval_args(c, n, f, &ar)))
      rc = jj_filter(c, n, n->s, a, ar.pos, ar.npos, ar.kwn, ar.kwv, ar.nkw, out);
    break;
  }
  case E_TEST: {
    args ar;
    int r = 0;
    rc = eval(c, n->a, f, &a);
    if (!rc && !(rc = eval_args(c, n, f, &ar)) && !(rc = jj_test(c, n, n->s, a, ar.pos, ar.npos, &r)))
      *out = jv_bool(n->op ? !r : r);
    break;
  }
  case E_BIN: rc = eval_bin(c, n, f, out); break;
  case E_NEG: case E_POS:
    if (!(rc = eval(c, n->a, f, &a))) {
      if (a.t == JV_INT && n->k == E_NEG) {
        if (a.u.i == INT64_MIN) rc = jj_error(c, n, "integer overflow");
        else *out = jv_int(-a.u.i);
      } else if (a.t == JV_INT || a.t == JV_FLOAT) *out = n->k == E_NEG ? jv_float(-a.u.f) : a;
      else if (a.t == JV_BOOL) *out = jv_int(n->k == E_NEG ? -a.u.b : a.u.b);
      else rc = jj_error(c, n, "bad operand type for unary %c: %s", n->k == E_NEG ? '-' : '+', jv_type_name(a));
    }
    break;
  case E_NOT:
    if (!(rc = eval(c, n->a, f, &a))) *out = jv_bool(!jv_truthy(a));
    break;
  case E_AND: case E_OR: /* Python's: the deciding operand itself */
    if (!(rc = eval(c, n->a, f, &a))) {
      if (jv_truthy(a) == (n->k == E_OR)) *out = a;
      else rc = eval(c, n->b, f, out);
    }
    break;
  case E_COND:
    if (!(rc = eval(c, n->b, f, &a))) {
      if (jv_truthy(a)) rc = eval(c, n->a, f, out);
      else if (n->c) rc = eval(c, n->c, f, out);
      else *out = jv_undef(NULL);
    }
    break;
  case E_LIST: {
    jv_list *l = jv_list_new(&c->a, n->nv);
    if (!l) { rc = oom(c, n); break; }
    for (int i = 0; i < n->nv && !rc; i++)
      if (!(rc = eval(c, n->v[i], f, &a))) l->v[l->n++] = a;
    out->t = JV_LIST;
    out->u.l = l;
    break;
  }
  case E_DICT: {
    jv_dict *d = jv_dict_new(&c->a, n->nv / 2);
    if (!d) { rc = oom(c, n); break; }
    for (int i = 0; i + 1 < n->nv && !rc; i += 2)
      if (!(rc = eval(c, n->v[i], f, &a)) && !(rc = eval(c, n->v[i + 1], f, &b))) {
        if (a.t != JV_STR && a.t != JV_INT && a.t != JV_BOOL && a.t != JV_NONE && a.t != JV_FLOAT)
          rc = jj_error(c, n->v[i], "a %s cannot be a dict key", jv_type_name(a));
        else if (jv_dict_set(&c->a, d, a, b)) rc = oom(c, n);
      }
    out->t = JV_DICT;
    out->u.d = d;
    break;
  }
  default: rc = jj_error(c, n, "not an expression");
  }
  c->depth--;
  return rc;
}

/* ---- statements ---- */
static int emit(jj_ctx *c, const jnode *at, const char *s, size_t n) {
  jj_buf_put(c->out, s, n);
  if (c->out->failed) return jj_error(c, at, "the output is over %zu MiB", WISP_JINJA_MAX_OUTPUT >> 20);
  return 0;
}

/* The items a for loop walks: a list's, a dict's keys, a string's
 * characters; undefined and none walk nothing (jinja2 refuses none, which
 * the renderer reports). */
static int iterable(jj_ctx *c, const jnode *at, jv v, jv_list **out) {
  switch (v.t) {
  case JV_LIST: *out = v.u.l; return 0;
  case JV_UNDEF: *out = jv_list_new(&c->a, 0); return *out ? 0 : oom(c, at);
  case JV_DICT: {
    jv_list *l = jv_list_new(&c->a, v.u.d->n);
    if (!l) return oom(c, at);
    for (int i = 0; i < v.u.d->n; i++) l->v[l->n++] = v.u.d->k[i];
    *out = l;
    return 0;
  }
  case JV_STR: {
    jv_list *l = jv_list_new(&c->a, (int)jv_utf8_len(v.u.s.p, v.u.s.n));
    if (!l) return oom(c, at);
    for (size_t b = 0; b < v.u.s.n;) {
      size_t e = b + 1;
      while (e < v.u.s.n && ((unsigned char)v.u.s.p[e] & 0xC0) == 0x80) e++;
      l->v[l->n++] = jv_str(v.u.s.p + b, e - b);
      b = e;
    }
    *out = l;
    return 0;
  }
  default: return jj_error(c, at, "a %s is not iterable", jv_type_name(v));
  }
}

static int bind_targets(jj_ctx *c, const jnode *n, jj_frame *f, jv item) {
  if (n->ntargets == 1) return frame_set(c, f, n->targets[0], item) ? oom(c, n) : 0;
  if (item.t != JV_LIST || item.u.l->n != n->ntargets)
    return jj_error(c, n, "cannot unpack a %s into %d loop variables", jv_type_name(item), n->ntargets);
  for (int i = 0; i < n->ntargets; i++)
    if (frame_set(c, f, n->targets[i], item.u.l->v[i])) return oom(c, n);
  return 0;
}

/* The loop object of iteration i (its dict has room for the 9 entries). */
static void loop_fill(jv_dict *d, const jv_list *items, int i) {
  static const char *const keys[] = {"index0", "index", "first", "last", "length", "revindex", "revindex0", "previtem", "nextitem"};
  int len = items->n;
  jv vals[9] = {jv_int(i), jv_int(i + 1), jv_bool(i == 0), jv_bool(i == len - 1), jv_int(len), jv_int(len - i),
                jv_int(len - i - 1), i > 0 ? items->v[i - 1] : jv_undef(NULL), i + 1 < len ? items->v[i + 1] : jv_undef(NULL)};
  for (int k = 0; k < 9; k++) {
    d->k[k] = jv_str(keys[k], strlen(keys[k]));
    d->v[k] = vals[k];
  }
  d->n = 9;
}

static int exec_for(jj_ctx *c, const jnode *n, jj_frame *f) {
  jv it;
  jv_list *all, *items;
  if (eval(c, n->a, f, &it)) return -1;
  if (it.t == JV_NONE) return jj_error(c, n, "'NoneType' object is not iterable");
  if (iterable(c, n, it, &all)) return -1;
  items = all;
  if (n->b) { /* {% for x in xs if cond %}: the filter runs first, so loop.* counts what passes */
    if (!(items = jv_list_new(&c->a, 0))) return oom(c, n);
    for (int i = 0; i < all->n; i++) {
      jj_frame *g = frame_new(c, f);
      jv keep;
      if (!g || jj_step(c, n)) return g ? -1 : oom(c, n);
      if (bind_targets(c, n, g, all->v[i]) || eval(c, n->b, g, &keep)) return -1;
      if (jv_truthy(keep) && jv_list_push(&c->a, items, all->v[i])) return oom(c, n);
    }
  }
  if (!items->n) return exec_body(c, n->alt, n->nalt, f);
  /* One frame and one loop object, refilled each iteration: the body's
   * variables start afresh, and a long loop allocates nothing. */
  jj_frame *g = frame_new(c, f);
  jv loop = {JV_DICT, {0}};
  if (!g || !(loop.u.d = jv_dict_new(&c->a, 9))) return oom(c, n);
  for (int i = 0; i < items->n; i++) {
    if (jj_step(c, n)) return -1;
    g->n = 0;
    if (bind_targets(c, n, g, items->v[i])) return -1;
    loop_fill(loop.u.d, items, i);
    if (frame_set(c, g, "loop", loop)) return oom(c, n);
    if (exec_body(c, n->body, n->nbody, g)) return -1;
    if (c->loopctl == 1) { c->loopctl = 0; break; }
    c->loopctl = 0;
  }
  return 0;
}

/* The frame a set writes to: the innermost, which is the loop iteration's
 * or the macro's or the template's. */
static int exec_set(jj_ctx *c, const jnode *n, jj_frame *f) {
  jv v;
  if (n->k == N_SETBLOCK) {
    jj_buf b = {.a = &c->a, .limit = WISP_JINJA_MAX_OUTPUT};
    jj_buf *saved = c->out;
    c->out = &b;
    int rc = exec_body(c, n->body, n->nbody, f);
    c->out = saved;
    if (rc) return -1;
    if (b.failed) return jj_error(c, n, "the output is over %zu MiB", WISP_JINJA_MAX_OUTPUT >> 20);
    v = jv_str(b.p ? b.p : "", b.n);
  } else if (eval(c, n->a, f, &v)) return -1;
  if (n->s) { /* ns.attr = v */
    jv ns = lookup(f, n->targets[0]);
    if (ns.t != JV_NS) return jj_error(c, n, "cannot assign an attribute of a %s (only of a namespace())", jv_type_name(ns));
    char *key = jj_strndup(&c->a, n->s, n->sn);
    if (!key || jv_dict_set(&c->a, ns.u.d, jv_str(key, n->sn), v)) return oom(c, n);
    return 0;
  }
  return frame_set(c, f, n->targets[0], v) ? oom(c, n) : 0;
}

static int exec_stmt(jj_ctx *c, const jnode *n, jj_frame *f) {
  jv v;
  switch (n->k) {
  case N_TEXT: return emit(c, n, n->s, n->sn);
  case N_OUT:
    if (eval(c, n->a, f, &v)) return -1;
    if (v.t == JV_STR) return emit(c, n, v.u.s.p, v.u.s.n);
    if (v.t == JV_UNDEF) return 0;
    if (jj_str(c, n, v, &v)) return -1;
    return emit(c, n, v.u.s.p, v.u.s.n);
  case N_IF:
    if (eval(c, n->a, f, &v)) return -1;
    return jv_truthy(v) ? exec_body(c, n->body, n->nbody, f) : exec_body(c, n->alt, n->nalt, f);
  case N_FOR: return exec_for(c, n, f);
  case N_SET: case N_SETBLOCK: return exec_set(c, n, f);
  case N_MACRO: {
    jv m = {JV_MACRO, {0}};
    m.u.macro = n;
    return frame_set(c, f, n->s, m) ? oom(c, n) : 0;
  }
  case N_BREAK: c->loopctl = 1; return 0;
  case N_CONTINUE: c->loopctl = 2; return 0;
  case N_BLOCK: return exec_body(c, n->body, n->nbody, f);
  default: return jj_error(c, n, "not a statement");
  }
}

static int exec_body(jj_ctx *c, jnode *const *body, int n, jj_frame *f) {
  if (++c->depth > 4 * WISP_JINJA_MAX_DEPTH * (MAX_MACRO_DEPTH + 1)) return jj_error(c, NULL, "blocks nested too deep");
  int rc = 0;
  for (int i = 0; i < n && !rc && !c->loopctl; i++) rc = exec_stmt(c, body[i], f);
  c->depth--;
  return rc;
}

/* ---- the API ---- */
wisp_status wisp_jinja_parse(const char *source, wisp_jinja **out) {
  *out = NULL;
  if (!source) return wisp_fail(WISP_EINVAL, "chat template: no text");
  wisp_jinja *t = calloc(1, sizeof *t);
  if (!t) return wisp_fail(WISP_ENOMEM, "out of memory");
  jj_tok *toks;
  int n;
  wisp_status st = jj_lex(source, &t->arena, &toks, &n);
  if (!st) st = jj_parse(toks, n, &t->arena, &t->root);
  if (st) { wisp_jinja_free(t); return st; }
  *out = t;
  return WISP_OK;
}

void wisp_jinja_free(wisp_jinja *t) {
  if (!t) return;
  jj_arena_free(&t->arena);
  free(t);
}

wisp_status wisp_jinja_render(const wisp_jinja *t, const cJSON *vars, time_t now, char **out) {
  *out = NULL;
  jj_ctx c = {.a = {.limit = WISP_JINJA_MAX_MEMORY}, .now = now ? now : time(NULL)};
  jj_buf b = {.a = &c.a, .limit = WISP_JINJA_MAX_OUTPUT};
  c.out = &b;
  int rc = -1;
  if ((c.root = frame_new(&c, NULL))) {
    rc = 0;
    const cJSON *e;
    if (cJSON_IsObject(vars))
      cJSON_ArrayForEach(e, vars) {
        jv v = jv_from_json(&c.a, e, 0);
        char *name = e->string ? jj_strndup(&c.a, e->string, strlen(e->string)) : NULL;
        if (v.t == JV_UNDEF || !name || frame_set(&c, c.root, name, v)) { rc = oom(&c, NULL); break; }
      }
    if (!rc) rc = exec_body(&c, t->root->body, t->root->nbody, c.root);
  } else oom(&c, NULL);
  wisp_status st = WISP_OK;
  if (rc) st = WISP_EFORMAT;
  else if (!(*out = malloc(b.n + 1))) st = wisp_fail(WISP_ENOMEM, "out of memory");
  else {
    if (b.n) memcpy(*out, b.p, b.n);
    (*out)[b.n] = 0;
  }
  jj_arena_free(&c.a);
  return st;
}
