//! Streams: in-order queues of work on one device, and the events that join them.

use crate::buffer::{Arg, Buffer, BufferView, Element};
use crate::device::Device;
use crate::host::Event;
use dotcompute_hal::{Error, KernelDef, Launch, Result, StreamId};

/// Anything work can be enqueued on: a [`Device`] (its default stream) or a [`Stream`].
/// `#[kernel]` launch functions take `&impl AsStream`, so the same call launches on
/// either.
pub trait AsStream {
    fn device(&self) -> &Device;
    fn stream_id(&self) -> StreamId;

    /// Launches `kernel` with untyped arguments (see [`Device::launch_kernel`]).
    fn launch_kernel(&self, kernel: &KernelDef, launch: Launch, args: &[Arg<'_>]) -> Result<()> {
        self.device()
            .launch_kernel_on(self.stream_id(), kernel, launch, args)
    }

    /// Sets every element of `dst` to `value`, in this queue's order (for code generic
    /// over devices and streams, such as library operations).
    fn fill_buffer<T: Element>(&self, dst: &mut Buffer<T>, value: T) -> Result<()>
    where
        Self: Sized,
    {
        check_owner(self.device(), dst.device(), "fill")?;
        dst.view_mut().fill_on(self.stream_id(), value)
    }

    /// Copies `src` into `dst` (same length), in this queue's order.
    fn copy_buffer<T: Element>(&self, src: &Buffer<T>, dst: &mut Buffer<T>) -> Result<()>
    where
        Self: Sized,
    {
        check_owner(self.device(), src.device(), "copy")?;
        check_owner(self.device(), dst.device(), "copy")?;
        dst.view_mut().copy_from_on(self.stream_id(), &src.view())
    }

    /// A buffer of `len` elements for work on this queue (a library's temporary): the
    /// device's [`Device::alloc`], except on a graph [`Recorder`](crate::Recorder), whose
    /// buffers the graph keeps for its replays once the caller drops them. Code that
    /// should record into graphs makes its temporaries here.
    fn scratch<T: Element>(&self, len: usize) -> Result<Buffer<T>>
    where
        Self: Sized,
    {
        self.device().alloc(len)
    }

    /// A buffer holding a copy of `data` for work on this queue (see
    /// [`AsStream::scratch`]). On a recorder it is a constant of the graph: written once
    /// now, and read-only for the recorded work.
    fn scratch_from<T: Element>(&self, data: &[T]) -> Result<Buffer<T>>
    where
        Self: Sized,
    {
        self.device().upload(data)
    }

    /// Whether work given to this queue is recorded into a graph ([`crate::Graph::record`])
    /// rather than run: code with a host path (reading a count back, working on the CPU
    /// device's memory in place) takes its device path instead, and a tuner uses what it
    /// already knows instead of measuring.
    fn recording(&self) -> bool {
        false
    }

    /// Reads `src` to the host after this queue's earlier work.
    fn read_buffer<T: Element>(&self, src: &Buffer<T>) -> Result<Vec<T>>
    where
        Self: Sized,
    {
        self.read_view(&src.view())
    }

    /// Reads the elements of a view to the host after this queue's earlier work (a
    /// library reading a count or a total from a larger buffer reads only those).
    fn read_view<T: Element>(&self, src: &BufferView<'_, T>) -> Result<Vec<T>>
    where
        Self: Sized,
    {
        check_owner(self.device(), src.buffer().device(), "read")?;
        src.read_vec_on(self.stream_id())
    }
}

/// `ForeignObject` unless the buffer belongs to the queue's device.
fn check_owner(queue: &Device, owner: &Device, op: &'static str) -> Result<()> {
    if owner.same(queue) {
        return Ok(());
    }
    let (device, owner) = queue.labels_against(owner);
    Err(Error::ForeignObject {
        op,
        what: "the buffer".into(),
        owner,
        device,
    })
}

/// An in-order queue of transfers, fills and launches on one device, which runs
/// concurrently with the device's other streams where the backend can (CUDA; see
/// [`crate::Capabilities::concurrent_streams`]).
///
/// * Work on one stream runs in the order it was enqueued.
/// * A buffer used on two streams is ordered automatically: before a use on this stream,
///   the stream waits (on the device, not the host) for the buffer's last write on another
///   stream, and a write waits for the other streams' reads since. So producer / consumer
///   code is correct without events; [`Stream::record_event`] and [`Stream::wait_event`]
///   order work that shares no buffer, or let the host wait.
/// * A buffer dropped while a stream still uses it keeps its memory away from work that
///   could overtake that use: the next owner's first use on another stream waits for it.
/// * Dropping a stream does not wait: its work still runs, and buffers it used stay
///   ordered after that work. Opening a stream is cheap (backends keep closed streams'
///   queues for reuse).
///
/// ```
/// use dotcompute::prelude::*;
/// #[kernel]
/// fn twice(x: &mut [f32]) {
///     let i = global_id().x;
///     if i < x.len() { x[i] = x[i] * 2.0; }
/// }
/// let device = Device::cpu();
/// let (s1, s2) = (device.stream()?, device.stream()?);
/// let mut x = device.upload(&[1.0f32, 2.0, 3.0])?;
/// twice::launch(&s1, Launch::threads(3), &mut x)?; // producer on s1
/// twice::launch(&s2, Launch::threads(3), &mut x)?; // ordered after it on s2
/// assert_eq!(s2.read(&x)?, vec![4.0, 8.0, 12.0]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub struct Stream {
    device: Device,
    id: StreamId,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stream {} of {}", self.id.0, self.device.label())
    }
}

impl Stream {
    pub(crate) fn new(device: Device, id: StreamId) -> Stream {
        Stream { device, id }
    }

    pub fn device(&self) -> &Device {
        &self.device
    }
    /// The stream's number on its device (the default stream is 0).
    pub fn id(&self) -> StreamId {
        self.id
    }

    /// Launches `kernel` on this stream (see [`Device::launch_kernel`]).
    pub fn launch_kernel(
        &self,
        kernel: &KernelDef,
        launch: Launch,
        args: &[Arg<'_>],
    ) -> Result<()> {
        self.device.launch_kernel_on(self.id, kernel, launch, args)
    }

    /// Launches a hand-written kernel on this stream (see [`Device::launch_raw`]).
    pub fn launch_raw(
        &self,
        kernel: &crate::RawKernel,
        launch: Launch,
        args: &[Arg<'_>],
    ) -> Result<()> {
        self.device.launch_raw_on(self.id, kernel, launch, args)
    }

    /// Overwrites `dst` with `data` (same length).
    pub fn write<T: Element>(&self, dst: &mut Buffer<T>, data: &[T]) -> Result<()> {
        self.check(dst.device(), "write")?;
        dst.view_mut().write_on(self.id, data)
    }
    /// Copies `src` into a new host vector; returns when the data is there.
    pub fn read<T: Element>(&self, src: &Buffer<T>) -> Result<Vec<T>> {
        self.read_buffer(src)
    }
    /// Copies `src` into `out` (same length).
    pub fn read_into<T: Element>(&self, src: &Buffer<T>, out: &mut [T]) -> Result<()> {
        self.check(src.device(), "read_into")?;
        src.view().read_into_on(self.id, out)
    }
    /// Sets every element of `dst` to `value`.
    pub fn fill<T: Element>(&self, dst: &mut Buffer<T>, value: T) -> Result<()> {
        self.fill_buffer(dst, value)
    }
    /// Copies `src` into `dst` (same length, both of this stream's device).
    pub fn copy<T: Element>(&self, src: &Buffer<T>, dst: &mut Buffer<T>) -> Result<()> {
        self.copy_buffer(src, dst)
    }

    /// An event that completes when everything enqueued on this stream so far has.
    pub fn record_event(&self) -> Result<Event> {
        Event::record(&self.device, self.id)
    }
    /// Makes work enqueued on this stream from now on wait for `event` (an event of this
    /// device), without blocking the host where the backend can (CUDA).
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        if !event.device().same(&self.device) {
            return Err(Error::ForeignObject {
                op: "Stream::wait_event",
                what: "the event".into(),
                owner: self.device.labels_against(event.device()).1,
                device: self.device.labels_against(event.device()).0,
            });
        }
        self.device.backend().wait_fence(self.id, event.fence())
    }
    /// Waits for the work enqueued on this stream.
    pub fn synchronize(&self) -> Result<()> {
        self.device.backend().synchronize(self.id)
    }

    fn check(&self, owner: &Device, op: &'static str) -> Result<()> {
        check_owner(&self.device, owner, op)
    }
}

impl AsStream for Stream {
    fn device(&self) -> &Device {
        &self.device
    }
    fn stream_id(&self) -> StreamId {
        self.id
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.device.close_stream(self.id);
    }
}
