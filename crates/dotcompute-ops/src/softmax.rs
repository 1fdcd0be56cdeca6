//! Softmax and log-softmax of each row of a row-major `f32` matrix, any row length.
//!
//! Three forms, chosen by the row length on devices with 32-lane subgroups (CUDA, NVIDIA
//! Vulkan, Metal), where the row fits in registers and is read once:
//!
//! * **a subgroup per row** (up to 1,024 columns): each lane holds `ITEMS` elements of
//!   its row, the row's maximum and sum come from `subgroup_max` / `subgroup_add`: no
//!   shared memory and no barrier (a group tree of eight barriers per row held the
//!   8192 × 1000 softmax at 0.52× of a copy on the H100);
//! * **a group per row, held** (up to 16,384 columns): 256 threads hold `ITEMS` elements
//!   each, and the subgroups' maxima and sums meet in 8 shared words;
//! * **a group per row, read twice** (any length, and every device): below.
//!
//! Pinning `tune::with_candidate("read-twice", ..)` forces the last form (tests compare
//! the forms on the same rows).
//!
//! The read-twice form: one group per row. Each thread runs the online form over its strided share of the row
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
    let inv_total = 1.0f32 / total;
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
            out[base + j] = v0.exp() * inv_total;
            out[base + j + GROUP] = v1.exp() * inv_total;
            out[base + j + 2 * GROUP] = v2.exp() * inv_total;
            out[base + j + 3 * GROUP] = v3.exp() * inv_total;
        }
        j += 4 * GROUP;
    }
    while j < cols {
        let v = x[base + j] - top;
        if LOG == 1 {
            out[base + j] = v - log_total;
        } else {
            out[base + j] = v.exp() * inv_total;
        }
        j += GROUP;
    }
}

/// Subgroups per group in the held forms.
const WARPS: u32 = GROUP / 32;

/// `exp(held[k] − top)`, the term element `k` adds to the row's sum. For softmax it also
/// replaces `held[k]`, so that each element's `exp` is computed once: with CUDA's
/// accurate `expf` and division, a second `exp` and a divide per element made the
/// held 16384² softmax compute-bound on an H200 (0.57× of a copy, where NVIDIA's Vulkan
/// compiler reached 0.85× with the same kernel). `-inf` adds 0 (also when `top` is
/// `-inf`: a row of `-inf` then sums to 0 and gives NaN). `log` is the kernel's
/// constant, so the choice folds away.
#[kernel_fn]
fn exp_term(held: &mut [f32], k: u32, top: f32, log: u32) -> f32 {
    let mut e = 0.0f32;
    if held[k] != f32::NEG_INFINITY {
        e = (held[k] - top).exp();
    }
    if log == 0u32 {
        held[k] = e;
    }
    e
}

/// The output for element `k` after [`exp_term`]: `exp(x − top) · (1 / total)`, or
/// `x − (top + ln total)` for log-softmax.
#[kernel_fn]
fn finish(held: f32, scale: f32, shift: f32, log: u32) -> f32 {
    let mut r = held * scale;
    if log == 1u32 {
        r = held - shift;
    }
    r
}

/// A subgroup of 32 lanes per row, the row held in registers (`cols ≤ 32 · ITEMS`):
/// lane `l` holds columns `l, l + 32, …`; `-inf` stands in past the row's end and adds
/// nothing to the sum. Every lane of a subgroup has the same row, so the subgroup
/// operations run in uniform control flow.
#[kernel]
fn softmax_subgroup_rows<const LOG: u32, const ITEMS: u32>(
    x: &[f32],
    out: &mut [f32],
    rows: u32,
    cols: u32,
) {
    let lane = subgroup_lane();
    let row = group_id().x * WARPS + local_id().x / 32;
    if row < rows {
        let base = row * cols;
        let mut held = [0.0f32; ITEMS as usize];
        let mut m = f32::NEG_INFINITY;
        for k in 0..ITEMS {
            let j = lane + k * 32;
            let mut v = f32::NEG_INFINITY;
            if j < cols {
                v = x[base + j];
            }
            held[k] = v;
            m = m.max(v);
        }
        let top = subgroup_max(m);
        let mut s = 0.0f32;
        for k in 0..ITEMS {
            s += exp_term(held, k, top, LOG);
        }
        let total = subgroup_add(s);
        let scale = 1.0f32 / total;
        let shift = top + total.ln();
        for k in 0..ITEMS {
            let j = lane + k * 32;
            if j < cols {
                out[base + j] = finish(held[k], scale, shift, LOG);
            }
        }
    }
}

/// A group of `GROUP` threads per row, the row held in registers (`cols ≤ GROUP ·
/// ITEMS`): each subgroup combines its lanes, lane 0 leaves the subgroup's maximum (then
/// sum) in `partial`, and every thread combines the `WARPS` words in the same order.
#[kernel]
fn softmax_group_rows<const LOG: u32, const ITEMS: u32>(x: &[f32], out: &mut [f32], cols: u32) {
    let partial = shared::<f32, WARPS>();
    let lid = local_id().x;
    let base = group_id().x * cols;
    let mut held = [0.0f32; ITEMS as usize];
    let mut m = f32::NEG_INFINITY;
    for k in 0..ITEMS {
        let j = lid + k * GROUP;
        let mut v = f32::NEG_INFINITY;
        if j < cols {
            v = x[base + j];
        }
        held[k] = v;
        m = m.max(v);
    }
    let warp_top = subgroup_max(m);
    if subgroup_lane() == 0u32 {
        partial[lid / 32u32] = warp_top;
    }
    barrier();
    let mut top = partial[0];
    for w in 1..WARPS {
        top = top.max(partial[w]);
    }
    barrier();
    let mut s = 0.0f32;
    for k in 0..ITEMS {
        s += exp_term(held, k, top, LOG);
    }
    let warp_total = subgroup_add(s);
    if subgroup_lane() == 0u32 {
        partial[lid / 32u32] = warp_total;
    }
    barrier();
    let mut total = partial[0];
    for w in 1..WARPS {
        total += partial[w];
    }
    let scale = 1.0f32 / total;
    let shift = top + total.ln();
    for k in 0..ITEMS {
        let j = lid + k * GROUP;
        if j < cols {
            out[base + j] = finish(held[k], scale, shift, LOG);
        }
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
///
/// ```
/// use dotcompute::prelude::*;
/// let d = Device::cpu();
/// let x = d.upload(&[0.0f32, 0.0, 5.0, 1000.0])?;
/// let mut y = d.alloc::<f32>(4)?;
/// dotcompute_ops::softmax::log_softmax_rows(&d, &x, 2, &mut y)?;
/// let y = y.to_vec()?;
/// assert!((y[0] + 2f32.ln()).abs() < 1e-6 && (y[1] + 2f32.ln()).abs() < 1e-6);
/// assert_eq!(y[2..], [-995.0, 0.0]); // no overflow: the row's maximum is subtracted first
/// # Ok::<(), dotcompute::Error>(())
/// ```
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
    let held = crate::tune::pinned(&["held", "read-twice"]) != Some(1)
        && queue.device().info().caps.subgroup_size == Some([32, 32]);
    if held {
        let (r, c) = (rows as u32, cols as u32);
        let subgroup_rows =
            Launch::threads(rows.div_ceil(WARPS as usize) * GROUP as usize).group(GROUP);
        let group_rows = Launch::threads(rows * GROUP as usize).group(GROUP);
        match cols {
            0..=256 => {
                return softmax_subgroup_rows::launch::<LOG, 8>(
                    queue,
                    subgroup_rows,
                    input,
                    output,
                    r,
                    c,
                )
            }
            257..=1024 => {
                return softmax_subgroup_rows::launch::<LOG, 32>(
                    queue,
                    subgroup_rows,
                    input,
                    output,
                    r,
                    c,
                )
            }
            1025..=2048 => {
                return softmax_group_rows::launch::<LOG, 8>(queue, group_rows, input, output, c)
            }
            2049..=8192 => {
                return softmax_group_rows::launch::<LOG, 32>(queue, group_rows, input, output, c)
            }
            8193..=16384 => {
                return softmax_group_rows::launch::<LOG, 64>(queue, group_rows, input, output, c)
            }
            _ => {}
        }
    }
    softmax_kernel::launch::<LOG>(
        queue,
        Launch::threads(rows * GROUP as usize).group(GROUP),
        input,
        output,
        cols as u32,
    )
}
