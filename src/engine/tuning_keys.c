/* The --tuning keys a user may give, for the CLI's help: the engine's door
 * to the backend's tuning table (the CLI includes no backend header). A
 * file of its own so that the option parser links without a session (the
 * fuzz harness of the CLI options links this and backend/tuning.c only). */
#include <stddef.h>

#include "backend/tuning.h"
#include "engine/session.h"

void wisp_session_tuning_keys(char *out, size_t cap) { wisp_tuning_list(out, cap); }
