//! The backends built into this binary, and their devices.
//!
//! [`registry`] is the one list of backends: `Device::best`, `Device::with_backend`,
//! [`backends`] (and so `dotcompute devices`), the CLI's `validate` and the conformance
//! suite iterate it. Adding a backend is a crate that exports a
//! [`BackendDescriptor`] plus one line below.

pub use dotcompute_hal::registry::rank;
use dotcompute_hal::{BackendDescriptor, BackendKind, DeviceInfo};

/// Every backend built into this binary.
static REGISTRY: &[&BackendDescriptor] = &[
    #[cfg(feature = "cuda")]
    &dotcompute_cuda::DESCRIPTOR,
    #[cfg(all(feature = "metal", target_vendor = "apple"))]
    &dotcompute_metal::DESCRIPTOR,
    #[cfg(feature = "wgpu")]
    &dotcompute_wgpu::DESCRIPTOR,
    &dotcompute_cpu::DESCRIPTOR,
];

/// The backends built into this binary (present on this machine or not).
pub fn registry() -> &'static [&'static BackendDescriptor] {
    REGISTRY
}

/// The registered descriptor of `kind`, if it is built in.
pub(crate) fn descriptor(kind: BackendKind) -> Option<&'static BackendDescriptor> {
    REGISTRY.iter().copied().find(|d| d.kind == kind)
}

/// Whether a backend is usable here, and why not.
#[derive(Clone, Debug)]
pub struct BackendStatus {
    pub kind: BackendKind,
    /// The devices found, or the reason the backend is unavailable.
    pub devices: std::result::Result<Vec<DeviceInfo>, String>,
}

/// Why a backend that is not registered is missing.
pub(crate) fn not_built(kind: BackendKind) -> String {
    match kind {
        BackendKind::Metal if !cfg!(target_vendor = "apple") => format!(
            "the native Metal backend runs on Apple platforms only (this is {})",
            std::env::consts::OS
        ),
        other => format!("not built into this binary (enable dotcompute's `{other}` feature)"),
    }
}

/// Every backend dotcompute knows, with its devices or the reason it is unavailable.
pub fn backends() -> Vec<BackendStatus> {
    BackendKind::ALL
        .iter()
        .map(|&kind| BackendStatus {
            kind,
            devices: match descriptor(kind) {
                Some(d) => (d.probe)(),
                None => Err(not_built(kind)),
            },
        })
        .collect()
}
