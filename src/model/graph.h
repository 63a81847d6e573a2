/* A forward step as data: the one description of an architecture.
 *
 * An architecture file (lfm2.c, qwen3_5.c) describes its step once, as a
 * list of generic ops over a few activation buffers (wisp_graph). Everything
 * else is derived from that list, in this directory and nowhere else:
 *   - the plan's op list (src/plan/plan.c walks the nodes),
 *   - the per-sequence state (KV caches, conv and recurrent states: one set
 *     per mixer node, sized from the node),
 *   - prefill, op-by-op decode and the batched step of several sequences
 *     (graph_run.c walks the nodes and calls the backend),
 *   - the persistent decode's layer table (graph_lower.c matches each
 *     layer's nodes against the phases the persistent kernels run),
 *   - the fusions (graph_fuse.c: a pass over the nodes that finds which
 *     neighbours may run as one kernel; `wisp plan` lists them).
 * No backend sees this type: backends get generic op calls (backend.h). */
#ifndef WISP_MODEL_GRAPH_H
#define WISP_MODEL_GRAPH_H

#include <stddef.h>

#include "backend/backend.h"

typedef enum {
  WISP_GOP_RMSNORM,         /* out = rmsnorm(in) * w, rows of `dim` */
  WISP_GOP_MATMUL,          /* out (+)= W in */
  WISP_GOP_SHORTCONV,       /* out = C * conv(B * u), in = [B | C | u]; state: conv window */
  WISP_GOP_ATTENTION,       /* GQA, optional q/k norm, rope (pairs: the graph's rope_pairs), KV append; state: K and V caches */
  WISP_GOP_ATTENTION_GATED, /* the same with (q | gate) rows, partial rope, sigmoid output gate */
  WISP_GOP_DELTANET,        /* gated delta rule (backend.h, wisp_deltanet_args); state: conv ring + recurrence */
  WISP_GOP_SWIGLU,          /* out = silu(gate) * up, in = [gate | up] of `dim` each */
  WISP_GOP_GEGLU,           /* out = gelu_tanh(gate) * up, in = [gate | up] of `dim` each */
  WISP_GOP_ADD_BIAS,        /* out (= in) += w per row of `cols` (a product's bias) */
  WISP_GOP_ADD,             /* out += in, rows of `cols` (a residual add of a normed block output) */
  WISP_GOP_SCALE,           /* out (= in) *= scale, rows of `cols` */
  WISP_GOP_COUNT
} wisp_gop;

/* The activation buffers a step's nodes read and write ([tokens][width]). */
enum { WISP_ACT_X, WISP_ACT_XN, WISP_ACT_BIG, WISP_ACT_MID, WISP_ACT_COUNT };

/* The fusions the pass marks (WISP_FUSE_*) are backend/caps.h's. */

typedef struct {
  wisp_gop op;
  int layer;             /* -1: none */
  char section[24];      /* the plan's name: "mlp.gate_up", "mlp.gate_up.norm", "conv.core", "" */
  int in, out;           /* WISP_ACT_* */
  int accumulate;        /* matmul: out += W in (the residual stream) */
  int rows, cols;        /* matmul: the weight's shape; rmsnorm/swiglu/geglu/add/scale: cols = row width */
  float scale;           /* scale: the factor */
  wisp_matrix *W;        /* matmul (NULL in a graph described without weights); in a session's bound
                          * graph (wisp_graph_bind) the session's copy, where its plan writes the kernel choice */
  const wisp_vector *w;  /* rmsnorm weight; shortconv/deltanet taps */
  const wisp_vector *q_norm, *k_norm;         /* attention: NULL = left out */
  int window;            /* attention: a sliding window of this many keys (0: every key) */
  int rope_local;        /* attention: 1 = the graph's local rope tables (a sliding layer's own base) */
  const wisp_vector *a_log, *dt_bias, *gnorm; /* deltanet */
  wisp_kernel_choice *choice;                 /* attention_gated in a bound graph: the session's plan's
                                               * [prefill, decode] kernel; NULL in the model's graph */
  unsigned fused;        /* WISP_FUSE_* that start at this node (graph_fuse.c); in a session's
                          * bound graph, only those its plan applies (plan_apply.c) */
} wisp_gnode;

typedef struct wisp_graph {
  /* Sizes the mixers need. */
  int hidden, ffn, vocab, heads, kv_heads, head_dim, rotary_dim, conv_len;
  int lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim;
  float eps;
  int rope_rows;     /* rows of the rope tables */
  int rope_pairs;    /* wisp_rope_pairs (format/tensor.h) of every attention node: the q/k rows' order */
  int max_positions; /* longest context the weights support */
  const float *rope_freq; /* [rotary_dim / 2] inverse frequencies (NULL: the tables bound the context) */
  wisp_matrix *embed, *head;
  const wisp_vector *final_norm, *rope_cos, *rope_sin;
  /* A second rope of rope_rows rows for attention nodes with rope_local
   * (Gemma 3's sliding layers: their own base), and its frequencies; NULL
   * without. */
  const wisp_vector *rope_cos_local, *rope_sin_local;
  const float *rope_freq_local;
  float attn_scale; /* attention scores' scale; 0: 1/sqrt(head_dim) */
  int n_layers;
  int n_nodes, cap_nodes;
  wisp_gnode *nodes;        /* the layers' nodes in order (node.layer ascending) */
  size_t act[WISP_ACT_COUNT]; /* floats per token of each activation buffer */
  unsigned fused;           /* the head's fusions: WISP_FUSE_NORM_MATMUL (final norm -> head),
                             * WISP_FUSE_HEAD_ARGMAX */
  /* A bound graph's own copies (wisp_graph_bind; NULL in the model's). */
  wisp_matrix *own_mats;
  wisp_matrix *own_parts; /* the parts of own_mats in row parts, each its own copy */
  wisp_vector *own_vecs;
  wisp_kernel_choice *own_choices;
} wisp_graph;

/* ---- building (the architecture files) ---- */
void wisp_graph_init(wisp_graph *g);
void wisp_graph_free(wisp_graph *g);
/* Appends a node; the graph grows activation widths to fit it. NULL: out of
 * memory. The node array is reallocated as it grows, so a returned node
 * pointer is valid only until the next append: set a node's fields before
 * adding another. */
wisp_gnode *wisp_graph_add(wisp_graph *g, wisp_gop op, int layer, const char *section, int in, int out);
wisp_gnode *wisp_graph_matmul(wisp_graph *g, int layer, const char *section, wisp_matrix *W, int rows,
                              int cols, int in, int out, int accumulate);
wisp_gnode *wisp_graph_rmsnorm(wisp_graph *g, int layer, const char *section, const wisp_vector *w, int dim, int in,
                               int out);
/* A mixer (shortconv, attention, deltanet) reading in_width floats a token
 * of BIG (the in-product's rows) and writing out_width of MID. */
wisp_gnode *wisp_graph_mixer(wisp_graph *g, wisp_gop op, int layer, const char *section, int in_width,
                             int out_width);
/* The feed-forward block every architecture here shares:
 * x += down(silu(gate h) * up h), h = rmsnorm(x, norm). */
wisp_status wisp_graph_add_ffn(wisp_graph *g, int layer, const wisp_vector *norm, wisp_matrix *gate_up,
                               wisp_matrix *down);
/* A row op (add_bias, add, scale) over rows of `cols`: in-place ops have in == out. */
wisp_gnode *wisp_graph_rowop(wisp_graph *g, wisp_gop op, int layer, const char *section, int cols, int in, int out);
/* The node of `section` in `layer` (-1: the embedding and head are
 * "embed" / "head", as matrices only), and its index; NULL when none. */
const wisp_gnode *wisp_graph_find(const wisp_graph *g, int layer, const char *section, int *index);
/* The matrix a plan op addresses: layer (-1 for embed / head) and section; NULL when none. */
wisp_matrix *wisp_graph_matrix(const wisp_graph *g, int layer, const char *section);
/* The op name the registry and the plan use for a node ("matmul", ...). */
const char *wisp_gop_name(wisp_gop op);

/* ---- a session's copy (graph_bind.c) ---- */
/* The model's graph is read-only once the model is open; a session runs a
 * copy of it: the same nodes, naming the session's own copies of every
 * matrix and vector view (the same weight bytes, their kernel choices and
 * device handles the session's) and its own mixer kernel choices. Freed
 * with wisp_graph_free. */
wisp_status wisp_graph_bind(const wisp_graph *model, wisp_graph *out);

/* ---- per-sequence state (graph_state.c) ---- */
typedef struct wisp_graph_state wisp_graph_state;
/* Buffers for one sequence: activations for `chunk` tokens per call, and
 * each mixer node's state for `max_pos` positions (0: the weights' maximum). */
wisp_status wisp_graph_state_new(const wisp_graph *g, wisp_backend *be, int chunk, int max_pos,
                                 wisp_graph_state **out);
/* The states of n sequences (a session's slots) in out[0..n), each as
 * wisp_graph_state_new makes it, their mixer states placed together by
 * the backend (backend.h buf_new_slots). Each is freed on its own. */
wisp_status wisp_graph_states_new(const wisp_graph *g, wisp_backend *be, int chunk, int max_pos, int n,
                                  wisp_graph_state **out);
void wisp_graph_state_free(wisp_graph_state *s, wisp_backend *be);
/* A fresh sequence: conv and recurrent states zeroed (KV rows beyond the
 * position are never read). */
void wisp_graph_state_reset(wisp_graph_state *s, wisp_backend *be);
int wisp_graph_state_max_pos(const wisp_graph_state *s);
/* Makes the KV caches hold at least `positions` (at most max_pos): grown in
 * doublings where the backend can (kv_buf_grow), keeping what they hold;
 * called before every step, so that growth happens between steps. */
wisp_status wisp_graph_state_reserve(wisp_graph_state *s, wisp_backend *be, int positions);
/* Positions the KV caches hold now. */
int wisp_graph_state_kv_positions(const wisp_graph_state *s);
/* Bytes of one sequence's K and V caches for max_pos positions at
 * value_bytes a value (4: f32, 2: f16): every attention node's two caches. */
uint64_t wisp_graph_kv_bytes(const wisp_graph *g, int max_pos, int value_bytes);
/* The state a token changes for good beyond its own KV rows (conv and
 * recurrent states), for snapshots: up to cap buffers; returns how many. */
int wisp_graph_state_bufs(wisp_graph_state *s, wisp_buf **bufs, size_t *lens, int cap);

/* The state's buffers, for the runner and the lowering: an activation
 * buffer, the one-row logits, a mixer's state (k 0: conv state or K cache;
 * 1: V cache or recurrent state; NULL where the layer has none). */
wisp_buf *wisp_graph_state_act(const wisp_graph_state *s, int act);
wisp_buf *wisp_graph_state_logits(const wisp_graph_state *s);
wisp_buf *wisp_graph_state_mix(const wisp_graph_state *s, int layer, int k);
int wisp_graph_state_chunk(const wisp_graph_state *s);

/* ---- running (graph_run.c) ---- */
/* Every weight to the backend once; fails with the op's name when the
 * backend lacks an op the graph uses. */
wisp_status wisp_graph_prepare(wisp_graph *g, wisp_backend *be);
/* n (<= chunk) tokens at positions pos0..; logits of the last one (or,
 * with all, of every one, n x vocab) when logits is non-NULL. */
wisp_status wisp_graph_forward(const wisp_graph *g, wisp_graph_state *s, wisp_backend *be, const int32_t *tokens,
                               int n, int pos0, float *logits, int all);
/* One decode step that stays on the device: the token is ids[slot], the
 * chosen successor goes to ids[slot + 1], at position pos. Records only. */
wisp_status wisp_graph_decode_step(const wisp_graph *g, wisp_graph_state *s, wisp_backend *be, wisp_buf *ids,
                                   int slot, int pos, const wisp_sampling *sampling, uint32_t step);
struct wisp_model_rows; /* model/common.h */
/* One decode step for several sequences (docs/sequences.md):
 * products read each weight once for all rows, each row's mixer runs on its
 * own sequence's state. scratch: a state with chunk >= rows->n. sampling:
 * rows->n entries, row r's token drawn with sampling[r]. */
wisp_status wisp_graph_step_rows(const wisp_graph *g, wisp_graph_state *scratch, wisp_backend *be,
                                 const int32_t *tokens, const struct wisp_model_rows *rows,
                                 const wisp_sampling *sampling, wisp_buf *logits, wisp_buf *ids);

/* A batched prefill of several sequences: segment i is len[i] (<= that
 * state's chunk) tokens of sequence states[i] at positions pos0[i]..; the
 * tokens of all segments are stacked in order. */
typedef struct {
  int n;
  const int *len, *pos0;
  wisp_graph_state *const *states;
} wisp_graph_segments;
/* Feeds every segment in one pass over the nodes: the products run once
 * over all the stacked tokens (one read of each weight for every
 * sequence), each mixer on its own sequence's state for its segment.
 * scratch: a state with chunk >= the tokens in all. No logits (a prompt's
 * tokens before its last). Records only. */
wisp_status wisp_graph_forward_segments(const wisp_graph *g, wisp_graph_state *scratch, wisp_backend *be,
                                        const int32_t *tokens, const wisp_graph_segments *segs);

/* ---- the persistent decode's table (graph_lower.c) ---- */
/* Matches every layer's nodes against the phases the persistent decode
 * runs (norm, in-product, mixer, out-product + residual, norm, gate/up,
 * SwiGLU or GeGLU, down + residual; either residual may follow a post
 * norm) and fills *out for state s (NULL: no state buffers, max_pos 0).
 * WISP_EUNSUPPORTED (nothing kept) when a layer has another shape: the
 * decode then runs the nodes op by op. */
wisp_status wisp_graph_lower_decode(const wisp_graph *g, const wisp_graph_state *s, wisp_decode_graph *out);
/* 1 when g's layers are ones the persistent decode's phases run (what
 * wisp_graph_lower_decode matches; the backend still checks shapes and
 * types); for the plan. */
int wisp_graph_lowers_to_phases(const wisp_graph *g);

/* ---- fusions (graph_fuse.c) ---- */
/* Marks node.fused / g->fused with every fusion the graph's shape allows
 * (greedy: whether the head's argmax fusion is possible at all). */
void wisp_graph_fuse(wisp_graph *g);
/* Name of one WISP_FUSE_* bit ("rmsnorm+matmul", ...). */
const char *wisp_fuse_name(unsigned bit);

#endif
