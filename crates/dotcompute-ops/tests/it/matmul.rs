//! The tuned matrix product: each candidate pinned and the tuner's own choice, against
//! f64 on the host within the bound of a sum of `k` products at the precision asked for
//! (so a full-precision product that ran TF32 fails), and its empty and bad shapes.

use crate::common::{devices, seed, slow};
use dotcompute::{Device, Error, MatmulPath, Precision};
use dotcompute_ops::matmul::{matmul, CANDIDATES};
use dotcompute_ops::tune;

/// `a` (m×k) · `b` (k×n) in f64, with each element's `Σ|a||b|` for the error bound.
fn reference(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<(f64, f64)> {
    let mut out = vec![(0.0, 0.0); m * n];
    for i in 0..m {
        for j in 0..n {
            let (mut s, mut abs) = (0.0f64, 0.0f64);
            for l in 0..k {
                let p = a[i * k + l] as f64 * b[l * n + j] as f64;
                s += p;
                abs += p.abs();
            }
            out[i * n + j] = (s, abs);
        }
    }
    out
}

/// `γₖ = k·u / (1 − k·u)` for unit roundoff `u`, doubled for the rounding of the result
/// and, for TF32, of both inputs.
fn gamma(k: usize, u: f64) -> f64 {
    let ku = (k as f64 + 2.0) * u;
    2.0 * ku / (1.0 - ku)
}

#[test]
fn every_candidate_multiplies_within_the_bound_of_the_precision_asked_for() {
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        // The last shape of each list is above the tuner's threshold (m·n·k ≥ 2^18).
        let shapes: &[(usize, usize, usize)] = if slow(&d) {
            &[(1, 1, 1), (2, 3, 5), (17, 9, 33), (67, 65, 63)]
        } else {
            &[
                (1, 1, 1),
                (2, 3, 5),
                (17, 9, 33),
                (129, 257, 65),
                (513, 300, 1031),
            ]
        };
        let vendor = d
            .info()
            .caps
            .blas
            .contains(&dotcompute::ir::ScalarType::F32);
        for &(m, n, k) in shapes {
            // Full mantissas in [-1, 1): TF32 (10 bits) would miss the FP32 bound by far.
            let a: Vec<f32> = (0..m * k).map(|_| rng.f32() * 2.0 - 1.0).collect();
            let b: Vec<f32> = (0..k * n).map(|_| rng.f32() * 2.0 - 1.0).collect();
            let want = reference(&a, &b, m, n, k);
            let (da, db) = (d.upload(&a).unwrap(), d.upload(&b).unwrap());
            for precision in [Precision::Full, Precision::Tf32] {
                let u = match precision {
                    Precision::Full => f64::powi(2.0, -24),
                    Precision::Tf32 => f64::powi(2.0, -11),
                };
                for pin in [None, Some("vendor"), Some("generated")] {
                    // One element past the product, which must stay as it was.
                    let mut c = d.alloc_filled(m * n + 1, f32::NAN).unwrap();
                    let mut go = || matmul(&d, &da, &db, &mut c, m, n, k, precision);
                    let path = match pin {
                        Some(name) => tune::with_candidate(name, &mut go),
                        None => go(),
                    }
                    .unwrap_or_else(|e| panic!("{} {pin:?}: {e}", d.label()));
                    if pin == Some("generated") || !vendor {
                        assert_eq!(path, MatmulPath::Generated, "{} {pin:?}", d.label());
                    } else if pin == Some("vendor") {
                        assert_eq!(path, MatmulPath::Vendor, "{}", d.label());
                    }
                    let got = c.to_vec().unwrap();
                    assert!(got[m * n].is_nan(), "{}: wrote past the product", d.label());
                    for (e, (&g, &(w, abs))) in got.iter().zip(&want).enumerate() {
                        let bound = gamma(k, u) * abs + f64::MIN_POSITIVE;
                        assert!(
                            (g as f64 - w).abs() <= bound,
                            "{} {m}×{n}×{k} {precision:?} {pin:?} ({path:?}): element {e} is \
                             {g}, want {w} ± {bound:e} (seed {seed})",
                            d.label()
                        );
                    }
                }
            }
        }
        eprintln!("{}: matmul right for every candidate", d.label());
    }
}

#[test]
fn empty_products_do_nothing_and_bad_shapes_are_errors_that_change_nothing() {
    for d in devices() {
        let a = d.upload(&[1.0f32; 12]).unwrap();
        let b = d.upload(&[2.0f32; 12]).unwrap();
        let mut c = d.alloc_filled(13, 5.0f32).unwrap();
        // m or n zero: nothing happens.
        matmul(&d, &a, &b, &mut c, 0, 3, 4, Precision::Full).unwrap();
        matmul(&d, &a, &b, &mut c, 3, 0, 4, Precision::Full).unwrap();
        assert_eq!(c.to_vec().unwrap(), [5.0; 13], "{}", d.label());
        // k zero: the sum of no products, over the m×n result only.
        matmul(&d, &a, &b, &mut c, 3, 4, 0, Precision::Full).unwrap();
        let mut want = [0.0f32; 13];
        want[12] = 5.0;
        assert_eq!(c.to_vec().unwrap(), want, "{}", d.label());
        c.fill(5.0).unwrap();
        for (m, n, k, what) in [
            (4, 3, 4, "`a`"), // a needs 16 of its 12
            (3, 4, 4, "`b`"), // b needs 16
            (4, 4, 3, "`c`"), // c needs 16 of its 13
            (4, 4, 0, "`c`"), // the zero-k product too
        ] {
            for pin in CANDIDATES {
                let e = tune::with_candidate(pin, || {
                    matmul(&d, &a, &b, &mut c, m, n, k, Precision::Full)
                })
                .unwrap_err();
                assert!(
                    matches!(e, Error::Range { .. }) && e.to_string().contains(what),
                    "{} {m}×{n}×{k} {pin}: {e}",
                    d.label()
                );
            }
        }
        assert_eq!(
            c.to_vec().unwrap(),
            [5.0; 13],
            "{}: a refused product wrote",
            d.label()
        );
        // The device is still usable.
        matmul(&d, &a, &b, &mut c, 2, 2, 3, Precision::Full).unwrap();
        assert_eq!(c.to_vec().unwrap()[..4], [6.0; 4], "{}", d.label());
    }
}

/// The device a tuner test multiplies on: the first with a vendor product for `f32`, so
/// that there are two candidates to choose from.
pub fn with_vendor_product(all: &[Device]) -> Option<&Device> {
    all.iter().find(|d| {
        d.info()
            .caps
            .blas
            .contains(&dotcompute::ir::ScalarType::F32)
    })
}
