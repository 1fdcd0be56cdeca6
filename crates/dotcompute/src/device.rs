//! Devices: discovery, selection, allocation and launches.

use crate::buffer::{Arg, Buffer, Element};
use dotcompute_hal::{
    BackendKind, BoundArg, DeviceInfo, DynBackend, Error, KernelDef, Launch, LaunchRequest,
    MemoryStats, Result,
};
use dotcompute_ir::{Access, Param};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

static NEXT_DEVICE_ID: AtomicU64 = AtomicU64::new(1);

/// The environment variable that overrides `Device::best()` (`cpu`, `cuda`, `wgpu`, `metal`).
pub const BACKEND_ENV: &str = "DOTCOMPUTE_BACKEND";

struct Inner {
    id: u64,
    backend: Box<dyn DynBackend>,
}

/// A compute device. Cheap to clone (all clones are the same device). Each `Device`
/// created by a constructor is a distinct device with its own memory pool: a buffer can
/// only be bound to kernels on the device that allocated it.
#[derive(Clone)]
pub struct Device {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label())
    }
}

/// Whether a backend is usable here, and why not.
#[derive(Clone, Debug)]
pub struct BackendStatus {
    pub kind: BackendKind,
    /// The devices found, or the reason the backend is unavailable.
    pub devices: std::result::Result<Vec<DeviceInfo>, String>,
}

fn unavailable(kind: BackendKind) -> String {
    match kind {
        BackendKind::Cpu => unreachable!("the CPU backend is always built"),
        BackendKind::Cuda if cfg!(feature = "cuda") => unreachable!("probed instead"),
        BackendKind::Cuda => {
            "not built into this binary (enable dotcompute's `cuda` feature)".into()
        }
        BackendKind::Wgpu if cfg!(feature = "wgpu") => unreachable!("probed instead"),
        BackendKind::Wgpu => {
            "not built into this binary (enable dotcompute's `wgpu` feature)".into()
        }
        BackendKind::Metal => "not implemented yet: the native Metal backend is planned".into(),
    }
}

#[cfg(feature = "wgpu")]
fn wgpu_devices() -> std::result::Result<Vec<DeviceInfo>, String> {
    dotcompute_wgpu::devices()
}
#[cfg(not(feature = "wgpu"))]
fn wgpu_devices() -> std::result::Result<Vec<DeviceInfo>, String> {
    Err(unavailable(BackendKind::Wgpu))
}

#[cfg(feature = "cuda")]
fn cuda_devices() -> std::result::Result<Vec<DeviceInfo>, String> {
    dotcompute_cuda::devices()
}
#[cfg(not(feature = "cuda"))]
fn cuda_devices() -> std::result::Result<Vec<DeviceInfo>, String> {
    Err(unavailable(BackendKind::Cuda))
}

/// Every backend dotcompute knows, in preference order, with its devices or the reason it
/// is unavailable.
pub fn backends() -> Vec<BackendStatus> {
    BackendKind::PREFERENCE
        .iter()
        .map(|&kind| BackendStatus {
            kind,
            devices: match kind {
                BackendKind::Cpu => Ok(vec![dotcompute_hal::Backend::info(
                    &dotcompute_cpu::CpuBackend::new(),
                )
                .clone()]),
                BackendKind::Wgpu => wgpu_devices(),
                BackendKind::Cuda => cuda_devices(),
                other => Err(unavailable(other)),
            },
        })
        .collect()
}

impl Device {
    fn from_backend(backend: Box<dyn DynBackend>) -> Device {
        Device {
            inner: Arc::new(Inner {
                id: NEXT_DEVICE_ID.fetch_add(1, Ordering::Relaxed),
                backend,
            }),
        }
    }

    /// A new CPU device (always available).
    pub fn cpu() -> Device {
        Device::from_backend(Box::new(dotcompute_cpu::CpuBackend::new()))
    }

    /// The first device of backend `kind`, or why there is none.
    pub fn with_backend(kind: BackendKind) -> Result<Device> {
        match kind {
            BackendKind::Cpu => Ok(Device::cpu()),
            #[cfg(feature = "wgpu")]
            BackendKind::Wgpu => Ok(Device::from_backend(Box::new(
                dotcompute_wgpu::WgpuBackend::new()?,
            ))),
            #[cfg(feature = "cuda")]
            BackendKind::Cuda => Ok(Device::from_backend(Box::new(
                dotcompute_cuda::CudaBackend::new()?,
            ))),
            other => Err(Error::BackendUnavailable {
                backend: other.name().into(),
                reason: unavailable(other),
            }),
        }
    }

    /// Device number `ordinal` of backend `kind`, numbered as [`backends`] lists them
    /// (CUDA: the driver's order; wgpu: best adapter first; the CPU has only device 0).
    pub fn with_backend_ordinal(kind: BackendKind, ordinal: usize) -> Result<Device> {
        let out_of_range = |present: usize| Error::BackendUnavailable {
            backend: kind.name().into(),
            reason: format!(
                "there is no device {ordinal}: {present} device{} present (numbered from 0)",
                if present == 1 { " is" } else { "s are" }
            ),
        };
        match kind {
            BackendKind::Cpu if ordinal == 0 => Ok(Device::cpu()),
            BackendKind::Cpu => Err(out_of_range(1)),
            #[cfg(feature = "wgpu")]
            BackendKind::Wgpu => {
                let mut adapters = dotcompute_wgpu::adapters();
                if ordinal >= adapters.len() {
                    return Err(match adapters.len() {
                        0 => Device::with_backend(kind).err().unwrap_or(out_of_range(0)),
                        n => out_of_range(n),
                    });
                }
                Ok(Device::from_backend(Box::new(
                    dotcompute_wgpu::WgpuBackend::open(adapters.swap_remove(ordinal))?,
                )))
            }
            #[cfg(feature = "cuda")]
            BackendKind::Cuda => {
                let present =
                    dotcompute_cuda::devices().map_err(|reason| Error::BackendUnavailable {
                        backend: kind.name().into(),
                        reason,
                    })?;
                if ordinal >= present.len() {
                    return Err(out_of_range(present.len()));
                }
                Ok(Device::from_backend(Box::new(
                    dotcompute_cuda::CudaBackend::with_ordinal(ordinal as i32)?,
                )))
            }
            other => Device::with_backend(other),
        }
    }

    /// A device by backend name (`cpu`, `cuda`, `wgpu`/`vulkan`, `metal`), optionally with
    /// a device number: `cuda:1` is the second CUDA device.
    pub fn by_name(name: &str) -> Result<Device> {
        let (backend, ordinal) = match name.rsplit_once(':') {
            Some((b, n)) => (
                b,
                Some(n.trim().parse::<usize>().map_err(|_| {
                    Error::UnknownBackend(format!("{name} (the device number must be an integer)"))
                })?),
            ),
            None => (name, None),
        };
        let kind = BackendKind::parse(backend).ok_or_else(|| Error::UnknownBackend(name.into()))?;
        match ordinal {
            Some(n) => Device::with_backend_ordinal(kind, n),
            None => Device::with_backend(kind),
        }
    }

    /// The best device present: CUDA, then Metal, then wgpu, then the CPU. The environment
    /// variable `DOTCOMPUTE_BACKEND` overrides the choice (and is an error if that backend
    /// is unavailable).
    pub fn best() -> Result<Device> {
        if let Ok(name) = std::env::var(BACKEND_ENV) {
            if !name.trim().is_empty() {
                return Device::by_name(&name);
            }
        }
        for kind in BackendKind::PREFERENCE {
            if let Ok(d) = Device::with_backend(kind) {
                return Ok(d);
            }
        }
        Ok(Device::cpu())
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
    /// `cpu#1 (model name)`.
    pub fn label(&self) -> String {
        format!(
            "{}#{} ({})",
            self.backend_kind(),
            self.id(),
            self.info().name
        )
    }
    pub(crate) fn backend(&self) -> &dyn DynBackend {
        &*self.inner.backend
    }

    /// A host array of `len` zeroed elements for [`Buffer::upload_async`] and
    /// [`Buffer::download_async`]: page-locked on CUDA, ordinary memory elsewhere.
    pub fn alloc_host<T: Element>(&self, len: usize) -> Result<crate::HostBuffer<T>> {
        crate::HostBuffer::new(self, len)
    }

    /// An event that completes when everything enqueued on this device so far has (see
    /// [`crate::Event`]). On backends without device events it waits now and is complete.
    pub fn record_event(&self) -> Result<crate::Event> {
        crate::Event::record(self)
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

    /// Waits for all work submitted to the device.
    pub fn synchronize(&self) -> Result<()> {
        self.backend().synchronize()
    }
    /// Memory pool statistics.
    pub fn memory_stats(&self) -> MemoryStats {
        self.backend().memory_stats()
    }
    /// Returns cached pool memory to the driver / OS.
    pub fn trim(&self) {
        self.backend().trim()
    }

    /// Turns profiling on or off. While on, every launch and device-to-device copy records
    /// a [`Timing`](crate::Timing): GPU time from timestamp queries on wgpu adapters that
    /// support them (launches then wait for their results), host wall time on the CPU.
    pub fn set_profiling(&self, on: bool) {
        self.backend().set_profiling(on)
    }

    /// The timings recorded since the last call, oldest first.
    pub fn take_timings(&self) -> Vec<crate::Timing> {
        self.backend().take_timings()
    }

    /// Compiles `kernel` for this device now rather than at its first launch (on CUDA
    /// this fills the memory and disk compile caches). Backends that compile nothing
    /// return at once.
    pub fn prepare(&self, kernel: &KernelDef) -> Result<()> {
        self.backend().prepare(kernel.ir()?)
    }

    /// Launches `kernel` with untyped arguments. `#[kernel]` launch functions call this
    /// with arguments that match by construction; direct callers get every mismatch as an
    /// `Err` naming the argument: count, kind (buffer / scalar), element type, access,
    /// device, empty buffers, and buffers too long for `u32` indices.
    pub fn launch_kernel(
        &self,
        kernel: &KernelDef,
        launch: Launch,
        args: &[Arg<'_>],
    ) -> Result<()> {
        let ir = kernel.ir()?;
        let bound = self.bind_args(ir, args)?;
        let geometry = launch.resolve(ir, &self.info().limits)?;
        self.backend().launch(&LaunchRequest {
            kernel: ir,
            native: kernel.native(),
            geometry,
            args: bound,
            raw: None,
        })
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
        let ir = kernel.signature();
        let bound = self.bind_args(ir, args)?;
        let launch = match (kernel.source().workgroup_size, launch.group_size()) {
            (None, _) => launch,
            (Some([x, y, z]), None) => launch.group3d(x, y, z),
            (Some(declared), Some(g)) if g == declared => launch,
            (Some([x, y, z]), Some(g)) => {
                return Err(Error::InvalidGroupSize {
                    kernel: ir.name.clone(),
                    detail: format!(
                    "{g:?} was requested, but the shader declares @workgroup_size({x}, {y}, {z})"
                ),
                })
            }
        };
        let runs_on = match kernel.language() {
            "cuda" => BackendKind::Cuda,
            _ => BackendKind::Wgpu,
        };
        if self.backend_kind() != runs_on {
            return Err(Error::Backend {
                backend: self.backend_kind().name().into(),
                message: format!(
                    "kernel `{}` is written in {} and runs only on {runs_on} devices",
                    ir.name,
                    kernel.language()
                ),
            });
        }
        let geometry = launch.resolve(ir, &self.info().limits)?;
        self.backend().launch(&LaunchRequest {
            kernel: ir,
            native: None,
            geometry,
            args: bound,
            raw: Some(kernel.source()),
        })
    }

    /// Checks `args` against the kernel's signature and binds them.
    fn bind_args<'a>(
        &self,
        ir: &std::sync::Arc<dotcompute_ir::Kernel>,
        args: &'a [Arg<'a>],
    ) -> Result<Vec<BoundArg<'a, dotcompute_hal::RawBuffer>>> {
        if args.len() != ir.params.len() {
            return Err(Error::ArgumentCount {
                kernel: ir.name.clone(),
                expected: ir.params.len(),
                found: args.len(),
            });
        }
        let mut bound = Vec::with_capacity(args.len());
        for (param, arg) in ir.params.iter().zip(args) {
            let mismatch = |expected: String, found: String| Error::ArgumentType {
                kernel: ir.name.clone(),
                arg: param.name().to_string(),
                expected,
                found,
            };
            match (param, arg) {
                (
                    Param::Buffer { elem, access, .. },
                    Arg::Buffer {
                        device,
                        raw,
                        len,
                        elem: arg_elem,
                        writable,
                    },
                ) => {
                    let want_write = *access == Access::ReadWrite;
                    if elem != arg_elem || (want_write && !writable) {
                        return Err(mismatch(
                            format!("{}[{elem}]", if want_write { "&mut " } else { "&" }),
                            format!(
                                "a {} buffer of {arg_elem}",
                                if *writable { "writable" } else { "read-only" }
                            ),
                        ));
                    }
                    if *device != self.id() {
                        return Err(Error::WrongDevice {
                            kernel: ir.name.clone(),
                            arg: param.name().to_string(),
                            buffer_device: format!("#{device}"),
                            device: self.label(),
                        });
                    }
                    if *len == 0 {
                        return Err(Error::EmptyBuffer {
                            kernel: ir.name.clone(),
                            arg: param.name().to_string(),
                        });
                    }
                    if *len > u32::MAX as usize {
                        return Err(mismatch(
                            format!("at most {} elements (indices are u32)", u32::MAX),
                            format!("{len} elements"),
                        ));
                    }
                    bound.push(BoundArg::Buffer {
                        buffer: *raw,
                        offset: 0,
                        len: *len,
                        elem: *elem,
                        writable: *writable && want_write,
                    });
                }
                (Param::Scalar { ty, .. }, Arg::Scalar(l)) => {
                    if l.ty() != *ty {
                        return Err(mismatch(ty.name().into(), format!("a {} scalar", l.ty())));
                    }
                    bound.push(BoundArg::Scalar(*l));
                }
                (Param::Buffer { elem, .. }, Arg::Scalar(l)) => {
                    return Err(mismatch(
                        format!("a buffer of {elem}"),
                        format!("a {} scalar", l.ty()),
                    ))
                }
                (Param::Scalar { ty, .. }, Arg::Buffer { elem, .. }) => {
                    return Err(mismatch(
                        format!("a {ty} scalar"),
                        format!("a buffer of {elem}"),
                    ))
                }
            }
        }
        Ok(bound)
    }
}
