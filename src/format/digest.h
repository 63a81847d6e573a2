/* The check every model open makes of weights.bin against the digests its
 * writer recorded (runtime.sections[i].sha256), so that a damaged or
 * changed file is refused by `run` and `info`, not only by `wisp verify`.
 *
 * Cost: sha256 runs at about 1.8 GB/s on one core with the SHA extensions
 * (x86 SHA-NI, ARMv8 crypto), 0.4-0.6 GB/s without; the sections are
 * hashed in parallel on up to 16 threads, so a 1 GB artifact takes about
 * 0.1 s on 8 cores. That is one read of the file, which the first token
 * makes anyway (the CPU backend's mapped weights, WebGPU's upload): after
 * the check the pages are in the page cache. */
#ifndef WISP_FORMAT_DIGEST_H
#define WISP_FORMAT_DIGEST_H

#include "format/artifact.h"

/* WISP_OK when every section that has a sha256 in the manifest hashes to it
 * (a section without one, as in an artifact written before digests were
 * recorded, is not checked); else WISP_EHASH naming the first section
 * that differs, in one line. */
wisp_status wisp_artifact_check_digests(const wisp_artifact *a);

#endif
