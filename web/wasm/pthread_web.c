/* The page runs wisp on one thread (Debian's wasi-libc has no threads). Its
 * pthread.h declares the functions; these are their one-thread meanings:
 * creating a thread fails (EAGAIN), so every user of threads - the CPU
 * thread pool, the digest check, the scheduler - takes its fallback and does
 * the work on the calling thread; a mutex is always free; a condition wait,
 * with no other thread to signal it, would never end and reports EDEADLK. */
#include <errno.h>
#include <pthread.h>

int pthread_create(pthread_t *restrict t, const pthread_attr_t *restrict a, void *(*fn)(void *), void *restrict arg) {
  (void)t; (void)a; (void)fn; (void)arg;
  return EAGAIN;
}
int pthread_join(pthread_t t, void **ret) {
  (void)t; (void)ret;
  return ESRCH;
}
int pthread_mutex_init(pthread_mutex_t *restrict m, const pthread_mutexattr_t *restrict a) {
  (void)m; (void)a;
  return 0;
}
int pthread_mutex_destroy(pthread_mutex_t *m) { (void)m; return 0; }
int pthread_mutex_lock(pthread_mutex_t *m) { (void)m; return 0; }
int pthread_mutex_unlock(pthread_mutex_t *m) { (void)m; return 0; }
int pthread_cond_init(pthread_cond_t *restrict c, const pthread_condattr_t *restrict a) {
  (void)c; (void)a;
  return 0;
}
int pthread_cond_destroy(pthread_cond_t *c) { (void)c; return 0; }
int pthread_cond_signal(pthread_cond_t *c) { (void)c; return 0; }
int pthread_cond_broadcast(pthread_cond_t *c) { (void)c; return 0; }
int pthread_cond_wait(pthread_cond_t *restrict c, pthread_mutex_t *restrict m) {
  (void)c; (void)m;
  return EDEADLK;
}
