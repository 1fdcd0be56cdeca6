//! A wrong encoding plan makes the run fail: the shim checks the plan, it does not share
//! the kernel's assumptions. Each test breaks one thing DotCompute's Metal backend got
//! wrong and shows the conformance case that catches it.

use dotcompute_conformance::{Report, Size};
use dotcompute_metal::plan::{Dispatch, EncodingPlan};
use dotcompute_metal::shim::ShimBackend;

/// Conformance case `name` at `size` on a shim device whose plans pass through `tamper`
/// fails, and passes with sound plans afterwards ([`crate::fails_on`]).
fn fails_with(tamper: fn(&mut EncodingPlan), name: &str, size: Size) -> Option<Report> {
    crate::fails_on(
        || ShimBackend::with_tampered_plans(tamper),
        "a wrong plan",
        name,
        size,
    )
}

#[test]
fn threadgroup_memory_that_is_never_sized_fails_the_run() {
    let Some(r) = fails_with(
        |p| p.threadgroup_memory.clear(),
        "ReductionSum",
        Size::n(4096),
    ) else {
        return;
    };
    assert!(r.message.contains("never sized"), "{}", r.message);
    assert!(r.message.contains("internal error"), "{}", r.message);
}

#[test]
fn a_scalar_that_is_never_bound_fails_the_run() {
    // VectorMultiply's `scale` is buffer index 1, sent with setBytes.
    let Some(r) = fails_with(
        |p| p.bytes.retain(|b| b.index != 1),
        "VectorMultiply",
        Size::n(4096),
    ) else {
        return;
    };
    assert!(r.message.contains("buffer index 1"), "{}", r.message);
}

#[test]
fn a_grid_counted_in_groups_instead_of_threads_fails_the_run() {
    // DotCompute's two grid meanings: dispatchThreads given the number of groups.
    let Some(r) = fails_with(
        |p| {
            if let Dispatch::Threads { threads, per_group } = &mut p.dispatch {
                for d in 0..3 {
                    threads[d] = threads[d].div_ceil(per_group[d]);
                }
            }
        },
        "VectorAdd",
        Size::n(1_000_003),
    ) else {
        return;
    };
    // The outputs the missing threads never wrote are still poison.
    assert!(r.message.contains("element"), "{}", r.message);
}
