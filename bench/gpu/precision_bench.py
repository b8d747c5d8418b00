"""Dense matmul TFLOPS on the GPU in bf16, tf32 and fp32 (8192^3, median of 10 after 3 warm-ups)."""
import json
import time

import torch


def measure(dtype, tf32):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    times = []
    for _ in range(10):
        start = time.perf_counter()
        a @ b
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    seconds = sorted(times)[len(times) // 2]
    return 2 * n ** 3 / seconds / 1e12


print("PRECISION", json.dumps({
    "device": torch.cuda.get_device_name(),
    "bf16": measure(torch.bfloat16, False),
    "tf32": measure(torch.float32, True),
    "fp32": measure(torch.float32, False),
}), flush=True)
