/* The decode loop (decode_loop.c; wisp_session_generate is in include/wisp.h). */
#ifndef WISP_ENGINE_DECODE_LOOP_H
#define WISP_ENGINE_DECODE_LOOP_H

#include "engine/internal.h"

/* Frees the decode loop's state snapshots. */
void wisp_decode_loop_free(wisp_session *s);

#endif
