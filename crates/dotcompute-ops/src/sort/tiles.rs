//! The sort's 8-bit pass in ranked tiles, for devices with 32-lane subgroups and 33 KiB
//! of shared memory a group whether or not their groups make forward progress (NVIDIA
//! Vulkan; CUDA too; not Apple GPUs, whose threadgroups have 32 KiB).
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
//! **Packed pairs** (`sort_packed`, the default for pairs where it applies): between
//! passes each pair travels as one `Vec2<u32>` of its key's and value's bits, so a pass
//! moves one 8-byte word a pair instead of two 4-byte ones; the packed array is split in
//! two bindings where one cannot hold it (`packed_half`).
//!
//! **When.** 32-bit keys, alone or with 4-byte values (the two staged tiles, 24 KiB,
//! and the counters take 33 KiB of shared memory: NVIDIA's Vulkan driver and CUDA
//! give 48), subgroups of exactly 32 lanes (ballots of 32 bits, and 8 subgroups of a
//! 256-thread group each keep a counter per digit), and hardware GPUs: lavapipe's
//! subgroups are 8 lanes wide, so CI cannot run it; the GPU machine's tests pin it on
//! CUDA and NVIDIA Vulkan.

use super::multisplit::{self, span_end};
use super::onesweep::{tile_digit_count, tile_digit_starts, warp_rank, write_tile};
use super::{radix_digit, KeyKind, RadixKey};
use crate::scan::exclusive_sum;
use crate::GROUP;
use dotcompute::prelude::*;
use dotcompute::{Arg, AsStream, Buffer, Element, Result};
use std::ops::Range;

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
fn tile_counts<K: Num, B: Int, const KIND: u32, const PACKED_IN: u32>(
    keys: &[K],
    packed: &[Vec2<u32>],
    packed_hi: &[Vec2<u32>],
    counts: &mut [u32],
    n: u32,
    shift: u32,
    mask: u32,
    inf: B,
    flip: B,
    spans: u32,
    span_len: u32,
    half: u32,
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
                if PACKED_IN == 1 {
                    held[j] = K::cast(packed_pair(packed, packed_hi, half, i).x);
                } else {
                    held[j] = keys[i];
                }
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
    const PACKED_IN: u32,
    const PACKED_OUT: u32,
>(
    keys: &[K],
    values: &[V],
    packed: &[Vec2<u32>],
    packed_hi: &[Vec2<u32>],
    keys_out: &mut [K],
    values_out: &mut [V],
    packed_out: &mut [Vec2<u32>],
    packed_out_hi: &mut [Vec2<u32>],
    offsets: &[u32],
    n: u32,
    shift: u32,
    mask: u32,
    inf: B,
    flip: B,
    spans: u32,
    span_len: u32,
    half: u32,
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
                if PACKED_IN == 1 {
                    // One 8-byte load a pair (`K` and `V` are `u32` here: see
                    // `sort_packed`).
                    let pair = packed_pair(packed, packed_hi, half, i);
                    held[j] = K::cast(pair.x);
                    vals[j] = V::cast(pair.y);
                } else {
                    held[j] = keys[i];
                    if PAIRS == 1 {
                        vals[j] = values[i];
                    }
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
                if PAIRS == 1 && (VALUES_WITH_KEYS == 1 || PACKED_OUT == 1) {
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
        if PACKED_OUT == 1 {
            write_packed_tile(
                stage,
                value_stage,
                out_base,
                packed_out,
                packed_out_hi,
                half,
                tile_len,
                KIND,
                inf,
                flip,
                shift,
                mask,
            );
        } else {
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
        }
        // Values staged after their keys have left, as on CUDA (see `values_with_keys`).
        if PAIRS == 1 && VALUES_WITH_KEYS == 0 && PACKED_OUT == 0 {
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

/// Pair `i` of packed pairs held in two buffers: `lo` holds pairs `0..half`, `hi` the
/// rest. One binding may not hold them all: NVIDIA's Vulkan driver binds at most 2 GiB
/// less 4 bytes, and 2^28 pairs are 2 GiB.
#[kernel_fn]
fn packed_pair(lo: &[Vec2<u32>], hi: &[Vec2<u32>], half: u32, i: u32) -> Vec2<u32> {
    let mut pair = Vec2::splat(0u32);
    if i < half {
        pair = lo[i];
    } else {
        pair = hi[i - half];
    }
    pair
}

/// [`write_tile`] for packed pairs (pair `at` to `packed_out` below `half`, else to
/// `packed_out_hi`, as [`packed_pair`] reads them): each staged key and its staged value leave as one
/// `Vec2<u32>`, one 8-byte store a pair. Packed passes run with `K` and `V` both `u32`
/// (the keys' and values' bits: `sort_packed`), so the casts are the bits themselves;
/// `cast` rather than `bitcast` keeps the other instantiations (8-byte keys, never
/// packed) compiling on the host.
#[kernel_fn]
fn write_packed_tile<K: Num, B: Int, V: Num>(
    stage: &[K],
    value_stage: &[V],
    out_base: &[u32],
    packed_out: &mut [Vec2<u32>],
    packed_out_hi: &mut [Vec2<u32>],
    half: u32,
    tile_len: u32,
    kind: u32,
    inf: B,
    flip: B,
    shift: u32,
    mask: u32,
) {
    let lid = local_id().x;
    for r in 0..ITEMS {
        let i = r * GROUP + lid;
        if i < tile_len {
            let k = stage[i];
            let at = out_base[radix_digit(k, kind, inf, flip, shift, mask)] + i;
            let pair = Vec2::new(u32::cast(k), u32::cast(value_stage[i]));
            if at < half {
                packed_out[at] = pair;
            } else {
                packed_out_hi[at - half] = pair;
            }
        }
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

/// The scratch of a pass: the digit counts and their scan, and the one-element packed
/// buffers a pass of keys and values apart binds for the packed pairs it does not use.
pub(super) struct Scratch {
    sums: multisplit::Scratch,
    no_pairs_in: Buffer<Vec2<u32>>,
    no_pairs_out: Buffer<Vec2<u32>>,
    no_pairs_out_hi: Buffer<Vec2<u32>>,
}

impl Scratch {
    pub(super) fn new(queue: &impl AsStream, plan: &Plan) -> Result<Scratch> {
        Ok(Scratch {
            sums: multisplit::Scratch::new(queue, plan.spans)?,
            no_pairs_in: queue.scratch(1)?,
            no_pairs_out: queue.scratch(1)?,
            no_pairs_out_hi: queue.scratch(1)?,
        })
    }
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
    with_key_kind!(K::KIND, KIND => tile_counts::launch::<K, K::Bits, KIND, 0>(
        queue,
        plan.groups(),
        src_k,
        &scratch.no_pairs_in,
        &scratch.no_pairs_in,
        &mut scratch.sums.counts,
        n,
        shift,
        mask,
        inf,
        flip,
        plan.spans,
        plan.span_len,
        0,
    ))?;
    exclusive_sum(queue, &scratch.sums.counts, &mut scratch.sums.offsets)?;
    let digit = (shift, mask, inf, flip);
    if values_with_keys(queue) {
        scatter::<K, V, PAIRS, 1>(
            queue,
            plan,
            scratch,
            (src_k, src_v),
            (dst_k, dst_v),
            n,
            digit,
        )
    } else {
        scatter::<K, V, PAIRS, 0>(
            queue,
            plan,
            scratch,
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
    scratch: &mut Scratch,
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
        0,
        0,
    >(
        queue,
        plan.groups(),
        src_k,
        src_v,
        &scratch.no_pairs_in,
        &scratch.no_pairs_in,
        dst_k,
        dst_v,
        &mut scratch.no_pairs_out,
        &mut scratch.no_pairs_out_hi,
        &scratch.sums.offsets,
        n,
        shift,
        mask,
        inf,
        flip,
        plan.spans,
        plan.span_len,
        0,
    ))
}

/// Packed pairs in two buffers, as [`packed_pair`] reads them: pairs `0..half` in `lo`,
/// the rest in `hi` (one unused element where `lo` holds them all).
struct Packed {
    lo: Buffer<Vec2<u32>>,
    hi: Buffer<Vec2<u32>>,
}

/// Where a packed pass reads: the caller's keys and values apart (read as `u32` bits:
/// [`Arg::bits`]) or packed pairs.
enum Source<'a, K: Element, V: Element> {
    Apart(&'a Buffer<K>, &'a Buffer<V>),
    Packed(&'a Packed),
}

/// Where a packed pass writes, as [`Source`].
enum Destination<'a, K: Element, V: Element> {
    Apart(&'a mut Buffer<K>, &'a mut Buffer<V>),
    Packed(&'a mut Packed),
}

/// One-element word buffers bound where a packed pass reads or writes no keys and values
/// apart (the packed stand-ins for the other direction are [`Scratch`]'s).
struct NoWords {
    words_in: Buffer<u32>,
    keys_out: Buffer<u32>,
    values_out: Buffer<u32>,
}

/// How many of `n` packed pairs the first of their two buffers holds (all where one
/// binding can), or `None` where two bindings cannot hold them.
pub(super) fn packed_half(queue: &impl AsStream, n: u32) -> Option<u32> {
    let per_binding = queue.device().info().limits.max_binding_bytes / 8;
    let half = u64::from(n).min(per_binding);
    (u64::from(n) - half <= per_binding).then_some(half as u32)
}

/// Pairs sorted through packed pairs (`Algorithm::Tiles8Packed`), for 4-byte keys and
/// values (`available`) over at least two passes (`bits` wider than [`BITS`]): the first
/// pass reads the caller's keys and values and writes each pair as one `Vec2<u32>` (the
/// key's bits, the value's), the passes between move packed pairs between two spare
/// buffers, and the last writes the caller's keys and values again. A pair then takes one
/// 8-byte load and one 8-byte store a pass where apart it takes two of 4 bytes, and each
/// digit's run of a tile leaves as one run of 8-byte pairs instead of two of 4 bytes;
/// the count reads 8 bytes a pair instead of 4. Where one binding cannot hold the pairs
/// (2^28 pairs on NVIDIA Vulkan), each spare is two buffers ([`packed_pair`]).
///
/// The kernels run on bits: keys and values are bound as `u32` words, and `radix_digit`
/// orders a key's bits by its kind (`KIND`) whatever type it reads them as.
pub(super) fn sort_packed<K: RadixKey, V: Num>(
    queue: &impl AsStream,
    keys: &mut Buffer<K>,
    values: &mut Buffer<V>,
    bits: Range<u32>,
    flip: u64,
    n: u32,
) -> Result<()> {
    let digits: Vec<(u32, u32)> = super::digit_passes(bits.clone(), BITS).collect();
    let last = digits.len() - 1;
    let half = packed_half(queue, n);
    let (Some(half), true, true, false) = (
        half,
        Arg::bits(keys).is_some(),
        Arg::bits(values).is_some(),
        last == 0,
    ) else {
        return Err(dotcompute::Error::Unsupported {
            op: "sort through packed pairs",
            detail: format!(
                "it takes 4-byte keys and values over two passes or more, within two bindings \
                 of the device, not {n} pairs of {:?} and {:?} over {} bits",
                <K as Element>::TYPE,
                <V as Element>::TYPE,
                bits.len()
            ),
        });
    };
    let plan = Plan::new(n);
    let mut scratch = Scratch::new(queue, &plan)?;
    let mut no_words = NoWords {
        words_in: queue.scratch(1)?,
        keys_out: queue.scratch(1)?,
        values_out: queue.scratch(1)?,
    };
    let spare = |len: u32| -> Result<Packed> {
        Ok(Packed {
            lo: queue.scratch(len.min(half).max(1) as usize)?,
            hi: queue.scratch(len.saturating_sub(half).max(1) as usize)?,
        })
    };
    let mut a = spare(n)?;
    // Two passes go apart → packed → apart, through `a` alone.
    let mut b = spare(if last > 1 { n } else { 1 })?;
    // Bits of 4-byte keys: the narrowing keeps them.
    let (inf, flip) = (K::INF_BITS as u32, flip as u32);
    for (p, &(shift, mask)) in digits.iter().enumerate() {
        let digit = [n, shift, mask, inf, flip, plan.spans, plan.span_len, half];
        // Pass `p` writes `a` when even and `b` when odd, and reads what pass `p - 1`
        // wrote.
        let (read, write) = if p % 2 == 0 {
            (&b, &mut a)
        } else {
            (&a, &mut b)
        };
        let (src, dst) = if p == 0 {
            (Source::Apart(&*keys, &*values), Destination::Packed(write))
        } else if p == last {
            (
                Source::Packed(read),
                Destination::Apart(&mut *keys, &mut *values),
            )
        } else {
            (Source::Packed(read), Destination::Packed(write))
        };
        packed_pass::<K, V>(queue, &plan, &mut scratch, &mut no_words, src, dst, digit)?;
    }
    Ok(())
}

/// One pass of [`sort_packed`] from `src` to `dst`; `digit` holds the kernels' scalars
/// (`n, shift, mask, inf, flip, spans, span_len, half`).
fn packed_pass<K: RadixKey, V: Num>(
    queue: &impl AsStream,
    plan: &Plan,
    scratch: &mut Scratch,
    no_words: &mut NoWords,
    src: Source<'_, K, V>,
    dst: Destination<'_, K, V>,
    digit: [u32; 8],
) -> Result<()> {
    let source = || -> Result<[Arg<'_>; 4]> {
        Ok(match src {
            Source::Apart(k, v) => [
                words(Arg::bits(k))?,
                words(Arg::bits(v))?,
                Arg::buffer(&scratch.no_pairs_in),
                Arg::buffer(&scratch.no_pairs_in),
            ],
            Source::Packed(pairs) => [
                Arg::buffer(&no_words.words_in),
                Arg::buffer(&no_words.words_in),
                Arg::buffer(&pairs.lo),
                Arg::buffer(&pairs.hi),
            ],
        })
    };
    let packed_in = matches!(src, Source::Packed(_));
    let [keys_in, _, lo_in, hi_in] = source()?;
    let mut args = vec![
        keys_in,
        lo_in,
        hi_in,
        Arg::buffer_mut(&mut scratch.sums.counts),
    ];
    args.extend(digit.map(Arg::scalar));
    queue.launch_kernel(counts_kernel::<K>(packed_in), plan.groups(), &args)?;
    drop(args);
    exclusive_sum(queue, &scratch.sums.counts, &mut scratch.sums.offsets)?;
    let packed_out = matches!(dst, Destination::Packed(_));
    let mut args = Vec::from(source()?);
    match dst {
        Destination::Apart(k, v) => args.extend([
            words(Arg::bits_mut(k))?,
            words(Arg::bits_mut(v))?,
            Arg::buffer_mut(&mut scratch.no_pairs_out),
            Arg::buffer_mut(&mut scratch.no_pairs_out_hi),
        ]),
        Destination::Packed(pairs) => args.extend([
            Arg::buffer_mut(&mut no_words.keys_out),
            Arg::buffer_mut(&mut no_words.values_out),
            Arg::buffer_mut(&mut pairs.lo),
            Arg::buffer_mut(&mut pairs.hi),
        ]),
    }
    args.push(Arg::buffer(&scratch.sums.offsets));
    args.extend(digit.map(Arg::scalar));
    // Packed pairs leave together, so their values are staged with their keys.
    let with_keys = packed_out || values_with_keys(queue);
    let scatter = scatter_kernel::<K>(packed_in, packed_out, with_keys);
    queue.launch_kernel(scatter, plan.groups(), &args)
}

/// A 4-byte buffer's words ([`Arg::bits`]), or the error for another element type
/// (`sort_packed` checks before its first pass).
fn words(bits: Option<Arg<'_>>) -> Result<Arg<'_>> {
    bits.ok_or_else(|| dotcompute::Error::Unsupported {
        op: "sort through packed pairs",
        detail: "keys and values must be f32, i32 or u32".into(),
    })
}

/// `tile_counts` on keys' bits (`u32`), of `K`'s kind, read apart or packed.
fn counts_kernel<K: RadixKey>(packed_in: bool) -> &'static dotcompute::KernelDef {
    with_key_kind!(K::KIND, KIND => match packed_in {
        false => tile_counts::kernel::<u32, u32, KIND, 0>(),
        true => tile_counts::kernel::<u32, u32, KIND, 1>(),
    })
}

/// `tile_scatter` of pairs on bits (`u32` keys of `K`'s kind and `u32` values), read and
/// written apart or packed, values staged with their keys or after them.
fn scatter_kernel<K: RadixKey>(
    packed_in: bool,
    packed_out: bool,
    with_keys: bool,
) -> &'static dotcompute::KernelDef {
    with_key_kind!(K::KIND, KIND => match (packed_in, packed_out, with_keys) {
        (false, false, false) => tile_scatter::kernel::<u32, u32, u32, 1, KIND, 0, 0, 0>(),
        (false, false, true) => tile_scatter::kernel::<u32, u32, u32, 1, KIND, 1, 0, 0>(),
        (true, false, false) => tile_scatter::kernel::<u32, u32, u32, 1, KIND, 0, 1, 0>(),
        (true, false, true) => tile_scatter::kernel::<u32, u32, u32, 1, KIND, 1, 1, 0>(),
        (false, true, _) => tile_scatter::kernel::<u32, u32, u32, 1, KIND, 1, 0, 1>(),
        (true, true, _) => tile_scatter::kernel::<u32, u32, u32, 1, KIND, 1, 1, 1>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernels build and validate for every key and value type the sort gives them
    /// (CI's lavapipe cannot run them: its subgroups are 8 lanes wide).
    #[test]
    fn the_kernels_build_for_every_key_type() {
        tile_counts::ir::<u32, u32, 0, 0>().unwrap();
        tile_counts::ir::<f32, u32, 2, 0>().unwrap();
        tile_counts::ir::<i32, u32, 1, 1>().unwrap();
        tile_scatter::ir::<u32, u32, u32, 0, 0, 0, 0, 0>().unwrap();
        tile_scatter::ir::<f32, u32, i32, 1, 2, 1, 0, 0>().unwrap();
        tile_scatter::ir::<i32, u32, f32, 1, 1, 0, 0, 0>().unwrap();
        // Packed pairs: in, through and out.
        tile_scatter::ir::<f32, u32, i32, 1, 2, 1, 0, 1>().unwrap();
        tile_scatter::ir::<u32, u32, u32, 1, 0, 1, 1, 1>().unwrap();
        tile_scatter::ir::<i32, u32, f32, 1, 1, 0, 1, 0>().unwrap();
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
