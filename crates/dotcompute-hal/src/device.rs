//! Backend kinds, device descriptions, typed capabilities and limits.

use dotcompute_ir::{Features, ScalarType};
use std::fmt;

/// The backends dotcompute knows about (built into this binary or not). A backend crate
/// registers itself with a [`crate::registry::BackendDescriptor`]; this enum only names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum BackendKind {
    Cpu,
    Cuda,
    Wgpu,
    Metal,
}

impl BackendKind {
    /// Every kind, in the order `dotcompute devices` lists them.
    pub const ALL: [BackendKind; 4] = [
        BackendKind::Cuda,
        BackendKind::Metal,
        BackendKind::Wgpu,
        BackendKind::Cpu,
    ];
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Cuda => "cuda",
            BackendKind::Wgpu => "wgpu",
            BackendKind::Metal => "metal",
        }
    }
    pub fn parse(name: &str) -> Option<BackendKind> {
        match name.trim().to_ascii_lowercase().as_str() {
            "cpu" => Some(BackendKind::Cpu),
            "cuda" => Some(BackendKind::Cuda),
            "wgpu" | "vulkan" => Some(BackendKind::Wgpu),
            "metal" => Some(BackendKind::Metal),
            _ => None,
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// What kind of hardware a device is. `Device::best()` ranks devices by this first, so a
/// software rasteriser (lavapipe) never wins over the native CPU backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceType {
    DiscreteGpu,
    IntegratedGpu,
    VirtualGpu,
    /// The native CPU backend: kernels compiled by rustc, run on rayon.
    Cpu,
    /// A GPU API emulated on the CPU (lavapipe, SwiftShader, WARP): slower than the native
    /// CPU backend for every kernel.
    SoftwareGpu,
    Other,
}

impl DeviceType {
    /// Higher is better.
    pub fn score(self) -> u32 {
        match self {
            DeviceType::DiscreteGpu => 5,
            DeviceType::IntegratedGpu => 4,
            DeviceType::VirtualGpu => 3,
            DeviceType::Other => 2,
            DeviceType::Cpu => 1,
            DeviceType::SoftwareGpu => 0,
        }
    }
}

/// How a device performs `atomic_add` on `f32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicF32Add {
    /// One hardware instruction.
    Native,
    /// A compare-exchange loop on the bits (slow under contention).
    CompareExchangeLoop,
}

/// Hand-written kernel languages (`RawKernel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RawLanguage {
    Wgsl,
    Cuda,
    /// SPIR-V words, run as they are through wgpu's passthrough (Vulkan adapters).
    Spirv,
    /// Metal Shading Language: the native Metal backend, and wgpu's MSL passthrough on
    /// Metal adapters.
    Msl,
}

impl RawLanguage {
    pub fn name(self) -> &'static str {
        match self {
            RawLanguage::Wgsl => "WGSL",
            RawLanguage::Cuda => "CUDA C++",
            RawLanguage::Spirv => "SPIR-V",
            RawLanguage::Msl => "MSL",
        }
    }

    /// The devices that run kernels in this language, for errors.
    pub fn runs_on(self) -> &'static str {
        match self {
            RawLanguage::Wgsl => "wgpu",
            RawLanguage::Cuda => "cuda",
            RawLanguage::Spirv => "wgpu devices on Vulkan adapters with SPIR-V passthrough",
            RawLanguage::Msl => "metal, and wgpu devices on Metal adapters with passthrough",
        }
    }
}

/// What a device can do beyond the core contract, as typed fields (not feature strings).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// 64-bit floats in kernels.
    pub f64: bool,
    /// 64-bit integers in kernels.
    pub i64: bool,
    /// `f16` in kernels (arithmetic, not only storage).
    pub f16: bool,
    pub atomic_f32_add: AtomicF32Add,
    /// Device timestamps for profiling (otherwise host wall time).
    pub timestamps: bool,
    /// Languages of hand-written kernels this device runs.
    pub raw_languages: Vec<RawLanguage>,
    /// Whether work on different streams can run at the same time on the device (CUDA).
    /// Elsewhere streams are ordered views of one queue: correct, not concurrent.
    pub concurrent_streams: bool,
    /// Whether graphs are instantiated as the driver's own graphs (CUDA graphs); otherwise
    /// the facade replays a graph's nodes itself.
    pub native_graphs: bool,
    /// Element types of the vendor matrix product ([`crate::Blas`]), empty without one.
    pub blas: Vec<ScalarType>,
    /// Subgroup operations (`subgroup_shuffle` and friends) and the subgroup size range
    /// `[min, max]`; `None` where kernels cannot use them.
    pub subgroup_size: Option<[u32; 2]>,
    /// Tensor-core multiply-accumulate in kernels (`mma_m16n8k8_tf32`): CUDA devices of
    /// compute capability 8.0 and later.
    pub tensor_cores: bool,
    /// Float `+ - *` are correctly rounded one operation at a time, never contracted
    /// into a fused multiply-add and never reassociated, as `dotcompute_ir` defines them
    /// (`/` is within Vulkan's 2.5 ulp on wgpu even then).
    /// `false` where the driver may (wgpu without SPIR-V passthrough, DX12, Metal until
    /// it has run).
    pub exact_float: bool,
    /// 32-bit subnormal inputs and results are kept, not flushed to zero. `false` on
    /// Vulkan devices without `shaderDenormPreserveFloat32` (lavapipe) and where unknown.
    /// With both, float results equal the CPU's bit for bit.
    pub subnormals: bool,
    /// Launch time limits are enforced (`Device::set_time_limit`, `Launch::time_limit`):
    /// the CPU stops a launch past its limit, CUDA and wgpu report the device lost
    /// instead of waiting on. `false` on Metal (its waits are unbounded; never run here).
    pub time_limits: bool,
    /// Work is done when the call that enqueued it returns (the CPU runs kernels on the
    /// calling thread's pool): independent graph nodes can then run side by side from
    /// the host, where on a device queue they would run one after another.
    pub completes_on_enqueue: bool,
    /// A group that has started runs on while groups launched after it wait for it, so
    /// a spin-wait on an earlier group's result ends (the decoupled look-back of
    /// single-pass scans and Onesweep sorts). CUDA runs started blocks to completion;
    /// Vulkan and Metal promise no such thing.
    pub forward_progress: bool,
    /// Which generated FP32/f16 matrix product runs best here when no vendor product
    /// serves the call (`Device::matmul`).
    pub generated_product: GeneratedProduct,
}

/// The shapes of dotcompute's generated matrix product a device prefers (measured per
/// backend; `docs/benchmarks.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeneratedProduct {
    /// The register-blocked kernel with each thread's rows and columns in runs of four
    /// (16-byte shared reads; NVRTC merges them: CUDA).
    BlockedQuads,
    /// The register-blocked kernel with strided rows and columns (Vulkan's and Metal's
    /// compilers do not merge the runs of four). Products of fewer than
    /// `tiled_below_blocks` 128×128 blocks take the 16×16 shared-tile kernel instead:
    /// wgpu says 64 (too few groups to fill a GPU) and `u32::MAX` on software adapters
    /// (lavapipe's LLVM took about a minute to build the blocked kernel).
    BlockedStrided { tiled_below_blocks: u32 },
    /// The register-blocked kernel without fused multiply-adds (the CPU's; see
    /// `dotcompute::linalg`'s `CoreKernels::unfused`).
    Unfused,
}

impl Capabilities {
    /// The kernel features this device offers, in the vocabulary kernels state their
    /// needs in ([`Features::required_by`]).
    pub fn features(&self) -> Features {
        Features::SUBGROUPS
            .when(self.subgroup_size.is_some())
            .with(Features::F16.when(self.f16))
            .with(Features::F64.when(self.f64))
            .with(Features::I64.when(self.i64))
            .with(Features::TENSOR_CORES.when(self.tensor_cores))
    }

    /// The capabilities as short words, for `dotcompute devices`.
    pub fn words(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.f64 {
            w.push("f64".to_string());
        }
        if self.i64 {
            w.push("i64".to_string());
        }
        if self.f16 {
            w.push("f16".to_string());
        }
        w.push(match self.atomic_f32_add {
            AtomicF32Add::Native => "atomic-f32-add".to_string(),
            AtomicF32Add::CompareExchangeLoop => {
                "atomic-f32-add (compare-exchange loop)".to_string()
            }
        });
        if self.timestamps {
            w.push("timestamp-query".into());
        }
        w.push(
            if self.exact_float {
                "exact-float"
            } else {
                "float-may-contract"
            }
            .into(),
        );
        w.push(
            if self.subnormals {
                "subnormals"
            } else {
                "subnormals-flushed"
            }
            .into(),
        );
        for l in &self.raw_languages {
            w.push(format!("raw {}", l.name()));
        }
        if self.concurrent_streams {
            w.push("concurrent-streams".into());
        }
        if self.native_graphs {
            w.push("native-graphs".into());
        }
        if let Some([lo, hi]) = self.subgroup_size {
            w.push(if lo == hi {
                format!("subgroups (size {lo})")
            } else {
                format!("subgroups (size {lo}-{hi})")
            });
        }
        if self.tensor_cores {
            w.push("tensor-cores (tf32 mma)".into());
        }
        if !self.blas.is_empty() {
            let types: Vec<&str> = self.blas.iter().map(|t| t.name()).collect();
            w.push(format!("vendor-matmul ({})", types.join(", ")));
        }
        w
    }
}

/// What a device can run. Launches are checked against these before reaching a backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Threads per group (product of the three group dimensions).
    pub max_group_threads: u32,
    /// Per-dimension group size.
    pub max_group_size: [u32; 3],
    /// Per-dimension number of groups.
    pub max_groups: [u32; 3],
    /// Shared memory per group, in bytes.
    pub max_shared_bytes: u64,
    /// Of that, what statically sized shared arrays may take, in bytes: CUDA allows
    /// 48 KiB of static shared memory per block and the rest only as dynamic shared
    /// memory (opted into per kernel); other backends make no difference.
    pub max_static_shared_bytes: u64,
    /// Largest single buffer, in bytes.
    pub max_buffer_bytes: u64,
    /// Largest range one kernel parameter may bind, in bytes: on wgpu the adapter's
    /// largest storage binding (2 GiB less 4 bytes on NVIDIA's Vulkan driver), which can
    /// be below `max_buffer_bytes`; elsewhere `max_buffer_bytes`.
    pub max_binding_bytes: u64,
}

/// A device as listed by `dotcompute devices`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub backend: BackendKind,
    /// The device's number within its backend (`cuda:1` is ordinal 1).
    pub ordinal: usize,
    pub name: String,
    pub device_type: DeviceType,
    /// Memory the device can allocate, in bytes (physical RAM for the CPU).
    pub memory_bytes: u64,
    /// Compute units (CPU threads, SMs, ...).
    pub compute_units: u32,
    pub limits: Limits,
    /// Driver / runtime description.
    pub driver: String,
    pub caps: Capabilities,
}

impl DeviceInfo {
    /// How every message names this device: `cuda:0 (NVIDIA H100 80GB HBM3)`, the
    /// backend and number that `Device::by_name` takes, then the device's own name.
    pub fn label(&self) -> String {
        format!("{}:{} ({})", self.backend.name(), self.ordinal, self.name)
    }
}
