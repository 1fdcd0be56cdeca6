//! Transpose of a row-major matrix of any shape and any kernel type (`u32 i32 f32 u64
//! i64 f64`, and `f16` on devices with it: its values pass through float registers, so a
//! signalling NaN may arrive quieted), through a padded shared tile: each group reads a
//! 32-column tile with coalesced row reads and writes its transpose with coalesced row writes (the
//! padding column keeps a column's shared reads on distinct banks).
//!
//! The tuner ([`crate::tune`]) chooses the tiles' order and height (candidates
//! `row-raster`, `column-raster`, and both with `-64` and `-128` rows per tile): along the
//! input's rows (group `x` is the tile's column), or down its columns (group `x` is the
//! tile's row), so that the groups running at once write neighbouring pieces of the same
//! output rows. Where output rows are not 32-byte aligned (an odd row count), each
//! tile's writes begin and end in sectors shared with a neighbouring tile: the column
//! order brings both halves to the L2 cache together, and taller tiles share fewer; the
//! `-sectors` candidates ([`transpose_sector_writes`]) share none (8191 × 8193 `u32` on an
//! H200: 0.86× of a copy → 0.90–0.92×).

use crate::{index_len, invalid};
use dotcompute::prelude::*;
use dotcompute::{AsStream, Buffer, Result};

/// A tile's columns (input columns, output rows); a group is `TILE × ROWS` threads.
const TILE: u32 = 32;
const ROWS: u32 = 8;

/// The candidates: (name, tile order, input rows per tile). Taller tiles write longer
/// runs of each output row, so that fewer 32-byte sectors are shared between tiles
/// where output rows are not aligned (on an H200, 8191 × 8193 ran at 2.7 TB/s in 32-row
/// tiles where 8192 × 8193 ran at 3.6). Tiles of 256 rows were measured and dropped
/// (H200, 2026-11-30, run176: 8191 × 8193 on CUDA 187–188 µs in the column order against
/// 157–158 for 128 rows; slower at every `u32` size on both backends, ahead only in
/// CUDA's 2^22 `f16` case, 7.3 against 7.7 µs).
///
/// The `-sectors` forms ([`transpose_sector_writes`]) shift each output row's pieces so
/// that every warp's writes start on a 32-byte sector: the library's kernel (harness,
/// H200, 2026-11-30, run196) read 0.933× of a copy at 8192 × 8192, 0.891× at 8191 × 8192
/// (output rows misaligned) with 128-row tiles and 0.856× at 8191 × 8193.
const CANDIDATES: [(&str, u32, u32, bool); 8] = [
    ("row-raster", 0, 32, false),
    ("column-raster", 1, 32, false),
    ("row-raster-64", 0, 64, false),
    ("column-raster-64", 1, 64, false),
    ("row-raster-128", 0, 128, false),
    ("column-raster-128", 1, 128, false),
    ("column-raster-64-sectors", 1, 64, true),
    ("column-raster-128-sectors", 1, 128, true),
];

/// The most input rows a thread loads into registers before its tile's shared stores:
/// `(TALL + EXTRA) / ROWS` for the tallest tile (128 rows, and 16 more for 2-byte
/// elements' sectors); a kernel's array has this length (Rust's array lengths cannot be
/// computed from const parameters) and uses the first `(TALL + EXTRA) / ROWS`.
const MOST_HELD: u32 = 18;

// Every candidate's loads fit the kernels' arrays (a sector form's extra rows are at most
// 16, for 2-byte elements): a taller candidate fails the build, not a kernel at run time.
const _: () = {
    let mut i = 0;
    while i < CANDIDATES.len() {
        let extra = if CANDIDATES[i].3 { 16 } else { 0 };
        assert!((CANDIDATES[i].2 + extra) / ROWS <= MOST_HELD);
        i += 1;
    }
};

/// One `TALL × TILE` tile (input rows `y0..y0 + TALL`, columns `x0..x0 + TILE`) per
/// group: read by rows into shared memory, written as `TILE` output rows of `TALL`.
/// Every load is made before any shared store, so that a thread's loads are in flight
/// together; unguarded in whole tiles, since a load under a branch is not issued early.
#[kernel]
fn transpose_kernel<T: Num, const COLUMN_FIRST: u32, const TALL: u32>(
    input: &[T],
    out: &mut [T],
    w: u32,
    h: u32,
) {
    let tile = shared::<T, { TALL * (TILE + 1) }>();
    let lx = local_id().x;
    let ly = local_id().y;
    let mut tile_x = group_id().x;
    let mut tile_y = group_id().y;
    if COLUMN_FIRST == 1 {
        tile_x = group_id().y;
        tile_y = group_id().x;
    }
    let x = tile_x * TILE + lx;
    let y0 = tile_y * TALL;
    let whole = tile_x * TILE + TILE <= w && y0 + TALL <= h;
    let mut held = [T::zero(); MOST_HELD as usize];
    if whole {
        for k in 0..TALL / ROWS {
            held[k] = input[(y0 + ly + k * ROWS) * w + x];
        }
    } else {
        for k in 0..TALL / ROWS {
            let y = y0 + ly + k * ROWS;
            if x < w && y < h {
                held[k] = input[y * w + x];
            }
        }
    }
    for k in 0..TALL / ROWS {
        tile[(ly + k * ROWS) * (TILE + 1) + lx] = held[k];
    }
    barrier();
    // Output rows `ox0 + c` (input columns), columns `y0 + j` (input rows).
    let ox0 = tile_x * TILE;
    for k in 0..TILE / ROWS {
        let c = ly + k * ROWS;
        let ox = ox0 + c;
        for m in 0..TALL / TILE {
            let j = lx + m * TILE;
            let oy = y0 + j;
            if oy < h && ox < w {
                out[ox * h + oy] = tile[j * (TILE + 1) + c];
            }
        }
    }
}

/// [`transpose_kernel`] in the column order with each output row's piece shifted back by
/// `s` = (the row's first element's index + `y0`) mod `SECTOR` (the elements of a 32-byte
/// sector), so that a warp's 32 writes start on a sector and no sector is shared with the
/// neighbouring tile: a tile writes output columns `y0 − s .. y0 + TALL − s` of each of
/// its output rows (every tile of a row has the same `s`, so the pieces still partition
/// the row; the grid has a tile more where the last piece falls short), and reads input
/// rows `y0 − EXTRA .. y0 + TALL` (`EXTRA`: `SECTOR` rounded up to a whole number of the
/// group's rows of threads; rows the tile before has just read). Loads as in
/// [`transpose_kernel`]: all before any shared store, unguarded in whole tiles.
#[kernel]
fn transpose_sector_writes<T: Num, const TALL: u32, const SECTOR: u32, const EXTRA: u32>(
    input: &[T],
    out: &mut [T],
    w: u32,
    h: u32,
) {
    let tile = shared::<T, { (TALL + EXTRA) * (TILE + 1) }>();
    let lx = local_id().x;
    let ly = local_id().y;
    let tile_x = group_id().y;
    let y0 = group_id().x * TALL;
    let x = tile_x * TILE + lx;
    // Whole: every row read and every element written lies inside the matrix.
    let whole = y0 >= EXTRA && y0 + TALL <= h && tile_x * TILE + TILE <= w;
    // `held[k]`, then tile row `ly + k·ROWS`: input row `y0 + ly + k·ROWS − EXTRA`.
    let mut held = [T::zero(); MOST_HELD as usize];
    if whole {
        for k in 0..(TALL + EXTRA) / ROWS {
            held[k] = input[(y0 + ly + k * ROWS - EXTRA) * w + x];
        }
    } else {
        for k in 0..(TALL + EXTRA) / ROWS {
            let shifted = y0 + ly + k * ROWS;
            if shifted >= EXTRA && shifted - EXTRA < h && x < w {
                held[k] = input[(shifted - EXTRA) * w + x];
            }
        }
    }
    for k in 0..(TALL + EXTRA) / ROWS {
        tile[(ly + k * ROWS) * (TILE + 1) + lx] = held[k];
    }
    barrier();
    let ox0 = tile_x * TILE;
    for k in 0..TILE / ROWS {
        let c = ly + k * ROWS;
        let ox = ox0 + c;
        if ox < w {
            let s = (ox * h + y0) & (SECTOR - 1);
            for m in 0..TALL / TILE {
                let j = lx + m * TILE;
                let shifted = y0 + j;
                if shifted >= s && shifted - s < h {
                    out[ox * h + shifted - s] = tile[(j + EXTRA - s) * (TILE + 1) + c];
                }
            }
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
    if crate::host::is_cpu(queue) {
        return on_host(queue, input, rows, cols, output);
    }
    let (w, h) = (cols as u32, rows as u32);
    let tiles_x = cols.div_ceil(TILE as usize);
    // The column order puts the column tiles in the grid's `y`, which devices limit to
    // 65,535 (CUDA): wider matrices keep the row order.
    let candidates: Vec<(&str, u32, u32, bool)> = CANDIDATES
        .into_iter()
        .filter(|c| c.1 == 0 || tiles_x <= 65_535)
        .collect();
    let names: Vec<&str> = candidates.iter().map(|c| c.0).collect();
    // Elements of a 32-byte sector (element sizes are 2, 4 or 8 bytes).
    let sector = 32 / std::mem::size_of::<T>() as u32;
    let run = |i: usize, output: &mut Buffer<T>| {
        let (_, column_first, tall, sectors) = candidates[i];
        if sectors {
            // A tile more where the last piece of a row ends short of it.
            let tiles_y = (rows + sector as usize - 1).div_ceil(tall as usize);
            let grid = Launch::grid2d(tiles_y * TILE as usize, tiles_x * ROWS as usize)
                .group2d(TILE, ROWS);
            // (TALL, SECTOR, EXTRA): EXTRA is SECTOR rounded up to a multiple of ROWS.
            let (q, x, y) = (queue, input, output);
            return match (tall, sector) {
                (64, 4) => transpose_sector_writes::launch::<T, 64, 4, 8>(q, grid, x, y, w, h),
                (64, 8) => transpose_sector_writes::launch::<T, 64, 8, 8>(q, grid, x, y, w, h),
                (64, _) => transpose_sector_writes::launch::<T, 64, 16, 16>(q, grid, x, y, w, h),
                (_, 4) => transpose_sector_writes::launch::<T, 128, 4, 8>(q, grid, x, y, w, h),
                (_, 8) => transpose_sector_writes::launch::<T, 128, 8, 8>(q, grid, x, y, w, h),
                _ => transpose_sector_writes::launch::<T, 128, 16, 16>(q, grid, x, y, w, h),
            };
        }
        let tiles_y = rows.div_ceil(tall as usize);
        let (gx, gy) = match column_first {
            0 => (tiles_x, tiles_y),
            _ => (tiles_y, tiles_x),
        };
        let grid = Launch::grid2d(gx * TILE as usize, gy * ROWS as usize).group2d(TILE, ROWS);
        match (column_first, tall) {
            (0, 32) => transpose_kernel::launch::<T, 0, 32>(queue, grid, input, output, w, h),
            (1, 32) => transpose_kernel::launch::<T, 1, 32>(queue, grid, input, output, w, h),
            (0, 64) => transpose_kernel::launch::<T, 0, 64>(queue, grid, input, output, w, h),
            (1, 64) => transpose_kernel::launch::<T, 1, 64>(queue, grid, input, output, w, h),
            (0, _) => transpose_kernel::launch::<T, 0, 128>(queue, grid, input, output, w, h),
            _ => transpose_kernel::launch::<T, 1, 128>(queue, grid, input, output, w, h),
        }
    };
    let what = format!("{:?}", <T as dotcompute::Element>::TYPE);
    let key = crate::tune::key(queue, OP, &what, input.len());
    let order = crate::tune::choose_on(
        queue,
        &key,
        input.len(),
        &names,
        |i| run(i, output),
        || queue.device().synchronize(),
    )?;
    run(order, output)
}

/// The CPU device's transpose, in place in host memory, with the tuner's choice of stores
/// where the CPU can stream them (`host::transpose_forms`): streamed stores do not read
/// the destination first (on the 16-core H200 host, tuned, tiles of 256: 8191 × 8193
/// `u32` 0.48–0.53× of a copy → 0.70–0.77×, 4096 × 4095 0.51–0.58× → 0.76–0.93×;
/// `docs/benchmarks.md`), and the tuner keeps ordinary stores where they win.
fn on_host<T: Num>(
    queue: &impl AsStream,
    input: &Buffer<T>,
    rows: usize,
    cols: usize,
    output: &mut Buffer<T>,
) -> Result<()> {
    let x = crate::host::elements(queue, input)?;
    let forms = crate::host::transpose_forms::<T>();
    let names: Vec<&str> = forms.iter().map(|f| f.0).collect();
    let run = |i: usize, output: &mut Buffer<T>| {
        let form = forms[i].1;
        crate::host::fill_output(output, |y| crate::host::transpose(&x, rows, cols, y, form))
    };
    let what = format!("{:?} on the host", <T as dotcompute::Element>::TYPE);
    let key = crate::tune::key(queue, "transpose", &what, input.len());
    // The host's work is done when `run` returns: nothing to wait for.
    let form = crate::tune::choose_on(
        queue,
        &key,
        input.len(),
        &names,
        |i| run(i, output),
        || Ok(()),
    )?;
    run(form, output)
}

#[cfg(test)]
mod harness {
    /// Writes the CUDA C++ of the `u32` transpose in the column order with tiles of 32,
    /// 64 and 128 rows to `scripts/transpose-harness/`, for `time_generated.cu` there.
    #[test]
    #[ignore = "writes files for scripts/transpose-harness"]
    fn write_the_transposes_cuda_for_the_harness() {
        use dotcompute::{KernelSource, Target};
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scripts/transpose-harness"
        );
        let kernels = [
            ("32", super::transpose_kernel::kernel::<u32, 1, 32>()),
            ("64", super::transpose_kernel::kernel::<u32, 1, 64>()),
            ("128", super::transpose_kernel::kernel::<u32, 1, 128>()),
            (
                "sectors_64",
                super::transpose_sector_writes::kernel::<u32, 64, 8, 8>(),
            ),
            (
                "sectors_128",
                super::transpose_sector_writes::kernel::<u32, 128, 8, 8>(),
            ),
        ];
        for (tall, k) in kernels {
            let path = format!("{dir}/transpose_{tall}_generated.cu");
            std::fs::write(path, k.source(Target::Cuda).unwrap()).unwrap();
        }
    }
}
