//! # dotcompute-metal: the native Metal backend, and what of it runs without a Mac
//!
//! The backend is split so that as much of it as possible is plain Rust, testable on any
//! machine:
//!
//! * **MSL** comes from `dotcompute_codegen::msl`, the MSL dialect of the C-family printer
//!   shared with CUDA (no third statement printer).
//! * **[`plan`]**: the host side of a launch as data: buffers with their indices and
//!   offsets, the bytes of every `setBytes`, threadgroup-memory lengths, the dispatch.
//!   Computed and unit-tested everywhere.
//! * **`shim`** (feature `shim`, Unix): the generated MSL compiled as C++ by clang against a
//!   shim of `<metal_stdlib>`, executed on the CPU with a plan, with exact barrier
//!   semantics. The conformance suite runs through it in CI. It proves our MSL's meaning
//!   and our plan; it cannot prove Apple's compiler or driver.
//! * The Objective-C layer (objc2-metal, Apple targets only) carries plans out on a real
//!   device. It is type-checked here for `aarch64-apple-darwin`; it has never run here,
//!   since no Apple hardware is available (`docs/metal.md`).
//!
//! ## Contract
//!
//! *Validates*: that a kernel can be expressed in MSL (no f64; at most 30 parameters),
//! the group size against the pipeline's `maxTotalThreadsPerThreadgroup`, and the
//! threadgroup memory against the device's limit, each as an `Err`.
//! *Trusts*: the facade for argument types, view ranges and launch geometry
//! (`dotcompute_hal::Launch::resolve`), as every backend does.

pub mod outcome;
pub mod plan;

use dotcompute_codegen::msl::MslModule;
use dotcompute_hal::{Error, Program, Result};

/// The MSL of `program` (its checked form with `checked`), for every executor of plans:
/// hand-written kernels and kernels MSL cannot express are `Error::Unsupported`.
pub fn msl_module(program: &Program, checked: bool) -> Result<MslModule> {
    if let Some(raw) = program.raw_source() {
        if raw.language != dotcompute_hal::RawLanguage::Msl {
            return Err(Error::Unsupported {
                op: "raw kernel",
                detail: format!(
                    "kernel `{}` is hand-written {}; Metal runs #[kernel] functions and \
                     hand-written MSL",
                    program.name(),
                    raw.language.name()
                ),
            });
        }
        return dotcompute_codegen::msl_raw::raw_module(&raw.text, &raw.entry, &program.kernel)
            .map_err(|log| Error::Compile {
                kernel: program.name().into(),
                backend: "metal".into(),
                log,
            });
    }
    let module = dotcompute_codegen::msl::generate_with(&program.kernel, checked).map_err(|e| {
        Error::Unsupported {
            op: "kernel",
            detail: e.to_string(),
        }
    })?;
    let variant = if checked { "checked" } else { "" };
    dotcompute_hal::dump::dump_source(program, variant, "metal", "//", &module.source)?;
    Ok(module)
}

#[cfg(all(feature = "shim", unix))]
pub mod shim;

#[cfg(target_vendor = "apple")]
mod apple;
#[cfg(target_vendor = "apple")]
pub use apple::{MetalBackend, MetalBuffer, DESCRIPTOR};
