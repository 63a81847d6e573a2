/* The CPU backend's results do not depend on the thread count: every op
 * splits its work so that each output is summed by one thread in a fixed
 * order (rows of a product, heads of attention, channels of a conv, value
 * heads of a recurrence), whatever the split. So a run is reproducible
 * from its plan alone, and the splits that change with the count (query
 * heads a task, the pre-pass and the convs of a decode token spread over
 * the pool from 4 threads up) are checked here against one thread, bit for
 * bit, on the default and the integer profiles. */
#include "fixtures.h"
#include "test.h"
#include "wisp.h"

TEST(cpu_threads_lfm2_logits_do_not_depend_on_the_thread_count) {
  const char *dir = fixture_small_model();
  CHECK(dir);
  int32_t ids[44];
  for (int t = 0; t < 44; t++) ids[t] = (t * 41 + 3) % 512;
  char why[300] = "";
  CHECKF(fixture_cpu_thread_invariant(dir, ids, 40, 4, NULL, why, sizeof why), "default profile: %s", why);
  CHECKF(fixture_cpu_thread_invariant(dir, ids, 40, 4, "throughput", why, sizeof why), "throughput profile: %s", why);
}
