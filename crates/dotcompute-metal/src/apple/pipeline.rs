//! Pipelines: generated MSL compiled as MSL 2.4 with safe math and precise functions (fast
//! math off before macOS 15), one pipeline per program, cached in memory by the program's
//! content key.
//!
//! On-disk caching: `MTLBinaryArchive` is not used yet. An archive only pays when it is
//! both written and *looked up* at pipeline creation (DotCompute wrote one and never
//! read it); doing that needs a descriptor-based pipeline creation path and a
//! per-device archive file, which will come with a Mac to test on. Until then the
//! system's own Metal shader cache is the disk cache.

use super::Mtl;
use dotcompute_codegen::msl::MslModule;
use dotcompute_hal::{Error, Result};
use objc2::rc::Retained;
use objc2::runtime::ProtocolObject;
use objc2::sel;
use objc2_foundation::NSObjectProtocol;
use objc2_foundation::NSString;
use objc2_metal::{
    MTLCompileOptions, MTLComputePipelineState, MTLDevice, MTLLanguageVersion, MTLLibrary,
    MTLMathFloatingPointFunctions, MTLMathMode,
};

/// A compiled kernel.
pub(crate) struct Pipeline {
    pub(crate) state: Retained<ProtocolObject<dyn MTLComputePipelineState>>,
    pub(crate) module: MslModule,
}

// SAFETY: pipeline states are immutable and thread-safe (Metal threading rules).
unsafe impl Send for Pipeline {}
// SAFETY: shared use is sound for the reason above (Send).
unsafe impl Sync for Pipeline {}

impl Pipeline {
    /// `maxTotalThreadsPerThreadgroup` of this pipeline.
    pub(crate) fn max_threads(&self) -> u32 {
        self.state.maxTotalThreadsPerThreadgroup() as u32
    }
}

pub(crate) fn compile(
    device: &Mtl<dyn MTLDevice>,
    kernel: &str,
    module: MslModule,
) -> Result<Pipeline> {
    let fail = |message: String| Error::Backend {
        backend: "metal".into(),
        message: format!("kernel `{kernel}`: {message}"),
    };
    let options = MTLCompileOptions::new();
    // One language version on every OS (the default follows the OS): 2.4 (macOS 12) has
    // every SIMD-group function the generated MSL uses.
    options.setLanguageVersion(MTLLanguageVersion::Version2_4);
    // The IR's float semantics (no reassociation, NaN and infinity honoured, precise
    // library functions). `mathMode` replaces `fastMathEnabled` from macOS 15; older
    // systems lack the selector, so it is asked for first. Contraction of `a * b + c` is
    // turned off in the source itself (`#pragma clang fp contract(off)`).
    if options.respondsToSelector(sel!(setMathMode:)) {
        options.setMathMode(MTLMathMode::Safe);
        options.setMathFloatingPointFunctions(MTLMathFloatingPointFunctions::Precise);
    } else {
        #[allow(deprecated)]
        options.setFastMathEnabled(false);
    }
    let library = device
        .newLibraryWithSource_options_error(&NSString::from_str(&module.source), Some(&options))
        .map_err(|e| {
            fail(format!(
                "the Metal compiler rejected the MSL: {}",
                e.localizedDescription()
            ))
        })?;
    let function = library
        .newFunctionWithName(&NSString::from_str(&module.entry))
        .ok_or_else(|| fail(format!("the library has no function `{}`", module.entry)))?;
    let state = device
        .newComputePipelineStateWithFunction_error(&function)
        .map_err(|e| fail(format!("no pipeline: {}", e.localizedDescription())))?;
    Ok(Pipeline { state, module })
}
