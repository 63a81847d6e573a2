/* Jinja parser: tokens -> tree (jinja_internal.h), with jinja2's grammar
 * and operator precedence, lowest first:
 *   a if c else b;  or;  and;  not;  == != < > <= >= in, not in;
 *   + -;  ~;  * / // %;  **;  unary - +;  then a primary with its postfixes
 *   (.name, [index or slice], (call)) and its filters and tests
 *   (| name(args), is [not] name(args)).
 * Statements: if/elif/else, for (with "if" filter and else), set (a name,
 * ns.attr, or a {% set %}...{% endset %} block), macro, break, continue,
 * and transformers' {% generation %} (rendered as its body). Anything else is
 * an error naming the construct. */
#include <stdio.h>
#include <string.h>

#include "tokenizer/jinja_internal.h"
#include "util/err.h"

typedef struct {
  const jj_tok *t;
  int n, pos, depth;
  jj_arena *a;
  wisp_status st;
} parser;

static const jj_tok *peek(parser *P) { return &P->t[P->pos < P->n ? P->pos : P->n - 1]; }
static const jj_tok *next(parser *P) {
  const jj_tok *t = peek(P);
  if (P->pos < P->n - 1) P->pos++;
  return t;
}

static void *fail_at(parser *P, const jj_tok *t, const char *fmt, const char *arg) {
  if (!P->st) {
    char what[200];
    snprintf(what, sizeof what, fmt, arg);
    P->st = wisp_fail(WISP_EFORMAT, "chat template %d:%d: %s", t->line, t->col, what);
  }
  return NULL;
}
static void *oom(parser *P) {
  if (!P->st) P->st = wisp_fail(WISP_ENOMEM, "out of memory");
  return NULL;
}

static int is_op(const jj_tok *t, const char *op) { return t->kind == TK_OP && !strcmp(t->s, op); }
static int is_name(const jj_tok *t, const char *name) { return t->kind == TK_NAME && !strcmp(t->s, name); }
static int accept_op(parser *P, const char *op) {
  if (!is_op(peek(P), op)) return 0;
  next(P);
  return 1;
}
static int accept_name(parser *P, const char *name) {
  if (!is_name(peek(P), name)) return 0;
  next(P);
  return 1;
}
static int expect_op(parser *P, const char *op) {
  if (accept_op(P, op)) return 1;
  fail_at(P, peek(P), "expected '%s'", op);
  return 0;
}

static const char *tok_desc(const jj_tok *t) {
  switch (t->kind) {
  case TK_TEXT: return "template text";
  case TK_VAR_BEGIN: return "'{{'";
  case TK_VAR_END: return "'}}'";
  case TK_BLOCK_BEGIN: return "'{%'";
  case TK_BLOCK_END: return "'%}'";
  case TK_STRING: return "a string";
  case TK_INT: case TK_FLOAT: return "a number";
  case TK_EOF: return "the end of the template";
  default: return t->s;
  }
}

static jnode *node(parser *P, jnode_kind k, const jj_tok *at) {
  jnode *n = jj_alloc(P->a, sizeof *n);
  if (!n) return oom(P);
  n->k = k;
  n->line = at->line;
  n->col = at->col;
  return n;
}

/* A growing array of nodes (arguments, statements). */
typedef struct {
  jnode **v;
  const char **names;
  int n, cap;
} nodes;

static int nodes_push(parser *P, nodes *l, jnode *x, const char *name) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 4;
    jnode **v = jj_alloc(P->a, (size_t)cap * sizeof *v);
    const char **nm = jj_alloc(P->a, (size_t)cap * sizeof *nm);
    if (!v || !nm) { oom(P); return 0; }
    if (l->n) { memcpy(v, l->v, (size_t)l->n * sizeof *v); memcpy(nm, l->names, (size_t)l->n * sizeof *nm); }
    l->v = v;
    l->names = nm;
    l->cap = cap;
  }
  l->v[l->n] = x;
  l->names[l->n++] = name;
  return 1;
}

static jnode *expr(parser *P);
static jnode *or_expr(parser *P);
static jnode *unary(parser *P, int with_filter);

/* Arguments up to ')': positional, then name=value. */
static int call_args(parser *P, jnode *n) {
  nodes l = {0};
  while (!accept_op(P, ")")) {
    if (l.n && !expect_op(P, ",")) return 0;
    if (l.n && accept_op(P, ")")) break;
    const char *kw = NULL;
    if (peek(P)->kind == TK_NAME && P->pos + 1 < P->n && is_op(&P->t[P->pos + 1], "=")) {
      kw = next(P)->s;
      next(P);
    } else if (is_op(peek(P), "*") || is_op(peek(P), "**")) {
      fail_at(P, peek(P), "unsupported construct '%s' (argument unpacking)", peek(P)->s);
      return 0;
    }
    jnode *v = expr(P);
    if (!v || !nodes_push(P, &l, v, kw)) return 0;
  }
  n->v = l.v;
  n->vname = l.names;
  n->nv = l.n;
  return 1;
}

static jnode *primary(parser *P) {
  const jj_tok *t = next(P);
  jnode *n;
  switch (t->kind) {
  case TK_NAME:
    if (!(n = node(P, E_LIT, t))) return NULL;
    if (!strcmp(t->s, "true") || !strcmp(t->s, "True")) n->lit = jv_bool(1);
    else if (!strcmp(t->s, "false") || !strcmp(t->s, "False")) n->lit = jv_bool(0);
    else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) n->lit = jv_none();
    else { n->k = E_NAME; n->s = t->s; n->sn = t->n; }
    return n;
  case TK_STRING: {
    if (!(n = node(P, E_LIT, t))) return NULL;
    /* adjacent literals join, as in Python */
    size_t len = t->n;
    const char *s = t->s;
    while (peek(P)->kind == TK_STRING) {
      const jj_tok *u = next(P);
      char *j = jj_alloc(P->a, len + u->n + 1);
      if (!j) return oom(P);
      memcpy(j, s, len);
      memcpy(j + len, u->s, u->n);
      s = j;
      len += u->n;
    }
    n->lit = jv_str(s, len);
    return n;
  }
  case TK_INT:
    if ((n = node(P, E_LIT, t))) n->lit = jv_int(t->i);
    return n;
  case TK_FLOAT:
    if ((n = node(P, E_LIT, t))) n->lit = jv_float(t->f);
    return n;
  case TK_OP:
    if (!strcmp(t->s, "(")) {
      if (accept_op(P, ")")) return node(P, E_LIST, t); /* () : an empty tuple */
      jnode *e = expr(P);
      if (!e) return NULL;
      if (is_op(peek(P), ",")) { /* a tuple: a list here */
        nodes l = {0};
        if (!nodes_push(P, &l, e, NULL)) return NULL;
        while (accept_op(P, ",")) {
          if (is_op(peek(P), ")")) break;
          jnode *x = expr(P);
          if (!x || !nodes_push(P, &l, x, NULL)) return NULL;
        }
        if (!(e = node(P, E_LIST, t))) return NULL;
        e->v = l.v;
        e->nv = l.n;
      }
      return expect_op(P, ")") ? e : NULL;
    }
    if (!strcmp(t->s, "[") || !strcmp(t->s, "{")) {
      int dict = t->s[0] == '{';
      const char *close = dict ? "}" : "]";
      if (!(n = node(P, dict ? E_DICT : E_LIST, t))) return NULL;
      nodes l = {0};
      while (!accept_op(P, close)) {
        if (l.n && !expect_op(P, ",")) return NULL;
        if (l.n && accept_op(P, close)) break;
        jnode *x = expr(P);
        if (!x || !nodes_push(P, &l, x, NULL)) return NULL;
        if (dict) {
          if (!expect_op(P, ":") || !(x = expr(P)) || !nodes_push(P, &l, x, NULL)) return NULL;
        }
      }
      n->v = l.v;
      n->nv = l.n;
      return n;
    }
    break;
  default: break;
  }
  return fail_at(P, t, "unexpected %s in an expression", tok_desc(t));
}

/* obj[...]: an index or a slice a:b:c. */
static jnode *subscript(parser *P, jnode *obj, const jj_tok *at) {
  jnode *bound[3] = {NULL, NULL, NULL};
  int colons = 0;
  for (;;) {
    if (is_op(peek(P), ":")) {
      if (++colons > 2) return fail_at(P, peek(P), "unexpected '%s' in a slice", ":");
      next(P);
      continue;
    }
    if (is_op(peek(P), "]")) break;
    if (bound[colons]) return fail_at(P, peek(P), "expected '%s'", "]");
    if (!(bound[colons] = expr(P))) return NULL;
  }
  next(P);
  jnode *n = node(P, colons ? E_SLICE : E_ITEM, at);
  if (!n) return NULL;
  n->a = obj;
  if (!colons) {
    if (!bound[0]) return fail_at(P, at, "empty subscript%s", "");
    n->b = bound[0];
    return n;
  }
  n->v = jj_alloc(P->a, 3 * sizeof *n->v);
  if (!n->v) return oom(P);
  memcpy(n->v, bound, sizeof bound);
  n->nv = 3;
  return n;
}

static jnode *postfix(parser *P, jnode *n) {
  for (;;) {
    const jj_tok *t = peek(P);
    if (is_op(t, ".")) {
      next(P);
      const jj_tok *name = next(P);
      jnode *x;
      if (name->kind == TK_NAME) {
        if (!(x = node(P, E_ATTR, t))) return NULL;
        x->s = name->s;
        x->sn = name->n;
      } else if (name->kind == TK_INT) { /* x.0 is x[0] */
        jnode *i = node(P, E_LIT, name);
        if (!i || !(x = node(P, E_ITEM, t))) return NULL;
        i->lit = jv_int(name->i);
        x->b = i;
      } else return fail_at(P, name, "expected an attribute name after '.', not %s", tok_desc(name));
      x->a = n;
      n = x;
    } else if (is_op(t, "[")) {
      next(P);
      if (!(n = subscript(P, n, t))) return NULL;
    } else if (is_op(t, "(")) {
      next(P);
      jnode *x = node(P, E_CALL, t);
      if (!x) return NULL;
      x->a = n;
      if (!call_args(P, x)) return NULL;
      n = x;
    } else return n;
  }
}

/* | filter(args) and is [not] test(args), after a unary expression. */
static jnode *filters_and_tests(parser *P, jnode *n) {
  for (;;) {
    const jj_tok *t = peek(P);
    if (is_op(t, "|")) {
      next(P);
      const jj_tok *name = next(P);
      if (name->kind != TK_NAME) return fail_at(P, name, "expected a filter name after '|', not %s", tok_desc(name));
      jnode *f = node(P, E_FILTER, name);
      if (!f) return NULL;
      f->s = name->s;
      f->sn = name->n;
      while (accept_op(P, ".")) { /* dotted filter names: none are supported, the name reports it */
        const jj_tok *part = next(P);
        return fail_at(P, part, "unsupported filter '%s'", f->s);
      }
      f->a = n;
      if (accept_op(P, "(") && !call_args(P, f)) return NULL;
      n = f;
    } else if (is_name(t, "is")) {
      next(P);
      jnode *x = node(P, E_TEST, t);
      if (!x) return NULL;
      x->op = accept_name(P, "not");
      const jj_tok *name = next(P);
      if (name->kind != TK_NAME && !(name->kind == TK_OP && (!strcmp(name->s, "==") || !strcmp(name->s, "!=") ||
                                                             !strcmp(name->s, "<") || !strcmp(name->s, ">") ||
                                                             !strcmp(name->s, "<=") || !strcmp(name->s, ">="))))
        return fail_at(P, name, "expected a test name after 'is', not %s", tok_desc(name));
      /* none/true/false lex as names; the tests are named by them */
      x->s = name->s;
      x->sn = name->n;
      x->a = n;
      if (accept_op(P, "(")) {
        if (!call_args(P, x)) return NULL;
      } else {
        /* one argument without parentheses: "is divisibleby 3", "is sameas none" */
        const jj_tok *u = peek(P);
        if (u->kind == TK_STRING || u->kind == TK_INT || u->kind == TK_FLOAT ||
            (u->kind == TK_NAME && strcmp(u->s, "and") && strcmp(u->s, "or") && strcmp(u->s, "else") &&
             strcmp(u->s, "if") && strcmp(u->s, "in") && strcmp(u->s, "is") && strcmp(u->s, "not")) ||
            is_op(u, "[") || is_op(u, "{") || is_op(u, "(")) {
          jnode *arg = unary(P, 0);
          if (!arg) return NULL;
          x->v = jj_alloc(P->a, sizeof *x->v);
          x->vname = jj_alloc(P->a, sizeof *x->vname);
          if (!x->v || !x->vname) return oom(P);
          x->v[0] = arg;
          x->nv = 1;
        }
      }
      n = x;
    } else if (is_op(t, "(")) {
      next(P);
      jnode *x = node(P, E_CALL, t);
      if (!x) return NULL;
      x->a = n;
      if (!call_args(P, x)) return NULL;
      n = x;
    } else return n;
  }
}

static jnode *unary(parser *P, int with_filter) {
  const jj_tok *t = peek(P);
  if (++P->depth > WISP_JINJA_MAX_DEPTH) return fail_at(P, t, "expression nested more than %s deep", "128");
  jnode *n;
  if (is_op(t, "-") || is_op(t, "+")) {
    next(P);
    jnode *x = unary(P, 0);
    if (!x || !(n = node(P, t->s[0] == '-' ? E_NEG : E_POS, t))) return NULL;
    n->a = x;
  } else {
    n = primary(P);
    if (n) n = postfix(P, n);
  }
  if (n && with_filter) n = filters_and_tests(P, n);
  P->depth--;
  return n;
}

static jnode *binary(parser *P, jnode *a, int op, jnode *b, const jj_tok *at) {
  if (!a || !b) return NULL;
  jnode *n = node(P, E_BIN, at);
  if (!n) return NULL;
  n->op = op;
  n->a = a;
  n->b = b;
  return n;
}

static jnode *pow_expr(parser *P) {
  jnode *n = unary(P, 1);
  while (n && is_op(peek(P), "**")) {
    const jj_tok *t = next(P);
    n = binary(P, n, OP_POW, unary(P, 1), t);
  }
  return n;
}

static jnode *mul_expr(parser *P) {
  jnode *n = pow_expr(P);
  for (;;) {
    const jj_tok *t = peek(P);
    int op = is_op(t, "*") ? OP_MUL : is_op(t, "/") ? OP_DIV : is_op(t, "//") ? OP_FLOORDIV : is_op(t, "%") ? OP_MOD : 0;
    if (!n || !op) return n;
    next(P);
    n = binary(P, n, op, pow_expr(P), t);
  }
}

static jnode *concat_expr(parser *P) {
  jnode *n = mul_expr(P);
  while (n && is_op(peek(P), "~")) {
    const jj_tok *t = next(P);
    n = binary(P, n, OP_CONCAT, mul_expr(P), t);
  }
  return n;
}

static jnode *add_expr(parser *P) {
  jnode *n = concat_expr(P);
  for (;;) {
    const jj_tok *t = peek(P);
    int op = is_op(t, "+") ? OP_ADD : is_op(t, "-") ? OP_SUB : 0;
    if (!n || !op) return n;
    next(P);
    n = binary(P, n, op, concat_expr(P), t);
  }
}

/* a < b < c is a < b and b < c (b evaluated twice: templates' operands have
 * no side effects). */
static jnode *compare_expr(parser *P) {
  jnode *n = add_expr(P), *left = n;
  int chained = 0;
  for (;;) {
    const jj_tok *t = peek(P);
    int op = is_op(t, "==") ? OP_EQ : is_op(t, "!=") ? OP_NE : is_op(t, "<") ? OP_LT : is_op(t, ">") ? OP_GT
           : is_op(t, "<=") ? OP_LE : is_op(t, ">=") ? OP_GE : is_name(t, "in") ? OP_IN : 0;
    if (!op && is_name(t, "not") && P->pos + 1 < P->n && is_name(&P->t[P->pos + 1], "in")) {
      next(P);
      op = OP_NOTIN;
    }
    if (!n || !op) return n;
    next(P);
    jnode *right = add_expr(P), *cmp = binary(P, left, op, right, t);
    if (!cmp) return NULL;
    if (!chained) n = cmp;
    else {
      jnode *both = node(P, E_AND, t);
      if (!both) return NULL;
      both->a = n;
      both->b = cmp;
      n = both;
    }
    chained = 1;
    left = right;
  }
}

static jnode *not_expr(parser *P) {
  const jj_tok *t = peek(P);
  if (is_name(t, "not")) {
    next(P);
    if (++P->depth > WISP_JINJA_MAX_DEPTH) return fail_at(P, t, "expression nested more than %s deep", "128");
    jnode *x = not_expr(P), *n;
    P->depth--;
    if (!x || !(n = node(P, E_NOT, t))) return NULL;
    n->a = x;
    return n;
  }
  return compare_expr(P);
}

/* `sub (word sub)*`, left-associative: the and / or levels. */
static jnode *logic_level(parser *P, const char *word, jnode_kind kind, jnode *(*sub)(parser *)) {
  jnode *n = sub(P);
  while (n && is_name(peek(P), word)) {
    const jj_tok *t = next(P);
    jnode *b = sub(P), *x;
    if (!b || !(x = node(P, kind, t))) return NULL;
    x->a = n;
    x->b = b;
    n = x;
  }
  return n;
}

static jnode *and_expr(parser *P) { return logic_level(P, "and", E_AND, not_expr); }
static jnode *or_expr(parser *P) { return logic_level(P, "or", E_OR, and_expr); }

/* a if cond else b (else optional: undefined) */
static jnode *expr(parser *P) {
  if (++P->depth > WISP_JINJA_MAX_DEPTH) return fail_at(P, peek(P), "expression nested more than %s deep", "128");
  jnode *n = or_expr(P);
  while (n && is_name(peek(P), "if")) {
    const jj_tok *t = next(P);
    jnode *x = node(P, E_COND, t);
    if (!x || !(x->b = or_expr(P))) return NULL;
    x->a = n;
    if (accept_name(P, "else") && !(x->c = expr(P))) return NULL;
    n = x;
  }
  P->depth--;
  return n;
}

/* ---- statements ---- */

static int expect_block_end(parser *P) {
  if (peek(P)->kind == TK_BLOCK_END) { next(P); return 1; }
  fail_at(P, peek(P), "expected '%%}', not %s", tok_desc(peek(P)));
  return 0;
}

/* Statements until one of the end names ("endif", "elif", ...) opens a tag;
 * *ended says which (NULL at the end of the template). */
static int body(parser *P, nodes *out, const char *const *ends, const char **ended);

static jnode *stmt_if(parser *P, const jj_tok *at) {
  jnode *n = node(P, N_IF, at);
  if (!n || !(n->a = expr(P)) || !expect_block_end(P)) return NULL;
  static const char *const ends[] = {"elif", "else", "endif", NULL};
  nodes b = {0};
  const char *ended;
  if (!body(P, &b, ends, &ended)) return NULL;
  n->body = b.v;
  n->nbody = b.n;
  if (!ended) return fail_at(P, at, "'if' without '%s'", "endif");
  if (!strcmp(ended, "elif")) {
    if (++P->depth > WISP_JINJA_MAX_DEPTH) return fail_at(P, at, "blocks nested more than %s deep", "128");
    jnode *e = stmt_if(P, &P->t[P->pos - 1]);
    P->depth--;
    if (!e) return NULL;
    n->alt = jj_alloc(P->a, sizeof *n->alt);
    if (!n->alt) return oom(P);
    n->alt[0] = e;
    n->nalt = 1;
    return n; /* the nested if consumed the endif */
  }
  if (!strcmp(ended, "else")) {
    static const char *const ends2[] = {"endif", NULL};
    nodes e = {0};
    if (!expect_block_end(P) || !body(P, &e, ends2, &ended)) return NULL;
    if (!ended) return fail_at(P, at, "'if' without '%s'", "endif");
    n->alt = e.v;
    n->nalt = e.n;
  }
  return expect_block_end(P) ? n : NULL;
}

static jnode *stmt_for(parser *P, const jj_tok *at) {
  jnode *n = node(P, N_FOR, at);
  if (!n) return NULL;
  n->targets = jj_alloc(P->a, 2 * sizeof *n->targets);
  if (!n->targets) return oom(P);
  int paren = accept_op(P, "(");
  do {
    const jj_tok *t = next(P);
    if (t->kind != TK_NAME) return fail_at(P, t, "expected a loop variable, not %s", tok_desc(t));
    if (n->ntargets == 2) return fail_at(P, t, "unsupported construct '%s' (more than two loop variables)", "for");
    n->targets[n->ntargets++] = t->s;
  } while (accept_op(P, ","));
  if (paren && !expect_op(P, ")")) return NULL;
  if (!accept_name(P, "in")) return fail_at(P, peek(P), "expected 'in', not %s", tok_desc(peek(P)));
  if (!(n->a = or_expr(P))) return NULL; /* no "if" here: it is the loop's filter */
  if (accept_name(P, "if") && !(n->b = or_expr(P))) return NULL;
  if (is_name(peek(P), "recursive")) return fail_at(P, peek(P), "unsupported construct '%s'", "recursive");
  if (!expect_block_end(P)) return NULL;
  static const char *const ends[] = {"else", "endfor", NULL};
  nodes b = {0};
  const char *ended;
  if (!body(P, &b, ends, &ended)) return NULL;
  if (!ended) return fail_at(P, at, "'for' without '%s'", "endfor");
  n->body = b.v;
  n->nbody = b.n;
  if (!strcmp(ended, "else")) {
    static const char *const ends2[] = {"endfor", NULL};
    nodes e = {0};
    if (!expect_block_end(P) || !body(P, &e, ends2, &ended)) return NULL;
    if (!ended) return fail_at(P, at, "'for' without '%s'", "endfor");
    n->alt = e.v;
    n->nalt = e.n;
  }
  return expect_block_end(P) ? n : NULL;
}

static jnode *stmt_set(parser *P, const jj_tok *at) {
  const jj_tok *t = next(P);
  if (t->kind != TK_NAME) return fail_at(P, t, "expected a variable name after 'set', not %s", tok_desc(t));
  jnode *n = node(P, N_SET, at);
  if (!n || !(n->targets = jj_alloc(P->a, sizeof *n->targets))) return oom(P);
  n->targets[0] = t->s;
  n->ntargets = 1;
  if (accept_op(P, ".")) { /* ns.attr = value */
    const jj_tok *attr = next(P);
    if (attr->kind != TK_NAME) return fail_at(P, attr, "expected an attribute name, not %s", tok_desc(attr));
    n->s = attr->s;
    n->sn = attr->n;
  }
  if (is_op(peek(P), ",")) return fail_at(P, peek(P), "unsupported construct '%s' (unpacking in set)", "set");
  if (peek(P)->kind == TK_BLOCK_END && !n->s) { /* {% set x %}...{% endset %} */
    next(P);
    static const char *const ends[] = {"endset", NULL};
    nodes b = {0};
    const char *ended;
    if (!body(P, &b, ends, &ended)) return NULL;
    if (!ended) return fail_at(P, at, "'set' without '%s'", "endset");
    n->k = N_SETBLOCK;
    n->body = b.v;
    n->nbody = b.n;
    return expect_block_end(P) ? n : NULL;
  }
  if (!expect_op(P, "=") || !(n->a = expr(P))) return NULL;
  if (is_op(peek(P), ",")) return fail_at(P, peek(P), "unsupported construct '%s' (a tuple in set)", "set");
  return expect_block_end(P) ? n : NULL;
}

static jnode *stmt_macro(parser *P, const jj_tok *at) {
  const jj_tok *t = next(P);
  if (t->kind != TK_NAME) return fail_at(P, t, "expected a macro name, not %s", tok_desc(t));
  jnode *n = node(P, N_MACRO, at);
  if (!n || !expect_op(P, "(")) return NULL;
  n->s = t->s;
  n->sn = t->n;
  nodes params = {0}; /* v: defaults; names: parameter names */
  while (!accept_op(P, ")")) {
    if (params.n && !expect_op(P, ",")) return NULL;
    const jj_tok *p = next(P);
    if (p->kind != TK_NAME) return fail_at(P, p, "expected a parameter name, not %s", tok_desc(p));
    jnode *def = NULL;
    if (accept_op(P, "=") && !(def = expr(P))) return NULL;
    if (!nodes_push(P, &params, def, p->s)) return NULL;
  }
  n->v = params.v;
  n->targets = params.names;
  n->nv = n->ntargets = params.n;
  if (!expect_block_end(P)) return NULL;
  static const char *const ends[] = {"endmacro", NULL};
  nodes b = {0};
  const char *ended;
  if (!body(P, &b, ends, &ended)) return NULL;
  if (!ended) return fail_at(P, at, "'macro' without '%s'", "endmacro");
  n->body = b.v;
  n->nbody = b.n;
  return expect_block_end(P) ? n : NULL;
}

static jnode *statement(parser *P, const char *const *ends, const char **ended) {
  const jj_tok *at = next(P); /* the '{%' */
  const jj_tok *kw = next(P);
  if (kw->kind != TK_NAME) return fail_at(P, kw, "expected a statement name, not %s", tok_desc(kw));
  for (int i = 0; ends && ends[i]; i++)
    if (!strcmp(kw->s, ends[i])) {
      *ended = ends[i];
      return NULL;
    }
  if (++P->depth > WISP_JINJA_MAX_DEPTH) return fail_at(P, kw, "blocks nested more than %s deep", "128");
  jnode *n = NULL;
  if (!strcmp(kw->s, "if")) n = stmt_if(P, at);
  else if (!strcmp(kw->s, "for")) n = stmt_for(P, at);
  else if (!strcmp(kw->s, "set")) n = stmt_set(P, at);
  else if (!strcmp(kw->s, "macro")) n = stmt_macro(P, at);
  else if (!strcmp(kw->s, "break") || !strcmp(kw->s, "continue")) {
    if ((n = node(P, kw->s[0] == 'b' ? N_BREAK : N_CONTINUE, at)) && !expect_block_end(P)) n = NULL;
  } else if (!strcmp(kw->s, "generation")) { /* transformers' assistant-mask tag: its body renders as is */
    static const char *const gends[] = {"endgeneration", NULL};
    nodes b = {0};
    const char *gended;
    if (expect_block_end(P) && body(P, &b, gends, &gended)) {
      if (!gended) n = fail_at(P, at, "'generation' without '%s'", "endgeneration");
      else if ((n = node(P, N_BLOCK, at))) {
        n->body = b.v;
        n->nbody = b.n;
        if (!expect_block_end(P)) n = NULL;
      }
    }
  } else if (!strcmp(kw->s, "elif") || !strcmp(kw->s, "else") || !strncmp(kw->s, "end", 3))
    n = fail_at(P, kw, "unexpected '%s'", kw->s);
  else
    n = fail_at(P, kw, "unsupported construct '%s'", kw->s);
  P->depth--;
  return n;
}

static int body(parser *P, nodes *out, const char *const *ends, const char **ended) {
  *ended = NULL;
  for (;;) {
    const jj_tok *t = peek(P);
    jnode *n = NULL;
    switch (t->kind) {
    case TK_EOF: return 1;
    case TK_TEXT:
      next(P);
      if ((n = node(P, N_TEXT, t))) { n->s = t->s; n->sn = t->n; }
      break;
    case TK_VAR_BEGIN: {
      next(P);
      jnode *e = expr(P);
      if (!e) return 0;
      if (peek(P)->kind != TK_VAR_END) {
        fail_at(P, peek(P), "expected '}}', not %s", tok_desc(peek(P)));
        return 0;
      }
      next(P);
      if ((n = node(P, N_OUT, t))) n->a = e;
      break;
    }
    case TK_BLOCK_BEGIN:
      n = statement(P, ends, ended);
      if (*ended) return 1;
      break;
    default:
      fail_at(P, t, "unexpected %s", tok_desc(t));
      return 0;
    }
    if (!n || !nodes_push(P, out, n, NULL)) return 0;
  }
}

wisp_status jj_parse(const jj_tok *toks, int n, jj_arena *a, jnode **root) {
  parser P = {.t = toks, .n = n, .a = a};
  *root = NULL;
  nodes b = {0};
  const char *ended;
  jnode *r = NULL;
  if (body(&P, &b, NULL, &ended) && (r = node(&P, N_BLOCK, toks))) {
    r->body = b.v;
    r->nbody = b.n;
  }
  if (P.st) return P.st;
  if (!r) return wisp_fail(WISP_ENOMEM, "out of memory");
  *root = r;
  return WISP_OK;
}
