/* A session's execution plan: resolved from the artifact (shape, tuned
 * candidate/knee), the kernel registry, a runtime profile and the device's
 * capabilities, then handed to the session's bound graph (its own copies of
 * the model's matrices) as kernel choices that the backend executes. `wisp plan` prints the very plan this resolves. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/plan_apply.h"
#include "format/quant.h"
#include "plan/registry.h"
#include "plan/tuned.h"
#include "util/err.h"

wisp_status wisp_engine_resolve_plan(const wisp_model *m, const wisp_device_caps *caps, const char *profile_ref,
                                     const char *registry, wisp_plan **out) {
  *out = NULL;
  /* The registry, profiles and WGSL built into the library unless the
   * caller names a registry file: nothing comes from the working directory. */
  const char *reg_path = registry && *registry ? registry : WISP_DEFAULT_REGISTRY;
  const char *kernels_dir = WISP_DEFAULT_KERNELS_DIR, *profiles_dir = WISP_DEFAULT_PROFILES_DIR;
  wisp_model_shape shape;
  wisp_status st = m->arch->plan_shape(m->weights, &shape);
  if (st) return st;
  wisp_registry_options ropt = {.kernels_dir = kernels_dir};
  wisp_registry *reg = NULL;
  wisp_profile *prof = NULL;
  if ((st = wisp_registry_load(reg_path, &ropt, &reg))) return st;
  wisp_profile_options popt = {.profiles_dir = profiles_dir, .kernels_dir = kernels_dir};
  if (!profile_ref || !*profile_ref) profile_ref = "default";
  if ((st = wisp_profile_load(profile_ref, &popt, &prof))) goto done;
  const cJSON *manifest = m->artifact->manifest;
  /* This device's tuned entry (wisp tune), laid over the manifest's own
   * candidate and knee; the plan says which entry it used and which it
   * ignored, and why. */
  wisp_tuned_choice tuned;
  cJSON *candidate = NULL, *knee = NULL;
  char where[1100];
  snprintf(where, sizeof where, "%s/manifest.json", m->artifact->dir ? m->artifact->dir : ".");
  if ((st = wisp_tuned_select(manifest, where, caps, WISP_VERSION, reg, &tuned))) goto done;
  if ((st = wisp_tuned_overlay(cJSON_GetObjectItemCaseSensitive(manifest, "candidate"),
                               cJSON_GetObjectItemCaseSensitive(m->artifact->runtime, "knee"), &tuned, &candidate, &knee)))
    goto done;
  wisp_plan_inputs in = {
      .shape = &shape,
      .graph = &m->graph,
      .candidate = candidate,
      .knee = knee,
      .profile = prof,
      .registry = reg,
      .device = caps,
      .backend = caps->backend,
      .tuned = &tuned,
  };
  st = wisp_plan_resolve(&in, out);
  cJSON_Delete(candidate);
  cJSON_Delete(knee);
done:
  wisp_profile_free(prof);
  wisp_registry_free(reg);
  return st;
}

/* "matmul/q4_avx2" -> "q4_avx2"; a profile kernel key stays as it is. */
static const char *variant_of(const char *kernel) {
  const char *slash = strchr(kernel, '/');
  return slash ? slash + 1 : kernel;
}

/* The choice handed to the backend: a registry variant's name, or for a
 * profile kernel (addKernels key, no '/') "profile:" + its WGSL file's stem,
 * so the backend knows which file it is; the profile's COLS_PER_WG and
 * THREADS_PER_COL_GEMV constants travel as rows_per_subgroup and
 * subgroups_per_row (fused_matmul_q4_metal_simd16.wgsl reads them so). */
wisp_status wisp_engine_kernel_choice(wisp_kernel_choice *c, const wisp_plan_op *op) {
  char v[160];
  if (!strchr(op->kernel, '/') && op->wgsl[0]) {
    snprintf(v, sizeof v, "profile:%s", op->wgsl);
    char *dot = strstr(v, ".wgsl");
    if (dot) *dot = 0;
  } else {
    snprintf(v, sizeof v, "%s", variant_of(op->kernel));
  }
  if (strlen(v) >= sizeof c->variant) return wisp_fail(WISP_EINVAL, "plan: kernel name '%s' is too long", v);
  memcpy(c->variant, v, strlen(v) + 1);
  c->workgroup_size = op->geometry.workgroup_size;
  c->rows_per_subgroup = op->geometry.rows_per_subgroup;
  c->subgroups_per_row = op->geometry.subgroups_per_row;
  for (int i = 0; i < op->n_constants; i++) {
    if (!strcmp(op->constants[i].key, "COLS_PER_WG")) c->rows_per_subgroup = (int)op->constants[i].value;
    if (!strcmp(op->constants[i].key, "THREADS_PER_COL_GEMV")) c->subgroups_per_row = (int)op->constants[i].value;
  }
  return WISP_OK;
}

/* Part i of a matmul by a matrix in row parts, as an op of its own (its
 * kernel, the op's geometry and constants). */
static const wisp_plan_op *part_op(const wisp_plan_op *op, int i, wisp_plan_op *part) {
  *part = *op;
  snprintf(part->kernel, sizeof part->kernel, "%s", op->parts[i].kernel);
  snprintf(part->wgsl, sizeof part->wgsl, "%s", op->parts[i].wgsl);
  part->geometry = op->parts[i].geometry;
  part->n_parts = 0;
  return part;
}

static wisp_status apply_op(wisp_graph *g, int phase, const wisp_plan_op *op, int layer) {
  if (strcmp(op->op, "matmul") != 0) {
    /* A mixer node that takes the plan's kernel (a profile's attention kernel). */
    const wisp_gnode *n = layer >= 0 ? wisp_graph_find(g, layer, op->section, NULL) : NULL;
    wisp_kernel_choice *cc = n && !strcmp(wisp_gop_name(n->op), op->op) ? n->choice : NULL;
    return cc ? wisp_engine_kernel_choice(&cc[phase], op) : WISP_OK;
  }
  wisp_matrix *w = wisp_graph_matrix(g, layer, op->section);
  if (!w) return wisp_fail(WISP_EINVAL, "plan: matmul '%s' at layer %d has no matrix in this model", op->section, layer);
  const int mixed = wisp_matrix_mixed(w) ? w->n_parts : 0;
  if (mixed != op->n_parts)
    return wisp_fail(WISP_EINVAL, "plan: matmul '%s' at layer %d: the plan has %d parts of different types, the "
                     "matrix %d", op->section, layer, op->n_parts, mixed);
  wisp_status st = WISP_OK;
  wisp_plan_op part;
  for (int i = 0; i < op->n_parts && !st; i++)
    st = wisp_engine_kernel_choice(&w->parts[i].choice[phase], part_op(op, i, &part));
  /* parts of one type run the whole's kernel (a backend that runs them one
   * by one, as the CPU does, reads each part's choice) */
  for (int i = 0; i < w->n_parts && !mixed && !st; i++) st = wisp_engine_kernel_choice(&w->parts[i].choice[phase], op);
  return st ? st : wisp_engine_kernel_choice(&w->choice[phase], op);
}

/* One op of the plan against the backend's check_kernel. A host variant
 * (the sampler on the host: a registry variant without a WGSL file in a
 * webgpu plan, or any op of another backend's plan) is not the backend's. */
static wisp_status check_op(wisp_backend *be, const wisp_plan_phase *phase, const wisp_plan_op *op) {
  if (strcmp(op->backend, be->name) || (strchr(op->kernel, '/') && !op->wgsl[0])) return WISP_OK;
  wisp_kernel_choice c;
  memset(&c, 0, sizeof c);
  wisp_status st = wisp_engine_kernel_choice(&c, op);
  if (!st) st = be->check_kernel(be, op->op, c.variant, op->wgsl);
  for (int i = 0; i < op->n_parts && !st; i++) { /* a matrix in row parts: each part's kernel */
    wisp_plan_op part;
    if (!(st = wisp_engine_kernel_choice(&c, part_op(op, i, &part))))
      st = be->check_kernel(be, op->op, c.variant, part.wgsl);
  }
  if (st) wisp_error_prefix("plan: %s %s%s%s", phase->name, op->op, op->section[0] ? " " : "", op->section);
  return st;
}

wisp_status wisp_engine_check_kernels(const wisp_plan *p, wisp_backend *be) {
  if (!be->check_kernel) return WISP_OK;
  wisp_status st;
  for (int ph = 0; ph < 2; ph++) {
    const wisp_plan_phase *phase = &p->phases[ph];
    for (int i = 0; i < phase->n_prologue; i++)
      if ((st = check_op(be, phase, &phase->prologue[i]))) return st;
    for (int i = 0; i < phase->n_epilogue; i++)
      if ((st = check_op(be, phase, &phase->epilogue[i]))) return st;
    for (int g = 0; g < phase->n_groups; g++)
      for (int i = 0; i < phase->groups[g].n_ops; i++)
        if ((st = check_op(be, phase, &phase->groups[g].ops[i]))) return st;
  }
  return WISP_OK;
}

wisp_status wisp_engine_apply_plan(wisp_graph *g, const wisp_plan *p) {
  wisp_status st;
  /* The session's graph keeps the fusions this plan applies, no others:
   * the step graph (graph_run.c) calls the fused ops where they are. */
  for (int i = 0; i < g->n_nodes; i++) g->nodes[i].fused &= wisp_plan_fusions_at(p, g, i);
  g->fused &= wisp_plan_fusions_at(p, g, -1);
  for (int ph = 0; ph < 2; ph++) {
    const wisp_plan_phase *phase = &p->phases[ph];
    for (int i = 0; i < phase->n_prologue; i++)
      if ((st = apply_op(g, ph, &phase->prologue[i], -1))) return st;
    for (int i = 0; i < phase->n_epilogue; i++)
      if ((st = apply_op(g, ph, &phase->epilogue[i], -1))) return st;
    for (int k = 0; k < phase->n_groups; k++) {
      const wisp_plan_group *grp = &phase->groups[k];
      for (int l = 0; l < grp->n_layers; l++)
        for (int i = 0; i < grp->n_ops; i++)
          if ((st = apply_op(g, ph, &grp->ops[i], grp->layers[l]))) return st;
    }
  }
  return WISP_OK;
}

uint64_t wisp_engine_decode_weight_bytes(const wisp_model *m, const wisp_plan *p) {
  const wisp_plan_phase *phase = &p->phases[WISP_PHASE_DECODE];
  uint64_t total = 0;
  for (int i = 0; i < phase->n_epilogue; i++)
    if (!strcmp(phase->epilogue[i].op, "matmul")) {
      const wisp_matrix *w = wisp_graph_matrix(&m->graph, -1, phase->epilogue[i].section);
      if (w) total += wisp_matrix_bytes(w);
    }
  for (int g = 0; g < phase->n_groups; g++) {
    const wisp_plan_group *grp = &phase->groups[g];
    for (int l = 0; l < grp->n_layers; l++)
      for (int i = 0; i < grp->n_ops; i++) {
        if (strcmp(grp->ops[i].op, "matmul")) continue;
        const wisp_matrix *w = wisp_graph_matrix(&m->graph, grp->layers[l], grp->ops[i].section);
        if (w) total += wisp_matrix_bytes(w);
      }
  }
  return total;
}

/* Whether the plan applies a fusion the pass over the graph found (any
 * pair of that name; plan.h graph_fusions). */
static int fusion_on(const wisp_plan *p, const char *name) {
  for (int i = 0; i < p->n_graph_fusions; i++)
    if (!strcmp(p->graph_fusions[i].name, name) && p->graph_fusions[i].applied) return 1;
  return 0;
}

/* The plan's execution settings and the session switches that choose
 * kernels, for configure. The fusions between ops are not here: the
 * session's graph carries them (wisp_engine_apply_plan). */
const wisp_backend_settings *wisp_engine_backend_settings(const wisp_plan *p, wisp_backend_settings *s) {
  const wisp_fusions *f = &p->fusions;
  wisp_backend_settings_default(s);
  s->flash_blocks = p->flash_blocks;
  s->prefill_tm = p->prefill_tile[0];
  s->prefill_tn = p->prefill_tile[1];
  for (int i = 0; i < 5; i++) s->prefill_i8[i] = p->prefill_tile_i8[i];
  s->ffn_wg = f->ffn_geometry.workgroup_size;
  s->ffn_cols = f->ffn_geometry.cols_per_wg;
  s->ffn_tpc = f->ffn_geometry.threads_per_col;
  s->ffn_full_block = f->ffn_geometry.full_block;
  s->head_cols = f->head_geometry.cols_per_wg;
  s->head_tpc = f->head_geometry.threads_per_col;
  s->head_full_block = f->head_geometry.full_block;
  s->attn_output_gate = f->attn_output_gate;
  s->attn_fused_rope = f->fused_qkv_split_norm_rope && fusion_on(p, "qk_norm+rope+kv_write");
  s->attn_direct_kv = f->attn_direct_kv;
  s->kv_f16 = !strcmp(p->kv_dtype, "f16");
  s->deltanet_proj_qkvz = f->lin_qkvz;
  s->deltanet_proj_ab = f->lin_ab;
  s->deltanet_core = f->lin_core;
  s->persist_min_steps = p->persist_kernel[0] ? p->persist_min_steps : -1;
  return s;
}

wisp_status wisp_engine_prefill_paths(const wisp_model *m, const wisp_plan *p, wisp_backend *be, char *out, size_t cap) {
  if (cap) out[0] = 0;
  if (!be->prefill_paths) return WISP_OK;
  wisp_graph bound;
  wisp_status st = wisp_graph_bind(&m->graph, &bound);
  if (st) return st;
  const wisp_matrix **mats = NULL;
  if (!(st = wisp_engine_apply_plan(&bound, p))) {
    mats = malloc(sizeof *mats * (size_t)(bound.n_nodes + 1));
    if (!mats) st = wisp_fail(WISP_ENOMEM, "out of memory");
  }
  if (!st) {
    int n = 0;
    for (int i = 0; i < bound.n_nodes; i++)
      if (bound.nodes[i].W) mats[n++] = bound.nodes[i].W;
    if (bound.head) mats[n++] = bound.head;
    be->prefill_paths(be, m->graph.head_dim, (const wisp_matrix *const *)mats, n, out, cap);
  }
  free(mats);
  wisp_graph_free(&bound);
  return st;
}
