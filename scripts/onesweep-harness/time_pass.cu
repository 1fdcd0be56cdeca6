// Times one Onesweep pass (the generated `pass_keys.cu` or, with -DPAIRS, `pass_pairs.cu`,
// included as KERNEL_FILE, its kernel named KFN; TILE: its keys a tile) over 2^28 random
// u32 keys (argv: n, shift), 3 warm-up and 20 timed launches, and checks every key (and
// value) against a stable counting sort by the digit at `shift`.
#include "harness.h"
#include KERNEL_FILE
// KFN and TILE come from run.sh, which reads them from KERNEL_FILE: keys alone and pairs
// take different tiles, so no default would be right for both.
#if !defined(KFN) || !defined(TILE)
#error "compile with -DKFN=<the kernel's name> -DTILE=<its keys a tile>u (see run.sh)"
#endif
int main(int argc, char** argv) {
    unsigned n = argc > 1 ? atoi(argv[1]) : (1u << 28);
    unsigned shift = argc > 2 ? atoi(argv[2]) : 0;
    std::vector<unsigned> h = random_keys(n);
    std::vector<unsigned> counts(256, 0), bases(256, 0);
    for (unsigned i = 0; i < n; i++) counts[(h[i] >> shift) & 255]++;
    for (int d = 1; d < 256; d++) bases[d] = bases[d - 1] + counts[d - 1];
    unsigned tiles = (n + TILE - 1) / TILE;
    unsigned *k, *o, *b, *st, *ctr, *v;
    CK(cudaMalloc(&k, n * 4ull)); CK(cudaMalloc(&o, n * 4ull)); unsigned *vo = nullptr;
#ifdef PAIRS
    CK(cudaMalloc(&v, n * 4ull)); CK(cudaMalloc(&vo, n * 4ull));
    { std::vector<unsigned> idx(n); for (unsigned i = 0; i < n; i++) idx[i] = i; CK(cudaMemcpy(v, idx.data(), n * 4ull, cudaMemcpyHostToDevice)); }
#else
    CK(cudaMalloc(&v, 4)); vo = v;
#endif
    CK(cudaMalloc(&b, 1024)); CK(cudaMalloc(&st, tiles * 1024ull)); CK(cudaMalloc(&ctr, 16));
    CK(cudaMemcpy(k, h.data(), n * 4ull, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, bases.data(), 1024, cudaMemcpyHostToDevice));
    std::vector<float> t = time_launches(
        [&] { CK(cudaMemset(st, 0, tiles * 1024ull)); CK(cudaMemset(ctr, 0, 16)); CK(cudaMemset(o, 0xff, n * 4ull)); },
        [&] {
            KFN<<<tiles, 256>>>(k, v, o, vo, b, st, ctr, n, 0, shift, 255, 0x7f800000u, 0,
                n,
#ifdef PAIRS
                n, n, n,
#else
                1, n, 1,
#endif
                256, tiles * 256, 1, tiles, 1, 1, 0);
        });
    std::vector<unsigned> out(n);
    CK(cudaMemcpy(out.data(), o, n * 4ull, cudaMemcpyDeviceToHost));
    std::vector<unsigned> pos(bases);
    size_t bad = 0;
#ifdef PAIRS
    std::vector<unsigned> vout(n);
    CK(cudaMemcpy(vout.data(), vo, n * 4ull, cudaMemcpyDeviceToHost));
    for (unsigned i = 0; i < n; i++) { unsigned d = (h[i] >> shift) & 255; unsigned at = pos[d]++; if (out[at] != h[i] || vout[at] != i) bad++; }
#else
    for (unsigned i = 0; i < n; i++) { unsigned d = (h[i] >> shift) & 255; if (out[pos[d]++] != h[i]) bad++; }
#endif
    printf("%-16s n=%u shift=%u median %.3f ms (min %.3f, max %.3f) -> %.1f GKey/s a pass; wrong %zu\n",
           KERNEL_NAME, n, shift, t[t.size() / 2], t[0], t.back(), n / t[t.size() / 2] / 1e6, bad);
    return bad != 0;
}
