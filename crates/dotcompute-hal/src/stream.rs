//! Streams, the sets of streams a block of memory was used on, fences and timings.

use crate::error::Result;
use std::any::Any;
use std::time::Duration;

/// Streams per device at once (the default stream included). Stream ids index a 64-bit
/// set, which keeps the per-buffer bookkeeping one word.
pub const MAX_STREAMS: u32 = 64;

/// Private capture streams a device may have at once (ids `MAX_STREAMS..MAX_STREAMS +
/// CAPTURE_STREAMS`; see [`crate::Capture::open_capture_streams`]). Graphs hold them only
/// while they capture, so this bounds concurrent captures, not graphs.
pub const CAPTURE_STREAMS: u32 = 1024;

/// A stream of one device: an in-order sequence of transfers, fills and launches. Stream 0
/// is the device's default stream. The facade hands out ids below [`MAX_STREAMS`] and
/// tells the backend when one is opened and closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct StreamId(pub u32);

impl StreamId {
    pub const DEFAULT: StreamId = StreamId(0);
    pub fn index(self) -> usize {
        self.0 as usize
    }
    /// Whether this is a private capture stream, not a user's stream.
    pub fn is_capture(self) -> bool {
        self.0 >= MAX_STREAMS
    }
}

/// A set of streams of one device (one bit per stream id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct StreamSet(pub u64);

impl StreamSet {
    pub const EMPTY: StreamSet = StreamSet(0);
    /// The bit of a user stream; capture streams are never tracked (their work is
    /// captured, not run), so they have none.
    fn bit(s: StreamId) -> u64 {
        debug_assert!(!s.is_capture(), "capture stream {} in a StreamSet", s.0);
        1u64.checked_shl(s.0).unwrap_or(0)
    }
    pub fn one(s: StreamId) -> StreamSet {
        StreamSet(Self::bit(s))
    }
    pub fn contains(self, s: StreamId) -> bool {
        self.0 & Self::bit(s) != 0
    }
    pub fn insert(&mut self, s: StreamId) {
        self.0 |= Self::bit(s);
    }
    pub fn union(self, other: StreamSet) -> StreamSet {
        StreamSet(self.0 | other.0)
    }
    pub fn without(self, s: StreamId) -> StreamSet {
        StreamSet(self.0 & !Self::bit(s))
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    pub fn iter(self) -> impl Iterator<Item = StreamId> {
        (0..MAX_STREAMS)
            .filter(move |i| self.0 & (1 << i) != 0)
            .map(StreamId)
    }
}

/// The completion of the work a stream had enqueued when the fence was recorded.
pub trait Fence: Send + Sync + Any {
    /// Blocks until that work is done; an error of that work (a faulted kernel) is
    /// reported here.
    fn wait(&self) -> Result<()>;
    /// Whether that work is done, without blocking.
    fn is_complete(&self) -> Result<bool>;
    /// For backends that make another stream wait on their own fences.
    fn as_any(&self) -> &dyn Any;
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
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// How long one launch, copy, transfer or graph took, measured by the backend while
/// profiling is on.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// The kernel's name, `copy`, `fill`, `upload`, `download` or `graph`.
    pub label: String,
    pub duration: Duration,
    /// `true` when measured on the device (GPU events or timestamp queries), `false` for
    /// host wall time (the CPU backend).
    pub device_time: bool,
    /// The stream the work ran on.
    pub stream: StreamId,
    /// When it started, from the moment profiling was turned on (for timelines), where
    /// the backend can tell.
    pub start: Option<Duration>,
}
