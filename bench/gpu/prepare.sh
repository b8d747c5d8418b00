#!/usr/bin/env bash
# Writes what probe.sh needs from the built code into bench/gpu/build (git-ignored): the exact
# benchmark Python the lab's "Measure speed" runs, and the nvidia-smi fields Ferry queries.
set -eu
cd "$(dirname "$0")/../.."
mkdir -p bench/gpu/build
node -e "process.stdout.write(require('./packages/accelerators/lib/benchmark.js').benchmarkCode())" >bench/gpu/build/benchmark.py
node -e "process.stdout.write(require('./kernel-gateway/lib/agent/devices/nvidia.js').NVIDIA_GPU_FIELDS.join(','))" >bench/gpu/build/gpu-fields.txt
