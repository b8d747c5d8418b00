#!/usr/bin/env bash
# What Ferry needs to know from a real NVIDIA GPU host, in one go (run by the device tool as root):
# the host, nvidia-smi's answers to Ferry's own queries while a matmul loop runs, the "Measure
# speed" benchmark Ferry runs in a kernel, bf16/tf32/fp32 TFLOPS, and CUDA checkpoint suspend and
# resume of 1, 8 and 32 GB. Results go to $OUT (probe.log, raw.tar). Prepare with prepare.sh first.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/ferry-gpu-probe}
raw=$out/raw
mkdir -p "$raw"
export PYTHONUNBUFFERED=1
{
  echo "== host"; date -u; uname -a; nproc; free -g | head -2
  nvidia-smi; nvidia-smi -q | grep -iE 'Driver Version|CUDA Version|Product Name|Persistence|Compute Mode' 
  python3 --version; command -v node || echo "no node"; command -v cuda-checkpoint || echo "no cuda-checkpoint"
  python3 -c 'import importlib.util as u; print({m: bool(u.find_spec(m)) for m in ("ipykernel","zmq","jupyter_client","torch","jax","cupy")})'
} >"$raw/host.txt" 2>&1
cat "$raw/host.txt"

gpu_fields=$(cat "$here/build/gpu-fields.txt")
nvidia-smi -L >"$raw/nvidia-smi-L.txt"
nvidia-smi --query-gpu="$gpu_fields" --format=csv,noheader,nounits >"$raw/query-gpu-idle.csv"
echo "== telemetry under a matmul loop"
python3 -c '
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
hold = torch.empty(6 * (1 << 30), dtype=torch.uint8, device="cuda")
end = time.time() + 14
while time.time() < end:
    for _ in range(50): a @ a
    torch.cuda.synchronize()
' & loop=$!
for i in 1 2 3 4 5 6 7 8; do
  sleep 1
  nvidia-smi --query-gpu="$gpu_fields" --format=csv,noheader,nounits >>"$raw/query-gpu-busy.csv"
done
nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits >"$raw/compute-apps-busy.csv"
echo "loop pid $loop"; cat "$raw/query-gpu-busy.csv" "$raw/compute-apps-busy.csv"
wait $loop

echo "== Ferry's Measure speed benchmark (the code the kernel runs)"
python3 "$here/build/benchmark.py" 2>&1 | tee "$raw/benchmark.txt"
echo "== precisions"
python3 "$here/precision_bench.py" 2>&1 | tee "$raw/precision.txt"
echo "== checkpoint"
timeout 300 python3 "$here/checkpoint_probe.py" 1 8 32 2>&1 | tee "$raw/checkpoint.txt"
nvidia-smi --query-gpu="$gpu_fields" --format=csv,noheader,nounits >"$raw/query-gpu-end.csv"
tar -C "$out" -cf "$out/raw.tar" raw && rm -rf "$raw"
