// Times the Onesweep counting kernel (the generated `counts.cu`, included as KERNEL_FILE)
// over 2^28 u32 keys, 4 passes, and checks its counts against the host's. ITEMS_PER_THREAD:
// the keys a thread of it loads a round (the launch's group count follows it).
#include "harness.h"
#include KERNEL_FILE
#ifndef ITEMS_PER_THREAD
#define ITEMS_PER_THREAD 1
#endif
int main(int argc, char** argv) {
    unsigned n = argc > 1 ? atoi(argv[1]) : (1u << 28);
    unsigned items = ITEMS_PER_THREAD;
    std::vector<unsigned> h = random_keys(n);
    std::vector<unsigned> want(1024, 0);
    for (unsigned i = 0; i < n; i++) for (int p = 0; p < 4; p++) want[p * 256 + ((h[i] >> (8 * p)) & 255)]++;
    unsigned *k, *c;
    CK(cudaMalloc(&k, n * 4ull)); CK(cudaMalloc(&c, 4096));
    CK(cudaMemcpy(k, h.data(), n * 4ull, cudaMemcpyHostToDevice));
    unsigned groups = std::min((n + 256 * items - 1) / (256 * items), 1024u);
    std::vector<float> t = time_launches(
        [&] { CK(cudaMemset(c, 0, 4096)); },
        [&] { dc_onesweep_counts_u32_u32_0<<<groups, 256>>>(k, c, n, 0, 32, 4, 0x7f800000u, 0, n, 1024, groups, 1, 1, 0); });
    std::vector<unsigned> got(1024);
    CK(cudaMemcpy(got.data(), c, 4096, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (int i = 0; i < 1024; i++) bad += got[i] != want[i];
    printf("%-16s n=%u median %.3f ms (min %.3f, max %.3f) -> %.0f GB/s read; wrong %zu\n",
           KERNEL_NAME, n, t[t.size() / 2], t[0], t.back(), n * 4.0 / t[t.size() / 2] / 1e6, bad);
    return bad != 0;
}
