import { execFile } from 'node:child_process';
import {
  benchmarkCode,
  datasheetPeak,
  formatBenchmark,
  parseBenchmark
} from '../src/benchmark';

function python(code: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('python3', ['-c', code], (error, stdout, stderr) =>
      error ? reject(new Error(stderr || error.message)) : resolve(stdout)
    );
  });
}

describe('benchmark', () => {
  it('measures a numpy float32 matmul where no accelerator is visible, and cleans up', async () => {
    const output = await python(
      `${benchmarkCode({ n: 256, repeats: 3 })}\nprint('left', '__ferry_benchmark' in globals())`
    );
    const result = parseBenchmark(output);
    expect(result).toMatchObject({
      backend: 'numpy',
      device: 'cpu',
      dtype: 'float32',
      n: 256
    });
    expect(result!.tflops).toBeGreaterThan(0);
    expect(result!.seconds).toBeGreaterThan(0);
    expect(output).toContain('left False');
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
