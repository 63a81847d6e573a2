/* Models and sessions (session.c): what the engine says about a session
 * beyond include/wisp.h. */
#ifndef WISP_ENGINE_SESSION_H
#define WISP_ENGINE_SESSION_H

#include "backend/stats.h"
#include "engine/internal.h"

int wisp_session_context(const wisp_session *s);
const wisp_plan *wisp_session_plan(const wisp_session *s);
/* The KV caches' element type as the backend keeps them: "f16" (the plan's
 * kvDtype f16, or tuning kv=f16) or "f32". */
const char *wisp_session_kv_dtype(const wisp_session *s);
/* Bytes of the KV caches of all the session's slots, as made for its context. */
uint64_t wisp_session_kv_bytes(const wisp_session *s);
/* Bytes the KV caches of all its slots hold now (less where they grow with
 * the sequences, graph_state.c). Not while a step runs. */
uint64_t wisp_session_kv_bytes_held(const wisp_session *s);
/* The same of a scheduler's session (scheduler.c); *full: the bytes for the
 * whole context of every slot. Not while a step runs. */
uint64_t wisp_sched_kv_bytes_held(const struct wisp_sched *S, uint64_t *full);
const char *wisp_session_backend_name(const wisp_session *s);
/* What `wisp run` and `wisp bench` report of the session's backend: its
 * device counters (1 and *out filled when it keeps them: webgpu), per-op
 * times of a cpu backend (backend.h, wisp_cpu_backend_time_ops /
 * wisp_cpu_backend_op_times), and whether its decode loop can keep two
 * batches in flight (read_start). */
int wisp_session_device_stats(const wisp_session *s, wisp_backend_stats *out);
void wisp_session_time_ops(wisp_session *s, int on);
int wisp_session_op_times(const wisp_session *s, wisp_cpu_op_time *out, int cap);
int wisp_session_pipelined(const wisp_session *s);
/* Tokens per prefill forward call of a session of `slots` slots (0: one) over graph g
 * on a device with caps (before tuning prefillChunk): 128 on the CPU; on a
 * GPU 512 with several slots, 1,024 with one where each activation buffer
 * of that many tokens fits a binding (caps->max_binding_bytes), else 512. */
int wisp_session_prefill_chunk(const wisp_graph *g, const wisp_device_caps *caps, int slots);
/* The tuning keys a session takes (wisp_session_options.tuning), for
 * `--help`: comma-separated into out (cap bytes), the test-only keys left out. */
void wisp_session_tuning_keys(char *out, size_t cap);

#endif
