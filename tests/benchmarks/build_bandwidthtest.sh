#!/usr/bin/env bash
# Build NVIDIA cuda-samples' bandwidthTest with the nvcc on PATH, for Ampere and Hopper (no GPU needed), into OUT.
# bandwidthTest is in cuda-samples up to v12.8 (12.9 removed it); device_copy_bar.py compares PinPoint's
# device-to-device copies with its --dtod mode. The GPU machine has no network: build here and carry the binary.
#
# Usage: tests/benchmarks/build_bandwidthtest.sh OUT [CUDA_SAMPLES_DIR]
#   CUDA_SAMPLES_DIR (or the environment variable of that name): a cuda-samples tree at v12.8 (Samples/ and Common/).
#   Without one, v12.8 is cloned from GitHub into a temporary directory.
set -euo pipefail
out=${1:?usage: $0 OUT [CUDA_SAMPLES_DIR]}
src=${2:-${CUDA_SAMPLES_DIR:-}}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "$src" ]; then
  git clone --quiet --depth 1 --branch v12.8 https://github.com/NVIDIA/cuda-samples.git "$work/cuda-samples"
  src=$work/cuda-samples
fi
sample=$src/Samples/1_Utilities/bandwidthTest/bandwidthTest.cu
if [ ! -f "$sample" ] || [ ! -f "$src/Common/helper_cuda.h" ]; then
  echo "no bandwidthTest in '$src': give a cuda-samples tree at v12.8 (the last release that has it)" >&2
  exit 2
fi
# CUDA 13 removed cudaDeviceProp::computeMode, which the sample reads once (to refuse a prohibited device): read
# the same value through cudaDeviceGetAttribute. Nothing that is timed changes.
sed 's/deviceProp\.computeMode/({ int computeMode = 0; cudaDeviceGetAttribute(\&computeMode, cudaDevAttrComputeMode, currentDevice); computeMode; })/' \
  "$sample" > "$work/bandwidthTest.cu"
mkdir -p "$(dirname "$out")"
nvcc -O3 -std=c++17 -I"$src/Common" \
  -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=sm_80 \
  -o "$out" "$work/bandwidthTest.cu"
echo "built $out with $(nvcc --version | tail -1) from $src"
