/* See rules.h. */
#include "plan/rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/pjson.h"
#include "util/err.h"

void wisp_ctx_init(wisp_ctx *c) { memset(c, 0, sizeof *c); }

static wisp_value *ctx_slot(wisp_ctx *c, const char *key) {
  for (int i = 0; i < c->n; i++)
    if (!strcmp(c->e[i].key, key)) return &c->e[i].v;
  if (c->n >= WISP_CTX_MAX) return NULL;
  snprintf(c->e[c->n].key, sizeof c->e[c->n].key, "%s", key);
  return &c->e[c->n++].v;
}

void wisp_ctx_set_bool(wisp_ctx *c, const char *key, int v) {
  wisp_value *s = ctx_slot(c, key);
  if (s) { memset(s, 0, sizeof *s); s->type = WISP_V_BOOL; s->b = v ? 1 : 0; }
}
void wisp_ctx_set_num(wisp_ctx *c, const char *key, double v) {
  wisp_value *s = ctx_slot(c, key);
  if (s) { memset(s, 0, sizeof *s); s->type = WISP_V_NUM; s->num = v; }
}
void wisp_ctx_set_str(wisp_ctx *c, const char *key, const char *v) {
  wisp_value *s = ctx_slot(c, key);
  if (s) { memset(s, 0, sizeof *s); s->type = WISP_V_STR; snprintf(s->str, sizeof s->str, "%s", v ? v : ""); }
}
const wisp_value *wisp_ctx_get(const wisp_ctx *c, const char *key) {
  for (int i = 0; i < c->n; i++)
    if (!strcmp(c->e[i].key, key)) return &c->e[i].v;
  return NULL;
}

void wisp_value_format(const wisp_value *v, char *out, size_t cap) {
  switch (v->type) {
    case WISP_V_BOOL: snprintf(out, cap, "%s", v->b ? "true" : "false"); break;
    case WISP_V_NUM:
      if (v->num == (double)(long long)v->num) snprintf(out, cap, "%lld", (long long)v->num);
      else snprintf(out, cap, "%g", v->num);
      break;
    case WISP_V_STR: snprintf(out, cap, "%s", v->str); break;
    default: snprintf(out, cap, "%s", "");
  }
}

void wisp_ctx_add_device(wisp_ctx *c, const wisp_device_caps *d) {
  wisp_ctx_set_str(c, "backend", d->backend);
  wisp_ctx_set_str(c, "vendor", d->vendor);
  wisp_ctx_set_bool(c, "hasSubgroups", d->has_subgroups);
  wisp_ctx_set_num(c, "subgroupSize", d->subgroup_size);
  wisp_ctx_set_bool(c, "hasF16", d->has_f16);
  wisp_ctx_set_bool(c, "hasAvx2", d->has_avx2);
  wisp_ctx_set_num(c, "limits.maxComputeInvocationsPerWorkgroup", d->max_workgroup_size);
  wisp_ctx_set_num(c, "limits.maxComputeWorkgroupStorageSize", d->max_shared_bytes);
}

static const char *const k_keys[] = {
    "backend", "vendor", "hasSubgroups", "subgroupSize", "hasF16", "hasAvx2",
    "limits.maxComputeInvocationsPerWorkgroup", "limits.maxComputeWorkgroupStorageSize",
    "op", "section", "phase", "layer", "layerType", "tokens", "rows", "cols", "hidden", "ffn",
    "vocab", "heads", "kvHeads", "headDim", "weightDtype", "quantBits", "convFuse", "architecture", "intent"};

int wisp_ctx_key_known(const char *key) {
  for (size_t i = 0; i < sizeof k_keys / sizeof k_keys[0]; i++)
    if (!strcmp(k_keys[i], key)) return 1;
  return 0;
}

static int is_literal(const cJSON *j) { return cJSON_IsString(j) || cJSON_IsNumber(j) || cJSON_IsBool(j); }

static const char *const k_ops[] = {"eq", "neq", "gt", "gte", "lt", "lte", "in", "contains"};

static int op_known(const char *op) {
  for (size_t i = 0; i < sizeof k_ops / sizeof k_ops[0]; i++)
    if (!strcmp(k_ops[i], op)) return 1;
  return 0;
}

/* Checks the {KEY} placeholders of a template. */
static wisp_status check_template(const char *t, const char *where, int check_keys) {
  const char *p = t;
  while ((p = strchr(p, '{'))) {
    const char *e = strchr(p, '}');
    if (!e) return wisp_fail(WISP_EFORMAT, "%s: template '%s': unclosed '{'", where, t);
    char key[64];
    size_t kl = (size_t)(e - p - 1);
    if (kl == 0 || kl >= sizeof key) return wisp_fail(WISP_EFORMAT, "%s: template '%s': bad placeholder", where, t);
    memcpy(key, p + 1, kl);
    key[kl] = 0;
    if (check_keys && !wisp_ctx_key_known(key))
      return wisp_fail(WISP_EFORMAT, "%s: template '%s': unknown context key '%s'", where, t, key);
    p = e + 1;
  }
  return WISP_OK;
}

wisp_status wisp_rules_validate(const cJSON *chain, const char *where, int check_keys) {
  char w[512];
  if (!cJSON_IsArray(chain)) return wisp_fail(WISP_EFORMAT, "%s: expected an array of rules, got %s", where, wisp_json_type(chain));
  int i = 0;
  for (const cJSON *r = chain->child; r; r = r->next, i++) {
    snprintf(w, sizeof w, "%s[%d]", where, i);
    if (!cJSON_IsObject(r)) return wisp_fail(WISP_EFORMAT, "%s: expected an object, got %s", w, wisp_json_type(r));
    for (const cJSON *k = r->child; k; k = k->next)
      if (strcmp(k->string, "match") && strcmp(k->string, "value") && strcmp(k->string, "description"))
        return wisp_fail(WISP_EFORMAT, "%s.%s: unknown field", w, k->string);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(r, "match");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r, "value");
    if (!m) return wisp_fail(WISP_EFORMAT, "%s.match: missing", w);
    if (!cJSON_IsObject(m)) return wisp_fail(WISP_EFORMAT, "%s.match: expected an object, got %s", w, wisp_json_type(m));
    for (const cJSON *k = m->child; k; k = k->next) {
      if (check_keys && !wisp_ctx_key_known(k->string))
        return wisp_fail(WISP_EFORMAT, "%s.match.%s: unknown context key", w, k->string);
      if (is_literal(k)) continue;
      if (!cJSON_IsObject(k) || !k->child)
        return wisp_fail(WISP_EFORMAT, "%s.match.%s: expected a literal or an operator object, got %s", w, k->string, wisp_json_type(k));
      for (const cJSON *o = k->child; o; o = o->next) {
        if (!op_known(o->string))
          return wisp_fail(WISP_EFORMAT, "%s.match.%s.%s: unknown operator (eq, neq, gt, gte, lt, lte, in, contains)", w, k->string, o->string);
        const char *op = o->string;
        if ((!strcmp(op, "gt") || !strcmp(op, "gte") || !strcmp(op, "lt") || !strcmp(op, "lte")) && !cJSON_IsNumber(o))
          return wisp_fail(WISP_EFORMAT, "%s.match.%s.%s: expected a number, got %s", w, k->string, op, wisp_json_type(o));
        if (!strcmp(op, "contains") && !cJSON_IsString(o))
          return wisp_fail(WISP_EFORMAT, "%s.match.%s.%s: expected a string, got %s", w, k->string, op, wisp_json_type(o));
        if ((!strcmp(op, "eq") || !strcmp(op, "neq")) && !is_literal(o))
          return wisp_fail(WISP_EFORMAT, "%s.match.%s.%s: expected a literal, got %s", w, k->string, op, wisp_json_type(o));
        if (!strcmp(op, "in")) {
          if (!cJSON_IsArray(o)) return wisp_fail(WISP_EFORMAT, "%s.match.%s.in: expected an array, got %s", w, k->string, wisp_json_type(o));
          for (const cJSON *x = o->child; x; x = x->next)
            if (!is_literal(x)) return wisp_fail(WISP_EFORMAT, "%s.match.%s.in: expected literals, got %s", w, k->string, wisp_json_type(x));
        }
      }
    }
    if (!v) return wisp_fail(WISP_EFORMAT, "%s.value: missing", w);
    if (is_literal(v)) continue;
    if (cJSON_IsObject(v) && cJSON_GetArraySize(v) == 1) {
      const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "context");
      const cJSON *t = cJSON_GetObjectItemCaseSensitive(v, "template");
      if (cJSON_IsString(c)) {
        if (check_keys && !wisp_ctx_key_known(c->valuestring))
          return wisp_fail(WISP_EFORMAT, "%s.value.context: unknown context key '%s'", w, c->valuestring);
        continue;
      }
      if (cJSON_IsString(t)) {
        char ww[560];
        snprintf(ww, sizeof ww, "%s.value", w);
        wisp_status st = check_template(t->valuestring, ww, check_keys);
        if (st) return st;
        continue;
      }
    }
    return wisp_fail(WISP_EFORMAT, "%s.value: expected a literal, {\"context\": KEY} or {\"template\": TEXT}", w);
  }
  return WISP_OK;
}

static int lit_eq(const cJSON *lit, const wisp_value *v) {
  if (cJSON_IsBool(lit)) return v->type == WISP_V_BOOL && v->b == (cJSON_IsTrue(lit) ? 1 : 0);
  if (cJSON_IsNumber(lit)) return v->type == WISP_V_NUM && v->num == lit->valuedouble;
  if (cJSON_IsString(lit)) return v->type == WISP_V_STR && !strcmp(v->str, lit->valuestring);
  return 0;
}

static int op_holds(const char *op, const cJSON *o, const wisp_value *v) {
  if (!strcmp(op, "eq")) return lit_eq(o, v);
  if (!strcmp(op, "neq")) return !lit_eq(o, v);
  if (!strcmp(op, "in")) {
    for (const cJSON *x = o->child; x; x = x->next)
      if (lit_eq(x, v)) return 1;
    return 0;
  }
  if (!strcmp(op, "contains")) return v->type == WISP_V_STR && cJSON_IsString(o) && strstr(v->str, o->valuestring) != NULL;
  if (v->type != WISP_V_NUM || !cJSON_IsNumber(o)) return 0;
  double a = v->num, b = o->valuedouble;
  if (!strcmp(op, "gt")) return a > b;
  if (!strcmp(op, "gte")) return a >= b;
  if (!strcmp(op, "lt")) return a < b;
  if (!strcmp(op, "lte")) return a <= b;
  return 0;
}

int wisp_rule_matches(const cJSON *rule, const wisp_ctx *ctx) {
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(rule, "match");
  if (!m) return 1;
  for (const cJSON *k = m->child; k; k = k->next) {
    const wisp_value *v = wisp_ctx_get(ctx, k->string);
    if (!v) return 0;
    if (is_literal(k)) {
      if (!lit_eq(k, v)) return 0;
      continue;
    }
    for (const cJSON *o = k->child; o; o = o->next)
      if (!op_holds(o->string, o, v)) return 0;
  }
  return 1;
}

wisp_status wisp_rule_value(const cJSON *rule, const wisp_ctx *ctx, char *out, size_t cap) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(rule, "value");
  if (cJSON_IsString(v)) { snprintf(out, cap, "%s", v->valuestring); return WISP_OK; }
  if (cJSON_IsNumber(v) || cJSON_IsBool(v)) {
    wisp_value tmp = {0};
    if (cJSON_IsBool(v)) { tmp.type = WISP_V_BOOL; tmp.b = cJSON_IsTrue(v); }
    else { tmp.type = WISP_V_NUM; tmp.num = v->valuedouble; }
    wisp_value_format(&tmp, out, cap);
    return WISP_OK;
  }
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "context");
  if (cJSON_IsString(c)) {
    const wisp_value *x = wisp_ctx_get(ctx, c->valuestring);
    if (!x) return wisp_fail(WISP_EINVAL, "value.context: context has no key '%s'", c->valuestring);
    wisp_value_format(x, out, cap);
    return WISP_OK;
  }
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(v, "template");
  if (cJSON_IsString(t)) {
    size_t n = 0;
    if (cap) out[0] = 0;
    for (const char *p = t->valuestring; *p;) {
      if (*p == '{') {
        const char *e = strchr(p, '}');
        char key[64], val[96];
        size_t kl = e ? (size_t)(e - p - 1) : 0;
        if (!e || kl == 0 || kl >= sizeof key) return wisp_fail(WISP_EFORMAT, "value.template '%s': bad placeholder", t->valuestring);
        memcpy(key, p + 1, kl);
        key[kl] = 0;
        const wisp_value *x = wisp_ctx_get(ctx, key);
        if (!x) return wisp_fail(WISP_EINVAL, "value.template '%s': context has no key '%s'", t->valuestring, key);
        wisp_value_format(x, val, sizeof val);
        for (const char *q = val; *q && n + 1 < cap; q++) out[n++] = *q;
        p = e + 1;
      } else {
        if (n + 1 < cap) out[n++] = *p;
        p++;
      }
    }
    if (cap) out[n < cap ? n : cap - 1] = 0;
    return WISP_OK;
  }
  return wisp_fail(WISP_EFORMAT, "value: not a literal, context or template");
}

wisp_status wisp_rules_select(const cJSON *chain, const wisp_ctx *ctx, wisp_rule_accept accept, void *ud,
                              int *index, char *out, size_t cap) {
  *index = -1;
  if (cap) out[0] = 0;
  int i = 0;
  for (const cJSON *r = chain ? chain->child : NULL; r; r = r->next, i++) {
    if (!wisp_rule_matches(r, ctx)) continue;
    char val[128];
    wisp_status st = wisp_rule_value(r, ctx, val, sizeof val);
    if (st) {
      wisp_error_prefix("rule [%d]", i);
      return st;
    }
    if (accept && !accept(val, ud)) continue;
    snprintf(out, cap, "%s", val);
    *index = i;
    return WISP_OK;
  }
  return WISP_OK;
}
