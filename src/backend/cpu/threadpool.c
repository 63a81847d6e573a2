/* Thread pool: each thread runs the task of its own index, then takes task
 * indices from an atomic counter, so uneven tasks balance themselves. Between jobs a worker spins for a while (a
 * forward pass runs its products back to back, with only short
 * single-threaded ops between them), yielding the core now and then in case
 * the machine is oversubscribed, and sleeps on a condition variable once
 * the pool has been idle longer than that. The caller waits for the last
 * worker the same way. */
#include "backend/cpu/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

/* Spin iterations before sleeping, and after how many the spinner starts
 * yielding (every YIELD_EVERY iterations). A pause is tens of nanoseconds,
 * so a worker stays awake for a fraction of a millisecond after a job. */
enum { SPIN_LIMIT = 1 << 14, SPIN_PURE = 1 << 9, YIELD_EVERY = 32 };

/* The counters every thread touches sit on cache lines of their own: the
 * task counter takes an atomic add per task from every thread, and sharing
 * its line with `generation` (which idle workers poll) or `pending` would
 * make each add invalidate every spinner's copy. */
#define POOL_LINE _Alignas(64)

struct wisp_pool {
  int n_threads;
  pthread_t *threads;
  pthread_mutex_t mu;
  pthread_cond_t wake, done;
  /* current job, written before `generation` is bumped */
  wisp_task_fn fn;
  void *ctx;
  int n_tasks;
  POOL_LINE atomic_int next_task;
  POOL_LINE atomic_int generation; /* bumped per job (under mu) so workers know there is new work */
  atomic_int quit;
  POOL_LINE atomic_int pending; /* workers still inside the current job */
  POOL_LINE atomic_int sleepers; /* workers waiting on `wake` */
  atomic_int caller_sleeps;
};

typedef struct { wisp_pool *p; int index; } worker_arg;

/* Thread i first runs task i without touching the shared counter, which
 * starts at the thread count: a job of one task a thread (a small decode
 * product) then costs no atomic add on the counter at all, and a larger one
 * one add fewer per thread. */
static void drain(wisp_pool *p, int thread) {
  if (thread < p->n_tasks) p->fn(p->ctx, thread, thread);
  if (p->n_tasks <= p->n_threads) return;
  for (;;) {
    int t = atomic_fetch_add(&p->next_task, 1);
    if (t >= p->n_tasks) break;
    p->fn(p->ctx, t, thread);
  }
}

/* Spins until *v != old (1) or the spin budget is spent (0). */
static int spin_while_equal(atomic_int *v, int old) {
  for (int i = 0; i < SPIN_LIMIT; i++) {
    if (atomic_load_explicit(v, memory_order_acquire) != old) return 1;
    CPU_RELAX();
    if (i >= SPIN_PURE && i % YIELD_EVERY == 0) sched_yield();
  }
  return 0;
}

static void *worker_main(void *arg) {
  worker_arg *wa = arg;
  wisp_pool *p = wa->p;
  int index = wa->index;
  free(wa);
  int seen = 0;
  for (;;) {
    if (!spin_while_equal(&p->generation, seen)) {
      pthread_mutex_lock(&p->mu);
      atomic_fetch_add(&p->sleepers, 1);
      while (!atomic_load(&p->quit) && atomic_load(&p->generation) == seen) pthread_cond_wait(&p->wake, &p->mu);
      atomic_fetch_sub(&p->sleepers, 1);
      pthread_mutex_unlock(&p->mu);
    }
    if (atomic_load(&p->quit)) break;
    seen = atomic_load(&p->generation);
    drain(p, index);
    if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_sleeps)) {
      pthread_mutex_lock(&p->mu);
      pthread_cond_signal(&p->done);
      pthread_mutex_unlock(&p->mu);
    }
  }
  return NULL;
}

wisp_pool *wisp_pool_new(int n_threads) {
  if (n_threads < 1) n_threads = 1;
  wisp_pool *p = aligned_alloc(64, sizeof *p); /* sizeof is a multiple of the 64-byte alignment */
  if (!p) return NULL;
  memset(p, 0, sizeof *p);
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
  atomic_store(&p->quit, 1);
  atomic_fetch_add(&p->generation, 1);
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
  p->fn = fn;
  p->ctx = ctx;
  p->n_tasks = n_tasks;
  atomic_store(&p->next_task, p->n_threads); /* tasks below it are the threads' own (drain) */
  atomic_store(&p->pending, p->n_threads - 1);
  /* The bump happens under the mutex so that a worker deciding to sleep
   * (which checks the generation under it) cannot miss it. */
  pthread_mutex_lock(&p->mu);
  atomic_fetch_add(&p->generation, 1);
  if (atomic_load(&p->sleepers) > 0) pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  drain(p, 0);
  for (int i = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; i++) {
    if (i < SPIN_LIMIT) {
      CPU_RELAX();
      if (i >= SPIN_PURE && i % YIELD_EVERY == 0) sched_yield();
      continue;
    }
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->caller_sleeps, 1);
    while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->done, &p->mu);
    atomic_store(&p->caller_sleeps, 0);
    pthread_mutex_unlock(&p->mu);
  }
}
