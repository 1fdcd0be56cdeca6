//! The three passes' subgroup form: tiles scanned in registers by subgroups, with only
//! the subgroups' totals in shared memory.
//!
//! The shared-tile form stages each group's whole tile in shared memory (17 KB for 16
//! `u32` a thread) and rakes it with five barriers, and its first pass combines by a
//! shared-memory tree. Here each subgroup loads its share of the tile in coalesced rounds
//! (lane `l` of round `r` takes element `r × width + l` of the subgroup's run) into
//! registers, scans each round across its lanes, and chains the rounds through the last
//! lane; the group then needs one barrier to hand each subgroup the totals of those before
//! it. On an H200 (2026-11-28, `docs/benchmarks.md`) NVIDIA's Vulkan driver ran a 2^28
//! `u32` scan at 0.385× of a copy this way against 0.210× with shared tiles (CUDA: 0.626×
//! against 0.587×). Exact types only (`u32`, `i32`): the subgroup operations combine in an
//! order of their own.

use super::*;
use dotcompute::Arg;

/// Combines `v` over the subgroup with `op`; every lane gets the result.
#[kernel_fn]
fn subgroup_combine<T: Num>(v: T, op: u32) -> T {
    if op == 0u32 {
        subgroup_add(v)
    } else if op == 1u32 {
        subgroup_min(v)
    } else {
        subgroup_max(v)
    }
}

/// Inclusive scan of `v` over the subgroup's lanes with `op`.
#[kernel_fn]
fn subgroup_inclusive<T: Num>(v: T, op: u32) -> T {
    let mut x = v;
    if op == 0u32 {
        x = subgroup_inclusive_add(v);
    } else {
        let lane = subgroup_lane();
        let mut d = 1u32;
        while d < subgroup_size() {
            let y = subgroup_shuffle_up(x, d);
            if lane >= d {
                x = combine(y, x, op);
            }
            d *= 2u32;
        }
    }
    x
}

/// Pass 1: `sums[t]` combines tile `t` of `x[..n]` (group-strided loads, then one
/// subgroup combination and one barrier).
#[kernel]
fn subgroup_tile_sums<T: Num, const ITEMS: u32, const OP: u32>(
    x: &[T],
    sums: &mut [T],
    n: u32,
    identity: T,
) {
    let s = shared::<T, GROUP>();
    let lid = local_id().x;
    let base = group_id().x * GROUP * ITEMS;
    let mut acc = identity;
    if n - base >= GROUP * ITEMS {
        for r in 0..ITEMS {
            acc = combine(acc, x[base + r * GROUP + lid], OP);
        }
    } else {
        for r in 0..ITEMS {
            let i = base + r * GROUP + lid;
            if i < n {
                acc = combine(acc, x[i], OP);
            }
        }
    }
    store_group_total(s, acc, sums, OP, identity);
}

/// Writes the combination with `op` of every thread's `v` to `out[group_id().x]`: one
/// subgroup combination, each subgroup's total in `s` (one barrier), then thread 0
/// combines the totals. Every thread of the group must reach it (it has a barrier).
#[kernel_fn]
pub(crate) fn store_group_total<T: Num>(s: &mut [T], v: T, out: &mut [T], op: u32, identity: T) {
    let lid = local_id().x;
    let width = subgroup_size();
    let total = subgroup_combine(v, op);
    if subgroup_lane() == 0u32 {
        s[lid / width] = total;
    }
    barrier();
    if lid == 0u32 {
        let mut all = identity;
        for w in 0..GROUP / width {
            all = combine(all, s[w], op);
        }
        out[group_id().x] = all;
    }
}

/// Passes 2 and 3: scans tiles of `GROUP × ITEMS` elements of `x[..n]` into `y` with
/// operation `OP`, inclusive where `INCL` is 1. With `CHAINED` 0 (pass 3) group `t` scans
/// tile `t` from `offsets[t]`; with `CHAINED` 1 (pass 2: one group, `x` the tile
/// aggregates of pass 1) the group scans every tile of `x` one after another, each from
/// the total of those before, and `offsets` is not read. The operation and the kind of
/// scan are constants, not arguments: NVIDIA's Vulkan compiler ran pass 3 of a 2^28 `u32`
/// sum in 748 µs with them constant against 946 µs with them read from the arguments (H200,
/// 2026-11-28; CUDA's the same either way).
#[kernel]
fn subgroup_scan_tiles<
    T: Num,
    const ITEMS: u32,
    const OP: u32,
    const INCL: u32,
    const CHAINED: u32,
>(
    x: &[T],
    y: &mut [T],
    offsets: &[T],
    n: u32,
    identity: T,
) {
    let s = shared::<T, GROUP>();
    let lid = local_id().x;
    let width = subgroup_size();
    let lane = subgroup_lane();
    let sub = lid / width;
    let mut v = [identity; ITEMS];
    let mut t = group_id().x;
    let mut end = t + 1u32;
    let mut carry = identity;
    if CHAINED == 1u32 {
        t = 0;
        end = (n - 1u32) / (GROUP * ITEMS) + 1u32;
    } else {
        carry = offsets[t];
    }
    while t < end {
        let tile_base = t * GROUP * ITEMS;
        let first = tile_base + sub * width * ITEMS + lane;
        // Every load of the thread before any scan, so that they are in flight
        // together; unguarded in whole tiles (a load under a branch is not issued early).
        let whole = n - tile_base >= GROUP * ITEMS;
        if whole {
            for r in 0..ITEMS {
                v[r] = x[first + r * width];
            }
        } else {
            for r in 0..ITEMS {
                let i = first + r * width;
                v[r] = identity;
                if i < n {
                    v[r] = x[i];
                }
            }
        }
        // Round by round across the lanes, each round from the one before's total.
        let mut running = identity;
        for r in 0..ITEMS {
            let inc = combine(running, subgroup_inclusive(v[r], OP), OP);
            if INCL == 1u32 {
                v[r] = inc;
            } else {
                let mut ex = subgroup_shuffle_up(inc, 1u32);
                if lane == 0u32 {
                    ex = running;
                }
                v[r] = ex;
            }
            running = subgroup_shuffle(inc, width - 1u32);
        }
        if lane == width - 1u32 {
            s[sub] = running;
        }
        barrier();
        let mut before = carry;
        let mut total = carry;
        for w in 0..GROUP / width {
            if w < sub {
                before = combine(before, s[w], OP);
            }
            total = combine(total, s[w], OP);
        }
        if whole {
            for r in 0..ITEMS {
                y[first + r * width] = combine(before, v[r], OP);
            }
        } else {
            for r in 0..ITEMS {
                let i = first + r * width;
                if i < n {
                    y[i] = combine(before, v[r], OP);
                }
            }
        }
        carry = total;
        // The totals are read before the next tile writes them.
        barrier();
        t += 1u32;
    }
}

/// The scan of a subgroup form's held quads (`v[4r..4r + 4]` of round `r`, `items` in
/// all) across the group, for [`subgroup_scan_vec4`]: each lane scans its four in the
/// thread, the round scans the lanes' totals across the subgroup, the rounds chain
/// through the last lane, and one barrier hands each subgroup the totals of those before
/// it (in `s`). Returns what the group's first element adds to `v` (the tile's `offset`
/// combined with the earlier subgroups' totals); every thread must reach it.
#[kernel_fn]
fn scan_lane_quads<T: Num>(
    s: &mut [T],
    v: &mut [T],
    items: u32,
    op: u32,
    incl: u32,
    offset: T,
    identity: T,
) -> T {
    let width = subgroup_size();
    let lane = subgroup_lane();
    let sub = local_id().x / width;
    let mut running = identity;
    for r in 0..items / 4u32 {
        // The lane's four, scanned in the thread.
        let mut acc = identity;
        for k in 0..4u32 {
            let here = v[4u32 * r + k];
            let next = combine(acc, here, op);
            if incl == 1u32 {
                v[4u32 * r + k] = next;
            } else {
                v[4u32 * r + k] = acc;
            }
            acc = next;
        }
        // The lanes' totals across the subgroup.
        let inc = subgroup_inclusive(acc, op);
        let mut before = subgroup_shuffle_up(inc, 1u32);
        if lane == 0u32 {
            before = identity;
        }
        let lane_base = combine(running, before, op);
        for k in 0..4u32 {
            v[4u32 * r + k] = combine(lane_base, v[4u32 * r + k], op);
        }
        running = combine(running, subgroup_shuffle(inc, width - 1u32), op);
    }
    if lane == width - 1u32 {
        s[sub] = running;
    }
    barrier();
    let mut before = offset;
    for w in 0..GROUP / width {
        if w < sub {
            before = combine(before, s[w], op);
        }
    }
    before
}

/// Pass 3 in quads of 16-byte accesses, for 32-bit integers: lane `l` of each round holds
/// four consecutive elements (`4l..4l + 4` of the round's `4 × width`) loaded as one
/// vector, scans them in the thread, and the round scans only the lanes' totals across
/// the subgroup ([`scan_lane_quads`]): one subgroup scan per four elements, and one
/// coalesced 16-byte access a lane. `x4` and `y4` are the input's and output's whole
/// quads (`Vec4s::bits`, the lanes bitcast to `T`); quads past `x4`'s end scan as the
/// identity. The elements after the last whole quad (at most three) are [`scan_tail`]'s.
/// On an H200 (2026-11-29, `docs/benchmarks.md`) NVIDIA's Vulkan driver ran a 2^28 `u32`
/// exclusive sum at 0.560× of a copy this way against 0.463× in rounds and 0.459× for
/// the same quads loaded element by element (four loads a lane, 16 bytes apart across
/// the lanes: that form was dropped); CUDA's three passes 0.658× against 0.652× and 0.537×.
#[kernel]
fn subgroup_scan_vec4<T: Num, const ITEMS: u32, const OP: u32, const INCL: u32>(
    x4: &[Vec4<u32>],
    y4: &mut [Vec4<u32>],
    offsets: &[T],
    identity: T,
) {
    let s = shared::<T, GROUP>();
    let width = subgroup_size();
    let sub = local_id().x / width;
    let quads = x4.len();
    let first = (group_id().x * GROUP * ITEMS + sub * width * ITEMS) / 4u32 + subgroup_lane();
    let mut v = [identity; ITEMS];
    for r in 0..ITEMS / 4u32 {
        let i = first + r * width;
        if i < quads {
            let q = x4[i];
            v[4u32 * r] = T::bitcast(q.x);
            v[4u32 * r + 1u32] = T::bitcast(q.y);
            v[4u32 * r + 2u32] = T::bitcast(q.z);
            v[4u32 * r + 3u32] = T::bitcast(q.w);
        }
    }
    let before = scan_lane_quads(s, v, ITEMS, OP, INCL, offsets[group_id().x], identity);
    for r in 0..ITEMS / 4u32 {
        let i = first + r * width;
        if i < quads {
            y4[i] = Vec4::new(
                u32::bitcast(combine(before, v[4u32 * r], OP)),
                u32::bitcast(combine(before, v[4u32 * r + 1u32], OP)),
                u32::bitcast(combine(before, v[4u32 * r + 2u32], OP)),
                u32::bitcast(combine(before, v[4u32 * r + 3u32], OP)),
            );
        }
    }
}

/// The scan of the elements after the last whole quad (`4 · (n / 4)..n`, at most three)
/// after [`subgroup_scan_vec4`] with tiles of `tile_len` elements, by one thread: from the
/// last whole quad's last output (and, for an exclusive scan, its input), or from the
/// last tile's offset where that tile has no whole quad.
#[kernel]
fn scan_tail<T: Num, const OP: u32, const INCL: u32>(
    x: &[T],
    y: &mut [T],
    offsets: &[T],
    n: u32,
    tile_len: u32,
) {
    if global_id().x == 0u32 {
        let start = (n / 4u32) * 4u32;
        let tile = (n - 1u32) / tile_len;
        let tile_start = tile * tile_len;
        let mut acc = offsets[tile];
        if start > tile_start {
            acc = y[start - 1u32];
            if INCL == 0u32 {
                acc = combine(acc, x[start - 1u32], OP);
            }
        }
        for i in start..n {
            let next = combine(acc, x[i], OP);
            if INCL == 1u32 {
                y[i] = next;
            } else {
                y[i] = acc;
            }
            acc = next;
        }
    }
}

/// Whether the subgroup form can scan `T` on `queue`: unsegmented, a 32-bit integer type
/// (exact, so the lanes' order of combination cannot change a bit, and within what every
/// backend's subgroup operations take), and a device with subgroups.
pub(super) fn applies<T: Reducible>(queue: &impl AsStream, segmented: bool) -> bool {
    use dotcompute::ir::ScalarType;
    let ty = <T as dotcompute::Element>::TYPE;
    let exact_32 = ty == ScalarType::U32 || ty == ScalarType::I32;
    !segmented && exact_32 && queue.device().info().caps.subgroup_size.is_some()
}

/// The three passes of the subgroup form with `ITEMS` elements a thread: tile
/// aggregates, their exclusive scan by one group (into a second buffer), and the tiles
/// (in rounds of one element a lane, or with `QUADS` 1 of four in 16-byte accesses,
/// [`subgroup_scan_vec4`], then [`scan_tail`] where `n` is not a multiple of four; below
/// four elements there is no quad and the rounds run).
pub(super) fn passes<T: Reducible, const ITEMS: u32, const QUADS: u32>(
    queue: &impl AsStream,
    job: &ScanJob<'_, T>,
    output: &mut Buffer<T>,
) -> Result<()> {
    let n = job.input.len() as u32;
    let tiles = n.div_ceil(GROUP * ITEMS);
    let mut sums = queue.scratch::<T>(tiles as usize)?;
    let groups = Launch::threads(tiles as usize * GROUP as usize).group(GROUP);
    let (id, code) = (job.id, op_code(job.op));
    // The operation and the kind of scan are the kernels' constants (see
    // `subgroup_scan_tiles`): one instance each.
    let tile_sums = match code {
        0 => subgroup_tile_sums::launch::<T, ITEMS, 0>,
        1 => subgroup_tile_sums::launch::<T, ITEMS, 1>,
        _ => subgroup_tile_sums::launch::<T, ITEMS, 2>,
    };
    tile_sums(queue, groups, job.input, &mut sums, n, id)?;
    let offsets = chained_exclusive::<T, ITEMS>(queue, &sums, id, code)?;
    if QUADS == 1 {
        if let Some(x4) = job.input.as_vec4s() {
            return vec4_pass::<T, ITEMS>(queue, job, groups, x4, output, &offsets, code);
        }
    }
    // Pass 3's instance for the operation and inclusiveness.
    let tiles_pass = match (code, job.inclusive) {
        (0, false) => subgroup_scan_tiles::launch::<T, ITEMS, 0, 0, 0>,
        (0, true) => subgroup_scan_tiles::launch::<T, ITEMS, 0, 1, 0>,
        (1, false) => subgroup_scan_tiles::launch::<T, ITEMS, 1, 0, 0>,
        (1, true) => subgroup_scan_tiles::launch::<T, ITEMS, 1, 1, 0>,
        (_, false) => subgroup_scan_tiles::launch::<T, ITEMS, 2, 0, 0>,
        (_, true) => subgroup_scan_tiles::launch::<T, ITEMS, 2, 1, 0>,
    };
    tiles_pass(queue, groups, job.input, output, &offsets, n, id)
}

/// Pass 3 by [`subgroup_scan_vec4`] (and [`scan_tail`] for the last `n % 4` elements):
/// `groups` is one group a tile, `x4` `job.input`'s whole quads, `offsets` the tiles'
/// exclusive prefixes.
fn vec4_pass<T: Reducible, const ITEMS: u32>(
    queue: &impl AsStream,
    job: &ScanJob<'_, T>,
    groups: Launch,
    x4: dotcompute::Vec4s<'_, T>,
    output: &mut Buffer<T>,
    offsets: &Buffer<T>,
    code: u32,
) -> Result<()> {
    let n = job.input.len() as u32;
    let (kernel, tail) = match (code, job.inclusive) {
        (0, false) => (
            subgroup_scan_vec4::kernel::<T, ITEMS, 0, 0>(),
            scan_tail::kernel::<T, 0, 0>(),
        ),
        (0, true) => (
            subgroup_scan_vec4::kernel::<T, ITEMS, 0, 1>(),
            scan_tail::kernel::<T, 0, 1>(),
        ),
        (1, false) => (
            subgroup_scan_vec4::kernel::<T, ITEMS, 1, 0>(),
            scan_tail::kernel::<T, 1, 0>(),
        ),
        (1, true) => (
            subgroup_scan_vec4::kernel::<T, ITEMS, 1, 1>(),
            scan_tail::kernel::<T, 1, 1>(),
        ),
        (_, false) => (
            subgroup_scan_vec4::kernel::<T, ITEMS, 2, 0>(),
            scan_tail::kernel::<T, 2, 0>(),
        ),
        (_, true) => (
            subgroup_scan_vec4::kernel::<T, ITEMS, 2, 1>(),
            scan_tail::kernel::<T, 2, 1>(),
        ),
    };
    {
        let mut y4 = output
            .as_vec4s_mut()
            .expect("as many elements as the input");
        queue.launch_kernel(
            kernel,
            groups,
            &[
                x4.bits(),
                y4.bits(),
                Arg::buffer(offsets),
                Arg::scalar(job.id),
            ],
        )?;
    }
    if n % 4 == 0 {
        return Ok(());
    }
    queue.launch_kernel(
        tail,
        Launch::threads(1),
        &[
            Arg::buffer(job.input),
            Arg::buffer_mut(output),
            Arg::buffer(offsets),
            Arg::scalar(n),
            Arg::scalar(GROUP * ITEMS),
        ],
    )
}

/// The exclusive scan of `x` with operation `code` into a new buffer, by one group, tile
/// after tile (pass 2 alone: also for operations with passes of their own around it).
pub(super) fn chained_exclusive<T: Reducible, const ITEMS: u32>(
    queue: &impl AsStream,
    x: &Buffer<T>,
    identity: T,
    code: u32,
) -> Result<Buffer<T>> {
    let mut scanned = queue.scratch::<T>(x.len())?;
    if x.is_empty() {
        return Ok(scanned); // the kernel counts tiles from `n - 1`
    }
    // Chained, the kernel does not read `offsets`: one element stands in for it.
    let unused = queue.scratch::<T>(1)?;
    let one = Launch::threads(GROUP as usize).group(GROUP);
    let n = x.len() as u32;
    let chained = match code {
        0 => subgroup_scan_tiles::launch::<T, ITEMS, 0, 0, 1>,
        1 => subgroup_scan_tiles::launch::<T, ITEMS, 1, 0, 1>,
        _ => subgroup_scan_tiles::launch::<T, ITEMS, 2, 0, 1>,
    };
    chained(queue, one, x, &mut scanned, &unused, n, identity)?;
    Ok(scanned)
}
