/* Error reporting, SQLite style: a call that fails returns a non-zero
 * wisp_status and leaves a one-line, human-readable message here.
 * The message names what was wrong (file, field, value). Thread-local. */
#ifndef WISP_ERR_H
#define WISP_ERR_H

#include "wisp.h"

/* Sets the message (printf format) and returns `code` so callers can write
 * `return wisp_fail(WISP_EFORMAT, "...")`. */
wisp_status wisp_fail(wisp_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prefixes the current message with "ctx: ". */
void wisp_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
