import { execFile } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  writeFileSync
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { IBenchmarkResult } from '../src/benchmark';
import {
  benchmarkCode,
  datasheetPeak,
  formatBenchmark,
  parseBenchmark
} from '../src/benchmark';
import { pythonWithout } from '@ferry/testing';

/** Run code in the Python of the kernels (Debian's, as the python3 kernelspec names it). */
function python(code: string, env: NodeJS.ProcessEnv = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      '/usr/bin/python3',
      ['-c', code],
      { env: { ...process.env, ...env } },
      (error, stdout, stderr) =>
        error ? reject(new Error(stderr || error.message)) : resolve(stdout)
    );
  });
}

describe('benchmark', () => {
  it('measures a numpy float32 matmul on the CPU where numpy is the only array library, and cleans up', async () => {
    const output = await python(
      `${pythonWithout(['torch', 'jax', 'cupy'])}${benchmarkCode({ n: 256, repeats: 3 })}\nprint('left', '__ferry_benchmark' in globals())`
    );
    const result = parseBenchmark(output) as IBenchmarkResult;
    expect(result).toMatchObject({
      backend: 'numpy',
      device: 'cpu',
      dtype: 'float32',
      n: 256
    });
    expect(result).not.toHaveProperty('failed');
    expect(result.tflops).toBeGreaterThan(0);
    expect(result.seconds).toBeGreaterThan(0);
    expect(output).toContain('left False');
  });

  it('times every repeat of a quick matmul, and stops timing once the runs took maxSeconds', async () => {
    const run = async (options: { maxSeconds?: number }) =>
      parseBenchmark(
        await python(
          `${pythonWithout(['torch', 'jax', 'cupy'])}${benchmarkCode({ n: 64, repeats: 4, ...options })}`
        )
      ) as IBenchmarkResult;
    expect(await run({})).toMatchObject({ backend: 'numpy', n: 64, runs: 4 });
    // No time at all: the one run that is always timed, and its time.
    const once = await run({ maxSeconds: 0 });
    expect(once).toMatchObject({ backend: 'numpy', n: 64, runs: 1 });
    expect(once.seconds).toBeGreaterThan(0);
  });

  it('tries torch before numpy, and says why an installed torch was not used', async () => {
    // A stand-in torch package (not torch) that fails to import as a torch built for another
    // CUDA does.
    const site = mkdtempSync(join(tmpdir(), 'ferry-broken-torch-'));
    try {
      mkdirSync(join(site, 'torch'));
      writeFileSync(
        join(site, 'torch', '__init__.py'),
        "raise OSError('libcudart.so.12: cannot open shared object file: No such file or directory')\n"
      );
      const output = await python(
        `${pythonWithout(['jax', 'cupy'])}${benchmarkCode({ n: 256, repeats: 3 })}`,
        { PYTHONPATH: site }
      );
      const result = parseBenchmark(output)!;
      expect(result).toMatchObject({
        backend: 'numpy',
        failed: {
          torch:
            'OSError: libcudart.so.12: cannot open shared object file: No such file or directory'
        }
      });
      expect(formatBenchmark(result)).toMatch(
        /^[\d.]+ TFLOPS float32 on the CPU \(numpy, n=256\); torch failed \(OSError: libcudart\.so\.12: cannot open shared object file: No such file or directory\)$/
      );
    } finally {
      rmSync(site, { recursive: true, force: true });
    }
  });

  it('says what to install, rather than failing, where the Python has no array library', async () => {
    const output = await python(
      `${pythonWithout(['torch', 'jax', 'cupy', 'numpy'])}${benchmarkCode({ n: 256, repeats: 3 })}`
    );
    const outcome = parseBenchmark(output)!;
    expect(outcome).toEqual({
      backend: null,
      python: '/usr/bin/python3',
      debian: existsSync('/etc/debian_version')
    });
    expect(formatBenchmark(outcome, 'H100')).toBe(
      existsSync('/etc/debian_version')
        ? 'No array library in this kernel: install one of torch, jax, cupy or numpy (Debian: apt-get install python3-numpy)'
        : 'No array library in this kernel: install one of torch, jax, cupy or numpy (e.g. /usr/bin/python3 -m pip install numpy)'
    );
    expect(
      formatBenchmark({
        backend: null,
        python: '/opt/venv/bin/python',
        debian: false
      })
    ).toBe(
      'No array library in this kernel: install one of torch, jax, cupy or numpy (e.g. /opt/venv/bin/python -m pip install numpy)'
    );
  });

  it('compares with the datasheet peak of the model and precision', () => {
    expect(datasheetPeak('h100', 'bfloat16')).toBe(989);
    expect(datasheetPeak('T4', 'float16')).toBe(65);
    expect(datasheetPeak('T4', 'bfloat16')).toBeUndefined();
    expect(
      formatBenchmark(
        {
          backend: 'torch',
          device: 'NVIDIA H100 80GB HBM3',
          dtype: 'bfloat16',
          n: 8192,
          seconds: 0.0025,
          runs: 5,
          tflops: 439.8
        },
        'H100'
      )
    ).toBe(
      '439.8 TFLOPS bfloat16 on NVIDIA H100 80GB HBM3 (torch, n=8192): 44 % of the 989 TFLOPS datasheet peak'
    );
  });

  it('says when a simulated device measured the CPU', () => {
    expect(
      formatBenchmark(
        {
          backend: 'numpy',
          device: 'cpu',
          dtype: 'float32',
          n: 2048,
          seconds: 0.2,
          runs: 5,
          tflops: 0.0859
        },
        'H100'
      )
    ).toBe(
      '0.086 TFLOPS float32 on the CPU (numpy, n=2048): no H100 is visible to the kernel (simulated or missing), so this is the CPU'
    );
  });

  it('finds no result in output without one', () => {
    expect(parseBenchmark('Traceback ...\nValueError')).toBeNull();
    expect(parseBenchmark('FERRY_BENCHMARK {bad json')).toBeNull();
  });
});
