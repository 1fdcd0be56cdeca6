//! The sort's single-pass form for CUDA (CUB's *Onesweep*, Adinets & Merrill 2022): one
//! read of the keys counts the digits of every pass at once, then each 8-bit pass reads
//! and writes the keys once, where the multisplit and 4-bit passes read them twice and
//! write them scattered.
//!
//! A pass cuts the input into tiles of `GROUP × ITEMS` keys (`items`: wider for keys
//! alone than for pairs), one per group, numbered in the order groups *start* (an
//! atomic counter, not `group_id`). A group (1) counts its keys' digits per subgroup
//! with shared atomics, (2) publishes the tile's digit counts at once (CUB's "early
//! counts": later tiles' look-backs need them, and the ranking takes long),
//! (3) scans them into where each subgroup's keys of each digit start in the tile,
//! (4) ranks its keys per subgroup by warp multisplit (stable: input order within the
//! tile) and places each in shared memory in digit order, (5) finds how many keys of each
//! digit all earlier tiles hold by a *decoupled look-back*: thread `d` walks back over
//! earlier tiles' status words for digit `d` until one carries an inclusive prefix,
//! adding the counts it passes, then publishes its own inclusive prefix, and (6) writes
//! each digit's run of the tile to consecutive addresses (coalesced).
//!
//! **Why CUDA only.** The look-back waits on earlier tiles. That is safe where every group
//! that took an earlier tile number is running and will finish without waiting on a later
//! one: CUDA runs started blocks to completion. Vulkan promises no forward progress
//! between workgroups (and Metal none in writing), so wgpu and Metal keep the
//! reduce-then-scan passes (`multisplit.rs`, the 4-bit sort).
//!
//! **Status words.** Tile `t`'s word for digit `d` is `flag << 30 | value`: flag 0 (not
//! yet written), `AGGREGATE` (value = the tile's own count) or `PREFIX` (value = the count
//! of tiles `0..=t`). One 32-bit atomic carries flag and value together, so no memory
//! fence orders them; values stay below 2^30, hence [`MAX_LEN`].
//!
//! **When.** 32-bit keys (4 passes), alone or with 4-byte values, 32-lane subgroups, `n`
//! below 2^30. Keys and values are staged in shared memory for step (6).

use super::{radix_digit, KeyKind, RadixKey};
use crate::scan::{group_inclusive_sum, take_tile, warp_inclusive_sum};
use crate::GROUP;
use dotcompute::prelude::*;
use dotcompute::{AsStream, Buffer, Result};

/// Bits per pass.
pub(super) const BITS: u32 = 8;
/// Digits per pass: one per thread of a group (`GROUP`).
const RADIX: u32 = 1 << BITS;
/// Lanes per subgroup the pass is written for (ballots of 32 bits).
const WIDTH: u32 = 32;
/// Subgroups per group.
const WARPS: u32 = GROUP / WIDTH;
/// Keys per thread for pairs: their loads are all in flight before any is counted. With
/// the counts taken before the ranking, wider tiles won on an H200 (one pass over 2^28
/// keys: 1.96 ms at 12, 1.86 at 16, 1.80 at 18; 2026-11-30). 18 is the most whose two
/// staged tiles (36 KiB) and counters fit CUDA's 48 KiB of static shared memory. Before
/// the early counts, 16 lost to 12 (23.0 against 24.6 GKey/s, 2026-11-29).
const PAIR_ITEMS: u32 = 18;
/// Keys per thread for keys alone, whose one staged tile leaves room for wider tiles:
/// one pass over 2^28 keys on an H200 (session 29's harness, 2026-11-30) took 1.784 ms
/// at 18, 1.737 at 20, 1.715 at 21, **1.703 at 22** (64 registers, as at 18), 1.823 at
/// 23 and 1.807 at 24 (72 and 76 registers: fewer groups an SM), 1.763 at 26.
const KEY_ITEMS: u32 = 22;
/// The most keys a thread of any caller of [`write_tile`].
const MAX_ITEMS: u32 = KEY_ITEMS;

/// Keys a thread of the pass for keys alone (`pairs` false) or pairs.
const fn items(pairs: bool) -> u32 {
    if pairs {
        PAIR_ITEMS
    } else {
        KEY_ITEMS
    }
}
/// Passes at most (32-bit keys).
const MAX_PASSES: u32 = 4;
/// Status word flags (bits 30 and 31) and the value's bits.
const AGGREGATE: u32 = 1;
const PREFIX: u32 = 2;
const VALUE: u32 = (1 << 30) - 1;
/// Earlier tiles' status words a look-back reads at once. With the counts published
/// before the ranking, a predecessor's word is mostly there when read: 2 measured 1.78,
/// 4 1.80 and 8 1.86 ms a pass over 2^28 keys on an H200 (2026-11-30).
const WINDOW: u32 = 2;
/// Inputs from this length take another algorithm: a prefix must fit in 30 bits.
pub(super) const MAX_LEN: u32 = 1 << 30;
/// Groups of the counting kernel at most (each strides over the input).
const COUNT_GROUPS: u32 = 1024;

/// Whether `queue`'s device can run the pass for `n` keys of `K` (with values of `V` when
/// `pairs`): CUDA (see the module's note on forward progress), 32-lane subgroups, and
/// 4-byte keys and values, whose two staged tiles (36 KiB) and counters (10 KiB) fit
/// CUDA's 48 KiB of static shared memory (64-bit keys take the other algorithms).
pub(super) fn available<K, V>(queue: &impl AsStream, n: u32, pairs: bool) -> bool {
    let info = queue.device().info();
    info.caps.forward_progress
        && info.caps.subgroup_size == Some([WIDTH, WIDTH])
        && n < MAX_LEN
        && std::mem::size_of::<K>() == 4
        && (!pairs || std::mem::size_of::<V>() == 4)
}

/// The lanes of the subgroup among `valid` (a ballot) whose digit `d` (of `bits` bits)
/// equals the caller's: one ballot per digit bit. Every lane of the subgroup must call it.
#[kernel_fn]
pub(super) fn digit_peers(d: u32, valid: u32, bits: u32) -> u32 {
    let mut peers = valid;
    for b in 0..bits {
        let set = subgroup_ballot(((d >> b) & 1u32) != 0u32);
        if ((d >> b) & 1u32) != 0u32 {
            peers &= set;
        } else {
            peers &= !set;
        }
    }
    peers
}

/// The caller's key's rank among its subgroup's keys of digit `d` counted so far in
/// `hist[row + d]`, which it counts there: the lowest of the valid lanes holding `d`
/// takes places for them all with one shared atomic, and each lane's rank is the first
/// of them plus its peers in lower lanes (input order within the step). A subgroup's
/// counters must be touched by it alone; its successive steps are ordered (each step's
/// atomic comes after the previous step's shuffle). Every lane must call it.
#[kernel_fn]
pub(super) fn warp_rank(hist: &mut [u32], row: u32, d: u32, valid: bool) -> u32 {
    let lane = subgroup_lane();
    let peers = digit_peers(d, subgroup_ballot(valid), BITS);
    let mut leader = lane;
    if valid {
        leader = peers.trailing_zeros();
    }
    let mut first = 0u32;
    if valid && lane == leader {
        first = atomic_add(&hist[row + d], peers.count_ones());
    }
    let lower_lanes = (1u32 << lane) - 1u32;
    subgroup_shuffle(first, leader) + (peers & lower_lanes).count_ones()
}

/// The tile's count of digit `lid` (the calling thread's) over the subgroups' rows of
/// `hist` (`WARPS × RADIX`), each of which then holds the keys of the digit in earlier
/// subgroups. Called by every thread of a `GROUP`, after the ranking's barrier.
#[kernel_fn]
pub(super) fn tile_digit_count(hist: &mut [u32]) -> u32 {
    let lid = local_id().x;
    let mut count = 0u32;
    for w in 0..WARPS {
        let at = w * RADIX + lid;
        let c = hist[at];
        hist[at] = count;
        count += c;
    }
    count
}

/// After [`tile_digit_count`] (`count`: the tile's keys of the calling thread's digit
/// `lid`): where the tile's first key of the digit goes in digit order (an exclusive
/// scan over digits, returned), added to each subgroup's row of `hist`, which then holds
/// where that subgroup's next key of each digit goes. `sums` holds a word per subgroup.
/// Called by every thread of a `GROUP`; a barrier must follow before `hist` is read by
/// other threads ([`warp_rank`]).
#[kernel_fn]
pub(super) fn tile_digit_starts(hist: &mut [u32], sums: &mut [u32], count: u32) -> u32 {
    let lid = local_id().x;
    let first = warp_inclusive_sum(sums, count) - count;
    for w in 0..WARPS {
        hist[w * RADIX + lid] += first;
    }
    first
}

/// The last step of a ranked tile (Onesweep's and the ranked tiles'): the staged tile
/// (`tile_len` keys in digit order in `stage`, their values in `value_stage`) leaves in
/// each digit's run of consecutive addresses, key `i` of digit `d` to `out_base[d] + i`,
/// its value beside it. `write_keys` and `write_values` (0 or 1, constants at each call)
/// say which leave: both at once where values are staged with their keys
/// (`tiles::values_with_keys`), else the keys, then in a second call the values, each
/// value's destination found again from the key beside it. `rounds` is the caller's keys
/// a thread (a constant at each call, so the rounds past it, up to `MAX_ITEMS`, fold
/// away). Called by every thread of a `GROUP` after the staging's barrier.
#[kernel_fn]
pub(super) fn write_tile<K: Num, B: Int, V: Num>(
    stage: &[K],
    value_stage: &[V],
    out_base: &[u32],
    keys_out: &mut [K],
    values_out: &mut [V],
    tile_len: u32,
    rounds: u32,
    write_keys: u32,
    write_values: u32,
    kind: u32,
    inf: B,
    flip: B,
    shift: u32,
    mask: u32,
) {
    let lid = local_id().x;
    for r in 0..MAX_ITEMS {
        let i = r * GROUP + lid;
        if r < rounds && i < tile_len {
            let k = stage[i];
            let at = out_base[radix_digit(k, kind, inf, flip, shift, mask)] + i;
            if write_keys == 1u32 {
                keys_out[at] = k;
            }
            if write_values == 1u32 {
                values_out[at] = value_stage[i];
            }
        }
    }
}

/// `counts[p * RADIX + d]` += the keys whose pass-`p` digit is `d`, for every pass of
/// bits `start_bit..end_bit` (8 a pass, the last narrower). `counts` starts at zero.
#[kernel]
fn onesweep_counts<K: Num, B: Int, const KIND: u32>(
    keys: &[K],
    counts: &mut [u32],
    n: u32,
    start_bit: u32,
    end_bit: u32,
    passes: u32,
    inf: B,
    flip: B,
) {
    let hist = shared::<u32, { RADIX * MAX_PASSES }>();
    let lid = local_id().x;
    for p in 0..MAX_PASSES {
        hist[p * RADIX + lid] = 0;
    }
    barrier();
    let stride = num_groups().x * GROUP;
    let mut i = global_id().x;
    while i < n {
        let key = keys[i];
        let mut shift = start_bit;
        for p in 0..passes {
            let mask = (1u32 << (end_bit - shift).min(BITS)) - 1u32;
            let d = radix_digit(key, KIND, inf, flip, shift, mask);
            atomic_add(&hist[p * RADIX + d], 1u32);
            shift += BITS;
        }
        i += stride;
    }
    barrier();
    for p in 0..passes {
        let c = hist[p * RADIX + lid];
        if c != 0u32 {
            atomic_add(&counts[p * RADIX + lid], c);
        }
    }
}

/// `bases[p * RADIX + d]`: the keys whose pass-`p` digit is below `d` (an exclusive scan
/// of each pass's counts), by one group.
#[kernel]
fn onesweep_bases(counts: &[u32], bases: &mut [u32], passes: u32) {
    let s = shared::<u32, GROUP>();
    let lid = local_id().x;
    for p in 0..passes {
        let c = counts[p * RADIX + lid];
        let inclusive = group_inclusive_sum(s, c);
        bases[p * RADIX + lid] = inclusive - c;
    }
}

/// One pass: the keys (and values, when `PAIRS` is 1) of `keys` placed by their digit at
/// `shift` (`mask` wide) into `keys_out`. `status` (a word per tile and digit) and
/// `counter[pass]` start at zero.
#[kernel]
fn onesweep_pass<K: Num, B: Int, V: Num, const PAIRS: u32, const KIND: u32, const ITEMS: u32>(
    keys: &[K],
    values: &[V],
    keys_out: &mut [K],
    values_out: &mut [V],
    bases: &[u32],
    status: &mut [u32],
    counter: &mut [u32],
    n: u32,
    pass: u32,
    shift: u32,
    mask: u32,
    inf: B,
    flip: B,
) {
    let stage = shared::<K, { GROUP * ITEMS }>();
    // One unused word when sorting keys alone (`PAIRS` 0): the launch's check counts
    // every declared array, and the keys' wider tile leaves no room for a second.
    let value_stage = shared::<V, { GROUP * ITEMS * PAIRS + 1 - PAIRS }>();
    // Per subgroup and digit: its count of the digit, then where its next key of the
    // digit goes in the tile.
    let hist = shared::<u32, { RADIX * WARPS }>();
    let sums = shared::<u32, GROUP>();
    let out_base = shared::<u32, RADIX>();
    let tile_number = shared::<u32, 1>();
    let lid = local_id().x;
    let lane = subgroup_lane();
    let warp = lid / WIDTH;
    for w in 0..WARPS {
        hist[w * RADIX + lid] = 0;
    }
    // Its barrier also orders the zeroed counters before the counting.
    let tile = take_tile(tile_number, counter, pass);
    let base = tile * (GROUP * ITEMS) + warp * (WIDTH * ITEMS);
    let mut held = [K::zero(); ITEMS as usize];
    let mut vals = [V::zero(); ITEMS as usize];
    for j in 0..ITEMS {
        let i = base + j * WIDTH + lane;
        if i < n {
            held[j] = keys[i];
            if PAIRS == 1 {
                vals[j] = values[i];
            }
        }
    }
    // 1. The tile's digit counts first, one shared atomic a key (CUB's "early counts"),
    // so that later tiles' look-backs find this tile's count while it ranks its keys.
    // Counting after the ranking left a tile 35 % of its time in the look-back (clock
    // reads in the pass, H200, 2026-11-30).
    for j in 0..ITEMS {
        if base + j * WIDTH + lane < n {
            let d = radix_digit(held[j], KIND, inf, flip, shift, mask);
            atomic_add(&hist[warp * RADIX + d], 1u32);
        }
    }
    barrier();
    // 2. Thread `lid` owns digit `lid`: the tile's count, published at once, and each
    // subgroup's start among the digit's keys.
    let count = tile_digit_count(hist);
    let word = tile * RADIX + lid;
    let mut flag = AGGREGATE;
    if tile == 0u32 {
        flag = PREFIX;
    }
    atomic_exchange(&status[word], (flag << 30u32) | count);
    // 3. Where each subgroup's first key of each digit goes in the tile (digit order).
    let first = tile_digit_starts(hist, sums, count);
    barrier();
    // 4. Each key's place in the tile, in input order within its digit (warp
    // multisplit), where it and its value are staged at once. Digits are computed again
    // where needed rather than kept: registers bound the groups an SM holds.
    for j in 0..ITEMS {
        let valid = base + j * WIDTH + lane < n;
        let d = radix_digit(held[j], KIND, inf, flip, shift, mask);
        let at = warp_rank(hist, warp * RADIX, d, valid);
        if valid {
            stage[at] = held[j];
            if PAIRS == 1 {
                value_stage[at] = vals[j];
            }
        }
    }
    // 5. The look-back: earlier tiles' keys of this digit, back to an inclusive prefix.
    // `WINDOW` earlier words are read at once (their latencies overlap) and taken in
    // order up to the first not yet written, which the next round reads again. Reads are
    // `atomic_load`s: as read-modify-writes they would queue every poller of a word (see
    // `scan::warp_look_back`).
    let mut before = 0u32;
    let mut look = tile;
    while look > 0u32 {
        let mut seen = [0u32; WINDOW as usize];
        for k in 0..WINDOW {
            if look > k {
                seen[k] = atomic_load(&status[(look - 1u32 - k) * RADIX + lid]);
            }
        }
        let mut taking = 1u32;
        for k in 0..WINDOW {
            let f = seen[k] >> 30u32;
            if taking == 1u32 && look > 0u32 {
                if f == 0u32 {
                    taking = 0;
                } else {
                    before += seen[k] & VALUE;
                    look -= 1u32;
                    if f == PREFIX {
                        look = 0;
                    }
                }
            }
        }
    }
    if tile > 0u32 {
        atomic_exchange(&status[word], (PREFIX << 30u32) | (before + count));
    }
    out_base[lid] = bases[pass * RADIX + lid] + before - first;
    barrier();
    // 6. Each digit's run of the tile to consecutive addresses.
    let tile_start = tile * (GROUP * ITEMS);
    let mut tile_len = GROUP * ITEMS;
    if n - tile_start < GROUP * ITEMS {
        tile_len = n - tile_start;
    }
    write_tile(
        stage,
        value_stage,
        out_base,
        keys_out,
        values_out,
        tile_len,
        ITEMS,
        1,
        0,
        KIND,
        inf,
        flip,
        shift,
        mask,
    );
    if PAIRS == 1 {
        // The values leave after the keys, from the stage they took with their keys.
        // Writing each value beside its key in one loop was slower on CUDA: 11.42
        // against 10.55 ms for 2^28 pairs on an H200 (2026-11-29). Staging the values
        // after the keys had left (a barrier more) measured 2.41 against 2.39 ms a pass
        // (2026-11-30).
        write_tile(
            stage,
            value_stage,
            out_base,
            keys_out,
            values_out,
            tile_len,
            ITEMS,
            0,
            1,
            KIND,
            inf,
            flip,
            shift,
            mask,
        );
    }
}

/// The counts of every pass's digits and their bases, allocated and computed once per
/// sort, and the look-back's state, reset for each pass.
pub(super) struct Scratch {
    bases: Buffer<u32>,
    status: Buffer<u32>,
    counter: Buffer<u32>,
    tiles: u32,
    start_bit: u32,
}

impl Scratch {
    /// Counts the digits of every pass over `bits` of `keys` (`n` of them), for a sort
    /// of keys alone or of `pairs`.
    pub(super) fn new<K: RadixKey>(
        queue: &impl AsStream,
        keys: &Buffer<K>,
        n: u32,
        bits: std::ops::Range<u32>,
        flip: u64,
        pairs: bool,
    ) -> Result<Scratch> {
        let passes = (bits.end - bits.start).div_ceil(BITS);
        let len = (RADIX * passes) as usize;
        let mut counts = queue.scratch::<u32>(len)?;
        queue.fill_buffer(&mut counts, 0)?;
        let groups = n.div_ceil(GROUP).min(COUNT_GROUPS);
        let (inf, flip) = (K::bits_from(K::INF_BITS), K::bits_from(flip));
        with_key_kind!(K::KIND, KIND => onesweep_counts::launch::<K, K::Bits, KIND>(
            queue,
            Launch::threads((groups * GROUP) as usize).group(GROUP),
            keys,
            &mut counts,
            n,
            bits.start,
            bits.end,
            passes,
            inf,
            flip,
        ))?;
        let mut bases = queue.scratch::<u32>(len)?;
        onesweep_bases::launch(
            queue,
            Launch::threads(GROUP as usize).group(GROUP),
            &counts,
            &mut bases,
            passes,
        )?;
        let tiles = n.div_ceil(GROUP * items(pairs));
        let mut counter = queue.scratch::<u32>(passes as usize)?;
        queue.fill_buffer(&mut counter, 0)?;
        Ok(Scratch {
            bases,
            status: queue.scratch::<u32>((tiles * RADIX) as usize)?,
            counter,
            tiles,
            start_bit: bits.start,
        })
    }
}

/// One pass: the keys (and values) of `src` placed by their digit at `shift` (`mask`
/// wide) into `dst`.
#[allow(clippy::too_many_arguments)]
pub(super) fn pass<K: RadixKey, V: Num, const PAIRS: u32>(
    queue: &impl AsStream,
    scratch: &mut Scratch,
    (src_k, src_v): (&Buffer<K>, &Buffer<V>),
    (dst_k, dst_v): (&mut Buffer<K>, &mut Buffer<V>),
    n: u32,
    (shift, mask): (u32, u32),
    flip: u64,
) -> Result<()> {
    let (inf, flip) = (K::bits_from(K::INF_BITS), K::bits_from(flip));
    queue.fill_buffer(&mut scratch.status, 0)?;
    let groups = Launch::threads((scratch.tiles * GROUP) as usize).group(GROUP);
    let pass = (shift - scratch.start_bit) / BITS;
    macro_rules! launch {
        ($items:expr) => {
            with_key_kind!(K::KIND, KIND => onesweep_pass::launch::<
                K,
                K::Bits,
                V,
                PAIRS,
                KIND,
                { $items },
            >(
                queue,
                groups,
                src_k,
                src_v,
                dst_k,
                dst_v,
                &scratch.bases,
                &mut scratch.status,
                &mut scratch.counter,
                n,
                pass,
                shift,
                mask,
                inf,
                flip,
            ))
        };
    }
    // The tile width `Scratch::new` counted tiles of (`items`), as the kernel's constant.
    match items(PAIRS == 1) {
        KEY_ITEMS => launch!(KEY_ITEMS),
        _ => launch!(PAIR_ITEMS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernels build and validate for every key and value type the sort gives them
    /// (they run only on CUDA, so this is what a machine without it can check).
    #[test]
    fn the_kernels_build_for_every_key_type() {
        onesweep_bases::ir().unwrap();
        onesweep_counts::ir::<u32, u32, 0>().unwrap();
        onesweep_counts::ir::<f32, u32, 2>().unwrap();
        onesweep_pass::ir::<u32, u32, u32, 0, 0, KEY_ITEMS>().unwrap();
        onesweep_pass::ir::<f32, u32, i32, 1, 2, PAIR_ITEMS>().unwrap();
        onesweep_pass::ir::<i32, u32, f32, 1, 1, PAIR_ITEMS>().unwrap();
    }

    /// Not a check: writes the CUDA C++ of the pass (keys, pairs) and of the counting
    /// kernel for `u32` keys into the folder `DOTCOMPUTE_ONESWEEP_DUMP` names, for
    /// `scripts/onesweep-harness`, which times them on a GPU machine without Rust.
    #[test]
    #[ignore = "writes files for scripts/onesweep-harness"]
    fn write_the_passes_cuda_for_the_harness() {
        use dotcompute::{KernelSource, Target};
        let dir = std::path::PathBuf::from(std::env::var("DOTCOMPUTE_ONESWEEP_DUMP").unwrap());
        let sources = [
            (
                "pass_keys.cu",
                onesweep_pass::kernel::<u32, u32, u32, 0, 0, KEY_ITEMS>(),
            ),
            (
                "pass_pairs.cu",
                onesweep_pass::kernel::<u32, u32, u32, 1, 0, PAIR_ITEMS>(),
            ),
            ("counts.cu", onesweep_counts::kernel::<u32, u32, 0>()),
        ];
        for (name, kernel) in sources {
            std::fs::write(dir.join(name), kernel.source(Target::Cuda).unwrap()).unwrap();
        }
    }
}
