//! Which streams a buffer was used on, so that uses on different streams are ordered.
//!
//! Rule (documented in the crate docs): **a buffer used on two streams is ordered
//! automatically.** Each buffer remembers the stream of its last write and the streams
//! that read it since. Before a use on stream `s`, the facade makes `s` wait (a device
//! event, not a host wait) for the last writer if that is another stream, and, for a
//! write, for every other stream that read it since. Uses on one stream need nothing.
//! This is cudarc's per-slice read/write tracking at stream granularity: a wait covers
//! everything the other stream had enqueued, which is correct and at worst waits longer
//! than needed. Rust's borrows make it race-free: a write needs `&mut`, so no other use
//! of the buffer is being enqueued at the same time.
//!
//! When a buffer is dropped its block returns to the pool with the streams that may still
//! use it; the next owner starts with those as readers, so its first write on another
//! stream waits for them.

use dotcompute_hal::{DynBackend, Result, StreamId, StreamSet};
use std::sync::Mutex;

#[derive(Clone, Copy, Debug)]
struct State {
    writers: StreamSet,
    readers: StreamSet,
    /// Lent to a [`Graph::record`](crate::Graph::record) body (or made by one) while it
    /// runs: every use outside the recording is refused, so that nothing the body does
    /// to it happens at record time instead of at each replay.
    recording: bool,
}

/// The use-tracking state of one buffer.
#[derive(Debug)]
pub struct Uses(Mutex<State>);

impl Uses {
    /// A buffer whose memory may still be used by `previous` (from the pool).
    pub(crate) fn new(previous: StreamSet) -> Uses {
        Uses(Mutex::new(State {
            writers: StreamSet::EMPTY,
            readers: previous,
            recording: false,
        }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Orders a use on `s` after the uses it conflicts with, and records it. (A stream
    /// that was closed is still waited for: backends keep a closed stream's queue for the
    /// next stream with its id, so the wait covers the old work.)
    pub(crate) fn before_use(
        &self,
        backend: &dyn DynBackend,
        s: StreamId,
        write: bool,
    ) -> Result<()> {
        let mut st = self.lock();
        if st.recording {
            return Err(dotcompute_hal::Error::Graph {
                detail: "the buffer is being recorded into a graph (Graph::record): it can be \
                         used only through the recorder until the recording ends; reading it \
                         to the host or writing it from the host cannot be recorded"
                    .into(),
            });
        }
        let mut wait = st.writers.without(s);
        if write {
            wait = wait.union(st.readers.without(s));
        }
        for other in wait.iter() {
            backend.wait_stream(s, other)?;
        }
        if write {
            st.writers = StreamSet::one(s);
            st.readers = StreamSet::EMPTY;
        } else {
            st.readers.insert(s);
        }
        Ok(())
    }

    /// Marks the buffer lent to a graph recording, or no longer.
    pub(crate) fn set_recording(&self, recording: bool) {
        self.lock().recording = recording;
    }

    /// Every stream that may still use the buffer.
    pub(crate) fn users(&self) -> StreamSet {
        let st = self.lock();
        st.writers.union(st.readers)
    }
}
