/* /metrics (metrics.h). One lock guards the counters: they are touched once
 * per answer and once per token, far below what would contend. */
#include "server/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const double srv_metrics_bounds[SRV_HIST_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                     0.25,  0.5,    1,     2.5,  5,     10,   30};

static const int k_codes[SRV_N_STATUS - 1] = {200, 400, 401, 404, 405, 413, 429, 500, 503};

void srv_metrics_init(srv_metrics *m) {
  memset(m, 0, sizeof *m);
  pthread_mutex_init(&m->lock, NULL);
}

void srv_metrics_destroy(srv_metrics *m) { pthread_mutex_destroy(&m->lock); }

void srv_metrics_count_status(srv_metrics *m, int status) {
  int i = 0;
  while (i < SRV_N_STATUS - 1 && k_codes[i] != status) i++;
  pthread_mutex_lock(&m->lock);
  m->by_status[i]++;
  pthread_mutex_unlock(&m->lock);
}

static void observe(srv_metrics *m, srv_histogram *h, double v) {
  int b = 0;
  while (b < SRV_HIST_BUCKETS && v > srv_metrics_bounds[b]) b++;
  pthread_mutex_lock(&m->lock);
  h->counts[b]++;
  h->sum += v;
  h->count++;
  pthread_mutex_unlock(&m->lock);
}

void srv_metrics_observe_ttft(srv_metrics *m, double s) { observe(m, &m->ttft, s); }
void srv_metrics_observe_itl(srv_metrics *m, double s) { observe(m, &m->itl, s); }

/* A growing text buffer; a failed allocation sticks (failed = 1). */
typedef struct {
  char *s;
  size_t n, cap;
  int failed;
} text_buf;

__attribute__((format(printf, 2, 3))) static void put(text_buf *b, const char *fmt, ...) {
  if (b->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (k < 0) { b->failed = 1; return; }
    if (b->s && b->n + (size_t)k < b->cap) { b->n += (size_t)k; return; }
    size_t cap = (b->cap + (size_t)k + 1) * 2;
    char *s = realloc(b->s, cap);
    if (!s) { b->failed = 1; return; }
    b->s = s;
    b->cap = cap;
  }
}

static void series(text_buf *b, const char *name, const char *type, const char *help, double v) {
  put(b, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

static void histogram(text_buf *b, const char *name, const char *help, const srv_histogram *h) {
  put(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
  uint64_t cum = 0;
  for (int i = 0; i < SRV_HIST_BUCKETS; i++) {
    cum += h->counts[i];
    put(b, "%s_bucket{le=\"%g\"} %llu\n", name, srv_metrics_bounds[i], (unsigned long long)cum);
  }
  cum += h->counts[SRV_HIST_BUCKETS];
  put(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.17g\n%s_count %llu\n", name, (unsigned long long)cum, name, h->sum,
      name, (unsigned long long)h->count);
}

char *srv_metrics_render(srv_metrics *m, const wisp_sched_stats *st) {
  wisp_sched_stats zero = {0};
  if (!st) st = &zero;
  text_buf b = {0};
  pthread_mutex_lock(&m->lock);
  put(&b, "# HELP wisp_http_requests_total HTTP requests answered, by status code.\n"
          "# TYPE wisp_http_requests_total counter\n");
  for (int i = 0; i < SRV_N_STATUS; i++) {
    if (i < SRV_N_STATUS - 1)
      put(&b, "wisp_http_requests_total{code=\"%d\"} %llu\n", k_codes[i], (unsigned long long)m->by_status[i]);
    else
      put(&b, "wisp_http_requests_total{code=\"other\"} %llu\n", (unsigned long long)m->by_status[i]);
  }
  histogram(&b, "wisp_time_to_first_token_seconds", "Seconds from a request's arrival to its first generated token.",
            &m->ttft);
  histogram(&b, "wisp_inter_token_latency_seconds", "Seconds between consecutive tokens of one request.", &m->itl);
  pthread_mutex_unlock(&m->lock);
  series(&b, "wisp_prompt_tokens_total", "counter", "Prompt tokens of finished and running requests.",
         (double)st->prompt_tokens);
  series(&b, "wisp_prompt_tokens_cached_total", "counter", "Prompt tokens reused from a slot's state, not prefilled.",
         (double)st->prompt_tokens_cached);
  series(&b, "wisp_generated_tokens_total", "counter", "Tokens generated.", (double)st->generated_tokens);
  series(&b, "wisp_sequences_running", "gauge", "Sequences holding a slot now.", st->running);
  series(&b, "wisp_sequences_queued", "gauge", "Requests waiting for a slot now.", st->queued);
  series(&b, "wisp_slots", "gauge", "KV/state slots of the scheduler.", st->slots);
  series(&b, "wisp_slots_used", "gauge", "Slots holding a sequence or a reusable history now.", st->slots_used);
  series(&b, "wisp_scheduler_requests_rejected_total", "counter", "Requests refused because the queue was full.",
         (double)st->requests_rejected);
  series(&b, "wisp_scheduler_steps_total", "counter", "Scheduler steps run.", (double)st->steps);
  if (b.failed) {
    free(b.s);
    return NULL;
  }
  return b.s;
}
