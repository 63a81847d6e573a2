/* Monotonic wall clock for timings (benchmarks, decode-loop split). */
#ifndef WISP_UTIL_CLOCK_H
#define WISP_UTIL_CLOCK_H

/* Seconds on CLOCK_MONOTONIC: only differences mean anything. */
double wisp_now_s(void);

#endif
