//! Softmax and log-softmax of each row of a row-major `f32` matrix, any row length.
//!
//! Three forms, chosen by the row length on devices with 32-lane subgroups (CUDA, NVIDIA
//! Vulkan, Metal), where the row fits in registers and is read once:
//!
//! * **a subgroup per row** (up to 1,024 columns): each lane holds `ITEMS` elements of
//!   its row, the row's maximum and sum come from `subgroup_max` / `subgroup_add`: no
//!   shared memory and no barrier (a group tree of eight barriers per row held the
//!   8192 × 1000 softmax at 0.52× of a copy on the H100);
//! * **a group per row, held** (up to 16,384 columns): 256 (or 512) threads hold
//!   `ITEMS` elements each, and the subgroups' maxima and sums meet in shared words;
//! * **a group per row, read twice** (any length, and every device): below.
//!
//! Rows of whole quads (`cols % 4 == 0`) are read and written 16 bytes an access
//! ([`Buffer::as_vec4s`]) in the held forms; the tuner chooses among them and the
//! scalar ones per row length ([`HELD_FORMS`]). Pinning
//! `tune::with_candidate("read-twice", ..)` forces the last form, and each held form's
//! name pins it (tests compare the forms on the same rows).
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

/// The maximum of every thread's `m` over a group of `warps` subgroups of 32 lanes, in
/// every thread: lane 0 of each subgroup leaves its subgroup's maximum in `partial`, and
/// every thread combines the `warps` words in the same order. The second barrier lets
/// `partial` be written again. Every thread of the group must reach it.
#[kernel_fn]
fn group_max(partial: &mut [f32], m: f32, warps: u32) -> f32 {
    let warp_top = subgroup_max(m);
    if subgroup_lane() == 0u32 {
        partial[local_id().x / 32u32] = warp_top;
    }
    barrier();
    let mut top = partial[0];
    for w in 1..warps {
        top = top.max(partial[w]);
    }
    barrier();
    top
}

/// [`group_max`] for the sum of every thread's `s`, in the same order on every thread;
/// `partial` is not written after it (no second barrier).
#[kernel_fn]
fn group_sum(partial: &mut [f32], s: f32, warps: u32) -> f32 {
    let warp_total = subgroup_add(s);
    if subgroup_lane() == 0u32 {
        partial[local_id().x / 32u32] = warp_total;
    }
    barrier();
    let mut total = partial[0];
    for w in 1..warps {
        total += partial[w];
    }
    total
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
    let top = group_max(partial, m, WARPS);
    let mut s = 0.0f32;
    for k in 0..ITEMS {
        s += exp_term(held, k, top, LOG);
    }
    let total = group_sum(partial, s, WARPS);
    let scale = 1.0f32 / total;
    let shift = top + total.ln();
    for k in 0..ITEMS {
        let j = lid + k * GROUP;
        if j < cols {
            out[base + j] = finish(held[k], scale, shift, LOG);
        }
    }
}

/// Quad `i` of a row at `base`, or four `-inf` past the row's `quads` (they add nothing to
/// the sum), held as elements `4k..4k + 4` of `hold`; returns the quad's maximum.
#[kernel_fn]
fn hold_quad(x: &[Vec4<f32>], base: u32, i: u32, quads: u32, hold: &mut [f32], k: u32) -> f32 {
    let mut q = Vec4::new(
        f32::NEG_INFINITY,
        f32::NEG_INFINITY,
        f32::NEG_INFINITY,
        f32::NEG_INFINITY,
    );
    if i < quads {
        q = x[base + i];
    }
    hold[4u32 * k] = q.x;
    hold[4u32 * k + 1u32] = q.y;
    hold[4u32 * k + 2u32] = q.z;
    hold[4u32 * k + 3u32] = q.w;
    q.x.max(q.y).max(q.z.max(q.w))
}

/// [`exp_term`] for the four elements of held quad `k`.
#[kernel_fn]
fn exp_quad(hold: &mut [f32], k: u32, top: f32, log: u32) -> f32 {
    let a = exp_term(hold, 4u32 * k, top, log) + exp_term(hold, 4u32 * k + 1u32, top, log);
    a + (exp_term(hold, 4u32 * k + 2u32, top, log) + exp_term(hold, 4u32 * k + 3u32, top, log))
}

/// [`finish`] for the four elements of held quad `k`.
#[kernel_fn]
fn finish_quad(hold: &mut [f32], k: u32, scale: f32, shift: f32, log: u32) -> Vec4<f32> {
    Vec4::new(
        finish(hold[4u32 * k], scale, shift, log),
        finish(hold[4u32 * k + 1u32], scale, shift, log),
        finish(hold[4u32 * k + 2u32], scale, shift, log),
        finish(hold[4u32 * k + 3u32], scale, shift, log),
    )
}

/// [`softmax_subgroup_rows`] reading and writing 16 bytes an access, for rows of whole
/// quads (`cols = 4 · quads`, `quads ≤ 32 · ITEMS`): lane `l` holds quads `l, l + 32, …`
/// of its row in `4 · ITEMS` registers.
#[kernel]
fn softmax_subgroup_rows_vec4<const LOG: u32, const ITEMS: u32, const HELD: u32>(
    x: &[Vec4<f32>],
    out: &mut [Vec4<f32>],
    rows: u32,
    quads: u32,
) {
    let lane = subgroup_lane();
    let row = group_id().x * WARPS + local_id().x / 32;
    if row < rows {
        let base = row * quads;
        let mut held = [0.0f32; HELD as usize];
        let mut m = f32::NEG_INFINITY;
        for k in 0..ITEMS {
            m = m.max(hold_quad(x, base, lane + k * 32, quads, held, k));
        }
        let top = subgroup_max(m);
        let mut s = 0.0f32;
        for k in 0..ITEMS {
            s += exp_quad(held, k, top, LOG);
        }
        let total = subgroup_add(s);
        let scale = 1.0f32 / total;
        let shift = top + total.ln();
        for k in 0..ITEMS {
            let i = lane + k * 32;
            if i < quads {
                out[base + i] = finish_quad(held, k, scale, shift, LOG);
            }
        }
    }
}

/// [`softmax_group_rows`] reading and writing 16 bytes an access with `THREADS` threads per
/// row, for rows of whole quads (`quads ≤ THREADS · ITEMS`): thread `t` holds quads
/// `t, t + THREADS, …` of its row in `4 · ITEMS = HELD` registers. More threads per row
/// hold fewer registers each, so more rows are in flight per multiprocessor.
#[kernel]
fn softmax_group_rows_vec4<
    const LOG: u32,
    const THREADS: u32,
    const ITEMS: u32,
    const HELD: u32,
>(
    x: &[Vec4<f32>],
    out: &mut [Vec4<f32>],
    quads: u32,
) {
    let partial = shared::<f32, 32>();
    let lid = local_id().x;
    let base = group_id().x * quads;
    let mut held = [0.0f32; HELD as usize];
    let mut m = f32::NEG_INFINITY;
    for k in 0..ITEMS {
        m = m.max(hold_quad(x, base, lid + k * THREADS, quads, held, k));
    }
    let top = group_max(partial, m, THREADS / 32);
    let mut s = 0.0f32;
    for k in 0..ITEMS {
        s += exp_quad(held, k, top, LOG);
    }
    let total = group_sum(partial, s, THREADS / 32);
    let scale = 1.0f32 / total;
    let shift = top + total.ln();
    for k in 0..ITEMS {
        let i = lid + k * THREADS;
        if i < quads {
            out[base + i] = finish_quad(held, k, scale, shift, LOG);
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

/// The most columns a row held in registers may have (a group of 256 holding 64 each).
const MAX_HELD: u32 = 16_384;

/// The held forms: rows of whole quads (`cols % 4 == 0`) in 16-byte loads and stores
/// with 256 threads a row (or a subgroup a row up to 1,024 columns; the default), or 512
/// (longer rows only), chosen by the tuner; scalar accesses for other rows. On an H200
/// (2026-11-29, two runs, `docs/benchmarks.md`) the vectors took CUDA's 16384² softmax
/// from 0.81× to 0.99× of a copy and 8192 × 1000 from 0.91–0.93× to 1.02×, NVIDIA
/// Vulkan's from 0.94× to 0.98× and from 0.77–0.79× to 0.86×, so rows of whole quads do
/// not measure the scalar form (it stays pinnable by name); a 25 µs kernel on wgpu is
/// below what the tuner's host clock resolves (it once kept the scalar form there).
/// NVIDIA Vulkan's 16384² ran best with 512 threads a row (0.98×, where CUDA's fell to
/// 0.75×: CUDA's 256 keep more rows in flight). 1,024 threads a row measured the same as
/// 512 on both and is not offered.
const HELD_FORMS: [(&str, u32); 3] = [
    ("held, vector loads", 256),
    ("held, vector loads, 512 threads a row", 512),
    ("held", 0),
];

/// Softmax of rows of at most [`MAX_HELD`] columns held in registers, in the form the
/// tuner chose for this row length.
fn held_rows<const LOG: u32>(
    queue: &impl AsStream,
    input: &Buffer<f32>,
    rows: usize,
    cols: usize,
    output: &mut Buffer<f32>,
) -> Result<()> {
    let by_subgroup = cols <= 1024;
    let max_threads = queue.device().info().limits.max_group_threads;
    let forms: Vec<(&str, u32)> = HELD_FORMS
        .into_iter()
        .filter(|&(_, threads)| {
            threads == 0
                || (cols % 4 == 0 && threads <= max_threads && (!by_subgroup || threads == 256))
        })
        .collect();
    let names: Vec<&str> = forms.iter().map(|f| f.0).collect();
    let (r, c, quads) = (rows as u32, cols as u32, (cols / 4) as u32);
    let subgroup_rows =
        Launch::threads(rows.div_ceil(WARPS as usize) * GROUP as usize).group(GROUP);
    let run = |form: usize, output: &mut Buffer<f32>| -> Result<()> {
        let threads = forms[form].1;
        if threads == 0 {
            return scalar_held_rows::<LOG>(queue, input, r, c, output);
        }
        let x = input.as_vec4s().expect("whole quads of f32");
        let mut y = output.as_vec4s_mut().expect("whole quads of f32");
        if by_subgroup {
            return match quads {
                0..=64 => softmax_subgroup_rows_vec4::launch::<LOG, 2, 8>(
                    queue,
                    subgroup_rows,
                    &x,
                    &mut y,
                    r,
                    quads,
                ),
                _ => softmax_subgroup_rows_vec4::launch::<LOG, 8, 32>(
                    queue,
                    subgroup_rows,
                    &x,
                    &mut y,
                    r,
                    quads,
                ),
            };
        }
        let grid = Launch::threads(rows * threads as usize).group(threads);
        let items = quads.div_ceil(threads).next_power_of_two();
        macro_rules! group_rows {
            ($($threads:literal, $items:literal;)*) => {
                match (threads, items) {
                    $(($threads, $items) => softmax_group_rows_vec4::launch::<
                        LOG,
                        $threads,
                        $items,
                        { 4 * $items },
                    >(queue, grid, &x, &mut y, quads),)*
                    _ => unreachable!("{threads} threads hold {items} quads: not a form"),
                }
            };
        }
        group_rows! {
            256, 2; 256, 4; 256, 8; 256, 16;
            512, 1; 512, 2; 512, 4; 512, 8;
        }
    };
    if let Some(pinned) = crate::tune::pinned(&names) {
        return run(pinned, output);
    }
    let bucket = match cols {
        0..=256 => "rows of 1..=256",
        257..=1024 => "rows of 257..=1024",
        1025..=2048 => "rows of 1025..=2048",
        2049..=8192 => "rows of 2049..=8192",
        _ => "rows of 8193..=16384",
    };
    let whole = if cols % 4 == 0 { ", whole quads" } else { "" };
    let key = crate::tune::key(
        queue,
        "softmax",
        &format!("f32 {bucket}{whole}"),
        input.len(),
    );
    // Rows of whole quads choose among the vector forms only (a subgroup a row has one,
    // so nothing is measured): the scalar form lost to them on both GPUs measured, and
    // the tuner's host clock cannot tell them apart for short kernels on wgpu (module
    // docs of `HELD_FORMS`).
    let tuned: Vec<usize> = (0..forms.len())
        .filter(|&i| forms[i].1 != 0 || cols % 4 != 0)
        .collect();
    let tuned_names: Vec<&str> = tuned.iter().map(|&i| names[i]).collect();
    let form = crate::tune::choose_on(
        queue,
        &key,
        input.len(),
        &tuned_names,
        |i| run(tuned[i], output),
        || queue.device().synchronize(),
    )?;
    run(tuned[form], output)
}

/// The scalar held forms: a subgroup per row up to 1,024 columns, else a group of 256.
fn scalar_held_rows<const LOG: u32>(
    queue: &impl AsStream,
    input: &Buffer<f32>,
    r: u32,
    c: u32,
    output: &mut Buffer<f32>,
) -> Result<()> {
    let rows = r as usize;
    let subgroup_rows =
        Launch::threads(rows.div_ceil(WARPS as usize) * GROUP as usize).group(GROUP);
    let group_rows = Launch::threads(rows * GROUP as usize).group(GROUP);
    match c {
        0..=256 => {
            softmax_subgroup_rows::launch::<LOG, 8>(queue, subgroup_rows, input, output, r, c)
        }
        257..=1024 => {
            softmax_subgroup_rows::launch::<LOG, 32>(queue, subgroup_rows, input, output, r, c)
        }
        1025..=2048 => softmax_group_rows::launch::<LOG, 8>(queue, group_rows, input, output, c),
        2049..=8192 => softmax_group_rows::launch::<LOG, 32>(queue, group_rows, input, output, c),
        _ => softmax_group_rows::launch::<LOG, 64>(queue, group_rows, input, output, c),
    }
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
    let held = crate::tune::pinned(&["read-twice"]).is_none()
        && queue.device().info().caps.subgroup_size == Some([32, 32]);
    if held && cols <= MAX_HELD as usize {
        return held_rows::<LOG>(queue, input, rows, cols, output);
    }
    softmax_kernel::launch::<LOG>(
        queue,
        Launch::threads(rows * GROUP as usize).group(GROUP),
        input,
        output,
        cols as u32,
    )
}
