//! Profiling: each launch, copy, transfer and graph bracketed by CUDA events on its own
//! stream; start times measured from an origin event recorded when profiling was turned
//! on, so several streams' work lines up on one timeline.

use crate::driver::{bind, Check};
use crate::{lock, CudaBackend};
use cudarc::driver::{result as cu, sys};
use dotcompute_hal::{Result, StreamId, Timing};
use std::time::Duration;

/// Whether `stream` is being captured into a graph (directly, or as a forked branch of
/// a capture): profiling events are not recorded there. Asked only while profiling.
fn is_capturing(stream: sys::CUstream) -> bool {
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: the stream is live; writes one status.
    let r = unsafe { sys::cuStreamIsCapturing(stream, &mut status) };
    r != sys::CUresult::CUDA_SUCCESS
        || status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
}

/// Events of one timed operation.
pub(crate) struct Pending {
    pub label: String,
    pub stream: StreamId,
    pub start: sys::CUevent,
    pub end: sys::CUevent,
}

/// A backend's profiling: whether kernels are timed (`set_profiling`), and the state of
/// the timings not yet collected.
#[derive(Default)]
pub(crate) struct Profiling {
    pub(crate) on: std::sync::atomic::AtomicBool,
    pub(crate) state: std::sync::Mutex<Profiler>,
}

/// The profiling state: the origin event while profiling is on.
#[derive(Default)]
pub(crate) struct Profiler {
    pub origin: Option<Event>,
    pub pending: Vec<Pending>,
}

/// An owned CUDA event handle.
pub(crate) struct Event(pub sys::CUevent);
// SAFETY: an event handle is usable from any thread with the context bound.
unsafe impl Send for Event {}

impl CudaBackend {
    /// Enqueues `op` between two timing events on `stream` when profiling is on (and the
    /// stream is not being captured into a graph).
    pub(crate) fn timed<T>(
        &self,
        s: StreamId,
        stream: sys::CUstream,
        label: &str,
        op: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        if !self.profiling_on() || is_capturing(stream) {
            return op();
        }
        let flags = sys::CUevent_flags::CU_EVENT_DEFAULT;
        let start = cu::event::create(flags).during("cuEventCreate")?;
        let end = cu::event::create(flags).during("cuEventCreate")?;
        // SAFETY: events and stream are live.
        unsafe { cu::event::record(start, stream) }.during("cuEventRecord")?;
        let out = op();
        // SAFETY: as above.
        unsafe { cu::event::record(end, stream) }.during("cuEventRecord")?;
        lock(&self.profiler.state).pending.push(Pending {
            label: label.to_string(),
            stream: s,
            start,
            end,
        });
        out
    }

    pub(crate) fn profiling_on(&self) -> bool {
        self.profiler.on.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn set_profiling_on(&self, on: bool) {
        if bind(&self.ctx).is_err() {
            return;
        }
        let mut p = lock(&self.profiler.state);
        if on && p.origin.is_none() {
            let origin = cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
                .ok()
                .map(Event);
            if let (Some(e), Ok(stream)) = (&origin, self.stream(StreamId::DEFAULT)) {
                // The origin precedes everything enqueued from now on, on every stream:
                // recorded on the default stream after waiting for the device, it
                // completes before any later work starts.
                // Not while another thread captures (`driver::CaptureGate`).
                // SAFETY: live handles.
                self.ctx.capture_gate.exclusive(|| unsafe {
                    let _ = sys::cuCtxSynchronize();
                    let _ = cu::event::record(e.0, stream);
                });
            }
            p.origin = origin;
        }
        self.profiler
            .on
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn collect_timings(&self) -> Vec<Timing> {
        let (pending, origin) = {
            let mut p = lock(&self.profiler.state);
            (
                std::mem::take(&mut p.pending),
                p.origin.as_ref().map(|e| e.0),
            )
        };
        if pending.is_empty() || bind(&self.ctx).is_err() {
            return Vec::new();
        }
        // SAFETY: waits for every stream, so every event has completed; not while another
        // thread captures (`driver::CaptureGate`).
        let synced = self
            .ctx
            .capture_gate
            .exclusive(|| unsafe { sys::cuCtxSynchronize() });
        if synced != sys::CUresult::CUDA_SUCCESS {
            return Vec::new();
        }
        pending
            .into_iter()
            .filter_map(|p| {
                // SAFETY: both events were recorded and have completed.
                let ms = unsafe { cu::event::elapsed(p.start, p.end) };
                // SAFETY: the origin event is live (destroyed only with the backend); an
                // unrecorded or incomplete one is an error, not undefined behaviour.
                let from_origin =
                    origin.and_then(|o| unsafe { cu::event::elapsed(o, p.start) }.ok());
                // SAFETY: neither event is used again.
                unsafe {
                    let _ = cu::event::destroy(p.start);
                    let _ = cu::event::destroy(p.end);
                }
                Some(Timing {
                    label: p.label,
                    duration: Duration::from_secs_f64(ms.ok()? as f64 / 1e3),
                    device_time: true,
                    stream: p.stream,
                    start: from_origin.map(|ms| Duration::from_secs_f64(ms.max(0.0) as f64 / 1e3)),
                })
            })
            .collect()
    }
}
