// Does a transpose of a shape whose rows are not multiples of 32 elements lose to its
// misaligned writes? Times, for f32 matrices R x C (Y = X^T, C x R): (A) the classic
// 32 x 32 tile through shared memory (as dotcompute's generated kernel: each warp
// writes 32 consecutive elements of an output row, which straddle two 128-byte lines
// when the row's start is not aligned), and (B) the same reads with every warp's write
// aligned to a 128-byte line: a block walks a strip of 32 output rows along their
// length, keeping the last two 32-row slabs of the input in a ring in shared memory, and
// writes each output row in windows that start on a line. Against cudaMemcpyAsync of
// R*C*4 bytes in the same run (ratio t_copy / t, the bench's). Every element checked.
// argv: none. Build: nvcc -O3 -arch=sm_90 -std=c++17 time_transpose.cu
#include "check.h"

__global__ void tile32(const float* __restrict__ x, float* __restrict__ y, unsigned R, unsigned C) {
    __shared__ float t[32][33];
    unsigned c0 = blockIdx.x * 32, r0 = blockIdx.y * 32, tx = threadIdx.x, ty = threadIdx.y;
    for (unsigned j = ty; j < 32; j += 8) {
        unsigned r = r0 + j, c = c0 + tx;
        if (r < R && c < C) t[j][tx] = x[(size_t)r * C + c];
    }
    __syncthreads();
    for (unsigned j = ty; j < 32; j += 8) {
        unsigned c = c0 + j, r = r0 + tx;
        if (r < R && c < C) y[(size_t)c * R + r] = t[tx][j];
    }
}

// Block: output rows c0..c0+32 (input columns), windows k0..k1 of each. Window k of
// output row c covers x in [32k - off_c, 32k + 32 - off_c), off_c = (c * R) % 32: its
// 32 elements start on a 128-byte line. It needs input rows 32k - 32 .. 32k + 31: the
// ring holds input rows modulo 64.
__global__ void aligned_writes(const float* __restrict__ x, float* __restrict__ y, unsigned R, unsigned C, unsigned per_block) {
    __shared__ float t[64][33];
    unsigned c0 = blockIdx.x * 32, tx = threadIdx.x, ty = threadIdx.y;
    unsigned windows = (R + 31) / 32 + 1;
    unsigned k0 = blockIdx.y * per_block, k1 = min(k0 + per_block, windows);
    auto load = [&](unsigned slab) {  // input rows 32 slab .. 32 slab + 31
        for (unsigned j = ty; j < 32; j += 8) {
            unsigned r = 32 * slab + j, c = c0 + tx;
            if (r < R && c < C) t[r & 63][tx] = x[(size_t)r * C + c];
        }
    };
    if (k0 > 0) load(k0 - 1);
    for (unsigned k = k0; k < k1; k++) {
        load(k);
        __syncthreads();
        for (unsigned j = ty; j < 32; j += 8) {
            unsigned c = c0 + j;
            if (c < C) {
                unsigned off = (unsigned)(((size_t)c * R) & 31);
                int r = (int)(32 * k) - (int)off + (int)tx;
                if (r >= 0 && (unsigned)r < R) y[(size_t)c * R + r] = t[r & 63][j];
            }
        }
        __syncthreads();
    }
}

int main() {
    const unsigned shapes[][2] = {{8191, 8193}, {4096, 4095}, {8192, 8192}};
    for (auto& s : shapes) {
        Shape sh(s[0], s[1]);
        unsigned R = sh.R, C = sh.C;
        size_t n = sh.n;
        float *x = (float*)sh.x, *y = (float*)sh.y;
        CK(cudaMemset(y, 0xff, 4 * n));
        auto nothing = [] {};
        float copy = sh.copy_median(nothing);
        auto check = [&](const char* what, std::vector<float> t) {
            size_t bad = wrong_elements((const unsigned*)y, sh.h, R, C);
            float m = t[t.size() / 2];
            printf("%5u x %-5u %-40s median %7.1f us (min %7.1f) copy %7.1f us -> %.3f of the copy; wrong %zu\n",
                   R, C, what, 1e3 * m, 1e3 * t[0], 1e3 * copy, copy / m, bad);
            CK(cudaMemset(y, 0xff, 4 * n));
        };
        dim3 b(32, 8);
        check("A: 32x32 tiles", time_launches(nothing, [&] { tile32<<<dim3((C + 31) / 32, (R + 31) / 32), b>>>(x, y, R, C); }));
        for (unsigned per : {8u, 16u, 32u, 64u}) {
            unsigned windows = (R + 31) / 32 + 1;
            char name[64]; snprintf(name, sizeof name, "B: aligned writes, %u windows a block", per);
            check(name, time_launches(nothing, [&] { aligned_writes<<<dim3((C + 31) / 32, (windows + per - 1) / per), b>>>(x, y, R, C, per); }));
        }
    }
    return 0;
}
