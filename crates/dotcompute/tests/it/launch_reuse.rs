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

/// Launches interleaved with host writes, fills and device copies keep program order,
/// across more launches than the wgpu backend records before it submits (32): every
/// element checked against the same steps on the host.
#[test]
fn launches_host_writes_fills_and_copies_keep_their_order() {
    for d in common::devices() {
        let n = 777usize;
        let step = |x: &mut [u32], k: u32| {
            for (i, v) in x.iter_mut().enumerate() {
                *v = v.wrapping_add(k * (i as u32 % 7 + 1));
            }
        };
        let mut x = d.alloc_filled(n, 0u32).unwrap();
        let mut y = d.alloc_filled(n, 0u32).unwrap();
        let (mut hx, mut hy) = (vec![0u32; n], vec![0u32; n]);
        for r in 0..100u32 {
            add_scaled::launch(&d, Launch::threads(n), &mut x, r).unwrap();
            step(&mut hx, r);
            match r % 10 {
                3 => {
                    let v: Vec<u32> = (0..n as u32).map(|i| i * 3 + r).collect();
                    x.write(&v).unwrap();
                    hx = v;
                }
                7 => {
                    x.fill(r + 5).unwrap();
                    hx.fill(r + 5);
                }
                _ => {}
            }
            if r % 13 == 5 {
                y.copy_from(&x).unwrap();
                hy.copy_from_slice(&hx);
                add_scaled::launch(&d, Launch::threads(n), &mut y, 1).unwrap();
                step(&mut hy, 1);
            }
        }
        assert_eq!(x.to_vec().unwrap(), hx, "{}: x", d.label());
        assert_eq!(y.to_vec().unwrap(), hy, "{}: y", d.label());
    }
}
