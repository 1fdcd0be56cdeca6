//! The shim as a backend: memory, copies and fills are the CPU backend's (host memory);
//! launches generate MSL, plan the encoding and run both through the shim. Not in the
//! registry: it is a test vehicle for the Metal backend's shared half, built by
//! `dotcompute-metal`'s tests and handed to the conformance suite with
//! `Device::from_backend`.

use super::{ShimLibrary, ThreadOrder, SIMD_WIDTH};
use crate::plan::{encode, plan_args, EncodingPlan, PipelineLimits};
use dotcompute_cpu::{CpuBackend, CpuBuffer};
use dotcompute_hal::{
    AtomicF32Add, Backend, BackendKind, Capabilities, DeviceInfo, DeviceType, Error,
    GeneratedProduct, LaunchRequest, Limits, MemoryStats, ProgramKey, Queue, Result, StreamId,
    StreamSet, Timing,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Limits of the shim device: those of Apple GPUs (1024 threads per group, 32 KiB of
/// threadgroup memory), so a kernel that passes here fits a Mac.
const LIMITS: PipelineLimits = PipelineLimits {
    max_threads_per_group: 1024,
    max_threadgroup_memory: 32 * 1024,
};

/// Generated MSL run on the CPU (see the module docs of `shim`).
pub struct ShimBackend {
    cpu: CpuBackend,
    info: DeviceInfo,
    /// Keyed by program and checked mode.
    libraries: Mutex<HashMap<(ProgramKey, bool), Arc<ShimLibrary>>>,
    /// Applied to every plan before it runs: only for demonstrating that a wrong plan
    /// fails (see `tests/it`).
    tamper: Option<fn(&mut EncodingPlan)>,
    /// Applied to every generated MSL text before it compiles: only for demonstrating
    /// that the shim refuses or catches wrong MSL (see `tests/it`).
    tamper_msl: Option<fn(&mut String)>,
    /// The order of threads between meeting points (see [`ThreadOrder`]).
    order: ThreadOrder,
}

impl ShimBackend {
    /// The shim device, or why it is unavailable (no C++ compiler).
    pub fn new() -> Result<ShimBackend> {
        let compiler = super::probe().map_err(|reason| Error::BackendUnavailable {
            backend: "msl-shim".into(),
            reason,
        })?;
        let cpu = CpuBackend::new();
        let mut info = cpu.info().clone();
        info.backend = BackendKind::Metal;
        info.name = "generated MSL on the CPU (clang and a Metal shim; not a Metal device)".into();
        info.device_type = DeviceType::SoftwareGpu;
        info.driver = compiler;
        info.limits = Limits {
            max_group_threads: LIMITS.max_threads_per_group,
            max_group_size: [1024, 1024, 1024],
            max_shared_bytes: LIMITS.max_threadgroup_memory,
            max_static_shared_bytes: LIMITS.max_threadgroup_memory,
            ..info.limits
        };
        info.caps = Capabilities {
            // MSL has no double.
            f64: false,
            i64: true,
            f16: true,
            atomic_f32_add: AtomicF32Add::CompareExchangeLoop,
            timestamps: false,
            raw_languages: vec![dotcompute_hal::RawLanguage::Msl],
            concurrent_streams: false,
            native_graphs: false,
            blas: Vec::new(),
            // SIMD-groups of 32 lanes in lock-step (`lockstep`), an Apple GPU's width.
            subgroup_size: Some([SIMD_WIDTH, SIMD_WIDTH]),
            tensor_cores: false,
            exact_float: false,
            subnormals: false,
            time_limits: false,
            // The shim runs each launch before returning, but it stands in for a Metal
            // device and keeps its queue semantics.
            completes_on_enqueue: false,
            forward_progress: false,
            generated_product: GeneratedProduct::BlockedStrided {
                tiled_below_blocks: 0,
            },
        };
        let order = ThreadOrder::from_env().map_err(|reason| Error::BackendUnavailable {
            backend: "msl-shim".into(),
            reason,
        })?;
        Ok(ShimBackend {
            cpu,
            info,
            libraries: Mutex::new(HashMap::new()),
            tamper: None,
            tamper_msl: None,
            order,
        })
    }

    /// A shim device that applies `tamper` to every generated MSL text before compiling
    /// it, to show that the shim refuses or catches a wrong kernel.
    pub fn with_tampered_msl(tamper: fn(&mut String)) -> Result<ShimBackend> {
        let mut backend = ShimBackend::new()?;
        backend.tamper_msl = Some(tamper);
        Ok(backend)
    }

    /// This device, running the threads of each group in `order` between meeting points
    /// (`ThreadOrder::Shuffled` shows a missing barrier as a wrong result).
    pub fn with_thread_order(mut self, order: ThreadOrder) -> ShimBackend {
        self.order = order;
        self
    }

    /// A shim device that applies `tamper` to every encoding plan before running it, to
    /// show that the run catches a wrong plan.
    pub fn with_tampered_plans(tamper: fn(&mut EncodingPlan)) -> Result<ShimBackend> {
        let mut backend = ShimBackend::new()?;
        backend.tamper = Some(tamper);
        Ok(backend)
    }

    fn library(&self, request: &LaunchRequest<'_, CpuBuffer>) -> Result<Arc<ShimLibrary>> {
        let program = request.program;
        let key = (program.key, request.geometry.checked);
        let mut libraries = self.libraries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = libraries.get(&key) {
            return Ok(l.clone());
        }
        let mut module = crate::msl_module(program, key.1)?;
        // `msl_module` already wrote the untampered text where DOTCOMPUTE_DUMP asks.
        if let Some(tamper) = self.tamper_msl {
            tamper(&mut module.source);
        }
        let library = Arc::new(ShimLibrary::compile(&module, &program.kernel)?);
        libraries.insert(key, library.clone());
        Ok(library)
    }
}

impl Backend for ShimBackend {
    type Buffer = CpuBuffer;

    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn alloc(&self, bytes: usize) -> Result<(CpuBuffer, StreamSet)> {
        self.cpu.alloc(bytes)
    }
    fn free(&self, buffer: CpuBuffer, users: StreamSet) {
        self.cpu.free(buffer, users)
    }
    fn memory_stats(&self) -> MemoryStats {
        self.cpu.memory_stats()
    }
    fn trim(&self) {
        self.cpu.trim()
    }
    fn set_profiling(&self, on: bool) {
        self.cpu.set_profiling(on)
    }
    fn take_timings(&self) -> Vec<Timing> {
        self.cpu.take_timings()
    }
}

impl Queue for ShimBackend {
    unsafe fn write(&self, s: StreamId, dst: &CpuBuffer, offset: usize, data: &[u8]) -> Result<()> {
        // SAFETY: the caller's contract, passed on to the CPU backend that owns the memory.
        unsafe { self.cpu.write(s, dst, offset, data) }
    }
    unsafe fn read(
        &self,
        s: StreamId,
        src: &CpuBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<()> {
        // SAFETY: as for `write`.
        unsafe { self.cpu.read(s, src, offset, out) }
    }
    unsafe fn copy(
        &self,
        s: StreamId,
        src: &CpuBuffer,
        src_offset: usize,
        dst: &CpuBuffer,
        dst_offset: usize,
        bytes: usize,
    ) -> Result<()> {
        // SAFETY: as for `write`.
        unsafe { self.cpu.copy(s, src, src_offset, dst, dst_offset, bytes) }
    }
    unsafe fn fill(
        &self,
        s: StreamId,
        dst: &CpuBuffer,
        offset: usize,
        bytes: usize,
        pattern: &[u8],
    ) -> Result<()> {
        // SAFETY: as for `write`.
        unsafe { self.cpu.fill(s, dst, offset, bytes, pattern) }
    }
    unsafe fn launch(&self, s: StreamId, request: &LaunchRequest<'_, CpuBuffer>) -> Result<()> {
        let library = self.library(request)?;
        let start = std::time::Instant::now();
        let (buffers, args) = plan_args(&request.args);
        let bases: Vec<*mut u8> = buffers
            .iter()
            .map(|b| b.map_or(std::ptr::null_mut(), |b| b.as_ptr()))
            .collect();
        let mut plan = encode(
            library.module(),
            &request.program.kernel,
            &request.geometry,
            &args,
            LIMITS,
        )?;
        if let Some(tamper) = self.tamper {
            tamper(&mut plan);
        }
        library.dispatch(&plan, &bases, self.order)?;
        // Profiling records the run as the CPU backend records its launches (wall time).
        self.cpu.record(s, &request.program.kernel.name, start);
        Ok(())
    }
    fn synchronize(&self, _: StreamId) -> Result<()> {
        Ok(()) // every operation completes before it returns
    }
    fn synchronize_all(&self) -> Result<()> {
        Ok(())
    }
    fn wait_stream(&self, _: StreamId, _: StreamId) -> Result<()> {
        Ok(())
    }
}
