/* Where a writer may write, and how it puts a file in place (issue 31):
 *   - a file is written as PATH.tmp-PID beside its target, created afresh
 *     (O_EXCL, never through a symbolic link), synced, and renamed over the
 *     target only when the target is absent or a regular file: never over a
 *     device (/dev/null, /dev/full), a FIFO, a socket, a directory or a
 *     symbolic link, whoever runs wisp (root included);
 *   - one writer at a time per target: PATH.wisp-lock, created with O_EXCL,
 *     holds the writer's pid; a second writer is refused with one line
 *     naming it (a lock whose process is gone is taken over).
 * Artifact directories follow the same rule through format/writer.h. */
#ifndef WISP_UTIL_TARGET_H
#define WISP_UTIL_TARGET_H

#include <stddef.h>

#include "wisp.h"

/* The lock's path for a target: PATH.wisp-lock. */
void wisp_target_lock_path(const char *path, char *out, size_t cap);
/* Takes the target's lock (see above). WISP_OK, or WISP_EBUSY naming the
 * process that holds it, or WISP_EIO. */
wisp_status wisp_target_lock(const char *path);
/* Removes the lock wisp_target_lock made (only if it is still this
 * process's). */
void wisp_target_unlock(const char *path);
/* Whether a file writer may replace what is at `path`: WISP_OK when nothing
 * is there, or a regular file (empty, or any with `force`). A symbolic link,
 * a directory, a device, FIFO or socket is refused whatever `force` says. */
wisp_status wisp_target_check_file(const char *path, int force);
/* Creates PATH.tmp-PID for writing (O_CREAT | O_EXCL | O_NOFOLLOW, 0644,
 * after removing a leftover of this pid); its name into tmp. */
wisp_status wisp_target_create_temp(const char *path, char *tmp, size_t cap, int *fd);
/* Renames the finished temporary over path, checking just before that path
 * is absent or a regular file (else the temporary is removed and the error
 * says why). */
wisp_status wisp_target_replace(const char *tmp, const char *path);

#endif
