// What both transpose timers share: reading the output back and counting the elements
// of the R x C input `h` that are not where a transpose puts them in device array `y`.
#pragma once
#include "../onesweep-harness/harness.h"
static size_t wrong_elements(const unsigned* y, const std::vector<unsigned>& h, unsigned R, unsigned C) {
    size_t n = (size_t)R * C;
    std::vector<unsigned> g(n);
    CK(cudaMemcpy(g.data(), y, 4 * n, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < C; c++) bad += g[c * R + r] != h[r * C + c];
    return bad;
}
