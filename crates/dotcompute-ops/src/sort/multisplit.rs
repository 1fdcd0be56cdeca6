//! The sort's pass for devices whose subgroups have one fixed width of at most 32 lanes
//! (CUDA's warps, NVIDIA Vulkan, Apple's SIMD-groups; lavapipe's 8 lanes and the MSL
//! shim's 1 in CI): 8 bits a pass, so 4 passes for 32-bit keys where the 4-bit pass
//! (`super::radix_passes`) takes 8, with keys ranked by *warp multisplit* instead of a
//! shared table scanned with barriers.
//!
//! Still reduce-then-scan (no forward-progress assumption between groups, so it is valid
//! on Vulkan and Metal too), with one *span*, a contiguous run of the input, per
//! subgroup: (1) `split_count` counts the digits of each span; (2) an exclusive scan of
//! the digit-major counts (`RADIX × spans`) gives each (digit, span) its first output
//! position; (3) `split_scatter` walks each span in input order, `width` keys a step,
//! with each digit's next position in shared memory private to the subgroup. In a step,
//! 8 ballots (one per digit bit, `onesweep::digit_peers`) find the lanes holding the same digit; the lowest of them
//! takes positions for all with one shared atomic add, and each key's position is that
//! first position plus its peers in lower lanes. Positions are handed out in input order
//! within a span and spans are placed in input order by the scan, so the pass is stable,
//! as the sort requires. The scatter has one barrier (after loading the positions):
//! lavapipe's compiler spent minutes on a tile-by-tile version with four barriers a tile
//! (it builds a coroutine frame over everything live across a barrier).

use super::onesweep::digit_peers;
use super::{radix_digit, RadixKey};
use crate::fixed_or;
use crate::scan::exclusive_sum;
use dotcompute::prelude::*;
use dotcompute::{AsStream, Buffer, Result};

/// Bits per pass.
pub(super) const BITS: u32 = 8;
/// Digits per pass.
const RADIX: u32 = 1 << BITS;
/// Subgroups per group, each with a span of its own: a group is `WARPS × width` threads
/// (128 for 32-lane subgroups).
const WARPS: u32 = 4;
/// Keys each lane loads before ranking them (their loads overlap).
const ITEMS: u32 = 8;
/// The same on a GPU emulated on the CPU (lavapipe, the MSL shim), given at run time
/// with the digit's bit count, so that its compiler does not unroll 8 × 9 ballots.
const SOFTWARE_ITEMS: u32 = 2;
/// The per-subgroup digit counters (`warp * RADIX + digit`).
const TABLE: u32 = RADIX * WARPS;
/// Keys per span at least: the counts to scan stay at most 1/16 of the keys (their scan
/// then moves 1/8 of a key per key, where the pass moves 3).
const MIN_SPAN: u32 = RADIX * 16;
/// The same on software GPUs, where the scan of the counts is slow next to the pass.
const SOFTWARE_MIN_SPAN: u32 = 1 << 15;
/// Spans per pass at most: the counts to scan are `RADIX × spans` (2 Mi for 8,192), and
/// 8,192 subgroups about fill an H100 (132 SMs × 64 resident warps).
const MAX_SPANS: u32 = 8192;
/// Inputs above this take the 4-bit pass: a span's indices stay below 2^32.
pub(super) const MAX_LEN: u32 = 1 << 31;

/// The subgroup width the pass runs with on `queue`'s device, if it can: one fixed width
/// (a range could change between launches), a power of two of at most 32 lanes (ballots
/// are 32 bits), and a group of `WARPS × width` threads the device allows.
pub(super) fn width(queue: &impl AsStream) -> Option<u32> {
    let info = queue.device().info();
    match info.caps.subgroup_size {
        Some([lo, hi])
            if lo == hi
                && lo.is_power_of_two()
                && lo <= 32
                && lo * WARPS <= info.limits.max_group_threads =>
        {
            Some(lo)
        }
        _ => None,
    }
}

/// The end of the span that starts at `start`: `span_len` keys on, or the input's end
/// (`n`, below `start` for a span past it, which then holds no key). Both kernels take a
/// span's keys from here, so they agree on them.
#[kernel_fn]
pub(super) fn span_end(start: u32, span_len: u32, n: u32) -> u32 {
    let mut end = n;
    if span_len < n - start.min(n) {
        end = start + span_len;
    }
    end
}

/// `counts[d * spans + s]`: the keys of span `s` with digit `d`. Span `s` is subgroup
/// `s % WARPS` of group `s / WARPS`.
#[kernel]
fn split_count<K: Num, B: Int, const UNROLLED: u32>(
    keys: &[K],
    counts: &mut [u32],
    n: u32,
    shift: u32,
    mask: u32,
    kind: u32,
    inf: B,
    flip: B,
    spans: u32,
    span_len: u32,
    runtime_items: u32,
) {
    let items = fixed_or(UNROLLED * ITEMS, runtime_items);
    // One counter table per subgroup (its span's): atomics contend only within it.
    let hist = shared::<u32, TABLE>();
    let lid = local_id().x;
    let threads = group_size().x;
    let width = subgroup_size();
    let warp = lid / width;
    let mut e = lid;
    while e < TABLE {
        hist[e] = 0;
        e += threads;
    }
    barrier();
    let start = (group_id().x * WARPS + warp) * span_len;
    let end = span_end(start, span_len, n);
    let lane = subgroup_lane();
    let mut chunk = start;
    while chunk < end {
        // `items` loads in flight per lane before any is counted.
        let mut held = [K::zero(); ITEMS as usize];
        for j in 0..items {
            let i = chunk + j * width + lane;
            if i < end {
                held[j] = keys[i];
            }
        }
        for j in 0..items {
            if chunk + j * width + lane < end {
                let d = radix_digit(held[j], kind, inf, flip, shift, mask);
                atomic_add(&hist[warp * RADIX + d], 1u32);
            }
        }
        chunk += width * items;
    }
    barrier();
    e = lid;
    while e < TABLE {
        let s = group_id().x * WARPS + e / RADIX;
        if s < spans {
            counts[(e % RADIX) * spans + s] = hist[e];
        }
        e += threads;
    }
}

/// Moves each key (and value, when `PAIRS` is 1) of every span to its position.
#[kernel]
fn split_scatter<K: Num, B: Int, V: Num, const PAIRS: u32, const UNROLLED: u32>(
    keys: &[K],
    values: &[V],
    keys_out: &mut [K],
    values_out: &mut [V],
    offsets: &[u32],
    n: u32,
    shift: u32,
    mask: u32,
    kind: u32,
    inf: B,
    flip: B,
    spans: u32,
    span_len: u32,
    runtime_items: u32,
    runtime_bits: u32,
) {
    // Loop counts: constants on GPUs, uniforms on software GPUs (`fixed_or`).
    let items = fixed_or(UNROLLED * ITEMS, runtime_items);
    let bits = fixed_or(UNROLLED * BITS, runtime_bits);
    // Each subgroup's next output position per digit (`warp * RADIX + digit`).
    let next = shared::<u32, TABLE>();
    let lid = local_id().x;
    let threads = group_size().x;
    let width = subgroup_size();
    let lane = subgroup_lane();
    let warp = lid / width;
    let mut e = lid;
    while e < TABLE {
        let s = group_id().x * WARPS + e / RADIX;
        if s < spans {
            next[e] = offsets[(e % RADIX) * spans + s];
        }
        e += threads;
    }
    // The only barrier: from here on each subgroup touches its own counters only.
    barrier();
    let start = (group_id().x * WARPS + warp) * span_len;
    let end = span_end(start, span_len, n);
    let lower_lanes = (1u32 << lane) - 1u32;
    let step = width * items;
    let mut chunk = start;
    while chunk < end {
        // `items` keys per lane loaded before any is ranked, so that their loads overlap.
        let mut held = [K::zero(); ITEMS as usize];
        for j in 0..items {
            let i = chunk + j * width + lane;
            if i < end {
                held[j] = keys[i];
            }
        }
        for j in 0..items {
            let i = chunk + j * width + lane;
            let valid = i < end;
            let d = radix_digit(held[j], kind, inf, flip, shift, mask);
            // The valid lanes holding digit d.
            let peers = digit_peers(d, subgroup_ballot(valid), bits);
            let mut leader = lane;
            if valid {
                leader = peers.trailing_zeros();
            }
            // The lowest peer takes positions for them all. The counter's updates by
            // different lanes in successive steps are ordered: each step's atomic comes
            // after the previous step's shuffle, which read the previous atomic's result.
            let mut first = 0u32;
            if valid && lane == leader {
                first = atomic_add(&next[warp * RADIX + d], peers.count_ones());
            }
            first = subgroup_shuffle(first, leader);
            if valid {
                let pos = first + (peers & lower_lanes).count_ones();
                keys_out[pos] = held[j];
                if PAIRS == 1 {
                    values_out[pos] = values[i];
                }
            }
        }
        chunk += step;
    }
}

/// How one input is cut: a span of `span_len` keys per subgroup, `WARPS` subgroups a
/// group.
#[derive(Clone, Copy, Debug)]
pub(super) struct Plan {
    group: u32,
    spans: u32,
    span_len: u32,
    /// Keys per lane in flight, and whether the kernels have their loop counts as
    /// constants (GPUs) or take them at run time (software GPUs).
    items: u32,
    unrolled: bool,
}

impl Plan {
    pub(super) fn new(queue: &impl AsStream, n: u32, width: u32) -> Plan {
        let unrolled = !crate::software_gpu(queue);
        let items = if unrolled { ITEMS } else { SOFTWARE_ITEMS };
        // Spans of whole steps (`width × items` keys), at most MAX_SPANS of them and each
        // at least `min_span` keys long.
        let step = width * items;
        let min_span = if unrolled {
            MIN_SPAN
        } else {
            SOFTWARE_MIN_SPAN
        };
        let span_len = n.div_ceil(MAX_SPANS).max(min_span).div_ceil(step) * step;
        Plan {
            group: WARPS * width,
            spans: n.div_ceil(span_len).max(1),
            span_len,
            items,
            unrolled,
        }
    }

    pub(super) fn spans(&self) -> u32 {
        self.spans
    }

    fn groups(&self) -> Launch {
        let groups = self.spans.div_ceil(WARPS);
        Launch::threads((groups * self.group) as usize).group(self.group)
    }
}

/// The digit counts of each span and their scan (`RADIX × spans`), allocated once for
/// every pass of a sort (here and in `tiles.rs`).
pub(super) struct Scratch {
    pub(super) counts: Buffer<u32>,
    pub(super) offsets: Buffer<u32>,
}

impl Scratch {
    pub(super) fn new(queue: &impl AsStream, spans: u32) -> Result<Scratch> {
        let len = (RADIX * spans) as usize;
        Ok(Scratch {
            counts: queue.scratch(len)?,
            offsets: queue.scratch(len)?,
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
    src: (&Buffer<K>, &Buffer<V>),
    dst: (&mut Buffer<K>, &mut Buffer<V>),
    n: u32,
    (shift, mask): (u32, u32),
    flip: u64,
) -> Result<()> {
    let kind = K::KIND as u32;
    let (inf, flip) = (K::bits_from(K::INF_BITS), K::bits_from(flip));
    let width = mask.count_ones();
    if plan.unrolled {
        launch_pass::<K, V, PAIRS, 1>(
            queue,
            plan,
            scratch,
            src,
            dst,
            n,
            (shift, mask, width),
            kind,
            (inf, flip),
        )
    } else {
        launch_pass::<K, V, PAIRS, 0>(
            queue,
            plan,
            scratch,
            src,
            dst,
            n,
            (shift, mask, width),
            kind,
            (inf, flip),
        )
    }
}

#[allow(clippy::too_many_arguments)]
fn launch_pass<K: RadixKey, V: Num, const PAIRS: u32, const UNROLLED: u32>(
    queue: &impl AsStream,
    plan: &Plan,
    scratch: &mut Scratch,
    (src_k, src_v): (&Buffer<K>, &Buffer<V>),
    (dst_k, dst_v): (&mut Buffer<K>, &mut Buffer<V>),
    n: u32,
    (shift, mask, width): (u32, u32, u32),
    kind: u32,
    (inf, flip): (K::Bits, K::Bits),
) -> Result<()> {
    let groups = plan.groups();
    split_count::launch::<K, K::Bits, UNROLLED>(
        queue,
        groups,
        src_k,
        &mut scratch.counts,
        n,
        shift,
        mask,
        kind,
        inf,
        flip,
        plan.spans,
        plan.span_len,
        plan.items,
    )?;
    exclusive_sum(queue, &scratch.counts, &mut scratch.offsets)?;
    split_scatter::launch::<K, K::Bits, V, PAIRS, UNROLLED>(
        queue,
        groups,
        src_k,
        src_v,
        dst_k,
        dst_v,
        &scratch.offsets,
        n,
        shift,
        mask,
        kind,
        inf,
        flip,
        plan.spans,
        plan.span_len,
        plan.items,
        width,
    )
}
