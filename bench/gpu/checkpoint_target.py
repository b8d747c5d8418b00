"""A stand-in for a notebook kernel holding GPU state: keeps SIZE_GB on the GPU and checks it.

Prints `READY <checksum>` once its tensor is filled, then waits for lines on stdin:
`CHECK` -> prints `CHECKED <checksum> <matmul-ok>` after recomputing both on the GPU; `EXIT` ends.
"""
import sys

import torch

size_gb = float(sys.argv[1])
elements = int(size_gb * (1 << 30)) // 4
torch.manual_seed(1)
x = torch.empty(elements, dtype=torch.int32, device="cuda")
chunk = 1 << 28
for start in range(0, elements, chunk):
    part = x[start:start + chunk]
    part.random_(-(1 << 31), (1 << 31) - 1)


def checksum():
    total = 0
    for start in range(0, elements, chunk):
        total += int(x[start:start + chunk].to(torch.int64).sum().item())
    return total


def matmul_ok():
    a = torch.ones(1024, 1024, device="cuda")
    return bool((a @ a)[0, 0].item() == 1024.0)


torch.cuda.synchronize()
print("READY", checksum(), flush=True)
for line in sys.stdin:
    command = line.strip()
    if command == "CHECK":
        print("CHECKED", checksum(), matmul_ok(), flush=True)
    elif command == "EXIT":
        break
