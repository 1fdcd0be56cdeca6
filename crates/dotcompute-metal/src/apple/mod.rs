//! The Objective-C layer: carries out encoding plans on a real Metal device. Compiled for
//! Apple targets only; on Linux it is type-checked (`cargo check --target
//! aarch64-apple-darwin`), never run.
//!
//! * A command queue per stream; one command buffer per submission. Every committed
//!   buffer stays in its stream's in-flight list until it is waited for; its status,
//!   error and GPU times are then read synchronously (`crate::outcome` decides: an `Err`
//!   naming the buffer, or `DeviceLost` after a page fault, never a silent zero). A
//!   completion handler only notes a failure early.
//! * Every call that makes Metal objects runs in an autorelease pool.
//! * Blits move whole 4-byte words (macOS's rule); other ranges are widened.
//! * Host transfers: on unified memory the host reads and writes shared buffers in
//!   place, after the stream's earlier work has completed; on a discrete GPU they go
//!   through a shared staging buffer and a blit.
//! * GPU time per command buffer (`GPUStartTime` / `GPUEndTime`) when profiling.

mod blas;
mod device;
mod memory;
mod pipeline;

pub use memory::MetalBuffer;

use crate::outcome::{outcome, Outcome};
use crate::plan::{encode, plan_args, Dispatch, EncodingPlan, PipelineLimits};
use block2::RcBlock;
use dotcompute_hal::words::{widen, word_aligned};
use dotcompute_hal::{
    Backend, BackendDescriptor, BackendKind, Blas, DeviceInfo, Error, KeyMap, LaunchRequest,
    LostFlag, MemoryStats, ProgramKey, Queue, Result, SizeClassPool, StreamId, StreamSet, Timing,
};
use dotcompute_ir::ScalarType;
use objc2::rc::autoreleasepool;
use objc2::rc::Retained;
use objc2::runtime::ProtocolObject;
use objc2_foundation::NSRange;
use objc2_metal::{
    MTLBlitCommandEncoder, MTLCommandBuffer, MTLCommandBufferStatus, MTLCommandEncoder,
    MTLCommandQueue, MTLComputeCommandEncoder, MTLDevice, MTLSize,
};
use pipeline::Pipeline;
use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A protocol object of Metal.
pub(crate) type Mtl<P> = ProtocolObject<P>;

/// The Metal backend's entry in the registry.
pub static DESCRIPTOR: BackendDescriptor = BackendDescriptor {
    kind: BackendKind::Metal,
    probe: || {
        let devices = device::all_devices();
        if devices.is_empty() {
            return Err("no Metal device present".into());
        }
        Ok(devices
            .iter()
            .enumerate()
            .map(|(ordinal, d)| dotcompute_hal::DeviceInfo {
                ordinal,
                ..device::describe(d)
            })
            .collect())
    },
    open: |ordinal| {
        let devices = device::all_devices();
        let count = devices.len();
        match devices.into_iter().nth(ordinal) {
            Some(d) => {
                let mut backend = MetalBackend::new(d)?;
                backend.info.ordinal = ordinal;
                Ok(Box::new(backend) as Box<dyn dotcompute_hal::DynBackend>)
            }
            None => Err(dotcompute_hal::registry::no_such_device(
                BackendKind::Metal,
                ordinal,
                count,
            )),
        }
    },
};

/// A committed command buffer and the label its errors and timings carry.
type InFlight = (Retained<ProtocolObject<dyn MTLCommandBuffer>>, String);

/// One stream: its queue, every command buffer committed and not yet waited for, and the
/// first failure seen and not yet reported.
struct StreamState {
    queue: Retained<ProtocolObject<dyn MTLCommandQueue>>,
    /// All of them, not only the last: Metal starts a queue's command buffers in order
    /// but does not promise they complete in order (a read after an independent blit
    /// could otherwise see stale data).
    in_flight: Vec<InFlight>,
    /// Set early by a completion handler (a hint: handlers run on a Metal thread) or at a
    /// wait; taken by the next synchronisation, which reports it.
    error: Arc<Mutex<Option<String>>>,
}

/// A Metal device.
pub struct MetalBackend {
    device: Retained<ProtocolObject<dyn MTLDevice>>,
    info: DeviceInfo,
    unified: bool,
    pool: SizeClassPool<MetalBuffer>,
    streams: Mutex<HashMap<StreamId, StreamState>>,
    /// Pipelines by program and checked mode.
    pipelines: Mutex<KeyMap<(ProgramKey, bool), Arc<Pipeline>>>,
    /// Set while profiling: the moment it was turned on.
    profiling: Mutex<Option<Instant>>,
    timings: Arc<Mutex<Vec<Timing>>>,
    /// Set when a command buffer failed in a way that leaves the device unusable (a GPU
    /// page fault, the watchdog, a process Metal now ignores): every later call is
    /// `Error::DeviceLost`.
    lost: LostFlag,
}

// SAFETY: the device, queues and pipeline states are thread-safe Metal objects; command
// buffers are only touched under the `streams` lock.
unsafe impl Send for MetalBackend {}
// SAFETY: shared use is sound for the reason above (Send).
unsafe impl Sync for MetalBackend {}

impl MetalBackend {
    fn new(device: Retained<ProtocolObject<dyn MTLDevice>>) -> Result<MetalBackend> {
        let info = device::describe(&device);
        let backend = MetalBackend {
            unified: device.hasUnifiedMemory(),
            device,
            info,
            pool: SizeClassPool::new(),
            streams: Mutex::new(HashMap::new()),
            pipelines: Mutex::new(KeyMap::default()),
            profiling: Mutex::new(None),
            timings: Arc::new(Mutex::new(Vec::new())),
            lost: LostFlag::default(),
        };
        backend.open_stream(StreamId::DEFAULT)?;
        Ok(backend)
    }

    fn failed(&self, message: String) -> Error {
        Error::Backend {
            backend: "metal".into(),
            message,
        }
    }

    /// The streams open now (taken out of the lock: waits happen outside it).
    fn stream_ids(&self) -> Vec<StreamId> {
        self.streams
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .copied()
            .collect()
    }

    /// `Error::DeviceLost` once a command buffer failed in a way that leaves the device
    /// unusable.
    fn check_lost(&self) -> Result<()> {
        self.lost.check(|| self.info.label())
    }

    /// A new command buffer on `stream`'s queue. The queue is taken out of the streams
    /// lock first: `commandBuffer` blocks while the queue holds 64 uncommitted buffers,
    /// and other threads must still be able to commit theirs meanwhile.
    fn command_buffer(
        &self,
        stream: StreamId,
    ) -> Result<Retained<ProtocolObject<dyn MTLCommandBuffer>>> {
        self.check_lost()?;
        let queue = {
            let streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
            streams
                .get(&stream)
                .ok_or_else(|| self.failed(format!("stream {stream:?} is not open")))?
                .queue
                .clone()
        };
        queue
            .commandBuffer()
            .ok_or_else(|| self.failed("the queue gave no command buffer".into()))
    }

    /// Commits `cb` on `stream` and keeps it in the stream's in-flight list. Its
    /// completion handler only notes a failure early; the outcome that counts is read
    /// when the buffer is waited for ([`MetalBackend::finish`]). Buffers already
    /// finished are dropped from the list here, so a launch loop without waits does not
    /// grow it.
    fn submit(
        &self,
        stream: StreamId,
        cb: Retained<ProtocolObject<dyn MTLCommandBuffer>>,
        label: &str,
    ) {
        let mut streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        let Some(s) = streams.get_mut(&stream) else {
            return;
        };
        let error = s.error.clone();
        let hint_label = label.to_string();
        let handler = RcBlock::new(move |cb: NonNull<ProtocolObject<dyn MTLCommandBuffer>>| {
            // SAFETY: Metal passes the completed command buffer, alive for the call.
            let cb = unsafe { cb.as_ref() };
            if cb.status() == MTLCommandBufferStatus::Error {
                let message = cb
                    .error()
                    .map(|e| e.localizedDescription().to_string())
                    .unwrap_or_else(|| "unknown error".into());
                let mut slot = error.lock().unwrap_or_else(|p| p.into_inner());
                slot.get_or_insert(format!("command buffer `{hint_label}` failed: {message}"));
            }
        });
        // SAFETY: the block is valid; Metal copies it before `addCompletedHandler` returns.
        unsafe { cb.addCompletedHandler(RcBlock::as_ptr(&handler)) };
        cb.commit();
        let done = |cb: &ProtocolObject<dyn MTLCommandBuffer>| {
            matches!(
                cb.status(),
                MTLCommandBufferStatus::Completed | MTLCommandBufferStatus::Error
            )
        };
        let (finished, pending): (Vec<InFlight>, Vec<InFlight>) = std::mem::take(&mut s.in_flight)
            .into_iter()
            .partition(|(cb, _)| done(cb));
        s.in_flight = pending;
        s.in_flight.push((cb, label.to_string()));
        let error = s.error.clone();
        drop(streams);
        for (cb, label) in finished {
            self.note(&error, self.finish(&cb, &label, stream));
        }
    }

    /// The outcome of a command buffer that is done (waited for, or found finished): its
    /// status and error read here, synchronously; its GPU time recorded when profiling.
    fn finish(
        &self,
        cb: &ProtocolObject<dyn MTLCommandBuffer>,
        label: &str,
        stream: StreamId,
    ) -> Outcome {
        let error = cb.error();
        let result = outcome(
            label,
            cb.status().0,
            error.as_ref().map(|e| e.code() as usize),
            error
                .as_ref()
                .map(|e| e.localizedDescription().to_string())
                .as_deref(),
        );
        let profiling = self
            .profiling
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some();
        if result == Outcome::Completed && profiling {
            let seconds = (cb.GPUEndTime() - cb.GPUStartTime()).max(0.0);
            self.timings
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(Timing {
                    label: label.to_string(),
                    duration: Duration::from_secs_f64(seconds),
                    device_time: true,
                    stream,
                    start: None,
                });
        }
        result
    }

    /// Keeps a failure for the stream's next synchronisation, or marks the device lost.
    fn note(&self, slot: &Mutex<Option<String>>, result: Outcome) {
        match result {
            Outcome::Completed => {}
            Outcome::Failed(message) => {
                slot.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert(message);
            }
            Outcome::Lost(message) => self.lost.mark(message),
        }
    }

    /// Waits for every command buffer in flight on `stream` and keeps their failures in
    /// its error slot (reported by the next synchronisation).
    fn wait_stream(&self, stream: StreamId) -> Arc<Mutex<Option<String>>> {
        let (pending, error) = {
            let mut streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
            match streams.get_mut(&stream) {
                Some(s) => (std::mem::take(&mut s.in_flight), s.error.clone()),
                None => return Arc::new(Mutex::new(None)),
            }
        };
        for (cb, label) in pending {
            cb.waitUntilCompleted();
            self.note(&error, self.finish(&cb, &label, stream));
        }
        error
    }

    fn pipeline(&self, request: &LaunchRequest<'_, MetalBuffer>) -> Result<Arc<Pipeline>> {
        let program = request.program;
        let key = (program.key, request.geometry.checked);
        let mut pipelines = self.pipelines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = pipelines.get(&key) {
            return Ok(p.clone());
        }
        let module = crate::msl_module(program, key.1)?;
        let p = Arc::new(autoreleasepool(|_| {
            pipeline::compile(&self.device, program.name(), module)
        })?);
        pipelines.insert(key, p.clone());
        Ok(p)
    }

    /// Encodes `plan` on a compute encoder of `cb`.
    fn encode_plan(
        &self,
        cb: &ProtocolObject<dyn MTLCommandBuffer>,
        pipeline: &Pipeline,
        plan: &EncodingPlan,
        buffers: &[Option<&MetalBuffer>],
        record: Option<&MetalBuffer>,
    ) -> Result<()> {
        // Every fallible step before the encoder exists: an encoder left without
        // `endEncoding` is an error in Metal's validation layer and leaks the buffer.
        let bound = plan
            .buffers
            .iter()
            .map(|b| {
                buffers[b.arg].ok_or_else(|| self.failed("a buffer argument is missing".into()))
            })
            .collect::<Result<Vec<_>>>()?;
        let encoder = cb
            .computeCommandEncoder()
            .ok_or_else(|| self.failed("no compute encoder".into()))?;
        encoder.setComputePipelineState(&pipeline.state);
        for (b, buffer) in plan.buffers.iter().zip(bound) {
            // SAFETY: the facade checked the view against the buffer; the index is the
            // kernel's own (from its binding list).
            unsafe {
                encoder.setBuffer_offset_atIndex(
                    Some(&buffer.buffer),
                    b.offset as usize,
                    b.index as usize,
                )
            };
        }
        if let (Some(index), Some(record)) = (plan.violation_record, record) {
            // SAFETY: a shared buffer of VIOLATION_WORDS zeroed u32s.
            unsafe { encoder.setBuffer_offset_atIndex(Some(&record.buffer), 0, index as usize) };
        }
        for b in &plan.bytes {
            // SAFETY: setBytes copies the bytes before returning.
            unsafe {
                encoder.setBytes_length_atIndex(
                    NonNull::new(b.bytes.as_ptr() as *mut _).expect("a Vec's pointer"),
                    b.bytes.len(),
                    b.index as usize,
                )
            };
        }
        for t in &plan.threadgroup_memory {
            // SAFETY: lengths are multiples of 16 within the device limit (the plan).
            unsafe {
                encoder.setThreadgroupMemoryLength_atIndex(t.bytes as usize, t.index as usize)
            };
        }
        let size = |v: [u32; 3]| MTLSize {
            width: v[0] as usize,
            height: v[1] as usize,
            depth: v[2] as usize,
        };
        match plan.dispatch {
            Dispatch::Threads { threads, per_group } => {
                encoder.dispatchThreads_threadsPerThreadgroup(size(threads), size(per_group))
            }
            Dispatch::Threadgroups { groups, per_group } => {
                encoder.dispatchThreadgroups_threadsPerThreadgroup(size(groups), size(per_group))
            }
        }
        encoder.endEncoding();
        Ok(())
    }

    /// A new command buffer on `stream` and a blit encoder on it.
    #[allow(clippy::type_complexity)]
    fn blit_encoder(
        &self,
        stream: StreamId,
    ) -> Result<(
        Retained<ProtocolObject<dyn MTLCommandBuffer>>,
        Retained<ProtocolObject<dyn MTLBlitCommandEncoder>>,
    )> {
        let cb = self.command_buffer(stream)?;
        let blit = cb
            .blitCommandEncoder()
            .ok_or_else(|| self.failed("no blit encoder".into()))?;
        Ok((cb, blit))
    }

    /// A shared staging buffer of `bytes` (discrete GPUs).
    fn staging(&self, bytes: usize) -> Result<MetalBuffer> {
        memory::new_buffer(&self.device, bytes.max(1), bytes, true)
    }

    /// Blits `bytes` from `src` to `dst` on `stream`.
    fn blit(
        &self,
        stream: StreamId,
        src: &MetalBuffer,
        src_offset: usize,
        dst: &MetalBuffer,
        dst_offset: usize,
        bytes: usize,
    ) -> Result<()> {
        let (cb, blit) = self.blit_encoder(stream)?;
        // SAFETY: the facade checked both ranges against their buffers.
        unsafe {
            blit.copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size(
                &src.buffer,
                src_offset,
                &dst.buffer,
                dst_offset,
                bytes,
            )
        };
        blit.endEncoding();
        self.submit(stream, cb, "copy");
        Ok(())
    }
}

impl Backend for MetalBackend {
    type Buffer = MetalBuffer;

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&self, bytes: usize) -> Result<(MetalBuffer, StreamSet)> {
        let (buffer, _, users) = self.pool.acquire(
            bytes,
            |class| memory::new_buffer(&self.device, class, bytes, self.unified),
            drop,
        )?;
        Ok((buffer, users))
    }

    fn free(&self, buffer: MetalBuffer, users: StreamSet) {
        let class = buffer.class;
        self.pool.release(buffer, class, users);
    }

    fn memory_stats(&self) -> MemoryStats {
        self.pool.stats()
    }

    fn trim(&self) {
        // Waits without reporting: a failure stays in its stream's slot for the next
        // synchronisation instead of being swallowed here.
        autoreleasepool(|_| {
            for id in self.stream_ids() {
                self.wait_stream(id);
            }
        });
        self.pool.trim(drop);
    }

    fn open_stream(&self, id: StreamId) -> Result<()> {
        let mut streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        if streams.contains_key(&id) {
            return Ok(());
        }
        let queue = self
            .device
            .newCommandQueue()
            .ok_or_else(|| self.failed("newCommandQueue returned nil".into()))?;
        streams.insert(
            id,
            StreamState {
                queue,
                in_flight: Vec::new(),
                error: Arc::new(Mutex::new(None)),
            },
        );
        Ok(())
    }

    fn set_profiling(&self, on: bool) {
        *self.profiling.lock().unwrap_or_else(|p| p.into_inner()) = on.then(Instant::now);
    }

    fn take_timings(&self) -> Vec<Timing> {
        std::mem::take(&mut *self.timings.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn blas(&self, elem: ScalarType) -> Option<&dyn Blas<MetalBuffer>> {
        // Only the types MPS multiplies, and only where MPS supports the device
        // (`describe` lists them in that case alone).
        self.info
            .caps
            .blas
            .contains(&elem)
            .then_some(self as &dyn Blas<MetalBuffer>)
    }
}

impl Queue for MetalBackend {
    unsafe fn write(
        &self,
        stream: StreamId,
        dst: &MetalBuffer,
        offset: usize,
        data: &[u8],
    ) -> Result<()> {
        if self.unified {
            // The stream's earlier work may still read the buffer.
            self.synchronize(stream)?;
            // SAFETY: shared storage; the facade checked offset + len.
            unsafe {
                std::ptr::copy_nonoverlapping(data.as_ptr(), dst.contents().add(offset), data.len())
            };
            return Ok(());
        }
        if !word_aligned(offset, data.len()) {
            // Blits move whole words (macOS): the words around the range are read first.
            let (start, end) = widen(offset, data.len());
            let mut words = vec![0u8; end - start];
            // SAFETY: the widened range lies inside the buffer (blocks are whole words).
            unsafe { self.read(stream, dst, start, &mut words)? };
            words[offset - start..offset - start + data.len()].copy_from_slice(data);
            // SAFETY: as above.
            return unsafe { self.write(stream, dst, start, &words) };
        }
        autoreleasepool(|_| {
            let staging = self.staging(data.len())?;
            // SAFETY: a fresh shared buffer of at least data.len() bytes.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), staging.contents(), data.len()) };
            self.blit(stream, &staging, 0, dst, offset, data.len())?;
            // The staging buffer must outlive the blit.
            self.synchronize(stream)
        })
    }

    unsafe fn read(
        &self,
        stream: StreamId,
        src: &MetalBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<()> {
        if self.unified {
            self.synchronize(stream)?;
            // SAFETY: as in write.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    src.contents().add(offset),
                    out.as_mut_ptr(),
                    out.len(),
                )
            };
            return Ok(());
        }
        if !word_aligned(offset, out.len()) {
            let (start, end) = widen(offset, out.len());
            let mut words = vec![0u8; end - start];
            // SAFETY: the widened range lies inside the buffer (blocks are whole words).
            unsafe { self.read(stream, src, start, &mut words)? };
            out.copy_from_slice(&words[offset - start..offset - start + out.len()]);
            return Ok(());
        }
        autoreleasepool(|_| {
            let staging = self.staging(out.len())?;
            self.blit(stream, src, offset, &staging, 0, out.len())?;
            self.synchronize(stream)?;
            // SAFETY: the blit has completed.
            unsafe {
                std::ptr::copy_nonoverlapping(staging.contents(), out.as_mut_ptr(), out.len())
            };
            Ok(())
        })
    }

    unsafe fn copy(
        &self,
        stream: StreamId,
        src: &MetalBuffer,
        src_offset: usize,
        dst: &MetalBuffer,
        dst_offset: usize,
        bytes: usize,
    ) -> Result<()> {
        if !word_aligned(src_offset, bytes) || !word_aligned(dst_offset, bytes) {
            // 8- and 16-bit ranges off whole words: through the host (macOS blits move
            // whole words).
            let mut data = vec![0u8; bytes];
            // SAFETY: the facade checked both ranges against their buffers.
            unsafe {
                self.read(stream, src, src_offset, &mut data)?;
                return self.write(stream, dst, dst_offset, &data);
            }
        }
        autoreleasepool(|_| self.blit(stream, src, src_offset, dst, dst_offset, bytes))
    }

    unsafe fn fill(
        &self,
        stream: StreamId,
        dst: &MetalBuffer,
        offset: usize,
        bytes: usize,
        pattern: &[u8],
    ) -> Result<()> {
        if pattern.iter().all(|&b| b == pattern[0]) && word_aligned(offset, bytes) {
            return autoreleasepool(|_| {
                let (cb, blit) = self.blit_encoder(stream)?;
                blit.fillBuffer_range_value(&dst.buffer, NSRange::new(offset, bytes), pattern[0]);
                blit.endEncoding();
                self.submit(stream, cb, "fill");
                Ok(())
            });
        }
        // Wider patterns: written on the host (the facade's fills are rare and small
        // next to kernels; a fill kernel can replace this later).
        let data: Vec<u8> = pattern.iter().copied().cycle().take(bytes).collect();
        // SAFETY: the caller's range and ordering.
        unsafe { self.write(stream, dst, offset, &data) }
    }

    unsafe fn launch(
        &self,
        stream: StreamId,
        request: &LaunchRequest<'_, MetalBuffer>,
    ) -> Result<()> {
        // Metal autoreleases encoders and descriptors: drained per launch, not at the
        // thread's exit (a launch loop on a CLI or test thread would otherwise grow).
        autoreleasepool(|_| self.launch_in_pool(stream, request))
    }

    fn synchronize(&self, stream: StreamId) -> Result<()> {
        self.check_lost()?;
        let error = autoreleasepool(|_| self.wait_stream(stream));
        self.check_lost()?;
        let failure = error.lock().unwrap_or_else(|p| p.into_inner()).take();
        match failure {
            Some(message) => Err(self.failed(message)),
            None => Ok(()),
        }
    }

    fn synchronize_all(&self) -> Result<()> {
        let mut first = Ok(());
        for id in self.stream_ids() {
            let r = self.synchronize(id);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

impl MetalBackend {
    /// `Queue::launch` inside its autorelease pool.
    fn launch_in_pool(
        &self,
        stream: StreamId,
        request: &LaunchRequest<'_, MetalBuffer>,
    ) -> Result<()> {
        let pipeline = self.pipeline(request)?;
        let (buffers, args) = plan_args(&request.args);
        let limits = PipelineLimits {
            max_threads_per_group: pipeline.max_threads(),
            max_threadgroup_memory: self.info.limits.max_shared_bytes,
        };
        let plan = encode(
            &pipeline.module,
            &request.program.kernel,
            &request.geometry,
            &args,
            limits,
        )?;
        // Checked launches: a zeroed violation record, read after the launch completes.
        let record = match plan.violation_record {
            Some(_) => {
                let bytes = dotcompute_hal::VIOLATION_WORDS * 4;
                let record = memory::new_buffer(&self.device, bytes, bytes, true)?;
                // SAFETY: a fresh shared buffer of `bytes`.
                unsafe { std::ptr::write_bytes(record.contents(), 0, bytes) };
                Some(record)
            }
            None => None,
        };
        let cb = self.command_buffer(stream)?;
        self.encode_plan(&cb, &pipeline, &plan, &buffers, record.as_ref())?;
        self.submit(stream, cb, request.program.name());
        let Some(record) = record else {
            return Ok(());
        };
        self.synchronize(stream)?;
        let mut words = [0u32; dotcompute_hal::VIOLATION_WORDS];
        // SAFETY: the launch has completed; the record is shared memory of these words.
        unsafe {
            std::ptr::copy_nonoverlapping(
                record.contents() as *const u32,
                words.as_mut_ptr(),
                words.len(),
            )
        };
        match dotcompute_hal::decode_violation(&request.program.kernel, words) {
            Some(violation) => Err(violation),
            None => Ok(()),
        }
    }
}
