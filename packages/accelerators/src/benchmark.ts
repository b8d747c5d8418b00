/**
 * The one-click speed check: a square matmul timed after warm-up in the kernel itself, reported
 * beside the datasheet dense peak of the device model and precision.
 */

/** What the benchmark measured. */
export interface IBenchmarkResult {
  /** `torch`, `jax` or `numpy`. */
  backend: string;
  /** The device the matmul ran on, as the backend names it (`cuda:0`, `TPU_0`, `cpu`). */
  device: string;
  /** `bfloat16`, `float16` or `float32`. */
  dtype: string;
  /** The matrix size. */
  n: number;
  /** Seconds per matmul (median of the timed runs). */
  seconds: number;
  /** Achieved TFLOPS (2·n³ / seconds). */
  tflops: number;
}

/** The marker of the result line the benchmark prints. */
export const BENCHMARK_MARKER = 'FERRY_BENCHMARK';

/**
 * Dense datasheet peaks in TFLOPS by model and precision (NVIDIA and Google datasheets, without
 * sparsity): H100 SXM bf16 989, A100 bf16 312, T4 fp16 65 ...
 */
export const DATASHEET_PEAK_TFLOPS: {
  readonly [model: string]: { readonly [dtype: string]: number };
} = {
  B200: { bfloat16: 2250, float16: 2250 },
  H200: { bfloat16: 989, float16: 989 },
  H100: { bfloat16: 989, float16: 989 },
  A100: { bfloat16: 312, float16: 312, float32: 19.5 },
  L40S: { bfloat16: 362, float16: 362 },
  L4: { bfloat16: 121, float16: 121 },
  A10: { bfloat16: 125, float16: 125 },
  V100: { float16: 125, float32: 15.7 },
  T4: { float16: 65, float32: 8.1 },
  v6e: { bfloat16: 918 },
  v5p: { bfloat16: 459 },
  v5e: { bfloat16: 197 },
  v4: { bfloat16: 275 },
  v3: { bfloat16: 123 },
  v2: { bfloat16: 45 }
};

/**
 * The Python the benchmark runs in the kernel: torch on a CUDA/ROCm GPU, else JAX on a TPU or GPU
 * (bfloat16, float16 on GPUs older than Ampere), else numpy float32 on the CPU. It prints one line,
 * `FERRY_BENCHMARK {json}`, and leaves nothing behind in the user's namespace.
 *
 * @param options - `n`: matrix size for accelerators (CPU uses at most 2048); `repeats`: timed runs.
 */
export function benchmarkCode(
  options: { n?: number; cpuN?: number; repeats?: number } = {}
): string {
  const n = options.n ?? 8192;
  const cpuN = options.cpuN ?? 2048;
  const repeats = options.repeats ?? 5;
  return `def __ferry_benchmark(n=${n}, cpu_n=${cpuN}, repeats=${repeats}):
    import json, time
    def timed(run, sync):
        run(); sync()
        times = []
        for _ in range(repeats):
            start = time.perf_counter(); run(); sync(); times.append(time.perf_counter() - start)
        return sorted(times)[len(times) // 2]
    result = None
    try:
        import torch
        if torch.cuda.is_available():
            major = torch.cuda.get_device_capability()[0]
            dtype = torch.bfloat16 if major >= 8 else torch.float16
            a = torch.randn(n, n, device='cuda', dtype=dtype); b = torch.randn(n, n, device='cuda', dtype=dtype)
            s = timed(lambda: a @ b, torch.cuda.synchronize)
            result = dict(backend='torch', device=torch.cuda.get_device_name(), dtype=str(dtype).replace('torch.', ''), n=n, seconds=s)
    except ImportError:
        pass
    if result is None:
        try:
            import jax, jax.numpy as jnp
            device = jax.devices()[0]
            if device.platform in ('tpu', 'gpu'):
                a = jnp.ones((n, n), jnp.bfloat16); b = jnp.ones((n, n), jnp.bfloat16)
                f = jax.jit(lambda x, y: x @ y)
                out = []
                s = timed(lambda: out.append(f(a, b)), lambda: out[-1].block_until_ready())
                result = dict(backend='jax', device=str(device.device_kind), dtype='bfloat16', n=n, seconds=s)
        except ImportError:
            pass
    if result is None:
        import numpy as np
        n = min(n, cpu_n)
        a = np.random.rand(n, n).astype(np.float32); b = np.random.rand(n, n).astype(np.float32)
        s = timed(lambda: a @ b, lambda: None)
        result = dict(backend='numpy', device='cpu', dtype='float32', n=n, seconds=s)
    result['tflops'] = 2 * result['n'] ** 3 / result['seconds'] / 1e12
    print('${BENCHMARK_MARKER}', json.dumps(result))
try:
    __ferry_benchmark()
finally:
    del __ferry_benchmark
`;
}

/**
 * The result in the benchmark's output, or `null` when it printed none.
 *
 * @param output - The text the kernel printed.
 */
export function parseBenchmark(output: string): IBenchmarkResult | null {
  const line = output
    .split('\n')
    .reverse()
    .find(text => text.startsWith(`${BENCHMARK_MARKER} `));
  if (!line) {
    return null;
  }
  try {
    const data = JSON.parse(line.slice(BENCHMARK_MARKER.length + 1));
    return typeof data.tflops === 'number' ? (data as IBenchmarkResult) : null;
  } catch {
    return null;
  }
}

/**
 * The datasheet peak for a model and precision, if known.
 *
 * @param model - A device model (`H100`, `v5e`); matched case-insensitively.
 * @param dtype - The precision measured.
 */
export function datasheetPeak(
  model: string | undefined,
  dtype: string
): number | undefined {
  if (!model) {
    return undefined;
  }
  const key = Object.keys(DATASHEET_PEAK_TFLOPS).find(
    name => name.toLowerCase() === model.toLowerCase()
  );
  return key ? DATASHEET_PEAK_TFLOPS[key][dtype] : undefined;
}

/**
 * The result in words: `412.3 TFLOPS bfloat16 on NVIDIA H100 (torch, n=8192): 42 % of the 989
 * TFLOPS datasheet peak`. A kernel on a simulated device measures the CPU, and says so.
 *
 * @param result - The measurement.
 * @param model - The model of the kernel's device, for the datasheet comparison.
 */
export function formatBenchmark(
  result: IBenchmarkResult,
  model?: string
): string {
  const tflops =
    result.tflops >= 10 ? result.tflops.toFixed(1) : result.tflops.toFixed(3);
  const measured = `${tflops} TFLOPS ${result.dtype} on ${result.device === 'cpu' ? 'the CPU' : result.device} (${result.backend}, n=${result.n})`;
  if (result.backend === 'numpy') {
    return model
      ? `${measured}: no ${model} is visible to the kernel (simulated or missing), so this is the CPU`
      : measured;
  }
  const peak = datasheetPeak(model, result.dtype);
  return peak
    ? `${measured}: ${Math.round((100 * result.tflops) / peak)} % of the ${peak} TFLOPS datasheet peak`
    : measured;
}
