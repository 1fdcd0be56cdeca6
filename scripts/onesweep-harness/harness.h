// What both timers share: the error check, the keys, and timing 3 warm-up and 20 timed
// launches with CUDA events (sorted times; the median is t[t.size() / 2]).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cstdint>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA error %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)

// `n` pseudo-random u32 keys (xorshift64, fixed seed: every run sorts the same keys).
static std::vector<unsigned> random_keys(unsigned n) {
    std::vector<unsigned> h(n);
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (unsigned i = 0; i < n; i++) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; h[i] = (unsigned)(s >> 11); }
    return h;
}

// `reset()` (untimed), then `launch()` between two events, 23 times; the last 20 times
// in ms, sorted.
template <class Reset, class Launch>
static std::vector<float> time_launches(Reset reset, Launch launch) {
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    std::vector<float> t;
    for (int r = 0; r < 23; r++) {
        reset();
        cudaEventRecord(e0);
        launch();
        cudaEventRecord(e1);
        CK(cudaEventSynchronize(e1));
        float ms; cudaEventElapsedTime(&ms, e0, e1);
        if (r >= 3) t.push_back(ms);
    }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    return t;
}
