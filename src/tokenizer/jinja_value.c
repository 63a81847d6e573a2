/* Values of the Jinja renderer: the arena they live in, lists and dicts,
 * truth and equality as Python has them, and the two ways a value becomes
 * text: Python's str() (what {{ }} prints) and json.dumps (the tojson
 * filter as transformers defines it: no ASCII escaping, optional indent). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja_internal.h"

/* ---- arena ---- */
struct jj_chunk {
  jj_chunk *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
};

void *jj_alloc(jj_arena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (n == 0) n = 16;
  jj_chunk *c = a->head;
  if (!c || c->cap - c->used < n) {
    size_t cap = n > 65536 ? n : 65536;
    if (a->limit && a->total + cap > a->limit) return NULL;
    c = malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->next = a->head;
    c->used = 0;
    c->cap = cap;
    a->head = c;
    a->total += cap;
  }
  void *p = c->data + c->used;
  c->used += n;
  memset(p, 0, n);
  return p;
}

char *jj_strndup(jj_arena *a, const char *s, size_t n) {
  char *p = jj_alloc(a, n + 1);
  if (p) {
    memcpy(p, s, n);
    p[n] = 0;
  }
  return p;
}

void jj_arena_free(jj_arena *a) {
  for (jj_chunk *c = a->head, *next; c; c = next) {
    next = c->next;
    free(c);
  }
  a->head = NULL;
  a->total = 0;
}

/* ---- byte strings ---- */
void jj_buf_put(jj_buf *b, const char *s, size_t n) {
  if (b->failed || !n) return;
  if ((b->limit && b->n + n > b->limit) || b->n + n + 1 < b->n) { b->failed = 1; return; }
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + n + 1) cap *= 2;
    char *p = jj_alloc(b->a, cap);
    if (!p) { b->failed = 1; return; }
    if (b->n) memcpy(p, b->p, b->n);
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}

/* ---- lists and dicts ---- */
jv_list *jv_list_new(jj_arena *a, int cap) {
  jv_list *l = jj_alloc(a, sizeof *l);
  if (!l) return NULL;
  if (cap > 0 && !(l->v = jj_alloc(a, (size_t)cap * sizeof *l->v))) return NULL;
  l->cap = cap > 0 ? cap : 0;
  return l;
}

int jv_list_push(jj_arena *a, jv_list *l, jv v) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 4;
    jv *nv = jj_alloc(a, (size_t)cap * sizeof *nv);
    if (!nv) return -1;
    if (l->n) memcpy(nv, l->v, (size_t)l->n * sizeof *nv);
    l->v = nv;
    l->cap = cap;
  }
  l->v[l->n++] = v;
  return 0;
}

jv_dict *jv_dict_new(jj_arena *a, int cap) {
  jv_dict *d = jj_alloc(a, sizeof *d);
  if (!d) return NULL;
  if (cap > 0 && (!(d->k = jj_alloc(a, (size_t)cap * sizeof *d->k)) || !(d->v = jj_alloc(a, (size_t)cap * sizeof *d->v))))
    return NULL;
  d->cap = cap > 0 ? cap : 0;
  return d;
}

const jv *jv_dict_find(const jv_dict *d, jv key) {
  for (int i = 0; i < d->n; i++)
    if (jv_equal(d->k[i], key)) return &d->v[i];
  return NULL;
}

const jv *jv_dict_get(const jv_dict *d, const char *key, size_t n) {
  for (int i = 0; i < d->n; i++)
    if (d->k[i].t == JV_STR && d->k[i].u.s.n == n && !memcmp(d->k[i].u.s.p, key, n)) return &d->v[i];
  return NULL;
}

int jv_dict_set(jj_arena *a, jv_dict *d, jv k, jv v) {
  for (int i = 0; i < d->n; i++)
    if (jv_equal(d->k[i], k)) {
      d->v[i] = v;
      return 0;
    }
  if (d->n == d->cap) {
    int cap = d->cap ? 2 * d->cap : 4;
    jv *nk = jj_alloc(a, (size_t)cap * sizeof *nk), *nv = jj_alloc(a, (size_t)cap * sizeof *nv);
    if (!nk || !nv) return -1;
    if (d->n) {
      memcpy(nk, d->k, (size_t)d->n * sizeof *nk);
      memcpy(nv, d->v, (size_t)d->n * sizeof *nv);
    }
    d->k = nk;
    d->v = nv;
    d->cap = cap;
  }
  d->k[d->n] = k;
  d->v[d->n++] = v;
  return 0;
}

/* ---- truth, equality, names ---- */
int jv_truthy(jv v) {
  switch (v.t) {
  case JV_UNDEF: case JV_NONE: return 0;
  case JV_BOOL: return v.u.b;
  case JV_INT: return v.u.i != 0;
  case JV_FLOAT: return v.u.f != 0;
  case JV_STR: return v.u.s.n != 0;
  case JV_LIST: return v.u.l->n != 0;
  case JV_DICT: return v.u.d->n != 0;
  default: return 1;
  }
}

static int is_num(jv v) { return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT; }
static double num(jv v) { return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : v.u.b; }

int jv_equal(jv a, jv b) {
  if (is_num(a) && is_num(b)) {
    if (a.t != JV_FLOAT && b.t != JV_FLOAT) return (a.t == JV_INT ? a.u.i : a.u.b) == (b.t == JV_INT ? b.u.i : b.u.b);
    return num(a) == num(b);
  }
  if (a.t != b.t) return 0;
  switch (a.t) {
  case JV_UNDEF: case JV_NONE: return 1;
  case JV_STR: return a.u.s.n == b.u.s.n && !memcmp(a.u.s.p, b.u.s.p, a.u.s.n);
  case JV_LIST:
    if (a.u.l->n != b.u.l->n) return 0;
    for (int i = 0; i < a.u.l->n; i++)
      if (!jv_equal(a.u.l->v[i], b.u.l->v[i])) return 0;
    return 1;
  case JV_DICT:
    if (a.u.d->n != b.u.d->n) return 0;
    for (int i = 0; i < a.u.d->n; i++) {
      const jv *o = jv_dict_find(b.u.d, a.u.d->k[i]);
      if (!o || !jv_equal(a.u.d->v[i], *o)) return 0;
    }
    return 1;
  case JV_NS: return a.u.d == b.u.d;
  case JV_MACRO: return a.u.macro == b.u.macro;
  case JV_FUNC: return a.u.func == b.u.func;
  default: return 0;
  }
}

const char *jv_type_name(jv v) {
  static const char *const names[] = {"undefined", "none", "bool", "int", "float", "string", "list", "dict", "namespace", "macro", "function"};
  return names[v.t];
}

/* ---- UTF-8 ---- */
size_t jv_utf8_len(const char *s, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (((unsigned char)s[i] & 0xC0) != 0x80) k++;
  return k;
}

size_t jv_utf8_offset(const char *s, size_t n, size_t i) {
  size_t k = 0, b = 0;
  for (; b < n; b++)
    if (((unsigned char)s[b] & 0xC0) != 0x80) {
      if (k == i) return b;
      k++;
    }
  return n;
}

/* ---- text ---- */
void jv_float_repr(jj_buf *b, double f) {
  if (isnan(f)) { jj_buf_puts(b, "nan"); return; }
  if (isinf(f)) { jj_buf_puts(b, f < 0 ? "-inf" : "inf"); return; }
  /* the shortest digits that read back as f, then Python's layout */
  char tmp[40];
  for (int p = 1; p <= 17; p++) {
    snprintf(tmp, sizeof tmp, "%.*e", p - 1, f);
    if (strtod(tmp, NULL) == f) break;
  }
  const char *s = tmp;
  if (*s == '-') { jj_buf_puts(b, "-"); s++; }
  char digits[24];
  int nd = 0;
  for (; *s && *s != 'e'; s++)
    if (*s != '.' && nd < (int)sizeof digits - 1) digits[nd++] = *s;
  digits[nd] = 0;
  int exp = atoi(s + 1);
  while (nd > 1 && digits[nd - 1] == '0') digits[--nd] = 0;
  char out[64];
  size_t k = 0;
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      for (int i = 0; i <= exp; i++) out[k++] = i < nd ? digits[i] : '0';
      out[k++] = '.';
      if (nd > exp + 1) for (int i = exp + 1; i < nd; i++) out[k++] = digits[i];
      else out[k++] = '0';
    } else {
      out[k++] = '0';
      out[k++] = '.';
      for (int i = 0; i < -exp - 1; i++) out[k++] = '0';
      for (int i = 0; i < nd; i++) out[k++] = digits[i];
    }
    out[k] = 0;
  } else {
    out[k++] = digits[0];
    if (nd > 1) {
      out[k++] = '.';
      for (int i = 1; i < nd; i++) out[k++] = digits[i];
    }
    snprintf(out + k, sizeof out - k, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  }
  jj_buf_puts(b, out);
}

/* Python's repr of a str. */
static void str_repr(jj_buf *b, const char *s, size_t n) {
  int has_single = memchr(s, '\'', n) != NULL, has_double = memchr(s, '"', n) != NULL;
  char q = has_single && !has_double ? '"' : '\'';
  jj_buf_put(b, &q, 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    char esc[8];
    if (c == '\\') jj_buf_puts(b, "\\\\");
    else if (c == (unsigned char)q) { esc[0] = '\\'; esc[1] = (char)q; jj_buf_put(b, esc, 2); }
    else if (c == '\n') jj_buf_puts(b, "\\n");
    else if (c == '\r') jj_buf_puts(b, "\\r");
    else if (c == '\t') jj_buf_puts(b, "\\t");
    else if (c < 0x20 || c == 0x7f) { snprintf(esc, sizeof esc, "\\x%02x", c); jj_buf_puts(b, esc); }
    else jj_buf_put(b, (const char *)&s[i], 1);
  }
  jj_buf_put(b, &q, 1);
}

static void repr(jj_buf *b, jv v, int depth);

static void to_str(jj_buf *b, jv v, int depth) {
  char tmp[32];
  if (depth > WISP_JINJA_MAX_DEPTH) { b->failed = 1; return; }
  switch (v.t) {
  case JV_UNDEF: return;
  case JV_NONE: jj_buf_puts(b, "None"); return;
  case JV_BOOL: jj_buf_puts(b, v.u.b ? "True" : "False"); return;
  case JV_INT: snprintf(tmp, sizeof tmp, "%lld", v.u.i); jj_buf_puts(b, tmp); return;
  case JV_FLOAT: jv_float_repr(b, v.u.f); return;
  case JV_STR: jj_buf_put(b, v.u.s.p, v.u.s.n); return;
  case JV_LIST:
    jj_buf_puts(b, "[");
    for (int i = 0; i < v.u.l->n; i++) {
      if (i) jj_buf_puts(b, ", ");
      repr(b, v.u.l->v[i], depth + 1);
    }
    jj_buf_puts(b, "]");
    return;
  case JV_DICT:
    jj_buf_puts(b, "{");
    for (int i = 0; i < v.u.d->n; i++) {
      if (i) jj_buf_puts(b, ", ");
      repr(b, v.u.d->k[i], depth + 1);
      jj_buf_puts(b, ": ");
      repr(b, v.u.d->v[i], depth + 1);
    }
    jj_buf_puts(b, "}");
    return;
  case JV_NS: jj_buf_puts(b, "<Namespace>"); return;
  case JV_MACRO: jj_buf_puts(b, "<Macro>"); return;
  case JV_FUNC: jj_buf_puts(b, "<function>"); return;
  }
}

static void repr(jj_buf *b, jv v, int depth) {
  if (v.t == JV_STR) str_repr(b, v.u.s.p, v.u.s.n);
  else if (v.t == JV_UNDEF) jj_buf_puts(b, "Undefined");
  else to_str(b, v, depth);
}

void jv_to_str(jj_buf *b, jv v) { to_str(b, v, 0); }

static void json_str(jj_buf *b, const char *s, size_t n) {
  jj_buf_puts(b, "\"");
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    jj_buf_put(b, s + run, i - run);
    run = i + 1;
    char esc[8];
    switch (c) {
    case '"': jj_buf_puts(b, "\\\""); break;
    case '\\': jj_buf_puts(b, "\\\\"); break;
    case '\n': jj_buf_puts(b, "\\n"); break;
    case '\r': jj_buf_puts(b, "\\r"); break;
    case '\t': jj_buf_puts(b, "\\t"); break;
    case '\b': jj_buf_puts(b, "\\b"); break;
    case '\f': jj_buf_puts(b, "\\f"); break;
    default: snprintf(esc, sizeof esc, "\\u%04x", c); jj_buf_puts(b, esc);
    }
  }
  jj_buf_put(b, s + run, n - run);
  jj_buf_puts(b, "\"");
}

static void newline_indent(jj_buf *b, const char *indent, int level) {
  jj_buf_puts(b, "\n");
  for (int i = 0; i < level; i++) jj_buf_puts(b, indent);
}

static int key_cmp(const jv *a, const jv *b) {
  if (a->t == JV_STR && b->t == JV_STR) {
    size_t n = a->u.s.n < b->u.s.n ? a->u.s.n : b->u.s.n;
    int c = memcmp(a->u.s.p, b->u.s.p, n);
    return c ? c : (a->u.s.n > b->u.s.n) - (a->u.s.n < b->u.s.n);
  }
  return 0;
}

static int json_at(jj_buf *b, jv v, const char *indent, int sort_keys, int depth) {
  char tmp[32];
  if (depth > WISP_JINJA_MAX_DEPTH) return -1;
  switch (v.t) {
  case JV_NONE: jj_buf_puts(b, "null"); return 0;
  case JV_BOOL: jj_buf_puts(b, v.u.b ? "true" : "false"); return 0;
  case JV_INT: snprintf(tmp, sizeof tmp, "%lld", v.u.i); jj_buf_puts(b, tmp); return 0;
  case JV_FLOAT:
    if (isnan(v.u.f)) jj_buf_puts(b, "NaN");
    else if (isinf(v.u.f)) jj_buf_puts(b, v.u.f < 0 ? "-Infinity" : "Infinity");
    else jv_float_repr(b, v.u.f);
    return 0;
  case JV_STR: json_str(b, v.u.s.p, v.u.s.n); return 0;
  case JV_LIST:
    if (!v.u.l->n) { jj_buf_puts(b, "[]"); return 0; }
    jj_buf_puts(b, "[");
    for (int i = 0; i < v.u.l->n; i++) {
      if (i) jj_buf_puts(b, indent ? "," : ", ");
      if (indent) newline_indent(b, indent, depth + 1);
      if (json_at(b, v.u.l->v[i], indent, sort_keys, depth + 1)) return -1;
    }
    if (indent) newline_indent(b, indent, depth);
    jj_buf_puts(b, "]");
    return 0;
  case JV_DICT: case JV_NS: {
    const jv_dict *d = v.u.d;
    if (!d->n) { jj_buf_puts(b, "{}"); return 0; }
    int *order = jj_alloc(b->a, (size_t)d->n * sizeof *order);
    if (!order) return -1;
    for (int i = 0; i < d->n; i++) order[i] = i;
    if (sort_keys) /* insertion sort: stable, and dicts in templates are small */
      for (int i = 1; i < d->n; i++)
        for (int j = i; j > 0 && key_cmp(&d->k[order[j - 1]], &d->k[order[j]]) > 0; j--) {
          int t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
        }
    jj_buf_puts(b, "{");
    for (int i = 0; i < d->n; i++) {
      const jv *k = &d->k[order[i]];
      if (i) jj_buf_puts(b, indent ? "," : ", ");
      if (indent) newline_indent(b, indent, depth + 1);
      if (k->t == JV_STR) json_str(b, k->u.s.p, k->u.s.n);
      else { /* json.dumps writes other keys as strings */
        jj_buf kb = {.a = b->a};
        if (k->t == JV_NONE) jj_buf_puts(&kb, "null");
        else if (k->t == JV_BOOL) jj_buf_puts(&kb, k->u.b ? "true" : "false");
        else if (k->t == JV_INT || k->t == JV_FLOAT) to_str(&kb, *k, depth);
        else return -1;
        json_str(b, kb.p ? kb.p : "", kb.n);
      }
      jj_buf_puts(b, ": ");
      if (json_at(b, d->v[order[i]], indent, sort_keys, depth + 1)) return -1;
    }
    if (indent) newline_indent(b, indent, depth);
    jj_buf_puts(b, "}");
    return 0;
  }
  default: return -1;
  }
}

int jv_to_json(jj_buf *b, jv v, const char *indent, int sort_keys, int depth) {
  return json_at(b, v, indent, sort_keys, depth);
}

jv jv_from_json(jj_arena *a, const cJSON *j, int depth) {
  jv v = jv_none();
  if (!j || depth > 1000) return v;
  if (cJSON_IsBool(j)) return jv_bool(cJSON_IsTrue(j));
  if (cJSON_IsNumber(j)) {
    double d = j->valuedouble;
    if (d == floor(d) && fabs(d) < 9007199254740992.0) return jv_int((long long)d);
    return jv_float(d);
  }
  if (cJSON_IsString(j)) {
    size_t n = strlen(j->valuestring);
    char *s = jj_strndup(a, j->valuestring, n);
    return s ? jv_str(s, n) : jv_undef(NULL);
  }
  if (cJSON_IsArray(j)) {
    jv_list *l = jv_list_new(a, cJSON_GetArraySize(j));
    if (!l) return jv_undef(NULL);
    const cJSON *e;
    cJSON_ArrayForEach(e, j) if (jv_list_push(a, l, jv_from_json(a, e, depth + 1))) return jv_undef(NULL);
    v.t = JV_LIST;
    v.u.l = l;
    return v;
  }
  if (cJSON_IsObject(j)) {
    jv_dict *d = jv_dict_new(a, cJSON_GetArraySize(j));
    if (!d) return jv_undef(NULL);
    const cJSON *e;
    cJSON_ArrayForEach(e, j) {
      const char *k = e->string ? e->string : "";
      char *ks = jj_strndup(a, k, strlen(k));
      if (!ks || jv_dict_set(a, d, jv_str(ks, strlen(k)), jv_from_json(a, e, depth + 1))) return jv_undef(NULL);
    }
    v.t = JV_DICT;
    v.u.d = d;
    return v;
  }
  return v;
}
