// The vendor libraries' figures for issue 28's table, measured on this device in one run
// with the same definitions as `dotcompute bench ops`: CUB (the CUDA toolkit's CCCL) for
// reduce, scan, radix sort, histograms and copy-if, cuBLAS `geam` for transposes. Every
// ratio is against a device-to-device `cudaMemcpyAsync` timed in the same run, as the
// bench's are: a read-only operation of B bytes against the copy of B bytes (which moves
// 2B), ratio = t_copy / (2 t); one that reads and writes B bytes, ratio = t_copy / t.
// 3 warm-up and 20 timed runs each (CUDA events), median. Every result is checked on the
// host (a wrong result exits 1), so a figure is for work that was done.
#include <cub/cub.cuh>
#include <cublas_v2.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#define CK(x) do { cudaError_t ck_e = (x); if (ck_e != cudaSuccess) { printf("CUDA error %s at line %d\n", cudaGetErrorString(ck_e), __LINE__); exit(1); } } while (0)
#define CB(x) do { cublasStatus_t cb_e = (x); if (cb_e != CUBLAS_STATUS_SUCCESS) { printf("cuBLAS error %d at line %d\n", (int)cb_e, __LINE__); exit(1); } } while (0)

static int failures = 0;
static void check(bool ok, const char* what) {
    if (!ok) { printf("WRONG: %s\n", what); failures++; }
}

// Pseudo-random words from their index (the same in every run).
__host__ __device__ inline uint32_t hash(uint64_t i, uint32_t seed) {
    uint64_t x = i * 0x9E3779B97F4A7C15ull + seed;
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
    return (uint32_t)x;
}
__global__ void fill_u32(uint32_t* p, size_t n, uint32_t seed, uint32_t mask) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = hash(i, seed) & mask;
}
__global__ void fill_u8(uint8_t* p, size_t n, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = (uint8_t)hash(i, seed);
}
__global__ void fill_unit_f32(float* p, size_t n, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = (hash(i, seed) >> 8) * (1.0f / 16777216.0f);
}

// `launch()` between two events, 23 times after `reset()` each; the median of the last 20, ms.
template <class Reset, class Launch>
static float median_ms(Reset reset, Launch launch) {
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    std::vector<float> t;
    for (int r = 0; r < 23; r++) {
        reset();
        CK(cudaEventRecord(e0));
        launch();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 3) t.push_back(ms);
    }
    CK(cudaGetLastError());
    CK(cudaEventDestroy(e0)); CK(cudaEventDestroy(e1));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}
static void nothing() {}

// The device-to-device copy of `bytes` (the bench's reference), ms.
static float copy_ms(size_t bytes) {
    void *a, *b; CK(cudaMalloc(&a, bytes)); CK(cudaMalloc(&b, bytes));
    CK(cudaMemset(a, 1, bytes));
    float t = median_ms(nothing, [&] { CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); });
    CK(cudaFree(a)); CK(cudaFree(b));
    return t;
}

// Scratch storage for CUB's two-phase calls, grown as needed.
static void* temp = nullptr;
static size_t temp_bytes = 0;
static void need_temp(size_t bytes) {
    if (bytes > temp_bytes) { if (temp) CK(cudaFree(temp)); CK(cudaMalloc(&temp, bytes)); temp_bytes = bytes; }
}

static void row(const char* what, float ms, float copy, double ratio, const char* unit_note) {
    printf("%-44s %9.3f ms  copy %8.3f ms  ratio %.3f %s\n", what, ms, copy, ratio, unit_note);
}

int main(int argc, char** argv) {
    const size_t n = argc > 1 ? strtoull(argv[1], nullptr, 10) : (1ull << 28);
    cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0));
    int driver = 0, runtime = 0; cudaDriverGetVersion(&driver); cudaRuntimeGetVersion(&runtime);
    printf("%s, driver API %d, runtime %d, CCCL %d.%d.%d, n = %zu\n", p.name, driver, runtime,
           CCCL_MAJOR_VERSION, CCCL_MINOR_VERSION, CCCL_PATCH_VERSION, n);
    const int G = 4 * p.multiProcessorCount, B = 256;
    const float copy4n = copy_ms(4 * n), copy1n = copy_ms(n);

    // Reduce sum f32: reads 4n bytes.
    {
        float *x, *out; CK(cudaMalloc(&x, 4 * n)); CK(cudaMalloc(&out, 4));
        fill_unit_f32<<<G, B>>>(x, n, 1);
        size_t tb = 0; cub::DeviceReduce::Sum(nullptr, tb, x, out, (int64_t)n); need_temp(tb);
        float t = median_ms(nothing, [&] { CK(cub::DeviceReduce::Sum(temp, tb, x, out, (int64_t)n)); });
        std::vector<float> h(n); CK(cudaMemcpy(h.data(), x, 4 * n, cudaMemcpyDeviceToHost));
        double want = 0; for (float v : h) want += v;
        float got; CK(cudaMemcpy(&got, out, 4, cudaMemcpyDeviceToHost));
        check(fabs(got - want) <= 1e-5 * want, "reduce sum");
        row("reduce sum f32 (DeviceReduce::Sum)", t, copy4n, copy4n / (2 * t), "of the copy's read bandwidth");
        CK(cudaFree(x)); CK(cudaFree(out));
    }
    // Exclusive scan u32: reads and writes 4n bytes.
    {
        uint32_t *x, *y; CK(cudaMalloc(&x, 4 * n)); CK(cudaMalloc(&y, 4 * n));
        fill_u32<<<G, B>>>(x, n, 2, 1023);
        size_t tb = 0; cub::DeviceScan::ExclusiveSum(nullptr, tb, x, y, (int64_t)n); need_temp(tb);
        float t = median_ms(nothing, [&] { CK(cub::DeviceScan::ExclusiveSum(temp, tb, x, y, (int64_t)n)); });
        std::vector<uint32_t> hx(n), hy(n);
        CK(cudaMemcpy(hx.data(), x, 4 * n, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(hy.data(), y, 4 * n, cudaMemcpyDeviceToHost));
        uint32_t run = 0; bool ok = true;
        for (size_t i = 0; i < n; i++) { ok &= hy[i] == run; run += hx[i]; }
        check(ok, "exclusive scan");
        row("exclusive scan u32 (DeviceScan::ExclusiveSum)", t, copy4n, copy4n / t, "of the copy");
        CK(cudaFree(x)); CK(cudaFree(y));
    }
    // Radix sort of u32 keys, then of u32 pairs (positions as values): GKey/s.
    for (int pairs = 0; pairs < 2; pairs++) {
        uint32_t *k, *ko, *v = nullptr, *vo = nullptr;
        CK(cudaMalloc(&k, 4 * n)); CK(cudaMalloc(&ko, 4 * n));
        fill_u32<<<G, B>>>(k, n, 3, 0xffffffffu);
        size_t tb = 0;
        if (pairs) {
            CK(cudaMalloc(&v, 4 * n)); CK(cudaMalloc(&vo, 4 * n));
            std::vector<uint32_t> iota(n); for (size_t i = 0; i < n; i++) iota[i] = (uint32_t)i;
            CK(cudaMemcpy(v, iota.data(), 4 * n, cudaMemcpyHostToDevice));
            cub::DeviceRadixSort::SortPairs(nullptr, tb, k, ko, v, vo, (int64_t)n);
        } else {
            cub::DeviceRadixSort::SortKeys(nullptr, tb, k, ko, (int64_t)n);
        }
        need_temp(tb);
        float t = median_ms(nothing, [&] {
            if (pairs) CK(cub::DeviceRadixSort::SortPairs(temp, tb, k, ko, v, vo, (int64_t)n));
            else CK(cub::DeviceRadixSort::SortKeys(temp, tb, k, ko, (int64_t)n));
        });
        std::vector<uint32_t> hk(n), hko(n), hvo;
        CK(cudaMemcpy(hk.data(), k, 4 * n, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(hko.data(), ko, 4 * n, cudaMemcpyDeviceToHost));
        bool ok = true;
        for (size_t i = 1; i < n; i++) ok &= hko[i - 1] <= hko[i];
        if (pairs) {
            hvo.resize(n); CK(cudaMemcpy(hvo.data(), vo, 4 * n, cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < n; i++) ok &= hvo[i] < n && hk[hvo[i]] == hko[i];
            for (size_t i = 1; i < n; i++) ok &= hko[i - 1] != hko[i] || hvo[i - 1] < hvo[i];  // stable
        } else {
            // The same keys: their sums of powers 1 and 2 (sorting 2^28 keys on the host
            // would take longer than the rest of the run).
            uint64_t s1 = 0, s2 = 0, t1 = 0, t2 = 0;
            for (size_t i = 0; i < n; i++) { s1 += hk[i]; s2 += (uint64_t)hk[i] * hk[i]; t1 += hko[i]; t2 += (uint64_t)hko[i] * hko[i]; }
            ok &= s1 == t1 && s2 == t2;
        }
        check(ok, pairs ? "sort pairs" : "sort keys");
        printf("%-44s %9.3f ms  %.2f G%s/s\n", pairs ? "radix sort u32 pairs (DeviceRadixSort)" : "radix sort u32 keys (DeviceRadixSort)",
               t, n / (t * 1e6), pairs ? " pairs" : "Key");
        CK(cudaFree(k)); CK(cudaFree(ko)); if (v) { CK(cudaFree(v)); CK(cudaFree(vo)); }
    }
    // Histogram, 256 even bins: n bytes (against the copy of n bytes), then n f32 in [0, 1).
    {
        uint8_t* x; unsigned* h; CK(cudaMalloc(&x, n)); CK(cudaMalloc(&h, 256 * 4));
        fill_u8<<<G, B>>>(x, n, 4);
        size_t tb = 0;
        cub::DeviceHistogram::HistogramEven(nullptr, tb, x, h, 257, 0, 256, (int64_t)n); need_temp(tb);
        float t = median_ms(nothing, [&] { CK(cub::DeviceHistogram::HistogramEven(temp, tb, x, h, 257, 0, 256, (int64_t)n)); });
        std::vector<uint8_t> hx(n); CK(cudaMemcpy(hx.data(), x, n, cudaMemcpyDeviceToHost));
        std::vector<unsigned> want(256, 0), got(256);
        for (size_t i = 0; i < n; i++) want[hx[i]]++;
        CK(cudaMemcpy(got.data(), h, 1024, cudaMemcpyDeviceToHost));
        check(got == want, "histogram u8");
        row("histogram 256 bins u8 (DeviceHistogram)", t, copy1n, copy1n / (2 * t), "of the copy's read bandwidth");
        CK(cudaFree(x));
        float* f; CK(cudaMalloc(&f, 4 * n));
        fill_unit_f32<<<G, B>>>(f, n, 5);
        tb = 0;
        cub::DeviceHistogram::HistogramEven(nullptr, tb, f, h, 257, 0.0f, 1.0f, (int64_t)n); need_temp(tb);
        t = median_ms(nothing, [&] { CK(cub::DeviceHistogram::HistogramEven(temp, tb, f, h, 257, 0.0f, 1.0f, (int64_t)n)); });
        std::vector<float> hf(n); CK(cudaMemcpy(hf.data(), f, 4 * n, cudaMemcpyDeviceToHost));
        std::fill(want.begin(), want.end(), 0);
        for (size_t i = 0; i < n; i++) want[std::min(255, (int)(hf[i] * 256.0f))]++;
        CK(cudaMemcpy(got.data(), h, 1024, cudaMemcpyDeviceToHost));
        check(got == want, "histogram f32");
        row("histogram 256 bins f32 (DeviceHistogram)", t, copy4n, copy4n / (2 * t), "of the copy's read bandwidth");
        CK(cudaFree(f)); CK(cudaFree(h));
    }
    // Copy-if of u32 by u32 flags, then by byte flags, half kept: elements a second
    // against the copy's (t_copy(4n) / t), as the bench counts them.
    for (int bytes = 0; bytes < 2; bytes++) {
        uint32_t *x, *y, *flags32; uint8_t* flags8; int64_t* kept;
        CK(cudaMalloc(&x, 4 * n)); CK(cudaMalloc(&y, 4 * n)); CK(cudaMalloc(&flags32, 4 * n)); CK(cudaMalloc(&flags8, n)); CK(cudaMalloc(&kept, 8));
        fill_u32<<<G, B>>>(x, n, 6, 0xffffffffu);
        fill_u32<<<G, B>>>(flags32, n, 7, 1);
        std::vector<uint32_t> hf(n); CK(cudaMemcpy(hf.data(), flags32, 4 * n, cudaMemcpyDeviceToHost));
        std::vector<uint8_t> hf8(hf.begin(), hf.end()); CK(cudaMemcpy(flags8, hf8.data(), n, cudaMemcpyHostToDevice));
        size_t tb = 0;
        if (bytes) cub::DeviceSelect::Flagged(nullptr, tb, x, flags8, y, kept, (int64_t)n);
        else cub::DeviceSelect::Flagged(nullptr, tb, x, flags32, y, kept, (int64_t)n);
        need_temp(tb);
        float t = median_ms(nothing, [&] {
            if (bytes) CK(cub::DeviceSelect::Flagged(temp, tb, x, flags8, y, kept, (int64_t)n));
            else CK(cub::DeviceSelect::Flagged(temp, tb, x, flags32, y, kept, (int64_t)n));
        });
        std::vector<uint32_t> hx(n), hy(n); int64_t hk;
        CK(cudaMemcpy(hx.data(), x, 4 * n, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(hy.data(), y, 4 * n, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&hk, kept, 8, cudaMemcpyDeviceToHost));
        size_t j = 0; bool ok = true;
        for (size_t i = 0; i < n; i++) if (hf[i]) { ok &= j < (size_t)hk && hy[j] == hx[i]; j++; }
        check(ok && j == (size_t)hk, "copy-if");
        row(bytes ? "copy-if u32, u8 flags, 50% (DeviceSelect)" : "copy-if u32, u32 flags, 50% (DeviceSelect)", t, copy4n, copy4n / t, "(elements/s against the copy's)");
        CK(cudaFree(x)); CK(cudaFree(y)); CK(cudaFree(flags32)); CK(cudaFree(flags8)); CK(cudaFree(kept));
    }
    // Transpose of row-major rows x cols 4-byte elements (cuBLAS geam, alpha 1, beta 0).
    {
        cublasHandle_t handle; CB(cublasCreate(&handle));
        const int shapes[2][2] = {{4096, 4095}, {8191, 8193}};
        for (auto& s : shapes) {
            const int rows = s[0], cols = s[1];
            const size_t elems = (size_t)rows * cols;
            float *x, *y, *zeros;
            CK(cudaMalloc(&x, 4 * elems)); CK(cudaMalloc(&y, 4 * elems)); CK(cudaMalloc(&zeros, 4 * elems));
            CK(cudaMemset(zeros, 0, 4 * elems));
            fill_unit_f32<<<G, B>>>(x, elems, 8);
            const float one = 1.0f, zero = 0.0f;
            // Row-major x is column-major cols x rows (ld cols); its transpose, row-major
            // cols x rows, is column-major rows x cols (ld rows). B (times beta = 0) is a
            // buffer of its own.
            auto geam = [&] {
                return cublasSgeam(handle, CUBLAS_OP_T, CUBLAS_OP_N, rows, cols, &one, x, cols, &zero, zeros, rows, y, rows);
            };
            cublasStatus_t first = geam();
            if (first != CUBLAS_STATUS_SUCCESS) {
                printf("transpose %dx%d: cublasSgeam returned status %d; skipped\n", rows, cols, (int)first);
                CK(cudaFree(x)); CK(cudaFree(y)); CK(cudaFree(zeros));
                continue;
            }
            float t = median_ms(nothing, [&] { CB(geam()); });
            std::vector<float> hx(elems), hy(elems);
            CK(cudaMemcpy(hx.data(), x, 4 * elems, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(hy.data(), y, 4 * elems, cudaMemcpyDeviceToHost));
            bool ok = true;
            for (int r = 0; r < rows; r++) for (int c = 0; c < cols; c++) ok &= hy[(size_t)c * rows + r] == hx[(size_t)r * cols + c];
            check(ok, "transpose");
            float copy = copy_ms(4 * elems);
            char what[80]; snprintf(what, sizeof what, "transpose %dx%d 4-byte (cublasSgeam)", rows, cols);
            row(what, t, copy, copy / t, "of the copy");
            CK(cudaFree(x)); CK(cudaFree(y)); CK(cudaFree(zeros));
        }
        CB(cublasDestroy(handle));
    }
    printf(failures ? "%d WRONG\n" : "every result checked\n", failures);
    return failures != 0;
}
