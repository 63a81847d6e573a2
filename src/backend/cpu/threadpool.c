/* Thread pool: workers sleep on a condition variable between jobs and take
 * task indices from an atomic counter, so uneven tasks balance themselves. */
#include "backend/cpu/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

struct wisp_pool {
  int n_threads;
  pthread_t *threads;
  pthread_mutex_t mu;
  pthread_cond_t wake, done;
  /* current job */
  wisp_task_fn fn;
  void *ctx;
  int n_tasks;
  atomic_int next_task;
  int generation;  /* bumped per job so workers know there is new work */
  int busy;        /* workers still inside the current job */
  int quit;
};

typedef struct { wisp_pool *p; int index; } worker_arg;

static void drain(wisp_pool *p, int thread) {
  for (;;) {
    int t = atomic_fetch_add(&p->next_task, 1);
    if (t >= p->n_tasks) break;
    p->fn(p->ctx, t, thread);
  }
}

static void *worker_main(void *arg) {
  worker_arg *wa = arg;
  wisp_pool *p = wa->p;
  int index = wa->index;
  free(wa);
  int seen = 0;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->quit && p->generation == seen) pthread_cond_wait(&p->wake, &p->mu);
    if (p->quit) break;
    seen = p->generation;
    pthread_mutex_unlock(&p->mu);
    drain(p, index);
    pthread_mutex_lock(&p->mu);
    if (--p->busy == 0) pthread_cond_signal(&p->done);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

wisp_pool *wisp_pool_new(int n_threads) {
  if (n_threads < 1) n_threads = 1;
  wisp_pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->n_threads = n_threads;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  p->threads = calloc((size_t)n_threads, sizeof(pthread_t));
  if (!p->threads) { free(p); return NULL; }
  for (int i = 1; i < n_threads; i++) {
    worker_arg *wa = malloc(sizeof *wa);
    if (!wa) { p->n_threads = i; break; }
    wa->p = p;
    wa->index = i;
    if (pthread_create(&p->threads[i], NULL, worker_main, wa) != 0) {
      free(wa);
      p->n_threads = i;
      break;
    }
  }
  return p;
}

void wisp_pool_free(wisp_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->quit = 1;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int i = 1; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->wake);
  pthread_cond_destroy(&p->done);
  free(p->threads);
  free(p);
}

int wisp_pool_size(const wisp_pool *p) { return p->n_threads; }

void wisp_pool_run(wisp_pool *p, int n_tasks, wisp_task_fn fn, void *ctx) {
  if (n_tasks <= 0) return;
  if (p->n_threads == 1 || n_tasks == 1) {
    for (int t = 0; t < n_tasks; t++) fn(ctx, t, 0);
    return;
  }
  pthread_mutex_lock(&p->mu);
  p->fn = fn;
  p->ctx = ctx;
  p->n_tasks = n_tasks;
  atomic_store(&p->next_task, 0);
  p->busy = p->n_threads - 1;
  p->generation++;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  drain(p, 0);
  pthread_mutex_lock(&p->mu);
  while (p->busy > 0) pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
}
