//! A wrong encoding plan makes the run fail: the shim checks the plan, it does not share
//! the kernel's assumptions. Each test breaks one thing DotCompute's Metal backend got
//! wrong and shows the conformance case that catches it.

use dotcompute::Device;
use dotcompute_conformance::{cases, run_case, Report, Size};
use dotcompute_metal::plan::{Dispatch, EncodingPlan};
use dotcompute_metal::shim::ShimBackend;

/// Runs conformance case `name` at `size` on a shim device whose plans pass through
/// `tamper`; the report must say the case failed.
fn fails_with(tamper: fn(&mut EncodingPlan), name: &str, size: Size) -> Option<Report> {
    crate::shim_device()?; // skips without a compiler, like every shim test
    let device = Device::from_backend(Box::new(
        ShimBackend::with_tampered_plans(tamper).expect("the shim is available"),
    ));
    let case = cases().into_iter().find(|c| c.name == name).unwrap();
    let report = run_case(&device, &case, size, 7);
    assert!(!report.passed, "{name} passed with a wrong plan");
    eprintln!("{name} with a wrong plan: {}", report.message);
    // The device is still usable: the same case passes with a correct plan afterwards.
    let good = crate::shim_device()?;
    assert!(run_case(&good, &case, size, 7).passed);
    Some(report)
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
