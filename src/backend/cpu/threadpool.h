/* A fixed pool of worker threads for data-parallel loops: the calling
 * thread takes part too, so a pool of n threads starts n-1 workers. */
#ifndef WISP_THREADPOOL_H
#define WISP_THREADPOOL_H

typedef struct wisp_pool wisp_pool;
/* fn is called for every task index in [0, n_tasks), spread over threads;
 * `thread` is the caller's thread number in [0, wisp_pool_size). */
typedef void (*wisp_task_fn)(void *ctx, int task, int thread);

wisp_pool *wisp_pool_new(int n_threads);
/* The thread count a pool gets when the user names none: the physical cores
 * this process may run on (its affinity mask, one thread per core, not per
 * SMT sibling, which share a core's vector units), at most its cgroup's CPU
 * quota in whole cores. */
int wisp_pool_default_threads(void);
void wisp_pool_free(wisp_pool *p);
int wisp_pool_size(const wisp_pool *p);
void wisp_pool_run(wisp_pool *p, int n_tasks, wisp_task_fn fn, void *ctx);

/* How a pool spreads jobs. AUTO (the default): over all its threads while
 * that pays, on the caller alone while it does not (a crowded machine).
 * SHARED and SOLO fix the mode, so tests can drive each path without
 * depending on the machine's load. */
enum { WISP_POOL_AUTO, WISP_POOL_SHARED, WISP_POOL_SOLO };
void wisp_pool_pin(wisp_pool *p, int mode);

#endif
