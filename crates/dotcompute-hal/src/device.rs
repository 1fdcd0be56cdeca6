//! Backend kinds, device descriptions and limits.

use std::fmt;

/// The backends dotcompute knows about (built into this binary or not).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BackendKind {
    Cpu,
    Cuda,
    Wgpu,
    Metal,
}

impl BackendKind {
    /// In the order `Device::best()` prefers them.
    pub const PREFERENCE: [BackendKind; 4] = [
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
    /// Largest single buffer, in bytes.
    pub max_buffer_bytes: u64,
}

/// A device as listed by `dotcompute devices`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub backend: BackendKind,
    pub name: String,
    /// Memory the device can allocate, in bytes (physical RAM for the CPU).
    pub memory_bytes: u64,
    /// Compute units (CPU threads, SMs, ...).
    pub compute_units: u32,
    pub limits: Limits,
    /// Driver / runtime description.
    pub driver: String,
    /// Optional capabilities such as `f64` or `atomic-f32-add`.
    pub features: Vec<String>,
}
