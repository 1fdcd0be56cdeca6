//! # dotcompute-wgpu: the wgpu backend
//!
//! Runs kernels as WGSL generated from the IR (`dotcompute-codegen`) through wgpu on
//! Vulkan, Metal and DX12 (GL is not used: its compute support is too uneven).
//!
//! ## Contract
//!
//! *Validates*: every generated module with naga before the driver sees it (a failure is
//! `Error::Compile` quoting the WGSL line); kernel types WGSL can express (no 64-bit
//! types); buffer sizes against the adapter's largest buffer and largest storage binding;
//! the folded dispatch against the adapter's per-dimension group limit. wgpu's own
//! validation errors are captured and returned as `Err` instead of the default panic.
//!
//! *Trusts* the facade for argument types and ranges, like every backend.
//!
//! Memory comes from the shared size-class pool; reads go through a reused mapped staging
//! buffer. Launches are asynchronous (submitted to the queue in order); reads wait.
//!
//! Out-of-bounds accesses are *not* detected here: WGSL clamps or discards them (robust
//! buffer access). The CPU backend reports them.
//!
//! ## Forms of a generated kernel
//!
//! A launch runs one of three forms of its kernel, each a pipeline of its own:
//!
//! - *plain*: one invocation per logical thread;
//! - *grid-stride*: kernels that read no coordinate but their global id, launched
//!   unchecked on 1-D grids. A fixed dispatch strides over the grid;
//! - *vector*: elementwise kernels over 4-byte buffers, when every buffer starts on 16
//!   bytes and holds whole 16-byte vectors. Four logical threads run per trip, on vector
//!   loads and stores.
//!
//! `dotcompute_codegen::wgsl::WgslOptions` documents each form.
//!
//! ## Streams
//!
//! wgpu exposes one queue per device, and every submission runs in submission order. So
//! every dotcompute stream of a wgpu device is an ordered view of that one queue: work is
//! correct across streams without waits (waits between streams are no-ops, and a freed
//! block can be reused at once), but streams do not run concurrently. Fences wait on the
//! host when recorded. Graphs are replayed by the facade, node by node.
//!
//! ## Rooms
//!
//! This file holds the backend's state, opening a device, waits, submissions and the
//! `Backend` half (memory, profiling); `adapter` finds and describes adapters; `compile`
//! turns kernels into pipelines (`pipeline_cache` keeps them across processes);
//! `dispatch` prepares one launch; `queue` is the `Queue` half (transfers, launches,
//! batching); `transfer` holds the copy and fill kernels.

use dotcompute_codegen::{naga_out, wgsl};
use dotcompute_hal::settings;
use dotcompute_hal::words::{widen, word_aligned};
use dotcompute_hal::{
    AtomicF32Add, Backend, BackendDescriptor, BackendKind, BoundArg, Capabilities, DeviceInfo,
    DeviceType, Error, GeneratedProduct, LaunchRequest, Limits, LostFlag, MemoryStats, Queue,
    RawLanguage, Result, SizeClassPool, StreamId, StreamSet, Timing,
};

use std::num::NonZeroU64;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use wgpu::util::DeviceExt;

mod adapter;
mod compile;
mod dispatch;
mod pipeline_cache;
mod queue;
mod transfer;

use adapter::*;
pub use adapter::{adapters, devices, DISABLE_ENV, FLOAT_ENV};

pub use pipeline_cache::Loaded as PipelineCacheLoaded;

const BACKEND: &str = "wgpu";

fn backend_err(message: impl Into<String>) -> Error {
    Error::Backend {
        backend: BACKEND.into(),
        message: message.into(),
    }
}

/// An error wgpu raised during `operation`, with its kind in structured fields:
/// `Error::Driver { code, name }` is 1 `OutOfMemory`, 2 `Validation` or 3 `Internal`
/// (wgpu's error filters), and `detail` is wgpu's text.
fn wgpu_error(operation: &str, e: &wgpu::Error) -> Error {
    let (code, name) = match e {
        wgpu::Error::OutOfMemory { .. } => (1, "OutOfMemory"),
        wgpu::Error::Validation { .. } => (2, "Validation"),
        wgpu::Error::Internal { .. } => (3, "Internal"),
    };
    Error::Driver {
        backend: BACKEND.into(),
        operation: operation.into(),
        code,
        name: name.into(),
        detail: e.to_string(),
    }
}

/// A pooled device buffer.
pub struct WgpuBuffer {
    buffer: wgpu::Buffer,
    class: usize,
}

struct Pipeline {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
    module: wgsl::WgslModule,
}

/// Program key, group size, dynamic shared length (WGSL modules are specialised per size).
/// One prepared launch: what a compute pass needs to dispatch it.
struct Dispatch {
    pipeline: Arc<Pipeline>,
    bind_group: wgpu::BindGroup,
    groups: [u32; 3],
    /// Checked launches: the violation record bound to the kernel, and the kernel.
    record: Option<(wgpu::Buffer, Arc<dotcompute_ir::Kernel>)>,
}

/// A launch's bindings: the pipeline (by address; the cached entry holds it, so the
/// address is not reused meanwhile), each buffer binding's (binding, buffer, offset,
/// size), and the uniform block's bytes.
#[derive(PartialEq, Eq, Hash)]
struct BindKey {
    pipeline: usize,
    ranges: Vec<(u32, wgpu::Buffer, u64, u64)>,
    uniforms: Vec<u8>,
}

/// A bind group kept for launches with the same [`BindKey`].
struct CachedBinding {
    _pipeline: Arc<Pipeline>,
    bind_group: wgpu::BindGroup,
    _uniforms: wgpu::Buffer,
}

/// Bind groups kept at most; the cache starts over when full (iterative code repeats a
/// few launches, so a small cache catches them).
const BIND_GROUP_CACHE: usize = 256;

/// Loop trips per thread beyond which a launch on llvmpipe is refused (its hard limit
/// is 65,535; see `WgpuBackend::loop_budget`).
const LLVMPIPE_LOOP_BUDGET: u32 = 60_000;
// The generator records the code the hal decodes (two crates, one meaning).
const _: () = assert!(wgsl::LOOP_BUDGET_CODE == dotcompute_hal::LOOP_BUDGET_CODE);

/// Launches recorded into one command buffer before it is submitted: a submission costs
/// more than the launches it carries (about 18 µs for one empty dispatch on NVIDIA
/// Vulkan, H100), and waiting longer would leave the GPU idle.
const BATCH_LAUNCHES: u32 = 32;

/// Dispatches per submission of a long batch (see [`WgpuBackend::chunked`]).
const CHUNK_LAUNCHES: usize = 16;

/// How long a wait polls without blocking before it blocks in the driver
/// ([`WgpuBackend::spin_until_done`]): long enough for short kernels and copies, short
/// enough that a long wait costs little CPU.
const SPIN_BUDGET: std::time::Duration = std::time::Duration::from_millis(2);

/// The code of a pipeline's shader, next to its interface ([`wgsl::WgslModule`]).
#[derive(Clone, Copy)]
enum ShaderCode<'a> {
    /// Hand-written WGSL: the interface's source, through wgpu's own translation.
    Wgsl,
    /// A generated kernel's validated WGSL (strict SPIR-V on Vulkan).
    Generated(&'a naga_out::NagaModule),
    /// Hand-written SPIR-V, passed through as it is.
    Spirv {
        words: &'a [u32],
        workgroup: [u32; 3],
    },
    /// Hand-written MSL (the interface's source), passed through as it is.
    Msl { workgroup: [u32; 3] },
}

/// (program, group size, dynamic shared length, view offsets, checked, form).
type PipelineKey = (dotcompute_hal::ProgramKey, [u32; 3], u32, bool, bool, Form);

/// How a generated kernel maps logical threads to invocations: planned by
/// `dotcompute_hal::plan::plan_form` ([`wgsl::WgslOptions::strided`],
/// [`wgsl::WgslOptions::vector`]).
use dotcompute_hal::plan::Form;
use dotcompute_ir::interface::Forms;

thread_local! {
    /// Per thread: a process-wide count let tests running in parallel see each other's
    /// launches (a launch that must not take the form seemed to take it).
    static VECTOR_LAUNCHES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Launches the calling thread has run in the vector form
/// ([`wgsl::WgslOptions::vector`]) so far (tests check that an eligible launch took it).
pub fn vector_launches() -> u64 {
    VECTOR_LAUNCHES.with(|c| c.get())
}

/// The wgpu backend's entry in the registry: every compute-capable adapter.
pub static DESCRIPTOR: BackendDescriptor = BackendDescriptor {
    kind: BackendKind::Wgpu,
    probe: devices,
    open: |ordinal| {
        let mut list = adapters();
        if ordinal >= list.len() {
            return Err(match list.len() {
                0 => Error::BackendUnavailable {
                    backend: BACKEND.into(),
                    reason: devices().err().unwrap_or_default(),
                },
                n => dotcompute_hal::registry::no_such_device(BackendKind::Wgpu, ordinal, n),
            });
        }
        let mut backend = WgpuBackend::open(list.swap_remove(ordinal))?;
        backend.info.ordinal = ordinal;
        Ok(Box::new(backend) as Box<dyn dotcompute_hal::DynBackend>)
    },
};

/// One wgpu adapter opened as a dotcompute device.
pub struct WgpuBackend {
    info: DeviceInfo,
    device: wgpu::Device,
    queue: wgpu::Queue,
    limits: wgpu::Limits,
    pool: SizeClassPool<wgpu::Buffer>,
    pipelines: Mutex<dotcompute_hal::KeyMap<PipelineKey, Arc<Pipeline>>>,
    /// The forms WGSL offers each generated program (`wgsl::forms`), found once per
    /// program: the planner needs them before a form's pipeline exists.
    forms: Mutex<dotcompute_hal::KeyMap<dotcompute_hal::ProgramKey, Forms>>,
    /// Bind groups and uniform buffers of recent launches, reused by identical ones.
    /// Emptied whenever a pool buffer is destroyed: an entry of a destroyed buffer could
    /// never match again (its key holds that buffer's handle), but would keep it alive.
    bind_groups: Mutex<std::collections::HashMap<BindKey, CachedBinding>>,
    staging: Mutex<Option<wgpu::Buffer>>,
    /// Errors wgpu reported outside an error scope (instead of its default panic).
    uncaptured: Arc<Mutex<Option<Error>>>,
    /// Set by wgpu's device-lost callback: every later call is `Error::DeviceLost`.
    lost: Arc<LostFlag>,
    /// The longest wait for the device (`DOTCOMPUTE_WGPU_TIMEOUT_S`, default 300 s;
    /// `Device::set_time_limit` replaces it).
    wait_timeout: settings::TimeLimit,
    /// Whether eligible kernels run in the grid-stride form (`DOTCOMPUTE_WGPU_STRIDED=0`
    /// turns it off, for comparisons and as an escape hatch).
    strided: bool,
    /// Whether elementwise kernels over 4-byte buffers run in the vector form where their
    /// buffers allow (`DOTCOMPUTE_WGPU_VECTORS=0` turns it off, for comparisons).
    vectors: bool,
    /// `DOTCOMPUTE_UNROLL` (read when the device opens): generated kernels unroll their
    /// grid-stride loops over read-only buffers.
    unroll: bool,
    /// The one door to the queue (see [`QueueOrder`]): launches recorded but not yet
    /// submitted, and the lock every submission and queue write holds.
    /// `DOTCOMPUTE_WGPU_BATCH=0` submits each launch at once.
    order: Mutex<QueueOrder>,
    batch: bool,
    /// Whether long batches (graph replays) are submitted in chunks of [`CHUNK_LAUNCHES`]
    /// as they are recorded (`DOTCOMPUTE_WGPU_CHUNKS=0`: one submission, for comparisons).
    chunked: bool,
    /// How generated kernels reach a Vulkan driver: as SPIR-V that forbids contraction
    /// (and keeps subnormals where the device can), through wgpu's SPIR-V passthrough;
    /// `None` elsewhere (Metal, DX12, adapters without passthrough, or
    /// `DOTCOMPUTE_WGPU_FLOAT=relaxed`), where WGSL goes through wgpu as it is.
    strict_spirv: Option<dotcompute_codegen::spirv::StrictSpirv>,
    /// The language the device takes as it is (raw SPIR-V kernels on Vulkan, raw MSL on
    /// Metal), if any.
    passthrough: Option<dotcompute_hal::RawLanguage>,
    /// llvmpipe (lavapipe) ends a thread's loops after 65,535 trips in all and the loop
    /// just exits: kernels with loops count their trips there and a thread past this
    /// budget makes the launch an error ([`wgsl::WgslOptions::loop_budget`]). The margin
    /// below 65,535 covers loops the count does not see (atomic retry loops).
    loop_budget: Option<u32>,
    /// `DOTCOMPUTE_WGPU_STORAGE_BARRIERS=always`: every barrier also orders storage
    /// buffers, as before the analysis (for comparisons).
    storage_barriers_always: bool,
    /// Whether waits first poll without blocking for up to [`SPIN_BUDGET`]
    /// ([`WgpuBackend::spin_until_done`]): on hardware adapters, unless
    /// `DOTCOMPUTE_WGPU_SPIN=0`. Never on software adapters, whose work runs on the same
    /// cores a spinning thread would take.
    spin: bool,
    /// Whether large word-aligned copies and fills run as kernels ([`transfer`]);
    /// `DOTCOMPUTE_WGPU_TRANSFER_KERNELS=0` keeps the driver's copy and the queue write
    /// (for comparisons).
    transfer_kernels: bool,
    /// The persistent pipeline cache ([`pipeline_cache`]), where the adapter has one.
    pipeline_cache: Option<pipeline_cache::PipelineCacheFile>,
    /// The copy and fill kernels ([`transfer`]), built on first use.
    transfers: OnceLock<std::result::Result<transfer::TransferKernels, String>>,
    profiling: AtomicBool,
    /// When profiling was turned on: the origin of timeline start times.
    origin: Mutex<std::time::Instant>,
    timings: Mutex<Vec<Timing>>,
    /// Timestamp queries, when the adapter has them.
    stamps: Option<Mutex<Stamps>>,
}

/// Two timestamps around one pass (or one copy), resolved and read back.
struct Stamps {
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    readback: wgpu::Buffer,
    /// Nanoseconds per timestamp tick.
    period: f64,
    /// Whether timestamps can also be written between commands (for copies).
    inside_encoders: bool,
}

/// Launches recorded but not yet submitted (one command encoder, one compute pass per
/// launch, and how many), behind the lock that every use of the queue holds.
///
/// **Ordering rule.** The queue runs work in the order it reaches it, and a queue write
/// (`write_buffer`) lands before the next submission. Each thread's work must reach the
/// queue in the order that thread issued it, whatever other threads do: a launch recorded
/// here, then a read, a fill or a write of a buffer (possibly a pool block the launch's
/// dropped input gave back) must run in that order. So the pending launches are submitted
/// and the next queue operation is issued under one lock ([`WgpuBackend::with_queue`]);
/// taking the pending work and submitting it in two steps let another thread's write or
/// copy reach the queue in between, ahead of a launch recorded before it (the silent
/// wrong results of issue 27, item 1).
#[derive(Default)]
struct QueueOrder {
    pending: Option<(wgpu::CommandEncoder, u32)>,
}

impl WgpuBackend {
    /// Opens the best adapter.
    pub fn new() -> Result<WgpuBackend> {
        let adapter = adapters()
            .into_iter()
            .next()
            .ok_or_else(|| Error::BackendUnavailable {
                backend: BACKEND.into(),
                reason: devices().err().unwrap_or_default(),
            })?;
        WgpuBackend::open(adapter)
    }

    /// Opens `adapter` with all of its limits. A `DOTCOMPUTE_WGPU_*` setting with a value
    /// it does not accept is `Error::Config`, before anything is opened.
    pub fn open(adapter: wgpu::Adapter) -> Result<WgpuBackend> {
        let wait_timeout = settings::TimeLimit::from_env(
            "DOTCOMPUTE_WGPU_TIMEOUT_S",
            std::time::Duration::from_secs(300),
        );
        wait_timeout.get()?;
        let strided = settings::switch_or("DOTCOMPUTE_WGPU_STRIDED", true)?;
        let vectors = settings::switch_or("DOTCOMPUTE_WGPU_VECTORS", true)?;
        let unroll = settings::unroll()?;
        let batch = settings::switch_or("DOTCOMPUTE_WGPU_BATCH", true)?;
        let chunked = settings::switch_or("DOTCOMPUTE_WGPU_CHUNKS", true)?;
        let storage_barriers_always =
            settings::choices::WGPU_STORAGE_BARRIERS.read()? == Some("always");
        let software = adapter.get_info().device_type == wgpu::DeviceType::Cpu;
        let spin = settings::switch_or("DOTCOMPUTE_WGPU_SPIN", !software)?;
        let transfer_kernels = settings::switch_or("DOTCOMPUTE_WGPU_TRANSFER_KERNELS", true)?;
        let limits = adapter.limits();
        let mut required_features = wgpu::Features::empty();
        for f in [
            wgpu::Features::TIMESTAMP_QUERY,
            wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS,
            wgpu::Features::SUBGROUP,
            wgpu::Features::SHADER_F16,
            wgpu::Features::SHADER_FLOAT32_ATOMIC,
        ] {
            if usable_features(&adapter).contains(f) {
                required_features |= f;
            }
        }
        adapter::disabled_features()?;
        let strict_spirv = float_mode()?.then(|| strict_spirv(&adapter)).flatten();
        let passthrough = adapter::passthrough_language(&adapter);
        if passthrough.is_some() {
            required_features |= wgpu::Features::PASSTHROUGH_SHADERS;
        }
        let cache_path = pipeline_cache::path_for(&adapter)?;
        if cache_path.is_some() {
            required_features |= wgpu::Features::PIPELINE_CACHE;
        }
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("dotcompute"),
            required_features,
            required_limits: limits.clone(),
            ..Default::default()
        }))
        .map_err(|e| Error::BackendUnavailable {
            backend: BACKEND.into(),
            reason: format!("the adapter refused a device: {e}"),
        })?;
        let uncaptured = Arc::new(Mutex::new(None));
        let sink = uncaptured.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let mut slot = sink.lock().unwrap_or_else(|p| p.into_inner());
            if slot.is_none() {
                *slot = Some(wgpu_error("an earlier call (reported asynchronously)", &e));
            }
        }));
        let lost = Arc::new(LostFlag::default());
        let lost_sink = lost.clone();
        device.set_device_lost_callback(move |reason, message| {
            lost_sink.mark(format!("{reason:?}: {message}"));
        });
        let pipeline_cache =
            cache_path.map(|path| pipeline_cache::PipelineCacheFile::open(&device, path));
        let stamps = timestamp_queries(&device, &queue, required_features);
        Ok(WgpuBackend {
            stamps,
            transfer_kernels,
            transfers: OnceLock::new(),
            pipeline_cache,
            profiling: AtomicBool::new(false),
            origin: Mutex::new(std::time::Instant::now()),
            timings: Mutex::new(Vec::new()),
            info: describe(&adapter, &limits),
            device,
            queue,
            limits,
            pool: SizeClassPool::new(),
            pipelines: Mutex::new(Default::default()),
            forms: Mutex::new(Default::default()),
            bind_groups: Mutex::new(Default::default()),
            staging: Mutex::new(None),
            uncaptured,
            lost,
            wait_timeout,
            strided,
            vectors,
            unroll,
            order: Mutex::new(QueueOrder::default()),
            batch,
            chunked,
            strict_spirv,
            passthrough,
            loop_budget: adapter
                .get_info()
                .driver
                .to_ascii_lowercase()
                .contains("llvmpipe")
                .then_some(LLVMPIPE_LOOP_BUDGET),
            storage_barriers_always,
            spin,
        })
    }

    /// `Error::DeviceLost` once wgpu reported the device lost.
    fn check_lost(&self) -> Result<()> {
        self.lost.check(|| self.info.label())
    }

    /// Returns (and clears) an error wgpu reported asynchronously.
    fn check_uncaptured(&self) -> Result<()> {
        self.check_lost()?;
        match self
            .uncaptured
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Waits for the submitted work, at most `wait_timeout`: a device that does not
    /// finish in that time is an error, not a hang.
    fn wait(&self) -> Result<()> {
        let (limit, set_by) = self.wait_timeout.get()?;
        self.wait_within(limit, set_by, "its work")
    }

    /// [`Self::wait`] with a limit of the caller's (a launch's own); `what` names the
    /// work in the error.
    fn wait_within(&self, limit: std::time::Duration, set_by: &str, what: &str) -> Result<()> {
        self.check_lost()?;
        if self.spin && self.spin_until_done(limit.min(SPIN_BUDGET))? {
            return self.check_uncaptured();
        }
        self.flush()?;
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: None,
                timeout: Some(limit),
            })
            .map_err(|e| match e {
                // A kernel that does not end cannot be stopped through wgpu, and every
                // later submission would queue behind it: the device is lost to this
                // process (its driver ends the work when the process exits).
                wgpu::PollError::Timeout => {
                    self.lost.mark(format!(
                        "{what} did not finish within {limit:?} (a kernel that never ends? \
                         {set_by} set the limit); the device cannot be used again in this \
                         process"
                    ));
                    self.check_lost().unwrap_err()
                }
                e => backend_err(format!("waiting for the device failed: {e}")),
            })?;
        self.check_uncaptured()
    }

    /// The pipeline cache to build pipelines with, where there is one.
    fn cache(&self) -> Option<&wgpu::PipelineCache> {
        self.pipeline_cache.as_ref().map(|c| &c.cache)
    }

    /// Stores the pipeline cache after a new pipeline (best effort).
    fn save_pipeline_cache(&self) {
        if let Some(c) = &self.pipeline_cache {
            c.save();
        }
    }

    /// What the persistent pipeline cache found on disk when this device opened; `None`
    /// where the device keeps none (not Vulkan, or `DOTCOMPUTE_CACHE=off`).
    pub fn pipeline_cache_loaded(&self) -> Option<PipelineCacheLoaded> {
        self.pipeline_cache.as_ref().map(|c| c.loaded)
    }

    /// Submits the recorded launches and polls the device without blocking until the
    /// work submitted so far is done (true) or `budget` has passed (false: the caller
    /// then blocks in the driver's wait).
    ///
    /// Why: the driver's blocking wait wakes the thread long after short work ends
    /// (NVIDIA Vulkan: tens of microseconds), which dominated a launch + synchronize
    /// round trip; CUDA's default synchronization spins the same way.
    fn spin_until_done(&self, budget: std::time::Duration) -> Result<bool> {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        // Registered under the queue lock after the recorded launches are submitted, so
        // it covers everything this thread submitted before (and queue writes: wgpu
        // flushes them first).
        self.with_queue(|queue| {
            queue.on_submitted_work_done(move || flag.store(true, Ordering::Release))
        });
        self.check_uncaptured()?;
        let start = std::time::Instant::now();
        loop {
            self.device
                .poll(wgpu::PollType::Poll)
                .map_err(|e| backend_err(format!("polling the device failed: {e}")))?;
            if done.load(Ordering::Acquire) {
                return Ok(true);
            }
            if start.elapsed() >= budget {
                return Ok(false);
            }
            std::thread::yield_now();
        }
    }

    /// A storage buffer of `bytes` (a pool size class) for a request of `requested`
    /// bytes, which errors report.
    fn create_storage(&self, bytes: usize, requested: usize) -> Result<wgpu::Buffer> {
        let oom = |detail: String| Error::OutOfMemory {
            device: self.info.label(),
            requested: requested as u64,
            detail,
        };
        if bytes as u64 > self.limits.max_buffer_size {
            return Err(oom(format!(
                "the adapter's largest buffer is {} bytes",
                self.limits.max_buffer_size
            )));
        }
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("dotcompute buffer"),
            size: bytes as u64,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(oom(e.to_string()));
        }
        Ok(buffer)
    }

    /// Destroys a pool block's buffer, after forgetting the bind groups that could use it.
    fn destroy(&self, buffer: wgpu::Buffer) {
        // Recorded launches may use it: they are submitted first (wgpu keeps a destroyed
        // buffer's memory until submitted work that uses it is done).
        let _ = self.flush();
        self.bind_groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        buffer.destroy();
    }

    /// Runs `f` on the queue after every launch recorded so far has been submitted, with
    /// no other queue operation in between (the ordering rule of [`QueueOrder`]). Every
    /// submission and queue write goes through here.
    fn with_queue<R>(&self, f: impl FnOnce(&wgpu::Queue) -> R) -> R {
        let mut order = self.order.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((encoder, _)) = order.pending.take() {
            self.queue.submit(Some(encoder.finish()));
        }
        f(&self.queue)
    }

    fn submit(&self, encoder: wgpu::CommandEncoder) -> Result<()> {
        // Launches recorded earlier run first: submissions execute in order.
        self.with_queue(|queue| queue.submit(Some(encoder.finish())));
        self.check_uncaptured()
    }

    /// Submits the recorded launches (before a wait or a destroyed buffer, which must
    /// come after them).
    fn flush(&self) -> Result<()> {
        self.with_queue(|_| ());
        self.check_uncaptured()
    }

    /// Submits an encoder whose work wrote timestamps 0 and 1 of `stamps.set`, waits, and
    /// records the device time between them under `label`.
    fn submit_timed(
        &self,
        mut encoder: wgpu::CommandEncoder,
        stamps: &Stamps,
        stream: StreamId,
        label: &str,
    ) -> Result<()> {
        let start = std::time::Instant::now();
        encoder.resolve_query_set(&stamps.set, 0..2, &stamps.resolve, 0);
        encoder.copy_buffer_to_buffer(&stamps.resolve, 0, &stamps.readback, 0, 16);
        self.submit(encoder)?;
        let mut raw = [0u8; 16];
        self.read_mapped(&stamps.readback, &mut raw, "the timestamps")?;
        let t0 = u64::from_le_bytes(raw[0..8].try_into().unwrap());
        let t1 = u64::from_le_bytes(raw[8..16].try_into().unwrap());
        let ticks = t1.saturating_sub(t0);
        self.record(
            stream,
            label,
            start,
            std::time::Duration::from_nanos((ticks as f64 * stamps.period) as u64),
            true,
        );
        Ok(())
    }

    /// Maps the first `out.len()` bytes of a `MAP_READ` buffer once the submitted work is
    /// done, copies them into `out` and unmaps. `what` names the buffer in errors.
    fn read_mapped(&self, buffer: &wgpu::Buffer, out: &mut [u8], what: &str) -> Result<()> {
        let slice = buffer.slice(0..out.len() as u64);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.wait()?;
        rx.recv()
            .map_err(|_| backend_err(format!("the mapping callback for {what} never ran")))?
            .map_err(|e| backend_err(format!("mapping {what} failed: {e}")))?;
        {
            let view = slice
                .get_mapped_range()
                .map_err(|e| backend_err(format!("reading {what} failed: {e}")))?;
            out.copy_from_slice(&view);
        }
        buffer.unmap();
        Ok(())
    }

    /// Records a timing; `start` is when the host submitted the work (the timeline
    /// position; profiled work is waited for, so submissions do not overlap).
    fn record(
        &self,
        stream: StreamId,
        label: &str,
        start: std::time::Instant,
        duration: std::time::Duration,
        device_time: bool,
    ) {
        let origin = *self.origin.lock().unwrap_or_else(|p| p.into_inner());
        self.timings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Timing {
                label: label.to_string(),
                duration,
                device_time,
                stream,
                start: Some(start.saturating_duration_since(origin)),
            });
    }

    fn profiling(&self) -> bool {
        self.profiling.load(Ordering::Relaxed)
    }
}

/// wgpu copies and queue writes move whole 4-byte words (`COPY_BUFFER_ALIGNMENT`).
const COPY_ALIGN: usize = wgpu::COPY_BUFFER_ALIGNMENT as usize;
// Copies and queue writes move whole words: the hal's word helpers apply.
const _: () = assert!(COPY_ALIGN == dotcompute_hal::words::WORD);

impl Backend for WgpuBackend {
    type Buffer = WgpuBuffer;

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&self, bytes: usize) -> Result<(WgpuBuffer, StreamSet)> {
        self.check_lost()?;
        let (buffer, class, _) = self.pool.acquire(
            bytes,
            |class| self.create_storage(class, bytes),
            |b| self.destroy(b),
        )?;
        // Every stream is the one queue: later uses are submitted after earlier ones.
        Ok((WgpuBuffer { buffer, class }, StreamSet::EMPTY))
    }

    fn free(&self, buffer: WgpuBuffer, _users: StreamSet) {
        // Reuse is safe while earlier work still uses the buffer: every later use is
        // submitted to the same queue, after that work.
        self.pool
            .release(buffer.buffer, buffer.class, StreamSet::EMPTY);
    }

    fn memory_stats(&self) -> MemoryStats {
        self.pool.stats()
    }

    fn trim(&self) {
        self.pool.trim(|b| self.destroy(b));
    }

    fn set_profiling(&self, on: bool) {
        if on {
            *self.origin.lock().unwrap_or_else(|p| p.into_inner()) = std::time::Instant::now();
        }
        self.profiling.store(on, Ordering::Relaxed);
    }

    fn take_timings(&self) -> Vec<Timing> {
        std::mem::take(&mut *self.timings.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn time_limit(&self) -> Option<&settings::TimeLimit> {
        Some(&self.wait_timeout)
    }
}

/// The query set and buffers of device timestamps, where the device has them.
fn timestamp_queries(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    features: wgpu::Features,
) -> Option<Mutex<Stamps>> {
    if !features.contains(wgpu::Features::TIMESTAMP_QUERY) {
        return None;
    }
    let buffer = |usage, label| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: 16,
            usage,
            mapped_at_creation: false,
        })
    };
    Some(Mutex::new(Stamps {
        set: device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("dotcompute timestamps"),
            ty: wgpu::QueryType::Timestamp,
            count: 2,
        }),
        resolve: buffer(
            wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            "dotcompute timestamp resolve",
        ),
        readback: buffer(
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            "dotcompute timestamp readback",
        ),
        period: queue.get_timestamp_period() as f64,
        inside_encoders: features.contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS),
    }))
}

#[cfg(test)]
mod error_tests {
    use super::*;

    #[test]
    fn wgpu_errors_keep_their_kind_in_structured_fields() {
        let e = wgpu::Error::Validation {
            source: Box::new(std::fmt::Error),
            description: "a binding is missing".into(),
        };
        match wgpu_error("launch", &e) {
            Error::Driver {
                backend,
                operation,
                code: 2,
                name,
                detail,
            } => {
                assert_eq!((backend.as_str(), operation.as_str()), ("wgpu", "launch"));
                assert_eq!(name, "Validation");
                assert!(detail.contains("a binding is missing"), "{detail}");
            }
            other => panic!("expected a structured Driver error, got {other:?}"),
        }
    }
}
