//! Programs to loaded functions: the memory cache (keyed by the program's content key),
//! the disk cache and NVRTC ([`crate::compile`]).

use crate::compile::{CacheOutcome, CompileStats};
use crate::driver::{bind, Check, BACKEND};
use crate::{lock, CudaBackend};
use cudarc::driver::{result as cu, sys};
use dotcompute_hal::{Error, KeyMap, Program, ProgramKey, ProgramSource, Result};
use dotcompute_ir::interface::Slot;
use std::ffi::CString;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

/// Dynamic shared memory beyond this needs the function's opt-in attribute.
pub(crate) const DEFAULT_SHARED_BYTES: u32 = 48 * 1024;

/// The code a backend has loaded: functions by program content key (computed once per
/// program, never per launch) and checked mode, the modules that hold them (unloaded when
/// the backend drops), and the compile-cache counters.
#[derive(Default)]
pub(crate) struct LoadedCode {
    pub(crate) functions: Mutex<KeyMap<(ProgramKey, bool), Arc<Function>>>,
    pub(crate) modules: Mutex<Vec<sys::CUmodule>>,
    pub(crate) stats: Mutex<CompileStats>,
}

/// A loaded program.
pub(crate) struct Function {
    pub func: sys::CUfunction,
    /// The parameter slots every entry point of the module takes (from the code
    /// generator, or one per declared parameter for hand-written kernels).
    pub params: Vec<Slot>,
    /// The grid-stride twin of a generated kernel, where the code generator made one.
    pub strided: Option<sys::CUfunction>,
    /// The vector form of an elementwise generated kernel, and the logical threads each of
    /// its iterations runs.
    pub vector: Option<(sys::CUfunction, u32)>,
    /// The dynamic shared memory the function is currently allowed (opt-in attribute).
    pub shared_allowed: AtomicU32,
}

impl Function {
    /// The forms the loaded module offers.
    pub fn forms(&self) -> dotcompute_ir::interface::Forms {
        dotcompute_ir::interface::Forms {
            strided: self.strided.is_some(),
            vector: self.vector.map(|(_, width)| width),
        }
    }
}

// SAFETY: a CUfunction is a driver handle usable from any thread with the context bound.
unsafe impl Send for Function {}
// SAFETY: shared use is sound for the reason above (Send).
unsafe impl Sync for Function {}

/// What `load` needs to know about a module's entry points.
struct Entries<'a> {
    entry: &'a str,
    strided: Option<&'a str>,
    vector: Option<(&'a str, u32)>,
    params: Vec<Slot>,
}

impl CudaBackend {
    /// The driver handles behind a generated kernel and this backend's default stream,
    /// for benchmarks that compare a launch through dotcompute with a raw driver launch
    /// of the very same function. The handles live as long as the backend.
    #[doc(hidden)]
    pub fn raw_handles(&self, program: &Program) -> Result<(sys::CUfunction, sys::CUstream)> {
        bind(&self.ctx)?;
        Ok((
            self.function(program, false)?.0.func,
            self.stream(dotcompute_hal::StreamId::DEFAULT)?,
        ))
    }

    /// Compile-cache counters.
    pub fn compile_stats(&self) -> CompileStats {
        *lock(&self.code.stats)
    }

    /// Compiles (or finds in a cache) a program's module, and says where it came from.
    pub fn prepare_program(&self, program: &Program) -> Result<CacheOutcome> {
        bind(&self.ctx)?;
        self.function(program, false).map(|(_, outcome)| outcome)
    }

    /// The loaded function of `program` (its checked form with `checked`, for generated
    /// kernels), from the memory cache (keyed by the program's content key, computed once
    /// when the program was built) or compiled now.
    pub(crate) fn function(
        &self,
        program: &Program,
        checked: bool,
    ) -> Result<(Arc<Function>, CacheOutcome)> {
        // Hand-written kernels have no checked form.
        let checked = checked && program.raw_source().is_none();
        if let Some(f) = lock(&self.code.functions).get(&(program.key, checked)) {
            let f = f.clone();
            lock(&self.code.stats).memory_hits += 1;
            return Ok((f, CacheOutcome::Memory));
        }
        let kernel = &*program.kernel;
        let (f, outcome) = match &program.source {
            ProgramSource::Ir { .. } => {
                let module = dotcompute_codegen::cuda::generate_with(
                    kernel,
                    &dotcompute_codegen::cuda::CudaOptions {
                        checked,
                        unroll: self.unroll,
                    },
                );
                let variant = if checked { "checked" } else { "" };
                dotcompute_hal::dump::dump_source(program, variant, "cu", "//", &module.source)?;
                self.load(
                    &kernel.name,
                    &module.source,
                    Entries {
                        entry: &module.entry,
                        strided: module.strided_entry.as_deref(),
                        vector: module.vector_entry.as_ref().map(|(e, w)| (e.as_str(), *w)),
                        params: module.params.clone(),
                    },
                    false,
                )?
            }
            ProgramSource::Raw(raw) => {
                dotcompute_hal::dump::dump_source(program, "", "cu", "//", &raw.text)?;
                self.load(
                    &kernel.name,
                    &raw.text,
                    Entries {
                        entry: &raw.entry,
                        strided: None,
                        vector: None,
                        // Hand-written kernels take exactly their declared parameters.
                        params: (0..kernel.params.len() as u32).map(Slot::Arg).collect(),
                    },
                    true,
                )?
            }
        };
        let f = lock(&self.code.functions)
            .entry((program.key, checked))
            .or_insert(f)
            .clone();
        Ok((f, outcome))
    }

    /// Disk cache, else NVRTC; then loads the module (context bound by the caller).
    fn load(
        &self,
        name: &str,
        source: &str,
        entries: Entries<'_>,
        raw: bool,
    ) -> Result<(Arc<Function>, CacheOutcome)> {
        let key = self.compiler.key(source, raw);
        let cached = {
            let mut stats = lock(&self.code.stats);
            self.compiler.read_disk(&key, &mut stats)
        };
        if let Some(cubin) = cached {
            match self.load_cubin(name, &cubin, &entries) {
                Ok(f) => {
                    lock(&self.code.stats).disk_hits += 1;
                    return Ok((f, CacheOutcome::Disk));
                }
                Err(e) => {
                    lock(&self.code.stats).corrupt_entries += 1;
                    tracing::warn!("cached module of `{name}` did not load ({e}); recompiling");
                }
            }
        }
        let cubin = self.compiler.nvrtc(name, source, raw)?;
        lock(&self.code.stats).nvrtc_compiles += 1;
        let f = self.load_cubin(name, &cubin, &entries)?;
        self.compiler.write_disk(&key, &cubin);
        Ok((f, CacheOutcome::Compiled))
    }

    fn load_cubin(&self, name: &str, cubin: &[u8], e: &Entries<'_>) -> Result<Arc<Function>> {
        // Not while another thread captures (`driver::CaptureGate`); no lock is held here
        // that a capturing thread could be waiting for.
        // SAFETY: the image is a whole CUBIN (checksummed on disk, or fresh from NVRTC).
        let module = self
            .ctx
            .capture_gate
            .exclusive(|| unsafe { cu::module::load_data(cubin.as_ptr().cast()) })
            .during("cuModuleLoadData")?;
        lock(&self.code.modules).push(module);
        let entry_c = CString::new(e.entry).map_err(|_| Error::Compile {
            kernel: name.into(),
            backend: BACKEND.into(),
            log: format!("entry point `{}` contains a NUL byte", e.entry),
        })?;
        // SAFETY: module was just loaded.
        let func = unsafe { cu::module::get_function(module, entry_c) }.map_err(|_| {
            Error::Compile {
                kernel: name.into(),
                backend: BACKEND.into(),
                log: format!(
                    "the module defines no kernel `{0}`: declare it `extern \"C\" __global__ void {0}(...)`",
                    e.entry
                ),
            }
        })?;
        let twin = |name: &str| {
            CString::new(name)
                .ok()
                // SAFETY: module is loaded; a missing twin only means no such form.
                .and_then(|s| unsafe { cu::module::get_function(module, s) }.ok())
        };
        Ok(Arc::new(Function {
            func,
            params: e.params.clone(),
            strided: e.strided.and_then(twin),
            vector: e.vector.and_then(|(n, w)| Some((twin(n)?, w))),
            shared_allowed: AtomicU32::new(DEFAULT_SHARED_BYTES),
        }))
    }
}
