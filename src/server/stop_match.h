/* Stop strings over streamed text (docs/serve.md): the reply arrives in
 * pieces (whole UTF-8, one token's worth at a time) and a stop string may
 * span pieces. The matcher holds back the shortest tail that could still be
 * the start of a stop string, releases everything before it, and on a match
 * releases the text before the stop string and reports the stop. */
#ifndef WISP_SERVER_STOP_MATCH_H
#define WISP_SERVER_STOP_MATCH_H

#include <stddef.h>

typedef struct {
  const char *const *stops; /* borrowed; non-empty strings */
  int n_stops;
  char *held;               /* text not yet released */
  size_t n_held, cap;
  int matched;              /* 1 once a stop string was found: nothing more is released */
} srv_stop_match;

void srv_stop_init(srv_stop_match *m, const char *const *stops, int n_stops);
void srv_stop_free(srv_stop_match *m);
/* Adds a piece. *out and *n_out receive the text now safe to send (valid until
 * the next call). Returns 1 when a stop string completed (the text before it
 * is in *out; the rest is dropped), 0 otherwise, -1 when out of memory. */
int srv_stop_push(srv_stop_match *m, const char *piece, size_t n, const char **out, size_t *n_out);
/* The end of the reply: whatever is still held. */
void srv_stop_flush(srv_stop_match *m, const char **out, size_t *n_out);

#endif
