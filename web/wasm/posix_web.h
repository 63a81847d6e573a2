/* What the browser build's C library (wasi-libc) leaves out of POSIX and
 * wisp's sources use, for single-threaded code without signals or processes.
 * Force-included into every file of `make wasm` (-include), so the sources
 * stay those of the native build:
 *   - signals: a page cannot be interrupted, so masks and handlers are
 *     accepted and never fire;
 *   - CPU affinity: unknown, so the pool sizes itself from sysconf (1);
 *   - user and group ids: the one user of the page (0), which owns every file;
 *   - renameat2: plain renameat (nothing else writes the page's files);
 *   - kill: there is one process, so every other one is gone (ESRCH);
 *   - ppoll and secure_getenv, which the C library declares but lacks, are
 *     defined in posix_web.c. */
#ifndef WISP_POSIX_WEB_H
#define WISP_POSIX_WEB_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#define SIG_BLOCK 0
#define SIG_UNBLOCK 1
#define SIG_SETMASK 2
#define RENAME_NOREPLACE 1u

struct sigaction {
  void (*sa_handler)(int);
  sigset_t sa_mask;
  int sa_flags;
};
static inline int sigemptyset(sigset_t *s) { memset(s, 0, sizeof *s); return 0; }
static inline int sigaddset(sigset_t *s, int sig) { (void)s; (void)sig; return 0; }
static inline int sigprocmask(int how, const sigset_t *set, sigset_t *old) {
  (void)how; (void)set;
  if (old) memset(old, 0, sizeof *old);
  return 0;
}
static inline int sigaction(int sig, const struct sigaction *sa, struct sigaction *old) {
  (void)sig; (void)sa;
  if (old) memset(old, 0, sizeof *old);
  return 0;
}

typedef struct cpu_set_t { unsigned long bits[4]; } cpu_set_t;
#define CPU_SETSIZE 128
#define CPU_ISSET(i, s) (((s)->bits[(i) / 32] >> ((i) % 32)) & 1ul)
#define CPU_COUNT(s) 1
static inline int sched_getaffinity(pid_t pid, size_t n, cpu_set_t *s) {
  (void)pid; (void)n; (void)s;
  errno = ENOSYS;
  return -1;
}

static inline uid_t geteuid(void) { return 0; }
static inline gid_t getegid(void) { return 0; }

static inline int renameat2(int from_dir, const char *from, int to_dir, const char *to, unsigned flags) {
  (void)flags;
  return renameat(from_dir, from, to_dir, to);
}

static inline int kill(pid_t pid, int sig) {
  (void)pid; (void)sig;
  errno = ESRCH;
  return -1;
}

#endif
