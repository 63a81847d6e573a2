/* Selection rules: ordered {match, value} entries evaluated against a small
 * typed context (device capabilities + the op's shapes); first match wins.
 *
 *   match: {} (always) or {KEY: LITERAL | {OP: OPERAND, ...}, ...}; all keys
 *          must hold. OP is eq, neq, gt, gte, lt, lte, in (OPERAND an array of
 *          literals), contains (string context value contains OPERAND).
 *          A key absent from the context makes the rule not match.
 *   value: a literal, {"context": KEY} or {"template": "text {KEY} text"}.
 * See docs/plan.md. */
#ifndef WISP_PLAN_RULES_H
#define WISP_PLAN_RULES_H

#include <cJSON.h>

#include "backend/caps.h"
#include "wisp.h"

typedef enum { WISP_V_NONE = 0, WISP_V_BOOL, WISP_V_NUM, WISP_V_STR } wisp_vtype;

typedef struct {
  wisp_vtype type;
  int b;
  double num;
  char str[64];
} wisp_value;

#define WISP_CTX_MAX 48
typedef struct {
  int n;
  struct { char key[48]; wisp_value v; } e[WISP_CTX_MAX];
} wisp_ctx;

void wisp_ctx_init(wisp_ctx *c);
void wisp_ctx_set_bool(wisp_ctx *c, const char *key, int v);
void wisp_ctx_set_num(wisp_ctx *c, const char *key, double v);
void wisp_ctx_set_str(wisp_ctx *c, const char *key, const char *v);
const wisp_value *wisp_ctx_get(const wisp_ctx *c, const char *key);
/* Formats a value as text ("true", "4096", "apple"). */
void wisp_value_format(const wisp_value *v, char *out, size_t cap);

/* The device's context keys (backend/caps.h) into c. */
void wisp_ctx_add_device(wisp_ctx *c, const wisp_device_caps *d);

/* Keys a rule may name (device keys above plus the op context keys: op,
 * section, phase, layer, layerType, tokens, rows, cols, hidden, ffn, vocab,
 * heads, kvHeads, headDim, weightDtype, quantBits). */
int wisp_ctx_key_known(const char *key);

/* Validates one chain (an array of rules). `where` prefixes messages, e.g.
 * "kernels/registry.json: ruleChains.matmul.variant". check_keys rejects
 * keys wisp_ctx_key_known does not know. */
wisp_status wisp_rules_validate(const cJSON *chain, const char *where, int check_keys);
int wisp_rule_matches(const cJSON *rule, const wisp_ctx *ctx);
/* Evaluates a rule's value to text. Fails when a context key is absent. */
wisp_status wisp_rule_value(const cJSON *rule, const wisp_ctx *ctx, char *out, size_t cap);

/* Walks the chain: the first rule that matches and whose value `accept`
 * approves wins (accept may be NULL). *index = its position, or -1 when none
 * matched. */
typedef int (*wisp_rule_accept)(const char *value, void *ud);
wisp_status wisp_rules_select(const cJSON *chain, const wisp_ctx *ctx, wisp_rule_accept accept, void *ud,
                              int *index, char *out, size_t cap);

#endif
