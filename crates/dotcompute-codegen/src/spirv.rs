//! SPIR-V for Vulkan that keeps the IR's floating-point meaning (issue 27, item 5).
//!
//! `dotcompute_ir` defines float `+ - *` as correctly rounded, each on its own. WGSL
//! (and the SPIR-V naga writes from it) lets a driver contract `a * b + c` into one fused
//! multiply-add and reassociate sums: NVIDIA's Vulkan driver fuses, lavapipe reassociates,
//! and results then differ from the CPU and CUDA. SPIR-V's `NoContraction` decoration on
//! an arithmetic result forbids both, so [`strict_float`] decorates the result of every
//! float `OpFAdd`, `OpFSub`, `OpFMul`, `OpFDiv`, `OpFRem`, `OpFMod`,
//! `OpVectorTimesScalar` and `OpDot`. An explicit `fma` (GLSL.std.450 `Fma`) is left as
//! it is.
//!
//! With `denorm_preserve`, the entry point also gets the `DenormPreserve 32` execution
//! mode (SPV_KHR_float_controls, core in SPIR-V 1.4): 32-bit subnormal inputs and results
//! are kept instead of flushed to zero. Only for devices that report
//! `shaderDenormPreserveFloat32`.
//!
//! The pass edits the binary in place of naga's output; it adds instructions to the
//! capability, extension, execution-mode and annotation sections and changes nothing else.

/// Options of [`to_strict_spirv`] for one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StrictSpirv {
    /// SPIR-V version (major, minor): 1.3 for Vulkan 1.1, 1.5 for 1.2, 1.6 for 1.3.
    pub version: (u8, u8),
    /// Add `DenormPreserve 32` to the entry point.
    pub denorm_preserve: bool,
}

mod op {
    pub const EXTENSION: u16 = 10;
    pub const CAPABILITY: u16 = 17;
    pub const ENTRY_POINT: u16 = 15;
    pub const EXECUTION_MODE: u16 = 16;
    pub const DECORATE: u16 = 71;
    pub const F_NEGATE: u16 = 127;
    pub const F_ADD: u16 = 129;
    pub const F_SUB: u16 = 131;
    pub const F_MUL: u16 = 133;
    pub const F_DIV: u16 = 136;
    pub const F_REM: u16 = 140;
    pub const F_MOD: u16 = 141;
    pub const VECTOR_TIMES_SCALAR: u16 = 142;
    pub const DOT: u16 = 148;
    /// Opcodes of the sections before the types: capabilities, extensions, imports, the
    /// memory model, entry points, execution modes, debug names and annotations.
    pub const PREAMBLE: &[u16] = &[
        2, 3, 4, 5, 6, 7, 8, 10, 11, 14, 15, 16, 17, 71, 72, 73, 74, 75, 317, 330, 331, 332, 5632,
        5633,
    ];
}

const DECORATION_NO_CONTRACTION: u32 = 42;
const CAPABILITY_DENORM_PRESERVE: u32 = 4464;
const EXECUTION_MODE_DENORM_PRESERVE: u32 = 4459;

/// The float arithmetic whose results get `NoContraction`. (`OpFNegate` is exact; it is
/// listed so that a negated product is not fused either.)
const CONTRACTIBLE: &[u16] = &[
    op::F_NEGATE,
    op::F_ADD,
    op::F_SUB,
    op::F_MUL,
    op::F_DIV,
    op::F_REM,
    op::F_MOD,
    op::VECTOR_TIMES_SCALAR,
    op::DOT,
];

/// SPIR-V words for Vulkan of a validated module's entry point `main`, written with the
/// options wgpu uses on Vulkan (buffer accesses left to the device's robust buffer
/// access, which wgpu turns on) but for three: workgroup memory is not zeroed (the kernel
/// language leaves it undefined), and array indices are not clamped nor loops bounded,
/// because the module is the WGSL generator's, which does both itself where they are
/// needed. Only for modules of [`crate::wgsl`]: hand-written WGSL would lose those
/// safeguards. Then passed through [`strict_float`].
pub fn to_strict_spirv(
    m: &crate::naga_out::NagaModule,
    options: &StrictSpirv,
) -> Result<Vec<u32>, String> {
    use naga::back::spv;
    use naga::proc::{BoundsCheckPolicies, BoundsCheckPolicy};
    let spv_options = spv::Options {
        lang_version: options.version,
        flags: spv::WriterFlags::empty(),
        capabilities: None,
        bounds_check_policies: BoundsCheckPolicies {
            // The WGSL generator clamps every shared and private array index it cannot
            // prove in bounds (`wgsl::Gen::element`), and naga's clamps on the others
            // cost a matrix product 2 % on NVIDIA Vulkan (a 16x16 tiled one 35 %).
            index: BoundsCheckPolicy::Unchecked,
            buffer: BoundsCheckPolicy::Unchecked,
            image_load: BoundsCheckPolicy::Restrict,
            binding_array: BoundsCheckPolicy::Unchecked,
        },
        // Shared memory starts undefined in the kernel language (as in CUDA; the CPU
        // backend poisons it so that a read before a write shows), so nothing zeroes it.
        // naga's polyfill had one invocation per group store the whole array: a 16 KiB
        // shared histogram took lavapipe 58 s to 209 s to compile (0.04 s without), and
        // each group's first thread zeroed it before any other could start.
        zero_initialize_workgroup_memory: spv::ZeroInitializeWorkgroupMemoryMode::None,
        // The WGSL generator bounds the loops that do not end by construction
        // (`wgsl::Gen::bounded_loop`).
        force_loop_bounding: false,
        ..Default::default()
    };
    let pipeline = spv::PipelineOptions {
        shader_stage: naga::ShaderStage::Compute,
        entry_point: "main".into(),
    };
    let words = spv::write_vec(&m.module, &m.info, &spv_options, Some(&pipeline))
        .map_err(|e| format!("SPIR-V generation failed: {e}"))?;
    strict_float(&words, options.denorm_preserve)
}

fn instruction(opcode: u16, operands: &[u32]) -> Vec<u32> {
    let mut words = vec![((operands.len() as u32 + 1) << 16) | opcode as u32];
    words.extend_from_slice(operands);
    words
}

/// A literal string as SPIR-V words (nul-terminated, padded to whole words).
fn string_words(s: &str) -> Vec<u32> {
    let mut bytes = s.as_bytes().to_vec();
    bytes.push(0);
    while bytes.len() % 4 != 0 {
        bytes.push(0);
    }
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The instructions of a module: (start word, opcode, word count), or an error for a
/// truncated or malformed binary.
fn instructions(words: &[u32]) -> Result<Vec<(usize, u16, usize)>, String> {
    if words.len() < 5 || words[0] != 0x0723_0203 {
        return Err("not a SPIR-V module (bad magic number or header)".into());
    }
    let mut list = Vec::new();
    let mut at = 5;
    while at < words.len() {
        let count = (words[at] >> 16) as usize;
        let opcode = (words[at] & 0xffff) as u16;
        if count == 0 || at + count > words.len() {
            return Err(format!("malformed SPIR-V instruction at word {at}"));
        }
        list.push((at, opcode, count));
        at += count;
    }
    Ok(list)
}

/// Adds `NoContraction` to every float arithmetic result of `words` (and, with
/// `denorm_preserve`, the `DenormPreserve 32` mode to every entry point; SPIR-V before
/// 1.4 also gets the SPV_KHR_float_controls extension).
pub fn strict_float(words: &[u32], denorm_preserve: bool) -> Result<Vec<u32>, String> {
    let list = instructions(words)?;
    // Float types: OpTypeFloat (22) results, and vectors of them (OpTypeVector, 23).
    let mut float_types = std::collections::HashSet::new();
    for &(at, opcode, count) in &list {
        match opcode {
            22 if count >= 3 => {
                float_types.insert(words[at + 1]);
            }
            23 if count >= 4 && float_types.contains(&words[at + 2]) => {
                float_types.insert(words[at + 1]);
            }
            _ => {}
        }
    }
    let decorated: Vec<u32> = list
        .iter()
        .filter(|&&(at, opcode, count)| {
            CONTRACTIBLE.contains(&opcode) && count >= 4 && float_types.contains(&words[at + 1])
        })
        .map(|&(at, _, _)| words[at + 2])
        .collect();
    let version = (words[1] >> 16) & 0xff;
    let minor = (words[1] >> 8) & 0xff;
    let entries: Vec<u32> = list
        .iter()
        .filter(|&&(_, opcode, count)| opcode == op::ENTRY_POINT && count >= 3)
        .map(|&(at, _, _)| words[at + 2])
        .collect();
    let last_of = |opcodes: &[u16]| {
        list.iter()
            .filter(|(_, o, _)| opcodes.contains(o))
            .map(|&(at, _, count)| at + count)
            .max()
    };
    // Where each addition goes (a word index of the original; inserted before it).
    let after_capabilities = last_of(&[op::CAPABILITY]).unwrap_or(5);
    let after_extensions = last_of(&[op::CAPABILITY, op::EXTENSION]).unwrap_or(5);
    let after_modes = last_of(&[op::ENTRY_POINT, op::EXECUTION_MODE])
        .ok_or("the SPIR-V module has no entry point")?;
    let annotations_end = list
        .iter()
        .find(|(_, o, _)| !op::PREAMBLE.contains(o))
        .map_or(words.len(), |&(at, _, _)| at);
    let mut inserts: Vec<(usize, Vec<u32>)> = Vec::new();
    if denorm_preserve {
        inserts.push((
            after_capabilities,
            instruction(op::CAPABILITY, &[CAPABILITY_DENORM_PRESERVE]),
        ));
        if (version, minor) < (1, 4) {
            inserts.push((
                after_extensions,
                instruction(op::EXTENSION, &string_words("SPV_KHR_float_controls")),
            ));
        }
        for &entry in &entries {
            inserts.push((
                after_modes,
                instruction(
                    op::EXECUTION_MODE,
                    &[entry, EXECUTION_MODE_DENORM_PRESERVE, 32],
                ),
            ));
        }
    }
    let decorations: Vec<u32> = decorated
        .iter()
        .flat_map(|&id| instruction(op::DECORATE, &[id, DECORATION_NO_CONTRACTION]))
        .collect();
    inserts.push((annotations_end, decorations));
    // Stable: additions at one place keep the order pushed above.
    inserts.sort_by_key(|(at, _)| *at);
    let mut out =
        Vec::with_capacity(words.len() + inserts.iter().map(|i| i.1.len()).sum::<usize>());
    let mut from = 0;
    for (at, add) in inserts {
        out.extend_from_slice(&words[from..at]);
        out.extend(add);
        from = at;
    }
    out.extend_from_slice(&words[from..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::naga_out;

    const SOURCE: &str = r#"
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> n: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let a = x[i];
    x[i] = a * a - x[i + 1u] * 3.0 + 0.5 / a;
    let v = vec2<f32>(a, 2.0) * a;
    x[i + 2u] = dot(v, v) + fma(a, a, a);
    n[i] = n[i] * 3u + 1u;
}
"#;

    /// Decorated result ids of `words`.
    fn no_contraction(words: &[u32]) -> Vec<u32> {
        instructions(words)
            .unwrap()
            .into_iter()
            .filter(|&(at, o, c)| o == op::DECORATE && c == 3 && words[at + 2] == 42)
            .map(|(at, _, _)| words[at + 1])
            .collect()
    }

    fn float_results(words: &[u32]) -> usize {
        let list = instructions(words).unwrap();
        list.iter()
            .filter(|(_, o, _)| CONTRACTIBLE.contains(o))
            .count()
    }

    #[test]
    fn every_float_arithmetic_result_is_decorated_and_nothing_else_changes() {
        let module = naga_out::validate_wgsl(SOURCE).unwrap();
        let plain = naga_out::to_spirv(&module).unwrap();
        assert!(no_contraction(&plain).is_empty());
        let strict = strict_float(&plain, false).unwrap();
        let decorated = no_contraction(&strict);
        // a*a, x*3, -, 0.5/a, +, vec*a, dot, + (the integer ops are not float).
        assert!(decorated.len() >= 7, "{decorated:?}");
        assert_eq!(
            decorated.len(),
            float_results(&plain),
            "only float arithmetic"
        );
        // The original instructions are all still there, in order.
        let kept: Vec<u32> = strict
            .iter()
            .copied()
            .filter(|w| plain.contains(w))
            .collect();
        assert!(kept.len() >= plain.len());
        assert_eq!(strict.len(), plain.len() + 3 * decorated.len());
        // naga reads the result back as a valid module.
        let opts = naga::front::spv::Options::default();
        let back = naga::front::spv::parse_u8_slice(bytemuck_words(&strict).as_slice(), &opts)
            .expect("the decorated module parses");
        assert_eq!(back.entry_points.len(), 1);
    }

    #[test]
    fn denorm_preserve_adds_the_capability_extension_and_mode() {
        let module = naga_out::validate_wgsl(SOURCE).unwrap();
        let plain = naga_out::to_spirv(&module).unwrap();
        let strict = strict_float(&plain, true).unwrap();
        let list = instructions(&strict).unwrap();
        let has = |opcode: u16, operand: u32, index: usize| {
            list.iter()
                .any(|&(at, o, c)| o == opcode && c > index && strict[at + index] == operand)
        };
        assert!(has(op::CAPABILITY, CAPABILITY_DENORM_PRESERVE, 1));
        assert!(has(op::EXECUTION_MODE, EXECUTION_MODE_DENORM_PRESERVE, 2));
        // naga's default output is SPIR-V 1.0: the extension is declared.
        assert!(list.iter().any(|&(at, o, _)| o == op::EXTENSION
            && strict[at + 1] == string_words("SPV_KHR_float_controls")[0]));
        // Capabilities still come first, then extensions.
        let first_other = list
            .iter()
            .position(|(_, o, _)| *o != op::CAPABILITY)
            .unwrap();
        assert!(list[first_other..]
            .iter()
            .all(|(_, o, _)| *o != op::CAPABILITY));
    }

    #[test]
    fn a_malformed_binary_is_an_error() {
        assert!(strict_float(&[1, 2, 3], false).is_err());
        let module = naga_out::validate_wgsl(SOURCE).unwrap();
        let mut plain = naga_out::to_spirv(&module).unwrap();
        plain.truncate(plain.len() - 1);
        plain.push(0xffff_0000);
        assert!(strict_float(&plain, false).is_err());
    }

    fn bytemuck_words(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }
}
