/* See pjson.h. */
#include "plan/pjson.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/builtin.h"
#include "util/err.h"
#include "util/file.h"

/* Whole file or NULL (with the error set); util/file.h's wisp_read_file. */
char *wisp_slurp(const char *path, size_t *len) {
  char *text = NULL;
  return wisp_read_file(path, &text, len) == WISP_OK ? text : NULL;
}

int wisp_file_exists(const char *path) {
  if (wisp_is_builtin(path)) return wisp_builtin_find(path) != NULL;
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int cmp_str_ptr(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Finds a duplicated key in any object under j; writes its path into buf. */
static int find_dup(const cJSON *j, char *path, size_t cap, size_t used) {
  if (cJSON_IsObject(j)) {
    int n = cJSON_GetArraySize(j);
    if (n > 1) {
      const char **names = malloc(sizeof(char *) * (size_t)n);
      if (!names) return 0;
      int i = 0;
      for (const cJSON *c = j->child; c; c = c->next) names[i++] = c->string ? c->string : "";
      qsort(names, (size_t)n, sizeof *names, cmp_str_ptr);
      for (i = 1; i < n; i++)
        if (!strcmp(names[i], names[i - 1])) {
          snprintf(path + used, cap - used, "%s%s", used ? "." : "", names[i]);
          free(names);
          return 1;
        }
      free(names);
    }
    for (const cJSON *c = j->child; c; c = c->next) {
      int k = snprintf(path + used, cap - used, "%s%s", used ? "." : "", c->string ? c->string : "");
      size_t nu = used + (k > 0 ? (size_t)k : 0);
      if (nu >= cap) nu = cap - 1;
      if (find_dup(c, path, cap, nu)) return 1;
    }
    path[used] = 0;
  } else if (cJSON_IsArray(j)) {
    int i = 0;
    for (const cJSON *c = j->child; c; c = c->next, i++) {
      int k = snprintf(path + used, cap - used, "[%d]", i);
      size_t nu = used + (k > 0 ? (size_t)k : 0);
      if (nu >= cap) nu = cap - 1;
      if (find_dup(c, path, cap, nu)) return 1;
    }
    path[used] = 0;
  }
  return 0;
}

wisp_status wisp_json_parse(const char *name, const char *text, size_t len, cJSON **out) {
  *out = NULL;
  const char *end = NULL;
  cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, 0);
  if (!j) {
    size_t off = end && end >= text ? (size_t)(end - text) : 0;
    int line = 1, col = 1;
    for (size_t i = 0; i < off && i < len; i++) {
      if (text[i] == '\n') { line++; col = 1; } else col++;
    }
    return wisp_fail(WISP_EFORMAT, "%s: invalid JSON at line %d column %d", name, line, col);
  }
  /* Trailing garbage after the value. */
  if (end) {
    while ((size_t)(end - text) < len && (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t')) end++;
    if ((size_t)(end - text) < len && *end) {
      cJSON_Delete(j);
      return wisp_fail(WISP_EFORMAT, "%s: invalid JSON: trailing data after the top-level value", name);
    }
  }
  char path[512];
  path[0] = 0;
  if (find_dup(j, path, sizeof path, 0)) {
    cJSON_Delete(j);
    return wisp_fail(WISP_EFORMAT, "%s: %s: duplicate key", name, path);
  }
  *out = j;
  return WISP_OK;
}

wisp_status wisp_json_load(const char *path, cJSON **out) {
  size_t len = 0;
  *out = NULL;
  char *text = wisp_slurp(path, &len);
  if (!text) return WISP_EIO;
  wisp_status st = wisp_json_parse(path, text, len, out);
  free(text);
  return st;
}


wisp_status wisp_sha256_file_hex(const char *path, char hex[65]) {
  size_t len = 0;
  char *data = wisp_slurp(path, &len);
  if (!data) return WISP_EIO;
  wisp_sha256_hex(data, len, hex);
  free(data);
  return WISP_OK;
}

/* A growable string. */
typedef struct { char *s; size_t n, cap; int oom; } sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t nc = b->cap ? b->cap : 256;
    while (nc < b->n + n + 1) nc *= 2;
    char *ns = realloc(b->s, nc);
    if (!ns) { b->oom = 1; return; }
    b->s = ns; b->cap = nc;
  }
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = 0;
}
static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_str(sbuf *b, const char *s) {
  sb_put(b, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    char esc[8];
    switch (*p) {
      case '"': sb_put(b, "\\\"", 2); break;
      case '\\': sb_put(b, "\\\\", 2); break;
      case '\n': sb_put(b, "\\n", 2); break;
      case '\r': sb_put(b, "\\r", 2); break;
      case '\t': sb_put(b, "\\t", 2); break;
      case '\b': sb_put(b, "\\b", 2); break;
      case '\f': sb_put(b, "\\f", 2); break;
      default:
        if (*p < 0x20) { snprintf(esc, sizeof esc, "\\u%04x", *p); sb_puts(b, esc); }
        else sb_put(b, (const char *)p, 1);
    }
  }
  sb_put(b, "\"", 1);
}

static int cmp_child(const void *a, const void *b) {
  const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
  return strcmp(x->string ? x->string : "", y->string ? y->string : "");
}

static void canon(sbuf *b, const cJSON *j) {
  char num[64];
  if (!j || cJSON_IsNull(j)) { sb_puts(b, "null"); return; }
  if (cJSON_IsTrue(j)) { sb_puts(b, "true"); return; }
  if (cJSON_IsFalse(j)) { sb_puts(b, "false"); return; }
  if (cJSON_IsNumber(j)) {
    double v = j->valuedouble;
    if (!isfinite(v)) sb_puts(b, "null");
    else if (v == floor(v) && fabs(v) < 9007199254740992.0) { snprintf(num, sizeof num, "%lld", (long long)v); sb_puts(b, num); }
    else { snprintf(num, sizeof num, "%.17g", v); sb_puts(b, num); }
    return;
  }
  if (cJSON_IsString(j)) { sb_str(b, j->valuestring ? j->valuestring : ""); return; }
  if (cJSON_IsArray(j)) {
    sb_put(b, "[", 1);
    for (const cJSON *c = j->child; c; c = c->next) {
      canon(b, c);
      if (c->next) sb_put(b, ",", 1);
    }
    sb_put(b, "]", 1);
    return;
  }
  if (cJSON_IsObject(j)) {
    int n = cJSON_GetArraySize(j);
    const cJSON **kids = n ? malloc(sizeof(cJSON *) * (size_t)n) : NULL;
    if (n && !kids) { b->oom = 1; return; }
    int i = 0;
    for (const cJSON *c = j->child; c; c = c->next) kids[i++] = c;
    if (n) qsort(kids, (size_t)n, sizeof *kids, cmp_child); /* qsort(NULL, 0) is undefined */
    sb_put(b, "{", 1);
    for (i = 0; i < n; i++) {
      sb_str(b, kids[i]->string ? kids[i]->string : "");
      sb_put(b, ":", 1);
      canon(b, kids[i]);
      if (i + 1 < n) sb_put(b, ",", 1);
    }
    sb_put(b, "}", 1);
    free(kids);
    return;
  }
  sb_puts(b, "null");
}

char *wisp_json_canonical(const cJSON *j) {
  sbuf b = {0};
  canon(&b, j);
  if (b.oom) { free(b.s); return NULL; }
  if (!b.s) { b.s = malloc(1); if (b.s) b.s[0] = 0; }
  return b.s;
}

const char *wisp_json_type(const cJSON *j) {
  if (!j) return "missing";
  if (cJSON_IsString(j)) return "string";
  if (cJSON_IsNumber(j)) return "number";
  if (cJSON_IsBool(j)) return "boolean";
  if (cJSON_IsNull(j)) return "null";
  if (cJSON_IsArray(j)) return "array";
  if (cJSON_IsObject(j)) return "object";
  return "invalid";
}

int wisp_json_is_int(const cJSON *j) {
  return cJSON_IsNumber(j) && isfinite(j->valuedouble) && j->valuedouble == floor(j->valuedouble) &&
         fabs(j->valuedouble) < 2147483648.0;
}

struct wisp_arena {
  struct wisp_arena *next;
  size_t used, cap;
  max_align_t data[];
};

void *wisp_arena_alloc(wisp_arena **a, size_t n) {
  size_t need = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
  if (!need) need = sizeof(max_align_t);
  if (!*a || (*a)->used + need > (*a)->cap) {
    size_t cap = need > 16384 ? need : 16384;
    wisp_arena *b = malloc(sizeof *b + cap);
    if (!b) return NULL;
    b->next = *a;
    b->used = 0;
    b->cap = cap;
    *a = b;
  }
  void *p = (char *)(*a)->data + (*a)->used;
  (*a)->used += need;
  memset(p, 0, n);
  return p;
}

char *wisp_arena_strdup(wisp_arena **a, const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *d = wisp_arena_alloc(a, n);
  if (d) memcpy(d, s, n);
  return d;
}

void wisp_arena_free(wisp_arena *a) {
  while (a) {
    wisp_arena *n = a->next;
    free(a);
    a = n;
  }
}

static int ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

int wisp_wgsl_has_entry(const char *src, const char *entry) {
  size_t el = strlen(entry);
  for (const char *p = src; (p = strstr(p, "fn")); p += 2) {
    if (p > src && ident_char(p[-1])) continue;
    const char *q = p + 2;
    if (*q != ' ' && *q != '\t' && *q != '\n' && *q != '\r') continue;
    while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r') q++;
    if (strncmp(q, entry, el) || ident_char(q[el])) continue;
    q += el;
    while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r') q++;
    if (*q == '(') return 1;
  }
  return 0;
}

void wisp_path(char *dst, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dst, cap, fmt, ap);
  va_end(ap);
}
