/* Two functions wasi-libc declares but does not define (posix_web.h). */
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

/* No signals in the page: no mask to swap while waiting. */
int ppoll(struct pollfd *p, nfds_t n, const struct timespec *t, const sigset_t *mask) {
  (void)mask;
  return poll(p, n, t ? (int)(t->tv_sec * 1000 + t->tv_nsec / 1000000) : -1);
}

/* No setuid in the page: the environment is the page's own. */
char *secure_getenv(const char *name) { return getenv(name); }
