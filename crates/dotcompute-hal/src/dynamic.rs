//! The object-safe mirror of [`Backend`] + [`Queue`]: buffers are type-erased
//! ([`RawBuffer`]) and downcast once per call by the blanket impl. The facade holds
//! `Box<dyn DynBackend>`, so run-time backend selection needs no generics in user code.

use crate::backend::{
    Backend, Blas, BoundArg, Capture, GraphExec, HostMemory, LaunchRequest, MatmulRequest, Queue,
};
use crate::device::DeviceInfo;
use crate::error::{Error, Result};
use crate::pool::MemoryStats;
use crate::program::Program;
use crate::stream::{Fence, StreamId, StreamSet, Timing};
use dotcompute_ir::ScalarType;
use std::any::Any;

/// A type-erased buffer owned by the facade.
pub type RawBuffer = Box<dyn Any + Send + Sync>;

/// Object-safe mirror of [`Backend`] and [`Queue`]; every method means what the static
/// one means.
#[allow(clippy::too_many_arguments)]
pub trait DynBackend: Send + Sync {
    // Device
    fn info(&self) -> &DeviceInfo;
    fn alloc(&self, bytes: usize) -> Result<(RawBuffer, StreamSet)>;
    fn free(&self, buffer: RawBuffer, users: StreamSet);
    fn memory_stats(&self) -> MemoryStats;
    fn trim(&self);
    fn alloc_host(&self, bytes: usize) -> Result<Option<Box<dyn HostMemory>>>;
    /// See [`Backend::host_address`] (`None` for a buffer of another backend).
    fn host_address(&self, buffer: &RawBuffer) -> Option<*mut u8>;
    fn prepare(&self, program: &Program) -> Result<()>;
    fn open_stream(&self, id: StreamId) -> Result<()>;
    fn close_stream(&self, id: StreamId);
    fn set_profiling(&self, on: bool);
    fn take_timings(&self) -> Vec<Timing>;
    /// See [`Backend::time_limit`].
    fn time_limit(&self) -> Option<&crate::settings::TimeLimit>;
    /// Whether [`DynBackend::gemm`] can run a product of `elem`.
    fn has_blas(&self, elem: ScalarType) -> bool;
    /// The vendor matrix product; `Error::Unsupported` without one for `request.elem`.
    /// # Safety
    /// As the same method of [`Queue`] (its duties are listed there).
    unsafe fn gemm(&self, stream: StreamId, request: &MatmulRequest<'_, RawBuffer>) -> Result<()>;

    // Streams
    /// # Safety
    /// As the same method of [`Queue`] (its duties are listed there).
    unsafe fn write(&self, s: StreamId, dst: &RawBuffer, offset: usize, data: &[u8]) -> Result<()>;
    /// # Safety
    /// As the same method of [`Queue`] (its duties are listed there).
    unsafe fn read(
        &self,
        s: StreamId,
        src: &RawBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<()>;
    /// # Safety
    /// As the same method of [`Queue`] (its duties are listed there).
    unsafe fn copy(
        &self,
        s: StreamId,
        src: &RawBuffer,
        src_offset: usize,
        dst: &RawBuffer,
        dst_offset: usize,
        bytes: usize,
    ) -> Result<()>;
    /// # Safety
    /// As the same method of [`Queue`] (its duties are listed there).
    unsafe fn fill(
        &self,
        s: StreamId,
        dst: &RawBuffer,
        offset: usize,
        bytes: usize,
        pattern: &[u8],
    ) -> Result<()>;
    /// # Safety
    /// As the same method of [`Queue`] (its duties are listed there).
    unsafe fn launch(&self, s: StreamId, request: &LaunchRequest<'_, RawBuffer>) -> Result<()>;
    /// # Safety
    /// As the same method of [`Queue`] (its duties are listed there).
    unsafe fn launch_batch(
        &self,
        s: StreamId,
        requests: &[LaunchRequest<'_, RawBuffer>],
    ) -> Result<()>;
    fn synchronize(&self, s: StreamId) -> Result<()>;
    fn synchronize_all(&self) -> Result<()>;
    /// # Safety
    /// As [`Queue::write_async`].
    unsafe fn write_async(
        &self,
        s: StreamId,
        dst: &RawBuffer,
        offset: usize,
        src: *const u8,
        len: usize,
    ) -> Result<()>;
    /// # Safety
    /// As [`Queue::read_async`].
    unsafe fn read_async(
        &self,
        s: StreamId,
        src: &RawBuffer,
        offset: usize,
        dst: *mut u8,
        len: usize,
    ) -> Result<()>;
    fn record(&self, s: StreamId) -> Result<Box<dyn Fence>>;
    fn wait_fence(&self, s: StreamId, fence: &dyn Fence) -> Result<()>;
    fn wait_stream(&self, waiter: StreamId, signaller: StreamId) -> Result<()>;
    /// Whether [`Queue::capture`] gives driver graphs; the capture methods below are
    /// `Error::Unsupported` (and `close_capture_streams` nothing) where it does not.
    fn has_capture(&self) -> bool;
    fn open_capture_streams(&self, count: usize) -> Result<Vec<StreamId>>;
    fn close_capture_streams(&self, ids: &[StreamId]);
    fn begin_capture(&self, s: StreamId) -> Result<()>;
    fn end_capture(
        &self,
        s: StreamId,
        update: Option<&dyn GraphExec>,
    ) -> Result<Option<Box<dyn GraphExec>>>;
    fn launch_graph(&self, s: StreamId, graph: &dyn GraphExec) -> Result<()>;
    /// See [`Capture::update_graph_launch`].
    /// # Safety
    /// As there.
    unsafe fn update_graph_launch(
        &self,
        graph: &dyn GraphExec,
        launch: usize,
        request: &LaunchRequest<'_, RawBuffer>,
    ) -> Result<bool>;
}

/// The backend's driver graphs, or the error a backend without them gives.
fn capture_of<B: Queue>(backend: &B) -> Result<&dyn Capture<B::Buffer>> {
    Queue::capture(backend).ok_or_else(|| Error::Unsupported {
        op: "graph capture",
        detail: format!(
            "the {} backend has no driver graphs",
            Backend::info(backend).backend
        ),
    })
}

fn downcast<'a, B: Backend>(backend: &B, raw: &'a RawBuffer) -> Result<&'a B::Buffer> {
    raw.downcast_ref::<B::Buffer>()
        // The facade refuses buffers of other devices (`Error::WrongDevice`) first.
        .ok_or_else(|| {
            Error::internal(
                backend.info().backend.name(),
                "a buffer of another backend reached this device",
            )
        })
}

fn downcast_args<'a, B: Backend>(
    backend: &B,
    args: &[BoundArg<'a, RawBuffer>],
) -> Result<Vec<BoundArg<'a, B::Buffer>>> {
    args.iter()
        .map(|a| {
            Ok(match a {
                BoundArg::Buffer {
                    buffer,
                    offset,
                    len,
                    elem,
                    writable,
                } => BoundArg::Buffer {
                    buffer: downcast(backend, buffer)?,
                    offset: *offset,
                    len: *len,
                    elem: *elem,
                    writable: *writable,
                },
                BoundArg::Scalar(l) => BoundArg::Scalar(*l),
            })
        })
        .collect()
}

impl<B: Backend + Queue> DynBackend for B {
    fn info(&self) -> &DeviceInfo {
        Backend::info(self)
    }
    fn alloc(&self, bytes: usize) -> Result<(RawBuffer, StreamSet)> {
        let (b, users) = Backend::alloc(self, bytes)?;
        Ok((Box::new(b), users))
    }
    fn free(&self, buffer: RawBuffer, users: StreamSet) {
        if let Ok(b) = buffer.downcast::<B::Buffer>() {
            Backend::free(self, *b, users)
        }
    }
    fn memory_stats(&self) -> MemoryStats {
        Backend::memory_stats(self)
    }
    fn trim(&self) {
        Backend::trim(self)
    }
    fn alloc_host(&self, bytes: usize) -> Result<Option<Box<dyn HostMemory>>> {
        Backend::alloc_host(self, bytes)
    }
    fn host_address(&self, buffer: &RawBuffer) -> Option<*mut u8> {
        Backend::host_address(self, buffer.downcast_ref::<B::Buffer>()?)
    }
    fn prepare(&self, program: &Program) -> Result<()> {
        Backend::prepare(self, program)
    }
    fn open_stream(&self, id: StreamId) -> Result<()> {
        Backend::open_stream(self, id)
    }
    fn close_stream(&self, id: StreamId) {
        Backend::close_stream(self, id)
    }
    fn set_profiling(&self, on: bool) {
        Backend::set_profiling(self, on)
    }
    fn take_timings(&self) -> Vec<Timing> {
        Backend::take_timings(self)
    }
    fn time_limit(&self) -> Option<&crate::settings::TimeLimit> {
        Backend::time_limit(self)
    }
    fn has_blas(&self, elem: ScalarType) -> bool {
        Backend::blas(self, elem).is_some()
    }
    unsafe fn gemm(&self, s: StreamId, r: &MatmulRequest<'_, RawBuffer>) -> Result<()> {
        let blas: &dyn Blas<B::Buffer> =
            Backend::blas(self, r.elem).ok_or_else(|| Error::Unsupported {
                op: "a vendor matrix product",
                detail: format!(
                    "{} has no vendor library for {} matrices",
                    Backend::info(self).name,
                    r.elem
                ),
            })?;
        // SAFETY: the caller's contract, forwarded unchanged to the typed call (the
        // buffers are this backend's: `downcast` checked them).
        unsafe {
            blas.gemm(
                s,
                &MatmulRequest {
                    a: downcast(self, r.a)?,
                    b: downcast(self, r.b)?,
                    c: downcast(self, r.c)?,
                    m: r.m,
                    n: r.n,
                    k: r.k,
                    elem: r.elem,
                    precision: r.precision,
                },
            )
        }
    }

    unsafe fn write(&self, s: StreamId, dst: &RawBuffer, offset: usize, data: &[u8]) -> Result<()> {
        // SAFETY: the caller's contract, forwarded unchanged to the typed call (the
        // buffers are this backend's: `downcast` checked them).
        unsafe { Queue::write(self, s, downcast(self, dst)?, offset, data) }
    }
    unsafe fn read(
        &self,
        s: StreamId,
        src: &RawBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<()> {
        // SAFETY: the caller's contract, forwarded unchanged to the typed call (the
        // buffers are this backend's: `downcast` checked them).
        unsafe { Queue::read(self, s, downcast(self, src)?, offset, out) }
    }
    unsafe fn copy(
        &self,
        s: StreamId,
        src: &RawBuffer,
        src_offset: usize,
        dst: &RawBuffer,
        dst_offset: usize,
        bytes: usize,
    ) -> Result<()> {
        // SAFETY: the caller's contract, forwarded unchanged to the typed call (the
        // buffers are this backend's: `downcast` checked them).
        unsafe {
            Queue::copy(
                self,
                s,
                downcast(self, src)?,
                src_offset,
                downcast(self, dst)?,
                dst_offset,
                bytes,
            )
        }
    }
    unsafe fn fill(
        &self,
        s: StreamId,
        dst: &RawBuffer,
        offset: usize,
        bytes: usize,
        pattern: &[u8],
    ) -> Result<()> {
        // SAFETY: the caller's contract, forwarded unchanged to the typed call (the
        // buffers are this backend's: `downcast` checked them).
        unsafe { Queue::fill(self, s, downcast(self, dst)?, offset, bytes, pattern) }
    }
    unsafe fn launch(&self, s: StreamId, request: &LaunchRequest<'_, RawBuffer>) -> Result<()> {
        // SAFETY: the caller's contract, forwarded unchanged to the typed call (the
        // buffers are this backend's: `downcast` checked them).
        unsafe {
            Queue::launch(
                self,
                s,
                &LaunchRequest {
                    program: request.program,
                    geometry: request.geometry,
                    args: downcast_args(self, &request.args)?,
                },
            )
        }
    }
    unsafe fn launch_batch(
        &self,
        s: StreamId,
        requests: &[LaunchRequest<'_, RawBuffer>],
    ) -> Result<()> {
        let typed = requests
            .iter()
            .map(|r| {
                Ok(LaunchRequest {
                    program: r.program,
                    geometry: r.geometry,
                    args: downcast_args(self, &r.args)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        // SAFETY: the caller's contract, forwarded unchanged to the typed call (the
        // buffers are this backend's: `downcast` checked them).
        unsafe { Queue::launch_batch(self, s, &typed) }
    }
    fn synchronize(&self, s: StreamId) -> Result<()> {
        Queue::synchronize(self, s)
    }
    fn synchronize_all(&self) -> Result<()> {
        Queue::synchronize_all(self)
    }
    unsafe fn write_async(
        &self,
        s: StreamId,
        dst: &RawBuffer,
        offset: usize,
        src: *const u8,
        len: usize,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { Queue::write_async(self, s, downcast(self, dst)?, offset, src, len) }
    }
    unsafe fn read_async(
        &self,
        s: StreamId,
        src: &RawBuffer,
        offset: usize,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { Queue::read_async(self, s, downcast(self, src)?, offset, dst, len) }
    }
    fn record(&self, s: StreamId) -> Result<Box<dyn Fence>> {
        Queue::record(self, s)
    }
    fn wait_fence(&self, s: StreamId, fence: &dyn Fence) -> Result<()> {
        Queue::wait_fence(self, s, fence)
    }
    fn wait_stream(&self, waiter: StreamId, signaller: StreamId) -> Result<()> {
        Queue::wait_stream(self, waiter, signaller)
    }
    fn has_capture(&self) -> bool {
        Queue::capture(self).is_some()
    }
    fn open_capture_streams(&self, count: usize) -> Result<Vec<StreamId>> {
        capture_of(self)?.open_capture_streams(count)
    }
    fn close_capture_streams(&self, ids: &[StreamId]) {
        if let Some(c) = Queue::capture(self) {
            c.close_capture_streams(ids)
        }
    }
    fn begin_capture(&self, s: StreamId) -> Result<()> {
        capture_of(self)?.begin_capture(s)
    }
    fn end_capture(
        &self,
        s: StreamId,
        update: Option<&dyn GraphExec>,
    ) -> Result<Option<Box<dyn GraphExec>>> {
        capture_of(self)?.end_capture(s, update)
    }
    fn launch_graph(&self, s: StreamId, graph: &dyn GraphExec) -> Result<()> {
        capture_of(self)?.launch_graph(s, graph)
    }
    unsafe fn update_graph_launch(
        &self,
        graph: &dyn GraphExec,
        launch: usize,
        request: &LaunchRequest<'_, RawBuffer>,
    ) -> Result<bool> {
        let capture = capture_of(self)?;
        // SAFETY: the caller's contract, forwarded unchanged to the typed call (the
        // buffers are this backend's: `downcast` checked them).
        unsafe {
            capture.update_graph_launch(
                graph,
                launch,
                &LaunchRequest {
                    program: request.program,
                    geometry: request.geometry,
                    args: downcast_args(self, &request.args)?,
                },
            )
        }
    }
}
