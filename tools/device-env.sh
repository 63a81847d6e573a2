# Sourced by the tools/device-*.sh scripts on the GPU machine (run from the
# repository root, with .dev, .gl and .cache/webgpu carried; see
# tools/device-bundle.sh): unpacks the Vulkan loader .debs once, then points
# wisp at the carried shared libraries, the NVIDIA Vulkan driver and the
# pinned Dawn build. A script that calls another keeps the set-up
# (WISP_DEVICE_ENV), so the .debs are unpacked once a call.
if [ -z "${WISP_DEVICE_ENV:-}" ]; then
  for f in .gl/*.deb; do dpkg -x "$f" / 2>/dev/null; done
  ldconfig 2>/dev/null
  export WISP_DEVICE_ENV=1
  echo "== .dev bundle: $(cat .dev/COMMIT 2>/dev/null || echo 'unknown (no .dev/COMMIT)')"
fi
export LD_LIBRARY_PATH=$PWD/.dev/lib VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export WISP_WEBGPU_LIB=$PWD/.cache/webgpu/libwebgpu_wrapper.so
