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

/* What the device offers. Context keys: backend, vendor, hasSubgroups,
 * subgroupSize, hasF16, hasAvx2, limits.maxComputeInvocationsPerWorkgroup,
 * limits.maxComputeWorkgroupStorageSize. */
typedef struct {
  char backend[16]; /* "cpu" | "webgpu" */
  char vendor[32];
  char name[96];    /* the adapter's description ("NVIDIA H200"); "" on the CPU */
  int has_subgroups;
  int subgroup_size;
  int has_f16;
  int has_avx2;
  int max_workgroup_size;  /* limits.maxComputeInvocationsPerWorkgroup */
  int max_shared_bytes;    /* limits.maxComputeWorkgroupStorageSize */
} wisp_device_caps;

/* Defaults for a backend: cpu detects AVX2 on this machine; webgpu assumes
 * subgroups (32 lanes), f16, 1024 invocations, 16 KiB shared, vendor "unknown". */
void wisp_device_caps_default(wisp_device_caps *d, const char *backend);
/* Applies "key=value" (a context key name above) to d. */
wisp_status wisp_device_caps_set(wisp_device_caps *d, const char *assignment);
void wisp_ctx_add_device(wisp_ctx *c, const wisp_device_caps *d);
/* Whether the device offers a `requires` feature: "subgroups", "shader-f16",
 * "avx2". Returns -1 for a feature name wisp does not know. */
int wisp_device_has(const wisp_device_caps *d, const char *feature);
int wisp_feature_known(const char *feature);

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
