/**
 * The one-click speed check: a square matmul timed after warm-up in the kernel itself, reported
 * beside the datasheet dense peak of the device model and precision.
 */

/** What the benchmark measured. */
export interface IBenchmarkResult {
  /** The array library that ran the matmul: `torch`, `jax`, `cupy` or `numpy`. */
  backend: string;
  /** The device the matmul ran on, as the backend names it (`NVIDIA H100 80GB HBM3`, `TPU v5 lite`, `cpu`). */
  device: string;
  /** `bfloat16`, `float16` or `float32`. */
  dtype: string;
  /** The matrix size. */
  n: number;
  /** Seconds per matmul (median of the timed runs). */
  seconds: number;
  /** How many runs were timed: `repeats`, fewer where they took longer than `maxSeconds`. */
  runs: number;
  /** Achieved TFLOPS (2·n³ / seconds). */
  tflops: number;
  /** Libraries that are installed but failed (to import, or to run), with the error. */
  failed?: { [library: string]: string };
}

/** What the benchmark found where the kernel has no array library to measure with. */
export interface IBenchmarkNoLibrary {
  backend: null;
  /** The kernel's Python (`sys.executable`). */
  python: string;
  /** Whether that Python is the system's on Debian (or a derivative), where apt-get installs numpy. */
  debian: boolean;
  /** Libraries that are installed but failed (to import, or to run), with the error. */
  failed?: { [library: string]: string };
}

/** What the speed check printed: a measurement, or that there was nothing to measure with. */
export type BenchmarkOutcome = IBenchmarkResult | IBenchmarkNoLibrary;

/** The array libraries the benchmark tries, in order. */
export const BENCHMARK_LIBRARIES = ['torch', 'jax', 'cupy', 'numpy'] as const;

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
 * The Python the benchmark runs in the kernel, with whatever array library the kernel has: the
 * first of torch (CUDA/ROCm), JAX (TPU or GPU) and CuPy (CUDA) that sees an accelerator, in
 * bfloat16 (float16 on GPUs older than Ampere, and with CuPy); else float32 on the CPU with the
 * first of torch, JAX and numpy. It prints one line, `FERRY_BENCHMARK {json}` (with `"backend":
 * null` where the kernel has none of them), and leaves nothing behind in the user's namespace.
 *
 * #### Notes
 * A library that is installed but fails (a broken install, a device it cannot use) is skipped, and
 * its error goes with the result, so the user sees why it was not the one used.
 *
 * The timed runs stop early once they have taken `maxSeconds`: a CPU with a slow BLAS (Debian's
 * reference one takes seconds per matmul at n=2048) answers in a few seconds, not half a minute.
 *
 * @param options - `n`: matrix size for accelerators; `cpuN`: the most the CPU gets; `repeats`:
 * timed runs; `maxSeconds`: the time after which no further run starts (at least one is timed).
 */
export function benchmarkCode(
  options: {
    n?: number;
    cpuN?: number;
    repeats?: number;
    maxSeconds?: number;
  } = {}
): string {
  const n = options.n ?? 8192;
  const cpuN = options.cpuN ?? 2048;
  const repeats = options.repeats ?? 5;
  const maxSeconds = options.maxSeconds ?? 2;
  return `def __ferry_benchmark(n=${n}, cpu_n=${cpuN}, repeats=${repeats}, max_seconds=${maxSeconds}):
    import importlib, json, os, sys, time
    def timed(run, sync):
        run(); sync()
        times = []
        while len(times) < repeats and (not times or sum(times) < max_seconds):
            start = time.perf_counter(); run(); sync(); times.append(time.perf_counter() - start)
        return dict(seconds=sorted(times)[len(times) // 2], runs=len(times))
    failed = {}
    def why(error):
        text = ('%s: %s' % (type(error).__name__, error)).strip().splitlines()[0]
        return text if len(text) <= 200 else text[:199] + '…'
    def load(name):
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as error:
            # The library itself is absent; one of its own imports missing is a broken install.
            if error.name != name:
                failed[name] = why(error)
        except Exception as error:
            failed[name] = why(error)
        return None
    cpu_n = min(n, cpu_n)
    def torch_gpu(torch):
        if not torch.cuda.is_available():
            return None
        dtype = torch.bfloat16 if torch.cuda.get_device_capability()[0] >= 8 else torch.float16
        a = torch.randn(n, n, device='cuda', dtype=dtype); b = torch.randn(n, n, device='cuda', dtype=dtype)
        return dict(device=torch.cuda.get_device_name(), dtype=str(dtype).replace('torch.', ''), n=n, **timed(lambda: a @ b, torch.cuda.synchronize))
    def torch_cpu(torch):
        a = torch.randn(cpu_n, cpu_n, dtype=torch.float32); b = torch.randn(cpu_n, cpu_n, dtype=torch.float32)
        return dict(device='cpu', dtype='float32', n=cpu_n, **timed(lambda: a @ b, lambda: None))
    def jax_run(jax, size, dtype):
        import jax.numpy as jnp
        a = jnp.ones((size, size), dtype); b = jnp.ones((size, size), dtype)
        f = jax.jit(lambda x, y: x @ y)
        out = []
        return timed(lambda: out.append(f(a, b)), lambda: out.pop().block_until_ready())
    def jax_accelerator(jax):
        device = jax.devices()[0]
        if device.platform not in ('tpu', 'gpu'):
            return None
        return dict(device=str(device.device_kind), dtype='bfloat16', n=n, **jax_run(jax, n, 'bfloat16'))
    def jax_cpu(jax):
        return dict(device='cpu', dtype='float32', n=cpu_n, **jax_run(jax, cpu_n, 'float32'))
    def cupy_gpu(cupy):
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
        name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)['name']
        a = cupy.random.rand(n, n, dtype=cupy.float32).astype(cupy.float16); b = cupy.random.rand(n, n, dtype=cupy.float32).astype(cupy.float16)
        return dict(device=name.decode() if isinstance(name, bytes) else str(name), dtype='float16', n=n, **timed(lambda: a @ b, cupy.cuda.Device().synchronize))
    def numpy_cpu(np):
        a = np.random.rand(cpu_n, cpu_n).astype(np.float32); b = np.random.rand(cpu_n, cpu_n).astype(np.float32)
        return dict(device='cpu', dtype='float32', n=cpu_n, **timed(lambda: a @ b, lambda: None))
    runs = dict(torch=(torch_gpu, torch_cpu), jax=(jax_accelerator, jax_cpu), cupy=(cupy_gpu, None), numpy=(None, numpy_cpu))
    libraries = [(name, load(name)) for name in (${BENCHMARK_LIBRARIES.map(name => `'${name}'`).join(', ')})]
    def measure():
        # Any accelerator first, then the CPU.
        for place in (0, 1):
            for name, library in libraries:
                run = runs[name][place]
                if library is None or run is None or name in failed:
                    continue
                try:
                    found = run(library)
                except Exception as error:
                    failed[name] = why(error)
                    continue
                if found is not None:
                    found = dict(backend=name, **found)
                    found['tflops'] = 2 * found['n'] ** 3 / found['seconds'] / 1e12
                    return found
        return None
    result = measure()
    if result is None:
        result = dict(backend=None, python=sys.executable, debian=sys.prefix == '/usr' and os.path.exists('/etc/debian_version'))
    if failed:
        result['failed'] = failed
    print('${BENCHMARK_MARKER}', json.dumps(result))
try:
    __ferry_benchmark()
finally:
    del __ferry_benchmark
`;
}

/**
 * What the benchmark's output says, or `null` when it printed no result line.
 *
 * @param output - The text the kernel printed.
 */
export function parseBenchmark(output: string): BenchmarkOutcome | null {
  const line = output
    .split('\n')
    .reverse()
    .find(text => text.startsWith(`${BENCHMARK_MARKER} `));
  if (!line) {
    return null;
  }
  try {
    const data = JSON.parse(line.slice(BENCHMARK_MARKER.length + 1));
    if (data?.backend === null && typeof data.python === 'string') {
      return data as IBenchmarkNoLibrary;
    }
    return typeof data?.backend === 'string' && typeof data.tflops === 'number'
      ? (data as IBenchmarkResult)
      : null;
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
 * The outcome in words: `412.3 TFLOPS bfloat16 on NVIDIA H100 (torch, n=8192): 42 % of the 989
 * TFLOPS datasheet peak`. A kernel on a simulated device measures the CPU, and says so; a kernel
 * without an array library is told what to install; a library that failed is named with its error.
 *
 * @param outcome - What the benchmark printed.
 * @param model - The model of the kernel's device, for the datasheet comparison.
 */
export function formatBenchmark(
  outcome: BenchmarkOutcome,
  model?: string
): string {
  const failed = Object.entries(outcome.failed ?? {})
    .map(([library, error]) => `; ${library} failed (${error})`)
    .join('');
  if (outcome.backend === null) {
    const libraries = `${BENCHMARK_LIBRARIES.slice(0, -1).join(', ')} or ${BENCHMARK_LIBRARIES[BENCHMARK_LIBRARIES.length - 1]}`;
    const how = outcome.debian
      ? 'Debian: apt-get install python3-numpy'
      : `e.g. ${outcome.python} -m pip install numpy`;
    return `No array library in this kernel: install one of ${libraries} (${how})${failed}`;
  }
  const result = outcome;
  const tflops =
    result.tflops >= 10 ? result.tflops.toFixed(1) : result.tflops.toFixed(3);
  const measured = `${tflops} TFLOPS ${result.dtype} on ${result.device === 'cpu' ? 'the CPU' : result.device} (${result.backend}, n=${result.n})`;
  if (result.device === 'cpu') {
    return model
      ? `${measured}: no ${model} is visible to the kernel (simulated or missing), so this is the CPU${failed}`
      : `${measured}${failed}`;
  }
  const peak = datasheetPeak(model, result.dtype);
  return peak
    ? `${measured}: ${Math.round((100 * result.tflops) / peak)} % of the ${peak} TFLOPS datasheet peak${failed}`
    : `${measured}${failed}`;
}
