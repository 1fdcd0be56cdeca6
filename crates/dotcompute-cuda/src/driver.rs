//! Loading the CUDA libraries without panicking, and turning driver errors into ours.

use cudarc::driver::{result as cu, sys, DriverError};
use dotcompute_hal::Error;
use std::sync::{Arc, Mutex, OnceLock, Weak};

pub(crate) const BACKEND: &str = "cuda";

/// Whether libcuda and libnvrtc can be loaded and the driver initialised: `Err` is a
/// one-line reason. cudarc panics when a library is missing, so every entry point of this
/// crate calls this first; the result is computed once per process.
pub fn probe() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            // SAFETY: these only try to dlopen the libraries and drop them again.
            if !unsafe { sys::is_culib_present() } {
                return Err("CUDA driver library (libcuda.so) not found".into());
            }
            // SAFETY: as above, a dlopen and a drop.
            if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
                return Err(
                    "NVRTC library (libnvrtc.so) not found; install the CUDA runtime compiler"
                        .into(),
                );
            }
            cu::init().map_err(|e| format!("cuInit failed: {}", describe(e)))?;
            let n = cu::device::get_count()
                .map_err(|e| format!("cuDeviceGetCount failed: {}", describe(e)))?;
            if n == 0 {
                return Err("the CUDA driver reports no devices".into());
            }
            Ok(())
        })
        .clone()
}

/// Whether cuBLAS can be loaded (checked once; matmul falls back to the generated kernel).
pub(crate) fn cublas_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to dlopen the library.
    *PRESENT.get_or_init(|| unsafe { cudarc::cublas::sys::is_culib_present() })
}

/// The driver's name of `e` (`CUDA_ERROR_X`) and its description, if it has one.
fn name_and_detail(e: DriverError) -> (String, Option<String>) {
    let name = e
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0));
    let detail = e
        .error_string()
        .ok()
        .map(|s| s.to_string_lossy().into_owned());
    (name, detail)
}

/// `CUDA_ERROR_X (what it means)`.
pub(crate) fn describe(e: DriverError) -> String {
    match name_and_detail(e) {
        (name, Some(detail)) => format!("{name} ({detail})"),
        (name, None) => name,
    }
}

/// A driver failure during `op` as our error. A sticky error (the context can do nothing
/// more: an illegal address, a failed launch, ...) marks the current context lost and is
/// `Error::DeviceLost`; so is any error on a context already lost.
pub(crate) fn driver_error(op: &str, e: DriverError) -> Error {
    if is_sticky(e.0) {
        let message = format!("{op}: {}", describe(e));
        if let Some(ctx) = current_context() {
            ctx.mark_lost(&message);
            return ctx
                .lost_error()
                .unwrap_or_else(|| lost(ctx.ordinal, message));
        }
        return Error::DeviceLost {
            device: "cuda".into(),
            reason: message,
        };
    }
    let (name, detail) = name_and_detail(e);
    Error::Driver {
        backend: BACKEND.into(),
        operation: op.to_string(),
        code: e.0 as i64,
        name,
        detail: detail.unwrap_or_default(),
    }
}

/// `Error::DeviceLost` for device `ordinal`, named as `DeviceInfo::label` names it
/// (the name query needs no context, so it works on a lost device).
fn lost(ordinal: i32, reason: String) -> Error {
    let name = cu::device::get(ordinal).and_then(cu::device::get_name);
    Error::DeviceLost {
        device: match name {
            Ok(name) => format!("cuda:{ordinal} ({name})"),
            Err(_) => format!("cuda:{ordinal}"),
        },
        reason,
    }
}

/// Errors after which a CUDA context is unusable ("sticky" in the driver's documentation):
/// every later call on it fails, so the device is lost.
fn is_sticky(code: sys::CUresult) -> bool {
    use sys::CUresult::*;
    matches!(
        code,
        CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_LAUNCH_FAILED
            | CUDA_ERROR_LAUNCH_TIMEOUT
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUDA_ERROR_MISALIGNED_ADDRESS
            | CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_ASSERT
            | CUDA_ERROR_ECC_UNCORRECTABLE
    )
}

/// A device's primary context, shared by every backend (and every handle a backend hands
/// out) on that device, and whether it is lost. Dropped with its last user; a lost
/// context is then reset. The driver still refuses the device for the rest of the process
/// after a sticky error (NVIDIA: "the process must be terminated and relaunched"), so
/// opening it again is `DeviceLost` with that reason: recovery is a new process.
pub(crate) struct Context {
    /// Keeps device-synchronising driver calls from invalidating captures on other
    /// threads ([`CaptureGate`]).
    pub(crate) capture_gate: CaptureGate,
    pub(crate) handle: sys::CUcontext,
    pub(crate) device: sys::CUdevice,
    pub(crate) ordinal: i32,
    lost: OnceLock<String>,
    /// Lost because work did not finish ([`wait_bounded`]): the context is never
    /// released or reset (either would wait for that work); the process's exit ends it.
    hung: std::sync::atomic::AtomicBool,
}

/// Holds back the driver calls that synchronise the device while a graph capture runs on
/// another thread: CUDA then invalidates every capture on the device, thread-local mode
/// included (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, seen in the 16-thread stress run on
/// an H100; the same behaviour is recorded in ROCm/rocm-systems#4508 and
/// llama.cpp#14033). Captures count themselves in and out; the gated calls (the pool's
/// allocations and frees, page-locked host memory, module loads, violation records, the
/// profiler's synchronisations, a dropped backend's release) wait until none runs and
/// keep new ones from starting meanwhile. A thread inside its own
/// capture is not held back (it would wait for itself).
#[derive(Default)]
pub(crate) struct CaptureGate {
    active: std::sync::Mutex<usize>,
    idle: std::sync::Condvar,
}

thread_local! {
    /// Captures this thread has begun and not ended.
    static CAPTURING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// Whether this thread is running a gated call ([`CaptureGate::exclusive`]).
    static INSIDE_GATE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl CaptureGate {
    /// Counts a capture in (before `cuStreamBeginCapture`).
    pub(crate) fn enter(&self) {
        *self.active.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        CAPTURING.with(|c| c.set(c.get() + 1));
    }

    /// Counts a capture out (after `cuStreamEndCapture`, or a failed begin).
    pub(crate) fn leave(&self) {
        let mut active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        *active = active.saturating_sub(1);
        CAPTURING.with(|c| c.set(c.get().saturating_sub(1)));
        if *active == 0 {
            self.idle.notify_all();
        }
    }

    /// Runs `f` with no capture running on another thread. Gated calls nest (a gated
    /// call made inside `f` runs at once: the gate is already held).
    pub(crate) fn exclusive<R>(&self, f: impl FnOnce() -> R) -> R {
        if CAPTURING.with(|c| c.get()) > 0 || INSIDE_GATE.with(|g| g.get()) {
            return f();
        }
        let mut active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        while *active > 0 {
            active = self.idle.wait(active).unwrap_or_else(|p| p.into_inner());
        }
        // Cleared however `f` returns: a panic in it must not leave the thread thinking it
        // holds the gate.
        struct Inside;
        impl Drop for Inside {
            fn drop(&mut self) {
                INSIDE_GATE.with(|g| g.set(false));
            }
        }
        INSIDE_GATE.with(|g| g.set(true));
        let inside = Inside;
        let r = f();
        drop(inside);
        drop(active);
        r
    }
}

// SAFETY: a context handle may be made current on any thread.
unsafe impl Send for Context {}
// SAFETY: shared use is sound for the reason above (Send).
unsafe impl Sync for Context {}

/// The live contexts, by device ordinal (weak: a context lives as long as its users).
static CONTEXTS: Mutex<Vec<(i32, Weak<Context>)>> = Mutex::new(Vec::new());

impl Context {
    /// The primary context of device `ordinal`: the live one if there is one, else newly
    /// retained. A live context that is lost is an error: its users must go first.
    pub(crate) fn primary(ordinal: i32) -> Result<Arc<Context>, Error> {
        // The registry's lock is never held across a driver call: a failing call reports
        // through `driver_error`, which looks the current context up in the registry.
        if let Some(ctx) = live_context(
            &mut CONTEXTS.lock().unwrap_or_else(|p| p.into_inner()),
            ordinal,
        ) {
            return ctx.usable();
        }
        let device = cu::device::get(ordinal).during("cuDeviceGet")?;
        // A thread still bound to a lost context that was reset gets that context's error
        // from every call: start unbound (`bind` makes the new context current).
        let mut current: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: reads and writes this thread's binding only.
        unsafe {
            if sys::cuCtxGetCurrent(&mut current) != sys::CUresult::CUDA_SUCCESS {
                let _ = sys::cuCtxSetCurrent(std::ptr::null_mut());
            }
        }
        // SAFETY: device is valid; the retained context is released in Drop.
        let handle = unsafe { cu::primary_ctx::retain(device) }.map_err(|e| {
            if is_sticky(e.0) {
                // Measured on an H100 (driver 580): after a sticky error, even a reset
                // primary context cannot be retained again; NVIDIA documents that the
                // process must be restarted.
                lost(
                    ordinal,
                    format!(
                        "{}: CUDA cannot be used again in this process after a sticky error \
                         (the driver's rule); restart the process, or run work that may \
                         fault in a child process",
                        describe(e)
                    ),
                )
            } else {
                driver_error("cuDevicePrimaryCtxRetain", e)
            }
        })?;
        let ctx = Arc::new(Context {
            handle,
            device,
            ordinal,
            lost: OnceLock::new(),
            hung: std::sync::atomic::AtomicBool::new(false),
            capture_gate: CaptureGate::default(),
        });
        let mut list = CONTEXTS.lock().unwrap_or_else(|p| p.into_inner());
        // Another thread may have registered the device meanwhile: share its context
        // (ours is released when dropped).
        if let Some(other) = live_context(&mut list, ordinal) {
            drop(list);
            return other.usable();
        }
        list.push((ordinal, Arc::downgrade(&ctx)));
        Ok(ctx)
    }

    /// This context, or `Error::DeviceLost` if it is lost.
    fn usable(self: Arc<Self>) -> Result<Arc<Context>, Error> {
        match self.lost_error() {
            Some(e) => Err(e),
            None => Ok(self),
        }
    }

    fn mark_lost(&self, reason: &str) {
        let _ = self.lost.set(reason.to_string());
    }

    /// `Error::DeviceLost` if this context is lost.
    pub(crate) fn lost_error(&self) -> Option<Error> {
        self.lost.get().map(|r| lost(self.ordinal, r.clone()))
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        if self.hung.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        // SAFETY: retained in `primary`; released once. A lost context is reset too (its
        // state is unusable): the next retain creates a fresh one.
        unsafe {
            let _ = cu::primary_ctx::release(self.device);
            if self.lost.get().is_some() {
                let _ = sys::cuDevicePrimaryCtxReset_v2(self.device);
                let _ = sys::cuCtxSetCurrent(std::ptr::null_mut());
            }
        }
    }
}

/// The live context of device `ordinal` in the registry, dropping entries whose context is
/// gone.
fn live_context(list: &mut Vec<(i32, Weak<Context>)>, ordinal: i32) -> Option<Arc<Context>> {
    list.retain(|(_, w)| w.strong_count() > 0);
    list.iter()
        .find(|(o, _)| *o == ordinal)
        .and_then(|(_, w)| w.upgrade())
}

/// The live context that is current on this thread, if any.
fn current_context() -> Option<Arc<Context>> {
    let mut current: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: writes one pointer.
    if unsafe { sys::cuCtxGetCurrent(&mut current) } != sys::CUresult::CUDA_SUCCESS {
        return None;
    }
    let live = CONTEXTS.lock().unwrap_or_else(|p| p.into_inner());
    live.iter()
        .filter_map(|(_, w)| w.upgrade())
        .find(|c| c.handle == current)
}

/// Waits until `query` (`cuStreamQuery` or `cuEventQuery` of the work waited for) says
/// it is done, at most `timeout`: a kernel that never ends makes the device lost
/// (`Error::DeviceLost` naming `op`, the limit and `set_by`, what set it) instead of
/// hanging the caller. Work
/// cannot be stopped on CUDA short of destroying the context, so the device is unusable
/// afterwards either way. The wait spins for the first 50 µs (short waits stay as quick
/// as a blocking synchronisation), then yields, then sleeps up to 1 ms at a time.
pub(crate) fn wait_bounded(
    ctx: &Context,
    op: &str,
    timeout: std::time::Duration,
    set_by: &str,
    mut query: impl FnMut() -> sys::CUresult,
) -> Result<(), Error> {
    use std::time::{Duration, Instant};
    let start = Instant::now();
    loop {
        match query() {
            sys::CUresult::CUDA_SUCCESS => return Ok(()),
            sys::CUresult::CUDA_ERROR_NOT_READY => {}
            other => return Err(driver_error(op, DriverError(other))),
        }
        let waited = start.elapsed();
        if waited >= timeout {
            // The work still runs: releasing or resetting the context would wait for it.
            ctx.hung.store(true, std::sync::atomic::Ordering::Relaxed);
            ctx.mark_lost(&format!(
                "{op}: the work did not finish within {timeout:?} (a kernel that never ends? \
                 {set_by} set the limit); a running CUDA kernel cannot be stopped, so the \
                 device cannot be used again in this process"
            ));
            return Err(ctx.lost_error().expect("just marked lost"));
        }
        if waited < Duration::from_micros(50) {
            std::hint::spin_loop();
        } else if waited < Duration::from_millis(2) {
            std::thread::yield_now();
        } else {
            std::thread::sleep((waited / 16).min(Duration::from_millis(1)));
        }
    }
}

/// Extension to turn `Result<T, DriverError>` into ours with the operation's name.
pub(crate) trait Check<T> {
    fn during(self, op: &str) -> Result<T, Error>;
}

impl<T> Check<T> for Result<T, DriverError> {
    fn during(self, op: &str) -> Result<T, Error> {
        self.map_err(|e| driver_error(op, e))
    }
}

impl Check<()> for sys::CUresult {
    fn during(self, op: &str) -> Result<(), Error> {
        self.result().during(op)
    }
}

/// Makes `ctx` current on this thread if it is not already (driver calls act on the
/// calling thread's current context; a user's thread may have none or another one).
/// A lost context is `Error::DeviceLost` at once: nothing more is asked of the driver
/// (which is also what keeps the `Drop`s of a lost device's handles away from it).
pub(crate) fn bind(ctx: &Context) -> Result<(), Error> {
    if let Some(e) = ctx.lost_error() {
        return Err(e);
    }
    let mut current: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: writes one pointer.
    unsafe { sys::cuCtxGetCurrent(&mut current) }.during("cuCtxGetCurrent")?;
    if current != ctx.handle {
        // SAFETY: ctx is a retained primary context that outlives its users.
        unsafe { cu::ctx::set_current(ctx.handle) }.during("cuCtxSetCurrent")?;
    }
    Ok(())
}
