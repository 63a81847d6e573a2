/* What the files of the CPU backend share: the backend's state, the op
 * timer and the helpers that hand work to the pool. cpu_backend.c owns the
 * backend (buffers, norms, products, sampling); cpu_shortconv.c,
 * cpu_attention.c and cpu_gated_deltanet.c run one mixer each. Not an
 * interface for the rest of wisp (that is backend.h). */
#ifndef WISP_CPU_INTERNAL_H
#define WISP_CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_i8.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/threadpool.h"
#include "util/clock.h"

/* What the op timer (wisp_cpu_backend_time_ops) adds each op's time to. */
enum {
  OP_EMBED, OP_RMSNORM, OP_NORM_QUANTIZE, OP_I8_QUANTIZE, OP_I8_PREFILL, OP_I8_DECODE, OP_EXACT_PREFILL,
  OP_EXACT_DECODE, OP_SHORTCONV, OP_ATTENTION, OP_DELTANET_CONV, OP_DELTANET_HEADS, OP_SWIGLU, OP_SAMPLE, OP_COPY,
  OP_OTHER, OP_N
};
/* n 32-bit words at data. A KV cache made while the caches are f16
 * (cpu_kv_buf_new) holds IEEE binary16 values, two a word (f16 = 1): only
 * attention reads and writes those as values; zeroing and copying words
 * work on either kind. */
struct wisp_buf {
  float *data;
  size_t n;
  int f16;
};

/* What the integer products of one matrix read in place of its own bytes
 * (cpu_i8.h): the f16 copy of a Q4 / Q4Z matrix's block scales (read
 * instead of its f32 scales), the Q8_0 copy of an F16 (or other block
 * type) matrix (f16_i8, ...), or the Q4 copy of a Q4_0 matrix (q4_0_i8:
 * its nibbles in wisp Q4's order, then its f16 scales as they are).
 * `host` is what it was made from (the f32 scales, the weights), n the
 * matrix's count of 32-blocks, q8 which of the three it is (I8_COPY_*). */
enum { I8_COPY_SCALES = 0, I8_COPY_Q8_0 = 1, I8_COPY_Q4 = 2 };
typedef struct {
  const void *host;
  size_t n;
  int q8;
  void *data; /* uint16_t[n] scales; n Q8_0 blocks of WISP_Q8_0_BYTES; or n*16 nibble bytes, then uint16_t[n] scales */
} i8_copy;

typedef struct {
  wisp_backend base;
  wisp_pool *pool;
  const wisp_cpu_kernels *k;
  const wisp_i8_kernels *i8; /* integer products (cpu_i8.h), the best set this CPU runs */
  wisp_i8_act act;           /* the current product's activations, quantized */
  /* the copies the integer products read (f16 block scales of Q4 / Q4Z,
   * Q8_0 weights of F16 / BF16 and for Q6_K / Q3_K / Q2_K prefill, Q4 of Q4_0),
   * owned here (a matrix is a view of the model's
   * weights, and the model outlives the backend); looked up from
   * copy_next on, the slot after the last hit, since the products of a step
   * run in the order they were prepared */
  i8_copy *copies;
  size_t n_copies, cap_copies, copy_next;
  /* per-thread scratch, grown on demand */
  float **scratch;
  size_t scratch_len;
  float *qbuf; /* rotated queries of the current attention call */
  size_t qbuf_len;
  float *kbuf; /* its normed and rotated keys, before they are rounded into an f16 cache */
  size_t kbuf_len;
  int kv16;    /* KV caches made from now on are f16 (configure: the plan's kvDtype, tuning kv=f16) */
  float *dnbuf; /* conv outputs of the current gated_deltanet call */
  size_t dnbuf_len;
  float *dnconv; /* that call's conv taps and state, transposed (dn_conv) */
  size_t dnconv_len;
  float *scbuf; /* a short conv prefill's B*x rows, taps and state, transposed (shortconv_prefill) */
  size_t scbuf_len;
  float *dnprep; /* that call's chunk preparations, a wave's worth (dn_chunked) */
  size_t dnprep_len;
  wisp_status error; /* first failure inside an op, reported by sync */
  int timing;        /* the op timer is on */
  double op_s[OP_N];
  long op_calls[OP_N];
} cpu_backend;

static inline cpu_backend *as_cpu(wisp_backend *be) { return (cpu_backend *)be; }

/* The op timer: t = op_start(c); ...; op_stop(c, OP_X, t). */
static inline double op_start(const cpu_backend *c) { return c->timing ? wisp_now_s() : 0; }
static inline void op_stop(cpu_backend *c, int op, double t0) {
  if (!c->timing) return;
  c->op_s[op] += wisp_now_s() - t0;
  c->op_calls[op]++;
}

/* An f16 KV cache's values (binary16, two a word). */
static inline uint16_t *halves(const wisp_buf *b) { return (uint16_t *)b->data; }

/* The mixers over the rows of a batched step (backend.h shortconv_rows
 * ...): each row is the one-token op on that row of the shared buffers
 * (a view: the row's floats inside them) and its own state. */
static inline wisp_buf row_view(const wisp_buf *b, int r, int width) {
  return (wisp_buf){.data = b->data + (size_t)r * width, .n = (size_t)width}; /* activations: f32 */
}

/* Per-thread scratch of at least n floats; 0 when out of memory. */
int wisp_cpu_ensure_scratch(cpu_backend *c, size_t n);
/* Grows a buffer of the backend to n floats (kept for later calls); 0 when out of memory. */
int wisp_cpu_ensure_buf(float **buf, size_t *len, size_t n);
/* fn(ctx, i0, i1) over [0, n) in ranges of grain, spread over the pool
 * (inline when there is one range or one thread). */
typedef void (*range_fn)(void *ctx, int i0, int i1);
void wisp_cpu_run_ranges(cpu_backend *c, int n, int grain, range_fn fn, void *ctx);
/* Channels a task for a mixer over n tokens of dim channels (cpu_shortconv.c). */
int wisp_cpu_channel_grain(const cpu_backend *c, int n, int dim);

/* The row ops (backend.h geglu, add_bias, add, scale; cpu_rowops.c) into the vtable. */
void wisp_cpu_rowops_install(wisp_backend *be);

/* The mixers (backend.h), one file each. */
void wisp_cpu_shortconv(wisp_backend *be, const wisp_buf *bcx, const wisp_vector *taps, int L, int n, int dim,
                        wisp_buf *state, wisp_buf *out);
int wisp_cpu_shortconv_rows(wisp_backend *be, const wisp_buf *bcx, const wisp_vector *taps, int L, int dim,
                            const wisp_mixer_rows *rows, wisp_buf *out);
void wisp_cpu_attention(wisp_backend *be, const wisp_attention_args *a);
void wisp_cpu_attention_gated(wisp_backend *be, const wisp_gated_attention_args *g);
int wisp_cpu_attention_rows(wisp_backend *be, const wisp_attention_args *a, const wisp_mixer_rows *rows);
int wisp_cpu_attention_gated_rows(wisp_backend *be, const wisp_gated_attention_args *a, const wisp_mixer_rows *rows);
void wisp_cpu_gated_deltanet(wisp_backend *be, const wisp_deltanet_args *a);
int wisp_cpu_gated_deltanet_rows(wisp_backend *be, const wisp_deltanet_args *a, const wisp_mixer_rows *rows);

#endif
