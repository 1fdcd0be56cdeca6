//! Stable LSD radix sort of 32-bit keys (`u32`, `i32`), alone or with values of any
//! kernel type, ascending or descending, over all key bits or a range of them.
//!
//! Each pass sorts by 4 bits in three steps that need no forward-progress guarantee
//! between groups (reduce-then-scan, as Vulkan requires): (1) each group counts the
//! digits of its tile of 2,048 keys (`GROUP × ITEMS`); (2) an exclusive scan of the
//! digit-major counts gives every (digit, tile) its first output position; (3) each group
//! ranks its keys in rounds of `GROUP`: a thread marks its digit in a `16 × GROUP`
//! table, the table is scanned in digit-major order, and a key's position is its tile's
//! offset for the digit plus the keys of that digit before it (earlier rounds, then
//! lower threads), which keeps equal keys in input order. Keys of `i32` sort by their
//! bits with the sign bit flipped; descending order complements the compared bits, so
//! it is stable too (equal keys keep their input order).

use crate::scan::{exclusive_sum, group_inclusive_sum};
use crate::{index_len, invalid, padded, GROUP};
use dotcompute::prelude::*;
use dotcompute::{AsStream, Buffer, Result};
use std::ops::Range;

/// Bits per pass.
const RADIX_BITS: u32 = 4;
/// Digits per pass.
const RADIX: u32 = 1 << RADIX_BITS;
/// Rounds of `GROUP` keys per tile.
const ITEMS: u32 = 8;
/// Keys per tile.
const TILE: u32 = GROUP * ITEMS;
/// The rank table, `RADIX × GROUP` counters, padded.
const RANKS_PADDED: u32 = RADIX * GROUP + RADIX * GROUP / 32;

/// Key types the sort takes: the bits it compares are the key's, XOR `FLIP`.
pub trait RadixKey: Int + Ord + Send + Sync {
    /// Makes unsigned order of the bits the key's order.
    const FLIP: u32;
    /// The key's bits (host side).
    fn bits(self) -> u32;
}
impl RadixKey for u32 {
    const FLIP: u32 = 0;
    fn bits(self) -> u32 {
        self
    }
}
impl RadixKey for i32 {
    const FLIP: u32 = 0x8000_0000;
    fn bits(self) -> u32 {
        self as u32
    }
}

/// Sort order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Order {
    Ascending,
    Descending,
}

/// Step 1: `counts[d * tiles + t]` is the number of keys of tile `t` with digit `d`.
#[kernel]
fn radix_count<K: Int>(
    keys: &[K],
    counts: &mut [u32],
    n: u32,
    shift: u32,
    mask: u32,
    flip: u32,
    tiles: u32,
) {
    let hist = shared::<u32, RADIX>();
    let lid = local_id().x;
    let tile = group_id().x;
    if lid < RADIX {
        hist[lid] = 0;
    }
    barrier();
    let base = tile * TILE;
    for r in 0..ITEMS {
        let i = base + r * GROUP + lid;
        if i < n {
            let d = ((u32::cast(keys[i]) ^ flip) >> shift) & mask;
            atomic_add(&hist[d], 1u32);
        }
    }
    barrier();
    if lid < RADIX {
        counts[lid * tiles + tile] = hist[lid];
    }
}

/// Step 3: moves each key (and value, when `PAIRS` is 1) of the tile to its position.
#[kernel]
fn radix_scatter<K: Int, V: Num, const PAIRS: u32>(
    keys: &[K],
    values: &[V],
    keys_out: &mut [K],
    values_out: &mut [V],
    offsets: &[u32],
    n: u32,
    shift: u32,
    mask: u32,
    flip: u32,
    tiles: u32,
) {
    let ranks = shared::<u32, RANKS_PADDED>();
    let sums = shared::<u32, GROUP>();
    let run = shared::<u32, RADIX>();
    let lid = local_id().x;
    let tile = group_id().x;
    if lid < RADIX {
        run[lid] = offsets[lid * tiles + tile];
    }
    let base = tile * TILE;
    for r in 0..ITEMS {
        let start = base + r * GROUP;
        let i = start + lid;
        let valid = i < n;
        let mut key = K::zero();
        let mut d = 0u32;
        if valid {
            key = keys[i];
            d = ((u32::cast(key) ^ flip) >> shift) & mask;
        }
        // This thread's segment of the table (digit-major order: e = digit * GROUP + lid).
        for j in 0..RADIX {
            ranks[padded(lid * RADIX + j)] = 0;
        }
        barrier();
        if valid {
            ranks[padded(d * GROUP + lid)] = 1;
        }
        barrier();
        let mut local = 0u32;
        for j in 0..RADIX {
            local += ranks[padded(lid * RADIX + j)];
        }
        let inclusive = group_inclusive_sum(sums, local);
        let mut acc = inclusive - local;
        for j in 0..RADIX {
            let at = padded(lid * RADIX + j);
            let c = ranks[at];
            ranks[at] = acc;
            acc += c;
        }
        barrier();
        if valid {
            let pos = run[d] + (ranks[padded(d * GROUP + lid)] - ranks[padded(d * GROUP)]);
            keys_out[pos] = key;
            if PAIRS == 1 {
                values_out[pos] = values[i];
            }
        }
        barrier();
        if lid < RADIX {
            let mut in_round = 0u32;
            if n > start {
                in_round = (n - start).min(GROUP);
            }
            let first = ranks[padded(lid * GROUP)];
            let mut end = in_round;
            if lid + 1 < RADIX {
                end = ranks[padded((lid + 1) * GROUP)];
            }
            run[lid] += end - first;
        }
        barrier();
    }
}

/// Sorts `keys` in place, stably.
///
/// ```
/// use dotcompute::prelude::*;
/// use dotcompute_ops::{sort::sort_keys, Order};
/// let d = Device::cpu();
/// let mut k = d.upload(&[3i32, -1, 2, i32::MIN])?;
/// sort_keys(&d, &mut k, Order::Ascending)?;
/// assert_eq!(k.to_vec()?, [i32::MIN, -1, 2, 3]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn sort_keys<K: RadixKey>(
    queue: &impl AsStream,
    keys: &mut Buffer<K>,
    order: Order,
) -> Result<()> {
    radix_sort::<K, u32, 0>(queue, "sort_keys", keys, None, order, 0..32)
}

/// Sorts `keys` in place and moves `values` with them; equal keys keep their order.
pub fn sort_pairs<K: RadixKey, V: Num>(
    queue: &impl AsStream,
    keys: &mut Buffer<K>,
    values: &mut Buffer<V>,
    order: Order,
) -> Result<()> {
    radix_sort::<K, V, 1>(queue, "sort_pairs", keys, Some(values), order, 0..32)
}

/// As [`sort_pairs`], comparing only bits `bits` of the keys (as transformed for order:
/// an `i32` key's bit 31 is its flipped sign); the other bits do not affect the order.
pub fn sort_pairs_by_bits<K: RadixKey, V: Num>(
    queue: &impl AsStream,
    keys: &mut Buffer<K>,
    values: &mut Buffer<V>,
    order: Order,
    bits: Range<u32>,
) -> Result<()> {
    radix_sort::<K, V, 1>(queue, "sort_pairs_by_bits", keys, Some(values), order, bits)
}

fn radix_sort<K: RadixKey, V: Num, const PAIRS: u32>(
    queue: &impl AsStream,
    op: &'static str,
    keys: &mut Buffer<K>,
    mut values: Option<&mut Buffer<V>>,
    order: Order,
    bits: Range<u32>,
) -> Result<()> {
    if let Some(v) = &values {
        if v.len() != keys.len() {
            return Err(invalid(
                op,
                format!("{} values for {} keys", v.len(), keys.len()),
            ));
        }
    }
    if bits.start >= bits.end || bits.end > 32 {
        return Err(invalid(
            op,
            format!(
                "key bits {}..{} are not a non-empty range within 0..32",
                bits.start, bits.end
            ),
        ));
    }
    let n = index_len(op, keys.len())?;
    if n <= 1 {
        return Ok(());
    }
    let flip = K::FLIP
        ^ match order {
            Order::Ascending => 0,
            Order::Descending => u32::MAX,
        };
    if crate::host::is_cpu(queue) {
        return host_sort(queue, keys, values, flip, bits);
    }
    let device = queue.device();
    let tiles = n.div_ceil(TILE);
    let mut keys_alt = device.alloc::<K>(n as usize)?;
    // Keys alone still bind a value buffer (one element, never read).
    let value_len = if PAIRS == 1 { n as usize } else { 1 };
    let mut values_alt = device.alloc::<V>(value_len)?;
    let mut no_values = device.alloc::<V>(1)?;
    let mut counts = device.alloc::<u32>((RADIX * tiles) as usize)?;
    let mut offsets = device.alloc::<u32>((RADIX * tiles) as usize)?;
    let groups = Launch::threads((tiles * GROUP) as usize).group(GROUP);
    let mut in_alt = false;
    let mut shift = bits.start;
    while shift < bits.end {
        let width = RADIX_BITS.min(bits.end - shift);
        let mask = (1u32 << width) - 1;
        let (src_k, dst_k) = if in_alt {
            (&keys_alt, &mut *keys)
        } else {
            (&*keys, &mut keys_alt)
        };
        radix_count::launch::<K>(
            queue,
            groups,
            src_k,
            &mut counts,
            n,
            shift,
            mask,
            flip,
            tiles,
        )?;
        exclusive_sum(queue, &counts, &mut offsets)?;
        let user_values: &mut Buffer<V> = match values.as_deref_mut() {
            Some(v) => v,
            None => &mut no_values,
        };
        // Keys alone bind the one-element buffers (never touched) in either direction.
        let (src_v, dst_v) = if PAIRS == 0 || in_alt {
            (&values_alt, &mut *user_values)
        } else {
            (&*user_values, &mut values_alt)
        };
        radix_scatter::launch::<K, V, PAIRS>(
            queue, groups, src_k, src_v, dst_k, dst_v, &offsets, n, shift, mask, flip, tiles,
        )?;
        in_alt = !in_alt;
        shift += width;
    }
    if in_alt {
        queue.copy_buffer(&keys_alt, keys)?;
        if let Some(v) = values {
            queue.copy_buffer(&values_alt, v)?;
        }
    }
    Ok(())
}

/// The CPU device's sort: rayon's (stable for pairs) on the compared bits.
fn host_sort<K: RadixKey, V: Num>(
    queue: &impl AsStream,
    keys: &mut Buffer<K>,
    values: Option<&mut Buffer<V>>,
    flip: u32,
    bits: Range<u32>,
) -> Result<()> {
    use rayon::prelude::*;
    let mut k = queue.read_buffer(keys)?;
    match values {
        None => {
            // All 32 bits are compared (keys alone always are), so the order is the keys'
            // own and equal keys are equal: rayon's unstable sort on the type itself,
            // 3× faster here than through a key function.
            if flip == K::FLIP {
                k.par_sort_unstable();
            } else {
                k.par_sort_unstable_by(|a, b| b.cmp(a));
            }
            keys.write(&k)
        }
        Some(values) => {
            let width = bits.end - bits.start;
            let mask = if width == 32 {
                u32::MAX
            } else {
                (1u32 << width) - 1
            };
            let compared = move |k: K| ((k.bits() ^ flip) >> bits.start) & mask;
            let v = queue.read_buffer(values)?;
            let mut pairs: Vec<(K, V)> = k.into_iter().zip(v).collect();
            pairs.par_sort_by_key(|p| compared(p.0));
            let (k, v): (Vec<K>, Vec<V>) = pairs.into_iter().unzip();
            keys.write(&k)?;
            values.write(&v)
        }
    }
}
