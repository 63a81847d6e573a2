/* `wisp devices`: the WebGPU adapters this machine offers, with the features
 * and limits the WebGPU backend cares about. Exits 1 with a one-line error
 * when the Dawn library or any adapter is missing. */
#include <stdio.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "engine/engine.h"

int cmd_devices(int argc, char **argv) {
  const cli_spec spec = {"devices", "",
                         "Lists WebGPU adapters (Dawn, loaded from $WISP_WEBGPU_LIB or\n"
                         ".cache/webgpu/libwebgpu_wrapper.so) with their features and limits.",
                         NULL, 0, NULL, 0, NULL};
  int pr = cli_parse(&spec, argc, argv);
  if (pr != CLI_CONTINUE) return pr;
  if (wisp_backend_print_devices(stdout) != WISP_OK) return cli_error("devices");
  return 0;
}
