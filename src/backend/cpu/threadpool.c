/* Thread pool for data-parallel loops. The caller publishes a job (a task
 * function and a task count) and then takes part in it; every thread,
 * caller included, claims task indices one at a time from a shared word
 * and runs them, so uneven tasks balance themselves.
 *
 * The pool must hold up on a loaded machine, where any worker may be off
 * its core for a whole scheduler slice (milliseconds) at any moment. So:
 * - The caller never waits for a worker that has not started a task: it
 *   runs every unclaimed task itself and waits only for tasks another
 *   thread has claimed. A worker that wakes late finds no task left and
 *   goes back to waiting; the job did not wait for it.
 * - Idle workers spin briefly (a forward pass runs its products back to
 *   back, with only short single-threaded ops between them) and then
 *   sleep on a condition variable, so they do not burn the CPU share the
 *   other load and the caller need.
 * - The caller checks that sharing pays. Over each short window of jobs it
 *   compares the time the jobs took with what they would have taken on the
 *   caller alone (its own time per task times the task count). When
 *   sharing cost time (the caller waited on tasks that workers claimed and
 *   were then preempted in, longer than the workers saved it), the pool
 *   goes solo: the caller runs every job by itself and the
 *   workers, seeing no job, fall asleep and leave their cores to the other
 *   load. After a while it tries sharing again for one window; each failed
 *   try doubles the solo stretch, so a machine that stays crowded pays for
 *   a try less and less often. Which thread runs a task never changes a
 *   result (below), so the mode changes speed only.
 *
 * Task claims go through one 64-bit word holding the job's generation, its
 * task count and the next task index. A claim is a compare-and-swap of the
 * whole word, so a thread that read the word during one job can never claim
 * a task of another: the swap fails once the word has moved on. (A word
 * equal in all three fields is a legitimate claim in the current job, since
 * everything the claimer does next is read after the swap.) Which thread
 * runs which task does not change any result: each op splits its work so
 * that every output is summed by one task in a fixed order. */
#include "backend/cpu/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

/* Spin iterations before sleeping. A pause is 10-150 cycles depending on
 * the core, so a worker stays awake for tens of microseconds after a job:
 * long enough to catch the next product of a forward pass, short enough
 * that an idle or crowded pool gives its cores back. */
enum { SPIN_LIMIT = 1 << 12 };

/* Sharing is judged over windows of at least WINDOW_NS of jobs, and kept
 * while it costs no time against the caller alone. Solo stretches start at
 * SOLO_MIN_NS and double up to SOLO_MAX_NS while tries fail. */
#define WINDOW_NS INT64_C(4000000)
#define SOLO_MIN_NS INT64_C(32000000)
#define SOLO_MAX_NS INT64_C(1000000000)

/* The claim word: generation (16 bits) | task count (24) | next task (24). */
enum { TASK_BITS = 24 };
#define TASK_MASK ((UINT64_C(1) << TASK_BITS) - 1)
#define WORD(gen, n, next) (((uint64_t)(gen) << (2 * TASK_BITS)) | ((uint64_t)(n) << TASK_BITS) | (uint64_t)(next))
#define WORD_GEN(w) ((unsigned)((w) >> (2 * TASK_BITS)))
#define WORD_N(w) ((int)(((w) >> TASK_BITS) & TASK_MASK))
#define WORD_NEXT(w) ((int)((w) & TASK_MASK))
#define MAX_TASKS_A_JOB ((int)TASK_MASK)

/* The words every thread touches sit on cache lines of their own, so an
 * add to the done counter does not invalidate every spinner's copy of the
 * claim word. */
#define POOL_LINE _Alignas(64)

struct wisp_pool {
  int n_threads;
  pthread_t *threads;
  pthread_mutex_t mu;
  pthread_cond_t wake, done_cv;
  /* current job, written before the claim word announces it */
  wisp_task_fn fn;
  void *ctx;
  unsigned gen; /* the caller's generation counter (caller only) */
  /* Whether sharing pays (caller only; see the top of the file). */
  int solo;           /* the caller runs jobs alone until solo_until_ns */
  int pinned;         /* WISP_POOL_AUTO, or a mode fixed by wisp_pool_pin */
  int64_t solo_until_ns, solo_stretch_ns;
  int64_t window_start_ns, window_took_ns, window_alone_ns;
  POOL_LINE _Atomic uint64_t claim;
  POOL_LINE atomic_int done; /* tasks of the current job finished */
  POOL_LINE atomic_int sleepers; /* workers waiting on `wake` */
  atomic_int caller_sleeps;
  atomic_int quit;
};

typedef struct { wisp_pool *p; int index; } worker_arg;

/* Claims the next task of the job whose generation is `gen`: its index, or
 * -1 once that job has no unclaimed task (or has been replaced). */
static int claim_task(wisp_pool *p, unsigned gen) {
  uint64_t w = atomic_load_explicit(&p->claim, memory_order_acquire);
  for (;;) {
    if (WORD_GEN(w) != gen || WORD_NEXT(w) >= WORD_N(w)) return -1;
    if (atomic_compare_exchange_weak_explicit(&p->claim, &w, w + 1, memory_order_acq_rel, memory_order_acquire))
      return WORD_NEXT(w);
  }
}

/* Runs tasks of job `gen` until none is left, then reports how many it ran
 * (one add per thread and job, not one per task). fn and ctx are read only
 * after a successful claim: the job cannot end, so they cannot change,
 * while one of its tasks is claimed and not yet reported. */
static int drain(wisp_pool *p, unsigned gen, int thread) {
  int ran = 0;
  for (int t; (t = claim_task(p, gen)) >= 0; ran++) p->fn(p->ctx, t, thread);
  if (ran == 0) return 0;
  int n = WORD_N(atomic_load_explicit(&p->claim, memory_order_relaxed));
  if (atomic_fetch_add(&p->done, ran) + ran == n && thread != 0 && atomic_load(&p->caller_sleeps)) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_signal(&p->done_cv);
    pthread_mutex_unlock(&p->mu);
  }
  return ran;
}

static unsigned current_gen(wisp_pool *p) { return WORD_GEN(atomic_load_explicit(&p->claim, memory_order_acquire)); }

static void *worker_main(void *arg) {
  worker_arg *wa = arg;
  wisp_pool *p = wa->p;
  int index = wa->index;
  free(wa);
  unsigned seen = current_gen(p);
  for (;;) {
    int spins = 0;
    while (current_gen(p) == seen && !atomic_load_explicit(&p->quit, memory_order_relaxed) && spins < SPIN_LIMIT) {
      CPU_RELAX();
      spins++;
    }
    if (spins == SPIN_LIMIT) {
      pthread_mutex_lock(&p->mu);
      atomic_fetch_add(&p->sleepers, 1);
      while (!atomic_load(&p->quit) && current_gen(p) == seen) pthread_cond_wait(&p->wake, &p->mu);
      atomic_fetch_sub(&p->sleepers, 1);
      pthread_mutex_unlock(&p->mu);
    }
    if (atomic_load(&p->quit)) break;
    seen = current_gen(p);
    drain(p, seen, index);
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
  pthread_cond_init(&p->done_cv, NULL);
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
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int i = 1; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->wake);
  pthread_cond_destroy(&p->done_cv);
  free(p->threads);
  free(p);
}

int wisp_pool_size(const wisp_pool *p) { return p->n_threads; }

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void wisp_pool_pin(wisp_pool *p, int mode) {
  p->pinned = mode;
  p->solo = mode == WISP_POOL_SOLO;
  p->solo_until_ns = mode == WISP_POOL_SOLO ? INT64_MAX : 0;
  p->window_start_ns = 0;
}

/* Ends a sharing window once it is long enough: keeps sharing when it
 * saved enough, else goes solo for the current stretch and doubles it. */
static void judge_window(wisp_pool *p, int64_t now) {
  if (p->window_start_ns == 0) {
    p->window_start_ns = now;
    return;
  }
  if (now - p->window_start_ns < WINDOW_NS) return;
  int pays = p->window_took_ns <= p->window_alone_ns;
  if (pays) {
    p->solo_stretch_ns = SOLO_MIN_NS;
  } else if (p->pinned == WISP_POOL_AUTO) {
    if (p->solo_stretch_ns < SOLO_MIN_NS) p->solo_stretch_ns = SOLO_MIN_NS;
    p->solo = 1;
    p->solo_until_ns = now + p->solo_stretch_ns;
    p->solo_stretch_ns = p->solo_stretch_ns * 2 < SOLO_MAX_NS ? p->solo_stretch_ns * 2 : SOLO_MAX_NS;
  }
  p->window_start_ns = p->solo ? 0 : now;
  p->window_took_ns = p->window_alone_ns = 0;
}

/* Jobs larger than the claim word can count are run as several jobs. */
static void run_job(wisp_pool *p, int first, int n_tasks, wisp_task_fn fn, void *ctx);

typedef struct { wisp_task_fn fn; void *ctx; int first; } offset_job;
static void offset_task(void *ctx, int task, int thread) {
  offset_job *o = ctx;
  o->fn(o->ctx, o->first + task, thread);
}

void wisp_pool_run(wisp_pool *p, int n_tasks, wisp_task_fn fn, void *ctx) {
  if (n_tasks <= 0) return;
  if (p->solo && now_ns() >= p->solo_until_ns) p->solo = 0; /* try sharing again */
  if (p->n_threads == 1 || n_tasks == 1 || p->solo) {
    for (int t = 0; t < n_tasks; t++) fn(ctx, t, 0);
    return;
  }
  for (int first = 0; first < n_tasks; first += MAX_TASKS_A_JOB) {
    int n = n_tasks - first < MAX_TASKS_A_JOB ? n_tasks - first : MAX_TASKS_A_JOB;
    run_job(p, first, n, fn, ctx);
  }
}

static void run_job(wisp_pool *p, int first, int n_tasks, wisp_task_fn fn, void *ctx) {
  int64_t start = now_ns();
  offset_job o = {fn, ctx, first};
  p->fn = first ? offset_task : fn;
  p->ctx = first ? (void *)&o : ctx;
  atomic_store_explicit(&p->done, 0, memory_order_relaxed);
  unsigned gen = p->gen = (p->gen + 1) & 0xffffu;
  /* The word is stored under the mutex so that a worker deciding to sleep
   * (which checks the generation under it) cannot miss it. */
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->claim, WORD(gen, n_tasks, 0));
  if (atomic_load(&p->sleepers) > 0) pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  int ran = drain(p, gen, 0);
  int64_t own_end = now_ns();
  /* Every task is claimed now; wait for the ones other threads still run. */
  for (int i = 0; atomic_load_explicit(&p->done, memory_order_acquire) < n_tasks; i++) {
    if (i < SPIN_LIMIT) {
      CPU_RELAX();
      continue;
    }
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->caller_sleeps, 1);
    while (atomic_load(&p->done) < n_tasks) pthread_cond_wait(&p->done_cv, &p->mu);
    atomic_store(&p->caller_sleeps, 0);
    pthread_mutex_unlock(&p->mu);
  }
  int64_t end = now_ns();
  /* The caller alone would have run all n tasks at its own pace; when it
   * ran none, the workers were quick, and the job counts as shared by all. */
  p->window_took_ns += end - start;
  p->window_alone_ns += ran > 0 ? (own_end - start) * n_tasks / ran : (end - start) * p->n_threads;
  judge_window(p, end);
}

/* Reads one integer from a sysfs file; -1 if it cannot. */
static long read_sysfs_long(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  long v = -1;
  if (fscanf(f, "%ld", &v) != 1) v = -1;
  fclose(f);
  return v;
}

/* The CPU quota of the process's cgroup (v2 cpu.max: "QUOTA PERIOD" or
 * "max PERIOD"), rounded up to whole cores; 0 when there is none. A
 * container limited to 2 cores of a 64-core host sees all 64 in its
 * affinity mask, and 64 threads on a 2-core quota are throttled in turn. */
static int cgroup_quota_cores(void) {
  FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");
  if (!f) return 0;
  char quota[32] = "";
  long period = 0;
  int got = fscanf(f, "%31s %ld", quota, &period);
  fclose(f);
  if (got != 2 || period <= 0 || !strcmp(quota, "max")) return 0;
  char *end;
  long q = strtol(quota, &end, 10);
  if (*end || q <= 0) return 0;
  long cores = (q + period - 1) / period;
  return cores > 0 && cores < 1 << 20 ? (int)cores : 0;
}

static int physical_cores_in_mask(void);

int wisp_pool_default_threads(void) {
  int n = physical_cores_in_mask();
  int quota = cgroup_quota_cores();
  return quota > 0 && quota < n ? quota : n;
}

static int physical_cores_in_mask(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
  }
  /* One thread per physical core: a CPU counts unless an earlier CPU of the
   * mask sits on the same core (same package and core id). Without
   * topology files every CPU counts. */
  enum { MAX_CORES = 1024 };
  long seen_core[MAX_CORES]; /* 8 KiB of stack, once */
  int n_cores = 0, n_cpus = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
    if (!CPU_ISSET(cpu, &set)) continue;
    n_cpus++;
    char path[96];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
    long core = read_sysfs_long(path);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
    long pkg = read_sysfs_long(path);
    if (core < 0 || pkg < 0) return CPU_COUNT(&set);
    long key = pkg * 65536 + core;
    int known = 0;
    for (int i = 0; i < n_cores && !known; i++) known = seen_core[i] == key;
    if (!known) {
      if (n_cores == MAX_CORES) return n_cpus;
      seen_core[n_cores++] = key;
    }
  }
  return n_cores > 0 ? n_cores : 1;
}
