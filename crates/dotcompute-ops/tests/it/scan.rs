use crate::common::{devices, seed, sizes};
use dotcompute_ops::scan::{exclusive_sum, inclusive_sum};

#[test]
fn integer_scans_are_exact_on_every_size() {
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        for n in sizes(&d) {
            let x: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
            let i: Vec<i32> = (0..n).map(|_| rng.i32(-100..100)).collect();
            let (dx, di) = (d.upload(&x).unwrap(), d.upload(&i).unwrap());
            let mut ex = d.alloc_filled(n, 0xDEAD_BEEFu32).unwrap();
            let mut inc = d.alloc_filled(n, -7i32).unwrap();
            exclusive_sum(&d, &dx, &mut ex).unwrap();
            inclusive_sum(&d, &di, &mut inc).unwrap();
            let (ex, inc) = (ex.to_vec().unwrap(), inc.to_vec().unwrap());
            let (mut acc, mut iacc) = (0u32, 0i32);
            for k in 0..n {
                assert_eq!(
                    ex[k],
                    acc,
                    "{} n={n} exclusive [{k}] seed {seed}",
                    d.label()
                );
                acc = acc.wrapping_add(x[k]);
                iacc = iacc.wrapping_add(i[k]);
                assert_eq!(
                    inc[k],
                    iacc,
                    "{} n={n} inclusive [{k}] seed {seed}",
                    d.label()
                );
            }
        }
    }
}

#[test]
fn float_scans_of_exact_values_are_exact() {
    // Small integers as floats: every partial sum is exact, so any order gives one answer.
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        for n in sizes(&d) {
            let x: Vec<f32> = (0..n).map(|_| rng.i32(-8..8) as f32).collect();
            let dx = d.upload(&x).unwrap();
            let mut y = d.alloc_filled(n, f32::NAN).unwrap();
            exclusive_sum(&d, &dx, &mut y).unwrap();
            let y = y.to_vec().unwrap();
            let mut acc = 0.0f32;
            for k in 0..n {
                assert_eq!(y[k], acc, "{} n={n} [{k}] seed {seed}", d.label());
                acc += x[k];
            }
        }
    }
}

#[test]
fn scans_on_a_stream_and_bad_lengths() {
    for d in devices() {
        let s = d.stream().unwrap();
        let x = d.upload(&[1u32; 5000]).unwrap();
        let mut y = d.alloc_filled(5000, 0u32).unwrap();
        inclusive_sum(&s, &x, &mut y).unwrap();
        let got = s.read(&y).unwrap();
        assert!(
            got.iter().enumerate().all(|(k, &v)| v == k as u32 + 1),
            "{}",
            d.label()
        );
        let mut short = d.alloc::<u32>(4999).unwrap();
        let e = exclusive_sum(&d, &x, &mut short).unwrap_err();
        assert!(
            e.to_string().contains("4999") && e.to_string().contains("5000"),
            "{e}"
        );
    }
}
