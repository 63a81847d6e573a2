/* wisp: a C11 runtime for local LLM inference (CPU reference backend and a
 * WebGPU backend). This header is the public C API.
 *
 * Every call that can fail returns a wisp_status; on failure a one-line
 * message describing the problem is available from wisp_last_error(). */
#ifndef WISP_H
#define WISP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  WISP_OK = 0,
  WISP_EINVAL,       /* bad argument or option */
  WISP_EIO,          /* a file could not be read or written */
  WISP_EFORMAT,      /* a file is malformed: JSON, manifest, safetensors, ... */
  WISP_ENOMEM,       /* an allocation failed */
  WISP_EUNSUPPORTED, /* valid input that this build does not handle */
  WISP_EHASH,        /* a digest did not match */
  WISP_EDEVICE       /* the compute device failed or lacks a feature */
} wisp_status;

/* The message of the last failed call on this thread. */
const char *wisp_last_error(void);

/* Opaque handles. */
typedef struct wisp_model wisp_model;     /* an opened artifact bound to an architecture */
typedef struct wisp_session wisp_session; /* one sequence: KV/conv state + backend */

typedef struct {
  const char *backend; /* "cpu" (default) */
  int threads;         /* 0 = one per core */
  int max_context;     /* 0 = the artifact's maxPositions */
  const char *profile; /* runtime profile name or file; NULL = "default" */
  /* "key=value,..." settings beside the plan, for measurements and tests
   * (docs/configuration.md); NULL = none. An unknown key fails wisp_session_new. */
  const char *tuning;
} wisp_session_options;

wisp_status wisp_model_open(const char *artifact_dir, wisp_model **out);
void wisp_model_close(wisp_model *m);
int wisp_model_vocab(const wisp_model *m);

wisp_status wisp_session_new(wisp_model *m, const wisp_session_options *opt, wisp_session **out);
void wisp_session_free(wisp_session *s);
/* Feeds n tokens at the current position; when logits is non-NULL it receives
 * the vocabulary-sized logits of the last token. */
wisp_status wisp_session_eval(wisp_session *s, const int32_t *tokens, int n, float *logits);
/* The same, but logits (n x vocabulary floats, required) receives the
 * logits of every token: row i predicts the token after tokens[i]. */
wisp_status wisp_session_eval_all(wisp_session *s, const int32_t *tokens, int n, float *logits);
/* The decode loop: tokens are chosen where the logits are (greedy, or
 * temperature with top-k/top-p/min-p; see src/backend/sampling.h) and fed to
 * the next step without a host round trip; one submit and one readback per
 * batch of `batch` tokens. */
typedef struct {
  float temperature;     /* <= 0: greedy */
  int top_k;             /* 0 = off */
  float top_p;           /* >= 1 = off */
  float min_p;           /* 0 = off */
  uint64_t seed;
  const int32_t *stop;   /* stop tokens, checked once per batch */
  int n_stop;
  int batch;             /* tokens per submit; 0 = the plan's decode loop setting */
  /* Called after each batch with the new tokens (may be NULL); return
   * non-zero to stop early. */
  int (*on_tokens)(void *user, const int32_t *tokens, int n);
  void *user;
  /* 1: record a batch only after the previous one's ids are back. 0 (the
   * default): where the backend can, the next batch is recorded and
   * submitted while the device runs the current one (the last sampled id
   * stays on the device). A stop token inside a batch or with a batch in
   * flight is handled by rewinding (the recurrent state is snapshotted
   * before each batch), so the session continues as after the per-token
   * path; only an early stop by on_tokens with a batch in flight leaves the
   * session needing a reset. Batches of one token with stop tokens (chat)
   * never run ahead. */
  int sequential;
} wisp_generate_options;

/* Generates up to n tokens following `first` (a token already chosen, not
 * yet fed). out receives them (n entries); *n_out how many were made: a stop
 * token ends generation and is included. If a stop token comes before the
 * end of its batch, the steps after it have still run and advanced the
 * recurrent state: the session must be reset before it is used again (further
 * calls fail until then). */
wisp_status wisp_session_generate(wisp_session *s, int32_t first, int n, const wisp_generate_options *o, int32_t *out,
                                  int *n_out);
/* Tokens per batch the plan asks for (batchSize x readbackInterval, bounded
 * by maxBatchDecodeTokens). */
int wisp_session_plan_batch(const wisp_session *s);

/* The id (sha256) of the execution plan this session runs. */
const char *wisp_session_plan_id(const wisp_session *s);
/* Tokens consumed so far. */
int wisp_session_position(const wisp_session *s);
void wisp_session_reset(wisp_session *s);

#ifdef __cplusplus
}
#endif
#endif
