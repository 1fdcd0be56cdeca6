//! # dotcompute-ops: library operations on typed buffers
//!
//! Reduce, scan, compaction, radix sort, histograms, row softmax, transpose and a tuned matrix product on any dotcompute device (CPU, CUDA, wgpu, and Metal
//! through the same generated MSL), each on a [`Device`](dotcompute::Device) or a
//! [`Stream`](dotcompute::Stream) (anything [`AsStream`]). Every kernel is written with
//! `#[kernel]`, the language users write theirs in: the operations are users of the
//! language, not a side door (`docs/architecture.md`, "Library operations").
//!
//! ```
//! use dotcompute::prelude::*;
//! use dotcompute_ops::{reduce, sort, ReduceOp, Order};
//!
//! let device = Device::cpu();
//! let mut keys = device.upload(&[5u32, 1, 4, 1, 3])?;
//! let mut values = device.upload(&[50.0f32, 10.0, 40.0, 11.0, 30.0])?;
//! sort::sort_pairs(&device, &mut keys, &mut values, Order::Ascending)?;
//! assert_eq!(keys.to_vec()?, [1, 1, 3, 4, 5]);
//! assert_eq!(values.to_vec()?, [10.0, 11.0, 30.0, 40.0, 50.0]); // stable
//! assert_eq!(reduce::reduce(&device, &keys, ReduceOp::Sum)?, 14);
//! # Ok::<(), dotcompute::Error>(())
//! ```
//!
//! Operations with more than one good configuration are tuned per device, operation,
//! type and size class ([`tune`]; `DOTCOMPUTE_AUTOTUNE=on|off|force`).
//!
//! ## In graphs
//!
//! Every operation that returns nothing to the host can be recorded into a
//! [`Graph`](dotcompute::Graph) with [`Graph::record`](dotcompute::Graph::record) and
//! replayed with new inputs: its temporaries come from
//! [`AsStream::scratch`](dotcompute::AsStream::scratch), which the graph keeps. Those that
//! need a value on the host (a count, offsets) refuse with `Error::Graph` there.
//!
//! ```
//! use dotcompute::prelude::*;
//! use dotcompute::Graph;
//! use dotcompute_ops::{scan, sort, Order};
//!
//! let device = Device::cpu();
//! let (mut keys, mut values) = (device.alloc::<u32>(4)?, device.alloc::<u32>(4)?);
//! let mut sums = device.alloc::<u32>(4)?;
//! let mut graph = Graph::new(&device);
//! let recorded = graph.record((&mut keys, &mut values, &mut sums), &[], |q, (k, v, s)| {
//!     sort::sort_pairs(q, k, v, Order::Ascending)?;
//!     scan::exclusive_sum(q, k, s)
//! })?;
//! let (k, v, s) = recorded.buffers;
//! let mut exec = graph.instantiate()?;
//! for input in [[4u32, 1, 3, 2], [9, 9, 0, 5]] {
//!     exec.write(k, &input)?;
//!     exec.write(v, &[0, 1, 2, 3])?;
//!     exec.launch(&device)?;
//! }
//! assert_eq!(exec.read(k)?, [0, 5, 9, 9]);
//! assert_eq!(exec.read(v)?, [2, 3, 0, 1]);
//! assert_eq!(exec.read(s)?, [0, 0, 5, 14]);
//! # Ok::<(), dotcompute::Error>(())
//! ```
//!
//! ## Contract
//!
//! *Validates*: lengths (outputs as long as inputs, row shapes that divide the input,
//! sizes that fit the kernels' 32-bit indices): a mismatch is `Error::Range`
//! naming the operation and both lengths, before anything runs. Empty inputs are valid
//! and do nothing (a reduction of nothing is the operation's identity). Outputs cannot
//! alias inputs: the borrow checker refuses `&buffer` and `&mut buffer` together.
//!
//! *Trusts* the facade for everything a launch checks (bounds, devices, ordering on
//! streams, what a graph recording may use), and states each operation's numeric result: integer results and sorts are
//! exact and the same on every backend; float sums are computed in a fixed tree whose
//! shape depends only on the length, so a device gives the same bits on every run, with
//! the error bound written on each function.

pub mod histogram;
mod host;
pub mod matmul;
pub mod reduce;
pub mod scan;
pub mod select;
pub mod softmax;
pub mod sort;
pub mod topk;
pub mod transpose;
pub mod tune;

pub use host::HostArith;
pub use reduce::ReduceOp;
pub use sort::{KeyKind, Order, RadixKey};

use dotcompute::prelude::*;
use dotcompute::{AsStream, Buffer, Element, Error, Result};

/// Threads per group of every kernel here (a power of two every backend allows).
pub(crate) const GROUP: u32 = 256;

/// Whether `queue`'s device is a GPU emulated on the CPU (lavapipe, the MSL shim), whose
/// kernels take their loop counts at run time: see `scan.rs` and `sort/mod.rs`.
pub(crate) fn software_gpu(queue: &impl AsStream) -> bool {
    queue.device().info().device_type == dotcompute::DeviceType::SoftwareGpu
}

/// A kernel's loop count: its const `fixed`, or `runtime` (a uniform) when `fixed` is 0.
/// Software GPUs get 0: their compiler cannot unroll a loop of unknown count, and an
/// unrolled body with barriers is what lavapipe's LLVM spends minutes on (a coroutine
/// frame per barrier over the whole body). On GPUs `fixed` is a literal and the choice
/// folds away.
#[kernel_fn]
pub(crate) fn fixed_or(fixed: u32, runtime: u32) -> u32 {
    let mut count = fixed;
    if fixed == 0 {
        count = runtime;
    }
    count
}

/// `out[i] = i % cols`: each element's index within its row.
#[kernel]
fn index_in_row(out: &mut [u32], cols: u32) {
    let i = global_id().x;
    if i < out.len() {
        out[i] = i % cols;
    }
}

/// `n` indices, each element's within rows of `cols` (`cols == n`: the positions
/// `0..n`), made on the device instead of uploaded from the host. `n` is checked for
/// `u32` indices by the caller.
pub(crate) fn index_in_rows(queue: &impl AsStream, n: usize, cols: usize) -> Result<Buffer<u32>> {
    let mut out = queue.scratch::<u32>(n)?;
    index_in_row::launch(queue, Launch::threads(n), &mut out, cols as u32)?;
    Ok(out)
}

/// A temporary of `len` copies of `value` for work on `queue` (kept by a graph when
/// `queue` records: see [`AsStream::scratch`]).
pub(crate) fn scratch_filled<T: Element>(
    queue: &impl AsStream,
    len: usize,
    value: T,
) -> Result<Buffer<T>> {
    let mut b = queue.scratch::<T>(len)?;
    queue.fill_buffer(&mut b, value)?;
    Ok(b)
}

/// The error of a bad argument to operation `op` (`Error::Range`, as the facade's own
/// length checks).
pub(crate) fn invalid(op: &'static str, detail: String) -> Error {
    Error::Range { op, detail }
}

/// The length as the kernels' `u32` index, or why it does not fit.
pub(crate) fn index_len(op: &'static str, len: usize) -> Result<u32> {
    u32::try_from(len).map_err(|_| {
        invalid(
            op,
            format!("{len} elements: the kernels index with u32, so at most 4294967295"),
        )
    })
}

/// Index `e` of a shared array padded with one element per 32, so that a thread's run of
/// consecutive elements (`e = lid * k + j`) falls in different banks.
#[kernel_fn]
pub(crate) fn padded(e: u32) -> u32 {
    e + e / 32
}

/// `Error::Range` unless the output is as long as the input.
pub(crate) fn same_len(op: &'static str, input: usize, output: usize) -> Result<()> {
    len_matches_input(op, "the output has", input, output)
}

/// `Error::Range` unless a buffer that goes with the input (`what`: "the output has",
/// "the flags have") is as long as it.
pub(crate) fn len_matches_input(
    op: &'static str,
    what: &str,
    input: usize,
    len: usize,
) -> Result<()> {
    if input == len {
        Ok(())
    } else {
        Err(invalid(
            op,
            format!("{what} {len} elements, the input {input}"),
        ))
    }
}

/// Reads segment offsets to the host and checks them: they must not decrease and must
/// end within the input (`n` elements); a bad one is `Error::Range` naming it.
pub(crate) fn read_offsets(
    queue: &impl AsStream,
    op: &'static str,
    offsets: &Buffer<u32>,
    n: usize,
) -> Result<Vec<u32>> {
    let bounds = queue.read_buffer(offsets)?;
    if let Some(s) = (1..bounds.len()).find(|&s| bounds[s - 1] > bounds[s]) {
        return Err(invalid(
            op,
            format!(
                "offsets[{}] = {} is above offsets[{s}] = {}: offsets must not decrease",
                s - 1,
                bounds[s - 1],
                bounds[s]
            ),
        ));
    }
    if let Some(&last) = bounds.last().filter(|&&last| last as usize > n) {
        return Err(invalid(
            op,
            format!("the last offset, {last}, is past the input's {n} elements"),
        ));
    }
    Ok(bounds)
}

/// [`read_offsets`] for segments that must cover the input: the offsets also start at 0
/// and end at `n` (scans and sorts by offsets).
pub(crate) fn read_covering_offsets(
    queue: &impl AsStream,
    op: &'static str,
    offsets: &Buffer<u32>,
    n: usize,
) -> Result<Vec<u32>> {
    let bounds = read_offsets(queue, op, offsets, n)?;
    if bounds.first() != Some(&0) || bounds.last().map(|&l| l as usize) != Some(n) {
        return Err(invalid(
            op,
            format!(
                "the offsets ({} of them, {:?} … {:?}) must start at 0 and end at the input's length, {n}",
                bounds.len(),
                bounds.first(),
                bounds.last()
            ),
        ));
    }
    Ok(bounds)
}

/// How many groups a form of an operation runs at most: fixed, or so many per compute
/// unit where the device tells its units (CUDA: an equal share on every SM), else the
/// fixed count given.
#[derive(Clone, Copy)]
pub(crate) enum GroupCount {
    Fixed(u32),
    /// So many per compute unit, else (units unknown) the second count.
    PerUnit(u32, u32),
}

impl GroupCount {
    pub(crate) fn count(self, queue: &impl AsStream) -> u32 {
        match self {
            GroupCount::Fixed(g) => g,
            GroupCount::PerUnit(per, fallback) => match queue.device().info().compute_units {
                0 => fallback,
                units => units.saturating_mul(per),
            },
        }
    }
}
