//! The Metal backend's Linux half: generated MSL compiled by clang against the shim and
//! run with the encoding plan.

mod conformance;
mod random_kernels;
mod strict_shim;
mod wrong_plans;

use dotcompute::Device;
use dotcompute_metal::shim::ShimBackend;

/// The shim device, or a skip (a failure when `DOTCOMPUTE_REQUIRE_MSL_SHIM=1`, as CI sets).
pub fn shim_device() -> Option<Device> {
    match ShimBackend::new() {
        Ok(b) => Some(Device::from_backend(Box::new(b))),
        Err(e) => {
            if std::env::var("DOTCOMPUTE_REQUIRE_MSL_SHIM").is_ok_and(|v| v == "1") {
                panic!("the MSL shim is required by DOTCOMPUTE_REQUIRE but unavailable: {e}");
            }
            eprintln!("skipping: {e}");
            None
        }
    }
}
