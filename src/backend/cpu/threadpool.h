/* A fixed pool of worker threads for data-parallel loops: the calling
 * thread takes part too, so a pool of n threads starts n-1 workers. */
#ifndef WISP_THREADPOOL_H
#define WISP_THREADPOOL_H

typedef struct wisp_pool wisp_pool;
/* fn is called for every task index in [0, n_tasks), spread over threads;
 * `thread` is the caller's thread number in [0, wisp_pool_size). */
typedef void (*wisp_task_fn)(void *ctx, int task, int thread);

wisp_pool *wisp_pool_new(int n_threads);
void wisp_pool_free(wisp_pool *p);
int wisp_pool_size(const wisp_pool *p);
void wisp_pool_run(wisp_pool *p, int n_tasks, wisp_task_fn fn, void *ctx);

#endif
