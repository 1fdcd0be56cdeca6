//! Shared by the integration tests.
#![allow(dead_code)]

use dotcompute::{BackendKind, Device};

/// A wgpu device, or `None` (the test then does nothing) when no adapter exists, unless
/// `DOTCOMPUTE_REQUIRE` lists wgpu, in which case its absence fails the test.
pub fn wgpu_device() -> Option<Device> {
    match Device::with_backend(BackendKind::Wgpu) {
        Ok(d) => Some(d),
        Err(e) => {
            let required = std::env::var("DOTCOMPUTE_REQUIRE").unwrap_or_default();
            assert!(
                !required.split(',').any(|b| b.trim() == "wgpu"),
                "wgpu is required by DOTCOMPUTE_REQUIRE: {e}"
            );
            eprintln!("skipping: {e}");
            None
        }
    }
}
