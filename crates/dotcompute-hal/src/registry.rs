//! The backend registry: each backend crate exports one [`BackendDescriptor`]; the facade
//! lists them once (`dotcompute::registry()`), and `Device::best`, `dotcompute devices`,
//! the CLI and the conformance suite iterate that list. Adding a backend is a crate that
//! exports a descriptor, plus one line in that list.

use crate::device::{BackendKind, DeviceInfo};
use crate::dynamic::DynBackend;
use crate::error::{Error, Result};

/// How the facade finds and opens one backend's devices.
pub struct BackendDescriptor {
    pub kind: BackendKind,
    /// The devices present, best first, or a one-line reason why there are none. Must not
    /// panic when the backend's driver or libraries are missing.
    pub probe: fn() -> std::result::Result<Vec<DeviceInfo>, String>,
    /// Opens device number `ordinal` (as numbered by `probe`). The facade checks the
    /// number against `probe` first ([`no_such_device`]).
    pub open: fn(ordinal: usize) -> Result<Box<dyn DynBackend>>,
}

/// The error for device number `ordinal` of `kind` when `present` devices exist.
pub fn no_such_device(kind: BackendKind, ordinal: usize, present: usize) -> Error {
    Error::BackendUnavailable {
        backend: kind.name().into(),
        reason: format!(
            "there is no device {ordinal}: {present} device{} present (numbered from 0)",
            if present == 1 { " is" } else { "s are" }
        ),
    }
}

/// How good a device is for running kernels, higher is better: the kind of hardware
/// first (a discrete GPU beats an integrated one, which beats the native CPU backend,
/// which beats a GPU API emulated on the CPU), then the backend: CUDA, then wgpu, then
/// the native Metal backend.
///
/// On a Mac, wgpu comes before the native Metal backend until a run on Apple hardware
/// shows the native one right (issue 32): wgpu's own Metal path runs in production
/// elsewhere, and our WGSL has run on every other GPU, while our Objective-C layer has
/// never run. `DOTCOMPUTE_BACKEND=metal` picks the native backend.
pub fn rank(info: &DeviceInfo) -> u32 {
    let backend = match info.backend {
        BackendKind::Cuda => 3,
        BackendKind::Wgpu => 2,
        BackendKind::Metal => 1,
        _ => 0,
    };
    info.device_type.score() * 10 + backend
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{AtomicF32Add, Capabilities, DeviceType, Limits};

    fn info(backend: BackendKind, device_type: DeviceType) -> DeviceInfo {
        DeviceInfo {
            backend,
            ordinal: 0,
            name: "test".into(),
            device_type,
            memory_bytes: 0,
            compute_units: 0,
            limits: Limits {
                max_group_threads: 1,
                max_group_size: [1; 3],
                max_groups: [1; 3],
                max_shared_bytes: 0,
                max_static_shared_bytes: 0,
                max_buffer_bytes: 0,
                max_binding_bytes: 0,
            },
            driver: String::new(),
            caps: Capabilities {
                f64: false,
                i64: false,
                f16: false,
                atomic_f32_add: AtomicF32Add::CompareExchangeLoop,
                timestamps: false,
                raw_languages: Vec::new(),
                concurrent_streams: false,
                native_graphs: false,
                blas: Vec::new(),
                subgroup_size: None,
                tensor_cores: false,
                exact_float: true,
                subnormals: true,
                time_limits: true,
                completes_on_enqueue: false,
                forward_progress: false,
                generated_product: crate::GeneratedProduct::Unfused,
            },
        }
    }

    #[test]
    fn devices_rank_by_hardware_first_then_by_backend() {
        let cuda = rank(&info(BackendKind::Cuda, DeviceType::DiscreteGpu));
        let vulkan_gpu = rank(&info(BackendKind::Wgpu, DeviceType::DiscreteGpu));
        let integrated = rank(&info(BackendKind::Wgpu, DeviceType::IntegratedGpu));
        let cpu = rank(&info(BackendKind::Cpu, DeviceType::Cpu));
        let lavapipe = rank(&info(BackendKind::Wgpu, DeviceType::SoftwareGpu));
        assert!(
            cuda > vulkan_gpu,
            "a native backend beats wgpu on the same GPU"
        );
        assert!(vulkan_gpu > integrated);
        assert!(integrated > cpu);
        assert!(
            cpu > lavapipe,
            "the native CPU backend beats Vulkan emulated on the CPU"
        );
        // On a Mac: wgpu's Metal path before the native backend, which has never run
        // on Apple hardware.
        let native_metal = rank(&info(BackendKind::Metal, DeviceType::IntegratedGpu));
        assert!(integrated > native_metal && native_metal > cpu);
    }
}
