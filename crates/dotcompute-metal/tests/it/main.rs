//! The Metal backend's Linux half: generated MSL compiled by clang against the shim and
//! run with the encoding plan.

mod conformance;
mod random_kernels;
mod raw_msl;
mod reduce;
mod strict_shim;
mod wrong_plans;

use dotcompute::Device;
use dotcompute_metal::shim::ShimBackend;

/// The shim device, or a skip (a failure when `DOTCOMPUTE_REQUIRE_MSL_SHIM=1`, as CI sets).
pub fn shim_device() -> Option<Device> {
    match ShimBackend::new() {
        Ok(b) => Some(Device::from_backend(Box::new(b))),
        Err(e) => {
            let required =
                dotcompute_hal::settings::switch_or("DOTCOMPUTE_REQUIRE_MSL_SHIM", false)
                    .unwrap_or_else(|e| panic!("{e}"));
            if required {
                panic!("the MSL shim is required by DOTCOMPUTE_REQUIRE but unavailable: {e}");
            }
            eprintln!("skipping: {e}");
            None
        }
    }
}

/// Runs conformance case `name` at `size` on the shim device `broken()` makes (one that
/// breaks `what` on purpose); the report must say the case failed, and the same case must
/// pass on a sound shim device afterwards (the device keeps working). `None`: the shim is
/// unavailable here (skipped, like every shim test).
pub fn fails_on(
    broken: impl FnOnce() -> dotcompute::Result<ShimBackend>,
    what: &str,
    name: &str,
    size: dotcompute_conformance::Size,
) -> Option<dotcompute_conformance::Report> {
    use dotcompute_conformance::{cases, run_case};
    let good = shim_device()?;
    let device = Device::from_backend(Box::new(broken().expect("the shim is available")));
    let case = cases().into_iter().find(|c| c.name == name).unwrap();
    let report = run_case(&device, &case, size, 7);
    assert!(!report.passed, "{name} passed with {what}");
    eprintln!("{name} with {what}: {}", report.message);
    assert!(
        run_case(&good, &case, size, 7).passed,
        "{name} fails when sound"
    );
    Some(report)
}
