//! # dotcompute-cpu: the CPU backend
//!
//! Runs `#[kernel]` functions natively: the macro compiles the kernel's Rust text into a
//! body that this crate's executor calls once per thread ([`runtime::execute`]). Groups run
//! in parallel on rayon; kernels without barriers run each group as a plain loop the
//! compiler can optimise; kernels with barriers run as a group body split at the barriers
//! (loops over the group's threads between barriers, [`fission`]), or, where the macro
//! cannot split them, one stackful coroutine per thread (corosensei) that yields at each
//! barrier. Both give exact barrier semantics. `docs/architecture.md` explains the choice.
//!
//! ## Contract
//!
//! *Validates*: argument types when a body binds them; every load, store and atomic is
//! bounds-checked, and an out-of-bounds access becomes `Error::OutOfBounds` naming the
//! kernel, the argument and the index (nothing outside an array is touched); barrier
//! divergence inside a group (threads at different barriers, conditions or ranges around a
//! barrier that differ between threads, some threads leaving a loop with a barrier);
//! allocation failure (`Error::OutOfMemory`); panics inside a
//! kernel (`Error::KernelPanicked`).
//!
//! *Trusts* the facade for offsets and lengths of host copies (it checks them) and the
//! kernel author for data races (as on a GPU, two threads writing one element without an
//! atomic give an unspecified result).
//!
//! Memory comes from a size-class pool ([`dotcompute_hal::SizeClassPool`]) over 64-byte
//! aligned host allocations.
//!
//! ## Streams and graphs
//!
//! Every operation completes before it returns, so streams need no bookkeeping here: a
//! stream is the calling thread's order of calls, fences are complete when recorded, and
//! waits between streams are no-ops. Concurrency comes from calling from several threads
//! (the backend is `Sync`) and, for graphs, from the facade running independent branches
//! in parallel.

pub mod fission;
pub mod lanes;
pub mod ops;
pub mod runtime;
pub mod watchdog;

use dotcompute_hal::native::{ErrorSlot, NativeArg, NativeLaunch};
use dotcompute_hal::{
    AtomicF32Add, Backend, BackendDescriptor, BackendKind, Blas, BoundArg, Capabilities,
    DeviceInfo, DeviceType, DynBackend, Error, GeneratedProduct, LaunchRequest, Limits,
    MatmulRequest, MemoryStats, Queue, Result, SizeClassPool, StreamId, StreamSet, Timing,
};
use dotcompute_ir::ScalarType;
use rayon::prelude::*;
use std::sync::Mutex;
use std::time::Instant;

/// The CPU backend's entry in the registry: one device, always present.
pub static DESCRIPTOR: BackendDescriptor = BackendDescriptor {
    kind: BackendKind::Cpu,
    probe: || Ok(vec![CpuBackend::new().info.clone()]),
    open: |ordinal| {
        if ordinal == 0 {
            Ok(Box::new(CpuBackend::new()) as Box<dyn DynBackend>)
        } else {
            Err(dotcompute_hal::registry::no_such_device(
                BackendKind::Cpu,
                ordinal,
                1,
            ))
        }
    },
};
use std::alloc::Layout;
use std::ptr::NonNull;

const ALIGN: usize = 64;

/// A block of host memory.
struct Block {
    ptr: NonNull<u8>,
    bytes: usize,
}
// SAFETY: a Block is plain owned memory.
unsafe impl Send for Block {}
// SAFETY: as for `Send`; shared use is ordered by the facade's streams.
unsafe impl Sync for Block {}

/// A CPU buffer: a pooled block and its size class.
pub struct CpuBuffer {
    block: Block,
}

impl CpuBuffer {
    fn ptr(&self) -> *mut u8 {
        self.block.ptr.as_ptr()
    }
    /// The start of the buffer's memory (64-byte aligned), for backends that run kernels
    /// on host memory through another path (the MSL shim of `dotcompute-metal`).
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr()
    }
}

/// The CPU device.
pub struct CpuBackend {
    info: DeviceInfo,
    pool: SizeClassPool<Block>,
    /// Set while profiling is on: the moment it was turned on (timeline origin).
    profiling: Mutex<Option<Instant>>,
    timings: Mutex<Vec<Timing>>,
    /// How long one launch may run before it is stopped ([`watchdog`]), or the error of
    /// an invalid `DOTCOMPUTE_CPU_TIMEOUT_S`, returned by every launch.
    time_limit: dotcompute_hal::settings::TimeLimit,
    /// The error of an invalid `DOTCOMPUTE_CPU_LANES`, `DOTCOMPUTE_CPU_AVX2` or
    /// `DOTCOMPUTE_CPU_BARRIERS` (read when the device opens), returned by every launch:
    /// the process-wide switches they set are read where the kernels run, which cannot
    /// fail.
    settings_error: Option<Error>,
}

impl Default for CpuBackend {
    fn default() -> Self {
        Self::new()
    }
}

fn physical_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map(|kib| kib * 1024)
        .unwrap_or(8 << 30)
}

fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|n| n.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

impl CpuBackend {
    /// The CPU device. Its launch time limit is `DOTCOMPUTE_CPU_TIMEOUT_S` (seconds,
    /// default 300); an invalid value makes every launch `Error::Config` naming it.
    pub fn new() -> CpuBackend {
        let memory = physical_memory();
        CpuBackend {
            info: DeviceInfo {
                backend: BackendKind::Cpu,
                ordinal: 0,
                name: cpu_name(),
                device_type: DeviceType::Cpu,
                memory_bytes: memory,
                compute_units: rayon::current_num_threads() as u32,
                // Group limits mirror common GPU limits so that a kernel that validates on
                // the CPU also fits a GPU.
                limits: Limits {
                    max_group_threads: 1024,
                    max_group_size: [1024, 1024, 64],
                    max_groups: [u32::MAX, u32::MAX, u32::MAX],
                    max_shared_bytes: 48 * 1024,
                    max_static_shared_bytes: 48 * 1024,
                    max_buffer_bytes: memory,
                    max_binding_bytes: memory,
                },
                driver: format!(
                    "rayon {} threads, {}",
                    rayon::current_num_threads(),
                    std::env::consts::ARCH
                ),
                caps: Capabilities {
                    f64: true,
                    i64: true,
                    f16: true,
                    atomic_f32_add: AtomicF32Add::CompareExchangeLoop,
                    timestamps: false,
                    raw_languages: Vec::new(),
                    concurrent_streams: false,
                    native_graphs: false,
                    blas: vec![ScalarType::F32, ScalarType::F64],
                    // One lane: each operation sees only the calling thread.
                    subgroup_size: Some([1, 1]),
                    tensor_cores: false,
                    exact_float: true,
                    subnormals: true,
                    time_limits: true,
                    completes_on_enqueue: true,
                    forward_progress: false,
                    generated_product: GeneratedProduct::Unfused,
                },
            },
            pool: SizeClassPool::new(),
            profiling: Default::default(),
            timings: Default::default(),
            time_limit: dotcompute_hal::settings::TimeLimit::from_env(
                watchdog::TIMEOUT_VARIABLE,
                watchdog::DEFAULT_TIMEOUT,
            ),
            settings_error: [
                dotcompute_hal::settings::switch("DOTCOMPUTE_CPU_LANES").map(drop),
                dotcompute_hal::settings::switch("DOTCOMPUTE_CPU_AVX2").map(drop),
                fission::barrier_setting().map(drop),
            ]
            .into_iter()
            .find_map(Result::err),
        }
    }

    /// Records operation `label`, started at `start` and done now, while profiling is on
    /// (host wall time). Public for backends that run on this device's memory and keep its
    /// profiling switch, such as the MSL shim, whose launches would otherwise be missing
    /// from the timings.
    pub fn record(&self, stream: StreamId, label: &str, start: Instant) {
        let origin = *self.profiling.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(origin) = origin {
            self.timings
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(Timing {
                    label: label.to_string(),
                    duration: start.elapsed(),
                    device_time: false,
                    stream,
                    start: Some(start.saturating_duration_since(origin)),
                });
        }
    }

    /// A block of `bytes` (a pool size class) for a request of `requested` bytes, which
    /// errors report (the class is an implementation detail).
    fn os_alloc(&self, bytes: usize, requested: usize) -> Result<Block> {
        let oom = |detail: String| Error::OutOfMemory {
            device: self.info.label(),
            requested: requested as u64,
            detail,
        };
        if bytes as u64 > self.info.memory_bytes {
            return Err(oom(format!(
                "the machine has {} bytes of memory",
                self.info.memory_bytes
            )));
        }
        let layout = Layout::from_size_align(bytes, ALIGN)
            .map_err(|_| oom("size exceeds the address space".into()))?;
        // SAFETY: non-zero size (size classes start at 256 bytes).
        let ptr = unsafe { std::alloc::alloc(layout) };
        NonNull::new(ptr)
            .map(|ptr| Block { ptr, bytes })
            .ok_or_else(|| oom("the system allocator refused".into()))
    }

    fn os_free(block: Block) {
        // SAFETY: allocated by os_alloc with this layout.
        unsafe {
            std::alloc::dealloc(
                block.ptr.as_ptr(),
                Layout::from_size_align_unchecked(block.bytes, ALIGN),
            )
        }
    }
}

impl Drop for CpuBackend {
    fn drop(&mut self) {
        self.pool.trim(CpuBackend::os_free);
    }
}

impl Backend for CpuBackend {
    type Buffer = CpuBuffer;

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&self, bytes: usize) -> Result<(CpuBuffer, StreamSet)> {
        let (block, _class, _) = self.pool.acquire(
            bytes,
            |class| self.os_alloc(class, bytes),
            CpuBackend::os_free,
        )?;
        // Every earlier use has completed: nothing to wait for.
        Ok((CpuBuffer { block }, StreamSet::EMPTY))
    }

    fn free(&self, buffer: CpuBuffer, _users: StreamSet) {
        let class = buffer.block.bytes;
        self.pool.release(buffer.block, class, StreamSet::EMPTY);
    }

    fn memory_stats(&self) -> MemoryStats {
        self.pool.stats()
    }

    fn trim(&self) {
        self.pool.trim(CpuBackend::os_free);
    }

    fn set_profiling(&self, on: bool) {
        *self.profiling.lock().unwrap_or_else(|p| p.into_inner()) = on.then(Instant::now);
    }

    fn take_timings(&self) -> Vec<Timing> {
        std::mem::take(&mut *self.timings.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn host_address(&self, buffer: &CpuBuffer) -> Option<*mut u8> {
        // Device memory is host memory, and every operation completes before it returns.
        Some(buffer.ptr())
    }

    fn blas(&self, elem: ScalarType) -> Option<&dyn Blas<CpuBuffer>> {
        matches!(elem, ScalarType::F32 | ScalarType::F64).then_some(self as &dyn Blas<CpuBuffer>)
    }

    fn time_limit(&self) -> Option<&dotcompute_hal::settings::TimeLimit> {
        Some(&self.time_limit)
    }
}

impl Queue for CpuBackend {
    unsafe fn write(&self, _: StreamId, dst: &CpuBuffer, offset: usize, data: &[u8]) -> Result<()> {
        // SAFETY: the facade checked offset + len against the buffer.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst.ptr().add(offset), data.len()) }
        Ok(())
    }

    unsafe fn read(
        &self,
        _: StreamId,
        src: &CpuBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<()> {
        // SAFETY: as above.
        unsafe { std::ptr::copy_nonoverlapping(src.ptr().add(offset), out.as_mut_ptr(), out.len()) }
        Ok(())
    }

    unsafe fn copy(
        &self,
        stream: StreamId,
        src: &CpuBuffer,
        src_offset: usize,
        dst: &CpuBuffer,
        dst_offset: usize,
        bytes: usize,
    ) -> Result<()> {
        let start = Instant::now();
        // SAFETY: as above.
        let (from, to) = unsafe { (src.ptr().add(src_offset), dst.ptr().add(dst_offset)) };
        let apart =
            (from as usize + bytes <= to as usize) || (to as usize + bytes <= from as usize);
        if apart && bytes >= PARALLEL_COPY_BYTES {
            // Disjoint ranges: copied in parallel pieces (one core's copy left half the
            // memory bandwidth a parallel copy kernel reached).
            let (from, to) = (from as usize, to as usize);
            (0..bytes.div_ceil(COPY_PIECE))
                .into_par_iter()
                .for_each(|i| {
                    let start = i * COPY_PIECE;
                    let len = COPY_PIECE.min(bytes - start);
                    // SAFETY: each piece lies inside both ranges, which do not overlap, and
                    // the pieces are disjoint.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            (from + start) as *const u8,
                            (to + start) as *mut u8,
                            len,
                        )
                    }
                });
        } else {
            // SAFETY: as above; `copy` (memmove) also allows ranges of one buffer to overlap.
            unsafe { std::ptr::copy(from, to, bytes) }
        }
        self.record(stream, "copy", start);
        Ok(())
    }

    unsafe fn fill(
        &self,
        stream: StreamId,
        dst: &CpuBuffer,
        offset: usize,
        bytes: usize,
        pattern: &[u8],
    ) -> Result<()> {
        let start = Instant::now();
        // SAFETY: as above.
        let out = unsafe { std::slice::from_raw_parts_mut(dst.ptr().add(offset), bytes) };
        fill_with(out, pattern);
        self.record(stream, "fill", start);
        Ok(())
    }

    unsafe fn launch(
        &self,
        stream: StreamId,
        request: &LaunchRequest<'_, CpuBuffer>,
    ) -> Result<()> {
        let kernel = &*request.program.kernel;
        if let Some(e) = &self.settings_error {
            return Err(e.clone());
        }
        // The launch's own limit, else the device's (whose error, if its variable was
        // invalid, every launch returns).
        let (limit, set_by) = match request.geometry.time_limit {
            Some(limit) => (limit, dotcompute_hal::settings::SET_BY_LAUNCH),
            None => self.time_limit.get()?,
        };
        let Some(native) = request.program.native() else {
            return Err(Error::Unsupported {
                op: "a kernel without a CPU implementation",
                detail: match request.program.raw_source() {
                    Some(raw) => format!(
                        "kernel `{}` is hand-written {}, which the CPU backend cannot run; \
                         write it as a #[kernel] function to run it everywhere",
                        kernel.name,
                        raw.language.name()
                    ),
                    None => format!(
                        "kernel `{}` has no CPU implementation (only `#[kernel]` functions \
                         run on the CPU)",
                        kernel.name
                    ),
                },
            });
        };
        let args: Vec<NativeArg> = request
            .args
            .iter()
            .map(|a| match a {
                BoundArg::Buffer {
                    buffer,
                    offset,
                    len,
                    elem,
                    writable,
                } => NativeArg::Buffer {
                    // SAFETY: the facade checked the view against the buffer.
                    ptr: unsafe { buffer.ptr().add(*offset) },
                    len: *len,
                    elem: *elem,
                    writable: *writable,
                },
                BoundArg::Scalar(l) => NativeArg::Scalar(*l),
            })
            .collect();
        let errors = std::sync::Arc::new(ErrorSlot::new());
        let launch = NativeLaunch {
            kernel,
            geometry: request.geometry,
            args: &args,
            errors: &errors,
        };
        // Raises LaunchTimedOut past the limit; the loops' polls then stop every thread.
        let _watch = watchdog::watch(&errors, &kernel.name, limit, set_by);
        // A panic inside a kernel (which the generated code avoids, but host code called
        // from a kernel might not) must not take the caller down.
        let start = Instant::now();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| native(&launch)));
        self.record(stream, &kernel.name, start);
        match result {
            Ok(r) => r,
            Err(payload) => Err(Error::KernelPanicked {
                kernel: kernel.name.clone(),
                message: payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into()),
            }),
        }
    }

    fn synchronize(&self, _: StreamId) -> Result<()> {
        Ok(()) // every operation completes before it returns
    }

    fn synchronize_all(&self) -> Result<()> {
        Ok(())
    }

    fn wait_stream(&self, _: StreamId, _: StreamId) -> Result<()> {
        Ok(()) // the signalling stream's work has completed already
    }
}

/// The CPU's vendor matrix product: `matrixmultiply`'s packed, register-blocked GEMM
/// (the generated kernel, split at its barriers, is not vectorised across threads and is
/// far slower on a CPU). Row-major `c = a · b` is a strided call with row stride =
/// columns. The rows of `c` are split into bands computed in parallel on the backend's
/// rayon pool, each band one single-threaded GEMM (matrixmultiply's own threading stops
/// at 4 threads and would run beside rayon's).
impl Blas<CpuBuffer> for CpuBackend {
    unsafe fn gemm(&self, stream: StreamId, r: &MatmulRequest<'_, CpuBuffer>) -> Result<()> {
        let start = Instant::now();
        match r.elem {
            ScalarType::F32 => banded_gemm::<f32>(r, matrixmultiply::sgemm),
            ScalarType::F64 => banded_gemm::<f64>(r, matrixmultiply::dgemm),
            other => {
                return Err(Error::Unsupported {
                    op: "matmul",
                    detail: format!("the CPU's matrix product takes f32 and f64, not {other}"),
                })
            }
        }
        self.record(stream, "matmul (matrixmultiply)", start);
        Ok(())
    }
}

/// matrixmultiply's `sgemm` / `dgemm` signature.
type GemmFn<T> = unsafe fn(
    usize,
    usize,
    usize,
    T,
    *const T,
    isize,
    isize,
    *const T,
    isize,
    isize,
    T,
    *mut T,
    isize,
    isize,
);

/// Pointers shared by the bands (each band writes only its own rows of `c`).
#[derive(Clone, Copy)]
struct GemmPtrs<T>(*const T, *const T, *mut T);
// SAFETY: the bands read `a` and `b` and write disjoint rows of `c`.
unsafe impl<T> Send for GemmPtrs<T> {}
// SAFETY: as for `Send`.
unsafe impl<T> Sync for GemmPtrs<T> {}

fn banded_gemm<T: Copy + Send + Sync + From<u8>>(
    r: &MatmulRequest<'_, CpuBuffer>,
    gemm: GemmFn<T>,
) {
    let (m, k, n) = (r.m, r.k, r.n);
    let ptrs = GemmPtrs(
        r.a.ptr() as *const T,
        r.b.ptr() as *const T,
        r.c.ptr() as *mut T,
    );
    // Bands of at least 64 rows (each repacks `b`), about two per worker.
    let workers = rayon::current_num_threads().max(1);
    let band = m.div_ceil(2 * workers).max(64);
    let bands = m.div_ceil(band);
    (0..bands).into_par_iter().for_each(|i| {
        let p = ptrs;
        let rows = band.min(m - i * band);
        // SAFETY: the facade checked that a, b and c hold m×k, k×n and m×n elements of T
        // (f32 or f64, by `blas`); c is a buffer of its own (borrowed mutably by the
        // caller), so it aliases neither input; this band's rows i·band.. of a and c are
        // in range and no other band writes them.
        unsafe {
            gemm(
                rows,
                k,
                n,
                T::from(1),
                p.0.add(i * band * k),
                k as isize,
                1,
                p.1,
                n as isize,
                1,
                T::from(0),
                p.2.add(i * band * n),
                n as isize,
                1,
            )
        }
    });
}

/// Copies from this size run in parallel pieces of [`COPY_PIECE`] bytes.
const PARALLEL_COPY_BYTES: usize = 2 << 20;
const COPY_PIECE: usize = 1 << 20;

/// Repeats `pattern` over `out` (a whole number of patterns): a byte pattern as one
/// `memset`, others with block copies (copying the pattern element by element ran at
/// 2.8 GB/s where a fill kernel ran at 31 GB/s on the same host); from
/// [`PARALLEL_COPY_BYTES`] on in parallel pieces of about 1 MiB, like copies (small fills
/// stay off the thread pool).
fn fill_with(out: &mut [u8], pattern: &[u8]) {
    if pattern.iter().all(|&b| b == pattern[0]) {
        if out.len() < PARALLEL_COPY_BYTES {
            out.fill(pattern[0]);
        } else {
            out.par_chunks_mut(COPY_PIECE)
                .for_each(|p| p.fill(pattern[0]));
        }
        return;
    }
    let block: Vec<u8> = pattern
        .iter()
        .copied()
        .cycle()
        .take((4096 / pattern.len()).max(1) * pattern.len())
        .collect();
    let fill_piece = |piece: &mut [u8]| {
        for c in piece.chunks_mut(block.len()) {
            // Whole patterns: every piece and block is, and so is the tail of `out`.
            c.copy_from_slice(&block[..c.len()]);
        }
    };
    if out.len() < PARALLEL_COPY_BYTES {
        fill_piece(out);
    } else {
        out.par_chunks_mut(block.len() * 256).for_each(fill_piece);
    }
}
