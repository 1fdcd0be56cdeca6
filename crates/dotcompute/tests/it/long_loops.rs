//! Loops of many trips are right or refused, never cut short (issue 27, item 6): lavapipe
//! stopped a loop after 65,535 trips and the launch returned `Ok` with a truncated result.

use crate::common;
use dotcompute::prelude::*;

#[kernel]
fn count_trips(out: &mut [u32], trips: u32) {
    let i = global_id().x;
    if i < out.len() {
        let mut s = 0u32;
        let mut k = 0u32;
        while k < trips {
            s = s * 3 + (k ^ i);
            k += 1;
        }
        out[i] = s;
    }
}

#[kernel]
fn nested_trips(out: &mut [u32], outer: u32, inner: u32) {
    let i = global_id().x;
    if i < out.len() {
        let mut s = 0u32;
        for a in 0..outer {
            for b in 0..inner {
                s += (a * b) ^ i;
            }
        }
        out[i] = s;
    }
}

fn expected_count(i: u32, trips: u32) -> u32 {
    let mut s = 0u32;
    for k in 0..trips {
        s = s.wrapping_mul(3).wrapping_add(k ^ i);
    }
    s
}

#[test]
fn loops_beyond_65535_trips_are_right_or_refused_on_every_backend() {
    for d in common::devices() {
        for trips in [65_535u32, 65_536, 100_000, 300_001] {
            let n = 37;
            let mut out = d.alloc_filled(n, 0xDEAD_BEEFu32).unwrap();
            match count_trips::launch(&d, Launch::threads(n), &mut out, trips) {
                Ok(()) => {
                    let got = out.to_vec().unwrap();
                    for (i, &g) in got.iter().enumerate() {
                        assert_eq!(
                            g,
                            expected_count(i as u32, trips),
                            "{}: {trips} trips, thread {i}: truncated or wrong",
                            d.label()
                        );
                    }
                }
                Err(e) => {
                    assert!(trips > 60_000, "{}: refused {trips} trips: {e}", d.label());
                    refused(&d, &e);
                }
            }
        }
        // 400 x 400 = 160,400 trips in all, each loop under the limit (llvmpipe counts
        // every loop of a thread together), and 100 x 100, under it.
        for (outer, inner) in [(400u32, 400u32), (100, 100)] {
            let n = 5;
            let mut out = d.alloc_filled(n, 0xDEAD_BEEFu32).unwrap();
            match nested_trips::launch(&d, Launch::threads(n), &mut out, outer, inner) {
                Ok(()) => {
                    let got = out.to_vec().unwrap();
                    for (i, &g) in got.iter().enumerate() {
                        let mut s = 0u32;
                        for a in 0..outer {
                            for b in 0..inner {
                                s = s.wrapping_add((a * b) ^ i as u32);
                            }
                        }
                        assert_eq!(g, s, "{}: {outer} x {inner}, thread {i}", d.label());
                    }
                }
                Err(e) => {
                    assert!(
                        outer * inner > 60_000,
                        "{}: refused a short loop: {e}",
                        d.label()
                    );
                    refused(&d, &e);
                }
            }
        }
        // The device still works.
        let mut out = d.alloc_filled(3, 0u32).unwrap();
        count_trips::launch(&d, Launch::threads(3), &mut out, 10).unwrap();
        assert_eq!(out.to_vec().unwrap()[1], expected_count(1, 10));
    }
}

/// A refusal names the kernel and the trips, and only a device with a loop limit refuses.
fn refused(d: &Device, e: &dotcompute::Error) {
    eprintln!("{}: refused: {e}", d.label());
    assert!(matches!(e, dotcompute::Error::Unsupported { .. }), "{e}");
    assert!(e.to_string().contains("loop trips"), "{e}");
    assert!(
        d.info().driver.contains("llvmpipe"),
        "{}: only llvmpipe has a loop limit: {e}",
        d.label()
    );
}
