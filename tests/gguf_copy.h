/* Tests that rewrite a GGUF (other tensor types, another tensor order)
 * copy its metadata with this. */
#ifndef WISP_TEST_GGUF_COPY_H
#define WISP_TEST_GGUF_COPY_H

#include "format/gguf.h"

/* The metadata entry kv into w, every type an export writes. 0: a type
 * this copy does not know. */
int gguf_copy_kv(wisp_gguf_writer *w, const wisp_gguf_kv *kv);

#endif
