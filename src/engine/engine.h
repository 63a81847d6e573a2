/* Internal view of models and sessions (the public API is include/wisp.h). */
#ifndef WISP_ENGINE_H
#define WISP_ENGINE_H

#include "backend/backend.h"
#include "format/artifact.h"
#include "model/model.h"
#include "wisp.h"

struct wisp_model {
  wisp_artifact *artifact;
  const wisp_arch *arch;
  void *weights;
};

struct wisp_session {
  wisp_model *model;
  wisp_backend *backend;
  void *state;
  int pos, chunk, max_pos;
};

/* "cpu", "webgpu" or "auto" (NULL = cpu). */
wisp_status wisp_backend_create(const char *name, int threads, wisp_backend **out);
int wisp_session_context(const wisp_session *s);
const char *wisp_session_backend_name(const wisp_session *s);

#endif
