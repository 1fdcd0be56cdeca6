use crate::common::{devices, seed, sizes};
use dotcompute::Device;
use dotcompute_ops::reduce::{reduce, reduce_into, reduce_rows};
use dotcompute_ops::{tune, ReduceOp};

/// The whole-buffer reduction's forms: scalar loads, and (32-bit elements) vector loads.
const REDUCE_FORMS: [&str; 2] = ["1024 groups", "vector loads, 8 groups a unit"];

#[test]
fn integer_reductions_are_exact_on_every_size() {
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        for n in sizes(&d) {
            let x: Vec<i32> = (0..n).map(|_| rng.i32(..)).collect();
            let u: Vec<u32> = x.iter().map(|&v| v as u32).collect();
            let (dx, du) = (d.upload(&x).unwrap(), d.upload(&u).unwrap());
            for form in REDUCE_FORMS {
                let ctx = format!("{} n={n} {form} seed {seed}", d.label());
                tune::with_candidate(form, || {
                    let sum = x.iter().fold(0i32, |a, &b| a.wrapping_add(b));
                    assert_eq!(reduce(&d, &dx, ReduceOp::Sum).unwrap(), sum, "{ctx}");
                    let min = x.iter().copied().min().unwrap_or(i32::MAX);
                    assert_eq!(reduce(&d, &dx, ReduceOp::Min).unwrap(), min, "{ctx}");
                    let max = x.iter().copied().max().unwrap_or(i32::MIN);
                    assert_eq!(reduce(&d, &dx, ReduceOp::Max).unwrap(), max, "{ctx}");
                    let usum = u.iter().fold(0u32, |a, &b| a.wrapping_add(b));
                    assert_eq!(reduce(&d, &du, ReduceOp::Sum).unwrap(), usum, "{ctx}");
                    let umin = u.iter().copied().min().unwrap_or(u32::MAX);
                    assert_eq!(reduce(&d, &du, ReduceOp::Min).unwrap(), umin, "{ctx}");
                    let umax = u.iter().copied().max().unwrap_or(0);
                    assert_eq!(reduce(&d, &du, ReduceOp::Max).unwrap(), umax, "{ctx}");
                });
            }
        }
    }
}

#[test]
fn float_sums_meet_the_stated_bound_and_repeat_bit_for_bit() {
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        for n in sizes(&d) {
            let x: Vec<f32> = (0..n).map(|_| (rng.f32() - 0.3) * 1000.0).collect();
            let dx = d.upload(&x).unwrap();
            for form in REDUCE_FORMS {
                tune::with_candidate(form, || {
                    let got = reduce(&d, &dx, ReduceOp::Sum).unwrap();
                    let exact: f64 = x.iter().map(|&v| v as f64).sum();
                    let abs: f64 = x.iter().map(|&v| (v as f64).abs()).sum();
                    // The documented bound: (⌈n / 65,536⌉ + 24) unit roundoffs of Σ|x|.
                    let bound =
                        (n.div_ceil(65_536) as f64 + 24.0) * (f32::EPSILON as f64 / 2.0) * abs;
                    assert!(
                        (got as f64 - exact).abs() <= bound,
                        "{} n={n} {form} seed {seed}: {got} against {exact} (bound {bound})",
                        d.label()
                    );
                    let again = reduce(&d, &dx, ReduceOp::Sum).unwrap();
                    assert_eq!(
                        got.to_bits(),
                        again.to_bits(),
                        "{} n={n} {form}: not repeatable",
                        d.label()
                    );
                    let min = x.iter().copied().fold(f32::INFINITY, f32::min);
                    assert_eq!(
                        reduce(&d, &dx, ReduceOp::Min).unwrap(),
                        min,
                        "{} n={n} {form}",
                        d.label()
                    );
                    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    assert_eq!(
                        reduce(&d, &dx, ReduceOp::Max).unwrap(),
                        max,
                        "{} n={n} {form}",
                        d.label()
                    );
                });
            }
        }
    }
}

#[test]
fn rows_reduce_each_row_of_any_shape() {
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        for (rows, cols) in [
            (1, 1),
            (3, 1000),
            (1000, 3),
            (257, 255),
            (17, 4099),
            (70_001, 5),
        ] {
            let x: Vec<i32> = (0..rows * cols).map(|_| rng.i32(-1000..1000)).collect();
            let f: Vec<f32> = x.iter().map(|&v| v as f32 * 0.5).collect();
            let (dx, df) = (d.upload(&x).unwrap(), d.upload(&f).unwrap());
            let mut out = d.alloc_filled(rows, 0x5EED_5EED).unwrap();
            reduce_rows(&d, &dx, cols, ReduceOp::Sum, &mut out).unwrap();
            let mut fout = d.alloc_filled(rows, f32::NAN).unwrap();
            reduce_rows(&d, &df, cols, ReduceOp::Max, &mut fout).unwrap();
            let (got, fgot) = (out.to_vec().unwrap(), fout.to_vec().unwrap());
            for r in 0..rows {
                let row = &x[r * cols..(r + 1) * cols];
                let ctx = format!("{} {rows}x{cols} row {r} seed {seed}", d.label());
                assert_eq!(got[r], row.iter().sum::<i32>(), "{ctx}");
                let m = row.iter().max().copied().unwrap() as f32 * 0.5;
                assert_eq!(fgot[r], m, "{ctx}");
            }
        }
    }
}

#[test]
fn bad_shapes_are_errors_and_the_device_stays_usable() {
    for d in devices() {
        let x = d.upload(&[1u32, 2, 3, 4, 5, 6]).unwrap();
        let mut two = d.alloc::<u32>(2).unwrap();
        let e = reduce_into(&d, &x, ReduceOp::Sum, &mut two).unwrap_err();
        assert!(e.to_string().contains("1 element"), "{e}");
        let mut rows = d.alloc::<u32>(3).unwrap();
        for cols in [0, 4] {
            let e = reduce_rows(&d, &x, cols, ReduceOp::Sum, &mut rows).unwrap_err();
            assert!(e.to_string().contains("reduce_rows"), "{e}");
        }
        let e = reduce_rows(&d, &x, 3, ReduceOp::Sum, &mut rows).unwrap_err();
        assert!(e.to_string().contains("2 rows"), "{e}");
        // Empty input: the identity; nothing else changed.
        let empty = Device::alloc::<u32>(&d, 0).unwrap();
        assert_eq!(reduce(&d, &empty, ReduceOp::Sum).unwrap(), 0);
        assert_eq!(reduce(&d, &empty, ReduceOp::Min).unwrap(), u32::MAX);
        assert_eq!(reduce(&d, &x, ReduceOp::Sum).unwrap(), 21);
    }
}

#[test]
fn segments_reduce_one_huge_and_many_tiny_and_empty_ones() {
    use dotcompute_ops::reduce::reduce_segments;
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        let tiny = if crate::common::slow(&d) {
            20_000
        } else {
            100_000
        };
        let huge = if crate::common::slow(&d) {
            300_007
        } else {
            (1 << 24) + 3
        };
        // One huge segment, then tiny ones of 0 to 5 elements.
        let mut offsets = vec![0u32, huge as u32];
        for _ in 0..tiny {
            let last = *offsets.last().unwrap();
            offsets.push(last + rng.u32(0..6));
        }
        let n = *offsets.last().unwrap() as usize;
        let x: Vec<i32> = (0..n).map(|_| rng.i32(-1000..1000)).collect();
        let (dx, doff) = (d.upload(&x).unwrap(), d.upload(&offsets).unwrap());
        let segs = offsets.len() - 1;
        for op in [ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max] {
            let mut out = d.alloc_filled(segs, 0x5EED).unwrap();
            reduce_segments(&d, &dx, &doff, op, &mut out).unwrap();
            let got = out.to_vec().unwrap();
            for s in 0..segs {
                let seg = &x[offsets[s] as usize..offsets[s + 1] as usize];
                let want = match op {
                    ReduceOp::Sum => seg.iter().sum::<i32>(),
                    ReduceOp::Min => seg.iter().copied().min().unwrap_or(i32::MAX),
                    ReduceOp::Max => seg.iter().copied().max().unwrap_or(i32::MIN),
                };
                assert_eq!(got[s], want, "{} {op:?} segment {s} seed {seed}", d.label());
            }
        }
        // Bad offsets: decreasing, past the end, the wrong count. Nothing runs.
        let mut out = d.alloc_filled(2, 7i32).unwrap();
        for (bad, what) in [
            (vec![0u32, 5, 3], "must not decrease"),
            (vec![0u32, 1, n as u32 + 1], "past the input"),
            (vec![0u32, 1], "one more offset"),
        ] {
            let db = d.upload(&bad).unwrap();
            let e = reduce_segments(&d, &dx, &db, ReduceOp::Sum, &mut out).unwrap_err();
            assert!(e.to_string().contains(what), "{e}");
        }
        assert_eq!(out.to_vec().unwrap(), [7, 7]);
    }
}

#[test]
fn argmin_and_argmax_give_the_first_index_and_pass_over_nans() {
    use dotcompute_ops::reduce::{argmax, argmin};
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        for n in sizes(&d) {
            // Few distinct values: many ties; some NaNs.
            let x: Vec<f32> = (0..n)
                .map(|_| {
                    if rng.u8(..16) == 0 {
                        f32::NAN
                    } else {
                        rng.i32(-50..50) as f32
                    }
                })
                .collect();
            let dx = d.upload(&x).unwrap();
            let got_min = argmin(&d, &dx).unwrap();
            let got_max = argmax(&d, &dx).unwrap();
            let numbers = || x.iter().enumerate().filter(|(_, v)| !v.is_nan());
            let want_min = numbers().fold(None, |b: Option<(usize, f32)>, (i, &v)| match b {
                Some((_, bv)) if bv <= v => b,
                _ => Some((i, v)),
            });
            let want_max = numbers().fold(None, |b: Option<(usize, f32)>, (i, &v)| match b {
                Some((_, bv)) if bv >= v => b,
                _ => Some((i, v)),
            });
            let ctx = format!("{} n={n} seed {seed}", d.label());
            match want_min {
                Some(w) => {
                    assert_eq!(got_min, Some(w), "argmin {ctx}");
                    assert_eq!(got_max, want_max, "argmax {ctx}");
                }
                // Nothing but NaNs (or nothing): a NaN's index, or None.
                None if n == 0 => assert_eq!((got_min, got_max), (None, None), "{ctx}"),
                None => assert!(x[got_min.unwrap().0].is_nan(), "{ctx}"),
            }
            let xi: Vec<i32> = x
                .iter()
                .map(|v| if v.is_nan() { i32::MAX } else { *v as i32 })
                .collect();
            if n > 0 {
                let di = d.upload(&xi).unwrap();
                let m = *xi.iter().min().unwrap();
                let first = xi.iter().position(|&v| v == m).unwrap();
                assert_eq!(argmin(&d, &di).unwrap(), Some((first, m)), "i32 {ctx}");
            }
        }
    }
}
