//! Device discovery: every Metal GPU, described as a `DeviceInfo`.

use super::Mtl;
use dotcompute_hal::{
    AtomicF32Add, BackendKind, Capabilities, DeviceInfo, DeviceType, GeneratedProduct, Limits,
};
use dotcompute_ir::ScalarType;
use objc2::rc::Retained;
use objc2::runtime::ProtocolObject;
use objc2_metal::{MTLCopyAllDevices, MTLDevice, MTLGPUFamily};

/// Every Metal device, in the system's order.
pub(crate) fn all_devices() -> Vec<Retained<ProtocolObject<dyn MTLDevice>>> {
    MTLCopyAllDevices().iter().collect()
}

/// The GPU families a device supports, newest first, as words for `dotcompute devices`.
fn families(device: &Mtl<dyn MTLDevice>) -> Vec<&'static str> {
    let known = [
        (MTLGPUFamily::Apple9, "apple9"),
        (MTLGPUFamily::Apple8, "apple8"),
        (MTLGPUFamily::Apple7, "apple7"),
        (MTLGPUFamily::Apple6, "apple6"),
        (MTLGPUFamily::Apple5, "apple5"),
        (MTLGPUFamily::Apple4, "apple4"),
        (MTLGPUFamily::Mac2, "mac2"),
        (MTLGPUFamily::Metal3, "metal3"),
    ];
    known
        .iter()
        .filter(|(f, _)| device.supportsFamily(*f))
        .map(|(_, name)| *name)
        .collect()
}

/// What dotcompute needs to know of a device.
pub(crate) fn describe(device: &Mtl<dyn MTLDevice>) -> DeviceInfo {
    let unified = device.hasUnifiedMemory();
    let per_group = device.maxThreadsPerThreadgroup();
    let families = families(device);
    // SIMD-group operations as the generated MSL writes them: 32 lanes (its helpers mask
    // lane ids with `& 31`) and the SIMD reductions and prefix sums. Apple silicon
    // (Apple7 and later) has both. Intel and AMD Macs (Mac2) run 8 to 64 lanes, and older
    // Apple GPUs (GitHub's paravirtual device reports only Apple5) lack the reductions:
    // subgroup kernels are refused there (a clear error) rather than run wrong.
    let subgroups = device.supportsFamily(MTLGPUFamily::Apple7);
    let simd_width = 32;
    DeviceInfo {
        backend: BackendKind::Metal,
        ordinal: 0, // set by the registry entry, which knows the device's place
        name: device.name().to_string(),
        device_type: if unified {
            DeviceType::IntegratedGpu
        } else {
            DeviceType::DiscreteGpu
        },
        memory_bytes: device.recommendedMaxWorkingSetSize(),
        // Metal does not report core counts.
        compute_units: 0,
        limits: Limits {
            max_group_threads: (per_group.width as u32)
                .max(per_group.height as u32)
                .max(per_group.depth as u32),
            max_group_size: [
                per_group.width as u32,
                per_group.height as u32,
                per_group.depth as u32,
            ],
            max_groups: [u32::MAX; 3],
            max_shared_bytes: device.maxThreadgroupMemoryLength() as u64,
            max_static_shared_bytes: device.maxThreadgroupMemoryLength() as u64,
            max_buffer_bytes: device.maxBufferLength() as u64,
            max_binding_bytes: device.maxBufferLength() as u64,
        },
        driver: format!(
            "Metal; {} memory; families {}",
            if unified { "unified" } else { "discrete" },
            families.join(" ")
        ),
        caps: Capabilities {
            // MSL has no double.
            f64: false,
            i64: true,
            f16: true,
            // f32 atomic add is a compare-exchange loop in our MSL (`atomic<float>` needs
            // MSL 3.0 and Apple7+).
            atomic_f32_add: AtomicF32Add::CompareExchangeLoop,
            timestamps: true,
            raw_languages: vec![dotcompute_hal::RawLanguage::Msl],
            concurrent_streams: true,
            native_graphs: false,
            // MPS only where it supports this device (GitHub's paravirtual GPU does not:
            // its kernels' init returns nil there).
            blas: if mps_supported(device) {
                vec![ScalarType::F32, ScalarType::F16]
            } else {
                Vec::new()
            },
            subgroup_size: subgroups.then_some([simd_width, simd_width]),
            tensor_cores: false,
            exact_float: false,
            subnormals: false,
            time_limits: false,
            completes_on_enqueue: false,
            forward_progress: false,
            generated_product: GeneratedProduct::BlockedStrided {
                tiled_below_blocks: 0,
            },
        },
    }
}

/// Whether Metal Performance Shaders support `device` (`MPSSupportsMTLDevice`).
pub(crate) fn mps_supported(device: &Mtl<dyn MTLDevice>) -> bool {
    // SAFETY: a valid device reference; the function only queries it.
    unsafe { objc2_metal_performance_shaders::MPSSupportsMTLDevice(Some(device)) }
}
