//! The tensor-core products: TF32 (f32 inputs rounded to TF32, f32 accumulation) and f16
//! (f32 accumulation), generated for CUDA devices with `mma` instructions, and the shapes
//! `DOTCOMPUTE_TF32_KERNEL` / `DOTCOMPUTE_F16_KERNEL` choose among.

use super::kernel_choices;
use crate::{f16, kernel, KernelDef, Vec4};

/// Rows of `c` per group of the tensor-core products (columns: the kernels' `BN`).
pub(super) const TC_BLOCK: u32 = 128;
/// Padding of the staged `b` tile's rows (`[DEPTH][BN + 8]`): with `BN` a multiple of
/// 128, a warp's fragment reads (4 rows × 8 columns) fall in 32 different banks.
const TC_B_PAD: u32 = 8;

/// `c = a · b` in f32 on tensor cores with TF32 inputs. A group computes a 128×`BN`
/// block of `c`; its warps (`64 * BN / WARP_N` threads) each compute 64×`WARP_N` of it
/// as 4 × `WARP_N / 8` tiles of 16×8 (`mma_m16n8k8_tf32`), whose accumulators stay in
/// a local array. Per step, 128×`DEPTH` of `a` (`[128][DEPTH + 4]`: a warp's fragment
/// reads of 8 rows × 4 columns fall in 32 different banks) and `DEPTH`×`BN` of `b` are
/// staged in shared memory. The next step's elements are loaded into registers before
/// the current step is multiplied, from one load site: trip `s` loads step `s`,
/// multiplies step `s - 1`, then stores step `s`. Steps wholly inside the matrices load
/// without edge tests; elsewhere edges are zero-padded on load and masked on store: any
/// m, n, k.
///
/// `VEC` is 1 or 4: with 4 the kernel reads `a4` and `b4`, the same buffers bound as
/// `Vec4<f32>` (16-byte loads), which needs `k` and `n` to be multiples of 4 (the facade
/// picks it only then): a vector along k or along a row of `b` then lies wholly inside
/// or wholly outside the matrix, so the edge tests hold per vector. With 1 it reads `a`
/// and `b` an element at a time. (The kernel language has no way to take either kind
/// of buffer in one parameter, hence both.)
#[kernel]
fn matmul_tf32<const WARP_N: u32, const DEPTH: u32, const BN: u32, const VEC: u32>(
    a: &[f32],
    b: &[f32],
    a4: &[Vec4<f32>],
    b4: &[Vec4<f32>],
    c: &mut [f32],
    m: u32,
    n: u32,
    k: u32,
) {
    let ta = shared::<f32, { TC_BLOCK * (DEPTH + 4) }>();
    let tb = shared::<f32, { DEPTH * (BN + TC_B_PAD) }>();
    let tid = local_id().x;
    let warp = tid / 32;
    let lane = subgroup_lane();
    let g = lane / 4;
    let t = lane % 4;
    let wm = (warp / (BN / WARP_N)) * 64;
    let wn = (warp % (BN / WARP_N)) * WARP_N;
    let row0 = group_id().y * TC_BLOCK;
    let col0 = group_id().x * BN;
    let k4 = k / 4;
    let n4 = n / 4;
    // Sized for the largest shape (array lengths are Rust constants, which generic
    // arithmetic is not); a shape uses the first `WARP_N * 2`, `WARP_N / 4`, and
    // `128 * DEPTH / threads` and `DEPTH * BN / threads` elements, and the compiler
    // drops the rest (every index is a constant once the loops unroll).
    let mut acc = [0.0f32; 128];
    let mut fa = [0.0f32; 16];
    let mut fb = [0.0f32; 16];
    let mut next_a = [0.0f32; 32];
    let mut next_b = [0.0f32; 32];
    // m, n, k ≤ i32::MAX (checked by the facade): `kl + DEPTH` cannot wrap.
    let mut kl: u32 = 0;
    loop {
        let more = kl < k;
        let inside = row0 + TC_BLOCK <= m && col0 + BN <= n && kl + DEPTH <= k;
        if more {
            // Each thread loads `VEC` consecutive elements of a row per item.
            for q in 0..TC_BLOCK * DEPTH / (VEC * 64 * BN / WARP_N) {
                let e = tid + 64 * BN / WARP_N * q;
                let gr = row0 + e / (DEPTH / VEC);
                let gk = kl + (e % (DEPTH / VEC)) * VEC;
                let ok = inside || (gr < m && gk < k);
                if VEC == 4 {
                    let mut v = Vec4::splat(0.0f32);
                    if ok {
                        v = a4[gr * k4 + gk / 4];
                    }
                    next_a[q * 4] = v.x;
                    next_a[q * 4 + 1] = v.y;
                    next_a[q * 4 + 2] = v.z;
                    next_a[q * 4 + 3] = v.w;
                } else {
                    next_a[q] = if ok { a[gr * k + gk] } else { 0.0 };
                }
            }
            for q in 0..DEPTH * WARP_N / (VEC * 64) {
                let e = tid + 64 * BN / WARP_N * q;
                let gk = kl + e / (BN / VEC);
                let gc = col0 + (e % (BN / VEC)) * VEC;
                let ok = inside || (gk < k && gc < n);
                if VEC == 4 {
                    let mut v = Vec4::splat(0.0f32);
                    if ok {
                        v = b4[gk * n4 + gc / 4];
                    }
                    next_b[q * 4] = v.x;
                    next_b[q * 4 + 1] = v.y;
                    next_b[q * 4 + 2] = v.z;
                    next_b[q * 4 + 3] = v.w;
                } else {
                    next_b[q] = if ok { b[gk * n + gc] } else { 0.0 };
                }
            }
        }
        if kl > 0 {
            for ks in 0..DEPTH / 8 {
                let kb = ks * 8;
                for i in 0..4u32 {
                    let r = (wm + i * 16 + g) * (DEPTH + 4) + kb + t;
                    fa[i * 4] = ta[r];
                    fa[i * 4 + 1] = ta[r + 8 * (DEPTH + 4)];
                    fa[i * 4 + 2] = ta[r + 4];
                    fa[i * 4 + 3] = ta[r + 8 * (DEPTH + 4) + 4];
                }
                for j in 0..WARP_N / 8 {
                    let col = (kb + t) * (BN + TC_B_PAD) + wn + j * 8 + g;
                    fb[j * 2] = tb[col];
                    fb[j * 2 + 1] = tb[col + 4 * (BN + TC_B_PAD)];
                }
                for i in 0..4u32 {
                    for j in 0..WARP_N / 8 {
                        mma_m16n8k8_tf32(
                            &mut acc[(i * (WARP_N / 8) + j) * 4],
                            fa[i * 4],
                            fa[i * 4 + 1],
                            fa[i * 4 + 2],
                            fa[i * 4 + 3],
                            fb[j * 2],
                            fb[j * 2 + 1],
                        );
                    }
                }
            }
            barrier();
        }
        if !more {
            break;
        }
        for q in 0..TC_BLOCK * DEPTH / (VEC * 64 * BN / WARP_N) {
            let e = tid + 64 * BN / WARP_N * q;
            let at = (e / (DEPTH / VEC)) * (DEPTH + 4) + (e % (DEPTH / VEC)) * VEC;
            for l in 0..VEC {
                ta[at + l] = next_a[q * VEC + l];
            }
        }
        for q in 0..DEPTH * WARP_N / (VEC * 64) {
            let e = tid + 64 * BN / WARP_N * q;
            let at = (e / (BN / VEC)) * (BN + TC_B_PAD) + (e % (BN / VEC)) * VEC;
            for l in 0..VEC {
                tb[at + l] = next_b[q * VEC + l];
            }
        }
        barrier();
        kl += DEPTH;
    }
    for i in 0..4u32 {
        for j in 0..WARP_N / 8 {
            for q in 0..4u32 {
                let r = row0 + wm + i * 16 + g + (q / 2) * 8;
                let col = col0 + wn + j * 8 + 2 * t + q % 2;
                if r < m && col < n {
                    c[r * n + col] = acc[(i * (WARP_N / 8) + j) * 4 + q];
                }
            }
        }
    }
}

/// A tensor-core product: its kernel, the form with 16-byte loads where it has one
/// (used when `k` and `n` are multiples of 4), the launch shape and the arguments.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct TensorKernels {
    pub(super) kernel: &'static KernelDef,
    pub(super) vec4: Option<&'static KernelDef>,
    pub(super) threads: u32,
    pub(super) block_n: u32,
    /// Whether the kernels take `a` and `b` a second time as `Vec4` views (the TF32
    /// kernel's `a4`, `b4`, after `b`).
    pub(super) views: bool,
}

/// The TF32 product of one shape, both load widths: a group of `64 * BN / WARP_N`
/// threads computes a 128×`BN` block.
fn tf32_shape<const WARP_N: u32, const DEPTH: u32, const BN: u32>() -> TensorKernels {
    TensorKernels {
        kernel: matmul_tf32::kernel::<WARP_N, DEPTH, BN, 1>(),
        vec4: Some(matmul_tf32::kernel::<WARP_N, DEPTH, BN, 4>()),
        threads: 64 * BN / WARP_N,
        block_n: BN,
        views: true,
    }
}

/// The TF32 product's shape `(WARP_N, DEPTH, BN)`. The default, 64×64 warp tiles 32
/// deep in 128×128 blocks with 16-byte loads, was the fastest measured on an H100
/// (4096³, same run: 129 TFLOP/s against 110 for 16 deep, 105 for 128×256 blocks; an
/// earlier run without 16-byte loads had 16 deep at 95 against 87 for `w32d16` and 80
/// for `w32d32`); `DOTCOMPUTE_TF32_KERNEL` (`w32d32`, `w32d16`, `w64d16`, `w64d32`,
/// `w64d16n256`, each with a `-scalar` form that never takes 16-byte loads) picks one
/// for comparisons.
pub(super) fn tf32_variant() -> TensorKernels {
    let name = kernel_choices()
        .ok()
        .and_then(|c| c.tf32)
        .unwrap_or("w64d32");
    let (shape, scalar_only) = match name.strip_suffix("-scalar") {
        Some(shape) => (shape, true),
        None => (name, false),
    };
    let mut kernels = match shape {
        "w32d32" => tf32_shape::<32, 32, 128>(),
        "w32d16" => tf32_shape::<32, 16, 128>(),
        "w64d16" => tf32_shape::<64, 16, 128>(),
        "w64d16n256" => tf32_shape::<64, 16, 256>(),
        _ => tf32_shape::<64, 32, 128>(),
    };
    if scalar_only {
        kernels.vec4 = None;
    }
    kernels
}

/// The f16 product's shape `(BN, DEPTH)` and its launch shape: 128×128 blocks of 4
/// warps 32 deep by default (on an H100 at 4096³: 127 TFLOP/s against 122 for 16 deep
/// and 117 for 128×256 blocks, same run); `DOTCOMPUTE_F16_KERNEL` (`n128d16`,
/// `n128d32`, `n256d16`) picks one for comparisons.
pub(super) fn f16_variant() -> TensorKernels {
    let (kernel, block_n) = match kernel_choices().ok().and_then(|c| c.f16) {
        Some("n128d16") => (matmul_f16::kernel::<128, 16>(), 128),
        Some("n256d16") => (matmul_f16::kernel::<256, 16>(), 256),
        _ => (matmul_f16::kernel::<128, 32>(), 128),
    };
    TensorKernels {
        kernel,
        vec4: None,
        threads: block_n,
        block_n,
        views: false,
    }
}

/// `c = a · b` for f16 matrices on tensor cores, exact products summed in f32 and
/// rounded to f16 once at the end (cuBLAS's f16 GEMM with f32 compute). The shape of
/// [`matmul_tf32`] with 64×64 warp tiles: a group of `BN / 32` warps computes a
/// 128×`BN` block of `c`, each warp 64×64 as 4 × 8 tiles of 16×8
/// (`mma_m16n8k16_f16`) with accumulators in a local array; per step 128×`DEPTH` of `a`
/// (`[128][DEPTH + 8]`: a warp's fragment reads of 8 rows × 4 pairs of columns fall in
/// 32 different banks) and `DEPTH`×`BN` of `b` are staged in shared memory, the next
/// step's elements loaded into registers before the current one is multiplied. f16
/// elements are copied between memories as stored (no conversion on the way to the
/// instruction). Edges are zero-padded on load and masked on store: any m, n, k.
#[kernel]
fn matmul_f16<const BN: u32, const DEPTH: u32>(
    a: &[f16],
    b: &[f16],
    c: &mut [f16],
    m: u32,
    n: u32,
    k: u32,
) {
    let ta = shared::<f16, { TC_BLOCK * (DEPTH + 8) }>();
    let tb = shared::<f16, { DEPTH * (BN + TC_B_PAD) }>();
    let tid = local_id().x;
    let warp = tid / 32;
    let lane = subgroup_lane();
    let g = lane / 4;
    let t = lane % 4;
    let wm = (warp / (BN / 64)) * 64;
    let wn = (warp % (BN / 64)) * 64;
    let row0 = group_id().y * TC_BLOCK;
    let col0 = group_id().x * BN;
    let zero = f16::cast(0.0);
    // `BN` threads; each loads 128 * DEPTH / BN elements of `a` and DEPTH of `b` per
    // step (the arrays are sized for the largest shape).
    let mut acc = [0.0f32; 128];
    let mut fa: [f16; 8] = [f16::cast(0.0); 8];
    let mut fb: [f16; 32] = [f16::cast(0.0); 32];
    let mut next_a: [f16; 32] = [f16::cast(0.0); 32];
    let mut next_b: [f16; 32] = [f16::cast(0.0); 32];
    // m, n, k ≤ i32::MAX (checked by the facade): `kl + DEPTH` cannot wrap.
    let mut kl: u32 = 0;
    loop {
        let more = kl < k;
        // As in `matmul_tf32`: steps inside the matrices load without edge tests.
        let inside = row0 + TC_BLOCK <= m && col0 + BN <= n && kl + DEPTH <= k;
        if more {
            for q in 0..TC_BLOCK * DEPTH / BN {
                let e = tid + BN * q;
                let gr = row0 + e / DEPTH;
                let gk = kl + e % DEPTH;
                // Stores of loads, not of a selected value: the bits are copied.
                if inside || (gr < m && gk < k) {
                    next_a[q] = a[gr * k + gk];
                } else {
                    next_a[q] = zero;
                }
            }
            for q in 0..DEPTH {
                let e = tid + BN * q;
                let gk = kl + e / BN;
                let gc = col0 + e % BN;
                if inside || (gk < k && gc < n) {
                    next_b[q] = b[gk * n + gc];
                } else {
                    next_b[q] = zero;
                }
            }
        }
        if kl > 0 {
            for ks in 0..DEPTH / 16 {
                let kb = ks * 16;
                for j in 0..8u32 {
                    let col = (kb + 2 * t) * (BN + TC_B_PAD) + wn + j * 8 + g;
                    fb[j * 4] = tb[col];
                    fb[j * 4 + 1] = tb[col + (BN + TC_B_PAD)];
                    fb[j * 4 + 2] = tb[col + 8 * (BN + TC_B_PAD)];
                    fb[j * 4 + 3] = tb[col + 9 * (BN + TC_B_PAD)];
                }
                for i in 0..4u32 {
                    let r = (wm + i * 16 + g) * (DEPTH + 8) + kb + 2 * t;
                    let r8 = r + 8 * (DEPTH + 8);
                    fa[0] = ta[r];
                    fa[1] = ta[r + 1];
                    fa[2] = ta[r8];
                    fa[3] = ta[r8 + 1];
                    fa[4] = ta[r + 8];
                    fa[5] = ta[r + 9];
                    fa[6] = ta[r8 + 8];
                    fa[7] = ta[r8 + 9];
                    for j in 0..8u32 {
                        mma_m16n8k16_f16(
                            &mut acc[(i * 8 + j) * 4],
                            fa[0],
                            fa[1],
                            fa[2],
                            fa[3],
                            fa[4],
                            fa[5],
                            fa[6],
                            fa[7],
                            fb[j * 4],
                            fb[j * 4 + 1],
                            fb[j * 4 + 2],
                            fb[j * 4 + 3],
                        );
                    }
                }
            }
            barrier();
        }
        if !more {
            break;
        }
        for q in 0..TC_BLOCK * DEPTH / BN {
            let e = tid + BN * q;
            ta[(e / DEPTH) * (DEPTH + 8) + e % DEPTH] = next_a[q];
        }
        for q in 0..DEPTH {
            let e = tid + BN * q;
            tb[(e / BN) * (BN + TC_B_PAD) + e % BN] = next_b[q];
        }
        barrier();
        kl += DEPTH;
    }
    for i in 0..4u32 {
        for j in 0..8u32 {
            for q in 0..4u32 {
                let r = row0 + wm + i * 16 + g + (q / 2) * 8;
                let col = col0 + wn + j * 8 + 2 * t + q % 2;
                if r < m && col < n {
                    c[r * n + col] = f16::cast(acc[(i * 8 + j) * 4 + q]);
                }
            }
        }
    }
}
