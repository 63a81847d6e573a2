/* The request bodies of `wisp serve` (docs/serve.md): a JSON body of
 * POST /v1/chat/completions or /v1/completions becomes a srv_request, or an
 * OpenAI-style error (status, type, param, message). This is a pure
 * function of the bytes (no model, no I/O), so tests/fuzz/fuzz_request.c can
 * drive it; the server checks what needs the model (its name, the prompt's
 * length) afterwards. */
#ifndef WISP_SERVER_REQUEST_H
#define WISP_SERVER_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#define SRV_MAX_STOP 4        /* stop strings a request may give (OpenAI's limit) */
#define SRV_MAX_TOP_LOGPROBS 20
#define SRV_MAX_N 16          /* choices a request may ask for */
#define SRV_MAX_PROMPTS 16    /* prompts of one completions request */
#define SRV_MAX_BODY (8u << 20) /* bytes; a larger body is refused with 413 */

typedef enum { SRV_CHAT, SRV_COMPLETION } srv_kind;

typedef struct {
  char *role;    /* "system", "user", "assistant" (also "developer", read as system) */
  char *content; /* the text parts joined */
} srv_message;

typedef struct {
  srv_kind kind;
  char *model;                 /* NULL: not given */
  srv_message *messages;       /* chat */
  int n_messages;
  char **prompts;              /* completions: a string or an array of strings */
  int32_t **prompt_ids;        /* completions: prompt i given as token ids (prompts[i] is NULL then) */
  int *n_prompt_ids;
  int n_prompts;
  int max_tokens;              /* -1: not given */
  float temperature;           /* default 1 as OpenAI's */
  float top_p;                 /* default 1 */
  int top_k;                   /* default 0 (off) */
  float min_p;                 /* default 0 */
  int has_seed;
  uint64_t seed;
  char *stop[SRV_MAX_STOP];
  int n_stop;
  int stream, include_usage;
  float presence_penalty, frequency_penalty;
  int n;                       /* choices, >= 1 */
  int logprobs;                /* 1: report logprobs */
  int top_logprobs;            /* 0..20 alternatives a token */
  int ignore_eos;              /* an extension (as llama-server's), for benchmarks */
} srv_request;

typedef struct {
  int status;          /* HTTP status: 400, 413, ... */
  const char *type;    /* "invalid_request_error", ... */
  const char *code;    /* NULL or e.g. "model_not_found" */
  char param[64];      /* the field at fault, "" when none */
  char message[256];
} srv_error;

/* Parses and validates a body. Returns 0 and fills *req (release with
 * srv_request_free), or -1 and fills *err (and *req is empty). */
int srv_request_parse(const char *body, size_t len, srv_kind kind, srv_request *req, srv_error *err);
void srv_request_free(srv_request *req);

/* Fills an error and returns -1. */
int srv_error_set(srv_error *err, int status, const char *type, const char *code, const char *param,
                  const char *fmt, ...) __attribute__((format(printf, 6, 7)));

#endif
