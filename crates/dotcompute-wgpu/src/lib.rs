//! # dotcompute-wgpu: the wgpu backend
//!
//! Runs kernels as WGSL generated from the IR (`dotcompute-codegen`) through wgpu on
//! Vulkan, Metal and DX12 (GL is not used: its compute support is too uneven).
//!
//! ## Contract
//!
//! *Validates*: every generated module with naga before the driver sees it (a failure is
//! `Error::Compile` quoting the WGSL line); kernel types WGSL can express (no 64-bit
//! types); buffer sizes against the adapter's largest buffer and largest storage binding;
//! the folded dispatch against the adapter's per-dimension group limit. wgpu's own
//! validation errors are captured and returned as `Err` instead of the default panic.
//!
//! *Trusts* the facade for argument types and ranges, like every backend.
//!
//! Memory comes from the shared size-class pool; reads go through a reused mapped staging
//! buffer. Launches are asynchronous (submitted to the queue in order); reads wait.
//!
//! Out-of-bounds accesses are *not* detected here: WGSL clamps or discards them (robust
//! buffer access). The CPU backend reports them.
//!
//! ## Forms of a generated kernel
//!
//! A launch runs one of three forms of its kernel, each a pipeline of its own:
//!
//! - *plain*: one invocation per logical thread;
//! - *grid-stride*: kernels that read no coordinate but their global id, launched
//!   unchecked on 1-D grids. A fixed dispatch strides over the grid;
//! - *vector*: elementwise kernels over 4-byte buffers, when every buffer starts on 16
//!   bytes and holds whole 16-byte vectors. Four logical threads run per trip, on vector
//!   loads and stores.
//!
//! `dotcompute_codegen::wgsl::WgslOptions` documents each form.
//!
//! ## Streams
//!
//! wgpu exposes one queue per device, and every submission runs in submission order. So
//! every dotcompute stream of a wgpu device is an ordered view of that one queue: work is
//! correct across streams without waits (waits between streams are no-ops, and a freed
//! block can be reused at once), but streams do not run concurrently. Fences wait on the
//! host when recorded. Graphs are replayed by the facade, node by node.

use dotcompute_codegen::{naga_out, wgsl};
use dotcompute_hal::settings;
use dotcompute_hal::words::{widen, word_aligned};
use dotcompute_hal::{
    AtomicF32Add, Backend, BackendDescriptor, BackendKind, BoundArg, Capabilities, DeviceInfo,
    DeviceType, Error, LaunchRequest, Limits, LostFlag, MemoryStats, Queue, RawLanguage, Result,
    SizeClassPool, StreamId, StreamSet, Timing,
};
use dotcompute_ir::{Param, ScalarType};

use std::num::NonZeroU64;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use wgpu::util::DeviceExt;

mod pipeline_cache;
mod transfer;

pub use pipeline_cache::Loaded as PipelineCacheLoaded;

const BACKEND: &str = "wgpu";

fn backend_err(message: impl Into<String>) -> Error {
    Error::Backend {
        backend: BACKEND.into(),
        message: message.into(),
    }
}

/// An error wgpu raised during `operation`, with its kind in structured fields:
/// `Error::Driver { code, name }` is 1 `OutOfMemory`, 2 `Validation` or 3 `Internal`
/// (wgpu's error filters), and `detail` is wgpu's text.
fn wgpu_error(operation: &str, e: &wgpu::Error) -> Error {
    let (code, name) = match e {
        wgpu::Error::OutOfMemory { .. } => (1, "OutOfMemory"),
        wgpu::Error::Validation { .. } => (2, "Validation"),
        wgpu::Error::Internal { .. } => (3, "Internal"),
    };
    Error::Driver {
        backend: BACKEND.into(),
        operation: operation.into(),
        code,
        name: name.into(),
        detail: e.to_string(),
    }
}

/// A pooled device buffer.
pub struct WgpuBuffer {
    buffer: wgpu::Buffer,
    class: usize,
}

struct Pipeline {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
    module: wgsl::WgslModule,
}

/// Program key, group size, dynamic shared length (WGSL modules are specialised per size).
/// One prepared launch: what a compute pass needs to dispatch it.
struct Dispatch {
    pipeline: Arc<Pipeline>,
    bind_group: wgpu::BindGroup,
    groups: [u32; 3],
    /// Checked launches: the violation record bound to the kernel, and the kernel.
    record: Option<(wgpu::Buffer, Arc<dotcompute_ir::Kernel>)>,
}

/// A launch's bindings: the pipeline (by address; the cached entry holds it, so the
/// address is not reused meanwhile), each buffer binding's (binding, buffer, offset,
/// size), and the uniform block's bytes.
#[derive(PartialEq, Eq, Hash)]
struct BindKey {
    pipeline: usize,
    ranges: Vec<(u32, wgpu::Buffer, u64, u64)>,
    uniforms: Vec<u8>,
}

/// A bind group kept for launches with the same [`BindKey`].
struct CachedBinding {
    _pipeline: Arc<Pipeline>,
    bind_group: wgpu::BindGroup,
    _uniforms: wgpu::Buffer,
}

/// Bind groups kept at most; the cache starts over when full (iterative code repeats a
/// few launches, so a small cache catches them).
const BIND_GROUP_CACHE: usize = 256;

/// Loop trips per thread beyond which a launch on llvmpipe is refused (its hard limit
/// is 65,535; see `WgpuBackend::loop_budget`).
const LLVMPIPE_LOOP_BUDGET: u32 = 60_000;
// The generator records the code the hal decodes (two crates, one meaning).
const _: () = assert!(wgsl::LOOP_BUDGET_CODE == dotcompute_hal::LOOP_BUDGET_CODE);

/// Launches recorded into one command buffer before it is submitted: a submission costs
/// more than the launches it carries (about 18 µs for one empty dispatch on NVIDIA
/// Vulkan, H100), and waiting longer would leave the GPU idle.
const BATCH_LAUNCHES: u32 = 32;

/// Dispatches per submission of a long batch (see [`WgpuBackend::chunked`]).
const CHUNK_LAUNCHES: usize = 16;

/// How long a wait polls without blocking before it blocks in the driver
/// ([`WgpuBackend::spin_until_done`]): long enough for short kernels and copies, short
/// enough that a long wait costs little CPU.
const SPIN_BUDGET: std::time::Duration = std::time::Duration::from_millis(2);

/// The code of a pipeline's shader, next to its interface ([`wgsl::WgslModule`]).
#[derive(Clone, Copy)]
enum ShaderCode<'a> {
    /// Hand-written WGSL: the interface's source, through wgpu's own translation.
    Wgsl,
    /// A generated kernel's validated WGSL (strict SPIR-V on Vulkan).
    Generated(&'a naga_out::NagaModule),
    /// Hand-written SPIR-V, passed through as it is.
    Spirv {
        words: &'a [u32],
        workgroup: [u32; 3],
    },
}

/// (program, group size, dynamic shared length, view offsets, checked, form).
type PipelineKey = (dotcompute_hal::ProgramKey, [u32; 3], u32, bool, bool, Form);

/// How a generated kernel maps logical threads to invocations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Form {
    /// One invocation per logical thread.
    Plain,
    /// A fixed dispatch striding over the grid ([`wgsl::WgslOptions::strided`]).
    Strided,
    /// The grid-stride form four logical threads at a time on 16-byte vectors
    /// ([`wgsl::WgslOptions::vector`]).
    Vector,
}

thread_local! {
    /// Per thread: a process-wide count let tests running in parallel see each other's
    /// launches (a launch that must not take the form seemed to take it).
    static VECTOR_LAUNCHES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Launches the calling thread has run in the vector form
/// ([`wgsl::WgslOptions::vector`]) so far (tests check that an eligible launch took it).
pub fn vector_launches() -> u64 {
    VECTOR_LAUNCHES.with(|c| c.get())
}

/// The wgpu backend's entry in the registry: every compute-capable adapter.
pub static DESCRIPTOR: BackendDescriptor = BackendDescriptor {
    kind: BackendKind::Wgpu,
    probe: devices,
    open: |ordinal| {
        let mut list = adapters();
        if ordinal >= list.len() {
            return Err(match list.len() {
                0 => Error::BackendUnavailable {
                    backend: BACKEND.into(),
                    reason: devices().err().unwrap_or_default(),
                },
                n => dotcompute_hal::registry::no_such_device(BackendKind::Wgpu, ordinal, n),
            });
        }
        let mut backend = WgpuBackend::open(list.swap_remove(ordinal))?;
        backend.info.ordinal = ordinal;
        Ok(Box::new(backend) as Box<dyn dotcompute_hal::DynBackend>)
    },
};

/// One wgpu adapter opened as a dotcompute device.
pub struct WgpuBackend {
    info: DeviceInfo,
    device: wgpu::Device,
    queue: wgpu::Queue,
    limits: wgpu::Limits,
    pool: SizeClassPool<wgpu::Buffer>,
    pipelines: Mutex<dotcompute_hal::KeyMap<PipelineKey, Arc<Pipeline>>>,
    /// Bind groups and uniform buffers of recent launches, reused by identical ones.
    /// Emptied whenever a pool buffer is destroyed: an entry of a destroyed buffer could
    /// never match again (its key holds that buffer's handle), but would keep it alive.
    bind_groups: Mutex<std::collections::HashMap<BindKey, CachedBinding>>,
    staging: Mutex<Option<wgpu::Buffer>>,
    /// Errors wgpu reported outside an error scope (instead of its default panic).
    uncaptured: Arc<Mutex<Option<Error>>>,
    /// Set by wgpu's device-lost callback: every later call is `Error::DeviceLost`.
    lost: Arc<LostFlag>,
    /// The longest wait for the device (`DOTCOMPUTE_WGPU_TIMEOUT_S`, default 300 s;
    /// `Device::set_time_limit` replaces it).
    wait_timeout: settings::TimeLimit,
    /// Whether eligible kernels run in the grid-stride form (`DOTCOMPUTE_WGPU_STRIDED=0`
    /// turns it off, for comparisons and as an escape hatch).
    strided: bool,
    /// Whether elementwise kernels over 4-byte buffers run in the vector form where their
    /// buffers allow (`DOTCOMPUTE_WGPU_VECTORS=0` turns it off, for comparisons).
    vectors: bool,
    /// The one door to the queue (see [`QueueOrder`]): launches recorded but not yet
    /// submitted, and the lock every submission and queue write holds.
    /// `DOTCOMPUTE_WGPU_BATCH=0` submits each launch at once.
    order: Mutex<QueueOrder>,
    batch: bool,
    /// Whether long batches (graph replays) are submitted in chunks of [`CHUNK_LAUNCHES`]
    /// as they are recorded (`DOTCOMPUTE_WGPU_CHUNKS=0`: one submission, for comparisons).
    chunked: bool,
    /// How generated kernels reach a Vulkan driver: as SPIR-V that forbids contraction
    /// (and keeps subnormals where the device can), through wgpu's SPIR-V passthrough;
    /// `None` elsewhere (Metal, DX12, adapters without passthrough, or
    /// `DOTCOMPUTE_WGPU_FLOAT=relaxed`), where WGSL goes through wgpu as it is.
    strict_spirv: Option<dotcompute_codegen::spirv::StrictSpirv>,
    /// Whether the device takes SPIR-V as it is (raw SPIR-V kernels).
    passthrough: bool,
    /// llvmpipe (lavapipe) ends a thread's loops after 65,535 trips in all and the loop
    /// just exits: kernels with loops count their trips there and a thread past this
    /// budget makes the launch an error ([`wgsl::WgslOptions::loop_budget`]). The margin
    /// below 65,535 covers loops the count does not see (atomic retry loops).
    loop_budget: Option<u32>,
    /// `DOTCOMPUTE_WGPU_STORAGE_BARRIERS=always`: every barrier also orders storage
    /// buffers, as before the analysis (for comparisons).
    storage_barriers_always: bool,
    /// Whether waits first poll without blocking for up to [`SPIN_BUDGET`]
    /// ([`WgpuBackend::spin_until_done`]): on hardware adapters, unless
    /// `DOTCOMPUTE_WGPU_SPIN=0`. Never on software adapters, whose work runs on the same
    /// cores a spinning thread would take.
    spin: bool,
    /// Whether large word-aligned copies and fills run as kernels ([`transfer`]);
    /// `DOTCOMPUTE_WGPU_TRANSFER_KERNELS=0` keeps the driver's copy and the queue write
    /// (for comparisons).
    transfer_kernels: bool,
    /// The persistent pipeline cache ([`pipeline_cache`]), where the adapter has one.
    pipeline_cache: Option<pipeline_cache::PipelineCacheFile>,
    /// The copy and fill kernels ([`transfer`]), built on first use.
    transfers: OnceLock<std::result::Result<transfer::TransferKernels, String>>,
    profiling: AtomicBool,
    /// When profiling was turned on: the origin of timeline start times.
    origin: Mutex<std::time::Instant>,
    timings: Mutex<Vec<Timing>>,
    /// Timestamp queries, when the adapter has them.
    stamps: Option<Mutex<Stamps>>,
}

/// Two timestamps around one pass (or one copy), resolved and read back.
struct Stamps {
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    readback: wgpu::Buffer,
    /// Nanoseconds per timestamp tick.
    period: f64,
    /// Whether timestamps can also be written between commands (for copies).
    inside_encoders: bool,
}

/// Launches recorded but not yet submitted (one command encoder, one compute pass per
/// launch, and how many), behind the lock that every use of the queue holds.
///
/// **Ordering rule.** The queue runs work in the order it reaches it, and a queue write
/// (`write_buffer`) lands before the next submission. Each thread's work must reach the
/// queue in the order that thread issued it, whatever other threads do: a launch recorded
/// here, then a read, a fill or a write of a buffer (possibly a pool block the launch's
/// dropped input gave back) must run in that order. So the pending launches are submitted
/// and the next queue operation is issued under one lock ([`WgpuBackend::with_queue`]);
/// taking the pending work and submitting it in two steps let another thread's write or
/// copy reach the queue in between, ahead of a launch recorded before it (the silent
/// wrong results of issue 27, item 1).
#[derive(Default)]
struct QueueOrder {
    pending: Option<(wgpu::CommandEncoder, u32)>,
}

/// The process's one wgpu instance. On the GPU machine's NVIDIA driver (580), creating
/// a fresh `VkInstance` for each probe and each device made adapter enumeration come
/// back empty after a few dozen (2026-11-22, H100: in a test binary opening ~15 devices,
/// each probed and opened through its own instance); one shared instance avoids it.
fn instance() -> &'static wgpu::Instance {
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

fn rank(info: &wgpu::AdapterInfo) -> u8 {
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

fn describe(adapter: &wgpu::Adapter, limits: &wgpu::Limits) -> DeviceInfo {
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
            raw_languages: if spirv_passthrough(adapter) {
                vec![RawLanguage::Wgsl, RawLanguage::Spirv]
            } else {
                vec![RawLanguage::Wgsl]
            },
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
        },
    }
}

/// The environment variable listing optional adapter features not to use, comma
/// separated: `subgroups`, `f16`, `float-atomics`, `timestamps`, `passthrough`. The device then lacks them as a device without
/// them would (capabilities, errors), which tests code meant to run everywhere.
pub const DISABLE_ENV: &str = "DOTCOMPUTE_WGPU_DISABLE";

/// The adapter's features minus those [`DISABLE_ENV`] names.
fn usable_features(adapter: &wgpu::Adapter) -> wgpu::Features {
    let mut features = adapter.features();
    if let Ok(list) = std::env::var(DISABLE_ENV) {
        for name in list.split(',').map(str::trim) {
            match name {
                "subgroups" => features.remove(wgpu::Features::SUBGROUP),
                "f16" => features.remove(wgpu::Features::SHADER_F16),
                "float-atomics" => features.remove(wgpu::Features::SHADER_FLOAT32_ATOMIC),
                "timestamps" => features.remove(
                    wgpu::Features::TIMESTAMP_QUERY
                        | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS,
                ),
                // Raw SPIR-V kernels and the strict SPIR-V of generated ones.
                "passthrough" => features.remove(wgpu::Features::PASSTHROUGH_SHADERS),
                _ => {}
            }
        }
    }
    features
}

/// Whether the adapter takes SPIR-V as it is (Vulkan with wgpu's passthrough, not
/// turned off through [`DISABLE_ENV`]): raw SPIR-V kernels, and the strict SPIR-V of
/// generated ones.
fn spirv_passthrough(adapter: &wgpu::Adapter) -> bool {
    adapter.get_info().backend == wgpu::Backend::Vulkan
        && usable_features(adapter).contains(wgpu::Features::PASSTHROUGH_SHADERS)
}

/// `DOTCOMPUTE_WGPU_FLOAT`: `strict` (the default) compiles generated kernels for Vulkan
/// as SPIR-V that keeps the IR's floating-point meaning; `relaxed` hands WGSL to wgpu as
/// it is (the driver may then fuse `a * b + c` and reassociate sums, for comparisons).
pub const FLOAT_ENV: &str = "DOTCOMPUTE_WGPU_FLOAT";

/// Whether generated kernels get strict SPIR-V ([`FLOAT_ENV`]); another value is an error.
fn float_mode() -> Result<bool> {
    let mode = dotcompute_hal::settings::choice(
        FLOAT_ENV,
        &["strict", "relaxed"],
        "`strict` (the default) or `relaxed`",
    )?;
    Ok(mode != Some("relaxed"))
}

/// The strict SPIR-V options for a Vulkan adapter with SPIR-V passthrough: the SPIR-V
/// version its Vulkan version takes, and whether it keeps 32-bit subnormals
/// (`shaderDenormPreserveFloat32`). `None` for other adapters.
#[cfg(not(any(target_arch = "wasm32", target_vendor = "apple")))]
fn strict_spirv(adapter: &wgpu::Adapter) -> Option<dotcompute_codegen::spirv::StrictSpirv> {
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
fn strict_spirv(_: &wgpu::Adapter) -> Option<dotcompute_codegen::spirv::StrictSpirv> {
    None
}

impl WgpuBackend {
    /// Opens the best adapter.
    pub fn new() -> Result<WgpuBackend> {
        let adapter = adapters()
            .into_iter()
            .next()
            .ok_or_else(|| Error::BackendUnavailable {
                backend: BACKEND.into(),
                reason: devices().err().unwrap_or_default(),
            })?;
        WgpuBackend::open(adapter)
    }

    /// Opens `adapter` with all of its limits. A `DOTCOMPUTE_WGPU_*` setting with a value
    /// it does not accept is `Error::Config`, before anything is opened.
    pub fn open(adapter: wgpu::Adapter) -> Result<WgpuBackend> {
        let wait_timeout = settings::TimeLimit::from_env(
            "DOTCOMPUTE_WGPU_TIMEOUT_S",
            std::time::Duration::from_secs(300),
        );
        wait_timeout.get()?;
        let strided = settings::switch_or("DOTCOMPUTE_WGPU_STRIDED", true)?;
        let vectors = settings::switch_or("DOTCOMPUTE_WGPU_VECTORS", true)?;
        let batch = settings::switch_or("DOTCOMPUTE_WGPU_BATCH", true)?;
        let chunked = settings::switch_or("DOTCOMPUTE_WGPU_CHUNKS", true)?;
        let storage_barriers_always = settings::choice(
            "DOTCOMPUTE_WGPU_STORAGE_BARRIERS",
            &["always", "analysed"],
            "`always` (every barrier orders storage buffers) or `analysed` (the default)",
        )? == Some("always");
        let software = adapter.get_info().device_type == wgpu::DeviceType::Cpu;
        let spin = settings::switch_or("DOTCOMPUTE_WGPU_SPIN", !software)?;
        let transfer_kernels = settings::switch_or("DOTCOMPUTE_WGPU_TRANSFER_KERNELS", true)?;
        let limits = adapter.limits();
        let mut required_features = wgpu::Features::empty();
        for f in [
            wgpu::Features::TIMESTAMP_QUERY,
            wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS,
            wgpu::Features::SUBGROUP,
            wgpu::Features::SHADER_F16,
            wgpu::Features::SHADER_FLOAT32_ATOMIC,
        ] {
            if usable_features(&adapter).contains(f) {
                required_features |= f;
            }
        }
        let strict_spirv = float_mode()?.then(|| strict_spirv(&adapter)).flatten();
        let passthrough = spirv_passthrough(&adapter);
        if passthrough {
            required_features |= wgpu::Features::PASSTHROUGH_SHADERS;
        }
        let cache_path = pipeline_cache::path_for(&adapter);
        if cache_path.is_some() {
            required_features |= wgpu::Features::PIPELINE_CACHE;
        }
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("dotcompute"),
            required_features,
            required_limits: limits.clone(),
            ..Default::default()
        }))
        .map_err(|e| Error::BackendUnavailable {
            backend: BACKEND.into(),
            reason: format!("the adapter refused a device: {e}"),
        })?;
        let uncaptured = Arc::new(Mutex::new(None));
        let sink = uncaptured.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let mut slot = sink.lock().unwrap_or_else(|p| p.into_inner());
            if slot.is_none() {
                *slot = Some(wgpu_error("an earlier call (reported asynchronously)", &e));
            }
        }));
        let lost = Arc::new(LostFlag::default());
        let lost_sink = lost.clone();
        device.set_device_lost_callback(move |reason, message| {
            lost_sink.mark(format!("{reason:?}: {message}"));
        });
        let pipeline_cache =
            cache_path.map(|path| pipeline_cache::PipelineCacheFile::open(&device, path));
        let stamps = required_features
            .contains(wgpu::Features::TIMESTAMP_QUERY)
            .then(|| {
                let buffer = |usage, label| {
                    device.create_buffer(&wgpu::BufferDescriptor {
                        label: Some(label),
                        size: 16,
                        usage,
                        mapped_at_creation: false,
                    })
                };
                Mutex::new(Stamps {
                    set: device.create_query_set(&wgpu::QuerySetDescriptor {
                        label: Some("dotcompute timestamps"),
                        ty: wgpu::QueryType::Timestamp,
                        count: 2,
                    }),
                    resolve: buffer(
                        wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                        "dotcompute timestamp resolve",
                    ),
                    readback: buffer(
                        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                        "dotcompute timestamp readback",
                    ),
                    period: queue.get_timestamp_period() as f64,
                    inside_encoders: required_features
                        .contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS),
                })
            });
        Ok(WgpuBackend {
            stamps,
            transfer_kernels,
            transfers: OnceLock::new(),
            pipeline_cache,
            profiling: AtomicBool::new(false),
            origin: Mutex::new(std::time::Instant::now()),
            timings: Mutex::new(Vec::new()),
            info: describe(&adapter, &limits),
            device,
            queue,
            limits,
            pool: SizeClassPool::new(),
            pipelines: Mutex::new(Default::default()),
            bind_groups: Mutex::new(Default::default()),
            staging: Mutex::new(None),
            uncaptured,
            lost,
            wait_timeout,
            strided,
            vectors,
            order: Mutex::new(QueueOrder::default()),
            batch,
            chunked,
            strict_spirv,
            passthrough,
            loop_budget: adapter
                .get_info()
                .driver
                .to_ascii_lowercase()
                .contains("llvmpipe")
                .then_some(LLVMPIPE_LOOP_BUDGET),
            storage_barriers_always,
            spin,
        })
    }

    /// `Error::DeviceLost` once wgpu reported the device lost.
    fn check_lost(&self) -> Result<()> {
        self.lost.check(|| self.info.label())
    }

    /// Returns (and clears) an error wgpu reported asynchronously.
    fn check_uncaptured(&self) -> Result<()> {
        self.check_lost()?;
        match self
            .uncaptured
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Waits for the submitted work, at most `wait_timeout`: a device that does not
    /// finish in that time is an error, not a hang.
    fn wait(&self) -> Result<()> {
        let (limit, set_by) = self.wait_timeout.get()?;
        self.wait_within(limit, set_by, "its work")
    }

    /// [`Self::wait`] with a limit of the caller's (a launch's own); `what` names the
    /// work in the error.
    fn wait_within(&self, limit: std::time::Duration, set_by: &str, what: &str) -> Result<()> {
        self.check_lost()?;
        if self.spin && self.spin_until_done(limit.min(SPIN_BUDGET))? {
            return self.check_uncaptured();
        }
        self.flush()?;
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: None,
                timeout: Some(limit),
            })
            .map_err(|e| match e {
                // A kernel that does not end cannot be stopped through wgpu, and every
                // later submission would queue behind it: the device is lost to this
                // process (its driver ends the work when the process exits).
                wgpu::PollError::Timeout => {
                    self.lost.mark(format!(
                        "{what} did not finish within {limit:?} (a kernel that never ends? \
                         {set_by} set the limit); the device cannot be used again in this \
                         process"
                    ));
                    self.check_lost().unwrap_err()
                }
                e => backend_err(format!("waiting for the device failed: {e}")),
            })?;
        self.check_uncaptured()
    }

    /// The pipeline cache to build pipelines with, where there is one.
    fn cache(&self) -> Option<&wgpu::PipelineCache> {
        self.pipeline_cache.as_ref().map(|c| &c.cache)
    }

    /// Stores the pipeline cache after a new pipeline (best effort).
    fn save_pipeline_cache(&self) {
        if let Some(c) = &self.pipeline_cache {
            c.save();
        }
    }

    /// What the persistent pipeline cache found on disk when this device opened; `None`
    /// where the device keeps none (not Vulkan, or `DOTCOMPUTE_CACHE=off`).
    pub fn pipeline_cache_loaded(&self) -> Option<PipelineCacheLoaded> {
        self.pipeline_cache.as_ref().map(|c| c.loaded)
    }

    /// Submits the recorded launches and polls the device without blocking until the
    /// work submitted so far is done (true) or `budget` has passed (false: the caller
    /// then blocks in the driver's wait).
    ///
    /// Why: the driver's blocking wait wakes the thread long after short work ends
    /// (NVIDIA Vulkan: tens of microseconds), which dominated a launch + synchronize
    /// round trip; CUDA's default synchronization spins the same way.
    fn spin_until_done(&self, budget: std::time::Duration) -> Result<bool> {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        // Registered under the queue lock after the recorded launches are submitted, so
        // it covers everything this thread submitted before (and queue writes: wgpu
        // flushes them first).
        self.with_queue(|queue| {
            queue.on_submitted_work_done(move || flag.store(true, Ordering::Release))
        });
        self.check_uncaptured()?;
        let start = std::time::Instant::now();
        loop {
            self.device
                .poll(wgpu::PollType::Poll)
                .map_err(|e| backend_err(format!("polling the device failed: {e}")))?;
            if done.load(Ordering::Acquire) {
                return Ok(true);
            }
            if start.elapsed() >= budget {
                return Ok(false);
            }
            std::thread::yield_now();
        }
    }

    /// A storage buffer of `bytes` (a pool size class) for a request of `requested`
    /// bytes, which errors report.
    fn create_storage(&self, bytes: usize, requested: usize) -> Result<wgpu::Buffer> {
        let oom = |detail: String| Error::OutOfMemory {
            device: self.info.label(),
            requested: requested as u64,
            detail,
        };
        if bytes as u64 > self.limits.max_buffer_size {
            return Err(oom(format!(
                "the adapter's largest buffer is {} bytes",
                self.limits.max_buffer_size
            )));
        }
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("dotcompute buffer"),
            size: bytes as u64,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(oom(e.to_string()));
        }
        Ok(buffer)
    }

    /// Destroys a pool block's buffer, after forgetting the bind groups that could use it.
    fn destroy(&self, buffer: wgpu::Buffer) {
        // Recorded launches may use it: they are submitted first (wgpu keeps a destroyed
        // buffer's memory until submitted work that uses it is done).
        let _ = self.flush();
        self.bind_groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        buffer.destroy();
    }

    /// Runs `f` on the queue after every launch recorded so far has been submitted, with
    /// no other queue operation in between (the ordering rule of [`QueueOrder`]). Every
    /// submission and queue write goes through here.
    fn with_queue<R>(&self, f: impl FnOnce(&wgpu::Queue) -> R) -> R {
        let mut order = self.order.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((encoder, _)) = order.pending.take() {
            self.queue.submit(Some(encoder.finish()));
        }
        f(&self.queue)
    }

    fn submit(&self, encoder: wgpu::CommandEncoder) -> Result<()> {
        // Launches recorded earlier run first: submissions execute in order.
        self.with_queue(|queue| queue.submit(Some(encoder.finish())));
        self.check_uncaptured()
    }

    /// Submits the recorded launches (before a wait or a destroyed buffer, which must
    /// come after them).
    fn flush(&self) -> Result<()> {
        self.with_queue(|_| ());
        self.check_uncaptured()
    }

    /// Submits an encoder whose work wrote timestamps 0 and 1 of `stamps.set`, waits, and
    /// records the device time between them under `label`.
    fn submit_timed(
        &self,
        mut encoder: wgpu::CommandEncoder,
        stamps: &Stamps,
        stream: StreamId,
        label: &str,
    ) -> Result<()> {
        let start = std::time::Instant::now();
        encoder.resolve_query_set(&stamps.set, 0..2, &stamps.resolve, 0);
        encoder.copy_buffer_to_buffer(&stamps.resolve, 0, &stamps.readback, 0, 16);
        self.submit(encoder)?;
        let mut raw = [0u8; 16];
        self.read_mapped(&stamps.readback, &mut raw, "the timestamps")?;
        let t0 = u64::from_le_bytes(raw[0..8].try_into().unwrap());
        let t1 = u64::from_le_bytes(raw[8..16].try_into().unwrap());
        let ticks = t1.saturating_sub(t0);
        self.record(
            stream,
            label,
            start,
            std::time::Duration::from_nanos((ticks as f64 * stamps.period) as u64),
            true,
        );
        Ok(())
    }

    /// Maps the first `out.len()` bytes of a `MAP_READ` buffer once the submitted work is
    /// done, copies them into `out` and unmaps. `what` names the buffer in errors.
    fn read_mapped(&self, buffer: &wgpu::Buffer, out: &mut [u8], what: &str) -> Result<()> {
        let slice = buffer.slice(0..out.len() as u64);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.wait()?;
        rx.recv()
            .map_err(|_| backend_err(format!("the mapping callback for {what} never ran")))?
            .map_err(|e| backend_err(format!("mapping {what} failed: {e}")))?;
        {
            let view = slice
                .get_mapped_range()
                .map_err(|e| backend_err(format!("reading {what} failed: {e}")))?;
            out.copy_from_slice(&view);
        }
        buffer.unmap();
        Ok(())
    }

    /// Records a timing; `start` is when the host submitted the work (the timeline
    /// position; profiled work is waited for, so submissions do not overlap).
    fn record(
        &self,
        stream: StreamId,
        label: &str,
        start: std::time::Instant,
        duration: std::time::Duration,
        device_time: bool,
    ) {
        let origin = *self.origin.lock().unwrap_or_else(|p| p.into_inner());
        self.timings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Timing {
                label: label.to_string(),
                duration,
                device_time,
                stream,
                start: Some(start.saturating_duration_since(origin)),
            });
    }

    fn profiling(&self) -> bool {
        self.profiling.load(Ordering::Relaxed)
    }

    fn pipeline(
        &self,
        program: &dotcompute_hal::Program,
        group: [u32; 3],
        dynamic_len: u32,
        view_offsets: bool,
        checked: bool,
        form: Form,
    ) -> Result<Arc<Pipeline>> {
        let kernel = &*program.kernel;
        let key = (program.key, group, dynamic_len, view_offsets, checked, form);
        if let Some(p) = self
            .pipelines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Ok(p.clone());
        }
        let compile_err = |log: String| Error::Compile {
            kernel: kernel.name.clone(),
            backend: BACKEND.into(),
            log,
        };
        let module = wgsl::generate(
            kernel,
            &wgsl::WgslOptions {
                group_size: group,
                dynamic_shared_len: dynamic_len,
                view_offsets,
                checked,
                strided: form != Form::Plain,
                vector: form == Form::Vector,
                native_f32_atomics: self.info.caps.atomic_f32_add == AtomicF32Add::Native,
                storage_barriers: self.storage_barriers_always
                    || dotcompute_ir::analysis::barrier_orders_buffers(kernel),
                loop_budget: self.loop_budget,
            },
        )
        .map_err(|e| compile_err(e.message))?;
        // The variant: what the launch specialised (DOTCOMPUTE_DUMP file names).
        let variant = format!(
            "group {}x{}x{}{}{}{}{}",
            group[0],
            group[1],
            group[2],
            if kernel.dynamic_shared().is_some() {
                format!(" shared {dynamic_len}")
            } else {
                String::new()
            },
            if view_offsets { " offsets" } else { "" },
            if checked { " checked" } else { "" },
            match form {
                Form::Plain => "",
                Form::Strided => " strided",
                Form::Vector => " vector",
            }
        );
        dotcompute_hal::dump::dump_source(program, &variant, "wgsl", "//", &module.source)?;
        // naga validates first so that a codegen bug is reported with the WGSL line.
        let validated = naga_out::validate_wgsl(&module.source).map_err(compile_err)?;
        self.compile(
            key,
            &kernel.name,
            module,
            "main",
            ShaderCode::Generated(&validated),
        )
    }

    /// Creates (and caches under `key`) the pipeline of a module whose interface
    /// `module` describes. A generated kernel goes to a Vulkan driver as strict SPIR-V
    /// where the device allows ([`WgpuBackend::strict_spirv`]); hand-written WGSL keeps
    /// wgpu's own translation; hand-written SPIR-V goes as it is.
    fn compile(
        &self,
        key: PipelineKey,
        name: &str,
        module: wgsl::WgslModule,
        entry: &str,
        code: ShaderCode<'_>,
    ) -> Result<Arc<Pipeline>> {
        let compile_err = |log: String| Error::Compile {
            kernel: name.to_string(),
            backend: BACKEND.into(),
            log,
        };
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let passthrough =
            |words: Vec<u32>, workgroup: [u32; 3]| wgpu::ShaderModuleDescriptorPassthrough {
                label: Some(name),
                entry_points: std::borrow::Cow::Owned(vec![wgpu::PassthroughShaderEntryPoint {
                    name: entry.to_string().into(),
                    workgroup_size: (workgroup[0], workgroup[1], workgroup[2]),
                }]),
                spirv: Some(std::borrow::Cow::Owned(words)),
                ..Default::default()
            };
        let shader = match (code, &self.strict_spirv) {
            (ShaderCode::Spirv { words, workgroup }, _) => {
                if !self.passthrough {
                    return Err(Error::Unsupported {
                        op: "launch_raw",
                        detail: format!(
                            "kernel `{name}` is SPIR-V, and this adapter does not take SPIR-V as \
                             it is (it runs on {})",
                            RawLanguage::Spirv.runs_on()
                        ),
                    });
                }
                // SAFETY: the module passed naga's SPIR-V reader and validator when the
                // kernel was made, and its interface was checked against the declared
                // parameters, which the pipeline layout below follows. What it does
                // inside its buffers is the caller's code, run as written (the documented
                // contract of RawKernel::spirv); Vulkan's robust buffer access, which wgpu
                // enables, bounds its accesses to the bound ranges.
                unsafe {
                    self.device
                        .create_shader_module_passthrough(passthrough(words.to_vec(), workgroup))
                }
            }
            (ShaderCode::Generated(naga), Some(options)) => {
                let words =
                    dotcompute_codegen::spirv::to_strict_spirv(naga, options).map_err(|e| {
                        compile_err(format!("{e}\n--- generated WGSL ---\n{}", module.source))
                    })?;
                let workgroup = naga
                    .module
                    .entry_points
                    .iter()
                    .find(|e| e.name == entry)
                    .map_or([1; 3], |e| e.workgroup_size);
                // SAFETY: naga wrote the module from WGSL it validated, with the bounds
                // checks wgpu itself uses on Vulkan (buffer accesses left to the robust
                // buffer access wgpu enables); the pass after it only adds decorations and
                // float-control modes. The pipeline layout is explicit.
                unsafe {
                    self.device
                        .create_shader_module_passthrough(passthrough(words, workgroup))
                }
            }
            _ => self
                .device
                .create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(name),
                    source: wgpu::ShaderSource::Wgsl(module.source.as_str().into()),
                }),
        };
        let storage = |read_only| wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        };
        let mut entries: Vec<wgpu::BindGroupLayoutEntry> = module
            .buffers
            .iter()
            .map(|&(_, binding, read_only)| wgpu::BindGroupLayoutEntry {
                binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: storage(read_only),
                count: None,
            })
            .collect();
        if let Some(binding) = module.violation_binding {
            entries.push(wgpu::BindGroupLayoutEntry {
                binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: storage(false),
                count: None,
            });
        }
        if module.uniform_size > 0 {
            entries.push(wgpu::BindGroupLayoutEntry {
                binding: module.uniform_binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            });
        }
        let layout = self
            .device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(name),
                entries: &entries,
            });
        let pipeline_layout = self
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(name),
                bind_group_layouts: &[Some(&layout)],
                ..Default::default()
            });
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(name),
                layout: Some(&pipeline_layout),
                module: &shader,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: self.cache(),
            });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(compile_err(format!(
                "{e}\n--- generated WGSL ---\n{}",
                module.source
            )));
        }
        self.save_pipeline_cache();
        let p = Arc::new(Pipeline {
            pipeline,
            layout,
            module,
        });
        self.pipelines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, p.clone());
        Ok(p)
    }

    /// The pipeline, dispatch and uniform bytes of a hand-written WGSL kernel. Raw shaders
    /// see the dispatch as it is, so each dimension must fit the adapter's limit.
    fn raw_pipeline(
        &self,
        program: &dotcompute_hal::Program,
        raw: &dotcompute_hal::RawSource,
        groups: [u32; 3],
        scalars: &[dotcompute_ir::Literal],
    ) -> Result<(Arc<Pipeline>, [u32; 3], Vec<u8>)> {
        let kernel = &*program.kernel;
        let max = self.limits.max_compute_workgroups_per_dimension;
        if let Some(d) = (0..3).find(|&d| groups[d] > max) {
            return Err(Error::GridTooLarge {
                kernel: kernel.name.clone(),
                detail: format!(
                    "dimension {d} needs {} groups; a raw WGSL kernel is dispatched as is and this adapter allows {max} per dimension",
                    groups[d]
                ),
            });
        }
        let key = (
            program.key,
            raw.workgroup_size.unwrap_or([0; 3]),
            u32::MAX,
            false,
            false,
            Form::Plain,
        );
        let cached = self
            .pipelines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        let pipeline = match cached {
            Some(p) => p,
            None => {
                let buffer_params = kernel
                    .params
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| matches!(p, Param::Buffer { .. }))
                    .map(|(i, _)| i as u32);
                let module = wgsl::WgslModule {
                    source: raw.text.clone(),
                    buffers: buffer_params
                        .zip(&raw.buffer_bindings)
                        .map(|(i, &(b, ro))| (i, b, ro))
                        .collect(),
                    uniform_binding: raw.uniform_binding.unwrap_or(0),
                    uniform_size: if raw.uniform_binding.is_some() { 16 } else { 0 },
                    violation_binding: None,
                };
                let code = match &raw.spirv {
                    Some(words) => ShaderCode::Spirv {
                        words,
                        workgroup: raw.workgroup_size.unwrap_or([1; 3]),
                    },
                    None => {
                        dotcompute_hal::dump::dump_source(program, "", "wgsl", "//", &raw.text)?;
                        ShaderCode::Wgsl
                    }
                };
                self.compile(key, &kernel.name, module, &raw.entry, code)?
            }
        };
        // Scalars only, 4 bytes each, padded to 16 bytes.
        Ok((pipeline, groups, wgsl::pack_scalars(scalars)))
    }

    /// The pipeline, bind group and dispatch of one launch.
    fn prepare_dispatch(&self, request: &LaunchRequest<'_, WgpuBuffer>) -> Result<Dispatch> {
        let program = request.program;
        let kernel = &*program.kernel;
        let g = request.geometry;
        let scalars: Vec<_> = request
            .args
            .iter()
            .filter_map(|a| match a {
                BoundArg::Scalar(l) => Some(*l),
                BoundArg::Buffer { .. } => None,
            })
            .collect();
        // A view at an offset the adapter cannot bind at is bound from the aligned offset
        // below it; the kernel variant with view offsets adds the rest (in elements).
        let align = self.limits.min_storage_buffer_offset_alignment.max(1) as usize;
        let unaligned = request
            .args
            .iter()
            .any(|a| matches!(a, BoundArg::Buffer { offset, .. } if offset % align != 0));
        let (pipeline, dispatch, uniform_bytes, view_offsets) = match program.raw_source() {
            Some(_) if unaligned => {
                return Err(Error::Unsupported {
                    op: "launch_raw",
                    detail: format!(
                        "a raw kernel's buffer views must start at a multiple of {align} \
                         bytes on this adapter (min_storage_buffer_offset_alignment)"
                    ),
                })
            }
            Some(raw) => {
                let (pipeline, dispatch, uniforms) =
                    self.raw_pipeline(program, raw, g.groups, &scalars)?;
                (pipeline, dispatch, uniforms, false)
            }
            None => {
                // The uniform words after the scalars: the view-offset variant's element
                // offsets, then the lengths of the f16 buffers (see dotcompute_codegen::wgsl).
                let buffers = request.args.iter().filter_map(|a| match a {
                    BoundArg::Buffer {
                        offset, len, elem, ..
                    } => Some((*offset, *len, *elem)),
                    BoundArg::Scalar(_) => None,
                });
                let element_offsets: Vec<u32> = if unaligned {
                    buffers
                        .clone()
                        .map(|(offset, _, elem)| ((offset % align) / elem.size_bytes()) as u32)
                        .collect()
                } else {
                    Vec::new()
                };
                let half_lens: Vec<u32> = buffers
                    .clone()
                    .filter(|&(_, _, elem)| elem == ScalarType::F16)
                    .map(|(_, len, _)| len as u32)
                    .collect();
                // The grid-stride form where it cannot be observed (see WgslOptions::strided).
                let strided = self.strided
                    && !g.checked
                    && g.grid[1] == 1
                    && g.grid[2] == 1
                    && g.group[1] == 1
                    && g.group[2] == 1
                    && program.grid_stride;
                // The vector form binds each buffer as 16-byte vectors: every one must
                // start on 16 bytes and hold whole vectors.
                let vector = strided
                    && self.vectors
                    && !unaligned
                    && program.vector_form
                    && buffers
                        .clone()
                        .all(|(offset, len, _)| offset % 16 == 0 && len % 4 == 0);
                let form = match (strided, vector) {
                    (_, true) => {
                        VECTOR_LAUNCHES.with(|c| c.set(c.get() + 1));
                        Form::Vector
                    }
                    (true, false) => Form::Strided,
                    _ => Form::Plain,
                };
                let dispatch = match form {
                    Form::Plain => self.dispatch_for(&kernel.name, g.groups)?,
                    Form::Strided | Form::Vector => {
                        // Logical threads per invocation and trip.
                        let lanes = if form == Form::Vector { 4 } else { 1 };
                        let per_group = lanes * g.group[0] as u64;
                        let groups = (g.grid[0] as u64).div_ceil(per_group).max(1);
                        [groups.min(wgsl::STRIDED_GROUPS as u64) as u32, 1, 1]
                    }
                };
                (
                    self.pipeline(
                        program,
                        g.group,
                        g.dynamic_shared_len,
                        unaligned,
                        g.checked,
                        form,
                    )?,
                    dispatch,
                    wgsl::pack_uniforms(g.grid, g.groups, &scalars, &element_offsets, &half_lens),
                    unaligned,
                )
            }
        };
        let max_binding = self.limits.max_storage_buffer_binding_size;
        // (binding, buffer, offset, size) of every buffer parameter.
        let mut ranges = Vec::with_capacity(pipeline.module.buffers.len());
        for &(param, binding, _) in &pipeline.module.buffers {
            let BoundArg::Buffer {
                buffer,
                offset,
                len,
                elem,
                ..
            } = &request.args[param as usize]
            else {
                return Err(backend_err("internal: a buffer parameter got a scalar"));
            };
            // With view offsets the binding starts at the aligned offset below the view.
            let skipped = if view_offsets { offset % align } else { 0 };
            // Storage bindings are sized in whole words (an f16 buffer's last word may
            // hold one element past its end; the kernel takes its length from the
            // uniform block, and pool blocks are larger than that).
            let size = ((skipped + *len * elem.size_bytes()) as u64)
                .next_multiple_of(4)
                .min(buffer.buffer.size() - (offset - skipped) as u64);
            if size > max_binding {
                return Err(Error::ArgumentType {
                    kernel: kernel.name.clone(),
                    arg: kernel.params[param as usize].name().to_string(),
                    expected: format!(
                        "at most {max_binding} bytes (this adapter's largest storage binding)"
                    ),
                    found: format!("{size} bytes"),
                });
            }
            ranges.push((binding, &buffer.buffer, (offset - skipped) as u64, size));
        }
        // Checked launches: a zeroed violation record, read after the launch.
        let record = pipeline.module.violation_binding.map(|binding| {
            let buffer = self
                .device
                .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some("dotcompute violation record"),
                    contents: &[0u8; dotcompute_hal::VIOLATION_WORDS * 4],
                    usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                });
            (binding, buffer)
        });
        // A launch like an earlier one (same pipeline, bindings and uniform bytes) reuses
        // its bind group and uniform buffer: both are immutable once made.
        let key = BindKey {
            pipeline: Arc::as_ptr(&pipeline) as usize,
            ranges: ranges
                .iter()
                .map(|&(b, buf, off, size)| (b, buf.clone(), off, size))
                .collect(),
            uniforms: uniform_bytes.clone(),
        };
        if record.is_none() {
            let cache = self.bind_groups.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(hit) = cache.get(&key) {
                return Ok(Dispatch {
                    pipeline,
                    bind_group: hit.bind_group.clone(),
                    groups: dispatch,
                    record: None,
                });
            }
        }
        let uniforms = self
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("dotcompute launch parameters"),
                contents: &uniform_bytes,
                usage: wgpu::BufferUsages::UNIFORM,
            });
        let mut entries: Vec<wgpu::BindGroupEntry> = ranges
            .iter()
            .map(|&(binding, buffer, offset, size)| wgpu::BindGroupEntry {
                binding,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer,
                    offset,
                    size: NonZeroU64::new(size),
                }),
            })
            .collect();
        if pipeline.module.uniform_size > 0 {
            entries.push(wgpu::BindGroupEntry {
                binding: pipeline.module.uniform_binding,
                resource: uniforms.as_entire_binding(),
            });
        }
        if let Some((binding, buffer)) = &record {
            entries.push(wgpu::BindGroupEntry {
                binding: *binding,
                resource: buffer.as_entire_binding(),
            });
        }
        let bind_group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(&kernel.name),
            layout: &pipeline.layout,
            entries: &entries,
        });
        if record.is_none() {
            let mut cache = self.bind_groups.lock().unwrap_or_else(|p| p.into_inner());
            if cache.len() >= BIND_GROUP_CACHE {
                cache.clear();
            }
            cache.insert(
                key,
                CachedBinding {
                    _pipeline: pipeline.clone(),
                    bind_group: bind_group.clone(),
                    _uniforms: uniforms,
                },
            );
        }
        Ok(Dispatch {
            pipeline,
            bind_group,
            groups: dispatch,
            record: record.map(|(_, buffer)| (buffer, program.kernel.clone())),
        })
    }

    /// The dispatch of a generated kernel's `groups`: as they are when every dimension
    /// fits the adapter's limit (the shader then takes its group id as is), else folded.
    fn dispatch_for(&self, kernel: &str, groups: [u32; 3]) -> Result<[u32; 3]> {
        let max = self.limits.max_compute_workgroups_per_dimension.max(1);
        if groups.iter().all(|&g| g <= max) {
            return Ok(groups);
        }
        self.fold(kernel, groups.iter().map(|&g| g as u64).product())
    }

    /// Splits `total` groups into a dispatch of at most `max` per dimension.
    fn fold(&self, kernel: &str, total: u64) -> Result<[u32; 3]> {
        let max = self.limits.max_compute_workgroups_per_dimension.max(1) as u64;
        let x = total.min(max);
        let y = total.div_ceil(x).min(max);
        let z = total.div_ceil(x * y);
        if z > max || total > u32::MAX as u64 {
            return Err(Error::GridTooLarge {
                kernel: kernel.into(),
                detail: format!(
                    "{total} groups; this adapter dispatches at most {} groups in all",
                    (max * max * max).min(u32::MAX as u64)
                ),
            });
        }
        Ok([x as u32, y as u32, z as u32])
    }
}

/// wgpu copies and queue writes move whole 4-byte words (`COPY_BUFFER_ALIGNMENT`).
const COPY_ALIGN: usize = wgpu::COPY_BUFFER_ALIGNMENT as usize;
// Copies and queue writes move whole words: the hal's word helpers apply.
const _: () = assert!(COPY_ALIGN == dotcompute_hal::words::WORD);

impl Backend for WgpuBackend {
    type Buffer = WgpuBuffer;

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&self, bytes: usize) -> Result<(WgpuBuffer, StreamSet)> {
        self.check_lost()?;
        let (buffer, class, _) = self.pool.acquire(
            bytes,
            |class| self.create_storage(class, bytes),
            |b| self.destroy(b),
        )?;
        // Every stream is the one queue: later uses are submitted after earlier ones.
        Ok((WgpuBuffer { buffer, class }, StreamSet::EMPTY))
    }

    fn free(&self, buffer: WgpuBuffer, _users: StreamSet) {
        // Reuse is safe while earlier work still uses the buffer: every later use is
        // submitted to the same queue, after that work.
        self.pool
            .release(buffer.buffer, buffer.class, StreamSet::EMPTY);
    }

    fn memory_stats(&self) -> MemoryStats {
        self.pool.stats()
    }

    fn trim(&self) {
        self.pool.trim(|b| self.destroy(b));
    }

    fn set_profiling(&self, on: bool) {
        if on {
            *self.origin.lock().unwrap_or_else(|p| p.into_inner()) = std::time::Instant::now();
        }
        self.profiling.store(on, Ordering::Relaxed);
    }

    fn take_timings(&self) -> Vec<Timing> {
        std::mem::take(&mut *self.timings.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn time_limit(&self) -> Option<&settings::TimeLimit> {
        Some(&self.wait_timeout)
    }
}

impl Queue for WgpuBackend {
    unsafe fn write(
        &self,
        s: StreamId,
        dst: &WgpuBuffer,
        offset: usize,
        data: &[u8],
    ) -> Result<()> {
        self.check_lost()?;
        if !word_aligned(offset, data.len()) {
            // 16-bit elements: widen to whole words, keeping the bytes around the range
            // (pool blocks are whole words, so the widened range is inside the block).
            let (start, end) = widen(offset, data.len());
            let mut words = vec![0u8; end - start];
            // SAFETY: the widened words are inside the block (the caller's range is, and
            // blocks are whole words), and the caller's ordering contract covers them.
            unsafe {
                self.read(s, dst, start, &mut words[..COPY_ALIGN])?;
                let last = words.len() - COPY_ALIGN;
                if last > 0 {
                    self.read(s, dst, end - COPY_ALIGN, &mut words[last..])?;
                }
                words[offset - start..offset - start + data.len()].copy_from_slice(data);
                return self.write(s, dst, start, &words);
            }
        }
        // A queue write runs before the next submission: recorded launches go first.
        self.with_queue(|queue| queue.write_buffer(&dst.buffer, offset as u64, data));
        self.check_uncaptured()
    }

    unsafe fn read(
        &self,
        _: StreamId,
        src: &WgpuBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<()> {
        // A lost device's staging buffer may still wait on a mapping: touch nothing.
        self.check_lost()?;
        // Every stream is the one queue (crate docs).
        if !word_aligned(offset, out.len()) {
            let (start, end) = widen(offset, out.len());
            let mut words = vec![0u8; end - start];
            // SAFETY: the widened words are inside the block, as in `write`.
            unsafe { self.read(StreamId::DEFAULT, src, start, &mut words)? };
            out.copy_from_slice(&words[offset - start..offset - start + out.len()]);
            return Ok(());
        }
        let size = out.len() as u64;
        let mut staging = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        if staging.as_ref().is_none_or(|s| s.size() < size) {
            let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
            let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("dotcompute staging"),
                size: size
                    .next_power_of_two()
                    .min(self.limits.max_buffer_size)
                    .max(size),
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            if let Some(e) = pollster::block_on(scope.pop()) {
                return Err(Error::OutOfMemory {
                    device: self.info.label(),
                    requested: size,
                    detail: format!("the staging buffer for a read: {e}"),
                });
            }
            *staging = Some(buffer);
        }
        let staging = staging.as_ref().expect("just created");
        let mut encoder = self.device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(&src.buffer, offset as u64, staging, 0, size);
        self.submit(encoder)?;
        self.read_mapped(staging, out, "the staging buffer")
    }

    unsafe fn copy(
        &self,
        s: StreamId,
        src: &WgpuBuffer,
        src_offset: usize,
        dst: &WgpuBuffer,
        dst_offset: usize,
        bytes: usize,
    ) -> Result<()> {
        self.check_lost()?;
        if !word_aligned(src_offset, bytes) || !word_aligned(dst_offset, bytes) {
            // Buffer copies move whole words: 16-bit ranges go through the host.
            let mut data = vec![0u8; bytes];
            // SAFETY: the caller's ranges and ordering, moved through the host.
            unsafe {
                self.read(s, src, src_offset, &mut data)?;
                return self.write(s, dst, dst_offset, &data);
            }
        }
        if self.transfer_kernels && bytes >= transfer::KERNEL_MIN_BYTES && src.buffer != dst.buffer
        {
            let source = transfer::End {
                buffer: &src.buffer,
                offset: src_offset,
            };
            let target = transfer::End {
                buffer: &dst.buffer,
                offset: dst_offset,
            };
            return self.run_transfer(s, "copy", &transfer::Op::Copy(source), &target, bytes);
        }
        let mut encoder = self.device.create_command_encoder(&Default::default());
        let stamps = match &self.stamps {
            Some(s) if self.profiling() => Some(s.lock().unwrap_or_else(|p| p.into_inner())),
            _ => None,
        };
        let stamped = stamps.as_ref().filter(|st| st.inside_encoders);
        if let Some(st) = stamped {
            encoder.write_timestamp(&st.set, 0);
        }
        encoder.copy_buffer_to_buffer(
            &src.buffer,
            src_offset as u64,
            &dst.buffer,
            dst_offset as u64,
            bytes as u64,
        );
        match stamped {
            Some(st) => {
                encoder.write_timestamp(&st.set, 1);
                self.submit_timed(encoder, st, s, "copy")
            }
            None if self.profiling() => {
                let start = std::time::Instant::now();
                self.submit(encoder)?;
                self.wait()?;
                self.record(s, "copy", start, start.elapsed(), false);
                Ok(())
            }
            None => self.submit(encoder),
        }
    }

    unsafe fn fill(
        &self,
        s: StreamId,
        dst: &WgpuBuffer,
        offset: usize,
        bytes: usize,
        pattern: &[u8],
    ) -> Result<()> {
        self.check_lost()?;
        if !word_aligned(offset, bytes) {
            let data: Vec<u8> = pattern.iter().copied().cycle().take(bytes).collect();
            // SAFETY: the caller's range and ordering.
            return unsafe { self.write(s, dst, offset, &data) };
        }
        if let Some(words) = transfer::fill_pattern(pattern)
            .filter(|_| self.transfer_kernels && bytes >= transfer::KERNEL_MIN_BYTES)
        {
            let target = transfer::End {
                buffer: &dst.buffer,
                offset,
            };
            return self.run_transfer(s, "fill", &transfer::Op::Fill(words), &target, bytes);
        }
        // Written from a host chunk of the repeated pattern, at most 4 MiB at a time, in
        // whole words and whole patterns.
        let unit = pattern.len().max(COPY_ALIGN);
        let chunk_len = (4 << 20).min(bytes) / unit * unit;
        let chunk: Vec<u8> = pattern.iter().copied().cycle().take(chunk_len).collect();
        self.with_queue(|queue| {
            let mut done = 0;
            while done < bytes {
                let n = chunk_len.min(bytes - done);
                queue.write_buffer(&dst.buffer, (offset + done) as u64, &chunk[..n]);
                done += n;
            }
        });
        self.check_uncaptured()
    }

    unsafe fn launch(&self, s: StreamId, request: &LaunchRequest<'_, WgpuBuffer>) -> Result<()> {
        // SAFETY: the caller's request, as a batch of one.
        unsafe { self.launch_batch(s, std::slice::from_ref(request)) }
    }

    /// One command encoder and one compute pass for all of `requests`: wgpu orders the
    /// dispatches of a pass (a barrier between dependent ones), and one submission costs
    /// what one launch did. With profiling on, the pass is timed as a whole (one launch:
    /// the kernel's name; several: `graph (N launches)`).
    unsafe fn launch_batch(
        &self,
        s: StreamId,
        requests: &[LaunchRequest<'_, WgpuBuffer>],
    ) -> Result<()> {
        self.check_lost()?;
        // A launch with its own time limit: earlier work first, under the device's limit
        // (one queue: all of it), then this launch alone under its own.
        let limited = requests.iter().filter_map(|r| r.geometry.time_limit).min();
        if limited.is_some() {
            self.wait()?;
        }
        // wgpu's error scopes belong to the calling thread: a validation error of this
        // launch comes back to this caller, not to whichever thread calls next.
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let result = self.launch_batch_scoped(s, requests);
        match (result, pollster::block_on(scope.pop())) {
            (Err(e), _) => Err(e),
            (Ok(()), Some(e)) => Err(wgpu_error("launch", &e)),
            (Ok(()), None) => match limited {
                Some(limit) => self.wait_within(
                    limit,
                    settings::SET_BY_LAUNCH,
                    &format!("kernel `{}`", requests[0].program.kernel.name),
                ),
                None => Ok(()),
            },
        }
    }

    fn synchronize(&self, _: StreamId) -> Result<()> {
        self.wait()
    }

    fn synchronize_all(&self) -> Result<()> {
        self.wait()
    }

    fn wait_stream(&self, _: StreamId, _: StreamId) -> Result<()> {
        Ok(()) // one queue: the signaller's work was submitted first and runs first
    }
}

impl WgpuBackend {
    /// Runs a copy or fill kernel ([`transfer`]) over `bytes` of `dst` (word-aligned),
    /// recorded with the launches like one of them, or timed on its own when profiling.
    fn run_transfer(
        &self,
        s: StreamId,
        label: &str,
        op: &transfer::Op<'_>,
        dst: &transfer::End<'_>,
        bytes: usize,
    ) -> Result<()> {
        let kernels = self
            .transfers
            .get_or_init(|| {
                let kernels = transfer::TransferKernels::new(&self.device, self.cache());
                self.save_pipeline_cache();
                kernels
            })
            .as_ref()
            .map_err(|e| backend_err(e.clone()))?;
        let limits = transfer::BindingLimits {
            align: self.limits.min_storage_buffer_offset_alignment.max(4) as usize,
            max_binding: self.limits.max_storage_buffer_binding_size,
        };
        let encode =
            |encoder: &mut wgpu::CommandEncoder,
             timestamp_writes: Option<wgpu::ComputePassTimestampWrites<'_>>| {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(label),
                    timestamp_writes,
                });
                transfer::encode(&self.device, kernels, &limits, &mut pass, op, dst, bytes);
            };
        let stamps = match &self.stamps {
            Some(st) if self.profiling() => Some(st.lock().unwrap_or_else(|p| p.into_inner())),
            _ => None,
        };
        if self.batch && stamps.is_none() && !self.profiling() {
            self.record_pending(|encoder| encode(encoder, None));
            return self.check_uncaptured();
        }
        let mut encoder = self.device.create_command_encoder(&Default::default());
        match &stamps {
            Some(st) => {
                encode(
                    &mut encoder,
                    Some(wgpu::ComputePassTimestampWrites {
                        query_set: &st.set,
                        beginning_of_pass_write_index: Some(0),
                        end_of_pass_write_index: Some(1),
                    }),
                );
                self.submit_timed(encoder, st, s, label)
            }
            None if self.profiling() => {
                let start = std::time::Instant::now();
                encode(&mut encoder, None);
                self.submit(encoder)?;
                self.wait()?;
                self.record(s, label, start, start.elapsed(), false);
                Ok(())
            }
            None => {
                encode(&mut encoder, None);
                self.submit(encoder)
            }
        }
    }

    /// Records work into the pending command buffer (submitted with later work, before
    /// any other queue operation: see [`QueueOrder`]), submitting it once it holds
    /// [`BATCH_LAUNCHES`] passes.
    fn record_pending(&self, f: impl FnOnce(&mut wgpu::CommandEncoder)) {
        let mut order = self.order.lock().unwrap_or_else(|p| p.into_inner());
        let (encoder, passes) = order
            .pending
            .get_or_insert_with(|| (self.device.create_command_encoder(&Default::default()), 0));
        f(encoder);
        *passes += 1;
        if *passes >= BATCH_LAUNCHES {
            // Submitted under the lock, like every queue operation.
            let (encoder, _) = order.pending.take().expect("just filled");
            self.queue.submit(Some(encoder.finish()));
        }
    }

    /// `launch_batch` inside its error scope.
    fn launch_batch_scoped(
        &self,
        s: StreamId,
        requests: &[LaunchRequest<'_, WgpuBuffer>],
    ) -> Result<()> {
        let prepared = requests
            .iter()
            .map(|r| self.prepare_dispatch(r))
            .collect::<Result<Vec<_>>>()?;
        let label = match requests {
            [one] => one.program.kernel.name.clone(),
            many => format!("graph ({} launches)", many.len()),
        };
        let stamps = match &self.stamps {
            Some(st) if self.profiling() => Some(st.lock().unwrap_or_else(|p| p.into_inner())),
            _ => None,
        };
        let checked = prepared.iter().any(|d| d.record.is_some());
        if self.batch && stamps.is_none() && !checked {
            // Recorded into the pending command buffer; submitted with later work.
            if !self.chunked || prepared.len() <= CHUNK_LAUNCHES {
                self.record_pending(|encoder| encode_pass(encoder, &label, &prepared, None));
                return self.check_uncaptured();
            }
            // A long batch (a graph replay): each chunk is submitted as soon as it is
            // recorded, so the GPU runs it while the next one is recorded (recording took
            // 3.4 µs per dispatch and the GPU 2.2 µs on an H200, one after the other).
            for chunk in prepared.chunks(CHUNK_LAUNCHES) {
                self.record_pending(|encoder| encode_pass(encoder, &label, chunk, None));
                self.flush()?;
            }
            return Ok(());
        }
        let mut encoder = self.device.create_command_encoder(&Default::default());
        encode_pass(
            &mut encoder,
            &label,
            &prepared,
            stamps.as_ref().map(|st| wgpu::ComputePassTimestampWrites {
                query_set: &st.set,
                beginning_of_pass_write_index: Some(0),
                end_of_pass_write_index: Some(1),
            }),
        );
        // Checked launches: copy each violation record out with the same submission.
        let records: Vec<(wgpu::Buffer, &Arc<dotcompute_ir::Kernel>)> = prepared
            .iter()
            .filter_map(|d| d.record.as_ref())
            .map(|(record, kernel)| {
                let readback = self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("dotcompute violation readback"),
                    size: record.size(),
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                encoder.copy_buffer_to_buffer(record, 0, &readback, 0, record.size());
                (readback, kernel)
            })
            .collect();
        match &stamps {
            Some(st) => self.submit_timed(encoder, st, s, &label)?,
            None => self.submit(encoder)?,
        }
        for (readback, kernel) in records {
            let mut bytes = [0u8; dotcompute_hal::VIOLATION_WORDS * 4];
            self.read_mapped(&readback, &mut bytes, "the violation record")?;
            let words: [u32; dotcompute_hal::VIOLATION_WORDS] = std::array::from_fn(|i| {
                u32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap())
            });
            if let Some(violation) = dotcompute_hal::decode_violation(kernel, words) {
                return Err(violation);
            }
        }
        Ok(())
    }
}

/// One compute pass dispatching `prepared` in order (wgpu orders dependent dispatches of
/// a pass), optionally timestamped.
fn encode_pass(
    encoder: &mut wgpu::CommandEncoder,
    label: &str,
    prepared: &[Dispatch],
    timestamp_writes: Option<wgpu::ComputePassTimestampWrites<'_>>,
) {
    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
        label: Some(label),
        timestamp_writes,
    });
    for d in prepared {
        pass.set_pipeline(&d.pipeline.pipeline);
        pass.set_bind_group(0, &d.bind_group, &[]);
        pass.dispatch_workgroups(d.groups[0], d.groups[1], d.groups[2]);
    }
}

#[cfg(test)]
mod error_tests {
    use super::*;

    #[test]
    fn wgpu_errors_keep_their_kind_in_structured_fields() {
        let e = wgpu::Error::Validation {
            source: Box::new(std::fmt::Error),
            description: "a binding is missing".into(),
        };
        match wgpu_error("launch", &e) {
            Error::Driver {
                backend,
                operation,
                code: 2,
                name,
                detail,
            } => {
                assert_eq!((backend.as_str(), operation.as_str()), ("wgpu", "launch"));
                assert_eq!(name, "Validation");
                assert!(detail.contains("a binding is missing"), "{detail}");
            }
            other => panic!("expected a structured Driver error, got {other:?}"),
        }
    }
}
