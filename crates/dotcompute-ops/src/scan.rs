//! Prefix sums: exclusive and inclusive, of `u32`, `i32`, `f32` (and the 64-bit types
//! where the device has them).
//!
//! Reduce-then-scan, which needs no forward-progress guarantee between groups (Vulkan
//! gives none, so a decoupled look-back could wait forever there): the input is cut into
//! tiles of `GROUP × ITEMS` elements; (1) each group sums one tile, (2) one group scans the
//! tile sums, (3) each group scans its tile from its offset. Three passes read the input
//! twice. Integer sums wrap (as `+` does in kernels); float sums add each tile in a fixed
//! tree, so a device gives the same bits on every run.

use crate::{index_len, padded, GROUP};
use dotcompute::prelude::*;
use dotcompute::{AsStream, Buffer, Result};

/// Elements per thread of a tile.
const ITEMS: u32 = 16;
/// Elements per tile.
pub(crate) const TILE: u32 = GROUP * ITEMS;
/// The tile in shared memory, one padding element per 32 so that a thread's run of
/// `ITEMS` consecutive elements falls in different banks.
const TILE_PADDED: u32 = TILE + TILE / 32;

/// Inclusive sum of `v` over the group (in `s`, `GROUP` long); `s` is free again when it
/// returns. Every thread of the group must call it.
#[kernel_fn]
pub(crate) fn group_inclusive_sum<T: Num>(s: &mut [T], v: T) -> T {
    let lid = local_id().x;
    s[lid] = v;
    barrier();
    let mut offset = 1u32;
    while offset < GROUP {
        let mut add = T::zero();
        if lid >= offset {
            add = s[lid - offset];
        }
        barrier();
        s[lid] += add;
        barrier();
        offset *= 2;
    }
    let total = s[lid];
    barrier();
    total
}

/// Sums of tiles: `sums[t]` is the sum of tile `t` of `x[..n]`.
#[kernel]
fn tile_sums<T: Num>(x: &[T], sums: &mut [T], n: u32) {
    let s = shared::<T, GROUP>();
    let lid = local_id().x;
    let base = group_id().x * TILE;
    let mut acc = T::zero();
    for r in 0..ITEMS {
        let i = base + r * GROUP + lid;
        if i < n {
            acc += x[i];
        }
    }
    let total = group_inclusive_sum(s, acc);
    if lid == GROUP - 1 {
        sums[group_id().x] = total;
    }
}

/// Exclusive scan of `sums[..count]` in place, by one group, `GROUP × ITEMS` at a time
/// (each thread a run of `ITEMS`: 16 times fewer rounds of barriers than one element per
/// thread, for the 65,536 tile sums of 2^28 elements).
#[kernel]
fn scan_sums<T: Num>(sums: &mut [T], count: u32) {
    let s = shared::<T, GROUP>();
    let carry = shared::<T, 1>();
    let lid = local_id().x;
    if lid == 0 {
        carry[0] = T::zero();
    }
    barrier();
    let mut start = 0u32;
    while start < count {
        let first = start + lid * ITEMS;
        let mut local = T::zero();
        for j in 0..ITEMS {
            let i = first + j;
            if i < count {
                local += sums[i];
            }
        }
        let inclusive = group_inclusive_sum(s, local);
        let before = carry[0];
        let mut running = before + (inclusive - local);
        for j in 0..ITEMS {
            let i = first + j;
            if i < count {
                let v = sums[i];
                sums[i] = running;
                running += v;
            }
        }
        barrier();
        if lid == GROUP - 1 {
            carry[0] = before + inclusive;
        }
        barrier();
        start += TILE;
    }
}

/// Scans each tile from its offset: `y[i]` is `offsets[tile]` plus the sum of the tile's
/// elements before `i` (and `x[i]` itself when `INCLUSIVE` is 1).
#[kernel]
fn scan_tiles<T: Num, const INCLUSIVE: u32>(x: &[T], y: &mut [T], offsets: &[T], n: u32) {
    let tile = shared::<T, TILE_PADDED>();
    let s = shared::<T, GROUP>();
    let lid = local_id().x;
    let base = group_id().x * TILE;
    // Coalesced loads into shared memory (zeros past the end).
    for r in 0..ITEMS {
        let e = r * GROUP + lid;
        let i = base + e;
        let mut v = T::zero();
        if i < n {
            v = x[i];
        }
        tile[padded(e)] = v;
    }
    barrier();
    // Each thread scans its run of ITEMS consecutive elements.
    let mut local = T::zero();
    for j in 0..ITEMS {
        local += tile[padded(lid * ITEMS + j)];
    }
    let inclusive = group_inclusive_sum(s, local);
    let mut running = offsets[group_id().x] + (inclusive - local);
    for j in 0..ITEMS {
        let at = padded(lid * ITEMS + j);
        let v = tile[at];
        if INCLUSIVE == 1 {
            running += v;
            tile[at] = running;
        } else {
            tile[at] = running;
            running += v;
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

/// Types the scans take.
pub trait Scannable: Num + crate::HostArith {}
impl Scannable for u32 {}
impl Scannable for i32 {}
impl Scannable for f32 {}
impl Scannable for u64 {}
impl Scannable for i64 {}
impl Scannable for f64 {}

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
pub fn exclusive_sum<T: Scannable>(
    queue: &impl AsStream,
    input: &Buffer<T>,
    output: &mut Buffer<T>,
) -> Result<()> {
    scan::<T, 0>(queue, "exclusive_sum", input, output)
}

/// `output[i] = input[0] + … + input[i]`.
pub fn inclusive_sum<T: Scannable>(
    queue: &impl AsStream,
    input: &Buffer<T>,
    output: &mut Buffer<T>,
) -> Result<()> {
    scan::<T, 1>(queue, "inclusive_sum", input, output)
}

fn scan<T: Scannable, const INCLUSIVE: u32>(
    queue: &impl AsStream,
    op: &'static str,
    input: &Buffer<T>,
    output: &mut Buffer<T>,
) -> Result<()> {
    crate::same_len(op, input.len(), output.len())?;
    let n = index_len(op, input.len())?;
    if n == 0 {
        return Ok(());
    }
    if crate::host::is_cpu(queue) {
        let x = queue.read_buffer(input)?;
        let mut y = x.clone();
        crate::host::scan(&x, &mut y, INCLUSIVE == 1);
        return output.write(&y);
    }
    let device = queue.device();
    let tiles = n.div_ceil(TILE);
    let mut sums = device.alloc::<T>(tiles as usize)?;
    let groups = Launch::threads(tiles as usize * GROUP as usize).group(GROUP);
    tile_sums::launch::<T>(queue, groups, input, &mut sums, n)?;
    scan_sums::launch::<T>(
        queue,
        Launch::threads(GROUP as usize).group(GROUP),
        &mut sums,
        tiles,
    )?;
    scan_tiles::launch::<T, INCLUSIVE>(queue, groups, input, output, &sums, n)
}
