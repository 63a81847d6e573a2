/* The parity comparison of test_parity.c (the rule of tests/parity/compare.py),
 * shared with test_parity_qwen.c. */
#ifndef WISP_TEST_PARITY_COMPARE_H
#define WISP_TEST_PARITY_COMPARE_H

#include <stddef.h>

/* 1 when every prompt's max|diff| <= tol * max|ref| and the greedy tokens are
 * identical; otherwise 0 with one summary per problem in msg. */
int parity_compare_files(const char *ref_path, const char *got_path, double tol, char *msg, size_t cap);
/* Length of REF.json's greedy array, -1 when unreadable. */
int parity_greedy_len(const char *ref_path);

#endif
