/* A session's slots (slots.c; the public calls are in include/wisp.h). */
#ifndef WISP_ENGINE_SLOTS_H
#define WISP_ENGINE_SLOTS_H

#include "engine/internal.h"

/* The session's slots (slot 0's state is s->state): made with the session,
 * freed with it (before its state and backend). */
wisp_status wisp_slots_new(wisp_session *s, int n);
void wisp_slots_free(wisp_session *s);

#endif
