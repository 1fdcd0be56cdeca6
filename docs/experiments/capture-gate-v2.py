# Unverified (written 2026-11-27, no GPU time left to run it): the second capture gate for the
# open CUDA capture-invalidation defect (docs/architecture.md, Known issues). Applies to the
# tree at 6e628ff with: python3 docs/experiments/capture-gate-v2.py; then run the ignored
# reproducer beside graphs:: and host_transfers:: (.device/run57.sh in that session) and the
# 16-thread stress run. Module loads are left out on purpose: a thread holding the function
# cache while it waits for a capture could block the capturing thread (lock order).
import re
root='/work/main/crates/dotcompute-cuda/src/'
def edit(f, old, new, count=1):
    p=root+f; s=open(p).read()
    assert old in s, (f, old[:60]); s=s.replace(old,new,count); open(p,'w').write(s)

# 1. The gate, in driver.rs beside Context.
edit('driver.rs', """pub(crate) struct Context {
    pub(crate) handle: sys::CUcontext,""", """pub(crate) struct Context {
    /// Keeps device-synchronising driver calls from invalidating captures on other
    /// threads ([`CaptureGate`]).
    pub(crate) capture_gate: CaptureGate,
    pub(crate) handle: sys::CUcontext,""")
edit('driver.rs', "// SAFETY: a context handle may be made current on any thread.\nunsafe impl Send for Context {}", '''/// Holds back the driver calls that synchronise the device while a graph capture runs on
/// another thread: CUDA then invalidates every capture on the device, thread-local mode
/// included (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, seen in the 16-thread stress run on
/// an H100; the same behaviour is recorded in ROCm/rocm-systems#4508 and
/// llama.cpp#14033). Captures count themselves in and out; the gated calls (the pool's
/// allocations and frees, page-locked host memory, the profiler's synchronisations) wait
/// until none runs and keep new ones from starting meanwhile. A thread inside its own
/// capture is not held back (it would wait for itself).
#[derive(Default)]
pub(crate) struct CaptureGate {
    active: std::sync::Mutex<usize>,
    idle: std::sync::Condvar,
}

thread_local! {
    /// Captures this thread has begun and not ended.
    static CAPTURING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
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

    /// Runs `f` with no capture running on another thread.
    pub(crate) fn exclusive<R>(&self, f: impl FnOnce() -> R) -> R {
        if CAPTURING.with(|c| c.get()) > 0 {
            return f();
        }
        let mut active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        while *active > 0 {
            active = self.idle.wait(active).unwrap_or_else(|p| p.into_inner());
        }
        let r = f();
        drop(active);
        r
    }
}

// SAFETY: a context handle may be made current on any thread.
unsafe impl Send for Context {}''')
edit('driver.rs', """            hung: std::sync::atomic::AtomicBool::new(false),""", """            hung: std::sync::atomic::AtomicBool::new(false),
            capture_gate: CaptureGate::default(),""")

# 2. Captures count in and out.
edit('graph.rs', """    pub(crate) fn begin_capture_on(&self, s: StreamId) -> Result<bool> {
        bind(&self.ctx)?;
        let stream = self.stream(s)?;""", """    pub(crate) fn begin_capture_on(&self, s: StreamId) -> Result<bool> {
        bind(&self.ctx)?;
        let stream = self.stream(s)?;
        self.ctx.capture_gate.enter();""")
edit('graph.rs', """        }
        .during("cuStreamBeginCapture")?;
        Ok(true)
    }""", """        }
        .during("cuStreamBeginCapture")
        .inspect_err(|_| self.ctx.capture_gate.leave())?;
        Ok(true)
    }""")
edit('graph.rs', """    ) -> Result<Option<Box<dyn GraphExec>>> {
        bind(&self.ctx)?;
        let stream = self.stream(s)?;
        // The kernel nodes this capture's launches noted.""", """    ) -> Result<Option<Box<dyn GraphExec>>> {
        // The capture is counted out however this returns (a count left behind would
        // hold every gated call back for good).
        struct CountedOut<'a>(&'a crate::driver::CaptureGate);
        impl Drop for CountedOut<'_> {
            fn drop(&mut self) {
                self.0.leave();
            }
        }
        let counted = CountedOut(&self.ctx.capture_gate);
        bind(&self.ctx)?;
        let stream = self.stream(s)?;
        // The kernel nodes this capture's launches noted.""")
edit('graph.rs', """        unsafe { sys::cuStreamEndCapture(stream, &mut graph) }.during("cuStreamEndCapture")?;""", """        let ended = unsafe { sys::cuStreamEndCapture(stream, &mut graph) };
        drop(counted);
        ended.during("cuStreamEndCapture")?;""")

# 3. The gated calls.
edit('memory.rs', """        let (ptr, class, users) = self.pool.acquire(
            bytes,
            // SAFETY: plain allocation; the memory is owned by the pool from here on.
            |class| unsafe { cu::malloc_sync(class) }.map_err(|e| self.alloc_error(bytes, e)),
            self.driver_free(),
        )?;""", """        // The pool may go to the driver: not while another thread captures.
        let (ptr, class, users) = self.ctx.capture_gate.exclusive(|| {
            self.pool.acquire(
                bytes,
                // SAFETY: plain allocation; the memory is owned by the pool from here on.
                |class| unsafe { cu::malloc_sync(class) }.map_err(|e| self.alloc_error(bytes, e)),
                self.driver_free(),
            )
        })?;""")
edit('memory.rs', """        let ptr = unsafe { cu::malloc_host(bytes, PORTABLE) }.map_err(|e| {""", """        let ptr = self
            .ctx
            .capture_gate
            .exclusive(|| unsafe { cu::malloc_host(bytes, PORTABLE) })
            .map_err(|e| {""")
edit('memory.rs', """            let _ = unsafe { cu::free_host(self.ptr.cast()) };""", """            // Not while another thread captures (`driver::CaptureGate`).
            let _ = self
                .ctx
                .capture_gate
                .exclusive(|| unsafe { cu::free_host(self.ptr.cast()) });""")
edit('lib.rs', """            self.pool.trim(self.driver_free());""", """            self.ctx
                .capture_gate
                .exclusive(|| self.pool.trim(self.driver_free()));""")
edit('profile.rs', """                // SAFETY: live handles.
                unsafe {
                    let _ = sys::cuCtxSynchronize();
                    let _ = cu::event::record(e.0, stream);
                }""", """                // Not while another thread captures (`driver::CaptureGate`).
                // SAFETY: live handles.
                self.ctx.capture_gate.exclusive(|| unsafe {
                    let _ = sys::cuCtxSynchronize();
                    let _ = cu::event::record(e.0, stream);
                });""")
edit('profile.rs', """        // SAFETY: waits for every stream, so every event has completed.
        if unsafe { sys::cuCtxSynchronize() } != sys::CUresult::CUDA_SUCCESS {""", """        // SAFETY: waits for every stream, so every event has completed; not while another
        // thread captures (`driver::CaptureGate`).
        let synced = self
            .ctx
            .capture_gate
            .exclusive(|| unsafe { sys::cuCtxSynchronize() });
        if synced != sys::CUresult::CUDA_SUCCESS {""")
print("patched")
