/* wisp's own declarations of the part of webgpu.h (the WebGPU C API) that wisp
 * uses, written for the Dawn build wisp pins (npm bun-webgpu-linux-x64@0.1.7,
 * libwebgpu_wrapper.so). The package ships no header, so this file is the ABI
 * contract: struct layouts follow the standard webgpu.h of 2025, and the enum
 * values are those of THIS Dawn build, which differ from the current
 * webgpu-headers repository in places (WGPUFeatureName above all).
 *
 * Nothing here is linked: wgpu_loader.c dlopens the library and fills a table
 * of function pointers (wisp_wgpu_api, below). tests/test_webgpu_abi.c checks
 * the parts of this contract that a mismatch would break (feature values,
 * sType of the WGSL source, limits and adapter-info layout, callbacks).
 *
 * Declare only what wisp calls; add a function to WISP_WGPU_FUNCS and it is
 * loaded (and a missing symbol reported) automatically. */
#ifndef WISP_WGPU_API_H
#define WISP_WGPU_API_H

#include <stddef.h>
#include <stdint.h>

/* ---- basic types ------------------------------------------------------- */
typedef uint32_t WGPUBool;
typedef uint64_t WGPUFlags;

typedef struct WGPUInstanceImpl *WGPUInstance;
typedef struct WGPUAdapterImpl *WGPUAdapter;
typedef struct WGPUDeviceImpl *WGPUDevice;
typedef struct WGPUQueueImpl *WGPUQueue;
typedef struct WGPUBufferImpl *WGPUBuffer;
typedef struct WGPUShaderModuleImpl *WGPUShaderModule;
typedef struct WGPUComputePipelineImpl *WGPUComputePipeline;
typedef struct WGPUPipelineLayoutImpl *WGPUPipelineLayout;
typedef struct WGPUBindGroupLayoutImpl *WGPUBindGroupLayout;
typedef struct WGPUBindGroupImpl *WGPUBindGroup;
typedef struct WGPUCommandEncoderImpl *WGPUCommandEncoder;
typedef struct WGPUCommandBufferImpl *WGPUCommandBuffer;
typedef struct WGPUComputePassEncoderImpl *WGPUComputePassEncoder;
typedef struct WGPUQuerySetImpl *WGPUQuerySet;
typedef struct WGPUSurfaceImpl *WGPUSurface;
typedef struct WGPUSamplerImpl *WGPUSampler;
typedef struct WGPUTextureViewImpl *WGPUTextureView;

/* A string that is not necessarily NUL-terminated. {NULL, WGPU_STRLEN} is the
 * "null" string; {p, WGPU_STRLEN} means p is NUL-terminated. */
typedef struct WGPUStringView {
  const char *data;
  size_t length;
} WGPUStringView;
#define WGPU_STRLEN SIZE_MAX
#define WGPU_WHOLE_SIZE UINT64_MAX
#define WGPU_WHOLE_MAP_SIZE SIZE_MAX

/* ---- enums (values of this Dawn build) --------------------------------- */
typedef enum WGPUSType {
  WGPUSType_ShaderSourceSPIRV = 0x00000001,
  WGPUSType_ShaderSourceWGSL = 0x00000002,
  WGPUSType_DawnTogglesDescriptor = 0x0005000A,
  WGPUSType_Force32 = 0x7FFFFFFF
} WGPUSType;

/* The trap: this build numbers features in Dawn's older order, not that of
 * the current webgpu-headers (where ShaderF16 = 0x0B, Subgroups = 0x12,
 * TimestampQuery = 0x09). TimestampQuery, ShaderF16 and Subgroups are
 * verified by tests (shader-f16 / subgroups: a WGSL `enable` compiles only
 * on a device created with that value; timestamp-query: a timestamp query set
 * can be created). The others follow the same ordering and are only used to
 * print names. */
typedef enum WGPUFeatureName {
  WGPUFeatureName_DepthClipControl = 0x01,
  WGPUFeatureName_Depth32FloatStencil8 = 0x02,
  WGPUFeatureName_TimestampQuery = 0x03,
  WGPUFeatureName_TextureCompressionBC = 0x04,
  WGPUFeatureName_TextureCompressionBCSliced3D = 0x05,
  WGPUFeatureName_TextureCompressionETC2 = 0x06,
  WGPUFeatureName_TextureCompressionASTC = 0x07,
  WGPUFeatureName_TextureCompressionASTCSliced3D = 0x08,
  WGPUFeatureName_IndirectFirstInstance = 0x09,
  WGPUFeatureName_ShaderF16 = 0x0A,
  WGPUFeatureName_RG11B10UfloatRenderable = 0x0B,
  WGPUFeatureName_BGRA8UnormStorage = 0x0C,
  WGPUFeatureName_Float32Filterable = 0x0D,
  WGPUFeatureName_Float32Blendable = 0x0E,
  WGPUFeatureName_ClipDistances = 0x0F,
  WGPUFeatureName_DualSourceBlending = 0x10,
  WGPUFeatureName_Subgroups = 0x11,
  WGPUFeatureName_CoreFeaturesAndLimits = 0x12,
  WGPUFeatureName_Force32 = 0x7FFFFFFF
} WGPUFeatureName;

typedef enum WGPUCallbackMode {
  WGPUCallbackMode_WaitAnyOnly = 0x01,
  WGPUCallbackMode_AllowProcessEvents = 0x02,
  WGPUCallbackMode_AllowSpontaneous = 0x03,
  WGPUCallbackMode_Force32 = 0x7FFFFFFF
} WGPUCallbackMode;

typedef enum WGPUPowerPreference {
  WGPUPowerPreference_Undefined = 0x00,
  WGPUPowerPreference_LowPower = 0x01,
  WGPUPowerPreference_HighPerformance = 0x02,
  WGPUPowerPreference_Force32 = 0x7FFFFFFF
} WGPUPowerPreference;

typedef enum WGPUFeatureLevel {
  WGPUFeatureLevel_Undefined = 0x00,
  WGPUFeatureLevel_Compatibility = 0x01,
  WGPUFeatureLevel_Core = 0x02,
  WGPUFeatureLevel_Force32 = 0x7FFFFFFF
} WGPUFeatureLevel;

typedef enum WGPUBackendType {
  WGPUBackendType_Undefined = 0x00,
  WGPUBackendType_Null = 0x01,
  WGPUBackendType_WebGPU = 0x02,
  WGPUBackendType_D3D11 = 0x03,
  WGPUBackendType_D3D12 = 0x04,
  WGPUBackendType_Metal = 0x05,
  WGPUBackendType_Vulkan = 0x06,
  WGPUBackendType_OpenGL = 0x07,
  WGPUBackendType_OpenGLES = 0x08,
  WGPUBackendType_Force32 = 0x7FFFFFFF
} WGPUBackendType;

typedef enum WGPUAdapterType {
  WGPUAdapterType_DiscreteGPU = 0x01,
  WGPUAdapterType_IntegratedGPU = 0x02,
  WGPUAdapterType_CPU = 0x03,
  WGPUAdapterType_Unknown = 0x04,
  WGPUAdapterType_Force32 = 0x7FFFFFFF
} WGPUAdapterType;

typedef enum WGPUStatus {
  WGPUStatus_Success = 0x01,
  WGPUStatus_Error = 0x02,
  WGPUStatus_Force32 = 0x7FFFFFFF
} WGPUStatus;

typedef enum WGPURequestAdapterStatus {
  WGPURequestAdapterStatus_Success = 0x01,
  WGPURequestAdapterStatus_CallbackCancelled = 0x02,
  WGPURequestAdapterStatus_Unavailable = 0x03,
  WGPURequestAdapterStatus_Error = 0x04,
  WGPURequestAdapterStatus_Force32 = 0x7FFFFFFF
} WGPURequestAdapterStatus;

typedef enum WGPURequestDeviceStatus {
  WGPURequestDeviceStatus_Success = 0x01,
  WGPURequestDeviceStatus_CallbackCancelled = 0x02,
  WGPURequestDeviceStatus_Error = 0x03,
  WGPURequestDeviceStatus_Force32 = 0x7FFFFFFF
} WGPURequestDeviceStatus;

typedef enum WGPUMapAsyncStatus {
  WGPUMapAsyncStatus_Success = 0x01,
  WGPUMapAsyncStatus_CallbackCancelled = 0x02,
  WGPUMapAsyncStatus_Error = 0x03,
  WGPUMapAsyncStatus_Aborted = 0x04,
  WGPUMapAsyncStatus_Force32 = 0x7FFFFFFF
} WGPUMapAsyncStatus;

typedef enum WGPUPopErrorScopeStatus {
  WGPUPopErrorScopeStatus_Success = 0x01,
  WGPUPopErrorScopeStatus_CallbackCancelled = 0x02,
  WGPUPopErrorScopeStatus_Error = 0x03,
  WGPUPopErrorScopeStatus_Force32 = 0x7FFFFFFF
} WGPUPopErrorScopeStatus;

typedef enum WGPUDeviceLostReason {
  WGPUDeviceLostReason_Unknown = 0x01,
  WGPUDeviceLostReason_Destroyed = 0x02,
  WGPUDeviceLostReason_CallbackCancelled = 0x03,
  WGPUDeviceLostReason_FailedCreation = 0x04,
  WGPUDeviceLostReason_Force32 = 0x7FFFFFFF
} WGPUDeviceLostReason;

typedef enum WGPUErrorType {
  WGPUErrorType_NoError = 0x01,
  WGPUErrorType_Validation = 0x02,
  WGPUErrorType_OutOfMemory = 0x03,
  WGPUErrorType_Internal = 0x04,
  WGPUErrorType_Unknown = 0x05,
  WGPUErrorType_Force32 = 0x7FFFFFFF
} WGPUErrorType;

typedef enum WGPUErrorFilter {
  WGPUErrorFilter_Validation = 0x01,
  WGPUErrorFilter_OutOfMemory = 0x02,
  WGPUErrorFilter_Internal = 0x03,
  WGPUErrorFilter_Force32 = 0x7FFFFFFF
} WGPUErrorFilter;

typedef enum WGPUQueryType {
  WGPUQueryType_Occlusion = 0x01,
  WGPUQueryType_Timestamp = 0x02,
  WGPUQueryType_Force32 = 0x7FFFFFFF
} WGPUQueryType;

typedef WGPUFlags WGPUBufferUsage;
#define WGPUBufferUsage_None ((WGPUBufferUsage)0x0)
#define WGPUBufferUsage_MapRead ((WGPUBufferUsage)0x1)
#define WGPUBufferUsage_MapWrite ((WGPUBufferUsage)0x2)
#define WGPUBufferUsage_CopySrc ((WGPUBufferUsage)0x4)
#define WGPUBufferUsage_CopyDst ((WGPUBufferUsage)0x8)
#define WGPUBufferUsage_Uniform ((WGPUBufferUsage)0x40)
#define WGPUBufferUsage_Storage ((WGPUBufferUsage)0x80)
#define WGPUBufferUsage_QueryResolve ((WGPUBufferUsage)0x200)

typedef WGPUFlags WGPUMapMode;
#define WGPUMapMode_Read ((WGPUMapMode)0x1)
#define WGPUMapMode_Write ((WGPUMapMode)0x2)

/* ---- chained structs, futures, callbacks ------------------------------- */
typedef struct WGPUChainedStruct {
  struct WGPUChainedStruct *next;
  WGPUSType sType;
} WGPUChainedStruct;

typedef struct WGPUFuture {
  uint64_t id;
} WGPUFuture;

typedef void (*WGPURequestAdapterCallback)(WGPURequestAdapterStatus status, WGPUAdapter adapter,
                                           WGPUStringView message, void *userdata1, void *userdata2);
typedef struct WGPURequestAdapterCallbackInfo {
  WGPUChainedStruct *nextInChain;
  WGPUCallbackMode mode;
  WGPURequestAdapterCallback callback;
  void *userdata1;
  void *userdata2;
} WGPURequestAdapterCallbackInfo;

typedef void (*WGPURequestDeviceCallback)(WGPURequestDeviceStatus status, WGPUDevice device,
                                          WGPUStringView message, void *userdata1, void *userdata2);
typedef struct WGPURequestDeviceCallbackInfo {
  WGPUChainedStruct *nextInChain;
  WGPUCallbackMode mode;
  WGPURequestDeviceCallback callback;
  void *userdata1;
  void *userdata2;
} WGPURequestDeviceCallbackInfo;

typedef void (*WGPUDeviceLostCallback)(const WGPUDevice *device, WGPUDeviceLostReason reason,
                                       WGPUStringView message, void *userdata1, void *userdata2);
typedef struct WGPUDeviceLostCallbackInfo {
  WGPUChainedStruct *nextInChain;
  WGPUCallbackMode mode;
  WGPUDeviceLostCallback callback;
  void *userdata1;
  void *userdata2;
} WGPUDeviceLostCallbackInfo;

typedef void (*WGPUUncapturedErrorCallback)(const WGPUDevice *device, WGPUErrorType type,
                                            WGPUStringView message, void *userdata1, void *userdata2);
typedef struct WGPUUncapturedErrorCallbackInfo {
  WGPUChainedStruct *nextInChain;
  WGPUUncapturedErrorCallback callback;
  void *userdata1;
  void *userdata2;
} WGPUUncapturedErrorCallbackInfo;

typedef void (*WGPUBufferMapCallback)(WGPUMapAsyncStatus status, WGPUStringView message,
                                      void *userdata1, void *userdata2);
typedef struct WGPUBufferMapCallbackInfo {
  WGPUChainedStruct *nextInChain;
  WGPUCallbackMode mode;
  WGPUBufferMapCallback callback;
  void *userdata1;
  void *userdata2;
} WGPUBufferMapCallbackInfo;

typedef void (*WGPUPopErrorScopeCallback)(WGPUPopErrorScopeStatus status, WGPUErrorType type,
                                          WGPUStringView message, void *userdata1, void *userdata2);
typedef struct WGPUPopErrorScopeCallbackInfo {
  WGPUChainedStruct *nextInChain;
  WGPUCallbackMode mode;
  WGPUPopErrorScopeCallback callback;
  void *userdata1;
  void *userdata2;
} WGPUPopErrorScopeCallbackInfo;

/* ---- instance, adapter, device ----------------------------------------- */
/* This build still has the 2025 "instance capabilities" form (it exports
 * wgpuGetInstanceCapabilities, not wgpuGetInstanceFeatures). wisp passes a
 * NULL descriptor and waits by polling wgpuInstanceProcessEvents, so it
 * depends on neither form; the struct only types wgpuCreateInstance. */
typedef struct WGPUInstanceCapabilities {
  WGPUChainedStruct *nextInChain;
  WGPUBool timedWaitAnyEnable;
  size_t timedWaitAnyMaxCount;
} WGPUInstanceCapabilities;

typedef struct WGPUInstanceDescriptor {
  WGPUChainedStruct *nextInChain;
  WGPUInstanceCapabilities capabilities;
} WGPUInstanceDescriptor;

typedef struct WGPURequestAdapterOptions {
  WGPUChainedStruct *nextInChain;
  WGPUFeatureLevel featureLevel;
  WGPUPowerPreference powerPreference;
  WGPUBool forceFallbackAdapter;
  WGPUBackendType backendType;
  WGPUSurface compatibleSurface;
} WGPURequestAdapterOptions;

typedef struct WGPUAdapterInfo {
  WGPUChainedStruct *nextInChain;
  WGPUStringView vendor;
  WGPUStringView architecture;
  WGPUStringView device;
  WGPUStringView description;
  WGPUBackendType backendType;
  WGPUAdapterType adapterType;
  uint32_t vendorID;
  uint32_t deviceID;
  uint32_t subgroupMinSize;
  uint32_t subgroupMaxSize;
} WGPUAdapterInfo;

/* Only the leading fields wisp reads are declared; Dawn's struct continues
 * (vertex/compat/immediate limits). Callers embed it in a larger, zeroed
 * buffer (wisp_wgpu_limits_buf) so Dawn may write past the declared end. */
typedef struct WGPULimits {
  WGPUChainedStruct *nextInChain;
  uint32_t maxTextureDimension1D;
  uint32_t maxTextureDimension2D;
  uint32_t maxTextureDimension3D;
  uint32_t maxTextureArrayLayers;
  uint32_t maxBindGroups;
  uint32_t maxBindGroupsPlusVertexBuffers;
  uint32_t maxBindingsPerBindGroup;
  uint32_t maxDynamicUniformBuffersPerPipelineLayout;
  uint32_t maxDynamicStorageBuffersPerPipelineLayout;
  uint32_t maxSampledTexturesPerShaderStage;
  uint32_t maxSamplersPerShaderStage;
  uint32_t maxStorageBuffersPerShaderStage;
  uint32_t maxStorageTexturesPerShaderStage;
  uint32_t maxUniformBuffersPerShaderStage;
  uint64_t maxUniformBufferBindingSize;
  uint64_t maxStorageBufferBindingSize;
  uint32_t minUniformBufferOffsetAlignment;
  uint32_t minStorageBufferOffsetAlignment;
  uint32_t maxVertexBuffers;
  uint64_t maxBufferSize;
  uint32_t maxVertexAttributes;
  uint32_t maxVertexBufferArrayStride;
  uint32_t maxInterStageShaderVariables;
  uint32_t maxColorAttachments;
  uint32_t maxColorAttachmentBytesPerSample;
  uint32_t maxComputeWorkgroupStorageSize;
  uint32_t maxComputeInvocationsPerWorkgroup;
  uint32_t maxComputeWorkgroupSizeX;
  uint32_t maxComputeWorkgroupSizeY;
  uint32_t maxComputeWorkgroupSizeZ;
  uint32_t maxComputeWorkgroupsPerDimension;
} WGPULimits;

/* WGPULimits with room for the fields this header does not declare. */
typedef union wisp_wgpu_limits_buf {
  WGPULimits l;
  unsigned char room[1024];
} wisp_wgpu_limits_buf;

typedef struct WGPUSupportedFeatures {
  size_t featureCount;
  const WGPUFeatureName *features;
} WGPUSupportedFeatures;

typedef struct WGPUQueueDescriptor {
  WGPUChainedStruct *nextInChain;
  WGPUStringView label;
} WGPUQueueDescriptor;

typedef struct WGPUDeviceDescriptor {
  WGPUChainedStruct *nextInChain;
  WGPUStringView label;
  size_t requiredFeatureCount;
  const WGPUFeatureName *requiredFeatures;
  const WGPULimits *requiredLimits;
  WGPUQueueDescriptor defaultQueue;
  WGPUDeviceLostCallbackInfo deviceLostCallbackInfo;
  WGPUUncapturedErrorCallbackInfo uncapturedErrorCallbackInfo;
} WGPUDeviceDescriptor;

typedef struct WGPUDawnTogglesDescriptor {
  WGPUChainedStruct chain;
  size_t enabledToggleCount;
  const char *const *enabledToggles;
  size_t disabledToggleCount;
  const char *const *disabledToggles;
} WGPUDawnTogglesDescriptor;

/* ---- buffers, shaders, pipelines, bind groups -------------------------- */
typedef struct WGPUBufferDescriptor {
  WGPUChainedStruct *nextInChain;
  WGPUStringView label;
  WGPUBufferUsage usage;
  uint64_t size;
  WGPUBool mappedAtCreation;
} WGPUBufferDescriptor;

typedef struct WGPUShaderModuleDescriptor {
  WGPUChainedStruct *nextInChain;
  WGPUStringView label;
} WGPUShaderModuleDescriptor;

typedef struct WGPUShaderSourceWGSL {
  WGPUChainedStruct chain;
  WGPUStringView code;
} WGPUShaderSourceWGSL;

typedef struct WGPUConstantEntry {
  WGPUChainedStruct *nextInChain;
  WGPUStringView key;
  double value;
} WGPUConstantEntry;

typedef struct WGPUComputeState {
  WGPUChainedStruct *nextInChain;
  WGPUShaderModule module;
  WGPUStringView entryPoint;
  size_t constantCount;
  const WGPUConstantEntry *constants;
} WGPUComputeState;

typedef struct WGPUComputePipelineDescriptor {
  WGPUChainedStruct *nextInChain;
  WGPUStringView label;
  WGPUPipelineLayout layout; /* NULL: layout derived from the shader ("auto") */
  WGPUComputeState compute;
} WGPUComputePipelineDescriptor;

typedef struct WGPUBindGroupEntry {
  WGPUChainedStruct *nextInChain;
  uint32_t binding;
  WGPUBuffer buffer;
  uint64_t offset;
  uint64_t size;
  WGPUSampler sampler;
  WGPUTextureView textureView;
} WGPUBindGroupEntry;

typedef struct WGPUBindGroupDescriptor {
  WGPUChainedStruct *nextInChain;
  WGPUStringView label;
  WGPUBindGroupLayout layout;
  size_t entryCount;
  const WGPUBindGroupEntry *entries;
} WGPUBindGroupDescriptor;

/* ---- commands ----------------------------------------------------------- */
typedef struct WGPUCommandEncoderDescriptor {
  WGPUChainedStruct *nextInChain;
  WGPUStringView label;
} WGPUCommandEncoderDescriptor;

typedef struct WGPUPassTimestampWrites {
  WGPUChainedStruct *nextInChain;
  WGPUQuerySet querySet;
  uint32_t beginningOfPassWriteIndex;
  uint32_t endOfPassWriteIndex;
} WGPUPassTimestampWrites;

typedef struct WGPUComputePassDescriptor {
  WGPUChainedStruct *nextInChain;
  WGPUStringView label;
  const WGPUPassTimestampWrites *timestampWrites;
} WGPUComputePassDescriptor;

typedef struct WGPUCommandBufferDescriptor {
  WGPUChainedStruct *nextInChain;
  WGPUStringView label;
} WGPUCommandBufferDescriptor;

typedef struct WGPUQuerySetDescriptor {
  WGPUChainedStruct *nextInChain;
  WGPUStringView label;
  WGPUQueryType type;
  uint32_t count;
} WGPUQuerySetDescriptor;

/* ---- the functions wisp loads ------------------------------------------ */
/* X(name, return type, parameter list): wgpu_loader.c dlsyms "wgpu" #name. */
#define WISP_WGPU_FUNCS(X)                                                                         \
  X(CreateInstance, WGPUInstance, (const WGPUInstanceDescriptor *desc))                            \
  X(InstanceRequestAdapter, WGPUFuture,                                                            \
    (WGPUInstance inst, const WGPURequestAdapterOptions *opt, WGPURequestAdapterCallbackInfo cb))  \
  X(InstanceProcessEvents, void, (WGPUInstance inst))                                              \
  X(InstanceRelease, void, (WGPUInstance inst))                                                    \
  X(AdapterGetInfo, WGPUStatus, (WGPUAdapter a, WGPUAdapterInfo *info))                            \
  X(AdapterInfoFreeMembers, void, (WGPUAdapterInfo info))                                          \
  X(AdapterGetLimits, WGPUStatus, (WGPUAdapter a, WGPULimits *limits))                             \
  X(AdapterGetFeatures, void, (WGPUAdapter a, WGPUSupportedFeatures *features))                    \
  X(AdapterRequestDevice, WGPUFuture,                                                              \
    (WGPUAdapter a, const WGPUDeviceDescriptor *desc, WGPURequestDeviceCallbackInfo cb))           \
  X(AdapterRelease, void, (WGPUAdapter a))                                                         \
  X(SupportedFeaturesFreeMembers, void, (WGPUSupportedFeatures features))                          \
  X(DeviceGetLimits, WGPUStatus, (WGPUDevice d, WGPULimits *limits))                               \
  X(DeviceGetFeatures, void, (WGPUDevice d, WGPUSupportedFeatures *features))                      \
  X(DeviceHasFeature, WGPUBool, (WGPUDevice d, WGPUFeatureName f))                                 \
  X(DeviceGetQueue, WGPUQueue, (WGPUDevice d))                                                     \
  X(DeviceCreateBuffer, WGPUBuffer, (WGPUDevice d, const WGPUBufferDescriptor *desc))              \
  X(DeviceCreateShaderModule, WGPUShaderModule,                                                    \
    (WGPUDevice d, const WGPUShaderModuleDescriptor *desc))                                        \
  X(DeviceCreateComputePipeline, WGPUComputePipeline,                                              \
    (WGPUDevice d, const WGPUComputePipelineDescriptor *desc))                                     \
  X(DeviceCreateBindGroup, WGPUBindGroup, (WGPUDevice d, const WGPUBindGroupDescriptor *desc))     \
  X(DeviceCreateCommandEncoder, WGPUCommandEncoder,                                                \
    (WGPUDevice d, const WGPUCommandEncoderDescriptor *desc))                                      \
  X(DeviceCreateQuerySet, WGPUQuerySet, (WGPUDevice d, const WGPUQuerySetDescriptor *desc))        \
  X(DevicePushErrorScope, void, (WGPUDevice d, WGPUErrorFilter filter))                            \
  X(DevicePopErrorScope, WGPUFuture, (WGPUDevice d, WGPUPopErrorScopeCallbackInfo cb))             \
  X(DeviceDestroy, void, (WGPUDevice d))                                                           \
  X(DeviceRelease, void, (WGPUDevice d))                                                           \
  X(QueueSubmit, void, (WGPUQueue q, size_t count, const WGPUCommandBuffer *cmds))                 \
  X(QueueWriteBuffer, void,                                                                        \
    (WGPUQueue q, WGPUBuffer b, uint64_t offset, const void *data, size_t size))                   \
  X(QueueRelease, void, (WGPUQueue q))                                                             \
  X(BufferMapAsync, WGPUFuture,                                                                    \
    (WGPUBuffer b, WGPUMapMode mode, size_t offset, size_t size, WGPUBufferMapCallbackInfo cb))    \
  X(BufferGetConstMappedRange, const void *, (WGPUBuffer b, size_t offset, size_t size))           \
  X(BufferUnmap, void, (WGPUBuffer b))                                                             \
  X(BufferGetSize, uint64_t, (WGPUBuffer b))                                                       \
  X(BufferDestroy, void, (WGPUBuffer b))                                                           \
  X(BufferRelease, void, (WGPUBuffer b))                                                           \
  X(ShaderModuleRelease, void, (WGPUShaderModule m))                                               \
  X(ComputePipelineGetBindGroupLayout, WGPUBindGroupLayout,                                        \
    (WGPUComputePipeline p, uint32_t groupIndex))                                                  \
  X(ComputePipelineRelease, void, (WGPUComputePipeline p))                                         \
  X(BindGroupLayoutRelease, void, (WGPUBindGroupLayout l))                                         \
  X(BindGroupRelease, void, (WGPUBindGroup g))                                                     \
  X(CommandEncoderBeginComputePass, WGPUComputePassEncoder,                                        \
    (WGPUCommandEncoder e, const WGPUComputePassDescriptor *desc))                                 \
  X(CommandEncoderCopyBufferToBuffer, void,                                                        \
    (WGPUCommandEncoder e, WGPUBuffer src, uint64_t srcOffset, WGPUBuffer dst, uint64_t dstOffset, \
     uint64_t size))                                                                               \
  X(CommandEncoderResolveQuerySet, void,                                                           \
    (WGPUCommandEncoder e, WGPUQuerySet q, uint32_t firstQuery, uint32_t queryCount, WGPUBuffer dst, \
     uint64_t dstOffset))                                                                          \
  X(CommandEncoderFinish, WGPUCommandBuffer,                                                       \
    (WGPUCommandEncoder e, const WGPUCommandBufferDescriptor *desc))                               \
  X(CommandEncoderRelease, void, (WGPUCommandEncoder e))                                           \
  X(CommandBufferRelease, void, (WGPUCommandBuffer c))                                             \
  X(ComputePassEncoderSetPipeline, void, (WGPUComputePassEncoder p, WGPUComputePipeline pipe))     \
  X(ComputePassEncoderSetBindGroup, void,                                                          \
    (WGPUComputePassEncoder p, uint32_t groupIndex, WGPUBindGroup g, size_t dynamicOffsetCount,    \
     const uint32_t *dynamicOffsets))                                                              \
  X(ComputePassEncoderDispatchWorkgroups, void,                                                    \
    (WGPUComputePassEncoder p, uint32_t x, uint32_t y, uint32_t z))                                \
  X(ComputePassEncoderEnd, void, (WGPUComputePassEncoder p))                                       \
  X(ComputePassEncoderRelease, void, (WGPUComputePassEncoder p))                                   \
  X(QuerySetDestroy, void, (WGPUQuerySet q))                                                       \
  X(QuerySetRelease, void, (WGPUQuerySet q))

#define WISP_WGPU_FN_TYPEDEF(name, ret, params) typedef ret(*WGPUProc##name) params;
WISP_WGPU_FUNCS(WISP_WGPU_FN_TYPEDEF)
#undef WISP_WGPU_FN_TYPEDEF

/* One pointer per function, named without the "wgpu" prefix:
 * wisp_wgpu()->QueueSubmit(queue, 1, &cmd). */
typedef struct wisp_wgpu_api {
#define WISP_WGPU_FN_MEMBER(name, ret, params) WGPUProc##name name;
  WISP_WGPU_FUNCS(WISP_WGPU_FN_MEMBER)
#undef WISP_WGPU_FN_MEMBER
} wisp_wgpu_api;

/* Helpers for string views. */
static inline WGPUStringView wisp_wgpu_str(const char *s) {
  WGPUStringView v = {s, s ? WGPU_STRLEN : 0};
  return v;
}

#endif
