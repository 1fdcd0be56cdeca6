//! Loading the CUDA libraries without panicking, and turning driver errors into ours.

use cudarc::driver::{result as cu, sys, DriverError};
use dotcompute_hal::Error;
use std::sync::OnceLock;

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

/// `CUDA_ERROR_X (what it means)`.
pub(crate) fn describe(e: DriverError) -> String {
    let name = e
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0));
    match e.error_string() {
        Ok(s) => format!("{name} ({})", s.to_string_lossy()),
        Err(_) => name,
    }
}

/// A driver failure during `op` as our error.
pub(crate) fn driver_error(op: &str, e: DriverError) -> Error {
    Error::Backend {
        backend: BACKEND.into(),
        message: format!("{op}: {}", describe(e)),
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
pub(crate) fn bind(ctx: sys::CUcontext) -> Result<(), Error> {
    let mut current: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: writes one pointer.
    unsafe { sys::cuCtxGetCurrent(&mut current) }.during("cuCtxGetCurrent")?;
    if current != ctx {
        // SAFETY: ctx is a retained primary context that outlives the backend.
        unsafe { cu::ctx::set_current(ctx) }.during("cuCtxSetCurrent")?;
    }
    Ok(())
}
