/* What the persistent decode (wgpu_persist.c) can run: a decode graph's
 * phases, shapes and weight types checked against what persist.wgsl
 * takes, and the sizes its layout derives from them. */
#include "backend/webgpu/wgpu_persist_fit.h"

#include "backend/webgpu/wgpu_core.h"
#include "format/quant.h"

static int q4(const wisp_matrix *m, int rows, int cols) {
  return m && (m->type == WISP_W_Q4 || m->type == WISP_W_Q4Z) && m->rows == rows && m->cols == cols && cols % 32 == 0 &&
         m->q && m->scales && (m->type == WISP_W_Q4 || m->zp);
}

/* Q4, Q4Z or Q4_K of this shape (the units-split engine's products). */
static int qmat(const wisp_matrix *m, int rows, int cols) {
  if (m && m->type == WISP_W_Q4K) return m->rows == rows && m->cols == cols && cols % 256 == 0 && wisp_matrix_host(m);
  return q4(m, rows, cols);
}

/* Any type persist_quant.wgsli reads, of this shape (the rows-in-quads engine). */
static int any_mat(const wisp_matrix *m, int rows, int cols) {
  if (!m || m->rows != rows || m->cols != cols || cols % 32) return 0;
  switch (m->type) {
    case WISP_W_F32: /* (a matrix in row parts of one type: the blob gathers them) */
    case WISP_W_F16:
    case WISP_W_Q8_0: return wisp_matrix_host(m) != NULL;
    default: return qmat(m, rows, cols);
  }
}

static int vec_n(const wisp_vector *v, int n) { return v && v->data && v->n == n; }

/* The phases' works and stages, bit 1 << kind each (the kernel's WORKS, STAGES). */
uint32_t persist_works(const wisp_decode_graph *g) {
  uint32_t w = 0;
  for (int i = 0; i < g->n_phases; i++) w |= 1u << g->phases[i].work;
  return w;
}
uint32_t persist_stages(const wisp_decode_graph *g) {
  uint32_t s = 0;
  for (int i = 0; i < g->n_phases; i++) s |= 1u << g->phases[i].stage;
  return s;
}

/* The phases' flags, WISP_PHASE_FLAG_* together, and PERSIST_KFLAG_WINDOW
 * where a layer has a sliding window (the kernel's FLAGS). */
uint32_t persist_flags(const wisp_decode_graph *g) {
  uint32_t f = 0;
  for (int i = 0; i < g->n_phases; i++) f |= g->phases[i].flags;
  for (int l = 0; l < g->n_layers; l++)
    if (g->layers[l].attention && g->layers[l].window > 0) f |= PERSIST_KFLAG_WINDOW;
  return f;
}

/* The product engine (persist_products.wgsli, SPLIT): units split for
 * graphs with gated attention or DeltaNet (measured the faster on the gated hybrids,
 * and what their gated-norm stage needs), rows in quads otherwise (the
 * seed's, and every weight type). */
int persist_split(wisp_backend *be, const wisp_decode_graph *g) {
  /* tuning persistSplit=1 (tests): any graph, as its layers run beside DeltaNet ones */
  return as_g(be)->opts.persist_split ||
         (persist_works(g) & (1u << WISP_WORK_ATTN_GATED | 1u << WISP_WORK_DELTANET)) != 0;
}

/* Shapes of a layer's mixer: input product rows, output product columns. */
int persist_in_rows(const wisp_decode_graph *g, const wisp_graph_layer *L) {
  const int H = g->hidden, D = g->head_dim, NH = g->heads, KVH = g->kv_heads;
  const int V = g->lin_v_heads * g->lin_v_dim, C = 2 * g->lin_k_heads * g->lin_k_dim + V;
  switch (L->mixer) {
    case WISP_MIX_SHORTCONV: return 3 * H;
    case WISP_MIX_ATTENTION: return (NH + 2 * KVH) * D;
    case WISP_MIX_ATTENTION_GATED: return (2 * NH + 2 * KVH) * D;
    default: return C + V + 2 * g->lin_v_heads;
  }
}
int persist_out_cols(const wisp_decode_graph *g, const wisp_graph_layer *L) {
  switch (L->mixer) {
    case WISP_MIX_SHORTCONV: return g->hidden;
    case WISP_MIX_DELTANET: return g->lin_v_heads * g->lin_v_dim;
    default: return g->heads * g->head_dim;
  }
}

/* The largest vector a phase stages (floats). */
static int stage_max(const wisp_decode_graph *g) {
  int m = g->hidden > g->ffn ? g->hidden : g->ffn;
  for (int i = 0; i < g->n_layers; i++)
    if (persist_out_cols(g, &g->layers[i]) > m) m = persist_out_cols(g, &g->layers[i]);
  return m;
}

/* xs's vec4s: whole runs of 8 for the kernel's xsw swizzle. */
uint32_t persist_stage_xs4(const wisp_decode_graph *g) { return ((uint32_t)stage_max(g) / 4 + 7) / 8 * 8; }

/* A rope table pair holding the rows a run reads (up to the context). */
static int rope_ok(const wisp_decode_graph *g, const wisp_vector *cs, const wisp_vector *sn) {
  const int rows = g->rope_rows < g->max_pos ? g->rope_rows : g->max_pos;
  const int n = rows * (g->rotary_dim / 2);
  return rows > 0 && cs && sn && cs->data && sn->data && cs->n >= n && sn->n >= n;
}

/* What a layer's mixer needs beyond the graph-wide checks, or NULL. */
static const char *layer_fits(const wisp_decode_graph *g, const wisp_graph_layer *L, int split) {
  const int H = g->hidden, D = g->head_dim, VH = g->lin_v_heads, DV = g->lin_v_dim;
  const int C = 2 * g->lin_k_heads * g->lin_k_dim + VH * DV;
  int (*fits)(const wisp_matrix *, int, int) = split ? qmat : any_mat;
  if (!fits(L->in, persist_in_rows(g, L), H) || !fits(L->out, H, persist_out_cols(g, L)) || !fits(L->gate_up, 2 * g->ffn, H) ||
      !fits(L->down, H, g->ffn))
    return split ? "a layer matrix is not Q4 / Q4_K of the expected shape" : "a layer matrix of another type or shape";
  if (!vec_n(L->op_norm, H) || !vec_n(L->ffn_norm, H) || !L->state) return "a layer lacks a norm or state buffer";
  if (L->in_bias && (L->mixer != WISP_MIX_ATTENTION || !vec_n(L->in_bias, persist_in_rows(g, L))))
    return "an in-product bias on a layer other than plain attention, or of another size";
  if ((L->mixer_post && !vec_n(L->mixer_post, H)) || (L->ffn_post && !vec_n(L->ffn_post, H))) return "post norm size";
  if ((L->window || L->rope_local) && L->mixer != WISP_MIX_ATTENTION)
    return "a sliding window or second rope on a layer other than plain attention";
  if (L->window < 0 || (L->rope_local && (!g->rope_cos_local || !g->rope_sin_local)))
    return "a negative window, or a second rope without its tables";
  switch (L->mixer) {
    case WISP_MIX_SHORTCONV:
      if (g->conv_len < 1 || g->conv_len > 16) return "conv length";
      if (!vec_n(L->taps, H * g->conv_len)) return "short conv taps";
      return NULL;
    case WISP_MIX_ATTENTION:
      if (!L->v_cache) return "an attention layer lacks its V cache";
      if ((L->q_norm && !vec_n(L->q_norm, D)) || (L->k_norm && !vec_n(L->k_norm, D))) return "q/k norm size";
      if (g->rotary_dim != D) return "partial rotary without an output gate";
      if (!(L->rope_local ? rope_ok(g, g->rope_cos_local, g->rope_sin_local) : rope_ok(g, g->rope_cos, g->rope_sin)))
        return "rope tables";
      return NULL;
    case WISP_MIX_ATTENTION_GATED:
      if (D % 32) return "head dim";
      if (!L->v_cache || !vec_n(L->q_norm, D) || !vec_n(L->k_norm, D))
        return "an attention layer lacks its q/k norm or V cache";
      if (!rope_ok(g, g->rope_cos, g->rope_sin)) return "rope tables";
      return NULL;
    default:
      if (g->conv_len < 1 || g->conv_len > 8) return "conv length";
      if (!L->rec_state || !vec_n(L->taps, C * g->conv_len) || !vec_n(L->a_log, VH) || !vec_n(L->dt_bias, VH) ||
          !vec_n(L->gnorm, DV))
        return "a DeltaNet layer lacks a vector or its recurrent state";
      return NULL;
  }
}

/* A phase's flags are ones its work takes: a post norm on the output or
 * down product of a layer with that norm (and on every such product of
 * it), followed by a norm stage of x, which folds it in; GELU on the FFN. */
static int flags_ok(const wisp_decode_graph *g, int i) {
  const wisp_decode_phase *f = &g->phases[i];
  const wisp_graph_layer *L = &g->layers[f->layer];
  const int post = (f->flags & WISP_PHASE_FLAG_POST_NORM) != 0;
  if (f->flags & ~(WISP_PHASE_FLAG_POST_NORM | WISP_PHASE_FLAG_GELU)) return 0;
  if ((f->flags & WISP_PHASE_FLAG_GELU) && f->work != WISP_WORK_FFN) return 0;
  if (f->work == WISP_WORK_OUT && post != (L->mixer_post != NULL)) return 0;
  if (f->work == WISP_WORK_DOWN && post != (L->ffn_post != NULL)) return 0;
  if (post && f->work != WISP_WORK_OUT && f->work != WISP_WORK_DOWN) return 0;
  if (!post) return 1;
  const int next = i + 1 < g->n_phases ? g->phases[i + 1].stage : -1;
  return next == WISP_STAGE_NORM_OP || next == WISP_STAGE_NORM_FFN || next == WISP_STAGE_NORM_FINAL;
}

/* The phase list is one the kernel can walk: known kinds, flags and
 * layers, the embedding first and the head last, within the kernel's
 * phase words. */
static int phases_ok(const wisp_decode_graph *g) {
  const int n = g->n_phases;
  if (n < 2 || n > WISP_GRAPH_MAX_PHASES || n > MAX_PHASES || g->phases[0].stage != WISP_STAGE_EMBED ||
      g->phases[n - 1].work != WISP_WORK_HEAD)
    return 0;
  for (int i = 0; i < n; i++) {
    const wisp_decode_phase *f = &g->phases[i];
    if (f->stage >= WISP_STAGE_COUNT || f->work >= WISP_WORK_COUNT || f->layer >= g->n_layers ||
        (i > 0 && f->stage == WISP_STAGE_EMBED) || (i < n - 1 && f->work == WISP_WORK_HEAD) || !flags_ok(g, i))
      return 0;
  }
  return 1;
}

/* 1 when persist.wgsl can run graph g (reasons are for WISP_VERBOSE). */
int persist_graph_fits(wisp_backend *be, const wisp_decode_graph *g, const char **why) {
  const int H = g->hidden, F = g->ffn, D = g->head_dim, NH = g->heads, KVH = g->kv_heads;
  const int KH = g->lin_k_heads, VH = g->lin_v_heads, DK = g->lin_k_dim, DV = g->lin_v_dim;
  const int split = persist_split(be, g);
  const uint32_t works = persist_works(g);
  const int attention = (works & (1u << WISP_WORK_QKV | 1u << WISP_WORK_ATTN_GATED)) != 0;
  /* the kernel's workgroup arrays: xs (16 bytes a vec4) + xsum (XS4 / 4 floats with SPLIT), red + redi (MAXSG
   * each), hv + qv + acc4 (256 floats each), vsl (64), wuni + wtok */
  const uint64_t shared = (uint64_t)persist_stage_xs4(g) * (split ? 17 : 16) + 2 * 4 * (PERSIST_WG / 4) + 3 * 256 * 4 +
                          64 * 4 + 8;
  *why = NULL;
  if (!as_g(be)->sg) *why = "no subgroups";
  else if (!phases_ok(g)) *why = "phase list";
  else if (g->n_layers <= 0 || H % 32 || F % 32 || H <= 0 || F <= 0) *why = "hidden/ffn not multiples of 32";
  else if (attention && (D <= 0 || D % 16 || D > PERSIST_WG || PERSIST_WG % D || (NH * D) % 32)) *why = "head dim";
  else if (attention && (NH > 1024 || KVH <= 0 || NH % KVH)) *why = "heads not a multiple of kv heads";
  else if (attention && (g->rotary_dim <= 0 || g->rotary_dim % 2 || g->rotary_dim > D)) *why = "rotary dims";
  else if ((works & 1u << WISP_WORK_DELTANET) &&
           (KH <= 0 || VH <= 0 || VH % KH || VH > 256 || DK <= 0 || DK > 256 || DV <= 0 || DV % 16 || (VH * DV) % 32))
    *why = "DeltaNet heads or dims";
  else if ((works & 1u << WISP_WORK_DELTANET) && (DK + PERSIST_WG / DN_CW - 1) / (PERSIST_WG / DN_CW) > 32)
    *why = "DeltaNet k dim";
  else if (split ? !q4(g->embed, g->vocab, H) || !q4(g->head, g->vocab, H)
                 : !any_mat(g->embed, g->vocab, H) || !any_mat(g->head, g->vocab, H))
    *why = split ? "embed/head not Q4" : "embed/head of another type or shape";
  else if (!vec_n(g->final_norm, H)) *why = "final norm";
  else if (!(g->attn_scale >= 0 && g->attn_scale < 1e30f && g->embed_scale >= 0 && g->embed_scale < 1e30f))
    *why = "attention or embedding scale";
  else if (shared > as_g(be)->d->info.max_compute_workgroup_storage_size) *why = "workgroup memory";
  for (int i = 0; !*why && i < g->n_layers; i++) *why = layer_fits(g, &g->layers[i], split);
  return *why == NULL;
}
