//! Launches repeated with the same arguments (which the wgpu backend serves from one
//! cached bind group), with other arguments, on buffers that went back to the pool and
//! came out again, and after `trim` destroyed pool blocks: every result checked, on every
//! backend present.

use crate::common;
use dotcompute::prelude::*;

#[kernel]
fn add_scaled(x: &mut [u32], k: u32) {
    let i = global_id().x;
    if i < x.len() {
        x[i] = x[i] + k * (i % 7 + 1);
    }
}

#[test]
fn repeated_launches_reuse_bindings_and_stay_right() {
    for d in common::devices() {
        let n = 1000usize;
        let want =
            |k_total: u32| -> Vec<u32> { (0..n as u32).map(|i| k_total * (i % 7 + 1)).collect() };
        let mut a = d.alloc_filled(n, 0u32).unwrap();
        // The same launch five times, then another scalar twice.
        for _ in 0..5 {
            add_scaled::launch(&d, Launch::threads(n), &mut a, 1).unwrap();
        }
        for _ in 0..2 {
            add_scaled::launch(&d, Launch::threads(n), &mut a, 3).unwrap();
        }
        assert_eq!(a.to_vec().unwrap(), want(11), "{}", d.label());
        // A view of the same buffer: other bindings.
        let mut view = a.slice_mut(0..n / 2).unwrap();
        add_scaled::launch(&d, Launch::threads(n / 2), &mut view, 1).unwrap();
        let got = a.to_vec().unwrap();
        let mut expected = want(11);
        for (i, e) in expected.iter_mut().enumerate().take(n / 2) {
            *e += (i as u32 % 7) + 1;
        }
        assert_eq!(got, expected, "{}: the view launch", d.label());
        // The block goes back to the pool and out again to a new buffer.
        drop(a);
        let mut b = d.alloc_filled(n, 0u32).unwrap();
        add_scaled::launch(&d, Launch::threads(n), &mut b, 1).unwrap();
        assert_eq!(
            b.to_vec().unwrap(),
            want(1),
            "{}: a reused block",
            d.label()
        );
        // Pool blocks destroyed, then fresh buffers of the same size.
        drop(b);
        d.trim();
        for round in 0..3 {
            let mut c = d.alloc_filled(n, 0u32).unwrap();
            add_scaled::launch(&d, Launch::threads(n), &mut c, 2).unwrap();
            add_scaled::launch(&d, Launch::threads(n), &mut c, 2).unwrap();
            assert_eq!(c.to_vec().unwrap(), want(4), "{}: round {round}", d.label());
            d.trim();
        }
    }
}
