//! The shim holds our MSL to Metal's rules: each test breaks one rule on purpose and shows
//! that the run refuses or catches it, and that the same kernel passes unbroken.
//!
//! * a pointer of one address space converted to another, and a write through `constant`:
//!   compile errors (the header's spaces are clang address spaces);
//! * a missing barrier: a wrong result once threads run in a shuffled order
//!   ([`ThreadOrder::Shuffled`]), though the threads' own order hides it;
//! * a wrong lane mask in the SIMD-group helpers: a wrong result with SIMD-groups of 32
//!   lanes in lock-step (with one lane per SIMD-group, as before, no mask could matter).

use dotcompute::prelude::*;
use dotcompute::Device;
use dotcompute_conformance::{Report, Size};
use dotcompute_metal::shim::{ShimBackend, ThreadOrder};

/// Conformance case `name` at `size` on a shim device whose MSL passes through `tamper`
/// fails, and passes untampered afterwards ([`crate::fails_on`]).
fn fails_with(tamper: fn(&mut String), name: &str, size: Size) -> Option<Report> {
    crate::fails_on(
        || ShimBackend::with_tampered_msl(tamper),
        "tampered MSL",
        name,
        size,
    )
}

/// `source` with `line` inserted as the first statement of the kernel's body.
fn insert_in_body(source: &mut String, line: &str) {
    let kernel = source.find("kernel void").expect("an entry point");
    let body = kernel + source[kernel..].find("\n) {\n").expect("a body") + "\n) {\n".len();
    source.insert_str(body, &format!("    {line}\n"));
}

#[test]
fn a_device_pointer_taken_as_a_thread_pointer_fails_to_compile() {
    let Some(r) = fails_with(
        |s| insert_in_body(s, "thread f32* dc_wrong = p_out; (void)dc_wrong;"),
        "VectorAdd",
        Size::n(1000),
    ) else {
        return;
    };
    assert!(r.message.contains("does not compile"), "{}", r.message);
    assert!(r.message.contains("address_space(1)"), "{}", r.message);
}

#[test]
fn a_write_through_constant_fails_to_compile() {
    let Some(r) = fails_with(
        |s| insert_in_body(s, "dc_info[0] = 0u;"),
        "VectorAdd",
        Size::n(1000),
    ) else {
        return;
    };
    assert!(r.message.contains("does not compile"), "{}", r.message);
    assert!(r.message.contains("read-only"), "{}", r.message);
}

#[test]
fn a_lane_mask_of_16_in_the_simd_helpers_gives_wrong_shuffles() {
    let Some(r) = fails_with(
        |s| *s = s.replace("lane & 31u", "lane & 15u"),
        "Subgroups",
        Size::n(4099),
    ) else {
        return;
    };
    assert!(r.message.contains("shuffle(lane + 1)"), "{}", r.message);
}

#[test]
fn removed_barriers_give_a_wrong_reduction() {
    let Some(r) = fails_with(
        |s| {
            *s = s.replace(
                "threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);",
                "",
            )
        },
        "ReductionSum",
        Size::n(4096),
    ) else {
        return;
    };
    eprintln!("{}", r.message);
}

/// `out[i] = x[i] + x[i - 1]` within each group of 64, through shared memory, without
/// the barrier between the writes and the reads: wrong on a GPU, right by luck when each
/// thread runs whole in the threads' own order (thread `l - 1` wrote before `l` reads).
#[kernel]
fn left_neighbour_without_barrier(x: &[u32], out: &mut [u32]) {
    let s = shared::<u32, 64>();
    let l = local_id().x;
    let i = global_id().x;
    if i < x.len() {
        s[l] = x[i];
        let mut left = 0u32;
        if l > 0 {
            left = s[l - 1];
        }
        out[i] = x[i] + left;
    }
}

/// The same with the barrier.
#[kernel]
fn left_neighbour_with_barrier(x: &[u32], out: &mut [u32]) {
    let s = shared::<u32, 64>();
    let l = local_id().x;
    let i = global_id().x;
    s[l] = x[i % x.len()];
    barrier();
    let mut left = 0u32;
    if l > 0 {
        left = s[l - 1];
    }
    if i < x.len() {
        out[i] = x[i] + left;
    }
}

/// Wrong elements of `out` against `x[i] + x[i - 1]` (0 at each group's first thread).
fn wrong(x: &[u32], out: &[u32]) -> usize {
    (0..x.len())
        .filter(|&i| out[i] != x[i] + if i % 64 > 0 { x[i - 1] } else { 0 })
        .count()
}

#[test]
fn a_missing_barrier_gives_wrong_results_when_threads_are_shuffled() {
    if crate::shim_device().is_none() {
        return;
    }
    let n = 64 * 1000 + 3;
    let x: Vec<u32> = (0..n as u32)
        .map(|v| v.wrapping_mul(2_654_435_761) >> 8)
        .collect();
    let run = |order: ThreadOrder, with_barrier: bool| -> usize {
        let device = Device::from_backend(Box::new(
            ShimBackend::new()
                .expect("the shim is available")
                .with_thread_order(order),
        ));
        let dx = device.upload(&x).unwrap();
        let mut out = device.alloc_filled(n, 0xDEAD_BEEFu32).unwrap();
        let launch = Launch::threads(n).group(64);
        if with_barrier {
            left_neighbour_with_barrier::launch(&device, launch, &dx, &mut out).unwrap();
        } else {
            left_neighbour_without_barrier::launch(&device, launch, &dx, &mut out).unwrap();
        }
        wrong(&x, &out.to_vec().unwrap())
    };
    // The threads' own order hides the missing barrier ...
    assert_eq!(run(ThreadOrder::InOrder, false), 0);
    // ... a shuffled order shows it, for every seed tried ...
    for seed in [1, 2, 3] {
        let bad = run(ThreadOrder::Shuffled { seed }, false);
        eprintln!("without the barrier, shuffled (seed {seed}): {bad} of {n} elements wrong");
        assert!(bad > n / 10, "seed {seed}: only {bad} wrong");
    }
    // ... and the kernel with the barrier is right in every order.
    for order in [ThreadOrder::InOrder, ThreadOrder::Shuffled { seed: 1 }] {
        assert_eq!(run(order, true), 0, "{order:?}");
    }
}
