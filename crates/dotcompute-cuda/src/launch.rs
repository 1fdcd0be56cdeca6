//! Launches: parameter slots filled from the program's own layout, the choice between
//! the plain, grid-stride and vector entry points, and the driver call.

use crate::driver::{bind, driver_error, Check, BACKEND};
use crate::memory::CudaBuffer;
use crate::CudaBackend;
use cudarc::driver::{result as cu, sys};
use dotcompute_codegen::cuda::ParamSlot;
use dotcompute_hal::{BoundArg, Error, LaunchRequest, Result, StreamId};
use dotcompute_ir::Literal;
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

/// Kernel parameters beyond this count are refused (generated kernels add one length per
/// buffer and four geometry words).
const MAX_PARAMS: usize = 128;

/// The bits of a scalar argument, little-endian in a u64 slot (the driver reads the
/// parameter's own size from its start).
fn scalar_bits(l: Literal) -> u64 {
    match l {
        Literal::Bool(b) => b as u64,
        Literal::I32(v) => v as u32 as u64,
        Literal::U32(v) => v as u64,
        Literal::I64(v) => v as u64,
        Literal::U64(v) => v,
        Literal::F32(bits) => bits as u64,
        Literal::F64(bits) => bits,
        // An f16 scalar parameter is declared as a float (see the code generator).
        Literal::F16(bits) => half::f16::from_bits(bits).to_f32().to_bits() as u64,
    }
}

impl CudaBackend {
    pub(crate) fn launch_on(
        &self,
        s: StreamId,
        request: &LaunchRequest<'_, CudaBuffer>,
    ) -> Result<()> {
        bind(&self.ctx)?;
        let stream = self.stream(s)?;
        let program = request.program;
        let kernel = &*program.kernel;
        let g = request.geometry;
        let checked = g.checked && program.raw_source().is_none();
        let function = self.function(program, checked)?.0;
        if function.params.len() > MAX_PARAMS {
            return Err(Error::Backend {
                backend: BACKEND.into(),
                message: format!(
                    "kernel `{}` has more than {MAX_PARAMS} parameters",
                    kernel.name
                ),
            });
        }
        // One u64 slot per parameter, filled as the program's layout says.
        let mut slots = [0u64; MAX_PARAMS];
        // Checked launches: a zeroed violation record of their own, read back after the
        // launch (so a checked launch waits for its kernel).
        let record = if checked {
            Some(ViolationRecord::new(&self.violation_records, stream)?)
        } else {
            None
        };
        for (slot, what) in slots.iter_mut().zip(&function.params) {
            *slot = match *what {
                ParamSlot::Arg(i) => match &request.args[i as usize] {
                    BoundArg::Buffer { buffer, offset, .. } => buffer.ptr + *offset as u64,
                    BoundArg::Scalar(l) => scalar_bits(*l),
                },
                ParamSlot::BufferLen(i) => match &request.args[i as usize] {
                    BoundArg::Buffer { len, .. } => *len as u64,
                    BoundArg::Scalar(_) => {
                        return Err(Error::Backend {
                            backend: BACKEND.into(),
                            message: "internal: a length slot names a scalar".into(),
                        })
                    }
                },
                ParamSlot::Grid(d) => g.grid[d as usize] as u64,
                ParamSlot::DynamicSharedLen => g.dynamic_shared_len as u64,
                ParamSlot::ViolationRecord => record.as_ref().map_or(0, |r| r.ptr),
            };
        }
        let n = function.params.len();
        let dynamic_bytes = match (program.raw_source(), kernel.dynamic_shared()) {
            (None, Some((_, s))) => g.dynamic_shared_len * s.elem.size_bytes() as u32,
            _ => 0,
        };
        if dynamic_bytes > function.shared_allowed.load(Ordering::Relaxed) {
            // SAFETY: function is live; the value is within the device's opt-in limit
            // (checked by the facade against max_shared_bytes).
            unsafe {
                cu::function::set_function_attribute(
                    function.func,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    dynamic_bytes as i32,
                )
            }
            .during("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")?;
            function
                .shared_allowed
                .fetch_max(dynamic_bytes, Ordering::Relaxed);
        }
        // Launches larger than one resident wave run eligible kernels in grid-stride form
        // with one wave of groups: fewer, longer-lived groups keep more loads in flight
        // than a million short ones (the logical threads and results are the same).
        let mut func = function.func;
        let mut groups = g.groups;
        // (1, 2, 4 and 8 waves measured the same on an H200; see docs/benchmarks.md.)
        let wave = (self.resident_threads / g.group_threads().max(1)).max(1);
        // Checked only for kernels that have a vector form: launches of the others pay
        // nothing for it.
        let aligned = || {
            request.args.iter().all(|a| match a {
                BoundArg::Buffer { buffer, offset, .. } => (buffer.ptr + *offset as u64) % 16 == 0,
                BoundArg::Scalar(_) => true,
            })
        };
        match (function.vector, function.strided) {
            // Elementwise kernels on aligned buffers: W logical threads per iteration, as
            // many groups as that needs, at most one wave (grid-stride beyond).
            (Some((vector, width)), _) if self.vectorize && aligned() => {
                func = vector;
                let threads = g.grid[0].div_ceil(width);
                groups[0] = threads.div_ceil(g.group[0].max(1)).clamp(1, wave);
            }
            (_, Some(strided)) if self.grid_stride && groups[0] > wave => {
                func = strided;
                groups[0] = wave;
            }
            _ => {}
        }
        if g.time_limit.is_some() {
            // The launch's own limit covers the launch alone: earlier work first, under
            // the device's limit.
            self.wait_stream_idle(stream, "waiting for the work before a time-limited launch")?;
        }
        let mut params: [*mut c_void; MAX_PARAMS] = [std::ptr::null_mut(); MAX_PARAMS];
        for i in 0..n {
            params[i] = (&mut slots[i] as *mut u64).cast();
        }
        let launched = self.timed(s, stream, &kernel.name, || {
            // SAFETY: the parameter list follows the program's own layout (generated by
            // dotcompute_codegen::cuda with the source, or the declared RawParams); the
            // slots live until cuLaunchKernel returns, which copies them.
            unsafe {
                cu::launch_kernel(
                    func,
                    (groups[0], groups[1], groups[2]),
                    (g.group[0], g.group[1], g.group[2]),
                    dynamic_bytes,
                    stream,
                    &mut params[..n],
                )
            }
            .map_err(|e| driver_error(&format!("launching kernel `{}`", kernel.name), e))
        });
        if let (Ok(()), Some(limit)) = (&launched, g.time_limit) {
            self.wait_stream_idle_within(
                stream,
                &format!("kernel `{}`", kernel.name),
                limit,
                dotcompute_hal::settings::SET_BY_LAUNCH,
            )?;
        }
        match record {
            Some(mut record) => {
                launched?;
                match dotcompute_hal::decode_violation(kernel, record.read(self, stream)?) {
                    Some(violation) => Err(violation),
                    None => Ok(()),
                }
            }
            None => launched,
        }
    }
}

/// The violation record of one checked launch: 16 bytes of device memory taken from the
/// backend's spare records (allocated the first time), zeroed on the launch's stream, and
/// given back once read (the launch has then completed). A record whose launch failed is
/// freed instead: its kernel may still be running.
struct ViolationRecord<'b> {
    ptr: sys::CUdeviceptr,
    spares: &'b Mutex<Vec<sys::CUdeviceptr>>,
    reusable: bool,
}

impl<'b> ViolationRecord<'b> {
    const BYTES: usize = dotcompute_hal::VIOLATION_WORDS * 4;

    /// A record zeroed on `stream` (the context is bound).
    fn new(
        spares: &'b Mutex<Vec<sys::CUdeviceptr>>,
        stream: sys::CUstream,
    ) -> Result<ViolationRecord<'b>> {
        let spare = spares.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let ptr = match spare {
            Some(ptr) => ptr,
            // SAFETY: a plain allocation; freed by Drop or by the backend.
            None => unsafe { cu::malloc_sync(Self::BYTES) }
                .map_err(|e| driver_error("allocating a violation record", e))?,
        };
        let record = ViolationRecord {
            ptr,
            spares,
            reusable: false,
        };
        // SAFETY: the allocation holds VIOLATION_WORDS u32s.
        unsafe {
            sys::cuMemsetD32Async(ptr, 0, dotcompute_hal::VIOLATION_WORDS, stream)
                .during("cuMemsetD32Async (violation record)")?
        };
        Ok(record)
    }

    /// The record after the launch, waiting for it (at most the backend's timeout).
    fn read(
        &mut self,
        backend: &CudaBackend,
        stream: sys::CUstream,
    ) -> Result<[u32; dotcompute_hal::VIOLATION_WORDS]> {
        let mut words = [0u32; dotcompute_hal::VIOLATION_WORDS];
        // SAFETY: the record holds the words; the stream is waited for before reading.
        unsafe {
            sys::cuMemcpyDtoHAsync_v2(words.as_mut_ptr().cast(), self.ptr, Self::BYTES, stream)
                .during("cuMemcpyDtoHAsync (violation record)")?;
        }
        backend.wait_stream_idle(stream, "waiting for a checked launch")?;
        self.reusable = true;
        Ok(words)
    }
}

impl Drop for ViolationRecord<'_> {
    fn drop(&mut self) {
        if self.reusable {
            self.spares
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(self.ptr);
        } else {
            // SAFETY: allocated by malloc_sync; cuMemFree waits for work using it.
            let _ = unsafe { cu::free_sync(self.ptr) };
        }
    }
}
