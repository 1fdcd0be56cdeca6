use crate::common::{devices, seed, sizes};
use dotcompute::Device;
use dotcompute_ops::sort::{
    sort_keys, sort_pairs, sort_pairs_by_bits, sort_segments_keys, sort_segments_pairs,
};
use dotcompute_ops::{Order, RadixKey};
use std::cmp::Ordering;

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

/// Sorts 50,001 random pairs by key bits 4..13 and compares them with a stable host sort
/// by those bits.
fn check_bits_4_to_13(d: &Device, rng: &mut fastrand::Rng, what: &str) {
    let n: i32 = 50_001;
    let keys: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
    let values: Vec<i32> = (0..n).collect();
    let (mut dk, mut dv) = (d.upload(&keys).unwrap(), d.upload(&values).unwrap());
    sort_pairs_by_bits(d, &mut dk, &mut dv, Order::Ascending, 4..13).unwrap();
    let mut want: Vec<(u32, i32)> = keys.into_iter().zip(values).collect();
    want.sort_by_key(|p| (p.0 >> 4) & 0x1FF);
    let got: Vec<(u32, i32)> = dk
        .to_vec()
        .unwrap()
        .into_iter()
        .zip(dv.to_vec().unwrap())
        .collect();
    assert_eq!(got, want, "{} {what} bits 4..13", d.label());
}

#[test]
fn a_range_of_key_bits_orders_by_those_bits_only() {
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        check_bits_4_to_13(&d, &mut rng, &format!("seed {seed}"));
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
        // 64-bit keys take bits up to 64, not beyond.
        let mut wide = d.upload(&[1u64, 0]).unwrap();
        let e = sort_pairs_by_bits(
            &d,
            &mut wide,
            &mut d.upload(&[0u32, 1]).unwrap(),
            Order::Ascending,
            0..65,
        )
        .unwrap_err();
        assert!(e.to_string().contains("within 0..64"), "{e}");
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

/// The documented float order: IEEE total order (`-0.0 < +0.0`) with every NaN after
/// `+inf` and NaNs equal among themselves.
fn float_order<F: Copy>(
    is_nan: impl Fn(F) -> bool,
    total: impl Fn(F, F) -> Ordering,
) -> impl Fn(&F, &F) -> Ordering {
    move |&a, &b| match (is_nan(a), is_nan(b)) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => total(a, b),
    }
}

/// Sorts `keys` (with their input positions as values, and alone) on `d` in both orders
/// and compares every key's bits and every value with a stable sort by `cmp`.
fn check_sort<K: RadixKey + std::fmt::Debug>(
    d: &Device,
    keys: &[K],
    cmp: &impl Fn(&K, &K) -> Ordering,
    same: impl Fn(K, K) -> bool,
    what: &str,
) {
    let n = keys.len();
    let positions: Vec<u32> = (0..n as u32).collect();
    for order in [Order::Ascending, Order::Descending] {
        let mut want: Vec<(K, u32)> = keys
            .iter()
            .copied()
            .zip(positions.iter().copied())
            .collect();
        match order {
            Order::Ascending => want.sort_by(|a, b| cmp(&a.0, &b.0)),
            Order::Descending => want.sort_by(|a, b| cmp(&b.0, &a.0)),
        }
        let mut dk = d.upload(keys).unwrap();
        let mut dv = d.upload(&positions).unwrap();
        sort_pairs(d, &mut dk, &mut dv, order).unwrap();
        let (gk, gv) = (dk.to_vec().unwrap(), dv.to_vec().unwrap());
        if let Some(k) = (0..n).find(|&k| !same(gk[k], want[k].0) || gv[k] != want[k].1) {
            panic!(
                "{} {what} n={n} {order:?} pairs: [{k}] = ({:?}, {}) want ({:?}, {})",
                d.label(),
                gk[k],
                gv[k],
                want[k].0,
                want[k].1
            );
        }
        let mut dk = d.upload(keys).unwrap();
        sort_keys(d, &mut dk, order).unwrap();
        let gk = dk.to_vec().unwrap();
        if let Some(k) = (0..n).find(|&k| !same(gk[k], want[k].0)) {
            panic!(
                "{} {what} n={n} {order:?} keys: [{k}] = {:?} want {:?}",
                d.label(),
                gk[k],
                want[k].0
            );
        }
    }
}

#[test]
fn f32_keys_sort_in_total_order_with_nans_last_and_stable() {
    let seed = seed();
    let specials = [
        0.0f32,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7fc0_1234),
        f32::from_bits(0xff80_0001),
        f32::from_bits(1),
        f32::from_bits(0x8000_0001),
        f32::MIN_POSITIVE,
        f32::MAX,
        f32::MIN,
        1.0,
        -1.0,
    ];
    let cmp = float_order(f32::is_nan, |a: f32, b: f32| a.total_cmp(&b));
    let same = |a: f32, b: f32| a.to_bits() == b.to_bits();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        for n in [0, 1, 2, 257, 4097, 70_001] {
            let keys: Vec<f32> = (0..n)
                .map(|_| match rng.u8(..3) {
                    0 => specials[rng.usize(..specials.len())],
                    1 => (rng.f32() - 0.5) * 1e3,
                    _ => f32::from_bits(rng.u32(..)),
                })
                .collect();
            check_sort(&d, &keys, &cmp, same, &format!("f32 (seed {seed})"));
        }
    }
}

#[test]
fn sixty_four_bit_keys_sort_where_the_device_has_them_and_are_refused_elsewhere() {
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        let caps = d.info().caps.clone();
        let n = 20_011;
        let u: Vec<u64> = (0..n)
            .map(|_| match rng.u8(..4) {
                0 => rng.u64(..4) << 62,
                1 => rng.u64(..100),
                _ => rng.u64(..),
            })
            .collect();
        if !caps.i64 {
            let mut dk = d.upload(&u).unwrap();
            let e = sort_keys(&d, &mut dk, Order::Ascending).unwrap_err();
            assert!(
                e.to_string().contains("64-bit integers"),
                "{}: {e}",
                d.label()
            );
            assert_eq!(
                dk.to_vec().unwrap(),
                u,
                "a refused sort left the keys as they were"
            );
            continue;
        }
        let what = format!("(seed {seed})");
        check_sort(
            &d,
            &u,
            &|a: &u64, b: &u64| a.cmp(b),
            |a, b| a == b,
            &format!("u64 {what}"),
        );
        let i: Vec<i64> = u.iter().map(|&x| x as i64).collect();
        check_sort(
            &d,
            &i,
            &|a: &i64, b: &i64| a.cmp(b),
            |a, b| a == b,
            &format!("i64 {what}"),
        );
        // The top 32 bits alone: pairs order by them and keep input order within.
        let mut dk = d.upload(&u).unwrap();
        let mut dv = d.upload(&(0..n as u32).collect::<Vec<_>>()).unwrap();
        sort_pairs_by_bits(&d, &mut dk, &mut dv, Order::Ascending, 32..64).unwrap();
        let mut want: Vec<(u64, u32)> = u.iter().copied().zip(0..n as u32).collect();
        want.sort_by_key(|p| p.0 >> 32);
        let got: Vec<(u64, u32)> = dk
            .to_vec()
            .unwrap()
            .into_iter()
            .zip(dv.to_vec().unwrap())
            .collect();
        assert_eq!(got, want, "{} u64 bits 32..64 {what}", d.label());
        if caps.f64 {
            let f: Vec<f64> = u
                .iter()
                .enumerate()
                .map(|(k, &b)| match k % 5 {
                    0 => f64::NAN,
                    1 => -0.0,
                    2 => (b % 1000) as f64 - 500.0,
                    _ => f64::from_bits(b),
                })
                .collect();
            let cmp = float_order(f64::is_nan, |a: f64, b: f64| a.total_cmp(&b));
            check_sort(
                &d,
                &f,
                &cmp,
                |a: f64, b: f64| a.to_bits() == b.to_bits(),
                &format!("f64 {what}"),
            );
        }
    }
}

/// Offsets of one huge segment, then many tiny and empty ones, then random lengths.
fn mixed_offsets(n: usize, rng: &mut fastrand::Rng) -> Vec<u32> {
    let mut offsets = vec![0u32, (n / 2) as u32];
    let mut at = n / 2;
    while at < n {
        let len = match rng.u8(..4) {
            0 => 0,
            1 => 1,
            2 => rng.usize(2..40),
            _ => rng.usize(40..3000),
        };
        at = (at + len).min(n);
        offsets.push(at as u32);
    }
    offsets
}

#[test]
fn segments_sort_each_on_its_own_and_stably() {
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        let big = if crate::common::slow(&d) {
            60_013
        } else {
            1 << 21
        };
        for n in [0usize, 1, 2, 300, big] {
            let offsets = mixed_offsets(n, &mut rng);
            // Few distinct keys: runs of equal keys whose values must keep input order.
            let keys: Vec<u32> = (0..n).map(|_| rng.u32(..50) * 0x0300_0001).collect();
            let values: Vec<u32> = (0..n as u32).collect();
            let doffsets = d.upload(&offsets).unwrap();
            for order in [Order::Ascending, Order::Descending] {
                let mut want: Vec<(u32, u32)> =
                    keys.iter().copied().zip(values.iter().copied()).collect();
                for w in offsets.windows(2) {
                    let seg = &mut want[w[0] as usize..w[1] as usize];
                    match order {
                        Order::Ascending => seg.sort_by_key(|p| p.0),
                        Order::Descending => seg.sort_by_key(|p| std::cmp::Reverse(p.0)),
                    }
                }
                let (mut dk, mut dv) = (d.upload(&keys).unwrap(), d.upload(&values).unwrap());
                sort_segments_pairs(&d, &mut dk, &mut dv, &doffsets, order).unwrap();
                let got: Vec<(u32, u32)> = dk
                    .to_vec()
                    .unwrap()
                    .into_iter()
                    .zip(dv.to_vec().unwrap())
                    .collect();
                if let Some(k) = (0..n).find(|&k| got[k] != want[k]) {
                    panic!(
                        "{} n={n} {order:?} ({} segments, seed {seed}): [{k}] = {:?} want {:?}",
                        d.label(),
                        offsets.len() - 1,
                        got[k],
                        want[k]
                    );
                }
            }
            // Float keys alone, descending: NaNs first in each segment.
            let f: Vec<f32> = (0..n)
                .map(|_| {
                    if rng.u8(..10) == 0 {
                        f32::NAN
                    } else {
                        rng.f32() - 0.5
                    }
                })
                .collect();
            let mut df = d.upload(&f).unwrap();
            sort_segments_keys(&d, &mut df, &doffsets, Order::Descending).unwrap();
            let cmp = float_order(f32::is_nan, |a: f32, b: f32| a.total_cmp(&b));
            let mut want = f.clone();
            for w in offsets.windows(2) {
                want[w[0] as usize..w[1] as usize].sort_by(|a, b| cmp(b, a));
            }
            let got = df.to_vec().unwrap();
            assert!(
                got.iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{} f32 segments n={n} seed {seed}",
                d.label()
            );
        }
    }
}

#[test]
fn bad_segment_offsets_are_errors_and_lose_nothing() {
    for d in devices() {
        let keys = [4u32, 3, 2, 1];
        let mut dk = d.upload(&keys).unwrap();
        let bad: [(&[u32], &str); 4] = [
            (&[0, 3, 2, 4], "must not decrease"),
            (&[0, 2, 5], "past the input"),
            (&[1, 4], "must start at 0"),
            (&[0, 2], "must start at 0 and end"),
        ];
        for (offsets, needle) in bad {
            let o = d.upload(offsets).unwrap();
            let e = sort_segments_keys(&d, &mut dk, &o, Order::Ascending).unwrap_err();
            assert!(e.to_string().contains(needle), "{offsets:?}: {e}");
        }
        let mut short = d.upload(&[1u32, 2]).unwrap();
        let o = d.upload(&[0u32, 4]).unwrap();
        let e = sort_segments_pairs(&d, &mut dk, &mut short, &o, Order::Ascending).unwrap_err();
        assert!(e.to_string().contains("the values have 2"), "{e}");
        assert_eq!(
            dk.to_vec().unwrap(),
            keys,
            "refused sorts left the keys alone"
        );
        let o = d.upload(&[0u32, 2, 4]).unwrap();
        sort_segments_keys(&d, &mut dk, &o, Order::Ascending).unwrap();
        assert_eq!(dk.to_vec().unwrap(), [3, 4, 1, 2]);
    }
}

/// Each of the sort's algorithms (the tuner's candidates, pinned in turn) on random keys
/// of every size, few distinct keys (stability), keys differing only in the top bit, a
/// range of bits, float specials and 64-bit keys: the default tests above run whichever
/// the tuner picks, so this is what keeps the other one checked.
#[test]
fn every_sort_algorithm_sorts_right() {
    let seed = seed();
    for d in devices() {
        for algorithm in pinned_sort_algorithms(&d) {
            // lavapipe's compiler takes minutes over each key type's 4-bit kernels cold (a
            // coroutine frame per barrier), and lavapipe runs the multisplit by default:
            // the 4-bit sort is checked on the MSL shim and on GPUs.
            if algorithm == "radix4" && d.info().name.contains("llvmpipe") {
                continue;
            }
            let started = std::time::Instant::now();
            dotcompute_ops::tune::with_candidate(algorithm, || {
                let mut rng = fastrand::Rng::with_seed(seed);
                let what = format!("{algorithm} (seed {seed})");
                // The edges of both algorithms' tiles and spans; large sizes on fast devices.
                let slow = crate::common::slow(&d);
                let sizes = sizes(&d).into_iter().filter(|&n| !slow || n < 100_000);
                for n in sizes {
                    check_keys_u32(&d, (0..n).map(|_| rng.u32(..)).collect(), &what);
                }
                let n = if slow { 20_011 } else { (1 << 22) + 3 };
                let top: Vec<u32> = (0..n).map(|_| rng.u32(..2) << 31).collect();
                check_keys_u32(&d, top, &what);
                check_keys_u32(&d, vec![7; n], &what);
                let cmp = |a: &u32, b: &u32| a.cmp(b);
                for n in [2049, if slow { 20_011 } else { 100_003 }] {
                    let few: Vec<u32> = (0..n).map(|_| rng.u32(..20) * 0x0101_0101).collect();
                    check_sort(&d, &few, &cmp, |a, b| a == b, &what);
                }
                let n = if slow { 20_011 } else { 70_001 };
                let floats: Vec<f32> = (0..n)
                    .map(|_| match rng.u8(..4) {
                        0 => f32::NAN,
                        1 => -0.0,
                        2 => 0.0,
                        _ => f32::from_bits(rng.u32(..)),
                    })
                    .collect();
                let fcmp = float_order(f32::is_nan, |a: f32, b: f32| a.total_cmp(&b));
                check_sort(&d, &floats, &fcmp, |a, b| a.to_bits() == b.to_bits(), &what);
                if d.info().caps.i64 {
                    let wide: Vec<u64> = (0..n).map(|_| rng.u64(..) >> rng.u32(..64)).collect();
                    check_sort(
                        &d,
                        &wide,
                        &|a: &u64, b: &u64| a.cmp(b),
                        |a, b| a == b,
                        &what,
                    );
                }
                check_bits_4_to_13(&d, &mut rng, &what);
            });
            eprintln!("{} {algorithm}: {:.1?}", d.label(), started.elapsed());
        }
    }
}

/// The sort algorithms to pin in turn on `d`: the library's own list of what runs there
/// (`sort_algorithms`; a pinned name outside it would run the default), or on the CPU
/// device, which sorts on the host whatever is pinned, one run under the name "host".
fn pinned_sort_algorithms(d: &dotcompute::Device) -> Vec<&'static str> {
    let names = dotcompute_ops::sort::sort_algorithms::<u32, u32>(d, (1 << 22) + 3, true);
    if names.is_empty() {
        vec!["host"]
    } else {
        names
    }
}

/// The kernel each pinned sort algorithm must run, as the start and end of its instance
/// name: a pin that were ignored would let `every_sort_algorithm_sorts_right` check the
/// default again and pass. Packed pairs run `tile_scatter` read and written packed (its
/// last two constants 1) between the first pass and the last.
fn sort_kernel_of(name: &str) -> (&'static str, &'static str) {
    match name {
        "onesweep8" => ("onesweep_pass", ""),
        "multisplit8" => ("split_scatter", ""),
        "tiles8" => ("tile_scatter", ""),
        "tiles8-packed" => ("tile_scatter", "_1_1"),
        "radix4" => ("radix_scatter", ""),
        other => panic!("no kernel known for the sort algorithm {other}"),
    }
}

#[test]
fn each_pinned_sort_algorithm_runs_its_own_kernels() {
    let seed = seed();
    for d in devices() {
        if d.backend_kind() == dotcompute::BackendKind::Cpu {
            continue; // the CPU device sorts in host code, without kernels
        }
        let mut rng = fastrand::Rng::with_seed(seed);
        let n = 10_007;
        let keys: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
        let mut want = keys.clone();
        want.sort_unstable();
        // Forms for pairs only are pinned on pairs (values equal to their keys).
        let for_keys = dotcompute_ops::sort::sort_algorithms::<u32, u32>(&d, n, false);
        for name in pinned_sort_algorithms(&d) {
            // lavapipe's compiler takes minutes over the 4-bit kernels cold.
            if name == "radix4" && d.info().name.contains("llvmpipe") {
                continue;
            }
            let mut dk = d.upload(&keys).unwrap();
            let mut dv = d.upload(&keys).unwrap();
            d.synchronize().unwrap();
            d.take_timings();
            d.set_profiling(true);
            let pairs = !for_keys.contains(&name);
            dotcompute_ops::tune::with_candidate(name, || {
                if pairs {
                    sort_pairs(&d, &mut dk, &mut dv, Order::Ascending)
                } else {
                    sort_keys(&d, &mut dk, Order::Ascending)
                }
            })
            .unwrap();
            d.synchronize().unwrap();
            d.set_profiling(false);
            let labels: Vec<String> = d.take_timings().into_iter().map(|t| t.label).collect();
            let (kernel, ending) = sort_kernel_of(name);
            assert!(
                labels
                    .iter()
                    .any(|l| l.starts_with(kernel) && l.ends_with(ending)),
                "{} {name}: ran {labels:?}, not {kernel}…{ending}",
                d.label()
            );
            if pairs {
                assert_eq!(dv.to_vec().unwrap(), want, "{} {name} values", d.label());
            }
            assert_eq!(
                dk.to_vec().unwrap(),
                want,
                "{} {name} (seed {seed})",
                d.label()
            );
        }
    }
}
