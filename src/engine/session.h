/* Models and sessions (session.c): what the engine says about a session
 * beyond include/wisp.h. */
#ifndef WISP_ENGINE_SESSION_H
#define WISP_ENGINE_SESSION_H

#include "engine/internal.h"

int wisp_session_context(const wisp_session *s);
const wisp_plan *wisp_session_plan(const wisp_session *s);
/* The KV caches' element type as the backend keeps them: "f16" (the plan's
 * kvDtype f16, or tuning kv=f16) or "f32". */
const char *wisp_session_kv_dtype(const wisp_session *s);
const char *wisp_session_backend_name(const wisp_session *s);

#endif
