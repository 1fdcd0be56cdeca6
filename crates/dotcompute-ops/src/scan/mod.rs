//! Prefix scans: exclusive and inclusive, with sum, min or max, over the whole buffer
//! or restarting at segment heads (flags or offsets), of `u32`, `i32`, `f32` (and the
//! 64-bit types where the device has them).
//!
//! Reduce-then-scan, which needs no forward-progress guarantee between groups (Vulkan
//! gives none, so a decoupled look-back could wait forever there): the input is cut into
//! tiles of `GROUP × ITEMS` elements (16 items on GPUs, 4 on software ones); (1) each group combines one tile, (2) one group scans
//! the tiles' aggregates, (3) each group scans its tile from its offset. Three passes read
//! the input twice. A segmented scan carries, with each aggregate, whether a head was
//! in it: the pair operator `(f₁, a) ⊕ (f₂, b) = (f₁ | f₂, f₂ ? b : a op b)` is associative,
//! so the same three passes scan segments that cross tiles. Integer sums wrap; float
//! sums add each tile in a fixed tree, so a device gives the same bits on every run.

use crate::reduce::{combine, group_combine, identity, Reducible};
use crate::{fixed_or, index_len, padded, ReduceOp, GROUP};
use dotcompute::prelude::*;
use dotcompute::{AsStream, Buffer, Result};

mod look_back;
mod subgroup;
pub(crate) use look_back::{
    look_back_state, single_pass_allowed, take_tile, warp_look_back, SINGLE_PASS_FORMS,
};
use look_back::{single_pass, single_pass_applies};
pub(crate) use subgroup::store_group_total;

/// Elements per thread of a tile on GPUs.
const GPU_ITEMS: u32 = 16;
/// Elements per thread on GPUs emulated on the CPU (lavapipe, the MSL shim), given to the
/// kernels at run time (their const `ITEMS` is 0): lavapipe's LLVM builds a coroutine
/// frame per barrier over the whole body, and with 16 items unrolled the three scan
/// kernels of one type took it 157 s to compile on two cores.
const SOFTWARE_ITEMS: u32 = 4;
/// The shared tile of a kernel with `items` elements a thread (0: software GPUs, which
/// take `SOFTWARE_ITEMS` at run time), one padding element per 32 so that a thread's run
/// of consecutive elements falls in different banks. Sized per form: a narrow form's
/// groups take half the shared memory, so more of them fit on a multiprocessor.
const fn tile_padded(items: u32) -> u32 {
    let items = if items == 0 { SOFTWARE_ITEMS } else { items };
    GROUP * items + GROUP * items / 32
}

/// Threads that rake a group scan, each over `RUN` consecutive slots.
///
/// Group scans rake (runs, then their totals, then the runs again: 4 barriers) rather
/// than doubling the stride (2 barriers per step, 16 for 256 threads): lavapipe turns
/// every barrier into a coroutine suspension, and LLVM's coroutine frames took 30–80 s
/// to build for a kernel with the 16-barrier scan (2026-11-26, perf: 73% of a cold run
/// in `llvm::coro`), while a GPU hides the few serial steps behind the other groups.
const RAKE: u32 = 16;
const RUN: u32 = GROUP / RAKE;

/// Inclusive sum of `v` over the group (in `s`, `GROUP` long); `s` is free again when it
/// returns. Every thread of the group must call it.
#[kernel_fn]
pub(crate) fn group_inclusive_sum<T: Num>(s: &mut [T], v: T) -> T {
    let lid = local_id().x;
    s[lid] = v;
    barrier();
    if lid < RAKE {
        let first = lid * RUN;
        let mut acc = s[first];
        for j in 1..RUN {
            acc += s[first + j];
            s[first + j] = acc;
        }
    }
    barrier();
    if lid == 0 {
        for r in 1..RAKE {
            let k = r * RUN + RUN - 1;
            s[k] += s[k - RUN];
        }
    }
    barrier();
    if lid >= 1 {
        if lid < RAKE {
            let carry = s[lid * RUN - 1];
            for j in 0..RUN - 1 {
                s[lid * RUN + j] += carry;
            }
        }
    }
    barrier();
    let total = s[lid];
    barrier();
    total
}

/// Inclusive sum of `v` over the group by 32-lane subgroups (CUDA's warps: the single
/// passes that use it run only there): each warp scans its lanes by shuffles, and each thread adds the
/// totals of the warps before its own: 2 barriers where the raking sum
/// (`scan::group_inclusive_sum`) takes 5, which stalled copy-if's single pass's warps for 67%
/// of their cycles (ncu, H100). `s` holds `GROUP / 32` totals; every thread must call it.
#[kernel_fn]
pub(crate) fn warp_inclusive_sum(s: &mut [u32], v: u32) -> u32 {
    let lid = local_id().x;
    let within = subgroup_inclusive_add(v);
    if subgroup_lane() == 31u32 {
        s[lid / 32u32] = within;
    }
    barrier();
    let mut before = 0u32;
    for w in 0..GROUP / 32 {
        if w < lid / 32u32 {
            before += s[w];
        }
    }
    barrier();
    before + within
}

/// Pass 1 of an unsegmented scan: `sums[t]` combines tile `t` of `x[..n]` (strided
/// loads: the order within the tile does not matter to sum, min and max).
#[kernel]
fn tile_sums<T: Num, const ITEMS: u32>(
    x: &[T],
    sums: &mut [T],
    n: u32,
    identity: T,
    op: u32,
    runtime_items: u32,
) {
    let items = fixed_or(ITEMS, runtime_items);
    let s = shared::<T, GROUP>();
    let lid = local_id().x;
    let base = group_id().x * GROUP * items;
    let mut acc = identity;
    for r in 0..items {
        let i = base + r * GROUP + lid;
        if i < n {
            acc = combine(acc, x[i], op);
        }
    }
    let total = group_combine(s, acc, op);
    if lid == 0 {
        sums[group_id().x] = total;
    }
}

/// Inclusive scan over the group of each thread's `(f, v)` with `op` (`f` 0 or 1): a
/// thread's result combines the values from the last thread at or before it whose flag
/// is set (from thread 0 when `seg` is 0, which never reads or writes `sf`). The results
/// (values in `s`, "a head at or before" in `sf`, `GROUP` long each) stay until the
/// caller's next barrier; every thread must call it.
#[kernel_fn]
fn group_scan<T: Num>(s: &mut [T], sf: &mut [u32], v: T, f: u32, op: u32, seg: u32) -> T {
    let lid = local_id().x;
    s[lid] = v;
    if seg == 1 {
        sf[lid] = f;
    }
    barrier();
    // 1. Each raking thread scans its run in place.
    if lid < RAKE {
        let first = lid * RUN;
        let mut acc = s[first];
        let mut flag = 0u32;
        if seg == 1 {
            flag = sf[first];
        }
        for j in 1..RUN {
            let k = first + j;
            let mut head = 0u32;
            if seg == 1 {
                head = sf[k];
            }
            if head == 1 {
                acc = s[k];
                flag = 1;
            } else {
                acc = combine(acc, s[k], op);
            }
            s[k] = acc;
            if seg == 1 {
                sf[k] = flag;
            }
        }
    }
    barrier();
    // 2. One thread scans the runs' totals (each run's last slot).
    if lid == 0 {
        for r in 1..RAKE {
            let k = r * RUN + RUN - 1;
            let mut restarts = 0u32;
            if seg == 1 {
                restarts = sf[k];
                sf[k] = restarts | sf[k - RUN];
            }
            if restarts == 0 {
                s[k] = combine(s[k - RUN], s[k], op);
            }
        }
    }
    barrier();
    // 3. Every later run takes the run before's total, up to its own first head.
    if lid >= 1 {
        if lid < RAKE {
            let carry = s[lid * RUN - 1];
            let mut carry_flag = 0u32;
            if seg == 1 {
                carry_flag = sf[lid * RUN - 1];
            }
            for j in 0..RUN - 1 {
                let k = lid * RUN + j;
                let mut restarted = 0u32;
                if seg == 1 {
                    restarted = sf[k];
                }
                if restarted == 0 {
                    s[k] = combine(carry, s[k], op);
                    if seg == 1 {
                        sf[k] = carry_flag;
                    }
                }
            }
        }
    }
    barrier();
    s[lid]
}

/// What the threads before this one hand it after [`group_scan`]: the combination since
/// the last head among them, joined to `carry` unless there was a head.
#[kernel_fn]
fn carried_in<T: Num>(s: &[T], sf: &[u32], carry: T, op: u32, seg: u32) -> T {
    let lid = local_id().x;
    let mut r = carry;
    if lid > 0 {
        let mut restarts = 0u32;
        if seg == 1 {
            restarts = sf[lid - 1];
        }
        if restarts == 1 {
            r = s[lid - 1];
        } else {
            r = combine(carry, s[lid - 1], op);
        }
    }
    r
}

/// Loads tile `base..base + GROUP × items` of `x` into shared memory (identity past the end), in
/// coalesced rounds.
#[kernel_fn]
fn load_tile<T: Num>(tile: &mut [T], x: &[T], base: u32, n: u32, identity: T, items: u32) {
    let lid = local_id().x;
    for r in 0..items {
        let e = r * GROUP + lid;
        let i = base + e;
        let mut v = identity;
        if i < n {
            v = x[i];
        }
        tile[padded(e)] = v;
    }
    barrier();
}

/// 1 when element `i` starts a segment (heads are read only when `seg` is 1).
#[kernel_fn]
fn is_head(heads: &[u32], i: u32, n: u32, seg: u32) -> u32 {
    let mut head = 0u32;
    if seg == 1 {
        if i < n {
            if heads[i] != 0 {
                head = 1;
            }
        }
    }
    head
}

/// Loads tile `base..` of `x` into `tile`, combines each thread's run of `items`
/// consecutive elements (from its last head), and scans the runs over the group
/// ([`group_scan`]: its results stay in `s` and `sf`); returns the thread's inclusive
/// result. Passes 1 (segmented) and 3 share it.
#[kernel_fn]
fn scan_tile_runs<T: Num>(
    tile: &mut [T],
    s: &mut [T],
    sf: &mut [u32],
    x: &[T],
    heads: &[u32],
    base: u32,
    n: u32,
    identity: T,
    op: u32,
    seg: u32,
    items: u32,
) -> T {
    let lid = local_id().x;
    load_tile(tile, x, base, n, identity, items);
    let mut acc = identity;
    let mut flag = 0u32;
    for j in 0..items {
        let e = lid * items + j;
        let v = tile[padded(e)];
        if is_head(heads, base + e, n, seg) == 1 {
            acc = v;
            flag = 1;
        } else {
            acc = combine(acc, v, op);
        }
    }
    group_scan(s, sf, acc, flag, op, seg)
}

/// Pass 1 of a segmented scan: `sums[t]` combines tile `t` after its last head, and
/// `tile_heads[t]` says whether it has one.
#[kernel]
fn tile_segments<T: Num, const ITEMS: u32>(
    x: &[T],
    heads: &[u32],
    sums: &mut [T],
    tile_heads: &mut [u32],
    n: u32,
    identity: T,
    op: u32,
    runtime_items: u32,
) {
    let items = fixed_or(ITEMS, runtime_items);
    let tile = shared::<T, { tile_padded(ITEMS) }>();
    let s = shared::<T, GROUP>();
    let sf = shared::<u32, GROUP>();
    let lid = local_id().x;
    let base = group_id().x * GROUP * items;
    let total = scan_tile_runs(tile, s, sf, x, heads, base, n, identity, op, 1, items);
    if lid == GROUP - 1 {
        sums[group_id().x] = total;
        tile_heads[group_id().x] = sf[lid];
    }
}

/// Pass 2: exclusive scan of `sums[..count]` in place (restarting after tiles whose
/// `tile_heads` is set when `seg` is 1), by one group, `GROUP × ITEMS` at a time (each
/// thread a run of `ITEMS`: 16 times fewer rounds of barriers than one element per
/// thread, for the 65,536 tile aggregates of 2^28 elements).
#[kernel]
fn scan_sums<T: Num, const ITEMS: u32>(
    sums: &mut [T],
    tile_heads: &[u32],
    count: u32,
    identity: T,
    op: u32,
    seg: u32,
    runtime_items: u32,
) {
    let items = fixed_or(ITEMS, runtime_items);
    let s = shared::<T, GROUP>();
    let sf = shared::<u32, GROUP>();
    let carry = shared::<T, 1>();
    let lid = local_id().x;
    if lid == 0 {
        carry[0] = identity;
    }
    barrier();
    let mut start = 0u32;
    while start < count {
        let first = start + lid * items;
        let mut local = identity;
        let mut flag = 0u32;
        for j in 0..items {
            let i = first + j;
            if i < count {
                if is_head(tile_heads, i, count, seg) == 1 {
                    local = sums[i];
                    flag = 1;
                } else {
                    local = combine(local, sums[i], op);
                }
            }
        }
        group_scan(s, sf, local, flag, op, seg);
        let before = carry[0];
        let mut running = carried_in(s, sf, before, op, seg);
        let mut total = combine(before, s[GROUP - 1], op);
        if seg == 1 {
            if sf[GROUP - 1] == 1 {
                total = s[GROUP - 1];
            }
        }
        barrier();
        if lid == GROUP - 1 {
            carry[0] = total;
        }
        for j in 0..items {
            let i = first + j;
            if i < count {
                let v = sums[i];
                sums[i] = running;
                if is_head(tile_heads, i, count, seg) == 1 {
                    running = v;
                } else {
                    running = combine(running, v, op);
                }
            }
        }
        barrier();
        start += GROUP * items;
    }
}

/// Pass 3: scans each tile from its offset: `y[i]` combines `offsets[tile]` (unless a
/// head came between) and the tile's elements before `i` since the last head (and
/// `x[i]` itself when `inclusive` is 1).
#[kernel]
fn scan_tiles<T: Num, const ITEMS: u32>(
    x: &[T],
    heads: &[u32],
    y: &mut [T],
    offsets: &[T],
    n: u32,
    identity: T,
    op: u32,
    seg: u32,
    inclusive: u32,
    runtime_items: u32,
) {
    let items = fixed_or(ITEMS, runtime_items);
    let tile = shared::<T, { tile_padded(ITEMS) }>();
    let s = shared::<T, GROUP>();
    let sf = shared::<u32, GROUP>();
    let lid = local_id().x;
    let base = group_id().x * GROUP * items;
    scan_tile_runs(tile, s, sf, x, heads, base, n, identity, op, seg, items);
    let mut running = carried_in(s, sf, offsets[group_id().x], op, seg);
    for j in 0..items {
        let e = lid * items + j;
        let at = padded(e);
        let v = tile[at];
        let head = is_head(heads, base + e, n, seg);
        if inclusive == 1 {
            if head == 1 {
                running = v;
            } else {
                running = combine(running, v, op);
            }
            tile[at] = running;
        } else {
            if head == 1 {
                running = identity;
            }
            tile[at] = running;
            running = combine(running, v, op);
        }
    }
    barrier();
    for r in 0..items {
        let e = r * GROUP + lid;
        let i = base + e;
        if i < n {
            y[i] = tile[padded(e)];
        }
    }
}

/// `output[i] = input[0] + … + input[i - 1]` (`output[0]` is zero).
///
/// Integers wrap; floats are summed per tile of 4,096 in a fixed order, then across tiles
/// (the same bits on every run of a device).
///
/// ```
/// use dotcompute::prelude::*;
/// let d = Device::cpu();
/// let x = d.upload(&[3u32, 1, 4, 1, 5])?;
/// let mut y = d.alloc::<u32>(5)?;
/// dotcompute_ops::scan::exclusive_sum(&d, &x, &mut y)?;
/// assert_eq!(y.to_vec()?, [0, 3, 4, 8, 9]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn exclusive_sum<T: Reducible>(
    queue: &impl AsStream,
    input: &Buffer<T>,
    output: &mut Buffer<T>,
) -> Result<()> {
    scan(
        queue,
        "exclusive_sum",
        input,
        None,
        output,
        ReduceOp::Sum,
        false,
    )
}

/// `output[i] = input[0] + … + input[i]`.
///
/// ```
/// use dotcompute::prelude::*;
/// let d = Device::cpu();
/// let x = d.upload(&[3u32, 1, 4, 1, 5])?;
/// let mut y = d.alloc::<u32>(5)?;
/// dotcompute_ops::scan::inclusive_sum(&d, &x, &mut y)?;
/// assert_eq!(y.to_vec()?, [3, 4, 8, 9, 14]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn inclusive_sum<T: Reducible>(
    queue: &impl AsStream,
    input: &Buffer<T>,
    output: &mut Buffer<T>,
) -> Result<()> {
    scan(
        queue,
        "inclusive_sum",
        input,
        None,
        output,
        ReduceOp::Sum,
        true,
    )
}

/// `output[i]` combines `input[0..i]` with `op` (`output[0]` is the identity: 0, the
/// type's highest value for min, its lowest for max).
///
/// ```
/// use dotcompute::prelude::*;
/// use dotcompute_ops::{scan::exclusive_scan, ReduceOp};
/// let d = Device::cpu();
/// let x = d.upload(&[3i32, 1, 4, 1, 5])?;
/// let mut y = d.alloc::<i32>(5)?;
/// exclusive_scan(&d, &x, &mut y, ReduceOp::Max)?;
/// assert_eq!(y.to_vec()?, [i32::MIN, 3, 3, 4, 4]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn exclusive_scan<T: Reducible>(
    queue: &impl AsStream,
    input: &Buffer<T>,
    output: &mut Buffer<T>,
    op: ReduceOp,
) -> Result<()> {
    scan(queue, "exclusive_scan", input, None, output, op, false)
}

/// `output[i]` combines `input[0..=i]` with `op` (running minimum, maximum or sum).
///
/// ```
/// use dotcompute::prelude::*;
/// use dotcompute_ops::{scan::inclusive_scan, ReduceOp};
/// let d = Device::cpu();
/// let x = d.upload(&[3i32, 1, 4, 0, 5])?;
/// let mut y = d.alloc::<i32>(5)?;
/// inclusive_scan(&d, &x, &mut y, ReduceOp::Min)?;
/// assert_eq!(y.to_vec()?, [3, 1, 1, 0, 0]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn inclusive_scan<T: Reducible>(
    queue: &impl AsStream,
    input: &Buffer<T>,
    output: &mut Buffer<T>,
    op: ReduceOp,
) -> Result<()> {
    scan(queue, "inclusive_scan", input, None, output, op, true)
}

/// Segments that restart the scan where `heads[i]` is not zero (element 0 always starts
/// one): `output[i]` combines the segment's elements before `i` (exclusive, the
/// identity at each head) or up to `i` (inclusive).
///
/// ```
/// use dotcompute::prelude::*;
/// use dotcompute_ops::{scan::scan_by_heads, ReduceOp};
/// let d = Device::cpu();
/// let x = d.upload(&[1u32, 2, 3, 4, 5, 6])?;
/// let heads = d.upload(&[0u32, 0, 1, 0, 0, 1])?;
/// let mut y = d.alloc::<u32>(6)?;
/// scan_by_heads(&d, &x, &heads, &mut y, ReduceOp::Sum, true)?;
/// assert_eq!(y.to_vec()?, [1, 3, 3, 7, 12, 6]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn scan_by_heads<T: Reducible>(
    queue: &impl AsStream,
    input: &Buffer<T>,
    heads: &Buffer<u32>,
    output: &mut Buffer<T>,
    op: ReduceOp,
    inclusive: bool,
) -> Result<()> {
    const OP: &str = "scan_by_heads";
    crate::len_matches_input(OP, "the heads have", input.len(), heads.len())?;

    scan(queue, OP, input, Some(heads), output, op, inclusive)
}

/// Segments given by offsets: segment `s` is `input[offsets[s]..offsets[s + 1]]`, and
/// the segments must cover the input (`offsets[0] == 0`, the last offset is its length;
/// empty segments are allowed). Offsets are read and checked first (one small read).
///
/// ```
/// use dotcompute::prelude::*;
/// use dotcompute_ops::{scan::scan_by_offsets, ReduceOp};
/// let d = Device::cpu();
/// let x = d.upload(&[5.0f32, 2.0, 3.0, 1.0, 4.0])?;
/// let offsets = d.upload(&[0u32, 2, 2, 5])?;
/// let mut y = d.alloc::<f32>(5)?;
/// scan_by_offsets(&d, &x, &offsets, &mut y, ReduceOp::Min, true)?;
/// assert_eq!(y.to_vec()?, [5.0, 2.0, 3.0, 1.0, 1.0]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn scan_by_offsets<T: Reducible>(
    queue: &impl AsStream,
    input: &Buffer<T>,
    offsets: &Buffer<u32>,
    output: &mut Buffer<T>,
    op: ReduceOp,
    inclusive: bool,
) -> Result<()> {
    const OP: &str = "scan_by_offsets";
    let n = input.len();
    let bounds = crate::read_covering_offsets(queue, OP, offsets, n)?;
    let mut heads = vec![0u32; n];
    for &b in &bounds[..bounds.len() - 1] {
        if (b as usize) < n {
            heads[b as usize] = 1;
        }
    }
    let heads = queue.scratch_from(&heads)?;
    scan(queue, OP, input, Some(&heads), output, op, inclusive)
}

fn scan<T: Reducible>(
    queue: &impl AsStream,
    op_name: &'static str,
    input: &Buffer<T>,
    heads: Option<&Buffer<u32>>,
    output: &mut Buffer<T>,
    op: ReduceOp,
    inclusive: bool,
) -> Result<()> {
    crate::same_len(op_name, input.len(), output.len())?;
    let n = index_len(op_name, input.len())?;
    if n == 0 {
        return Ok(());
    }
    let id = identity::<T>(op);
    if crate::host::is_cpu(queue) {
        let x = crate::host::elements(queue, input)?;
        let h = heads.map(|h| crate::host::elements(queue, h)).transpose()?;
        let forms = crate::host::scan_forms::<T>(h.is_some());
        let mut run = |i: usize| {
            let form = forms[i].1;
            crate::host::fill_output(output, |y| {
                let mode = (inclusive, form.streamed);
                crate::reduce::with_host_fn!(T, op, |f| if form.two_passes {
                    crate::host::scan_two_passes(&x, y, mode, id, f)
                } else {
                    crate::host::scan(&x, h.as_deref(), y, mode, id, f)
                })
            })
        };
        if forms.len() == 1 {
            return run(0);
        }
        let what = format!("{:?} {op:?} on the host", <T as dotcompute::Element>::TYPE);
        let key = crate::tune::key(queue, "scan", &what, n as usize);
        // The host's work is done when `run` returns: nothing to wait for.
        let names: Vec<&str> = forms.iter().map(|f| f.0).collect();
        let form = crate::tune::choose_on(queue, &key, n as usize, &names, &mut run, || Ok(()))?;
        return run(form);
    }
    scan_on_device(queue, input, heads, output, op, inclusive, id)
}

/// The operation's code in the kernels' `combine`.
fn op_code(op: ReduceOp) -> u32 {
    match op {
        ReduceOp::Sum => 0,
        ReduceOp::Min => 1,
        ReduceOp::Max => 2,
    }
}

/// The three passes. The operation, segmentation and inclusiveness are uniforms, not
/// kernel constants: one kernel per element type serves every scan (a uniform branch
/// costs a memory-bound pass nothing measurable, while each constant would be another
/// kernel to compile: lavapipe takes 20–30 s for each of these).
fn scan_on_device<T: Reducible>(
    queue: &impl AsStream,
    input: &Buffer<T>,
    heads: Option<&Buffer<u32>>,
    output: &mut Buffer<T>,
    op: ReduceOp,
    inclusive: bool,
    id: T,
) -> Result<()> {
    if heads.is_none() && single_pass_applies::<T>(queue) {
        return single_pass(queue, input, output, op, inclusive, id);
    }
    let job = ScanJob {
        input,
        heads,
        op,
        inclusive,
        id,
    };
    let subgroups = subgroup::applies::<T>(queue, heads.is_some());
    if crate::software_gpu(queue) {
        // One form (loop counts at run time), unless a test pins a subgroup form.
        if subgroups {
            match crate::tune::pinned(&[SUBGROUP_FORM, SUBGROUP_VEC4_FORM]) {
                Some(0) => return subgroup::passes::<T, SOFTWARE_ITEMS, 0>(queue, &job, output),
                Some(_) => return subgroup::passes::<T, SOFTWARE_ITEMS, 1>(queue, &job, output),
                None => {}
            }
        }
        return scan_passes::<T, 0>(queue, &job, output);
    }
    // Where the subgroup forms apply they come first (the quads the default): 2.7× the
    // shared-tile form's speed on NVIDIA Vulkan, 1.1× on CUDA (H200, 2026-11-29).
    let forms: &[&str] = if subgroups {
        &THREE_PASS_FORMS
    } else {
        // The subgroup forms come first; the rest stage tiles in shared memory.
        let subgroup_forms = THREE_PASS_FORMS
            .iter()
            .filter(|f| f.starts_with(SUBGROUP_FORM))
            .count();
        &THREE_PASS_FORMS[subgroup_forms..]
    };
    let run = |form: usize, output: &mut Buffer<T>| match forms[form] {
        SUBGROUP_FORM => subgroup::passes::<T, GPU_ITEMS, 0>(queue, &job, output),
        SUBGROUP_NARROW_FORM => subgroup::passes::<T, NARROW_ITEMS, 0>(queue, &job, output),
        SUBGROUP_VEC4_FORM => subgroup::passes::<T, GPU_ITEMS, 1>(queue, &job, output),
        "three-pass-narrow" => scan_passes::<T, NARROW_ITEMS>(queue, &job, output),
        _ => scan_passes::<T, GPU_ITEMS>(queue, &job, output),
    };
    // Segmented scans and each operation are tuned apart: a segmented scan has other
    // forms, and the subgroup form's min and max scan by shuffles where its sum has
    // `subgroup_inclusive_add`.
    let segmented = if heads.is_some() { "segmented " } else { "" };
    let what = format!("{segmented}scan {op:?}").to_lowercase();
    let form = choose_three_pass::<T>(queue, &what, forms, input.len(), |i| run(i, output))?;
    run(form, output)
}

/// What the three passes scan: the input, its segment heads (if segmented), the
/// operation with its identity, and whether the scan is inclusive.
struct ScanJob<'a, T: dotcompute::Element> {
    input: &'a Buffer<T>,
    heads: Option<&'a Buffer<u32>>,
    op: ReduceOp,
    inclusive: bool,
    id: T,
}

/// The three passes' forms on GPUs, by name. Where it applies (unsegmented scans of
/// 32-bit integers on devices with subgroups, `subgroup.rs`) the default is the subgroup
/// form in quads of 16-byte accesses (`subgroup_scan_vec4`), then the subgroup form in
/// rounds (one element a lane per round, `GPU_ITEMS` a thread) and its narrow twin
/// (`NARROW_ITEMS`); elsewhere the default is the shared-tile form with `GPU_ITEMS`, with
/// its narrow twin (twice the groups, each with half the work and half the shared tile),
/// which fills a device better at smaller sizes. Measured at 2^28 `u32` on an H200
/// (2026-11-29, `docs/benchmarks.md`): on NVIDIA Vulkan the quads at 0.560× of a copy,
/// the rounds 0.463×, the shared tile 0.211×; on CUDA, where the single pass takes these
/// scans, 0.658×, 0.652× and 0.588×. The narrow subgroup twin was chosen by the tuner at
/// 2^18–2^21 on NVIDIA Vulkan (2026-11-28: 1–8 % faster than the next form there). Wide
/// forms (32 a thread) were slower on NVIDIA Vulkan in both kinds (H100 and H200) and are
/// not offered. Only exact types take the narrow forms: a float sum's tree follows the
/// tile, and a float scan gives the same bits on every run of a device whichever the
/// tuner chose. `tune::with_candidate` pins one (on software GPUs only the subgroup forms
/// besides the default); `"three-pass"` is also the name that keeps CUDA off its single
/// pass ([`single_pass_allowed`]).
pub(crate) const THREE_PASS_FORMS: [&str; 5] = [
    SUBGROUP_VEC4_FORM,
    SUBGROUP_FORM,
    SUBGROUP_NARROW_FORM,
    "three-pass",
    "three-pass-narrow",
];

/// The three passes' subgroup forms (`subgroup.rs`): in quads of 16-byte accesses, in
/// rounds, and in rounds with narrow tiles.
const SUBGROUP_FORM: &str = "three-pass-subgroup";
const SUBGROUP_NARROW_FORM: &str = "three-pass-subgroup-narrow";
const SUBGROUP_VEC4_FORM: &str = "three-pass-subgroup-vec4";

/// Elements per thread of the narrow three-pass form.
const NARROW_ITEMS: u32 = 8;

/// The index in `forms` (some of [`THREE_PASS_FORMS`]) of the form to run for `op` on `n`
/// elements of `T` (`run(i)` runs form `i`): the first for float types.
fn choose_three_pass<T: Reducible>(
    queue: &impl AsStream,
    op: &str,
    forms: &[&str],
    n: usize,
    run: impl FnMut(usize) -> Result<()>,
) -> Result<usize> {
    use dotcompute::ir::ScalarType;
    let ty = <T as dotcompute::Element>::TYPE.scalar;
    if matches!(
        ty,
        ScalarType::F32 | ScalarType::F64 | ScalarType::F16 | ScalarType::BF16
    ) {
        return Ok(0);
    }
    let key = crate::tune::key(queue, &format!("{op} three-pass"), &format!("{ty:?}"), n);
    crate::tune::choose_on(queue, &key, n, forms, run, || queue.device().synchronize())
}

/// The passes with `ITEMS` elements per thread (0: the kernels take `SOFTWARE_ITEMS` at
/// run time, on software GPUs).
fn scan_passes<T: Reducible, const ITEMS: u32>(
    queue: &impl AsStream,
    job: &ScanJob<'_, T>,
    output: &mut Buffer<T>,
) -> Result<()> {
    let ScanJob {
        input,
        heads,
        op,
        inclusive,
        id,
    } = *job;
    let items = if ITEMS == 0 { SOFTWARE_ITEMS } else { ITEMS };
    let n = input.len() as u32;
    let tiles = n.div_ceil(GROUP * items);
    let mut sums = queue.scratch::<T>(tiles as usize)?;
    let groups = Launch::threads(tiles as usize * GROUP as usize).group(GROUP);
    let one = Launch::threads(GROUP as usize).group(GROUP);
    let code = op_code(op);
    let mut tile_heads = queue.scratch::<u32>(tiles as usize)?;
    let unused;
    let (heads, seg) = match heads {
        Some(h) => {
            tile_segments::launch::<T, ITEMS>(
                queue,
                groups,
                input,
                h,
                &mut sums,
                &mut tile_heads,
                n,
                id,
                code,
                items,
            )?;
            (h, 1)
        }
        None => {
            tile_sums::launch::<T, ITEMS>(queue, groups, input, &mut sums, n, id, code, items)?;
            unused = queue.scratch::<u32>(1)?;
            (&unused, 0)
        }
    };
    scan_sums::launch::<T, ITEMS>(
        queue,
        one,
        &mut sums,
        &tile_heads,
        tiles,
        id,
        code,
        seg,
        items,
    )?;
    scan_tiles::launch::<T, ITEMS>(
        queue,
        groups,
        input,
        heads,
        output,
        &sums,
        n,
        id,
        code,
        seg,
        inclusive as u32,
        items,
    )
}

/// Counts above which [`exclusive_sum_of_counts`] takes the subgroup form's three passes
/// on hardware GPUs rather than one group's chain of tiles: the chain of 2^17 counts (a
/// copy-if of 2^28 elements) took 57 µs on an H200 (Nsight Compute, session 26), a
/// 13th of the whole selection, about 1.8 µs a tile of `GROUP × GPU_ITEMS`.
const CHAINED_COUNTS_MAX: usize = 8 * (GROUP * GPU_ITEMS) as usize;

/// The exclusive sum of `counts` (other operations' second pass: tiles' counts into their
/// first output positions): into a new buffer by subgroups where the device has them
/// (`subgroup.rs`; by one group, or for more than `CHAINED_COUNTS_MAX` counts on a
/// hardware GPU by the three passes of the subgroup form in quads, its default), in place
/// by one group otherwise. Not tuned: it runs inside the operations' own tuners.
pub(crate) fn exclusive_sum_of_counts(
    queue: &impl AsStream,
    mut counts: Buffer<u32>,
) -> Result<Buffer<u32>> {
    let software = crate::software_gpu(queue);
    let sum = op_code(ReduceOp::Sum);
    if subgroup::applies::<u32>(queue, false) {
        if !software && counts.len() > CHAINED_COUNTS_MAX {
            let job = ScanJob {
                input: &counts,
                heads: None,
                op: ReduceOp::Sum,
                inclusive: false,
                id: 0u32,
            };
            let mut offsets = queue.scratch::<u32>(counts.len())?;
            subgroup::passes::<u32, GPU_ITEMS, 1>(queue, &job, &mut offsets)?;
            return Ok(offsets);
        }
        return if software {
            subgroup::chained_exclusive::<u32, SOFTWARE_ITEMS>(queue, &counts, 0, sum)
        } else {
            subgroup::chained_exclusive::<u32, GPU_ITEMS>(queue, &counts, 0, sum)
        };
    }
    let count = counts.len() as u32;
    let unused = queue.scratch::<u32>(1)?;
    let one = Launch::threads(GROUP as usize).group(GROUP);
    if software {
        let items = SOFTWARE_ITEMS;
        scan_sums::launch::<u32, 0>(queue, one, &mut counts, &unused, count, 0, sum, 0, items)?;
    } else {
        let items = GPU_ITEMS;
        scan_sums::launch::<u32, GPU_ITEMS>(
            queue,
            one,
            &mut counts,
            &unused,
            count,
            0,
            sum,
            0,
            items,
        )?;
    }
    Ok(counts)
}
