//! Reductions: sum, min and max of a whole buffer or of each row of a row-major matrix.
//!
//! Two passes and no atomics, so results do not depend on timing: (1) up to
//! `MAX_GROUPS` groups each fold a grid-strided share of the input (every thread folds
//! at most ⌈n / (GROUP · groups)⌉ elements into four accumulators in order) and combine
//! their threads in a tree in shared memory; (2) one group combines the groups' partials the same way. On the CPU
//! device, chunks of 65,536 are summed pairwise with rayon and the chunks in order. For
//! float sums the error is at most (⌈n / 65,536⌉ + 24) · u · Σ|xᵢ| (u the unit roundoff,
//! `f32::EPSILON / 2`): far from a left fold's n · u, and the same bits on every run of a
//! device. Integer sums wrap.
//!
//! Where the bound comes from on a GPU: each of a thread's four accumulators folds at
//! most ⌈n / 1,048,576⌉ + 4 elements in order, then 2 levels join them, 8 levels the
//! group, and the second pass adds at most 4 + 8 more.

use crate::host::{self, HostArith};
use crate::{index_len, invalid, GROUP};
use dotcompute::prelude::*;
use dotcompute::{Arg, AsStream, Buffer, Result};

/// The tuner's candidates: groups of the first pass at most (the second pass is one
/// group). The default, 1,024 (262,144 threads), fills an H200 (132 multiprocessors of
/// 2,048 threads). Float sums differ between candidates only within the stated bound,
/// which holds for each.
const GROUP_CHOICES: [(&str, u32); 3] = [
    ("1024 groups", 1024),
    ("512 groups", 512),
    ("256 groups", 256),
];

/// What a reduction computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// The sum (integers wrap).
    Sum,
    /// The smallest element (floats: as `f32::min`, a NaN only if every element is NaN).
    Min,
    /// The largest element.
    Max,
}

impl ReduceOp {
    fn code(self) -> u32 {
        match self {
            ReduceOp::Sum => 0,
            ReduceOp::Min => 1,
            ReduceOp::Max => 2,
        }
    }
}

/// Types the reductions take, with each operation's identity.
pub trait Reducible: Num + HostArith {
    /// The lowest value (the identity of max).
    const LOWEST: Self;
    /// The highest value (the identity of min).
    const HIGHEST: Self;
    /// Zero (the identity of sum).
    const ZERO: Self;
}

macro_rules! reducible {
    ($($t:ty: $lo:expr, $hi:expr;)*) => {$(
        impl Reducible for $t {
            const LOWEST: $t = $lo;
            const HIGHEST: $t = $hi;
            const ZERO: $t = 0 as $t;
        }
    )*};
}
reducible! {
    u32: 0, u32::MAX;
    i32: i32::MIN, i32::MAX;
    u64: 0, u64::MAX;
    i64: i64::MIN, i64::MAX;
    f32: f32::NEG_INFINITY, f32::INFINITY;
    f64: f64::NEG_INFINITY, f64::INFINITY;
}

fn host_fn<T: Reducible>(op: ReduceOp) -> fn(T, T) -> T {
    match op {
        ReduceOp::Sum => T::add,
        ReduceOp::Min => T::min,
        ReduceOp::Max => T::max,
    }
}

fn identity<T: Reducible>(op: ReduceOp) -> T {
    match op {
        ReduceOp::Sum => T::ZERO,
        ReduceOp::Min => T::HIGHEST,
        ReduceOp::Max => T::LOWEST,
    }
}

/// `a op b` for the operation's code (a constant at every call: compilers fold the test).
#[kernel_fn]
fn combine<T: Num>(a: T, b: T, op: u32) -> T {
    let mut r = a + b;
    if op == 1 {
        r = a.min(b);
    } else if op == 2 {
        r = a.max(b);
    }
    r
}

/// Combines `v` over the group in a tree in `s` (`GROUP` long); the result is valid in
/// thread 0.
#[kernel_fn]
fn group_combine<T: Num>(s: &mut [T], v: T, op: u32) -> T {
    let lid = local_id().x;
    s[lid] = v;
    barrier();
    let mut half = GROUP / 2;
    while half > 0 {
        if lid < half {
            s[lid] = combine(s[lid], s[lid + half], op);
        }
        barrier();
        half /= 2;
    }
    s[0]
}

/// Pass 1 and 2 of a whole-buffer reduction: group `g` combines `x[i]` for the `i < n`
/// of its grid-strided share into `out[g]`.
///
/// Four accumulators per thread keep four loads in flight (a GPU hides memory latency by
/// loads in flight; one accumulator reached 0.16× of a copy on an H200); they are
/// combined in a fixed order.
#[kernel]
fn reduce_strided<T: Num, const OP: u32>(x: &[T], out: &mut [T], n: u32, identity: T) {
    let s = shared::<T, GROUP>();
    let stride = GROUP * num_groups().x;
    let mut a0 = identity;
    let mut a1 = identity;
    let mut a2 = identity;
    let mut a3 = identity;
    let mut i = global_id().x;
    // While four strides fit: no bounds test per load.
    while i + 3 * stride < n {
        a0 = combine(a0, x[i], OP);
        a1 = combine(a1, x[i + stride], OP);
        a2 = combine(a2, x[i + 2 * stride], OP);
        a3 = combine(a3, x[i + 3 * stride], OP);
        i += 4 * stride;
    }
    while i < n {
        a0 = combine(a0, x[i], OP);
        i += stride;
    }
    let acc = combine(combine(a0, a1, OP), combine(a2, a3, OP), OP);
    let total = group_combine(s, acc, OP);
    if local_id().x == 0 {
        out[group_id().x] = total;
    }
}

/// One group per row of a `rows × cols` row-major matrix: `out[r]` combines row `r`.
#[kernel]
fn reduce_rows_kernel<T: Num, const OP: u32>(x: &[T], out: &mut [T], cols: u32, identity: T) {
    let s = shared::<T, GROUP>();
    let row = group_id().x;
    let base = row * cols;
    let mut acc = identity;
    let mut c = local_id().x;
    while c < cols {
        acc = combine(acc, x[base + c], OP);
        c += GROUP;
    }
    let total = group_combine(s, acc, OP);
    if local_id().x == 0 {
        out[row] = total;
    }
}

fn strided_kernel<T: Reducible>(op: ReduceOp) -> &'static dotcompute::KernelDef {
    match op.code() {
        0 => reduce_strided::kernel::<T, 0>(),
        1 => reduce_strided::kernel::<T, 1>(),
        _ => reduce_strided::kernel::<T, 2>(),
    }
}

fn rows_kernel<T: Reducible>(op: ReduceOp) -> &'static dotcompute::KernelDef {
    match op.code() {
        0 => reduce_rows_kernel::kernel::<T, 0>(),
        1 => reduce_rows_kernel::kernel::<T, 1>(),
        _ => reduce_rows_kernel::kernel::<T, 2>(),
    }
}

/// Reduces `input` into `output[0]` (which must hold one element). An empty input gives
/// the operation's identity (0, the type's highest or lowest value).
pub fn reduce_into<T: Reducible>(
    queue: &impl AsStream,
    input: &Buffer<T>,
    op: ReduceOp,
    output: &mut Buffer<T>,
) -> Result<()> {
    const OP: &str = "reduce";
    if output.len() != 1 {
        return Err(invalid(
            OP,
            format!("the output must hold 1 element, it holds {}", output.len()),
        ));
    }
    let n = index_len(OP, input.len())?;
    let id = identity::<T>(op);
    if n == 0 {
        return queue.fill_buffer(output, id);
    }
    if host::is_cpu(queue) {
        let x = host::read(queue, input)?;
        return output.write(&[host::combine_all(&x, id, host_fn::<T>(op))]);
    }
    let def = strided_kernel::<T>(op);
    let mut run = |i: usize| {
        let groups = n.div_ceil(GROUP * 16).clamp(1, GROUP_CHOICES[i].1);
        let mut partials = queue.device().alloc::<T>(groups as usize)?;
        queue.launch_kernel(
            def,
            Launch::threads((groups * GROUP) as usize).group(GROUP),
            &[
                Arg::buffer(input),
                Arg::buffer_mut(&mut partials),
                Arg::scalar(n),
                Arg::scalar(id),
            ],
        )?;
        queue.launch_kernel(
            def,
            Launch::threads(GROUP as usize).group(GROUP),
            &[
                Arg::buffer(&partials),
                Arg::buffer_mut(output),
                Arg::scalar(groups),
                Arg::scalar(id),
            ],
        )
    };
    let names = GROUP_CHOICES.map(|c| c.0);
    let key = crate::tune::key(
        queue,
        OP,
        &format!("{:?} {op:?}", <T as dotcompute::Element>::TYPE),
        n as usize,
    );
    let winner = crate::tune::choose(&key, n as usize, &names, &mut run, || {
        queue.device().synchronize()
    })?;
    run(winner)
}

/// The reduction of `input`, read back to the host.
///
/// ```
/// use dotcompute::prelude::*;
/// use dotcompute_ops::{reduce::reduce, ReduceOp};
/// let d = Device::cpu();
/// let x = d.upload(&[3i32, -7, 4])?;
/// assert_eq!(reduce(&d, &x, ReduceOp::Sum)?, 0);
/// assert_eq!(reduce(&d, &x, ReduceOp::Min)?, -7);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn reduce<T: Reducible>(queue: &impl AsStream, input: &Buffer<T>, op: ReduceOp) -> Result<T> {
    let mut out = queue.device().alloc::<T>(1)?;
    reduce_into(queue, input, op, &mut out)?;
    Ok(queue.read_buffer(&out)?[0])
}

/// Reduces each row of the row-major `rows × cols` matrix `input` (`cols` elements per
/// row, `rows = input.len() / cols`) into `output[row]`.
pub fn reduce_rows<T: Reducible>(
    queue: &impl AsStream,
    input: &Buffer<T>,
    cols: usize,
    op: ReduceOp,
    output: &mut Buffer<T>,
) -> Result<()> {
    const OP: &str = "reduce_rows";
    if cols == 0 || input.len() % cols != 0 {
        return Err(invalid(
            OP,
            format!(
                "{} elements are not whole rows of {cols} columns",
                input.len()
            ),
        ));
    }
    let rows = input.len() / cols;
    if output.len() != rows {
        return Err(invalid(
            OP,
            format!(
                "the output has {} elements, the matrix {rows} rows",
                output.len()
            ),
        ));
    }
    index_len(OP, input.len())?;
    if rows == 0 {
        return Ok(());
    }
    if host::is_cpu(queue) {
        use rayon::prelude::*;
        let x = host::read(queue, input)?;
        let (id, f) = (identity::<T>(op), host_fn::<T>(op));
        let r: Vec<T> = x
            .par_chunks(cols)
            .map(|row| host::pairwise(row, id, f))
            .collect();
        return output.write(&r);
    }
    queue.launch_kernel(
        rows_kernel::<T>(op),
        Launch::threads(rows * GROUP as usize).group(GROUP),
        &[
            Arg::buffer(input),
            Arg::buffer_mut(output),
            Arg::scalar(cols as u32),
            Arg::scalar(identity::<T>(op)),
        ],
    )
}
