/* Shared by the pieces of the Jinja renderer (see jinja.h): the arena every
 * piece allocates from, the tokens, the tree and the values. */
#ifndef WISP_JINJA_INTERNAL_H
#define WISP_JINJA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tokenizer/jinja.h"

/* ---- Arena: one per parsed template and one per render, freed at once.
 * A render's arena has a byte limit: a template that grows strings or lists
 * without end fails instead of exhausting memory. */
typedef struct jj_chunk jj_chunk;
typedef struct {
  jj_chunk *head;
  size_t total, limit;
} jj_arena;

/* n zeroed bytes; NULL past the limit or on OOM. */
void *jj_alloc(jj_arena *a, size_t n);
char *jj_strndup(jj_arena *a, const char *s, size_t n);
void jj_arena_free(jj_arena *a);

/* ---- Tokens (jinja_lex.c) ---- */
typedef enum {
  TK_TEXT,        /* template data, whitespace control already applied */
  TK_VAR_BEGIN,   /* {{ */
  TK_VAR_END,     /* }} */
  TK_BLOCK_BEGIN, /* {% */
  TK_BLOCK_END,   /* %} */
  TK_NAME,
  TK_STRING,      /* s: the decoded value */
  TK_INT,
  TK_FLOAT,
  TK_OP,          /* s: the operator's characters */
  TK_EOF
} jj_tok_kind;

typedef struct {
  jj_tok_kind kind;
  const char *s;
  size_t n;
  long long i;
  double f;
  int line, col;
} jj_tok;

wisp_status jj_lex(const char *source, jj_arena *a, jj_tok **toks, int *n_toks);

/* ---- Values (jinja_value.c) ---- */
typedef enum { JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_NS, JV_MACRO, JV_FUNC } jv_type;

typedef struct jv_list jv_list;
typedef struct jv_dict jv_dict;
typedef struct jnode jnode;

typedef struct {
  jv_type t;
  union {
    int b;
    long long i;
    double f;
    struct {
      const char *p; /* JV_STR: the bytes; JV_UNDEF: the missing name (may be NULL) */
      size_t n;
    } s;
    jv_list *l;
    jv_dict *d;            /* JV_DICT and JV_NS (a namespace is a mutable dict) */
    const jnode *macro;
    int func;              /* JV_FUNC: which global function (jinja_builtin.c) */
  } u;
} jv;

struct jv_list {
  jv *v;
  int n, cap;
};
struct jv_dict {
  jv *k, *v; /* keys are strings or numbers; insertion order is kept */
  int n, cap;
};

static inline jv jv_undef(const char *name) { jv v = {JV_UNDEF, {0}}; v.u.s.p = name; v.u.s.n = name ? strlen(name) : 0; return v; }
static inline jv jv_none(void) { jv v = {JV_NONE, {0}}; return v; }
static inline jv jv_bool(int b) { jv v = {JV_BOOL, {0}}; v.u.b = !!b; return v; }
static inline jv jv_int(long long i) { jv v = {JV_INT, {0}}; v.u.i = i; return v; }
static inline jv jv_float(double f) { jv v = {JV_FLOAT, {0}}; v.u.f = f; return v; }
static inline jv jv_str(const char *p, size_t n) { jv v = {JV_STR, {0}}; v.u.s.p = p; v.u.s.n = n; return v; }

/* A growing byte string in an arena (the render's output, str(), tojson). */
typedef struct {
  jj_arena *a;
  char *p;
  size_t n, cap, limit;
  int failed; /* over the limit or out of arena */
} jj_buf;

void jj_buf_put(jj_buf *b, const char *s, size_t n);
static inline void jj_buf_puts(jj_buf *b, const char *s) { jj_buf_put(b, s, strlen(s)); }

jv_list *jv_list_new(jj_arena *a, int cap);
int jv_list_push(jj_arena *a, jv_list *l, jv v);   /* -1 out of arena */
jv_dict *jv_dict_new(jj_arena *a, int cap);
int jv_dict_set(jj_arena *a, jv_dict *d, jv k, jv v);
const jv *jv_dict_get(const jv_dict *d, const char *key, size_t n);
const jv *jv_dict_find(const jv_dict *d, jv key);

int jv_truthy(jv v);
int jv_equal(jv a, jv b);
const char *jv_type_name(jv v);
/* Python's str(v) into b (repr for the items of lists and dicts). */
void jv_to_str(jj_buf *b, jv v);
/* Python's json.dumps(v, ensure_ascii=False, indent=indent, sort_keys=...):
 * 0 ok, -1 a value JSON cannot hold (undefined, a macro). indent NULL: one
 * line with ", " and ": " separators. */
int jv_to_json(jj_buf *b, jv v, const char *indent, int sort_keys, int depth);
/* Python's repr of a float. */
void jv_float_repr(jj_buf *b, double f);
/* A JSON tree as a value (numbers with no fraction below 2^53 are ints). */
jv jv_from_json(jj_arena *a, const cJSON *j, int depth);
/* UTF-8 code points in s[0..n) (Python's len of a str). */
size_t jv_utf8_len(const char *s, size_t n);
/* Byte offset of code point i (0 <= i <= len). */
size_t jv_utf8_offset(const char *s, size_t n, size_t i);

/* ---- The tree (jinja_parse.c) ---- */
typedef enum {
  N_TEXT, N_OUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_BREAK, N_CONTINUE, N_BLOCK,
  E_LIT, E_NAME, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_FILTER, E_TEST, E_BIN, E_NEG, E_POS, E_NOT, E_AND, E_OR,
  E_COND, E_LIST, E_DICT
} jnode_kind;

/* Binary operators (E_BIN op) */
enum { OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT, OP_EQ, OP_NE, OP_LT, OP_GT, OP_LE, OP_GE, OP_IN, OP_NOTIN };

struct jnode {
  jnode_kind k;
  int line, col;
  int op;            /* E_BIN: the operator; E_TEST: 1 for "is not" */
  const char *s;     /* names: variable, attribute, filter, test, macro; N_TEXT: the text */
  size_t sn;
  jv lit;            /* E_LIT */
  jnode *a, *b, *c;  /* operands; N_FOR: a iterable, b filter; N_IF: a condition; N_SET: a value */
  jnode **v;         /* arguments, list items, dict key/value pairs, slice bounds, macro defaults */
  const char **vname;/* keyword argument names (NULL: positional) */
  int nv;
  jnode **body, **alt; /* statements; alt: else (an elif is an N_IF alone in alt) */
  int nbody, nalt;
  const char **targets; /* N_FOR loop variables, N_SET/N_SETBLOCK name, N_MACRO parameters */
  int ntargets;
};

struct wisp_jinja {
  jj_arena arena;
  jnode *root; /* N_BLOCK */
};

wisp_status jj_parse(const jj_tok *toks, int n, jj_arena *a, jnode **root);

/* ---- Evaluation (jinja_eval.c / jinja_builtin.c) ---- */
typedef struct jj_frame jj_frame;
typedef struct jj_ctx jj_ctx;

/* Fails the render: a one-line message at the node's position; returns -1. */
int jj_error(jj_ctx *c, const jnode *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
jj_arena *jj_ctx_arena(jj_ctx *c);
time_t jj_ctx_now(jj_ctx *c);
int jj_step(jj_ctx *c, const jnode *at); /* counts one loop step; -1 past the limit */
/* Calls a macro value with evaluated arguments. */
int jj_call_macro(jj_ctx *c, const jnode *at, jv macro, const jv *args, int nargs, const char **kwn, const jv *kwv,
                  int nkw, jv *out);
/* str(v) as a string value in the render's arena. */
int jj_str(jj_ctx *c, const jnode *at, jv v, jv *out);

/* Builtins: 0 done, -1 error, 1 no such name. */
enum { JF_RAISE = 1, JF_STRFTIME, JF_NAMESPACE, JF_RANGE, JF_DICT };
int jj_global(const char *name, size_t n, jv *out);
int jj_call_global(jj_ctx *c, const jnode *at, int func, const jv *args, int nargs, const char **kwn, const jv *kwv,
                   int nkw, jv *out);
int jj_filter(jj_ctx *c, const jnode *at, const char *name, jv in, const jv *args, int nargs, const char **kwn,
              const jv *kwv, int nkw, jv *out);
int jj_test(jj_ctx *c, const jnode *at, const char *name, jv in, const jv *args, int nargs, int *result);
int jj_method(jj_ctx *c, const jnode *at, jv obj, const char *name, const jv *args, int nargs, const char **kwn,
              const jv *kwv, int nkw, jv *out);

#endif
