// The library's generated u32 transposes (plain tiles of 32, 64 and 128 rows and the
// sector-aligned writes of 64 and 128, column order) beside those of an earlier commit
// (`old_…`) and a hand-written sector form (`walk`: a group may also walk `per` tiles
// down its column strip, loading the next tile's input into registers before it writes
// the current one; per = 1 is the library's form; per 2 to 16 lost, run of session 33).
// Every timed launch starts after an untimed read of 128 MiB (as the bench's
// `settle_caches`), against cudaMemcpyAsync of the same bytes timed the same way (ratio
// t_copy / t). Every element checked. Build and run: see run.sh.
#include "check.h"
typedef unsigned u32;
// The library's generated kernels (written by the ops crate's ignored test
// write_the_transposes_cuda_for_the_harness), and those of an earlier commit renamed
// `old_…` (to compare two forms in one run: copy the files to old_*.cu with
// `sed s/dc_transpose_/old_transpose_/g` before changing the kernels).
#define DECL(P, T) extern "C" __global__ void P##_transpose_kernel_u32_1_##T(const u32*, u32*, u32, u32, u32, u32, u32, u32, u32, u32);
DECL(dc, 32) DECL(dc, 64) DECL(dc, 128) DECL(old, 32) DECL(old, 64) DECL(old, 128)
#define DECLS(T) extern "C" __global__ void dc_transpose_sector_writes_u32_##T##_8_8(const u32*, u32*, u32, u32, u32, u32, u32, u32, u32, u32);
DECLS(64) DECLS(128)
#define DECLS_OLD(T) extern "C" __global__ void old_transpose_sector_writes_u32_##T(const u32*, u32*, u32, u32, u32, u32, u32, u32, u32, u32, u32);
DECLS_OLD(64) DECLS_OLD(128)
constexpr u32 SECTOR = 8;  // u32 elements of a 32-byte sector

// Input rows y0 - SECTOR .. y0 + TALL of column strip `tile_x` into `t` (row r: input row
// y0 + r - SECTOR).
template <int TALL, int ROWS>
__device__ __forceinline__ void load_rows(const u32* __restrict__ x, u32 w, u32 h, u32 tile_x, u32 y0, u32 (&v)[(TALL + SECTOR) / ROWS]) {
    u32 col = tile_x * 32 + threadIdx.x;
#pragma unroll
    for (int k = 0; k < (TALL + SECTOR) / ROWS; k++) {
        u32 r = threadIdx.y + k * ROWS, sh = y0 + r;
        v[k] = (sh >= SECTOR && sh - SECTOR < h && col < w) ? x[(size_t)(sh - SECTOR) * w + col] : 0u;
    }
}

template <int TALL, int ROWS>
__device__ __forceinline__ void store_tile(u32* __restrict__ y, u32 w, u32 h, u32 tile_x, u32 y0, u32 (*t)[33]) {
#pragma unroll
    for (int k = 0; k < 32 / ROWS; k++) {
        u32 c = threadIdx.y + k * ROWS, ox = tile_x * 32 + c;
        if (ox < w) {
            u32 s = (u32)(((size_t)ox * h + y0) & (SECTOR - 1));
#pragma unroll
            for (int m = 0; m < TALL / 32; m++) {
                u32 j = threadIdx.x + m * 32, sh = y0 + j;
                if (sh >= s && sh - s < h) y[(size_t)ox * h + sh - s] = t[j + SECTOR - s][c];
            }
        }
    }
}

// Tiles `k0 .. k0 + per` of column strip blockIdx.y (per = 1: the library's form).
template <int TALL, int ROWS>
__global__ void __launch_bounds__(32 * ROWS) walk(const u32* __restrict__ x, u32* __restrict__ y, u32 w, u32 h, u32 per) {
    static_assert((TALL + SECTOR) % ROWS == 0 && 32 % ROWS == 0 && TALL % 32 == 0, "shape");
    __shared__ u32 t[TALL + SECTOR][33];
    u32 tile_x = blockIdx.y, tiles_y = (h + SECTOR - 1 + TALL - 1) / TALL;
    u32 k0 = blockIdx.x * per, k1 = min(k0 + per, tiles_y);
    u32 v[(TALL + SECTOR) / ROWS];
    load_rows<TALL, ROWS>(x, w, h, tile_x, k0 * TALL, v);
    for (u32 k = k0; k < k1; k++) {
        if (k > k0) __syncthreads();
#pragma unroll
        for (int i = 0; i < (TALL + SECTOR) / ROWS; i++) t[threadIdx.y + i * ROWS][threadIdx.x] = v[i];
        __syncthreads();
        if (k + 1 < k1) load_rows<TALL, ROWS>(x, w, h, tile_x, (k + 1) * TALL, v);
        store_tile<TALL, ROWS>(y, w, h, tile_x, k * TALL, t);
    }
}

__global__ void read_all(const uint4* __restrict__ p, size_t n, u32* sink) {
    uint4 a = {0, 0, 0, 0};
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint4 b = p[i]; a.x ^= b.x; a.y ^= b.y; a.z ^= b.z; a.w ^= b.w;
    }
    if ((a.x ^ a.y ^ a.z ^ a.w) == 0x12345678u) *sink = 1;
}

int main() {
    const unsigned shapes[][2] = {{8191, 8193}, {8192, 8192}, {4096, 4095}};
    size_t settle_n = (128u << 20) / 16;
    uint4* settle; u32* sink;
    CK(cudaMalloc(&settle, settle_n * 16)); CK(cudaMemset(settle, 1, settle_n * 16)); CK(cudaMalloc(&sink, 4));
    auto reset = [&] { read_all<<<132 * 8, 256>>>(settle, settle_n, sink); };
    for (auto& s : shapes) {
        Shape sh(s[0], s[1]);  // input R x C (h x w)
        u32 R = sh.R, C = sh.C, *x = sh.x, *y = sh.y;
        size_t n = sh.n;
        float copy = sh.copy_median(reset);
        auto run = [&](const char* form, u32 tall, u32 rows, u32 per, auto kernel) {
            CK(cudaMemset(y, 0xff, 4 * n));
            u32 tiles_y = (R + SECTOR - 1 + tall - 1) / tall, tiles_x = (C + 31) / 32;
            dim3 grid((tiles_y + per - 1) / per, tiles_x), block(32, rows);
            auto t = time_launches(reset, [&] { kernel<<<grid, block>>>(x, y, C, R, per); });
            size_t bad = wrong_elements(y, sh.h, R, C);
            float m = t[t.size() / 2];
            printf("%5u x %-5u %s tall %3u rows %2u per %2u: median %7.1f us (min %7.1f) copy %7.1f -> %.3f; wrong %zu\n",
                   R, C, form, tall, rows, per, 1e3 * m, 1e3 * t[0], 1e3 * copy, copy / m, bad);
        };
        for (int round = 0; round < 2; round++) {
            // Forms: tall 32, 64, 128 plain; +1000: sector writes; +10000: the old kernels.
            for (u32 form : {32u, 64u, 128u, 1064u, 1128u, 10032u, 10064u, 10128u, 11064u, 11128u}) {
                CK(cudaMemset(y, 0xff, 4 * n));
                u32 tall = form % 1000, sectors = (form / 1000) % 10, old = form >= 10000;
                u32 tiles_y = (R + (sectors ? SECTOR - 1 : 0) + tall - 1) / tall, tiles_x = (C + 31) / 32;
                dim3 grid(tiles_y, tiles_x), block(32, 8);
                u32 gx = tiles_y * 32, gy = tiles_x * 8;
                auto t = time_launches(reset, [&] {
                    switch (form) {
                        case 32: dc_transpose_kernel_u32_1_32<<<grid, block>>>(x, y, C, R, n, n, gx, gy, 1, 0); break;
                        case 64: dc_transpose_kernel_u32_1_64<<<grid, block>>>(x, y, C, R, n, n, gx, gy, 1, 0); break;
                        case 128: dc_transpose_kernel_u32_1_128<<<grid, block>>>(x, y, C, R, n, n, gx, gy, 1, 0); break;
                        case 1064: dc_transpose_sector_writes_u32_64_8_8<<<grid, block>>>(x, y, C, R, n, n, gx, gy, 1, 0); break;
                        case 1128: dc_transpose_sector_writes_u32_128_8_8<<<grid, block>>>(x, y, C, R, n, n, gx, gy, 1, 0); break;
                        case 10032: old_transpose_kernel_u32_1_32<<<grid, block>>>(x, y, C, R, n, n, gx, gy, 1, 0); break;
                        case 10064: old_transpose_kernel_u32_1_64<<<grid, block>>>(x, y, C, R, n, n, gx, gy, 1, 0); break;
                        case 10128: old_transpose_kernel_u32_1_128<<<grid, block>>>(x, y, C, R, n, n, gx, gy, 1, 0); break;
                        case 11064: old_transpose_sector_writes_u32_64<<<grid, block>>>(x, y, C, R, 8, n, n, gx, gy, 1, 0); break;
                        case 11128: old_transpose_sector_writes_u32_128<<<grid, block>>>(x, y, C, R, 8, n, n, gx, gy, 1, 0); break;
                    }
                });
                size_t bad = wrong_elements(y, sh.h, R, C);
                float m = t[t.size() / 2];
                printf("%5u x %-5u %s column-raster-%u%-8s median %7.1f us (min %7.1f) copy %7.1f -> %.3f; wrong %zu\n",
                       R, C, old ? "old" : "new", tall, sectors ? "-sectors" : "", 1e3 * m, 1e3 * t[0], 1e3 * copy, copy / m, bad);
            }
            run("hand", 128, 8, 1, walk<128, 8>);
        }
    }
    return 0;
}
