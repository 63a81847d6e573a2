/* `wisp serve` (server.h): libmicrohttpd in front of the scheduler.
 *
 * Threads: libmicrohttpd's polling threads run the handlers below; the
 * scheduler's thread delivers token events (on_event); the main thread
 * waits for a signal while a loader thread opens the model.
 *
 * A generation request becomes a `job` with one `choice` per scheduler
 * request (n choices of each prompt). Tokens turn into text (the
 * tokenizer's streaming decoder keeps characters whole, the stop-string
 * matcher holds back what may still become a stop string) and, for a
 * stream, into SSE events in the job's output buffer. A stream's tokens are
 * only queued on the scheduler's thread and formatted on the HTTP thread
 * that sends them, so JSON costs the decode loop nothing; a request
 * answered whole is handled as its tokens come (its stop strings must end
 * the generation). The connection is suspended while it has nothing to send
 * and resumed by the event that brings something, so a waiting stream costs
 * no thread and no polling. A
 * job lives until both its HTTP side (the connection is done with it) and
 * every scheduler request it submitted (their last event) let go. */
#include "server/server.h"

#include <arpa/inet.h>
#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "server/local_page.h"
#include "server/metrics.h"
#include "server/request.h"
#include "server/response.h"
#include "server/stop_match.h"
#include "tokenizer/tokenizer.h"
#include "util/builtin.h"
#include "util/err.h"
#include "wisp.h"

enum { LOADING, READY, FAILED, STOPPING };

typedef struct {
  srv_config cfg;
  struct MHD_Daemon *daemon;
  atomic_int state;
  wisp_model *model;
  wisp_sched *sched;
  /* Held for reading around submit and cancel from the HTTP threads, for
   * writing while the scheduler is freed at shutdown (the scheduler's own
   * thread calls cancel without it: it is alive while it delivers events). */
  pthread_rwlock_t sched_lock;
  wisp_tokenizer *tok; /* for decoding replies; the model's own serves tokenize and the chat template */
  int byte_tokens;     /* the tokenizer is the byte kind (synthetic models) */
  int has_chat;        /* the model has a chat template */
  int context;
  char model_name[128];
  char fingerprint[64];
  srv_metrics metrics;
  pthread_mutex_t text_lock; /* tokenizing and templating, one request at a time */
  pthread_mutex_t jobs_lock;
  pthread_cond_t jobs_cv;
  int n_jobs;          /* jobs not yet freed */
  atomic_uint_fast64_t next_id;
} server;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- jobs --------------------------------------------------------------- */

typedef struct job job;

/* A token as the scheduler reported it, kept until the stream's HTTP thread
 * turns it into text and events (stream_read): the scheduler's thread only
 * queues it, so formatting costs the decode loop nothing. */
typedef struct {
  int32_t token;
  float logprob;
  int n_top;
  int32_t top_ids[SRV_MAX_TOP_LOGPROBS];
  float top_logprobs[SRV_MAX_TOP_LOGPROBS];
} pending_token;

typedef struct {
  job *j;
  int index;            /* the choice's index in the answer */
  int prompt_index;
  int submitted;        /* the scheduler holds a request for it */
  int sched_done;       /* its last event came */
  uint64_t sched_id;
  wisp_stream_decoder dec;
  srv_stop_match stop;
  srv_buf text;         /* non-stream: the reply so far */
  cJSON *logprobs;      /* non-stream: chat "content" array or completions object */
  int n_generated;
  size_t n_text;        /* bytes of reply text released so far (logprobs' text_offset) */
  int sent_role;        /* stream: the first chunk (with the role) went out */
  const char *finish;   /* "stop" / "length" once finished; NULL before */
  int failed;           /* finished by an error (message below) or a shutdown */
  int cancelled;
  char message[200];
  double t_last;        /* when its last token came */
  int n_events;         /* token events received */
  uint64_t event_id;    /* the scheduler's id, as its events say */
  pending_token *pending; /* stream: tokens not yet turned into events */
  int n_pending, cap_pending;
  wisp_finish last;     /* stream: the scheduler's last event, not yet handled */
  char last_message[160];
} choice;

struct job {
  server *srv;
  pthread_mutex_t lock;
  int refs;             /* 1 for the HTTP side + 1 per scheduler request not yet ended */
  struct MHD_Connection *conn;
  srv_request req;
  char id[48];
  long long created;
  double t_arrival;
  int n_prompt_tokens;  /* usage: the prompts' tokens, each prompt once */
  choice *choices;
  int n_choices, n_open;
  int finished;         /* every choice finished (and, streaming, the last events written) */
  int suspended;        /* the connection waits for us to resume it */
  int fd;               /* the connection's socket (to notice a client gone while suspended) */
  int gone;             /* the client closed its connection */
  srv_buf out;          /* stream: bytes not yet handed to libmicrohttpd */
  size_t out_sent;
};

static void job_free(job *j) {
  server *srv = j->srv;
  for (int i = 0; i < j->n_choices; i++) {
    choice *c = &j->choices[i];
    wisp_stream_free(&c->dec);
    srv_stop_free(&c->stop);
    srv_buf_free(&c->text);
    cJSON_Delete(c->logprobs);
    free(c->pending);
  }
  free(j->choices);
  srv_buf_free(&j->out);
  srv_request_free(&j->req);
  pthread_mutex_destroy(&j->lock);
  free(j);
  pthread_mutex_lock(&srv->jobs_lock);
  srv->n_jobs--;
  pthread_cond_broadcast(&srv->jobs_cv);
  pthread_mutex_unlock(&srv->jobs_lock);
}

/* Drops one reference under the job's lock (held on entry, released here). */
static void job_unref_unlock(job *j) {
  int left = --j->refs;
  pthread_mutex_unlock(&j->lock);
  if (!left) job_free(j);
}

/* Lets the connection run again if it waits for us (lock held). */
static void job_wake(job *j) {
  if (j->suspended) {
    j->suspended = 0;
    MHD_resume_connection(j->conn);
  }
}

/* ---- building the answer ------------------------------------------------ */

static cJSON *answer_head(const job *j, const char *object) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "id", j->id);
  cJSON_AddStringToObject(o, "object", object);
  cJSON_AddNumberToObject(o, "created", (double)j->created);
  cJSON_AddStringToObject(o, "model", j->srv->model_name);
  cJSON_AddStringToObject(o, "system_fingerprint", j->srv->fingerprint);
  return o;
}

static cJSON *usage_json(const job *j) {
  int gen = 0;
  for (int i = 0; i < j->n_choices; i++) gen += j->choices[i].n_generated;
  cJSON *u = cJSON_CreateObject();
  cJSON_AddNumberToObject(u, "prompt_tokens", j->n_prompt_tokens);
  cJSON_AddNumberToObject(u, "completion_tokens", gen);
  cJSON_AddNumberToObject(u, "total_tokens", j->n_prompt_tokens + gen);
  return u;
}

/* A token's text for logprobs: its bytes, made valid UTF-8. */
static char *token_text(const server *srv, int32_t id, cJSON **bytes) {
  char piece[256];
  size_t n = wisp_tokenizer_piece(srv->tok, id, piece, sizeof piece);
  if (bytes) {
    *bytes = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(*bytes, cJSON_CreateNumber((unsigned char)piece[i]));
  }
  return srv_utf8_sanitize(piece, n);
}

/* Chat: one entry of logprobs.content. */
static cJSON *chat_logprob(const server *srv, const pending_token *ev) {
  cJSON *e = cJSON_CreateObject(), *bytes;
  char *t = token_text(srv, ev->token, &bytes);
  cJSON_AddStringToObject(e, "token", t ? t : "");
  free(t);
  cJSON_AddNumberToObject(e, "logprob", ev->logprob);
  cJSON_AddItemToObject(e, "bytes", bytes);
  cJSON *top = cJSON_AddArrayToObject(e, "top_logprobs");
  for (int k = 0; k < ev->n_top; k++) {
    cJSON *a = cJSON_CreateObject(), *ab;
    char *at = token_text(srv, ev->top_ids[k], &ab);
    cJSON_AddStringToObject(a, "token", at ? at : "");
    free(at);
    cJSON_AddNumberToObject(a, "logprob", ev->top_logprobs[k]);
    cJSON_AddItemToObject(a, "bytes", ab);
    cJSON_AddItemToArray(top, a);
  }
  return e;
}

/* Completions: appends one token to a {tokens, token_logprobs, top_logprobs, text_offset} object. */
static void completion_logprob(const server *srv, cJSON *lp, const pending_token *ev, int offset) {
  if (!cJSON_GetObjectItem(lp, "tokens")) {
    cJSON_AddArrayToObject(lp, "tokens");
    cJSON_AddArrayToObject(lp, "token_logprobs");
    cJSON_AddArrayToObject(lp, "top_logprobs");
    cJSON_AddArrayToObject(lp, "text_offset");
  }
  char *t = token_text(srv, ev->token, NULL);
  cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "tokens"), cJSON_CreateString(t ? t : ""));
  free(t);
  cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "token_logprobs"), cJSON_CreateNumber(ev->logprob));
  cJSON *top = cJSON_CreateObject();
  for (int k = 0; k < ev->n_top; k++) {
    char *at = token_text(srv, ev->top_ids[k], NULL);
    if (at && !cJSON_GetObjectItem(top, at)) cJSON_AddNumberToObject(top, at, ev->top_logprobs[k]);
    free(at);
  }
  cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "top_logprobs"), top);
  cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "text_offset"), cJSON_CreateNumber(offset));
}

/* Stream: one chunk of choice c with text (may be empty), an optional
 * logprobs entry (taken) and an optional finish reason. */
static void stream_chunk(job *j, choice *c, const char *text, size_t n, cJSON *logprob, const char *finish) {
  const int chat = j->req.kind == SRV_CHAT;
  cJSON *o = answer_head(j, chat ? "chat.completion.chunk" : "text_completion");
  cJSON *choices = cJSON_AddArrayToObject(o, "choices"), *ch = cJSON_CreateObject();
  cJSON_AddItemToArray(choices, ch);
  cJSON_AddNumberToObject(ch, "index", c->index);
  char *s = malloc(n + 1);
  if (s) { memcpy(s, text, n); s[n] = 0; }
  if (chat) {
    cJSON *delta = cJSON_AddObjectToObject(ch, "delta");
    if (!c->sent_role) cJSON_AddStringToObject(delta, "role", "assistant");
    if (n || !finish) cJSON_AddStringToObject(delta, "content", s ? s : "");
    if (logprob) {
      cJSON *lp = cJSON_AddObjectToObject(ch, "logprobs"), *content = cJSON_AddArrayToObject(lp, "content");
      cJSON_AddItemToArray(content, logprob);
    } else {
      cJSON_AddNullToObject(ch, "logprobs");
    }
  } else {
    cJSON_AddStringToObject(ch, "text", s ? s : "");
    if (logprob) cJSON_AddItemToObject(ch, "logprobs", logprob);
    else cJSON_AddNullToObject(ch, "logprobs");
  }
  free(s);
  c->sent_role = 1;
  if (finish) cJSON_AddStringToObject(ch, "finish_reason", finish);
  else cJSON_AddNullToObject(ch, "finish_reason");
  if (j->req.include_usage) cJSON_AddNullToObject(o, "usage");
  char *json = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (json) srv_sse_event(&j->out, json);
  else j->out.failed = 1;
  free(json);
}

/* Stream: an error event (the stream cannot end with a finish reason). */
static void stream_error(job *j, const char *type, const char *message) {
  srv_error e = {0};
  srv_error_set(&e, 500, type, NULL, NULL, "%s", message);
  char *json = srv_error_json(&e);
  if (json) srv_sse_event(&j->out, json);
  free(json);
}

/* Text released for choice c (lock held). */
static void deliver_text(job *j, choice *c, const char *p, size_t n, cJSON *logprob) {
  c->n_text += n;
  if (j->req.stream) {
    if (n || logprob || !c->sent_role) stream_chunk(j, c, p, n, logprob, NULL);
    else cJSON_Delete(logprob);
  } else {
    srv_buf_put(&c->text, p, n);
    if (logprob) cJSON_AddItemToArray(c->logprobs, logprob);
  }
}

/* Choice c is over (lock held): what is still held back goes out, then its
 * finish; the last choice ends the stream or wakes the waiting request. */
static void finish_choice(job *j, choice *c, const char *finish) {
  if (!c->failed) {
    const char *p;
    size_t n;
    wisp_stream_flush(&c->dec, &p, &n);
    if (n && !c->stop.matched) {
      char *safe = srv_utf8_sanitize(p, n);
      const char *q;
      size_t m;
      if (safe && srv_stop_push(&c->stop, safe, strlen(safe), &q, &m) >= 0) {
        deliver_text(j, c, q, m, NULL);
        if (c->stop.matched) finish = "stop";
      }
      free(safe);
    }
    srv_stop_flush(&c->stop, &p, &n);
    deliver_text(j, c, p, n, NULL);
  }
  c->finish = finish;
  if (j->req.stream) {
    if (c->failed) stream_error(j, c->cancelled ? "server_shutdown" : "server_error", c->message);
    else stream_chunk(j, c, "", 0, NULL, finish);
  }
  if (--j->n_open > 0) return;
  if (j->req.stream) {
    if (j->req.include_usage) {
      cJSON *o = answer_head(j, j->req.kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion");
      cJSON_AddArrayToObject(o, "choices");
      cJSON_AddItemToObject(o, "usage", usage_json(j));
      char *json = cJSON_PrintUnformatted(o);
      cJSON_Delete(o);
      if (json) srv_sse_event(&j->out, json);
      free(json);
    }
    srv_sse_done(&j->out);
  }
  j->finished = 1;
  job_wake(j);
}

/* A token of choice c (lock held). Returns 1 when a stop string ended it. */
static int on_token(job *j, choice *c, const pending_token *ev) {
  server *srv = j->srv;
  c->n_generated++;
  cJSON *logprob = NULL;
  if (j->req.logprobs) {
    if (j->req.kind == SRV_CHAT) {
      logprob = chat_logprob(srv, ev);
    } else {
      int offset = (int)c->n_text;
      if (j->req.stream) {
        logprob = cJSON_CreateObject();
        completion_logprob(srv, logprob, ev, offset);
      } else {
        completion_logprob(srv, c->logprobs, ev, offset);
      }
    }
  }
  const char *piece = "";
  size_t n = 0;
  char bytes[32];
  size_t len;
  if (srv->byte_tokens && !wisp_tokenizer_token_bytes(srv->tok, ev->token, &len)) {
    n = wisp_tokenizer_piece(srv->tok, ev->token, bytes, sizeof bytes);
    piece = bytes;
  } else if (wisp_stream_push(&c->dec, ev->token, &piece, &n)) {
    n = 0;
  }
  const char *out;
  size_t m;
  int hit = srv_stop_push(&c->stop, piece, n, &out, &m);
  if (hit < 0) m = 0;
  deliver_text(j, c, hit < 0 ? "" : out, m, logprob);
  if (hit == 1) {
    finish_choice(j, c, "stop");
    return 1;
  }
  return 0;
}

/* The scheduler's last event for choice c, handled (lock held). */
static void end_choice(job *j, choice *c, wisp_finish why, const char *message) {
  if (c->finish) return; /* a stop string ended it already */
  switch (why) {
  case WISP_FINISH_STOP: finish_choice(j, c, "stop"); break;
  case WISP_FINISH_LENGTH: finish_choice(j, c, "length"); break;
  case WISP_FINISH_CANCELLED:
    c->failed = c->cancelled = 1;
    snprintf(c->message, sizeof c->message, "the request was cancelled (the server is shutting down)");
    finish_choice(j, c, NULL);
    break;
  default:
    c->failed = 1;
    snprintf(c->message, sizeof c->message, "generation failed: %s", message && message[0] ? message : "unknown error");
    finish_choice(j, c, NULL);
    break;
  }
}

/* A stream's queued tokens and last events become SSE events (lock held, on
 * the HTTP thread). The scheduler ids of choices a stop string ended are
 * added to cancel[]. */
static void handle_pending(job *j, uint64_t *cancel, int *n_cancel) {
  for (int i = 0; i < j->n_choices; i++) {
    choice *c = &j->choices[i];
    for (int k = 0; k < c->n_pending; k++)
      if (!c->finish && on_token(j, c, &c->pending[k])) cancel[(*n_cancel)++] = c->event_id;
    c->n_pending = 0;
    if (c->last != WISP_FINISH_NONE) {
      end_choice(j, c, c->last, c->last_message);
      c->last = WISP_FINISH_NONE;
    }
  }
}

/* Cancels scheduler requests from an HTTP thread. */
static void cancel_ids(server *srv, const uint64_t *ids, int n) {
  if (!n) return;
  pthread_rwlock_rdlock(&srv->sched_lock);
  if (srv->sched)
    for (int i = 0; i < n; i++) wisp_sched_cancel(srv->sched, ids[i]);
  pthread_rwlock_unlock(&srv->sched_lock);
}

/* 1 when the peer of a suspended connection has closed it. libmicrohttpd
 * does not watch a suspended connection, and a request waiting for its whole
 * answer stays suspended until the end: a peek at its socket tells. */
static int client_gone(job *j) {
  if (j->gone || !j->suspended || j->fd < 0) return j->gone;
  char b;
  ssize_t r = recv(j->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) j->gone = 1;
  return j->gone;
}

/* The scheduler's events (on its thread; kept short). A stream's token is
 * queued for its HTTP thread; a request answered whole is handled here, so
 * that a stop string ends its generation at once. */
static void on_event(void *user, const wisp_sched_event *ev) {
  choice *c = user;
  job *j = c->j;
  uint64_t cancel[SRV_MAX_N * SRV_MAX_PROMPTS];
  int n_cancel = 0;
  pthread_mutex_lock(&j->lock);
  c->event_id = ev->id;
  if (ev->finish == WISP_FINISH_NONE) {
    double t = now_s();
    if (c->n_events++ == 0) srv_metrics_observe_ttft(&j->srv->metrics, t - j->t_arrival);
    else srv_metrics_observe_itl(&j->srv->metrics, t - c->t_last);
    c->t_last = t;
    pending_token p = {.token = ev->token, .logprob = ev->logprob, .n_top = 0};
    if (j->req.logprobs) {
      p.n_top = ev->n_top < SRV_MAX_TOP_LOGPROBS ? ev->n_top : SRV_MAX_TOP_LOGPROBS;
      if (p.n_top > 0) {
        memcpy(p.top_ids, ev->top_ids, sizeof(int32_t) * (size_t)p.n_top);
        memcpy(p.top_logprobs, ev->top_logprobs, sizeof(float) * (size_t)p.n_top);
      }
    }
    if (j->req.stream) {
      if (!c->finish) {
        if (c->n_pending == c->cap_pending) {
          int cap = c->cap_pending ? c->cap_pending * 2 : 16;
          pending_token *q = realloc(c->pending, sizeof *q * (size_t)cap);
          if (q) { c->pending = q; c->cap_pending = cap; }
        }
        if (c->n_pending < c->cap_pending) c->pending[c->n_pending++] = p;
        else j->out.failed = 1; /* out of memory: the stream ends with an error */
      }
      job_wake(j);
    } else {
      /* a stop string: the scheduler need not go on (its last event still comes) */
      if (!c->finish && on_token(j, c, &p)) cancel[n_cancel++] = ev->id;
      /* every 8th token of a waiting request: is its client still there? */
      if (c->n_generated % 8 == 0 && client_gone(j))
        for (int i = 0; i < j->n_choices; i++)
          if (j->choices[i].submitted && !j->choices[i].sched_done) cancel[n_cancel++] = j->choices[i].sched_id;
    }
    pthread_mutex_unlock(&j->lock);
    for (int i = 0; i < n_cancel; i++) wisp_sched_cancel(j->srv->sched, cancel[i]);
    return;
  }
  c->sched_done = 1;
  if (j->req.stream) {
    c->last = ev->finish;
    snprintf(c->last_message, sizeof c->last_message, "%s", ev->message ? ev->message : "");
    job_wake(j);
  } else {
    end_choice(j, c, ev->finish, ev->message);
  }
  job_unref_unlock(j);
}

/* ---- answering ---------------------------------------------------------- */

static enum MHD_Result send_text(server *srv, struct MHD_Connection *conn, int status, const char *type,
                                 const char *body, size_t len) {
  struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
  enum MHD_Result ok = MHD_queue_response(conn, (unsigned)status, r);
  MHD_destroy_response(r);
  srv_metrics_count_status(&srv->metrics, status);
  return ok;
}

static enum MHD_Result send_json(server *srv, struct MHD_Connection *conn, int status, cJSON *o) {
  char *s = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (!s) return MHD_NO;
  enum MHD_Result ok = send_text(srv, conn, status, "application/json", s, strlen(s));
  free(s);
  return ok;
}

static enum MHD_Result send_error(server *srv, struct MHD_Connection *conn, const srv_error *e) {
  char *s = srv_error_json(e);
  if (!s) return MHD_NO;
  enum MHD_Result ok = send_text(srv, conn, e->status, "application/json", s, strlen(s));
  free(s);
  return ok;
}

__attribute__((format(printf, 6, 7))) static enum MHD_Result fail(server *srv, struct MHD_Connection *conn,
                                                                  int status, const char *type, const char *code,
                                                                  const char *fmt, ...) {
  srv_error e = {0};
  e.status = status;
  e.type = type;
  e.code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e.message, sizeof e.message, fmt, ap);
  va_end(ap);
  return send_error(srv, conn, &e);
}

/* The browser page at /local/ (server/local_page.h): its files from the
 * build or install tree, by fixed names. /local itself redirects to
 * /local/ so that the page's relative URLs (wisp.js, wisp.wasm) resolve
 * under it. */
static enum MHD_Result send_local(server *srv, struct MHD_Connection *conn, const char *url) {
  if (!strcmp(url, "/local")) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, "/local/");
    enum MHD_Result ok = MHD_queue_response(conn, 301, r);
    MHD_destroy_response(r);
    srv_metrics_count_status(&srv->metrics, 301);
    return ok;
  }
  char path[4200];
  const char *type = NULL, *why = NULL;
  const int found = srv_local_file(url + 7, path, sizeof path, &type, &why);
  if (found == -2) return fail(srv, conn, 404, "invalid_request_error", "not_found", "%s", why);
  int fd = found == 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) close(fd);
    return fail(srv, conn, 404, "invalid_request_error", "not_found", "no such file of the page: %.100s", url);
  }
  struct MHD_Response *r = MHD_create_response_from_fd((uint64_t)st.st_size, fd); /* MHD closes fd */
  if (!r) {
    close(fd);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  enum MHD_Result ok = MHD_queue_response(conn, 200, r);
  MHD_destroy_response(r);
  srv_metrics_count_status(&srv->metrics, 200);
  return ok;
}

/* The whole answer of a finished non-streaming job. */
static enum MHD_Result send_job(server *srv, struct MHD_Connection *conn, job *j) {
  for (int i = 0; i < j->n_choices; i++) {
    choice *c = &j->choices[i];
    if (c->failed)
      return fail(srv, conn, c->cancelled ? 503 : 500, c->cancelled ? "server_shutdown" : "server_error", NULL, "%s",
                  c->message);
  }
  const int chat = j->req.kind == SRV_CHAT;
  cJSON *o = answer_head(j, chat ? "chat.completion" : "text_completion");
  cJSON *choices = cJSON_AddArrayToObject(o, "choices");
  for (int i = 0; i < j->n_choices; i++) {
    choice *c = &j->choices[i];
    cJSON *ch = cJSON_CreateObject();
    cJSON_AddNumberToObject(ch, "index", c->index);
    if (chat) {
      cJSON *msg = cJSON_AddObjectToObject(ch, "message");
      cJSON_AddStringToObject(msg, "role", "assistant");
      cJSON_AddStringToObject(msg, "content", c->text.s ? c->text.s : "");
    } else {
      cJSON_AddStringToObject(ch, "text", c->text.s ? c->text.s : "");
    }
    if (c->logprobs) {
      if (chat) {
        cJSON *lp = cJSON_AddObjectToObject(ch, "logprobs");
        cJSON_AddItemToObject(lp, "content", c->logprobs);
      } else {
        cJSON_AddItemToObject(ch, "logprobs", c->logprobs);
      }
      c->logprobs = NULL;
    } else {
      cJSON_AddNullToObject(ch, "logprobs");
    }
    cJSON_AddStringToObject(ch, "finish_reason", c->finish ? c->finish : "stop");
    cJSON_AddItemToArray(choices, ch);
  }
  cJSON_AddItemToObject(o, "usage", usage_json(j));
  return send_json(srv, conn, 200, o);
}

/* libmicrohttpd pulls a stream's bytes here; with nothing to send yet the
 * connection is suspended until an event brings some (job_wake). */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  job *j = cls;
  uint64_t cancel[SRV_MAX_N * SRV_MAX_PROMPTS];
  int n_cancel = 0;
  ssize_t ret;
  pthread_mutex_lock(&j->lock);
  handle_pending(j, cancel, &n_cancel);
  size_t avail = j->out.n - j->out_sent;
  if (avail) {
    size_t n = avail < max ? avail : max;
    memcpy(buf, j->out.s + j->out_sent, n);
    j->out_sent += n;
    if (j->out_sent == j->out.n) j->out.n = j->out_sent = 0;
    ret = (ssize_t)n;
  } else if (j->finished || j->out.failed) {
    ret = j->out.failed ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
  } else {
    MHD_suspend_connection(j->conn);
    j->suspended = 1;
    ret = 0;
  }
  pthread_mutex_unlock(&j->lock);
  cancel_ids(j->srv, cancel, n_cancel);
  return ret;
}

/* ---- one HTTP request ----------------------------------------------------- */

typedef struct {
  srv_buf body;
  int too_large;
  double t_arrival;
  job *j;
} conn_ctx;

/* The prompt of each choice, as tokens: the chat template over the messages,
 * or each completions prompt with the tokenizer's framing. */
static int tokenize_prompts(server *srv, const srv_request *req, int32_t **ids, int *n_ids, srv_error *err) {
  int rc = 0;
  pthread_mutex_lock(&srv->text_lock);
  if (req->kind == SRV_CHAT) {
    wisp_chat_message *msgs = calloc((size_t)req->n_messages, sizeof *msgs);
    char *text = NULL;
    if (!msgs) {
      rc = srv_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    } else {
      for (int i = 0; i < req->n_messages; i++) msgs[i] = (wisp_chat_message){req->messages[i].role, req->messages[i].content};
      if (wisp_chat_apply(srv->model, msgs, req->n_messages, 1, 0, &text) ||
          wisp_tokenize(srv->model, text, strlen(text), 0, &ids[0], &n_ids[0]))
        rc = srv_error_set(err, 400, "invalid_request_error", NULL, "messages", "%s", wisp_last_error());
    }
    wisp_free(text);
    free(msgs);
  } else {
    for (int i = 0; i < req->n_prompts && !rc; i++) {
      if (!req->prompts[i]) { /* given as token ids: used as they are, no framing added */
        const size_t bytes = (size_t)req->n_prompt_ids[i] * sizeof(int32_t);
        if (!(ids[i] = malloc(bytes))) rc = srv_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        else memcpy(ids[i], req->prompt_ids[i], bytes), n_ids[i] = req->n_prompt_ids[i];
      } else if (wisp_tokenize(srv->model, req->prompts[i], strlen(req->prompts[i]), 1, &ids[i], &n_ids[i])) {
        rc = srv_error_set(err, 400, "invalid_request_error", NULL, "prompt", "%s", wisp_last_error());
      }
    }
  }
  pthread_mutex_unlock(&srv->text_lock);
  return rc;
}

/* Cancels the scheduler requests of choices that have not ended (outside the lock). */
static void job_cancel_open(job *j) {
  uint64_t ids[SRV_MAX_N * SRV_MAX_PROMPTS];
  int n = 0;
  pthread_mutex_lock(&j->lock);
  for (int i = 0; i < j->n_choices; i++)
    if (j->choices[i].submitted && !j->choices[i].sched_done) ids[n++] = j->choices[i].sched_id;
  pthread_mutex_unlock(&j->lock);
  cancel_ids(j->srv, ids, n);
}

static enum MHD_Result start_generation(server *srv, struct MHD_Connection *conn, conn_ctx *ctx, srv_kind kind) {
  srv_request req;
  srv_error err;
  if (srv_request_parse(ctx->body.s ? ctx->body.s : "", ctx->body.n, kind, &req, &err)) return send_error(srv, conn, &err);
  if (req.model && req.model[0] && strcmp(req.model, srv->model_name)) {
    srv_error_set(&err, 404, "invalid_request_error", "model_not_found", "model",
                  "The model '%.80s' does not exist (this server has '%s')", req.model, srv->model_name);
    srv_request_free(&req);
    return send_error(srv, conn, &err);
  }
  if (kind == SRV_CHAT && !srv->has_chat) {
    srv_request_free(&req);
    return fail(srv, conn, 400, "invalid_request_error", NULL,
                "this model has no chat template: use /v1/completions");
  }
  int n_prompts = kind == SRV_CHAT ? 1 : req.n_prompts;
  int32_t *ids[SRV_MAX_PROMPTS] = {0};
  int n_ids[SRV_MAX_PROMPTS] = {0};
  if (tokenize_prompts(srv, &req, ids, n_ids, &err)) goto refuse;
  for (int p = 0; p < n_prompts; p++) {
    if (n_ids[p] < 1) {
      srv_error_set(&err, 400, "invalid_request_error", NULL, "prompt", "the prompt is empty (no tokens)");
      goto refuse;
    }
    if (n_ids[p] >= srv->context) {
      srv_error_set(&err, 400, "invalid_request_error", "context_length_exceeded", kind == SRV_CHAT ? "messages" : "prompt",
                    "the prompt has %d tokens; this server's context is %d tokens per sequence", n_ids[p],
                    srv->context);
      goto refuse;
    }
  }

  job *j = calloc(1, sizeof *j);
  int n_choices = n_prompts * req.n;
  if (!j || !(j->choices = calloc((size_t)n_choices, sizeof *j->choices))) {
    free(j);
    srv_error_set(&err, 500, "server_error", NULL, NULL, "out of memory");
    goto refuse;
  }
  pthread_mutex_init(&j->lock, NULL);
  j->srv = srv;
  j->conn = conn;
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  j->fd = ci ? ci->connect_fd : -1;
  j->req = req;
  j->refs = 1;
  j->t_arrival = ctx->t_arrival;
  j->created = (long long)time(NULL);
  snprintf(j->id, sizeof j->id, "%s-%llu", kind == SRV_CHAT ? "chatcmpl" : "cmpl",
           (unsigned long long)atomic_fetch_add(&srv->next_id, 1));
  j->n_choices = j->n_open = n_choices;
  for (int p = 0; p < n_prompts; p++) j->n_prompt_tokens += n_ids[p];
  pthread_mutex_lock(&srv->jobs_lock);
  srv->n_jobs++;
  pthread_mutex_unlock(&srv->jobs_lock);
  ctx->j = j;
  for (int i = 0; i < n_choices; i++) {
    choice *c = &j->choices[i];
    c->j = j;
    c->index = i;
    c->prompt_index = i / req.n;
    wisp_stream_init(&c->dec, srv->tok);
    srv_stop_init(&c->stop, (const char *const *)j->req.stop, j->req.n_stop);
    if (req.logprobs && !req.stream) c->logprobs = kind == SRV_CHAT ? cJSON_CreateArray() : cJSON_CreateObject();
  }

  /* One scheduler request per choice; a refusal cancels those already in. */
  wisp_status st = WISP_OK;
  int submitted = 0;
  pthread_rwlock_rdlock(&srv->sched_lock);
  if (!srv->sched || atomic_load(&srv->state) != READY)
    st = wisp_fail(WISP_EUNSUPPORTED, "the server is shutting down");
  for (int i = 0; i < n_choices && !st; i++) {
    choice *c = &j->choices[i];
    wisp_sched_request r = {
        .prompt = ids[c->prompt_index], .n_prompt = n_ids[c->prompt_index],
        .max_tokens = req.max_tokens > 0 ? req.max_tokens : 0,
        .temperature = req.temperature, .top_k = req.top_k, .top_p = req.top_p, .min_p = req.min_p,
        /* each choice its own draw; the same seed gives the same answers */
        .seed = (req.has_seed ? req.seed : (uint64_t)time(NULL) * 2654435761u) + (uint64_t)i,
        .presence_penalty = req.presence_penalty, .frequency_penalty = req.frequency_penalty,
        .ignore_eos = req.ignore_eos, .logprobs = req.logprobs, .top_logprobs = req.top_logprobs,
        .on_event = on_event, .user = c};
    pthread_mutex_lock(&j->lock);
    j->refs++;
    pthread_mutex_unlock(&j->lock);
    uint64_t id = 0;
    st = wisp_sched_submit(srv->sched, &r, &id);
    pthread_mutex_lock(&j->lock);
    if (st) {
      j->refs--;
    } else {
      c->submitted = 1;
      c->sched_id = id;
      submitted++;
    }
    pthread_mutex_unlock(&j->lock);
  }
  pthread_rwlock_unlock(&srv->sched_lock);
  for (int p = 0; p < n_prompts; p++) wisp_free(ids[p]);
  if (st) {
    /* the request is refused whole: the choices already queued are cancelled */
    pthread_mutex_lock(&j->lock);
    for (int i = 0; i < n_choices; i++) j->choices[i].finish = "stop"; /* events from here on are dropped */
    j->finished = 1;
    pthread_mutex_unlock(&j->lock);
    job_cancel_open(j);
    if (st == WISP_EBUSY)
      return fail(srv, conn, 429, "rate_limit_exceeded", "queue_full",
                  "the server is busy (its request queue is full): try again later");
    if (st == WISP_EUNSUPPORTED && !submitted)
      return fail(srv, conn, 503, "server_error", "unavailable", "the server is shutting down");
    /* the scheduler refuses what the request asked for (an id outside the
     * vocabulary, a prompt longer than the context): the client's fault */
    if (st == WISP_EINVAL)
      return fail(srv, conn, 400, "invalid_request_error", NULL, "%s", wisp_last_error());
    return fail(srv, conn, 500, "server_error", NULL, "%s", wisp_last_error());
  }
  if (j->req.stream) {
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, j, NULL);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    /* nginx: pass events through as they come */
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    enum MHD_Result ok = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    srv_metrics_count_status(&srv->metrics, 200);
    return ok;
  }
  pthread_mutex_lock(&j->lock);
  if (j->finished) {
    pthread_mutex_unlock(&j->lock);
    return send_job(srv, conn, j);
  }
  MHD_suspend_connection(conn);
  j->suspended = 1;
  pthread_mutex_unlock(&j->lock);
  return MHD_YES;

refuse:
  for (int p = 0; p < SRV_MAX_PROMPTS; p++) wisp_free(ids[p]);
  srv_request_free(&req);
  return send_error(srv, conn, &err);
}

/* 1 when the request carries the API key (or none is needed). */
static int authorized(const server *srv, struct MHD_Connection *conn) {
  if (!srv->cfg.api_key) return 1;
  const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  if (!h || strncmp(h, "Bearer ", 7)) return 0;
  /* compare every byte, so the time taken does not tell how much matched */
  const char *k = srv->cfg.api_key, *g = h + 7;
  size_t nk = strlen(k), ng = strlen(g);
  unsigned diff = nk != ng;
  for (size_t i = 0; i < nk; i++) diff |= (unsigned char)k[i] ^ (unsigned char)(i < ng ? g[i] : 0);
  return !diff;
}

static enum MHD_Result send_models(server *srv, struct MHD_Connection *conn) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "object", "list");
  cJSON *data = cJSON_AddArrayToObject(o, "data"), *m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "id", srv->model_name);
  cJSON_AddStringToObject(m, "object", "model");
  cJSON_AddNumberToObject(m, "created", 0);
  cJSON_AddStringToObject(m, "owned_by", "wisp");
  if (atomic_load(&srv->state) == READY) cJSON_AddNumberToObject(m, "context_length", srv->context);
  cJSON_AddItemToArray(data, m);
  return send_json(srv, conn, 200, o);
}

static enum MHD_Result send_metrics(server *srv, struct MHD_Connection *conn) {
  wisp_sched_stats st;
  int ready = atomic_load(&srv->state) == READY;
  if (ready) wisp_sched_get_stats(srv->sched, &st);
  char *text = srv_metrics_render(&srv->metrics, ready ? &st : NULL);
  if (!text) return MHD_NO;
  enum MHD_Result ok = send_text(srv, conn, 200, "text/plain; version=0.0.4; charset=utf-8", text, strlen(text));
  free(text);
  return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
  (void)version;
  server *srv = cls;
  conn_ctx *ctx = *con_cls;
  if (!ctx) {
    if (!(ctx = calloc(1, sizeof *ctx))) return MHD_NO;
    ctx->t_arrival = now_s();
    *con_cls = ctx;
    return MHD_YES;
  }
  if (*upload_size) {
    /* past the limit the body is read and dropped, so the client gets its 413 */
    if (ctx->body.n + *upload_size > SRV_MAX_BODY) ctx->too_large = 1;
    if (!ctx->too_large) srv_buf_put(&ctx->body, upload, *upload_size);
    *upload_size = 0;
    return MHD_YES;
  }
  if (ctx->j) { /* a non-streaming request, resumed: its answer is ready */
    job *j = ctx->j;
    pthread_mutex_lock(&j->lock);
    int done = j->finished;
    if (!done) { /* spurious wake-up: wait again */
      MHD_suspend_connection(conn);
      j->suspended = 1;
    }
    pthread_mutex_unlock(&j->lock);
    return done ? send_job(srv, conn, j) : MHD_YES;
  }
  const int get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
  const int state = atomic_load(&srv->state);
  if (!strcmp(url, "/health")) {
    if (!get) return fail(srv, conn, 405, "invalid_request_error", NULL, "use GET /health");
    const char *body = state == READY ? "{\"status\":\"ok\"}" : state == LOADING ? "{\"status\":\"loading\"}"
                                                                                 : "{\"status\":\"unavailable\"}";
    return send_text(srv, conn, state == READY ? 200 : 503, "application/json", body, strlen(body));
  }
  if (!strcmp(url, "/") || !strcmp(url, "/index.html")) {
    if (!get) return fail(srv, conn, 405, "invalid_request_error", NULL, "use GET /");
    const wisp_builtin_file *page = wisp_builtin_find(WISP_BUILTIN_PREFIX "src/server/chat.html");
    if (!page) return fail(srv, conn, 500, "server_error", NULL, "the chat page is not built in");
    return send_text(srv, conn, 200, "text/html; charset=utf-8", page->data, page->len);
  }
  if (!strcmp(url, "/local") || !strncmp(url, "/local/", 7)) {
    if (!get) return fail(srv, conn, 405, "invalid_request_error", NULL, "use GET %.100s", url);
    return send_local(srv, conn, url);
  }
  const int chat = !strcmp(url, "/v1/chat/completions"), completion = !strcmp(url, "/v1/completions");
  const int models = !strcmp(url, "/v1/models"), metrics = !strcmp(url, "/metrics");
  if (!chat && !completion && !models && !metrics)
    return fail(srv, conn, 404, "invalid_request_error", "not_found", "no such endpoint: %s %.100s", method, url);
  if (!authorized(srv, conn))
    return fail(srv, conn, 401, "invalid_request_error", "invalid_api_key",
                "a valid API key is needed (Authorization: Bearer KEY)");
  if (models || metrics) {
    if (!get) return fail(srv, conn, 405, "invalid_request_error", NULL, "use GET %s", url);
    return models ? send_models(srv, conn) : send_metrics(srv, conn);
  }
  if (!post) return fail(srv, conn, 405, "invalid_request_error", NULL, "use POST %s", url);
  if (ctx->too_large || ctx->body.failed)
    return fail(srv, conn, 413, "invalid_request_error", "request_too_large", "the body exceeds %u bytes",
                SRV_MAX_BODY);
  if (state != READY)
    return fail(srv, conn, 503, "server_error", state == LOADING ? "model_loading" : "unavailable",
                state == LOADING ? "the model is loading" : "the server is shutting down");
  return start_generation(srv, conn, ctx, chat ? SRV_CHAT : SRV_COMPLETION);
}

/* The request is over (answered, or the client went away). A job's open
 * choices are cancelled: a client that disconnects frees its slot at once. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
  (void)cls;
  (void)conn;
  (void)toe;
  conn_ctx *ctx = *con_cls;
  if (!ctx) return;
  *con_cls = NULL;
  if (ctx->j) {
    job_cancel_open(ctx->j);
    pthread_mutex_lock(&ctx->j->lock);
    job_unref_unlock(ctx->j);
  }
  srv_buf_free(&ctx->body);
  free(ctx);
}

/* ---- lifecycle ------------------------------------------------------------ */

static void *load_model(void *arg) {
  server *srv = arg;
  const srv_config *c = &srv->cfg;
  wisp_status st = wisp_model_open(c->model_dir, &srv->model);
  if (!st) {
    srv->has_chat = wisp_chat_template_of(srv->model) != NULL;
    const wisp_artifact *a = srv->model->artifact;
    st = wisp_tokenizer_for_artifact(a->dir, a->tokenizer, a->manifest, wisp_model_vocab(srv->model), &srv->tok);
  }
  if (!st) {
    srv->byte_tokens = !strcmp(wisp_tokenizer_kind(srv->tok), "byte");
    wisp_sched_options so = {.parallel = c->parallel, .max_queue = c->max_queue, .context = c->context,
                             .backend = c->backend, .profile = c->profile, .tuning = c->tuning,
                             .threads = c->threads, .prefill_chunk = c->prefill_chunk, .run_ahead = c->run_ahead};
    st = wisp_sched_new(srv->model, &so, &srv->sched);
  }
  if (st) {
    fprintf(stderr, "wisp serve: %s\n", wisp_last_error());
    atomic_store(&srv->state, FAILED);
    return NULL;
  }
  srv->context = wisp_sched_context(srv->sched);
  fprintf(stderr, "wisp serve: model %s ready (%d sequences of %d tokens, backend %s)\n", srv->model_name,
          c->parallel ? c->parallel : 4, srv->context, c->backend ? c->backend : "cpu");
  atomic_store(&srv->state, READY);
  return NULL;
}

/* The model's name in the API: the artifact directory's last component. */
static void name_model(server *srv, const char *dir) {
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/') n--;
  size_t b = n;
  while (b > 0 && dir[b - 1] != '/') b--;
  snprintf(srv->model_name, sizeof srv->model_name, "%.*s", (int)(n - b), dir + b);
}

static void log_mhd(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  fprintf(stderr, "wisp serve: http: ");
  vfprintf(stderr, fmt, ap);
}

/* Waits until every job is freed, or the deadline (seconds from now). */
static void wait_jobs(server *srv, double seconds) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += (time_t)seconds;
  until.tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
  if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
  pthread_mutex_lock(&srv->jobs_lock);
  while (srv->n_jobs > 0 && pthread_cond_timedwait(&srv->jobs_cv, &srv->jobs_lock, &until) != ETIMEDOUT) {}
  pthread_mutex_unlock(&srv->jobs_lock);
}

static struct MHD_Daemon *start_daemon(server *srv) {
  const srv_config *c = &srv->cfg;
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC |
                   MHD_USE_ERROR_LOG;
  int ipv6 = c->host && strchr(c->host, ':') != NULL;
  if (ipv6) flags |= MHD_USE_IPv6;
  union {
    struct sockaddr_in v4;
    struct sockaddr_in6 v6;
  } addr;
  memset(&addr, 0, sizeof addr);
  const char *host = c->host ? c->host : "127.0.0.1";
  if (ipv6) {
    addr.v6.sin6_family = AF_INET6;
    addr.v6.sin6_port = htons((uint16_t)c->port);
    if (inet_pton(AF_INET6, host, &addr.v6.sin6_addr) != 1) return NULL;
  } else {
    addr.v4.sin_family = AF_INET;
    addr.v4.sin_port = htons((uint16_t)c->port);
    if (inet_pton(AF_INET, host, &addr.v4.sin_addr) != 1) return NULL;
  }
  return MHD_start_daemon(
      flags, (uint16_t)c->port, NULL, NULL, on_request, srv, MHD_OPTION_EXTERNAL_LOGGER, log_mhd, srv,
      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
      MHD_OPTION_THREAD_POOL_SIZE, (unsigned)(c->http_threads > 0 ? c->http_threads : 2),
      MHD_OPTION_CONNECTION_LIMIT, (unsigned)(c->max_connections > 0 ? c->max_connections : 1024),
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(c->timeout_s > 0 ? c->timeout_s : 60),
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
      MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u, MHD_OPTION_END);
}

int srv_run(const srv_config *cfg) {
  static server srv_storage;
  server *srv = &srv_storage;
  memset(srv, 0, sizeof *srv);
  srv->cfg = *cfg;
  atomic_init(&srv->state, LOADING);
  atomic_init(&srv->next_id, 1);
  name_model(srv, cfg->model_dir);
  snprintf(srv->fingerprint, sizeof srv->fingerprint, "wisp-%s-%s", WISP_VERSION, cfg->backend ? cfg->backend : "cpu");
  srv_metrics_init(&srv->metrics);
  pthread_mutex_init(&srv->text_lock, NULL);
  pthread_rwlock_init(&srv->sched_lock, NULL);
  pthread_mutex_init(&srv->jobs_lock, NULL);
  pthread_cond_init(&srv->jobs_cv, NULL);

  /* The signals are taken by the main thread alone (sigtimedwait below):
   * every thread started from here inherits the mask. */
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  signal(SIGPIPE, SIG_IGN);

  int rc = 1;
  srv->daemon = start_daemon(srv);
  if (!srv->daemon) {
    fprintf(stderr, "wisp serve: cannot listen on %s port %d (in use, or not an address of this machine?)\n",
            cfg->host ? cfg->host : "127.0.0.1", cfg->port);
    goto done;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
  fprintf(stderr, "wisp serve: listening on http://%s:%u/ (model %s loading)\n", cfg->host ? cfg->host : "127.0.0.1",
          info ? (unsigned)info->port : (unsigned)cfg->port, srv->model_name);
  pthread_t loader;
  if (pthread_create(&loader, NULL, load_model, srv)) {
    fprintf(stderr, "wisp serve: cannot start a thread\n");
    MHD_stop_daemon(srv->daemon);
    goto done;
  }
  int sig = 0;
  while (!sig && atomic_load(&srv->state) != FAILED) {
    struct timespec tick = {0, 200 * 1000 * 1000};
    int s = sigtimedwait(&sigs, NULL, &tick);
    if (s > 0) sig = s;
  }
  pthread_join(loader, NULL); /* a model still loading is waited for */
  int was_ready = atomic_load(&srv->state) == READY;
  rc = atomic_load(&srv->state) == FAILED;
  atomic_store(&srv->state, STOPPING);
  if (sig) fprintf(stderr, "wisp serve: %s: shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  if (was_ready) {
    /* Running requests may finish for a while; then the scheduler cancels
     * the rest (each gets its last event, so each stream its last chunk). */
    wait_jobs(srv, cfg->grace_s < 0 ? 0 : cfg->grace_s ? cfg->grace_s : 5);
    pthread_rwlock_wrlock(&srv->sched_lock);
    wisp_sched_free(srv->sched);
    srv->sched = NULL;
    pthread_rwlock_unlock(&srv->sched_lock);
    wait_jobs(srv, 2); /* the last chunks go out; a client that reads nothing is cut off below */
  }
  MHD_stop_daemon(srv->daemon);
done:
  if (srv->n_jobs) fprintf(stderr, "wisp serve: %d requests were still open at exit\n", srv->n_jobs);
  if (srv->sched) wisp_sched_free(srv->sched);
  wisp_tokenizer_free(srv->tok);
  wisp_model_close(srv->model);
  srv_metrics_destroy(&srv->metrics);
  pthread_mutex_destroy(&srv->text_lock);
  pthread_rwlock_destroy(&srv->sched_lock);
  pthread_mutex_destroy(&srv->jobs_lock);
  pthread_cond_destroy(&srv->jobs_cv);
  pthread_sigmask(SIG_UNBLOCK, &sigs, NULL);
  return rc;
}
