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
/* The id (sha256) of the execution plan this session runs. */
const char *wisp_session_plan_id(const wisp_session *s);
/* Tokens consumed so far. */
int wisp_session_position(const wisp_session *s);
void wisp_session_reset(wisp_session *s);

#ifdef __cplusplus
}
#endif
#endif
