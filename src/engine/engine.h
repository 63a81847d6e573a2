/* The engine's internal API for code above it (src/api, src/cli, tests):
 * the structs behind wisp.h's models and sessions and every engine call
 * that include/wisp.h does not make public. Files inside src/engine include
 * the one header they need instead (the layer test, tests/test_layers.c,
 * keeps them from including this one). */
#ifndef WISP_ENGINE_H
#define WISP_ENGINE_H

#include "engine/decode_loop.h"
#include "engine/internal.h"
#include "engine/plan_apply.h"
#include "engine/sequence.h"
#include "engine/session.h"
#include "engine/slots.h"

#endif
