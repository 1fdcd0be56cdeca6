//! # dotcompute-cuda: the CUDA backend
//!
//! Kernels become CUDA C++ (`dotcompute_codegen::cuda`), compiled by NVRTC for the device's
//! own architecture and cached in memory and on disk ([`compile`]). Buffers come from a
//! size-class pool over `cuMemAlloc`; matrix products go to cuBLAS.
//!
//! ## Contract
//!
//! *Trusts* the facade's checks (argument count and types, offsets and lengths in range,
//! geometry within the limits reported in [`DeviceInfo`]) and validated IR.
//! *Validates* everything that only the driver knows: libraries present (no panic when
//! libcuda or libnvrtc is missing: [`probe`] checks before cudarc is called), compile
//! errors (reported with the source lines they point at), allocation failures (as
//! `Error::OutOfMemory`), and driver errors of every call (as `Error::Backend` naming the
//! call and the CUDA error).
//!
//! ## Execution model
//!
//! Each backend owns one CUDA stream (non-blocking). Launches, copies, fills and cuBLAS
//! calls are enqueued on it and return at once; reads and [`synchronize`] wait for it. A
//! freed buffer's block goes back to the pool at once and may serve the next allocation
//! while kernels that used it are still queued: every later use is enqueued on the same
//! stream, hence ordered after them (stream-ordered reuse). Blocks go back to the driver
//! only in `trim`, after the stream is idle.
//!
//! Launches larger than one wave of resident threads run kernels that read no coordinate
//! but their global id (no barrier, no shared memory) in their grid-stride form
//! (`dotcompute_codegen::cuda`): one wave of groups, each thread looping over logical
//! threads. Results are identical; on an H200 it moved vector add from 3.2 to 3.6 TB/s.
//! `DOTCOMPUTE_CUDA_GRID_STRIDE=off` turns it off, for comparison.
//!
//! Elementwise kernels (every buffer access at the thread's own global x id; see
//! `dotcompute_codegen::cuda::vector_plan`) run in their vector form whenever every
//! buffer argument is 16-byte aligned (always, for whole buffers: blocks are 256-byte
//! aligned): each CUDA thread runs 4 (or, for 8-byte elements only, 2) consecutive
//! logical threads per iteration on 16-byte loads and stores. That is what closes the gap
//! to copy bandwidth (docs/benchmarks.md). `DOTCOMPUTE_CUDA_VECTORIZE=off` turns it off.
//!
//! A kernel that faults (an illegal address, say) poisons the CUDA context: the driver
//! reports the fault at the next synchronising call, and every later call on the device
//! fails too. The error names the call that saw it; create a new device to continue.
//!
//! [`synchronize`]: dotcompute_hal::Backend::synchronize

pub mod compile;
mod driver;

pub use compile::{CacheOutcome, CompileStats};
pub use dotcompute_hal::Backend;
pub use driver::probe;

use compile::Compiler;
use cudarc::cublas::{result as blas, sys as blas_sys};
use cudarc::driver::{result as cu, sys};
use dotcompute_hal::{
    BackendKind, BoundArg, DeviceInfo, Error, Fence, HostMemory, LaunchRequest, Limits,
    MatmulRequest, MemoryStats, RawSource, Result, SizeClassPool, Timing,
};
use dotcompute_ir::{Kernel, Literal, ScalarType};
use driver::{bind, driver_error, Check, BACKEND};
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// Kernel parameters beyond this count are refused (generated kernels add one length per
/// buffer and four geometry words).
const MAX_PARAMS: usize = 128;

/// Dynamic shared memory beyond this needs the function's opt-in attribute.
const DEFAULT_SHARED_BYTES: u32 = 48 * 1024;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The devices of the CUDA driver, or why there are none.
pub fn devices() -> std::result::Result<Vec<DeviceInfo>, String> {
    probe()?;
    let n = cu::device::get_count().map_err(driver::describe)?;
    (0..n)
        .map(|i| device_info(i).map_err(|e| e.to_string()))
        .collect()
}

fn attribute(dev: sys::CUdevice, attr: sys::CUdevice_attribute) -> Result<i32> {
    // SAFETY: dev is a valid device handle.
    unsafe { cu::device::get_attribute(dev, attr) }.during("cuDeviceGetAttribute")
}

fn device_info(ordinal: i32) -> Result<DeviceInfo> {
    use sys::CUdevice_attribute::*;
    let dev = cu::device::get(ordinal).during("cuDeviceGet")?;
    let a = |attr| attribute(dev, attr);
    let cc = (
        a(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
        a(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
    );
    // SAFETY: dev is valid.
    let memory = unsafe { cu::device::total_mem(dev) }.during("cuDeviceTotalMem")? as u64;
    let (nv_major, nv_minor) = compile::nvrtc_version();
    let driver = driver_version();
    Ok(DeviceInfo {
        backend: BackendKind::Cuda,
        name: cu::device::get_name(dev).during("cuDeviceGetName")?,
        memory_bytes: memory,
        compute_units: a(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
        limits: Limits {
            max_group_threads: a(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)? as u32,
            max_group_size: [
                a(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)? as u32,
                a(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)? as u32,
                a(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)? as u32,
            ],
            max_groups: [
                a(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)? as u32,
                a(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)? as u32,
                a(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)? as u32,
            ],
            max_shared_bytes: a(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as u64,
            max_buffer_bytes: memory,
        },
        driver: format!(
            "CUDA driver {}.{}, NVRTC {nv_major}.{nv_minor}, sm_{}{}",
            driver / 1000,
            (driver % 1000) / 10,
            cc.0,
            cc.1
        ),
        features: ["f64", "i64", "atomic-f32-add", "cublas"]
            .iter()
            .filter(|f| **f != "cublas" || driver::cublas_present())
            .map(|s| s.to_string())
            .collect(),
    })
}

fn driver_version() -> i32 {
    let mut v = 0;
    // SAFETY: writes one int.
    let _ = unsafe { sys::cuDriverGetVersion(&mut v) };
    v
}

/// A pooled device allocation.
pub struct CudaBuffer {
    ptr: sys::CUdeviceptr,
    class: usize,
}

impl CudaBuffer {
    /// The device address (for interoperation with other CUDA code on the same context).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }
}

/// A loaded kernel.
struct Function {
    func: sys::CUfunction,
    /// The grid-stride twin of a generated kernel, where the code generator made one.
    strided: Option<sys::CUfunction>,
    /// The vector form of an elementwise generated kernel, and the logical threads each of
    /// its iterations runs.
    vector: Option<(sys::CUfunction, u32)>,
    /// The dynamic shared memory the function is currently allowed (opt-in attribute).
    shared_allowed: AtomicU32,
}

// SAFETY: a CUfunction is a driver handle usable from any thread with the context bound.
unsafe impl Send for Function {}
unsafe impl Sync for Function {}

/// Generated kernels by the address of their IR, with the IR itself.
type GeneratedCache = HashMap<usize, (Arc<Kernel>, Arc<Function>)>;

/// A CUDA device (one context, one stream).
pub struct CudaBackend {
    info: DeviceInfo,
    device: sys::CUdevice,
    ctx: sys::CUcontext,
    stream: sys::CUstream,
    pool: SizeClassPool<sys::CUdeviceptr>,
    compiler: Compiler,
    /// Generated kernels by the address of their IR; the entry keeps the IR alive, so the
    /// address cannot be reused by another kernel while it is a key.
    generated: Mutex<GeneratedCache>,
    raw: Mutex<HashMap<[u8; 32], Arc<Function>>>,
    modules: Mutex<Vec<sys::CUmodule>>,
    stats: Mutex<CompileStats>,
    profiling: AtomicBool,
    /// Threads the device keeps resident at once (SMs × threads per SM): a grid-stride
    /// launch uses one wave of that many.
    resident_threads: u32,
    /// Whether large launches of eligible kernels use their grid-stride form
    /// (`DOTCOMPUTE_CUDA_GRID_STRIDE=off` disables it, for comparison).
    grid_stride: bool,
    /// Whether elementwise kernels use their vector form when every buffer is 16-byte
    /// aligned (`DOTCOMPUTE_CUDA_VECTORIZE=off` disables it, for comparison).
    vectorize: bool,
    pending: Mutex<Vec<(String, sys::CUevent, sys::CUevent)>>,
    blas: OnceLock<std::result::Result<BlasHandle, String>>,
}

struct BlasHandle(blas_sys::cublasHandle_t);
// SAFETY: a cuBLAS handle may be used from any thread, one call at a time; calls are
// serialised by the stream they are enqueued on and the handle is only read.
unsafe impl Send for BlasHandle {}
unsafe impl Sync for BlasHandle {}

// SAFETY: the driver handles (context, stream, modules, functions, device pointers) are
// plain handles the driver lets any thread use once the context is current, which every
// entry point ensures with `bind`. Mutable state is behind mutexes and atomics.
unsafe impl Send for CudaBackend {}
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
        let info = device_info(ordinal).map_err(|e| Error::BackendUnavailable {
            backend: BACKEND.into(),
            reason: e.to_string(),
        })?;
        let device = cu::device::get(ordinal).during("cuDeviceGet")?;
        // SAFETY: device is valid; the retained context is released in Drop.
        let ctx = unsafe { cu::primary_ctx::retain(device) }.during("cuDevicePrimaryCtxRetain")?;
        bind(ctx)?;
        let stream =
            cu::stream::create(cu::stream::StreamKind::NonBlocking).during("cuStreamCreate")?;
        use sys::CUdevice_attribute::*;
        let cc = (
            attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        Ok(CudaBackend {
            info,
            device,
            ctx,
            stream,
            pool: SizeClassPool::new(),
            compiler: Compiler::new(cc, driver_version()),
            generated: Mutex::new(HashMap::new()),
            raw: Mutex::new(HashMap::new()),
            modules: Mutex::new(Vec::new()),
            stats: Mutex::new(CompileStats::default()),
            profiling: AtomicBool::new(false),
            resident_threads: (attribute(device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?
                * attribute(device, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?)
                as u32,
            grid_stride: !std::env::var("DOTCOMPUTE_CUDA_GRID_STRIDE")
                .is_ok_and(|v| v.eq_ignore_ascii_case("off")),
            vectorize: !std::env::var("DOTCOMPUTE_CUDA_VECTORIZE")
                .is_ok_and(|v| v.eq_ignore_ascii_case("off")),
            pending: Mutex::new(Vec::new()),
            blas: OnceLock::new(),
        })
    }

    /// The driver handles behind a generated kernel and this backend's stream, for
    /// benchmarks that compare a launch through dotcompute with a raw driver launch of the
    /// very same function. The handles live as long as the backend.
    #[doc(hidden)]
    pub fn raw_handles(&self, kernel: &Arc<Kernel>) -> Result<(sys::CUfunction, sys::CUstream)> {
        bind(self.ctx)?;
        Ok((self.function(kernel)?.0.func, self.stream))
    }

    /// Compile-cache counters.
    pub fn compile_stats(&self) -> CompileStats {
        *lock(&self.stats)
    }

    /// Compiles (or finds in a cache) the module of a generated kernel, and says where it
    /// came from.
    pub fn prepare_kernel(&self, kernel: &Arc<Kernel>) -> Result<CacheOutcome> {
        bind(self.ctx)?;
        self.function(kernel).map(|(_, outcome)| outcome)
    }

    fn function(&self, kernel: &Arc<Kernel>) -> Result<(Arc<Function>, CacheOutcome)> {
        let key = Arc::as_ptr(kernel) as usize;
        if let Some((_, f)) = lock(&self.generated).get(&key) {
            let f = f.clone();
            lock(&self.stats).memory_hits += 1;
            return Ok((f, CacheOutcome::Memory));
        }
        let module = dotcompute_codegen::cuda::generate(kernel);
        let (f, outcome) = self.load(
            &kernel.name,
            &module.source,
            &module.entry,
            module.strided_entry.as_deref(),
            module.vector_entry.as_ref().map(|(e, w)| (e.as_str(), *w)),
            false,
        )?;
        let f = lock(&self.generated)
            .entry(key)
            .or_insert((kernel.clone(), f))
            .1
            .clone();
        Ok((f, outcome))
    }

    fn raw_function(&self, kernel: &Kernel, raw: &RawSource) -> Result<Arc<Function>> {
        if let Some(f) = lock(&self.raw).get(&raw.hash) {
            lock(&self.stats).memory_hits += 1;
            return Ok(f.clone());
        }
        let (f, _) = self.load(&kernel.name, &raw.text, &raw.entry, None, None, true)?;
        Ok(lock(&self.raw).entry(raw.hash).or_insert(f).clone())
    }

    /// Disk cache, else NVRTC; then loads the module (context bound by the caller).
    fn load(
        &self,
        name: &str,
        source: &str,
        entry: &str,
        strided: Option<&str>,
        vector: Option<(&str, u32)>,
        raw: bool,
    ) -> Result<(Arc<Function>, CacheOutcome)> {
        let key = self.compiler.key(source, raw);
        let cached = {
            let mut stats = lock(&self.stats);
            self.compiler.read_disk(&key, &mut stats)
        };
        if let Some(cubin) = cached {
            match self.load_cubin(name, &cubin, entry, strided, vector) {
                Ok(f) => {
                    lock(&self.stats).disk_hits += 1;
                    return Ok((f, CacheOutcome::Disk));
                }
                Err(e) => {
                    lock(&self.stats).corrupt_entries += 1;
                    tracing::warn!("cached module of `{name}` did not load ({e}); recompiling");
                }
            }
        }
        let cubin = self.compiler.nvrtc(name, source, raw)?;
        lock(&self.stats).nvrtc_compiles += 1;
        let f = self.load_cubin(name, &cubin, entry, strided, vector)?;
        self.compiler.write_disk(&key, &cubin);
        Ok((f, CacheOutcome::Compiled))
    }

    fn load_cubin(
        &self,
        name: &str,
        cubin: &[u8],
        entry: &str,
        strided: Option<&str>,
        vector: Option<(&str, u32)>,
    ) -> Result<Arc<Function>> {
        // SAFETY: the image is a whole CUBIN (checksummed on disk, or fresh from NVRTC).
        let module =
            unsafe { cu::module::load_data(cubin.as_ptr().cast()) }.during("cuModuleLoadData")?;
        lock(&self.modules).push(module);
        let entry_c = CString::new(entry).map_err(|_| Error::Compile {
            kernel: name.into(),
            backend: BACKEND.into(),
            log: format!("entry point `{entry}` contains a NUL byte"),
        })?;
        // SAFETY: module was just loaded.
        let func = unsafe { cu::module::get_function(module, entry_c) }.map_err(|_| {
            Error::Compile {
                kernel: name.into(),
                backend: BACKEND.into(),
                log: format!(
                    "the module defines no kernel `{entry}`: declare it `extern \"C\" __global__ void {entry}(...)`"
                ),
            }
        })?;
        // SAFETY: module is loaded; a missing twin only means no such form.
        let twin = |name: &str| {
            CString::new(name)
                .ok()
                .and_then(|s| unsafe { cu::module::get_function(module, s) }.ok())
        };
        Ok(Arc::new(Function {
            func,
            strided: strided.and_then(twin),
            vector: vector.and_then(|(e, w)| Some((twin(e)?, w))),
            shared_allowed: AtomicU32::new(DEFAULT_SHARED_BYTES),
        }))
    }

    /// Enqueues `op` between two timing events when profiling is on.
    fn timed<T>(&self, label: &str, op: impl FnOnce() -> Result<T>) -> Result<T> {
        if !self.profiling.load(Ordering::Relaxed) {
            return op();
        }
        let flags = sys::CUevent_flags::CU_EVENT_DEFAULT;
        let start = cu::event::create(flags).during("cuEventCreate")?;
        let end = cu::event::create(flags).during("cuEventCreate")?;
        // SAFETY: events and stream are live.
        unsafe { cu::event::record(start, self.stream) }.during("cuEventRecord")?;
        let out = op();
        unsafe { cu::event::record(end, self.stream) }.during("cuEventRecord")?;
        lock(&self.pending).push((label.to_string(), start, end));
        out
    }

    fn alloc_error(&self, bytes: usize, e: cudarc::driver::DriverError) -> Error {
        if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            Error::OutOfMemory {
                device: self.info.name.clone(),
                requested: bytes as u64,
                detail: format!("cuMemAlloc: {}", driver::describe(e)),
            }
        } else {
            driver_error("cuMemAlloc", e)
        }
    }

    /// A function that returns blocks to the driver once the stream no longer uses them:
    /// it waits for the stream before the first block only (trim frees many at once).
    fn driver_free(&self) -> impl FnMut(sys::CUdeviceptr) + '_ {
        let mut drained = false;
        move |ptr| {
            // SAFETY: the stream is live; the block is not owned by any buffer, and after
            // the first wait no work that used it is pending.
            unsafe {
                if !drained {
                    let _ = cu::stream::synchronize(self.stream);
                    drained = true;
                }
                let _ = cu::free_sync(ptr);
            }
        }
    }

    fn blas(&self) -> std::result::Result<blas_sys::cublasHandle_t, String> {
        self.blas
            .get_or_init(|| {
                if !driver::cublas_present() {
                    return Err("cuBLAS library (libcublas.so) not found".into());
                }
                let h = blas::create_handle().map_err(|e| format!("cublasCreate: {e:?}"))?;
                // SAFETY: h and the stream are live; cuBLAS work then joins our stream.
                unsafe { blas::set_stream(h, self.stream as _) }
                    .map_err(|e| format!("cublasSetStream: {e:?}"))?;
                Ok(BlasHandle(h))
            })
            .as_ref()
            .map(|h| h.0)
            .map_err(|e| e.clone())
    }
}

/// The bits of a scalar argument, little-endian in a u64 slot (the driver reads the
/// parameter's own size from its start).
fn scalar_bits(l: Literal) -> u64 {
    match l {
        Literal::Bool(b) => b as u64,
        Literal::I32(v) => v as u32 as u64,
        Literal::U32(v) => v as u64,
        Literal::I64(v) => v as u64,
        Literal::U64(v) => v,
        Literal::F32(bits) => bits as u64,
        Literal::F64(bits) => bits,
    }
}

impl Backend for CudaBackend {
    type Buffer = CudaBuffer;

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&self, bytes: usize) -> Result<CudaBuffer> {
        bind(self.ctx)?;
        let (ptr, class) = self.pool.acquire(
            bytes,
            // SAFETY: plain allocation; the memory is owned by the pool from here on.
            |class| unsafe { cu::malloc_sync(class) }.map_err(|e| self.alloc_error(class, e)),
            self.driver_free(),
        )?;
        Ok(CudaBuffer { ptr, class })
    }

    fn free(&self, buffer: CudaBuffer) {
        // Stream-ordered reuse: see the crate docs.
        self.pool.release(buffer.ptr, buffer.class);
    }

    fn write(&self, dst: &CudaBuffer, offset: usize, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        bind(self.ctx)?;
        // SAFETY: the range is inside the buffer (facade contract). From pageable memory
        // the driver has consumed `data` when the call returns; from page-locked memory
        // it has not, so then we wait for the copy before `data` goes back to the caller.
        unsafe {
            sys::cuMemcpyHtoDAsync_v2(
                dst.ptr + offset as u64,
                data.as_ptr().cast(),
                data.len(),
                self.stream,
            )
            .during("cuMemcpyHtoDAsync")?;
            if is_page_locked(data.as_ptr()) {
                cu::stream::synchronize(self.stream).during("cuStreamSynchronize")?;
            }
        }
        Ok(())
    }

    fn read(&self, src: &CudaBuffer, offset: usize, out: &mut [u8]) -> Result<()> {
        if out.is_empty() {
            return Ok(());
        }
        bind(self.ctx)?;
        // SAFETY: range inside the buffer; we wait for the copy before returning.
        unsafe {
            sys::cuMemcpyDtoHAsync_v2(
                out.as_mut_ptr().cast(),
                src.ptr + offset as u64,
                out.len(),
                self.stream,
            )
            .during("cuMemcpyDtoHAsync")?;
            cu::stream::synchronize(self.stream)
                .during("reading a buffer (cuStreamSynchronize; an earlier kernel may have failed)")
        }
    }

    fn copy(
        &self,
        src: &CudaBuffer,
        src_offset: usize,
        dst: &CudaBuffer,
        dst_offset: usize,
        bytes: usize,
    ) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        bind(self.ctx)?;
        self.timed("copy", || {
            // SAFETY: both ranges are inside their buffers (facade contract).
            unsafe {
                cu::memcpy_dtod_async(
                    dst.ptr + dst_offset as u64,
                    src.ptr + src_offset as u64,
                    bytes,
                    self.stream,
                )
            }
            .during("cuMemcpyDtoDAsync")
        })
    }

    fn fill(&self, dst: &CudaBuffer, offset: usize, bytes: usize, pattern: &[u8]) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        bind(self.ctx)?;
        let ptr = dst.ptr + offset as u64;
        let s = self.stream;
        // SAFETY: the range is inside the buffer and aligned to the pattern's size (the
        // facade fills whole elements).
        unsafe {
            match *pattern {
                [b] => sys::cuMemsetD8Async(ptr, b, bytes, s).during("cuMemsetD8Async"),
                [a, b] => sys::cuMemsetD16Async(ptr, u16::from_le_bytes([a, b]), bytes / 2, s)
                    .during("cuMemsetD16Async"),
                [a, b, c, d] => {
                    sys::cuMemsetD32Async(ptr, u32::from_le_bytes([a, b, c, d]), bytes / 4, s)
                        .during("cuMemsetD32Async")
                }
                [a, b, c, d, e, f, g, h] => {
                    // Two strided 32-bit fills: the low words, then the high words.
                    let lo = u32::from_le_bytes([a, b, c, d]);
                    let hi = u32::from_le_bytes([e, f, g, h]);
                    let n = bytes / 8;
                    sys::cuMemsetD2D32Async(ptr, 8, lo, 1, n, s).during("cuMemsetD2D32Async")?;
                    sys::cuMemsetD2D32Async(ptr + 4, 8, hi, 1, n, s).during("cuMemsetD2D32Async")
                }
                _ => {
                    let data: Vec<u8> = pattern.iter().copied().cycle().take(bytes).collect();
                    self.write(dst, offset, &data)
                }
            }
        }
    }

    fn launch(&self, request: &LaunchRequest<'_, CudaBuffer>) -> Result<()> {
        bind(self.ctx)?;
        let kernel = request.kernel;
        let (function, generated) = match request.raw {
            Some(raw) => (self.raw_function(kernel, raw)?, false),
            None => (self.function(kernel)?.0, true),
        };
        let g = request.geometry;
        // Argument storage: one u64 slot per parameter, and a pointer to each slot.
        let mut slots = [0u64; MAX_PARAMS];
        let mut n = 0;
        let mut push = |v: u64| -> Result<()> {
            if n == MAX_PARAMS {
                return Err(Error::Backend {
                    backend: BACKEND.into(),
                    message: format!(
                        "kernel `{}` has more than {MAX_PARAMS} parameters",
                        kernel.name
                    ),
                });
            }
            slots[n] = v;
            n += 1;
            Ok(())
        };
        for arg in &request.args {
            match arg {
                BoundArg::Buffer { buffer, offset, .. } => push(buffer.ptr + *offset as u64)?,
                BoundArg::Scalar(l) => push(scalar_bits(*l))?,
            }
        }
        let mut dynamic_bytes = 0u32;
        if generated {
            for arg in &request.args {
                if let BoundArg::Buffer { len, .. } = arg {
                    push(*len as u64)?;
                }
            }
            for v in g.grid {
                push(v as u64)?;
            }
            push(g.dynamic_shared_len as u64)?;
            if let Some((_, s)) = kernel.dynamic_shared() {
                dynamic_bytes = g.dynamic_shared_len * s.elem.size_bytes() as u32;
            }
        }
        if dynamic_bytes > function.shared_allowed.load(Ordering::Relaxed) {
            // SAFETY: function is live; the value is within the device's opt-in limit
            // (checked by the facade against max_shared_bytes).
            unsafe {
                cu::function::set_function_attribute(
                    function.func,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    dynamic_bytes as i32,
                )
            }
            .during("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")?;
            function
                .shared_allowed
                .fetch_max(dynamic_bytes, Ordering::Relaxed);
        }
        // Launches larger than one resident wave run eligible kernels in grid-stride form
        // with one wave of groups: fewer, longer-lived groups keep more loads in flight
        // than a million short ones (the logical threads and results are the same).
        let mut func = function.func;
        let mut groups = g.groups;
        // (1, 2, 4 and 8 waves measured the same on an H200; see docs/benchmarks.md.)
        let wave = (self.resident_threads / g.group_threads().max(1)).max(1);
        // Checked only for kernels that have a vector form: launches of the others pay
        // nothing for it.
        let aligned = || {
            request.args.iter().all(|a| match a {
                BoundArg::Buffer { buffer, offset, .. } => (buffer.ptr + *offset as u64) % 16 == 0,
                BoundArg::Scalar(_) => true,
            })
        };
        match (function.vector, function.strided) {
            // Elementwise kernels on aligned buffers: W logical threads per iteration, as
            // many groups as that needs, at most one wave (grid-stride beyond).
            (Some((vector, width)), _) if generated && self.vectorize && aligned() => {
                func = vector;
                let threads = g.grid[0].div_ceil(width);
                groups[0] = threads.div_ceil(g.group[0].max(1)).clamp(1, wave);
            }
            (_, Some(strided)) if generated && self.grid_stride && groups[0] > wave => {
                func = strided;
                groups[0] = wave;
            }
            _ => {}
        }
        let mut params: [*mut c_void; MAX_PARAMS] = [std::ptr::null_mut(); MAX_PARAMS];
        for i in 0..n {
            params[i] = (&mut slots[i] as *mut u64).cast();
        }
        self.timed(&kernel.name, || {
            // SAFETY: the parameter list follows the kernel's ABI (dotcompute_codegen::cuda
            // for generated kernels, the declared RawParams for raw ones); the slots live
            // until cuLaunchKernel returns, which copies them.
            unsafe {
                cu::launch_kernel(
                    func,
                    (groups[0], groups[1], groups[2]),
                    (g.group[0], g.group[1], g.group[2]),
                    dynamic_bytes,
                    self.stream,
                    &mut params[..n],
                )
            }
            .map_err(|e| driver_error(&format!("launching kernel `{}`", kernel.name), e))
        })
    }

    fn synchronize(&self) -> Result<()> {
        bind(self.ctx)?;
        // SAFETY: the stream is live.
        unsafe { cu::stream::synchronize(self.stream) }.during("cuStreamSynchronize")
    }

    fn memory_stats(&self) -> MemoryStats {
        self.pool.stats()
    }

    fn trim(&self) {
        if bind(self.ctx).is_ok() {
            self.pool.trim(self.driver_free());
        }
    }

    fn set_profiling(&self, on: bool) {
        self.profiling.store(on, Ordering::Relaxed);
    }

    fn take_timings(&self) -> Vec<Timing> {
        let pending = std::mem::take(&mut *lock(&self.pending));
        if pending.is_empty() || self.synchronize().is_err() {
            return Vec::new();
        }
        pending
            .into_iter()
            .filter_map(|(label, start, end)| {
                // SAFETY: both events were recorded and the stream is idle.
                let ms = unsafe { cu::event::elapsed(start, end) };
                unsafe {
                    let _ = cu::event::destroy(start);
                    let _ = cu::event::destroy(end);
                }
                Some(Timing {
                    label,
                    duration: Duration::from_secs_f64(ms.ok()? as f64 / 1e3),
                    device_time: true,
                })
            })
            .collect()
    }

    fn matmul(&self, r: &MatmulRequest<'_, CudaBuffer>) -> Result<bool> {
        bind(self.ctx)?;
        let Ok(h) = self.blas() else {
            return Ok(false);
        };
        let (m, n, k) = (r.m as i32, r.n as i32, r.k as i32);
        let op = blas_sys::cublasOperation_t::CUBLAS_OP_N;
        // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: swap the operands, keep the data.
        if !matches!(
            r.elem,
            ScalarType::F32 | ScalarType::F64 | ScalarType::F16 | ScalarType::BF16
        ) {
            return Ok(false);
        }
        let status = self.timed("matmul (cuBLAS)", || {
            // SAFETY: the facade checked that a, b, c hold m×k, k×n and m×n elements of
            // `r.elem`; alpha and beta live across the (synchronous-to-enqueue) call.
            unsafe {
                match r.elem {
                    ScalarType::F32 => blas::sgemm(
                        h,
                        op,
                        op,
                        n,
                        m,
                        k,
                        &1.0f32,
                        r.b.ptr as _,
                        n,
                        r.a.ptr as _,
                        k,
                        &0.0f32,
                        r.c.ptr as _,
                        n,
                    ),
                    ScalarType::F64 => blas::dgemm(
                        h,
                        op,
                        op,
                        n,
                        m,
                        k,
                        &1.0f64,
                        r.b.ptr as _,
                        n,
                        r.a.ptr as _,
                        k,
                        &0.0f64,
                        r.c.ptr as _,
                        n,
                    ),
                    // 16-bit inputs and output, f32 accumulation (alpha and beta are then
                    // f32), tensor cores where the device has them.
                    half_type => {
                        let t = if half_type == ScalarType::F16 {
                            blas_sys::cudaDataType::CUDA_R_16F
                        } else {
                            blas_sys::cudaDataType::CUDA_R_16BF
                        };
                        let (one, zero) = (1.0f32, 0.0f32);
                        blas::gemm_ex(
                            h,
                            op,
                            op,
                            n,
                            m,
                            k,
                            (&one as *const f32).cast(),
                            r.b.ptr as _,
                            t,
                            n,
                            r.a.ptr as _,
                            t,
                            k,
                            (&zero as *const f32).cast(),
                            r.c.ptr as _,
                            t,
                            n,
                            blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                            blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT_TENSOR_OP,
                        )
                    }
                }
            }
            .map_err(|e| Error::Backend {
                backend: BACKEND.into(),
                message: format!("cuBLAS gemm ({m}×{k} · {k}×{n}, {}): {e:?}", r.elem),
            })
        });
        status.map(|()| true)
    }

    fn prepare(&self, kernel: &Arc<Kernel>) -> Result<()> {
        self.prepare_kernel(kernel).map(|_| ())
    }

    fn alloc_host(&self, bytes: usize) -> Result<Option<Box<dyn HostMemory>>> {
        if bytes == 0 {
            return Ok(None);
        }
        bind(self.ctx)?;
        // PORTABLE: page-locked for every context, so a copy on any device is a DMA.
        const PORTABLE: u32 = 0x01;
        // SAFETY: plain allocation, freed by PinnedMemory's Drop.
        let ptr = unsafe { cu::malloc_host(bytes, PORTABLE) }.map_err(|e| {
            if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                Error::OutOfMemory {
                    device: self.info.name.clone(),
                    requested: bytes as u64,
                    detail: format!(
                        "cuMemHostAlloc (page-locked host memory): {}",
                        driver::describe(e)
                    ),
                }
            } else {
                driver_error("cuMemHostAlloc", e)
            }
        })?;
        Ok(Some(Box::new(PinnedMemory {
            ptr: ptr.cast(),
            len: bytes,
            ctx: self.ctx,
        })))
    }

    unsafe fn write_async(
        &self,
        dst: &CudaBuffer,
        offset: usize,
        src: *const u8,
        len: usize,
    ) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        bind(self.ctx)?;
        self.timed("upload", || {
            // SAFETY: the range is inside the buffer (facade contract); the caller keeps
            // `src` alive and unchanged until a later fence completes. From pageable
            // memory the driver has staged the data when the call returns.
            unsafe {
                sys::cuMemcpyHtoDAsync_v2(dst.ptr + offset as u64, src.cast(), len, self.stream)
            }
            .during("cuMemcpyHtoDAsync")
        })
    }

    unsafe fn read_async(
        &self,
        src: &CudaBuffer,
        offset: usize,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        bind(self.ctx)?;
        self.timed("download", || {
            // SAFETY: the range is inside the buffer; the caller leaves `dst` alone until a
            // later fence completes. Into pageable memory the call returns when done.
            unsafe {
                sys::cuMemcpyDtoHAsync_v2(dst.cast(), src.ptr + offset as u64, len, self.stream)
            }
            .during("cuMemcpyDtoHAsync")
        })
    }

    fn fence(&self) -> Result<Box<dyn Fence>> {
        bind(self.ctx)?;
        let event = cu::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .during("cuEventCreate")?;
        let fence = CudaFence {
            event,
            ctx: self.ctx,
        };
        // SAFETY: both handles are live.
        unsafe { cu::event::record(event, self.stream) }.during("cuEventRecord")?;
        Ok(Box::new(fence))
    }
}

/// Page-locked host memory from `cuMemHostAlloc`.
struct PinnedMemory {
    ptr: *mut u8,
    len: usize,
    ctx: sys::CUcontext,
}

// SAFETY: plain memory; the facade serialises access to it.
unsafe impl Send for PinnedMemory {}
unsafe impl Sync for PinnedMemory {}

impl HostMemory for PinnedMemory {
    fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
}

impl Drop for PinnedMemory {
    fn drop(&mut self) {
        // The facade has waited for every transfer using the memory; the context is
        // alive (the memory's owner holds the device).
        if bind(self.ctx).is_ok() {
            // SAFETY: allocated by cuMemHostAlloc, freed once.
            let _ = unsafe { cu::free_host(self.ptr.cast()) };
        }
    }
}

/// A CUDA event recorded on the backend's stream.
struct CudaFence {
    event: sys::CUevent,
    ctx: sys::CUcontext,
}

// SAFETY: events are driver handles usable from any thread with the context bound.
unsafe impl Send for CudaFence {}
unsafe impl Sync for CudaFence {}

impl Fence for CudaFence {
    fn wait(&self) -> Result<()> {
        bind(self.ctx)?;
        // SAFETY: the event is live.
        unsafe { cu::event::synchronize(self.event) }
            .during("waiting for a fence (cuEventSynchronize; an earlier kernel may have failed)")
    }
    fn is_complete(&self) -> Result<bool> {
        bind(self.ctx)?;
        // SAFETY: the event is live.
        match unsafe { cu::event::query(self.event) } {
            Ok(()) => Ok(true),
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            Err(e) => Err(driver_error("cuEventQuery", e)),
        }
    }
}

impl Drop for CudaFence {
    fn drop(&mut self) {
        if bind(self.ctx).is_ok() {
            // SAFETY: destroyed once; the driver releases it after it completes.
            let _ = unsafe { cu::event::destroy(self.event) };
        }
    }
}

/// Whether `ptr` is page-locked host memory known to the driver.
fn is_page_locked(ptr: *const u8) -> bool {
    let mut kind: u32 = 0;
    // SAFETY: queries an attribute; fails (harmlessly) for ordinary pageable memory.
    let r = unsafe {
        sys::cuPointerGetAttribute(
            (&mut kind as *mut u32).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            ptr as sys::CUdeviceptr,
        )
    };
    r == sys::CUresult::CUDA_SUCCESS && kind == sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        if bind(self.ctx).is_err() {
            return;
        }
        // SAFETY: nothing uses these handles after the backend; the stream is drained
        // before memory, modules and the stream itself are released.
        unsafe {
            let _ = cu::stream::synchronize(self.stream);
            for (_, start, end) in lock(&self.pending).drain(..) {
                let _ = cu::event::destroy(start);
                let _ = cu::event::destroy(end);
            }
            if let Some(Ok(h)) = self.blas.get() {
                let _ = blas::destroy_handle(h.0);
            }
            self.pool.trim(|p| {
                let _ = cu::free_sync(p);
            });
            for m in lock(&self.modules).drain(..) {
                let _ = cu::module::unload(m);
            }
            let _ = cu::stream::destroy(self.stream);
            let _ = cu::primary_ctx::release(self.device);
        }
    }
}
