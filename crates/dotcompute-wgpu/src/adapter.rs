//! Adapters: the process's one wgpu instance, ranking and describing adapters, and what
//! a device is opened with (features, SPIR-V passthrough, the strict float mode).

use super::*;

/// The process's one wgpu instance. On the GPU machine's NVIDIA driver (580), creating
/// a fresh `VkInstance` for each probe and each device made adapter enumeration come
/// back empty after a few dozen (2026-11-22, H100: in a test binary opening ~15 devices,
/// each probed and opened through its own instance); one shared instance avoids it.
pub(crate) fn instance() -> &'static wgpu::Instance {
    static INSTANCE: std::sync::OnceLock<wgpu::Instance> = std::sync::OnceLock::new();
    INSTANCE.get_or_init(|| {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12;
        // WGPU_VALIDATION=1 turns on the Vulkan validation layers (where installed),
        // WGPU_DEBUG=1 debug labels and checks, and so on (wgpu's InstanceFlags::with_env).
        desc.flags = desc.flags.with_env();
        wgpu::Instance::new(desc)
    })
}

pub(crate) fn rank(info: &wgpu::AdapterInfo) -> u8 {
    match info.device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    }
}

/// Every compute-capable adapter, best first (discrete, integrated, virtual, other, CPU).
/// Enumerated once per process (adapters do not come and go while it runs).
pub fn adapters() -> Vec<wgpu::Adapter> {
    static ADAPTERS: std::sync::OnceLock<Vec<wgpu::Adapter>> = std::sync::OnceLock::new();
    ADAPTERS
        .get_or_init(|| {
            let mut list = pollster::block_on(instance().enumerate_adapters(wgpu::Backends::all()));
            list.retain(|a| {
                a.get_downlevel_capabilities()
                    .flags
                    .contains(wgpu::DownlevelFlags::COMPUTE_SHADERS)
            });
            list.sort_by_key(|a| rank(&a.get_info()));
            list
        })
        .clone()
}

/// Descriptions of every adapter, or why there is none.
pub fn devices() -> std::result::Result<Vec<DeviceInfo>, String> {
    let list = adapters();
    if list.is_empty() {
        return Err("no Vulkan, Metal or DX12 adapter with compute shaders was found (on Linux without a GPU, install mesa-vulkan-drivers for lavapipe)".into());
    }
    Ok(list
        .iter()
        .enumerate()
        .map(|(ordinal, a)| DeviceInfo {
            ordinal,
            ..describe(a, &a.limits())
        })
        .collect())
}

pub(crate) fn describe(adapter: &wgpu::Adapter, limits: &wgpu::Limits) -> DeviceInfo {
    let ai = adapter.get_info();
    let features = usable_features(adapter);
    // A bad DOTCOMPUTE_WGPU_FLOAT is reported when the device opens; a listing shows the
    // default.
    let strict = float_mode()
        .unwrap_or(true)
        .then(|| strict_spirv(adapter))
        .flatten();
    DeviceInfo {
        backend: BackendKind::Wgpu,
        ordinal: 0, // set by `devices` and `open`, which know the adapter's place
        name: ai.name.clone(),
        device_type: match ai.device_type {
            wgpu::DeviceType::DiscreteGpu => DeviceType::DiscreteGpu,
            wgpu::DeviceType::IntegratedGpu => DeviceType::IntegratedGpu,
            wgpu::DeviceType::VirtualGpu => DeviceType::VirtualGpu,
            // lavapipe, SwiftShader, WARP: Vulkan / DX12 emulated on the CPU.
            wgpu::DeviceType::Cpu => DeviceType::SoftwareGpu,
            wgpu::DeviceType::Other => DeviceType::Other,
        },
        memory_bytes: limits.max_buffer_size,
        compute_units: 0,
        limits: Limits {
            max_group_threads: limits.max_compute_invocations_per_workgroup,
            max_group_size: [
                limits.max_compute_workgroup_size_x,
                limits.max_compute_workgroup_size_y,
                limits.max_compute_workgroup_size_z,
            ],
            // Dispatches are folded (see dotcompute_codegen::wgsl), so only the product of
            // the group counts is limited; launch() checks it.
            max_groups: [u32::MAX; 3],
            max_shared_bytes: limits.max_compute_workgroup_storage_size as u64,
            max_static_shared_bytes: limits.max_compute_workgroup_storage_size as u64,
            max_buffer_bytes: limits.max_buffer_size,
            max_binding_bytes: limits.max_storage_buffer_binding_size,
        },
        driver: format!(
            "{:?} {:?}, driver {} {}",
            ai.backend, ai.device_type, ai.driver, ai.driver_info
        ),
        caps: Capabilities {
            f64: false,
            i64: false,
            f16: features.contains(wgpu::Features::SHADER_F16),
            // VK_EXT_shader_atomic_float (and Metal 3): one instruction; otherwise a
            // compare-exchange loop on the bits.
            atomic_f32_add: if features.contains(wgpu::Features::SHADER_FLOAT32_ATOMIC) {
                AtomicF32Add::Native
            } else {
                AtomicF32Add::CompareExchangeLoop
            },
            timestamps: features.contains(wgpu::Features::TIMESTAMP_QUERY),
            raw_languages: std::iter::once(RawLanguage::Wgsl)
                .chain(passthrough_language(adapter))
                .collect(),
            concurrent_streams: false,
            native_graphs: false,
            blas: Vec::new(),
            subgroup_size: features
                .contains(wgpu::Features::SUBGROUP)
                .then_some([ai.subgroup_min_size, ai.subgroup_max_size]),
            tensor_cores: false,
            // Exact only through strict SPIR-V; subnormals where the device keeps them.
            exact_float: strict.is_some(),
            subnormals: strict.is_some_and(|o| o.denorm_preserve),
            time_limits: true,
            completes_on_enqueue: false,
            forward_progress: false,
            generated_product: GeneratedProduct::BlockedStrided {
                tiled_below_blocks: if ai.device_type == wgpu::DeviceType::Cpu {
                    u32::MAX
                } else {
                    64
                },
            },
        },
    }
}

/// The environment variable listing optional adapter features not to use, comma
/// separated: `subgroups`, `f16`, `float-atomics`, `timestamps`, `passthrough`. The device then lacks them as a device without
/// them would (capabilities, errors), which tests code meant to run everywhere.
pub const DISABLE_ENV: &str = "DOTCOMPUTE_WGPU_DISABLE";

/// The features [`DISABLE_ENV`] names; a name it does not know is `Error::Config` (the
/// device does not open), not ignored.
pub(crate) fn disabled_features() -> Result<wgpu::Features> {
    let mut off = wgpu::Features::empty();
    let Some(list) = dotcompute_hal::settings::value(DISABLE_ENV) else {
        return Ok(off);
    };
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        off |= match name {
            "subgroups" => wgpu::Features::SUBGROUP,
            "f16" => wgpu::Features::SHADER_F16,
            "float-atomics" => wgpu::Features::SHADER_FLOAT32_ATOMIC,
            "timestamps" => {
                wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS
            }
            // Raw SPIR-V and MSL kernels, and the strict SPIR-V of generated ones.
            "passthrough" => wgpu::Features::PASSTHROUGH_SHADERS,
            _ => {
                return Err(Error::Config {
                    variable: DISABLE_ENV,
                    value: list.clone(),
                    expected: "feature names separated by commas: subgroups, f16, \
                               float-atomics, timestamps, passthrough",
                })
            }
        };
    }
    Ok(off)
}

/// The adapter's features minus those [`DISABLE_ENV`] names (an invalid list disables
/// nothing here; opening the device reports it: [`disabled_features`]).
pub(crate) fn usable_features(adapter: &wgpu::Adapter) -> wgpu::Features {
    adapter.features() - disabled_features().unwrap_or(wgpu::Features::empty())
}

/// Whether the adapter takes SPIR-V as it is (Vulkan with wgpu's passthrough, not
/// turned off through [`DISABLE_ENV`]): raw SPIR-V kernels, and the strict SPIR-V of
/// generated ones.
#[cfg(not(any(target_arch = "wasm32", target_vendor = "apple")))]
pub(crate) fn spirv_passthrough(adapter: &wgpu::Adapter) -> bool {
    passthrough_language(adapter) == Some(RawLanguage::Spirv)
}

/// The language the adapter takes as it is through wgpu's passthrough (not turned off
/// through [`DISABLE_ENV`]): SPIR-V on Vulkan, MSL on Metal; `None` elsewhere.
pub(crate) fn passthrough_language(adapter: &wgpu::Adapter) -> Option<RawLanguage> {
    if !usable_features(adapter).contains(wgpu::Features::PASSTHROUGH_SHADERS) {
        return None;
    }
    match adapter.get_info().backend {
        wgpu::Backend::Vulkan => Some(RawLanguage::Spirv),
        wgpu::Backend::Metal => Some(RawLanguage::Msl),
        _ => None,
    }
}

/// `DOTCOMPUTE_WGPU_FLOAT`: `strict` (the default) compiles generated kernels for Vulkan
/// as SPIR-V that keeps the IR's floating-point meaning; `relaxed` hands WGSL to wgpu as
/// it is (the driver may then fuse `a * b + c` and reassociate sums, for comparisons).
pub const FLOAT_ENV: &str = "DOTCOMPUTE_WGPU_FLOAT";

/// Whether generated kernels get strict SPIR-V ([`FLOAT_ENV`]); another value is an error.
pub(crate) fn float_mode() -> Result<bool> {
    let mode = dotcompute_hal::settings::choices::WGPU_FLOAT.read()?;
    Ok(mode != Some("relaxed"))
}

/// The strict SPIR-V options for a Vulkan adapter with SPIR-V passthrough: the SPIR-V
/// version its Vulkan version takes, and whether it keeps 32-bit subnormals
/// (`shaderDenormPreserveFloat32`). `None` for other adapters.
#[cfg(not(any(target_arch = "wasm32", target_vendor = "apple")))]
pub(crate) fn strict_spirv(
    adapter: &wgpu::Adapter,
) -> Option<dotcompute_codegen::spirv::StrictSpirv> {
    use ash::vk;
    if !spirv_passthrough(adapter) {
        return None;
    }
    // SAFETY: the hal adapter is only read (its instance and physical device handles).
    let hal = unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }?;
    let api = hal.physical_device_capabilities().properties().api_version;
    let version = match (vk::api_version_major(api), vk::api_version_minor(api)) {
        (1, 0) => return None, // no subgroups, no float controls: leave it to wgpu
        (1, 1) => (1, 3),
        (1, 2) => (1, 5),
        _ => (1, 6),
    };
    let mut controls = vk::PhysicalDeviceFloatControlsProperties::default();
    let mut props = vk::PhysicalDeviceProperties2::default().push_next(&mut controls);
    // SAFETY: a valid physical device of this instance; Vulkan 1.1 has the query, and a
    // 1.1 device that lacks float controls leaves the chained struct zeroed.
    unsafe {
        hal.shared_instance()
            .raw_instance()
            .get_physical_device_properties2(hal.raw_physical_device(), &mut props)
    };
    Some(dotcompute_codegen::spirv::StrictSpirv {
        version,
        denorm_preserve: api >= vk::API_VERSION_1_2
            && controls.shader_denorm_preserve_float32 == vk::TRUE,
    })
}

#[cfg(any(target_arch = "wasm32", target_vendor = "apple"))]
pub(crate) fn strict_spirv(_: &wgpu::Adapter) -> Option<dotcompute_codegen::spirv::StrictSpirv> {
    None
}
