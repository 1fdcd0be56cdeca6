//! Tensor cores from kernel code: `mma_m16n8k8_tf32` and `mma_m16n8k16_f16` checked
//! element by element against their documented fragment layouts, the generated TF32 and
//! f16 products
//! (`Device::matmul_generated_with(.., Precision::Tf32)`) against an f64 reference at
//! sizes that are not multiples of its 128×128 block and at 1M+ elements, and the
//! refusals: devices without tensor cores, groups that are not whole subgroups, TF32 of
//! a non-f32 product, f16 products where neither a vendor library nor tensor cores exist. Runs on every backend present; the tensor-core parts on devices
//! with capability `tensor_cores` (CUDA sm_80+).

use crate::common::{self, reference_matmul};
use dotcompute::prelude::*;
use dotcompute::{f16, Error, Precision};

/// One subgroup's `d = a · b + c` for a 16×8 `a`, an 8×8 `b` and a 16×8 `c`, all
/// row-major, through the fragment layout of `mma_m16n8k8_tf32`.
#[kernel]
fn mma_once(a: &[f32], b: &[f32], c: &[f32], d: &mut [f32]) {
    let lane = subgroup_lane();
    let g = lane / 4;
    let t = lane % 4;
    let mut acc = [0.0f32; 4];
    acc[0] = c[g * 8 + 2 * t];
    acc[1] = c[g * 8 + 2 * t + 1];
    acc[2] = c[(g + 8) * 8 + 2 * t];
    acc[3] = c[(g + 8) * 8 + 2 * t + 1];
    mma_m16n8k8_tf32(
        &mut acc[0],
        a[g * 8 + t],
        a[(g + 8) * 8 + t],
        a[g * 8 + t + 4],
        a[(g + 8) * 8 + t + 4],
        b[t * 8 + g],
        b[(t + 4) * 8 + g],
    );
    d[g * 8 + 2 * t] = acc[0];
    d[g * 8 + 2 * t + 1] = acc[1];
    d[(g + 8) * 8 + 2 * t] = acc[2];
    d[(g + 8) * 8 + 2 * t + 1] = acc[3];
}

/// One subgroup's `d = a · b + c` for a 16×16 `a`, a 16×8 `b` and a 16×8 `c`, all
/// row-major, through the fragment layout of `mma_m16n8k16_f16`. The `a` operands are
/// loads (passed to the instruction as stored), the `b` operands computed values
/// (converted to f16 bits): both forms of operand.
#[kernel]
fn mma_once_f16(a: &[f16], b: &[f16], c: &[f32], d: &mut [f32]) {
    let lane = subgroup_lane();
    let g = lane / 4;
    let t = lane % 4;
    let mut acc = [0.0f32; 4];
    acc[0] = c[g * 8 + 2 * t];
    acc[1] = c[g * 8 + 2 * t + 1];
    acc[2] = c[(g + 8) * 8 + 2 * t];
    acc[3] = c[(g + 8) * 8 + 2 * t + 1];
    let one = f16::cast(1.0);
    mma_m16n8k16_f16(
        &mut acc[0],
        a[g * 16 + 2 * t],
        a[g * 16 + 2 * t + 1],
        a[(g + 8) * 16 + 2 * t],
        a[(g + 8) * 16 + 2 * t + 1],
        a[g * 16 + 2 * t + 8],
        a[g * 16 + 2 * t + 9],
        a[(g + 8) * 16 + 2 * t + 8],
        a[(g + 8) * 16 + 2 * t + 9],
        b[2 * t * 8 + g] * one,
        b[(2 * t + 1) * 8 + g] * one,
        b[(2 * t + 8) * 8 + g] * one,
        b[(2 * t + 9) * 8 + g] * one,
    );
    d[g * 8 + 2 * t] = acc[0];
    d[g * 8 + 2 * t + 1] = acc[1];
    d[(g + 8) * 8 + 2 * t] = acc[2];
    d[(g + 8) * 8 + 2 * t + 1] = acc[3];
}

/// A kernel that only reads its input: the device is usable after a refusal.
#[kernel]
fn double(x: &[f32], y: &mut [f32]) {
    let i = global_id().x;
    if i < x.len() {
        y[i] = x[i] * 2.0;
    }
}

/// `x` rounded to TF32 as `cvt.rna.tf32.f32` does: 10 mantissa bits, to nearest, ties
/// away from zero.
fn tf32(x: f32) -> f32 {
    f32::from_bits(x.to_bits().wrapping_add(0x1000) & !0x1fff)
}

fn mma_once_on(d: &Device, a: &[f32], b: &[f32], c: &[f32]) -> Vec<f32> {
    let (da, db, dc) = (
        d.upload(a).unwrap(),
        d.upload(b).unwrap(),
        d.upload(c).unwrap(),
    );
    let mut out = d.alloc_filled(16 * 8, f32::NAN).unwrap();
    mma_once::launch(d, Launch::threads(32).group(32), &da, &db, &dc, &mut out).unwrap();
    out.to_vec().unwrap()
}

#[test]
fn mma_fragments_follow_the_documented_layout() {
    for d in common::devices() {
        if !d.info().caps.tensor_cores {
            continue;
        }
        let seed = common::seed();
        let mut rng = fastrand::Rng::with_seed(seed);
        // Small integers are exact in TF32 and their sums in f32: the result is exact,
        // so every element shows whether the layout (and the order of a, b, c) is right.
        let mut ints =
            |len: usize| -> Vec<f32> { (0..len).map(|_| rng.i32(-8..=8) as f32).collect() };
        let (a, b, c) = (ints(16 * 8), ints(8 * 8), ints(16 * 8));
        let got = mma_once_on(&d, &a, &b, &c);
        for i in 0..16 {
            for j in 0..8 {
                let want = c[i * 8 + j] + (0..8).map(|p| a[i * 8 + p] * b[p * 8 + j]).sum::<f32>();
                assert_eq!(
                    got[i * 8 + j],
                    want,
                    "{}: d[{i}][{j}] (seed {seed})",
                    d.label()
                );
            }
        }
        // Operands with low mantissa bits: rounded to TF32 before multiplying.
        let mut reals =
            |len: usize| -> Vec<f32> { (0..len).map(|_| rng.f32() * 2.0 - 1.0).collect() };
        let (a, b, c) = (reals(16 * 8), reals(8 * 8), reals(16 * 8));
        let got = mma_once_on(&d, &a, &b, &c);
        for i in 0..16 {
            for j in 0..8 {
                let (mut want, mut mag) = (c[i * 8 + j] as f64, c[i * 8 + j].abs() as f64);
                for p in 0..8 {
                    let t = tf32(a[i * 8 + p]) as f64 * tf32(b[p * 8 + j]) as f64;
                    want += t;
                    mag += t.abs();
                }
                let err = (got[i * 8 + j] as f64 - want).abs();
                assert!(
                    err <= 16.0 * f32::EPSILON as f64 * mag,
                    "{}: d[{i}][{j}] = {}, TF32 reference {want} (seed {seed})",
                    d.label(),
                    got[i * 8 + j]
                );
            }
        }
    }
}

#[test]
fn mma_f16_fragments_follow_the_documented_layout() {
    for d in common::devices() {
        if !d.info().caps.tensor_cores {
            continue;
        }
        let seed = common::seed();
        let mut rng = fastrand::Rng::with_seed(seed);
        // Integers (exact in f16, sums exact in f32) show the layout; reals in [-1, 1)
        // show that products are exact and summed in f32.
        for integers in [true, false] {
            let mut draw = |len: usize| -> Vec<f32> {
                (0..len)
                    .map(|_| {
                        let x = if integers {
                            rng.i32(-8..=8) as f32
                        } else {
                            rng.f32() * 2.0 - 1.0
                        };
                        f16::from_f32(x).to_f32()
                    })
                    .collect()
            };
            let (a, b, c) = (draw(16 * 16), draw(16 * 8), draw(16 * 8));
            let half = |v: &[f32]| {
                d.upload(&v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>())
                    .unwrap()
            };
            let (da, db, dc) = (half(&a), half(&b), d.upload(&c).unwrap());
            let mut out = d.alloc_filled(16 * 8, f32::NAN).unwrap();
            mma_once_f16::launch(&d, Launch::threads(32).group(32), &da, &db, &dc, &mut out)
                .unwrap();
            let got = out.to_vec().unwrap();
            for i in 0..16 {
                for j in 0..8 {
                    let (mut want, mut mag) = (c[i * 8 + j] as f64, c[i * 8 + j].abs() as f64);
                    for p in 0..16 {
                        let t = a[i * 16 + p] as f64 * b[p * 8 + j] as f64;
                        want += t;
                        mag += t.abs();
                    }
                    let err = (got[i * 8 + j] as f64 - want).abs();
                    let bound = if integers {
                        0.0
                    } else {
                        16.0 * f32::EPSILON as f64 * mag
                    };
                    assert!(
                        err <= bound,
                        "{}: d[{i}][{j}] = {}, expected {want} (integers {integers}, seed {seed})",
                        d.label(),
                        got[i * 8 + j]
                    );
                }
            }
        }
    }
}

/// The generated f16 product (tensor cores, f32 sums) against f64 at sizes that are not
/// multiples of its 128×128 block or its 32-deep step, and at 1M+ elements; elsewhere
/// (no tensor cores, no vendor library) a clear error that writes nothing.
#[test]
fn generated_f16_product_matches_f64_or_is_refused() {
    for d in common::devices() {
        let seed = common::seed();
        let mut rng = fastrand::Rng::with_seed(seed);
        if !d.info().caps.tensor_cores {
            let a = d.upload(&[f16::ONE; 4]).unwrap();
            let mut c = d.alloc_filled(4, f16::NAN).unwrap();
            let e = d.matmul_generated(&a, &a, &mut c, 2, 2, 2).unwrap_err();
            assert!(matches!(e, Error::Unsupported { .. }), "{}: {e}", d.label());
            assert!(e.to_string().contains("tensor cores"), "{e}");
            assert!(
                c.to_vec().unwrap().iter().all(|x| x.is_nan()),
                "{}",
                d.label()
            );
            continue;
        }
        for (m, n, k) in [(200, 333, 77), (5, 3, 1), (129, 130, 33), (1024, 1031, 517)] {
            let a: Vec<f16> = (0..m * k)
                .map(|_| f16::from_f32(rng.f32() * 2.0 - 1.0))
                .collect();
            let b: Vec<f16> = (0..k * n)
                .map(|_| f16::from_f32(rng.f32() * 2.0 - 1.0))
                .collect();
            let (da, db) = (d.upload(&a).unwrap(), d.upload(&b).unwrap());
            let mut c = d.alloc_filled(m * n, f16::NAN).unwrap();
            d.matmul_generated(&da, &db, &mut c, m, n, k).unwrap();
            let got = c.to_vec().unwrap();
            let wide = |v: &[f16]| v.iter().map(|x| x.to_f64()).collect::<Vec<_>>();
            let (want, mag) = reference_matmul(&wide(&a), &wide(&b), m, n, k);
            for i in 0..m * n {
                // One rounding to f16 at the end, k roundings of an f32 sum.
                let tol =
                    want[i].abs() * 2f64.powi(-11) + k as f64 * 2f64.powi(-24) * mag[i] + 1e-7;
                let err = (got[i].to_f64() - want[i]).abs();
                assert!(
                    err <= tol,
                    "{}: {m}×{k} · {k}×{n}, c[{}][{}] = {}, expected {} (seed {seed})",
                    d.label(),
                    i / n,
                    i % n,
                    got[i],
                    want[i]
                );
            }
        }
    }
}

/// The generated TF32 product of random m×k · k×n against f64, every element within
/// TF32's rounding of the inputs (2^-10 of Σ|a·b|, twice for slack).
fn check_tf32_product(d: &Device, m: usize, n: usize, k: usize, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let a: Vec<f32> = (0..m * k).map(|_| rng.f32() * 2.0 - 1.0).collect();
    let b: Vec<f32> = (0..k * n).map(|_| rng.f32() * 2.0 - 1.0).collect();
    let (da, db) = (d.upload(&a).unwrap(), d.upload(&b).unwrap());
    let mut c = d.alloc_filled(m * n, f32::NAN).unwrap();
    d.matmul_generated_with(&da, &db, &mut c, m, n, k, Precision::Tf32)
        .unwrap();
    let got = c.to_vec().unwrap();
    let wide = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
    let (want, mag) = reference_matmul(&wide(&a), &wide(&b), m, n, k);
    let tolerance = if d.info().caps.tensor_cores {
        2.0 / 1024.0
    } else {
        // Without tensor cores the FP32 kernel runs.
        2.0 * k as f64 * f32::EPSILON as f64
    };
    for i in 0..m * n {
        let err = (got[i] as f64 - want[i]).abs();
        assert!(
            err <= tolerance * mag[i] + 1e-30,
            "{}: {m}×{k} · {k}×{n}, c[{}][{}] = {}, expected {} (seed {seed})",
            d.label(),
            i / n,
            i % n,
            got[i],
            want[i]
        );
    }
}

#[test]
fn generated_tf32_product_matches_f64_at_odd_and_large_sizes() {
    for d in common::devices() {
        let seed = common::seed();
        // Edges in every dimension (not multiples of 128 or of the 32-deep step), a
        // single partial block, and on GPUs 1M+ elements of c.
        // k and n multiples of 4 take the 16-byte-load form: edges there too.
        let mut shapes = vec![
            (200, 333, 77),
            (5, 3, 1),
            (129, 130, 33),
            (200, 332, 76),
            (129, 132, 4),
        ];
        if d.backend_kind() != dotcompute::BackendKind::Cpu {
            shapes.extend([(1024, 1031, 517), (1027, 1028, 516)]);
        }
        for (i, (m, n, k)) in shapes.into_iter().enumerate() {
            check_tf32_product(&d, m, n, k, seed.wrapping_add(i as u64));
        }
    }
}

#[test]
fn tensor_core_kernels_are_refused_where_they_cannot_run() {
    for d in common::devices() {
        let a = d.upload(&vec![1.0f32; 128]).unwrap();
        let b = d.upload(&vec![1.0f32; 64]).unwrap();
        let mut out = d.alloc_filled(128, f32::NAN).unwrap();
        let result = mma_once::launch(&d, Launch::threads(32).group(32), &a, &b, &a, &mut out);
        if d.info().caps.tensor_cores {
            result.unwrap();
            // A group that is not whole subgroups: refused before launching.
            let e = mma_once::launch(&d, Launch::threads(48).group(48), &a, &b, &a, &mut out)
                .unwrap_err();
            assert!(
                matches!(e, Error::InvalidGroupSize { .. }),
                "{}: {e}",
                d.label()
            );
            assert!(e.to_string().contains("multiple of 32"), "{e}");
        } else {
            let e = result.unwrap_err();
            assert!(matches!(e, Error::Unsupported { .. }), "{}: {e}", d.label());
            assert!(e.to_string().contains("tensor cores"), "{e}");
            // The f16 form too, before its f16 use is looked at.
            let h = d.upload(&[f16::ONE; 256]).unwrap();
            let e = mma_once_f16::launch(&d, Launch::threads(32).group(32), &h, &h, &a, &mut out)
                .unwrap_err();
            assert!(e.to_string().contains("tensor cores"), "{}: {e}", d.label());
            // Nothing was written.
            assert!(
                out.to_vec().unwrap().iter().all(|x| x.is_nan()),
                "{}",
                d.label()
            );
        }
        // TF32 is a mode of f32 products only.
        if d.info().caps.f64 {
            let x = d.upload(&[1.0f64; 4]).unwrap();
            let mut y = d.alloc::<f64>(4).unwrap();
            let e = d
                .matmul_generated_with(&x, &x, &mut y, 2, 2, 2, Precision::Tf32)
                .unwrap_err();
            assert!(matches!(e, Error::Unsupported { .. }), "{}: {e}", d.label());
        }
        // The device still runs kernels.
        let mut twice = d.alloc_filled(128, 0.0f32).unwrap();
        double::launch(&d, Launch::threads(128), &a, &mut twice).unwrap();
        assert_eq!(twice.to_vec().unwrap(), vec![2.0f32; 128], "{}", d.label());
    }
}
