//! The backend trait family: a static trait per backend ([`Backend`], with its own buffer
//! type) and one object-safe mirror ([`DynBackend`]) for run-time selection, bridged by a
//! blanket impl. The facade only ever talks to `dyn DynBackend`.

use crate::device::DeviceInfo;
use crate::error::{Error, Result};
use crate::launch::ResolvedLaunch;
use crate::native::NativeFn;
use crate::pool::MemoryStats;
use dotcompute_ir::{BuildError, Kernel, Literal, ScalarType};
use std::any::Any;
use std::sync::{Arc, OnceLock};

/// A kernel as handed to backends: its IR (built once, lazily) and, for `#[kernel]`
/// functions, the native CPU implementation compiled from the same Rust text.
pub struct KernelDef {
    name: &'static str,
    build: fn() -> Result<Kernel, BuildError>,
    native: Option<NativeFn>,
    ir: OnceLock<Result<Arc<Kernel>, BuildError>>,
}

impl KernelDef {
    /// Used by `#[kernel]`; `build` produces the IR, `native` runs it on the CPU.
    pub const fn new(
        name: &'static str,
        build: fn() -> Result<Kernel, BuildError>,
        native: Option<NativeFn>,
    ) -> KernelDef {
        KernelDef {
            name,
            build,
            native,
            ir: OnceLock::new(),
        }
    }
    pub fn name(&self) -> &'static str {
        self.name
    }
    /// The kernel's IR, built and validated on first use.
    pub fn ir(&self) -> Result<&Arc<Kernel>> {
        self.ir
            .get_or_init(|| (self.build)().map(Arc::new))
            .as_ref()
            .map_err(|e| Error::Build(e.clone()))
    }
    pub fn native(&self) -> Option<NativeFn> {
        self.native
    }
}

/// One argument of a launch, already checked against the kernel's signature.
pub enum BoundArg<'a, B> {
    Buffer {
        buffer: &'a B,
        /// Offset of the first element, in bytes.
        offset: usize,
        /// Length in elements.
        len: usize,
        elem: ScalarType,
        writable: bool,
    },
    Scalar(Literal),
}

/// A kernel written by hand for one backend's language, with its reflected interface.
/// The facade checks arguments against `signature` (an IR kernel with an empty body).
#[derive(Clone, Debug)]
pub struct RawSource {
    /// `wgsl` or `cuda`.
    pub language: &'static str,
    pub text: String,
    pub entry: String,
    /// The entry point's fixed group size (WGSL); `None` when the launch chooses it (CUDA).
    pub workgroup_size: Option<[u32; 3]>,
    /// `(binding, read_only)` of each buffer parameter, in parameter order.
    pub buffer_bindings: Vec<(u32, bool)>,
    /// Binding of the uniform block holding the scalars (4 bytes each, in order).
    pub uniform_binding: Option<u32>,
    /// SHA-256 of language, entry and text: the pipeline-cache key.
    pub hash: [u8; 32],
}

/// A row-major matrix product `c (m×n) = a (m×k) · b (k×n)` on whole buffers. The facade
/// has checked the element type (`f32` or `f64`) and that each buffer holds its matrix.
pub struct MatmulRequest<'a, B> {
    pub a: &'a B,
    pub b: &'a B,
    pub c: &'a B,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub elem: ScalarType,
}

/// Everything a backend needs to run one launch. The facade has already checked argument
/// count, types, devices, non-empty buffers and the geometry against the device limits.
pub struct LaunchRequest<'a, B> {
    pub kernel: &'a Arc<Kernel>,
    pub native: Option<NativeFn>,
    pub geometry: ResolvedLaunch,
    pub args: Vec<BoundArg<'a, B>>,
    /// Set for hand-written kernels; `kernel` is then only their signature.
    pub raw: Option<&'a RawSource>,
}

/// A backend's device, with its own buffer type.
///
/// Contract: the caller guarantees that offsets and lengths are in range for the buffers
/// it passes (the facade checks them); the backend guarantees that memory it hands out is
/// not reused while a buffer using it is alive, and reports every failure as an `Err`.
pub trait Backend: Send + Sync + 'static {
    type Buffer: Send + Sync + 'static;
    fn info(&self) -> &DeviceInfo;
    fn alloc(&self, bytes: usize) -> Result<Self::Buffer>;
    /// Returns a buffer's memory (to the pool).
    fn free(&self, buffer: Self::Buffer);
    fn write(&self, dst: &Self::Buffer, offset: usize, data: &[u8]) -> Result<()>;
    fn read(&self, src: &Self::Buffer, offset: usize, out: &mut [u8]) -> Result<()>;
    fn copy(
        &self,
        src: &Self::Buffer,
        src_offset: usize,
        dst: &Self::Buffer,
        dst_offset: usize,
        bytes: usize,
    ) -> Result<()>;
    /// Fills `bytes` bytes at `offset` with repetitions of `pattern` (`bytes` is a multiple
    /// of the pattern length).
    fn fill(&self, dst: &Self::Buffer, offset: usize, bytes: usize, pattern: &[u8]) -> Result<()>;
    /// Runs a kernel to completion (or enqueues it such that later reads observe it).
    fn launch(&self, request: &LaunchRequest<'_, Self::Buffer>) -> Result<()>;
    fn synchronize(&self) -> Result<()>;
    fn memory_stats(&self) -> MemoryStats;
    /// Releases cached pool memory back to the driver.
    fn trim(&self);
    /// Turns per-operation timing on or off (see [`Timing`]). Backends without timers
    /// ignore it.
    fn set_profiling(&self, _on: bool) {}
    /// Timings recorded since the last call, oldest first.
    fn take_timings(&self) -> Vec<Timing> {
        Vec::new()
    }
    /// Runs a matrix product through a vendor library. `Ok(false)`: this backend has no
    /// vendor path for the request (the facade then runs its generated kernel).
    fn matmul(&self, _request: &MatmulRequest<'_, Self::Buffer>) -> Result<bool> {
        Ok(false)
    }
    /// Compiles `kernel` ahead of its first launch (filling the backends' caches).
    fn prepare(&self, _kernel: &Arc<Kernel>) -> Result<()> {
        Ok(())
    }
    /// Host memory for fast, asynchronous transfers (page-locked where the backend has
    /// it), or `None`: the facade then uses ordinary memory.
    fn alloc_host(&self, _bytes: usize) -> Result<Option<Box<dyn HostMemory>>> {
        Ok(None)
    }
    /// Enqueues a host-to-device copy of `len` bytes from `src`. The default copies at once.
    ///
    /// # Safety
    /// `src..src + len` is valid for reads and is not written until a [`Fence`] recorded
    /// after this call has completed.
    unsafe fn write_async(
        &self,
        dst: &Self::Buffer,
        offset: usize,
        src: *const u8,
        len: usize,
    ) -> Result<()> {
        // SAFETY: the caller's contract covers a plain read of the range now.
        self.write(dst, offset, unsafe { std::slice::from_raw_parts(src, len) })
    }
    /// Enqueues a device-to-host copy of `len` bytes into `dst`. The default copies at once.
    ///
    /// # Safety
    /// `dst..dst + len` is valid for writes and is neither read nor written by anyone else
    /// until a [`Fence`] recorded after this call has completed.
    unsafe fn read_async(
        &self,
        src: &Self::Buffer,
        offset: usize,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        // SAFETY: the caller's contract covers a plain write of the range now.
        self.read(src, offset, unsafe {
            std::slice::from_raw_parts_mut(dst, len)
        })
    }
    /// A fence that completes when everything enqueued so far has. The default waits for
    /// the device now and returns a completed fence.
    fn fence(&self) -> Result<Box<dyn Fence>> {
        self.synchronize()?;
        Ok(Box::new(Completed))
    }
}

/// Host memory allocated by a backend (page-locked on CUDA); freed on drop.
pub trait HostMemory: Send + Sync {
    /// The start of the allocation, aligned to at least 64 bytes.
    fn as_ptr(&self) -> *mut u8;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The completion of the work a device had enqueued when the fence was recorded.
pub trait Fence: Send + Sync {
    /// Blocks until that work is done; an error of that work (a faulted kernel) is
    /// reported here.
    fn wait(&self) -> Result<()>;
    /// Whether that work is done, without blocking.
    fn is_complete(&self) -> Result<bool>;
}

/// A fence that is already complete (backends that finish work before returning).
pub struct Completed;

impl Fence for Completed {
    fn wait(&self) -> Result<()> {
        Ok(())
    }
    fn is_complete(&self) -> Result<bool> {
        Ok(true)
    }
}

/// How long one launch or copy took, measured by the backend while profiling is on.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// The kernel's name, or `copy`.
    pub label: String,
    pub duration: std::time::Duration,
    /// `true` when measured on the device (GPU timestamp queries), `false` for host wall
    /// time (the CPU backend).
    pub device_time: bool,
}

/// A type-erased buffer owned by the facade.
pub type RawBuffer = Box<dyn Any + Send + Sync>;

/// Object-safe mirror of [`Backend`].
pub trait DynBackend: Send + Sync {
    fn info(&self) -> &DeviceInfo;
    fn alloc(&self, bytes: usize) -> Result<RawBuffer>;
    fn free(&self, buffer: RawBuffer);
    fn write(&self, dst: &RawBuffer, offset: usize, data: &[u8]) -> Result<()>;
    fn read(&self, src: &RawBuffer, offset: usize, out: &mut [u8]) -> Result<()>;
    fn copy(
        &self,
        src: &RawBuffer,
        src_offset: usize,
        dst: &RawBuffer,
        dst_offset: usize,
        bytes: usize,
    ) -> Result<()>;
    fn fill(&self, dst: &RawBuffer, offset: usize, bytes: usize, pattern: &[u8]) -> Result<()>;
    fn launch(&self, request: &LaunchRequest<'_, RawBuffer>) -> Result<()>;
    fn synchronize(&self) -> Result<()>;
    fn memory_stats(&self) -> MemoryStats;
    fn trim(&self);
    fn set_profiling(&self, on: bool);
    fn take_timings(&self) -> Vec<Timing>;
    fn matmul(&self, request: &MatmulRequest<'_, RawBuffer>) -> Result<bool>;
    fn prepare(&self, kernel: &Arc<Kernel>) -> Result<()>;
    fn alloc_host(&self, bytes: usize) -> Result<Option<Box<dyn HostMemory>>>;
    /// # Safety
    /// As [`Backend::write_async`].
    unsafe fn write_async(
        &self,
        dst: &RawBuffer,
        offset: usize,
        src: *const u8,
        len: usize,
    ) -> Result<()>;
    /// # Safety
    /// As [`Backend::read_async`].
    unsafe fn read_async(
        &self,
        src: &RawBuffer,
        offset: usize,
        dst: *mut u8,
        len: usize,
    ) -> Result<()>;
    fn fence(&self) -> Result<Box<dyn Fence>>;
}

fn downcast<'a, B: Backend>(backend: &B, raw: &'a RawBuffer) -> Result<&'a B::Buffer> {
    raw.downcast_ref::<B::Buffer>()
        .ok_or_else(|| Error::Backend {
            backend: backend.info().backend.name().into(),
            message: "a buffer of another backend was passed to this device".into(),
        })
}

impl<B: Backend> DynBackend for B {
    fn info(&self) -> &DeviceInfo {
        Backend::info(self)
    }
    fn alloc(&self, bytes: usize) -> Result<RawBuffer> {
        Ok(Box::new(Backend::alloc(self, bytes)?))
    }
    fn free(&self, buffer: RawBuffer) {
        if let Ok(b) = buffer.downcast::<B::Buffer>() {
            Backend::free(self, *b)
        }
    }
    fn write(&self, dst: &RawBuffer, offset: usize, data: &[u8]) -> Result<()> {
        Backend::write(self, downcast(self, dst)?, offset, data)
    }
    fn read(&self, src: &RawBuffer, offset: usize, out: &mut [u8]) -> Result<()> {
        Backend::read(self, downcast(self, src)?, offset, out)
    }
    fn copy(
        &self,
        src: &RawBuffer,
        src_offset: usize,
        dst: &RawBuffer,
        dst_offset: usize,
        bytes: usize,
    ) -> Result<()> {
        Backend::copy(
            self,
            downcast(self, src)?,
            src_offset,
            downcast(self, dst)?,
            dst_offset,
            bytes,
        )
    }
    fn fill(&self, dst: &RawBuffer, offset: usize, bytes: usize, pattern: &[u8]) -> Result<()> {
        Backend::fill(self, downcast(self, dst)?, offset, bytes, pattern)
    }
    fn launch(&self, request: &LaunchRequest<'_, RawBuffer>) -> Result<()> {
        let args = request
            .args
            .iter()
            .map(|a| {
                Ok(match a {
                    BoundArg::Buffer {
                        buffer,
                        offset,
                        len,
                        elem,
                        writable,
                    } => BoundArg::Buffer {
                        buffer: downcast(self, buffer)?,
                        offset: *offset,
                        len: *len,
                        elem: *elem,
                        writable: *writable,
                    },
                    BoundArg::Scalar(l) => BoundArg::Scalar(*l),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Backend::launch(
            self,
            &LaunchRequest {
                kernel: request.kernel,
                native: request.native,
                geometry: request.geometry,
                args,
                raw: request.raw,
            },
        )
    }
    fn synchronize(&self) -> Result<()> {
        Backend::synchronize(self)
    }
    fn memory_stats(&self) -> MemoryStats {
        Backend::memory_stats(self)
    }
    fn trim(&self) {
        Backend::trim(self)
    }
    fn set_profiling(&self, on: bool) {
        Backend::set_profiling(self, on)
    }
    fn take_timings(&self) -> Vec<Timing> {
        Backend::take_timings(self)
    }
    fn matmul(&self, r: &MatmulRequest<'_, RawBuffer>) -> Result<bool> {
        Backend::matmul(
            self,
            &MatmulRequest {
                a: downcast(self, r.a)?,
                b: downcast(self, r.b)?,
                c: downcast(self, r.c)?,
                m: r.m,
                n: r.n,
                k: r.k,
                elem: r.elem,
            },
        )
    }
    fn prepare(&self, kernel: &Arc<Kernel>) -> Result<()> {
        Backend::prepare(self, kernel)
    }
    fn alloc_host(&self, bytes: usize) -> Result<Option<Box<dyn HostMemory>>> {
        Backend::alloc_host(self, bytes)
    }
    unsafe fn write_async(
        &self,
        dst: &RawBuffer,
        offset: usize,
        src: *const u8,
        len: usize,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { Backend::write_async(self, downcast(self, dst)?, offset, src, len) }
    }
    unsafe fn read_async(
        &self,
        src: &RawBuffer,
        offset: usize,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { Backend::read_async(self, downcast(self, src)?, offset, dst, len) }
    }
    fn fence(&self) -> Result<Box<dyn Fence>> {
        Backend::fence(self)
    }
}
