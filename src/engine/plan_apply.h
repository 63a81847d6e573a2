/* A session's plan (plan_apply.c): resolved from the model, the device,
 * a profile and the registry, checked against the backend, and handed to
 * the session's bound graph and to the backend's settings. */
#ifndef WISP_ENGINE_PLAN_APPLY_H
#define WISP_ENGINE_PLAN_APPLY_H

#include "engine/internal.h"

/* Resolves the plan for a model on a device; profile NULL or "" = the
 * built-in profiles/default, registry NULL = the built-in
 * kernels/registry.json (else a file). */
wisp_status wisp_engine_resolve_plan(const wisp_model *m, const wisp_device_caps *caps, const char *profile,
                                     const char *registry, wisp_plan **out);
/* Weight bytes one decode token reads: every matrix the decode plan multiplies
 * (the embedding contributes one row and is left out). */
uint64_t wisp_engine_decode_weight_bytes(const wisp_model *m, const wisp_plan *p);
/* Every op of the plan that runs on `be` names a kernel the backend runs,
 * with the WGSL file the backend loads for it (backend.h, check_kernel);
 * else a one-line error naming the op. */
wisp_status wisp_engine_check_kernels(const wisp_plan *p, wisp_backend *be);
/* Hands the plan's kernel choices to a session's bound graph (its own
 * copies of the model's matrices and mixer choices). */
wisp_status wisp_engine_apply_plan(wisp_graph *g, const wisp_plan *p);
/* The kernel choice a plan op hands to the backend (what wisp_engine_apply_plan
 * puts in a bound matrix's choice[phase]): the variant (or "profile:" + the WGSL
 * file's stem) and its geometry. */
wisp_status wisp_engine_kernel_choice(wisp_kernel_choice *c, const wisp_plan_op *op);
/* The backend's prefill_paths lines (backend.h) for model m under plan p:
 * the model's graph bound and given the plan's choices as a session's is,
 * its matrices handed to the backend. Nothing when the backend has no
 * such hook; a failure to bind or apply is a one-line error. */
wisp_status wisp_engine_prefill_paths(const wisp_model *m, const wisp_plan *p, wisp_backend *be, char *out, size_t cap);
/* The plan's settings for wisp_backend.configure (fills and returns *s). */
const wisp_backend_settings *wisp_engine_backend_settings(const wisp_plan *p, wisp_backend_settings *s);

#endif
