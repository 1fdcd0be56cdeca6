//! # dotcompute-cuda: the CUDA backend
//!
//! Kernels become CUDA C++ (`dotcompute_codegen::cuda`), compiled by NVRTC for the device's
//! own architecture and cached in memory (by the program's content key) and on disk
//! ([`compile`]). Buffers come from a size-class pool over `cuMemAlloc`; matrix products
//! go to cuBLAS ([`dotcompute_hal::Blas`]).
//!
//! ## Contract
//!
//! *Trusts* the facade's checks (argument count and types, offsets and lengths in range,
//! geometry within the limits reported in [`DeviceInfo`], open stream ids, waits between
//! streams where a buffer changes stream) and validated IR.
//! *Validates* everything that only the driver knows: libraries present (no panic when
//! libcuda or libnvrtc is missing: [`probe`] checks before cudarc is called), compile
//! errors (reported with the source lines they point at), allocation failures (as
//! `Error::OutOfMemory`), and driver errors of every call (as `Error::Driver` naming the
//! call and keeping the CUDA or cuBLAS code).
//!
//! ## Layout
//!
//! `info` (discovery), `memory` (pool, page-locked memory), `module` (programs to loaded
//! functions, caches), `launch` (parameter slots, entry-point choice), `stream` (the
//! [`Queue`] half: streams, transfers, fences, waits), `graph` (capture into CUDA
//! graphs), `blas` (cuBLAS), `profile` (events, timelines).
//!
//! ## Execution model
//!
//! Stream 0 is created with the backend; `Device::stream()` opens more (non-blocking CUDA
//! streams, up to [`dotcompute_hal::MAX_STREAMS`]). Work on one stream runs in order;
//! streams run concurrently. A freed buffer's block goes back to the pool at once, tagged
//! with the streams that may still use it; its next owner's first use on another stream
//! waits for them (an event, not a host wait), and its next use on the same stream is
//! ordered by the stream itself. Blocks go back to the driver only in `trim`, after the
//! whole device is idle.
//!
//! Launches larger than one wave of resident threads run kernels that read no coordinate
//! but their global id (no barrier, no shared memory) in their grid-stride form: one wave
//! of groups, each thread looping over logical threads. Elementwise kernels run in their
//! vector form whenever every buffer argument is 16-byte aligned: each CUDA thread runs 4
//! (or 2, for 8-byte elements) consecutive logical threads per iteration on 16-byte loads
//! and stores. `DOTCOMPUTE_CUDA_GRID_STRIDE=off` and `DOTCOMPUTE_CUDA_VECTORIZE=off` turn
//! them off, for comparison.
//!
//! A kernel that faults (an illegal address, say) poisons the CUDA context: the driver
//! reports the fault at the next synchronising call, and every later call on the device
//! fails too. The error names the call that saw it; create a new device to continue.

mod blas;
pub mod compile;
mod driver;
mod graph;
mod info;
mod launch;
mod memory;
mod module;
mod profile;
mod stream;

pub use compile::{CacheOutcome, CompileStats};
pub use dotcompute_hal::{Backend, Queue};
pub use driver::probe;
pub use info::devices;
pub use memory::CudaBuffer;

use blas::BlasHandle;
use compile::Compiler;
use cudarc::driver::{result as cu, sys};
use dotcompute_hal::{
    BackendDescriptor, BackendKind, Blas, DeviceInfo, Error, HostMemory, MemoryStats, Program,
    Result, SizeClassPool, StreamId, StreamSet, Timing,
};
use dotcompute_ir::ScalarType;
use driver::{bind, Check, BACKEND};

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The CUDA backend's entry in the registry: every device the driver reports.
pub static DESCRIPTOR: BackendDescriptor = BackendDescriptor {
    kind: BackendKind::Cuda,
    probe: devices,
    // The facade has checked `ordinal` against `probe`; a wrong one is a driver error here.
    open: |ordinal| {
        Ok(Box::new(CudaBackend::with_ordinal(ordinal as i32)?)
            as Box<dyn dotcompute_hal::DynBackend>)
    },
};

/// A CUDA device: the device's primary context (shared with every other backend and
/// handle on the device, and lost with them), its streams and its pool.
pub struct CudaBackend {
    info: DeviceInfo,
    ctx: Arc<crate::driver::Context>,
    streams: stream::Streams,
    pool: SizeClassPool<sys::CUdeviceptr>,
    compiler: Compiler,
    /// Loaded code: functions by program and checked mode, their modules, the compile
    /// counters.
    code: module::LoadedCode,
    /// Whether kernels are timed, and the events of the timings not yet collected.
    profiler: profile::Profiling,
    /// Threads the device keeps resident at once (SMs × threads per SM): a grid-stride
    /// launch uses one wave of that many.
    resident_threads: u32,
    grid_stride: bool,
    vectorize: bool,
    /// `DOTCOMPUTE_UNROLL` (read when the device opens): generated kernels unroll their
    /// grid-stride loops over read-only buffers.
    unroll: bool,
    blas: OnceLock<std::result::Result<BlasHandle, String>>,
    blas_calls: Mutex<()>,
    /// Spare violation records of checked launches (see `launch::ViolationRecord`).
    violation_records: Mutex<Vec<sys::CUdeviceptr>>,
    /// The kernel nodes of each capture in progress (by capture id), in launch order
    /// (`graph::CapturedNodes`).
    capture_log: graph::CaptureLog,
    /// The longest wait for the device (`DOTCOMPUTE_CUDA_TIMEOUT_S`, default 300 s): a
    /// read, synchronisation or fence wait past it makes the device lost instead of
    /// hanging (a kernel that never ends). `Device::set_time_limit` replaces it; fences
    /// share it.
    wait_timeout: std::sync::Arc<dotcompute_hal::settings::TimeLimit>,
}

// SAFETY: the driver handles (context, streams, modules, functions, device pointers) are
// plain handles the driver lets any thread use once the context is current, which every
// entry point ensures with `bind`. Mutable state is behind mutexes and atomics.
unsafe impl Send for CudaBackend {}
// SAFETY: shared use is sound for the reason above (Send).
unsafe impl Sync for CudaBackend {}

impl CudaBackend {
    /// The first CUDA device.
    pub fn new() -> Result<CudaBackend> {
        CudaBackend::with_ordinal(0)
    }

    /// CUDA device number `ordinal`.
    pub fn with_ordinal(ordinal: i32) -> Result<CudaBackend> {
        probe().map_err(|reason| Error::BackendUnavailable {
            backend: BACKEND.into(),
            reason,
        })?;
        // Settings first: a bad value is an error before the device is touched.
        let grid_stride = dotcompute_hal::settings::switch_or("DOTCOMPUTE_CUDA_GRID_STRIDE", true)?;
        let vectorize = dotcompute_hal::settings::switch_or("DOTCOMPUTE_CUDA_VECTORIZE", true)?;
        let unroll = dotcompute_hal::settings::unroll()?;
        let wait_timeout = dotcompute_hal::settings::TimeLimit::from_env(
            "DOTCOMPUTE_CUDA_TIMEOUT_S",
            std::time::Duration::from_secs(300),
        );
        wait_timeout.get()?;
        let wait_timeout = std::sync::Arc::new(wait_timeout);
        let info = info::device_info(ordinal).map_err(|e| Error::BackendUnavailable {
            backend: BACKEND.into(),
            reason: e.to_string(),
        })?;
        // Shared with every other backend on this device; an error if it is lost and
        // still in use (see `driver::Context`).
        let ctx = driver::Context::primary(ordinal)?;
        let device = ctx.device;
        bind(&ctx)?;
        let default_stream =
            cu::stream::create(cu::stream::StreamKind::NonBlocking).during("cuStreamCreate")?;
        use sys::CUdevice_attribute::*;
        let a = |attr| info::attribute(device, attr);
        let cc = (
            a(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            a(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        Ok(CudaBackend {
            info,
            ctx,
            streams: stream::Streams::new(default_stream),
            pool: SizeClassPool::new(),
            compiler: Compiler::new(cc, info::driver_version())?,
            code: module::LoadedCode::default(),
            profiler: profile::Profiling::default(),
            resident_threads: (a(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?
                * a(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?)
                as u32,
            grid_stride,
            vectorize,
            unroll,
            blas: OnceLock::new(),
            blas_calls: Mutex::new(()),
            violation_records: Mutex::new(Vec::new()),
            capture_log: Default::default(),
            wait_timeout,
        })
    }
}

impl Backend for CudaBackend {
    type Buffer = CudaBuffer;

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&self, bytes: usize) -> Result<(CudaBuffer, StreamSet)> {
        self.alloc_block(bytes)
    }

    fn free(&self, buffer: CudaBuffer, users: StreamSet) {
        // The block's users travel with it: see the crate docs.
        self.pool.release(buffer.ptr, buffer.class, users);
    }

    fn memory_stats(&self) -> MemoryStats {
        self.pool.stats()
    }

    fn trim(&self) {
        if bind(&self.ctx).is_ok() {
            // Each block is freed through the capture gate (`driver_free`).
            self.pool.trim(self.driver_free());
        }
    }

    fn alloc_host(&self, bytes: usize) -> Result<Option<Box<dyn HostMemory>>> {
        self.alloc_pinned(bytes)
    }

    fn prepare(&self, program: &Program) -> Result<()> {
        self.prepare_program(program).map(|_| ())
    }

    fn open_stream(&self, id: StreamId) -> Result<()> {
        self.open_stream_slot(id)
    }

    fn set_profiling(&self, on: bool) {
        self.set_profiling_on(on)
    }

    fn take_timings(&self) -> Vec<Timing> {
        self.collect_timings()
    }

    fn blas(&self, elem: ScalarType) -> Option<&dyn Blas<CudaBuffer>> {
        (blas::BLAS_TYPES.contains(&elem) && self.blas_handle().is_ok())
            .then_some(self as &dyn Blas<CudaBuffer>)
    }

    fn time_limit(&self) -> Option<&dotcompute_hal::settings::TimeLimit> {
        Some(&self.wait_timeout)
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        if bind(&self.ctx).is_err() {
            return;
        }
        // Other backends of the same device may be capturing graphs on other threads:
        // freeing memory, unloading modules and destroying streams may synchronise the
        // device and invalidate their captures (`driver::CaptureGate`), so this waits for
        // them, and drains this backend's own streams rather than the whole context.
        // SAFETY: nothing uses these handles after the backend; its streams are drained
        // before memory, modules and the streams are released.
        self.ctx.capture_gate.exclusive(|| unsafe {
            for s in self.streams.all() {
                let _ = cu::stream::synchronize(s);
            }
            let mut profiler = lock(&self.profiler.state);
            for p in profiler.pending.drain(..) {
                let _ = cu::event::destroy(p.start);
                let _ = cu::event::destroy(p.end);
            }
            if let Some(origin) = profiler.origin.take() {
                let _ = cu::event::destroy(origin.0);
            }
            if let Some(Ok(h)) = self.blas.get() {
                let _ = cudarc::cublas::result::destroy_handle(h.0);
            }
            self.pool.trim(|p| {
                let _ = cu::free_sync(p);
            });
            for p in lock(&self.violation_records).drain(..) {
                let _ = cu::free_sync(p);
            }
            for m in lock(&self.code.modules).drain(..) {
                let _ = cu::module::unload(m);
            }
            for s in self.streams.all() {
                let _ = cu::stream::destroy(s);
            }
            // The context is released by its last user (driver::Context).
        });
    }
}
