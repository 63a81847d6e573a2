/* The tuning table's defaults (src/backend/tuning.c), for the backends:
 * apart from tuning.h, which includes the backends' option headers, so
 * that a backend reads its defaults without an include circle. */
#ifndef WISP_BACKEND_TUNING_DEFAULTS_H
#define WISP_BACKEND_TUNING_DEFAULTS_H

#include <stdint.h>

struct wisp_wgpu_backend_opts; /* backend/webgpu/wgpu_options.h */
struct wisp_tuning;             /* backend/tuning.h */

/* Every key with a default number whose field in *o is 0 and was not given
 * (o->given) gets it. A backend fills its options with this; it holds no
 * default numbers of its own. */
void wisp_tuning_fill_defaults(struct wisp_wgpu_backend_opts *o);
/* out[0..5) = the table's default for key (0s: none, or no such key). */
void wisp_tuning_default_of(const char *key, uint32_t out[5]);
/* 1 when the session's tuning string gave key (o->given), else 0. */
int wisp_tuning_given(const struct wisp_wgpu_backend_opts *o, const char *key);

/* A backend's part of a session's tuning (wisp_backend_settings.tuning),
 * read at configure: the webgpu keys (defaults not yet filled), and
 * cpuScalar. */
const struct wisp_wgpu_backend_opts *wisp_tuning_webgpu(const struct wisp_tuning *t);
int wisp_tuning_cpu_scalar(const struct wisp_tuning *t);

#endif
