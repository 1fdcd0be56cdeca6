#!/usr/bin/env bash
# Builds and runs the transpose harnesses on a CUDA machine with nvcc (the GPU machine):
# time_transpose.cu (hand-written tiles, with and without line-aligned writes) and
# time_library.cu (the library's generated kernels; write them first, see that file;
# they are git-ignored: carry them).
set -e
cd "$(dirname "$0")"
nvcc -O3 -arch=sm_90 -std=c++17 -o time_transpose time_transpose.cu
nvcc -O3 -arch=sm_90 -std=c++17 -o time_library time_library.cu transpose_32_generated.cu transpose_64_generated.cu transpose_128_generated.cu transpose_sectors_64_generated.cu transpose_sectors_128_generated.cu -diag-suppress 177
./time_library
# time_variants.cu: the generated kernels beside an earlier commit's (old_*.cu; see there).
if ls old_transpose_*_generated.cu > /dev/null 2>&1; then
    nvcc -O3 -arch=sm_90 -std=c++17 -o time_variants time_variants.cu transpose_*_generated.cu old_transpose_*_generated.cu -diag-suppress 177
    ./time_variants
fi
