/* Stop strings over streamed text (stop_match.h). The held text is at most
 * the longest stop string plus one piece, so searching it whole after each
 * piece is cheap. */
#include "server/stop_match.h"

#include <stdlib.h>
#include <string.h>

void srv_stop_init(srv_stop_match *m, const char *const *stops, int n_stops) {
  memset(m, 0, sizeof *m);
  m->stops = stops;
  m->n_stops = n_stops;
}

void srv_stop_free(srv_stop_match *m) {
  free(m->held);
  memset(m, 0, sizeof *m);
}

/* The first place in s[0..n) where any stop string starts whole, or n. */
static size_t first_match(const srv_stop_match *m, const char *s, size_t n) {
  size_t best = n;
  for (int i = 0; i < m->n_stops; i++) {
    size_t k = strlen(m->stops[i]);
    for (size_t at = 0; at + k <= n && at < best; at++)
      if (!memcmp(s + at, m->stops[i], k)) { best = at; break; }
  }
  return best;
}

/* The length of the longest tail of s[0..n) that is a proper prefix of some
 * stop string: it may still become one. */
static size_t open_tail(const srv_stop_match *m, const char *s, size_t n) {
  size_t best = 0;
  for (int i = 0; i < m->n_stops; i++) {
    size_t k = strlen(m->stops[i]);
    for (size_t t = (k - 1 < n ? k - 1 : n); t > best; t--)
      if (!memcmp(s + n - t, m->stops[i], t)) { best = t; break; }
  }
  return best;
}

int srv_stop_push(srv_stop_match *m, const char *piece, size_t n, const char **out, size_t *n_out) {
  *out = "";
  *n_out = 0;
  if (m->matched) return 1;
  if (!m->n_stops) { /* nothing to hold back */
    *out = piece;
    *n_out = n;
    return 0;
  }
  if (m->n_held + n + 1 > m->cap) {
    size_t cap = (m->n_held + n + 1) * 2;
    char *b = realloc(m->held, cap);
    if (!b) return -1;
    m->held = b;
    m->cap = cap;
  }
  memcpy(m->held + m->n_held, piece, n);
  m->n_held += n;
  size_t at = first_match(m, m->held, m->n_held);
  if (at < m->n_held) {
    m->matched = 1;
    *out = m->held;
    *n_out = at;
    m->n_held = 0; /* the caller reads out before the next call; nothing more is added */
    return 1;
  }
  size_t keep = open_tail(m, m->held, m->n_held);
  size_t release = m->n_held - keep;
  /* Hand out the released front from a copy at the end of the buffer, so
   * the kept tail can move to the front now. */
  if (m->n_held + release + 1 > m->cap) {
    size_t cap = (m->n_held + release + 1) * 2;
    char *b = realloc(m->held, cap);
    if (!b) return -1;
    m->held = b;
    m->cap = cap;
  }
  memcpy(m->held + m->n_held, m->held, release);
  memmove(m->held, m->held + release, keep);
  *out = m->held + m->n_held;
  *n_out = release;
  m->n_held = keep;
  return 0;
}

void srv_stop_flush(srv_stop_match *m, const char **out, size_t *n_out) {
  *out = m->held ? m->held : "";
  *n_out = m->matched ? 0 : m->n_held;
  m->n_held = 0;
}
