/* Models and sessions: the public API of include/wisp.h.
 *
 * A wisp_model is an opened artifact bound to its architecture. A
 * wisp_session owns a backend and one sequence's state (KV cache, conv
 * state) and feeds tokens through the architecture's forward pass in
 * chunks, so a long prompt never needs activations for all of it at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/factory.h"
#include "backend/tuning.h"
#include "engine/decode_loop.h"
#include "engine/internal.h"
#include "engine/plan_apply.h"
#include "engine/sequence.h"
#include "engine/session.h"
#include "engine/slots.h"
#include "format/digest.h"
#include "format/tensor.h"
#include "util/err.h"
#include "util/options.h"

#define PREFILL_CHUNK 128
#define PREFILL_CHUNK_GPU 512       /* a session of several slots: each slot's activations are made for a chunk */
#define PREFILL_CHUNK_GPU_ALONE 1024 /* a session of one slot, where its activations fit a binding */
/* More CPU threads than any machine wisp runs on has cores: a larger count
 * is a mistake, and the pool would start every one of them. */
#define WISP_SESSION_MAX_THREADS 1024

wisp_status wisp_model_open(const char *dir, wisp_model **out) {
  if (!out) return wisp_fail(WISP_EINVAL, "wisp_model_open: no place for the model (out is NULL)");
  *out = NULL;
  if (!dir || !*dir) return wisp_fail(WISP_EINVAL, "wisp_model_open: no artifact directory");
  wisp_model *m = calloc(1, sizeof *m);
  if (!m) return wisp_fail(WISP_ENOMEM, "out of memory");
  wisp_status st = wisp_artifact_open(dir, &m->artifact);
  if (st) goto fail;
  /* A flipped byte in weights.bin is refused here (format/digest.h). */
  if ((st = wisp_artifact_check_digests(m->artifact))) goto fail;
  m->arch = wisp_arch_find(m->artifact->architecture);
  if (!m->arch) {
    st = wisp_fail(WISP_EUNSUPPORTED, "%s/manifest.json: unknown architecture '%s' in wisp.architecture", dir,
                   m->artifact->architecture);
    goto fail;
  }
  if ((st = m->arch->bind(m->artifact, &m->weights))) goto fail;
  wisp_model_shape shape;
  if ((st = m->arch->plan_shape(m->weights, &shape)) || (st = m->arch->describe(&shape, m->weights, &m->graph)))
    goto fail;
  wisp_graph_fuse(&m->graph);
  *out = m;
  return WISP_OK;
fail:
  wisp_model_close(m);
  return st;
}

void wisp_model_close(wisp_model *m) {
  if (!m) return;
  if (m->text) m->text_free(m->text);
  wisp_graph_free(&m->graph);
  if (m->weights) m->arch->free_weights(m->weights);
  wisp_artifact_free(m->artifact);
  free(m);
}

int wisp_model_vocab(const wisp_model *m) {
  if (!m) {
    wisp_fail(WISP_EINVAL, "wisp_model_vocab: no model");
    return -1;
  }
  return m->artifact->shape.vocab;
}

/* Rope tables for the session's context where the model's are shorter,
 * built from the graph's inverse frequencies (the rows the model stores are
 * the first rows of these: the same formula, wisp_rope_rows). */
static wisp_status session_rope(wisp_session *s) {
  wisp_graph *g = &s->graph;
  if (s->max_pos <= g->rope_rows) return WISP_OK;
  if (!g->rope_freq) /* the model's max_positions is at most its tables' rows then */
    return wisp_fail(WISP_EUNSUPPORTED, "context %d is longer than the rope tables (%d rows)", s->max_pos, g->rope_rows);
  const int half = g->rotary_dim / 2, local = g->rope_freq_local != NULL;
  const size_t n = (size_t)s->max_pos * half;
  s->rope_owned = malloc(sizeof(float) * (local ? 4 : 2) * n);
  if (!s->rope_owned) return wisp_fail(WISP_ENOMEM, "out of memory for the rope tables of %d positions", s->max_pos);
  wisp_rope_rows(g->rope_freq, half, s->max_pos, s->rope_owned, s->rope_owned + n);
  s->rope_cos = (wisp_vector){(int)n, s->rope_owned, NULL};
  s->rope_sin = (wisp_vector){(int)n, s->rope_owned + n, NULL};
  g->rope_cos = &s->rope_cos;
  g->rope_sin = &s->rope_sin;
  if (local) { /* the sliding layers' own frequencies (graph.h rope_freq_local) */
    wisp_rope_rows(g->rope_freq_local, half, s->max_pos, s->rope_owned + 2 * n, s->rope_owned + 3 * n);
    s->rope_cos_local = (wisp_vector){(int)n, s->rope_owned + 2 * n, NULL};
    s->rope_sin_local = (wisp_vector){(int)n, s->rope_owned + 3 * n, NULL};
    g->rope_cos_local = &s->rope_cos_local;
    g->rope_sin_local = &s->rope_sin_local;
  }
  g->rope_rows = s->max_pos;
  return WISP_OK;
}

/* Tokens per prefill forward call (activations scale with it; every slot
 * has its own). A GPU wants big products: at 64 tokens a 1024-row product
 * is a few dozen workgroups on a GPU of 132 SMs, and at 512 a 1024-row
 * product of the integer path is 256 workgroups, a third of what an H100
 * holds at once; a prefill of 4,096 tokens in chunks of 1,024 instead of
 * 512 was 1.06-1.15x faster on Qwen 3.5 0.8B / 2B (H100,
 * bench/results/h100-prefill-20261206/ab3). A session of one slot takes
 * 1,024 where each activation buffer of that chunk fits a binding, one of
 * several slots 512. The CPU's products read each weight once per chunk:
 * 128 tokens against 64 raised a 128-token prefill on the H200 host by
 * 1.2-1.5x (bench/results/h200-cpu). Tuning prefillChunk overrides. */
int wisp_session_prefill_chunk(const wisp_graph *g, const wisp_device_caps *caps, int slots) {
  if (!strcmp(caps->backend, "cpu")) return PREFILL_CHUNK;
  if (slots > 1) return PREFILL_CHUNK_GPU;
  size_t widest = 1;
  for (int a = 0; a < WISP_ACT_COUNT; a++)
    if (g->act[a] > widest) widest = g->act[a];
  const uint64_t bytes = (uint64_t)PREFILL_CHUNK_GPU_ALONE * widest * sizeof(float);
  return caps->max_binding_bytes && bytes > caps->max_binding_bytes ? PREFILL_CHUNK_GPU : PREFILL_CHUNK_GPU_ALONE;
}

wisp_status wisp_session_new(wisp_model *m, const wisp_session_options *opt, wisp_session **out) {
  if (!out) return wisp_fail(WISP_EINVAL, "wisp_session_new: no place for the session (out is NULL)");
  *out = NULL;
  if (!m) return wisp_fail(WISP_EINVAL, "wisp_session_new: no model");
  wisp_session_options o;
  wisp_status st = WISP_TAKE_OPTIONS(wisp_session_options, WISP_SESSION_OPTIONS_FIRST_SIZE, opt, &o);
  if (st) return st;
  if (o.threads < 0) return wisp_fail(WISP_EINVAL, "wisp_session_new: threads %d is negative (0 = one per physical core available)", o.threads);
  if (o.threads > WISP_SESSION_MAX_THREADS)
    return wisp_fail(WISP_EINVAL, "wisp_session_new: threads %d is more than %d", o.threads, WISP_SESSION_MAX_THREADS);
  if (o.slots < 0) return wisp_fail(WISP_EINVAL, "wisp_session_new: slots %d is negative (0 = 1)", o.slots);
  if (o.max_context < 0)
    return wisp_fail(WISP_EINVAL, "wisp_session_new: max_context %d is negative (0 = the artifact's)", o.max_context);
  wisp_session *s = calloc(1, sizeof *s);
  if (!s) return wisp_fail(WISP_ENOMEM, "out of memory");
  s->model = m;
  wisp_tuning *t = NULL;
  wisp_tuning_session_keys keys;
  st = wisp_tuning_new(o.tuning, &t);
  if (st) goto fail;
  wisp_tuning_session(t, &keys);
  s->decode_kick = keys.decode_kick;
  /* The backend is made with what opening its device needs and no other
   * key: the keys reach it in the settings object below (one door). */
  wisp_device_request req;
  wisp_tuning_device_request(t, &req);
  if ((st = wisp_backend_create_for(o.backend, o.threads, &req, &s->backend))) goto fail;
  if (keys.kv_fixed) s->backend->kv_buf_grow = NULL; /* tuning kvGrow=0: caches for the whole context */
  /* artifact + profile + registry + device -> plan -> backend */
  wisp_device_caps caps;
  s->backend->caps(s->backend, &caps);
  s->chunk = wisp_session_prefill_chunk(&m->graph, &caps, o.slots);
  if (keys.prefill_chunk) s->chunk = keys.prefill_chunk;
  wisp_tuning_over_caps(t, &caps); /* fuse=0, fuseArgmax=0, cpuScalar=1 */
  if ((st = wisp_engine_resolve_plan(m, &caps, o.profile, o.registry, &s->plan))) goto fail;
  if ((st = wisp_engine_check_kernels(s->plan, s->backend))) goto fail;
  if ((st = wisp_graph_bind(&m->graph, &s->graph)) || (st = wisp_engine_apply_plan(&s->graph, s->plan))) goto fail;
  wisp_backend_settings bs;
  /* The one settings object: the plan's, then the tuning keys that replace
   * plan values (tuning.c's rule), and the tuning's other keys with it. */
  wisp_engine_backend_settings(s->plan, &bs);
  wisp_tuning_over_plan(t, &bs);
  bs.tuning = t;
  s->kv_f16 = bs.kv_f16 && s->backend->configure && s->backend->kv_buf_new;
  if (s->backend->configure && (st = s->backend->configure(s->backend, &bs))) goto fail;
  wisp_tuning_free(t); /* read by configure, not kept */
  t = NULL;
  /* The context: -c up to the model's own maximum; without it the model's,
   * at most WISP_DEFAULT_CONTEXT (the KV caches are made for it up front). */
  s->max_pos = m->arch->max_positions(m->weights);
  if (o.max_context > 0 && o.max_context < s->max_pos) s->max_pos = o.max_context;
  else if (o.max_context == 0 && s->max_pos > WISP_DEFAULT_CONTEXT) s->max_pos = WISP_DEFAULT_CONTEXT;
  if ((st = session_rope(s))) goto fail;
  if ((st = wisp_graph_prepare(&s->graph, s->backend))) goto fail;
  if ((st = wisp_slots_new(s, o.slots > 0 ? o.slots : 1))) goto fail; /* s->state is slot 0's */
  *out = s;
  return WISP_OK;
fail:
  wisp_tuning_free(t);
  wisp_session_free(s);
  return st;
}

void wisp_session_free(wisp_session *s) {
  if (!s) return;
  if (s->backend) wisp_slots_free(s);
  if (s->state) wisp_graph_state_free(s->state, s->backend);
  if (s->ids) s->backend->buf_free(s->backend, s->ids);
  if (s->backend) wisp_decode_loop_free(s);
  if (s->backend) s->backend->destroy(s->backend);
  wisp_plan_free(s->plan);
  wisp_graph_free(&s->graph);
  free(s->rope_owned);
  free(s);
}

wisp_status wisp_session_eval(wisp_session *s, const int32_t *tokens, int n, float *logits) {
  if (!s) return wisp_fail(WISP_EINVAL, "wisp_session_eval: no session");
  return wisp_session_feed(s, s->state, &s->pos, tokens, n, logits, 0);
}

wisp_status wisp_session_eval_all(wisp_session *s, const int32_t *tokens, int n, float *logits) {
  if (!s) return wisp_fail(WISP_EINVAL, "wisp_session_eval_all: no session");
  if (!logits) return wisp_fail(WISP_EINVAL, "wisp_session_eval_all needs a logits buffer");
  return wisp_session_feed(s, s->state, &s->pos, tokens, n, logits, 1);
}

int wisp_session_position(const wisp_session *s) {
  if (!s) {
    wisp_fail(WISP_EINVAL, "wisp_session_position: no session");
    return -1;
  }
  return s->pos;
}
const wisp_plan *wisp_session_plan(const wisp_session *s) { return s->plan; }
const char *wisp_session_kv_dtype(const wisp_session *s) { return s->kv_f16 ? "f16" : "f32"; }
uint64_t wisp_session_kv_bytes_held(const wisp_session *s) {
  uint64_t total = 0;
  for (int i = 0; i < (s->n_slots > 0 ? s->n_slots : 1); i++) {
    const wisp_graph_state *st = i == 0 ? s->state : s->slot_state[i];
    if (st) total += wisp_graph_kv_bytes(&s->graph, wisp_graph_state_kv_positions(st), s->kv_f16 ? 2 : 4);
  }
  return total;
}
uint64_t wisp_session_kv_bytes(const wisp_session *s) {
  return wisp_graph_kv_bytes(&s->graph, s->max_pos, s->kv_f16 ? 2 : 4) * (uint64_t)(s->n_slots > 0 ? s->n_slots : 1);
}
const char *wisp_session_plan_id(const wisp_session *s) {
  if (!s) {
    wisp_fail(WISP_EINVAL, "wisp_session_plan_id: no session");
    return NULL;
  }
  return s->plan->id;
}
int wisp_session_context(const wisp_session *s) { return s->max_pos; }
const char *wisp_session_backend_name(const wisp_session *s) { return s->backend->name; }

int wisp_session_device_stats(const wisp_session *s, wisp_backend_stats *out) {
  return wisp_backend_stats_get(s->backend, out);
}
void wisp_session_time_ops(wisp_session *s, int on) { wisp_cpu_backend_time_ops(s->backend, on); }
int wisp_session_op_times(const wisp_session *s, wisp_cpu_op_time *out, int cap) {
  return wisp_cpu_backend_op_times(s->backend, out, cap);
}
int wisp_session_pipelined(const wisp_session *s) { return s->backend->read_start != NULL; }
