// Times two-pass f32 sums of 2^28 elements against CUB's DeviceReduce::Sum and the
// device copy, in one program (ratio t_copy / (2 t), the bench's): the generated
// first pass (`reduce_vec4`) with the generated second (`reduce_strided`), as the
// library launches them, and the hand-written first passes of variants.cu with its
// second. Every sum is checked against a double-precision sum on the host.
// argv: [n]. Built by run.sh.
#include "../onesweep-harness/harness.h"
#include <cub/cub.cuh>
#include <cmath>
typedef unsigned u32;
extern "C" __global__ void dc_reduce_vec4_f32_0(const uint4*, const float*, float*, u32, float, u32, u32, u32, u32, u32, u32, u32);
extern "C" __global__ void dc_reduce_strided_f32_0(const float*, float*, u32, float, u32, u32, u32, u32, u32, u32);
extern "C" __global__ void strided2(const float4*, float*, unsigned);
extern "C" __global__ void strided2_cs(const float4*, float*, unsigned);
extern "C" __global__ void even2(const float4*, float*, unsigned);
extern "C" __global__ void even4(const float4*, float*, unsigned);
extern "C" __global__ void second(const float*, float*, unsigned);

int main(int argc, char** argv) {
    unsigned n = argc > 1 ? strtoul(argv[1], nullptr, 10) : (1u << 28);
    cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0));
    unsigned sms = p.multiProcessorCount;
    std::vector<float> h(n);
    std::vector<unsigned> r = random_keys(n);
    double want = 0;
    for (unsigned i = 0; i < n; i++) { h[i] = (r[i] >> 8) * (1.0f / 16777216.0f); want += h[i]; }
    float *x, *y, *part, *out;
    CK(cudaMalloc(&x, 4ull * n)); CK(cudaMalloc(&y, 4ull * n)); CK(cudaMalloc(&part, 4 * 8192)); CK(cudaMalloc(&out, 4));
    CK(cudaMemcpy(x, h.data(), 4ull * n, cudaMemcpyHostToDevice));
    auto nothing = [] {};
    std::vector<float> tc = time_launches(nothing, [&] { CK(cudaMemcpyAsync(y, x, 4ull * n, cudaMemcpyDeviceToDevice)); });
    float copy = tc[tc.size() / 2];
    printf("%s, %u multiprocessors, n = %u; copy of 4n bytes: median %.1f us\n", p.name, sms, n, 1e3 * copy);
    auto report = [&](const char* what, unsigned groups, std::vector<float> t) {
        float got; CK(cudaMemcpy(&got, out, 4, cudaMemcpyDeviceToHost));
        bool ok = fabs(got - want) <= 1e-5 * want;
        float m = t[t.size() / 2];
        printf("%-34s groups %5u  median %7.1f us (min %7.1f, max %7.1f)  %.3f of the copy's read bandwidth%s\n",
               what, groups, 1e3 * m, 1e3 * t[0], 1e3 * t.back(), copy / (2 * m), ok ? "" : "  WRONG SUM");
        if (!ok) exit(1);
    };
    unsigned nq = n / 4;
    for (unsigned per : {4u, 8u}) {
        unsigned g = std::min(std::max(per * sms, 32u), 2048u);
        report("generated (library's two launches)", g, time_launches(nothing, [&] {
            dc_reduce_vec4_f32_0<<<g, 256>>>((const uint4*)x, x, part, n, 0.0f, nq, n, g, g * 256, 1, 1, 0);
            dc_reduce_strided_f32_0<<<1, 256>>>(part, out, g, 0.0f, g, 1, 256, 1, 1, 0);
        }));
        report("strided, 2 in flight", g, time_launches(nothing, [&] {
            strided2<<<g, 256>>>((const float4*)x, part, nq); second<<<1, 256>>>(part, out, g); }));
        report("strided, 2 in flight, __ldcs", g, time_launches(nothing, [&] {
            strided2_cs<<<g, 256>>>((const float4*)x, part, nq); second<<<1, 256>>>(part, out, g); }));
    }
    for (unsigned per : {2u, 4u, 5u, 8u}) {
        unsigned g = per * sms;
        report("even share, 2 in flight", g, time_launches(nothing, [&] {
            even2<<<g, 256>>>((const float4*)x, part, nq); second<<<1, 256>>>(part, out, g); }));
        report("even share, 4 in flight", g, time_launches(nothing, [&] {
            even4<<<g, 256>>>((const float4*)x, part, nq); second<<<1, 256>>>(part, out, g); }));
    }
    // The same sums right after a copy (its written lines still dirty in L2, as in the
    // bench's round-robin of an operation and its copy), and after a copy then a read of
    // 2.5x the L2 (the lines clean again); the copy and the read untimed.
    {
        unsigned g = 8 * sms;
        auto gen = [&] {
            dc_reduce_vec4_f32_0<<<g, 256>>>((const uint4*)x, x, part, n, 0.0f, nq, n, g, g * 256, 1, 1, 0);
            dc_reduce_strided_f32_0<<<1, 256>>>(part, out, g, 0.0f, g, 1, 256, 1, 1, 0);
        };
        auto after_copy = [&] { CK(cudaMemcpyAsync(y, x, 4ull * n, cudaMemcpyDeviceToDevice)); CK(cudaDeviceSynchronize()); };
        auto after_clean = [&] {
            after_copy();
            strided2<<<g, 256>>>((const float4*)y, part + 4096, (125u << 20) / 16);
            CK(cudaDeviceSynchronize());
        };
        report("generated, after a copy", g, time_launches(after_copy, gen));
        report("generated, after a copy and a read", g, time_launches(after_clean, gen));
        report("generated, back to back", g, time_launches(nothing, gen));
        auto read_only = [&] { strided2<<<g, 256>>>((const float4*)y, part + 4096, (125u << 20) / 16); CK(cudaDeviceSynchronize()); };
        auto tcc = time_launches(read_only, [&] { CK(cudaMemcpyAsync(y, x, 4ull * n, cudaMemcpyDeviceToDevice)); });
        printf("copy after a read (clean lines): median %.1f us (copy after a copy: %.1f us)\n", 1e3 * tcc[tcc.size() / 2], 1e3 * copy);
    }
    size_t tb = 0; void* temp = nullptr;
    CK(cub::DeviceReduce::Sum(nullptr, tb, x, out, (int64_t)n)); CK(cudaMalloc(&temp, tb));
    report("CUB DeviceReduce::Sum", 0, time_launches(nothing, [&] { CK(cub::DeviceReduce::Sum(temp, tb, x, out, (int64_t)n)); }));
    tc = time_launches(nothing, [&] { CK(cudaMemcpyAsync(y, x, 4ull * n, cudaMemcpyDeviceToDevice)); });
    printf("copy again: median %.1f us\n", 1e3 * tc[tc.size() / 2]);
    return 0;
}
