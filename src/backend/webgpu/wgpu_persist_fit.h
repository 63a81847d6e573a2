/* What the persistent decode (wgpu_persist.c) can run: a decode graph
 * (backend.h) checked against persist.wgsl's phases, shapes and weight
 * types, and the sizes and override constants derived from it. */
#ifndef WISP_WGPU_PERSIST_FIT_H
#define WISP_WGPU_PERSIST_FIT_H

#include <stdint.h>

#include "backend/backend.h"

#define PERSIST_WG 256
#define LAYER_WORDS 32 /* persist.wgsl's layer table */
#define MAX_PHASES 644 /* persist.wgsl's MAXPH4 vec4s of phase words */
#define DN_CW 16       /* persist.wgsl's CW: value columns of a DeltaNet task */

/* The phases' works, stages and flags: bit 1 << kind each, the flags as
 * they are (the kernel's WORKS, STAGES, FLAGS). */
uint32_t persist_works(const wisp_decode_graph *g);
uint32_t persist_stages(const wisp_decode_graph *g);
uint32_t persist_flags(const wisp_decode_graph *g);
/* A kernel flag beside the phase flags (which fit in a byte): some layer has
 * a sliding window; without it the kernel reads no window (persist.wgsl's
 * KF_WINDOW, and no barrier for it). */
#define PERSIST_KFLAG_WINDOW (1u << 8)
/* 1: the units-split product engine (persist_products.wgsli's SPLIT). */
int persist_split(wisp_backend *be, const wisp_decode_graph *g);
/* A layer's input product rows and output product columns. */
int persist_in_rows(const wisp_decode_graph *g, const wisp_graph_layer *L);
int persist_out_cols(const wisp_decode_graph *g, const wisp_graph_layer *L);
/* The staged input's vec4s (the kernel's XS4). */
uint32_t persist_stage_xs4(const wisp_decode_graph *g);
/* 1 when persist.wgsl can run graph g; else 0 and *why (for WISP_VERBOSE). */
int persist_graph_fits(wisp_backend *be, const wisp_decode_graph *g, const char **why);

#endif
