//! Every conformance case, at every size, through generated MSL and the encoding plan.

use dotcompute_conformance::{cases, run_case, seed_from_env};

#[test]
fn every_conformance_case_passes_as_generated_msl() {
    let Some(device) = crate::shim_device() else {
        return;
    };
    let seed = seed_from_env();
    let mut failures = Vec::new();
    let mut passed = 0;
    for case in cases() {
        for &size in &case.sizes {
            let r = run_case(&device, &case, size, seed);
            eprintln!(
                "{:<20} {:>12} {} {:>8.1} ms {}",
                r.case,
                r.size,
                if r.passed { "pass" } else { "FAIL" },
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
    eprintln!("{passed} passed, {} failed (seed {seed})", failures.len());
    assert!(
        failures.is_empty(),
        "{} case(s) failed through the MSL shim (replay with DOTCOMPUTE_SEED={seed}):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
