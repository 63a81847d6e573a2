/* One thread-local error message per thread; see err.h. */
#include "util/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char g_msg[1024];

wisp_status wisp_fail(wisp_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_msg, sizeof g_msg, fmt, ap);
  va_end(ap);
  return code;
}

void wisp_error_prefix(const char *fmt, ...) {
  char old[sizeof g_msg];
  memcpy(old, g_msg, sizeof old);
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(g_msg, sizeof g_msg, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  size_t used = (size_t)n < sizeof g_msg ? (size_t)n : sizeof g_msg - 1;
  /* Append ": old" after the prefix, truncating the tail if needed. */
  size_t room = sizeof g_msg - used;
  if (room > 2) {
    memcpy(g_msg + used, ": ", 2);
    size_t len = strnlen(old, sizeof old - 1);
    if (len > room - 3) len = room - 3;
    memcpy(g_msg + used + 2, old, len);
    g_msg[used + 2 + len] = 0;
  }
}

const char *wisp_last_error(void) { return g_msg[0] ? g_msg : "no error"; }
