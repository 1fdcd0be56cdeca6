//! Compaction and selection: copy-if by flags, stable partition by flags, unique
//! (consecutive) and run-length encoding, of any kernel type.
//!
//! Three passes, each needing no forward-progress guarantee between groups (as
//! Vulkan requires): (1) each group counts the kept elements of its tile of 2,048
//! (`GROUP × ITEMS`), or with byte flags each subgroup a tile's flags four at a time
//! (`count_byte_flags`); (2) the counts are scanned into each tile's first output
//! position (the scan module's `exclusive_sum_of_counts`, with one more slot that
//! receives the total); (3) each group places its tile's kept elements and moves them.
//! Where the device has subgroups, pass 3 takes the subgroup form: each subgroup takes
//! a run of the tile in coalesced rounds and counts the marks before each element
//! across its lanes (a ballot on 32-lane subgroups), so that only the subgroups' counts
//! pass through shared memory. Elsewhere each group loads its tile's keep marks into
//! shared memory, scans them, writes each element's destination in place of its mark,
//! and then moves the elements in coalesced rounds. Element order is kept everywhere
//! (the partition's rejected part too), and results are exact and the same on every
//! backend.
//!
//! Every operation returns how many elements it kept, which it reads from the device
//! (one small read: the call waits for the work before it). Outputs need room only for
//! the kept elements: an output shorter than the input has the count checked against
//! it before anything is written (the host reads it between the scan and the scatter),
//! and a short output is `Error::Range` with both numbers; an output with room for
//! every element is written without that wait.

use crate::scan::{
    exclusive_sum_of_counts, group_inclusive_sum, look_back_state, single_pass_allowed,
    store_group_total, take_tile, warp_inclusive_sum, warp_look_back, SINGLE_PASS_FORMS,
};
use crate::{index_len, invalid, padded, GROUP};
use dotcompute::prelude::*;
use dotcompute::{AsStream, Buffer, BufferView, ByteWords, Element, KernelBuffer, Result};
use rayon::prelude::*;

/// Elements per thread of a tile.
const ITEMS: u32 = 8;
/// Elements per tile.
const TILE: u32 = GROUP * ITEMS;
const TILE_PADDED: u32 = TILE + TILE / 32;
/// A destination mark of an element that was not kept (positions are below `TILE`).
const REJECTED: u32 = 0x8000_0000;

/// How the keep marks are found and where rejected elements go.
const COPY_IF: u32 = 0;
const PARTITION: u32 = 1;
const UNIQUE: u32 = 2;

/// How the flags are laid out in the kernels' `flags: &[u32]`: one flag a word
/// (`Buffer<u32>`), or four a word, byte `i % 4` of word `i / 4` (`Buffer<u8>` read
/// through `as_words`).
const WORD_FLAGS: u32 = 0;
const BYTE_FLAGS: u32 = 1;

/// 1 when element `i` is kept: its flag is not zero (flags laid out as `flag_form`
/// says), or for `UNIQUE`, when it differs from the element before it.
#[kernel_fn]
fn keep_mark<T: Num>(x: &[T], flags: &[u32], i: u32, mode: u32, flag_form: u32) -> u32 {
    let mut keep = 0u32;
    if mode == UNIQUE {
        if i == 0 {
            keep = 1;
        } else if x[i] != x[i - 1] {
            keep = 1;
        }
    } else if flag_form == BYTE_FLAGS {
        if (flags[i >> 2] >> ((i & 3) << 3)) & 255 != 0 {
            keep = 1;
        }
    } else if flags[i] != 0 {
        keep = 1;
    }
    keep
}

/// Pass 1: `counts[t]` is the number of kept elements of tile `t`.
#[kernel]
fn count_kept<T: Num, const MODE: u32, const FLAGS: u32>(
    x: &[T],
    flags: &[u32],
    counts: &mut [u32],
    n: u32,
) {
    let s = shared::<u32, GROUP>();
    let lid = local_id().x;
    let base = group_id().x * TILE;
    let mut kept = 0u32;
    for r in 0..ITEMS {
        let i = base + r * GROUP + lid;
        if i < n {
            kept += keep_mark(x, flags, i, MODE, FLAGS);
        }
    }
    let total = group_inclusive_sum(s, kept);
    if lid == GROUP - 1 {
        counts[group_id().x] = total;
    }
}

/// Words of byte flags a lane loads before it counts any, in [`count_byte_flags`].
const WORDS_IN_FLIGHT: u32 = 16;
/// Words of byte flags per tile.
const TILE_WORDS: u32 = TILE / 4;

/// How many of the four bytes of `w` are not zero: bit 7 of each byte of the sum is
/// set when its low seven bits are not all zero (`0x7f` at most twice: no carry leaves
/// the byte), and of `w` when its top bit is.
#[kernel_fn]
fn nonzero_bytes(w: u32) -> u32 {
    ((((w & 0x7f7f_7f7fu32) + 0x7f7f_7f7fu32) | w) & 0x8080_8080u32).count_ones()
}

/// Pass 1 for byte flags (`BYTE_FLAGS`, copy-if and partition) where subgroups are at
/// most 32 lanes: each subgroup counts one tile's flags four at a time, a word at a
/// time, `WORDS_IN_FLIGHT` words a lane loaded before any is counted, and one subgroup
/// sum, with no shared memory and no barrier. The group-per-tile count read 8 bytes a
/// thread and took 202 µs for 2^28 flags on an H200 (Nsight Compute, session 26), a
/// quarter of the bandwidth; `words` is the flags' `len.div_ceil(4)` words, whose
/// bytes past the flags' end read as zero.
#[kernel]
fn count_byte_flags(words: &[u32], counts: &mut [u32], n_words: u32, tiles: u32) {
    let width = subgroup_size();
    let lane = subgroup_lane();
    let tile = group_id().x * (GROUP / width) + local_id().x / width;
    let mut kept = 0u32;
    if tile < tiles {
        let mut w = tile * TILE_WORDS + lane;
        let whole = tile * TILE_WORDS + TILE_WORDS <= n_words;
        for _round in 0..TILE_WORDS / (WORDS_IN_FLIGHT * width) {
            let mut held = [0u32; WORDS_IN_FLIGHT as usize];
            if whole {
                for r in 0..WORDS_IN_FLIGHT {
                    held[r] = words[w + r * width];
                }
            } else {
                for r in 0..WORDS_IN_FLIGHT {
                    if w + r * width < n_words {
                        held[r] = words[w + r * width];
                    }
                }
            }
            for r in 0..WORDS_IN_FLIGHT {
                kept += nonzero_bytes(held[r]);
            }
            w += WORDS_IN_FLIGHT * width;
        }
    }
    // Every lane of a subgroup has the same tile: the sum is in uniform control flow.
    let total = subgroup_add(kept);
    if lane == 0u32 && tile < tiles {
        counts[tile] = total;
    }
}

/// Whether [`count_byte_flags`] runs on `queue`: one subgroup width, a power of two up
/// to 32 (a tile is then a whole number of its rounds); the width, when it does.
fn byte_count_width(queue: &impl AsStream) -> Option<u32> {
    match queue.device().info().caps.subgroup_size {
        Some([lo, hi]) if lo == hi && hi.is_power_of_two() && hi <= 32 => Some(hi),
        _ => None,
    }
}

/// The keep marks of tile `base..` (`GROUP × items`) in `dest` (padded), for every
/// thread of the group; returns how many of the thread's run of `items` consecutive
/// elements are kept.
#[kernel_fn]
fn tile_marks<T: Num>(
    dest: &mut [u32],
    x: &[T],
    flags: &[u32],
    base: u32,
    n: u32,
    mode: u32,
    flag_form: u32,
    items: u32,
) -> u32 {
    let lid = local_id().x;
    for r in 0..items {
        let e = r * GROUP + lid;
        let i = base + e;
        let mut keep = 0u32;
        if i < n {
            keep = keep_mark(x, flags, i, mode, flag_form);
        }
        dest[padded(e)] = keep;
    }
    barrier();
    let mut local = 0u32;
    for j in 0..items {
        local += dest[padded(lid * items + j)];
    }
    local
}

/// Turns the thread's run of marks into destinations within the tile, from `running`
/// kept before it: each kept element's position among the kept, each rejected one's
/// among the rejected (`REJECTED |` it); returns the kept count to the run's end (in the
/// last thread: the tile's). `dest` is ready after the caller's next barrier.
#[kernel_fn]
fn tile_places(dest: &mut [u32], kept_before: u32, items: u32) -> u32 {
    let lid = local_id().x;
    let mut running = kept_before;
    for j in 0..items {
        let e = lid * items + j;
        let at = padded(e);
        if dest[at] != 0 {
            dest[at] = running;
            running += 1;
        } else {
            dest[at] = REJECTED | (e - running);
        }
    }
    running
}

/// Pass 3: moves the tile's kept elements to `out[offsets[tile]..]` (and, when
/// `INDICES` is 1, their indices to `idx`); for `PARTITION`, the rejected ones to
/// `out[total + rejected before]`, where `offsets[tiles]` is the total kept.
#[kernel]
fn scatter_kept<T: Num, const MODE: u32, const INDICES: u32, const FLAGS: u32>(
    x: &[T],
    flags: &[u32],
    out: &mut [T],
    idx: &mut [u32],
    offsets: &[u32],
    n: u32,
    tiles: u32,
) {
    let dest = shared::<u32, TILE_PADDED>();
    let s = shared::<u32, GROUP>();
    let lid = local_id().x;
    let tile = group_id().x;
    let base = tile * TILE;
    let local = tile_marks(dest, x, flags, base, n, MODE, FLAGS, ITEMS);
    tile_places(dest, group_inclusive_sum(s, local) - local, ITEMS);
    barrier();
    let kept_before = offsets[tile];
    let total = offsets[tiles];
    for r in 0..ITEMS {
        let e = r * GROUP + lid;
        let i = base + e;
        if i < n {
            let d = dest[padded(e)];
            if d < REJECTED {
                out[kept_before + d] = x[i];
                if INDICES == 1 {
                    idx[kept_before + d] = i;
                }
            } else if MODE == PARTITION {
                out[total + (base - kept_before) + (d - REJECTED)] = x[i];
            }
        }
    }
}

/// Pass 1 of the subgroup form: as [`count_kept`], with whole tiles loaded unguarded
/// and the group's count combined by subgroups (one barrier).
#[kernel]
fn count_kept_subgroup<T: Num, const MODE: u32, const FLAGS: u32>(
    x: &[T],
    flags: &[u32],
    counts: &mut [u32],
    n: u32,
) {
    let s = shared::<u32, GROUP>();
    let lid = local_id().x;
    let base = group_id().x * TILE;
    let mut kept = 0u32;
    if n - base >= TILE {
        for r in 0..ITEMS {
            kept += keep_mark(x, flags, base + r * GROUP + lid, MODE, FLAGS);
        }
    } else {
        for r in 0..ITEMS {
            let i = base + r * GROUP + lid;
            if i < n {
                kept += keep_mark(x, flags, i, MODE, FLAGS);
            }
        }
    }
    // Operation 0 is the sum.
    store_group_total(s, kept, counts, 0u32, 0u32);
}

/// Pass 3 of the subgroup form: as [`scatter_kept`], but each subgroup takes a run of
/// `width × ITEMS` consecutive elements of the tile in coalesced rounds and places its
/// kept ones by counting marks across its lanes (a ballot's bits below the lane where
/// `BALLOT` is 1, for 32-lane subgroups; an exclusive subgroup sum elsewhere): no
/// shared tile of marks, one barrier for the subgroups' counts.
#[kernel]
fn scatter_kept_subgroup<
    T: Num,
    const MODE: u32,
    const INDICES: u32,
    const BALLOT: u32,
    const FLAGS: u32,
>(
    x: &[T],
    flags: &[u32],
    out: &mut [T],
    idx: &mut [u32],
    offsets: &[u32],
    n: u32,
    tiles: u32,
) {
    let s = shared::<u32, GROUP>();
    let lid = local_id().x;
    let width = subgroup_size();
    let lane = subgroup_lane();
    let sub = lid / width;
    let tile = group_id().x;
    let first = tile * TILE + sub * width * ITEMS + lane;
    let whole = n - tile * TILE >= TILE;
    let mut held = [T::zero(); ITEMS as usize];
    let mut place = [0u32; ITEMS as usize];
    // Every load before any counting, so that they are in flight together (unguarded in
    // whole tiles: a load under a branch is not issued early).
    if whole {
        for r in 0..ITEMS {
            let i = first + r * width;
            held[r] = x[i];
            place[r] = keep_mark(x, flags, i, MODE, FLAGS);
        }
    } else {
        for r in 0..ITEMS {
            let i = first + r * width;
            if i < n {
                held[r] = x[i];
                place[r] = keep_mark(x, flags, i, MODE, FLAGS);
            }
        }
    }
    // `place[r]` becomes the number of the run's kept elements before element `r`'s; its
    // mark is kept in bit `r` of `marks`.
    let mut marks = 0u32;
    let mut running = 0u32;
    for r in 0..ITEMS {
        let m = place[r];
        marks |= m << r;
        if BALLOT == 1u32 {
            let kept = subgroup_ballot(m != 0u32);
            place[r] = running + (kept & ((1u32 << lane) - 1u32)).count_ones();
            running += kept.count_ones();
        } else {
            place[r] = running + subgroup_exclusive_add(m);
            running += subgroup_add(m);
        }
    }
    if lane == 0u32 {
        s[sub] = running;
    }
    barrier();
    let mut kept_before = offsets[tile];
    for w in 0..GROUP / width {
        if w < sub {
            kept_before += s[w];
        }
    }
    let total = offsets[tiles];
    for r in 0..ITEMS {
        let i = first + r * width;
        if i < n {
            let d = kept_before + place[r];
            if (marks >> r) & 1u32 == 1u32 {
                out[d] = held[r];
                if INDICES == 1 {
                    idx[d] = i;
                }
            } else if MODE == PARTITION {
                // `d` kept elements are before element `i`, so `i - d` rejected ones.
                out[total + (i - d)] = held[r];
            }
        }
    }
}

/// The single pass of copy-if and unique (CUDA; chosen in `select_on_device`): tiles
/// numbered in the order groups start find their first output position by a decoupled
/// look-back over earlier tiles' kept counts (`scan::warp_look_back`), so flags are read once
/// and nothing waits for a count pass. The last tile writes the total kept to
/// `total[0]`.
#[kernel]
fn select_single_pass<
    T: Num,
    const MODE: u32,
    const INDICES: u32,
    const SPAN: u32,
    const FLAGS: u32,
>(
    x: &[T],
    flags: &[u32],
    out: &mut [T],
    idx: &mut [u32],
    status: &mut [u32],
    counter: &mut [u32],
    total: &mut [u32],
    n: u32,
) {
    let dest = shared::<u32, { GROUP * SPAN + GROUP * SPAN / 32 }>();
    let s = shared::<u32, GROUP>();
    let number = shared::<u32, 1>();
    let first = shared::<u32, 1>();
    let lid = local_id().x;
    let t = take_tile(number, counter, 0);
    let base = t * GROUP * SPAN;
    // The tile's elements are loaded before its flags are ranked, so that their loads
    // are in flight during the ranking's barriers instead of after them.
    let mut held = [T::zero(); SPAN as usize];
    for r in 0..SPAN {
        let i = base + r * GROUP + lid;
        if i < n {
            held[r] = x[i];
        }
    }
    let local = tile_marks(dest, x, flags, base, n, MODE, FLAGS, SPAN);
    let running = tile_places(dest, warp_inclusive_sum(s, local) - local, SPAN);
    // The last warp looks back: its last lane holds the tile's kept count.
    if lid >= GROUP - 32u32 {
        let kept = subgroup_shuffle(running, 31u32);
        let before = warp_look_back(status, t, kept, 0u32, 0u32);
        if lid == GROUP - 1 {
            first[0] = before;
            if t == num_groups().x - 1u32 {
                total[0] = before + running;
            }
        }
    }
    barrier();
    let kept_before = first[0];
    for r in 0..SPAN {
        let e = r * GROUP + lid;
        let i = base + e;
        if i < n {
            let d = dest[padded(e)];
            if d < REJECTED {
                out[kept_before + d] = held[r];
                if INDICES == 1 {
                    idx[kept_before + d] = i;
                }
            }
        }
    }
}

/// Run lengths from run starts: `counts[k] = starts[k + 1] - starts[k]` (the last run
/// ends at `n`), and `values[k] = x[starts[k]]`.
#[kernel]
fn run_lengths<T: Num>(
    x: &[T],
    starts: &[u32],
    values: &mut [T],
    counts: &mut [u32],
    runs: u32,
    n: u32,
) {
    let k = global_id().x;
    if k < runs {
        let mut end = n;
        if k + 1 < runs {
            end = starts[k + 1];
        }
        let start = starts[k];
        values[k] = x[start];
        counts[k] = end - start;
    }
}

/// The device's selection, in three passes: returns the number kept, after checking
/// that `out` has room for them (`room` elements when `PARTITION`, which writes all).
fn select_on_device<T: Num, const MODE: u32, const INDICES: u32, const FLAGS: u32>(
    queue: &impl AsStream,
    op: &'static str,
    input: &Buffer<T>,
    flags: &impl KernelBuffer<u32>,
    out: &mut Buffer<T>,
    idx: Option<&mut Buffer<u32>>,
) -> Result<usize> {
    index_len(op, input.len())?;
    // Without indices to write, a one-element placeholder is bound (never written).
    let indices_given = idx.is_some();
    let mut idx_placeholder;
    let idx = match idx {
        Some(i) => i,
        None => {
            idx_placeholder = queue.scratch::<u32>(1)?;
            &mut idx_placeholder
        }
    };
    // The single pass (CUDA) writes before the count is known, so it takes copy-if and
    // unique only where the outputs have room for every element; short outputs take the
    // three passes, which refuse them before anything is written.
    if MODE != PARTITION
        && room_for_all(input, out, idx, indices_given)
        && single_pass_allowed(queue)
    {
        return tuned::<T, MODE, INDICES, FLAGS>(queue, op, input, flags, out, idx, indices_given);
    }
    three_passes::<T, MODE, INDICES, FLAGS>(queue, op, input, flags, out, idx, indices_given)
}

/// The three passes (count, scan, scatter): returns the number kept, after checking that
/// `out` (and `idx` when `indices_given`) has room for them.
fn three_passes<T: Num, const MODE: u32, const INDICES: u32, const FLAGS: u32>(
    queue: &impl AsStream,
    op: &'static str,
    input: &Buffer<T>,
    flags: &impl KernelBuffer<u32>,
    out: &mut Buffer<T>,
    idx: &mut Buffer<u32>,
    indices_given: bool,
) -> Result<usize> {
    let n = input.len() as u32;
    let tiles = n.div_ceil(TILE);
    let groups = Launch::threads(tiles as usize * GROUP as usize).group(GROUP);
    // One slot past the tiles, zero: the exclusive scan leaves the total there.
    let mut counts = crate::scratch_filled(queue, tiles as usize + 1, 0u32)?;
    let subgroups = subgroup_form_applies(queue);
    match byte_count_width(queue) {
        Some(width) if subgroups && FLAGS == BYTE_FLAGS && MODE != UNIQUE => {
            let tiles_per_group = GROUP / width;
            count_byte_flags::launch(
                queue,
                Launch::threads(tiles.div_ceil(tiles_per_group) as usize * GROUP as usize)
                    .group(GROUP),
                flags,
                &mut counts,
                n.div_ceil(4),
                tiles,
            )?
        }
        _ if subgroups => count_kept_subgroup::launch::<T, MODE, FLAGS>(
            queue,
            groups,
            input,
            flags,
            &mut counts,
            n,
        )?,
        _ => count_kept::launch::<T, MODE, FLAGS>(queue, groups, input, flags, &mut counts, n)?,
    }
    let offsets = exclusive_sum_of_counts(queue, counts)?;
    let read_kept =
        || -> Result<usize> { Ok(queue.read_view(&offsets.slice(tiles as usize..)?)?[0] as usize) };
    // Outputs with room for every element need no count before the scatter: the device
    // goes on to it without waiting for the host. Short ones are checked first, so that
    // nothing is written when they are too short (a partition writes every element).
    let mut kept_before_scatter = None;
    if !room_for_all(input, out, idx, indices_given) {
        let kept = read_kept()?;
        check_room(
            op,
            out.len(),
            if MODE == PARTITION { input.len() } else { kept },
        )?;
        if indices_given {
            check_room(op, idx.len(), kept)?;
        }
        kept_before_scatter = Some(kept);
    }
    let ballot = queue.device().info().caps.subgroup_size == Some([32, 32]);
    match (subgroups, ballot) {
        (true, true) => scatter_kept_subgroup::launch::<T, MODE, INDICES, 1, FLAGS>(
            queue, groups, input, flags, out, idx, &offsets, n, tiles,
        )?,
        (true, false) => scatter_kept_subgroup::launch::<T, MODE, INDICES, 0, FLAGS>(
            queue, groups, input, flags, out, idx, &offsets, n, tiles,
        )?,
        _ => scatter_kept::launch::<T, MODE, INDICES, FLAGS>(
            queue, groups, input, flags, out, idx, &offsets, n, tiles,
        )?,
    }
    match kept_before_scatter {
        Some(kept) => Ok(kept),
        None => read_kept(),
    }
}

/// Whether the outputs have room for every element of `input` (`idx` only when
/// `indices_given`): then nothing needs the kept count before the elements are written.
fn room_for_all<T: Num>(
    input: &Buffer<T>,
    out: &Buffer<T>,
    idx: &Buffer<u32>,
    indices_given: bool,
) -> bool {
    out.len() >= input.len() && (!indices_given || idx.len() >= input.len())
}

/// Whether the three passes take their subgroup form on `queue`: wherever the device
/// has subgroups, unless the calling thread pinned the shared-tile form
/// (`tune::with_candidate("three-pass", ..)`). Not tuned: on an H200 (2026-11-28,
/// `docs/benchmarks.md`) the subgroup form's count and scatter took 285 and 668 µs on
/// NVIDIA Vulkan for 2^28 `u32` against 441 and 1,496 µs, and on CUDA 249 and 611 µs
/// against 273 and 1,140 µs.
fn subgroup_form_applies(queue: &impl AsStream) -> bool {
    queue.device().info().caps.subgroup_size.is_some()
        && crate::tune::pinned(&THREE_PASS_FORMS) != Some(0)
}

/// The three passes' forms by the names `tune::with_candidate` pins: marks in a shared
/// tile, and the subgroup form (the scan's names for its own two forms).
const THREE_PASS_FORMS: [&str; 2] = ["three-pass", "three-pass-subgroup"];

/// Where a single pass may run (CUDA, outputs with room for every element): the form the
/// tuner chooses of [`SELECTION_FORMS`], the single pass's two (the scan's forms: wide
/// tiles hold twice `ITEMS` per thread, 0.63× of a copy against 0.52× for 2^28 `u32` on
/// an H200, 2026-11-27; narrow ones `ITEMS`) or the three passes with subgroups (with
/// byte flags on an H200, 2026-11-29, 0.87× of a copy against the single pass's 0.66×,
/// once their count reads the flags a word at a time: the look-back's wait weighs more
/// once the flags are smaller); returns the number
/// kept. The tuner keeps a choice per flag layout. Measured and dropped (H200,
/// 2026-11-29, `docs/benchmarks.md`): tiles of four times `ITEMS` (0.59× against
/// 0.62×), ranks from warp ballots instead of the shared tile (0.51× and 0.53×), and
/// each kept element loaded as it is moved instead of held from the start (0.54×: 32
/// registers and 94 % occupancy instead of 48 and 60 %, but its loads are issued only
/// after the look-back).
fn tuned<T: Num, const MODE: u32, const INDICES: u32, const FLAGS: u32>(
    queue: &impl AsStream,
    op: &'static str,
    input: &Buffer<T>,
    flags: &impl KernelBuffer<u32>,
    out: &mut Buffer<T>,
    idx: &mut Buffer<u32>,
    indices_given: bool,
) -> Result<usize> {
    let run = |form: usize, out: &mut Buffer<T>, idx: &mut Buffer<u32>| {
        let total = match form {
            0 => single_pass_with::<T, MODE, INDICES, { 2 * ITEMS }, FLAGS>(
                queue, input, flags, out, idx,
            )?,
            1 => single_pass_with::<T, MODE, INDICES, ITEMS, FLAGS>(queue, input, flags, out, idx)?,
            _ => {
                return three_passes::<T, MODE, INDICES, FLAGS>(
                    queue,
                    op,
                    input,
                    flags,
                    out,
                    idx,
                    indices_given,
                )
            }
        };
        Ok(queue.read_buffer(&total)?[0] as usize)
    };
    let n = input.len();
    // The three passes' subgroup form competes where the device has subgroups.
    let forms = if subgroup_form_applies(queue) {
        &SELECTION_FORMS[..]
    } else {
        &SELECTION_FORMS[..2]
    };
    // Unique reads no flags (it compares neighbours): its key says so rather than naming
    // the word layout its kernels are instantiated with.
    let layout = if MODE == UNIQUE {
        "no"
    } else {
        FLAG_LAYOUTS[FLAGS as usize]
    };
    let what = format!("{:?}, {layout} flags", <T as Element>::TYPE);
    let key = crate::tune::key(queue, op, &what, n);
    let form = crate::tune::choose_on(
        queue,
        &key,
        n,
        forms,
        |i| run(i, out, idx).map(drop),
        || queue.device().synchronize(),
    )?;
    run(form, out, idx)
}

/// The forms [`tuned`] chooses from, by the names `tune::with_candidate` pins: the single
/// pass's two ([`SINGLE_PASS_FORMS`]), then the three passes with subgroups.
const SELECTION_FORMS: [&str; 3] = [
    SINGLE_PASS_FORMS[0],
    SINGLE_PASS_FORMS[1],
    THREE_PASS_FORMS[1],
];

/// The flag layouts by name, as the tuner's keys tell them apart (`WORD_FLAGS`,
/// `BYTE_FLAGS`).
const FLAG_LAYOUTS: [&str; 2] = ["word", "byte"];

/// The single pass with `SPAN` elements per thread: zeroed status words and tile
/// counter, one launch; returns the buffer the last tile writes the total kept to.
fn single_pass_with<
    T: Num,
    const MODE: u32,
    const INDICES: u32,
    const SPAN: u32,
    const FLAGS: u32,
>(
    queue: &impl AsStream,
    input: &Buffer<T>,
    flags: &impl KernelBuffer<u32>,
    out: &mut Buffer<T>,
    idx: &mut Buffer<u32>,
) -> Result<Buffer<u32>> {
    let n = input.len() as u32;
    let tiles = n.div_ceil(GROUP * SPAN);
    let (mut status, mut counter) = look_back_state(queue, tiles)?;
    let mut total = queue.scratch::<u32>(1)?;
    let groups = Launch::threads(tiles as usize * GROUP as usize).group(GROUP);
    select_single_pass::launch::<T, MODE, INDICES, SPAN, FLAGS>(
        queue,
        groups,
        input,
        flags,
        out,
        idx,
        &mut status,
        &mut counter,
        &mut total,
        n,
    )?;
    Ok(total)
}

/// Copies the elements of `input` whose flag is not zero to the start of `output`, in
/// order, and returns how many. `output` needs room only for those; the rest of it is
/// left as it was. The flags are `u32` or `u8` ([`Flag`]; bytes move a quarter of the
/// flags' bytes).
///
/// ```
/// use dotcompute::prelude::*;
/// let d = Device::cpu();
/// let x = d.upload(&[10u32, 11, 12, 13, 14])?;
/// let flags = d.upload(&[1u32, 0, 0, 7, 1])?;
/// let mut y = d.alloc_filled::<u32>(3, 0)?;
/// assert_eq!(dotcompute_ops::select::copy_if(&d, &x, &flags, &mut y)?, 3);
/// assert_eq!(y.to_vec()?, [10, 13, 14]);
/// // One byte a flag, as a `bool` array holds them.
/// let bytes = d.upload(&[0u8, 1, 1, 0, 0])?;
/// assert_eq!(dotcompute_ops::select::copy_if(&d, &x, &bytes, &mut y)?, 2);
/// assert_eq!(y.to_vec()?[..2], [11, 12]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn copy_if<T: Num, F: Flag>(
    queue: &impl AsStream,
    input: &Buffer<T>,
    flags: &Buffer<F>,
    output: &mut Buffer<T>,
) -> Result<usize> {
    const OP: &str = "copy_if";
    crate::len_matches_input(OP, "the flags have", input.len(), flags.len())?;
    if input.is_empty() {
        return Ok(0);
    }
    if crate::host::is_cpu(queue) {
        let (x, f) = (
            crate::host::elements(queue, input)?,
            crate::host::elements(queue, flags)?,
        );
        // Slices, so that the loops index them without looking at the `Cow` each time.
        let (x, f): (&[T], &[F]) = (&x, &f);
        return host_compact(OP, x, |i| f[i].is_set(), output);
    }
    flagged_on_device::<T, F, COPY_IF>(queue, OP, input, flags, output)
}

/// Stable partition: the elements whose flag is not zero, in order, then the others,
/// in order, into `output` (as long as `input`); returns how many were selected. The
/// flags are `u32` or `u8` ([`Flag`]).
///
/// ```
/// use dotcompute::prelude::*;
/// let d = Device::cpu();
/// let x = d.upload(&[1.5f32, 2.5, 3.5, 4.5])?;
/// let flags = d.upload(&[0u32, 1, 0, 1])?;
/// let mut y = d.alloc::<f32>(4)?;
/// assert_eq!(dotcompute_ops::select::partition(&d, &x, &flags, &mut y)?, 2);
/// assert_eq!(y.to_vec()?, [2.5, 4.5, 1.5, 3.5]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn partition<T: Num, F: Flag>(
    queue: &impl AsStream,
    input: &Buffer<T>,
    flags: &Buffer<F>,
    output: &mut Buffer<T>,
) -> Result<usize> {
    const OP: &str = "partition";
    crate::len_matches_input(OP, "the flags have", input.len(), flags.len())?;
    crate::same_len(OP, input.len(), output.len())?;
    if input.is_empty() {
        return Ok(0);
    }
    if crate::host::is_cpu(queue) {
        let (x, f) = (
            crate::host::elements(queue, input)?,
            crate::host::elements(queue, flags)?,
        );
        // Slices, so that the loops index them without looking at the `Cow` each time.
        let (x, f): (&[T], &[F]) = (&x, &f);
        let keep = |i: usize| f[i].is_set();
        let counts = crate::host::count_kept(x.len(), keep);
        crate::host::fill_output(output, |y| {
            let (selected, rest) = y.split_at_mut(counts.total);
            crate::host::write_kept(x.len(), &counts, |i| x[i], keep, selected, Some(rest))
        })?;
        return Ok(counts.total);
    }
    flagged_on_device::<T, F, PARTITION>(queue, OP, input, flags, output)
}

/// Copies the first element of every run of equal consecutive elements (by `==`: a
/// NaN is never equal to the one before it, `-0.0` equals `0.0`) to the start of
/// `output`, and returns how many (as `Vec::dedup`).
///
/// ```
/// use dotcompute::prelude::*;
/// let d = Device::cpu();
/// let x = d.upload(&[1i32, 1, 2, 2, 2, 1, 3])?;
/// let mut y = d.alloc_filled::<i32>(7, 0)?;
/// assert_eq!(dotcompute_ops::select::unique(&d, &x, &mut y)?, 4);
/// assert_eq!(y.to_vec()?[..4], [1, 2, 1, 3]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn unique<T: Num>(
    queue: &impl AsStream,
    input: &Buffer<T>,
    output: &mut Buffer<T>,
) -> Result<usize> {
    const OP: &str = "unique";
    if input.is_empty() {
        return Ok(0);
    }
    if crate::host::is_cpu(queue) {
        let x = crate::host::elements(queue, input)?;
        let x: &[T] = &x;
        return host_compact(OP, x, |i| starts_run(x, i), output);
    }
    let no_flags = no_flags(queue)?;
    select_on_device::<T, UNIQUE, 0, WORD_FLAGS>(queue, OP, input, &no_flags, output, None)
}

/// Run-length encoding: for every run of equal consecutive elements (as [`unique`]),
/// its value in `values` and its length in `counts`; returns the number of runs. Both
/// outputs need room only for the runs.
///
/// ```
/// use dotcompute::prelude::*;
/// let d = Device::cpu();
/// let x = d.upload(&[7u32, 7, 7, 2, 9, 9])?;
/// let (mut values, mut counts) = (d.alloc::<u32>(6)?, d.alloc::<u32>(6)?);
/// let runs = dotcompute_ops::select::run_length_encode(&d, &x, &mut values, &mut counts)?;
/// assert_eq!(runs, 3);
/// assert_eq!(values.to_vec()?[..3], [7, 2, 9]);
/// assert_eq!(counts.to_vec()?[..3], [3, 1, 2]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn run_length_encode<T: Num>(
    queue: &impl AsStream,
    input: &Buffer<T>,
    values: &mut Buffer<T>,
    counts: &mut Buffer<u32>,
) -> Result<usize> {
    const OP: &str = "run_length_encode";
    let n = index_len(OP, input.len())?;
    if n == 0 {
        return Ok(0);
    }
    if crate::host::is_cpu(queue) {
        let x = crate::host::elements(queue, input)?;
        let x: &[T] = &x;
        // The runs' first indices (as `unique` keeps them), then each run's value and
        // the distance to the next run's start.
        let keep = |i: usize| starts_run(x, i);
        let found = crate::host::count_kept(x.len(), keep);
        let runs = found.total;
        check_room(OP, values.len(), runs)?;
        check_room(OP, counts.len(), runs)?;
        let mut starts = vec![0u32; runs];
        crate::host::write_kept(x.len(), &found, |i| i as u32, keep, &mut starts, None);
        crate::host::fill_output(values, |v| {
            v[..runs]
                .par_iter_mut()
                .zip(&starts)
                .for_each(|(o, &at)| *o = x[at as usize])
        })?;
        crate::host::fill_output(counts, |c| {
            c[..runs].par_iter_mut().enumerate().for_each(|(r, o)| {
                let next = starts.get(r + 1).map_or(n, |&s| s);
                *o = next - starts[r];
            })
        })?;
        return Ok(runs);
    }
    // The run starts (indices of the unique elements), then the lengths between them.
    let mut heads = queue.scratch::<T>(input.len())?;
    let mut starts = queue.scratch::<u32>(input.len())?;
    let no_flags = no_flags(queue)?;
    let runs = select_on_device::<T, UNIQUE, 1, WORD_FLAGS>(
        queue,
        OP,
        input,
        &no_flags,
        &mut heads,
        Some(&mut starts),
    )?;
    check_room(OP, values.len(), runs)?;
    check_room(OP, counts.len(), runs)?;
    run_lengths::launch::<T>(
        queue,
        Launch::threads(runs as usize).group(GROUP),
        input,
        &starts,
        values,
        counts,
        runs as u32,
        n,
    )?;
    Ok(runs)
}

/// [`select_on_device`] for an operation by flags (`COPY_IF`, `PARTITION`): its kernels
/// built for the flags' layout, `F::FORM` (a constant of each flag type, fixed here once
/// for the whole call).
fn flagged_on_device<T: Num, F: Flag, const MODE: u32>(
    queue: &impl AsStream,
    op: &'static str,
    input: &Buffer<T>,
    flags: &Buffer<F>,
    output: &mut Buffer<T>,
) -> Result<usize> {
    let words = &F::words(flags);
    if F::FORM == BYTE_FLAGS {
        select_on_device::<T, MODE, 0, BYTE_FLAGS>(queue, op, input, words, output, None)
    } else {
        select_on_device::<T, MODE, 0, WORD_FLAGS>(queue, op, input, words, output, None)
    }
}

/// The flags argument of operations without flags (`UNIQUE`, which never reads it).
fn no_flags(queue: &impl AsStream) -> Result<Buffer<u32>> {
    crate::scratch_filled(queue, 1, 0u32)
}

/// The element type of a flags buffer: `u32` (a word a flag) or `u8` (a byte a flag, as
/// a `bool` array holds them, and as CUB's selection benchmark passes them: a quarter of
/// the flags' traffic). Any flag that is not zero selects its element.
pub trait Flag: Element + private::Sealed {
    /// Whether the flag selects its element (it is not zero).
    fn is_set(self) -> bool;
    /// The flags as the kernels read them (`flags: &[u32]`).
    #[doc(hidden)]
    type Words<'a>: KernelBuffer<u32>
    where
        Self: 'a;
    /// How [`Flag::Words`] holds them: `WORD_FLAGS` or `BYTE_FLAGS`.
    #[doc(hidden)]
    const FORM: u32;
    #[doc(hidden)]
    fn words(flags: &Buffer<Self>) -> Self::Words<'_>;
}

impl Flag for u32 {
    fn is_set(self) -> bool {
        self != 0
    }
    type Words<'a> = BufferView<'a, u32>;
    const FORM: u32 = WORD_FLAGS;
    fn words(flags: &Buffer<u32>) -> BufferView<'_, u32> {
        flags.view()
    }
}

impl Flag for u8 {
    fn is_set(self) -> bool {
        self != 0
    }
    type Words<'a> = ByteWords<'a>;
    const FORM: u32 = BYTE_FLAGS;
    fn words(flags: &Buffer<u8>) -> ByteWords<'_> {
        flags.as_words()
    }
}

/// Only this module's flag types.
mod private {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u8 {}
}

/// Whether element `i` of `x` starts a run of equal consecutive elements (the CPU device's
/// `unique` and `run_length_encode`): as `Vec::dedup`, by `==`.
fn starts_run<T: PartialEq>(x: &[T], i: usize) -> bool {
    i == 0 || x[i] != x[i - 1]
}

/// The CPU device's copy-if and unique: the elements of `x` whose index `keep` accepts, in
/// order, to the start of `output` (in place), after its room is checked; how many.
fn host_compact<T: Num>(
    op: &'static str,
    x: &[T],
    keep: impl Fn(usize) -> bool + Sync,
    output: &mut Buffer<T>,
) -> Result<usize> {
    let counts = crate::host::count_kept(x.len(), &keep);
    check_room(op, output.len(), counts.total)?;
    crate::host::fill_output(output, |y| {
        crate::host::write_kept(x.len(), &counts, |i| x[i], &keep, y, None)
    })?;
    Ok(counts.total)
}

fn check_room(op: &'static str, room: usize, needed: usize) -> Result<()> {
    if room >= needed {
        Ok(())
    } else {
        Err(invalid(
            op,
            format!("the output has room for {room} elements, {needed} are kept"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The single pass builds and validates in each mode it serves (it runs only on
    /// CUDA, so this is what a machine without it can check).
    #[test]
    fn the_single_pass_builds_for_copy_if_and_unique() {
        select_single_pass::ir::<u32, COPY_IF, 0, ITEMS, WORD_FLAGS>().unwrap();
        select_single_pass::ir::<u32, COPY_IF, 0, ITEMS, BYTE_FLAGS>().unwrap();
        select_single_pass::ir::<f64, COPY_IF, 1, { 2 * ITEMS }, WORD_FLAGS>().unwrap();
        select_single_pass::ir::<i32, UNIQUE, 0, ITEMS, WORD_FLAGS>().unwrap();
    }
}
