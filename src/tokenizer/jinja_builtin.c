/* The Jinja renderer's builtins: the filters, tests, string/dict methods and
 * global functions chat templates call, each as jinja2 (or Python, for
 * methods) defines it, with transformers' additions: raise_exception,
 * strftime_now, and a tojson that keeps non-ASCII text and takes indent.
 * Case mapping (upper, lower, title, capitalize) and the whitespace of trim,
 * strip and split are ASCII's. A name not here is an error naming it. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja_internal.h"

typedef struct {
  jj_ctx *c;
  const jnode *at;
  const jv *pos, *kwv;
  const char **kwn;
  int npos, nkw;
} call;

/* The i-th positional argument, or the keyword `name`, or undefined. */
static jv arg(const call *k, int i, const char *name) {
  if (i >= 0 && i < k->npos) return k->pos[i];
  for (int j = 0; name && j < k->nkw; j++)
    if (!strcmp(k->kwn[j], name)) return k->kwv[j];
  return jv_undef(NULL);
}

static int oom(const call *k) { return jj_error(k->c, k->at, "the render needs more than %zu MiB of memory", WISP_JINJA_MAX_MEMORY >> 20); }

static int need_str(const call *k, jv v, const char *what) {
  if (v.t == JV_STR) return 0;
  if (v.t == JV_UNDEF) return jj_error(k->c, k->at, "%s of an undefined value", what);
  return jj_error(k->c, k->at, "%s needs a string, not a %s", what, jv_type_name(v));
}

static jv list_val(jv_list *l) { jv v = {JV_LIST, {0}}; v.u.l = l; return v; }
static jv dict_val(jv_dict *d, jv_type t) { jv v = {t, {0}}; v.u.d = d; return v; }

/* The code point at p (p < e) and its length in bytes; a stray byte is
 * itself, one byte long. */
static unsigned cp_at(const char *p, const char *e, size_t *len) {
  unsigned char c = (unsigned char)*p;
  int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  if (p + n > e) n = 1;
  unsigned cp = n == 1 ? c : c & (0x7F >> n);
  for (int i = 1; i < n; i++) {
    if (((unsigned char)p[i] & 0xC0) != 0x80) { *len = 1; return c; }
    cp = cp << 6 | ((unsigned char)p[i] & 63);
  }
  *len = (size_t)n;
  return cp;
}

/* The code point that ends at e (b < e). */
static unsigned cp_before(const char *b, const char *e, size_t *len) {
  const char *p = e - 1;
  while (p > b && e - p < 4 && ((unsigned char)*p & 0xC0) == 0x80) p--;
  size_t n;
  unsigned cp = cp_at(p, e, &n);
  if (p + n != e) return cp_at(e - 1, e, len); /* not one whole sequence: the last byte */
  *len = n;
  return cp;
}

/* Python's str.isspace. */
static int is_space_cp(unsigned cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}
static int is_space(unsigned char c) { return is_space_cp(c); }

static int in_chars(unsigned cp, jv chars) {
  if (chars.t != JV_STR) return is_space_cp(cp);
  for (const char *p = chars.u.s.p, *e = p + chars.u.s.n; p < e;) {
    size_t n;
    if (cp_at(p, e, &n) == cp) return 1;
    p += n;
  }
  return 0;
}

/* str.strip/lstrip/rstrip: chars undefined or none -> whitespace (by code
 * point, as Python). */
static int strip(const call *k, jv s, jv chars, int left, int right, jv *out) {
  if (chars.t != JV_UNDEF && chars.t != JV_NONE && need_str(k, chars, "strip")) return -1;
  const char *p = s.u.s.p, *e = s.u.s.p + s.u.s.n;
  size_t n;
  if (left)
    while (p < e && in_chars(cp_at(p, e, &n), chars)) p += n;
  if (right)
    while (e > p && in_chars(cp_before(p, e, &n), chars)) e -= n;
  *out = jv_str(p, (size_t)(e - p));
  return 0;
}

static int map_case(const call *k, jv s, int mode, jv *out) { /* 0 lower, 1 upper, 2 capitalize, 3 title */
  char *p = jj_alloc(jj_ctx_arena(k->c), s.u.s.n + 1);
  if (!p) return oom(k);
  int word_start = 1;
  for (size_t i = 0; i < s.u.s.n; i++) {
    unsigned char ch = (unsigned char)s.u.s.p[i];
    int up = mode == 1 || (mode == 2 && i == 0) || (mode == 3 && word_start);
    p[i] = (char)(ch < 0x80 ? (up ? toupper(ch) : tolower(ch)) : ch);
    word_start = !isalpha(ch);
  }
  *out = jv_str(p, s.u.s.n);
  return 0;
}

static int replace(const call *k, jv s, jv old, jv new_, jv count, jv *out) {
  if (need_str(k, old, "replace") || need_str(k, new_, "replace")) return -1;
  long long limit = count.t == JV_INT ? count.u.i : -1;
  jj_buf b = {.a = jj_ctx_arena(k->c), .limit = WISP_JINJA_MAX_OUTPUT};
  size_t i = 0;
  long long done = 0;
  if (!old.u.s.n) { /* Python inserts new around every character */
    for (; i <= s.u.s.n && (limit < 0 || done < limit); done++) {
      jj_buf_put(&b, new_.u.s.p, new_.u.s.n);
      if (i == s.u.s.n) { i++; break; }
      size_t e = i + 1;
      while (e < s.u.s.n && ((unsigned char)s.u.s.p[e] & 0xC0) == 0x80) e++;
      jj_buf_put(&b, s.u.s.p + i, e - i);
      i = e;
    }
    if (i <= s.u.s.n) jj_buf_put(&b, s.u.s.p + i, s.u.s.n - i);
  } else {
    while (i < s.u.s.n && (limit < 0 || done < limit)) {
      const char *hit = memmem(s.u.s.p + i, s.u.s.n - i, old.u.s.p, old.u.s.n);
      if (!hit) break;
      jj_buf_put(&b, s.u.s.p + i, (size_t)(hit - s.u.s.p) - i);
      jj_buf_put(&b, new_.u.s.p, new_.u.s.n);
      i = (size_t)(hit - s.u.s.p) + old.u.s.n;
      done++;
    }
    jj_buf_put(&b, s.u.s.p + i, s.u.s.n - i);
  }
  if (b.failed) return oom(k);
  *out = jv_str(b.p ? b.p : "", b.n);
  return 0;
}

/* str.split(sep=None, maxsplit=-1) */
static int split(const call *k, jv s, jv sep, jv maxsplit, jv *out) {
  jj_arena *a = jj_ctx_arena(k->c);
  jv_list *l = jv_list_new(a, 0);
  if (!l) return oom(k);
  long long max = maxsplit.t == JV_INT ? maxsplit.u.i : -1;
  const char *p = s.u.s.p, *e = s.u.s.p + s.u.s.n;
  if (sep.t == JV_UNDEF || sep.t == JV_NONE) {
    jv ws = jv_undef(NULL);
    size_t n;
    for (;;) {
      while (p < e && in_chars(cp_at(p, e, &n), ws)) p += n;
      if (p == e) break;
      if (max >= 0 && l->n >= max) {
        const char *t = e;
        while (t > p && in_chars(cp_before(p, t, &n), ws)) t -= n;
        if (jv_list_push(a, l, jv_str(p, (size_t)(t - p)))) return oom(k);
        break;
      }
      const char *q = p;
      while (q < e && !in_chars(cp_at(q, e, &n), ws)) q += n;
      if (jv_list_push(a, l, jv_str(p, (size_t)(q - p)))) return oom(k);
      p = q;
    }
  } else {
    if (need_str(k, sep, "split")) return -1;
    if (!sep.u.s.n) return jj_error(k->c, k->at, "split: empty separator");
    for (;;) {
      const char *hit = (max < 0 || l->n < max) ? memmem(p, (size_t)(e - p), sep.u.s.p, sep.u.s.n) : NULL;
      if (!hit) {
        if (jv_list_push(a, l, jv_str(p, (size_t)(e - p)))) return oom(k);
        break;
      }
      if (jv_list_push(a, l, jv_str(p, (size_t)(hit - p)))) return oom(k);
      p = hit + sep.u.s.n;
    }
  }
  *out = list_val(l);
  return 0;
}

static int affix(const call *k, jv s, jv what, int end, jv *out) {
  int r = 0;
  if (what.t == JV_LIST) { /* a tuple of choices */
    for (int i = 0; i < what.u.l->n && !r; i++) {
      jv w = what.u.l->v[i];
      if (need_str(k, w, end ? "endswith" : "startswith")) return -1;
      r = w.u.s.n <= s.u.s.n && !memcmp(s.u.s.p + (end ? s.u.s.n - w.u.s.n : 0), w.u.s.p, w.u.s.n);
    }
  } else {
    if (need_str(k, what, end ? "endswith" : "startswith")) return -1;
    r = what.u.s.n <= s.u.s.n && !memcmp(s.u.s.p + (end ? s.u.s.n - what.u.s.n : 0), what.u.s.p, what.u.s.n);
  }
  *out = jv_bool(r);
  return 0;
}

static int length_of(const call *k, jv v, long long *n) {
  switch (v.t) {
  case JV_STR: *n = (long long)jv_utf8_len(v.u.s.p, v.u.s.n); return 0;
  case JV_LIST: *n = v.u.l->n; return 0;
  case JV_DICT: case JV_NS: *n = v.u.d->n; return 0;
  case JV_UNDEF: *n = 0; return 0;
  default: return jj_error(k->c, k->at, "a %s has no length", jv_type_name(v));
  }
}

/* The items of a list, a dict's keys, a string's characters. */
static int items_of(const call *k, jv v, jv_list **out) {
  jj_arena *a = jj_ctx_arena(k->c);
  if (v.t == JV_LIST) { *out = v.u.l; return 0; }
  if (!(*out = jv_list_new(a, 0))) return oom(k);
  if (v.t == JV_UNDEF) return 0;
  if (v.t == JV_DICT || v.t == JV_NS) {
    for (int i = 0; i < v.u.d->n; i++)
      if (jv_list_push(a, *out, v.u.d->k[i])) return oom(k);
    return 0;
  }
  if (v.t == JV_STR) {
    for (size_t b = 0; b < v.u.s.n;) {
      size_t e = b + 1;
      while (e < v.u.s.n && ((unsigned char)v.u.s.p[e] & 0xC0) == 0x80) e++;
      if (jv_list_push(a, *out, jv_str(v.u.s.p + b, e - b))) return oom(k);
      b = e;
    }
    return 0;
  }
  return jj_error(k->c, k->at, "a %s is not iterable", jv_type_name(v));
}

/* x.attr for selectattr/map: dotted paths ("function.name") walk dicts. */
static jv attr_path(jv v, jv path) {
  const char *p = path.u.s.p, *e = path.u.s.p + path.u.s.n;
  while (p <= e) {
    const char *dot = memchr(p, '.', (size_t)(e - p));
    if (!dot) dot = e;
    if (v.t != JV_DICT && v.t != JV_NS) return jv_undef(NULL);
    const jv *x = jv_dict_get(v.u.d, p, (size_t)(dot - p));
    if (!x) return jv_undef(NULL);
    v = *x;
    p = dot + 1;
  }
  return v;
}

static int to_int(const call *k, jv v, jv def, jv *out) {
  (void)k;
  if (v.t == JV_INT) { *out = v; return 0; }
  if (v.t == JV_BOOL) { *out = jv_int(v.u.b); return 0; }
  if (v.t == JV_FLOAT && v.u.f > -9.2e18 && v.u.f < 9.2e18) { *out = jv_int((long long)v.u.f); return 0; }
  if (v.t == JV_STR) {
    char buf[64];
    size_t n = v.u.s.n < sizeof buf - 1 ? v.u.s.n : sizeof buf - 1;
    memcpy(buf, v.u.s.p, n);
    buf[n] = 0;
    char *end;
    long long i = strtoll(buf, &end, 10);
    while (*end && is_space((unsigned char)*end)) end++;
    if (end != buf && !*end) { *out = jv_int(i); return 0; }
    double d = strtod(buf, &end);
    while (*end && is_space((unsigned char)*end)) end++;
    if (end != buf && !*end && d > -9.2e18 && d < 9.2e18) { *out = jv_int((long long)d); return 0; }
  }
  *out = def.t == JV_UNDEF ? jv_int(0) : def;
  return 0;
}

/* ---- tests ---- */
int jj_test(jj_ctx *c, const jnode *at, const char *name, jv v, const jv *args, int nargs, int *r) {
  jv x = nargs > 0 ? args[0] : jv_undef(NULL);
  if (!strcmp(name, "defined")) *r = v.t != JV_UNDEF;
  else if (!strcmp(name, "undefined")) *r = v.t == JV_UNDEF;
  else if (!strcmp(name, "none")) *r = v.t == JV_NONE;
  else if (!strcmp(name, "string")) *r = v.t == JV_STR;
  else if (!strcmp(name, "number")) *r = v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
  else if (!strcmp(name, "integer")) *r = v.t == JV_INT;
  else if (!strcmp(name, "float")) *r = v.t == JV_FLOAT;
  else if (!strcmp(name, "boolean")) *r = v.t == JV_BOOL;
  else if (!strcmp(name, "true")) *r = v.t == JV_BOOL && v.u.b;
  else if (!strcmp(name, "false")) *r = v.t == JV_BOOL && !v.u.b;
  else if (!strcmp(name, "mapping")) *r = v.t == JV_DICT;
  else if (!strcmp(name, "iterable")) *r = v.t == JV_STR || v.t == JV_LIST || v.t == JV_DICT || v.t == JV_UNDEF;
  else if (!strcmp(name, "sequence")) *r = v.t == JV_STR || v.t == JV_LIST || v.t == JV_DICT;
  else if (!strcmp(name, "callable")) *r = v.t == JV_MACRO || v.t == JV_FUNC;
  else if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==")) *r = jv_equal(v, x);
  else if (!strcmp(name, "ne") || !strcmp(name, "!=")) *r = !jv_equal(v, x);
  else if (!strcmp(name, "sameas")) *r = jv_equal(v, x) && v.t == x.t;
  else if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
    long long d = name[0] == 'd' ? (x.t == JV_INT ? x.u.i : 0) : 2;
    if (v.t != JV_INT || d == 0) return jj_error(c, at, "test '%s' needs integers", name);
    long long m = v.u.i % d;
    *r = name[0] == 'o' ? m != 0 : m == 0;
  } else if (!strcmp(name, "in")) {
    call k = {c, at, args, NULL, NULL, nargs, 0};
    if (x.t == JV_STR) {
      if (need_str(&k, v, "test 'in'")) return -1;
      *r = !v.u.s.n || memmem(x.u.s.p, x.u.s.n, v.u.s.p, v.u.s.n) != NULL;
    } else if (x.t == JV_LIST) {
      *r = 0;
      for (int i = 0; i < x.u.l->n && !*r; i++) *r = jv_equal(x.u.l->v[i], v);
    } else if (x.t == JV_DICT) *r = jv_dict_find(x.u.d, v) != NULL;
    else return jj_error(c, at, "test 'in' needs a container");
  } else if (!strcmp(name, "lt") || !strcmp(name, "<") || !strcmp(name, "gt") || !strcmp(name, ">") ||
             !strcmp(name, "le") || !strcmp(name, "<=") || !strcmp(name, "ge") || !strcmp(name, ">=")) {
    int num = (v.t == JV_INT || v.t == JV_FLOAT) && (x.t == JV_INT || x.t == JV_FLOAT);
    if (!num) return jj_error(c, at, "test '%s' needs numbers", name);
    double a = v.t == JV_INT ? (double)v.u.i : v.u.f, b = x.t == JV_INT ? (double)x.u.i : x.u.f;
    char op0 = name[0], op1 = name[1];
    *r = (op0 == 'l' && op1 == 't') || !strcmp(name, "<") ? a < b
       : (op0 == 'g' && op1 == 't') || !strcmp(name, ">") ? a > b
       : (op0 == 'l') || !strcmp(name, "<=") ? a <= b : a >= b;
  } else if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
    *r = v.t == JV_STR;
    for (size_t i = 0; *r && i < v.u.s.n; i++)
      if (name[0] == 'l' ? isupper((unsigned char)v.u.s.p[i]) : islower((unsigned char)v.u.s.p[i])) *r = 0;
  } else return jj_error(c, at, "unsupported test '%s'", name);
  return 0;
}

/* ---- filters ---- */
static int apply_filter_by_name(const call *k, const char *name, jv in, jv *out) {
  return jj_filter(k->c, k->at, name, in, NULL, 0, NULL, NULL, 0, out);
}

/* select/reject/selectattr/rejectattr: the items for which the test (or
 * truth) holds, or does not. */
static int select_items(const call *k, jv in, int by_attr, int keep, jv *out) {
  jv_list *items, *l;
  if (items_of(k, in, &items)) return -1;
  if (!(l = jv_list_new(jj_ctx_arena(k->c), 0))) return oom(k);
  jv attr = by_attr ? arg(k, 0, NULL) : jv_undef(NULL);
  if (by_attr && attr.t != JV_STR) return jj_error(k->c, k->at, "selectattr/rejectattr need an attribute name");
  int first = by_attr ? 1 : 0;
  jv test = arg(k, first, NULL);
  if (test.t != JV_UNDEF && test.t != JV_STR) return jj_error(k->c, k->at, "the test must be named by a string");
  char tname[64] = "";
  if (test.t == JV_STR) snprintf(tname, sizeof tname, "%.*s", (int)test.u.s.n, test.u.s.p);
  for (int i = 0; i < items->n; i++) {
    if (jj_step(k->c, k->at)) return -1;
    jv x = by_attr ? attr_path(items->v[i], attr) : items->v[i];
    int r;
    if (test.t == JV_UNDEF) r = jv_truthy(x);
    else if (jj_test(k->c, k->at, tname, x, k->pos + first + 1, k->npos > first + 1 ? k->npos - first - 1 : 0, &r)) return -1;
    if (r == keep && jv_list_push(jj_ctx_arena(k->c), l, items->v[i])) return oom(k);
  }
  *out = list_val(l);
  return 0;
}

int jj_filter(jj_ctx *c, const jnode *at, const char *name, jv in, const jv *pos, int npos, const char **kwn,
              const jv *kwv, int nkw, jv *out) {
  call k = {c, at, pos, kwv, kwn, npos, nkw};
  jj_arena *a = jj_ctx_arena(c);
  if (!strcmp(name, "safe")) { *out = in; return 0; }
  if (!strcmp(name, "trim")) { /* of str(value), as jinja2's */
    jv s;
    if (jj_str(c, at, in, &s)) return -1;
    return strip(&k, s, arg(&k, 0, "chars"), 1, 1, out);
  }
  if (!strcmp(name, "tojson")) {
    jv ascii = arg(&k, 0, "ensure_ascii"), indent = arg(&k, 1, "indent"), seps = arg(&k, 2, "separators"),
       sort = arg(&k, 3, "sort_keys");
    if (jv_truthy(ascii)) return jj_error(c, at, "unsupported tojson option 'ensure_ascii'");
    if (seps.t != JV_UNDEF && seps.t != JV_NONE) return jj_error(c, at, "unsupported tojson option 'separators'");
    char spaces[65];
    const char *ind = NULL;
    if (indent.t == JV_INT) {
      long long n = indent.u.i < 0 ? 0 : indent.u.i > 64 ? 64 : indent.u.i;
      memset(spaces, ' ', (size_t)n);
      spaces[n] = 0;
      ind = spaces;
    } else if (indent.t == JV_STR) {
      if (!(ind = jj_strndup(a, indent.u.s.p, indent.u.s.n))) return oom(&k);
    } else if (indent.t != JV_UNDEF && indent.t != JV_NONE) return jj_error(c, at, "tojson: indent must be a number or a string");
    jj_buf b = {.a = a, .limit = WISP_JINJA_MAX_OUTPUT};
    if (jv_to_json(&b, in, ind, jv_truthy(sort), 0)) return jj_error(c, at, "tojson: a %s is not JSON", jv_type_name(in));
    if (b.failed) return oom(&k);
    *out = jv_str(b.p ? b.p : "", b.n);
    return 0;
  }
  if (!strcmp(name, "length") || !strcmp(name, "count")) {
    long long n = 0;
    if (length_of(&k, in, &n)) return -1;
    *out = jv_int(n);
    return 0;
  }
  if (!strcmp(name, "string")) return jj_str(c, at, in, out);
  if (!strcmp(name, "int")) return to_int(&k, in, arg(&k, 0, "default"), out);
  if (!strcmp(name, "float")) {
    if (in.t == JV_FLOAT) *out = in;
    else if (in.t == JV_INT || in.t == JV_BOOL) *out = jv_float(in.t == JV_INT ? (double)in.u.i : in.u.b);
    else if (in.t == JV_STR) {
      char buf[64], *end;
      size_t n = in.u.s.n < sizeof buf - 1 ? in.u.s.n : sizeof buf - 1;
      memcpy(buf, in.u.s.p, n);
      buf[n] = 0;
      double d = strtod(buf, &end);
      *out = end != buf && !*end ? jv_float(d) : jv_float(0);
    } else *out = jv_float(0);
    return 0;
  }
  if (!strcmp(name, "default") || !strcmp(name, "d")) {
    jv def = arg(&k, 0, "default_value");
    int boolean = jv_truthy(arg(&k, 1, "boolean"));
    *out = in.t == JV_UNDEF || (boolean && !jv_truthy(in)) ? (def.t == JV_UNDEF ? jv_str("", 0) : def) : in;
    return 0;
  }
  if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "capitalize") || !strcmp(name, "title")) {
    jv s;
    if (jj_str(c, at, in, &s)) return -1;
    int mode = name[0] == 'l' ? 0 : name[0] == 'u' ? 1 : name[0] == 'c' ? 2 : 3;
    if (mode == 2) { /* capitalize: the first upper, the rest lower */
      if (map_case(&k, s, 0, &s)) return -1;
    }
    return map_case(&k, s, mode, out);
  }
  if (!strcmp(name, "replace")) {
    jv s;
    if (jj_str(c, at, in, &s)) return -1;
    return replace(&k, s, arg(&k, 0, "old"), arg(&k, 1, "new"), arg(&k, 2, "count"), out);
  }
  if (!strcmp(name, "join")) {
    jv sep = arg(&k, 0, "d"), attr = arg(&k, 1, "attribute");
    jv_list *items;
    if (items_of(&k, in, &items)) return -1;
    if (sep.t != JV_UNDEF && need_str(&k, sep, "join")) return -1;
    jj_buf b = {.a = a, .limit = WISP_JINJA_MAX_OUTPUT};
    for (int i = 0; i < items->n; i++) {
      if (i && sep.t == JV_STR) jj_buf_put(&b, sep.u.s.p, sep.u.s.n);
      jv x = attr.t == JV_STR ? attr_path(items->v[i], attr) : items->v[i];
      jv_to_str(&b, x);
    }
    if (b.failed) return oom(&k);
    *out = jv_str(b.p ? b.p : "", b.n);
    return 0;
  }
  if (!strcmp(name, "first") || !strcmp(name, "last")) {
    jv_list *items;
    if (items_of(&k, in, &items)) return -1;
    *out = items->n ? items->v[name[0] == 'f' ? 0 : items->n - 1] : jv_undef(NULL);
    return 0;
  }
  if (!strcmp(name, "list")) {
    jv_list *items, *l;
    if (items_of(&k, in, &items)) return -1;
    if (!(l = jv_list_new(a, items->n))) return oom(&k);
    for (int i = 0; i < items->n; i++) l->v[l->n++] = items->v[i];
    *out = list_val(l);
    return 0;
  }
  if (!strcmp(name, "reverse")) {
    jv_list *items, *l;
    if (items_of(&k, in, &items)) return -1;
    if (!(l = jv_list_new(a, items->n))) return oom(&k);
    for (int i = items->n - 1; i >= 0; i--) l->v[l->n++] = items->v[i];
    if (in.t == JV_STR) { /* a string reverses to a string */
      jj_buf b = {.a = a, .limit = WISP_JINJA_MAX_OUTPUT};
      for (int i = 0; i < l->n; i++) jj_buf_put(&b, l->v[i].u.s.p, l->v[i].u.s.n);
      if (b.failed) return oom(&k);
      *out = jv_str(b.p ? b.p : "", b.n);
      return 0;
    }
    *out = list_val(l);
    return 0;
  }
  if (!strcmp(name, "items")) {
    if (in.t == JV_UNDEF) { jv_list *l = jv_list_new(a, 0); if (!l) return oom(&k); *out = list_val(l); return 0; }
    if (in.t != JV_DICT) return jj_error(c, at, "items needs a mapping, not a %s", jv_type_name(in));
    return jj_method(c, at, in, "items", NULL, 0, NULL, NULL, 0, out);
  }
  if (!strcmp(name, "abs")) {
    if (in.t == JV_INT && in.u.i != INT64_MIN) *out = jv_int(in.u.i < 0 ? -in.u.i : in.u.i);
    else if (in.t == JV_FLOAT) *out = jv_float(in.u.f < 0 ? -in.u.f : in.u.f);
    else return jj_error(c, at, "abs needs a number, not a %s", jv_type_name(in));
    return 0;
  }
  if (!strcmp(name, "map")) {
    jv attr = arg(&k, -1, "attribute"), fname = arg(&k, 0, NULL), def = arg(&k, -1, "default");
    jv_list *items, *l;
    if (items_of(&k, in, &items)) return -1;
    if (!(l = jv_list_new(a, items->n))) return oom(&k);
    char fn[64] = "";
    if (attr.t != JV_STR) {
      if (fname.t != JV_STR) return jj_error(c, at, "map needs a filter name or attribute=");
      snprintf(fn, sizeof fn, "%.*s", (int)fname.u.s.n, fname.u.s.p);
    }
    for (int i = 0; i < items->n; i++) {
      jv x;
      if (jj_step(c, at)) return -1;
      if (attr.t == JV_STR) {
        x = attr_path(items->v[i], attr);
        if (x.t == JV_UNDEF && def.t != JV_UNDEF) x = def;
      } else if (apply_filter_by_name(&k, fn, items->v[i], &x)) return -1;
      l->v[l->n++] = x;
    }
    *out = list_val(l);
    return 0;
  }
  if (!strcmp(name, "select")) return select_items(&k, in, 0, 1, out);
  if (!strcmp(name, "reject")) return select_items(&k, in, 0, 0, out);
  if (!strcmp(name, "selectattr")) return select_items(&k, in, 1, 1, out);
  if (!strcmp(name, "rejectattr")) return select_items(&k, in, 1, 0, out);
  return jj_error(c, at, "unsupported filter '%s'", name);
}

/* ---- methods ---- */
int jj_method(jj_ctx *c, const jnode *at, jv obj, const char *name, const jv *pos, int npos, const char **kwn,
              const jv *kwv, int nkw, jv *out) {
  call k = {c, at, pos, kwv, kwn, npos, nkw};
  jj_arena *a = jj_ctx_arena(c);
  if (obj.t == JV_STR) {
    if (!strcmp(name, "strip")) return strip(&k, obj, arg(&k, 0, NULL), 1, 1, out);
    if (!strcmp(name, "lstrip")) return strip(&k, obj, arg(&k, 0, NULL), 1, 0, out);
    if (!strcmp(name, "rstrip")) return strip(&k, obj, arg(&k, 0, NULL), 0, 1, out);
    if (!strcmp(name, "split")) return split(&k, obj, arg(&k, 0, "sep"), arg(&k, 1, "maxsplit"), out);
    if (!strcmp(name, "startswith")) return affix(&k, obj, arg(&k, 0, NULL), 0, out);
    if (!strcmp(name, "endswith")) return affix(&k, obj, arg(&k, 0, NULL), 1, out);
    if (!strcmp(name, "replace")) return replace(&k, obj, arg(&k, 0, NULL), arg(&k, 1, NULL), arg(&k, 2, "count"), out);
    if (!strcmp(name, "lower")) return map_case(&k, obj, 0, out);
    if (!strcmp(name, "upper")) return map_case(&k, obj, 1, out);
    if (!strcmp(name, "title")) return map_case(&k, obj, 3, out);
    if (!strcmp(name, "capitalize")) return map_case(&k, obj, 0, out) || map_case(&k, *out, 2, out);
    if (!strcmp(name, "find") || !strcmp(name, "count")) {
      jv sub = arg(&k, 0, NULL);
      if (need_str(&k, sub, name)) return -1;
      if (name[0] == 'f') {
        const char *hit = sub.u.s.n ? memmem(obj.u.s.p, obj.u.s.n, sub.u.s.p, sub.u.s.n) : obj.u.s.p;
        *out = jv_int(hit ? (long long)jv_utf8_len(obj.u.s.p, (size_t)(hit - obj.u.s.p)) : -1);
      } else {
        long long n = 0;
        if (!sub.u.s.n) n = (long long)jv_utf8_len(obj.u.s.p, obj.u.s.n) + 1;
        else
          for (const char *p = obj.u.s.p, *e = obj.u.s.p + obj.u.s.n, *h; (h = memmem(p, (size_t)(e - p), sub.u.s.p, sub.u.s.n)); p = h + sub.u.s.n) n++;
        *out = jv_int(n);
      }
      return 0;
    }
    if (!strcmp(name, "join")) {
      jv_list *items;
      if (items_of(&k, arg(&k, 0, NULL), &items)) return -1;
      jj_buf b = {.a = a, .limit = WISP_JINJA_MAX_OUTPUT};
      for (int i = 0; i < items->n; i++) {
        if (items->v[i].t != JV_STR) return jj_error(c, at, "join: item %d is a %s, not a string", i, jv_type_name(items->v[i]));
        if (i) jj_buf_put(&b, obj.u.s.p, obj.u.s.n);
        jj_buf_put(&b, items->v[i].u.s.p, items->v[i].u.s.n);
      }
      if (b.failed) return oom(&k);
      *out = jv_str(b.p ? b.p : "", b.n);
      return 0;
    }
    return 1;
  }
  if (obj.t == JV_DICT || obj.t == JV_NS) {
    const jv_dict *d = obj.u.d;
    if (!strcmp(name, "get")) {
      const jv *v = jv_dict_find(d, arg(&k, 0, NULL));
      *out = v ? *v : (npos > 1 ? pos[1] : jv_none());
      return 0;
    }
    int which = !strcmp(name, "items") ? 0 : !strcmp(name, "keys") ? 1 : !strcmp(name, "values") ? 2 : -1;
    if (which < 0) return 1;
    jv_list *l = jv_list_new(a, d->n);
    if (!l) return oom(&k);
    for (int i = 0; i < d->n; i++) {
      if (which) { l->v[l->n++] = which == 1 ? d->k[i] : d->v[i]; continue; }
      jv_list *pair = jv_list_new(a, 2);
      if (!pair) return oom(&k);
      pair->v[0] = d->k[i];
      pair->v[1] = d->v[i];
      pair->n = 2;
      l->v[l->n++] = list_val(pair);
    }
    *out = list_val(l);
    return 0;
  }
  return 1;
}

/* ---- globals ---- */
int jj_global(const char *name, size_t n, jv *out) {
  static const struct { const char *name; int id; } g[] = {
      {"raise_exception", JF_RAISE}, {"strftime_now", JF_STRFTIME}, {"namespace", JF_NAMESPACE}, {"range", JF_RANGE}, {"dict", JF_DICT}};
  for (size_t i = 0; i < sizeof g / sizeof *g; i++)
    if (strlen(g[i].name) == n && !memcmp(g[i].name, name, n)) {
      out->t = JV_FUNC;
      out->u.func = g[i].id;
      return 0;
    }
  return 1;
}

int jj_call_global(jj_ctx *c, const jnode *at, int func, const jv *pos, int npos, const char **kwn, const jv *kwv,
                   int nkw, jv *out) {
  call k = {c, at, pos, kwv, kwn, npos, nkw};
  jj_arena *a = jj_ctx_arena(c);
  switch (func) {
  case JF_RAISE: {
    jv msg;
    if (jj_str(c, at, arg(&k, 0, NULL), &msg)) return -1;
    return jj_error(c, at, "raise_exception: %.*s", (int)(msg.u.s.n > 300 ? 300 : msg.u.s.n), msg.u.s.p);
  }
  case JF_STRFTIME: {
    jv fmt = arg(&k, 0, NULL);
    if (need_str(&k, fmt, "strftime_now")) return -1;
    char *f = jj_strndup(a, fmt.u.s.p, fmt.u.s.n), buf[256];
    if (!f) return oom(&k);
    time_t now = jj_ctx_now(c);
    struct tm tm;
    localtime_r(&now, &tm);
    size_t n = fmt.u.s.n ? strftime(buf, sizeof buf, f, &tm) : 0;
    if (fmt.u.s.n && !n) return jj_error(c, at, "strftime_now: the format gives nothing or too much");
    char *s = jj_strndup(a, buf, n);
    if (!s) return oom(&k);
    *out = jv_str(s, n);
    return 0;
  }
  case JF_NAMESPACE: case JF_DICT: {
    jv_dict *d = jv_dict_new(a, nkw);
    if (!d) return oom(&k);
    if (npos > 1 || (npos == 1 && pos[0].t != JV_DICT && pos[0].t != JV_NS))
      return jj_error(c, at, "%s() takes keyword arguments or one mapping", func == JF_DICT ? "dict" : "namespace");
    if (npos == 1)
      for (int i = 0; i < pos[0].u.d->n; i++)
        if (jv_dict_set(a, d, pos[0].u.d->k[i], pos[0].u.d->v[i])) return oom(&k);
    for (int i = 0; i < nkw; i++) {
      char *key = jj_strndup(a, kwn[i], strlen(kwn[i]));
      if (!key || jv_dict_set(a, d, jv_str(key, strlen(kwn[i])), kwv[i])) return oom(&k);
    }
    *out = dict_val(d, func == JF_DICT ? JV_DICT : JV_NS);
    return 0;
  }
  case JF_RANGE: {
    long long v[3] = {0, 0, 1};
    if (npos < 1 || npos > 3 || nkw) return jj_error(c, at, "range() takes 1 to 3 integers");
    for (int i = 0; i < npos; i++) {
      if (pos[i].t != JV_INT && pos[i].t != JV_BOOL) return jj_error(c, at, "range() takes integers, not a %s", jv_type_name(pos[i]));
      v[npos == 1 ? 1 : i] = pos[i].t == JV_INT ? pos[i].u.i : pos[i].u.b;
    }
    if (!v[2]) return jj_error(c, at, "range() step must not be zero");
    double count = ((double)v[1] - (double)v[0]) / (double)v[2];
    if (count > WISP_JINJA_MAX_STEPS) return jj_error(c, at, "range() of more than %d items", WISP_JINJA_MAX_STEPS);
    jv_list *l = jv_list_new(a, 0);
    if (!l) return oom(&k);
    for (long long i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2]) {
      if (jv_list_push(a, l, jv_int(i))) return oom(&k);
      if (__builtin_add_overflow(i, v[2], &i)) break;
      i -= v[2];
    }
    *out = list_val(l);
    return 0;
  }
  }
  return jj_error(c, at, "unknown function");
}
