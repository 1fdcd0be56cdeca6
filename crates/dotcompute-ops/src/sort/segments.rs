//! Segmented sort: each segment `offsets[s]..offsets[s + 1]` sorted on its own, stably.
//!
//! Built from the radix sort in two stable passes (the order of equal keys is kept by
//! both): (1) the keys with their positions are sorted whole, then (2) the positions are
//! sorted again, stably, by the segment each came from, over only the bits that number
//! the segments. Within a segment the positions stay in key order, so gathering the keys
//! (and values) through them gives every segment sorted. Segment numbers are made on the
//! host from the offsets, which are read there to be checked anyway. It costs two sorts
//! and three gathers whatever the segment sizes; a one-group-per-segment sort for many
//! small segments would be faster and is not written yet.

use super::{order_flip, radix_sort, RadixKey};
use crate::{index_len, len_matches_input, read_covering_offsets, Order};
use dotcompute::prelude::*;
use dotcompute::{AsStream, Buffer, Result};

/// `out[i] = src[at[i]]`.
#[kernel]
pub(crate) fn gather<T: Num>(src: &[T], at: &[u32], out: &mut [T]) {
    let i = global_id().x;
    if i < out.len() {
        out[i] = src[at[i]];
    }
}

/// Sorts every segment of `keys` in place, stably; `offsets` (`segments + 1` of them,
/// from 0 to the length, not decreasing) bound the segments, and empty segments are
/// allowed.
///
/// ```
/// use dotcompute::prelude::*;
/// use dotcompute_ops::{sort::sort_segments_keys, Order};
/// let d = Device::cpu();
/// let mut k = d.upload(&[3u32, 1, 2, 9, 7, 8])?;
/// let offsets = d.upload(&[0u32, 3, 3, 6])?;
/// sort_segments_keys(&d, &mut k, &offsets, Order::Ascending)?;
/// assert_eq!(k.to_vec()?, [1, 2, 3, 7, 8, 9]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn sort_segments_keys<K: RadixKey>(
    queue: &impl AsStream,
    keys: &mut Buffer<K>,
    offsets: &Buffer<u32>,
    order: Order,
) -> Result<()> {
    segmented::<K, u32>(queue, "sort_segments_keys", keys, None, offsets, order)
}

/// As [`sort_segments_keys`], moving `values` with the keys.
///
/// ```
/// use dotcompute::prelude::*;
/// use dotcompute_ops::{sort::sort_segments_pairs, Order};
/// let d = Device::cpu();
/// let mut k = d.upload(&[3u32, 1, 2, 9, 7, 8])?;
/// let mut v = d.upload(&[0u32, 1, 2, 3, 4, 5])?;
/// let offsets = d.upload(&[0u32, 3, 6])?;
/// sort_segments_pairs(&d, &mut k, &mut v, &offsets, Order::Descending)?;
/// assert_eq!(k.to_vec()?, [3, 2, 1, 9, 8, 7]);
/// assert_eq!(v.to_vec()?, [0, 2, 1, 3, 5, 4]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn sort_segments_pairs<K: RadixKey, V: Num>(
    queue: &impl AsStream,
    keys: &mut Buffer<K>,
    values: &mut Buffer<V>,
    offsets: &Buffer<u32>,
    order: Order,
) -> Result<()> {
    segmented(
        queue,
        "sort_segments_pairs",
        keys,
        Some(values),
        offsets,
        order,
    )
}

fn segmented<K: RadixKey, V: Num>(
    queue: &impl AsStream,
    op: &'static str,
    keys: &mut Buffer<K>,
    values: Option<&mut Buffer<V>>,
    offsets: &Buffer<u32>,
    order: Order,
) -> Result<()> {
    let n = keys.len();
    if let Some(v) = &values {
        len_matches_input(op, "the values have", n, v.len())?;
    }
    let segment_of = segment_numbers(queue, op, offsets, n)?;
    index_len(op, n)?;
    super::check_key_type::<K>(queue, op)?;
    if n <= 1 {
        return Ok(());
    }
    if crate::host::is_cpu(queue) {
        return host_segmented(queue, keys, values, &segment_of, order);
    }
    let segments = segment_of.last().map_or(1, |&s| s + 1);
    // Bits that number the segments (at least one: the sort takes a non-empty range).
    let segment_bits = (32 - (segments - 1).leading_zeros()).max(1);
    let mut at = crate::index_in_rows(queue, n, n)?;
    let mut sorted_keys = queue.scratch::<K>(n)?;
    queue.copy_buffer(keys, &mut sorted_keys)?;
    radix_sort::<K, u32, 1>(
        queue,
        op,
        &mut sorted_keys,
        Some(&mut at),
        order,
        0..K::WIDTH,
    )?;
    let segment_of = queue.scratch_from(&segment_of)?;
    let mut segment_keys = queue.scratch::<u32>(n)?;
    let threads = Launch::threads(n);
    gather::launch(queue, threads, &segment_of, &at, &mut segment_keys)?;
    radix_sort::<u32, u32, 1>(
        queue,
        op,
        &mut segment_keys,
        Some(&mut at),
        Order::Ascending,
        0..segment_bits,
    )?;
    gather::launch(queue, threads, keys, &at, &mut sorted_keys)?;
    queue.copy_buffer(&sorted_keys, keys)?;
    if let Some(values) = values {
        let mut moved = queue.scratch::<V>(n)?;
        gather::launch(queue, threads, values, &at, &mut moved)?;
        queue.copy_buffer(&moved, values)?;
    }
    Ok(())
}

/// The segment of every element, from checked offsets that start at 0 and end at `n`.
fn segment_numbers(
    queue: &impl AsStream,
    op: &'static str,
    offsets: &Buffer<u32>,
    n: usize,
) -> Result<Vec<u32>> {
    let bounds = read_covering_offsets(queue, op, offsets, n)?;
    let mut segment_of = Vec::with_capacity(n);
    for (s, w) in bounds.windows(2).enumerate() {
        segment_of.resize(segment_of.len() + (w[1] - w[0]) as usize, s as u32);
    }
    Ok(segment_of)
}

/// The CPU device's segmented sort: each segment sorted stably by the compared bits.
fn host_segmented<K: RadixKey, V: Num>(
    queue: &impl AsStream,
    keys: &mut Buffer<K>,
    values: Option<&mut Buffer<V>>,
    segment_of: &[u32],
    order: Order,
) -> Result<()> {
    let flip = order_flip::<K>(order);
    let compared = |k: K| k.ordered_bits() ^ flip;
    let k = queue.read_buffer(keys)?;
    let v = match &values {
        Some(v) => Some(queue.read_buffer(v)?),
        None => None,
    };
    // One stable sort by (segment, compared bits) is every segment's stable sort.
    let mut order: Vec<u32> = (0..k.len() as u32).collect();
    order.sort_by_key(|&i| (segment_of[i as usize], compared(k[i as usize])));
    let sorted: Vec<K> = order.iter().map(|&i| k[i as usize]).collect();
    keys.write(&sorted)?;
    if let (Some(values), Some(v)) = (values, v) {
        let moved: Vec<V> = order.iter().map(|&i| v[i as usize]).collect();
        values.write(&moved)?;
    }
    Ok(())
}
