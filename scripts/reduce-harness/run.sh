#!/usr/bin/env bash
# Times the generated f32 sum, hand-written variants and CUB's on a CUDA machine with nvcc
# and no Rust (the GPU machine). Here, write the generated kernels first:
#   cargo test -p dotcompute-ops --lib write_the_f32_sum_cuda_for_the_harness -- --ignored
# then run `bash scripts/reduce-harness/run.sh` there (generated files are git-ignored:
# carry them). Twice, to see the spread between runs.
set -e
cd "$(dirname "$0")"
nvcc -O3 -arch=sm_90 -std=c++17 -o time_reduce time_reduce.cu variants.cu reduce_vec4_generated.cu reduce_strided_generated.cu
cuobjdump -sass time_reduce > time_reduce.sass 2>/dev/null || true
./time_reduce
./time_reduce
