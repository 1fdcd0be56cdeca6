// Hand-written first passes of an f32 sum, to find what CUB's DeviceReduce does that
// dotcompute's generated `reduce_vec4` does not (issue 28: CUB 1.03-1.06x of a copy's
// read bandwidth on an H200, ours 0.98-1.00x). Each writes one partial a block; the
// harness adds the second pass. 256 threads a block.
#include <cstdint>

__device__ __forceinline__ float block_sum(float v) {
    __shared__ float s[256];
    unsigned t = threadIdx.x;
    s[t] = v;
    __syncthreads();
    for (unsigned h = 128; h > 0; h >>= 1) {
        if (t < h) s[t] += s[t + h];
        __syncthreads();
    }
    return s[0];
}

// As the generated form: grid-strided, two 16-byte loads in flight, 8 accumulators.
extern "C" __global__ void strided2(const float4* __restrict__ x4, float* out, unsigned nq) {
    unsigned stride = blockDim.x * gridDim.x, i = blockIdx.x * blockDim.x + threadIdx.x;
    float a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    for (; i + stride < nq; i += 2 * stride) {
        float4 p = x4[i], q = x4[i + stride];
        a0 += p.x; a1 += p.y; a2 += p.z; a3 += p.w; a4 += q.x; a5 += q.y; a6 += q.z; a7 += q.w;
    }
    if (i < nq) { float4 p = x4[i]; a0 += p.x; a1 += p.y; a2 += p.z; a3 += p.w; }
    float t = block_sum(((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)));
    if (threadIdx.x == 0) out[blockIdx.x] = t;
}

// Each block a contiguous range of tiles (CUB's "even share"): tiles of 256 x V vectors,
// V loads in flight a thread, each load coalesced over the block.
template <int V>
__device__ __forceinline__ void even_share(const float4* __restrict__ x4, float* out, unsigned nq) {
    const unsigned tile = 256 * V;
    unsigned tiles = nq / tile;
    unsigned b = blockIdx.x, g = gridDim.x;
    unsigned first = (unsigned)((uint64_t)tiles * b / g), last = (unsigned)((uint64_t)tiles * (b + 1) / g);
    float a[4 * V];
    for (int k = 0; k < 4 * V; k++) a[k] = 0;
    for (unsigned t = first; t < last; t++) {
        float4 q[V];
#pragma unroll
        for (int k = 0; k < V; k++) q[k] = x4[(size_t)t * tile + k * 256 + threadIdx.x];
#pragma unroll
        for (int k = 0; k < V; k++) { a[4 * k] += q[k].x; a[4 * k + 1] += q[k].y; a[4 * k + 2] += q[k].z; a[4 * k + 3] += q[k].w; }
    }
    // The vectors after the whole tiles: the last block.
    if (b == g - 1)
        for (unsigned i = tiles * tile + threadIdx.x; i < nq; i += 256) { float4 p = x4[i]; a[0] += p.x; a[1] += p.y; a[2] += p.z; a[3] += p.w; }
    float s = 0;
#pragma unroll
    for (int k = 0; k < 4 * V; k++) s += a[k];
    s = block_sum(s);
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}
extern "C" __global__ void even2(const float4* __restrict__ x4, float* out, unsigned nq) { even_share<2>(x4, out, nq); }
extern "C" __global__ void even4(const float4* __restrict__ x4, float* out, unsigned nq) { even_share<4>(x4, out, nq); }

// Grid-strided with the streaming (evict-first) load hint.
extern "C" __global__ void strided2_cs(const float4* __restrict__ x4, float* out, unsigned nq) {
    unsigned stride = blockDim.x * gridDim.x, i = blockIdx.x * blockDim.x + threadIdx.x;
    float a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    for (; i + stride < nq; i += 2 * stride) {
        float4 p = __ldcs(x4 + i), q = __ldcs(x4 + i + stride);
        a0 += p.x; a1 += p.y; a2 += p.z; a3 += p.w; a4 += q.x; a5 += q.y; a6 += q.z; a7 += q.w;
    }
    if (i < nq) { float4 p = x4[i]; a0 += p.x; a1 += p.y; a2 += p.z; a3 += p.w; }
    float t = block_sum(((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)));
    if (threadIdx.x == 0) out[blockIdx.x] = t;
}

// The second pass: one block sums `n` partials.
extern "C" __global__ void second(const float* __restrict__ p, float* out, unsigned n) {
    float a = 0;
    for (unsigned i = threadIdx.x; i < n; i += 256) a += p[i];
    a = block_sum(a);
    if (threadIdx.x == 0) out[0] = a;
}
