//! Matrix products: a vendor library where the backend has one (cuBLAS on CUDA,
//! matrixmultiply on the CPU), a generated kernel everywhere else (and on request): the
//! register-blocked one, or the shared-tile one on wgpu.

use crate::{kernel, kernel_fn, Buffer, Device, Element, Float, Launch};
pub use dotcompute_hal::Precision;
use dotcompute_hal::{Error, GeneratedProduct, KernelDef, MatmulRequest, Result, StreamId};

mod tensor;
pub use tensor::TensorKernels;
use tensor::{f16_variant, tf32_variant, TC_BLOCK};

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
    /// Kernels on the ordinary arithmetic units, summing in the element type (f32, f64;
    /// none for f16, whose sums would lose most of their bits).
    pub cores: Option<CoreKernels>,
    /// The tensor-core kernel (with its launch shape) on devices with capability
    /// `tensor_cores`, and whether it only runs at `Precision::Tf32` (f32 inputs rounded
    /// to TF32; the f16 kernel multiplies exactly and runs at any precision).
    pub tensor: Option<(TensorVariant, bool)>,
}

/// Picks a tensor-core kernel and its launch shape (read from the environment once).
#[doc(hidden)]
pub type TensorVariant = fn() -> TensorKernels;

/// The generated products on the ordinary arithmetic units.
#[doc(hidden)]
pub struct CoreKernels {
    /// Register-blocked, the next tiles loaded while multiplying, fused multiply-adds;
    /// a thread's rows and columns strided by 16, the staged depth in steps of two
    /// (wgpu's and Metal's: NVIDIA Vulkan 26.1 → 28.1 TFLOP/s at 4096³ for the pairs,
    /// H200, 2026-11-28, run124).
    pub pipelined: &'static KernelDef,
    /// The same with each thread's rows and columns in runs of four (CUDA's: NVRTC reads
    /// each run from shared memory as one vector; NVIDIA's Vulkan compiler does not, and
    /// there it ran 8 % slower, H100, 2026-11-27).
    pub quads: &'static KernelDef,
    /// The same without fusing (the CPU's).
    pub unfused: &'static KernelDef,
    /// 16×16 shared tiles (wgpu's choice).
    pub tiled: &'static KernelDef,
}

impl MatmulElement for f32 {
    fn generated() -> Option<GeneratedMatmul> {
        Some(GeneratedMatmul {
            cores: Some(CoreKernels {
                pipelined: matmul_pipelined::kernel::<f32, 1, 0, 1>(),
                quads: matmul_pipelined::kernel::<f32, 1, 1, 0>(),
                unfused: matmul_pipelined::kernel::<f32, 0, 0, 0>(),
                tiled: matmul_tiled::kernel::<f32>(),
            }),
            tensor: Some((tf32_variant, true)),
        })
    }
}
impl MatmulElement for f64 {
    fn generated() -> Option<GeneratedMatmul> {
        Some(GeneratedMatmul {
            cores: Some(CoreKernels {
                pipelined: matmul_pipelined::kernel::<f64, 1, 0, 1>(),
                quads: matmul_pipelined::kernel::<f64, 1, 1, 0>(),
                unfused: matmul_pipelined::kernel::<f64, 0, 0, 0>(),
                tiled: matmul_tiled::kernel::<f64>(),
            }),
            tensor: None,
        })
    }
}
impl MatmulElement for half::f16 {
    fn generated() -> Option<GeneratedMatmul> {
        Some(GeneratedMatmul {
            cores: None,
            tensor: Some((f16_variant, false)),
        })
    }
}
impl MatmulElement for half::bf16 {
    fn generated() -> Option<GeneratedMatmul> {
        // bf16 is a storage type: kernels cannot use it.
        None
    }
}

/// The library's own generated kernels (the f32 instances), for `dotcompute emit`.
#[doc(hidden)]
pub fn library_kernels() -> Vec<&'static KernelDef> {
    let tf32 = tf32_variant();
    let mut kernels = vec![
        matmul_pipelined::kernel::<f32, 1, 0, 1>(),
        matmul_pipelined::kernel::<f32, 1, 1, 0>(),
        matmul_tiled::kernel::<f32>(),
        tf32.kernel,
    ];
    // The `-scalar` comparison shapes have no 16-byte form.
    kernels.extend(tf32.vec4);
    kernels.push(f16_variant().kernel);
    kernels
}

/// Whether an `m`×`n` FP32 product takes the 16×16 shared-tile kernel instead of the
/// register-blocked one: where the device says so for products of its size
/// ([`GeneratedProduct::BlockedStrided`]'s `tiled_below_blocks`: wgpu below 64 blocks of
/// 128×128, where too few groups fill the GPU (at 512² the blocked kernel ran at half the
/// tiled one's speed on an H200, from 1024² at 1.9–3.8×), and always on software
/// adapters). `DOTCOMPUTE_MATMUL_KERNEL=pipelined|quads|tiled` picks one (comparisons).
fn fp32_tiled(device: &Device, m: usize, n: usize) -> bool {
    match kernel_choices().ok().and_then(|c| c.matmul) {
        Some(choice) => choice == "tiled",
        None => match device.info().caps.generated_product {
            GeneratedProduct::BlockedStrided { tiled_below_blocks } => {
                let blocks = m.div_ceil(BLOCK as usize) * n.div_ceil(BLOCK as usize);
                blocks < tiled_below_blocks as usize
            }
            GeneratedProduct::BlockedQuads | GeneratedProduct::Unfused => false,
        },
    }
}

/// The accepted values of the kernel settings (`None`: unset, the default kernel).
#[derive(Clone, Copy)]
struct KernelChoices {
    matmul: Option<&'static str>,
    tf32: Option<&'static str>,
    f16: Option<&'static str>,
}

/// The kernel settings, or `Error::Config` when one has a value it does not accept: a
/// misspelt choice would otherwise measure the default while claiming another kernel.
/// Checked before every generated product; valid settings are read once per process
/// (products are a hot path), refused ones again on each call.
fn kernel_choices() -> Result<KernelChoices> {
    static READ: std::sync::OnceLock<KernelChoices> = std::sync::OnceLock::new();
    if let Some(choices) = READ.get() {
        return Ok(*choices);
    }
    use dotcompute_hal::settings::choices::{F16_KERNEL, MATMUL_KERNEL, TF32_KERNEL};
    let [matmul, tf32, f16] = [MATMUL_KERNEL, TF32_KERNEL, F16_KERNEL].map(|c| c.read());
    let choices = KernelChoices {
        matmul: matmul?,
        tf32: tf32?,
        f16: f16?,
    };
    Ok(*READ.get_or_init(|| choices))
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

/// The error for a 16-bit product with neither a vendor library nor tensor cores.
fn no_half_kernel<T: Element>(device: &Device) -> Error {
    let generated = if T::TYPE.scalar == dotcompute_ir::ScalarType::F16 {
        "generated f16 products need tensor cores (capability `tensor_cores`: CUDA devices \
         of compute capability 8.0 or later)"
    } else {
        "generated kernels cannot use it (a storage type)"
    };
    Error::Unsupported {
        op: "matmul",
        detail: format!(
            "{} matrix products need a vendor library with 16-bit floats (cuBLAS on CUDA) \
             or tensor cores; {} has neither ({generated})",
            T::TYPE,
            device.label(),
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
/// Row stride of the staged `a` tile in the `QUADS` layout: a multiple of four, so a run
/// of four rows starts 16-byte aligned (a warp's transposed stores then meet in pairs).
const QUAD_A_STRIDE: u32 = BLOCK + 4;
/// Elements of each staged tile every thread loads (the group has 256 threads).
const LOADS: u32 = DEPTH * BLOCK / 256;

/// Row (or column) `i` of the 8 that the thread at position `t` of its group's edge
/// computes, within the group's block: strided by the edge (`t + 16 i`), or with `quads`
/// in two runs of four (`4 t + i % 4 + 64 (i / 4)`). `quads` is the kernel's host
/// constant, so the builder keeps one arm.
#[kernel_fn]
fn thread_line(t: u32, i: u32, quads: u32) -> u32 {
    if quads == 1 {
        4 * t + i % 4 + 64 * (i / 4)
    } else {
        t + GROUP_EDGE * i
    }
}

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
///
/// `PAIRS = 1` steps through the staged depth two at a time, the two steps written out
/// (the printer writes out the inner loop of two trips, not the 16 of the whole depth,
/// whose module NVIDIA's Vulkan compiler took 161 s to build), which gives the driver
/// two steps' shared reads and multiply-adds to schedule together (the gain is measured;
/// that this is its cause is a guess, not a profile). On NVIDIA Vulkan
/// 26.1 → 28.1 TFLOP/s at 4096³, the first build 0.39 → 0.45 s (H200, run124). CUDA's
/// compiler writes the loop out itself.
///
/// `QUADS = 1` places a thread's rows and columns in two runs of four instead
/// (rows `4 ty + i % 4 + 64 (i / 4)`, likewise columns), with the staged `a` tile's rows
/// padded to a multiple of four: each run is four consecutive shared elements at an
/// offset divisible by four, which a compiler may read as one 16-byte load (4 shared
/// reads per step of `kk` instead of 16).
#[kernel]
fn matmul_pipelined<T: Float, const FUSED: u32, const QUADS: u32, const PAIRS: u32>(
    a: &[T],
    b: &[T],
    c: &mut [T],
    m: u32,
    n: u32,
    k: u32,
) {
    let ta = shared::<T, { DEPTH * QUAD_A_STRIDE }>();
    let tb = shared::<T, { DEPTH * BLOCK }>();
    let tx = local_id().x;
    let ty = local_id().y;
    let tid = ty * GROUP_EDGE + tx;
    let a_stride = if QUADS == 1 { QUAD_A_STRIDE } else { A_STRIDE };
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
            ta[(e % DEPTH) * a_stride + e / DEPTH] = next_a[q];
            tb[e] = next_b[q];
        }
        barrier();
        let k1 = k0 + DEPTH;
        if k1 < k {
            load_step(a, b, next_a, next_b, tid, row0, col0, k1, m, n, k);
        }
        for kk2 in 0..DEPTH / (1 + PAIRS) {
            for u in 0..1 + PAIRS {
                let kk = kk2 * (1 + PAIRS) + u;
                for i in 0..8u32 {
                    a_reg[i] = ta[kk * a_stride + thread_line(ty, i, QUADS)];
                }
                for j in 0..8u32 {
                    b_reg[j] = tb[kk * BLOCK + thread_line(tx, j, QUADS)];
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
        }
        barrier();
        k0 = k1;
    }
    for i in 0..8u32 {
        for j in 0..8u32 {
            let r = row0 + thread_line(ty, i, QUADS);
            let cc = col0 + thread_line(tx, j, QUADS);
            if r < m && cc < n {
                c[r * n + cc] = acc[i * REG + j];
            }
        }
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
            // SAFETY: the caller checked that each buffer holds its matrix and its element
            // type; `c` is borrowed `&mut`, so it aliases neither input; uses are ordered
            // by before_use.
            unsafe { self.backend().gemm(s, &request) }?;
            return Ok(MatmulPath::Vendor);
        }
        // Without a vendor library the generated kernel honours the precision too.
        self.matmul_generated_with(a, b, c, m, n, k, precision)?;
        Ok(MatmulPath::Generated)
    }

    /// Which kernel [`Device::matmul_generated`] runs for an FP32 product with an
    /// `m`×`n` result: `"register-blocked"`, or `"16×16 shared tiles"` (on wgpu for small
    /// products and on software adapters; `DOTCOMPUTE_MATMUL_KERNEL` may pick either).
    pub fn generated_fp32_kernel(&self, m: usize, n: usize) -> &'static str {
        if fp32_tiled(self, m, n) {
            "16×16 shared tiles"
        } else {
            "register-blocked"
        }
    }

    /// `c = a · b` through dotcompute's generated kernel, on any backend: the
    /// register-blocked kernel, or the shared-tile kernel where it is faster (see
    /// [`Device::generated_fp32_kernel`]).
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
        kernel_choices()?;
        let kernels = T::generated().ok_or_else(|| no_half_kernel::<T>(self))?;
        let tensor = kernels
            .tensor
            .filter(|&(_, tf32_only)| !tf32_only || precision == Precision::Tf32)
            .filter(|_| self.info().caps.tensor_cores)
            .map(|(variant, _)| variant())
            // The TF32 kernel also binds `a` and `b` as vectors: a matrix of fewer than 4
            // elements has none, and takes the FP32 kernel (more precise than TF32 asks).
            .filter(|shape| !shape.views || (a.len() >= 4 && b.len() >= 4));
        let mut views = false;
        let (kernel, launch) = if let Some(shape) = tensor {
            views = shape.views;
            let launch = Launch::grid2d(
                n.div_ceil(shape.block_n as usize) * shape.threads as usize,
                m.div_ceil(TC_BLOCK as usize),
            )
            .group2d(shape.threads, 1);
            match shape.vec4 {
                Some(kernel) if k % 4 == 0 && n % 4 == 0 => (kernel, launch),
                _ => (shape.kernel, launch),
            }
        } else {
            let cores = kernels.cores.ok_or_else(|| no_half_kernel::<T>(self))?;
            if fp32_tiled(self, m, n) {
                (cores.tiled, Launch::grid2d(n, m).group2d(TILE, TILE))
            } else {
                let preferred = self.info().caps.generated_product;
                (
                    match (preferred, kernel_choices()?.matmul) {
                        (GeneratedProduct::Unfused, _) => cores.unfused,
                        (_, Some("quads")) => cores.quads,
                        (_, Some("pipelined")) => cores.pipelined,
                        (GeneratedProduct::BlockedQuads, _) => cores.quads,
                        (GeneratedProduct::BlockedStrided { .. }, _) => cores.pipelined,
                    },
                    Launch::grid2d(
                        n.div_ceil(BLOCK as usize) * GROUP_EDGE as usize,
                        m.div_ceil(BLOCK as usize) * GROUP_EDGE as usize,
                    )
                    .group2d(GROUP_EDGE, GROUP_EDGE),
                )
            }
        };
        let mut args = vec![crate::Arg::buffer(a), crate::Arg::buffer(b)];
        if views {
            args.extend([crate::Arg::buffer_as_vec4(a), crate::Arg::buffer_as_vec4(b)]);
        }
        args.extend([
            crate::Arg::buffer_mut(c),
            crate::Arg::scalar(m as u32),
            crate::Arg::scalar(n as u32),
            crate::Arg::scalar(k as u32),
        ]);
        self.launch_kernel(kernel, launch, &args)
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
