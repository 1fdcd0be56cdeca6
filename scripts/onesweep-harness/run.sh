#!/usr/bin/env bash
# Times the generated Onesweep kernels on a CUDA machine with nvcc and no Rust (the GPU
# machine). Here, write the kernels' CUDA beside these files:
#   mkdir -p .device/onesweep && cp scripts/onesweep-harness/* .device/onesweep/
#   DOTCOMPUTE_ONESWEEP_DUMP=$PWD/.device/onesweep cargo test -p dotcompute-ops --lib \
#     write_the_passes_cuda_for_the_harness -- --ignored
# then run `bash .device/onesweep/run.sh` there (device tool: carry [".device/onesweep"]).
# Edit the .cu files there to try a variant before changing the kernel language's source:
# a launch costs seconds, where a device-pack of the ops costs a quarter of an hour.
set -e
cd "$(dirname "$0")"
# keys a tile: keys alone take wider tiles than pairs
tile_keys=$(grep -o 's_stage\[[0-9]*\]' pass_keys.cu | head -1 | tr -dc 0-9)
tile_pairs=$(grep -o 's_stage\[[0-9]*\]' pass_pairs.cu | head -1 | tr -dc 0-9)
# kernel names end in their const generics (key kind, keys a thread)
kfn_keys=$(grep -o 'dc_onesweep_pass_[0-9a-z_]*' pass_keys.cu | head -1)
kfn_pairs=$(grep -o 'dc_onesweep_pass_[0-9a-z_]*' pass_pairs.cu | head -1)
build() { nvcc -O3 -arch=sm_90 -std=c++17 -Xptxas -v "$@" 2>&1 | grep -E "registers|error" || true; }
build -DKERNEL_FILE='"pass_keys.cu"' -DKERNEL_NAME='"pass, keys"' -DTILE=${tile_keys}u -DKFN=$kfn_keys -o pass_keys.bin time_pass.cu
build -DKERNEL_FILE='"pass_pairs.cu"' -DKERNEL_NAME='"pass, pairs"' -DTILE=${tile_pairs}u -DKFN=$kfn_pairs -DPAIRS -o pass_pairs.bin time_pass.cu
build -DKERNEL_FILE='"counts.cu"' -DKERNEL_NAME='"counts"' -o counts.bin time_counts.cu
./pass_keys.bin && ./pass_pairs.bin && ./counts.bin
# sizes that are not whole tiles, other digits
./pass_keys.bin 1000003 8 && ./pass_pairs.bin $((tile_pairs + 1)) 24 && ./counts.bin 1000003
