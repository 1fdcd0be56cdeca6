//! Every conformance case, at every size, through generated MSL and the encoding plan:
//! once with each group's threads in their own order, once shuffled (a missing barrier
//! in a generated kernel would show there as a wrong result).

use dotcompute::Device;
use dotcompute_conformance::{cases, run_case, seed_from_env};
use dotcompute_metal::shim::{ShimBackend, ThreadOrder};

fn every_case_passes(device: &Device, what: &str) {
    let seed = seed_from_env();
    let mut failures = Vec::new();
    let mut passed = 0;
    for case in cases() {
        for &size in &case.sizes {
            let r = run_case(device, &case, size, seed);
            eprintln!(
                "{:<20} {:>12} {} {:>8.1} ms {}",
                r.case,
                r.size,
                r.verdict(),
                r.time.as_secs_f64() * 1e3,
                r.message
            );
            if r.passed {
                passed += 1;
            } else {
                failures.push(format!("{} at {}: {}", r.case, r.size, r.message));
            }
        }
    }
    eprintln!(
        "{what}: {passed} passed, {} failed (seed {seed})",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} case(s) failed through the MSL shim, {what} (replay with DOTCOMPUTE_SEED={seed}):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_conformance_case_passes_as_generated_msl() {
    let Some(device) = crate::shim_device() else {
        return;
    };
    every_case_passes(
        &device,
        "threads in the order DOTCOMPUTE_MSL_SHIM_ORDER gives",
    );
}

#[test]
fn every_conformance_case_passes_with_each_groups_threads_shuffled() {
    if crate::shim_device().is_none() {
        return;
    }
    let seed = seed_from_env();
    let order = ThreadOrder::Shuffled { seed };
    let shim = ShimBackend::new().expect("the shim is available");
    let device = Device::from_backend(Box::new(shim.with_thread_order(order)));
    every_case_passes(&device, &format!("threads shuffled (seed {seed})"));
}
