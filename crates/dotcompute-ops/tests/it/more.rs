//! Softmax, transpose and histograms against plain Rust.

use crate::common::{devices, seed, slow};
use dotcompute_ops::histogram::{
    bin_indices_even, bin_indices_even_f32, bin_indices_even_u8, histogram_even,
    histogram_even_f32, histogram_even_u8, NO_BIN,
};
use dotcompute_ops::softmax::{log_softmax_rows, softmax_rows};
use dotcompute_ops::transpose::transpose;
use dotcompute_ops::tune;

/// Every form ([`dotcompute_ops::softmax`]: a subgroup per row, a group per row held, with
/// scalar or 16-byte accesses and 256 or 512 threads a row, read twice) at the edges of
/// its row lengths, against f64 on the host.
#[test]
fn softmax_and_log_softmax_of_any_row_length() {
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        let shapes: &[(usize, usize)] = if slow(&d) {
            &[
                (1, 1),
                (3, 255),
                (5, 257),
                (64, 1000),
                (9, 33),
                (3, 1025),
                (9, 252),
                (3, 1028),
                (2, 4100),
                (2, 9000),
                (2, 40_000),
            ]
        } else {
            &[
                (1, 1),
                (3, 255),
                (5, 257),
                (8192, 1000),
                (1000, 33),
                (7, 1025),
                (3, 2049),
                (5, 8192),
                (64, 16_384),
                (9, 252),
                (4, 260),
                (3, 1028),
                (5, 4100),
                (6, 16_380),
                (2, 16_385),
                (2, 1_000_003),
            ]
        };
        let forms = [
            "held",
            "held, vector loads",
            "held, vector loads, 512 threads a row",
            "read-twice",
        ];
        for form in forms {
            for &(rows, cols) in shapes {
                let x: Vec<f32> = (0..rows * cols).map(|_| (rng.f32() - 0.5) * 40.0).collect();
                let dx = d.upload(&x).unwrap();
                let mut y = d.alloc_filled(rows * cols, f32::NAN).unwrap();
                let mut ly = d.alloc_filled(rows * cols, f32::NAN).unwrap();
                tune::with_candidate(form, || {
                    softmax_rows(&d, &dx, cols, &mut y).unwrap();
                    log_softmax_rows(&d, &dx, cols, &mut ly).unwrap();
                });
                let (y, ly) = (y.to_vec().unwrap(), ly.to_vec().unwrap());
                for (r, row) in x.chunks(cols).enumerate() {
                    let top = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
                    let sum: f64 = row.iter().map(|&v| (v as f64 - top).exp()).sum();
                    for c in 0..cols {
                        let k = r * cols + c;
                        let want = (x[k] as f64 - top).exp() / sum;
                        let err = (y[k] as f64 - want).abs();
                        assert!(
                            err <= 2e-5 * want + 1e-30,
                            "{} {form} {rows}x{cols} ({r}, {c}): {} want {want} seed {seed}",
                            d.label(),
                            y[k]
                        );
                        let lwant = x[k] as f64 - top - sum.ln();
                        assert!(
                            (ly[k] as f64 - lwant).abs() <= 2e-5 * (1.0 + lwant.abs()),
                            "{} {form} log {rows}x{cols} ({r}, {c}): {} want {lwant} seed {seed}",
                            d.label(),
                            ly[k]
                        );
                    }
                }
            }
            // Huge values do not overflow; a row of -inf or with a NaN is NaN.
            let inf = f32::INFINITY;
            let dx = d
                .upload(&[1000.0f32, 999.0, -1000.0, -inf, -inf, -inf, f32::NAN, 1.0])
                .unwrap();
            let mut y = d.alloc_filled(8, 7.0f32).unwrap();
            tune::with_candidate(form, || softmax_rows(&d, &dx, 2, &mut y)).unwrap();
            let y = y.to_vec().unwrap();
            assert!(
                (y[0] - 0.731_058_6).abs() < 1e-6
                    && (y[1] - 0.268_941_4).abs() < 1e-6
                    && y[2] == 1.0
                    && y[3] == 0.0
                    && y[4..].iter().all(|v| v.is_nan()),
                "{} {form}: {y:?}",
                d.label()
            );
        }
        // Bad shapes are errors.
        let dx = d.upload(&[1.0f32; 4]).unwrap();
        let mut short = d.alloc::<f32>(3).unwrap();
        assert!(softmax_rows(&d, &dx, 2, &mut short).is_err());
        let mut ok = d.alloc::<f32>(4).unwrap();
        assert!(softmax_rows(&d, &dx, 3, &mut ok).is_err());
        assert!(softmax_rows(&d, &dx, 0, &mut ok).is_err());
    }
}

/// The transposes whose writes start on 32-byte sectors.
const SECTOR_FORMS: [&str; 2] = ["column-raster-64-sectors", "column-raster-128-sectors"];

#[test]
fn transposes_of_any_shape_and_width() {
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        // Edges, and 264 × 136: whole 8 × 8 blocks across tiles of 128 (the CPU device's
        // AVX path).
        let small = [(1, 1), (1, 33), (33, 1), (31, 65), (129, 97), (264, 136)];
        // The CPU device transposes in host code (by AVX blocks where it can), so it takes
        // the GPUs' large shapes; software GPUs one mid-sized shape.
        let host = d.backend_kind() == dotcompute::BackendKind::Cpu;
        let large: &[(usize, usize)] = if slow(&d) && !host {
            &[(257, 1023)]
        } else {
            // The last: more column tiles than a grid's `y` takes (the row order only).
            &[(4096, 4095), (8191, 8193), (1, 2_100_001)]
        };
        let shapes: Vec<(usize, usize)> = small.iter().chain(large).copied().collect();
        for &(rows, cols) in &shapes {
            let x: Vec<u32> = (0..rows * cols).map(|_| rng.u32(..)).collect();
            let dx = d.upload(&x).unwrap();
            // The CPU device's candidates are its stores (streamed ones bypass the
            // cache, with ordinary stores at each output row's unaligned ends), the GPUs'
            // the tiles' orders and heights.
            let orders: &[&str] = if host {
                &[
                    "cached-stores",
                    "streamed-stores",
                    "streamed-stores, row sweeps",
                ]
            } else {
                &crate::common::TRANSPOSE_ORDERS
            };
            for &order in orders {
                let mut y = d.alloc_filled(rows * cols, 0xDEAD_BEEFu32).unwrap();
                tune::with_candidate(order, || transpose(&d, &dx, rows, cols, &mut y)).unwrap();
                let y = y.to_vec().unwrap();
                for r in 0..rows {
                    for c in 0..cols {
                        assert_eq!(
                            y[c * rows + r],
                            x[r * cols + c],
                            "{} {order} {rows}x{cols} ({r}, {c})",
                            d.label()
                        );
                    }
                }
            }
            if d.info().caps.f64 && rows * cols < 1 << 22 {
                let xf: Vec<f64> = x.iter().map(|&v| v as f64).collect();
                let dxf = d.upload(&xf).unwrap();
                // The tuner's own choice, and the forms whose sectors hold 4 elements of
                // 8 bytes (a name that is not a candidate, as on the CPU, pins nothing).
                for order in ["tuned", SECTOR_FORMS[0], SECTOR_FORMS[1]] {
                    let mut yf = d.alloc_filled(rows * cols, f64::NAN).unwrap();
                    tune::with_candidate(order, || transpose(&d, &dxf, rows, cols, &mut yf))
                        .unwrap();
                    let yf = yf.to_vec().unwrap();
                    assert!(
                        (0..rows * cols).all(|k| yf[(k % cols) * rows + k / cols] == xf[k]),
                        "{} f64 {order} {rows}x{cols}",
                        d.label()
                    );
                }
            }
        }
        let dx = d.upload(&[1u32; 6]).unwrap();
        let mut y = d.alloc::<u32>(6).unwrap();
        assert!(transpose(&d, &dx, 4, 2, &mut y).is_err());
        // 2-byte elements: every f16 bit pattern but signalling NaNs (which a GPU may
        // quiet when it moves them through a float register).
        if d.info().caps.f16 {
            use dotcompute::f16;
            let (rows, cols) = if slow(&d) { (77, 301) } else { (1031, 2049) };
            let x: Vec<f16> = (0..rows * cols)
                .map(|_| {
                    let b = rng.u16(..);
                    let signalling = b & 0x7c00 == 0x7c00 && b & 0x03ff != 0 && b & 0x0200 == 0;
                    f16::from_bits(if signalling { b | 0x0200 } else { b })
                })
                .collect();
            let dx = d.upload(&x).unwrap();
            let mut y = d.alloc_filled(rows * cols, f16::from_bits(0xDEAD)).unwrap();
            transpose(&d, &dx, rows, cols, &mut y).unwrap();
            // The 128-row sector form (16 elements a sector) against the tuner's.
            let mut y2 = d.alloc_filled(rows * cols, f16::from_bits(0xDEAD)).unwrap();
            tune::with_candidate(SECTOR_FORMS[1], || transpose(&d, &dx, rows, cols, &mut y2))
                .unwrap();
            let y2 = y2.to_vec().unwrap();
            let y = y.to_vec().unwrap();
            assert!(
                y.iter().zip(&y2).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{} f16 {}",
                d.label(),
                SECTOR_FORMS[1]
            );
            if let Some(k) = (0..rows * cols)
                .find(|&k| y[(k % cols) * rows + k / cols].to_bits() != x[k].to_bits())
            {
                panic!(
                    "{} f16 {rows}x{cols}: element {k} = {:#06x} became {:#06x} (seed {seed})",
                    d.label(),
                    x[k].to_bits(),
                    y[(k % cols) * rows + k / cols].to_bits()
                );
            }
        }
    }
}

/// The histogram forms every test runs (pinned): one copy of each bin, and copies.
const HISTOGRAM_FORMS: [&str; 2] = ["1024 groups", "1024 groups, 16 copies"];
/// The f32 histogram's forms: [`HISTOGRAM_FORMS`] and vector loads.
const F32_HISTOGRAM_FORMS: [&str; 3] = [
    HISTOGRAM_FORMS[0],
    HISTOGRAM_FORMS[1],
    "vector loads, 8 groups a unit",
];
/// The byte histogram's forms: [`HISTOGRAM_FORMS`] and the counts by byte value in 16 and
/// 32 copies.
const BYTE_HISTOGRAM_FORMS: [&str; 5] = [
    HISTOGRAM_FORMS[0],
    HISTOGRAM_FORMS[1],
    "byte values, 16 copies, 1024 groups",
    "byte values, 32 copies, 512 groups",
    "byte values, 16 copies, 2048 groups, 4 loads at once",
];

#[test]
fn histograms_count_every_sample_exactly() {
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        let n = if slow(&d) { 200_003 } else { (1 << 24) + 7 };
        // f32 samples with edge values: the bounds, just below upper, NaN, ±inf.
        let edges = [
            0.0f32,
            10.0,
            9.999_999,
            -0.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -1e-30,
        ];
        let x: Vec<f32> = (0..n)
            .map(|_| {
                if rng.u8(..8) == 0 {
                    edges[rng.usize(..edges.len())]
                } else {
                    rng.f32() * 12.0 - 1.0
                }
            })
            .collect();
        // 256 and 257: the last bin count of the small shared counters and the first past.
        for bins in [1u32, 7, 256, 257, 4096] {
            let dx = d.upload(&x).unwrap();
            let scale = bins as f32 / 10.0;
            let mut want = vec![0u32; bins as usize];
            for &v in &x {
                if (0.0..10.0).contains(&v) {
                    want[(((v - 0.0) * scale).floor() as u32).min(bins - 1) as usize] += 1;
                }
            }
            // One copy of each bin, the tuner's copies candidate, and vector loads.
            for form in F32_HISTOGRAM_FORMS {
                let mut h = d.alloc_filled(bins as usize, 77u32).unwrap();
                let t = std::time::Instant::now();
                tune::with_candidate(form, || {
                    histogram_even_f32(&d, &dx, bins, 0.0, 10.0, &mut h)
                })
                .unwrap();
                h.to_vec().unwrap();
                eprintln!(
                    "{} f32 histogram of {n} in {bins} bins ({form}): {:?}",
                    d.label(),
                    t.elapsed()
                );
                assert_eq!(
                    h.to_vec().unwrap(),
                    want,
                    "{} f32 bins {bins} ({form}) seed {seed}",
                    d.label()
                );
            }
        }
        // Small sizes: no whole vector, one, one and a tail.
        for small in [1usize, 3, 4, 5, 17] {
            let dx = d.upload(&x[..small]).unwrap();
            let mut want = [0u32; 7];
            for &v in &x[..small] {
                if (0.0..10.0).contains(&v) {
                    want[((v * 0.7).floor() as u32).min(6) as usize] += 1;
                }
            }
            for form in F32_HISTOGRAM_FORMS {
                let mut h = d.alloc_filled(7, 77u32).unwrap();
                tune::with_candidate(form, || histogram_even_f32(&d, &dx, 7, 0.0, 10.0, &mut h))
                    .unwrap();
                assert_eq!(
                    h.to_vec().unwrap(),
                    want,
                    "{} f32 n={small} ({form}) seed {seed}",
                    d.label()
                );
            }
        }
        let xi: Vec<i32> = (0..n).map(|_| rng.i32(-300..300)).collect();
        let dxi = d.upload(&xi).unwrap();
        let mut want = vec![0u32; 100];
        for &v in &xi {
            if (-200..200).contains(&v) {
                want[((v + 200) / 4) as usize] += 1;
            }
        }
        let mut h = d.alloc_filled(100, 5u32).unwrap();
        for form in HISTOGRAM_FORMS {
            h.fill(5).unwrap();
            tune::with_candidate(form, || histogram_even(&d, &dxi, 100, -200, 200, &mut h))
                .unwrap();
            assert_eq!(
                h.to_vec().unwrap(),
                want,
                "{} i32 ({form}) seed {seed}",
                d.label()
            );
        }
        // Bad arguments.
        assert!(
            histogram_even(&d, &dxi, 7, -200, 200, &mut h).is_err(),
            "uneven integer bins"
        );
        assert!(
            histogram_even(&d, &dxi, 100, 5, 5, &mut h).is_err(),
            "empty range"
        );
        let mut big = d.alloc::<u32>(5000).unwrap();
        assert!(
            histogram_even(&d, &dxi, 5000, 0, 5000, &mut big).is_err(),
            "too many bins"
        );
        // Every sample's bin agrees with the reference and with the histogram's count.
        let m = x.len().min(300_007);
        let dx = d.upload(&x[..m]).unwrap();
        let mut b = d.alloc_filled(m, 0xDEAD_BEEFu32).unwrap();
        bin_indices_even_f32(&d, &dx, 7, 0.0, 10.0, &mut b).unwrap();
        let got = b.to_vec().unwrap();
        let scale = 7.0f32 / 10.0;
        for (k, &v) in x[..m].iter().enumerate() {
            let want = if (0.0..10.0).contains(&v) {
                (((v - 0.0) * scale).floor() as u32).min(6)
            } else {
                NO_BIN
            };
            assert_eq!(got[k], want, "{} bin of {v} (seed {seed})", d.label());
        }
        let mut bi = d.alloc_filled(n, 0xDEAD_BEEFu32).unwrap();
        bin_indices_even(&d, &dxi, 100, -200, 200, &mut bi).unwrap();
        let got = bi.to_vec().unwrap();
        for (k, &v) in xi.iter().enumerate() {
            let want = if (-200..200).contains(&v) {
                ((v + 200) / 4) as u32
            } else {
                NO_BIN
            };
            assert_eq!(got[k], want, "{} bin of {v} (seed {seed})", d.label());
        }
        let mut short = d.alloc::<u32>(n - 1).unwrap();
        let e = bin_indices_even(&d, &dxi, 100, -200, 200, &mut short).unwrap_err();
        assert!(e.to_string().contains("the output has"), "{e}");
        let e = bin_indices_even(&d, &dxi, 7, -200, 200, &mut bi).unwrap_err();
        assert!(e.to_string().contains("equal integer bins"), "{e}");
        let dx = d.upload(&[1.0f32]).unwrap();
        assert!(histogram_even_f32(&d, &dx, 100, 0.0, f32::INFINITY, &mut h).is_err());
        assert!(
            histogram_even_f32(&d, &dx, 99, 0.0, 1.0, &mut h).is_err(),
            "length mismatch"
        );
    }
}

/// The reference bin of byte `b` over `[lower, upper)` in `bins` equal bins.
fn byte_bin(b: u8, bins: u32, lower: u32, upper: u32) -> u32 {
    let b = b as u32;
    if (lower..upper).contains(&b) {
        (b - lower) / ((upper - lower) / bins)
    } else {
        NO_BIN
    }
}

#[test]
fn byte_histograms_count_every_sample_exactly() {
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        let large = if slow(&d) { 200_003 } else { (1 << 24) + 3 };
        // (bins, lower, upper): every byte in one bin each; one bin per byte value over
        // an offset range; widths of 64 (a shift); an offset range of width 83 (a
        // division); one bin.
        let ranges = [
            (256u32, 0u32, 256u32),
            (10, 100, 110),
            (4, 0, 256),
            (3, 1, 250),
            (1, 0, 256),
        ];
        // Sizes around the 16-byte quads the byte-value forms read, and tails of one to
        // four words after them.
        for n in [0usize, 1, 3, 15, 16, 17, 47, 255, 1001, large] {
            // Random bytes, and (large) all equal: every count lands in one bin.
            let kinds: &[&str] = if n == large {
                &["random", "equal"]
            } else {
                &["random"]
            };
            for &kind in kinds {
                let x: Vec<u8> = match kind {
                    "random" => (0..n).map(|_| rng.u8(..)).collect(),
                    _ => vec![255u8; n],
                };
                let dx = d.upload(&x).unwrap();
                for (bins, lower, upper) in ranges {
                    let mut want = vec![0u32; bins as usize];
                    for &b in &x {
                        let bin = byte_bin(b, bins, lower, upper);
                        if bin != NO_BIN {
                            want[bin as usize] += 1;
                        }
                    }
                    for form in BYTE_HISTOGRAM_FORMS {
                        let mut h = d.alloc_filled(bins as usize, 77u32).unwrap();
                        tune::with_candidate(form, || {
                            histogram_even_u8(&d, &dx, bins, lower, upper, &mut h)
                        })
                        .unwrap();
                        assert_eq!(
                            h.to_vec().unwrap(),
                            want,
                            "{} {kind} bytes n={n} bins {bins} over {lower}..{upper} ({form}) \
                             (seed {seed})",
                            d.label()
                        );
                    }
                }
                if n > 0 && n <= 300_000 {
                    let mut b = d.alloc_filled(n, 0xDEAD_BEEFu32).unwrap();
                    bin_indices_even_u8(&d, &dx, 3, 1, 250, &mut b).unwrap();
                    let got = b.to_vec().unwrap();
                    for (k, &v) in x.iter().enumerate() {
                        assert_eq!(
                            got[k],
                            byte_bin(v, 3, 1, 250),
                            "{} bin of byte {v} at {k} (seed {seed})",
                            d.label()
                        );
                    }
                }
            }
        }
        // Bad arguments: a clear error, the histogram untouched.
        let dx = d.upload(&[1u8, 2, 3]).unwrap();
        let mut h = d.alloc_filled(4, 9u32).unwrap();
        let e = histogram_even_u8(&d, &dx, 4, 0, 260, &mut h).unwrap_err();
        assert!(e.to_string().contains("past 256"), "{e}");
        let e = histogram_even_u8(&d, &dx, 4, 0, 255, &mut h).unwrap_err();
        assert!(e.to_string().contains("equal integer bins"), "{e}");
        let e = histogram_even_u8(&d, &dx, 4, 8, 8, &mut h).unwrap_err();
        assert!(e.to_string().contains("empty"), "{e}");
        let e = histogram_even_u8(&d, &dx, 8, 0, 256, &mut h).unwrap_err();
        assert!(e.to_string().contains("elements for 8 bins"), "{e}");
        let mut short = d.alloc::<u32>(2).unwrap();
        assert!(bin_indices_even_u8(&d, &dx, 4, 0, 256, &mut short).is_err());
        assert_eq!(h.to_vec().unwrap(), [9; 4], "{}", d.label());
        // The device keeps working.
        histogram_even_u8(&d, &dx, 4, 0, 4, &mut h).unwrap();
        assert_eq!(h.to_vec().unwrap(), [0, 1, 1, 1], "{}", d.label());
    }
}

/// The README's example, on every device.
#[test]
fn the_readme_example_holds_on_every_device() {
    use dotcompute_ops::{reduce::reduce_segments, sort::sort_pairs, Order, ReduceOp};
    for d in devices() {
        let mut keys = d.upload(&[3u32, 1, 3, 2, 1, 2, 3]).unwrap();
        let mut values = d.upload(&[30i32, 10, 31, 20, 11, 21, 32]).unwrap();
        sort_pairs(&d, &mut keys, &mut values, Order::Ascending).unwrap();
        assert_eq!(
            values.to_vec().unwrap(),
            [10, 11, 20, 21, 30, 31, 32],
            "{}",
            d.label()
        );
        let offsets = d.upload(&[0u32, 2, 4, 7]).unwrap();
        let mut per_key = d.alloc::<i32>(3).unwrap();
        reduce_segments(&d, &values, &offsets, ReduceOp::Sum, &mut per_key).unwrap();
        assert_eq!(per_key.to_vec().unwrap(), [21, 41, 93], "{}", d.label());
    }
}
