//! Generated MSL executed on Linux: the library is compiled by clang against a shim of
//! `<metal_stdlib>` (the file `metal_stdlib` beside this module) under Metal's rules, loaded
//! with `dlopen`, and run on the CPU by a runner that does what a Metal driver does with an
//! [`EncodingPlan`]: binds buffers and bytes at their indices, allocates each
//! threadgroup's memory at the planned lengths, and dispatches exactly the planned grid.
//!
//! *Metal's rules at compile time*: address spaces are clang address spaces (no pointer
//! converts between `device`, `threadgroup`, `constant` and `thread`; `constant` is
//! read-only), the language is C++14 without exceptions or RTTI, warnings are errors, and
//! [`rules`] refuses what MSL lacks that C++ has (`long long`, `double`, `goto`, …).
//!
//! *Metal's execution model at run time* ([`lockstep`]): SIMD-groups of 32 lanes that meet
//! at every `simd_*` call (ballots, masks, shuffles, partial SIMD-groups and prefix sums
//! as on the GPU), threads that meet at every barrier, and between those points an order
//! that can be shuffled per seed ([`ThreadOrder`], `DOTCOMPUTE_MSL_SHIM_ORDER`), so a
//! missing barrier gives a wrong result. A barrier or SIMD-group function that not every
//! thread reaches is an error.
//!
//! Like Metal's API validation layer, the runner refuses a dispatch with an argument the
//! kernel declares but the plan never bound, or threadgroup memory it never sized; a
//! wrong grid or a wrong length is not refused, it gives wrong output, which the
//! conformance checks catch.
//!
//! What a pass here proves: our MSL text means what the IR means (compiled by a real
//! clang under Metal's typing rules, every output element checked), and the encoding
//! plan binds and sizes what that text reads. What it cannot prove: that Apple's Metal
//! compiler accepts the text (its front end is stricter still in places this header does
//! not model, such as vector constructors), that the driver executes it the same way, or
//! races that every thread order resolves alike.

mod backend;
mod lockstep;
pub mod rules;

pub use lockstep::{ThreadOrder, SIMD_WIDTH};

pub use backend::ShimBackend;

use crate::plan::{Dispatch, EncodingPlan};
use dotcompute_codegen::msl::{MslAttribute, MslBinding, MslModule};
use dotcompute_hal::{Error, Result};
use rayon::prelude::*;
use std::ffi::c_void;
use std::fmt::Write;
use std::path::PathBuf;

/// The shim header, written next to each compiled library as `metal_stdlib`.
const SHIM_HEADER: &str = include_str!("metal_stdlib");

/// How the shim compiles a library: C++14 (the language MSL is based on) without
/// exceptions or run-time type information (which MSL lacks), warnings as errors (Apple's
/// compiler is clang too, and its warnings on our own text are defects), and every symbol
/// resolved at link time (a missing runtime function is a compile error, not a failure
/// in the middle of a dispatch).
const COMPILE_FLAGS: &[&str] = &[
    "-std=c++14",
    "-O2",
    "-fPIC",
    "-shared",
    "-fno-exceptions",
    "-fno-rtti",
    "-Werror",
    // Warnings a user's own kernel can earn (`x < x`, `2 ^ 32`: the random-kernel test
    // writes both): Apple's compiler would warn, not refuse, so neither does the shim.
    "-Wno-tautological-compare",
    "-Wno-xor-used-as-pow",
];

/// Every symbol resolved when the library links: GNU ld's `-z defs`; Apple's ld refuses
/// undefined symbols in a dynamic library by default.
#[cfg(not(target_os = "macos"))]
const LINK_FLAGS: &[&str] = &["-Wl,-z,defs"];
#[cfg(target_os = "macos")]
const LINK_FLAGS: &[&str] = &[];

/// The compiler: `DOTCOMPUTE_MSL_SHIM_CXX`, or `clang++`.
pub fn compiler() -> String {
    dotcompute_hal::settings::value("DOTCOMPUTE_MSL_SHIM_CXX").unwrap_or_else(|| "clang++".into())
}

/// Whether the compiler runs here, or why not.
pub fn probe() -> std::result::Result<String, String> {
    let cxx = compiler();
    match std::process::Command::new(&cxx).arg("--version").output() {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()),
        Ok(o) => Err(format!("`{cxx} --version` failed: {}", o.status)),
        Err(e) => Err(format!(
            "the MSL shim needs a C++ compiler: `{cxx}` could not be run ({e}); install clang \
             or set DOTCOMPUTE_MSL_SHIM_CXX"
        )),
    }
}

/// The `thread` struct of the header, field for field.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct ShimThread {
    global: [u32; 3],
    local: [u32; 3],
    group: [u32; 3],
    groups: [u32; 3],
    simd_size: u32,
    simd_lane: u32,
}

type EntryFn = unsafe extern "C" fn(*const *mut c_void, *const *mut c_void, *const ShimThread);

/// A compiled MSL library with its trampoline.
pub struct ShimLibrary {
    // Kept alive for `entry` (a function of the library).
    _library: libloading::Library,
    entry: EntryFn,
    module: MslModule,
    /// Whether threads meet (barriers, SIMD-group functions): they run as coroutines.
    meets: bool,
    kernel: dotcompute_ir::Kernel,
}

/// The trampoline appended to the generated MSL: it calls the kernel function with each
/// binding read from the slot of its index, as the driver would, then the attributes.
fn trampoline(module: &MslModule) -> String {
    let mut args = Vec::new();
    for (binding, ty) in module.bindings.iter().zip(&module.binding_types) {
        let arg = match binding {
            MslBinding::Param { index, .. }
            | MslBinding::Info { index }
            | MslBinding::ViolationRecord { index }
            | MslBinding::Scalars { index } => {
                match ty.strip_suffix('&') {
                    // `constant T&`: setBytes memory, read through a pointer.
                    Some(value) => format!("*({value}*)dc_buffers[{index}]"),
                    None => format!("({ty})dc_buffers[{index}]"),
                }
            }
            MslBinding::Threadgroup { index, .. } => format!("({ty})dc_threadgroup[{index}]"),
        };
        args.push(arg);
    }
    for (a, ty) in module.attributes.iter().zip(&module.attribute_types) {
        let value = match a {
            MslAttribute::ThreadPositionInGrid => "t->global",
            MslAttribute::ThreadPositionInThreadgroup => "t->local",
            MslAttribute::ThreadgroupPositionInGrid => "t->group",
            MslAttribute::ThreadgroupsPerGrid => "t->groups",
            MslAttribute::ThreadsPerSimdgroup => "t->simd_size",
            MslAttribute::ThreadIndexInSimdgroup => "t->simd_lane",
        };
        // A position declared as a scalar (`uint id [[thread_position_in_grid]]`) is its
        // x component, as in Metal.
        let vector = a.declared_type() == "uint3";
        args.push(if vector && !ty.ends_with('3') {
            format!("{value}.x")
        } else {
            value.to_string()
        });
    }
    let mut out = String::new();
    let _ = write!(
        out,
        "\nextern \"C\" void dc_shim_entry(void* const* dc_buffers, void* const* dc_threadgroup, const dc_shim_thread* t) {{\n    {}(\n        {});\n}}\n",
        module.entry,
        args.join(",\n        ")
    );
    out
}

/// The text of every `[[...]]` attribute in order, and the source without them.
fn strip_attributes(source: &str) -> (String, Vec<String>) {
    let mut out = String::with_capacity(source.len());
    let mut found = Vec::new();
    let mut rest = source;
    while let Some(start) = rest.find("[[") {
        let Some(len) = rest[start..].find("]]") else {
            break;
        };
        out.push_str(rest[..start].trim_end_matches(' '));
        found.push(rest[start + 2..start + len].to_string());
        rest = &rest[start + len + 2..];
    }
    out.push_str(rest);
    (out, found)
}

/// The attributes the entry point must carry, from its binding list.
fn expected_attributes(module: &MslModule) -> Vec<String> {
    module
        .bindings
        .iter()
        .map(|b| match b {
            MslBinding::Param { index, .. }
            | MslBinding::Info { index }
            | MslBinding::ViolationRecord { index }
            | MslBinding::Scalars { index } => format!("buffer({index})"),
            MslBinding::Threadgroup { index, .. } => format!("threadgroup({index})"),
        })
        .chain(module.attributes.iter().map(|a| a.spelling().to_string()))
        .collect()
}

/// Whether `source` declares anything in the `threadgroup` address space (the word on its
/// own: not `threadgroup_barrier` or `[[threadgroup_position_in_grid]]`).
fn uses_threadgroup_memory(source: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    source
        .match_indices("threadgroup")
        .any(|(at, w)| !source[..at].ends_with(word) && !source[at + w.len()..].starts_with(word))
}

/// The shared library of `unit` in the shim's cache (named by `hash`), compiled now if it
/// is not there yet.
fn build_library(
    unit: &str,
    hash: &str,
    fail: &dyn Fn(String) -> Error,
) -> Result<std::path::PathBuf> {
    let dir = cache_dir();
    let library_path = dir.join(format!("{hash}.so"));
    if !library_path.exists() {
        std::fs::create_dir_all(&dir)
            .map_err(|e| fail(format!("cannot create {}: {e}", dir.display())))?;
        let header_dir = dir.join(format!("include-{hash}"));
        std::fs::create_dir_all(&header_dir)
            .map_err(|e| fail(format!("cannot create {}: {e}", header_dir.display())))?;
        // Test processes, and threads of one test process, compile concurrently: every
        // file is written under a name of this process and call and renamed into place,
        // so no compiler reads a partial file and no call renames another's (two threads
        // of one process compiling one kernel used to share the names, and the second
        // rename found nothing: "cannot store the library").
        static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let unique = format!("{}-{call}", std::process::id());
        let header_tmp = header_dir.join(format!("metal_stdlib.{unique}"));
        std::fs::write(&header_tmp, SHIM_HEADER)
            .and_then(|()| std::fs::rename(&header_tmp, header_dir.join("metal_stdlib")))
            .map_err(|e| fail(format!("cannot write the shim header: {e}")))?;
        let source_path = dir.join(format!("{hash}.{unique}.metal.cpp"));
        std::fs::write(&source_path, unit)
            .map_err(|e| fail(format!("cannot write {}: {e}", source_path.display())))?;
        let partial = dir.join(format!("{hash}.{unique}.partial"));
        let output = std::process::Command::new(compiler())
            .args(COMPILE_FLAGS)
            .args(LINK_FLAGS)
            .arg(format!("-I{}", header_dir.display()))
            .arg("-o")
            .arg(&partial)
            .arg(&source_path)
            .output()
            .map_err(|e| fail(format!("cannot run {}: {e}", compiler())))?;
        if !output.status.success() {
            return Err(fail(format!(
                "the generated MSL does not compile against the shim ({}):\n{}",
                source_path.display(),
                String::from_utf8_lossy(&output.stderr)
            )));
        }
        std::fs::rename(&partial, &library_path)
            .map_err(|e| fail(format!("cannot store the library: {e}")))?;
    }
    Ok(library_path)
}

fn cache_dir() -> PathBuf {
    std::env::temp_dir().join(format!(
        "dotcompute-msl-shim-{}",
        std::env::var("USER").unwrap_or_else(|_| "user".into())
    ))
}

impl ShimLibrary {
    /// Compiles `module` (generated for `kernel`) with the shim, or loads it from the
    /// cache (keyed by the whole translation unit's hash).
    pub fn compile(module: &MslModule, kernel: &dotcompute_ir::Kernel) -> Result<ShimLibrary> {
        use sha2::{Digest, Sha256};
        let fail = |message: String| Error::Backend {
            backend: "msl-shim".into(),
            message: format!("kernel `{}`: {message}", kernel.name),
        };
        // C++ reads `[[threadgroup(0)]]` through the shim's `threadgroup` macro, so the
        // attributes are taken out, after checking that each names the index the binding
        // list (and so the plan) uses for its parameter.
        let broken = rules::violations(&module.source);
        if !broken.is_empty() {
            return Err(fail(format!(
                "the generated MSL uses what Metal's language lacks:\n{}",
                broken.join("\n")
            )));
        }
        if module.raw && uses_threadgroup_memory(&module.source) {
            // A `threadgroup` variable declared in a function body would be one per
            // thread here (each thread is a C++ call): refused rather than run wrongly.
            return Err(fail(
                "the shim cannot run a hand-written kernel that uses threadgroup memory \
                 (Metal itself can)"
                    .into(),
            ));
        }
        let (source, mut found) = strip_attributes(&module.source);
        if module.raw {
            // A hand-written source may carry other attributes (`[[kernel]]`, on other
            // functions): only the binding and position ones are compared.
            let positions = dotcompute_codegen::msl_raw::POSITIONS;
            found.retain(|a| {
                let a = a.trim();
                a.starts_with("buffer(") || positions.iter().any(|p| p.spelling() == a)
            });
        }
        let expected = expected_attributes(module);
        if found != expected {
            return Err(fail(format!(
                "the kernel's attributes {found:?} do not match its bindings {expected:?}"
            )));
        }
        let unit = format!("{source}{}", trampoline(module));
        let hash: String = Sha256::digest(
            format!(
                "{SHIM_HEADER}\n{} {}\n{unit}",
                COMPILE_FLAGS.join(" "),
                LINK_FLAGS.join(" ")
            )
            .as_bytes(),
        )
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect();
        let library_path = build_library(&unit, &hash, &fail)?;
        // SAFETY: the library is our own generated code plus the shim header; loading it
        // runs no initialisers beyond the header's plain global.
        let library = unsafe { libloading::Library::new(&library_path) }
            .map_err(|e| fail(format!("cannot load {}: {e}", library_path.display())))?;
        // SAFETY: the symbols have the types the header and the trampoline declare.
        let entry = unsafe {
            let hook = library
                .get::<*mut Option<unsafe extern "C" fn(u32)>>(b"dc_shim_barrier_hook")
                .map_err(|e| fail(format!("no barrier hook: {e}")))?;
            **hook = Some(lockstep::barrier_hook);
            let hook = library
                .get::<*mut Option<unsafe extern "C" fn(u32, u32, u64, u32) -> u64>>(
                    b"dc_shim_simd_hook",
                )
                .map_err(|e| fail(format!("no SIMD-group hook: {e}")))?;
            **hook = Some(lockstep::simd_hook);
            *library
                .get::<EntryFn>(b"dc_shim_entry")
                .map_err(|e| fail(format!("no entry point: {e}")))?
        };
        Ok(ShimLibrary {
            _library: library,
            entry,
            module: module.clone(),
            // A hand-written kernel's body is not IR: assume it meets.
            meets: module.raw || kernel.uses_barrier() || kernel.uses_subgroups(),
            kernel: kernel.clone(),
        })
    }

    /// The generated module this library was compiled from.
    pub fn module(&self) -> &MslModule {
        &self.module
    }

    /// Carries out `plan` with the buffers of the launch (`buffers[arg]` is the start of
    /// argument `arg`'s buffer; the plan adds the offset).
    pub fn dispatch(
        &self,
        plan: &EncodingPlan,
        buffers: &[*mut u8],
        order: ThreadOrder,
    ) -> Result<()> {
        // setBytes copies; the copies live until the dispatch ends.
        let bytes: Vec<Vec<u128>> = plan
            .bytes
            .iter()
            .map(|b| {
                let mut words = vec![0u128; b.bytes.len().div_ceil(16)];
                bytemuck::cast_slice_mut::<u128, u8>(&mut words)[..b.bytes.len()]
                    .copy_from_slice(&b.bytes);
                words
            })
            .collect();
        // The violation record of a checked launch, zeroed, where the plan binds it.
        let mut record = [0u32; dotcompute_hal::VIOLATION_WORDS];
        let slots = self.bind(plan, buffers, &bytes, &mut record)?;
        let mut threadgroup_lengths = [0u32; 31];
        for t in &plan.threadgroup_memory {
            threadgroup_lengths[t.index as usize] = t.bytes;
        }
        self.check_bound(&slots, &threadgroup_lengths)?;
        let (grid, per_group, partial) = match plan.dispatch {
            Dispatch::Threads { threads, per_group } => (threads, per_group, true),
            Dispatch::Threadgroups { groups, per_group } => (
                [0, 1, 2].map(|d| groups[d].saturating_mul(per_group[d])),
                per_group,
                false,
            ),
        };
        let groups = [0, 1, 2].map(|d| grid[d].div_ceil(per_group[d].max(1)));
        let total_groups: u64 = groups.iter().map(|&g| g as u64).product();
        let slots = Slots(slots);
        let (layout, block_bytes) = threadgroup_layout(&threadgroup_lengths);
        // The first error of any group (the CPU backend's slot: a flag read per group).
        let errors = dotcompute_hal::native::ErrorSlot::new();
        let workers = rayon::current_num_threads() as u64;
        let min_len = (total_groups / (workers * 16)).max(1) as usize;
        (0..total_groups as usize)
            .into_par_iter()
            .with_min_len(min_len)
            .for_each_init(
                || vec![0u128; block_bytes.div_ceil(16)],
                |block, g| {
                    if errors.is_raised() {
                        return; // the launch already failed: finish quickly
                    }
                    // Threadgroup memory starts undefined on a GPU: poison it so that a kernel
                    // relying on zeros fails here too.
                    block.fill(0xCDCD_CDCD_CDCD_CDCD_CDCD_CDCD_CDCD_CDCDu128);
                    let base = block.as_mut_ptr() as *mut u8;
                    let tg: Vec<*mut c_void> = layout
                        .iter()
                        .map(|&(at, len)| {
                            if len == 0 {
                                std::ptr::null_mut()
                            } else {
                                // SAFETY: inside the block (see block_bytes).
                                unsafe { base.add(at) as *mut c_void }
                            }
                        })
                        .collect();
                    let group = unflatten(g as u64, groups);
                    let result =
                        self.run_group(&slots, &tg, group, groups, grid, per_group, partial, order);
                    if let Err(e) = result {
                        errors.raise(e);
                    }
                },
            );
        if let Some(e) = errors.take() {
            return Err(e);
        }
        if plan.violation_record.is_some() {
            // SAFETY: the kernel wrote the record through atomics and plain stores that
            // happened before the groups finished (rayon joined them).
            let words = unsafe { std::ptr::read_volatile(&record) };
            if let Some(e) = dotcompute_hal::decode_violation(&self.kernel, words) {
                return Err(e);
            }
        }
        Ok(())
    }

    /// An error for a plan the kernel cannot run with: the planner's bug.
    fn refuse(&self, message: String) -> Error {
        Error::internal(
            "the Metal encoding plan",
            format!(
                "kernel `{}`: {message} (the encoding plan is wrong)",
                self.kernel.name
            ),
        )
    }

    /// The 31 buffer slots as setBuffer / setBytes leave them: the launch's buffers at
    /// their offsets, the copies of the bytes, the violation record.
    fn bind(
        &self,
        plan: &EncodingPlan,
        buffers: &[*mut u8],
        bytes: &[Vec<u128>],
        record: &mut [u32; dotcompute_hal::VIOLATION_WORDS],
    ) -> Result<Vec<*mut c_void>> {
        let mut slots: Vec<*mut c_void> = vec![std::ptr::null_mut(); 31];
        for b in &plan.buffers {
            let base = *buffers
                .get(b.arg)
                .ok_or_else(|| self.refuse(format!("argument {} does not exist", b.arg)))?;
            // SAFETY: the facade checked the view (offset + length) against the buffer.
            slots[b.index as usize] = unsafe { base.add(b.offset as usize) } as *mut c_void;
        }
        for (b, copy) in plan.bytes.iter().zip(bytes) {
            slots[b.index as usize] = copy.as_ptr() as *mut c_void;
        }
        if let Some(index) = plan.violation_record {
            slots[index as usize] = record.as_mut_ptr() as *mut c_void;
        }
        Ok(slots)
    }

    /// What Metal's validation layer checks before a dispatch: every buffer index the
    /// kernel reads is bound and every threadgroup memory index it uses is sized.
    fn check_bound(&self, slots: &[*mut c_void], threadgroup_lengths: &[u32; 31]) -> Result<()> {
        for binding in &self.module.bindings {
            match *binding {
                MslBinding::Param { index, .. }
                | MslBinding::Info { index }
                | MslBinding::ViolationRecord { index }
                | MslBinding::Scalars { index } => {
                    if slots[index as usize].is_null() {
                        return Err(self.refuse(format!(
                            "buffer index {index} is read by the kernel but was never bound"
                        )));
                    }
                }
                MslBinding::Threadgroup { index, .. } => {
                    if threadgroup_lengths[index as usize] == 0 {
                        return Err(self.refuse(format!(
                            "threadgroup memory index {index} is used by the kernel but was \
                             never sized (setThreadgroupMemoryLength)"
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Runs one threadgroup: its threads in a plain loop, or as coroutines that meet at
    /// every barrier.
    #[allow(clippy::too_many_arguments)]
    fn run_group(
        &self,
        slots: &Slots,
        tg: &[*mut c_void],
        group: [u32; 3],
        groups: [u32; 3],
        grid: [u32; 3],
        per_group: [u32; 3],
        partial: bool,
        order: ThreadOrder,
    ) -> Result<()> {
        // The threads this group has: with dispatchThreads the last group of a dimension
        // holds only the threads inside the grid.
        let mut threads = Vec::new();
        for z in 0..per_group[2] {
            for y in 0..per_group[1] {
                for x in 0..per_group[0] {
                    let local = [x, y, z];
                    let global = [0, 1, 2].map(|d| group[d] * per_group[d] + local[d]);
                    if partial && (0..3).any(|d| global[d] >= grid[d]) {
                        continue;
                    }
                    // Lanes by linear index in the group, as Metal numbers them.
                    let linear = x + per_group[0] * (y + per_group[1] * z);
                    threads.push(ShimThread {
                        global,
                        local,
                        group,
                        groups,
                        simd_size: SIMD_WIDTH,
                        simd_lane: linear % SIMD_WIDTH,
                    });
                }
            }
        }
        let entry = self.entry;
        let slots_ptr = slots.0.as_ptr();
        let tg_ptr = tg.as_ptr();
        if !self.meets {
            // No meeting points: each thread runs whole, in the chosen order.
            let mut sequence: Vec<usize> = (0..threads.len()).collect();
            if let Some(mut rng) = order.rng(group) {
                rng.shuffle(&mut sequence);
            }
            for t in sequence {
                // SAFETY: every slot the kernel reads is bound (checked above) to memory
                // the facade sized for the arguments, and the threadgroup regions are the
                // planned lengths.
                unsafe { entry(slots_ptr, tg_ptr, &threads[t]) };
            }
            return Ok(());
        }
        lockstep::run_in_lockstep(&self.kernel.name, group, &threads, order, |t| {
            // SAFETY: as above.
            unsafe { entry(slots_ptr, tg_ptr, t) }
        })
    }
}

/// The slot table, shared by the groups running in parallel (read only).
struct Slots(Vec<*mut c_void>);
// SAFETY: the pointers are only read; the memory behind them is the launch's buffers,
// which kernels access as a GPU would (races are the kernel author's).
unsafe impl Sync for Slots {}
// SAFETY: as for Sync: plain pointers into the launch's buffers.
unsafe impl Send for Slots {}

fn unflatten(i: u64, dims: [u32; 3]) -> [u32; 3] {
    let x = (i % dims[0] as u64) as u32;
    let rest = i / dims[0] as u64;
    [
        x,
        (rest % dims[1] as u64) as u32,
        (rest / dims[1] as u64) as u32,
    ]
}

/// Each threadgroup memory index's region (start, length) in one per-group block, 16-byte
/// aligned, and the block's size.
fn threadgroup_layout(lengths: &[u32; 31]) -> (Vec<(usize, usize)>, usize) {
    let mut at = 0usize;
    let layout = lengths
        .iter()
        .map(|&len| {
            let region = (at, len as usize);
            at += (len as usize).next_multiple_of(16);
            region
        })
        .collect();
    (layout, at)
}
