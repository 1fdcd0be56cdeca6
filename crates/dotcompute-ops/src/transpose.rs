//! Transpose of a row-major matrix of any shape and any kernel type (`u32 i32 f32 u64
//! i64 f64`, and `f16` on devices with it: its values pass through float registers, so a
//! signalling NaN may arrive quieted), through a padded shared tile: each group reads a 32 × 32
//! tile with coalesced row reads and writes its transpose with coalesced row writes (the
//! padding column keeps a column's shared reads on distinct banks).
//!
//! Two orders of the tiles, chosen by the tuner ([`crate::tune`], candidates `row-raster`
//! and `column-raster`): along the input's rows (group `x` is the tile's column), or down
//! its columns (group `x` is the tile's row), so that the groups running at once write
//! neighbouring pieces of the same output rows. Where output rows are not 32-byte
//! aligned (an odd row count), each tile's writes begin and end in sectors shared with a
//! neighbouring tile; with the column order both halves reach the L2 cache together.

use crate::{index_len, invalid};
use dotcompute::prelude::*;
use dotcompute::{AsStream, Buffer, Result};

/// Tile edge; a group is `TILE × ROWS` threads, each moving `TILE / ROWS` elements.
const TILE: u32 = 32;
const ROWS: u32 = 8;

#[kernel]
fn transpose_kernel<T: Num, const COLUMN_FIRST: u32>(input: &[T], out: &mut [T], w: u32, h: u32) {
    let tile = shared::<T, { TILE * (TILE + 1) }>();
    let lx = local_id().x;
    let ly = local_id().y;
    let mut tile_x = group_id().x;
    let mut tile_y = group_id().y;
    if COLUMN_FIRST == 1 {
        tile_x = group_id().y;
        tile_y = group_id().x;
    }
    let x = tile_x * TILE + lx;
    let y0 = tile_y * TILE;
    for k in 0..TILE / ROWS {
        let r = ly + k * ROWS;
        let y = y0 + r;
        if x < w && y < h {
            tile[r * (TILE + 1) + lx] = input[y * w + x];
        }
    }
    barrier();
    // Output row `ox` (an input column), columns `oy`.
    let oy = tile_y * TILE + lx;
    let ox0 = tile_x * TILE;
    for k in 0..TILE / ROWS {
        let c = ly + k * ROWS;
        let ox = ox0 + c;
        if oy < h && ox < w {
            out[ox * h + oy] = tile[lx * (TILE + 1) + c];
        }
    }
}

/// `output = inputᵀ`: `input` is `rows × cols` row-major, `output` becomes `cols × rows`.
///
/// ```
/// use dotcompute::prelude::*;
/// let d = Device::cpu();
/// let x = d.upload(&[1u32, 2, 3, 4, 5, 6])?; // 2 × 3
/// let mut y = d.alloc::<u32>(6)?;
/// dotcompute_ops::transpose::transpose(&d, &x, 2, 3, &mut y)?;
/// assert_eq!(y.to_vec()?, [1, 4, 2, 5, 3, 6]); // 3 × 2
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn transpose<T: Num>(
    queue: &impl AsStream,
    input: &Buffer<T>,
    rows: usize,
    cols: usize,
    output: &mut Buffer<T>,
) -> Result<()> {
    const OP: &str = "transpose";
    if rows.checked_mul(cols) != Some(input.len()) || output.len() != input.len() {
        return Err(invalid(
            OP,
            format!(
                "a {rows} × {cols} matrix needs {} elements in and out; the input has {}, the output {}",
                rows.saturating_mul(cols),
                input.len(),
                output.len()
            ),
        ));
    }
    index_len(OP, input.len())?;
    if input.is_empty() {
        return Ok(());
    }
    let t = TILE as usize;
    let (tiles_x, tiles_y) = (cols.div_ceil(t), rows.div_ceil(t));
    let group = |x_tiles: usize, y_tiles: usize| {
        Launch::grid2d(x_tiles * t, y_tiles * ROWS as usize).group2d(TILE, ROWS)
    };
    // The column order puts the column tiles in the grid's `y`, which devices limit to
    // 65,535 (CUDA): wider matrices keep the row order.
    let orders: &[&str] = if tiles_x <= 65_535 {
        &["row-raster", "column-raster"]
    } else {
        &["row-raster"]
    };
    let run = |order: usize, output: &mut Buffer<T>| {
        if order == 0 {
            transpose_kernel::launch::<T, 0>(
                queue,
                group(tiles_x, tiles_y),
                input,
                output,
                cols as u32,
                rows as u32,
            )
        } else {
            transpose_kernel::launch::<T, 1>(
                queue,
                group(tiles_y, tiles_x),
                input,
                output,
                cols as u32,
                rows as u32,
            )
        }
    };
    let what = format!("{:?}", <T as dotcompute::Element>::TYPE);
    let key = crate::tune::key(queue, OP, &what, input.len());
    let order = crate::tune::choose(
        &key,
        input.len(),
        orders,
        |i| run(i, output),
        || queue.device().synchronize(),
    )?;
    run(order, output)
}
