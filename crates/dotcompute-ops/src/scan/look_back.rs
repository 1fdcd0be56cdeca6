//! The single-pass scan (decoupled look-back, Merrill & Garland 2016) for devices where
//! started groups run on while later ones wait (`Capabilities::forward_progress`: CUDA):
//! each group takes the next tile, publishes its aggregate, looks back over earlier tiles'
//! published values for its prefix, and scans its tile once. One read of the input
//! instead of the three passes' two. Copy-if and unique share the look-back.

use super::*;

/// Status word flags of the single pass (bits 30 and 31 of both of a tile's words).
const AGGREGATE: u32 = 1;
const PREFIX: u32 = 2;
/// Publishes `v`'s 32 bits (as `u32::cast`: an `i32`'s bits) under `flag` in tile
/// `tile`'s two status words, 16 bits in each beside the flag: one 32-bit atomic cannot
/// carry a flag and a whole value, and without a fence two stores may be seen in either
/// order, but each word goes from 0 to `AGGREGATE` to `PREFIX` with one value per flag,
/// so a reader that finds one flag in both words has both halves of one value.
#[kernel_fn]
fn publish<T: Num>(status: &mut [u32], tile: u32, v: T, flag: u32) {
    let bits = u32::cast(v);
    atomic_exchange(&status[2u32 * tile], (flag << 30u32) | (bits >> 16u32));
    atomic_exchange(
        &status[2u32 * tile + 1u32],
        (flag << 30u32) | (bits & 0xFFFFu32),
    );
}

/// The tile this group takes in a single pass: the next number from `counter[at]`, so
/// tiles are numbered in the order groups start (what the look-back's forward progress
/// rests on: every earlier number belongs to a group already running), shared with the
/// group through `number`. Every thread must call it; it ends with a barrier.
#[kernel_fn]
pub(crate) fn take_tile(number: &mut [u32], counter: &mut [u32], at: u32) -> u32 {
    if local_id().x == 0u32 {
        number[0] = atomic_add(&counter[at], 1u32);
    }
    barrier();
    number[0]
}

/// The decoupled look-back of tile `t` (tiles numbered in the order groups start), run by
/// one whole warp of its group (all 32 lanes must call it, together): publishes the tile's
/// `aggregate` (lane 0's), combines the values of earlier tiles back to the nearest one
/// that carries an inclusive prefix, publishes the tile's own inclusive prefix, and
/// returns the exclusive one (what all earlier tiles combine to) in every lane.
/// `status` holds two zeroed words per tile. Waits on earlier tiles, so only for CUDA
/// (see `sort/onesweep.rs`).
///
/// Each lane reads one of the 32 tiles before the window's end, so one round of memory
/// latency covers 32 predecessors: with one thread reading 4 at a time, two thirds of the
/// group's cycles were spent waiting at the barrier after the look-back (Nsight Compute,
/// H200, 2026-11-27). A round waits (re-reads) until every lane up to the nearest
/// prefix has a value; with no prefix among the 32, their aggregates are combined and the
/// window moves 32 tiles back. Lanes before tile 0 count as a prefix of `identity`.
/// Status words are read with `atomic_load`, not `atomic_or(.., 0)`: a read-modify-write
/// makes every poller of a word wait its turn (the scan at 0.79× of a copy with it, 0.87×
/// with loads; copy-if 0.48× and 0.63×; H200, 2026-11-27).
#[kernel_fn]
pub(crate) fn warp_look_back<T: Num>(
    status: &mut [u32],
    t: u32,
    aggregate: T,
    identity: T,
    op: u32,
) -> T {
    let lane = subgroup_lane();
    if lane == 0u32 {
        let mut flag = AGGREGATE;
        if t == 0u32 {
            flag = PREFIX;
        }
        publish(status, t, aggregate, flag);
    }
    let mut before = identity;
    // The window is tiles `look - 32 .. look`; lane `k` reads tile `look - 1 - k`.
    let mut look = t;
    while look > 0u32 {
        let mut flag = PREFIX;
        let mut bits = u32::cast(identity);
        let mut prefixes = 0u32;
        let mut waiting = 1u32;
        while waiting == 1u32 {
            if look > lane {
                let at = 2u32 * (look - 1u32 - lane);
                let hi = atomic_load(&status[at]);
                let lo = atomic_load(&status[at + 1u32]);
                flag = hi >> 30u32;
                if flag != lo >> 30u32 {
                    // The two halves are of different values: not ready yet.
                    flag = 0;
                }
                bits = ((hi & 0xFFFFu32) << 16u32) | (lo & 0xFFFFu32);
            }
            prefixes = subgroup_ballot(flag == PREFIX);
            let unready = subgroup_ballot(flag == 0u32);
            // Lanes up to and including the nearest prefix must have their values.
            let mut needed = 0xFFFF_FFFFu32;
            if prefixes != 0u32 {
                needed = 0xFFFF_FFFFu32 >> (31u32 - prefixes.trailing_zeros());
            }
            if (unready & needed) == 0u32 {
                waiting = 0;
            }
        }
        let mut v = identity;
        if prefixes == 0u32 || lane <= prefixes.trailing_zeros() {
            v = T::cast(bits);
        }
        // Every lane ends with all lanes' combination (an exact operation: the order of a
        // butterfly does not change a bit).
        v = combine(v, subgroup_shuffle_xor(v, 16u32), op);
        v = combine(v, subgroup_shuffle_xor(v, 8u32), op);
        v = combine(v, subgroup_shuffle_xor(v, 4u32), op);
        v = combine(v, subgroup_shuffle_xor(v, 2u32), op);
        v = combine(v, subgroup_shuffle_xor(v, 1u32), op);
        before = combine(v, before, op);
        if prefixes != 0u32 {
            look = 0;
        } else {
            look -= 32u32;
        }
    }
    if lane == 0u32 && t > 0u32 {
        publish(status, t, combine(before, aggregate, op), PREFIX);
    }
    before
}

/// Exclusive scan of `v` over the group with `op` by 32-lane subgroups (CUDA's warps:
/// the single passes that use it run only there): each warp scans its lanes by
/// shuffles, and each thread combines the totals of the warps before its own. One
/// barrier, where the raking [`group_scan`] takes four with most threads idle. `s`
/// holds the `GROUP / 32` warp totals until the caller's next barrier
/// ([`warp_totals`] combines them); every thread must call it.
#[kernel_fn]
fn warp_group_exclusive<T: Num>(s: &mut [T], v: T, identity: T, op: u32) -> T {
    let lid = local_id().x;
    let lane = subgroup_lane();
    let mut x = v;
    let mut d = 1u32;
    while d < 32u32 {
        let y = subgroup_shuffle_up(x, d);
        if lane >= d {
            x = combine(y, x, op);
        }
        d *= 2u32;
    }
    if lane == 31u32 {
        s[lid / 32u32] = x;
    }
    let mut before = subgroup_shuffle_up(x, 1u32);
    if lane == 0u32 {
        before = identity;
    }
    barrier();
    let mut warps_before = identity;
    for w in 0..GROUP / 32 {
        if w < lid / 32u32 {
            warps_before = combine(warps_before, s[w], op);
        }
    }
    combine(warps_before, before, op)
}

/// The group's total after [`warp_group_exclusive`] (before the caller's next barrier).
#[kernel_fn]
fn warp_totals<T: Num>(s: &[T], identity: T, op: u32) -> T {
    let mut total = identity;
    for w in 0..GROUP / 32 {
        total = combine(total, s[w], op);
    }
    total
}

/// The single pass of a scan (CUDA, 32-bit integers, no segments; see
/// [`single_pass_applies`]): tiles of `GROUP × ITEMS` numbered in the order groups
/// start, each scanned in shared memory and offset by the combination of all earlier
/// tiles, found by a decoupled look-back over their status words (as in
/// `sort/onesweep.rs`, which explains why this needs CUDA's forward progress). Reads the
/// input once and writes the output once, where the three passes read it twice.
#[kernel]
fn scan_single_pass<T: Num, const ITEMS: u32>(
    x: &[T],
    y: &mut [T],
    status: &mut [u32],
    counter: &mut [u32],
    n: u32,
    identity: T,
    op: u32,
    inclusive: u32,
) {
    let tile = shared::<T, { GROUP * ITEMS + GROUP * ITEMS / 32 }>();
    let s = shared::<T, { GROUP / 32 }>();
    let number = shared::<u32, 1>();
    let carry = shared::<T, 1>();
    let lid = local_id().x;
    let t = take_tile(number, counter, 0);
    let base = t * GROUP * ITEMS;
    load_tile(tile, x, base, n, identity, ITEMS);
    let mut acc = identity;
    for j in 0..ITEMS {
        acc = combine(acc, tile[padded(lid * ITEMS + j)], op);
    }
    let within = warp_group_exclusive(s, acc, identity, op);
    if lid < 32u32 {
        let aggregate = warp_totals(s, identity, op);
        let before = warp_look_back(status, t, aggregate, identity, op);
        if lid == 0u32 {
            carry[0] = before;
        }
    }
    barrier();
    let mut running = combine(carry[0], within, op);
    for j in 0..ITEMS {
        let at = padded(lid * ITEMS + j);
        let v = tile[at];
        if inclusive == 1u32 {
            running = combine(running, v, op);
            tile[at] = running;
        } else {
            tile[at] = running;
            running = combine(running, v, op);
        }
    }
    barrier();
    for r in 0..ITEMS {
        let e = r * GROUP + lid;
        let i = base + e;
        if i < n {
            y[i] = tile[padded(e)];
        }
    }
}

/// Whether an unsegmented scan of `T` on `queue` takes the single pass: CUDA (forward
/// progress between started blocks), and `u32` or `i32` (exact, so the order in which a
/// look-back combines earlier tiles cannot change a bit; float sums keep the three passes'
/// fixed order). A test can pin either form: `tune::with_candidate("three-pass", ..)`.
pub(super) fn single_pass_applies<T: Reducible>(queue: &impl AsStream) -> bool {
    use dotcompute::ir::ScalarType;
    let ty = <T as dotcompute::Element>::TYPE;
    let exact = ty == ScalarType::U32 || ty == ScalarType::I32;
    exact && single_pass_allowed(queue)
}

/// Whether a single pass with a look-back may run on `queue`: where started groups run
/// on while later ones wait (`Capabilities::forward_progress`: CUDA), unless the calling
/// thread pinned the three passes (`tune::with_candidate("three-pass", ..)`, or another of
/// their forms, [`THREE_PASS_FORMS`]). Scan and selection share the rule.
pub(crate) fn single_pass_allowed(queue: &impl AsStream) -> bool {
    let names: Vec<&str> = std::iter::once("single-pass")
        .chain(THREE_PASS_FORMS)
        .collect();
    queue.device().info().caps.forward_progress && !matches!(crate::tune::pinned(&names), Some(1..))
}

/// A single pass's look-back state for `tiles` tiles, zeroed on `queue`: two status words
/// per tile ([`warp_look_back`]) and the tile counter ([`take_tile`]).
pub(crate) fn look_back_state(
    queue: &impl AsStream,
    tiles: u32,
) -> Result<(Buffer<u32>, Buffer<u32>)> {
    let mut status = queue.scratch::<u32>(2 * tiles as usize)?;
    queue.fill_buffer(&mut status, 0)?;
    let mut counter = queue.scratch::<u32>(1)?;
    queue.fill_buffer(&mut counter, 0)?;
    Ok((status, counter))
}

/// The single pass's forms, by name: wide tiles, the default (the scan at 0.87× of a copy
/// against 0.85× for 2^28 `u32`, H200, 2026-11-27: half the tiles, so half the
/// look-backs), and narrow ones (twice the groups, for inputs that wide tiles leave the
/// device short of groups). Each operation sets its own lengths: the scan 32 or 16
/// elements per thread, copy-if and unique 16 or 8. The tuner chooses per size class (the
/// first when it is off); `tune::with_candidate` pins one.
pub(crate) const SINGLE_PASS_FORMS: [&str; 2] = ["single-pass", "single-pass-narrow"];

/// The index in [`SINGLE_PASS_FORMS`] of the form to run for operation `op` on `n`
/// elements of `T`, with `run(i)` running form `i` (see [`crate::tune::choose`]).
pub(crate) fn choose_single_pass<T: dotcompute::Element>(
    queue: &impl AsStream,
    op: &str,
    n: usize,
    run: impl FnMut(usize) -> Result<()>,
) -> Result<usize> {
    let what = format!("{:?}", T::TYPE);
    let key = crate::tune::key(queue, op, &what, n);
    crate::tune::choose_on(queue, &key, n, &SINGLE_PASS_FORMS, run, || {
        queue.device().synchronize()
    })
}

/// The single pass in the form the tuner chooses.
pub(super) fn single_pass<T: Reducible>(
    queue: &impl AsStream,
    input: &Buffer<T>,
    output: &mut Buffer<T>,
    op: ReduceOp,
    inclusive: bool,
    id: T,
) -> Result<()> {
    let how = (op_code(op), inclusive as u32, id);
    let run = |form: usize, output: &mut Buffer<T>| match form {
        0 => single_pass_with::<T, 32>(queue, input, output, how),
        _ => single_pass_with::<T, 16>(queue, input, output, how),
    };
    let n = input.len();
    let form = choose_single_pass::<T>(queue, "scan", n, |i| run(i, output))?;
    run(form, output)
}

/// The single pass with `ITEMS` per thread: zeroed status words (two per tile) and tile
/// counter, then one launch; `how` is the operation's code, inclusiveness and identity.
fn single_pass_with<T: Reducible, const ITEMS: u32>(
    queue: &impl AsStream,
    input: &Buffer<T>,
    output: &mut Buffer<T>,
    (op, inclusive, id): (u32, u32, T),
) -> Result<()> {
    let n = input.len() as u32;
    let tiles = n.div_ceil(GROUP * ITEMS);
    let (mut status, mut counter) = look_back_state(queue, tiles)?;
    let launch = Launch::threads(tiles as usize * GROUP as usize).group(GROUP);
    scan_single_pass::launch::<T, ITEMS>(
        queue,
        launch,
        input,
        output,
        &mut status,
        &mut counter,
        n,
        id,
        op,
        inclusive,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The single pass builds and validates for the types it takes (it runs only on
    /// CUDA, so this is what a machine without it can check).
    #[test]
    fn the_single_pass_builds_for_32_bit_integers() {
        scan_single_pass::ir::<u32, 16>().unwrap();
        scan_single_pass::ir::<i32, 32>().unwrap();
        use dotcompute::{KernelSource, Target};
        let cuda = scan_single_pass::kernel::<u32, 32>()
            .source(Target::Cuda)
            .unwrap();
        assert!(cuda.contains("__ballot_sync"), "{cuda}");
    }
}
