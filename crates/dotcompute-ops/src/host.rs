//! The CPU device's path: the operations on host memory with rayon.
//!
//! The CPU backend runs kernels with barriers as split group bodies, one region of the
//! group at a time, and grid-strided loops a thread at a time: right, but the reduce-then-
//! scan and radix kernels written for GPUs ran at 0.02× (reduce) to 0.0005× (sort) of a
//! copy there (2026-11-26, 2 cores). On the CPU device a buffer is host memory, so the
//! operations work on it in place ([`elements`], [`fill_output`], [`update`], through
//! `Buffer::host_slice`), with rayon in fixed chunks (results do not depend on the thread
//! count or on work stealing). The GPU kernels are still run on the CPU by the Metal
//! shim's tests and on lavapipe.

use dotcompute::{AsStream, Buffer, Element, Result};
use rayon::prelude::*;
use std::borrow::Cow;

/// Elements per chunk: the unit of parallel work and of the fixed summation tree.
pub(crate) const CHUNK: usize = 1 << 16;

/// Whether the operation takes the host path: `queue`'s device is the host's CPU (or
/// one of its streams), and the work is run now, not recorded into a graph (a host path
/// cannot be recorded: a recording takes the kernels, which the CPU device runs too).
pub(crate) fn is_cpu(queue: &impl AsStream) -> bool {
    queue.device().info().device_type == dotcompute::DeviceType::Cpu && !queue.recording()
}

/// The elements of `b` on the host: in place on the CPU device (no copy), else read.
pub(crate) fn elements<'b, T: Element>(
    queue: &impl AsStream,
    b: &'b Buffer<T>,
) -> Result<Cow<'b, [T]>> {
    Ok(match b.host_slice()? {
        Some(x) => Cow::Borrowed(x),
        None => Cow::Owned(queue.read_buffer(b)?),
    })
}

/// Runs `fill` on `out`'s elements: in place on the CPU device, else on a host array
/// written back afterwards.
pub(crate) fn fill_output<T: Element>(
    out: &mut Buffer<T>,
    fill: impl FnOnce(&mut [T]),
) -> Result<()> {
    if let Some(y) = out.host_slice_mut()? {
        fill(y);
        return Ok(());
    }
    let mut y = vec![T::zeroed(); out.len()];
    fill(&mut y);
    out.write(&y)
}

/// Runs `f` on `b`'s elements to change them: in place on the CPU device, else on a copy
/// read first and written back.
pub(crate) fn update<T: Element, R>(
    queue: &impl AsStream,
    b: &mut Buffer<T>,
    f: impl FnOnce(&mut [T]) -> R,
) -> Result<R> {
    if let Some(x) = b.host_slice_mut()? {
        return Ok(f(x));
    }
    let mut x = queue.read_buffer(b)?;
    let r = f(&mut x);
    b.write(&x)?;
    Ok(r)
}

/// Host arithmetic of the element types (integers wrap, as in kernels).
pub trait HostArith: Element + Send + Sync {
    /// Zero: the identity of `add`.
    const ZERO: Self;
    /// Whether every operation is associative bit for bit (integers: wrapping sums, min
    /// and max), so that a scan may combine a block of elements before its carry.
    const ASSOCIATIVE: bool;
    fn add(a: Self, b: Self) -> Self;
    fn min(a: Self, b: Self) -> Self;
    fn max(a: Self, b: Self) -> Self;
}

macro_rules! int_arith {
    ($($t:ty),*) => {$(
        impl HostArith for $t {
            const ZERO: $t = 0;
            const ASSOCIATIVE: bool = true;
            fn add(a: $t, b: $t) -> $t { a.wrapping_add(b) }
            fn min(a: $t, b: $t) -> $t { Ord::min(a, b) }
            fn max(a: $t, b: $t) -> $t { Ord::max(a, b) }
        }
    )*};
}
int_arith!(u32, i32, u64, i64);
macro_rules! float_arith {
    ($($t:ty),*) => {$(
        impl HostArith for $t {
            const ZERO: $t = 0.0;
            const ASSOCIATIVE: bool = false;
            fn add(a: $t, b: $t) -> $t { a + b }
            fn min(a: $t, b: $t) -> $t { a.min(b) }
            fn max(a: $t, b: $t) -> $t { a.max(b) }
        }
    )*};
}
float_arith!(f32, f64);

/// Elements of the leaves of [`pairwise`]: 8 lanes of 8.
const LEAF: usize = 64;

/// Combines `x` pairwise (halves down to leaves of at most 64 elements; a leaf folds its
/// elements into 8 lanes in order, element `i` into lane `i % 8`, and joins the lanes in
/// a tree): for sums, an error of at most (log2(len / 64) + 11) unit roundoffs of Σ|x|.
/// `f` is a function item (not a pointer) wherever speed matters, so that the lanes
/// become vector instructions.
pub(crate) fn pairwise<T: HostArith, F: Fn(T, T) -> T + Copy>(x: &[T], identity: T, f: F) -> T {
    if x.len() <= LEAF {
        return leaf(x, identity, f);
    }
    let (l, r) = x.split_at(x.len() / 2);
    f(pairwise(l, identity, f), pairwise(r, identity, f))
}

/// One leaf of [`pairwise`]: 8 independent lanes (what a vector register holds), then a
/// tree of 3 levels.
fn leaf<T: HostArith, F: Fn(T, T) -> T + Copy>(x: &[T], identity: T, f: F) -> T {
    let mut lanes = [identity; 8];
    let mut rows = x.chunks_exact(8);
    for row in &mut rows {
        for (lane, &v) in lanes.iter_mut().zip(row) {
            *lane = f(*lane, v);
        }
    }
    for (lane, &v) in lanes.iter_mut().zip(rows.remainder()) {
        *lane = f(*lane, v);
    }
    let [a, b, c, d, e, g, h, k] = lanes;
    f(f(f(a, b), f(c, d)), f(f(e, g), f(h, k)))
}

/// Combines all of `x`: chunks pairwise in parallel, then the chunks' results in order.
pub(crate) fn combine_all<T: HostArith, F: Fn(T, T) -> T + Copy + Send + Sync>(
    x: &[T],
    identity: T,
    f: F,
) -> T {
    let parts: Vec<T> = x
        .par_chunks(CHUNK)
        .map(|c| pairwise(c, identity, f))
        .collect();
    parts.into_iter().fold(identity, f)
}

/// Exclusive or inclusive scan of `x` into `y` with `f` (identity `identity`), restarting
/// at every element whose head flag is not zero when `heads` is given, in one sweep of
/// [`chained_chunks`]: each chunk's aggregate (and whether it holds a head), its carry
/// from the chunks before it, then the chunk again from that carry.
/// `streamed`: whole blocks of an unsegmented scan of an exact type are written with
/// non-temporal stores where they can be ([`scan_forms`]).
pub(crate) fn scan<T: HostArith>(
    x: &[T],
    heads: Option<&[u32]>,
    y: &mut [T],
    (inclusive, streamed): (bool, bool),
    identity: T,
    f: impl Fn(T, T) -> T + Copy + Send + Sync,
) {
    let Some(heads) = heads else {
        return scan_whole(x, y, (inclusive, streamed), identity, f);
    };
    // Two runs' (whether a head restarts it, total since the last restart), joined: an
    // element is a run of one, so a chunk's aggregate folds its elements with this too.
    let restarting = |(r1, t1): (bool, T), (r2, t2): (bool, T)| {
        if r2 {
            (true, t2)
        } else {
            (r1, f(t1, t2))
        }
    };
    chained_chunks(
        x,
        y,
        identity,
        |c, xs| {
            xs.iter()
                .zip(&heads[c * CHUNK..])
                .fold((false, identity), |acc, (&v, &h)| {
                    restarting(acc, (h != 0, v))
                })
        },
        T::ASSOCIATIVE.then_some(&restarting as &(dyn Fn(_, _) -> _ + Sync)),
        |carry, (restarts, total)| if restarts { total } else { f(carry, total) },
        |c, xs, ys, mut running| {
            for ((o, &v), &h) in ys.iter_mut().zip(xs).zip(&heads[c * CHUNK..]) {
                if inclusive {
                    running = if h != 0 { v } else { f(running, v) };
                    *o = running;
                } else {
                    if h != 0 {
                        running = identity;
                    }
                    *o = running;
                    running = f(running, v);
                }
            }
        },
    );
}

/// [`scan`] without head flags: the same chunks and carries, with loops the compiler can
/// keep tight (no flag test per element).
fn scan_whole<T: HostArith>(
    x: &[T],
    y: &mut [T],
    (inclusive, streamed): (bool, bool),
    identity: T,
    f: impl Fn(T, T) -> T + Copy + Send + Sync,
) {
    chained_chunks(
        x,
        y,
        identity,
        |_, xs| chunk_total(xs, identity, f),
        T::ASSOCIATIVE.then_some(&f as &(dyn Fn(T, T) -> T + Sync)),
        f,
        |_, xs, ys, running| scan_chunk(xs, ys, (inclusive, streamed), running, f),
    );
}

/// A chunk's aggregate: its elements folded from `identity`, left to right. Both forms of
/// the whole scan take it ([`scan_whole`], [`scan_two_passes`]), so that their carries,
/// and float scans' results, are the same bits.
fn chunk_total<T: Copy>(xs: &[T], identity: T, f: impl Fn(T, T) -> T) -> T {
    xs.iter().fold(identity, |a, &b| f(a, b))
}

/// How the CPU device runs a scan: in one sweep ([`scan`]) or in two passes
/// ([`scan_two_passes`], whole scans only), with ordinary (cached) or non-temporal
/// (streamed) stores of whole blocks.
#[derive(Clone, Copy)]
pub(crate) struct HostScan {
    pub two_passes: bool,
    pub streamed: bool,
}

/// The forms of [`HostScan`] with the tuner's names.
const SWEEP: (&str, HostScan) = (
    "cached-stores",
    HostScan {
        two_passes: false,
        streamed: false,
    },
);
const SWEEP_STREAMED: (&str, HostScan) = (
    "streamed-stores",
    HostScan {
        two_passes: false,
        streamed: true,
    },
);
const TWO_PASSES: (&str, HostScan) = (
    "two-passes, cached-stores",
    HostScan {
        two_passes: true,
        streamed: false,
    },
);
const TWO_PASSES_STREAMED: (&str, HostScan) = (
    "two-passes, streamed-stores",
    HostScan {
        two_passes: true,
        streamed: true,
    },
);

/// The forms of the CPU's scan of `T`, the default first: a segmented scan takes the
/// single sweep with cached stores; a whole scan that sweep, the same in two passes, and,
/// for exact types of 4 or 8 bytes on x86-64, both with streamed stores. An ordinary
/// store first reads the line it writes (so a scan of 2^24 `u32` moves 192 MB where it
/// needs 128); a streamed store does not, but leaves the output out of the caches, which a
/// later reader of a small output would miss. The single sweep reads the input once but
/// each chunk waits for the aggregates before it; two passes read it twice with no wait
/// (on the H200's 16-core host in session 33 a two-pass rayon scan ran 0.85–0.89× of the
/// sweep's time): candidates, not rules. Every form gives the same bits (the carries are
/// the same sequential fold of the same chunks' aggregates).
pub(crate) fn scan_forms<T: HostArith>(segmented: bool) -> &'static [(&'static str, HostScan)] {
    let streams =
        cfg!(target_arch = "x86_64") && T::ASSOCIATIVE && matches!(std::mem::size_of::<T>(), 4 | 8);
    if segmented {
        &[SWEEP]
    } else if streams {
        &[SWEEP, SWEEP_STREAMED, TWO_PASSES, TWO_PASSES_STREAMED]
    } else {
        &[SWEEP, TWO_PASSES]
    }
}

/// [`scan`] without head flags in two passes over `x`'s [`CHUNK`]-element chunks: every
/// chunk's aggregate in parallel, their sequential fold into each chunk's carry, then
/// every chunk scanned from its carry in parallel ([`scan_chunk`]). The same chunks,
/// aggregates, carries and chunk scans as the single sweep ([`chained_chunks`]), so the
/// same bits for every type; it reads `x` twice and never waits.
pub(crate) fn scan_two_passes<T: HostArith>(
    x: &[T],
    y: &mut [T],
    (inclusive, streamed): (bool, bool),
    identity: T,
    f: impl Fn(T, T) -> T + Copy + Send + Sync,
) {
    let totals: Vec<T> = x
        .par_chunks(CHUNK)
        .map(|xs| chunk_total(xs, identity, f))
        .collect();
    let mut carry = identity;
    let carries: Vec<T> = totals
        .iter()
        .map(|&total| {
            let before = carry;
            carry = f(carry, total);
            before
        })
        .collect();
    y.par_chunks_mut(CHUNK)
        .zip(x.par_chunks(CHUNK))
        .zip(carries)
        .for_each(|((ys, xs), carry)| scan_chunk(xs, ys, (inclusive, streamed), carry, f));
}

/// Writes the block `out` to `dst` (as many elements), with non-temporal 16-byte stores
/// where `streamed`, the block is 16-byte aligned and 4- or 8-byte elements fill whole
/// stores; else with ordinary stores.
#[inline(always)]
fn store_block<T: Copy>(dst: &mut [T], out: &[T; BLOCK], streamed: bool) {
    #[cfg(target_arch = "x86_64")]
    if streamed
        && (dst.as_ptr() as usize) % 16 == 0
        && matches!(std::mem::size_of::<T>(), 4 | 8)
        && dst.len() == BLOCK
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let stores = BLOCK * std::mem::size_of::<T>() / 16;
        let (from, to) = (
            out.as_ptr().cast::<__m128i>(),
            dst.as_mut_ptr().cast::<__m128i>(),
        );
        for k in 0..stores {
            // SAFETY: SSE2 is part of x86-64; `to` is 16-byte aligned and `dst` holds
            // `stores` × 16 bytes (checked above), `from` as many (an unaligned load).
            unsafe { _mm_stream_si128(to.add(k), _mm_loadu_si128(from.add(k))) };
        }
        return;
    }
    let _ = streamed;
    dst.copy_from_slice(out);
}

/// Elements a block of [`scan_chunk`] combines before its carry.
const BLOCK: usize = 8;

/// Scans `xs` into `ys` from `running`. For exact types in blocks of [`BLOCK`]: each
/// block's own prefixes first (independent of the carry, so blocks overlap in the core),
/// then the carry joined to each: one dependent step a block instead of one an element.
/// Floats keep the left fold from the carry (their sums' rounding depends on the order).
fn scan_chunk<T: HostArith>(
    xs: &[T],
    ys: &mut [T],
    (inclusive, streamed): (bool, bool),
    mut running: T,
    f: impl Fn(T, T) -> T + Copy,
) {
    let mut done = 0;
    if T::ASSOCIATIVE {
        for (yb, xb) in ys.chunks_exact_mut(BLOCK).zip(xs.chunks_exact(BLOCK)) {
            let mut prefix = [xb[0]; BLOCK];
            for j in 1..BLOCK {
                prefix[j] = f(prefix[j - 1], xb[j]);
            }
            let mut out = [running; BLOCK];
            if inclusive {
                for j in 0..BLOCK {
                    out[j] = f(running, prefix[j]);
                }
            } else {
                for j in 1..BLOCK {
                    out[j] = f(running, prefix[j - 1]);
                }
            }
            store_block(yb, &out, streamed);
            running = f(running, prefix[BLOCK - 1]);
        }
        done = xs.len() / BLOCK * BLOCK;
        #[cfg(target_arch = "x86_64")]
        if streamed {
            // Streamed stores are weakly ordered: fenced before the chunk is done (the
            // join that ends the scan makes them visible to the caller).
            // SAFETY: SSE2 is part of x86-64.
            unsafe { std::arch::x86_64::_mm_sfence() };
        }
    }
    for (o, &v) in ys[done..].iter_mut().zip(&xs[done..]) {
        if inclusive {
            running = f(running, v);
            *o = running;
        } else {
            *o = running;
            running = f(running, v);
        }
    }
}

/// A scan's sweep over `x`'s [`CHUNK`]-element chunks into `y`'s, in one pass over
/// memory: a worker claims the next chunk (in order, from a counter), takes its
/// `aggregate`, finds the chunk's carry, publishes `link(carry, aggregate)` for its
/// successor, and `finish`es the chunk from its carry while the chunk is still in the
/// core's cache. A two-pass chunked scan reads `x` from memory twice; this reads it once
/// (a chunk of 64 Ki 4-byte elements is 256 KiB).
///
/// The carry: with `combine` (exact types, whose aggregates combine to the same bits in
/// any grouping) the chunk publishes its aggregate at once and looks back over the chunks
/// before it to the nearest published carry, combining their aggregates, as a GPU's
/// decoupled look-back does: no chunk waits for another's look-back, only for aggregates,
/// which are published as soon as each chunk is read. Without it (floats) the chunk
/// waits for its predecessor's carry, so the carries are linked in chunk order as a
/// sequential fold of the aggregates would be, and results do not depend on the thread
/// count or the timing. Waiting cannot deadlock: chunks are claimed in order by workers
/// that run them to the end without waiting on anything else, so the lowest unfinished
/// chunk's carry, and every claimed chunk's aggregate, is published or will be; a waiter
/// spins briefly, then yields its core.
fn chained_chunks<T: Sync + Send, A: Copy + Send + Sync, C: Copy + Send + Sync>(
    x: &[T],
    y: &mut [T],
    identity: C,
    aggregate: impl Fn(usize, &[T]) -> A + Sync,
    combine: Option<&(dyn Fn(A, A) -> A + Sync)>,
    link: impl Fn(C, A) -> C + Sync,
    finish: impl Fn(usize, &[T], &mut [T], C) + Sync,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Mutex, OnceLock};
    let chunks = x.len().div_ceil(CHUNK);
    if chunks <= 1 {
        return finish(0, x, y, identity);
    }
    // Each output chunk behind its own (uncontended) lock: one worker takes each.
    let outputs: Vec<Mutex<&mut [T]>> = y.chunks_mut(CHUNK).map(Mutex::new).collect();
    // carries[c]: the carry into chunk c (the scan of chunks 0..c).
    let carries: Vec<OnceLock<C>> = (0..chunks).map(|_| OnceLock::new()).collect();
    let aggregates: Vec<OnceLock<A>> = (0..chunks).map(|_| OnceLock::new()).collect();
    let _ = carries[0].set(identity);
    let next = AtomicUsize::new(0);
    let workers = rayon::current_num_threads().min(chunks);
    (0..workers).into_par_iter().for_each(|_| loop {
        let c = next.fetch_add(1, Ordering::Relaxed);
        if c >= chunks {
            break;
        }
        let xs = &x[chunk_range(c, x.len())];
        let total = aggregate(c, xs);
        let carry = match combine {
            Some(combine) => {
                let _ = aggregates[c].set(total);
                // The aggregates of chunks j..c combined, earliest first, until chunk
                // j's carry is published (chunk 0's always is).
                let mut j = c;
                let mut after: Option<A> = None;
                loop {
                    if let Some(&carry) = carries[j].get() {
                        break after.map_or(carry, |a| link(carry, a));
                    }
                    j -= 1;
                    let a = wait_for(&aggregates[j]);
                    after = Some(after.map_or(a, |b| combine(a, b)));
                }
            }
            None => wait_for(&carries[c]),
        };
        if c + 1 < chunks {
            let _ = carries[c + 1].set(link(carry, total));
        }
        let mut ys = outputs[c].lock().unwrap_or_else(|e| e.into_inner());
        finish(c, xs, &mut ys, carry);
    });
}

/// The value of `cell` once another worker has set it: spins 64 times, then yields the
/// core between looks (the setter may be waiting for a core: more threads than cores).
fn wait_for<C: Copy>(cell: &std::sync::OnceLock<C>) -> C {
    let mut looks = 0u32;
    loop {
        if let Some(&c) = cell.get() {
            return c;
        }
        if looks < 64 {
            std::hint::spin_loop();
            looks += 1;
        } else {
            std::thread::yield_now();
        }
    }
}

/// The indices of chunk `c` of `n` elements: [`CHUNK`] of them, fewer in the last.
fn chunk_range(c: usize, n: usize) -> std::ops::Range<usize> {
    c * CHUNK..n.min((c + 1) * CHUNK)
}

/// The chunks of a stable compaction of `n` elements on the host ([`count_kept`], then
/// [`write_kept`]): how many each [`CHUNK`]-element chunk keeps, and all of them.
pub(crate) struct Kept {
    per_chunk: Vec<usize>,
    pub total: usize,
}

/// The first of a compaction's two passes: each chunk's count of the indices `keep`
/// accepts, in parallel. The caller checks its outputs' room against [`Kept::total`]
/// before anything is written.
pub(crate) fn count_kept(n: usize, keep: impl Fn(usize) -> bool + Sync) -> Kept {
    let per_chunk: Vec<usize> = (0..n.div_ceil(CHUNK))
        .into_par_iter()
        .map(|c| chunk_range(c, n).filter(|&i| keep(i)).count())
        .collect();
    Kept {
        total: per_chunk.iter().sum(),
        per_chunk,
    }
}

/// Elements a block of [`write_kept`] gathers on the stack before it copies them out.
const GATHER: usize = 64;

/// The second pass: `value(i)` for every kept index `i` (as [`count_kept`] counted them),
/// in order, into `kept[..counts.total]`, and where `rest` is given every other index's,
/// in order, into `rest[..n − counts.total]` (a stable partition). Every chunk writes its
/// own pieces, in parallel, no chunk waiting for another; within a chunk, blocks of
/// [`GATHER`] are gathered without a branch per element (each value is stored, and the
/// cursor advances by whether it was kept) and copied out ([`gather_chunk`]).
pub(crate) fn write_kept<T: Copy + Send + Sync>(
    n: usize,
    counts: &Kept,
    value: impl Fn(usize) -> T + Sync,
    keep: impl Fn(usize) -> bool + Sync,
    kept: &mut [T],
    rest: Option<&mut [T]>,
) {
    let chunks = counts.per_chunk.len();
    let kept_pieces = split_by_lengths(&mut kept[..counts.total], &counts.per_chunk);
    let mut rest_pieces: Vec<Option<&mut [T]>> = match rest {
        Some(rest) => {
            let lengths: Vec<usize> = (0..chunks)
                .map(|c| chunk_range(c, n).len() - counts.per_chunk[c])
                .collect();
            split_by_lengths(&mut rest[..n - counts.total], &lengths)
                .into_iter()
                .map(Some)
                .collect()
        }
        None => (0..chunks).map(|_| None).collect(),
    };
    kept_pieces
        .into_par_iter()
        .zip(rest_pieces.par_iter_mut())
        .enumerate()
        .for_each(|(c, (kept, rest))| {
            let indices = chunk_range(c, n);
            match rest.as_deref_mut() {
                Some(rest) => gather_chunk::<T, true>(indices, &value, &keep, kept, rest),
                None => gather_chunk::<T, false>(indices, &value, &keep, kept, &mut []),
            }
        });
}

/// One chunk of [`write_kept`]: the kept values of `indices` into `kept`, and with
/// `PARTITION` the others into `rest`, by blocks of [`GATHER`] gathered on the stack.
fn gather_chunk<T: Copy, const PARTITION: bool>(
    indices: std::ops::Range<usize>,
    value: &impl Fn(usize) -> T,
    keep: &impl Fn(usize) -> bool,
    kept: &mut [T],
    rest: &mut [T],
) {
    let (mut at_kept, mut at_rest) = (0, 0);
    let mut start = indices.start;
    while start < indices.end {
        let stop = indices.end.min(start + GATHER);
        let first = value(start);
        let (mut yes, mut no) = ([first; GATHER], [first; GATHER]);
        let (mut y, mut o) = (0, 0);
        for i in start..stop {
            let v = value(i);
            let k = keep(i);
            // Both cursors stay below the elements seen so far (< GATHER): the mask
            // changes nothing but spares a bounds check.
            yes[y % GATHER] = v;
            y += usize::from(k);
            if PARTITION {
                no[o % GATHER] = v;
                o += usize::from(!k);
            }
        }
        kept[at_kept..at_kept + y].copy_from_slice(&yes[..y]);
        at_kept += y;
        if PARTITION {
            rest[at_rest..at_rest + o].copy_from_slice(&no[..o]);
            at_rest += o;
        }
        start = stop;
    }
}

/// Counts of the bins of byte samples: `bin_of[b]` is byte `b`'s bin, or `bins` for none.
/// Each chunk counts byte values (four tables, eight bytes a load), and the bins are
/// summed from the chunks' value counts at the end: the hot loop has no table lookup
/// and no branch. Per fixed chunk, added in order (exact).
pub(crate) fn byte_histogram(x: &[u8], bins: u32, bin_of: &[u32; 256]) -> Vec<u32> {
    let values = x.par_chunks(CHUNK).map(byte_counts).reduce(
        || [0u32; 256],
        |mut a, b| {
            add_counts(&mut a, &b);
            a
        },
    );
    let mut counts = vec![0u32; bins as usize + 1];
    for (value, &count) in values.iter().enumerate() {
        counts[bin_of[value] as usize] += count;
    }
    counts.truncate(bins as usize);
    counts
}

/// How many of each byte value `chunk` holds. Four tables, one per byte lane of each
/// group of four: equal consecutive bytes then update different counters instead of
/// waiting on one another's stores.
fn byte_counts(chunk: &[u8]) -> [u32; 256] {
    let mut tables = [[0u32; 256]; 4];
    let mut words = chunk.chunks_exact(8);
    for w in &mut words {
        let w = u64::from_le_bytes(w.try_into().expect("eight bytes"));
        for k in 0..8 {
            tables[k % 4][((w >> (8 * k)) & 0xff) as usize] += 1;
        }
    }
    for &b in words.remainder() {
        tables[0][b as usize] += 1;
    }
    let [mut counts, rest @ ..] = tables;
    for table in &rest {
        add_counts(&mut counts, table);
    }
    counts
}

/// Counts of `bins` bins over `x`, each sample's bin given by `bin_of` (`u32::MAX`: no
/// bin): one histogram per fixed chunk, added in order (exact).
pub(crate) fn histogram<T: Copy + Send + Sync>(
    x: &[T],
    bins: u32,
    bin_of: impl Fn(T) -> u32 + Sync,
) -> Vec<u32> {
    x.par_chunks(CHUNK)
        .map(|chunk| {
            let mut counts = vec![0u32; bins as usize];
            for &v in chunk {
                let b = bin_of(v);
                if b != u32::MAX {
                    counts[b as usize] += 1;
                }
            }
            counts
        })
        .reduce(
            || vec![0u32; bins as usize],
            |mut a, b| {
                add_counts(&mut a, &b);
                a
            },
        )
}

/// `a[i] += b[i]`: one chunk's histogram added into another's.
fn add_counts(a: &mut [u32], b: &[u32]) {
    a.iter_mut().zip(b).for_each(|(a, b)| *a += b);
}

/// A pointer that parallel chunks write through at positions no other chunk writes.
#[derive(Clone, Copy)]
struct Scatter<T>(*mut T);
// SAFETY: each position is written by exactly one task (a chunk of `radix_sort`'s pass, a
// tile of `transpose`), and the writes finish before the slice behind the pointer is used
// again (rayon joins).
unsafe impl<T: Send> Send for Scatter<T> {}
// SAFETY: as for Send.
unsafe impl<T: Send> Sync for Scatter<T> {}

impl<T> Scatter<T> {
    /// The pointer (a method, for the reason `write` is one).
    fn base(&self) -> *mut T {
        self.0
    }

    /// Writes `value` at `index`. (A method, so that closures capture the whole `Scatter`,
    /// which is Sync, not its pointer field.)
    ///
    /// # Safety
    /// `index` is inside the slice behind the pointer and no other thread writes it.
    unsafe fn write(self, index: usize, value: T) {
        // SAFETY: the caller's contract.
        unsafe { self.0.add(index).write(value) }
    }
}

/// A stable radix sort of `keys` (and `values` with them, where given) by bits `bits` of
/// `key_bits(key)` (the key's ordered bits, flipped for descending order).
///
/// Large inputs take one pass by the top digit over the whole array, then sort each of
/// its buckets by the lower bits on its own, in parallel: a bucket of a 2^24-element
/// input with 11-bit digits holds about 8,192 elements, so its passes run in the core's
/// own cache, where a whole-array pass scatters every chunk to 2,048 places spread over
/// the array (and, for pairs, 2,048 more for the values). Small inputs, narrow bit
/// ranges and buckets too large for a cache take whole-array LSD passes ([`lsd_sort`]).
pub(crate) fn radix_sort<K: Copy + Send + Sync, V: Copy + Send + Sync>(
    keys: &mut [K],
    mut values: Option<&mut [V]>,
    bits: std::ops::Range<u32>,
    key_bits: impl Fn(K) -> u64 + Send + Sync + Copy,
) {
    let n = keys.len();
    let mut key_scratch = scratch_copy(keys);
    let mut value_scratch = values.as_deref().map(scratch_copy);
    if n < MSD_MIN || bits.end - bits.start <= DIGIT_BITS {
        return lsd_sort(
            keys,
            values,
            &mut key_scratch,
            value_scratch.as_deref_mut(),
            bits,
            key_bits,
        );
    }
    let top = bits.end - DIGIT_BITS;
    let (low, mask) = (bits.start..top, DIGITS as u64 - 1);
    let digit = move |k: K| ((key_bits(k) >> top) & mask) as usize;
    // Into the scratch copies, by the top digit.
    let Some(totals) = scatter_by_digit(
        keys,
        values.as_deref(),
        &mut key_scratch,
        value_scratch.as_deref_mut(),
        digit,
        chunk_len(n),
    ) else {
        // One top digit for every key: one bucket, the whole input.
        return lsd_sort(
            keys,
            values,
            &mut key_scratch,
            value_scratch.as_deref_mut(),
            low,
            key_bits,
        );
    };
    // Each bucket from the scratch copies back into its place in the caller's slices,
    // sorted by the lower bits.
    let sorted_k = split_by_lengths(keys, &totals);
    let scratch_k = split_by_lengths(&mut key_scratch, &totals);
    let mut sorted_v = values
        .take()
        .map(|v| split_by_lengths(v, &totals).into_iter());
    let mut scratch_v = value_scratch
        .as_deref_mut()
        .map(|v| split_by_lengths(v, &totals).into_iter());
    let buckets: Vec<_> = scratch_k
        .into_iter()
        .zip(sorted_k)
        .map(|(sk, k)| {
            let sv = scratch_v.as_mut().and_then(Iterator::next);
            let v = sorted_v.as_mut().and_then(Iterator::next);
            (sk, sv, k, v)
        })
        .filter(|b| !b.0.is_empty())
        .collect();
    buckets
        .into_par_iter()
        .for_each(|(sk, sv, k, v)| sort_bucket(sk, sv, k, v, low.clone(), key_bits));
}

/// A copy of `x` made in parallel: scratch space whose pages are first touched by many
/// threads (the passes write it from many threads).
fn scratch_copy<T: Copy + Send + Sync>(x: &[T]) -> Vec<T> {
    let mut scratch = Vec::with_capacity(x.len());
    x.par_iter().copied().collect_into_vec(&mut scratch);
    scratch
}

/// `x` cut into consecutive pieces of `lengths` (which add up to its length).
fn split_by_lengths<'a, T>(mut x: &'a mut [T], lengths: &[usize]) -> Vec<&'a mut [T]> {
    lengths
        .iter()
        .map(|&len| {
            let (piece, rest) = std::mem::take(&mut x).split_at_mut(len);
            x = rest;
            piece
        })
        .collect()
}

/// Copies the keys (and values) of `src` into `dst`.
fn copy_pairs<K: Copy, V: Copy>(
    dst_k: &mut [K],
    dst_v: Option<&mut [V]>,
    src_k: &[K],
    src_v: Option<&[V]>,
) {
    dst_k.copy_from_slice(src_k);
    if let (Some(d), Some(s)) = (dst_v, src_v) {
        d.copy_from_slice(s);
    }
}

/// Bits of a digit: 11 (3 passes for 32-bit keys: 2^24 u32 keys sorted in 98–113 ms on 2
/// cores, against 122–140 with 8-bit digits).
const DIGIT_BITS: u32 = 11;
const DIGITS: usize = 1 << DIGIT_BITS;
/// The fewest elements that take the top-digit pass first (fewer: a bucket would be too
/// small to repay the pass).
const MSD_MIN: usize = 1 << 16;
/// The most elements a bucket sorts by one thread in its cache; larger ones (keys that
/// share their top bits) take whole-array passes over the bucket.
const BUCKET_MAX: usize = 1 << 16;
/// Bits of a digit within a bucket: 8 (256 counters stay in L1 beside the bucket).
const BUCKET_DIGIT_BITS: u32 = 8;

/// The elements of one chunk of a whole-array pass.
fn chunk_len(n: usize) -> usize {
    n.div_ceil(rayon::current_num_threads() * 4).max(1 << 14)
}

/// Sorts the bucket in `src_k` (and `src_v`) by bits `bits` into `dst_k` (and `dst_v`),
/// stably: LSD passes in one thread, ping-ponging between the two, for a bucket that fits
/// a cache; whole-array passes otherwise.
fn sort_bucket<K: Copy + Send + Sync, V: Copy + Send + Sync>(
    src_k: &mut [K],
    src_v: Option<&mut [V]>,
    dst_k: &mut [K],
    dst_v: Option<&mut [V]>,
    bits: std::ops::Range<u32>,
    key_bits: impl Fn(K) -> u64 + Send + Sync + Copy,
) {
    if src_k.len() > BUCKET_MAX {
        // Whole-array passes, `dst` their scratch space; the result ends in `dst`.
        let (mut src_v, mut dst_v) = (src_v, dst_v);
        if !lsd_passes(
            src_k,
            src_v.as_deref_mut(),
            dst_k,
            dst_v.as_deref_mut(),
            bits,
            key_bits,
        ) {
            copy_pairs(dst_k, dst_v, src_k, src_v.as_deref());
        }
        return;
    }
    let (mut from_k, mut to_k) = (src_k, dst_k);
    let (mut from_v, mut to_v) = (src_v, dst_v);
    // Whether the sorted data is in the caller's `dst` (it starts in `src`).
    let mut in_dst = false;
    let mut shift = bits.start;
    while shift < bits.end {
        let width = (bits.end - shift).min(BUCKET_DIGIT_BITS);
        let (at_bit, mask) = (shift, (1u64 << width) - 1);
        shift += width;
        let digit = move |k: K| ((key_bits(k) >> at_bit) & mask) as usize;
        let mut next = [0usize; 1 << BUCKET_DIGIT_BITS];
        for &k in from_k.iter() {
            next[digit(k)] += 1;
        }
        if next.contains(&from_k.len()) {
            continue; // one digit for every key: the pass would move nothing
        }
        let mut at = 0;
        for slot in next.iter_mut() {
            let count = *slot;
            *slot = at;
            at += count;
        }
        for (j, &k) in from_k.iter().enumerate() {
            let d = digit(k);
            to_k[next[d]] = k;
            if let (Some(t), Some(f)) = (to_v.as_deref_mut(), from_v.as_deref()) {
                t[next[d]] = f[j];
            }
            next[d] += 1;
        }
        std::mem::swap(&mut from_k, &mut to_k);
        std::mem::swap(&mut from_v, &mut to_v);
        in_dst = !in_dst;
    }
    if !in_dst {
        // The sorted bucket is in `src` (now `from`): into `dst` (now `to`).
        copy_pairs(to_k, to_v, from_k, from_v.as_deref());
    }
}

/// One stable pass of every chunk of `src_k` (and `src_v`) into `dst_k` (and `dst_v`) by
/// `digit`, the chunks counted and scattered in parallel: each chunk's elements of a digit
/// go after the earlier chunks' (so equal digits keep their order). Returns the number of
/// elements of each digit, or `None` (and moves nothing) when one digit has them all.
fn scatter_by_digit<K: Copy + Send + Sync, V: Copy + Send + Sync>(
    src_k: &[K],
    src_v: Option<&[V]>,
    dst_k: &mut [K],
    dst_v: Option<&mut [V]>,
    digit: impl Fn(K) -> usize + Send + Sync + Copy,
    chunk: usize,
) -> Option<Vec<usize>> {
    let n = src_k.len();
    let counts: Vec<Box<[usize; DIGITS]>> = src_k
        .par_chunks(chunk)
        .map(|c| {
            let mut count = Box::new([0usize; DIGITS]);
            for &k in c {
                count[digit(k)] += 1;
            }
            count
        })
        .collect();
    let totals: Vec<usize> = (0..DIGITS)
        .map(|d| counts.iter().map(|c| c[d]).sum())
        .collect();
    if totals.contains(&n) {
        return None;
    }
    // Chunk c's first place for digit d: every smaller digit, then d's earlier chunks.
    let mut starts = vec![Box::new([0usize; DIGITS]); counts.len()];
    let mut at = 0;
    for d in 0..DIGITS {
        for (c, count) in counts.iter().enumerate() {
            starts[c][d] = at;
            at += count[d];
        }
    }
    let out_k = Scatter(dst_k.as_mut_ptr());
    let out_v = dst_v.map(|v| Scatter(v.as_mut_ptr()));
    src_k
        .par_chunks(chunk)
        .zip(starts)
        .enumerate()
        .for_each(move |(c, (ks, mut next))| {
            let base = c * chunk;
            for (j, &k) in ks.iter().enumerate() {
                let d = digit(k);
                let to = next[d];
                next[d] += 1;
                // SAFETY: `to` < n, and the places of (chunk, digit) pairs are disjoint
                // ranges covering 0..n once (the prefix above).
                unsafe { out_k.write(to, k) };
                if let (Some(out), Some(vs)) = (out_v, src_v) {
                    // SAFETY: as for the key.
                    unsafe { out.write(to, vs[base + j]) };
                }
            }
        });
    Some(totals)
}

/// A stable LSD radix sort of `keys` (and `values`) by bits `bits` ([`lsd_passes`]), with
/// `key_scratch` (and `value_scratch`), of the same lengths, as the passes' other side.
fn lsd_sort<K: Copy + Send + Sync, V: Copy + Send + Sync>(
    keys: &mut [K],
    mut values: Option<&mut [V]>,
    key_scratch: &mut [K],
    mut value_scratch: Option<&mut [V]>,
    bits: std::ops::Range<u32>,
    key_bits: impl Fn(K) -> u64 + Send + Sync + Copy,
) {
    if lsd_passes(
        keys,
        values.as_deref_mut(),
        key_scratch,
        value_scratch.as_deref_mut(),
        bits,
        key_bits,
    ) {
        // The sorted data is in the scratch copies: back into the caller's slices.
        copy_pairs(keys, values, key_scratch, value_scratch.as_deref());
    }
}

/// LSD passes by bits `bits`, 11 bits a pass over the whole slices: each pass is
/// [`scatter_by_digit`] (a pass whose digit is the same for every key moves nothing),
/// ping-ponging between `a` (where the data starts) and `b` (free space of the same
/// length). Returns whether the sorted data ended in `b`.
fn lsd_passes<K: Copy + Send + Sync, V: Copy + Send + Sync>(
    a_k: &mut [K],
    a_v: Option<&mut [V]>,
    b_k: &mut [K],
    b_v: Option<&mut [V]>,
    bits: std::ops::Range<u32>,
    key_bits: impl Fn(K) -> u64 + Send + Sync + Copy,
) -> bool {
    let chunk = chunk_len(a_k.len());
    let (mut src_k, mut dst_k) = (a_k, b_k);
    let (mut src_v, mut dst_v) = (a_v, b_v);
    let mut in_b = false;
    let mut shift = bits.start;
    while shift < bits.end {
        let (at_bit, mask) = (shift, (1u64 << (bits.end - shift).min(DIGIT_BITS)) - 1);
        shift += DIGIT_BITS;
        // A `move` closure of copies: the loops keep its values in registers (the
        // scatter's stores through a raw pointer would otherwise make the compiler reload
        // captured references after every element).
        let digit = move |k: K| ((key_bits(k) >> at_bit) & mask) as usize;
        let src_v_ref = src_v.as_deref();
        if scatter_by_digit(src_k, src_v_ref, dst_k, dst_v.as_deref_mut(), digit, chunk).is_none() {
            continue;
        }
        std::mem::swap(&mut src_k, &mut dst_k);
        std::mem::swap(&mut src_v, &mut dst_v);
        in_b = !in_b;
    }
    in_b
}

/// `y = xᵀ` for the row-major `rows × cols` matrix `x` (`y` is `cols × rows`), by square
/// tiles in parallel: a tile's input rows stay in the core's cache while its columns are
/// written out as runs of consecutive output elements, four-byte elements by 8 × 8
/// blocks in AVX registers where the CPU has AVX, with streamed stores when `streamed`
/// ([`transpose_streamed`]; ignored where the elements do not move by AVX blocks). The
/// GPU kernel through the CPU backend ran at 0.08× of a copy (2 cores, 1024 × 1023 `u32`).
pub(crate) fn transpose<T: Copy + Send + Sync>(
    x: &[T],
    rows: usize,
    cols: usize,
    y: &mut [T],
    form: HostTranspose,
) {
    let streamed = form != HostTranspose::Cached;
    // 8 × 8 blocks in registers where the CPU can (four-byte elements), in tiles of 128:
    // 2.2× the element-by-element tiles of 32 at 4096 × 4095 and 8191 × 8193 `u32` on the
    // 2-core development machine (0.21–0.28× → 0.52–0.55× of a copy; tiles of 32, 64 and
    // 256 with blocks measured 0.33×, 0.46× and 0.53×).
    let simd = simd_transpose::<T>();
    #[cfg(target_arch = "x86_64")]
    if simd && streamed {
        // SAFETY: `simd` says the CPU has AVX and `T` is four bytes; `x` and `y` are
        // `rows × cols` elements each, and different slices.
        unsafe {
            transpose_streamed(
                x.as_ptr().cast(),
                rows,
                cols,
                y.as_mut_ptr().cast(),
                form == HostTranspose::StreamedRowSweeps,
            )
        };
        return;
    }
    let _ = streamed; // only four-byte elements with AVX stream
    let edge = if simd { 128 } else { 32 };
    let (tile_rows, tile_cols) = (rows.div_ceil(edge), cols.div_ceil(edge));
    let out = Scatter(y.as_mut_ptr());
    (0..tile_rows * tile_cols)
        .into_par_iter()
        .with_min_len(if simd { 1 } else { 16 })
        .for_each(move |t| {
            let (r0, c0) = ((t / tile_cols) * edge, (t % tile_cols) * edge);
            let (r1, c1) = ((r0 + edge).min(rows), (c0 + edge).min(cols));
            let scalar = |r0: usize, r1: usize, c0: usize, c1: usize| {
                for c in c0..c1 {
                    for r in r0..r1 {
                        // SAFETY: `c * rows + r` < rows × cols = y.len(), and each output
                        // element belongs to exactly one tile (its row `c`, column `r`).
                        unsafe { out.write(c * rows + r, x[r * cols + c]) };
                    }
                }
            };
            #[cfg(target_arch = "x86_64")]
            if simd {
                // Whole 8 × 8 blocks in registers; the tile's ragged edges one by one.
                let (r8, c8) = (r0 + (r1 - r0) / 8 * 8, c0 + (c1 - c0) / 8 * 8);
                for c in (c0..c8).step_by(8) {
                    for r in (r0..r8).step_by(8) {
                        // SAFETY: rows r..r + 8 and columns c..c + 8 are inside `x` and
                        // the tile; the block's outputs (rows c..c + 8 of `y`, columns
                        // r..r + 8) belong to this tile alone; `simd` says the CPU has
                        // AVX and `T` is four bytes (moved as bits, never computed on).
                        unsafe {
                            transpose_8x8_avx(
                                x.as_ptr().add(r * cols + c).cast(),
                                cols,
                                out.0.add(c * rows + r).cast(),
                                rows,
                            )
                        };
                    }
                }
                scalar(r0, r8, c8, c1);
                scalar(r8, r1, c0, c1);
                return;
            }
            scalar(r0, r1, c0, c1);
        });
}

/// Edge of the square tiles of [`transpose_streamed`] (a tile's buffer is 256 KiB). On
/// the 16-core H200 host, 8191 × 8193 `u32` went 0.68–0.73× → 0.73–0.77× of a copy from
/// tiles of 128 to 256 (whose output rows have half as many unaligned ends, written with
/// ordinary stores), 4096 × 4095 stayed (0.75–0.97× → 0.76–0.93×), and tiles of 512 lost
/// at 4096 × 4095 (0.68–0.70×).
#[cfg(target_arch = "x86_64")]
const STREAM_EDGE: usize = 256;

/// [`transpose`] of four-byte elements on a CPU with AVX for matrices larger than the
/// caches: each tile is transposed by 8 × 8 register blocks into a buffer of the thread's
/// (in its L2), then each of the tile's output rows is written with non-temporal stores,
/// which do not read the destination's cache lines first (an ordinary store does, so a
/// transpose moved three bytes per byte where a copy, whose `memcpy` streams, moves two).
/// `row_sweeps`: each tile is read 8 input rows at a time across all its columns (8
/// sequential streams, which the prefetchers follow), not 8 columns at a time down all
/// its rows (each 32-byte step of every row a line apart from the last: one miss per
/// row at a time).
///
/// # Safety
/// The CPU has AVX; `x` holds `rows × cols` elements and `y` as many, not overlapping.
#[cfg(target_arch = "x86_64")]
unsafe fn transpose_streamed(
    x: *const f32,
    rows: usize,
    cols: usize,
    y: *mut f32,
    row_sweeps: bool,
) {
    use std::cell::RefCell;
    thread_local! {
        static TILE: RefCell<Vec<f32>> = RefCell::new(vec![0.0; STREAM_EDGE * STREAM_EDGE]);
    }
    let edge = STREAM_EDGE;
    let (tile_rows, tile_cols) = (rows.div_ceil(edge), cols.div_ceil(edge));
    let (src, out) = (Scatter(x as *mut f32), Scatter(y));
    (0..tile_rows * tile_cols)
        .into_par_iter()
        .for_each(move |t| {
            let (r0, c0) = ((t / tile_cols) * edge, (t % tile_cols) * edge);
            let (r1, c1) = ((r0 + edge).min(rows), (c0 + edge).min(cols));
            TILE.with(|tile| {
                let mut tile = tile.borrow_mut();
                let buf = tile.as_mut_ptr();
                // SAFETY: the caller's contract for `x` and `y`; the tile's input rows
                // r0..r1 and columns c0..c1 are inside `x`, the buffer holds edge × edge
                // (output row c - c0 at c - c0 times edge), and the tile's output rows
                // c0..c1, columns r0..r1, belong to this tile alone.
                unsafe {
                    transpose_tile_streamed(
                        src.base(),
                        rows,
                        cols,
                        out.base(),
                        buf,
                        ((r0, r1), (c0, c1)),
                        row_sweeps,
                    )
                };
            });
        });
}

/// One tile of [`transpose_streamed`]: rows `r0..r1` and columns `c0..c1` of `x`.
///
/// # Safety
/// As [`transpose_streamed`]; `buf` holds `STREAM_EDGE²` elements.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn transpose_tile_streamed(
    x: *const f32,
    rows: usize,
    cols: usize,
    y: *mut f32,
    buf: *mut f32,
    ((r0, r1), (c0, c1)): ((usize, usize), (usize, usize)),
    row_sweeps: bool,
) {
    use std::arch::x86_64::*;
    let edge = STREAM_EDGE;
    let (r8, c8) = (r0 + (r1 - r0) / 8 * 8, c0 + (c1 - c0) / 8 * 8);
    // SAFETY: the caller's contract; every index below stays within the tile's rows and
    // columns of `x`, its rows of `y`, and `buf`'s edge × edge elements.
    unsafe {
        // Two loop nests, no closure: a closure would not take this function's AVX
        // feature, so the block's intrinsics would not be inlined into it.
        if row_sweeps {
            for r in (r0..r8).step_by(8) {
                for c in (c0..c8).step_by(8) {
                    let (from, to) = (x.add(r * cols + c), buf.add((c - c0) * edge + (r - r0)));
                    transpose_8x8_avx(from, cols, to, edge);
                }
            }
        } else {
            for c in (c0..c8).step_by(8) {
                for r in (r0..r8).step_by(8) {
                    let (from, to) = (x.add(r * cols + c), buf.add((c - c0) * edge + (r - r0)));
                    transpose_8x8_avx(from, cols, to, edge);
                }
            }
        }
        // The ragged edges one by one.
        for c in c0..c1 {
            let from = if c < c8 { r8 } else { r0 };
            for r in from..r1 {
                *buf.add((c - c0) * edge + (r - r0)) = *x.add(r * cols + c);
            }
        }
        // Each output row: ordinary stores up to a cache line's boundary, then whole
        // streamed lines, then the rest.
        let len = r1 - r0;
        for c in c0..c1 {
            let dst = y.add(c * rows + r0);
            let from = buf.add((c - c0) * edge);
            let misaligned = (dst as usize & 63) / 4;
            let head = if misaligned == 0 {
                0
            } else {
                (16 - misaligned).min(len)
            };
            for i in 0..head {
                *dst.add(i) = *from.add(i);
            }
            let mut i = head;
            while i + 16 <= len {
                _mm256_stream_ps(dst.add(i), _mm256_loadu_ps(from.add(i)));
                _mm256_stream_ps(dst.add(i + 8), _mm256_loadu_ps(from.add(i + 8)));
                i += 16;
            }
            for j in i..len {
                *dst.add(j) = *from.add(j);
            }
        }
        // Streamed stores are weakly ordered: fence them before the task ends (the
        // join that follows is what makes them visible to the caller).
        _mm_sfence();
    }
}

/// How [`transpose`] reads and writes: the CPU device's tuner candidates.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum HostTranspose {
    /// Ordinary (cached) stores.
    Cached,
    /// Streamed stores, each tile read 8 columns at a time ([`transpose_streamed`]).
    Streamed,
    /// Streamed stores, each tile read 8 rows at a time.
    StreamedRowSweeps,
}

/// The [`HostTranspose`] forms with the tuner's names, in its order.
const TRANSPOSE_FORMS: [(&str, HostTranspose); 3] = [
    ("cached-stores", HostTranspose::Cached),
    ("streamed-stores", HostTranspose::Streamed),
    (
        "streamed-stores, row sweeps",
        HostTranspose::StreamedRowSweeps,
    ),
];

/// The forms [`transpose`] can take for `T`, the default first: ordinary (cached)
/// stores, and where `T` moves by AVX blocks, streamed ones.
pub(crate) fn transpose_forms<T>() -> &'static [(&'static str, HostTranspose)] {
    if simd_transpose::<T>() {
        &TRANSPOSE_FORMS
    } else {
        &TRANSPOSE_FORMS[..1]
    }
}

/// Whether [`transpose`] moves `T` by 8 × 8 blocks in AVX registers: four-byte elements
/// on an x86-64 CPU with AVX.
fn simd_transpose<T>() -> bool {
    let four_bytes = std::mem::size_of::<T>() == 4;
    #[cfg(target_arch = "x86_64")]
    {
        four_bytes && std::arch::is_x86_feature_detected!("avx")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = four_bytes;
        false
    }
}

/// Transposes the 8 × 8 block of four-byte elements at `src` (rows `src_stride` apart)
/// into `dst` (rows `dst_stride` apart), by the unpack, shuffle and lane-permute steps
/// of the classic AVX transpose. The elements are moved as bit patterns (no arithmetic).
///
/// # Safety
/// The CPU has AVX; 8 rows of 8 elements are readable at `src` and writable at `dst`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn transpose_8x8_avx(src: *const f32, src_stride: usize, dst: *mut f32, dst_stride: usize) {
    use std::arch::x86_64::*;
    // SAFETY: the caller's contract (unaligned loads and stores of 8 elements a row). No
    // closures: they would not take the function's AVX feature, so the intrinsics in
    // them would not be inlined.
    unsafe {
        let s = src_stride;
        let r0 = _mm256_loadu_ps(src);
        let r1 = _mm256_loadu_ps(src.add(s));
        let r2 = _mm256_loadu_ps(src.add(2 * s));
        let r3 = _mm256_loadu_ps(src.add(3 * s));
        let r4 = _mm256_loadu_ps(src.add(4 * s));
        let r5 = _mm256_loadu_ps(src.add(5 * s));
        let r6 = _mm256_loadu_ps(src.add(6 * s));
        let r7 = _mm256_loadu_ps(src.add(7 * s));
        let (t0, t1) = (_mm256_unpacklo_ps(r0, r1), _mm256_unpackhi_ps(r0, r1));
        let (t2, t3) = (_mm256_unpacklo_ps(r2, r3), _mm256_unpackhi_ps(r2, r3));
        let (t4, t5) = (_mm256_unpacklo_ps(r4, r5), _mm256_unpackhi_ps(r4, r5));
        let (t6, t7) = (_mm256_unpacklo_ps(r6, r7), _mm256_unpackhi_ps(r6, r7));
        let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
        let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
        let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
        let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
        let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
        let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
        let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
        let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
        let d = dst_stride;
        _mm256_storeu_ps(dst, _mm256_permute2f128_ps::<0x20>(u0, u4));
        _mm256_storeu_ps(dst.add(d), _mm256_permute2f128_ps::<0x20>(u1, u5));
        _mm256_storeu_ps(dst.add(2 * d), _mm256_permute2f128_ps::<0x20>(u2, u6));
        _mm256_storeu_ps(dst.add(3 * d), _mm256_permute2f128_ps::<0x20>(u3, u7));
        _mm256_storeu_ps(dst.add(4 * d), _mm256_permute2f128_ps::<0x31>(u0, u4));
        _mm256_storeu_ps(dst.add(5 * d), _mm256_permute2f128_ps::<0x31>(u1, u5));
        _mm256_storeu_ps(dst.add(6 * d), _mm256_permute2f128_ps::<0x31>(u2, u6));
        _mm256_storeu_ps(dst.add(7 * d), _mm256_permute2f128_ps::<0x31>(u3, u7));
    }
}

#[cfg(test)]
mod tests {
    /// The sequential scan of `x` from `identity` with `f`.
    fn reference<T: Copy>(x: &[T], inclusive: bool, identity: T, f: impl Fn(T, T) -> T) -> Vec<T> {
        let mut running = identity;
        x.iter()
            .map(|&v| {
                let before = running;
                running = f(running, v);
                if inclusive {
                    running
                } else {
                    before
                }
            })
            .collect()
    }

    /// Scans with both kinds of stores, in one sweep and in two passes, into aligned and
    /// misaligned outputs (whose blocks fall back to ordinary stores), over several
    /// chunks and a ragged end: every
    /// element checked against a sequential scan, outputs poisoned first.
    fn both_stores<T: super::HostArith + PartialEq + std::fmt::Debug>(
        x: &[T],
        poison: T,
        seed: u64,
        f: impl Fn(T, T) -> T + Copy + Send + Sync,
    ) {
        for inclusive in [false, true] {
            let want = reference(x, inclusive, T::ZERO, f);
            for (streamed, two_passes) in
                [(false, false), (true, false), (false, true), (true, true)]
            {
                for offset in [0, 1, 3] {
                    let mut y = vec![poison; x.len() + offset];
                    let out = &mut y[offset..];
                    if two_passes {
                        super::scan_two_passes(x, out, (inclusive, streamed), T::ZERO, f);
                    } else {
                        super::scan(x, None, out, (inclusive, streamed), T::ZERO, f);
                    }
                    if let Some(i) = (0..x.len()).find(|&i| y[offset + i] != want[i]) {
                        panic!(
                            "seed {seed}, inclusive {inclusive}, streamed {streamed}, two \
                             passes {two_passes}, offset {offset}: element {i} is {:?}, \
                             expected {:?}",
                            y[offset + i],
                            want[i]
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn every_form_of_the_cpu_scan_gives_every_element() {
        let seed = fastrand::u64(..);
        let mut rng = fastrand::Rng::with_seed(seed);
        // Five chunks and a ragged end (not a multiple of a block or a chunk).
        let n = 5 * super::CHUNK + 8 * 3 + 5;
        let x32: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
        both_stores(&x32, 0xdead_beef, seed, u32::wrapping_add);
        let xi: Vec<i32> = (0..n).map(|_| rng.i32(..)).collect();
        both_stores(&xi, i32::MIN, seed, Ord::max);
        let x64: Vec<u64> = (0..n).map(|_| rng.u64(..)).collect();
        both_stores(&x64, u64::MAX, seed, u64::wrapping_add);
    }

    /// The two-pass compaction against a sequential filter, kept and (as a partition)
    /// the rest, on sizes around a gathered block and a chunk, with every fraction of
    /// kept elements from none to all; outputs poisoned, their tails checked untouched.
    #[test]
    fn compaction_keeps_the_order_of_what_it_keeps_and_of_the_rest() {
        use super::{count_kept, write_kept, CHUNK, GATHER};
        let seed = fastrand::u64(..);
        let mut rng = fastrand::Rng::with_seed(seed);
        let sizes = [
            0,
            1,
            GATHER - 1,
            GATHER + 1,
            CHUNK - 1,
            CHUNK,
            CHUNK + 1,
            3 * CHUNK + 2 * GATHER + 7,
        ];
        for n in sizes {
            for percent in [0u32, 1, 50, 99, 100] {
                let x: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
                let flags: Vec<bool> = (0..n).map(|_| rng.u32(..100) < percent).collect();
                let keep = |i: usize| flags[i];
                let want: Vec<u32> = (0..n).filter(|&i| flags[i]).map(|i| x[i]).collect();
                let others: Vec<u32> = (0..n).filter(|&i| !flags[i]).map(|i| x[i]).collect();
                let counts = count_kept(n, keep);
                let at = format!("n {n}, {percent}% kept, seed {seed}");
                assert_eq!(counts.total, want.len(), "{at}");
                // Kept only, into an output longer than needed.
                let mut y = vec![0xdead_beefu32; n + 3];
                write_kept(n, &counts, |i| x[i], keep, &mut y, None);
                assert_eq!(y[..want.len()], want[..], "{at}");
                assert!(y[want.len()..].iter().all(|&v| v == 0xdead_beef), "{at}");
                // A partition: the kept, then the rest.
                let mut p = vec![0xdead_beefu32; n];
                let (kept, rest) = p.split_at_mut(counts.total);
                write_kept(n, &counts, |i| x[i], keep, kept, Some(rest));
                assert_eq!(p[..want.len()], want[..], "{at}");
                assert_eq!(p[want.len()..], others[..], "{at}");
            }
        }
    }
}
