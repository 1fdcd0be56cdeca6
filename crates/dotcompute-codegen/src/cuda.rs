//! IR → CUDA C++ (compiled by NVRTC in `dotcompute-cuda`).
//!
//! One translation unit per kernel, valid for every launch: the group size comes from
//! `blockDim` and the dynamic shared array is `extern __shared__`, so nothing is
//! specialised and one compiled module serves every geometry.
//!
//! ## The kernel's parameter list (the launch ABI)
//!
//! `extern "C" __global__ void dc_<name>(...)` (and, for kernels that read no coordinate but
//! their global id and use no barrier or shared memory, the grid-stride twin
//! `dc_<name>_strided`, which a backend may launch with fewer groups) takes, in this order:
//!
//! 1. every IR parameter in signature order: a buffer as a pointer (`const T* __restrict__`
//!    when read-only, `T* __restrict__` otherwise), a scalar by value (`bool` is one byte);
//! 2. one `u32` length, in elements, per buffer parameter, in signature order (`len()`);
//! 3. `u32 dc_grid_x, dc_grid_y, dc_grid_z`: the logical grid in threads;
//! 4. `u32 dc_dyn_len`: the dynamic shared array's length (0 when there is none).
//!
//! `__restrict__` is sound because a launch cannot bind one buffer both writable and again:
//! the facade's argument types borrow writable buffers exclusively.
//!
//! ## Semantics (see `dotcompute_ir`)
//!
//! C++ leaves signed overflow, `INT_MIN / -1`, division by zero, over-wide shifts and
//! out-of-range float-to-int casts undefined; the IR defines all of them. Every such
//! operation therefore goes through a helper of the prelude: wrapping signed arithmetic
//! through unsigned, total division and remainder, masked shifts, and float-to-int casts
//! through the `__float2int_rz` family (round toward zero, saturating) behind an explicit
//! NaN test (the 64-bit conversions turn NaN into `MIN`; the IR says 0).
//! Float `min`/`max` are `fminf`/`fmaxf` (IEEE minNum/maxNum, as the IR says). NVRTC's
//! defaults keep division and `sqrt` correctly rounded and denormals intact (no
//! `-use_fast_math`), and `dotcompute-cuda` compiles generated code with `--fmad=false`,
//! so `a * b + c` is rounded twice, as the IR's separate operations demand. Memories touched by atomics are read and written through `volatile`
//! so plain accesses are not cached across other threads' atomics.

use crate::cfamily::{Dialect, Gen};
use dotcompute_ir::*;
use std::fmt::Write;

/// What each slot of an entry point's parameter list holds, in the vocabulary every
/// generator shares. The code generator emits the C++ declarations and this list from one
/// walk, so the planner that fills the slots and the code that reads them agree by
/// construction.
pub use dotcompute_ir::interface::Slot;

/// A generated translation unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaModule {
    pub source: String,
    /// What each entry point takes, in order (every entry point of the module takes the
    /// same list).
    pub params: Vec<Slot>,
    /// The `extern "C"` entry point: one CUDA thread per logical thread.
    pub entry: String,
    /// The grid-stride entry point, for kernels where it is allowed.
    pub strided_entry: Option<String>,
    /// The vector entry point of elementwise kernels (see [`vector_plan`]), and how many
    /// logical threads each of its iterations runs. It needs every buffer argument
    /// aligned to 16 bytes.
    pub vector_entry: Option<(String, u32)>,
}

impl CudaModule {
    /// The forms the module's entry points offer.
    pub fn forms(&self) -> dotcompute_ir::interface::Forms {
        dotcompute_ir::interface::Forms {
            strided: self.strided_entry.is_some(),
            vector: self.vector_entry.as_ref().map(|(_, width)| *width),
        }
    }
}

/// The entry point's name for a kernel called `name`.
pub fn entry_name(name: &str) -> String {
    format!("dc_{name}")
}

/// The grid-stride entry point of an eligible kernel (see [`grid_stride_eligible`]).
pub fn strided_entry_name(name: &str) -> String {
    format!("dc_{name}_strided")
}

/// The vector entry point of an elementwise kernel (see [`vector_plan`]).
pub fn vector_entry_name(name: &str) -> String {
    format!("dc_{name}_vec")
}

pub use dotcompute_ir::analysis::{grid_stride_eligible, vector_plan, VectorPlan};

/// How a CUDA module is generated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudaOptions {
    /// Bounds-check every array access and record the first violation through an extra
    /// parameter ([`Slot::ViolationRecord`]). A checked module has only the plain entry
    /// point.
    pub checked: bool,
    /// Unroll grid-stride loops over read-only buffers, four loads per trip (see
    /// `crate::unrolled`; `DOTCOMPUTE_UNROLL=0` turns it off in the backends).
    pub unroll: bool,
}

/// Unchecked, unrolled: what `dotcompute emit` prints and the snapshots record.
impl Default for CudaOptions {
    fn default() -> CudaOptions {
        CudaOptions {
            checked: false,
            unroll: true,
        }
    }
}

/// Generates CUDA C++ for `kernel` (which must be validated IR).
pub fn generate(kernel: &Kernel) -> CudaModule {
    generate_with(kernel, &CudaOptions::default())
}

/// Generates CUDA C++ for `kernel` as `options` say.
pub fn generate_with(kernel: &Kernel, options: &CudaOptions) -> CudaModule {
    let checked = options.checked;
    let plan = if checked { None } else { vector_plan(kernel) };
    let strided = grid_stride_eligible(kernel) && !checked;
    let unrolled = crate::unrolled(
        kernel,
        options.unroll && !checked && plan.is_none() && !strided,
    );
    let kernel = unrolled.as_ref().unwrap_or(kernel);
    let mut g = Gen::new(&CudaDialect, kernel);
    g.checked = checked;
    g.module();
    if let Some(plan) = &plan {
        g.vector_form(plan);
    }
    let params = g.entry_abi().into_iter().map(|(_, slot)| slot).collect();
    CudaModule {
        source: g.out,
        params,
        entry: entry_name(&kernel.name),
        strided_entry: strided.then(|| strided_entry_name(&kernel.name)),
        vector_entry: plan.map(|p| (vector_entry_name(&kernel.name), p.width)),
    }
}

/// CUDA C++'s spellings for the shared C-family walk.
struct CudaDialect;

impl Dialect for CudaDialect {
    fn ty(&self, t: ScalarType) -> &'static str {
        cuda_type(t)
    }
    fn nonfinite_f32(&self, bits: u32) -> String {
        format!("__int_as_float({bits:#010x})")
    }
    fn nonfinite_f64(&self, bits: u64) -> String {
        format!("__longlong_as_double({bits:#018x}ll)")
    }
    fn i64_suffixes(&self) -> (&'static str, &'static str) {
        ("ll", "ull")
    }
    fn f16_load(&self, place: &str) -> String {
        format!("dc_h2f({place})")
    }
    fn f16_store(&self, value: &str) -> String {
        format!("dc_f2h({value})")
    }
    fn volatile_place(&self, _: Memory, elem: ScalarType, array: &str, index: &str) -> String {
        format!("(*(volatile {}*)&{array}[{index}])", cuda_type(elem))
    }
    fn atomic(
        &self,
        op: AtomicOp,
        _: Memory,
        elem: ScalarType,
        element: String,
        args: Vec<String>,
    ) -> String {
        if op == AtomicOp::Sub && elem.is_int() {
            // CUDA's `atomicSub(int*, int v)` adds `-v`, which C++ leaves undefined for
            // v = INT_MIN: NVRTC then took `(x & INT_MIN)` to be 0 and subtracted
            // nothing (found by the random-kernel test on an H100). The subtraction as
            // an unsigned add of the two's complement is defined for every value.
            return format!(
                "(({})atomicAdd((u32*)&{element}, 0u - (u32)({})))",
                cuda_type(elem),
                args[0]
            );
        }
        if op == AtomicOp::Load {
            // A volatile load: read from the coherence point every time (never an
            // earlier read's value kept in L1 or a register), without a read-modify-write.
            return format!("(*(volatile {}*)&{element})", cuda_type(elem));
        }
        let f = match op {
            AtomicOp::Add => "atomicAdd",
            AtomicOp::Sub => "atomicSub",
            AtomicOp::Min => "atomicMin",
            AtomicOp::Max => "atomicMax",
            AtomicOp::And => "atomicAnd",
            AtomicOp::Or => "atomicOr",
            AtomicOp::Xor => "atomicXor",
            AtomicOp::Exchange => "atomicExch",
            AtomicOp::CompareExchange => "atomicCAS",
            AtomicOp::Load => unreachable!("returned above"),
        };
        let mut call_args = vec![format!("&{element}")];
        call_args.extend(args);
        format!("{f}({})", call_args.join(", "))
    }
    fn fmod(&self, f32: bool) -> &'static str {
        pick(f32, "fmodf", "fmod")
    }
    // __syncthreads orders the group's shared and global memory accesses.
    fn barrier(&self) -> &'static str {
        "__syncthreads();"
    }
    fn subgroup(&self, op: SubgroupOp, _: ScalarType, a: Vec<String>) -> String {
        match op {
            SubgroupOp::Size => "32u".into(),
            SubgroupOp::Lane => "dc_sg_lane()".into(),
            SubgroupOp::Ballot => format!("__ballot_sync(dc_sg_mask(), {})", a[0]),
            SubgroupOp::Any => format!("((bool)__any_sync(dc_sg_mask(), {}))", a[0]),
            SubgroupOp::All => format!("((bool)__all_sync(dc_sg_mask(), {}))", a[0]),
            _ => {
                // `subgroup_add` -> `dc_sg_add` (prelude overloads per type).
                let name = op.name().trim_start_matches("subgroup_");
                format!("dc_sg_{name}({})", a.join(", "))
            }
        }
    }
    fn math_name(&self, f: MathFn, f32: bool) -> &'static str {
        match f {
            MathFn::Sqrt => pick(f32, "sqrtf", "sqrt"),
            MathFn::Sin => pick(f32, "sinf", "sin"),
            MathFn::Cos => pick(f32, "cosf", "cos"),
            MathFn::Tan => pick(f32, "tanf", "tan"),
            MathFn::Exp => pick(f32, "expf", "exp"),
            MathFn::Log => pick(f32, "logf", "log"),
            MathFn::Pow => pick(f32, "powf", "pow"),
            MathFn::Abs => pick(f32, "fabsf", "fabs"),
            MathFn::Min => pick(f32, "fminf", "fmin"),
            MathFn::Max => pick(f32, "fmaxf", "fmax"),
            MathFn::Fma => pick(f32, "fmaf", "fma"),
            MathFn::Floor => pick(f32, "floorf", "floor"),
            MathFn::Ceil => pick(f32, "ceilf", "ceil"),
            MathFn::Exp2 => pick(f32, "exp2f", "exp2"),
            MathFn::Log2 => pick(f32, "log2f", "log2"),
            MathFn::Tanh => pick(f32, "tanhf", "tanh"),
            MathFn::Trunc => pick(f32, "truncf", "trunc"),
            // C's round: halves away from zero, as Rust's.
            MathFn::Round => pick(f32, "roundf", "round"),
            MathFn::Atan2 => pick(f32, "atan2f", "atan2"),
            MathFn::Rsqrt => pick(f32, "rsqrtf", "rsqrt"),
            other => unreachable!("{other:?} is printed by the shared walk"),
        }
    }
    fn bitcast(&self, from: ScalarType, to: ScalarType, x: &str) -> String {
        use ScalarType::*;
        match (from, to) {
            (F32, U32) => format!("__float_as_uint({x})"),
            (F32, I32) => format!("__float_as_int({x})"),
            (U32, F32) => format!("__uint_as_float({x})"),
            (I32, F32) => format!("__int_as_float({x})"),
            (F64, t) => format!("(({})__double_as_longlong({x}))", self.ty(t)),
            (_, F64) => format!("__longlong_as_double((long long)({x}))"),
            // Between the signed and unsigned integers of one width C++'s conversion
            // keeps the bits (two's complement).
            (_, t) => format!("(({}){x})", self.ty(t)),
        }
    }

    fn bits(&self, f: MathFn, t: ScalarType, x: &str) -> String {
        cuda_bits(f, t, x)
    }
    /// One PRMT: selector nibble 0 picks byte `k` of `x`, nibbles 1 to 3 byte 0 of the
    /// zero word (selector 4).
    fn extract_byte(&self, x: &str, k: &str) -> String {
        format!("__byte_perm({x}, 0u, 0x4440u | ({k} & 3u))")
    }
}

fn pick(f32: bool, a: &'static str, b: &'static str) -> &'static str {
    if f32 {
        a
    } else {
        b
    }
}

/// A bit operation on `x` of integer type `t` (Rust semantics: counts are `u32`, a zero
/// input counts the full width).
fn cuda_bits(f: MathFn, t: ScalarType, x: &str) -> String {
    let wide = t.size_bytes() == 8;
    let (u, bits) = if wide { ("u64", 64) } else { ("u32", 32) };
    match f {
        MathFn::CountOnes if wide => format!("((u32)__popcll(({u}){x}))"),
        MathFn::CountOnes => format!("((u32)__popc(({u}){x}))"),
        MathFn::LeadingZeros if wide => format!("((u32)__clzll((long long)({u}){x}))"),
        MathFn::LeadingZeros => format!("((u32)__clz((int)({u}){x}))"),
        // __ffs is 1 + the index of the lowest set bit, 0 for 0.
        MathFn::TrailingZeros if wide => {
            format!("(({u}){x} == 0 ? {bits}u : (u32)(__ffsll((long long)({u}){x}) - 1))")
        }
        MathFn::TrailingZeros => {
            format!("(({u}){x} == 0 ? {bits}u : (u32)(__ffs((int)({u}){x}) - 1))")
        }
        MathFn::ReverseBits if wide => format!("(({})__brevll(({u}){x}))", cuda_type(t)),
        _ => format!("(({})__brev(({u}){x}))", cuda_type(t)),
    }
}

/// The C++ spelling of an IR type (typedefs of the prelude).
pub fn cuda_type(ty: ScalarType) -> &'static str {
    match ty {
        ScalarType::Bool => "bool",
        ScalarType::I32 => "i32",
        ScalarType::U32 => "u32",
        ScalarType::I64 => "i64",
        ScalarType::U64 => "u64",
        ScalarType::F32 => "f32",
        ScalarType::F64 => "f64",
        // An f16 value lives in a float register holding an f16-representable value:
        // every operation rounds its result back (`dc_rh`), which is IEEE half arithmetic
        // for + - * / and sqrt, since f32 carries more than twice f16's precision.
        ScalarType::F16 => "f32",
        // Storage-only (IR validation keeps them out of kernels).
        ScalarType::BF16 => "__nv_bfloat16",
        ScalarType::U8 => "unsigned char",
    }
}

/// The C++ element type of an array in memory: an f16 is stored as its 16 bits.
fn cuda_mem_type(ty: ScalarType) -> &'static str {
    match ty {
        ScalarType::F16 => "unsigned short",
        t => cuda_type(t),
    }
}

impl Gen<'_> {
    /// The entry points' parameter list (the launch ABI), as C++ declarations.
    fn entry_params(&self) -> Vec<String> {
        self.entry_abi().into_iter().map(|(decl, _)| decl).collect()
    }

    /// The launch ABI: each parameter's C++ declaration and what the launch puts there.
    fn entry_abi(&self) -> Vec<(String, Slot)> {
        let k = self.k;
        let mut params: Vec<(String, Slot)> = Vec::new();
        for (i, p) in k.params.iter().enumerate() {
            match p {
                Param::Buffer { name, elem, access } => {
                    let t = match elem.as_scalar() {
                        Some(scalar) => cuda_mem_type(scalar).to_string(),
                        None => self.type_name(*elem),
                    };
                    let restrict = if self.atomic.contains(&Memory::Buffer(i as u32)) {
                        ""
                    } else {
                        " __restrict__"
                    };
                    let c = if *access == Access::Read {
                        "const "
                    } else {
                        ""
                    };
                    params.push((format!("{c}{t}*{restrict} p_{name}"), Slot::Arg(i as u32)));
                }
                Param::Scalar { name, ty } => {
                    params.push((format!("{} p_{name}", cuda_type(*ty)), Slot::Arg(i as u32)))
                }
            }
        }
        for (i, p) in k.params.iter().enumerate() {
            if let Param::Buffer { name, .. } = p {
                params.push((format!("u32 dc_len_{name}"), Slot::BufferLen(i as u32)));
            }
        }
        for (d, n) in ["dc_grid_x", "dc_grid_y", "dc_grid_z"].iter().enumerate() {
            params.push((format!("u32 {n}"), Slot::Grid(d as u8)));
        }
        params.push(("u32 dc_dyn_len".into(), Slot::DynamicSharedLen));
        if self.checked {
            params.push(("u32* dc_err".into(), Slot::ViolationRecord));
        }
        params
    }

    fn module(&mut self) {
        let k = self.k;
        let _ = writeln!(
            self.out,
            "// dotcompute CUDA C++ for kernel `{}` (IR v{})",
            k.name, k.version
        );
        self.out.push_str(CUDA_TYPES);
        self.out.push_str(crate::cfamily::INT_HELPERS);
        self.out.push_str(CUDA_FLOAT_HELPERS);
        self.out.push_str(crate::cfamily::LOOP_HELPERS);
        if k.uses_vectors() {
            self.out.push_str(crate::cfamily::VECTOR_HELPERS);
        }
        if k.uses_subgroups() {
            self.out.push_str(SUBGROUP_PRELUDE);
        }
        if dotcompute_ir::Features::required_by(k).contains(dotcompute_ir::Features::F16) {
            self.out.push_str(F16_PRELUDE);
        }
        if k.uses_tensor_cores() {
            self.out.push_str(MMA_PRELUDE);
        }
        if self.checked {
            self.out.push_str(CUDA_CHECKED_HELPER);
        }
        let params = self.entry_params();
        let args: Vec<String> = params
            .iter()
            .map(|p| p.rsplit(' ').next().unwrap_or_default().to_string())
            .collect();
        let coords = BODY_COORDS;
        // The body, once, as an inlined function: `return` ends one logical thread, which
        // lets the grid-stride entry run several logical threads per CUDA thread.
        let body_params: Vec<String> = params
            .iter()
            .cloned()
            .chain(coords.iter().map(|c| format!("const uint3 {c}")))
            .collect();
        let _ = writeln!(
            self.out,
            "\nstatic __device__ __forceinline__ void dc_body(\n    {}\n) {{",
            body_params.join(",\n    ")
        );
        for s in &k.shared {
            let t = cuda_mem_type(s.elem);
            match s.len {
                SharedLen::Static(n) => {
                    // 16-byte aligned, as the dynamic array is: four consecutive elements
                    // at an index the compiler knows is a multiple of four can then be
                    // read as one vector (the register-blocked product's runs of four).
                    let _ = writeln!(
                        self.out,
                        "    __shared__ __align__(16) {t} s_{}[{}];",
                        s.name,
                        n.max(1)
                    );
                }
                SharedLen::Dynamic => {
                    let _ = writeln!(
                        self.out,
                        "    extern __shared__ __align__(16) unsigned char dc_dyn_smem[];\n    {t}* const s_{} = reinterpret_cast<{t}*>(dc_dyn_smem);",
                        s.name
                    );
                }
            }
        }
        // Thread-private arrays: declared once, filled where the kernel declares them.
        for (i, a) in k.local_arrays.iter().enumerate() {
            let _ = writeln!(
                self.out,
                "    {} a_{}_{i}[{}];",
                cuda_mem_type(a.elem),
                a.name,
                a.len
            );
        }
        self.block(&k.body, 1);
        self.out.push_str("}\n");
        let call_args = args
            .iter()
            .cloned()
            .chain(coords.iter().map(|c| c.to_string()))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            self.out,
            "\nextern \"C\" __global__ void {}(\n    {}\n) {{",
            entry_name(&k.name),
            params.join(",\n    ")
        );
        self.out.push_str(
            "    const uint3 dc_lid = threadIdx;\n    const uint3 dc_group = blockIdx;\n    const uint3 dc_gsize = blockDim;\n    const uint3 dc_ngroups = gridDim;\n    const uint3 dc_global = make_uint3(dc_group.x * dc_gsize.x + dc_lid.x, dc_group.y * dc_gsize.y + dc_lid.y, dc_group.z * dc_gsize.z + dc_lid.z);\n",
        );
        if !k.runs_whole_groups() {
            // Threads of the last group that stick out of the grid do not run (launch rule).
            // Compared in 64 bits: in the padding of a grid near 2^32 the u32 id wraps.
            self.out.push_str("    if ((u64)dc_group.x * dc_gsize.x + dc_lid.x >= dc_grid_x || (u64)dc_group.y * dc_gsize.y + dc_lid.y >= dc_grid_y || (u64)dc_group.z * dc_gsize.z + dc_lid.z >= dc_grid_z) {\n        return;\n    }\n");
        }
        let _ = writeln!(self.out, "    dc_body({call_args});\n}}");
        if grid_stride_eligible(k) && !self.checked {
            let _ = writeln!(
                self.out,
                "\n// Grid-stride form: each CUDA thread runs logical threads x, x + stride, ... so a\n// large launch needs only one wave of groups. Used for kernels that see nothing but\n// their global id (no groups, barriers or shared memory).\nextern \"C\" __global__ void {}(\n    {}\n) {{",
                strided_entry_name(&k.name),
                params.join(",\n    ")
            );
            self.out.push_str(STRIDED_PROLOGUE);
            self.out.push_str(
                "#pragma unroll 4\n    for (u64 dc_x = (u64)dc_group.x * dc_gsize.x + dc_lid.x; dc_x < dc_grid_x; dc_x += dc_stride) {\n        const uint3 dc_global = make_uint3((u32)dc_x, dc_y, dc_z);\n",
            );
            let _ = writeln!(self.out, "        dc_body({call_args});\n    }}\n}}");
        }
    }

    /// The vector form of an elementwise kernel (see [`vector_plan`]): a lane function,
    /// which is the body with the lane's elements in registers, and an entry point that
    /// runs `W` lanes per iteration on 16-byte loads and stores (grid-stride), then what
    /// is left one logical thread at a time through `dc_body`.
    fn vector_form(&mut self, plan: &VectorPlan) {
        let params = self.entry_params();
        let tail_params: Vec<String> = params
            .iter()
            .filter(|p| p.starts_with("u32 dc_"))
            .cloned()
            .collect();
        self.vector_lane_function(plan, &tail_params);
        self.vector_entry_head(plan, &params);
        self.vector_chunk_loads(plan);
        self.vector_lane_calls(plan, &tail_params);
        self.vector_chunk_stores(plan);
        self.line(1, "}");
        let w = plan.width;
        let call_args: Vec<String> = params
            .iter()
            .map(|p| p.rsplit(' ').next().unwrap_or_default().to_string())
            .chain(BODY_COORDS.iter().map(|c| c.to_string()))
            .collect();
        let _ = writeln!(
            self.out,
            "    // The rest (the last partial chunk, threads past a short buffer): one at a time.\n    for (u64 dc_x = dc_chunks * {w} + dc_first; dc_x < dc_grid_x; dc_x += dc_stride) {{\n        const uint3 dc_global = make_uint3((u32)dc_x, dc_y, dc_z);\n        dc_body({});\n    }}\n}}",
            call_args.join(", ")
        );
    }

    /// `dc_lane`: the kernel's body as one logical thread whose elements are the caller's
    /// registers (a store also sets the element's mask).
    fn vector_lane_function(&mut self, plan: &VectorPlan, tail_params: &[String]) {
        let k = self.k;
        let touched = plan.touched();
        let mut lane_params = Vec::new();
        for (i, p) in k.params.iter().enumerate() {
            match p {
                Param::Buffer { name, elem, .. } if touched.contains(&(i as u32)) => {
                    // No vector types here: `vector_plan` refuses kernels that use them.
                    let t = cuda_type(elem.scalar);
                    if plan.stored.contains(&(i as u32)) {
                        lane_params.push(format!("{t}& r_{name}"));
                        lane_params.push(format!("bool& m_{name}"));
                    } else {
                        lane_params.push(format!("const {t}& r_{name}"));
                    }
                }
                Param::Buffer { .. } => {}
                Param::Scalar { name, ty } => {
                    lane_params.push(format!("{} p_{name}", cuda_type(*ty)))
                }
            }
        }
        lane_params.extend(tail_params.iter().cloned());
        lane_params.push("const uint3 dc_global".into());
        let _ = writeln!(
            self.out,
            "\n// One logical thread of the vector form: the elements it may touch (its own, at its\n// global id) are registers of the caller; a store also sets the element's mask.\nstatic __device__ __forceinline__ void dc_lane(\n    {}\n) {{",
            lane_params.join(",\n    ")
        );
        self.lane = Some(plan.clone());
        self.block(&k.body, 1);
        self.lane = None;
        self.out.push_str("}\n");
    }

    /// The vector entry point up to its chunk loop: the number of whole chunks inside the
    /// grid and every touched buffer.
    fn vector_entry_head(&mut self, plan: &VectorPlan, params: &[String]) {
        let k = self.k;
        let w = plan.width;
        let _ = writeln!(
            self.out,
            "\n// Vector form: each iteration runs {w} consecutive logical threads on 16-byte loads and\n// stores; needs every buffer aligned to 16 bytes (checked at launch).\nextern \"C\" __global__ void {}(\n    {}\n) {{",
            vector_entry_name(&k.name),
            params.join(",\n    ")
        );
        self.out.push_str(STRIDED_PROLOGUE);
        self.out.push_str(
            "    const u64 dc_first = (u64)dc_group.x * dc_gsize.x + dc_lid.x;\n    // Whole chunks inside the grid and inside every buffer the kernel touches.\n    u64 dc_chunks = dc_grid_x;\n",
        );
        for &b in &plan.touched() {
            let name = k.params[b as usize].name();
            let _ = writeln!(
                self.out,
                "    dc_chunks = dc_chunks < dc_len_{name} ? dc_chunks : (u64)dc_len_{name};"
            );
        }
        let _ = writeln!(
            self.out,
            "    dc_chunks /= {w};\n    for (u64 dc_c = dc_first; dc_c < dc_chunks; dc_c += dc_stride) {{\n        const u64 dc_x = dc_c * {w};"
        );
    }

    /// Per touched buffer: its chunk as 16-byte vectors (loaded, or zero when only
    /// stored), and the store masks.
    fn vector_chunk_loads(&mut self, plan: &VectorPlan) {
        let k = self.k;
        let w = plan.width as usize;
        for &b in &plan.touched() {
            let name = k.params[b as usize].name();
            let (v, per) = chunk_vector(k.memory_elem(Memory::Buffer(b)).expect("buffer").scalar);
            for q in 0..w / per {
                let text = if plan.loaded.contains(&b) {
                    let c = if plan.stored.contains(&b) {
                        ""
                    } else {
                        "const "
                    };
                    format!(
                        "{c}{v} v_{name}_{q} = reinterpret_cast<const {v}*>(p_{name})[dc_c * {} + {q}];",
                        w / per
                    )
                } else {
                    format!("{v} v_{name}_{q} = {{}};")
                };
                self.line(2, &text);
            }
            if plan.stored.contains(&b) {
                let masks: Vec<String> = (0..w).map(|j| format!("m_{name}_{j} = false")).collect();
                let text = format!("bool {};", masks.join(", "));
                self.line(2, &text);
            }
        }
    }

    /// One `dc_lane` call per logical thread of the chunk, on its components.
    fn vector_lane_calls(&mut self, plan: &VectorPlan, tail_params: &[String]) {
        let k = self.k;
        let touched = plan.touched();
        for j in 0..plan.width as usize {
            let mut args = Vec::new();
            for (i, p) in k.params.iter().enumerate() {
                let i = i as u32;
                match p {
                    Param::Buffer { name, elem, .. } if touched.contains(&i) => {
                        args.push(chunk_component(name, chunk_vector(elem.scalar).1, j));
                        if plan.stored.contains(&i) {
                            args.push(format!("m_{name}_{j}"));
                        }
                    }
                    Param::Buffer { .. } => {}
                    Param::Scalar { name, .. } => args.push(format!("p_{name}")),
                }
            }
            args.extend(
                tail_params
                    .iter()
                    .map(|p| p.trim_start_matches("u32 ").to_string()),
            );
            args.push(format!("make_uint3((u32)(dc_x + {j}), dc_y, dc_z)"));
            let text = format!("dc_lane({});", args.join(", "));
            self.line(2, &text);
        }
    }

    /// Per stored buffer: the whole chunk written back when every lane stored, otherwise
    /// the stored elements one by one.
    fn vector_chunk_stores(&mut self, plan: &VectorPlan) {
        let k = self.k;
        let w = plan.width as usize;
        for &b in &plan.stored {
            let name = k.params[b as usize].name();
            let (v, per) = chunk_vector(k.memory_elem(Memory::Buffer(b)).expect("buffer").scalar);
            let all: Vec<String> = (0..w).map(|j| format!("m_{name}_{j}")).collect();
            let text = format!("if ({}) {{", all.join(" && "));
            self.line(2, &text);
            for q in 0..w / per {
                let text = format!(
                    "reinterpret_cast<{v}*>(p_{name})[dc_c * {} + {q}] = v_{name}_{q};",
                    w / per
                );
                self.line(3, &text);
            }
            // Lanes that did not store leave their element as it was.
            self.line(2, "} else {");
            for j in 0..w {
                let text = format!(
                    "if (m_{name}_{j}) {{ p_{name}[dc_x + {j}] = {}; }}",
                    chunk_component(name, per, j)
                );
                self.line(3, &text);
            }
            self.line(2, "}");
        }
    }
}

/// A buffer's 16-byte vector type in the vector form, and how many elements it holds.
fn chunk_vector(elem: ScalarType) -> (&'static str, usize) {
    match elem {
        ScalarType::F32 => ("float4", 4),
        ScalarType::I32 => ("int4", 4),
        ScalarType::U32 => ("uint4", 4),
        ScalarType::F64 => ("double2", 2),
        ScalarType::I64 => ("longlong2", 2),
        ScalarType::U64 => ("ulonglong2", 2),
        ScalarType::Bool | ScalarType::F16 | ScalarType::BF16 | ScalarType::U8 => {
            unreachable!("no vector form: 1-byte buffers, and types kernels cannot use")
        }
    }
}

/// The component of buffer `name`'s chunk vectors that holds lane `j` (`per` elements a
/// vector).
fn chunk_component(name: &str, per: usize, j: usize) -> String {
    format!("v_{name}_{}.{}", j / per, ["x", "y", "z", "w"][j % per])
}

/// The launch coordinates `dc_body` takes after the entry parameters.
const BODY_COORDS: [&str; 5] = ["dc_global", "dc_lid", "dc_group", "dc_gsize", "dc_ngroups"];

/// The start of the grid-stride entry points: coordinates, rows and layers outside the
/// grid leave, and the stride of the x loop.
const STRIDED_PROLOGUE: &str = "    const uint3 dc_lid = threadIdx;\n    const uint3 dc_group = blockIdx;\n    const uint3 dc_gsize = blockDim;\n    const uint3 dc_ngroups = gridDim;\n    const u32 dc_y = dc_group.y * dc_gsize.y + dc_lid.y;\n    const u32 dc_z = dc_group.z * dc_gsize.z + dc_lid.z;\n    if (dc_y >= dc_grid_y || dc_z >= dc_grid_z) {\n        return;\n    }\n    const u64 dc_stride = (u64)dc_ngroups.x * dc_gsize.x;\n";

/// Type names for CUDA; the helpers that follow are the shared C-family prelude.
const CUDA_TYPES: &str = r#"
typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;
typedef float f32;
typedef double f64;
#define DC_FN static __device__ __forceinline__
#define DC_THREAD
// Signed abs as a predicated negation in PTX (abs(MIN) == MIN). ptxas treats the result
// of `abs.s32` (which LLVM also emits for `a < 0 ? -a : a`) as non-negative and turns a
// following `%` into an unsigned remainder: abs(MIN) % 61 gave 59, not -59 (CUDA 13,
// H100; found by the random-kernel differential test, checked form by form by the
// `abs_of_min_then_remainder_forms` diagnosis). The predicated form computes the same.
#define DC_ABS_SIGNED \
DC_FN i32 dc_abs(i32 a) { i32 r; asm volatile("{ .reg .pred p; setp.lt.s32 p, %1, 0; @p sub.s32 %0, 0, %1; @!p mov.b32 %0, %1; }" : "=r"(r) : "r"(a)); return r; } \
DC_FN i64 dc_abs(i64 a) { i64 r; asm volatile("{ .reg .pred p; setp.lt.s64 p, %1, 0; @p sub.s64 %0, 0, %1; @!p mov.b64 %0, %1; }" : "=l"(r) : "l"(a)); return r; }
"#;

/// CUDA's float helpers: clamps, and float -> int casts that round toward zero and
/// saturate (the cvt.rzi intrinsics), NaN -> 0 (tested here: the 64-bit conversions give
/// MIN for NaN).
const CUDA_FLOAT_HELPERS: &str = r#"
DC_FN f32 dc_clampf(f32 x, f32 lo, f32 hi) { return fminf(fmaxf(x, lo), hi); }
DC_FN f64 dc_clampd(f64 x, f64 lo, f64 hi) { return fmin(fmax(x, lo), hi); }
DC_FN i32 dc_f32_to_i32(f32 x) { return x != x ? 0 : __float2int_rz(x); }
DC_FN u32 dc_f32_to_u32(f32 x) { return x != x ? 0u : __float2uint_rz(x); }
DC_FN i64 dc_f32_to_i64(f32 x) { return x != x ? (i64)0 : __float2ll_rz(x); }
DC_FN u64 dc_f32_to_u64(f32 x) { return x != x ? (u64)0 : __float2ull_rz(x); }
DC_FN i32 dc_f64_to_i32(f64 x) { return x != x ? 0 : __double2int_rz(x); }
DC_FN u32 dc_f64_to_u32(f64 x) { return x != x ? 0u : __double2uint_rz(x); }
DC_FN i64 dc_f64_to_i64(f64 x) { return x != x ? (i64)0 : __double2ll_rz(x); }
DC_FN u64 dc_f64_to_u64(f64 x) { return x != x ? (u64)0 : __double2ull_rz(x); }
"#;

/// Checked mode: `i < n`, and otherwise the launch's first violation recorded in `err`
/// (`[set, memory, index, len]`; the thread that sets the flag writes the rest).
const CUDA_CHECKED_HELPER: &str = r#"
DC_FN bool dc_in(u32 i, u32 n, u32 what, u32* err) {
    if (i < n) {
        return true;
    }
    if (atomicCAS(err, 0u, 1u) == 0u) {
        err[1] = what;
        err[2] = i;
        err[3] = n;
    }
    return false;
}
"#;

/// f16 support, emitted only for kernels that use f16 (other kernels' code is unchanged):
/// conversions by the PTX instructions (round to nearest even; overflow gives infinity),
/// so no CUDA header is needed.
const F16_PRELUDE: &str = r#"
DC_FN float dc_h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
DC_FN unsigned short dc_f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
DC_FN float dc_rh(float f) { return dc_h2f(dc_f2h(f)); }
"#;

/// Tensor-core multiply-accumulates (IR `Mma`), emitted only for kernels that use them.
/// TF32 operands are rounded by `cvt.rna` (to nearest, ties away), which the `mma`
/// instruction otherwise leaves to the caller; the conversion is not `volatile`, so the
/// compiler converts a fragment reused by several products once. f16 operands arrive as
/// their bits and are paired into the `.f16x2` registers, lower half first.
const MMA_PRELUDE: &str = r#"
DC_FN u32 dc_tf32(f32 x) { u32 r; asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x)); return r; }
DC_FN void dc_mma_tf32(f32& d0, f32& d1, f32& d2, f32& d3, f32 a0, f32 a1, f32 a2, f32 a3, f32 b0, f32 b1) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "r"(dc_tf32(a0)), "r"(dc_tf32(a1)), "r"(dc_tf32(a2)), "r"(dc_tf32(a3)), "r"(dc_tf32(b0)), "r"(dc_tf32(b1)));
}
typedef unsigned short dc_h;
DC_FN u32 dc_h2(dc_h lo, dc_h hi) { return (u32)lo | ((u32)hi << 16); }
DC_FN void dc_mma_f16(f32& d0, f32& d1, f32& d2, f32& d3, dc_h a0, dc_h a1, dc_h a2, dc_h a3, dc_h a4, dc_h a5, dc_h a6, dc_h a7, dc_h b0, dc_h b1, dc_h b2, dc_h b3) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "r"(dc_h2(a0, a1)), "r"(dc_h2(a2, a3)), "r"(dc_h2(a4, a5)), "r"(dc_h2(a6, a7)), "r"(dc_h2(b0, b1)), "r"(dc_h2(b2, b3)));
}
"#;

/// Subgroup operations as warp intrinsics, emitted only for kernels that use them (so the
/// code of other kernels is unchanged). A warp is 32 consecutive threads in linear order;
/// the last warp of a group is partial when the group size is not a multiple of 32, so
/// every operation runs on the mask of the lanes that exist, and reductions skip the
/// missing ones.
const SUBGROUP_PRELUDE: &str = r#"
DC_FN u32 dc_sg_linear() { return (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x; }
DC_FN u32 dc_sg_lane() { return dc_sg_linear() & 31u; }
DC_FN u32 dc_sg_mask() {
    u32 n = blockDim.x * blockDim.y * blockDim.z - (dc_sg_linear() & ~31u);
    return n >= 32u ? 0xffffffffu : ((1u << n) - 1u);
}
template <typename T> DC_FN T dc_sg_shuffle(T x, u32 lane) { return __shfl_sync(dc_sg_mask(), x, (int)(lane & 31u)); }
template <typename T> DC_FN T dc_sg_shuffle_xor(T x, u32 m) { return __shfl_xor_sync(dc_sg_mask(), x, (int)(m & 31u)); }
template <typename T> DC_FN T dc_sg_shuffle_up(T x, u32 d) { T y = __shfl_up_sync(dc_sg_mask(), x, d < 32u ? d : 0u); return dc_sg_lane() >= d ? y : x; }
template <typename T> DC_FN T dc_sg_shuffle_down(T x, u32 d) { T y = __shfl_down_sync(dc_sg_mask(), x, d < 32u ? d : 0u); return dc_sg_lane() + d < 32u ? y : x; }
#define DC_SG_REDUCE(NAME, T, COMBINE) DC_FN T NAME(T v) { \
    u32 mask = dc_sg_mask(), lane = dc_sg_lane(), n = __popc(mask); \
    for (u32 o = 16u; o > 0u; o >>= 1) { T y = __shfl_down_sync(mask, v, o); if (lane + o < n) v = COMBINE; } \
    return __shfl_sync(mask, v, 0); }
#define DC_SG_SCAN(T, COMBINE) \
DC_FN T dc_sg_inclusive_add(T v) { \
    u32 mask = dc_sg_mask(), lane = dc_sg_lane(); \
    for (u32 o = 1u; o < 32u; o <<= 1) { T y = __shfl_up_sync(mask, v, o); if (lane >= o) v = COMBINE; } \
    return v; } \
DC_FN T dc_sg_exclusive_add(T v) { \
    T s = dc_sg_inclusive_add(v); T y = __shfl_up_sync(dc_sg_mask(), s, 1u); \
    return dc_sg_lane() == 0u ? (T)0 : y; }
DC_SG_REDUCE(dc_sg_add, i32, dc_add(v, y)) DC_SG_REDUCE(dc_sg_add, i64, dc_add(v, y))
DC_SG_REDUCE(dc_sg_add, u32, v + y) DC_SG_REDUCE(dc_sg_add, u64, v + y)
DC_SG_REDUCE(dc_sg_add, f32, v + y) DC_SG_REDUCE(dc_sg_add, f64, v + y)
DC_SG_REDUCE(dc_sg_min, i32, (y < v ? y : v)) DC_SG_REDUCE(dc_sg_min, i64, (y < v ? y : v))
DC_SG_REDUCE(dc_sg_min, u32, (y < v ? y : v)) DC_SG_REDUCE(dc_sg_min, u64, (y < v ? y : v))
DC_SG_REDUCE(dc_sg_min, f32, fminf(v, y)) DC_SG_REDUCE(dc_sg_min, f64, fmin(v, y))
DC_SG_REDUCE(dc_sg_max, i32, (y > v ? y : v)) DC_SG_REDUCE(dc_sg_max, i64, (y > v ? y : v))
DC_SG_REDUCE(dc_sg_max, u32, (y > v ? y : v)) DC_SG_REDUCE(dc_sg_max, u64, (y > v ? y : v))
DC_SG_REDUCE(dc_sg_max, f32, fmaxf(v, y)) DC_SG_REDUCE(dc_sg_max, f64, fmax(v, y))
DC_SG_SCAN(i32, dc_add(v, y)) DC_SG_SCAN(i64, dc_add(v, y))
DC_SG_SCAN(u32, v + y) DC_SG_SCAN(u64, v + y) DC_SG_SCAN(f32, v + y) DC_SG_SCAN(f64, v + y)
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_read_back_exactly() {
        let k = Builder::new("k").finish().unwrap();
        let g = Gen::new(&CudaDialect, &k);
        assert_eq!(g.literal(Literal::I32(i32::MIN)), "(-2147483647 - 1)");
        assert_eq!(g.literal(Literal::f32(0.1)), "0.1f");
        assert_eq!(g.literal(Literal::f32(1e20)), "1e20f");
        assert_eq!(
            g.literal(Literal::f32(f32::INFINITY)),
            "__int_as_float(0x7f800000)"
        );
        assert_eq!(g.literal(Literal::U64(u64::MAX)), "18446744073709551615ull");
    }
}
