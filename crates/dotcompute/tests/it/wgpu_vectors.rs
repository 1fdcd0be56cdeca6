//! The wgpu vector form of elementwise kernels (four logical threads per 16-byte vector,
//! `dotcompute_codegen::wgsl::WgslOptions::vector`): every output element against the
//! host, with grids that end inside a vector, grids longer than the buffers, lanes that
//! store nothing (their elements keep their values), loads and stores of one buffer, and
//! 1M+ elements; buffers whose length is not a multiple of 4 take the scalar form. Also
//! a large generated matrix product on wgpu (16M elements, edges in every dimension).
//! Skips without an adapter unless DOTCOMPUTE_REQUIRE lists wgpu.
#![cfg(feature = "wgpu")]

use crate::common::{seed, wgpu_device};
use dotcompute::prelude::*;
use dotcompute::wgpu::vector_launches;

/// Loads from two buffers, stores to a third.
#[kernel]
fn axpy(a: &[f32], b: &[f32], out: &mut [f32], s: f32) {
    let i = global_id().x;
    if i < out.len() {
        out[i] = a[i] * s + b[i];
    }
}

/// Stores only some lanes: the others keep what the buffer held.
#[kernel]
fn keep_positive(a: &[i32], out: &mut [i32]) {
    let i = global_id().x;
    if i < a.len() && a[i] > 0 {
        out[i] = a[i];
    }
}

/// Loads and stores the same buffer; an early return ends only its own lane.
#[kernel]
fn bump(x: &mut [u32], limit: u32) {
    let i = global_id().x;
    if i >= x.len() {
        return;
    }
    if x[i] >= limit {
        return;
    }
    x[i] = x[i] + i;
}

#[test]
fn vector_form_matches_the_host_on_every_element() {
    let Some(d) = wgpu_device() else { return };
    let seed = seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    // (buffer length, grid): grids ending inside a vector, longer than the buffers, and
    // a million-element one; the last length is not a multiple of 4.
    let cases = [
        (4096usize, 4093usize, true),
        (4096, 4101, true),
        (8, 1, true),
        ((1 << 20) + 4, (1 << 20) + 3, true),
        (1027, 1027, false),
    ];
    for (len, grid, vectorised) in cases {
        // Quarters of small integers: `a * 3 + b` is exact whether or not the driver
        // fuses it into one multiply-add.
        let mut quarter = || rng.i32(-4000..4000) as f32 * 0.25;
        let a: Vec<f32> = (0..len).map(|_| quarter()).collect();
        let b: Vec<f32> = (0..len).map(|_| quarter()).collect();
        let (da, db) = (d.upload(&a).unwrap(), d.upload(&b).unwrap());
        let mut out = d.alloc_filled(len, f32::NAN).unwrap();
        let before = vector_launches();
        axpy::launch(&d, Launch::threads(grid), &da, &db, &mut out, 3.0).unwrap();
        let got = out.to_vec().unwrap();
        // (`DOTCOMPUTE_WGPU_VECTORS=0` turns the form off: then only the values count.)
        if std::env::var("DOTCOMPUTE_WGPU_VECTORS").map_or(true, |v| v.trim() != "0") {
            assert_eq!(
                vector_launches() > before,
                vectorised,
                "len {len}: vector form taken? (seed {seed})"
            );
        }
        for i in 0..len {
            if i < grid {
                assert_eq!(
                    got[i],
                    a[i] * 3.0 + b[i],
                    "axpy len {len} grid {grid} [{i}] (seed {seed})"
                );
            } else {
                assert!(
                    got[i].is_nan(),
                    "axpy len {len} grid {grid}: [{i}] written (seed {seed})"
                );
            }
        }

        let ints: Vec<i32> = (0..len).map(|_| rng.i32(-1000..1000)).collect();
        let di = d.upload(&ints).unwrap();
        let mut kept = d.alloc_filled(len, -7i32).unwrap();
        keep_positive::launch(&d, Launch::threads(grid), &di, &mut kept).unwrap();
        let got = kept.to_vec().unwrap();
        for i in 0..len {
            let want = if i < grid && ints[i] > 0 { ints[i] } else { -7 };
            assert_eq!(
                got[i], want,
                "keep_positive len {len} grid {grid} [{i}] (seed {seed})"
            );
        }

        let start: Vec<u32> = (0..len).map(|_| rng.u32(0..2000)).collect();
        let mut x = d.upload(&start).unwrap();
        bump::launch(&d, Launch::threads(grid), &mut x, 1000).unwrap();
        let got = x.to_vec().unwrap();
        for i in 0..len {
            let want = if i < grid && start[i] < 1000 {
                start[i] + i as u32
            } else {
                start[i]
            };
            assert_eq!(
                got[i], want,
                "bump len {len} grid {grid} [{i}] (seed {seed})"
            );
        }
    }
}

/// `matmul_generated` on wgpu at 16M elements of `c` with edges in every dimension:
/// every element against an f64 reference (`DOTCOMPUTE_MATMUL_KERNEL=pipelined` runs it
/// on the register-blocked kernel instead of the shared tiles).
#[test]
fn large_generated_products_on_wgpu_match_f64() {
    let Some(d) = wgpu_device() else { return };
    let seed = seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    // Not multiples of the 128×128 block or of a 16-deep step.
    let (m, n, k) = (4100usize, 4000usize, 21usize);
    let a: Vec<f32> = (0..m * k).map(|_| rng.f32() * 2.0 - 1.0).collect();
    let b: Vec<f32> = (0..k * n).map(|_| rng.f32() * 2.0 - 1.0).collect();
    let (da, db) = (d.upload(&a).unwrap(), d.upload(&b).unwrap());
    let mut c = d.alloc_filled(m * n, f32::NAN).unwrap();
    d.matmul_generated(&da, &db, &mut c, m, n, k).unwrap();
    let got = c.to_vec().unwrap();
    let wide = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
    let (want, mag) = crate::common::reference_matmul(&wide(&a), &wide(&b), m, n, k);
    let bound = 2.0 * k as f64 * f32::EPSILON as f64;
    for i in 0..m * n {
        assert!(
            (got[i] as f64 - want[i]).abs() <= bound * mag[i] + 1e-30,
            "c[{}][{}] = {}, expected {} (seed {seed})",
            i / n,
            i % n,
            got[i],
            want[i]
        );
    }
}
