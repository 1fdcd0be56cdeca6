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
//! group, and the second pass adds at most 4 + 8 more. The vector form (32-bit elements,
//! 16 bytes a load) runs 32 to 2,048 groups with eight accumulators a thread: each folds
//! at most ⌈n / 65,536⌉ + 1, then 3 levels, 8 for the group, and at most 2 + 2 + 8 in the
//! second pass.

use crate::host::{self, HostArith};
use crate::{index_len, invalid, GroupCount, GROUP};
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

/// The first candidates for 32-bit elements (the first is their default): the first pass
/// reads 16 bytes a load ([`reduce_vec4`]). On an H200 (2026-11-28) they took CUDA's
/// 2^28-element f32 sum from 0.96× to 0.98–0.99× of a copy, NVIDIA Vulkan's from 0.95×
/// to 0.98×.
const VEC4_CHOICES: [(&str, GroupCount); 2] = [
    (
        "vector loads, 8 groups a unit",
        GroupCount::PerUnit(8, 1024),
    ),
    ("vector loads, 4 groups a unit", GroupCount::PerUnit(4, 512)),
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

/// Types the reductions take, with each operation's identity.
pub trait Reducible: Num + HostArith {
    /// The lowest value (the identity of max).
    const LOWEST: Self;
    /// The highest value (the identity of min).
    const HIGHEST: Self;
}

macro_rules! reducible {
    ($($t:ty: $lo:expr, $hi:expr;)*) => {$(
        impl Reducible for $t {
            const LOWEST: $t = $lo;
            const HIGHEST: $t = $hi;
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

/// Evaluates `$body` with `$f` bound to `op`'s host function as a function item of
/// `HostArith` (each arm its own type), so the host loops inline it and vectorise; a
/// `fn` pointer chosen at run time would be an indirect call per element.
macro_rules! with_host_fn {
    ($t:ty, $op:expr, |$f:ident| $body:expr) => {
        match $op {
            $crate::reduce::ReduceOp::Sum => {
                let $f = <$t as $crate::host::HostArith>::add;
                $body
            }
            $crate::reduce::ReduceOp::Min => {
                let $f = <$t as $crate::host::HostArith>::min;
                $body
            }
            $crate::reduce::ReduceOp::Max => {
                let $f = <$t as $crate::host::HostArith>::max;
                $body
            }
        }
    };
}
pub(crate) use with_host_fn;

pub(crate) fn identity<T: Reducible>(op: ReduceOp) -> T {
    match op {
        ReduceOp::Sum => T::ZERO,
        ReduceOp::Min => T::HIGHEST,
        ReduceOp::Max => T::LOWEST,
    }
}

/// `a op b` for the operation's code (a constant at every call: compilers fold the test).
#[kernel_fn]
pub(crate) fn combine<T: Num>(a: T, b: T, op: u32) -> T {
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
pub(crate) fn group_combine<T: Num>(s: &mut [T], v: T, op: u32) -> T {
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

/// [`reduce_strided`] reading 16 bytes a load, for 32-bit elements: `x4` holds the bits
/// of the whole vectors of `x` (`n` elements; `Vec4s::bits`: a generic kernel's host
/// side cannot name `Vec4<T>` as a buffer element, so lanes arrive as `u32` and are
/// bitcast). Two vectors in flight per step fold into eight accumulators, each in order;
/// the elements after the last whole vector (at most three) go to the first threads.
#[kernel]
fn reduce_vec4<T: Num, const OP: u32>(
    x4: &[Vec4<u32>],
    x: &[T],
    out: &mut [T],
    n: u32,
    identity: T,
) {
    let s = shared::<T, GROUP>();
    let stride = GROUP * num_groups().x;
    let mut a0 = identity;
    let mut a1 = identity;
    let mut a2 = identity;
    let mut a3 = identity;
    let mut a4 = identity;
    let mut a5 = identity;
    let mut a6 = identity;
    let mut a7 = identity;
    let mut i = global_id().x;
    while i + stride < x4.len() {
        let q0 = x4[i];
        let q1 = x4[i + stride];
        a0 = combine(a0, T::bitcast(q0.x), OP);
        a1 = combine(a1, T::bitcast(q0.y), OP);
        a2 = combine(a2, T::bitcast(q0.z), OP);
        a3 = combine(a3, T::bitcast(q0.w), OP);
        a4 = combine(a4, T::bitcast(q1.x), OP);
        a5 = combine(a5, T::bitcast(q1.y), OP);
        a6 = combine(a6, T::bitcast(q1.z), OP);
        a7 = combine(a7, T::bitcast(q1.w), OP);
        i += 2 * stride;
    }
    if i < x4.len() {
        let q = x4[i];
        a0 = combine(a0, T::bitcast(q.x), OP);
        a1 = combine(a1, T::bitcast(q.y), OP);
        a2 = combine(a2, T::bitcast(q.z), OP);
        a3 = combine(a3, T::bitcast(q.w), OP);
    }
    let tail = 4 * x4.len() + global_id().x;
    if tail < n {
        a4 = combine(a4, x[tail], OP);
    }
    let low = combine(combine(a0, a1, OP), combine(a2, a3, OP), OP);
    let high = combine(combine(a4, a5, OP), combine(a6, a7, OP), OP);
    let total = group_combine(s, combine(low, high, OP), OP);
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

/// One group per segment: `out[s]` combines `x[offsets[s]..offsets[s + 1]]` (offsets
/// checked on the host first).
#[kernel]
fn reduce_segments_kernel<T: Num, const OP: u32>(
    x: &[T],
    offsets: &[u32],
    out: &mut [T],
    identity: T,
) {
    let s = shared::<T, GROUP>();
    let seg = group_id().x;
    let end = offsets[seg + 1];
    let mut acc = identity;
    let mut i = offsets[seg] + local_id().x;
    while i < end {
        acc = combine(acc, x[i], OP);
        i += GROUP;
    }
    let total = group_combine(s, acc, OP);
    if local_id().x == 0 {
        out[seg] = total;
    }
}

fn segments_kernel<T: Reducible>(op: ReduceOp) -> &'static dotcompute::KernelDef {
    match op {
        ReduceOp::Sum => reduce_segments_kernel::kernel::<T, 0>(),
        ReduceOp::Min => reduce_segments_kernel::kernel::<T, 1>(),
        ReduceOp::Max => reduce_segments_kernel::kernel::<T, 2>(),
    }
}

fn strided_kernel<T: Reducible>(op: ReduceOp) -> &'static dotcompute::KernelDef {
    match op {
        ReduceOp::Sum => reduce_strided::kernel::<T, 0>(),
        ReduceOp::Min => reduce_strided::kernel::<T, 1>(),
        ReduceOp::Max => reduce_strided::kernel::<T, 2>(),
    }
}

/// The vector form's first pass for `T`.
fn vec4_kernel<T: Reducible>(op: ReduceOp) -> &'static dotcompute::KernelDef {
    match op {
        ReduceOp::Sum => reduce_vec4::kernel::<T, 0>(),
        ReduceOp::Min => reduce_vec4::kernel::<T, 1>(),
        ReduceOp::Max => reduce_vec4::kernel::<T, 2>(),
    }
}

fn rows_kernel<T: Reducible>(op: ReduceOp) -> &'static dotcompute::KernelDef {
    match op {
        ReduceOp::Sum => reduce_rows_kernel::kernel::<T, 0>(),
        ReduceOp::Min => reduce_rows_kernel::kernel::<T, 1>(),
        ReduceOp::Max => reduce_rows_kernel::kernel::<T, 2>(),
    }
}

/// Reduces `input` into `output[0]` (which must hold one element). An empty input gives
/// the operation's identity (0, the type's highest or lowest value).
///
/// ```
/// use dotcompute::prelude::*;
/// use dotcompute_ops::{reduce::reduce_into, ReduceOp};
/// let d = Device::cpu();
/// let x = d.upload(&[3i32, -7, 4])?;
/// let mut out = d.alloc::<i32>(1)?;
/// reduce_into(&d, &x, ReduceOp::Max, &mut out)?;
/// assert_eq!(out.to_vec()?, [4]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
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
        let x = host::elements(queue, input)?;
        let total = with_host_fn!(T, op, |f| host::combine_all(&x, id, f));
        return output.write(&[total]);
    }
    let def = strided_kernel::<T>(op);
    // 32-bit elements are also read as vectors (`as_vec4s`: None for the others), and
    // those forms come first.
    let vectors = input.as_vec4s();
    let vector_forms: &[(&str, GroupCount)] = if vectors.is_some() {
        &VEC4_CHOICES
    } else {
        &[]
    };
    let mut run = |i: usize| {
        let (groups, kernel, mut args) = match (vector_forms.get(i), vectors) {
            (Some(&(_, most)), Some(v)) => (
                // 32 to 2,048 groups keep float sums within the stated bound (module
                // docs) on any number of compute units.
                (n / 4)
                    .div_ceil(GROUP * 8)
                    .clamp(1, most.count(queue).clamp(32, 2048)),
                vec4_kernel::<T>(op),
                vec![v.bits(), Arg::buffer(input)],
            ),
            _ => (
                n.div_ceil(GROUP * 16)
                    .clamp(1, GROUP_CHOICES[i - vector_forms.len()].1),
                def,
                vec![Arg::buffer(input)],
            ),
        };
        let mut partials = queue.scratch::<T>(groups as usize)?;
        args.extend([
            Arg::buffer_mut(&mut partials),
            Arg::scalar(n),
            Arg::scalar(id),
        ]);
        queue.launch_kernel(
            kernel,
            Launch::threads((groups * GROUP) as usize).group(GROUP),
            &args,
        )?;
        drop(args);
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
    let names: Vec<&str> = vector_forms
        .iter()
        .map(|c| c.0)
        .chain(GROUP_CHOICES.iter().map(|c| c.0))
        .collect();
    let key = crate::tune::key(
        queue,
        OP,
        &format!("{:?} {op:?}", <T as dotcompute::Element>::TYPE),
        n as usize,
    );
    let winner = crate::tune::choose_on(queue, &key, n as usize, &names, &mut run, || {
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
    let mut out = queue.scratch::<T>(1)?;
    reduce_into(queue, input, op, &mut out)?;
    Ok(queue.read_buffer(&out)?[0])
}

/// Reduces each row of the row-major `rows × cols` matrix `input` (`cols` elements per
/// row, `rows = input.len() / cols`) into `output[row]`.
///
/// ```
/// use dotcompute::prelude::*;
/// use dotcompute_ops::{reduce::reduce_rows, ReduceOp};
/// let d = Device::cpu();
/// let x = d.upload(&[1u32, 2, 3, 4, 5, 6])?; // 2 rows of 3
/// let mut sums = d.alloc::<u32>(2)?;
/// reduce_rows(&d, &x, 3, ReduceOp::Sum, &mut sums)?;
/// assert_eq!(sums.to_vec()?, [6, 15]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
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
        let x = host::elements(queue, input)?;
        let id = identity::<T>(op);
        return host::fill_output(output, |r| {
            with_host_fn!(T, op, |f| r
                .par_iter_mut()
                .zip(x.par_chunks(cols))
                .for_each(|(o, row)| *o = host::pairwise(row, id, f)))
        });
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

/// Reduces each segment `input[offsets[s]..offsets[s + 1]]` into `output[s]`
/// (`offsets.len() == output.len() + 1`). Offsets must not decrease and must end within
/// the input: they are read and checked first (one small read), and a bad one is an error
/// naming it. An empty segment gives the identity.
///
/// ```
/// use dotcompute::prelude::*;
/// use dotcompute_ops::{reduce::reduce_segments, ReduceOp};
/// let d = Device::cpu();
/// let x = d.upload(&[1u32, 2, 3, 4, 5, 6])?;
/// let offsets = d.upload(&[0u32, 2, 2, 6])?;
/// let mut sums = d.alloc::<u32>(3)?;
/// reduce_segments(&d, &x, &offsets, ReduceOp::Sum, &mut sums)?;
/// assert_eq!(sums.to_vec()?, [3, 0, 18]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn reduce_segments<T: Reducible>(
    queue: &impl AsStream,
    input: &Buffer<T>,
    offsets: &Buffer<u32>,
    op: ReduceOp,
    output: &mut Buffer<T>,
) -> Result<()> {
    const OP: &str = "reduce_segments";
    if offsets.len() != output.len() + 1 {
        return Err(invalid(
            OP,
            format!(
                "{} offsets for {} segments: there must be one more offset than segments",
                offsets.len(),
                output.len()
            ),
        ));
    }
    index_len(OP, input.len())?;
    let segments = output.len();
    if segments == 0 {
        return Ok(());
    }
    let bounds = crate::read_offsets(queue, OP, offsets, input.len())?;
    let id = identity::<T>(op);
    if host::is_cpu(queue) {
        use rayon::prelude::*;
        let x = host::elements(queue, input)?;
        return host::fill_output(output, |r| {
            with_host_fn!(T, op, |f| r.par_iter_mut().enumerate().for_each(
                |(s, o)| {
                    *o = host::pairwise(&x[bounds[s] as usize..bounds[s + 1] as usize], id, f)
                }
            ))
        });
    }
    queue.launch_kernel(
        segments_kernel::<T>(op),
        Launch::threads(segments * GROUP as usize).group(GROUP),
        &[
            Arg::buffer(input),
            Arg::buffer(offsets),
            Arg::buffer_mut(output),
            Arg::scalar(id),
        ],
    )
}

/// Whether `(b, kb)` beats `(a, ka)` for the smallest (`MAX` 0) or largest (`MAX` 1):
/// a missing entry (`u32::MAX` index) always loses, a NaN loses to a number, ties go to
/// the lower index.
#[kernel_fn]
fn beats<T: Num>(b: T, kb: u32, a: T, ka: u32, max: u32) -> bool {
    let mut better = false;
    if kb != 4294967295u32 {
        if ka == 4294967295u32 {
            better = true;
        } else if b == b && a != a {
            better = true;
        } else if b == a {
            better = kb < ka;
        } else if max == 1 {
            better = b > a;
        } else {
            better = b < a;
        }
    }
    better
}

/// Pass 1 (`PARTIALS` 0: indices are positions) and pass 2 (`PARTIALS` 1: indices come
/// from `kin`) of argmin / argmax: group `g` leaves its best in `vout[g]`, `kout[g]`.
#[kernel]
fn arg_kernel<T: Num, const MAX: u32, const PARTIALS: u32>(
    x: &[T],
    kin: &[u32],
    vout: &mut [T],
    kout: &mut [u32],
    n: u32,
) {
    let sv = shared::<T, GROUP>();
    let sk = shared::<u32, GROUP>();
    let lid = local_id().x;
    let stride = GROUP * num_groups().x;
    let mut v = T::zero();
    let mut k = 4294967295u32;
    let mut i = global_id().x;
    while i < n {
        let mut ki = i;
        if PARTIALS == 1 {
            ki = kin[i];
        }
        let xi = x[i];
        if beats(xi, ki, v, k, MAX) {
            v = xi;
            k = ki;
        }
        i += stride;
    }
    sv[lid] = v;
    sk[lid] = k;
    barrier();
    let mut half = GROUP / 2;
    while half > 0 {
        if lid < half {
            if beats(sv[lid + half], sk[lid + half], sv[lid], sk[lid], MAX) {
                sv[lid] = sv[lid + half];
                sk[lid] = sk[lid + half];
            }
        }
        barrier();
        half /= 2;
    }
    if lid == 0 {
        vout[group_id().x] = sv[0];
        kout[group_id().x] = sk[0];
    }
}

/// The index and value of the smallest element (`None` for an empty input); ties give
/// the first index; NaNs are passed over unless every element is one.
///
/// ```
/// use dotcompute::prelude::*;
/// let d = Device::cpu();
/// let x = d.upload(&[4.0f32, 1.0, f32::NAN, 1.0, 9.0])?;
/// assert_eq!(dotcompute_ops::reduce::argmin(&d, &x)?, Some((1, 1.0)));
/// assert_eq!(dotcompute_ops::reduce::argmax(&d, &x)?, Some((4, 9.0)));
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn argmin<T: Reducible>(
    queue: &impl AsStream,
    input: &Buffer<T>,
) -> Result<Option<(usize, T)>> {
    arg::<T, 0>(queue, "argmin", input)
}

/// The index and value of the largest element (as [`argmin`]).
///
/// ```
/// use dotcompute::prelude::*;
/// let d = Device::cpu();
/// let x = d.upload(&[2u32, 9, 9, 1])?;
/// assert_eq!(dotcompute_ops::reduce::argmax(&d, &x)?, Some((1, 9)));
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn argmax<T: Reducible>(
    queue: &impl AsStream,
    input: &Buffer<T>,
) -> Result<Option<(usize, T)>> {
    arg::<T, 1>(queue, "argmax", input)
}

fn arg<T: Reducible, const MAX: u32>(
    queue: &impl AsStream,
    op: &'static str,
    input: &Buffer<T>,
) -> Result<Option<(usize, T)>> {
    let n = index_len(op, input.len())?;
    if n == 0 {
        return Ok(None);
    }
    let groups = n.div_ceil(GROUP * 16).clamp(1, 1024);
    let mut v1 = queue.scratch::<T>(groups as usize)?;
    let mut k1 = queue.scratch::<u32>(groups as usize)?;
    let unused = queue.scratch::<u32>(1)?;
    arg_kernel::launch::<T, MAX, 0>(
        queue,
        Launch::threads((groups * GROUP) as usize).group(GROUP),
        input,
        &unused,
        &mut v1,
        &mut k1,
        n,
    )?;
    let mut v2 = queue.scratch::<T>(1)?;
    let mut k2 = queue.scratch::<u32>(1)?;
    arg_kernel::launch::<T, MAX, 1>(
        queue,
        Launch::threads(GROUP as usize).group(GROUP),
        &v1,
        &k1,
        &mut v2,
        &mut k2,
        groups,
    )?;
    let k = queue.read_buffer(&k2)?[0];
    let v = queue.read_buffer(&v2)?[0];
    Ok(Some((k as usize, v)))
}

#[cfg(test)]
mod harness {
    /// Writes the CUDA C++ of the f32 sum's two kernels (the vector first pass and the
    /// strided second) to `scripts/reduce-harness/`, for the harness there.
    #[test]
    #[ignore = "writes files for scripts/reduce-harness"]
    fn write_the_f32_sum_cuda_for_the_harness() {
        use dotcompute::{KernelSource, Target};
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/reduce-harness");
        let first = super::reduce_vec4::kernel::<f32, 0>();
        let second = super::reduce_strided::kernel::<f32, 0>();
        std::fs::write(
            format!("{dir}/reduce_vec4_generated.cu"),
            first.source(Target::Cuda).unwrap(),
        )
        .unwrap();
        std::fs::write(
            format!("{dir}/reduce_strided_generated.cu"),
            second.source(Target::Cuda).unwrap(),
        )
        .unwrap();
    }
}
