#!/usr/bin/env bash
# Builds and runs the vendor references for issue 28's table on a CUDA machine with nvcc
# and no Rust (the GPU machine): copy this folder there (device tool: carry it, e.g.
# `mkdir -p .device/cub && cp scripts/cub-reference/* .device/cub/`), then
# `bash .device/cub/run.sh [n]` (n: elements, 2^28 unless given).
set -e
cd "$(dirname "$0")"
nvcc -O3 -arch=sm_90 -std=c++17 -o cub_reference cub_reference.cu -lcublas
./cub_reference "$@"
