/* /metrics of `wisp serve`: Prometheus text format 0.0.4 (docs/serve.md lists
 * every series). The server counts answers by status and observes latencies
 * here; the scheduler's own counters (tokens, running, queued, slots) come in
 * a wisp_sched_stats at render time. */
#ifndef WISP_SERVER_METRICS_H
#define WISP_SERVER_METRICS_H

#include <pthread.h>
#include <stdint.h>

#include "wisp.h"

#define SRV_HIST_BUCKETS 14

typedef struct {
  uint64_t counts[SRV_HIST_BUCKETS + 1]; /* per bucket (not cumulative); the last is +Inf */
  double sum;
  uint64_t count;
} srv_histogram;

#define SRV_N_STATUS 10
typedef struct {
  pthread_mutex_t lock;
  uint64_t by_status[SRV_N_STATUS]; /* srv_metrics_status_codes order; the last is "other" */
  srv_histogram ttft;               /* seconds from the request's arrival to its first token */
  srv_histogram itl;                /* seconds between a request's consecutive tokens */
} srv_metrics;

/* The upper bounds (seconds) of the histogram buckets. */
extern const double srv_metrics_bounds[SRV_HIST_BUCKETS];

void srv_metrics_init(srv_metrics *m);
void srv_metrics_destroy(srv_metrics *m);
void srv_metrics_count_status(srv_metrics *m, int status);
void srv_metrics_observe_ttft(srv_metrics *m, double seconds);
void srv_metrics_observe_itl(srv_metrics *m, double seconds);
/* The exposition text (malloc'd, NUL-terminated); st NULL while the model
 * loads (the scheduler's series are then 0). NULL when out of memory. */
char *srv_metrics_render(srv_metrics *m, const wisp_sched_stats *st);

#endif
