//! Integer expressions in the forms the random-kernel test found wrong on NVIDIA's Vulkan
//! compiler (2026-11-28, kernel seed 4710405778595751319: `u32(7.75) - ~(3u & u32(a))`
//! with `a = i32::MIN` came out as `~0 - 7` instead of `7 - ~0`), each part alone, on
//! every backend present, against the CPU element by element.

use crate::common;
use dotcompute::prelude::*;

/// Eight results per thread, from loaded values so that no compiler can fold them.
#[kernel]
fn complement_forms(a: &[i32], b: &[u32], x: &[f32], out: &mut [u32]) {
    let i = global_id().x;
    if i < a.len() {
        let xa = x[i] as u32;
        let masked = 3u32 & (a[i] as u32);
        let seven = (15.5f32 * 0.5f32) as u32;
        let t1 = seven - !masked;
        let t2 = ((xa << b[i]) / (xa & xa)) % 2147483648u32;
        out[8 * i] = t1;
        out[8 * i + 1] = t2;
        out[8 * i + 2] = t2.max(t1);
        out[8 * i + 3] = !masked;
        out[8 * i + 4] = b[i] - !(a[i] as u32);
        out[8 * i + 5] = !(a[i] as u32) - b[i];
        out[8 * i + 6] = xa - !b[i];
        out[8 * i + 7] = ((a[i] - !(b[i] as i32)) as u32) ^ (t2.max(t1) ^ b[i]);
    }
}

#[test]
fn subtracting_a_complement_matches_the_cpu_on_every_backend() {
    let cpu = Device::cpu();
    let seed = common::seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    let n = 1000 + 37;
    let mut a: Vec<i32> = (0..n).map(|_| rng.i32(..)).collect();
    let mut b: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
    let mut x: Vec<f32> = (0..n).map(|_| rng.f32() * 200.0 - 50.0).collect();
    // The random kernel's inputs first.
    (a[0], b[0], x[0]) = (i32::MIN, 47, 64.75);
    (a[1], b[1], x[1]) = (i32::MAX, 0, 1.0);
    (a[2], b[2], x[2]) = (-1, u32::MAX, 0.0);
    let run = |d: &Device| -> Vec<u32> {
        let (da, db, dx) = (
            d.upload(&a).unwrap(),
            d.upload(&b).unwrap(),
            d.upload(&x).unwrap(),
        );
        let mut out = d.alloc_filled(8 * n, 0xDEAD_BEEFu32).unwrap();
        complement_forms::launch(d, Launch::threads(n).group(64), &da, &db, &dx, &mut out).unwrap();
        out.to_vec().unwrap()
    };
    let want = run(&cpu);
    // By hand for the first inputs: 7 - !0 = 8, 64 << 15 / 64 = 32768.
    assert_eq!(&want[..4], &[8, 32768, 32768, u32::MAX], "the CPU itself");
    for d in common::devices() {
        let got = run(&d);
        for (j, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g,
                w,
                "{}: element {j} (thread {}, form {}), inputs a={} b={} x={}, seed {seed}",
                d.info().label(),
                j / 8,
                j % 8,
                a[j / 8],
                b[j / 8],
                x[j / 8]
            );
        }
        eprintln!("{}: {} results as on the CPU", d.info().label(), got.len());
    }
}
