use crate::common::{devices, seed, slow};
use dotcompute::Device;
use dotcompute_ops::topk::{top_k, top_k_rows, MAX_K};
use dotcompute_ops::Order;
use std::cmp::Ordering;

/// The documented order of f32 elements: IEEE total order with NaNs largest.
fn cmp_f32(a: f32, b: f32) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.total_cmp(&b),
    }
}

/// The reference: the row's (value, column) pairs, best first, ties by column.
fn best(row: &[f32], k: usize, order: Order) -> Vec<(u32, u32)> {
    let mut idx: Vec<u32> = (0..row.len() as u32).collect();
    idx.sort_by(|&a, &b| {
        let (x, y) = (row[a as usize], row[b as usize]);
        match order {
            Order::Ascending => cmp_f32(x, y),
            Order::Descending => cmp_f32(y, x),
        }
    });
    idx[..k]
        .iter()
        .map(|&i| (row[i as usize].to_bits(), i))
        .collect()
}

fn random_row(n: usize, rng: &mut fastrand::Rng) -> Vec<f32> {
    (0..n)
        .map(|_| match rng.u8(..20) {
            0 => f32::NAN,
            1 => -0.0,
            2 => 0.0,
            // Few distinct values: many ties, which must come in index order.
            3..=9 => rng.u8(..8) as f32,
            _ => rng.f32() * 100.0 - 50.0,
        })
        .collect()
}

fn check_rows(d: &Device, x: &[f32], cols: usize, k: usize, order: Order, what: &str) {
    let rows = x.len() / cols;
    let dx = d.upload(x).unwrap();
    let mut v = d
        .alloc_filled(rows * k, f32::from_bits(0xDEAD_BEEF))
        .unwrap();
    let mut i = d.alloc_filled(rows * k, u32::MAX).unwrap();
    if cols == x.len() {
        top_k(d, &dx, order, &mut v, &mut i).unwrap();
    } else {
        top_k_rows(d, &dx, cols, order, &mut v, &mut i).unwrap();
    }
    let (gv, gi) = (v.to_vec().unwrap(), i.to_vec().unwrap());
    for r in 0..rows {
        let want = best(&x[r * cols..(r + 1) * cols], k, order);
        for j in 0..k {
            let got = (gv[r * k + j].to_bits(), gi[r * k + j]);
            assert_eq!(
                got,
                want[j],
                "{} {what} rows={rows} cols={cols} k={k} {order:?}: row {r} [{j}] (value bits, index)",
                d.label()
            );
        }
    }
}

#[test]
fn top_k_of_a_buffer_and_of_rows_matches_a_stable_sort() {
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        let what = format!("(seed {seed})");
        let big = if slow(&d) { 100_003 } else { 1 << 22 };
        for (n, k) in [(1, 1), (1000, 7), (5000, MAX_K), (big, 100)] {
            let x = random_row(n, &mut rng);
            for order in [Order::Descending, Order::Ascending] {
                check_rows(&d, &x, n, k, order, &what);
            }
        }
        for (rows, cols, k) in [(1, 5, 5), (333, 7, 3), (64, 1000, 10), (5, 4097, MAX_K)] {
            let x = random_row(rows * cols, &mut rng);
            check_rows(&d, &x, cols, k, Order::Descending, &what);
        }
        // Integer elements, largest first.
        let x: Vec<i32> = (0..3000).map(|_| rng.i32(-50..50)).collect();
        let dx = d.upload(&x).unwrap();
        let (mut v, mut i) = (
            d.alloc::<i32>(3 * 4).unwrap(),
            d.alloc::<u32>(3 * 4).unwrap(),
        );
        top_k_rows(&d, &dx, 1000, Order::Descending, &mut v, &mut i).unwrap();
        let (gv, gi) = (v.to_vec().unwrap(), i.to_vec().unwrap());
        for r in 0..3 {
            let row = &x[r * 1000..(r + 1) * 1000];
            let mut idx: Vec<usize> = (0..1000).collect();
            idx.sort_by_key(|&c| std::cmp::Reverse(row[c]));
            for j in 0..4 {
                assert_eq!(
                    (gv[r * 4 + j], gi[r * 4 + j] as usize),
                    (row[idx[j]], idx[j])
                );
            }
        }
    }
}

#[test]
fn bad_top_k_arguments_are_errors_and_lose_nothing() {
    for d in devices() {
        let x = d.upload(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let mut v = d.alloc_filled(7, -1.0f32).unwrap();
        let mut i = d.alloc_filled(7, 9u32).unwrap();
        let e = top_k(&d, &x, Order::Descending, &mut v, &mut i).unwrap_err();
        assert!(e.to_string().contains("k = 7"), "{e}");
        let mut i5 = d.alloc_filled(5, 9u32).unwrap();
        let e = top_k(&d, &x, Order::Descending, &mut v, &mut i5).unwrap_err();
        assert!(e.to_string().contains("indices have 5"), "{e}");
        let e = top_k_rows(&d, &x, 4, Order::Descending, &mut v, &mut i).unwrap_err();
        assert!(e.to_string().contains("not whole rows of 4"), "{e}");
        let e = top_k_rows(&d, &x, 3, Order::Descending, &mut v, &mut i).unwrap_err();
        assert!(e.to_string().contains("not k for each of 2 rows"), "{e}");
        let big = d.alloc::<f32>(3000).unwrap();
        let (mut v2, mut i2) = (
            d.alloc::<f32>(2 * 1025).unwrap(),
            d.alloc::<u32>(2 * 1025).unwrap(),
        );
        let e = top_k_rows(&d, &big, 1500, Order::Descending, &mut v2, &mut i2).unwrap_err();
        assert!(e.to_string().contains("largest k, 1024"), "{e}");
        assert_eq!(
            v.to_vec().unwrap(),
            [-1.0; 7],
            "refused calls wrote nothing"
        );
        assert_eq!(i.to_vec().unwrap(), [9; 7]);
        let (mut v3, mut i3) = (d.alloc::<f32>(2).unwrap(), d.alloc::<u32>(2).unwrap());
        top_k_rows(&d, &x, 3, Order::Ascending, &mut v3, &mut i3).unwrap();
        assert_eq!(v3.to_vec().unwrap(), [1.0, 4.0]);
        assert_eq!(i3.to_vec().unwrap(), [0, 0]);
    }
}
