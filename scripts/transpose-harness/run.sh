#!/usr/bin/env bash
# Builds and runs time_transpose.cu on a CUDA machine with nvcc (the GPU machine).
set -e
cd "$(dirname "$0")"
nvcc -O3 -arch=sm_90 -std=c++17 -o time_transpose time_transpose.cu
./time_transpose
