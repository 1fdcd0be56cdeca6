// What the transpose timers share: one shape's arrays with the copy they are measured
// against, and reading the output back and counting the elements of the R x C input `h`
// that are not where a transpose puts them in device array `y`.
#pragma once
#include "../onesweep-harness/harness.h"
// An R x C shape's device arrays: x the random input (`h` its host copy), y the
// transpose's output, z the copy's; freed with the shape.
struct Shape {
    unsigned R, C;
    size_t n;
    std::vector<unsigned> h;
    unsigned *x, *y, *z;
    Shape(unsigned rows, unsigned cols) : R(rows), C(cols), n((size_t)rows * cols), h(random_keys((unsigned)n)) {
        CK(cudaMalloc(&x, 4 * n)); CK(cudaMalloc(&y, 4 * n)); CK(cudaMalloc(&z, 4 * n));
        CK(cudaMemcpy(x, h.data(), 4 * n, cudaMemcpyHostToDevice));
    }
    ~Shape() { cudaFree(x); cudaFree(y); cudaFree(z); }
    // The median time of cudaMemcpyAsync of the input's bytes, each run after `reset`
    // (the reference every ratio is against).
    template <class Reset>
    float copy_median(Reset reset) {
        auto t = time_launches(reset, [&] { CK(cudaMemcpyAsync(z, x, 4 * n, cudaMemcpyDeviceToDevice)); });
        return t[t.size() / 2];
    }
};
static size_t wrong_elements(const unsigned* y, const std::vector<unsigned>& h, unsigned R, unsigned C) {
    size_t n = (size_t)R * C;
    std::vector<unsigned> g(n);
    CK(cudaMemcpy(g.data(), y, 4 * n, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < C; c++) bad += g[c * R + r] != h[r * C + c];
    return bad;
}
