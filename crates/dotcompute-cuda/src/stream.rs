//! Streams and the work enqueued on them: the [`Queue`] half of the backend.
//!
//! Stream ids index a table of non-blocking CUDA streams (id 0 is created with the
//! backend; the others on first use of their id). Closing a stream keeps its CUDA stream
//! in the slot for the next stream with that id (`Backend::close_stream` is the default
//! no-op): acquiring a stream is then a table lookup, closing one does not wait, and
//! buffers whose users name the id still wait on the right handle. Streams are destroyed
//! with the backend. Waits between streams are CUDA events: `wait_stream` (the trait's
//! default) records one on the signalling stream and `wait_fence` makes the waiting
//! stream wait on it (`cuStreamWaitEvent`), so no host thread blocks.

use crate::driver::{bind, driver_error, Check, BACKEND};
use crate::memory::{is_page_locked, CudaBuffer};
use crate::CudaBackend;
use cudarc::driver::{result as cu, sys};
use dotcompute_hal::{
    Capture, Error, Fence, GraphExec, LaunchRequest, Queue, Result, StreamId, CAPTURE_STREAMS,
    MAX_STREAMS,
};
use std::any::Any;
use std::sync::atomic::{AtomicPtr, Ordering};

/// The backend's CUDA streams by id; null where none was created yet. Lock-free: every
/// launch looks its stream up, and a user slot changes only from null to a stream.
///
/// Ids below [`MAX_STREAMS`] are user streams; the [`CAPTURE_STREAMS`] ids above are
/// private capture streams, handed to one graph capture at a time (`free_captures`), so
/// no user stream id (a closed one reused, a stale id in a freed block's users) can ever
/// name a stream while it captures. Sharing ids was issue 27's crash: another thread's
/// wait or read on a reused id joined a capture, and the captured graph later wrote into
/// freed host memory.
pub(crate) struct Streams {
    slots: Box<[AtomicPtr<sys::CUstream_st>]>,
    free_captures: std::sync::Mutex<Vec<StreamId>>,
}

impl Streams {
    pub(crate) fn new(default: sys::CUstream) -> Streams {
        let slots: Vec<_> = (0..MAX_STREAMS + CAPTURE_STREAMS)
            .map(|i| {
                AtomicPtr::new(if i == 0 {
                    default
                } else {
                    std::ptr::null_mut()
                })
            })
            .collect();
        Streams {
            slots: slots.into_boxed_slice(),
            // Popped from the end: the lowest ids first.
            free_captures: std::sync::Mutex::new(
                (MAX_STREAMS..MAX_STREAMS + CAPTURE_STREAMS)
                    .rev()
                    .map(StreamId)
                    .collect(),
            ),
        }
    }
    fn get(&self, s: StreamId) -> Option<sys::CUstream> {
        let h = self.slots.get(s.index())?.load(Ordering::Acquire);
        (!h.is_null()).then_some(h)
    }
    /// Every stream created, capture streams included (for destroying them).
    pub(crate) fn all(&self) -> Vec<sys::CUstream> {
        self.slots
            .iter()
            .map(|h| h.load(Ordering::Acquire))
            .filter(|h| !h.is_null())
            .collect()
    }

    /// The user streams created: the ones that hold work. Capture streams are left out:
    /// they never hold work (a captured graph runs on a user stream), and querying or
    /// synchronising one while another thread captures on it invalidates that capture.
    pub(crate) fn user(&self) -> Vec<sys::CUstream> {
        self.slots[..MAX_STREAMS as usize]
            .iter()
            .map(|h| h.load(Ordering::Acquire))
            .filter(|h| !h.is_null())
            .collect()
    }
}

fn create_event() -> Result<sys::CUevent> {
    cu::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING).during("cuEventCreate")
}

impl CudaBackend {
    /// The CUDA stream behind `s`.
    pub(crate) fn stream(&self, s: StreamId) -> Result<sys::CUstream> {
        // The facade hands backends only the streams it opened on them.
        self.streams
            .get(s)
            .ok_or_else(|| Error::internal(BACKEND, format!("stream {} is not open", s.0)))
    }

    pub(crate) fn open_stream_slot(&self, s: StreamId) -> Result<()> {
        bind(&self.ctx)?;
        let slot = self
            .streams
            .slots
            .get(s.index())
            .ok_or_else(|| Error::TooLarge {
                what: format!(
                    "stream id ({MAX_STREAMS} user and {CAPTURE_STREAMS} capture streams a device)"
                ),
                limit: self.streams.slots.len() as u64 - 1,
                found: s.0 as u64,
            })?;
        if slot.load(Ordering::Acquire).is_null() {
            let created =
                cu::stream::create(cu::stream::StreamKind::NonBlocking).during("cuStreamCreate")?;
            // The facade opens an id from one thread at a time; should two race anyway,
            // the loser's stream is destroyed.
            if slot
                .compare_exchange(
                    std::ptr::null_mut(),
                    created,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_err()
            {
                // SAFETY: the stream was just created and never used.
                let _ = unsafe { cu::stream::destroy(created) };
            }
        }
        Ok(())
    }
}

impl CudaBackend {
    /// Waits until `stream` has run everything enqueued on it, at most the backend's
    /// wait timeout (`DOTCOMPUTE_CUDA_TIMEOUT_S`); past it the device is lost
    /// ([`crate::driver::wait_bounded`]).
    pub(crate) fn wait_stream_idle(&self, stream: sys::CUstream, op: &str) -> Result<()> {
        let (limit, set_by) = self.wait_timeout.get()?;
        self.wait_stream_idle_within(stream, op, limit, set_by)
    }

    /// [`Self::wait_stream_idle`] with a limit of the caller's (a launch's own).
    pub(crate) fn wait_stream_idle_within(
        &self,
        stream: sys::CUstream,
        op: &str,
        limit: std::time::Duration,
        set_by: &str,
    ) -> Result<()> {
        crate::driver::wait_bounded(&self.ctx, op, limit, set_by, || {
            // SAFETY: the stream is live.
            unsafe { sys::cuStreamQuery(stream) }
        })
    }

    /// `count` private capture streams (see [`Streams`]), created on first use.
    pub(crate) fn open_capture_streams_on(&self, count: usize) -> Result<Vec<StreamId>> {
        let ids = {
            let mut free = crate::lock(&self.streams.free_captures);
            if free.len() < count {
                return Err(Error::Exhausted {
                    resource: "capture streams",
                    detail: format!(
                        "{} graph captures are running on this device at once; \
                         {CAPTURE_STREAMS} capture streams are in use",
                        CAPTURE_STREAMS as usize - free.len()
                    ),
                });
            }
            let at = free.len() - count;
            free.split_off(at)
        };
        for &id in &ids {
            if let Err(e) = self.open_stream_slot(id) {
                self.close_capture_streams_on(&ids);
                return Err(e);
            }
        }
        Ok(ids)
    }

    /// Gives capture streams back. One that is somehow still capturing (a capture whose
    /// branches were never joined) is destroyed and its slot emptied, so the next capture
    /// gets a fresh stream.
    pub(crate) fn close_capture_streams_on(&self, ids: &[StreamId]) {
        let bound = bind(&self.ctx).is_ok();
        for &id in ids {
            let Some(slot) = self.streams.slots.get(id.index()) else {
                continue;
            };
            let h = slot.load(Ordering::Acquire);
            if bound && !h.is_null() {
                let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
                // SAFETY: the stream is live; the call only reads its capture status.
                let r = unsafe { sys::cuStreamIsCapturing(h, &mut status) };
                if r != sys::CUresult::CUDA_SUCCESS
                    || status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
                {
                    slot.store(std::ptr::null_mut(), Ordering::Release);
                    // SAFETY: no one else holds this id; captured work never runs.
                    let _ = unsafe { cu::stream::destroy(h) };
                }
            }
        }
        crate::lock(&self.streams.free_captures).extend_from_slice(ids);
    }
}

/// A CUDA event recorded on one of the backend's streams.
pub(crate) struct CudaFence {
    event: sys::CUevent,
    ctx: std::sync::Arc<crate::driver::Context>,
    timeout: std::sync::Arc<dotcompute_hal::settings::TimeLimit>,
}

// SAFETY: events are driver handles usable from any thread with the context bound.
unsafe impl Send for CudaFence {}
// SAFETY: shared use is sound for the reason above (Send).
unsafe impl Sync for CudaFence {}

impl Fence for CudaFence {
    fn wait(&self) -> Result<()> {
        bind(&self.ctx)?;
        let (limit, set_by) = self.timeout.get()?;
        crate::driver::wait_bounded(
            &self.ctx,
            "waiting for an event (an earlier kernel may have failed)",
            limit,
            set_by,
            // SAFETY: the event is live.
            || unsafe { sys::cuEventQuery(self.event) },
        )
    }
    fn is_complete(&self) -> Result<bool> {
        bind(&self.ctx)?;
        // SAFETY: the event is live.
        match unsafe { cu::event::query(self.event) } {
            Ok(()) => Ok(true),
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            Err(e) => Err(driver_error("cuEventQuery", e)),
        }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for CudaFence {
    fn drop(&mut self) {
        if bind(&self.ctx).is_ok() {
            // SAFETY: destroyed once; the driver releases it after it completes.
            let _ = unsafe { cu::event::destroy(self.event) };
        }
    }
}

impl Queue for CudaBackend {
    unsafe fn write(
        &self,
        s: StreamId,
        dst: &CudaBuffer,
        offset: usize,
        data: &[u8],
    ) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        bind(&self.ctx)?;
        let stream = self.stream(s)?;
        // SAFETY: the range is inside the buffer (facade contract). From pageable memory
        // the driver has consumed `data` when the call returns; from page-locked memory
        // it has not, so then we wait for the copy before `data` goes back to the caller.
        unsafe {
            sys::cuMemcpyHtoDAsync_v2(
                dst.ptr + offset as u64,
                data.as_ptr().cast(),
                data.len(),
                stream,
            )
            .during("cuMemcpyHtoDAsync")?;
            if is_page_locked(data.as_ptr()) {
                self.wait_stream_idle(stream, "writing a buffer from page-locked memory")?;
            }
        }
        Ok(())
    }

    unsafe fn read(
        &self,
        s: StreamId,
        src: &CudaBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<()> {
        if out.is_empty() {
            return Ok(());
        }
        bind(&self.ctx)?;
        let stream = self.stream(s)?;
        let op = "reading a buffer (an earlier kernel may have failed)";
        // A copy into pageable memory returns only when it is done, so it would block
        // behind a kernel that never ends: wait (bounded) for the stream first.
        self.wait_stream_idle(stream, op)?;
        // SAFETY: range inside the buffer; we wait for the copy before returning.
        unsafe {
            sys::cuMemcpyDtoHAsync_v2(
                out.as_mut_ptr().cast(),
                src.ptr + offset as u64,
                out.len(),
                stream,
            )
            .during("cuMemcpyDtoHAsync")?;
        }
        self.wait_stream_idle(stream, op)
    }

    unsafe fn copy(
        &self,
        s: StreamId,
        src: &CudaBuffer,
        src_offset: usize,
        dst: &CudaBuffer,
        dst_offset: usize,
        bytes: usize,
    ) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        bind(&self.ctx)?;
        let stream = self.stream(s)?;
        self.timed(s, stream, "copy", || {
            // SAFETY: both ranges are inside their buffers (facade contract).
            unsafe {
                cu::memcpy_dtod_async(
                    dst.ptr + dst_offset as u64,
                    src.ptr + src_offset as u64,
                    bytes,
                    stream,
                )
            }
            .during("cuMemcpyDtoDAsync")
        })
    }

    unsafe fn fill(
        &self,
        s: StreamId,
        dst: &CudaBuffer,
        offset: usize,
        bytes: usize,
        pattern: &[u8],
    ) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        bind(&self.ctx)?;
        let stream = self.stream(s)?;
        let ptr = dst.ptr + offset as u64;
        self.timed(s, stream, "fill", || {
            // SAFETY: the range is inside the buffer and aligned to the pattern's size
            // (the facade fills whole elements).
            unsafe {
                match *pattern {
                    [b] => sys::cuMemsetD8Async(ptr, b, bytes, stream).during("cuMemsetD8Async"),
                    [a, b] => {
                        sys::cuMemsetD16Async(ptr, u16::from_le_bytes([a, b]), bytes / 2, stream)
                            .during("cuMemsetD16Async")
                    }
                    [a, b, c, d] => sys::cuMemsetD32Async(
                        ptr,
                        u32::from_le_bytes([a, b, c, d]),
                        bytes / 4,
                        stream,
                    )
                    .during("cuMemsetD32Async"),
                    // 8 and 16 bytes (64-bit scalars, Vec2 and Vec4 elements): one strided
                    // 32-bit fill per word of the pattern.
                    _ if matches!(pattern.len(), 8 | 16) => {
                        let width = pattern.len();
                        let n = bytes / width;
                        for (w, word) in pattern.chunks_exact(4).enumerate() {
                            let value = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
                            sys::cuMemsetD2D32Async(ptr + 4 * w as u64, width, value, 1, n, stream)
                                .during("cuMemsetD2D32Async")?;
                        }
                        Ok(())
                    }
                    // The facade checks patterns before they reach a backend.
                    _ => Err(Error::internal(
                        "the CUDA fill",
                        format!(
                            "fill patterns are 1, 2, 4, 8 or 16 bytes, not {}",
                            pattern.len()
                        ),
                    )),
                }
            }
        })
    }

    unsafe fn launch(&self, s: StreamId, request: &LaunchRequest<'_, CudaBuffer>) -> Result<()> {
        self.launch_on(s, request)
    }

    fn synchronize(&self, s: StreamId) -> Result<()> {
        bind(&self.ctx)?;
        let stream = self.stream(s)?;
        self.wait_stream_idle(stream, "synchronising a stream")
    }

    fn synchronize_all(&self) -> Result<()> {
        bind(&self.ctx)?;
        // Every user stream, each at most the timeout (cuCtxSynchronize cannot be
        // bounded, and it would invalidate captures running on other threads). Capture
        // streams never hold work, and a query of one that is capturing invalidates the
        // capture (`Streams::user`).
        for stream in self.streams.user() {
            self.wait_stream_idle(stream, "synchronising the device")?;
        }
        Ok(())
    }

    unsafe fn write_async(
        &self,
        s: StreamId,
        dst: &CudaBuffer,
        offset: usize,
        src: *const u8,
        len: usize,
    ) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        bind(&self.ctx)?;
        let stream = self.stream(s)?;
        self.timed(s, stream, "upload", || {
            // SAFETY: the range is inside the buffer (facade contract); the caller keeps
            // `src` alive and unchanged until a later fence completes. From pageable
            // memory the driver has staged the data when the call returns.
            unsafe { sys::cuMemcpyHtoDAsync_v2(dst.ptr + offset as u64, src.cast(), len, stream) }
                .during("cuMemcpyHtoDAsync")
        })
    }

    unsafe fn read_async(
        &self,
        s: StreamId,
        src: &CudaBuffer,
        offset: usize,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        bind(&self.ctx)?;
        let stream = self.stream(s)?;
        self.timed(s, stream, "download", || {
            // SAFETY: the range is inside the buffer; the caller leaves `dst` alone until a
            // later fence completes. Into pageable memory the call returns when done.
            unsafe { sys::cuMemcpyDtoHAsync_v2(dst.cast(), src.ptr + offset as u64, len, stream) }
                .during("cuMemcpyDtoHAsync")
        })
    }

    fn record(&self, s: StreamId) -> Result<Box<dyn Fence>> {
        bind(&self.ctx)?;
        let stream = self.stream(s)?;
        let fence = CudaFence {
            event: create_event()?,
            ctx: self.ctx.clone(),
            timeout: self.wait_timeout.clone(),
        };
        // SAFETY: both handles are live.
        unsafe { cu::event::record(fence.event, stream) }.during("cuEventRecord")?;
        Ok(Box::new(fence))
    }

    fn wait_fence(&self, s: StreamId, fence: &dyn Fence) -> Result<()> {
        let Some(cuda) = fence.as_any().downcast_ref::<CudaFence>() else {
            return fence.wait(); // a completed fence, or another kind: wait on the host
        };
        bind(&self.ctx)?;
        let stream = self.stream(s)?;
        // SAFETY: both handles are live; the event may be destroyed after the call.
        unsafe { sys::cuStreamWaitEvent(stream, cuda.event, 0) }.during("cuStreamWaitEvent")
    }

    fn capture(&self) -> Option<&dyn Capture<CudaBuffer>> {
        Some(self)
    }
}

/// CUDA graphs (`graph.rs`).
impl Capture<CudaBuffer> for CudaBackend {
    fn open_capture_streams(&self, count: usize) -> Result<Vec<StreamId>> {
        self.open_capture_streams_on(count)
    }

    fn close_capture_streams(&self, ids: &[StreamId]) {
        self.close_capture_streams_on(ids)
    }

    fn begin_capture(&self, s: StreamId) -> Result<()> {
        self.begin_capture_on(s)
    }

    fn end_capture(
        &self,
        s: StreamId,
        update: Option<&dyn GraphExec>,
    ) -> Result<Option<Box<dyn GraphExec>>> {
        self.end_capture_on(s, update)
    }

    unsafe fn update_graph_launch(
        &self,
        graph: &dyn GraphExec,
        launch: usize,
        request: &LaunchRequest<'_, CudaBuffer>,
    ) -> Result<bool> {
        self.update_graph_launch_on(graph, launch, request)
    }

    fn launch_graph(&self, s: StreamId, graph: &dyn GraphExec) -> Result<()> {
        self.launch_graph_on(s, graph)
    }
}
