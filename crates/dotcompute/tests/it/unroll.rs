//! Grid-stride loops that the CUDA and WGSL generators unroll (`dotcompute_ir::unroll`),
//! on every backend present, against the CPU backend.

use crate::common;
use dotcompute::prelude::*;

/// A grid-stride loop the CUDA and WGSL generators unroll (four loads per trip, then the
/// loop as written for the rest): locals declared in the body, a branch, and the buffer
/// read twice per iteration. Each thread's sums run in the same order on every backend,
/// and the body has no multiplication a driver could fuse with an add (NVIDIA's Vulkan
/// compiler turned `acc + (2x + x)` into `fma(x, 3, acc)` once the loop was unrolled,
/// which Vulkan allows), so every backend must match the CPU bit for bit, for lengths
/// below, at and far above the three strides the unrolled loop needs.
#[kernel]
fn strided_mix(x: &[f32], out: &mut [f32]) {
    let stride = group_size().x * num_groups().x;
    let g = global_id().x;
    let mut i = g;
    let mut acc = 0.0f32;
    let mut lo = f32::INFINITY;
    let mut count = 0u32;
    while i < x.len() {
        let v = x[i];
        if v > 0.5 {
            count += 1;
        }
        acc += x[i];
        lo = lo.min(v - 0.25);
        i += stride;
    }
    out[3 * g] = acc;
    out[3 * g + 1] = count as f32;
    out[3 * g + 2] = lo;
}

#[test]
fn unrolled_grid_stride_loops_match_the_cpu_bit_for_bit() {
    let cpu = Device::cpu();
    let seed = common::seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    let threads = 4096usize;
    for n in [
        1usize,
        100,
        3 * threads - 1,
        3 * threads + 1,
        4 * threads + 7,
        (1 << 20) + 3,
    ] {
        let x: Vec<f32> = (0..n).map(|_| rng.f32()).collect();
        let run = |dev: &Device| {
            let dx = dev.upload(&x).unwrap();
            let mut out = dev.alloc_filled(3 * threads, f32::NAN).unwrap();
            strided_mix::launch(dev, Launch::threads(threads).group(256), &dx, &mut out).unwrap();
            out.to_vec().unwrap()
        };
        let want = run(&cpu);
        for d in common::devices() {
            let got = run(&d);
            for k in 0..3 * threads {
                assert_eq!(
                    got[k].to_bits(),
                    want[k].to_bits(),
                    "n={n}: element {k}: {} {} cpu {} (seed {seed})",
                    d.label(),
                    got[k],
                    want[k]
                );
            }
        }
    }
}

/// `fixed` when it is not 0, else `runtime`: how a generic kernel picks its compile-time
/// tile size or a run-time one (`dotcompute-ops` has the same helper).
#[kernel_fn]
fn fixed_or(fixed: u32, runtime: u32) -> u32 {
    let mut count = fixed;
    if fixed == 0 {
        count = runtime;
    }
    count
}

/// Sums `ITEMS` (or `items`) strided elements per thread.
#[kernel]
fn strided_sums<const ITEMS: u32>(x: &[u32], out: &mut [u32], n: u32, items: u32) {
    let count = fixed_or(ITEMS, items);
    let t = global_id().x;
    let mut acc = 0u32;
    for r in 0..count {
        let i = r * 256 + t;
        if i < n {
            acc += x[i];
        }
    }
    if t < 256 {
        out[t] = acc;
    }
}

/// The same count chosen by an `if` used as a value.
#[kernel]
fn strided_sums_if<const ITEMS: u32>(x: &[u32], out: &mut [u32], n: u32, items: u32) {
    let count = if ITEMS == 0 { items } else { ITEMS };
    let t = global_id().x;
    let mut acc = 0u32;
    for r in 0..count {
        let i = r * 256 + t;
        if i < n {
            acc += x[i];
        }
    }
    if t < 256 {
        out[t] = acc;
    }
}

/// A host constant passed through a kernel function reaches the loop as a literal bound
/// (the builder's constant propagation), so the WGSL printer writes the loop out: the
/// loads of a thread's items are then issued together, not one per trip (a rolled loop
/// made `dotcompute-ops`' scan 5–21× slower on NVIDIA Vulkan than on CUDA). With 0 the
/// bound stays the run-time parameter. Both give every element right on every backend.
#[test]
fn host_constants_through_kernel_functions_become_literal_loop_bounds() {
    use dotcompute::ir::{ExprKind, Stmt};
    let loop_end = |k: &dotcompute::ir::Kernel| {
        let mut end = None;
        dotcompute::ir::walk_stmts(&k.body, &mut |s| {
            if let Stmt::For { end: e, .. } = s {
                end = Some(e.kind.clone());
            }
        });
        end.expect("one loop")
    };
    let fixed = strided_sums::kernel::<8>().ir().unwrap();
    assert!(
        matches!(loop_end(fixed), ExprKind::Literal(_)),
        "{:?}",
        loop_end(fixed)
    );
    let runtime = strided_sums::kernel::<0>().ir().unwrap();
    assert!(!matches!(loop_end(runtime), ExprKind::Literal(_)));
    let chosen = strided_sums_if::kernel::<8>().ir().unwrap();
    assert!(
        matches!(loop_end(chosen), ExprKind::Literal(_)),
        "{:?}",
        loop_end(chosen)
    );
    let runtime = strided_sums_if::kernel::<0>().ir().unwrap();
    assert!(!matches!(loop_end(runtime), ExprKind::Literal(_)));
    let seed = common::seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    let n = 8 * 256 - 37;
    let x: Vec<u32> = (0..n).map(|_| rng.u32(0..1000)).collect();
    let want: Vec<u32> = (0..256)
        .map(|t| {
            (0..8)
                .map(|r| r * 256 + t)
                .filter(|&i| i < n)
                .map(|i| x[i])
                .sum()
        })
        .collect();
    for d in common::devices() {
        let dx = d.upload(&x).unwrap();
        for fixed in [true, false] {
            let mut out = d.alloc_filled(256, u32::MAX).unwrap();
            let launch = Launch::threads(256);
            if fixed {
                strided_sums::launch::<8>(&d, launch, &dx, &mut out, n as u32, 0).unwrap();
            } else {
                strided_sums::launch::<0>(&d, launch, &dx, &mut out, n as u32, 8).unwrap();
            }
            assert_eq!(
                out.to_vec().unwrap(),
                want,
                "{d:?}, fixed {fixed} (seed {seed})"
            );
            let mut out = d.alloc_filled(256, u32::MAX).unwrap();
            if fixed {
                strided_sums_if::launch::<8>(&d, launch, &dx, &mut out, n as u32, 0).unwrap();
            } else {
                strided_sums_if::launch::<0>(&d, launch, &dx, &mut out, n as u32, 8).unwrap();
            }
            assert_eq!(
                out.to_vec().unwrap(),
                want,
                "{d:?}, if, fixed {fixed} (seed {seed})"
            );
        }
    }
}

/// Each of a thread's four values goes through `rounds` steps of a loop with a run-time
/// bound, inside a constant loop over the four.
#[kernel]
fn nested_runtime_loops(x: &[u32], out: &mut [u32], rounds: u32) {
    let t = global_id().x;
    if t * 4 < x.len() {
        let mut v = [0u32; 4];
        for r in 0..4u32 {
            v[r] = x[t * 4 + r];
        }
        for r in 0..4u32 {
            let mut k = 0u32;
            while k < rounds {
                v[r] = v[r].wrapping_mul(3).wrapping_add(r + 1);
                k += 1;
            }
        }
        for r in 0..4u32 {
            out[t * 4 + r] = v[r];
        }
    }
}

/// A constant loop whose body holds a loop of its own (with that loop's `break`) is still
/// written out by the WGSL printer, so the thread's array it indexes by its counter has
/// constant indices and stays in registers (kept as a loop, the subgroup scan's tile pass
/// ran 3× slower on NVIDIA Vulkan than on CUDA, H200, 2026-11-28). Right on every backend.
#[test]
fn a_constant_loop_around_a_runtime_loop_is_written_out() {
    let wgsl = nested_runtime_loops::kernel()
        .source(dotcompute::Target::Wgsl)
        .unwrap();
    // The three constant loops written out: only the four copies of the `while` remain.
    assert_eq!(wgsl.matches("loop {").count(), 4, "{wgsl}");
    let seed = common::seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    let threads = 1000;
    let x: Vec<u32> = (0..4 * threads).map(|_| rng.u32(..)).collect();
    let rounds = 5;
    let want: Vec<u32> = x
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let r = (i % 4) as u32;
            (0..rounds).fold(v, |v, _| v.wrapping_mul(3).wrapping_add(r + 1))
        })
        .collect();
    for d in common::devices() {
        let dx = d.upload(&x).unwrap();
        let mut out = d.alloc_filled(x.len(), 0xDEAD_BEEFu32).unwrap();
        nested_runtime_loops::launch(&d, Launch::threads(threads), &dx, &mut out, rounds).unwrap();
        assert_eq!(out.to_vec().unwrap(), want, "{d:?} (seed {seed})");
    }
}
