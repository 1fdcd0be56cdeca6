//! Matrix products: a vendor library where the backend has one (cuBLAS on CUDA,
//! matrixmultiply on the CPU), a generated kernel everywhere else (and on request): the
//! register-blocked one, or the shared-tile one on wgpu.

use crate::{kernel, kernel_fn, Buffer, Device, Element, Float, Launch};
pub use dotcompute_hal::Precision;
use dotcompute_hal::{Error, KernelDef, MatmulRequest, Result, StreamId};

/// Which implementation computed a matrix product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatmulPath {
    /// The backend's vendor library (cuBLAS on CUDA, matrixmultiply on the CPU).
    Vendor,
    /// dotcompute's generated register-blocked kernel.
    Generated,
}

/// Element types with a matrix product: `f32` and `f64` everywhere; `f16` and `bf16`
/// (f32 accumulation, tensor cores) where the backend's vendor library has them: cuBLAS.
pub trait MatmulElement: Element {
    /// The generated kernels, where kernels can use the type.
    #[doc(hidden)]
    fn generated() -> Option<GeneratedMatmul>;
}

/// The generated matrix-product kernels of one element type.
#[doc(hidden)]
pub struct GeneratedMatmul {
    /// Register-blocked, the next tiles loaded while multiplying, fused multiply-adds.
    pub pipelined: &'static KernelDef,
    /// The same without fusing (the CPU's).
    pub unfused: &'static KernelDef,
    /// 16×16 shared tiles (wgpu's choice).
    pub tiled: &'static KernelDef,
    /// Whether the tensor-core TF32 kernel applies (f32 only).
    pub tf32: bool,
}

impl MatmulElement for f32 {
    fn generated() -> Option<GeneratedMatmul> {
        Some(GeneratedMatmul {
            pipelined: matmul_pipelined::kernel::<f32, 1>(),
            unfused: matmul_pipelined::kernel::<f32, 0>(),
            tiled: matmul_tiled::kernel::<f32>(),
            tf32: true,
        })
    }
}
impl MatmulElement for f64 {
    fn generated() -> Option<GeneratedMatmul> {
        Some(GeneratedMatmul {
            pipelined: matmul_pipelined::kernel::<f64, 1>(),
            unfused: matmul_pipelined::kernel::<f64, 0>(),
            tiled: matmul_tiled::kernel::<f64>(),
            tf32: false,
        })
    }
}
impl MatmulElement for half::f16 {
    fn generated() -> Option<GeneratedMatmul> {
        None
    }
}
impl MatmulElement for half::bf16 {
    fn generated() -> Option<GeneratedMatmul> {
        None
    }
}

/// The library's own generated kernels (the f32 instances), for `dotcompute emit`.
#[doc(hidden)]
pub fn library_kernels() -> Vec<&'static KernelDef> {
    vec![
        matmul_pipelined::kernel::<f32, 1>(),
        matmul_tiled::kernel::<f32>(),
        tf32_variant().0,
    ]
}

/// Whether the FP32 product takes the 16×16 shared-tile kernel: on wgpu by default;
/// `DOTCOMPUTE_MATMUL_KERNEL=pipelined|tiled` picks one (comparisons), read once.
fn fp32_tiled(device: &Device) -> bool {
    static CHOICE: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let choice = CHOICE.get_or_init(|| std::env::var("DOTCOMPUTE_MATMUL_KERNEL").ok());
    match choice.as_deref() {
        Some("tiled") => true,
        Some(_) => false,
        None => device.backend_kind() == crate::BackendKind::Wgpu,
    }
}

/// TF32 is a mode of f32 products only.
fn check_precision<T: Element>(precision: Precision) -> Result<()> {
    if precision == Precision::Tf32 && T::TYPE.scalar != dotcompute_ir::ScalarType::F32 {
        return Err(Error::Unsupported {
            op: "matmul",
            detail: format!("TF32 applies to f32 products, not {}", T::TYPE),
        });
    }
    Ok(())
}

/// The error for a 16-bit product without a vendor path.
fn no_half_kernel<T: Element>(device: &Device) -> Error {
    Error::Unsupported {
        op: "matmul",
        detail: format!(
            "{} matrix products need a vendor library with 16-bit floats (cuBLAS on CUDA); \
             {} has none, and generated kernels cannot use {} yet",
            T::TYPE,
            device.label(),
            T::TYPE
        ),
    }
}

/// Edge of the shared tiles of [`matmul_tiled`] (and of its groups).
const TILE: u32 = 16;

/// `c = a · b` through 16×16 tiles of `a` and `b` in shared memory, one element of `c`
/// per thread: the generated product on wgpu, where NVIDIA Vulkan ran it at 6.2 TFLOP/s
/// at 4096³ against 2.0 for the register-blocked kernel (H100; naga's output keeps the
/// 8×8 block in memory rather than registers).
#[kernel]
fn matmul_tiled<T: Float>(a: &[T], b: &[T], c: &mut [T], m: u32, n: u32, k: u32) {
    let ta = shared::<T, { TILE * TILE }>();
    let tb = shared::<T, { TILE * TILE }>();
    let col = global_id().x;
    let row = global_id().y;
    let lx = local_id().x;
    let ly = local_id().y;
    let mut acc = T::zero();
    let tiles = (k + TILE - 1) / TILE;
    for t in 0..tiles {
        let ak = t * TILE + lx;
        let bk = t * TILE + ly;
        ta[ly * TILE + lx] = if row < m && ak < k {
            a[row * k + ak]
        } else {
            T::zero()
        };
        tb[ly * TILE + lx] = if bk < k && col < n {
            b[bk * n + col]
        } else {
            T::zero()
        };
        barrier();
        for kk in 0..TILE {
            acc += ta[ly * TILE + kk] * tb[kk * TILE + lx];
        }
        barrier();
    }
    if row < m && col < n {
        c[row * n + col] = acc;
    }
}

/// Threads per group edge of the generated product: 16×16 = 256 threads.
const GROUP_EDGE: u32 = 16;
/// Rows (and columns) of `c` each thread computes: an 8×8 register block.
const REG: u32 = 8;
/// Rows and columns of `c` per group: 128×128.
const BLOCK: u32 = GROUP_EDGE * REG;
/// Depth of the `a` and `b` tiles staged in shared memory per step.
const DEPTH: u32 = 16;
/// Row stride of the staged `a` tile (transposed, `[DEPTH][BLOCK]`): padded by
/// 32 / DEPTH so that the DEPTH rows a warp stores land in different banks.
const A_STRIDE: u32 = BLOCK + 32 / DEPTH;
/// Elements of each staged tile every thread loads (the group has 256 threads).
const LOADS: u32 = DEPTH * BLOCK / 256;

/// Thread `tid`'s LOADS elements of the `a` and `b` tiles of the step at depth `k0`
/// (zero outside the matrices), in the order `matmul_pipelined` stores them.
#[kernel_fn]
fn load_step<T: Float>(
    a: &[T],
    b: &[T],
    next_a: &mut [T],
    next_b: &mut [T],
    tid: u32,
    row0: u32,
    col0: u32,
    k0: u32,
    m: u32,
    n: u32,
    k: u32,
) {
    for q in 0..LOADS {
        let e = tid + 256 * q;
        let gr = row0 + e / DEPTH;
        let gk = k0 + e % DEPTH;
        next_a[q] = if gr < m && gk < k {
            a[gr * k + gk]
        } else {
            T::zero()
        };
        let gk = k0 + e / BLOCK;
        let gc = col0 + e % BLOCK;
        next_b[q] = if gk < k && gc < n {
            b[gk * n + gc]
        } else {
            T::zero()
        };
    }
}

/// `c = a · b` for row-major `a` (m×k), `b` (k×n), `c` (m×n), register-blocked: a group
/// of 16×16 threads computes a 128×128 block of `c`, each thread an 8×8 block held in a
/// thread-private array (the compiler keeps it in registers: the loops over it have
/// constant bounds and unroll). Per step, 128×16 of `a` (stored transposed) and 16×128 of
/// `b` are staged in shared memory; each thread then does 64 multiply-adds per 16 shared
/// reads. A thread's rows and columns are strided by 16 (row `ty + 16 i`, column
/// `tx + 16 j`), so a warp's shared reads are broadcasts or consecutive and its stores to
/// `c` are coalesced. Edges are zero-padded on load and masked on store: any m, n, k.
///
/// Pipelined: the next step's tiles are loaded from memory into registers while the
/// current step's are multiplied, so the loads' latency hides behind 1,024 multiply-adds
/// per thread instead of stalling the group at the barrier. Each multiply-add is fused
/// (`mul_add`: one rounding, as cuBLAS does), which GPUs issue as one instruction where
/// `a * b + c` is two (generated code keeps `a * b + c` unfused, for results equal on
/// every backend): on an H100 this took the kernel from 0.47× to 0.77× cuBLAS FP32.
/// `FUSED = 0` keeps `a * b + c` for the CPU, where `mul_add` is a library call without
/// the FMA target feature (the condition is a host constant: each instance has one arm).
#[kernel]
fn matmul_pipelined<T: Float, const FUSED: u32>(
    a: &[T],
    b: &[T],
    c: &mut [T],
    m: u32,
    n: u32,
    k: u32,
) {
    let ta = shared::<T, { DEPTH * A_STRIDE }>();
    let tb = shared::<T, { DEPTH * BLOCK }>();
    let tx = local_id().x;
    let ty = local_id().y;
    let tid = ty * GROUP_EDGE + tx;
    let row0 = group_id().y * BLOCK;
    let col0 = group_id().x * BLOCK;
    let mut acc = [T::zero(); 64];
    let mut a_reg = [T::zero(); 8];
    let mut b_reg = [T::zero(); 8];
    // The next step's elements of each tile, LOADS per thread (k > 0: the facade
    // refuses empty products).
    let mut next_a = [T::zero(); LOADS as usize];
    let mut next_b = [T::zero(); LOADS as usize];
    load_step(a, b, next_a, next_b, tid, row0, col0, 0, m, n, k);
    let mut k0: u32 = 0;
    while k0 < k {
        for q in 0..LOADS {
            let e = tid + 256 * q;
            ta[(e % DEPTH) * A_STRIDE + e / DEPTH] = next_a[q];
            tb[e] = next_b[q];
        }
        barrier();
        let k1 = k0 + DEPTH;
        if k1 < k {
            load_step(a, b, next_a, next_b, tid, row0, col0, k1, m, n, k);
        }
        for kk in 0..DEPTH {
            for i in 0..8u32 {
                a_reg[i] = ta[kk * A_STRIDE + ty + GROUP_EDGE * i];
            }
            for j in 0..8u32 {
                b_reg[j] = tb[kk * BLOCK + tx + GROUP_EDGE * j];
            }
            for i in 0..8u32 {
                for j in 0..8u32 {
                    if FUSED == 1 {
                        acc[i * REG + j] = a_reg[i].mul_add(b_reg[j], acc[i * REG + j]);
                    } else {
                        acc[i * REG + j] += a_reg[i] * b_reg[j];
                    }
                }
            }
        }
        barrier();
        k0 = k1;
    }
    for i in 0..8u32 {
        for j in 0..8u32 {
            let r = row0 + ty + GROUP_EDGE * i;
            let cc = col0 + tx + GROUP_EDGE * j;
            if r < m && cc < n {
                c[r * n + cc] = acc[i * REG + j];
            }
        }
    }
}

/// Rows and columns of `c` per group of the TF32 products: 128×128.
const TC_BLOCK: u32 = 128;
/// Row stride of the staged `b` tile (`[DEPTH][128]`), padded by 8 so that a warp's
/// fragment reads (4 rows × 8 columns) fall in 32 different banks.
const TC_B_STRIDE: u32 = TC_BLOCK + 8;

/// `c = a · b` in f32 on tensor cores with TF32 inputs. A group computes a 128×128
/// block of `c`; its warps (`8192 / WARP_N` threads) each compute 64×`WARP_N` of it as
/// 4 × `WARP_N / 8` tiles of 16×8 (`mma_m16n8k8_tf32`), whose accumulators stay in a
/// local array. Per step, 128×`DEPTH` of `a` (`[128][DEPTH + 4]`: a warp's fragment
/// reads of 8 rows × 4 columns fall in 32 different banks) and `DEPTH`×128 of `b` are
/// staged in shared memory. The next step's elements are loaded into registers before
/// the current step is multiplied, from one load site: trip `s` loads step `s`,
/// multiplies step `s - 1`, then stores step `s`. Edges are zero-padded on load and
/// masked on store: any m, n, k.
#[kernel]
fn matmul_tf32<const WARP_N: u32, const DEPTH: u32>(
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    m: u32,
    n: u32,
    k: u32,
) {
    let ta = shared::<f32, { TC_BLOCK * (DEPTH + 4) }>();
    let tb = shared::<f32, { DEPTH * TC_B_STRIDE }>();
    let tid = local_id().x;
    let warp = tid / 32;
    let lane = subgroup_lane();
    let g = lane / 4;
    let t = lane % 4;
    let wm = (warp / (TC_BLOCK / WARP_N)) * 64;
    let wn = (warp % (TC_BLOCK / WARP_N)) * WARP_N;
    let row0 = group_id().y * TC_BLOCK;
    let col0 = group_id().x * TC_BLOCK;
    // Sized for the largest shape (array lengths are Rust constants, which generic
    // arithmetic is not); a shape uses the first `WARP_N * 2`, `WARP_N / 4` and
    // `DEPTH * WARP_N / 64` elements, and the compiler drops the rest (every index is
    // a constant once the loops unroll).
    let mut acc = [0.0f32; 128];
    let mut fa = [0.0f32; 16];
    let mut fb = [0.0f32; 16];
    let mut next_a = [0.0f32; 32];
    let mut next_b = [0.0f32; 32];
    // m, n, k ≤ i32::MAX (checked by the facade): `kl + DEPTH` cannot wrap.
    let mut kl: u32 = 0;
    loop {
        let more = kl < k;
        if more {
            for q in 0..TC_BLOCK * DEPTH / (8192 / WARP_N) {
                let e = tid + 8192 / WARP_N * q;
                let gr = row0 + e / DEPTH;
                let gk = kl + e % DEPTH;
                next_a[q] = if gr < m && gk < k {
                    a[gr * k + gk]
                } else {
                    0.0
                };
                let gk = kl + e / TC_BLOCK;
                let gc = col0 + e % TC_BLOCK;
                next_b[q] = if gk < k && gc < n {
                    b[gk * n + gc]
                } else {
                    0.0
                };
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
                    let col = (kb + t) * TC_B_STRIDE + wn + j * 8 + g;
                    fb[j * 2] = tb[col];
                    fb[j * 2 + 1] = tb[col + 4 * TC_B_STRIDE];
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
        for q in 0..TC_BLOCK * DEPTH / (8192 / WARP_N) {
            let e = tid + 8192 / WARP_N * q;
            ta[(e / DEPTH) * (DEPTH + 4) + e % DEPTH] = next_a[q];
            tb[(e / TC_BLOCK) * TC_B_STRIDE + e % TC_BLOCK] = next_b[q];
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

/// The TF32 product's shape `(WARP_N, DEPTH)` and its threads per group. The default,
/// 64×64 warp tiles 16 deep, was the fastest of the three on an H100 (4096³: 95 TFLOP/s
/// against 87 for `w32d16` and 80 for `w32d32`, same run); `DOTCOMPUTE_TF32_KERNEL`
/// (`w32d32`, `w32d16`, `w64d16`) picks one for comparisons.
fn tf32_variant() -> (&'static KernelDef, u32) {
    static CHOICE: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let choice = CHOICE.get_or_init(|| std::env::var("DOTCOMPUTE_TF32_KERNEL").ok());
    match choice.as_deref() {
        Some("w32d32") => (matmul_tf32::kernel::<32, 32>(), 256),
        Some("w32d16") => (matmul_tf32::kernel::<32, 16>(), 256),
        _ => (matmul_tf32::kernel::<64, 16>(), 128),
    }
}

impl Device {
    /// `c = a · b` for row-major matrices: `a` is m×k, `b` is k×n, `c` is m×n (each buffer
    /// holds at least that many elements; only the leading part is used). Runs the
    /// backend's vendor library when it has one (cuBLAS on CUDA, matrixmultiply on the
    /// CPU), else the generated kernel; returns which ran. Work is enqueued like a launch. `f16` and `bf16`
    /// products accumulate in f32 and need the vendor path (cuBLAS on tensor cores);
    /// elsewhere they are an [`Error::Unsupported`].
    ///
    /// ```
    /// use dotcompute::{Device, MatmulPath};
    /// let d = Device::cpu();
    /// let a = d.upload(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap(); // 2×3
    /// let b = d.upload(&[1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0]).unwrap(); // 3×2
    /// let mut c = d.alloc::<f32>(4).unwrap();
    /// let path = d.matmul(&a, &b, &mut c, 2, 2, 3).unwrap();
    /// assert_eq!(c.to_vec().unwrap(), vec![4.0, 5.0, 10.0, 11.0]);
    /// assert_eq!(path, MatmulPath::Vendor); // matrixmultiply on the CPU
    /// ```
    pub fn matmul<T: MatmulElement>(
        &self,
        a: &Buffer<T>,
        b: &Buffer<T>,
        c: &mut Buffer<T>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<MatmulPath> {
        self.matmul_with(a, b, c, m, n, k, Precision::Full)
    }

    /// [`Device::matmul`] at a chosen [`Precision`]: `Precision::Tf32` lets an `f32`
    /// product run on TF32 tensor cores (cuBLAS on CUDA, about 1e-3 relative error);
    /// backends without TF32 compute it in full FP32. TF32 for any other element type is
    /// an [`Error::Unsupported`].
    ///
    /// ```
    /// use dotcompute::{Device, Precision};
    /// let d = Device::cpu();
    /// let a = d.upload(&[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    /// let mut c = d.alloc::<f32>(4).unwrap();
    /// d.matmul_with(&a, &a, &mut c, 2, 2, 2, Precision::Tf32).unwrap();
    /// assert_eq!(c.to_vec().unwrap(), vec![7.0, 10.0, 15.0, 22.0]);
    /// ```
    #[allow(clippy::too_many_arguments)] // the BLAS shape: three matrices, three sizes, one mode
    pub fn matmul_with<T: MatmulElement>(
        &self,
        a: &Buffer<T>,
        b: &Buffer<T>,
        c: &mut Buffer<T>,
        m: usize,
        n: usize,
        k: usize,
        precision: Precision,
    ) -> Result<MatmulPath> {
        self.check_matmul(a, b, c, m, n, k)?;
        check_precision::<T>(precision)?;
        let request = MatmulRequest {
            a: a.raw(),
            b: b.raw(),
            c: c.raw(),
            m,
            n,
            k,
            elem: T::TYPE.scalar,
            precision,
        };
        if self.backend().has_blas(T::TYPE.scalar) {
            let s = StreamId::DEFAULT;
            self.before_use(a.uses(), s, false)?;
            self.before_use(b.uses(), s, false)?;
            self.before_use(c.uses(), s, true)?;
            self.backend().gemm(s, &request)?;
            return Ok(MatmulPath::Vendor);
        }
        // Without a vendor library the generated kernel honours the precision too.
        self.matmul_generated_with(a, b, c, m, n, k, precision)?;
        Ok(MatmulPath::Generated)
    }

    /// `c = a · b` through dotcompute's generated kernel, on any backend: the
    /// register-blocked kernel, or on wgpu the shared-tile kernel (faster there).
    pub fn matmul_generated<T: MatmulElement>(
        &self,
        a: &Buffer<T>,
        b: &Buffer<T>,
        c: &mut Buffer<T>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<()> {
        self.matmul_generated_with(a, b, c, m, n, k, Precision::Full)
    }

    /// [`Device::matmul_generated`] at a chosen [`Precision`]: with `Precision::Tf32`, an
    /// `f32` product runs the generated tensor-core kernel (`mma_m16n8k8_tf32`, TF32
    /// inputs, f32 accumulation: about 1e-3 relative error) on devices with capability
    /// `tensor_cores`, and the FP32 kernel elsewhere. TF32 for any other element type is
    /// an [`Error::Unsupported`].
    #[allow(clippy::too_many_arguments)] // the BLAS shape: three matrices, three sizes, one mode
    pub fn matmul_generated_with<T: MatmulElement>(
        &self,
        a: &Buffer<T>,
        b: &Buffer<T>,
        c: &mut Buffer<T>,
        m: usize,
        n: usize,
        k: usize,
        precision: Precision,
    ) -> Result<()> {
        self.check_matmul(a, b, c, m, n, k)?;
        check_precision::<T>(precision)?;
        let kernels = T::generated().ok_or_else(|| no_half_kernel::<T>(self))?;
        let (kernel, launch) =
            if precision == Precision::Tf32 && kernels.tf32 && self.info().caps.tensor_cores {
                let (tf32, threads) = tf32_variant();
                let launch = Launch::grid2d(
                    n.div_ceil(TC_BLOCK as usize) * threads as usize,
                    m.div_ceil(TC_BLOCK as usize),
                )
                .group2d(threads, 1);
                (tf32, launch)
            } else if fp32_tiled(self) {
                (kernels.tiled, Launch::grid2d(n, m).group2d(TILE, TILE))
            } else {
                let cpu = self.backend_kind() == crate::BackendKind::Cpu;
                (
                    if cpu {
                        kernels.unfused
                    } else {
                        kernels.pipelined
                    },
                    Launch::grid2d(
                        n.div_ceil(BLOCK as usize) * GROUP_EDGE as usize,
                        m.div_ceil(BLOCK as usize) * GROUP_EDGE as usize,
                    )
                    .group2d(GROUP_EDGE, GROUP_EDGE),
                )
            };
        let (m, n, k) = (m as u32, n as u32, k as u32);
        self.launch_kernel(
            kernel,
            launch,
            &[
                crate::Arg::buffer(a),
                crate::Arg::buffer(b),
                crate::Arg::buffer_mut(c),
                crate::Arg::scalar(m),
                crate::Arg::scalar(n),
                crate::Arg::scalar(k),
            ],
        )
    }

    fn check_matmul<T: Element>(
        &self,
        a: &Buffer<T>,
        b: &Buffer<T>,
        c: &Buffer<T>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<()> {
        let range = |detail: String| Error::Range {
            op: "matmul",
            detail,
        };
        if m == 0 || n == 0 || k == 0 {
            return Err(range(format!("empty product ({m}×{k} · {k}×{n})")));
        }
        // cuBLAS takes i32 dimensions; the generated kernel u32 indices.
        let max = i32::MAX as usize;
        let too_big = |x: usize, y: usize| x.checked_mul(y).is_none_or(|p| p > u32::MAX as usize);
        if m > max || n > max || k > max || too_big(m, k) || too_big(k, n) || too_big(m, n) {
            return Err(range(format!(
                "{m}×{k} · {k}×{n} is too large (each matrix at most {} elements)",
                u32::MAX
            )));
        }
        for (name, buf, need) in [("a", a, m * k), ("b", b, k * n), ("c", c, m * n)] {
            if buf.len() < need {
                return Err(range(format!(
                    "`{name}` holds {} elements; {m}×{k} · {k}×{n} needs {need}",
                    buf.len()
                )));
            }
            if buf.device().id() != self.id() {
                return Err(range(format!(
                    "`{name}` belongs to device #{}, the product runs on {}",
                    buf.device().id(),
                    self.label()
                )));
            }
        }
        Ok(())
    }
}
