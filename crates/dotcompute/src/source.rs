//! The code generated from a kernel, as each backend would compile it (issue 31: a user
//! could not see what their own kernel became without calling the generators by hand).
//!
//! [`KernelSource::source`] works on any kernel definition, generic instances included
//! (`my_kernel::kernel::<f32, 4>()`), and on hand-written kernels (their own text). It
//! needs no device. What a launch compiles can differ in what the launch chooses: the
//! WGSL is specialised for the launch's group size and dynamic shared length (here 256
//! threads and 256 elements unless [`SourceOptions`] says otherwise), and wgpu and CUDA
//! may pick a grid-stride or vector form; `DOTCOMPUTE_DUMP=<dir>` writes exactly what
//! each launch compiled ([`dotcompute_hal::dump`]).

use crate::raw::RawKernel;
use dotcompute_codegen::{msl, wgsl, Target as _};
use dotcompute_hal::{Error, KernelDef, Program, RawLanguage, Result};

/// A language a kernel can be shown in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Target {
    /// dotcompute's IR as text (what every generator reads).
    Ir,
    /// CUDA C++ (compiled by NVRTC on the CUDA backend).
    Cuda,
    /// WGSL (the wgpu backend; on Vulkan it then goes through naga to strict SPIR-V).
    Wgsl,
    /// Metal Shading Language (the Metal backend and its Linux shim).
    Msl,
}

impl Target {
    /// Every target, in the order above.
    pub const ALL: [Target; 4] = [Target::Ir, Target::Cuda, Target::Wgsl, Target::Msl];
    /// Its short name (`ir`, `cuda`, `wgsl`, `msl`).
    pub fn name(self) -> &'static str {
        match self {
            Target::Ir => "ir",
            Target::Cuda => "cuda",
            Target::Wgsl => "wgsl",
            Target::Msl => "msl",
        }
    }
}

/// What a launch would choose that changes the generated code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceOptions {
    /// The checked form (`Launch::checked`): every access bounds-checked.
    pub checked: bool,
    /// Threads per group (WGSL declares it in the shader).
    pub group: [u32; 3],
    /// The length of the kernel's `shared_dynamic` array (WGSL declares it too).
    pub dynamic_shared_len: u32,
}

impl Default for SourceOptions {
    fn default() -> SourceOptions {
        SourceOptions {
            checked: false,
            group: [256, 1, 1],
            dynamic_shared_len: 256,
        }
    }
}

/// The generated (or hand-written) code of a kernel. Imported by the prelude.
///
/// ```
/// use dotcompute::prelude::*;
/// use dotcompute::{KernelSource, Target};
///
/// #[kernel]
/// fn scale(x: &mut [f32], a: f32) {
///     let i = global_id().x;
///     if i < x.len() {
///         x[i] = x[i] * a;
///     }
/// }
///
/// let cuda = scale::kernel().source(Target::Cuda)?;
/// assert!(cuda.contains("scale"));
/// let wgsl = scale::kernel().source(Target::Wgsl)?;
/// assert!(wgsl.contains("@compute"));
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub trait KernelSource {
    /// The code for `target` with the default [`SourceOptions`].
    fn source(&self, target: Target) -> Result<String> {
        self.source_with(target, SourceOptions::default())
    }
    /// The code for `target` as a launch with `options` would compile it.
    fn source_with(&self, target: Target, options: SourceOptions) -> Result<String>;
}

impl KernelSource for KernelDef {
    fn source_with(&self, target: Target, options: SourceOptions) -> Result<String> {
        program_source(self.program()?, target, options)
    }
}

impl KernelSource for RawKernel {
    fn source_with(&self, target: Target, options: SourceOptions) -> Result<String> {
        program_source(self.program(), target, options)
    }
}

/// The source of `program` for `target`.
pub(crate) fn program_source(
    program: &Program,
    target: Target,
    options: SourceOptions,
) -> Result<String> {
    let kernel = &*program.kernel;
    if let Some(raw) = program.raw_source() {
        let own = match raw.language {
            RawLanguage::Wgsl => Some(Target::Wgsl),
            RawLanguage::Cuda => Some(Target::Cuda),
            RawLanguage::Msl => Some(Target::Msl),
            // Binary: no text form among the targets.
            RawLanguage::Spirv => None,
        };
        return match target {
            t if Some(t) == own => Ok(raw.text.clone()),
            Target::Ir => Ok(dotcompute_codegen::IrText.generate(kernel)),
            _ => Err(Error::Unsupported {
                op: "KernelSource::source",
                detail: format!(
                    "kernel `{}` is hand-written {}; it has no {} form",
                    kernel.name,
                    raw.language.name(),
                    target.name()
                ),
            }),
        };
    }
    let unsupported = |detail: String| Error::Unsupported {
        op: "KernelSource::source",
        detail,
    };
    match target {
        Target::Ir => Ok(dotcompute_codegen::IrText.generate(kernel)),
        Target::Cuda => Ok(dotcompute_codegen::cuda::generate_with(
            kernel,
            &dotcompute_codegen::cuda::CudaOptions {
                checked: options.checked,
                unroll: dotcompute_hal::settings::unroll()?,
            },
        )
        .source),
        Target::Wgsl => wgsl::generate(
            kernel,
            &wgsl::WgslOptions {
                group_size: options.group,
                dynamic_shared_len: options.dynamic_shared_len,
                checked: options.checked,
                unroll: dotcompute_hal::settings::unroll()?,
                ..wgsl::WgslOptions::default()
            },
        )
        .map(|m| m.source)
        .map_err(|e| unsupported(format!("WGSL of kernel `{}`: {}", kernel.name, e.message))),
        Target::Msl => msl::generate_with(kernel, options.checked)
            .map(|m| m.source)
            .map_err(|e| unsupported(format!("MSL of kernel `{}`: {e}", kernel.name))),
    }
}
