//! IR → Metal Shading Language, through the C-family walk shared with CUDA
//! ([`crate::cfamily`]): only the spellings ([`Dialect`]) and the entry point are MSL's.
//!
//! ## The entry point (the encoding contract)
//!
//! `kernel void dc_<name>(...)` takes, in this order ([`MslModule::bindings`]):
//!
//! 1. every IR parameter at buffer index = its position: a buffer as a `device` pointer
//!    (`const device T*` when read-only), set with `setBuffer:offset:atIndex:`; a scalar
//!    as `constant T&`, set with `setBytes:length:atIndex:` (`bool` is one byte);
//! 2. `constant u32* dc_info` at the next buffer index, set with `setBytes`:
//!    `[grid x, y, z, group x, y, z, dynamic shared length, then the length in elements
//!    of each buffer parameter in signature order]` ([`info_slots`]);
//! 3. every shared array, static or dynamic, as `threadgroup T*` at threadgroup index =
//!    its position, sized with `setThreadgroupMemoryLength:atIndex:` (a multiple of 16
//!    bytes). Static arrays could be declared inside the kernel instead; taking them as
//!    arguments makes their size part of the encoding plan, which the Linux test run
//!    checks (DotCompute's Metal kernels failed because threadgroup memory was never
//!    sized);
//! 4. the thread-position attributes. The group size comes from `dc_info`, not from
//!    `[[threads_per_threadgroup]]`, because `dispatchThreads` makes the last group of a
//!    dimension partial, and the IR's `group_size()` is the launch's group size.
//!
//! Threads outside the grid leave at once (a `dispatchThreads` grid has none; a
//! `dispatchThreadgroups` grid, used for kernels that run whole groups, has them, and
//! those kernels bound their own accesses).
//!
//! ## What Metal lacks
//!
//! MSL has no `double`: kernels that use f64 are refused ([`generate`] returns an error
//! naming the type), and a Metal device reports `f64: false`. Atomics are 32-bit (the IR
//! allows no others); f32 `atomic_add` is a compare-exchange loop on the bits, which
//! every Apple GPU family supports (`atomic<float>` needs MSL 3.0).
//!
//! ## Semantics
//!
//! As in CUDA: the prelude's helpers define C++'s undefined integer cases; f16 values are
//! floats rounded after every operation (`dc_rh`) and stored as `half`; float-to-int casts
//! saturate and send NaN to 0. Math functions are the overloaded `metal::` ones; the
//! backend compiles with fast math off (`MTLMathModeSafe`), so they are the precise forms.

use crate::cfamily::{Dialect, Gen, INT_HELPERS, LOOP_HELPERS};
pub use dotcompute_ir::interface::Slot;
use dotcompute_ir::*;
use std::fmt::Write;

/// What each word of `dc_info` holds, in order: grid (3), group size (3), the dynamic
/// shared length, then the length in elements of each buffer parameter in signature
/// order. The kernel reads its words from the positions in this list, and the planner
/// (`dotcompute_hal::plan::fill_slots`) fills them from it.
pub fn info_slots(kernel: &Kernel) -> Vec<Slot> {
    let mut slots: Vec<Slot> = (0..3).map(Slot::Grid).collect();
    slots.extend((0..3).map(Slot::Group));
    slots.push(Slot::DynamicSharedLen);
    slots.extend(
        kernel
            .params
            .iter()
            .enumerate()
            .filter(|(_, p)| matches!(p, Param::Buffer { .. }))
            .map(|(i, _)| Slot::BufferLen(i as u32)),
    );
    slots
}

/// Metal's limit on buffer argument indices (0..=30).
pub const MAX_BUFFER_INDEX: u32 = 30;

/// One argument of the entry point, in order, and what the encoder binds there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MslBinding {
    /// IR parameter `param` at buffer index `index`: a buffer (`setBuffer`) or a scalar
    /// (`setBytes`, `size` bytes).
    Param { param: u32, index: u32 },
    /// The launch words (`dc_info`) at buffer index `index` (`setBytes`).
    Info { index: u32 },
    /// Checked modules only: the launch's violation record
    /// (`dotcompute_hal::VIOLATION_WORDS` zeroed `u32`s) at buffer index `index`.
    ViolationRecord { index: u32 },
    /// Shared array `shared` at threadgroup index `index`
    /// (`setThreadgroupMemoryLength`).
    Threadgroup { shared: u32, index: u32 },
    /// Hand-written kernels ([`crate::msl_raw`]): every scalar parameter, 4 bytes each in
    /// order (a `bool` as a `uint`), in one block at buffer index `index` (`setBytes`).
    Scalars { index: u32 },
}

/// A thread-position attribute the entry point takes after its bindings, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MslAttribute {
    /// `[[thread_position_in_grid]]` (uint3)
    ThreadPositionInGrid,
    /// `[[thread_position_in_threadgroup]]` (uint3)
    ThreadPositionInThreadgroup,
    /// `[[threadgroup_position_in_grid]]` (uint3)
    ThreadgroupPositionInGrid,
    /// `[[threadgroups_per_grid]]` (uint3)
    ThreadgroupsPerGrid,
    /// `[[threads_per_simdgroup]]` (uint), only in kernels with subgroup operations.
    ThreadsPerSimdgroup,
    /// `[[thread_index_in_simdgroup]]` (uint), only in kernels with subgroup operations.
    ThreadIndexInSimdgroup,
}

impl MslAttribute {
    /// The type a generated kernel declares it with.
    pub fn declared_type(self) -> &'static str {
        match self {
            MslAttribute::ThreadsPerSimdgroup | MslAttribute::ThreadIndexInSimdgroup => "uint",
            _ => "uint3",
        }
    }

    pub fn spelling(self) -> &'static str {
        match self {
            MslAttribute::ThreadPositionInGrid => "thread_position_in_grid",
            MslAttribute::ThreadPositionInThreadgroup => "thread_position_in_threadgroup",
            MslAttribute::ThreadgroupPositionInGrid => "threadgroup_position_in_grid",
            MslAttribute::ThreadgroupsPerGrid => "threadgroups_per_grid",
            MslAttribute::ThreadsPerSimdgroup => "threads_per_simdgroup",
            MslAttribute::ThreadIndexInSimdgroup => "thread_index_in_simdgroup",
        }
    }
}

/// A generated MSL library with one kernel function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MslModule {
    pub source: String,
    /// The kernel function's name.
    pub entry: String,
    /// The entry point's bound arguments, in parameter order.
    pub bindings: Vec<MslBinding>,
    /// The C++ type of each binding's parameter, as declared (`device f32*`,
    /// `constant f32&`, `threadgroup f32*`), parallel to `bindings`.
    pub binding_types: Vec<String>,
    /// The attributes after the bindings, in order.
    pub attributes: Vec<MslAttribute>,
    /// The declared type of each attribute's parameter (`uint3`, `uint`), parallel to
    /// `attributes`: a hand-written kernel may take the x component of a position alone.
    pub attribute_types: Vec<String>,
    /// Hand-written ([`crate::msl_raw::raw_module`]): dispatched as whole groups of its
    /// declared size (it bounds its own accesses), with no launch words.
    pub raw: bool,
    /// What each word of `dc_info` holds ([`info_slots`]; empty for hand-written kernels,
    /// which take no launch words).
    pub info: Vec<Slot>,
}

/// The kernel function's name for a kernel called `name`.
pub fn entry_name(name: &str) -> String {
    format!("dc_{name}")
}

/// Why a kernel has no MSL form.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("kernel `{kernel}` cannot run on Metal: {reason}")]
pub struct MslError {
    pub kernel: String,
    pub reason: String,
}

/// Generates MSL for `kernel` (validated IR).
pub fn generate(kernel: &Kernel) -> Result<MslModule, MslError> {
    generate_with(kernel, false)
}

/// Generates MSL for `kernel`; `checked` bounds-checks every array access and records the
/// first violation in a buffer bound after `dc_info` ([`MslBinding::ViolationRecord`]).
pub fn generate_with(kernel: &Kernel, checked: bool) -> Result<MslModule, MslError> {
    let refuse = |reason: String| MslError {
        kernel: kernel.name.clone(),
        reason,
    };
    if uses_type(kernel, ScalarType::F64) {
        return Err(refuse(
            "it uses f64, and Metal has no 64-bit floats in kernels".into(),
        ));
    }
    if kernel.uses_tensor_cores() {
        // Metal's simdgroup matrices are 8×8 with an opaque layout: not this operation.
        return Err(refuse(
            "it uses tensor-core operations (mma_m16n8k8_tf32, mma_m16n8k16_f16); Metal has \
             no multiply-accumulate with their fragment layout"
                .into(),
        ));
    }
    if subgroup_on_64_bit_integers(kernel) {
        return Err(refuse(
            "it applies a subgroup operation to a 64-bit integer; Metal's simd_* functions \
             take 32-bit integers (and floats) only"
                .into(),
        ));
    }
    // Parameters, dc_info and the violation record share the buffer indices.
    if kernel.params.len() as u32 + 2 > MAX_BUFFER_INDEX + 1 {
        return Err(refuse(format!(
            "it has {} parameters; Metal has buffer indices 0..={MAX_BUFFER_INDEX}, two of \
             which carry the launch words and the violation record",
            kernel.params.len()
        )));
    }
    let mut g = Gen::new(&MslDialect, kernel);
    g.checked = checked;
    let (bindings, binding_types, attributes) = g.msl_module();
    let attribute_types = attributes
        .iter()
        .map(|a| a.declared_type().to_string())
        .collect();
    Ok(MslModule {
        source: g.out,
        entry: entry_name(&kernel.name),
        bindings,
        binding_types,
        attributes,
        attribute_types,
        raw: false,
        info: info_slots(kernel),
    })
}

/// Whether a subgroup operation takes an `i64` or `u64` operand (MSL has no such form).
fn subgroup_on_64_bit_integers(k: &Kernel) -> bool {
    let mut found = false;
    dotcompute_ir::walk_stmts(&k.body, &mut |s| {
        for e in s.exprs() {
            e.walk(&mut |e| {
                if let ExprKind::Subgroup(_, args) = &e.kind {
                    found |= args
                        .iter()
                        .any(|a| matches!(a.ty.scalar, ScalarType::I64 | ScalarType::U64));
                }
            });
        }
    });
    found
}

/// Whether `t` appears anywhere in the kernel's interface, memories or locals.
fn uses_type(k: &Kernel, t: ScalarType) -> bool {
    k.params.iter().any(|p| match p {
        Param::Buffer { elem, .. } => *elem == t,
        Param::Scalar { ty, .. } => *ty == t,
    }) || k.shared.iter().any(|s| s.elem == t)
        || k.local_arrays.iter().any(|a| a.elem == t)
        || k.locals.iter().any(|l| l.ty == t)
}

/// The MSL spelling of an IR type in a register (typedefs of the prelude).
pub fn msl_type(ty: ScalarType) -> &'static str {
    match ty {
        ScalarType::Bool => "bool",
        ScalarType::I32 => "i32",
        ScalarType::U32 => "u32",
        ScalarType::I64 => "i64",
        ScalarType::U64 => "u64",
        ScalarType::F32 => "f32",
        // Refused by `generate`; named for completeness.
        ScalarType::F64 => "double",
        // A float register holding an f16-representable value, as in CUDA.
        ScalarType::F16 => "f32",
        ScalarType::BF16 => "bfloat",
        ScalarType::U8 => "uchar",
    }
}

/// The element type of an array in memory: f16 is stored as `half`.
fn msl_mem_type(ty: ScalarType) -> &'static str {
    match ty {
        ScalarType::F16 => "half",
        t => msl_type(t),
    }
}

fn address_space(mem: Memory) -> &'static str {
    match mem {
        Memory::Buffer(_) => "device",
        Memory::Shared(_) => "threadgroup",
        Memory::Local(_) => "thread",
    }
}

/// MSL's spellings for the shared C-family walk.
struct MslDialect;

impl Dialect for MslDialect {
    fn ty(&self, t: ScalarType) -> &'static str {
        msl_type(t)
    }
    fn nonfinite_f32(&self, bits: u32) -> String {
        format!("as_type<f32>({bits:#010x}u)")
    }
    fn nonfinite_f64(&self, bits: u64) -> String {
        // Unreachable for generated modules (f64 kernels are refused).
        format!("as_type<double>((u64){bits:#018x})")
    }
    fn i64_suffixes(&self) -> (&'static str, &'static str) {
        // `long` is 64 bits in MSL (and on the LP64 hosts of the Linux test run).
        ("l", "ul")
    }
    fn f16_load(&self, place: &str) -> String {
        format!("((f32)({place}))")
    }
    fn f16_store(&self, value: &str) -> String {
        format!("((half)({value}))")
    }
    fn volatile_place(&self, mem: Memory, elem: ScalarType, array: &str, index: &str) -> String {
        let space = address_space(mem);
        format!(
            "(*(volatile {space} {}*)&{array}[{index}])",
            msl_mem_type(elem)
        )
    }
    fn atomic(
        &self,
        op: AtomicOp,
        mem: Memory,
        elem: ScalarType,
        element: String,
        args: Vec<String>,
    ) -> String {
        let space = address_space(mem);
        let atomic_ty = if elem == ScalarType::I32 {
            "atomic_int"
        } else {
            // u32, and f32 through its bits
            "atomic_uint"
        };
        let ptr = format!("({space} {atomic_ty}*)&{element}");
        if elem == ScalarType::F32 {
            // The IR allows add (and nothing else) on f32.
            return format!("dc_atomic_add_f32({ptr}, {})", args[0]);
        }
        if op == AtomicOp::Load {
            return format!("atomic_load_explicit({ptr}, memory_order_relaxed)");
        }
        let f = match op {
            AtomicOp::Add => "atomic_fetch_add_explicit",
            AtomicOp::Sub => "atomic_fetch_sub_explicit",
            AtomicOp::Min => "atomic_fetch_min_explicit",
            AtomicOp::Max => "atomic_fetch_max_explicit",
            AtomicOp::And => "atomic_fetch_and_explicit",
            AtomicOp::Or => "atomic_fetch_or_explicit",
            AtomicOp::Xor => "atomic_fetch_xor_explicit",
            AtomicOp::Exchange => "atomic_exchange_explicit",
            AtomicOp::CompareExchange => {
                return format!("dc_atomic_cas({ptr}, {}, {})", args[0], args[1])
            }
            AtomicOp::Load => unreachable!("returned above"),
        };
        format!("{f}({ptr}, {}, memory_order_relaxed)", args[0])
    }
    fn fmod(&self, _f32: bool) -> &'static str {
        "fmod"
    }
    // Orders the group's device and threadgroup memory accesses, like CUDA's
    // __syncthreads.
    fn barrier(&self) -> &'static str {
        "threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);"
    }
    fn subgroup(&self, op: SubgroupOp, _: ScalarType, a: Vec<String>) -> String {
        match op {
            SubgroupOp::Size => "dc_sg_size".into(),
            SubgroupOp::Lane => "dc_sg_lane".into(),
            _ => {
                // `subgroup_add` -> `dc_sg_add` (prelude templates over simd_*).
                let name = op.name().trim_start_matches("subgroup_");
                format!("dc_sg_{name}({})", a.join(", "))
            }
        }
    }
    fn math_name(&self, f: MathFn, _f32: bool) -> &'static str {
        // Metal's math functions are overloaded on float and half.
        match f {
            MathFn::Sqrt => "sqrt",
            MathFn::Sin => "sin",
            MathFn::Cos => "cos",
            MathFn::Tan => "tan",
            MathFn::Exp => "exp",
            MathFn::Log => "log",
            MathFn::Pow => "pow",
            MathFn::Abs => "fabs",
            MathFn::Min => "fmin",
            MathFn::Max => "fmax",
            MathFn::Fma => "fma",
            MathFn::Floor => "floor",
            MathFn::Ceil => "ceil",
            MathFn::Exp2 => "exp2",
            MathFn::Log2 => "log2",
            MathFn::Tanh => "tanh",
            MathFn::Trunc => "trunc",
            // Halves away from zero, as Rust's.
            MathFn::Round => "round",
            MathFn::Atan2 => "atan2",
            MathFn::Rsqrt => "rsqrt",
            other => unreachable!("{other:?} is printed by the shared walk"),
        }
    }
    fn bitcast(&self, _from: ScalarType, to: ScalarType, x: &str) -> String {
        format!("as_type<{}>({x})", self.ty(to))
    }

    fn bits(&self, f: MathFn, t: ScalarType, x: &str) -> String {
        // On the unsigned bits; MSL's clz and ctz of 0 are the bit width, as Rust's.
        let u = if t.size_bytes() == 8 { "u64" } else { "u32" };
        match f {
            MathFn::CountOnes => format!("((u32)popcount(({u}){x}))"),
            MathFn::LeadingZeros => format!("((u32)clz(({u}){x}))"),
            MathFn::TrailingZeros => format!("((u32)ctz(({u}){x}))"),
            _ => format!("(({})reverse_bits(({u}){x}))", msl_type(t)),
        }
    }
}

impl Gen<'_> {
    /// The entry's first lines: the group size, the grid test (kernels that do not run
    /// whole groups) and the buffer lengths, each read from its word of `dc_info`
    /// ([`info_slots`]).
    fn read_launch_words(&mut self) {
        let k = self.k;
        let info = info_slots(k);
        let word = |slot: Slot| info.iter().position(|&s| s == slot).unwrap_or(0);
        let _ = writeln!(
            self.out,
            "    const uint3 dc_gsize = uint3(dc_info[{}], dc_info[{}], dc_info[{}]);",
            word(Slot::Group(0)),
            word(Slot::Group(1)),
            word(Slot::Group(2))
        );
        if !k.runs_whole_groups() {
            let _ = writeln!(
                self.out,
                "    if (dc_global.x >= dc_info[{}] || dc_global.y >= dc_info[{}] || dc_global.z >= dc_info[{}]) {{\n        return;\n    }}",
                word(Slot::Grid(0)),
                word(Slot::Grid(1)),
                word(Slot::Grid(2))
            );
        }
        if k.shared.iter().any(|s| s.len == SharedLen::Dynamic) {
            let _ = writeln!(
                self.out,
                "    const u32 dc_dyn_len = dc_info[{}];",
                word(Slot::DynamicSharedLen)
            );
        }
        for (i, p) in k.params.iter().enumerate() {
            if let Param::Buffer { name, .. } = p {
                let w = word(Slot::BufferLen(i as u32));
                let _ = writeln!(self.out, "    const u32 dc_len_{name} = dc_info[{w}];");
            }
        }
    }

    /// The whole MSL library; returns the entry point's bindings (with their declared
    /// types) and attributes.
    fn msl_module(&mut self) -> (Vec<MslBinding>, Vec<String>, Vec<MslAttribute>) {
        let k = self.k;
        let _ = writeln!(
            self.out,
            "// dotcompute MSL for kernel `{}` (IR v{})\n#include <metal_stdlib>\nusing namespace metal;",
            k.name, k.version
        );
        // The IR's float `+ - *` are rounded one at a time: no fused multiply-add unless
        // the kernel calls `fma` (Metal's compiler, like clang, contracts by default even
        // with fast math off).
        self.out.push_str("#pragma clang fp contract(off)\n");
        self.out.push_str(MSL_TYPES);
        self.out.push_str(INT_HELPERS);
        self.out.push_str(MSL_FLOAT_HELPERS);
        self.out.push_str(LOOP_HELPERS);
        if k.uses_vectors() {
            self.out.push_str(crate::cfamily::VECTOR_HELPERS);
        }
        if k.uses_subgroups() {
            self.out.push_str(MSL_SUBGROUP_HELPERS);
        }
        if self.checked {
            self.out.push_str(MSL_CHECKED_HELPER);
        }

        let mut bindings = Vec::new();
        let mut types = Vec::new();
        let mut decls = Vec::new();
        for (i, p) in k.params.iter().enumerate() {
            let ty = match p {
                Param::Buffer { elem, access, .. } => {
                    let c = if *access == Access::Read {
                        "const "
                    } else {
                        ""
                    };
                    let t = match elem.as_scalar() {
                        Some(scalar) => msl_mem_type(scalar).to_string(),
                        None => self.type_name(*elem),
                    };
                    format!("{c}device {t}*")
                }
                Param::Scalar { ty, .. } => format!("constant {}&", msl_type(*ty)),
            };
            decls.push(format!("{ty} p_{} [[buffer({i})]]", p.name()));
            bindings.push(MslBinding::Param {
                param: i as u32,
                index: i as u32,
            });
            types.push(ty);
        }
        let info = k.params.len() as u32;
        decls.push(format!("constant u32* dc_info [[buffer({info})]]"));
        bindings.push(MslBinding::Info { index: info });
        types.push("constant u32*".into());
        if self.checked {
            let ty = "device atomic_uint*";
            decls.push(format!("{ty} dc_err [[buffer({})]]", info + 1));
            bindings.push(MslBinding::ViolationRecord { index: info + 1 });
            types.push(ty.into());
        }
        for (i, s) in k.shared.iter().enumerate() {
            let ty = format!("threadgroup {}*", msl_mem_type(s.elem));
            decls.push(format!("{ty} s_{} [[threadgroup({i})]]", s.name));
            bindings.push(MslBinding::Threadgroup {
                shared: i as u32,
                index: i as u32,
            });
            types.push(ty);
        }
        let mut attributes = vec![
            MslAttribute::ThreadPositionInGrid,
            MslAttribute::ThreadPositionInThreadgroup,
            MslAttribute::ThreadgroupPositionInGrid,
            MslAttribute::ThreadgroupsPerGrid,
        ];
        let mut attribute_names = vec!["dc_global", "dc_lid", "dc_group", "dc_ngroups"];
        if k.uses_subgroups() {
            attributes.push(MslAttribute::ThreadsPerSimdgroup);
            attributes.push(MslAttribute::ThreadIndexInSimdgroup);
            attribute_names.extend(["dc_sg_size", "dc_sg_lane"]);
        }
        for (a, name) in attributes.iter().zip(&attribute_names) {
            let ty = match a {
                MslAttribute::ThreadsPerSimdgroup | MslAttribute::ThreadIndexInSimdgroup => "u32",
                _ => "uint3",
            };
            decls.push(format!("{ty} {name} [[{}]]", a.spelling()));
        }
        let _ = writeln!(
            self.out,
            "\nkernel void {}(\n    {}\n) {{",
            entry_name(&k.name),
            decls.join(",\n    ")
        );
        self.read_launch_words();
        // Thread-private arrays: declared once, filled where the kernel declares them.
        for (i, a) in k.local_arrays.iter().enumerate() {
            let _ = writeln!(
                self.out,
                "    {} a_{}_{i}[{}];",
                msl_mem_type(a.elem),
                a.name,
                a.len
            );
        }
        self.block(&k.body, 1);
        self.out.push_str("}\n");
        (bindings, types, attributes)
    }
}

/// Type names (MSL's `long` is 64 bits).
const MSL_TYPES: &str = r#"
typedef int i32;
typedef uint u32;
typedef long i64;
typedef ulong u64;
typedef float f32;
#define DC_FN static inline
#define DC_THREAD thread
#define DC_ABS_SIGNED \
DC_FN i32 dc_abs(i32 a) { return a < 0 ? dc_neg(a) : a; } \
DC_FN i64 dc_abs(i64 a) { return a < 0 ? dc_neg(a) : a; }
"#;

/// Float helpers: clamps, f16 rounding, saturating float -> int casts (NaN -> 0), and the
/// atomics MSL spells differently: a strong compare-exchange that returns the old value,
/// and f32 add on the bits.
const MSL_FLOAT_HELPERS: &str = r#"
DC_FN f32 dc_clampf(f32 x, f32 lo, f32 hi) { return fmin(fmax(x, lo), hi); }
DC_FN f32 dc_rh(f32 x) { return (f32)((half)x); }
DC_FN i32 dc_f32_to_i32(f32 x) { return isnan(x) ? 0 : x <= -2147483648.0f ? (i32)0x80000000u : x >= 2147483648.0f ? 0x7fffffff : (i32)x; }
DC_FN u32 dc_f32_to_u32(f32 x) { return (isnan(x) || x <= 0.0f) ? 0u : x >= 4294967296.0f ? 0xffffffffu : (u32)x; }
DC_FN i64 dc_f32_to_i64(f32 x) { return isnan(x) ? (i64)0 : x <= -9223372036854775808.0f ? (i64)((u64)1 << 63) : x >= 9223372036854775808.0f ? (i64)(~((u64)1 << 63)) : (i64)x; }
DC_FN u64 dc_f32_to_u64(f32 x) { return (isnan(x) || x <= 0.0f) ? (u64)0 : x >= 18446744073709551616.0f ? ~(u64)0 : (u64)x; }
template <typename P, typename T> DC_FN T dc_atomic_cas(P p, T expected, T desired) {
    T seen = expected;
    while (!atomic_compare_exchange_weak_explicit(p, &seen, desired, memory_order_relaxed, memory_order_relaxed)) {
        if (seen != expected) {
            return seen;
        }
        seen = expected; // a spurious failure of the weak form: try again
    }
    return expected;
}
template <typename P> DC_FN f32 dc_atomic_add_f32(P p, f32 v) {
    u32 seen = atomic_load_explicit(p, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(p, &seen, as_type<u32>(as_type<f32>(seen) + v), memory_order_relaxed, memory_order_relaxed)) {
    }
    return as_type<f32>(seen);
}
"#;

/// Checked mode: `i < n`, and otherwise the launch's first violation recorded in `err`
/// (`[set, memory, index, len]`; the thread that sets the flag writes the rest). The flag
/// is set by a fetch-or, which cannot fail: no loop in the branch of every checked access
/// (a loop there made lavapipe lose lanes at later subgroup operations; see the WGSL
/// helper).
const MSL_CHECKED_HELPER: &str = r#"
template <typename P> DC_FN bool dc_in(u32 i, u32 n, u32 what, P err) {
    if (i < n) {
        return true;
    }
    if (atomic_fetch_or_explicit(err, 1u, memory_order_relaxed) == 0u) {
        ((device u32*)err)[1] = what;
        ((device u32*)err)[2] = i;
        ((device u32*)err)[3] = n;
    }
    return false;
}
"#;

/// Subgroup operations on SIMD-groups (32 lanes on Apple GPUs). Out-of-range shuffles
/// keep the caller's value, as the IR defines and as CUDA's helpers do.
const MSL_SUBGROUP_HELPERS: &str = r#"
template <typename T> DC_FN T dc_sg_shuffle(T x, u32 lane) { return simd_shuffle(x, (ushort)(lane & 31u)); }
template <typename T> DC_FN T dc_sg_shuffle_xor(T x, u32 m) { return simd_shuffle_xor(x, (ushort)(m & 31u)); }
template <typename T> DC_FN T dc_sg_shuffle_up(T x, u32 d) { return d >= 32u ? x : simd_shuffle_up(x, (ushort)d); }
template <typename T> DC_FN T dc_sg_shuffle_down(T x, u32 d) { return d >= 32u ? x : simd_shuffle_down(x, (ushort)d); }
template <typename T> DC_FN T dc_sg_add(T x) { return simd_sum(x); }
template <typename T> DC_FN T dc_sg_min(T x) { return simd_min(x); }
template <typename T> DC_FN T dc_sg_max(T x) { return simd_max(x); }
template <typename T> DC_FN T dc_sg_exclusive_add(T x) { return simd_prefix_exclusive_sum(x); }
template <typename T> DC_FN T dc_sg_inclusive_add(T x) { return simd_prefix_inclusive_sum(x); }
DC_FN u32 dc_sg_ballot(bool b) { return (u32)(ulong)(simd_vote::vote_t)simd_ballot(b); }
DC_FN bool dc_sg_any(bool b) { return simd_any(b); }
DC_FN bool dc_sg_all(bool b) { return simd_all(b); }
"#;

#[cfg(test)]
mod tests {
    use super::*;

    /// `i64::MIN` as MSL spells it (`l`, not C's `ll`), and a subgroup operation on a
    /// 64-bit integer refused (issue 32, item 9).
    #[test]
    fn i64_min_has_msl_suffixes_and_64_bit_subgroup_operations_are_refused() {
        let mut b = Builder::new("least");
        let x = b.buffer("x", ScalarType::I64, Access::ReadWrite);
        let i = b.builtin(Builtin::GlobalId, Axis::X);
        b.store(x, i, V::host(i64::MIN)).unwrap();
        let k = b.finish().unwrap();
        let msl = generate(&k).unwrap().source;
        assert!(msl.contains("(-9223372036854775807l - 1l)"), "{msl}");
        assert!(!msl.contains("ll"), "{msl}");
        let cuda = crate::cuda::generate(&k).source;
        assert!(cuda.contains("(-9223372036854775807ll - 1ll)"), "{cuda}");

        let mut b = Builder::new("wide_sum");
        let x = b.buffer("x", ScalarType::U64, Access::ReadWrite);
        let i = b.builtin(Builtin::GlobalId, Axis::X);
        let v = b.load(x, i.clone()).unwrap();
        let s = b.subgroup(SubgroupOp::Add, vec![v]).unwrap();
        b.store(x, i, s).unwrap();
        let e = generate(&b.finish().unwrap()).unwrap_err();
        assert!(e.to_string().contains("64-bit integer"), "{e}");
    }

    #[test]
    fn f64_kernels_are_refused_with_the_reason() {
        let mut b = Builder::new("twice");
        let x = b.buffer("x", ScalarType::F64, Access::ReadWrite);
        let i = b.builtin(Builtin::GlobalId, Axis::X);
        let v = b.load(x, i.clone()).unwrap();
        let v = b.binary(BinaryOp::Add, v.clone(), v).unwrap();
        b.store(x, i, v).unwrap();
        let e = generate(&b.finish().unwrap()).unwrap_err();
        assert!(e.to_string().contains("no 64-bit floats"), "{e}");
    }

    #[test]
    fn bindings_follow_the_parameters_then_info_then_threadgroup_memory() {
        let mut b = Builder::new("scale");
        let x = b.buffer("x", ScalarType::F32, Access::ReadWrite);
        let s = b.scalar("s", ScalarType::F32);
        let tile = b.shared("tile", ScalarType::F32, V::Int(64)).unwrap();
        let i = b.builtin(Builtin::GlobalId, Axis::X);
        let v = b.load(x, i.clone()).unwrap();
        let v = b.binary(BinaryOp::Mul, v, s).unwrap();
        let l = b.builtin(Builtin::LocalId, Axis::X);
        b.store(tile, l, v.clone()).unwrap();
        b.store(x, i, v).unwrap();
        let m = generate(&b.finish().unwrap()).unwrap();
        assert_eq!(
            m.bindings,
            vec![
                MslBinding::Param { param: 0, index: 0 },
                MslBinding::Param { param: 1, index: 1 },
                MslBinding::Info { index: 2 },
                MslBinding::Threadgroup {
                    shared: 0,
                    index: 0
                },
            ]
        );
        assert_eq!(
            m.binding_types,
            [
                "device f32*",
                "constant f32&",
                "constant u32*",
                "threadgroup f32*"
            ]
        );
        assert!(
            m.source.contains("device f32* p_x [[buffer(0)]]"),
            "{}",
            m.source
        );
        assert!(m
            .source
            .contains("threadgroup f32* s_tile [[threadgroup(0)]]"));
    }
}
