//! The matrix product with the tuner's choice of implementation: the backend's vendor
//! library (cuBLAS on CUDA, matrixmultiply on the CPU, MPS on Metal) or dotcompute's
//! generated kernel, measured per device, element type, precision and shape class, where
//! [`Device::matmul`] always takes the vendor library when there is one.
//!
//! The two can differ by more than a little: at 4096³ FP32 on an H100 the generated
//! kernel runs at 0.77× cuBLAS, but on shapes a vendor library was not tuned for (thin,
//! odd or small products) the ranking can turn, and on a CPU matrixmultiply is many times
//! faster than a generated kernel run as threads. Where the device has no vendor library
//! for the type (wgpu, the MSL shim) there is one candidate and nothing is measured.
//!
//! **Precision is never lowered by the choice.** Both candidates honour the caller's
//! [`Precision`]: with `Precision::Full` neither runs TF32 (cuBLAS in its FP32 mode, the
//! generated FP32 kernel), and with `Precision::Tf32` both may. **Results are not
//! bit-identical across candidates** (a product is a float sum, and the two sum in
//! different orders): each element is within the usual bound of a sum of `k` products,
//! `|ĉ − c| ≤ γₖ · Σ|a||b|` with `γₖ = k·u / (1 − k·u)` and `u` the unit roundoff of the
//! precision used (2⁻²⁴ for FP32; 2⁻¹¹ for the TF32-rounded inputs), whichever runs.

use dotcompute::{Buffer, Device, MatmulElement, MatmulPath, Precision, Result};

/// The candidates, by name: `vendor` first (the default when the tuner is off, as
/// [`Device::matmul`] chooses), then `generated`.
pub const CANDIDATES: [&str; 2] = ["vendor", "generated"];

/// `c = a · b` for row-major matrices (`a` m×k, `b` k×n, `c` m×n; each buffer holds at
/// least that many elements and only its leading part is used), by the implementation the
/// tuner chose for this device, type, precision and shape class; returns which ran. An
/// empty product (`m` or `n` zero) does nothing; `k` zero sets the m×n result to zero.
/// Lengths and sizes are checked as [`Device::matmul_with`] checks them (`Error::Range`).
///
/// ```
/// use dotcompute::prelude::*;
/// use dotcompute::Precision;
/// let d = Device::cpu();
/// let a = d.upload(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?; // 2×3
/// let b = d.upload(&[1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0])?; // 3×2
/// let mut c = d.alloc::<f32>(4)?;
/// dotcompute_ops::matmul::matmul(&d, &a, &b, &mut c, 2, 2, 3, Precision::Full)?;
/// assert_eq!(c.to_vec()?, [4.0, 5.0, 10.0, 11.0]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
#[allow(clippy::too_many_arguments)] // the BLAS shape: three matrices, three sizes, one mode
pub fn matmul<T: MatmulElement>(
    device: &Device,
    a: &Buffer<T>,
    b: &Buffer<T>,
    c: &mut Buffer<T>,
    m: usize,
    n: usize,
    k: usize,
    precision: Precision,
) -> Result<MatmulPath> {
    let vendor = device.info().caps.blas.contains(&T::TYPE.scalar);
    if m == 0 || n == 0 {
        return Ok(default_path(vendor));
    }
    if k == 0 {
        // The sum of no products. Checked as a product would be, with k = 1 (a and b
        // need no elements, c its m×n).
        let needed = m.checked_mul(n).filter(|&mn| mn <= c.len());
        let Some(mn) = needed else {
            return Err(dotcompute::Error::Range {
                op: "matmul",
                detail: format!(
                    "`c` holds {} elements; {m}×0 · 0×{n} needs {m}×{n}",
                    c.len()
                ),
            });
        };
        c.slice_mut(..mn)?.fill(T::zeroed())?;
        return Ok(default_path(vendor));
    }
    let candidates: &[&str] = if vendor {
        &CANDIDATES
    } else {
        &CANDIDATES[1..]
    };
    let run = |candidate: &str, c: &mut Buffer<T>| -> Result<MatmulPath> {
        if candidate == "vendor" {
            device.matmul_with(a, b, c, m, n, k, precision)
        } else {
            device.matmul_generated_with(a, b, c, m, n, k, precision)?;
            Ok(MatmulPath::Generated)
        }
    };
    // Every product of this shape class shares one choice; the size the tuner compares
    // with its threshold is the work, m·n·k.
    let work = m.saturating_mul(n).saturating_mul(k);
    let key = key::<T>(device, m, n, k, precision);
    let form = crate::tune::choose(
        &key,
        work,
        candidates,
        |i| run(candidates[i], c).map(drop),
        || device.synchronize(),
    )?;
    run(candidates[form], c)
}

/// The tuner's key for a product of this element type, precision and shape class (each
/// dimension's ⌈log2⌉): where to read the choice in the tuner's file.
pub fn key<T: MatmulElement>(
    device: &Device,
    m: usize,
    n: usize,
    k: usize,
    precision: Precision,
) -> String {
    use crate::tune::size_class;
    let what = format!(
        "{:?} {precision:?} m 2^{} n 2^{} k 2^{}",
        T::TYPE.scalar,
        size_class(m),
        size_class(n),
        size_class(k)
    );
    let work = m.saturating_mul(n).saturating_mul(k);
    crate::tune::key(device, "matmul", &what, work)
}

/// What an empty product reports: the path a non-empty one takes by default.
fn default_path(vendor: bool) -> MatmulPath {
    if vendor {
        MatmulPath::Vendor
    } else {
        MatmulPath::Generated
    }
}
