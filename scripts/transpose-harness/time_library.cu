// Times the library's generated u32 transpose (column order; tiles of 32, 64 and 128
// input rows, as the tuner's candidates) on shapes whose input rows, output rows, both or
// neither are multiples of 32 elements, against cudaMemcpyAsync of the same bytes in the
// same program (ratio t_copy / t, the bench's). Every element checked. Write the kernels
// first here: cargo test -p dotcompute-ops --lib write_the_transposes_cuda_for_the_harness
// -- --ignored; build: see run.sh.
#include "check.h"
typedef unsigned u32;
#define DECL(T) extern "C" __global__ void dc_transpose_kernel_u32_1_##T(const u32*, u32*, u32, u32, u32, u32, u32, u32, u32, u32);
DECL(32) DECL(64) DECL(128)
#define DECLS(T) extern "C" __global__ void dc_transpose_sector_writes_u32_##T##_8_8(const u32*, u32*, u32, u32, u32, u32, u32, u32, u32, u32);
DECLS(64) DECLS(128)

int main() {
    const unsigned shapes[][2] = {{8191, 8193}, {8192, 8192}, {8192, 8193}, {8191, 8192}, {4096, 4095}};
    for (auto& s : shapes) {
        Shape sh(s[0], s[1]);  // input R x C (h x w)
        unsigned R = sh.R, C = sh.C, *x = sh.x, *y = sh.y;
        size_t n = sh.n;
        auto nothing = [] {};
        float copy = sh.copy_median(nothing);
        // Forms 32, 64, 128: the plain kernel; 1064, 1128: the sector-aligned writes.
        for (unsigned form : {32u, 64u, 128u, 1064u, 1128u}) {
            CK(cudaMemset(y, 0xff, 4 * n));
            unsigned tall = form % 1000, sectors = form > 1000;
            unsigned tiles_y = (R + (sectors ? 7 : 0) + tall - 1) / tall, tiles_x = (C + 31) / 32;
            dim3 grid(tiles_y, tiles_x), block(32, 8);
            auto go = [&] {
                if (form == 32) dc_transpose_kernel_u32_1_32<<<grid, block>>>(x, y, C, R, n, n, tiles_y * 32, tiles_x * 8, 1, 0);
                if (form == 64) dc_transpose_kernel_u32_1_64<<<grid, block>>>(x, y, C, R, n, n, tiles_y * 32, tiles_x * 8, 1, 0);
                if (form == 128) dc_transpose_kernel_u32_1_128<<<grid, block>>>(x, y, C, R, n, n, tiles_y * 32, tiles_x * 8, 1, 0);
                if (form == 1064) dc_transpose_sector_writes_u32_64_8_8<<<grid, block>>>(x, y, C, R, n, n, tiles_y * 32, tiles_x * 8, 1, 0);
                if (form == 1128) dc_transpose_sector_writes_u32_128_8_8<<<grid, block>>>(x, y, C, R, n, n, tiles_y * 32, tiles_x * 8, 1, 0);
            };
            auto t = time_launches(nothing, go);
            size_t bad = wrong_elements(y, sh.h, R, C);
            float m = t[t.size() / 2];
            printf("%5u x %-5u column-raster-%-3u%s median %7.1f us (min %7.1f) copy %7.1f us -> %.3f of the copy; wrong %zu\n",
                   R, C, tall, sectors ? "-sectors" : "        ", 1e3 * m, 1e3 * t[0], 1e3 * copy, copy / m, bad);
        }
    }
    return 0;
}
