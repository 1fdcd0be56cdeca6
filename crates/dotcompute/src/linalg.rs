//! Matrix products: a vendor library where the backend has one (cuBLAS on CUDA,
//! matrixmultiply on the CPU), the generated tiled kernel everywhere else (and on
//! request).

use crate::{kernel, Buffer, Device, Element, Float, Launch};
use dotcompute_hal::{Error, KernelDef, MatmulRequest, Result, StreamId};

/// Edge of the square tiles of the generated kernels (16×16 = 256 threads per group).
const TILE: u32 = 16;

/// Which implementation computed a matrix product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatmulPath {
    /// The backend's vendor library (cuBLAS on CUDA, matrixmultiply on the CPU).
    Vendor,
    /// dotcompute's generated tiled kernel.
    Generated,
}

/// Element types with a matrix product: `f32` and `f64` everywhere; `f16` and `bf16`
/// (f32 accumulation, tensor cores) where the backend's vendor library has them: cuBLAS.
pub trait MatmulElement: Element {
    /// The generated kernel, where kernels can use the type.
    #[doc(hidden)]
    fn kernel() -> Option<&'static KernelDef>;
}
impl MatmulElement for f32 {
    fn kernel() -> Option<&'static KernelDef> {
        Some(matmul_tiled::kernel::<f32, TILE>())
    }
}
impl MatmulElement for f64 {
    fn kernel() -> Option<&'static KernelDef> {
        Some(matmul_tiled::kernel::<f64, TILE>())
    }
}
impl MatmulElement for half::f16 {
    fn kernel() -> Option<&'static KernelDef> {
        None
    }
}
impl MatmulElement for half::bf16 {
    fn kernel() -> Option<&'static KernelDef> {
        None
    }
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

/// `c = a · b` for row-major `a` (m×k), `b` (k×n), `c` (m×n), tiled through shared
/// memory; one instantiation per float type.
#[kernel]
fn matmul_tiled<T: Float, const TILE: u32>(a: &[T], b: &[T], c: &mut [T], m: u32, n: u32, k: u32) {
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
        self.check_matmul(a, b, c, m, n, k)?;
        let request = MatmulRequest {
            a: a.raw(),
            b: b.raw(),
            c: c.raw(),
            m,
            n,
            k,
            elem: T::TYPE.scalar,
        };
        if self.backend().has_blas(T::TYPE.scalar) {
            let s = StreamId::DEFAULT;
            self.before_use(a.uses(), s, false)?;
            self.before_use(b.uses(), s, false)?;
            self.before_use(c.uses(), s, true)?;
            self.backend().gemm(s, &request)?;
            return Ok(MatmulPath::Vendor);
        }
        self.matmul_generated(a, b, c, m, n, k)?;
        Ok(MatmulPath::Generated)
    }

    /// `c = a · b` through dotcompute's generated tiled kernel, on any backend.
    pub fn matmul_generated<T: MatmulElement>(
        &self,
        a: &Buffer<T>,
        b: &Buffer<T>,
        c: &mut Buffer<T>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<()> {
        self.check_matmul(a, b, c, m, n, k)?;
        let kernel = T::kernel().ok_or_else(|| no_half_kernel::<T>(self))?;
        let launch = Launch::grid2d(n, m).group2d(TILE, TILE);
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
