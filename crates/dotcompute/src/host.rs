//! Host-side staging buffers for asynchronous transfers, and events to wait on.
//!
//! On CUDA a [`HostBuffer`] is page-locked (`cuMemHostAlloc`), so
//! [`Buffer::upload_async`] and [`Buffer::download_async`] are DMA transfers enqueued on
//! the device's stream: they return at once and overlap with host work. Other backends
//! use ordinary memory and copy before returning; the API and its results are the same.
//!
//! Soundness does not rest on the caller: a host buffer remembers the event of its last
//! transfer and waits for it before it hands out its contents, before it is written by
//! another transfer, and before it is freed.

use crate::buffer::{same_len, Buffer, Element};
use crate::device::Device;
use dotcompute_hal::{Error, Fence, HostMemory, Result, StreamId};
use std::marker::PhantomData;
use std::sync::{Mutex, PoisonError};

/// The completion of the work a stream had enqueued when the event was recorded
/// ([`Device::record_event`] for the default stream, [`crate::Stream::record_event`]).
/// Work on one stream runs in order, so once an event is complete everything enqueued
/// on its stream before it is too. [`crate::Stream::wait_event`] makes another stream of
/// the same device wait for it.
pub struct Event {
    // Declared first: dropped before the device that owns the driver's event.
    fence: Box<dyn Fence>,
    device: Device,
    stream: StreamId,
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Event on stream {} of {}",
            self.stream.0,
            self.device.label()
        )
    }
}

impl Event {
    pub(crate) fn record(device: &Device, stream: StreamId) -> Result<Event> {
        Ok(Event {
            fence: device.backend().record(stream)?,
            device: device.clone(),
            stream,
        })
    }
    pub(crate) fn fence(&self) -> &dyn Fence {
        &*self.fence
    }
    /// The stream it was recorded on.
    pub fn stream_id(&self) -> StreamId {
        self.stream
    }
    /// Blocks until the work before the event is done. A failure of that work (a kernel
    /// that faulted) is reported here.
    pub fn wait(&self) -> Result<()> {
        self.fence.wait()
    }
    /// Whether the work before the event is done, without blocking.
    pub fn is_complete(&self) -> Result<bool> {
        self.fence.is_complete()
    }
    pub fn device(&self) -> &Device {
        &self.device
    }
}

enum Storage<T> {
    /// Backend memory (page-locked), zeroed at allocation.
    Pinned(Box<dyn HostMemory>),
    Plain(Vec<T>),
}

/// A host array for asynchronous transfers to and from buffers of one device
/// ([`Device::alloc_host`]).
///
/// Its contents are reached through [`as_slice`](HostBuffer::as_slice) and
/// [`as_mut_slice`](HostBuffer::as_mut_slice), which first wait for a transfer still in
/// flight (and report its failure).
///
/// ```
/// use dotcompute::Device;
/// let device = Device::cpu();
/// let mut staging = device.alloc_host::<f32>(1000)?;
/// staging.as_mut_slice()?.fill(1.5);
/// let mut buffer = device.alloc::<f32>(1000)?;
/// buffer.upload_async(&staging)?; // returns at once on CUDA
/// buffer.download_async(&mut staging)?;
/// assert!(staging.as_slice()?.iter().all(|&x| x == 1.5));
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub struct HostBuffer<T: Element> {
    /// The event of the last transfer that may still use the memory.
    pending: Mutex<Option<Event>>,
    storage: Storage<T>,
    len: usize,
    device: Device,
    _t: PhantomData<T>,
}

impl<T: Element> std::fmt::Debug for HostBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "HostBuffer<{}>[{}] for {}{}",
            T::TYPE,
            self.len,
            self.device.label(),
            if self.is_page_locked() {
                " (page-locked)"
            } else {
                ""
            }
        )
    }
}

impl<T: Element> HostBuffer<T> {
    pub(crate) fn new(device: &Device, len: usize) -> Result<HostBuffer<T>> {
        let bytes = crate::buffer::byte_len::<T>(device, len)?;
        let storage = match device.backend().alloc_host(bytes)? {
            Some(memory) => {
                // SAFETY: the allocation holds `bytes` writable bytes; zero is a valid
                // value of every element type (Pod).
                unsafe { std::ptr::write_bytes(memory.as_ptr(), 0, bytes) };
                Storage::Pinned(memory)
            }
            None => {
                // A failed allocation is an error, not an abort (`vec!` aborts).
                let mut plain = Vec::new();
                plain
                    .try_reserve_exact(len)
                    .map_err(|e| Error::OutOfMemory {
                        device: device.label(),
                        requested: bytes as u64,
                        detail: format!("host memory for {len} elements of {}: {e}", T::TYPE),
                    })?;
                plain.resize(len, T::zeroed());
                Storage::Plain(plain)
            }
        };
        Ok(HostBuffer {
            pending: Mutex::new(None),
            storage,
            len,
            device: device.clone(),
            _t: PhantomData,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Whether the memory is page-locked (transfers are then truly asynchronous).
    pub fn is_page_locked(&self) -> bool {
        matches!(self.storage, Storage::Pinned(_))
    }
    /// The device whose buffers this host buffer transfers to and from.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Waits for the transfer in flight, if any, and reports its failure.
    pub fn wait(&self) -> Result<()> {
        let event = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match event {
            Some(e) => e.wait(),
            None => Ok(()),
        }
    }

    /// Whether no transfer is in flight.
    pub fn is_ready(&self) -> Result<bool> {
        let pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        match &*pending {
            Some(e) => e.is_complete(),
            None => Ok(true),
        }
    }

    /// The contents, after the transfer in flight has finished.
    pub fn as_slice(&self) -> Result<&[T]> {
        self.wait()?;
        Ok(match &self.storage {
            // SAFETY: `len` initialised elements (zeroed at allocation), no transfer in
            // flight, and a download needs `&mut self`, so nothing writes while the slice
            // lives.
            Storage::Pinned(m) => unsafe {
                std::slice::from_raw_parts(m.as_ptr().cast(), self.len)
            },
            Storage::Plain(v) => v,
        })
    }

    /// The contents for writing, after the transfer in flight has finished.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.wait()?;
        Ok(match &mut self.storage {
            // SAFETY: as in `as_slice`, and `&mut self` excludes every other use.
            Storage::Pinned(m) => unsafe {
                std::slice::from_raw_parts_mut(m.as_ptr().cast(), self.len)
            },
            Storage::Plain(v) => v,
        })
    }

    /// The start of the memory, for a transfer that reads it.
    fn ptr(&self) -> *const u8 {
        match &self.storage {
            Storage::Pinned(m) => m.as_ptr(),
            Storage::Plain(v) => v.as_ptr().cast(),
        }
    }

    /// The start of the memory, for a transfer that writes it.
    fn ptr_mut(&mut self) -> *mut u8 {
        match &mut self.storage {
            Storage::Pinned(m) => m.as_ptr(),
            Storage::Plain(v) => v.as_mut_ptr().cast(),
        }
    }

    /// A transfer needs a buffer of the host buffer's own device.
    fn check_device(&self, op: &'static str, buffer_device: &Device) -> Result<()> {
        if !buffer_device.same(&self.device) {
            return Err(Error::Range {
                op,
                detail: format!(
                    "the host buffer belongs to {}, the buffer to {}",
                    self.device.label(),
                    buffer_device.label()
                ),
            });
        }
        Ok(())
    }

    /// Records the event that covers a transfer just enqueued.
    fn set_pending(&self) -> Result<()> {
        let event = Event::record(&self.device, StreamId::DEFAULT)?;
        *self.pending.lock().unwrap_or_else(PoisonError::into_inner) = Some(event);
        Ok(())
    }
}

impl<T: Element> Drop for HostBuffer<T> {
    fn drop(&mut self) {
        // The memory must outlive every transfer that uses it; a failure was the
        // transfer's, and the memory is freed either way.
        let _ = self.wait();
    }
}

impl<T: Element> Buffer<T> {
    /// Enqueues a copy of `host` (same device, same length) into this buffer and returns.
    /// `host` cannot be written until the copy is done: its `as_mut_slice` waits.
    pub fn upload_async(&mut self, host: &HostBuffer<T>) -> Result<()> {
        host.check_device("upload_async", self.device())?;
        same_len("upload_async", self.len(), host.len())?;
        if self.is_empty() {
            return Ok(());
        }
        self.device()
            .before_use(self.uses(), StreamId::DEFAULT, true)?;
        // A download into `host` may still be in flight: the stream runs in order, so the
        // copy below starts after it, and the new event covers both.
        // SAFETY: the range is the whole buffer; `host` stays alive and unwritten until the
        // event recorded next completes (its Drop and `as_mut_slice` wait for it).
        unsafe {
            self.device().backend().write_async(
                StreamId::DEFAULT,
                self.raw(),
                0,
                host.ptr(),
                self.size_bytes(),
            )?;
        }
        host.set_pending()
    }

    /// Enqueues a copy of this buffer into `host` (same device, same length) and returns.
    /// `host`'s `as_slice` waits for it.
    pub fn download_async(&self, host: &mut HostBuffer<T>) -> Result<()> {
        host.check_device("download_async", self.device())?;
        same_len("download_async", host.len(), self.len())?;
        if self.is_empty() {
            return Ok(());
        }
        self.device()
            .before_use(self.uses(), StreamId::DEFAULT, false)?;
        // SAFETY: whole buffer; `&mut host` excludes other users now, and later ones wait
        // for the event recorded next.
        unsafe {
            self.device().backend().read_async(
                StreamId::DEFAULT,
                self.raw(),
                0,
                host.ptr_mut(),
                self.size_bytes(),
            )?;
        }
        host.set_pending()
    }
}
