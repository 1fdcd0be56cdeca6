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
    // Subgroup operations are allowed here; whether the device has them is checked when a
    // kernel using them is launched.
    let info = Validator::new(
        ValidationFlags::all(),
        Capabilities::SUBGROUP | Capabilities::SHADER_FLOAT16 | Capabilities::SHADER_FLOAT32_ATOMIC,
    )
    .subgroup_stages(naga::valid::ShaderStages::COMPUTE)
    .subgroup_operations(naga::valid::SubgroupOperationSet::all())
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

pub use crate::Reflection;

/// Parses and validates hand-written WGSL and reflects entry point `entry`. Only group 0
/// is supported; storage buffers must be runtime-sized arrays of a 32-bit scalar type or
/// of a 2- or 4-lane vector of one (`array<vec4<f32>>` is a buffer of `Vec4<f32>`).
pub fn reflect_compute(source: &str, entry: &str) -> Result<Reflection, String> {
    let m = validate_wgsl(source)?;
    reflect_module(&m.module, entry, "WGSL")
}

/// Parses and validates a SPIR-V module (naga's SPIR-V front end) and reflects entry
/// point `entry` like [`reflect_compute`]. A storage buffer may be the runtime array
/// itself or, as SPIR-V compilers write it, a block whose last member is one.
pub fn reflect_spirv(words: &[u32], entry: &str) -> Result<Reflection, String> {
    if words.first() != Some(&0x0723_0203) {
        return Err(
            "this is not a SPIR-V module (its first word is not the magic number 0x07230203)"
                .into(),
        );
    }
    let options = naga::front::spv::Options {
        adjust_coordinate_space: false,
        strict_capabilities: false,
        block_ctx_dump_prefix: None,
    };
    let module = naga::front::spv::Frontend::new(words.iter().copied(), &options)
        .parse()
        .map_err(|e| format!("the SPIR-V could not be read: {e}"))?;
    Validator::new(
        ValidationFlags::all(),
        Capabilities::SUBGROUP | Capabilities::SHADER_FLOAT16 | Capabilities::SHADER_FLOAT32_ATOMIC,
    )
    .subgroup_stages(naga::valid::ShaderStages::COMPUTE)
    .subgroup_operations(naga::valid::SubgroupOperationSet::all())
    .validate(&module)
    .map_err(|e| format!("the SPIR-V is not valid: {}", e.as_inner()))?;
    reflect_module(&module, entry, "SPIR-V")
}

/// The interface of compute entry point `entry` of a module read from `language`.
fn reflect_module(
    module: &naga::Module,
    entry: &str,
    language: &str,
) -> Result<Reflection, String> {
    use dotcompute_ir::{ScalarType, Type};
    use naga::{AddressSpace, ScalarKind, StorageAccess, TypeInner};
    let ep = module
        .entry_points
        .iter()
        .find(|e| e.name == entry && e.stage == naga::ShaderStage::Compute)
        .ok_or_else(|| format!("the {language} has no compute entry point `{entry}`"))?;
    let mut storage = Vec::new();
    let mut uniform = None;
    let workgroup_bytes = module
        .global_variables
        .iter()
        .filter(|(_, var)| var.space == AddressSpace::WorkGroup)
        .map(|(_, var)| module.types[var.ty].inner.size(module.to_ctx()) as u64)
        .sum();
    for (_, var) in module.global_variables.iter() {
        let Some(binding) = &var.binding else {
            continue;
        };
        let name = var.name.clone().unwrap_or_default();
        if binding.group != 0 {
            return Err(format!(
                "`{name}` is in bind group {}; raw kernels use group 0",
                binding.group
            ));
        }
        match var.space {
            AddressSpace::Storage { access } => {
                // The runtime array, or the last member of the block holding it.
                let array = match &module.types[var.ty].inner {
                    TypeInner::Struct { members, .. } => members.last().map(|m| m.ty),
                    _ => Some(var.ty),
                };
                let elem = match array.map(|t| &module.types[t].inner) {
                    Some(TypeInner::Array { base, .. }) => match &module.types[*base].inner {
                        TypeInner::Scalar(s) => Some((*s, 1)),
                        TypeInner::Atomic(s) => Some((*s, 1)),
                        TypeInner::Vector { size, scalar } => Some((*scalar, *size as u8)),
                        _ => None,
                    },
                    _ => None,
                };
                let ty = elem.and_then(|(s, lanes)| {
                    let scalar = match (s.kind, s.width) {
                        (ScalarKind::Float, 4) => ScalarType::F32,
                        (ScalarKind::Sint, 4) => ScalarType::I32,
                        (ScalarKind::Uint, 4) => ScalarType::U32,
                        _ => return None,
                    };
                    Some(Type::vector(scalar, lanes)).filter(|t| t.is_well_formed())
                });
                let ty = ty.ok_or_else(|| {
                    format!(
                        "storage buffer `{name}` (binding {}) must be an array of f32, i32 or \
                         u32, or of vec2 / vec4 of one",
                        binding.binding
                    )
                })?;
                storage.push((binding.binding, !access.contains(StorageAccess::STORE), ty));
            }
            AddressSpace::Uniform => {
                let size = module.types[var.ty].inner.size(module.to_ctx());
                if uniform.replace((binding.binding, size)).is_some() {
                    return Err("raw kernels take at most one uniform block (the scalars)".into());
                }
            }
            _ => {}
        }
    }
    storage.sort_by_key(|s| s.0);
    Ok(Reflection {
        workgroup_size: ep.workgroup_size,
        storage,
        uniform,
        workgroup_bytes,
    })
}
