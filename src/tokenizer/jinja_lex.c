/* Jinja lexer: template text -> tokens (jinja_internal.h).
 *
 * It applies whitespace control the way jinja2's lexer does with the
 * settings transformers renders chat templates with:
 *   - newlines are normalised to "\n" and one trailing newline of the
 *     template is dropped (keep_trailing_newline off);
 *   - "{%-" / "{{-" / "{#-" strip all whitespace before the tag, "-%}" /
 *     "-}}" / "-#}" all whitespace after it;
 *   - trim_blocks: the first newline after a block or comment tag goes;
 *   - lstrip_blocks: spaces and tabs between the start of a line and a block
 *     or comment tag go ("{%+" keeps them, "+%}" keeps the newline). */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja_internal.h"
#include "util/err.h"

typedef struct {
  jj_arena *a;
  jj_tok *t;
  int n, cap;
  const char *src;
  const char *seen; /* tokens come in order: line and column count on from here */
  int line, col;
} lexer;

/* The line and column of p (at or after the last position asked for). */
static void where(lexer *L, const char *p, int *line, int *col) {
  if (p < L->seen) { L->seen = L->src; L->line = L->col = 1; }
  for (; L->seen < p; L->seen++) {
    if (*L->seen == '\n') { L->line++; L->col = 1; }
    else L->col++;
  }
  *line = L->line;
  *col = L->col;
}

static wisp_status lex_fail(lexer *L, const char *at, const char *what) {
  int line, col;
  where(L, at, &line, &col);
  return wisp_fail(WISP_EFORMAT, "chat template %d:%d: %s", line, col, what);
}

static jj_tok *push(lexer *L, jj_tok_kind kind, const char *at) {
  if (L->n == L->cap) {
    int cap = L->cap ? 2 * L->cap : 256;
    jj_tok *t = jj_alloc(L->a, (size_t)cap * sizeof *t);
    if (!t) return NULL;
    if (L->n) memcpy(t, L->t, (size_t)L->n * sizeof *t);
    L->t = t;
    L->cap = cap;
  }
  jj_tok *t = &L->t[L->n++];
  memset(t, 0, sizeof *t);
  t->kind = kind;
  where(L, at, &t->line, &t->col);
  return t;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* The length of the whitespace character at p (NUL-terminated), 0 if none:
 * Python's str.isspace, which jinja2's whitespace control uses (\s and
 * rstrip), so a no-break or ideographic space is stripped too. */
static size_t ws_at(const char *p) {
  unsigned char a = (unsigned char)p[0], b = a ? (unsigned char)p[1] : 0, c = b ? (unsigned char)p[2] : 0;
  if (is_ws((char)a) || (a >= 0x1c && a <= 0x1f)) return 1;
  if (a == 0xC2 && (b == 0x85 || b == 0xA0)) return 2;
  if ((a == 0xE1 && b == 0x9A && c == 0x80) || (a == 0xE2 && b == 0x81 && c == 0x9F) || (a == 0xE3 && b == 0x80 && c == 0x80))
    return 3;
  if (a == 0xE2 && b == 0x80 && ((c >= 0x80 && c <= 0x8A) || c == 0xA8 || c == 0xA9 || c == 0xAF)) return 3;
  return 0;
}

/* The length of the whitespace character that ends at p (after start), 0 if none. */
static size_t ws_before(const char *start, const char *p) {
  for (size_t k = 1; k <= 3 && p - start >= (ptrdiff_t)k; k++)
    if (ws_at(p - k) == k) return k;
  return 0;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static void put_utf8(char *o, size_t *k, unsigned cp) {
  if (cp < 0x80) o[(*k)++] = (char)cp;
  else if (cp < 0x800) { o[(*k)++] = (char)(0xC0 | cp >> 6); o[(*k)++] = (char)(0x80 | (cp & 63)); }
  else if (cp < 0x10000) {
    o[(*k)++] = (char)(0xE0 | cp >> 12); o[(*k)++] = (char)(0x80 | ((cp >> 6) & 63)); o[(*k)++] = (char)(0x80 | (cp & 63));
  } else {
    o[(*k)++] = (char)(0xF0 | cp >> 18); o[(*k)++] = (char)(0x80 | ((cp >> 12) & 63));
    o[(*k)++] = (char)(0x80 | ((cp >> 6) & 63)); o[(*k)++] = (char)(0x80 | (cp & 63));
  }
}

/* A string literal's value: Python's "unicode-escape" rules, which jinja2
 * applies to literals (unknown escapes keep their backslash). */
static char *unescape(jj_arena *a, const char *s, size_t n, size_t *out_n) {
  char *o = jj_alloc(a, n + 1);
  if (!o) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] != '\\' || i + 1 >= n) { o[k++] = s[i]; continue; }
    char e = s[++i];
    switch (e) {
    case '\n': break; /* a line continuation */
    case '\\': o[k++] = '\\'; break;
    case '\'': o[k++] = '\''; break;
    case '"': o[k++] = '"'; break;
    case 'a': o[k++] = '\a'; break;
    case 'b': o[k++] = '\b'; break;
    case 'f': o[k++] = '\f'; break;
    case 'n': o[k++] = '\n'; break;
    case 'r': o[k++] = '\r'; break;
    case 't': o[k++] = '\t'; break;
    case 'v': o[k++] = '\v'; break;
    case 'x': case 'u': case 'U': {
      int len = e == 'x' ? 2 : e == 'u' ? 4 : 8;
      unsigned cp = 0;
      int ok = i + (size_t)len < n;
      for (int d = 1; ok && d <= len; d++) {
        int h = hexval(s[i + (size_t)d]);
        if (h < 0) ok = 0;
        else cp = cp * 16 + (unsigned)h;
      }
      if (!ok || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) { o[k++] = '\\'; o[k++] = e; break; }
      put_utf8(o, &k, cp); /* at most 4 bytes for at least 4 source bytes */
      i += (size_t)len;
      break;
    }
    default:
      if (e >= '0' && e <= '7') {
        unsigned cp = 0;
        int d = 0;
        while (d < 3 && i < n && s[i] >= '0' && s[i] <= '7') { cp = cp * 8 + (unsigned)(s[i] - '0'); i++; d++; }
        i--;
        if (cp < 0x80) o[k++] = (char)cp;
        else if (d == 3) put_utf8(o, &k, cp); /* 2 bytes for 4 source bytes */
        break;
      }
      o[k++] = '\\';
      o[k++] = e;
    }
  }
  o[k] = 0;
  *out_n = k;
  return o;
}

static const char *const OPS2[] = {"//", "**", "==", "!=", "<=", ">="};
static const char OPS1[] = "+-*/%~<>=()[]{}.,:|";

/* The tokens inside one {{ }} or {% %}; *p ends past the closer. end_var:
 * the tag is {{ }}. Returns the closer's trailing strip: 0 none, '-' strip
 * all whitespace, 'n' strip one newline (trim_blocks), '+' keep. */
static wisp_status lex_tag(lexer *L, const char **pp, int end_var, int *closer) {
  const char *p = *pp;
  int depth = 0; /* open brackets: a closer inside them is not one */
  for (;;) {
    while (is_ws(*p)) p++;
    if (!*p) return lex_fail(L, p, end_var ? "unclosed '{{'" : "unclosed '{%'");
    if (depth == 0) {
      const char *close = end_var ? "}}" : "%}";
      int strip = 0;
      const char *q = p;
      if (*q == '-' && !strncmp(q + 1, close, 2)) { strip = '-'; q++; }
      else if (!end_var && *q == '+' && !strncmp(q + 1, close, 2)) { strip = '+'; q++; }
      if (!strncmp(q, close, 2)) {
        if (!push(L, end_var ? TK_VAR_END : TK_BLOCK_END, p)) return wisp_fail(WISP_ENOMEM, "out of memory");
        q += 2;
        *closer = strip ? strip : (end_var ? 0 : 'n');
        *pp = q;
        return WISP_OK;
      }
    }
    jj_tok *t;
    if (isdigit((unsigned char)*p)) {
      const char *q = p;
      while (isdigit((unsigned char)*q) || (*q == '_' && isdigit((unsigned char)q[1]))) q++;
      int is_float = 0;
      if (*q == '.' && isdigit((unsigned char)q[1])) { is_float = 1; q++; while (isdigit((unsigned char)*q)) q++; }
      if ((*q == 'e' || *q == 'E') && (isdigit((unsigned char)q[1]) || ((q[1] == '+' || q[1] == '-') && isdigit((unsigned char)q[2])))) {
        is_float = 1;
        q += 2;
        while (isdigit((unsigned char)*q)) q++;
      }
      char num[64];
      size_t k = 0;
      for (const char *r = p; r < q && k < sizeof num - 1; r++)
        if (*r != '_') num[k++] = *r;
      num[k] = 0;
      if (!(t = push(L, is_float ? TK_FLOAT : TK_INT, p))) return wisp_fail(WISP_ENOMEM, "out of memory");
      if (is_float) t->f = strtod(num, NULL);
      else {
        char *end;
        errno = 0;
        t->i = strtoll(num, &end, 10);
        if (errno || q - p > 19) return lex_fail(L, p, "integer literal too large");
      }
      p = q;
    } else if (isalpha((unsigned char)*p) || *p == '_') {
      const char *q = p;
      while (isalnum((unsigned char)*q) || *q == '_') q++;
      if (!(t = push(L, TK_NAME, p)) || !(t->s = jj_strndup(L->a, p, (size_t)(q - p))))
        return wisp_fail(WISP_ENOMEM, "out of memory");
      t->n = (size_t)(q - p);
      p = q;
    } else if (*p == '\'' || *p == '"') {
      char quote = *p;
      const char *q = p + 1;
      while (*q && *q != quote) q += (*q == '\\' && q[1]) ? 2 : 1;
      if (!*q) return lex_fail(L, p, "unterminated string literal");
      if (!(t = push(L, TK_STRING, p)) || !(t->s = unescape(L->a, p + 1, (size_t)(q - p - 1), &t->n)))
        return wisp_fail(WISP_ENOMEM, "out of memory");
      p = q + 1;
    } else {
      size_t len = 0;
      for (size_t i = 0; i < sizeof OPS2 / sizeof *OPS2; i++)
        if (!strncmp(p, OPS2[i], 2)) len = 2;
      if (!len && strchr(OPS1, *p)) len = 1;
      if (!len) {
        char what[64];
        snprintf(what, sizeof what, "unexpected character '%c'", isprint((unsigned char)*p) ? *p : '?');
        return lex_fail(L, p, what);
      }
      if (!(t = push(L, TK_OP, p)) || !(t->s = jj_strndup(L->a, p, len))) return wisp_fail(WISP_ENOMEM, "out of memory");
      t->n = len;
      if (strchr("([{", *p)) depth++;
      if (strchr(")]}", *p) && depth > 0) depth--;
      p += len;
    }
  }
}

/* Drops one trailing newline and turns "\r\n" and "\r" into "\n". */
static char *normalise(const char *src) {
  size_t n = strlen(src);
  char *o = malloc(n + 1);
  if (!o) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (src[i] == '\r') {
      o[k++] = '\n';
      if (src[i + 1] == '\n') i++;
    } else o[k++] = src[i];
  }
  if (k && o[k - 1] == '\n') k--;
  o[k] = 0;
  return o;
}

static wisp_status lex_all(lexer *L) {
  const char *p = L->src;
  int trail = 0;          /* the previous tag's strip of what follows it */
  int line_starting = 1;  /* the previous match ended a line (lstrip_blocks) */
  for (;;) {
    /* What trails the previous tag. */
    size_t k;
    if (trail == '-')
      while ((k = ws_at(p))) p += k;
    else if (trail == 'n' && *p == '\n') p++;
    if (trail == '-' || trail == 'n') line_starting = p > L->src && p[-1] == '\n';
    const char *tag = p;
    while (*tag && !(tag[0] == '{' && (tag[1] == '{' || tag[1] == '%' || tag[1] == '#'))) tag++;
    const char *text_end = tag;
    if (*tag) {
      char kind = tag[1], sign = tag[2];
      if (sign == '-') {
        while (text_end > p && (k = ws_before(p, text_end))) text_end -= k;
      } else if (sign != '+' && kind != '{') { /* lstrip_blocks */
        const char *l = text_end;
        while (l > p && l[-1] != '\n') l--;
        int blank = l < text_end;
        for (const char *q = l; q < text_end && blank; q += k)
          if (!(k = ws_at(q))) blank = 0;
        if (blank && (l > p || line_starting)) text_end = l;
      }
    }
    if (text_end > p) {
      jj_tok *t = push(L, TK_TEXT, p);
      if (!t || !(t->s = jj_strndup(L->a, p, (size_t)(text_end - p)))) return wisp_fail(WISP_ENOMEM, "out of memory");
      t->n = (size_t)(text_end - p);
    }
    if (!*tag) break;
    char kind = tag[1];
    const char *q = tag + 2;
    if (*q == '-' || (*q == '+' && kind != '{')) q++;
    if (kind == '#') {
      const char *e = strstr(q, "#}");
      if (!e) return lex_fail(L, tag, "unclosed comment '{#'");
      trail = e > q && e[-1] == '-' ? '-' : e > q && e[-1] == '+' ? '+' : 'n';
      p = e + 2;
      line_starting = p[-1] == '\n';
      continue;
    }
    if (!push(L, kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, tag)) return wisp_fail(WISP_ENOMEM, "out of memory");
    wisp_status st = lex_tag(L, &q, kind == '{', &trail);
    if (st) return st;
    p = q;
    line_starting = 0;
  }
  if (!push(L, TK_EOF, p)) return wisp_fail(WISP_ENOMEM, "out of memory");
  return WISP_OK;
}

wisp_status jj_lex(const char *source, jj_arena *a, jj_tok **toks, int *n_toks) {
  *toks = NULL;
  *n_toks = 0;
  char *src = normalise(source);
  if (!src) return wisp_fail(WISP_ENOMEM, "out of memory");
  lexer L = {.a = a, .src = src, .seen = src, .line = 1, .col = 1};
  wisp_status st = lex_all(&L);
  free(src);
  if (st) return st;
  *toks = L.t;
  *n_toks = L.n;
  return WISP_OK;
}
