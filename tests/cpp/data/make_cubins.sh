#!/usr/bin/env bash
# Regenerates the test cubins from kernel.cu (needs nvcc; no GPU). The
# cubins are committed so the tests run on machines without CUDA.
set -euo pipefail
cd "$(dirname "$0")"
NVCC=${NVCC:-nvcc}
for sm in 80 90; do
  "$NVCC" -cubin -arch=sm_${sm} -o k_sm${sm}.cubin kernel.cu
done
