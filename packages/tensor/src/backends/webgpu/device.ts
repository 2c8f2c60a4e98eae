// Adapter and device acquisition. In browsers WebGPU is `navigator.gpu`; in Node it comes from the
// optional `webgpu` package (Dawn's Node binding), imported dynamically so that code browsers load
// never names a Node-only module.
import { BackendError } from "../../errors.js";

/** No WebGPU adapter on this machine or in this browser; the message says what to install. */
export class WebGPUUnavailableError extends BackendError {}

/** Debian 12: Dawn refuses bookworm's Mesa 22; lavapipe from Mesa 25 (backports) runs WebGPU on the CPU. */
export const WEBGPU_INSTALL_HINT =
  "on Debian 12 add bookworm-backports to apt and run `apt-get install -t bookworm-backports mesa-vulkan-drivers` " +
  "(lavapipe; or install your GPU's Vulkan driver); in browsers use a WebGPU-enabled browser";

export interface WebGPUDeviceInfo {
  device: GPUDevice;
  /** Held so the GPU instance and adapter live as long as the device (Dawn's Node binding crashes otherwise). */
  keepAlive: unknown[];
  adapterName: string;
  /** The adapter supports `shader-f16` and the device was created with it. */
  shaderF16: boolean;
  limits: {
    maxStorageBufferBindingSize: number;
    maxBufferSize: number;
    maxComputeWorkgroupStorageSize: number;
    maxComputeInvocationsPerWorkgroup: number;
    maxComputeWorkgroupsPerDimension: number;
    minStorageBufferOffsetAlignment: number;
    minUniformBufferOffsetAlignment: number;
    maxStorageBuffersPerShaderStage: number;
  };
}

interface NavigatorWithGpu {
  gpu?: GPU;
}

async function findGpu(): Promise<GPU> {
  const nav = (globalThis as { navigator?: NavigatorWithGpu }).navigator;
  if (nav?.gpu) return nav.gpu;
  const isNode = typeof process !== "undefined" && typeof process.versions?.node === "string";
  if (!isNode)
    throw new WebGPUUnavailableError(
      "webgpu: this browser exposes no navigator.gpu; use a WebGPU-enabled browser (Chrome/Edge ≥ 113, or Chromium with --enable-unsafe-webgpu)",
    );
  // A variable specifier keeps bundlers from resolving the Node binding for browser builds.
  const specifier = "webgpu";
  let mod: { create: (flags: string[]) => GPU; globals: Record<string, unknown> };
  try {
    mod = await import(/* @vite-ignore */ specifier);
  } catch (err) {
    throw new WebGPUUnavailableError(
      `webgpu: the optional package "webgpu" (Dawn for Node) could not be loaded (${String(err)}); install it with \`pnpm add webgpu@0.6.2\`, then ${WEBGPU_INSTALL_HINT}`,
    );
  }
  // Dawn's binding needs its GPU* constants (GPUBufferUsage, GPUMapMode, …) as globals.
  for (const [name, value] of Object.entries(mod.globals))
    if (!(name in globalThis)) (globalThis as Record<string, unknown>)[name] = value;
  return mod.create([]);
}

/** Request an adapter and a device with the adapter's full limits (the defaults cap bindings at 128 MiB / buffers at 256 MiB). */
export async function acquireDevice(options: { powerPreference?: GPUPowerPreference } = {}): Promise<WebGPUDeviceInfo> {
  const gpu = await findGpu();
  const adapter = await gpu.requestAdapter({ powerPreference: options.powerPreference ?? "high-performance" });
  if (!adapter)
    throw new WebGPUUnavailableError(
      `webgpu: no WebGPU adapter found (no Vulkan/Metal/D3D12 driver Dawn accepts); ${WEBGPU_INSTALL_HINT}`,
    );
  const a = adapter.limits;
  const shaderF16 = adapter.features.has("shader-f16");
  const device = await adapter.requestDevice({
    requiredFeatures: shaderF16 ? ["shader-f16"] : [],
    requiredLimits: {
      maxStorageBufferBindingSize: a.maxStorageBufferBindingSize,
      maxBufferSize: a.maxBufferSize,
      maxComputeWorkgroupStorageSize: a.maxComputeWorkgroupStorageSize,
      maxComputeInvocationsPerWorkgroup: a.maxComputeInvocationsPerWorkgroup,
      maxComputeWorkgroupSizeX: a.maxComputeWorkgroupSizeX,
      maxComputeWorkgroupSizeY: a.maxComputeWorkgroupSizeY,
      maxStorageBuffersPerShaderStage: a.maxStorageBuffersPerShaderStage,
    },
  });
  const info = (adapter as { info?: { device?: string; description?: string; vendor?: string } }).info;
  const adapterName = info?.description || info?.device || info?.vendor || "unknown adapter";
  const d = device.limits;
  return {
    device,
    keepAlive: [gpu, adapter],
    adapterName,
    shaderF16,
    limits: {
      maxStorageBufferBindingSize: d.maxStorageBufferBindingSize,
      maxBufferSize: d.maxBufferSize,
      maxComputeWorkgroupStorageSize: d.maxComputeWorkgroupStorageSize,
      maxComputeInvocationsPerWorkgroup: d.maxComputeInvocationsPerWorkgroup,
      maxComputeWorkgroupsPerDimension: d.maxComputeWorkgroupsPerDimension,
      minStorageBufferOffsetAlignment: d.minStorageBufferOffsetAlignment,
      minUniformBufferOffsetAlignment: d.minUniformBufferOffsetAlignment,
      maxStorageBuffersPerShaderStage: d.maxStorageBuffersPerShaderStage,
    },
  };
}
