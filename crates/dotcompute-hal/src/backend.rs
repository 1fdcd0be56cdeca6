//! The static backend contract, split by concern:
//!
//! * [`Backend`]: the device: memory (a pool), programs, streams opened and closed,
//!   profiling, capabilities (in [`DeviceInfo`]) and optional extensions ([`Blas`]).
//! * [`Queue`]: work on a stream: writes, reads, copies, fills, launches, fences, waits
//!   between streams, and graph capture.
//!
//! Each backend implements both for one type with its own buffer type; the facade uses
//! them through the object-safe mirror in [`crate::dynamic`].

use crate::device::DeviceInfo;
use crate::error::Result;
use crate::launch::ResolvedLaunch;
use crate::pool::MemoryStats;
use crate::program::Program;
use crate::stream::{Completed, Fence, StreamId, StreamSet, Timing};
use dotcompute_ir::{Literal, ScalarType, Type};
use std::any::Any;

/// One argument of a launch, already checked against the kernel's signature.
pub enum BoundArg<'a, B> {
    Buffer {
        buffer: &'a B,
        /// Offset of the first element, in bytes.
        offset: usize,
        /// Length in elements.
        len: usize,
        elem: Type,
        writable: bool,
    },
    Scalar(Literal),
}

/// Everything a backend needs to run one launch. The facade has already checked argument
/// count, types, devices, non-empty buffers and the geometry against the device limits.
pub struct LaunchRequest<'a, B> {
    pub program: &'a Program,
    pub geometry: ResolvedLaunch,
    pub args: Vec<BoundArg<'a, B>>,
}

/// A row-major matrix product `c (m×n) = a (m×k) · b (k×n)` on whole buffers. The facade
/// has checked the element type and that each buffer holds its matrix.
pub struct MatmulRequest<'a, B> {
    pub a: &'a B,
    pub b: &'a B,
    pub c: &'a B,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub elem: ScalarType,
    pub precision: Precision,
}

/// The arithmetic a floating-point matrix product may use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// The element type's own precision throughout (FP32 for `f32`).
    #[default]
    Full,
    /// `f32` products may round their inputs to TF32 (10-bit mantissa) on tensor cores,
    /// accumulating in FP32 (about 1e-3 relative error per product). A backend without
    /// TF32 computes in full FP32, which satisfies the bound.
    Tf32,
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

/// Extension: driver graphs (CUDA graphs today). A backend that has them returns this
/// from [`Queue::capture`]; without them the facade replays a graph node by node. Work is
/// captured on private streams into an executable graph, updated in place where the
/// driver allows it, and replayed with one call.
pub trait Capture<B> {
    /// `count` private streams for capturing one graph ([`crate::stream::CAPTURE_STREAMS`]):
    /// ids no user stream has, never in a [`StreamSet`], so no other thread's work, wait
    /// or synchronisation can reach a stream while it is captured. Given back with
    /// [`Capture::close_capture_streams`] once the capture has ended.
    fn open_capture_streams(&self, count: usize) -> Result<Vec<StreamId>>;
    /// Gives back capture streams from [`Capture::open_capture_streams`].
    fn close_capture_streams(&self, ids: &[StreamId]);
    /// Starts recording the work enqueued on `stream` (a capture stream from
    /// [`Capture::open_capture_streams`]) into a driver graph instead of running it.
    fn begin_capture(&self, stream: StreamId) -> Result<()>;
    /// Ends a capture begun with [`Capture::begin_capture`]. With `update`, the recorded
    /// work replaces that executable's in place where the driver allows it (`Ok(None)`);
    /// otherwise a new executable is instantiated (`Ok(Some(..))`).
    fn end_capture(
        &self,
        stream: StreamId,
        update: Option<&dyn GraphExec>,
    ) -> Result<Option<Box<dyn GraphExec>>>;
    /// Gives launch number `launch` of an executable graph (counted in the order the
    /// capture enqueued its launches) the arguments of `request` (the captured kernel and
    /// geometry) in place, for later replays, without capturing again. `Ok(false)`: not
    /// done (the driver refused, or the launch is not one the graph holds); the caller
    /// captures again.
    ///
    /// # Safety
    /// As for [`Queue::launch`]: the request's buffer ranges are inside their buffers,
    /// and every replay after this call is ordered against the buffers' other uses.
    unsafe fn update_graph_launch(
        &self,
        graph: &dyn GraphExec,
        launch: usize,
        request: &LaunchRequest<'_, B>,
    ) -> Result<bool>;
    /// Enqueues an executable graph of this device on `stream`.
    fn launch_graph(&self, stream: StreamId, graph: &dyn GraphExec) -> Result<()>;
}

/// Extension: a vendor matrix-product library (cuBLAS today, MPS later). A backend that
/// has one returns it from [`Backend::blas`]; the facade otherwise runs its generated
/// kernel.
pub trait Blas<B> {
    /// `c = a · b` on `stream`, enqueued like a launch.
    ///
    /// # Safety
    /// As [`Queue`]'s data methods: each buffer holds its matrix, `c` aliases neither
    /// input, and no unordered work uses them.
    unsafe fn gemm(&self, stream: StreamId, request: &MatmulRequest<'_, B>) -> Result<()>;
}

/// A graph instantiated by the backend's driver (a CUDA graph executable).
pub trait GraphExec: Send + Sync + Any {
    fn as_any(&self) -> &dyn Any;
}

/// The device half of a backend.
///
/// Contract: the caller (the facade) guarantees that offsets and lengths are in range for
/// the buffers it passes, that every stream id it uses was opened with
/// [`Backend::open_stream`] and not closed, and that a buffer's memory is handed back with
/// [`Backend::free`] together with the set of streams that may still use it. The backend
/// guarantees that memory it hands out is not reused by work that could overtake those
/// uses (see [`Backend::alloc`]), and reports every failure as an `Err`, never a panic.
pub trait Backend: Send + Sync + 'static {
    type Buffer: Send + Sync + 'static;

    fn info(&self) -> &DeviceInfo;

    /// A block of at least `bytes`, and the streams whose earlier work may still use it
    /// (it was freed while they ran). The facade makes the first use of the new buffer on
    /// any other stream wait for those streams.
    fn alloc(&self, bytes: usize) -> Result<(Self::Buffer, StreamSet)>;
    /// Returns a buffer's memory to the pool; `users` are the streams whose enqueued work
    /// may still use it.
    fn free(&self, buffer: Self::Buffer, users: StreamSet);
    fn memory_stats(&self) -> MemoryStats;
    /// Releases cached pool memory to the driver (after the work that used it is done).
    fn trim(&self);
    /// Host memory for fast, asynchronous transfers (page-locked where the backend has
    /// it), or `None`: the facade then uses ordinary memory.
    fn alloc_host(&self, _bytes: usize) -> Result<Option<Box<dyn HostMemory>>> {
        Ok(None)
    }

    /// Compiles `program` ahead of its first launch (filling the backend's caches).
    fn prepare(&self, _program: &Program) -> Result<()> {
        Ok(())
    }

    /// Makes stream `id` usable (the default stream 0 is open from the start).
    fn open_stream(&self, _id: StreamId) -> Result<()> {
        Ok(())
    }
    /// Stream `id` is no longer used by the facade; the id may be opened again. Work
    /// already enqueued on it still runs, and [`Queue::wait_stream`] on the id must still
    /// wait for that work (keep the queue for the next stream with the id).
    fn close_stream(&self, _id: StreamId) {}

    /// Turns per-operation timing on or off (see [`Timing`]).
    fn set_profiling(&self, _on: bool) {}
    /// Timings recorded since the last call, oldest first.
    fn take_timings(&self) -> Vec<Timing> {
        Vec::new()
    }

    /// The vendor matrix product, if this device has one for `elem`.
    fn blas(&self, _elem: ScalarType) -> Option<&dyn Blas<Self::Buffer>> {
        None
    }

    /// Where `buffer`'s first byte is in the host's address space, for a backend whose
    /// device memory is host memory (the CPU backend); `None` where the host cannot
    /// address it. The caller orders host access after the work that uses the buffer.
    fn host_address(&self, _buffer: &Self::Buffer) -> Option<*mut u8> {
        None
    }

    /// The device's time limit (one launch on the CPU, one wait on a GPU), where the
    /// backend enforces one (`Capabilities::time_limits`). A backend that has one also
    /// honours `ResolvedLaunch::time_limit`: it waits for the stream's earlier work
    /// under its own limit, then for the launch under the launch's.
    fn time_limit(&self) -> Option<&crate::settings::TimeLimit> {
        None
    }
}

/// The stream half of a backend: work enqueued on a stream runs in the order it was
/// enqueued on that stream. Work on different streams is unordered unless a wait joins
/// them ([`Queue::wait_stream`], [`Queue::wait_fence`]).
///
/// **Ordering and lifetime rule** (every backend): work one thread enqueues reaches the
/// device in the order that thread enqueued it, whatever other threads do at the same
/// time, batched launches included (a batch is submitted before any later queue
/// operation); and a block given back with [`Backend::free`] is reused only by work that
/// runs after every use recorded before the free (submitted or not), on the same queue
/// or behind a wait on the streams the free names.
///
/// The data methods (`write`, `read`, `copy`, `fill`, `launch`, `launch_batch`, and
/// [`Blas::gemm`]) are `unsafe`: a backend cannot check what they trust, and getting it
/// wrong reads or writes memory outside a buffer, or races with other work on host
/// memory (the CPU backend's buffers are host memory). The `dotcompute` facade is the
/// one safe door: its typed buffers, views, opaque arguments and stream tracking
/// establish every point below.
///
/// # Safety (the caller's duties, for every data method)
/// * every `offset .. offset + length` range lies inside its buffer (for launches: each
///   buffer argument's `offset + len * elem.size_bytes()`), and every buffer was
///   allocated by this backend and not freed;
/// * a launch's arguments match its program's parameters (count, kinds, element types;
///   `writable` only for `&mut [T]` parameters), and a buffer bound writable is bound to
///   no other argument of that launch;
/// * no other work uses a range this call writes, or writes a range this call reads,
///   unless it is ordered with this call: enqueued earlier on the same stream, or joined
///   by a wait ([`Queue::wait_stream`]); the facade tracks this per buffer and Rust's
///   borrows make it race-free on the host;
/// * `stream` is the default stream, a stream opened with [`Backend::open_stream`] and
///   not closed, or a capture stream from [`Capture::open_capture_streams`] not given back;
/// * memory passed to [`Queue::write_async`] / [`Queue::read_async`] stays valid until a
///   fence recorded after the call has completed.
pub trait Queue: Backend {
    /// # Safety
    /// The caller's duties listed on [`Queue`].
    unsafe fn write(
        &self,
        stream: StreamId,
        dst: &Self::Buffer,
        offset: usize,
        data: &[u8],
    ) -> Result<()>;
    /// Copies into `out` and returns when the data is there.
    ///
    /// # Safety
    /// The caller's duties listed on [`Queue`].
    unsafe fn read(
        &self,
        stream: StreamId,
        src: &Self::Buffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<()>;
    /// # Safety
    /// The caller's duties listed on [`Queue`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn copy(
        &self,
        stream: StreamId,
        src: &Self::Buffer,
        src_offset: usize,
        dst: &Self::Buffer,
        dst_offset: usize,
        bytes: usize,
    ) -> Result<()>;
    /// Fills `bytes` bytes at `offset` with repetitions of `pattern` (`bytes` is a multiple
    /// of the pattern length; the pattern is 1, 2, 4 or 8 bytes).
    ///
    /// # Safety
    /// The caller's duties listed on [`Queue`].
    unsafe fn fill(
        &self,
        stream: StreamId,
        dst: &Self::Buffer,
        offset: usize,
        bytes: usize,
        pattern: &[u8],
    ) -> Result<()>;
    /// Runs a program to completion, or enqueues it such that later work on the stream
    /// observes it.
    ///
    /// # Safety
    /// The caller's duties listed on [`Queue`].
    unsafe fn launch(
        &self,
        stream: StreamId,
        request: &LaunchRequest<'_, Self::Buffer>,
    ) -> Result<()>;
    /// Enqueues several launches in order, as one submission where the backend can (one
    /// command encoder on wgpu). The default launches them one by one.
    ///
    /// # Safety
    /// The caller's duties listed on [`Queue`].
    unsafe fn launch_batch(
        &self,
        stream: StreamId,
        requests: &[LaunchRequest<'_, Self::Buffer>],
    ) -> Result<()> {
        // SAFETY: the caller's duties for the batch are those of each launch.
        requests
            .iter()
            .try_for_each(|r| unsafe { self.launch(stream, r) })
    }
    /// Waits for the work enqueued on `stream`.
    fn synchronize(&self, stream: StreamId) -> Result<()>;
    /// Waits for the work of every stream.
    fn synchronize_all(&self) -> Result<()>;

    /// Enqueues a host-to-device copy of `len` bytes from `src`. The default copies now.
    ///
    /// # Safety
    /// `src..src + len` is valid for reads and is not written until a [`Fence`] recorded
    /// on `stream` after this call has completed.
    unsafe fn write_async(
        &self,
        stream: StreamId,
        dst: &Self::Buffer,
        offset: usize,
        src: *const u8,
        len: usize,
    ) -> Result<()> {
        // SAFETY: the caller's contract covers a plain read of the range now, and the
        // same contract as `write`'s.
        unsafe { self.write(stream, dst, offset, std::slice::from_raw_parts(src, len)) }
    }
    /// Enqueues a device-to-host copy of `len` bytes into `dst`. The default copies now.
    ///
    /// # Safety
    /// `dst..dst + len` is valid for writes and is neither read nor written by anyone else
    /// until a [`Fence`] recorded on `stream` after this call has completed.
    unsafe fn read_async(
        &self,
        stream: StreamId,
        src: &Self::Buffer,
        offset: usize,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        // SAFETY: the caller's contract covers a plain write of the range now, and the
        // same contract as `read`'s.
        unsafe {
            self.read(
                stream,
                src,
                offset,
                std::slice::from_raw_parts_mut(dst, len),
            )
        }
    }

    /// A fence that completes when everything enqueued on `stream` so far has. The default
    /// waits now and returns a completed fence.
    fn record(&self, stream: StreamId) -> Result<Box<dyn Fence>> {
        self.synchronize(stream)?;
        Ok(Box::new(Completed))
    }
    /// Makes later work on `stream` wait for `fence` (a fence of this device). The default
    /// waits on the host now, which is correct for any backend.
    fn wait_fence(&self, _stream: StreamId, fence: &dyn Fence) -> Result<()> {
        fence.wait()
    }
    /// Makes later work on `waiter` wait for the work enqueued on `signaller` so far.
    fn wait_stream(&self, waiter: StreamId, signaller: StreamId) -> Result<()> {
        if waiter == signaller {
            return Ok(());
        }
        let fence = self.record(signaller)?;
        self.wait_fence(waiter, &*fence)
    }

    /// Driver graphs, if this backend has them (see [`Capture`]); the facade otherwise
    /// replays graphs node by node.
    fn capture(&self) -> Option<&dyn Capture<Self::Buffer>> {
        None
    }
}
