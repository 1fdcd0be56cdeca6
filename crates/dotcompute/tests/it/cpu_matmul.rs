//! The CPU backend's vendor matrix product (matrixmultiply): every element against an f64
//! reference, for shapes that are not multiples of any blocking, and the generated kernel
//! still reachable.

use crate::common::reference_matmul;
use dotcompute::{Device, MatmulPath};

#[test]
fn cpu_matmul_uses_the_vendor_path_and_is_right_for_every_element() {
    let d = Device::cpu();
    let seed = fastrand::u64(..);
    let mut rng = fastrand::Rng::with_seed(seed);
    for (m, n, k) in [(1, 1, 1), (17, 5, 3), (129, 65, 33), (300, 257, 511)] {
        let a: Vec<f64> = (0..m * k).map(|_| rng.f64() - 0.5).collect();
        let b: Vec<f64> = (0..k * n).map(|_| rng.f64() - 0.5).collect();
        let (want, _) = reference_matmul(&a, &b, m, n, k);
        // f64: to rounding of a k-term sum.
        let (da, db) = (d.upload(&a).unwrap(), d.upload(&b).unwrap());
        let mut dc = d.alloc_filled(m * n, f64::NAN).unwrap();
        assert_eq!(
            d.matmul(&da, &db, &mut dc, m, n, k).unwrap(),
            MatmulPath::Vendor
        );
        let got = dc.to_vec().unwrap();
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-12 * k as f64,
                "f64 {m}x{k}·{k}x{n} element {i}: {g} vs {w} (seed {seed})"
            );
        }
        // f32: against the f64 reference, and against the generated kernel.
        let (a32, b32): (Vec<f32>, Vec<f32>) = (
            a.iter().map(|&x| x as f32).collect(),
            b.iter().map(|&x| x as f32).collect(),
        );
        let (da, db) = (d.upload(&a32).unwrap(), d.upload(&b32).unwrap());
        let mut dc = d.alloc_filled(m * n, f32::NAN).unwrap();
        assert_eq!(
            d.matmul(&da, &db, &mut dc, m, n, k).unwrap(),
            MatmulPath::Vendor
        );
        let mut generated = d.alloc_filled(m * n, f32::NAN).unwrap();
        d.matmul_generated(&da, &db, &mut generated, m, n, k)
            .unwrap();
        let (got, gen) = (dc.to_vec().unwrap(), generated.to_vec().unwrap());
        for i in 0..m * n {
            let tol = 1e-6 * k as f64;
            assert!(
                (got[i] as f64 - want[i]).abs() <= tol && (gen[i] as f64 - want[i]).abs() <= tol,
                "f32 {m}x{k}·{k}x{n} element {i}: vendor {} generated {} want {} (seed {seed})",
                got[i],
                gen[i],
                want[i]
            );
        }
    }
}
