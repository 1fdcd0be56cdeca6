//! Softmax and log-softmax of each row of a row-major `f32` matrix, any row length.
//!
//! One group per row. Each thread runs the online form over its strided share of the row
//! (its maximum `m`, and the sum `s` of `exp(x - m)` rescaled whenever `m` grows), the
//! group combines the pairs in a tree (`M = max`, `S = Σ sᵢ·exp(mᵢ − M)`), and a second
//! read writes `exp(x − M) / S` (or `x − M − ln S`): the row is read twice and written
//! once. Max-subtracted, so no `exp` overflows; a row of `-inf` gives NaN (0 / 0), a NaN
//! anywhere in a row makes the row NaN.

use crate::{index_len, invalid, GROUP};
use dotcompute::prelude::*;
use dotcompute::{AsStream, Buffer, Result};

/// `s·exp(m − top)`, zero where `s` is (so that `m = top = -inf` gives 0, not NaN).
#[kernel_fn]
fn rescale(s: f32, m: f32, top: f32) -> f32 {
    let mut r = 0.0f32;
    if s != 0.0 {
        r = s * (m - top).exp();
    }
    r
}

#[kernel]
fn softmax_kernel<const LOG: u32>(x: &[f32], out: &mut [f32], cols: u32) {
    let red_m = shared::<f32, GROUP>();
    let red_s = shared::<f32, GROUP>();
    let lid = local_id().x;
    let base = group_id().x * cols;
    let mut m = f32::NEG_INFINITY;
    let mut s = 0.0f32;
    let mut j = lid;
    // Four loads in flight per step (one per step left the H200 at 0.4× of a copy):
    // rescale once to the four's maximum, then add their terms.
    while j + 3 * GROUP < cols {
        let v0 = x[base + j];
        let v1 = x[base + j + GROUP];
        let v2 = x[base + j + 2 * GROUP];
        let v3 = x[base + j + 3 * GROUP];
        let top4 = v0.max(v1).max(v2.max(v3));
        if top4 > m {
            s = rescale(s, m, top4);
            m = top4;
        }
        if m != f32::NEG_INFINITY {
            s += ((v0 - m).exp() + (v1 - m).exp()) + ((v2 - m).exp() + (v3 - m).exp());
        }
        j += 4 * GROUP;
    }
    while j < cols {
        let v = x[base + j];
        if v > m {
            s = rescale(s, m, v) + 1.0;
            m = v;
        } else if v != f32::NEG_INFINITY {
            s += (v - m).exp();
        }
        j += GROUP;
    }
    red_m[lid] = m;
    red_s[lid] = s;
    barrier();
    let mut half = GROUP / 2;
    while half > 0 {
        if lid < half {
            let m1 = red_m[lid];
            let m2 = red_m[lid + half];
            let top = m1.max(m2);
            red_s[lid] = rescale(red_s[lid], m1, top) + rescale(red_s[lid + half], m2, top);
            red_m[lid] = top;
        }
        barrier();
        half /= 2;
    }
    let top = red_m[0];
    let total = red_s[0];
    let log_total = total.ln();
    j = lid;
    while j + 3 * GROUP < cols {
        let v0 = x[base + j] - top;
        let v1 = x[base + j + GROUP] - top;
        let v2 = x[base + j + 2 * GROUP] - top;
        let v3 = x[base + j + 3 * GROUP] - top;
        if LOG == 1 {
            out[base + j] = v0 - log_total;
            out[base + j + GROUP] = v1 - log_total;
            out[base + j + 2 * GROUP] = v2 - log_total;
            out[base + j + 3 * GROUP] = v3 - log_total;
        } else {
            out[base + j] = v0.exp() / total;
            out[base + j + GROUP] = v1.exp() / total;
            out[base + j + 2 * GROUP] = v2.exp() / total;
            out[base + j + 3 * GROUP] = v3.exp() / total;
        }
        j += 4 * GROUP;
    }
    while j < cols {
        let v = x[base + j] - top;
        if LOG == 1 {
            out[base + j] = v - log_total;
        } else {
            out[base + j] = v.exp() / total;
        }
        j += GROUP;
    }
}

/// `output[r][c] = exp(x[r][c] − max_r) / Σ_c exp(x[r][c] − max_r)` for the row-major
/// `rows × cols` matrix `input` (`rows = input.len() / cols`).
///
/// ```
/// use dotcompute::prelude::*;
/// let d = Device::cpu();
/// let x = d.upload(&[1.0f32, 1.0, 0.0, 1000.0])?;
/// let mut y = d.alloc::<f32>(4)?;
/// dotcompute_ops::softmax::softmax_rows(&d, &x, 2, &mut y)?;
/// assert_eq!(y.to_vec()?, [0.5, 0.5, 0.0, 1.0]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn softmax_rows(
    queue: &impl AsStream,
    input: &Buffer<f32>,
    cols: usize,
    output: &mut Buffer<f32>,
) -> Result<()> {
    rows_op::<0>(queue, "softmax_rows", input, cols, output)
}

/// `output[r][c] = x[r][c] − max_r − ln Σ_c exp(x[r][c] − max_r)`.
pub fn log_softmax_rows(
    queue: &impl AsStream,
    input: &Buffer<f32>,
    cols: usize,
    output: &mut Buffer<f32>,
) -> Result<()> {
    rows_op::<1>(queue, "log_softmax_rows", input, cols, output)
}

fn rows_op<const LOG: u32>(
    queue: &impl AsStream,
    op: &'static str,
    input: &Buffer<f32>,
    cols: usize,
    output: &mut Buffer<f32>,
) -> Result<()> {
    if cols == 0 || input.len() % cols != 0 {
        return Err(invalid(
            op,
            format!(
                "{} elements are not whole rows of {cols} columns",
                input.len()
            ),
        ));
    }
    crate::same_len(op, input.len(), output.len())?;
    index_len(op, input.len())?;
    let rows = input.len() / cols;
    if rows == 0 {
        return Ok(());
    }
    softmax_kernel::launch::<LOG>(
        queue,
        Launch::threads(rows * GROUP as usize).group(GROUP),
        input,
        output,
        cols as u32,
    )
}
