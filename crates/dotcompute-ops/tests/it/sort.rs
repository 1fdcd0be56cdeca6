use crate::common::{devices, seed, sizes};
use dotcompute::Device;
use dotcompute_ops::sort::{sort_keys, sort_pairs, sort_pairs_by_bits};
use dotcompute_ops::Order;

fn check_keys_u32(d: &Device, keys: Vec<u32>, what: &str) {
    let mut dk = d.upload(&keys).unwrap();
    sort_keys(d, &mut dk, Order::Ascending).unwrap();
    let mut want = keys.clone();
    want.sort_unstable();
    let got = dk.to_vec().unwrap();
    if let Some(k) = (0..want.len()).find(|&k| got[k] != want[k]) {
        panic!(
            "{} {what} n={}: [{k}] = {} want {}",
            d.label(),
            keys.len(),
            got[k],
            want[k]
        );
    }
    sort_keys(d, &mut dk, Order::Descending).unwrap();
    want.reverse();
    assert_eq!(
        dk.to_vec().unwrap(),
        want,
        "{} {what} descending",
        d.label()
    );
}

#[test]
fn u32_keys_sort_on_every_size_and_adversarial_input() {
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        for n in sizes(&d) {
            let what = format!("random (seed {seed})");
            check_keys_u32(&d, (0..n).map(|_| rng.u32(..)).collect(), &what);
        }
        let n = if crate::common::slow(&d) {
            20_011
        } else {
            1 << 22
        };
        check_keys_u32(&d, vec![7; n], "all equal");
        check_keys_u32(&d, (0..n as u32).collect(), "sorted");
        check_keys_u32(&d, (0..n as u32).rev().collect(), "reverse sorted");
        let top: Vec<u32> = (0..n)
            .map(|_| if rng.bool() { 1 << 31 } else { 0 })
            .collect();
        check_keys_u32(&d, top, "only the top bit differs");
    }
}

#[test]
fn i32_keys_sort_with_their_sign() {
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        let edge = [i32::MIN, i32::MIN + 1, -1, 0, 1, i32::MAX - 1, i32::MAX];
        let keys: Vec<i32> = (0..70_001)
            .map(|_| {
                if rng.u8(..4) == 0 {
                    edge[rng.usize(..edge.len())]
                } else {
                    rng.i32(..)
                }
            })
            .collect();
        let mut dk = d.upload(&keys).unwrap();
        sort_keys(&d, &mut dk, Order::Ascending).unwrap();
        let mut want = keys.clone();
        want.sort_unstable();
        assert_eq!(dk.to_vec().unwrap(), want, "{} seed {seed}", d.label());
    }
}

#[test]
fn pairs_are_stable_in_both_orders() {
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        for n in sizes(&d) {
            // Few distinct keys: long runs of equal keys whose values must keep input order.
            let keys: Vec<u32> = (0..n).map(|_| rng.u32(..20) * 0x0101_0101).collect();
            let values: Vec<f32> = (0..n).map(|k| k as f32).collect();
            for order in [Order::Ascending, Order::Descending] {
                let mut dk = d.upload(&keys).unwrap();
                let mut dv = d.upload(&values).unwrap();
                sort_pairs(&d, &mut dk, &mut dv, order).unwrap();
                let mut want: Vec<(u32, f32)> =
                    keys.iter().copied().zip(values.iter().copied()).collect();
                match order {
                    Order::Ascending => want.sort_by_key(|p| p.0),
                    Order::Descending => want.sort_by_key(|p| std::cmp::Reverse(p.0)),
                }
                let (gk, gv) = (dk.to_vec().unwrap(), dv.to_vec().unwrap());
                for k in 0..n {
                    assert_eq!(
                        (gk[k], gv[k]),
                        want[k],
                        "{} n={n} {order:?} [{k}] seed {seed}",
                        d.label()
                    );
                }
            }
        }
    }
}

#[test]
fn a_range_of_key_bits_orders_by_those_bits_only() {
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        let n: i32 = 50_001;
        let keys: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
        let values: Vec<i32> = (0..n).collect();
        let (mut dk, mut dv) = (d.upload(&keys).unwrap(), d.upload(&values).unwrap());
        sort_pairs_by_bits(&d, &mut dk, &mut dv, Order::Ascending, 4..13).unwrap();
        let mut want: Vec<(u32, i32)> = keys.iter().copied().zip(values.iter().copied()).collect();
        want.sort_by_key(|p| (p.0 >> 4) & 0x1FF);
        let got: Vec<(u32, i32)> = dk
            .to_vec()
            .unwrap()
            .into_iter()
            .zip(dv.to_vec().unwrap())
            .collect();
        assert_eq!(got, want, "{} seed {seed}", d.label());
    }
}

#[test]
fn bad_arguments_are_errors_and_lose_nothing() {
    for d in devices() {
        let keys = [5u32, 3, 9, 1];
        let mut dk = d.upload(&keys).unwrap();
        let mut dv = d.upload(&[1u32, 2, 3]).unwrap();
        let e = sort_pairs(&d, &mut dk, &mut dv, Order::Ascending).unwrap_err();
        assert!(e.to_string().contains("3 values for 4 keys"), "{e}");
        let mut dv4 = d.upload(&[1u32, 2, 3, 4]).unwrap();
        #[allow(clippy::reversed_empty_ranges)] // a reversed range is one of the bad inputs
        let bad = [5..5, 0..33, 9..3];
        for bits in bad {
            let e = sort_pairs_by_bits(&d, &mut dk, &mut dv4, Order::Ascending, bits).unwrap_err();
            assert!(e.to_string().contains("key bits"), "{e}");
        }
        // Nothing was touched, and the device still sorts.
        assert_eq!(dk.to_vec().unwrap(), keys);
        sort_pairs(&d, &mut dk, &mut dv4, Order::Ascending).unwrap();
        assert_eq!(dk.to_vec().unwrap(), [1, 3, 5, 9]);
        assert_eq!(dv4.to_vec().unwrap(), [4, 2, 1, 3]);
    }
}
