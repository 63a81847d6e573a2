/* The engine's internal API for code above it (src/api, src/cli, tests):
 * the structs behind wisp.h's models and sessions, every engine call that
 * include/wisp.h does not make public, and the backends by name
 * (backend/factory.h: the CLI includes no backend header itself). Files inside src/engine include
 * the one header they need instead (the layer test, tests/test_layers.c,
 * keeps them from including this one). */
#ifndef WISP_ENGINE_H
#define WISP_ENGINE_H

#include "backend/factory.h"
#include "engine/decode_loop.h"
#include "engine/internal.h"
#include "engine/plan_apply.h"
#include "engine/sequence.h"
#include "engine/session.h"
#include "engine/slots.h"

#endif
