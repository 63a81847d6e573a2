/* The library's version and the option structs' init functions
 * (include/wisp.h, "Option structs grow"; the library reads the structs
 * through util/options.h). */
#include <string.h>

#include "wisp.h"

const char *wisp_version(void) { return WISP_VERSION; }

/* Every field's default is zero; the init functions say so once per struct
 * and set the size that marks the struct as this header's. */
#define DEFINE_INIT(T, name)                                                                                           \
  void name(T *o) {                                                                                                    \
    if (!o) return;                                                                                                    \
    memset(o, 0, sizeof *o);                                                                                           \
    o->size = sizeof *o;                                                                                               \
  }

DEFINE_INIT(wisp_session_options, wisp_session_options_init)
DEFINE_INIT(wisp_generate_options, wisp_generate_options_init)
DEFINE_INIT(wisp_text_options, wisp_text_options_init)
DEFINE_INIT(wisp_step_options, wisp_step_options_init)
DEFINE_INIT(wisp_sched_options, wisp_sched_options_init)
DEFINE_INIT(wisp_sched_request, wisp_sched_request_init)
