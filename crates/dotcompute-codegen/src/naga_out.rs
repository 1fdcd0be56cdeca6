//! WGSL → naga IR → MSL, SPIR-V and HLSL. Every generated WGSL module goes through naga's
//! parser and validator here, so a codegen bug surfaces as an error that quotes the
//! offending WGSL line, never as a driver crash.

use naga::valid::{Capabilities, ModuleInfo, ValidationFlags, Validator};

/// A parsed and validated module.
pub struct NagaModule {
    pub module: naga::Module,
    pub info: ModuleInfo,
}

/// Parses and validates WGSL; errors quote the source around the problem.
pub fn validate_wgsl(source: &str) -> Result<NagaModule, String> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| e.emit_to_string(source))?;
    let info = Validator::new(ValidationFlags::all(), Capabilities::empty())
        .validate(&module)
        .map_err(|e| e.emit_to_string(source))?;
    Ok(NagaModule { module, info })
}

/// Metal Shading Language, as naga writes it (entry point `main_`, naga renames `main`).
pub fn to_msl(m: &NagaModule) -> Result<String, String> {
    let options = naga::back::msl::Options::default();
    let pipeline = naga::back::msl::PipelineOptions::default();
    naga::back::msl::write_string(&m.module, &m.info, &options, &pipeline)
        .map(|(s, _)| s)
        .map_err(|e| format!("MSL generation failed: {e}"))
}

/// SPIR-V words for Vulkan.
pub fn to_spirv(m: &NagaModule) -> Result<Vec<u32>, String> {
    let options = naga::back::spv::Options::default();
    naga::back::spv::write_vec(&m.module, &m.info, &options, None)
        .map_err(|e| format!("SPIR-V generation failed: {e}"))
}

/// HLSL for DX12.
pub fn to_hlsl(m: &NagaModule) -> Result<String, String> {
    let options = naga::back::hlsl::Options::default();
    let mut out = String::new();
    let pipeline = Default::default();
    let mut writer = naga::back::hlsl::Writer::new(&mut out, &options, &pipeline);
    writer
        .write(&m.module, &m.info, None)
        .map_err(|e| format!("HLSL generation failed: {e}"))?;
    Ok(out)
}
