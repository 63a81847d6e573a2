/* The CPU backend's thread pool (src/backend/cpu/threadpool.c): every task
 * of a job runs exactly once, on a valid thread index, for jobs of fewer,
 * as many and more tasks than threads, back to back (the workers spin
 * between jobs) and after the workers have gone to sleep. */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/threadpool.h"
#include "test.h"

enum { MAX_TASKS = 200 };

typedef struct {
  atomic_int runs[MAX_TASKS];
  atomic_int bad_thread;
  int threads;
} pool_job;

static void count_task(void *ctx, int task, int thread) {
  pool_job *j = ctx;
  if (thread < 0 || thread >= j->threads) atomic_fetch_add(&j->bad_thread, 1);
  atomic_fetch_add(&j->runs[task], 1);
}

/* Runs a job of n tasks; 1 when each ran once on a valid thread. */
static int run_once(wisp_pool *p, pool_job *j, int n) {
  for (int i = 0; i < MAX_TASKS; i++) atomic_store(&j->runs[i], 0);
  atomic_store(&j->bad_thread, 0);
  wisp_pool_run(p, n, count_task, j);
  for (int i = 0; i < MAX_TASKS; i++)
    if (atomic_load(&j->runs[i]) != (i < n)) return 0;
  return atomic_load(&j->bad_thread) == 0;
}

TEST(threadpool_runs_every_task_once) {
  const int threads[] = {1, 3, 4};
  static pool_job j;
  for (int k = 0; k < 3; k++) {
    wisp_pool *p = wisp_pool_new(threads[k]);
    CHECK(p && wisp_pool_size(p) == threads[k]);
    j.threads = threads[k];
    int bad = 0;
    for (int round = 0; round < 300; round++) {
      int n = 1 + (round * 7) % 23; /* 1..23: below, at and above the thread count */
      bad += !run_once(p, &j, n);
    }
    CHECKF(!bad, "%d threads: %d of 300 jobs ran a task twice, never or on a bad thread", threads[k], bad);
    usleep(20000); /* long enough for the workers to stop spinning and sleep */
    CHECKF(run_once(p, &j, 5) && run_once(p, &j, MAX_TASKS), "%d threads: a job after the workers slept", threads[k]);
    wisp_pool_free(p);
  }
}

/* The default count is one thread per physical core the process may use:
 * at least one, and never more than the CPUs of its affinity mask. */
TEST(threadpool_default_threads_fit_the_affinity_mask) {
  cpu_set_t set;
  CHECK(sched_getaffinity(0, sizeof set, &set) == 0);
  int n = wisp_pool_default_threads();
  CHECKF(n >= 1 && n <= CPU_COUNT(&set), "default %d threads, %d CPUs in the mask", n, CPU_COUNT(&set));
  /* Narrowed to one CPU (as `taskset -c 0` would), the default is one. */
  cpu_set_t one;
  CPU_ZERO(&one);
  int first = 0;
  while (!CPU_ISSET(first, &set)) first++;
  CPU_SET(first, &one);
  CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
  int narrowed = wisp_pool_default_threads();
  CHECK(sched_setaffinity(0, sizeof set, &set) == 0);
  CHECKF(narrowed == 1, "one CPU in the mask, default %d threads", narrowed);
}

static void thread_of_task(void *ctx, int task, int thread) {
  int *threads = ctx;
  threads[task] = thread;
}

/* Each mode runs every task once: SOLO on the caller (thread 0) alone,
 * SHARED and AUTO on any thread. Pinning makes the path independent of
 * how loaded the machine is. */
TEST(threadpool_solo_and_shared_modes_run_every_task_once) {
  static pool_job j;
  wisp_pool *p = wisp_pool_new(3);
  CHECK(p != NULL);
  j.threads = 3;
  const int modes[] = {WISP_POOL_SOLO, WISP_POOL_SHARED, WISP_POOL_SOLO, WISP_POOL_AUTO};
  for (int m = 0; m < 4; m++) {
    wisp_pool_pin(p, modes[m]);
    int bad = 0;
    for (int round = 0; round < 200; round++) bad += !run_once(p, &j, 1 + (round * 5) % 31);
    CHECKF(!bad, "mode %d: %d of 200 jobs ran a task twice, never or on a bad thread", modes[m], bad);
    if (modes[m] == WISP_POOL_SOLO) {
      int threads[64];
      memset(threads, -1, sizeof threads);
      wisp_pool_run(p, 64, thread_of_task, threads);
      int off_caller = 0;
      for (int t = 0; t < 64; t++) off_caller += threads[t] != 0;
      CHECKF(off_caller == 0, "solo: %d of 64 tasks ran off the caller", off_caller);
    }
  }
  wisp_pool_free(p);
}
