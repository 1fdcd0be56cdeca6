//! Top-k: the `k` largest (or smallest) elements of a buffer or of each row of a
//! row-major matrix, in order, with their indices.
//!
//! Order is the sort's ([`RadixKey`]: floats in IEEE total order with NaNs largest), and
//! ties go to the lower index first, because both are made by the stable radix sort: the
//! whole buffer by [`sort_pairs`](crate::sort::sort_pairs) of (element, index), the rows
//! by the segmented sort, after which the first `k` of each row are taken. That sorts
//! every element to find `k`; a selection that keeps only candidates (a radix select, or
//! one group per row holding the row in shared memory) would be faster and is not written
//! yet.

use crate::sort::{radix_sort, sort_segments_pairs, Order, RadixKey};
use crate::{index_in_rows, invalid, len_matches_input};
use dotcompute::prelude::*;
use dotcompute::{AsStream, Buffer, Result};

/// The largest `k` a top-k takes.
pub const MAX_K: usize = 1024;

/// `out[r * k + j] = src[r * cols + j]` for `j < k`: the first `k` of every row.
#[kernel]
fn first_of_rows<T: Num>(src: &[T], out: &mut [T], cols: u32, k: u32) {
    let i = global_id().x;
    if i < out.len() {
        let r = i / k;
        out[i] = src[r * cols + i % k];
    }
}

/// Writes the `k` largest elements of `input` (`Order::Descending`; the smallest with
/// `Order::Ascending`), best first, to `values` and their indices to `indices`; equal
/// elements come in index order. `values` and `indices` must hold `k` elements, and
/// `k` must be at most `input.len()` and [`MAX_K`].
///
/// ```
/// use dotcompute::prelude::*;
/// use dotcompute_ops::{topk::top_k, Order};
/// let d = Device::cpu();
/// let x = d.upload(&[0.5f32, 3.0, -1.0, 3.0, 2.0])?;
/// let (mut v, mut i) = (d.alloc::<f32>(3)?, d.alloc::<u32>(3)?);
/// top_k(&d, &x, Order::Descending, &mut v, &mut i)?;
/// assert_eq!(v.to_vec()?, [3.0, 3.0, 2.0]);
/// assert_eq!(i.to_vec()?, [1, 3, 4]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn top_k<K: RadixKey>(
    queue: &impl AsStream,
    input: &Buffer<K>,
    order: Order,
    values: &mut Buffer<K>,
    indices: &mut Buffer<u32>,
) -> Result<()> {
    const OP: &str = "top_k";
    let n = input.len();
    let k = check(OP, n, 1, values.len(), indices.len())?;
    if k == 0 {
        return Ok(());
    }
    let mut keys = queue.scratch::<K>(n)?;
    queue.copy_buffer(input, &mut keys)?;
    let mut at = index_in_rows(queue, n, n)?;
    radix_sort::<K, u32, 1>(queue, OP, &mut keys, Some(&mut at), order, 0..K::WIDTH)?;
    take_first(queue, &keys, &at, n, k, values, indices)
}

/// Per row of the row-major `input` (rows of `cols` elements): the row's `k` largest
/// (`Order::Descending`) or smallest elements, best first, to row `r` of `values`
/// (`rows × k`), and their column indices to `indices`; equal elements in column order.
///
/// ```
/// use dotcompute::prelude::*;
/// use dotcompute_ops::{topk::top_k_rows, Order};
/// let d = Device::cpu();
/// let x = d.upload(&[1u32, 9, 5, 7, 0, 7])?;
/// let (mut v, mut i) = (d.alloc::<u32>(4)?, d.alloc::<u32>(4)?);
/// top_k_rows(&d, &x, 3, Order::Descending, &mut v, &mut i)?;
/// assert_eq!(v.to_vec()?, [9, 5, 7, 7]);
/// assert_eq!(i.to_vec()?, [1, 2, 0, 2]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn top_k_rows<K: RadixKey>(
    queue: &impl AsStream,
    input: &Buffer<K>,
    cols: usize,
    order: Order,
    values: &mut Buffer<K>,
    indices: &mut Buffer<u32>,
) -> Result<()> {
    const OP: &str = "top_k_rows";
    let n = input.len();
    if cols == 0 || n % cols != 0 {
        return Err(invalid(
            OP,
            format!("{n} elements are not whole rows of {cols}"),
        ));
    }
    let rows = n / cols;
    let k = check(OP, cols, rows, values.len(), indices.len())?;
    if k == 0 || rows == 0 {
        return Ok(());
    }
    let mut keys = queue.scratch::<K>(n)?;
    queue.copy_buffer(input, &mut keys)?;
    let mut columns = index_in_rows(queue, n, cols)?;
    let bounds: Vec<u32> = (0..=rows).map(|r| (r * cols) as u32).collect();
    let offsets = queue.scratch_from(&bounds)?;
    sort_segments_pairs(queue, &mut keys, &mut columns, &offsets, order)?;
    take_first(queue, &keys, &columns, cols, k, values, indices)
}

/// Checks the outputs (`rows × k` each, `k` from their length) against a row of `cols`,
/// and returns `k`.
fn check(
    op: &'static str,
    cols: usize,
    rows: usize,
    values: usize,
    indices: usize,
) -> Result<usize> {
    len_matches_input(op, "the indices have", values, indices)?;
    if rows == 0 {
        return match values {
            0 => Ok(0),
            _ => Err(invalid(
                op,
                format!("there are no rows, but the outputs have {values} elements"),
            )),
        };
    }
    if values % rows != 0 {
        return Err(invalid(
            op,
            format!("the outputs have {values} elements, not k for each of {rows} rows"),
        ));
    }
    let k = values / rows;
    if k > cols || k > MAX_K {
        return Err(invalid(
            op,
            format!(
                "k = {k} (from the outputs' length) is above the row's {cols} elements or the largest k, {MAX_K}"
            ),
        ));
    }
    Ok(k)
}

/// Copies the first `k` of every row of `cols` of the sorted keys and their indices.
fn take_first<K: RadixKey>(
    queue: &impl AsStream,
    keys: &Buffer<K>,
    at: &Buffer<u32>,
    cols: usize,
    k: usize,
    values: &mut Buffer<K>,
    indices: &mut Buffer<u32>,
) -> Result<()> {
    let threads = Launch::threads(values.len());
    let (cols, k) = (cols as u32, k as u32);
    first_of_rows::launch(queue, threads, keys, values, cols, k)?;
    first_of_rows::launch(queue, threads, at, indices, cols, k)
}
