//! Devices: discovery and selection through the registry, allocation, streams, launches.

use crate::args::{check_arg, check_count, check_geometry, check_program, ArgView};
use crate::buffer::{Arg, ArgKind, Buffer, Element};
use crate::registry::{descriptor, not_built, registry};
use crate::stream::{AsStream, Stream};
use crate::tracking::Uses;
use dotcompute_hal::{
    registry::{no_such_device, rank},
    BackendKind, BoundArg, DeviceInfo, DynBackend, Error, KernelDef, Launch, LaunchRequest,
    MemoryStats, Program, Result, StreamId, MAX_STREAMS,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

static NEXT_DEVICE_ID: AtomicU64 = AtomicU64::new(1);

/// The environment variable that overrides `Device::best()` (`cpu`, `cuda`, `wgpu`,
/// `metal`, optionally with a device number: `cuda:1`).
pub const BACKEND_ENV: &str = "DOTCOMPUTE_BACKEND";

struct Inner {
    id: u64,
    backend: Box<dyn DynBackend>,
    /// Stream ids in use (bit 0: the default stream, always open).
    open_streams: AtomicU64,
    /// Timings taken for a trace whose write failed: given back first by the next
    /// `take_timings`, so a retry to a good path writes them.
    unwritten: std::sync::Mutex<Vec<crate::Timing>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Every buffer, stream and event holds the device, so nothing uses it any more;
        // wait for enqueued work before the backend releases its memory.
        let _ = self.backend.synchronize_all();
    }
}

/// A compute device. Cheap to clone (all clones are the same device). Each `Device`
/// created by a constructor is a distinct device with its own memory pool: a buffer can
/// only be bound to kernels on the device that allocated it.
///
/// Work given to a `Device` directly goes to its *default stream*; [`Device::stream`]
/// opens more streams (see [`Stream`]).
#[derive(Clone)]
pub struct Device {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label())
    }
}

impl Device {
    /// A device over a backend that is not in the registry: a backend crate's own test
    /// vehicle (the MSL shim of `dotcompute-metal`). Registered backends are opened with
    /// [`Device::with_backend`].
    pub fn from_backend(backend: Box<dyn DynBackend>) -> Device {
        Device {
            inner: Arc::new(Inner {
                id: NEXT_DEVICE_ID.fetch_add(1, Ordering::Relaxed),
                backend,
                open_streams: AtomicU64::new(1),
                unwritten: std::sync::Mutex::new(Vec::new()),
            }),
        }
    }

    /// A new CPU device (always available).
    pub fn cpu() -> Device {
        Device::from_backend(Box::new(dotcompute_cpu::CpuBackend::new()))
    }

    /// The first device of backend `kind`, or why there is none.
    pub fn with_backend(kind: BackendKind) -> Result<Device> {
        Device::with_backend_ordinal(kind, 0)
    }

    /// Device number `ordinal` of backend `kind`, numbered as [`crate::backends`] lists
    /// them (CUDA: the driver's order; wgpu: best adapter first; the CPU has only device 0).
    pub fn with_backend_ordinal(kind: BackendKind, ordinal: usize) -> Result<Device> {
        let d = descriptor(kind).ok_or_else(|| Error::BackendUnavailable {
            backend: kind.name().into(),
            reason: not_built(kind),
        })?;
        let present = (d.probe)().map_err(|reason| Error::BackendUnavailable {
            backend: kind.name().into(),
            reason,
        })?;
        if ordinal >= present.len() {
            return Err(no_such_device(kind, ordinal, present.len()));
        }
        Ok(Device::from_backend((d.open)(ordinal)?))
    }

    /// A device by backend name (`cpu`, `cuda`, `wgpu`/`vulkan`, `metal`), optionally with
    /// a device number: `cuda:1` is the second CUDA device.
    pub fn by_name(name: &str) -> Result<Device> {
        let (backend, ordinal) = match name.rsplit_once(':') {
            Some((b, n)) => (
                b,
                // The backend may be right and the number wrong: say which.
                Some(n.trim().parse::<usize>().map_err(|_| Error::Range {
                    op: "Device::by_name",
                    detail: format!(
                        "`{name}`: the device number `{n}` is not a non-negative integer \
                         (write `{b}:0`, `{b}:1`, ...)"
                    ),
                })?),
            ),
            None => (name, None),
        };
        let kind = BackendKind::parse(backend).ok_or_else(|| Error::UnknownBackend(name.into()))?;
        Device::with_backend_ordinal(kind, ordinal.unwrap_or(0))
    }

    /// The best device present, ranked by what it is (a discrete GPU, then an integrated
    /// one, then the native CPU backend, then a GPU API emulated on the CPU such as
    /// lavapipe) and then by backend (CUDA, wgpu, Metal): see
    /// [`dotcompute_hal::registry::rank`]. The environment variable `DOTCOMPUTE_BACKEND`
    /// overrides the choice (and is an error if that backend is unavailable).
    pub fn best() -> Result<Device> {
        if let Some(name) = dotcompute_hal::settings::value(BACKEND_ENV) {
            return Device::by_name(&name);
        }
        let mut candidates: Vec<(u32, &dotcompute_hal::BackendDescriptor, usize)> = Vec::new();
        for d in registry() {
            if let Ok(devices) = (d.probe)() {
                for (ordinal, info) in devices.iter().enumerate() {
                    candidates.push((rank(info), d, ordinal));
                }
            }
        }
        // Best first; ties keep registry order, then device order.
        candidates.sort_by_key(|c| std::cmp::Reverse(c.0));
        for (_, d, ordinal) in candidates {
            if let Ok(backend) = (d.open)(ordinal) {
                return Ok(Device::from_backend(backend));
            }
        }
        Ok(Device::cpu())
    }

    /// `Ok` when this device computes floats exactly as `dotcompute_ir` defines them:
    /// `+ - *` correctly rounded one operation at a time (no fused multiply-add, no
    /// reassociation) and 32-bit subnormals kept, so their results equal the CPU's bit
    /// for bit (up to NaN payloads; `/` follows `dotcompute_ir`'s per-backend bounds). Otherwise an `Error::Unsupported` that says what differs.
    /// Code that must not run on a device with other float results calls this first.
    pub fn require_exact_float(&self) -> Result<()> {
        let caps = &self.info().caps;
        let mut differs = Vec::new();
        if !caps.exact_float {
            differs.push(
                "its driver may fuse `a * b + c` into one rounding and reassociate sums \
                 (capability `exact_float`)",
            );
        }
        if !caps.subnormals {
            differs.push("it may flush 32-bit subnormals to zero (capability `subnormals`)");
        }
        if differs.is_empty() {
            return Ok(());
        }
        Err(Error::Unsupported {
            op: "exact float semantics",
            detail: format!("{}: {}", self.label(), differs.join("; ")),
        })
    }

    /// A process-unique id.
    pub fn id(&self) -> u64 {
        self.inner.id
    }
    pub fn info(&self) -> &DeviceInfo {
        self.inner.backend.info()
    }
    pub fn backend_kind(&self) -> BackendKind {
        self.info().backend
    }
    /// How errors and tables name this device: `cuda:0 (NVIDIA H100 80GB HBM3)`, the
    /// backend and number [`Device::by_name`] takes and the device's own name, the same
    /// in every backend's errors ([`DeviceInfo::label`]).
    pub fn label(&self) -> String {
        self.info().label()
    }

    /// The labels of two devices for an error about an object of `owner` used on
    /// `self`; when both are the same device opened twice, each with its handle number.
    pub(crate) fn labels_against(&self, owner: &Device) -> (String, String) {
        let (mine, theirs) = (self.label(), owner.label());
        if mine == theirs {
            (
                format!("{mine}, opened as device #{}", self.id()),
                format!("{theirs}, opened as device #{}", owner.id()),
            )
        } else {
            (mine, theirs)
        }
    }
    pub(crate) fn backend(&self) -> &dyn DynBackend {
        &*self.inner.backend
    }
    pub(crate) fn same(&self, other: &Device) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// A new stream of this device (see [`Stream`]). A device has at most 64 streams open
    /// at once, the default stream included.
    pub fn stream(&self) -> Result<Stream> {
        let open = &self.inner.open_streams;
        let mut current = open.load(Ordering::Acquire);
        let id = loop {
            let free = !current;
            if free == 0 {
                return Err(Error::Exhausted {
                    resource: "streams",
                    detail: format!(
                        "{} already has {MAX_STREAMS} streams open (the default stream included); drop one first",
                        self.label()
                    ),
                });
            }
            let id = free.trailing_zeros();
            match open.compare_exchange(
                current,
                current | (1 << id),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break StreamId(id),
                Err(now) => current = now,
            }
        };
        if let Err(e) = self.backend().open_stream(id) {
            open.fetch_and(!(1 << id.0), Ordering::AcqRel);
            return Err(e);
        }
        Ok(Stream::new(self.clone(), id))
    }

    /// Closes a stream opened by [`Device::stream`]; its enqueued work still runs.
    pub(crate) fn close_stream(&self, id: StreamId) {
        self.backend().close_stream(id);
        self.inner
            .open_streams
            .fetch_and(!(1 << id.0), Ordering::AcqRel);
    }

    /// Orders a use of a buffer on stream `s` after the uses it conflicts with (see the
    /// crate docs on streams).
    pub(crate) fn before_use(&self, uses: &Uses, s: StreamId, write: bool) -> Result<()> {
        uses.before_use(self.backend(), s, write)
    }

    /// A host array of `len` zeroed elements for [`Buffer::upload_async`] and
    /// [`Buffer::download_async`]: page-locked on CUDA, ordinary memory elsewhere.
    pub fn alloc_host<T: Element>(&self, len: usize) -> Result<crate::HostBuffer<T>> {
        crate::HostBuffer::new(self, len)
    }

    /// An event that completes when everything enqueued on the default stream so far has
    /// (see [`crate::Event`]).
    pub fn record_event(&self) -> Result<crate::Event> {
        crate::Event::record(self, StreamId::DEFAULT)
    }

    /// A buffer of `len` elements with unspecified contents. `len == 0` gives a valid empty
    /// buffer (which kernels cannot bind).
    pub fn alloc<T: Element>(&self, len: usize) -> Result<Buffer<T>> {
        Buffer::new(self, len)
    }
    /// A buffer holding a copy of `data`.
    pub fn upload<T: Element>(&self, data: &[T]) -> Result<Buffer<T>> {
        let mut b = Buffer::new(self, data.len())?;
        b.write(data)?;
        Ok(b)
    }
    /// A buffer of `len` copies of `value`.
    pub fn alloc_filled<T: Element>(&self, len: usize, value: T) -> Result<Buffer<T>> {
        let mut b = Buffer::new(self, len)?;
        b.fill(value)?;
        Ok(b)
    }

    /// Waits for all work submitted to the device, on every stream.
    pub fn synchronize(&self) -> Result<()> {
        self.backend().synchronize_all()
    }
    /// Memory pool statistics.
    pub fn memory_stats(&self) -> MemoryStats {
        self.backend().memory_stats()
    }
    /// Returns cached pool memory to the driver / OS.
    pub fn trim(&self) {
        self.backend().trim()
    }

    /// Sets this device's time limit, in place of the backend's `DOTCOMPUTE_*_TIMEOUT_S`
    /// (default 300 s); more than 0, at most a year. On the CPU it bounds each launch,
    /// which is then stopped (`Error::LaunchTimedOut`; the device stays usable). On CUDA
    /// and wgpu it bounds each wait for the device (a read, a synchronisation, a fence):
    /// a running GPU kernel cannot be stopped, so past the limit the device is lost
    /// (`Error::DeviceLost`, for the rest of the process), never a hang. Other handles
    /// opened on the same hardware keep their own limit. `Error::Unsupported` where
    /// [`Capabilities::time_limits`](dotcompute_hal::Capabilities::time_limits) is off.
    /// A single launch can have its own with [`Launch::time_limit`].
    ///
    /// ```
    /// # let device = dotcompute::Device::cpu();
    /// device.set_time_limit(std::time::Duration::from_secs(60))?;
    /// assert_eq!(device.time_limit()?, std::time::Duration::from_secs(60));
    /// # Ok::<(), dotcompute::Error>(())
    /// ```
    pub fn set_time_limit(&self, limit: std::time::Duration) -> Result<()> {
        match self.backend().time_limit() {
            Some(l) => l.set(limit),
            None => Err(self.no_time_limits("Device::set_time_limit")),
        }
    }

    /// This device's time limit (see [`Device::set_time_limit`]); the error of an
    /// invalid `DOTCOMPUTE_*_TIMEOUT_S`, or `Error::Unsupported` where limits are not
    /// enforced.
    pub fn time_limit(&self) -> Result<std::time::Duration> {
        match self.backend().time_limit() {
            Some(l) => Ok(l.get()?.0),
            None => Err(self.no_time_limits("Device::time_limit")),
        }
    }

    fn no_time_limits(&self, op: &'static str) -> Error {
        Error::Unsupported {
            op,
            detail: format!(
                "{} does not enforce time limits (its waits for the device are unbounded)",
                self.info().label()
            ),
        }
    }

    /// Turns profiling on or off. While on, every launch, copy, fill, transfer and graph
    /// records a [`Timing`](crate::Timing) with its stream and start time: GPU time from
    /// CUDA events or wgpu timestamp queries (wgpu launches then wait for their results),
    /// host wall time on the CPU. [`crate::trace`] writes them as a Perfetto timeline.
    pub fn set_profiling(&self, on: bool) {
        self.backend().set_profiling(on)
    }

    /// The timings recorded since the last call, oldest first.
    pub fn take_timings(&self) -> Vec<crate::Timing> {
        let mut timings = std::mem::take(
            &mut *self
                .inner
                .unwritten
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        timings.extend(self.backend().take_timings());
        timings
    }

    /// Gives back timings that could not be written (they come first at the next take).
    pub(crate) fn keep_unwritten(&self, timings: Vec<crate::Timing>) {
        let mut kept = self
            .inner
            .unwritten
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let later = std::mem::replace(&mut *kept, timings);
        kept.extend(later);
    }

    /// Compiles `kernel` for this device now rather than at its first launch (on CUDA
    /// this fills the memory and disk compile caches). Backends that compile nothing
    /// return at once.
    pub fn prepare(&self, kernel: &KernelDef) -> Result<()> {
        self.backend().prepare(kernel.program()?)
    }

    /// Launches `kernel` with untyped arguments on the default stream. `#[kernel]` launch
    /// functions call this (through [`AsStream`]) with arguments that match by
    /// construction; direct callers get every mismatch as an `Err` naming the argument:
    /// count, kind (buffer / scalar), element type, access, device, empty buffers, and
    /// buffers too long for `u32` indices.
    pub fn launch_kernel(
        &self,
        kernel: &KernelDef,
        launch: Launch,
        args: &[Arg<'_>],
    ) -> Result<()> {
        self.launch_kernel_on(StreamId::DEFAULT, kernel, launch, args)
    }

    pub(crate) fn launch_kernel_on(
        &self,
        s: StreamId,
        kernel: &KernelDef,
        launch: Launch,
        args: &[Arg<'_>],
    ) -> Result<()> {
        self.launch_program(s, kernel.program()?, launch, args)
    }

    /// Launches a hand-written kernel (see [`RawKernel`](crate::RawKernel)) with the same
    /// argument checks as `launch_kernel`. The group size is the shader's own; a
    /// different one in `launch` is an error.
    pub fn launch_raw(
        &self,
        kernel: &crate::RawKernel,
        launch: Launch,
        args: &[Arg<'_>],
    ) -> Result<()> {
        self.launch_raw_on(StreamId::DEFAULT, kernel, launch, args)
    }

    pub(crate) fn launch_raw_on(
        &self,
        s: StreamId,
        kernel: &crate::RawKernel,
        launch: Launch,
        args: &[Arg<'_>],
    ) -> Result<()> {
        // Argument mistakes are reported first, as for `#[kernel]` launches, then the
        // group size, then the language.
        let program = kernel.program();
        let bound = self.bind_args(&program.kernel, args)?;
        let launch = kernel.group_for(launch)?;
        check_program(program, self)?;
        self.launch_bound(s, program, launch, args, bound)
    }

    /// Checks, orders and enqueues one launch of `program` on stream `s`.
    pub(crate) fn launch_program(
        &self,
        s: StreamId,
        program: &Program,
        launch: Launch,
        args: &[Arg<'_>],
    ) -> Result<()> {
        let bound = self.bind_args(&program.kernel, args)?;
        check_program(program, self)?;
        self.launch_bound(s, program, launch, args, bound)
    }

    /// Enqueues a launch whose arguments `bind_args` has checked and bound.
    fn launch_bound(
        &self,
        s: StreamId,
        program: &Program,
        launch: Launch,
        args: &[Arg<'_>],
        bound: Vec<BoundArg<'_, dotcompute_hal::RawBuffer>>,
    ) -> Result<()> {
        let geometry = launch.resolve(&program.kernel, &self.info().limits)?;
        check_geometry(program, &geometry)?;
        if geometry.time_limit.is_some() && !self.info().caps.time_limits {
            return Err(self.no_time_limits("Launch::time_limit"));
        }
        self.order_args(s, args)?;
        // SAFETY: `bound` comes from bind_args: opaque `Arg`s (ranges inside their buffers,
        // element types and access checked against the kernel), writable only through
        // `&mut` borrows (so not bound twice); order_args ordered every use against other
        // streams.
        unsafe {
            self.backend().launch(
                s,
                &LaunchRequest {
                    program,
                    geometry,
                    args: bound,
                },
            )
        }
    }

    /// Orders the launch's buffer uses on `s` after conflicting uses on other streams.
    pub(crate) fn order_args(&self, s: StreamId, args: &[Arg<'_>]) -> Result<()> {
        for arg in args {
            if let ArgKind::Buffer { uses, writable, .. } = &arg.0 {
                self.before_use(uses, s, *writable)?;
            }
        }
        Ok(())
    }

    /// Checks `args` against the kernel's signature and binds them.
    pub(crate) fn bind_args<'a>(
        &self,
        ir: &dotcompute_ir::Kernel,
        args: &'a [Arg<'a>],
    ) -> Result<Vec<BoundArg<'a, dotcompute_hal::RawBuffer>>> {
        check_count(ir, args.len())?;
        let mut bound = Vec::with_capacity(args.len());
        for (param, arg) in ir.params.iter().zip(args) {
            match &arg.0 {
                ArgKind::Buffer {
                    device,
                    raw,
                    offset,
                    len,
                    elem,
                    writable,
                    ..
                } => {
                    let writable = check_arg(
                        ir,
                        param,
                        ArgView::Buffer {
                            elem: *elem,
                            writable: *writable,
                            len: *len,
                        },
                    )?;
                    if !device.same(self) {
                        let (here, owner) = self.labels_against(device);
                        return Err(Error::WrongDevice {
                            kernel: ir.name.clone(),
                            arg: param.name().to_string(),
                            buffer_device: owner,
                            device: here,
                        });
                    }
                    bound.push(BoundArg::Buffer {
                        buffer: *raw,
                        offset: offset * elem.size_bytes(),
                        len: *len,
                        elem: *elem,
                        writable,
                    });
                }
                ArgKind::Scalar(l) => {
                    check_arg(ir, param, ArgView::Scalar(*l))?;
                    bound.push(BoundArg::Scalar(*l));
                }
            }
        }
        Ok(bound)
    }
}

impl AsStream for Device {
    fn device(&self) -> &Device {
        self
    }
    fn stream_id(&self) -> StreamId {
        StreamId::DEFAULT
    }
}
