//! The sort's 8-bit pass in ranked tiles, for devices with 32-lane subgroups whether or
//! not their groups make forward progress (NVIDIA Vulkan, Apple's SIMD-groups; CUDA too).
//!
//! Reduce-then-scan like `multisplit.rs` (no group waits on another, so it is valid on
//! Vulkan and Metal), but with a ranked tile like Onesweep's (`onesweep.rs`: warp
//! multisplit, staging in digit order, `write_tile`) in place of the multisplit's key-by-key scatter: the multisplit writes each key to
//! its own position, so a subgroup's 32 keys land in up to 32 places, where a ranked
//! tile is staged in shared memory in digit order and each digit's run of it leaves in
//! consecutive addresses. Group `g` owns span `g`, `tiles_per_span` consecutive tiles:
//! (1) `tile_counts` counts the digits of each span; (2) an exclusive scan of the
//! digit-major counts (`RADIX × spans`) gives each (digit, span) its first output
//! position; (3) `tile_scatter` walks its span's tiles in input order: it counts each
//! tile's digits, places each key in the tile's digit order (per subgroup by warp
//! multisplit, from the counts' scan), stages it there, writes the tile, and moves each
//! digit's next position on by the tile's count of the digit. Ranks
//! follow input order within a tile, tiles are taken in order within a span and spans
//! are placed in order by the scan, so the pass is stable.
//!
//! **When.** 32-bit keys, alone or with 4-byte values (the two staged tiles, 24 KiB,
//! and the counters take 33 KiB of shared memory: NVIDIA's Vulkan driver and CUDA
//! give 48), subgroups of exactly 32 lanes (ballots of 32 bits, and 8 subgroups of a
//! 256-thread group each keep a counter per digit), and hardware GPUs: lavapipe's
//! subgroups are 8 lanes wide, so CI cannot run it; the GPU machine's tests pin it on
//! CUDA and NVIDIA Vulkan.

use super::multisplit::{span_end, Scratch};
use super::onesweep::{tile_digit_count, tile_digit_starts, warp_rank, write_tile};
use super::{radix_digit, KeyKind, RadixKey};
use crate::scan::exclusive_sum;
use crate::GROUP;
use dotcompute::prelude::*;
use dotcompute::{AsStream, Buffer, Result};

/// Bits per pass.
pub(super) const BITS: u32 = 8;
/// Digits per pass: one per thread of a group (`GROUP`).
const RADIX: u32 = 1 << BITS;
/// Lanes per subgroup the pass is written for.
const WIDTH: u32 = 32;
/// Subgroups per group.
const WARPS: u32 = GROUP / WIDTH;
/// Keys per thread. Onesweep's wider tiles (18) are not taken here: NVIDIA Vulkan runs
/// this pass, and its pairs already hold the most registers of any pass.
const ITEMS: u32 = 12;
/// Keys per subgroup's part of a tile, and per tile.
const WARP_KEYS: u32 = WIDTH * ITEMS;
const TILE: u32 = GROUP * ITEMS;
/// Spans (groups) per pass at most: the counts to scan are `RADIX × spans` (1 Mi for
/// 4,096, a 64th of the keys at 2^28), and 4,096 groups are about 10 waves of an H200
/// (132 multiprocessors, 3 groups each at this kernel's registers).
const MAX_SPANS: u32 = 4096;
/// Inputs from this length take another algorithm: positions and a span's indices stay
/// below 2^32.
pub(super) const MAX_LEN: u32 = 1 << 31;

/// Whether `queue`'s device can run the pass for keys of `K` (with values of `V` when
/// `pairs`): see the module's note.
pub(super) fn available<K, V>(queue: &impl AsStream, n: u32, pairs: bool) -> bool {
    let info = queue.device().info();
    info.caps.subgroup_size == Some([WIDTH, WIDTH])
        && !crate::software_gpu(queue)
        && n < MAX_LEN
        && std::mem::size_of::<K>() == 4
        && (!pairs || std::mem::size_of::<V>() == 4)
        && info.limits.max_group_threads >= GROUP
        && info.limits.max_static_shared_bytes >= SHARED_BYTES
}

/// The scatter's shared memory, the value stage counted even for keys alone (whether a
/// compiler drops it is its own affair).
const SHARED_BYTES: u64 = (2 * TILE + RADIX * WARPS + WARPS + RADIX) as u64 * 4;

/// `counts[d * spans + s]`: the keys of span `s` (group `s`) with digit `d`.
#[kernel]
fn tile_counts<K: Num, B: Int, const KIND: u32>(
    keys: &[K],
    counts: &mut [u32],
    n: u32,
    shift: u32,
    mask: u32,
    inf: B,
    flip: B,
    spans: u32,
    span_len: u32,
) {
    // One counter table per subgroup: atomics contend only within it.
    let hist = shared::<u32, { RADIX * WARPS }>();
    let lid = local_id().x;
    let warp = lid / WIDTH;
    for w in 0..WARPS {
        hist[w * RADIX + lid] = 0;
    }
    barrier();
    let start = group_id().x * span_len;
    let end = span_end(start, span_len, n);
    let mut chunk = start;
    while chunk < end {
        // `ITEMS` loads in flight per thread before any is counted.
        let mut held = [K::zero(); ITEMS as usize];
        for j in 0..ITEMS {
            let i = chunk + j * GROUP + lid;
            if i < end {
                held[j] = keys[i];
            }
        }
        for j in 0..ITEMS {
            if chunk + j * GROUP + lid < end {
                let d = radix_digit(held[j], KIND, inf, flip, shift, mask);
                atomic_add(&hist[warp * RADIX + d], 1u32);
            }
        }
        chunk += TILE;
    }
    barrier();
    let mut total = 0u32;
    for w in 0..WARPS {
        total += hist[w * RADIX + lid];
    }
    counts[lid * spans + group_id().x] = total;
}

/// Moves each key (and value, when `PAIRS` is 1) of the group's span to its position,
/// a tile at a time.
#[kernel]
fn tile_scatter<
    K: Num,
    B: Int,
    V: Num,
    const PAIRS: u32,
    const KIND: u32,
    const VALUES_WITH_KEYS: u32,
>(
    keys: &[K],
    values: &[V],
    keys_out: &mut [K],
    values_out: &mut [V],
    offsets: &[u32],
    n: u32,
    shift: u32,
    mask: u32,
    inf: B,
    flip: B,
    spans: u32,
    span_len: u32,
) {
    let stage = shared::<K, TILE>();
    // Unused, and so dropped by the compiler, when sorting keys alone.
    let value_stage = shared::<V, TILE>();
    // Per subgroup and digit: its keys of the tile, then where its next key of the digit
    // goes in the tile.
    let hist = shared::<u32, { RADIX * WARPS }>();
    let sums = shared::<u32, WARPS>();
    let out_base = shared::<u32, RADIX>();
    let lid = local_id().x;
    let lane = subgroup_lane();
    let warp = lid / WIDTH;
    let span = group_id().x;
    // Thread `lid` owns digit `lid`: the next output position of the span's keys of it.
    let mut next = offsets[lid * spans + span];
    let start = span * span_len;
    let end = span_end(start, span_len, n);
    let mut tile_start = start;
    while tile_start < end {
        for w in 0..WARPS {
            hist[w * RADIX + lid] = 0;
        }
        barrier();
        let base = tile_start + warp * WARP_KEYS;
        let mut held = [K::zero(); ITEMS as usize];
        let mut vals = [V::zero(); ITEMS as usize];
        for j in 0..ITEMS {
            let i = base + j * WIDTH + lane;
            if i < end {
                held[j] = keys[i];
                if PAIRS == 1 {
                    vals[j] = values[i];
                }
            }
        }
        // 1. The tile's digit counts per subgroup, one shared atomic a key, first (as in
        // `onesweep_pass`): each key is then ranked straight into its place in the tile,
        // and no rank is held through the scan.
        for j in 0..ITEMS {
            if base + j * WIDTH + lane < end {
                let d = radix_digit(held[j], KIND, inf, flip, shift, mask);
                atomic_add(&hist[warp * RADIX + d], 1u32);
            }
        }
        barrier();
        // 2. The tile's count of digit `lid`, and where each subgroup's first key of the
        // digit goes in the tile (digit order).
        let count = tile_digit_count(hist);
        let first = tile_digit_starts(hist, sums, count);
        // Wraps below zero when `next < first`; `out_base[d] + i` is right for every
        // staged `i` of digit `d` (`i >= first`).
        out_base[lid] = next - first;
        next += count;
        barrier();
        // 3. Each key's place in the tile, in input order within its digit (warp
        // multisplit), where it (and its value) is staged at once.
        let mut rank = [0u32; ITEMS as usize];
        for j in 0..ITEMS {
            let valid = base + j * WIDTH + lane < end;
            let d = radix_digit(held[j], KIND, inf, flip, shift, mask);
            rank[j] = warp_rank(hist, warp * RADIX, d, valid);
            if valid {
                stage[rank[j]] = held[j];
                if PAIRS == 1 && VALUES_WITH_KEYS == 1 {
                    value_stage[rank[j]] = vals[j];
                }
            }
        }
        barrier();
        // 4. Each digit's run of the tile to consecutive addresses.
        let mut tile_len = TILE;
        if end - tile_start < TILE {
            tile_len = end - tile_start;
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
            PAIRS * VALUES_WITH_KEYS,
            KIND,
            inf,
            flip,
            shift,
            mask,
        );
        // Values staged after their keys have left, as on CUDA (see `values_with_keys`).
        if PAIRS == 1 && VALUES_WITH_KEYS == 0 {
            for j in 0..ITEMS {
                if base + j * WIDTH + lane < end {
                    value_stage[rank[j]] = vals[j];
                }
            }
            barrier();
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
        // The next tile overwrites the tables and the stage.
        barrier();
        tile_start += TILE;
    }
}

/// How one input is cut: spans of whole tiles, one per group, at most `MAX_SPANS`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Plan {
    spans: u32,
    span_len: u32,
}

impl Plan {
    pub(super) fn new(n: u32) -> Plan {
        let tiles = n.div_ceil(TILE).max(1);
        let span_len = tiles.div_ceil(MAX_SPANS) * TILE;
        Plan {
            spans: n.div_ceil(span_len).max(1),
            span_len,
        }
    }

    pub(super) fn spans(&self) -> u32 {
        self.spans
    }

    fn groups(&self) -> Launch {
        Launch::threads((self.spans * GROUP) as usize).group(GROUP)
    }
}

/// Whether a pair's value is staged with its key and leaves beside it (`write_tile`
/// writing both), rather than staged after the keys have left: one barrier fewer, but
/// the values' registers live on through the keys' writes. Measured on an H200 for 2^28
/// pairs (2026-11-29, `docs/benchmarks.md`): on NVIDIA Vulkan with the values 27.8
/// against 29.4 ms, on CUDA after them 17.9 against 18.6 ms. Metal takes Vulkan's form
/// unmeasured (no Apple GPU here). Parking the values in shared memory in input order
/// while the keys are ranked, to free their registers (the pairs' scatter takes 88 a
/// thread, 2 groups an SM on CUDA), raised it to 96 and lost on both (session 25:
/// CUDA 20.0 against 17.8 ms, NVIDIA Vulkan 28.6 against 28.1).
fn values_with_keys(queue: &impl AsStream) -> bool {
    queue.device().backend_kind() != dotcompute::BackendKind::Cuda
}

/// One pass: the keys (and values) of `src` placed by their digit at `shift` (`mask`
/// wide) into `dst`.
#[allow(clippy::too_many_arguments)]
pub(super) fn pass<K: RadixKey, V: Num, const PAIRS: u32>(
    queue: &impl AsStream,
    plan: &Plan,
    scratch: &mut Scratch,
    (src_k, src_v): (&Buffer<K>, &Buffer<V>),
    (dst_k, dst_v): (&mut Buffer<K>, &mut Buffer<V>),
    n: u32,
    (shift, mask): (u32, u32),
    flip: u64,
) -> Result<()> {
    let (inf, flip) = (K::bits_from(K::INF_BITS), K::bits_from(flip));
    with_key_kind!(K::KIND, KIND => tile_counts::launch::<K, K::Bits, KIND>(
        queue,
        plan.groups(),
        src_k,
        &mut scratch.counts,
        n,
        shift,
        mask,
        inf,
        flip,
        plan.spans,
        plan.span_len,
    ))?;
    exclusive_sum(queue, &scratch.counts, &mut scratch.offsets)?;
    let digit = (shift, mask, inf, flip);
    let offsets = &scratch.offsets;
    if values_with_keys(queue) {
        scatter::<K, V, PAIRS, 1>(
            queue,
            plan,
            offsets,
            (src_k, src_v),
            (dst_k, dst_v),
            n,
            digit,
        )
    } else {
        scatter::<K, V, PAIRS, 0>(
            queue,
            plan,
            offsets,
            (src_k, src_v),
            (dst_k, dst_v),
            n,
            digit,
        )
    }
}

/// `tile_scatter` over the plan's spans, a pair's value staged with its key
/// (`VALUES_WITH_KEYS` 1) or after the keys have left (0).
fn scatter<K: RadixKey, V: Num, const PAIRS: u32, const VALUES_WITH_KEYS: u32>(
    queue: &impl AsStream,
    plan: &Plan,
    offsets: &Buffer<u32>,
    (src_k, src_v): (&Buffer<K>, &Buffer<V>),
    (dst_k, dst_v): (&mut Buffer<K>, &mut Buffer<V>),
    n: u32,
    (shift, mask, inf, flip): (u32, u32, K::Bits, K::Bits),
) -> Result<()> {
    with_key_kind!(K::KIND, KIND => tile_scatter::launch::<
        K,
        K::Bits,
        V,
        PAIRS,
        KIND,
        VALUES_WITH_KEYS,
    >(
        queue,
        plan.groups(),
        src_k,
        src_v,
        dst_k,
        dst_v,
        offsets,
        n,
        shift,
        mask,
        inf,
        flip,
        plan.spans,
        plan.span_len,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernels build and validate for every key and value type the sort gives them
    /// (CI's lavapipe cannot run them: its subgroups are 8 lanes wide).
    #[test]
    fn the_kernels_build_for_every_key_type() {
        tile_counts::ir::<u32, u32, 0>().unwrap();
        tile_counts::ir::<f32, u32, 2>().unwrap();
        tile_scatter::ir::<u32, u32, u32, 0, 0, 0>().unwrap();
        tile_scatter::ir::<f32, u32, i32, 1, 2, 1>().unwrap();
        tile_scatter::ir::<i32, u32, f32, 1, 1, 0>().unwrap();
    }

    /// Spans are whole tiles, at most `MAX_SPANS`, and cover the input.
    #[test]
    fn plans_cover_the_input() {
        for n in [1u32, TILE - 1, TILE, TILE + 1, 1 << 24, (1 << 28) + 7] {
            let p = Plan::new(n);
            assert!(p.spans <= MAX_SPANS, "{n}: {p:?}");
            assert_eq!(p.span_len % TILE, 0, "{n}: {p:?}");
            assert!(p.spans * p.span_len >= n, "{n}: {p:?}");
            assert!((p.spans - 1) * p.span_len < n, "{n}: {p:?}");
        }
    }
}
