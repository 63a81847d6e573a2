/* The kernel registry: operations, their bindings/uniforms and variants
 * (WGSL or CPU kernels), loaded from JSON in the schema of the seed registry
 * plus wisp's extensions (variant `backend`, operation `ruleChain`, top-level
 * `ruleChains`). See docs/plan.md. */
#ifndef WISP_PLAN_REGISTRY_H
#define WISP_PLAN_REGISTRY_H

#include <cJSON.h>

#include "plan/pjson.h"
#include "plan/rules.h"
#include "wisp.h"

/* `$schema` value that marks wisp's own registry (turns on strict checks). */
#define WISP_REGISTRY_SCHEMA "wisp-kernel-registry-v1"
/* The defaults are the copies built into the library (util/builtin.h): a
 * run never reads them from the working directory. Options name files on
 * disk instead (wisp registry FILE, --kernels-dir DIR). */
#define WISP_DEFAULT_KERNELS_DIR "builtin:src/backend/webgpu/kernels"
#define WISP_DEFAULT_REGISTRY "builtin:kernels/registry.json"

typedef struct {
  int index;
  const char *name; /* may be NULL */
  const char *type; /* uniform | storage | read-only-storage */
} wisp_binding;

typedef struct {
  const char *name;
  const char *type; /* u32, i32, f32, f16 */
  int offset;
} wisp_uniform_field;

typedef struct {
  int size; /* -1 when the file gives none (map form) */
  int n_fields;
  wisp_uniform_field *fields;
} wisp_uniforms;

typedef enum { WISP_META_NUM, WISP_META_STR, WISP_META_BOOL } wisp_meta_type;
typedef struct {
  const char *key;
  wisp_meta_type type;
  double num;
  const char *str;
  int b;
} wisp_meta;

typedef struct {
  const char *key;
  const char *backend;     /* "webgpu" (default) | "cpu" */
  const char *wgsl;        /* file name under the kernels dir; NULL for cpu */
  const char *entry_point;
  int workgroup[3];
  int n_requires;
  const char **requires;
  const char *output_dtype, *weight_dtype, *input_dtype, *description; /* may be NULL */
  int n_meta;
  wisp_meta *meta;               /* variantMetadata */
  int n_wgsl_overrides;
  wisp_meta *wgsl_overrides;
  int n_bindings_override;
  wisp_binding *bindings_override;
  int has_uniforms_override;
  wisp_uniforms uniforms_override;
  const char *reach_status;      /* reachability.status, may be NULL */
  int n_rule_refs;
  const char **rule_refs;        /* reachability.ruleChains */
  int available;                 /* cpu, or its WGSL file exists in the kernels dir */
} wisp_variant;

typedef struct {
  const char *name;
  const char *description;
  int n_bindings;
  wisp_binding *bindings;
  wisp_uniforms uniforms;
  const char *rule_chain; /* wisp: chain choosing the variant, NULL = first usable */
  int n_variants;
  wisp_variant *variants;
} wisp_operation;

typedef struct {
  const char *name;
  const cJSON *rules; /* array of {match, value} */
} wisp_rule_chain;

typedef struct {
  char *path;
  char *kernels_dir;
  const char *schema, *version;
  int strict;
  int n_ops;
  wisp_operation *ops;
  int n_chains;
  wisp_rule_chain *chains;
  int n_variants, n_available;
  int n_external_refs;   /* reachability.ruleChains naming rule files not loaded */
  cJSON *doc;
  wisp_arena *arena;
} wisp_registry;

typedef struct {
  const char *kernels_dir; /* NULL: WISP_DEFAULT_KERNELS_DIR */
  const char *rules_dir;   /* where "FILE#CHAIN" references are looked up; NULL: <registry dir>/rules */
  int strict;              /* 1 force, 0 auto (on when $schema is WISP_REGISTRY_SCHEMA) */
} wisp_registry_options;

wisp_status wisp_registry_load(const char *path, const wisp_registry_options *opt, wisp_registry **out);
void wisp_registry_free(wisp_registry *r);
const wisp_operation *wisp_registry_op(const wisp_registry *r, const char *name);
const wisp_variant *wisp_registry_variant(const wisp_operation *op, const char *key);
const wisp_rule_chain *wisp_registry_chain(const wisp_registry *r, const char *name);
/* 1 when every `requires` feature is on the device; else 0 and *missing
 * names the first one lacking. */
int wisp_variant_supported(const wisp_variant *v, const wisp_device_caps *d, const char **missing);
const wisp_meta *wisp_variant_meta(const wisp_variant *v, const char *key);

#endif
