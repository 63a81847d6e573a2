#include "test.h"
#include "util/err.h"

TEST(err_message_and_prefix) {
  CHECK(wisp_fail(WISP_EFORMAT, "bad field '%s'", "hidden") == WISP_EFORMAT);
  CHECK(strcmp(wisp_last_error(), "bad field 'hidden'") == 0);
  wisp_error_prefix("%s", "manifest.json");
  CHECK(strcmp(wisp_last_error(), "manifest.json: bad field 'hidden'") == 0);
}
