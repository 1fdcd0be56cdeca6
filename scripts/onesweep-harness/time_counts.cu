// Times the Onesweep counting kernel (the generated `counts.cu`, included as KERNEL_FILE)
// over 2^28 u32 keys, 4 passes, and checks its counts against the host's. ITEMS_PER_THREAD:
// the keys a thread of it loads a round (the launch's group count follows it).
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cstdint>
#include KERNEL_FILE
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA error %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)
int main(int argc, char** argv) {
    unsigned n = argc > 1 ? atoi(argv[1]) : (1u << 28);
#ifndef ITEMS_PER_THREAD
#define ITEMS_PER_THREAD 1
#endif
    unsigned items = ITEMS_PER_THREAD;
    std::vector<unsigned> h(n);
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (unsigned i = 0; i < n; i++) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; h[i] = (unsigned)(s >> 11); }
    std::vector<unsigned> want(1024, 0);
    for (unsigned i = 0; i < n; i++) for (int p = 0; p < 4; p++) want[p * 256 + ((h[i] >> (8 * p)) & 255)]++;
    unsigned *k, *c;
    CK(cudaMalloc(&k, n * 4ull)); CK(cudaMalloc(&c, 4096));
    CK(cudaMemcpy(k, h.data(), n * 4ull, cudaMemcpyHostToDevice));
    unsigned groups = std::min((n + 256 * items - 1) / (256 * items), 1024u);
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    std::vector<float> t;
    for (int r = 0; r < 23; r++) {
        CK(cudaMemset(c, 0, 4096));
        cudaEventRecord(e0);
        dc_onesweep_counts_u32_u32_0<<<groups, 256>>>(k, c, n, 0, 32, 4, 0x7f800000u, 0, n, 1024, groups, 1, 1, 0);
        cudaEventRecord(e1);
        CK(cudaEventSynchronize(e1));
        float ms; cudaEventElapsedTime(&ms, e0, e1);
        if (r >= 3) t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    std::vector<unsigned> got(1024);
    CK(cudaMemcpy(got.data(), c, 4096, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (int i = 0; i < 1024; i++) bad += got[i] != want[i];
    printf("%-16s n=%u median %.3f ms (min %.3f, max %.3f) -> %.0f GB/s read; wrong %zu\n",
           KERNEL_NAME, n, t[t.size() / 2], t[0], t.back(), n * 4.0 / t[t.size() / 2] / 1e6, bad);
    return bad != 0;
}
