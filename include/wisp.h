/* wisp: a C11 runtime for local LLM inference (CPU reference backend and a
 * WebGPU backend). This header is the public C API.
 *
 * Every call that can fail returns a wisp_status; on failure a one-line
 * message describing the problem is available from wisp_last_error().
 * Arguments are checked: a NULL handle or out-pointer, a negative count or
 * an id out of range is WISP_EINVAL; a call that returns a count or a
 * position returns -1 for them (one that returns a string, NULL), with the
 * message set; the _free, _close and _reset calls ignore NULL. */
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
  WISP_EDEVICE,      /* the compute device failed or lacks a feature */
  WISP_EBUSY         /* a queue is full: try again later */
} wisp_status;

/* The message of the last failed call on this thread. */
const char *wisp_last_error(void);

/* The library's version, "MAJOR.MINOR.PATCH", as the library that is running
 * was built (WISP_VERSION is the header's). The shared library's soname
 * carries MAJOR (libwisp.so.0); it changes only when a call or an option
 * struct changes incompatibly. */
#define WISP_VERSION "0.1.0"
const char *wisp_version(void);

/* Option structs grow by adding fields at their end. Each starts with
 * `size`: 0 (a zero-initialised struct, `= {0}` or designated initialisers)
 * means the fields this first version of the struct has; sizeof(the struct),
 * as the wisp_*_init functions set it, means every field of the header the
 * caller was compiled with, so a program built against a newer wisp.h that
 * runs on an older library gets WISP_EINVAL instead of silently ignored
 * settings. Fields a caller's struct predates take their zero default. The
 * init functions set size and every field's default (all zero today). */

/* Opaque handles. */
typedef struct wisp_model wisp_model;     /* an opened artifact bound to an architecture */
typedef struct wisp_session wisp_session; /* one sequence: KV/conv state + backend */

typedef struct {
  size_t size;         /* 0 or sizeof(wisp_session_options): see "Option structs grow" above */
  const char *backend; /* "cpu" (default) */
  int threads;         /* 0 = one per physical core the process may use */
  int max_context;     /* positions; 0 = the model's maxPositions, at most 4096; more than the model's: the model's */
  const char *profile; /* runtime profile name or file; NULL = "default" */
  /* "key=value,..." settings beside the plan, for measurements and tests
   * (docs/configuration.md); NULL = none. An unknown key fails wisp_session_new. */
  const char *tuning;
  const char *registry; /* kernel registry file; NULL = the one built into the library */
  int slots;           /* sequences the session holds (0 = 1); see "Several sequences" below */
} wisp_session_options;
void wisp_session_options_init(wisp_session_options *o);

/* artifact_dir: an artifact directory, or a GGUF file, which is mapped and
 * run in place (docs/gguf.md, "Running a GGUF directly"). */
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
 * temperature with top-k/top-p/min-p; see docs/sampling.md) and fed to
 * the next step without a host round trip; one submit and one readback per
 * batch of `batch` tokens. */
typedef struct {
  size_t size;           /* 0 or sizeof(wisp_generate_options) */
  float temperature;     /* <= 0: greedy */
  int top_k;             /* 0 = off */
  float top_p;           /* 0 or >= 1 = off */
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
  /* Repetition penalty, applied on the device before each choice (1 or 0 =
   * off): each distinct token among the last repeat_last_n of the sequence
   * has its logit multiplied by 1/repeat_penalty when positive, else by
   * repeat_penalty. `history` (n_history ids, may be NULL) is the sequence
   * before `first` (the prompt and what followed): its last repeat_last_n - 1
   * tokens start the window. A token is drawn at step = the position it
   * takes, so the same seed gives the tokens the host sampler
   * (wisp_sampler_sample) gives, at any batch size. */
  float repeat_penalty;
  int repeat_last_n;
  const int32_t *history;
  int n_history;
} wisp_generate_options;
void wisp_generate_options_init(wisp_generate_options *o);

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
/* Grows the KV caches now to hold `positions` tokens (at most the context),
 * as a request of that length would on its first step: a caller that knows
 * its request's length (a server slot, `wisp bench`'s warm-up) pays the
 * growth, and any kernel it needs, before it starts timing or streaming.
 * Caches keep their size across wisp_session_reset. */
wisp_status wisp_session_reserve(wisp_session *s, int positions);

/* ---- Text: tokenizer, chat template, streaming generation ----------------
 * (docs/api.md) The model's own tokenizer (declared by its artifact)
 * turns text into token ids and back; its chat template (the Jinja
 * template of the artifact's tokenizer_config.json, rendered as
 * transformers' apply_chat_template renders it: docs/chat-templates.md)
 * turns messages into the prompt text the model was trained on; wisp_generate_text runs
 * text through a session and streams the reply back as text. Strings and
 * arrays these calls return are malloc'd: release them with wisp_free. */

void wisp_free(void *p);
/* The name of a status code ("WISP_EIO", ...). */
const char *wisp_status_name(wisp_status st);

/* Tokenizes len bytes of UTF-8 text into *ids (*n_ids entries). add_special:
 * the tokenizer's own framing around the text (a BOS token for LFM2); chat
 * text from wisp_chat_apply has it already. Special tokens written in the
 * text (e.g. "<|im_end|>") become their ids. */
wisp_status wisp_tokenize(wisp_model *m, const char *text, size_t len, int add_special, int32_t **ids, int *n_ids);
/* The text of n_ids tokens (special tokens included), NUL-terminated; *len
 * (may be NULL) its length in bytes. */
wisp_status wisp_detokenize(wisp_model *m, const int32_t *ids, int n_ids, char **text, size_t *len);

typedef struct {
  const char *role;    /* "system", "user" or "assistant" */
  const char *content;
} wisp_chat_message;

/* The model's chat template family: "lfm2", "qwen", "chatml" or "jinja"
 * (any other template; all are rendered the same way); NULL when it has
 * none (wisp_last_error says why). */
const char *wisp_chat_template_of(wisp_model *m);
/* Replaces the model's chat template with Jinja text (the CLI's
 * --chat-template); the model's bos/eos tokens stay. Call it before
 * sessions of the model render chat text, not while they do. */
wisp_status wisp_chat_set_template(wisp_model *m, const char *jinja_source);
/* The model's stop tokens (eos ids of its generation_config.json and
 * tokenizer_config.json, and <|im_end|>): *ids (owned by the model) and
 * *n_ids, 0 of them for a tokenizer without any. For
 * wisp_generate_options.stop when decoding token ids directly. */
wisp_status wisp_stop_tokens(wisp_model *m, const int32_t **ids, int *n_ids);
/* A whole conversation as the model reads it, followed by the assistant's
 * prefix when add_assistant; think: the template's enable_thinking (Qwen's
 * thinking mode; off, Qwen 3 writes an empty think block). */
wisp_status wisp_chat_apply(wisp_model *m, const wisp_chat_message *msgs, int n_msgs, int add_assistant, int think,
                            char **text);
/* The same from a JSON request, for everything the template can take:
 * {"messages": [{"role", "content": text or [{"type": "text", "text"}],
 * "tool_calls", ...}], "tools": [...], "add_generation_prompt": bool,
 * "continue_final_message": bool, any other key a template variable
 * ("enable_thinking", ...)}. */
wisp_status wisp_chat_apply_json(wisp_model *m, const char *request_json, char **text);
/* The text that continues a conversation held in session s by one user
 * message: at position 0 it starts the conversation (system may be NULL);
 * later it closes the previous reply first. Feed it with wisp_generate_text
 * (whose replies leave their stop token unfed, as this expects). */
wisp_status wisp_chat_turn(wisp_session *s, const char *system, const char *user, int think, char **text);

/* Sampling and streaming for wisp_generate_text. Zero is a usable default
 * for every field: greedy, no penalty, the model's stop tokens. */
typedef struct {
  size_t size;          /* 0 or sizeof(wisp_text_options) */
  float temperature;    /* <= 0: greedy */
  int top_k;            /* 0 = off */
  float top_p;          /* 0 or >= 1 = off */
  float min_p;          /* 0 = off */
  float repeat_penalty; /* 0 or 1 = off */
  int repeat_last_n;    /* tokens the penalty looks back over; 0 = 64 */
  uint64_t seed;
  int max_tokens;       /* reply length limit; 0 = until a stop token or the context is full */
  int add_special;      /* 1: tokenize the prompt with the tokenizer's framing (a plain prompt at position 0) */
  int ignore_stop;      /* 1: do not stop at the model's end-of-text tokens */
  /* Called with each piece of the reply as soon as it is whole UTF-8 (may
   * be NULL); return non-zero to stop after this piece. */
  int (*on_text)(void *user, const char *text, size_t len);
  void *user;
} wisp_text_options;
void wisp_text_options_init(wisp_text_options *o);

typedef struct {
  int n_prompt;    /* prompt tokens fed */
  int n_generated; /* reply tokens made (fed to the session, a stop token excluded) */
  int stopped;     /* 1: a stop token ended the reply; 2: on_text asked to stop; 0: a limit */
} wisp_text_result;

/* Feeds prompt (text) at the session's position, then samples a reply token
 * by token on the host, feeding each back, until a stop token (not fed, not
 * shown), max_tokens, the end of the context or on_text stops it. result
 * may be NULL. The session keeps the state, so a next call continues. */
wisp_status wisp_generate_text(wisp_session *s, const char *prompt, const wisp_text_options *o,
                               wisp_text_result *result);
/* ---- Several sequences in one session (slots) ----
 *
 * A session made with wisp_session_options.slots = N holds N sequences,
 * slots 0 .. N-1, over one model, plan and device: each has its own KV
 * cache, conv and recurrent state and position, made when the session is.
 * Slot 0 is the sequence the calls above act on (wisp_session_eval,
 * _generate, _reset, _position). wisp_session_step advances several slots by
 * one token together: every weight matrix is read once for all of them, and
 * each slot gets exactly the tokens it would get alone (docs/sequences.md). */

/* How many slots the session holds. */
int wisp_session_slots(const wisp_session *s);
/* As wisp_session_eval, on slot `slot` (prompt or any tokens, in chunks). */
wisp_status wisp_slot_eval(wisp_session *s, int slot, const int32_t *tokens, int n, float *logits);
/* Tokens slot `slot` has consumed; -1 for a slot the session does not have. */
int wisp_slot_position(const wisp_session *s, int slot);
/* Empties slot `slot` (position 0, zero state) for a new sequence; the
 * other slots are untouched. */
void wisp_slot_reset(wisp_session *s, int slot);

/* How wisp_session_step chooses each next token (docs/sampling.md):
 * the same draw as the decode loop's and the host sampler's, at step = the
 * position the token takes. */
typedef struct {
  size_t size;       /* 0 or sizeof(wisp_step_options) */
  float temperature; /* <= 0: greedy */
  int top_k;         /* 0 = off */
  float top_p;       /* 0 or >= 1 = off */
  float min_p;       /* 0 = off */
  uint64_t seed;
} wisp_step_options;
void wisp_step_options_init(wisp_step_options *o);

/* One decode step for n sequences: tokens[i] is fed to slot slots[i] at
 * that slot's position (each slot at most once per call), and next[i]
 * receives the token chosen after it (o NULL: greedy); each of those slots
 * advances by one. logits (may be NULL) receives n x vocabulary floats, row
 * i the logits next[i] was chosen from. The tokens are not fed back: pass
 * next[i] (or any token) to the following call. */
wisp_status wisp_session_step(wisp_session *s, const int *slots, const int32_t *tokens, int n,
                              const wisp_step_options *o, int32_t *next, float *logits);


/* ---- Serving: many requests over one model ------------------------------
 *
 * A scheduler owns one session of `parallel` slots and a thread that runs
 * it: requests are queued, given a slot, prefilled in chunks interleaved
 * with the running decodes (so streams do not stall), and decoded together,
 * one pass over the weights per step for every running request. A request
 * whose prompt extends what a slot already holds (multi-turn chat resends
 * the whole history) reuses that slot's KV cache and recurrent state: only
 * the new tokens are prefilled. `wisp serve` is HTTP over
 * exactly this API. Events are delivered on the scheduler's thread: a
 * callback must be quick and must not call back into the scheduler other
 * than wisp_sched_cancel. */

typedef struct wisp_sched wisp_sched;

typedef struct {
  size_t size;       /* 0 or sizeof(wisp_sched_options) */
  int parallel;      /* sequences decoded together (slots); 0 = 4 */
  int max_queue;     /* requests waiting for a slot before submit refuses (WISP_EBUSY); 0 = 4 x parallel */
  int context;       /* tokens per slot (prompt + reply); 0 = the model's maximum */
  int prefill_chunk; /* prompt tokens fed per scheduler step beside the decodes, the waiting prompts'
                      * segments in one batched prefill; 0 = 512 */
  const char *backend; /* as wisp_session_options */
  const char *profile;
  const char *tuning;
  int threads;
  /* Conv/recurrent state snapshots kept per slot for prompt reuse (a prompt
   * that diverges inside what a slot holds resumes from the newest one at or
   * before the divergence): 0 = 3, -1 = none, at most 8. Each is one copy
   * of a sequence's conv and recurrent state (none for attention-only
   * models), kept where the backend keeps the state (device memory). */
  int snapshots;
  /* Run-ahead: while one request decodes alone (nothing queued or being
   * prefilled) and its sampling is on the device (no penalties, no
   * logprobs), the scheduler runs the decode loop for it (several tokens a
   * submit, as wisp_session_generate) instead of one step a token; tokens
   * still stream as each batch comes back, and a new request or a cancel
   * stops it within a batch. Tokens a batch: 0 = the plan's decode loop
   * setting, -1 = off (one token a step). */
  int run_ahead;
} wisp_sched_options;
void wisp_sched_options_init(wisp_sched_options *o);

typedef enum {
  WISP_FINISH_NONE = 0,  /* not finished (a token event) */
  WISP_FINISH_STOP,      /* a stop token (not reported as a token) */
  WISP_FINISH_LENGTH,    /* max_tokens or the slot's context */
  WISP_FINISH_CANCELLED, /* wisp_sched_cancel, or the scheduler shut down */
  WISP_FINISH_ERROR      /* the device or an argument failed; message in the event */
} wisp_finish;

typedef struct {
  uint64_t id;       /* the request's id (from wisp_sched_submit) */
  int32_t token;     /* the new token (finish == WISP_FINISH_NONE) */
  float logprob;     /* its log-probability (when the request asked for logprobs) */
  int n_top;         /* top alternatives below (request's top_logprobs) */
  const int32_t *top_ids;
  const float *top_logprobs;
  wisp_finish finish;  /* != NONE: the last event of this request */
  const char *message; /* WISP_FINISH_ERROR: why */
  int n_prompt;        /* prompt tokens of the request */
  int n_cached;        /* of which reused from a slot's state, not prefilled */
  int n_generated;     /* tokens reported so far */
} wisp_sched_event; /* valid during the callback only (top_ids, top_logprobs, message too): copy what you keep */

typedef struct {
  size_t size;           /* 0 or sizeof(wisp_sched_request) */
  const int32_t *prompt; /* copied by submit */
  int n_prompt;
  int max_tokens;        /* 0 = until a stop token or the context ends */
  float temperature;     /* <= 0: greedy */
  int top_k;             /* 0 = off */
  float top_p;           /* 0 or >= 1 = off */
  float min_p;           /* 0 = off */
  uint64_t seed;
  float presence_penalty;  /* OpenAI's, over the generated tokens; 0 = off */
  float frequency_penalty; /* 0 = off */
  const int32_t *stop;   /* stop tokens (copied); the model's own are added unless ignore_eos */
  int n_stop;
  int ignore_eos;
  int logprobs;          /* 1: report each token's logprob */
  int top_logprobs;      /* 0 to 20 alternatives a token */
  void (*on_event)(void *user, const wisp_sched_event *ev);
  void *user;
} wisp_sched_request;
void wisp_sched_request_init(wisp_sched_request *r);

/* Counters for /metrics (monotonic unless noted). */
typedef struct {
  uint64_t requests_submitted, requests_finished, requests_rejected;
  uint64_t prompt_tokens, prompt_tokens_cached, generated_tokens;
  int running, queued;   /* now */
  int slots, slots_used; /* now: slots holding a request or a reusable history */
  uint64_t steps;        /* scheduler steps run */
  uint64_t prefill_calls; /* batched prefills run (one a step at most: every waiting prompt's segment in one) */
  uint64_t run_ahead_tokens; /* of generated_tokens, made by the decode loop of a request decoding alone */
} wisp_sched_stats;

wisp_status wisp_sched_new(wisp_model *m, const wisp_sched_options *o, wisp_sched **out);
/* Queues a request; *id names it in events. WISP_EBUSY when the queue is full. */
wisp_status wisp_sched_submit(wisp_sched *s, const wisp_sched_request *r, uint64_t *id);
/* Ends a request as soon as possible (its last event says CANCELLED) and frees its slot. */
void wisp_sched_cancel(wisp_sched *s, uint64_t id);
void wisp_sched_get_stats(wisp_sched *s, wisp_sched_stats *out);
/* The per-slot context in tokens. */
int wisp_sched_context(const wisp_sched *s);
/* Cancels what is queued or running (each gets its last event), stops the thread, frees all. */
void wisp_sched_free(wisp_sched *s);

#ifdef __cplusplus
}
#endif
#endif
