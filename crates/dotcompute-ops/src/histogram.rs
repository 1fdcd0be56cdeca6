//! Histograms with even bins: counts of samples per bin over `[lower, upper)`.
//!
//! Each group counts its share of the samples in a shared histogram (atomic adds in
//! shared memory, `bins ≤ 4096`), then adds it into the output with one global atomic
//! per bin: exact, whatever the order. A tuner candidate keeps up to 16 copies of each
//! bin where room allows (thread `t` counting into copy `t % 16`, [`copies_for`]), which
//! spreads a warp's atomics over the shared-memory banks. Samples outside `[lower, upper)`,
//! and NaN, are not counted.
//!
//! **Bytes** are counted by *value* in the forms the tuner takes on GPUs: 256 counters in
//! 16 or 32 copies (lane `t` into copy `t % copies`), 16 bytes a load, one shift and mask
//! and one shared atomic per byte, no range test; at the end each group folds the 256
//! values into the bins (any range and width), dropping the values outside the range.
//! On an H200 (2026-11-28) that took CUDA's 256-bin byte histogram from 126 to 80 µs for
//! 2^28 bytes (32 copies), NVIDIA Vulkan's from 349 to 223 µs (16 copies). Per-thread
//! 16-bit counters without atomics were measured too and dropped: each add waits for the
//! last one's store (a chain through shared memory), and a group of 32 filling 16 KiB
//! leaves few warps per SM: 307 µs on CUDA, 1.5 ms on NVIDIA Vulkan.
//!
//! The byte forms count a word's four bytes in straight-line code (four statements, or a
//! constant `for` loop, which the WGSL printer writes out and the C-family printer marks
//! `#pragma unroll`): as a `while` loop it kept, on Vulkan, the trip guard the WGSL
//! printer puts on loops it cannot bound (2^64 trips), and NVIDIA's Vulkan compiler did
//! not unroll it; writing it out took that 256-bin histogram of 2^28 bytes from 300 to
//! 151–169 µs on an H200 (session 27, 2026-11-30; CUDA unchanged at 80 µs). The f32 and
//! integer forms keep 256 shared counters instead of [`MAX_BINS`] where the bins and
//! their copies fit ([`SMALL_COUNTERS`]).
//!
//! The bin of a sample is computed without division, so it is the same on every backend
//! (division is within 2.5 ulp on Vulkan, not correctly rounded): for `f32`,
//! `floor((x − lower) · scale)` with `scale = bins / (upper − lower)` rounded to f32 on the
//! host, clamped to the last bin; for integers the range must split into equal integer
//! widths, and the bin is `(x − lower) / width`.
//!
//! The number of groups and the copies are tuned ([`crate::tune`]): 1,024 groups with
//! one copy (the default for integer samples), 256 or 4,096 groups, or 1,024 groups with
//! copies. Bytes take the byte-value forms first ([`BYTE_VALUE_CHOICES`]; the default:
//! 16 copies, 1,024 groups), f32 samples two forms reading 16 bytes a load
//! ([`F32_VEC4_CHOICES`]; the default: 8 groups per compute unit), then those.

use crate::{index_len, invalid, GroupCount, GROUP};
use dotcompute::prelude::*;
use dotcompute::{AsStream, Buffer, Result};

/// The most bins a shared histogram holds.
pub const MAX_BINS: u32 = 4096;
/// The tuner's candidates: groups at most (each reads a grid-strided share), and whether
/// each group keeps copies of its bins ([`copies_for`]); the first is the default
/// (`DOTCOMPUTE_AUTOTUNE=off`). The counts are exact whichever runs. Copies are a
/// candidate, not a rule: on an H200 (2026-11-27) they took a byte histogram from 0.48×
/// to 0.52× of a copy on CUDA, but an f32 histogram from 1,482 to 362 GB/s on NVIDIA
/// Vulkan.
const GROUP_CHOICES: [(&str, u32, bool); 4] = [
    ("1024 groups", 1024, false),
    ("256 groups", 256, false),
    ("4096 groups", 4096, false),
    ("1024 groups, 16 copies", 1024, true),
];
/// The byte histogram's first candidates (the first is its default): counts by byte
/// value in 16 or 32 copies (log2 of it) with 2 or 4 quads loaded at once
/// ([`histogram_byte_values`]) in a number of groups, fixed or so many per compute unit
/// ([`GroupCount`]). Four loads at once won on NVIDIA Vulkan with 16 copies (274 against
/// 281 µs for 2^28 bytes, H200, 2026-11-29) and lost on CUDA with 32 (81.2 against 79.1
/// µs; dropped). Fewer copies lost everywhere (H200, 2026-11-30, session 27: 8 copies
/// 122–126 µs and 4 copies 131 µs on CUDA, 176–193 and 184–202 on NVIDIA Vulkan, against
/// 80 and 153–169 for the winners), 32 copies in 6 groups a unit lost to 4 a unit on CUDA
/// (82 against 80 µs), and 32 copies with four loads at once lost on both (CUDA 80.0–80.6
/// against 78.8–79.6 µs, NVIDIA Vulkan 180 against 151–155).
const BYTE_VALUE_CHOICES: [(&str, u32, u32, GroupCount); 6] = [
    (
        "byte values, 16 copies, 1024 groups",
        4,
        2,
        GroupCount::Fixed(1024),
    ),
    (
        "byte values, 16 copies, 2048 groups",
        4,
        2,
        GroupCount::Fixed(2048),
    ),
    (
        "byte values, 32 copies, 512 groups",
        5,
        2,
        GroupCount::Fixed(512),
    ),
    (
        "byte values, 32 copies, 4 groups a unit",
        5,
        2,
        GroupCount::PerUnit(4, 512),
    ),
    (
        "byte values, 16 copies, 8 groups a unit",
        4,
        2,
        GroupCount::PerUnit(8, 1024),
    ),
    (
        "byte values, 16 copies, 2048 groups, 4 loads at once",
        4,
        4,
        GroupCount::Fixed(2048),
    ),
];

/// The f32 histogram's first candidates: 16 bytes a load ([`histogram_f32_vec4`]), one
/// copy of each bin; the first is the default. On an H200 (2026-11-28) they took CUDA's
/// 2^28-sample histogram from 0.83× to 0.98× of a copy, NVIDIA Vulkan's from 0.41× to
/// 0.56×.
const F32_VEC4_CHOICES: [(&str, GroupCount); 2] = [
    (
        "vector loads, 8 groups a unit",
        GroupCount::PerUnit(8, 1024),
    ),
    ("vector loads, 4096 groups", GroupCount::Fixed(4096)),
];

/// The shared counters of the f32 and integer forms where the bins (times their copies)
/// fit: 1 KiB instead of [`MAX_BINS`]' 16 KiB. Not a candidate but a rule, as the counts
/// are the same and it never lost: on an H200 (2026-11-30, session 27) it took NVIDIA
/// Vulkan's 256-bin f32 histogram of 2^28 samples from 511–533 to 385–406 µs (its
/// driver seems to give groups with less shared memory more room), CUDA's unchanged
/// (255–258 µs either way).
const SMALL_COUNTERS: u32 = 256;

/// Runs `$body` with `$cap` the const shared-counter capacity for `$counters` counters:
/// [`SMALL_COUNTERS`] where they fit, else [`MAX_BINS`] (the rule above, in one place).
macro_rules! with_counter_cap {
    ($counters:expr, $cap:ident => $body:expr) => {
        if $counters <= SMALL_COUNTERS {
            const $cap: u32 = SMALL_COUNTERS;
            $body
        } else {
            const $cap: u32 = MAX_BINS;
            $body
        }
    };
}

/// Zeroes the group's `bins` counters, then waits for the group.
#[kernel_fn]
fn clear_bins(local: &mut [u32], bins: u32) {
    let mut b = local_id().x;
    while b < bins {
        local[b] = 0;
        b += GROUP;
    }
    barrier();
}

/// Waits for the group, then adds its counters into the output: the `copies` copies of
/// each bin summed, one atomic per bin.
#[kernel_fn]
fn add_bins(local: &mut [u32], hist: &mut [u32], bins: u32, copies: u32) {
    barrier();
    let mut b = local_id().x;
    while b < bins {
        let mut c = 0u32;
        let mut k = 0u32;
        while k < copies {
            c += local[b * copies + k];
            k += 1;
        }
        if c != 0 {
            atomic_add(&hist[b], c);
        }
        b += GROUP;
    }
}

/// How many copies of each of `bins` bins a group keeps in the copies candidate (thread
/// `t` counts into copy `t % copies`): up to 16, as many as [`MAX_BINS`] counters hold.
/// With 16, a warp's 32 lanes fall in different banks but for pairs.
fn copies_for(bins: u32) -> u32 {
    (MAX_BINS / bins).clamp(1, 16)
}

/// The names of `first` candidates, then of [`GROUP_CHOICES`].
fn names_before_groups<'a>(first: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    first.chain(GROUP_CHOICES.iter().map(|c| c.0)).collect()
}

/// The group count and copies of candidate `i` where `first` other candidates come
/// before [`GROUP_CHOICES`]; one of those that cannot run (too few samples for a whole
/// vector) takes the first of them.
fn group_choice(i: usize, first: usize, bins: u32) -> (u32, u32) {
    let (_, groups, copies) = GROUP_CHOICES
        .get(i.saturating_sub(first))
        .copied()
        .unwrap_or(GROUP_CHOICES[0]);
    (groups, if copies { copies_for(bins) } else { 1 })
}

/// The bin index of a sample outside `[lower, upper)` (or NaN) in [`bin_indices_even_f32`]
/// and [`bin_indices_even`].
pub const NO_BIN: u32 = u32::MAX;

/// The bin of `v`, or [`NO_BIN`] outside `[lower, upper)`: the one definition of a float
/// sample's bin (histograms and bin indices agree by construction).
#[kernel_fn]
fn bin_of_f32(v: f32, lower: f32, upper: f32, scale: f32, bins: u32) -> u32 {
    let mut bin = NO_BIN;
    if v >= lower && v < upper {
        bin = u32::cast(((v - lower) * scale).floor()).min(bins - 1);
    }
    bin
}

/// The bin of integer `v`, or [`NO_BIN`] outside `[lower, upper)`.
#[kernel_fn]
fn bin_of_int<T: Int>(v: T, lower: T, upper: T, width: u32) -> u32 {
    let mut bin = NO_BIN;
    if v >= lower && v < upper {
        // The offset fits u32: the range is at most 2^32 wide.
        bin = u32::cast(v - lower) / width;
    }
    bin
}

/// Counts `v` in copy `copy` of its bin of the group's counters, when it is in
/// `[lower, upper)`.
#[kernel_fn]
fn count_f32(
    local: &mut [u32],
    v: f32,
    lower: f32,
    upper: f32,
    scale: f32,
    bins: u32,
    copies: u32,
    copy: u32,
) {
    let bin = bin_of_f32(v, lower, upper, scale, bins);
    if bin != NO_BIN {
        atomic_add(&local[bin * copies + copy], 1u32);
    }
}

/// `out[i]` is the bin of `x[i]` (or [`NO_BIN`]).
#[kernel]
fn bins_f32(x: &[f32], out: &mut [u32], lower: f32, upper: f32, scale: f32, bins: u32) {
    let i = global_id().x;
    if i < x.len() {
        out[i] = bin_of_f32(x[i], lower, upper, scale, bins);
    }
}

/// `out[i]` is the bin of integer `x[i]` (or [`NO_BIN`]).
#[kernel]
fn bins_int<T: Int>(x: &[T], out: &mut [u32], lower: T, upper: T, width: u32) {
    let i = global_id().x;
    if i < x.len() {
        out[i] = bin_of_int(x[i], lower, upper, width);
    }
}

#[kernel]
fn histogram_f32<const CAP: u32>(
    x: &[f32],
    hist: &mut [u32],
    n: u32,
    bins: u32,
    lower: f32,
    upper: f32,
    scale: f32,
    copies: u32,
) {
    let local = shared::<u32, CAP>();
    clear_bins(local, bins * copies);
    let copy = local_id().x % copies;
    let stride = GROUP * num_groups().x;
    let mut i = global_id().x;
    // Four loads in flight per step.
    while i + 3 * stride < n {
        let v0 = x[i];
        let v1 = x[i + stride];
        let v2 = x[i + 2 * stride];
        let v3 = x[i + 3 * stride];
        count_f32(local, v0, lower, upper, scale, bins, copies, copy);
        count_f32(local, v1, lower, upper, scale, bins, copies, copy);
        count_f32(local, v2, lower, upper, scale, bins, copies, copy);
        count_f32(local, v3, lower, upper, scale, bins, copies, copy);
        i += 4 * stride;
    }
    while i < n {
        count_f32(local, x[i], lower, upper, scale, bins, copies, copy);
        i += stride;
    }
    add_bins(local, hist, bins, copies);
}

/// [`count_f32`] for the four samples of `q`, one copy of each bin.
#[kernel_fn]
fn count_f32_lanes(local: &mut [u32], q: Vec4<f32>, lower: f32, upper: f32, scale: f32, bins: u32) {
    count_f32(local, q.x, lower, upper, scale, bins, 1, 0);
    count_f32(local, q.y, lower, upper, scale, bins, 1, 0);
    count_f32(local, q.z, lower, upper, scale, bins, 1, 0);
    count_f32(local, q.w, lower, upper, scale, bins, 1, 0);
}

/// [`histogram_f32`] reading 16 bytes a load: `x4` holds the whole vectors of `x` (`n`
/// samples), two in flight per step; the samples after the last whole vector (at most
/// three) go to the first threads.
#[kernel]
fn histogram_f32_vec4<const CAP: u32>(
    x4: &[Vec4<f32>],
    x: &[f32],
    hist: &mut [u32],
    n: u32,
    bins: u32,
    lower: f32,
    upper: f32,
    scale: f32,
) {
    let local = shared::<u32, CAP>();
    clear_bins(local, bins);
    let stride = GROUP * num_groups().x;
    let mut i = global_id().x;
    while i + stride < x4.len() {
        let q0 = x4[i];
        let q1 = x4[i + stride];
        count_f32_lanes(local, q0, lower, upper, scale, bins);
        count_f32_lanes(local, q1, lower, upper, scale, bins);
        i += 2 * stride;
    }
    if i < x4.len() {
        count_f32_lanes(local, x4[i], lower, upper, scale, bins);
    }
    let tail = 4 * x4.len() + global_id().x;
    if tail < n {
        count_f32(local, x[tail], lower, upper, scale, bins, 1, 0);
    }
    add_bins(local, hist, bins, 1);
}

#[kernel]
fn histogram_int<T: Int, const CAP: u32>(
    x: &[T],
    hist: &mut [u32],
    n: u32,
    bins: u32,
    lower: T,
    upper: T,
    width: u32,
    copies: u32,
) {
    let local = shared::<u32, CAP>();
    clear_bins(local, bins * copies);
    let copy = local_id().x % copies;
    let stride = GROUP * num_groups().x;
    let mut i = global_id().x;
    while i < n {
        let bin = bin_of_int(x[i], lower, upper, width);
        if bin != NO_BIN {
            atomic_add(&local[bin * copies + copy], 1u32);
        }
        i += stride;
    }
    add_bins(local, hist, bins, copies);
}

/// The bin of byte `b` (`0..=255`), or [`NO_BIN`] outside `[lower, upper)`: a shift for
/// bin widths that are powers of two (`shift < 32`), else a division.
#[kernel_fn]
fn bin_of_byte(b: u32, lower: u32, upper: u32, width: u32, shift: u32) -> u32 {
    let mut bin = NO_BIN;
    if b >= lower && b < upper {
        bin = if shift < 32 {
            (b - lower) >> shift
        } else {
            (b - lower) / width
        };
    }
    bin
}

/// Counts the first `count` bytes of word `w` (little-endian), into copy `copy` of
/// their bins.
#[kernel_fn]
fn count_bytes(
    local: &mut [u32],
    w: u32,
    count: u32,
    lower: u32,
    upper: u32,
    width: u32,
    shift: u32,
    copies: u32,
    copy: u32,
) {
    let mut k = 0u32;
    while k < count {
        let bin = bin_of_byte((w >> (8 * k)) & 255, lower, upper, width, shift);
        // Branch-free: a sample outside the range adds 0 to a valid counter.
        let slot = if bin != NO_BIN {
            bin * copies + copy
        } else {
            copy
        };
        let one = if bin != NO_BIN { 1u32 } else { 0u32 };
        atomic_add(&local[slot], one);
        k += 1;
    }
}

/// Byte samples, read four to a word (`Buffer::<u8>::as_words`): `n` bytes.
#[kernel]
fn histogram_bytes(
    words: &[u32],
    hist: &mut [u32],
    n: u32,
    bins: u32,
    lower: u32,
    upper: u32,
    width: u32,
    shift: u32,
    copies: u32,
) {
    let local = shared::<u32, MAX_BINS>();
    clear_bins(local, bins * copies);
    let copy = local_id().x % copies;
    let stride = GROUP * num_groups().x;
    let whole = n / 4;
    // One word per step, its bytes in a loop: this general form (bins wider than one
    // byte value) is the rarer one; `histogram_bytes_direct` has four words in flight.
    let mut i = global_id().x;
    while i < words.len() {
        let count = if i < whole { 4u32 } else { n - 4 * i };
        count_bytes(
            local, words[i], count, lower, upper, width, shift, copies, copy,
        );
        i += stride;
    }
    add_bins(local, hist, bins, copies);
}

/// Counts the four bytes of word `w` where each byte value has its own bin (width 1):
/// the bin is `b − lower`, kept when below `bins` (one wrapping compare, no division),
/// into copy `copy` of that bin.
#[kernel_fn]
fn count_word_direct(local: &mut [u32], w: u32, lower: u32, bins: u32, copies: u32, copy: u32) {
    // A constant `for` loop, which the WGSL printer writes out (a `while` keeps its
    // trip guard on Vulkan).
    for k in 0..4u32 {
        let b = ((w >> (8 * k)) & 255).wrapping_sub(lower);
        // Branch-free: a byte outside the range adds 0 to a valid counter.
        let slot = if b < bins { b * copies + copy } else { copy };
        let one = if b < bins { 1u32 } else { 0u32 };
        atomic_add(&local[slot], one);
    }
}

/// [`histogram_bytes`] where every bin is one byte value wide (256 bins over `0..256`,
/// the common case): `copies` copies of each bin in shared memory, whole words counted
/// by [`count_word_direct`], the copies summed into the output at the end.
#[kernel]
fn histogram_bytes_direct(
    words: &[u32],
    hist: &mut [u32],
    n: u32,
    bins: u32,
    lower: u32,
    copies: u32,
) {
    let local = shared::<u32, MAX_BINS>();
    clear_bins(local, bins * copies);
    let copy = local_id().x % copies;
    let stride = GROUP * num_groups().x;
    let whole = n / 4;
    let mut i = global_id().x;
    while i + 3 * stride < whole {
        let w0 = words[i];
        let w1 = words[i + stride];
        let w2 = words[i + 2 * stride];
        let w3 = words[i + 3 * stride];
        count_word_direct(local, w0, lower, bins, copies, copy);
        count_word_direct(local, w1, lower, bins, copies, copy);
        count_word_direct(local, w2, lower, bins, copies, copy);
        count_word_direct(local, w3, lower, bins, copies, copy);
        i += 4 * stride;
    }
    while i < whole {
        count_word_direct(local, words[i], lower, bins, copies, copy);
        i += stride;
    }
    // The last, partial word: one thread (its bytes past `n` are not samples), through
    // the general form's counter (width 1: shift 0).
    if global_id().x == 0 && whole < words.len() {
        count_bytes(
            local,
            words[whole],
            n - 4 * whole,
            lower,
            lower + bins,
            1,
            0,
            copies,
            copy,
        );
    }
    add_bins(local, hist, bins, copies);
}

// The byte-value forms fold value `v` in thread `v`.
const _: () = assert!(GROUP == 256);

/// Counts the four bytes of word `w` by value, in copy `copy` of `copies = 1 << log_copies`
/// (every byte, whatever the bins: [`histogram_byte_values`] drops the values outside the
/// range at the end). Value `v`'s copy `c` is counter `v · copies + c`: byte `k`'s
/// counter is `extract_byte(k) << log_copies | c`, no range check, then the shared
/// atomic. The byte is extracted by the builtin (one byte permute on CUDA): written as
/// `(w >> (8k − log_copies)) & (255 << log_copies)`, nvcc spent five instructions a byte
/// where this takes four, and the kernel read 0.73× of a copy's bandwidth against 0.90–0.92×
/// (H200, 2^28 bytes, `scripts/histogram-harness`, 2026-11-30).
#[kernel_fn]
fn count_byte_values(local: &mut [u32], w: u32, log_copies: u32, copy: u32) {
    atomic_add(&local[(w.extract_byte(0) << log_copies) | copy], 1u32);
    atomic_add(&local[(w.extract_byte(1) << log_copies) | copy], 1u32);
    atomic_add(&local[(w.extract_byte(2) << log_copies) | copy], 1u32);
    atomic_add(&local[(w.extract_byte(3) << log_copies) | copy], 1u32);
}

/// [`count_byte_values`] for the four words of quad `q`.
#[kernel_fn]
fn count_quad_values(local: &mut [u32], q: Vec4<u32>, log_copies: u32, copy: u32) {
    count_byte_values(local, q.x, log_copies, copy);
    count_byte_values(local, q.y, log_copies, copy);
    count_byte_values(local, q.z, log_copies, copy);
    count_byte_values(local, q.w, log_copies, copy);
}

/// Byte samples counted by value in `1 << LOG_COPIES` copies of 256 counters: 16 copies
/// (16 KiB of shared memory; lanes `t` and `t + 16` share a copy) or 32 (32 KiB: every
/// lane of a 32-wide subgroup has its own bank, whatever the bytes). Counts the whole
/// quads of the `n` bytes (16 bytes a load, `DEPTH` = 2 or 4 loads in flight), then the
/// words after them, then folds the counts into the bins. Nsight Compute (H200,
/// 2026-11-29) put half of two in flight's cycles waiting for loads.
#[kernel]
fn histogram_byte_values<const LOG_COPIES: u32, const DEPTH: u32>(
    quads: &[Vec4<u32>],
    words: &[u32],
    hist: &mut [u32],
    n: u32,
    lower: u32,
    upper: u32,
    width: u32,
    shift: u32,
) {
    let local = shared::<u32, { 256 << LOG_COPIES }>();
    let log_copies = LOG_COPIES;
    let copies = 1u32 << log_copies;
    clear_bins(local, 256u32 << log_copies);
    let copy = local_id().x % copies;
    let stride = GROUP * num_groups().x;
    let mut i = global_id().x;
    if DEPTH == 4 {
        while i + 3 * stride < quads.len() {
            let q0 = quads[i];
            let q1 = quads[i + stride];
            let q2 = quads[i + 2 * stride];
            let q3 = quads[i + 3 * stride];
            count_quad_values(local, q0, log_copies, copy);
            count_quad_values(local, q1, log_copies, copy);
            count_quad_values(local, q2, log_copies, copy);
            count_quad_values(local, q3, log_copies, copy);
            i += 4 * stride;
        }
    }
    while i + stride < quads.len() {
        let q0 = quads[i];
        let q1 = quads[i + stride];
        count_quad_values(local, q0, log_copies, copy);
        count_quad_values(local, q1, log_copies, copy);
        i += 2 * stride;
    }
    if i < quads.len() {
        count_quad_values(local, quads[i], log_copies, copy);
    }
    // The words after the last whole quad (at most four, in group 0); the last one's bytes
    // past `n` read as zero and are taken off byte value 0 in the fold.
    let tail = 4 * quads.len() + global_id().x;
    if tail < words.len() {
        count_byte_values(local, words[tail], log_copies, copy);
    }
    barrier();
    // Thread `v` (GROUP = 256) sums byte value `v`'s copies, each thread starting at a
    // different copy (fewer bank conflicts), and adds it to the value's bin, if any.
    let v = local_id().x;
    let mut count = 0u32;
    let mut c = 0u32;
    while c < copies {
        count += local[(v << log_copies) | ((c + v) & (copies - 1))];
        c += 1;
    }
    if v == 0 && group_id().x == 0 {
        count -= 4 * words.len() - n;
    }
    let bin = bin_of_byte(v, lower, upper, width, shift);
    if bin != NO_BIN && count != 0 {
        atomic_add(&hist[bin], count);
    }
}

/// The bin of every byte sample (`n` bytes read as words).
#[kernel]
fn bins_bytes(words: &[u32], out: &mut [u32], lower: u32, upper: u32, width: u32, shift: u32) {
    let i = global_id().x;
    if i < out.len() {
        let b = words[i / 4].extract_byte(i);
        out[i] = bin_of_byte(b, lower, upper, width, shift);
    }
}

/// `Error::Range` unless there are 1 to [`MAX_BINS`] bins.
fn check_bins(op: &'static str, bins: u32) -> Result<()> {
    if bins == 0 || bins > MAX_BINS {
        return Err(invalid(
            op,
            format!("{bins} bins: between 1 and {MAX_BINS}"),
        ));
    }
    Ok(())
}

fn check(op: &'static str, samples: usize, bins: u32, hist: usize) -> Result<u32> {
    check_bins(op, bins)?;
    if hist != bins as usize {
        return Err(invalid(
            op,
            format!("the histogram has {hist} elements for {bins} bins"),
        ));
    }
    index_len(op, samples)
}

fn launch(n: u32, max_groups: u32) -> Launch {
    let groups = n.div_ceil(GROUP * 16).clamp(1, max_groups);
    Launch::threads((groups * GROUP) as usize).group(GROUP)
}

/// Runs `launch_with(launch, copies)` with the tuned group count and copies of each of
/// `bins` bins for `(op, ty, n)`.
fn tuned(
    queue: &impl AsStream,
    op: &str,
    ty: &str,
    n: u32,
    bins: u32,
    hist: &mut Buffer<u32>,
    launch_with: impl Fn(&mut Buffer<u32>, Launch, u32) -> Result<()>,
) -> Result<()> {
    let names = GROUP_CHOICES.map(|c| c.0);
    run_tuned(queue, op, ty, n, &names, hist, |hist, i| {
        let (groups, copies) = group_choice(i, 0, bins);
        launch_with(hist, launch(n, groups), copies)
    })
}

/// Runs candidate `run(hist, i)` of `candidates`, the one tuned for `(op, ty, n)`, on a
/// zeroed `hist`.
fn run_tuned(
    queue: &impl AsStream,
    op: &str,
    ty: &str,
    n: u32,
    candidates: &[&str],
    hist: &mut Buffer<u32>,
    run: impl Fn(&mut Buffer<u32>, usize) -> Result<()>,
) -> Result<()> {
    let mut run = |i: usize| {
        queue.fill_buffer(hist, 0)?;
        run(hist, i)
    };
    let key = crate::tune::key(queue, op, ty, n as usize);
    let winner = crate::tune::choose_on(queue, &key, n as usize, candidates, &mut run, || {
        queue.device().synchronize()
    })?;
    run(winner)
}

/// Counts `samples` into `hist` (`bins` elements, set to zero first): bin `k` covers
/// `[lower + k·w, lower + (k+1)·w)` with `w = (upper − lower) / bins`.
///
/// ```
/// use dotcompute::prelude::*;
/// let d = Device::cpu();
/// let x = d.upload(&[0.5f32, 1.5, 1.7, 3.9, 4.0, -1.0])?;
/// let mut h = d.alloc::<u32>(4)?;
/// dotcompute_ops::histogram::histogram_even_f32(&d, &x, 4, 0.0, 4.0, &mut h)?;
/// assert_eq!(h.to_vec()?, [1, 2, 0, 1]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn histogram_even_f32(
    queue: &impl AsStream,
    samples: &Buffer<f32>,
    bins: u32,
    lower: f32,
    upper: f32,
    hist: &mut Buffer<u32>,
) -> Result<()> {
    const OP: &str = "histogram_even_f32";
    let n = check(OP, samples.len(), bins, hist.len())?;
    let scale = f32_scale(OP, bins, lower, upper)?;
    if n == 0 {
        return queue.fill_buffer(hist, 0);
    }
    if crate::host::is_cpu(queue) {
        // The kernel's bin, in the same two roundings (no fused multiply-add).
        let x = crate::host::elements(queue, samples)?;
        return hist.write(&crate::host::histogram(&x, bins, |v: f32| {
            if v >= lower && v < upper {
                (((v - lower) * scale).floor() as u32).min(bins - 1)
            } else {
                NO_BIN
            }
        }));
    }
    // The vector forms first: the first is the default.
    let names = names_before_groups(F32_VEC4_CHOICES.iter().map(|c| c.0));
    run_tuned(queue, OP, "f32", n, &names, hist, |hist, i| {
        let args = (lower, upper, scale);
        if let (Some(&(_, groups)), Some(x4)) = (F32_VEC4_CHOICES.get(i), samples.as_vec4s()) {
            let l = launch(n / 4, groups.count(queue));
            return with_counter_cap!(bins, CAP => histogram_f32_vec4::launch::<CAP>(
                queue, l, &x4, samples, hist, n, bins, args.0, args.1, args.2,
            ));
        }
        let (groups, copies) = group_choice(i, F32_VEC4_CHOICES.len(), bins);
        let l = launch(n, groups);
        with_counter_cap!(bins * copies, CAP => histogram_f32::launch::<CAP>(
            queue, l, samples, hist, n, bins, args.0, args.1, args.2, copies,
        ))
    })
}

/// Integer sample types of [`histogram_even`].
pub trait HistogramInt: Int {
    /// `upper − lower` as an unsigned width, if `lower < upper`.
    fn span(lower: Self, upper: Self) -> Option<u64>;
}
impl HistogramInt for u32 {
    fn span(lower: u32, upper: u32) -> Option<u64> {
        (lower < upper).then(|| (upper - lower) as u64)
    }
}
impl HistogramInt for i32 {
    fn span(lower: i32, upper: i32) -> Option<u64> {
        (lower < upper).then(|| (upper as i64 - lower as i64) as u64)
    }
}

/// Counts integer `samples` into `hist` (`bins` elements, set to zero first); the range
/// `[lower, upper)` must split into `bins` equal integer widths.
///
/// ```
/// use dotcompute::prelude::*;
/// let d = Device::cpu();
/// let x = d.upload(&[0u32, 1, 5, 9, 10, 3])?;
/// let mut hist = d.alloc::<u32>(2)?;
/// // Bins [0, 5) and [5, 10); 10 is past the range and not counted.
/// dotcompute_ops::histogram::histogram_even(&d, &x, 2, 0, 10, &mut hist)?;
/// assert_eq!(hist.to_vec()?, [3, 2]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn histogram_even<T: HistogramInt>(
    queue: &impl AsStream,
    samples: &Buffer<T>,
    bins: u32,
    lower: T,
    upper: T,
    hist: &mut Buffer<u32>,
) -> Result<()> {
    const OP: &str = "histogram_even";
    let n = check(OP, samples.len(), bins, hist.len())?;
    let width = int_width(OP, bins, lower, upper)?;
    if n == 0 {
        return queue.fill_buffer(hist, 0);
    }
    if crate::host::is_cpu(queue) {
        let x = crate::host::elements(queue, samples)?;
        return hist.write(&crate::host::histogram(&x, bins, |v: T| {
            if v >= lower && v < upper {
                // The offset fits u32 (the range is at most 2^32 wide), as in the
                // kernel; `span` is `None` for `v == lower`, offset 0.
                T::span(lower, v).map_or(0, |d| d as u32) / width
            } else {
                NO_BIN
            }
        }));
    }
    let ty = format!("{:?}", <T as dotcompute::Element>::TYPE);
    tuned(queue, OP, &ty, n, bins, hist, |hist, l, copies| {
        with_counter_cap!(bins * copies, CAP => histogram_int::launch::<T, CAP>(
            queue, l, samples, hist, n, bins, lower, upper, width, copies,
        ))
    })
}

/// The bin width over `[lower, upper)` of byte samples (`upper ≤ 256`), and its shift
/// where it is a power of two (else 32).
fn byte_width(op: &'static str, bins: u32, lower: u32, upper: u32) -> Result<(u32, u32)> {
    if upper > 256 {
        return Err(invalid(
            op,
            format!("the range {lower}..{upper} goes past 256 (bytes are 0..=255)"),
        ));
    }
    let width = int_width(op, bins, lower, upper)?;
    let shift = if width.is_power_of_two() {
        width.trailing_zeros()
    } else {
        32
    };
    Ok((width, shift))
}

/// Counts byte samples into `hist` (`bins` elements, set to zero first): the range
/// `[lower, upper)` (`upper ≤ 256`) must split into `bins` equal integer widths. Kernels
/// read the bytes 4 or 16 at a time (`Buffer::<u8>::as_words`, `as_word_quads`).
///
/// ```
/// use dotcompute::prelude::*;
/// let d = Device::cpu();
/// let x = d.upload(&[0u8, 1, 1, 200, 255, 17, 3])?;
/// let mut h = d.alloc::<u32>(4)?;
/// // Four bins of 64 values each over all bytes.
/// dotcompute_ops::histogram::histogram_even_u8(&d, &x, 4, 0, 256, &mut h)?;
/// assert_eq!(h.to_vec()?, [5, 0, 0, 2]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn histogram_even_u8(
    queue: &impl AsStream,
    samples: &Buffer<u8>,
    bins: u32,
    lower: u32,
    upper: u32,
    hist: &mut Buffer<u32>,
) -> Result<()> {
    const OP: &str = "histogram_even_u8";
    let n = check(OP, samples.len(), bins, hist.len())?;
    let (width, shift) = byte_width(OP, bins, lower, upper)?;
    if n == 0 {
        return queue.fill_buffer(hist, 0);
    }
    if crate::host::is_cpu(queue) {
        let x = crate::host::elements(queue, samples)?;
        // Every byte's bin, once: a table read per sample instead of a division (`bins`:
        // outside the range, a slot the count drops).
        let bin_of: [u32; 256] = std::array::from_fn(|b| {
            let b = b as u32;
            if b >= lower && b < upper {
                (b - lower) / width
            } else {
                bins
            }
        });
        return hist.write(&crate::host::byte_histogram(&x, bins, &bin_of));
    }
    // The launch counts groups by words.
    let words = n.div_ceil(4);
    // The byte-value forms first: the first is the default.
    let names = names_before_groups(BYTE_VALUE_CHOICES.iter().map(|c| c.0));
    run_tuned(queue, OP, "u8", words, &names, hist, |hist, i| {
        if let (Some(&(_, log_copies, depth, groups)), Some(quads)) =
            (BYTE_VALUE_CHOICES.get(i), samples.as_word_quads())
        {
            let l = launch(n / 16, groups.count(queue));
            let words = &samples.as_words();
            let args = (lower, upper, width, shift);
            return match (log_copies, depth) {
                (4, 2) => byte_values::<4, 2>(queue, l, &quads, words, hist, n, args),
                (4, _) => byte_values::<4, 4>(queue, l, &quads, words, hist, n, args),
                _ => byte_values::<5, 2>(queue, l, &quads, words, hist, n, args),
            };
        }
        let (groups, copies) = group_choice(i, BYTE_VALUE_CHOICES.len(), bins);
        let l = launch(words, groups);
        if width == 1 {
            return histogram_bytes_direct::launch(
                queue,
                l,
                &samples.as_words(),
                hist,
                n,
                bins,
                lower,
                copies,
            );
        }
        histogram_bytes::launch(
            queue,
            l,
            &samples.as_words(),
            hist,
            n,
            bins,
            lower,
            upper,
            width,
            shift,
            copies,
        )
    })
}

/// One launch of [`histogram_byte_values`]; `args` are its `lower, upper, width, shift`.
fn byte_values<const LOG_COPIES: u32, const DEPTH: u32>(
    queue: &impl AsStream,
    l: Launch,
    quads: &dotcompute::ByteQuads<'_>,
    words: &dotcompute::ByteWords<'_>,
    hist: &mut Buffer<u32>,
    n: u32,
    (lower, upper, width, shift): (u32, u32, u32, u32),
) -> Result<()> {
    histogram_byte_values::launch::<LOG_COPIES, DEPTH>(
        queue, l, quads, words, hist, n, lower, upper, width, shift,
    )
}

/// The bin of every byte sample (the bins of [`histogram_even_u8`]), or [`NO_BIN`].
///
/// ```
/// use dotcompute::prelude::*;
/// let d = Device::cpu();
/// let x = d.upload(&[0u8, 64, 200, 255])?;
/// let mut bins = d.alloc::<u32>(4)?;
/// dotcompute_ops::histogram::bin_indices_even_u8(&d, &x, 4, 0, 256, &mut bins)?;
/// assert_eq!(bins.to_vec()?, [0, 1, 3, 3]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn bin_indices_even_u8(
    queue: &impl AsStream,
    samples: &Buffer<u8>,
    bins: u32,
    lower: u32,
    upper: u32,
    out: &mut Buffer<u32>,
) -> Result<()> {
    const OP: &str = "bin_indices_even_u8";
    check_indices(OP, samples.len(), bins, out.len())?;
    let (width, shift) = byte_width(OP, bins, lower, upper)?;
    if samples.is_empty() {
        return Ok(());
    }
    let threads = Launch::threads(samples.len());
    bins_bytes::launch(
        queue,
        threads,
        &samples.as_words(),
        out,
        lower,
        upper,
        width,
        shift,
    )
}

/// `bins / (upper − lower)` in f32, or why the range cannot have `bins` bins.
fn f32_scale(op: &'static str, bins: u32, lower: f32, upper: f32) -> Result<f32> {
    if !(lower.is_finite() && upper.is_finite() && lower < upper) {
        return Err(invalid(
            op,
            format!("the range {lower}..{upper} is not a finite, non-empty range"),
        ));
    }
    let scale = bins as f32 / (upper - lower);
    if !scale.is_finite() {
        return Err(invalid(
            op,
            format!("the range {lower}..{upper} is too narrow for {bins} bins"),
        ));
    }
    Ok(scale)
}

/// The integer width of each of `bins` bins over `[lower, upper)`, or why it has none.
fn int_width<T: HistogramInt>(op: &'static str, bins: u32, lower: T, upper: T) -> Result<u32> {
    let Some(span) = T::span(lower, upper) else {
        return Err(invalid(
            op,
            format!("the range {lower:?}..{upper:?} is empty"),
        ));
    };
    if span % bins as u64 != 0 {
        return Err(invalid(
            op,
            format!("the range {lower:?}..{upper:?} ({span} values) does not split into {bins} equal integer bins"),
        ));
    }
    Ok((span / bins as u64) as u32)
}

/// Checks the bin count and that `out` has one index per sample.
fn check_indices(op: &'static str, samples: usize, bins: u32, out: usize) -> Result<()> {
    check_bins(op, bins)?;
    crate::same_len(op, samples, out)?;
    index_len(op, samples).map(|_| ())
}

/// The bin of every sample (the bins of [`histogram_even_f32`]): `out[i]` is `x[i]`'s bin,
/// or [`NO_BIN`] when it is outside `[lower, upper)` or NaN.
///
/// ```
/// use dotcompute::prelude::*;
/// use dotcompute_ops::histogram::{bin_indices_even_f32, NO_BIN};
/// let d = Device::cpu();
/// let x = d.upload(&[0.5f32, 1.5, 3.9, 4.0, f32::NAN])?;
/// let mut b = d.alloc::<u32>(5)?;
/// bin_indices_even_f32(&d, &x, 4, 0.0, 4.0, &mut b)?;
/// assert_eq!(b.to_vec()?, [0, 1, 3, NO_BIN, NO_BIN]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn bin_indices_even_f32(
    queue: &impl AsStream,
    samples: &Buffer<f32>,
    bins: u32,
    lower: f32,
    upper: f32,
    out: &mut Buffer<u32>,
) -> Result<()> {
    const OP: &str = "bin_indices_even_f32";
    check_indices(OP, samples.len(), bins, out.len())?;
    let scale = f32_scale(OP, bins, lower, upper)?;
    if samples.is_empty() {
        return Ok(());
    }
    let threads = Launch::threads(samples.len());
    bins_f32::launch(queue, threads, samples, out, lower, upper, scale, bins)
}

/// The bin of every integer sample (the bins of [`histogram_even`]), or [`NO_BIN`].
///
/// ```
/// use dotcompute::prelude::*;
/// use dotcompute_ops::histogram::{bin_indices_even, NO_BIN};
/// let d = Device::cpu();
/// let x = d.upload(&[-4i32, 0, 3, 8])?;
/// let mut bins = d.alloc::<u32>(4)?;
/// bin_indices_even(&d, &x, 4, -4, 4, &mut bins)?;
/// assert_eq!(bins.to_vec()?, [0, 2, 3, NO_BIN]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn bin_indices_even<T: HistogramInt>(
    queue: &impl AsStream,
    samples: &Buffer<T>,
    bins: u32,
    lower: T,
    upper: T,
    out: &mut Buffer<u32>,
) -> Result<()> {
    const OP: &str = "bin_indices_even";
    check_indices(OP, samples.len(), bins, out.len())?;
    let width = int_width(OP, bins, lower, upper)?;
    if samples.is_empty() {
        return Ok(());
    }
    let threads = Launch::threads(samples.len());
    bins_int::launch::<T>(queue, threads, samples, out, lower, upper, width)
}

#[cfg(test)]
mod harness {
    /// Writes the CUDA C++ of the byte histogram the tuner takes on CUDA (32 copies, two
    /// quads in flight) to `scripts/histogram-harness/hist_bytes.cu`, for the harness
    /// there (`variants.py` derives hand-edited forms from it).
    #[test]
    #[ignore = "writes a file for scripts/histogram-harness"]
    fn write_the_byte_histogram_cuda_for_the_harness() {
        use dotcompute::{KernelSource, Target};
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scripts/histogram-harness/hist_bytes.cu"
        );
        let kernel = super::histogram_byte_values::kernel::<5, 2>();
        std::fs::write(path, kernel.source(Target::Cuda).unwrap()).unwrap();
    }
}
