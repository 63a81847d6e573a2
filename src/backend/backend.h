/* The backend interface: what a model file may ask a compute device to do.
 *
 * A model file (src/model/) describes the graph of a forward pass as a
 * sequence of these calls and never touches device memory itself. A backend
 * either executes each call at once (CPU) or records it for a later submit
 * (WebGPU); `sync` is where recorded work must be finished and device errors
 * surface. Activations and recurrent state live in backend-owned wisp_buf
 * objects of f32 values; weights are wisp_matrix/wisp_vector views over the
 * mapped artifact, which `prepare_*` may copy to the device once.
 *
 * Row conventions: activations are row-major [n tokens][dim]. */
#ifndef WISP_BACKEND_H
#define WISP_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "backend/caps.h"
#include "backend/sampling.h"
#include "format/tensor.h"
#include "wisp.h"

struct wisp_tuning; /* backend/tuning.h */

typedef struct wisp_buf wisp_buf;
typedef struct wisp_backend wisp_backend;

/* Arguments of the fused attention op (one attention layer, n new tokens at
 * positions pos0..pos0+n-1): split the fused qkv rows, RMSNorm q and k per
 * head (each optional), rotate both with RoPE from the rope tables (pairs as rope_pairs), append k and v to the cache, and attend
 * causally with grouped-query heads. */
typedef struct {
  const wisp_buf *qkv;   /* [n][(heads + 2*kv_heads) * head_dim]: q, then k, then v */
  int n, pos0;
  int heads, kv_heads, head_dim;
  const wisp_vector *q_norm, *k_norm; /* [head_dim]; NULL: that norm is left out */
  float eps;
  const wisp_vector *rope_cos, *rope_sin; /* [positions][head_dim/2] */
  wisp_buf *k_cache, *v_cache;          /* [max_pos][kv_heads][head_dim] */
  wisp_buf *out;                         /* [n][heads * head_dim] */
  /* The scores' scale: 0 = 1/sqrt(head_dim) (a model may give another, e.g. query_pre_attn_scalar^-1/2). */
  float scale;
  /* Sliding window: a query at position p attends to keys p - window < j <= p;
   * 0 = every earlier key. The caches still hold every position. */
  int window;
  int rope_pairs; /* wisp_rope_pairs (format/tensor.h): which dims of a head rotate together */
} wisp_attention_args;

/* Arguments of the gated-attention op ("full_attention" layers of Gated DeltaNet hybrids):
 * like wisp_attention_args, but q_proj yields per head [q | gate] (2*head_dim
 * values, q first), q_norm/k_norm multiply by the given weights (the
 * artifact stores (1 + w) norms that way), RoPE rotates only the first rotary_dim
 * dims of each head (pairs as rope_pairs, within those dims), and the attention
 * output of each head is multiplied by sigmoid(gate) elementwise. */
typedef struct {
  const wisp_buf *qkv; /* [n][heads*2*head_dim + 2*kv_heads*head_dim]: (q|gate) per head, then k, then v */
  int n, pos0;
  int heads, kv_heads, head_dim, rotary_dim;
  const wisp_vector *q_norm, *k_norm; /* [head_dim] */
  float eps;
  const wisp_vector *rope_cos, *rope_sin; /* [positions][rotary_dim/2] */
  wisp_buf *k_cache, *v_cache;            /* [max_pos][kv_heads][head_dim] */
  wisp_buf *out;                          /* [n][heads * head_dim], already gated */
  const wisp_kernel_choice *choice;       /* [prefill, decode] from the plan (profile kernels); NULL = default */
  int rope_pairs;                         /* wisp_rope_pairs: pairs within the first rotary_dim dims */
} wisp_gated_attention_args;

/* Arguments of the Gated DeltaNet op ("linear_attention" layers),
 * n tokens in order. Per token t, with K = k_heads*k_dim, V = v_heads*v_dim:
 *   proj[t] = [qkv (2K + V) | z (V) | b (v_heads) | a (v_heads)]
 *   c = silu(causal depthwise conv over the qkv part, kernel L = conv_len,
 *       taps [2K+V][L], tap L-1 on the newest input; the last L-1 inputs of
 *       each channel persist in conv_state)
 *   q, k, v = split(c); q, k L2-normalised per head (x * rsqrt(sum x^2 +
 *       1e-6)), q *= k_dim^-0.5; k-head of v-head h is h / (v_heads/k_heads)
 *   beta = sigmoid(b), g = -exp(A_log) * softplus(a + dt_bias)  (per v-head)
 *   per v-head, state S [k_dim][v_dim] (f32, persists in `state`):
 *       S *= exp(g); kv = S^T k; delta = (v - kv) * beta; S += k delta^T;
 *       o = S^T q
 *   out[t] per v-head = rmsnorm(o, eps) * norm_w * silu(z)   ([n][V]) */
typedef struct {
  const wisp_buf *proj; /* [n][2K + 2V + 2*v_heads] */
  int n;
  int pos0; /* position of token 0 in the sequence (consecutive calls continue it; conv_state may be indexed by it) */
  int k_heads, v_heads, k_dim, v_dim, conv_len;
  const wisp_vector *conv_taps;      /* [(2K+V)][conv_len] */
  const wisp_vector *a_log, *dt_bias; /* [v_heads] */
  const wisp_vector *norm;           /* [v_dim], gated RMSNorm weight (plain w) */
  float eps;
  /* (2K+V) * conv_len floats, zero at a sequence's start; the layout is
   * the backend's own (CPU: [2K+V][conv_len-1] shifted in place; WebGPU: a
   * ring [2K+V][conv_len], position p's input in slot p % conv_len, so that
   * several workgroups can read a channel while one writes it). */
  wisp_buf *conv_state;
  wisp_buf *state;      /* [v_heads][k_dim][v_dim] */
  wisp_buf *out;        /* [n][V] */
} wisp_deltanet_args;

/* The rows of a mixer op in a batched decode step: row r is one token at
 * position pos[r] of a sequence whose state is s0[r] (conv state, K cache,
 * or Gated DeltaNet's conv ring) and s1[r] (V cache or recurrent state;
 * NULL for the short conv). */
typedef struct {
  int n;
  const int *pos;
  wisp_buf *const *s0, *const *s1;
} wisp_mixer_rows;

/* A decode step described as data, for backends that run several steps
 * in one device call (the WebGPU persistent decode, wgpu_persist.c) instead
 * of op by op. It is lowered from the model's step graph
 * (src/model/graph_lower.c); what it describes is exactly what the op-by-op
 * decode step records: per layer
 *   h = rmsnorm(x, op_norm)
 *   a mixer (wisp_mix_kind) reading in h and adding out(...) to x
 *   x += down(act(gate h') * up h'),  h' = rmsnorm(x, ffn_norm)   (gate_up: gate rows, then up rows)
 * then the greedy token of head(rmsnorm(x, final_norm)); the next step
 * embeds it (x = embed[token] * embed_scale; embed_scale 0: 1). act is silu,
 * or gelu_tanh where the FFN phase has WISP_PHASE_FLAG_GELU. A block whose work
 * phase has WISP_PHASE_FLAG_POST_NORM adds rmsnorm(its output, mixer_post or
 * ffn_post) to x instead of the output itself. The mixers:
 *   short conv:  B, C, u = split(in h); out (C * conv(B * u))   (taps [hidden][conv_len], state [hidden][conv_len - 1])
 *   attention:   q, k, v = split(in h [+ in_bias]); q, k = rope(rmsnorm_head(q|k)) (q_norm/k_norm may be NULL); out attend(q, k, v)
 *                (state = the K cache, v_cache); scores scaled by attn_scale (0: 1/sqrt(head_dim)); with a
 *                window only the last `window` keys; rope_local: the rope_*_local tables
 *   gated attention: in = (q|gate per head, k, v) rows, q/k norm, rope over rotary_dim, out (attend * sigmoid(gate))
 *   Gated DeltaNet: in = in_proj [qkv | z | b | a], taps [2K+V][conv_len], state = its conv ring
 *                (wisp_deltanet_args), rec_state [v_heads][k_dim][v_dim], a_log, dt_bias, gnorm
 * A layer's mixer is its own: a graph may mix them. */
#define WISP_GRAPH_MAX_LAYERS 128
typedef enum { WISP_MIX_SHORTCONV, WISP_MIX_ATTENTION, WISP_MIX_ATTENTION_GATED, WISP_MIX_DELTANET } wisp_mix_kind;
typedef struct {
  int mixer;     /* wisp_mix_kind */
  int attention; /* 1 for both attention mixers (state and v_cache are KV caches) */
  const wisp_vector *op_norm, *ffn_norm;
  const wisp_matrix *in, *out;        /* in_proj / out_proj, or qkv / o_proj */
  const wisp_vector *taps;            /* short conv, DeltaNet */
  const wisp_vector *q_norm, *k_norm; /* attention */
  const wisp_vector *in_bias;         /* attention: the in-product's bias (q, k, v rows), added to its output; or NULL */
  const wisp_matrix *gate_up, *down;
  /* post norms: a block's output normed before its residual add (NULL: added as it is) */
  const wisp_vector *mixer_post, *ffn_post;
  int window;        /* attention: a sliding window of this many keys (0: every key) */
  int rope_local;    /* attention: 1 = rope with the graph's rope_*_local tables */
  wisp_buf *state;   /* short conv: its state; DeltaNet: its conv ring; attention: the K cache */
  wisp_buf *v_cache; /* attention */
  const wisp_vector *a_log, *dt_bias, *gnorm; /* DeltaNet */
  wisp_buf *rec_state;                        /* DeltaNet */
} wisp_graph_layer;

/* The persistent decode's phases, in order (graph_lower.c writes them, the
 * kernel walks them): each phase stages an input into the workgroups'
 * memory, does one piece of work over the whole grid, and ends at a grid
 * barrier (the last, the head, at the token choice). */
typedef enum {
  WISP_STAGE_EMBED,      /* the token's embedding row, rmsnorm'd with the layer's op_norm (the first phase) */
  WISP_STAGE_NORM_OP,    /* rmsnorm(x) * op_norm */
  WISP_STAGE_NORM_FFN,   /* rmsnorm(x) * ffn_norm */
  WISP_STAGE_NORM_FINAL, /* rmsnorm(x) * final_norm */
  WISP_STAGE_MID,        /* the short conv's output (hidden values) as it is */
  WISP_STAGE_H,          /* the SwiGLU output */
  WISP_STAGE_NONE,       /* nothing (the work reads the arena itself) */
  WISP_STAGE_ATTN_MERGE, /* the attention's splits merged */
  WISP_STAGE_ATTN_MERGE_GATE, /* the same times sigmoid(gate) */
  WISP_STAGE_GATED_NORM, /* DeltaNet: rmsnorm(o) * gnorm * silu(z) per v-head */
  WISP_STAGE_COUNT
} wisp_stage_kind;
typedef enum {
  WISP_WORK_IN,          /* the layer's input product, stored raw */
  WISP_WORK_CONV_IN,     /* input product (B, C, u rows of a channel together) + the short conv and its state */
  WISP_WORK_QKV,         /* q/k/v rows of a head + q/k norm + rope + KV append */
  WISP_WORK_ATTN,        /* attention over the cache, split over (head, key range) tasks (q from WORK_QKV) */
  WISP_WORK_ATTN_GATED,  /* the same from raw q|gate, k, v: q/k norm, partial rope and KV append inside */
  WISP_WORK_DELTANET,    /* the Gated DeltaNet conv + delta rule */
  WISP_WORK_OUT,         /* the output product added to x */
  WISP_WORK_FFN,         /* gate/up product + SwiGLU */
  WISP_WORK_DOWN,        /* down product added to x */
  WISP_WORK_HEAD,        /* head product + the greedy choice */
  WISP_WORK_COUNT
} wisp_work_kind;
/* A phase's flags: WISP_PHASE_FLAG_POST_NORM on a WORK_OUT or WORK_DOWN phase:
 * the product's rows are stored, not added to x, and the next phase's
 * stage (a norm of x) first adds rmsnorm(rows) * the layer's post norm
 * (mixer_post, ffn_post) to x. WISP_PHASE_FLAG_GELU on a WORK_FFN phase:
 * gelu_tanh(gate) * up instead of silu(gate) * up. */
enum { WISP_PHASE_FLAG_POST_NORM = 1, WISP_PHASE_FLAG_GELU = 2 };
typedef struct {
  uint8_t stage, work; /* wisp_stage_kind, wisp_work_kind */
  uint16_t layer;
  uint8_t flags;       /* WISP_PHASE_FLAG_* */
} wisp_decode_phase;
#define WISP_GRAPH_MAX_PHASES (5 * WISP_GRAPH_MAX_LAYERS + 1)

typedef struct {
  int n_layers, hidden, ffn, vocab, heads, kv_heads, head_dim, conv_len;
  int max_pos;   /* rows of the KV caches */
  int rotary_dim, lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim;
  int rope_rows; /* rows of the rope tables ([rows][head_dim / 2]) */
  int rope_pairs; /* wisp_rope_pairs of every attention layer */
  float eps;
  float embed_scale; /* the embedding row's factor (0: 1) */
  float attn_scale;  /* attention scores' scale (0: 1/sqrt(head_dim)) */
  const wisp_matrix *embed, *head;
  const wisp_vector *final_norm, *rope_cos, *rope_sin;
  const wisp_vector *rope_cos_local, *rope_sin_local; /* a second rope (layers with rope_local), rope_rows rows; or NULL */
  wisp_graph_layer layers[WISP_GRAPH_MAX_LAYERS];
  int n_phases;
  wisp_decode_phase phases[WISP_GRAPH_MAX_PHASES];
} wisp_decode_graph;

/* A product with the neighbours the graph pass fused into it, for
 * matmul_fused (one token: x and y one row each): before it `pre`, the op
 * whose output is the product's input x; after it `post`, the op that reads
 * its output y. The results are those of the ops one after the other (each
 * op's output buffer written as that op writes it), up to the rounding of
 * the fused kernels. */
typedef enum {
  WISP_PRE_NONE,
  WISP_PRE_RMSNORM,         /* x = rmsnorm(pre_in, norm, eps), rows of pre_dim */
  WISP_PRE_SWIGLU,          /* x = silu(gate) * up, pre_in = [gate | up] of pre_dim each */
  WISP_PRE_ATTENTION,       /* the attention op *attention, whose out is x */
  WISP_PRE_ATTENTION_GATED, /* the gated attention op *attention_gated, whose out is x */
  WISP_PRE_DELTANET,        /* the Gated DeltaNet op *deltanet_pre, whose out is x */
} wisp_fused_pre;
typedef enum {
  WISP_POST_NONE,
  WISP_POST_SWIGLU,    /* post_out = silu(gate) * up, y = [gate | up] of post_dim each */
  WISP_POST_SHORTCONV, /* the short conv over y (taps, conv_len, conv_state, post_dim) into post_out */
  WISP_POST_DELTANET,  /* the Gated DeltaNet *deltanet_post reads y: the product is recorded by the row
                        * ranges it needs; the op itself stays the caller's (matmul_fused returns 0) */
  WISP_POST_ARGMAX,    /* ids[slot] = the greedy choice over y (sample_id with *sampling, temperature <= 0) */
} wisp_fused_post;
typedef struct {
  wisp_fused_pre pre;
  const wisp_buf *pre_in;
  int pre_dim;
  const wisp_vector *norm;
  float eps;
  const wisp_attention_args *attention;
  const wisp_gated_attention_args *attention_gated;
  const wisp_deltanet_args *deltanet_pre;
  const wisp_matrix *W;
  const wisp_buf *x;
  wisp_buf *y;
  int accumulate;
  wisp_fused_post post;
  wisp_buf *post_out;
  int post_dim;
  const wisp_vector *taps;
  int conv_len;
  wisp_buf *conv_state;
  const wisp_deltanet_args *deltanet_post;
  const wisp_sampling *sampling;
  uint32_t step;
  wisp_buf *ids;
  int slot;
} wisp_fused_matmul;

/* Execution settings the plan resolved for the whole session. Which
 * fusions run is not among them: the session's step graph says (its
 * nodes' fused bits, model/graph_fuse.c) and calls the fused ops. */
typedef struct {
  int flash_blocks; /* most blocks one decode token's attention is split over */
  /* One-token product geometry (threads, rows) for every matrix, replacing
   * each matrix's own (tuning matvec=WGxROWS, a sweep); 0: each matrix's. */
  int matvec_wg, matvec_rows;
  /* The profile's session switches that choose kernels (1 = fused
   * arrangement; see docs/webgpu.md, "The seed profile's session switches"). */
  int ffn_wg, ffn_cols, ffn_tpc, ffn_full_block;   /* the fused Q4_K gate/up + SwiGLU's geometry;
                                                     * 0 (full_block -1) = default */
  int head_cols, head_tpc, head_full_block;        /* Q4_K head + argmax geometry (lmHeadArgmaxQ4K) */
  int attn_output_gate;  /* output gate inside the decode attention */
  int attn_fused_rope;   /* q/k split + norm + RoPE + KV append inside the decode attention */
  /* The Gated DeltaNet's in-product rows [qkv|z|b|a] (wisp_deltanet_args)
   * on one-token decode: qkv and z rows as one product, b and a rows as
   * one; both on, all four as one (0: separate row ranges). */
  int deltanet_proj_qkvz, deltanet_proj_ab;
  int deltanet_core;      /* Gated DeltaNet decode: conv + recurrence + gated norm in one dispatch */
  int attn_direct_kv;    /* decode attention addresses the KV cache with the contiguous layout's
                          * own formula (1) or through row strides passed as parameters (0) */
  int kv_f16;            /* KV caches of packed f16 (the plan's kvDtype, or the session's tuning
                          * kv=f16); configure runs before the caches are made (kv_buf_new).
                          * Backends without it keep f32. */
  int persist_min_steps; /* the plan's persistentDecodeMinSteps; -1 the plan has none (persistentDecode
                          * null), 0 not given (no plan: the backend's default) */
  /* The prefill products' tiles the plan resolved (a tuned entry's
   * candidate.prefillTile, TMxTN, and prefillTileI8, TMxTNxRMxRNxKB;
   * docs/tuning.md); 0: the backend's own (tuning matmul, matmulI8, which
   * win when given). */
  int prefill_tm, prefill_tn;
  int prefill_i8[5];
  /* The session's tuning keys (backend/tuning.h; NULL: none): every key
   * that sets a backend's geometry or switches reaches it here, at
   * configure, and nowhere else (a backend is made with none: the plan
   * reads its caps first). Read during configure only; not kept. */
  const struct wisp_tuning *tuning;
} wisp_backend_settings;

/* Every switch on, default geometry, f32 KV. */
static inline void wisp_backend_settings_default(wisp_backend_settings *s) {
  *s = (wisp_backend_settings){.flash_blocks = 32,
                                .ffn_full_block = -1,
                                .head_full_block = -1,
                                .attn_output_gate = 1,
                                .attn_fused_rope = 1,
                                .deltanet_proj_qkvz = 1,
                                .deltanet_proj_ab = 1,
                                .deltanet_core = 1,
                                .attn_direct_kv = 1};
}

struct wisp_backend {
  const char *name;
  /* Optional (NULL: nothing to configure): applies the session's settings
   * (the plan's, with its tuning keys); before the session prepares its
   * weights and makes its caches. A bad tuning geometry is a one-line error. */
  wisp_status (*configure)(wisp_backend *be, const wisp_backend_settings *s);
  /* Optional: WISP_OK when the backend runs kernel op/variant of the plan
   * (a registry variant, or "profile:" + a profile kernel's WGSL stem) and
   * loads `wgsl` for it (the file the plan names; "" for none); else a
   * one-line error. wisp_session_new checks every op of the plan with it. */
  wisp_status (*check_kernel)(wisp_backend *be, const char *op, const char *variant, const char *wgsl);
  /* What the device can do, for plan resolution (rules and `requires`). */
  void (*caps)(wisp_backend *be, wisp_device_caps *out);
  /* Optional: the kernels of several-token attention, integer products and
   * batched steps that the backend picks by its options, past the plan's
   * variants (`wisp plan`'s "why this path"), as lines into out; head_dim
   * 0: no attention. mats: the model's matrices with the plan's kernel
   * choices, as a session would prepare them (n_mats of them). */
  void (*prefill_paths)(wisp_backend *be, int head_dim, const wisp_matrix *const *mats, int n_mats, char *out,
                        size_t cap);
  wisp_buf *(*buf_new)(wisp_backend *be, size_t n_floats); /* zero-filled; NULL on failure */
  void (*buf_free)(wisp_backend *be, wisp_buf *b);
  void (*buf_read)(wisp_backend *be, const wisp_buf *b, size_t off, size_t n, float *dst);
  void (*buf_zero)(wisp_backend *be, wisp_buf *b);
  /* Called once per weight before any op; checks the plan's kernel choices
   * (m->choice) and may upload the weight. */
  wisp_status (*prepare_matrix)(wisp_backend *be, wisp_matrix *m);
  wisp_status (*prepare_vector)(wisp_backend *be, wisp_vector *v);

  /* out[t] = E[tokens[t]] dequantized. */
  void (*embed)(wisp_backend *be, const wisp_matrix *E, const int32_t *tokens, int n, wisp_buf *out);
  /* out[t] = x[t] / rms(x[t]) * w, per row of `dim`. */
  void (*rmsnorm)(wisp_backend *be, const wisp_buf *x, const wisp_vector *w, float eps, int n, int dim,
                  wisp_buf *out);
  /* Optional: the graph pass's "rmsnorm+matmul" as one op: xn = rmsnorm(x, w)
   * (n rows of W->cols), then y[t] (+)= W xn[t]; the same results as the two
   * ops (xn written too). The step graph calls it where the pass marked the
   * pattern (model/graph_fuse.c); NULL: the two ops one after the other. */
  void (*rmsnorm_matmul)(wisp_backend *be, const wisp_buf *x, const wisp_vector *w, float eps, int n, wisp_buf *xn,
                         const wisp_matrix *W, wisp_buf *y, int accumulate);
  /* Optional: a product with the ops the graph pass fused into it
   * (wisp_fused_matmul), for the fusions the backend's caps name
   * (caps.h WISP_FUSE_*); the step graph calls it where the session's plan
   * applies one. pre always runs (inside the product where the kernels
   * take it, else before it). Returns 1 when post ran too, 0 when nothing
   * of post was recorded (the caller then runs it as its own op). */
  int (*matmul_fused)(wisp_backend *be, const wisp_fused_matmul *f);
  /* y[t] (+)= W x[x_row0 + t] for t < n; accumulate adds into y (residual). */
  void (*matmul)(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n, wisp_buf *y,
                 int accumulate);
  /* Short conv: bcx[t] = (B, C, x) of `dim` each; out[t] = C * conv(B*x)
   * with a causal depthwise kernel of length L (taps [dim][L]) whose last L-1
   * inputs persist in `state` [dim][L-1] across calls. */
  void (*shortconv)(wisp_backend *be, const wisp_buf *bcx, const wisp_vector *taps, int L, int n, int dim,
                    wisp_buf *state, wisp_buf *out);
  void (*attention)(wisp_backend *be, const wisp_attention_args *a);
  /* Optional ops (NULL when the backend lacks them; an architecture that
   * needs one fails at session creation with the op's name). */
  /* Full attention with output gate and partial RoPE. */
  void (*attention_gated)(wisp_backend *be, const wisp_gated_attention_args *a);
  /* Gated DeltaNet: conv + recurrence + gated RMSNorm, see above. */
  void (*gated_deltanet)(wisp_backend *be, const wisp_deltanet_args *a);
  /* out[t][i] = silu(gu[t][i]) * gu[t][ffn + i]. */
  void (*swiglu)(wisp_backend *be, const wisp_buf *gate_up, int n, int ffn, wisp_buf *out);
  /* Optional row ops (rowops: NULL when the backend lacks them; a graph
   * that needs one fails at session creation with the op's name). */
  /* out[t][i] = gelu_tanh(gu[t][i]) * gu[t][ffn + i], with
   * gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))). */
  void (*geglu)(wisp_backend *be, const wisp_buf *gate_up, int n, int ffn, wisp_buf *out);
  /* x[t][i] += b[i] for t < n, i < dim = b->n (a product's bias), in place. */
  void (*add_bias)(wisp_backend *be, wisp_buf *x, const wisp_vector *b, int n);
  /* x[i] += y[i] for i < count (a residual add of a normed block output). */
  void (*add)(wisp_backend *be, wisp_buf *x, const wisp_buf *y, size_t count);
  /* x[i] *= s for i < count. */
  void (*scale)(wisp_backend *be, wisp_buf *x, size_t count, float s);
  /* The decode loop: token ids stay on the device between passes, stored as
   * uint32 bit patterns in a wisp_buf. */
  void (*buf_write)(wisp_backend *be, wisp_buf *b, size_t off, size_t n, const float *src);
  /* out[0] = E[ids[slot]] dequantized (one token). */
  void (*embed_id)(wisp_backend *be, const wisp_matrix *E, const wisp_buf *ids, int slot, wisp_buf *out);
  /* ids[slot] = the next token chosen from logits[0..vocab) (sampling.h). */
  void (*sample_id)(wisp_backend *be, const wisp_buf *logits, int vocab, const wisp_sampling *p, uint32_t step,
                    wisp_buf *ids, int slot);
  /* Optional, a batched step's draws at once: ids[r] = the token sample_id
   * would draw from row r of logits (rows of vocab floats) with p[r] at
   * step steps[r], for r < n (no penalties). Returns 0 (nothing recorded)
   * where it cannot; the caller then draws row by row. */
  int (*sample_rows)(wisp_backend *be, const wisp_buf *logits, int vocab, int n, const wisp_sampling *p,
                     const uint32_t *steps, wisp_buf *ids);
  /* Optional, for a decode loop that records the next batch while the
   * device runs the current one: b[dst_off + i] = b[src_off + i] for i < n,
   * in recorded order (ranges do not overlap); read_start submits what is
   * recorded and starts copying b[off .. off+n) into readback slot `slot`
   * (0 or 1) without waiting; read_finish waits for that slot and copies
   * its n values out. Errors of the submitted work surface from either. */
  void (*buf_copy)(wisp_backend *be, wisp_buf *b, size_t dst_off, size_t src_off, size_t n);
  /* Optional: dst[0..n) = src[0..n) between two f32 buffers, in recorded
   * order. The decode loop snapshots the recurrent state with it, so that a
   * batch that ran past a stop token can be rewound. */
  void (*buf_copy_to)(wisp_backend *be, wisp_buf *dst, const wisp_buf *src, size_t n);
  wisp_status (*read_start)(wisp_backend *be, const wisp_buf *b, size_t off, size_t n, int slot);
  wisp_status (*read_finish)(wisp_backend *be, int slot, float *dst, size_t n);
  /* Optional: sends what is recorded to the device now, without waiting
   * (errors surface from the next read_finish or sync). The decode loop
   * uses it to let the device start on the first steps of a batch while
   * the host records the rest. */
  void (*submit)(wisp_backend *be);
  /* Finishes recorded work; returns the first device error, if any. */
  wisp_status (*sync)(wisp_backend *be);
  void (*destroy)(wisp_backend *be);
  /* Optional: a KV cache for n_values keys (or values) in the layout
   * attention expects, zero-filled; NULL = buf_new(n_values). With kv_f16
   * both backends keep binary16 pairs in 32-bit words: half the bytes. Such a
   * buffer is only for attention's k_cache / v_cache (not buf_read as f32). */
  wisp_buf *(*kv_buf_new)(wisp_backend *be, size_t n_values);
  /* Optional: makes a KV cache (kv_buf_new's or buf_new's) hold n_values,
   * more than it does, keeping its values and its handle, between steps.
   * A backend with it gets caches that grow with the sequence (graph_state.c);
   * one without gets them made for the whole context. */
  wisp_status (*kv_buf_grow)(wisp_backend *be, wisp_buf *b, size_t n_values);
  /* Optional: records k decode steps of graph g in one go (greedy or
   * sampled as sp says, sample_id's draw): the token
   * in ids[0] at position pos, the chosen ids into ids[1..k] (as decode_step
   * slots 0..k-1 would), the graph's state buffers updated. Returns
   * WISP_EUNSUPPORTED, with nothing recorded and no error kept, when this
   * graph, sampling or device cannot take that path; the caller then
   * records decode_step k times. */
  wisp_status (*decode_graph)(wisp_backend *be, const wisp_decode_graph *g, wisp_buf *ids, int pos, int k,
                              const wisp_sampling *sp);
  /* Optional, with decode_graph: the decode_graph batch that began at pos
   * came back failed (ids outside the vocabulary: the persistent decode's
   * grid barrier gave up). Puts the graph's state buffers back as they were
   * at pos and turns decode_graph off for good (it answers
   * WISP_EUNSUPPORTED from then on), so that the caller can record that
   * batch again op by op. Call with nothing in flight. WISP_EUNSUPPORTED:
   * no such batch is known (the state cannot be put back). */
  wisp_status (*decode_graph_reset)(wisp_backend *be, int pos);

  /* ---- several sequences in one step (src/model/graph_run.c, wisp_graph_step_rows) ---- */
  /* Optional: y[t] (+)= W x[t] for t < n, every row computed exactly as a
   * one-row matmul (the decode product) computes it, whatever n is, so
   * that a sequence decoded beside others gets the tokens it gets alone.
   * The weight is read once for all rows where the backend can. */
  void (*matmul_rows)(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int n, wisp_buf *y, int accumulate);
  /* Optional: dst[dst_off + i] = src[src_off + i] for i < n (32-bit
   * words), in recorded order; dst and src are different buffers. Moves a
   * row of a batch to and from one sequence's own buffers. */
  void (*buf_copy_at)(wisp_backend *be, wisp_buf *dst, size_t dst_off, const wisp_buf *src, size_t src_off, size_t n);
  /* Optional: out[i] (i < slots) = a zero-filled buffer of n_values
   * floats (kv: a KV cache in kv_buf_new's layout) for slot i of a session.
   * Each is a buffer like any other (bound, read, zeroed, freed on its
   * own); the backend places them together in as few device buffers as its
   * limits allow, so that one dispatch of a rows op (below) reaches every
   * slot's state. NULL: the caller makes them one by one. WISP_ENOMEM
   * (nothing kept) on failure. */
  wisp_status (*buf_new_slots)(wisp_backend *be, size_t n_values, int kv, int slots, wisp_buf **out);
  /* Optional: the mixers over the rows of a batched decode step, one
   * token of each of n sequences (wisp_mixer_rows). Each takes the
   * one-token op's arguments with the shared input and output buffers of
   * n rows (a->n = n; pos0 and the state buffers in them are unused):
   * row r's input is row r of the input, its output row r of the output,
   * and it runs on its own state at its own position, with the arithmetic
   * of the one-token op (a row's result does not depend on the others).
   * Returns 0, with nothing recorded, when it cannot take these rows; the
   * caller then runs the one-token op row by row. */
  int (*shortconv_rows)(wisp_backend *be, const wisp_buf *bcx, const wisp_vector *taps, int L, int dim,
                        const wisp_mixer_rows *rows, wisp_buf *out);
  int (*attention_rows)(wisp_backend *be, const wisp_attention_args *a, const wisp_mixer_rows *rows);
  int (*attention_gated_rows)(wisp_backend *be, const wisp_gated_attention_args *a, const wisp_mixer_rows *rows);
  int (*gated_deltanet_rows)(wisp_backend *be, const wisp_deltanet_args *a, const wisp_mixer_rows *rows);
  /* Optional: the repetition penalty on the device (sampling.h,
   * wisp_penalize_reference): hist[hist_off .. hist_off + n) holds token
   * ids as uint32 bit patterns (ids outside [0, vocab) are empty entries);
   * each distinct id's logit is multiplied by 1/penalty when positive,
   * else by the penalty, once. */
  void (*penalize)(wisp_backend *be, wisp_buf *logits, int vocab, const wisp_buf *hist, size_t hist_off, int n,
                   float penalty);
};

/* Backends this build has. `threads` 0 = one per online core. */
wisp_status wisp_cpu_backend_new(int threads, wisp_backend **out);
/* The scalar reference kernels for every op of a cpu backend (tuning
 * cpuScalar=1; before caps, so that the plan chooses scalar variants). */
void wisp_cpu_backend_use_scalar(wisp_backend *be);

/* Per-op wall time of a cpu backend (wisp bench --op-times), off unless
 * turned on: wisp_cpu_backend_time_ops(be, 1) zeroes the counters and
 * starts timing (two clock reads an op), 0 stops it. wisp_cpu_backend_op_times
 * copies up to cap rows with calls > 0 and returns their number (0 for a
 * backend other than cpu). */
typedef struct {
  const char *op;
  double seconds;
  long calls;
} wisp_cpu_op_time;
void wisp_cpu_backend_time_ops(wisp_backend *be, int on);
int wisp_cpu_backend_op_times(const wisp_backend *be, wisp_cpu_op_time *out, int cap);
/* Bytes a cpu backend holds in copies of weights for its integer products
 * (Q8_0 copies of F16 / BF16 matrices, Q4 copies of Q4_0 ones, f16 block
 * scales of Q4 / Q4Z ones); 0 for a backend other than cpu. Every other
 * type's integer product reads the matrix's own bytes. */
size_t wisp_cpu_backend_copy_bytes(const wisp_backend *be);

#endif
