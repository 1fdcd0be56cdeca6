//! IR → WGSL.
//!
//! One module per *specialisation*: WGSL has no dynamically sized workgroup memory and
//! `@workgroup_size` is fixed per pipeline, so the group size and the dynamic shared
//! array's length are baked into the source (backends cache one pipeline per
//! specialisation).
//!
//! Layout of the generated module:
//!
//! * buffer parameter *i* (in signature order among buffers) is `@binding(i)` of group 0,
//!   `var<storage, read>` or `read_write`; a buffer touched by any atomic is declared
//!   `array<atomic<u32>>` (`u32` and `f32`) or `array<atomic<i32>>`, and all its accesses
//!   use atomic loads and stores;
//! * one uniform block (`@binding(#buffers)`) holds the launch geometry and the scalar
//!   parameters, packed by [`pack_uniforms`];
//! * the dispatch is folded: groups are numbered linearly from the dispatched
//!   `workgroup_id`, so launches may exceed 65,535 groups per dimension. Groups past the
//!   logical grid return at once (uniformly). In kernels without barriers, threads
//!   outside the grid return too (the launch rule of `dotcompute_hal::Launch`).
//!
//! Semantics (see `dotcompute_ir`): WGSL's integer division and remainder already give
//! `x / 0 == x`, `x % 0 == 0` and `MIN / -1 == MIN`; shifts are masked explicitly;
//! float-to-int casts go through helpers that saturate and map NaN to 0; compare-exchange
//! is made strong with a retry loop around `atomicCompareExchangeWeak`; f32 atomic add is
//! a compare-exchange loop on the bits. 64-bit types are rejected (WGSL has none).
//! WGSL's `fma` may be evaluated unfused (two roundings), as the IR docs allow for wgpu.

use dotcompute_ir::analysis::VectorPlan;
use dotcompute_ir::*;
use std::collections::BTreeSet;
use std::fmt::Write;

/// Specialisation of one kernel for one pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WgslOptions {
    pub group_size: [u32; 3],
    /// Length of the dynamic shared array (ignored when the kernel has none).
    pub dynamic_shared_len: u32,
    /// Buffers are bound at offsets aligned down to the adapter's storage-offset alignment
    /// and the kernel adds each one's remaining element offset (`off_<name>` in the
    /// uniform block, after the scalars, packed by [`pack_uniforms`]'s `offsets`): the
    /// variant used when a launch passes a view at an unaligned offset.
    pub view_offsets: bool,
    /// Checked mode: every array access is bounds-checked, and the first violation is
    /// recorded in `dc_err` (binding [`WgslModule::violation_binding`]; four zeroed `u32`s,
    /// `[set, memory, index, len]`, see `dotcompute_hal::decode_violation`).
    pub checked: bool,
    /// The grid-stride form: the kernel's body becomes `dc_body(dc_global)`, and each
    /// invocation of a fixed dispatch ([`STRIDED_GROUPS`] groups at most) calls it for
    /// x, x + stride, ... up to the grid. Only for kernels that are
    /// [`dotcompute_ir::analysis::grid_stride_eligible`] launched on a 1-D grid with 1-D
    /// groups (which thread runs a logical thread is then unobservable); it spares each
    /// logical thread the dispatch folding's division and a group's launch.
    pub strided: bool,
    /// The vector form of an elementwise kernel over 4-byte buffers
    /// ([`dotcompute_ir::analysis::vector_plan_32bit`]): the buffers it touches are bound
    /// as `array<vec4<T>>` and each invocation of a fixed dispatch runs 4 consecutive
    /// logical threads per trip of a grid-stride loop, on 16-byte loads and stores. The
    /// backend takes it only under the grid-stride form's conditions and where every
    /// buffer's length is a multiple of 4 elements and its offset of 16 bytes; then a
    /// buffer's `arrayLength` times 4 is its length. A lane beyond the grid does not run;
    /// one beyond a buffer reads 0 and its stores are dropped (what robust buffer access
    /// gives the scalar form).
    pub vector: bool,
    /// The device has f32 atomics (wgpu's SHADER_FLOAT32_ATOMIC): arrays of f32 touched
    /// by atomics are `array<atomic<f32>>` and `atomic_add` is one `atomicAdd`, instead of
    /// `atomic<u32>` bits and a compare-exchange loop (which NVIDIA's Vulkan driver did
    /// not finish in 100 s with a million threads on one address).
    pub native_f32_atomics: bool,
    /// Barriers also order storage buffers (`storageBarrier()` before
    /// `workgroupBarrier()`). Needed only where a thread can observe that order
    /// ([`dotcompute_ir::analysis::barrier_orders_buffers`]); the backend passes that.
    pub storage_barriers: bool,
    /// For drivers that end a thread's loops after a fixed number of trips in all
    /// (llvmpipe: 65,535 per invocation, every loop counted together, then the loop simply
    /// exits): each loop trip counts in `dc_trips`, and a thread that reached this many
    /// records [`LOOP_BUDGET_CODE`] in the violation record (as checked mode does), so
    /// the launch is an error instead of a silently truncated result. Only kernels with
    /// loops get the record.
    pub loop_budget: Option<u32>,
}

/// The "array" code a thread records when it reached [`WgslOptions::loop_budget`]
/// (`dotcompute_hal::decode_violation` turns it into an error about long loops).
pub const LOOP_BUDGET_CODE: u32 = 0xffff_ff00;

/// 256 threads per group, a dynamic shared length of 256, every variant off: the
/// module `dotcompute emit` prints and the snapshots record.
impl Default for WgslOptions {
    fn default() -> WgslOptions {
        WgslOptions {
            group_size: [256, 1, 1],
            dynamic_shared_len: 256,
            view_offsets: false,
            checked: false,
            strided: false,
            vector: false,
            native_f32_atomics: false,
            storage_barriers: true,
            loop_budget: None,
        }
    }
}

/// Groups dispatched by the grid-stride form (when the grid needs more): enough to fill
/// every GPU wgpu runs on many times over (an H100 holds about 1,000 groups of 256).
pub const STRIDED_GROUPS: u32 = 8192;

/// How the generated module expects its resources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WgslModule {
    pub source: String,
    /// `(parameter index, binding, read_only)` for each buffer parameter.
    pub buffers: Vec<(u32, u32, bool)>,
    /// Binding of the uniform block.
    pub uniform_binding: u32,
    /// Size of the uniform block in bytes (a multiple of 16).
    pub uniform_size: usize,
    /// Checked modules: the binding of the violation record (after the uniform block).
    pub violation_binding: Option<u32>,
}

/// Why a kernel cannot be expressed in WGSL.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("kernel `{kernel}` cannot run through WGSL: {message}")]
pub struct CodegenError {
    pub kernel: String,
    pub message: String,
}

/// Number of u32 words of launch geometry at the start of the uniform block.
const GEOMETRY_WORDS: usize = 7;

/// Packs the uniform block of generated kernels: grid (3), groups (3), total groups,
/// then each scalar parameter as one 4-byte word (`bool` as 0/1), padded to 16 bytes.
/// `offsets`: the view-offset variant's element offsets (empty otherwise); `half_lens`:
/// the lengths of the f16 buffer arguments, in parameter order.
pub fn pack_uniforms(
    grid: [u32; 3],
    groups: [u32; 3],
    scalars: &[Literal],
    offsets: &[u32],
    half_lens: &[u32],
) -> Vec<u8> {
    let mut words: Vec<u32> = Vec::with_capacity(GEOMETRY_WORDS + scalars.len());
    words.extend(grid);
    words.extend(groups);
    words.push(groups[0].wrapping_mul(groups[1]).wrapping_mul(groups[2]));
    words.extend(scalars.iter().map(|&s| scalar_word(s)));
    words.extend(offsets);
    words.extend(half_lens);
    pad_to_bytes(words)
}

/// Packs the uniform block of hand-written kernels: the scalars alone, one 4-byte word
/// each, padded to 16 bytes (at least 16: an empty uniform block is not allowed).
pub fn pack_scalars(scalars: &[Literal]) -> Vec<u8> {
    let mut words: Vec<u32> = scalars.iter().map(|&s| scalar_word(s)).collect();
    if words.is_empty() {
        words.push(0);
    }
    pad_to_bytes(words)
}

fn scalar_word(s: Literal) -> u32 {
    match s {
        Literal::Bool(b) => b as u32,
        Literal::I32(v) => v as u32,
        Literal::U32(v) => v,
        Literal::F32(bits) => bits,
        // Rejected before packing (WGSL has no 64-bit types); never reaches a shader.
        Literal::I64(_) | Literal::U64(_) | Literal::F64(_) => 0,
        // An f16 scalar travels as an f32 (the uniform block's field is f32).
        Literal::F16(bits) => half::f16::from_bits(bits).to_f32().to_bits(),
    }
}

/// Little-endian bytes of `words`, padded with zero words to a multiple of 16 bytes.
fn pad_to_bytes(mut words: Vec<u32>) -> Vec<u8> {
    while words.len() % 4 != 0 {
        words.push(0);
    }
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn wgsl_type(ty: ScalarType) -> Option<&'static str> {
    match ty {
        ScalarType::Bool => Some("bool"),
        ScalarType::I32 => Some("i32"),
        ScalarType::U32 => Some("u32"),
        ScalarType::F32 => Some("f32"),
        // Needs the adapter's SHADER_F16 (`enable f16;`), a device capability.
        ScalarType::F16 => Some("f16"),
        ScalarType::I64 | ScalarType::U64 | ScalarType::F64 | ScalarType::BF16 | ScalarType::U8 => {
            None
        }
    }
}

/// Generates the WGSL module for `kernel` specialised by `opts`.
pub fn generate(kernel: &Kernel, opts: &WgslOptions) -> Result<WgslModule, CodegenError> {
    if kernel.uses_tensor_cores() {
        return Err(CodegenError {
            kernel: kernel.name.clone(),
            message: "it uses tensor-core operations (mma_m16n8k8_tf32, mma_m16n8k16_f16), \
                      and WGSL has no tensor-core (cooperative matrix) operations; run it on \
                      CUDA"
                .into(),
        });
    }
    let vector = if opts.vector {
        let plan = dotcompute_ir::analysis::vector_plan_32bit(kernel);
        if plan.is_none() {
            return Err(CodegenError {
                kernel: kernel.name.clone(),
                message: "the vector form is for elementwise kernels over 4-byte buffers".into(),
            });
        }
        plan
    } else {
        None
    };
    let unrolled = crate::unrolled(kernel, !opts.checked && !opts.strided && !opts.vector);
    let kernel = unrolled.as_ref().unwrap_or(kernel);
    let mut has_loops = false;
    dotcompute_ir::walk_stmts(&kernel.body, &mut |st| {
        has_loops |= matches!(st, Stmt::For { .. } | Stmt::Loop { .. });
    });
    let loop_budget = opts.loop_budget.filter(|_| has_loops);
    let record = opts.checked || loop_budget.is_some();
    let mut g = Gen {
        vector,
        lane: false,
        k: kernel,
        out: String::new(),
        atomic: dotcompute_ir::analysis::atomic_memories(&kernel.body),
        tmp: 0,
        dynamic_shared_len: opts.dynamic_shared_len.max(1),
        view_offsets: opts.view_offsets,
        checked: opts.checked,
        native_f32_atomics: opts.native_f32_atomics,
        storage_barriers: opts.storage_barriers,
        loop_budget,
    };
    g.check_types()?;
    g.module(opts);
    let buffers: Vec<(u32, u32, bool)> = kernel
        .params
        .iter()
        .enumerate()
        .filter_map(|(i, p)| match p {
            Param::Buffer { access, .. } => Some((i as u32, *access == Access::Read)),
            Param::Scalar { .. } => None,
        })
        .enumerate()
        .map(|(b, (i, ro))| (i, b as u32, ro))
        .collect();
    let scalars = kernel
        .params
        .iter()
        .filter(|p| matches!(p, Param::Scalar { .. }))
        .count();
    Ok(WgslModule {
        source: g.out,
        uniform_binding: buffers.len() as u32,
        violation_binding: record.then_some(buffers.len() as u32 + 1),
        buffers,
        uniform_size: (GEOMETRY_WORDS + scalars).next_multiple_of(4) * 4,
    })
}

struct Gen<'k> {
    /// The vector form's plan ([`WgslOptions::vector`]): its buffers are `vec4` arrays.
    vector: Option<VectorPlan>,
    /// While the vector form's lane function is written: its buffer elements are the
    /// parameters `r_<name>` (a pointer, with the mask `m_<name>`, where stored).
    lane: bool,
    k: &'k Kernel,
    out: String,
    atomic: BTreeSet<Memory>,
    tmp: u32,
    dynamic_shared_len: u32,
    view_offsets: bool,
    checked: bool,
    native_f32_atomics: bool,
    storage_barriers: bool,
    /// [`WgslOptions::loop_budget`], for kernels with loops.
    loop_budget: Option<u32>,
}

impl Gen<'_> {
    /// With a loop budget, the first line of every loop's body: one more trip.
    fn count_trip(&mut self, d: usize) {
        if self.loop_budget.is_some() {
            self.line(d, "dc_trips = dc_trips + 1u;");
        }
    }

    /// With a loop budget, where a thread ends: record it if it reached the budget.
    fn check_trips(&mut self, d: usize) {
        if let Some(budget) = self.loop_budget {
            self.line(
                d,
                &format!(
                    "if (dc_trips >= {budget}u) {{ _ = dc_in(dc_trips, {budget}u, {LOOP_BUDGET_CODE}u); }}"
                ),
            );
        }
    }

    fn check_types(&self) -> Result<(), CodegenError> {
        let bad = |what: String, ty: ScalarType| CodegenError {
            kernel: self.k.name.clone(),
            message: format!(
                "{what} has type {ty}; WGSL has no 64-bit types (use the CUDA or CPU backend)"
            ),
        };
        for p in &self.k.params {
            let (ty, name) = match p {
                Param::Buffer { elem, name, .. } => (elem.scalar, name),
                Param::Scalar { ty, name } => (*ty, name),
            };
            if wgsl_type(ty).is_none() {
                return Err(bad(format!("parameter `{name}`"), ty));
            }
        }
        for s in &self.k.shared {
            if wgsl_type(s.elem).is_none() {
                return Err(bad(format!("shared array `{}`", s.name), s.elem));
            }
        }
        for a in &self.k.local_arrays {
            if wgsl_type(a.elem).is_none() {
                return Err(bad(format!("local array `{}`", a.name), a.elem));
            }
        }
        for l in &self.k.locals {
            if wgsl_type(l.ty.scalar).is_none() {
                return Err(bad(format!("local `{}`", l.name), l.ty.scalar));
            }
        }
        Ok(())
    }

    fn ty(&self, ty: ScalarType) -> &'static str {
        wgsl_type(ty).expect("checked by check_types")
    }

    /// The WGSL spelling of a value type (`vec4<f32>` for a vector).
    fn type_name(&self, ty: Type) -> String {
        if ty.is_vector() {
            format!("vec{}<{}>", ty.lanes, self.ty(ty.scalar))
        } else {
            self.ty(ty.scalar).to_string()
        }
    }

    fn mem_name(&self, mem: Memory) -> String {
        match mem {
            Memory::Buffer(i) => format!("p_{}", self.k.params[i as usize].name()),
            Memory::Shared(i) => format!("s_{}", self.k.shared[i as usize].name),
            Memory::Local(i) => format!("a_{}_{i}", self.k.local_arrays[i as usize].name),
        }
    }

    fn local(&self, id: u32) -> String {
        format!("l_{}_{id}", self.k.locals[id as usize].name)
    }

    fn atomic_elem(&self, ty: ScalarType) -> &'static str {
        match ty {
            ScalarType::I32 => "atomic<i32>",
            ScalarType::F32 if self.native_f32_atomics => "atomic<f32>",
            _ => "atomic<u32>",
        }
    }

    /// Whether f32 values of atomic arrays are held as `u32` bits.
    fn f32_as_bits(&self, ty: Type) -> bool {
        ty == ScalarType::F32 && !self.native_f32_atomics
    }

    fn module(&mut self, opts: &WgslOptions) {
        let k = self.k;
        let _ = writeln!(
            self.out,
            "// dotcompute WGSL for kernel `{}` (IR v{}), group {:?}, dynamic shared {}",
            k.name, k.version, opts.group_size, opts.dynamic_shared_len
        );
        // naga 30 takes the subgroup builtins without WGSL's `enable subgroups;` (and
        // rejects the directive); the device feature SUBGROUP gates them.
        let subgroups = k.uses_subgroups();
        if dotcompute_ir::analysis::uses_f16(k) {
            self.out.push_str("enable f16;\n");
        }
        // Uniform block.
        self.out.push_str("struct DcParams {\n    grid_x: u32,\n    grid_y: u32,\n    grid_z: u32,\n    groups_x: u32,\n    groups_y: u32,\n    groups_z: u32,\n    total_groups: u32,\n");
        for p in &k.params {
            if let Param::Scalar { name, ty } = p {
                let t = match *ty {
                    ScalarType::Bool => "u32",
                    // Uniform f16 fields have their own layout rules; an f32 is simpler.
                    ScalarType::F16 => "f32",
                    t => self.ty(t),
                };
                let _ = writeln!(self.out, "    p_{name}: {t},");
            }
        }
        if self.view_offsets {
            for p in &k.params {
                if let Param::Buffer { name, .. } = p {
                    let _ = writeln!(self.out, "    off_{name}: u32,");
                }
            }
        }
        // A binding's size is a multiple of 4 bytes, so an f16 buffer's `arrayLength` may
        // count one element too many: its length comes from the launch instead.
        for p in &k.params {
            if let Param::Buffer { name, elem, .. } = p {
                if *elem == ScalarType::F16 {
                    let _ = writeln!(self.out, "    len_{name}: u32,");
                }
            }
        }
        self.out.push_str("}\n\n");
        let mut binding = 0;
        for (i, p) in k.params.iter().enumerate() {
            if let Param::Buffer { name, elem, access } = p {
                let atomic = self.atomic.contains(&Memory::Buffer(i as u32));
                let elem_ty = if atomic {
                    self.atomic_elem(elem.scalar).to_string()
                } else if self.is_vector_buffer(i as u32) {
                    format!("vec4<{}>", self.ty(elem.scalar))
                } else {
                    self.type_name(*elem)
                };
                let mode = if *access == Access::Read {
                    "read"
                } else {
                    "read_write"
                };
                let _ = writeln!(
                    self.out,
                    "@group(0) @binding({binding}) var<storage, {mode}> p_{name}: array<{elem_ty}>;"
                );
                binding += 1;
            }
        }
        let _ = writeln!(
            self.out,
            "@group(0) @binding({binding}) var<uniform> dc_params: DcParams;\n"
        );
        if self.checked || self.loop_budget.is_some() {
            let _ = writeln!(
                self.out,
                "@group(0) @binding({}) var<storage, read_write> dc_err: array<atomic<u32>, 4>;\n{CHECKED_HELPER}",
                binding + 1
            );
        }
        if self.loop_budget.is_some() {
            self.out.push_str("var<private> dc_trips: u32 = 0u;\n");
        }
        for (i, s) in k.shared.iter().enumerate() {
            let len = match s.len {
                SharedLen::Static(n) => n,
                SharedLen::Dynamic => opts.dynamic_shared_len.max(1),
            };
            let atomic = self.atomic.contains(&Memory::Shared(i as u32));
            let elem_ty = if atomic {
                self.atomic_elem(s.elem)
            } else {
                self.ty(s.elem)
            };
            let _ = writeln!(
                self.out,
                "var<workgroup> s_{}: array<{elem_ty}, {len}>;",
                s.name
            );
        }
        self.out.push_str(HELPERS);
        let [gx, gy, gz] = opts.group_size;
        let subgroup_builtins = if subgroups {
            "    @builtin(subgroup_size) dc_sg_size: u32,\n    @builtin(subgroup_invocation_id) dc_sg_lane: u32,\n"
        } else {
            ""
        };
        if self.vector.is_some() {
            self.vector_entry(gx);
            return;
        }
        if opts.strided {
            self.strided_entry(gx);
            return;
        }
        let _ = writeln!(
            self.out,
            "\n@compute @workgroup_size({gx}, {gy}, {gz})\nfn main(\n    @builtin(local_invocation_id) dc_lid: vec3<u32>,\n    @builtin(workgroup_id) dc_wid: vec3<u32>,\n    @builtin(num_workgroups) dc_nwg: vec3<u32>,\n{subgroup_builtins}) {{"
        );
        // A launch whose groups fit the dispatch limits is dispatched as they are: the
        // group id is the workgroup id, with no arithmetic. Otherwise the dispatch is
        // folded: number groups linearly, skip the padding groups (a uniform branch).
        self.out.push_str(
            "    let dc_ngroups = vec3<u32>(dc_params.groups_x, dc_params.groups_y, dc_params.groups_z);\n    var dc_group = dc_wid;\n    if (any(dc_nwg != dc_ngroups)) {\n        let dc_linear = dc_wid.x + dc_nwg.x * (dc_wid.y + dc_nwg.y * dc_wid.z);\n        if (dc_linear >= dc_params.total_groups) {\n            return;\n        }\n        dc_group = vec3<u32>(dc_linear % dc_ngroups.x, (dc_linear / dc_ngroups.x) % dc_ngroups.y, dc_linear / (dc_ngroups.x * dc_ngroups.y));\n    }\n",
        );
        let _ = writeln!(
            self.out,
            "    let dc_gsize = vec3<u32>({gx}u, {gy}u, {gz}u);\n    let dc_global = dc_group * dc_gsize + dc_lid;"
        );
        if !k.runs_whole_groups() {
            self.out.push_str("    if (dc_global.x >= dc_params.grid_x || dc_global.y >= dc_params.grid_y || dc_global.z >= dc_params.grid_z) {\n        return;\n    }\n");
        }
        self.local_arrays_and_body();
    }

    /// The thread-private arrays (declared once, filled where the kernel declares them),
    /// the body, and the closing brace of the function they are in.
    fn local_arrays_and_body(&mut self) {
        let k = self.k;
        for (i, a) in k.local_arrays.iter().enumerate() {
            let _ = writeln!(
                self.out,
                "    var a_{}_{i}: array<{}, {}>;",
                a.name,
                self.ty(a.elem),
                a.len
            );
        }
        self.block(&k.body, 1);
        self.check_trips(1);
        self.out.push_str("}\n");
    }

    /// The grid-stride form (see [`WgslOptions::strided`]): the body as a function of
    /// the global id (a `return` in it ends one logical thread, not the loop), and an
    /// entry point that calls it for every x the invocation strides over.
    fn strided_entry(&mut self, gx: u32) {
        self.out.push_str("\nfn dc_body(dc_global: vec3<u32>) {\n");
        self.local_arrays_and_body();
        self.stride_loop_open(gx, "", "dc_x", "dc_params.grid_x");
        self.out
            .push_str("        dc_body(vec3<u32>(dc_x, 0u, 0u));\n");
        self.stride_loop_close("dc_x");
    }

    /// The entry point of the grid-stride and vector forms up to the body of their
    /// stride loop: `setup` (whole lines) before it, then `var` from this invocation's
    /// index, stepping by the dispatch's invocations, while below `limit`.
    fn stride_loop_open(&mut self, gx: u32, setup: &str, var: &str, limit: &str) {
        let _ = writeln!(
            self.out,
            "\n@compute @workgroup_size({gx}, 1, 1)\nfn main(\n    @builtin(local_invocation_id) dc_lid: vec3<u32>,\n    @builtin(workgroup_id) dc_wid: vec3<u32>,\n    @builtin(num_workgroups) dc_nwg: vec3<u32>,\n) {{\n    let dc_stride = dc_nwg.x * {gx}u;\n{setup}    var {var} = dc_wid.x * {gx}u + dc_lid.x;\n    loop {{\n        if ({var} >= {limit}) {{\n            break;\n        }}"
        );
    }

    /// The end of [`Gen::stride_loop_open`]'s loop and entry point.
    fn stride_loop_close(&mut self, var: &str) {
        let _ = writeln!(
            self.out,
            "        let dc_next = {var} + dc_stride;\n        // The last stride may pass u32::MAX.\n        if (dc_next < {var}) {{\n            break;\n        }}\n        {var} = dc_next;\n    }}\n}}"
        );
    }

    /// Whether buffer parameter `i` is bound as `vec4`s (the vector form's buffers).
    fn is_vector_buffer(&self, i: u32) -> bool {
        self.vector
            .as_ref()
            .is_some_and(|p| p.touched().contains(&i))
    }

    /// The vector form (see [`WgslOptions::vector`]): a lane function, which is the body
    /// with the lane's buffer elements as parameters, and an entry point that loads each
    /// buffer's 16-byte vector, runs the 4 lanes in order, and stores back the lanes
    /// that stored (the others keep their values).
    fn vector_entry(&mut self, gx: u32) {
        let k = self.k;
        let plan = self.vector.clone().expect("the vector form has a plan");
        let buffers: Vec<(u32, String, &'static str)> = plan
            .touched()
            .into_iter()
            .map(|b| {
                let elem = k.memory_elem(Memory::Buffer(b)).expect("a buffer").scalar;
                (b, k.params[b as usize].name().to_string(), self.ty(elem))
            })
            .collect();
        let mut params = Vec::new();
        for (b, name, t) in &buffers {
            if plan.stored.contains(b) {
                params.push(format!("r_{name}: ptr<function, {t}>"));
                params.push(format!("m_{name}: ptr<function, bool>"));
            } else {
                params.push(format!("r_{name}: {t}"));
            }
        }
        params.push("dc_global: vec3<u32>".into());
        let _ = writeln!(
            self.out,
            "\n// One logical thread of the vector form: its own elements are the caller's\n// variables; a store also sets the element's mask.\nfn dc_lane({}) {{",
            params.join(", ")
        );
        self.lane = true;
        self.local_arrays_and_body();
        self.lane = false;
        self.stride_loop_open(
            gx,
            "    // Chunks of 4 logical threads: `dc_full` whole ones, then `dc_rest` threads.\n    let dc_full = dc_params.grid_x / 4u;\n    let dc_rest = dc_params.grid_x & 3u;\n    let dc_chunks = dc_full + select(0u, 1u, dc_rest != 0u);\n",
            "dc_c",
            "dc_chunks",
        );
        const LANES: [&str; 4] = ["x", "y", "z", "w"];
        for (b, name, t) in &buffers {
            self.line(
                2,
                &format!("let dc_in_{name} = dc_c < arrayLength(&p_{name});"),
            );
            self.line(2, &format!("var v_{name} = vec4<{t}>();"));
            if plan.loaded.contains(b) {
                self.line(2, &format!("if (dc_in_{name}) {{"));
                self.line(3, &format!("v_{name} = p_{name}[dc_c];"));
                self.line(2, "}");
            }
            if plan.stored.contains(b) {
                for (j, c) in LANES.iter().enumerate() {
                    self.line(2, &format!("var r_{name}_{j} = v_{name}.{c};"));
                    self.line(2, &format!("var m_{name}_{j} = false;"));
                }
            }
        }
        for (j, lane) in LANES.iter().enumerate() {
            let mut args = Vec::new();
            for (b, name, _) in &buffers {
                if plan.stored.contains(b) {
                    args.push(format!("&r_{name}_{j}"));
                    args.push(format!("&m_{name}_{j}"));
                } else {
                    args.push(format!("v_{name}.{lane}"));
                }
            }
            args.push(format!("vec3<u32>(dc_c * 4u + {j}u, 0u, 0u)"));
            self.line(2, &format!("if (dc_c < dc_full || {j}u < dc_rest) {{"));
            self.line(3, &format!("dc_lane({});", args.join(", ")));
            self.line(2, "}");
        }
        for (b, name, _) in &buffers {
            if !plan.stored.contains(b) {
                continue;
            }
            let masks: Vec<String> = (0..4).map(|j| format!("m_{name}_{j}")).collect();
            self.line(
                2,
                &format!("if (dc_in_{name} && ({})) {{", masks.join(" || ")),
            );
            if !plan.loaded.contains(b) {
                // Lanes that did not store keep the buffer's values.
                self.line(3, &format!("if (!({})) {{", masks.join(" && ")));
                self.line(4, &format!("v_{name} = p_{name}[dc_c];"));
                self.line(3, "}");
            }
            let merged: Vec<String> = LANES
                .iter()
                .enumerate()
                .map(|(j, c)| format!("select(v_{name}.{c}, r_{name}_{j}, m_{name}_{j})"))
                .collect();
            self.line(3, &format!("p_{name}[dc_c] = vec4({});", merged.join(", ")));
            self.line(2, "}");
        }
        self.stride_loop_close("dc_c");
    }

    fn line(&mut self, depth: usize, text: &str) {
        for _ in 0..depth {
            self.out.push_str("    ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn block(&mut self, stmts: &[Stmt], d: usize) {
        for s in stmts {
            self.stmt(s, d);
        }
    }

    fn fresh(&mut self) -> String {
        self.tmp += 1;
        format!("dc_t{}", self.tmp)
    }

    /// `mem[index]`; with view offsets a buffer's index starts at its view.
    fn element(&self, mem: Memory, index: &str) -> String {
        match mem {
            Memory::Buffer(i) if self.view_offsets => format!(
                "{}[dc_params.off_{} + {index}]",
                self.mem_name(mem),
                self.k.params[i as usize].name()
            ),
            _ => format!("{}[{index}]", self.mem_name(mem)),
        }
    }

    /// The length of `mem` in elements, as an expression.
    fn len_of(&self, mem: Memory) -> String {
        match mem {
            Memory::Buffer(i) if self.k.memory_elem(mem) == Some(ScalarType::F16.into()) => {
                format!("dc_params.len_{}", self.k.params[i as usize].name())
            }
            Memory::Buffer(i) if self.is_vector_buffer(i) => {
                format!("(arrayLength(&{}) * 4u)", self.mem_name(mem))
            }
            Memory::Buffer(i) if self.view_offsets => format!(
                "(arrayLength(&{}) - dc_params.off_{})",
                self.mem_name(mem),
                self.k.params[i as usize].name()
            ),
            Memory::Buffer(_) => format!("arrayLength(&{})", self.mem_name(mem)),
            // Shared lengths are constants of this specialisation.
            Memory::Shared(i) => match self.k.shared[i as usize].len {
                SharedLen::Static(n) => format!("{n}u"),
                SharedLen::Dynamic => format!("{}u", self.dynamic_shared_len),
            },
            Memory::Local(i) => format!("{}u", self.k.local_arrays[i as usize].len),
        }
    }

    /// In checked mode, the condition under which `mem[index]` is in bounds; it records
    /// the launch's first violation (`dc_in`).
    fn bounds_check(&self, mem: Memory, index: &str) -> Option<String> {
        self.checked
            .then(|| format!("dc_in(u32({index}), {}, {}u)", self.len_of(mem), mem.code()))
    }

    /// `&mem[index]` for atomics.
    fn addr(&self, mem: Memory, index: &Expr) -> String {
        format!("&{}", self.element(mem, &self.expr(index)))
    }

    fn stmt(&mut self, s: &Stmt, d: usize) {
        match s {
            Stmt::Let { local, init } => {
                let l = &self.k.locals[*local as usize];
                let t = self.type_name(l.ty);
                let init = match init {
                    Some(e) => self.expr(e),
                    None => format!("{t}()"),
                };
                let text = format!("var {}: {t} = {init};", self.local(*local));
                self.line(d, &text);
            }
            Stmt::Assign { local, value } => {
                let text = format!("{} = {};", self.local(*local), self.expr(value));
                self.line(d, &text);
            }
            Stmt::Store {
                mem: Memory::Buffer(b),
                value,
                ..
            } if self.lane => {
                // The lane's own element (the vector form's plan indexes every access by
                // the global id).
                let name = self.k.params[*b as usize].name();
                let store = format!("*r_{name} = {};", self.expr(value));
                self.line(d, &store);
                self.line(d, &format!("*m_{name} = true;"));
            }
            Stmt::Store { mem, index, value } => {
                let text = if self.atomic.contains(mem) {
                    let v = self.expr(value);
                    let v = if self.f32_as_bits(value.ty) {
                        format!("bitcast<u32>({v})")
                    } else {
                        v
                    };
                    format!("atomicStore({}, {v});", self.addr(*mem, index))
                } else {
                    format!(
                        "{} = {};",
                        self.element(*mem, &self.expr(index)),
                        self.expr(value)
                    )
                };
                let text = match self.bounds_check(*mem, &self.expr(index)) {
                    Some(check) => format!("if ({check}) {{ {text} }}"),
                    None => text,
                };
                self.line(d, &text);
            }
            Stmt::Atomic {
                op,
                mem,
                index,
                args,
                result,
            } => match self.bounds_check(*mem, &self.expr(index)) {
                Some(check) => {
                    self.line(d, &format!("if ({check}) {{"));
                    self.atomic_stmt(*op, *mem, index, args, *result, d + 1);
                    self.line(d, "}");
                }
                None => self.atomic_stmt(*op, *mem, index, args, *result, d),
            },
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                let text = format!("if ({}) {{", self.expr(cond));
                self.line(d, &text);
                self.block(then, d + 1);
                if otherwise.is_empty() {
                    self.line(d, "}");
                } else {
                    self.line(d, "} else {");
                    self.block(otherwise, d + 1);
                    self.line(d, "}");
                }
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                let v = self.local(*var);
                let scalar = self.k.locals[*var as usize].ty.scalar;
                let t = self.ty(scalar);
                let constant = crate::cfamily::small_constant_range(start, end, step, scalar);
                if let Some(trips) = constant.and_then(|r| unrollable(r, body)) {
                    // Constant bounds, a few trips, no jumps: the body once per value of
                    // the counter. WGSL has no unroll hint; unrolled, thread-private
                    // arrays indexed by the counter stay in registers, and drivers that
                    // bound loop iterations (llvmpipe ends a loop after 65,535) count
                    // only the loops that remain.
                    // Each trip binds the counter with `let`: a constant expression, so
                    // array indices built from it are constant in naga's output too.
                    for value in trips {
                        self.line(d, "{");
                        self.line(d + 1, &format!("let {v}: {t} = {t}({value});"));
                        self.block(body, d + 1);
                        self.line(d, "}");
                    }
                    return;
                }
                let (e, st) = (self.fresh(), self.fresh());
                self.line(d, "{");
                let lines = [
                    format!("var {v}: {t} = {};", self.expr(start)),
                    format!("let {e}: {t} = {};", self.expr(end)),
                    format!("let {st}: {t} = {};", self.expr(step)),
                    format!("if ({st} > {t}(0) && {v} < {e}) {{"),
                ];
                for l in &lines {
                    self.line(d + 1, l);
                }
                self.line(d + 2, "loop {");
                self.count_trip(d + 3);
                self.block(body, d + 3);
                self.line(d + 3, "continuing {");
                // Stop at the end or when the counter would overflow (Rust's ranges do).
                let next = self.fresh();
                let cont = [
                    format!("let {next}: {t} = {v} + {st};"),
                    format!("let {next}_stop = {next} <= {v} || {next} >= {e};"),
                    format!("{v} = {next};"),
                    format!("break if {next}_stop;"),
                ];
                for l in &cont {
                    self.line(d + 4, l);
                }
                self.line(d + 3, "}");
                self.line(d + 2, "}");
                self.line(d + 1, "}");
                self.line(d, "}");
            }
            Stmt::Loop { body } => {
                self.line(d, "loop {");
                self.count_trip(d + 1);
                self.block(body, d + 1);
                self.line(d, "}");
            }
            Stmt::Break => self.line(d, "break;"),
            Stmt::Continue => self.line(d, "continue;"),
            Stmt::Return => {
                self.check_trips(d);
                self.line(d, "return;")
            }
            // The IR's barrier orders shared and global memory within the group.
            // Refused by `generate` before any statement is printed.
            Stmt::Mma { .. } => unreachable!("tensor-core kernels are refused for WGSL"),
            Stmt::Barrier => {
                if self.storage_barriers {
                    self.line(d, "storageBarrier();");
                }
                self.line(d, "workgroupBarrier();");
            }
        }
    }

    fn atomic_stmt(
        &mut self,
        op: AtomicOp,
        mem: Memory,
        index: &Expr,
        args: &[Expr],
        result: Option<u32>,
        d: usize,
    ) {
        // Atomics are on scalar elements only (validated).
        let elem = self.k.memory_elem(mem).expect("validated").scalar;
        let addr = self.addr(mem, index);
        let a0 = self.expr(&args[0]);
        let old = self.fresh();
        let assign = |g: &Self, v: &str| match result {
            Some(r) => format!("{} = {v};", g.local(r)),
            None => String::new(),
        };
        // With the adapter's f32 atomics, an f32 add is the plain `atomicAdd` below.
        if self.f32_as_bits(elem.into()) {
            // Float add: compare-exchange on the bits until no other thread intervened.
            let ptr = self.fresh();
            let r = self.fresh();
            let lines = [
                format!("let {ptr} = {addr};"),
                format!("var {old}: u32 = atomicLoad({ptr});"),
                "loop {".to_string(),
                format!("    let {r} = atomicCompareExchangeWeak({ptr}, {old}, bitcast<u32>(bitcast<f32>({old}) + {a0}));"),
                format!("    if ({r}.exchanged) {{ break; }}"),
                format!("    {old} = {r}.old_value;"),
                "}".to_string(),
                assign(self, &format!("bitcast<f32>({old})")),
            ];
            for l in &lines {
                if !l.is_empty() {
                    self.line(d, l);
                }
            }
            return;
        }
        let text = match op {
            AtomicOp::CompareExchange => {
                // atomicCompareExchangeWeak may fail spuriously; retry until it either
                // exchanged or saw a different value (a strong compare-exchange).
                let a1 = self.expr(&args[1]);
                let (ptr, r) = (self.fresh(), self.fresh());
                let t = self.ty(elem);
                let lines = [
                    format!("let {ptr} = {addr};"),
                    format!("var {old}: {t};"),
                    "loop {".to_string(),
                    format!("    let {r} = atomicCompareExchangeWeak({ptr}, {a0}, {a1});"),
                    format!("    if ({r}.exchanged || {r}.old_value != {a0}) {{ {old} = {r}.old_value; break; }}"),
                    "}".to_string(),
                    assign(self, &old),
                ];
                for l in &lines {
                    if !l.is_empty() {
                        self.line(d, l);
                    }
                }
                return;
            }
            _ => {
                let f = match op {
                    AtomicOp::Add => "atomicAdd",
                    AtomicOp::Sub => "atomicSub",
                    AtomicOp::Min => "atomicMin",
                    AtomicOp::Max => "atomicMax",
                    AtomicOp::And => "atomicAnd",
                    AtomicOp::Or => "atomicOr",
                    AtomicOp::Xor => "atomicXor",
                    AtomicOp::Exchange => "atomicExchange",
                    AtomicOp::CompareExchange => unreachable!(),
                };
                let call = format!("{f}({addr}, {a0})");
                match result {
                    Some(r) => format!("{} = {call};", self.local(r)),
                    None => format!("{call};"),
                }
            }
        };
        self.line(d, &text);
    }

    fn literal(&self, l: Literal) -> String {
        match l {
            Literal::Bool(b) => b.to_string(),
            Literal::I32(i32::MIN) => "i32(-2147483648)".into(),
            Literal::I32(v) => format!("{v}i"),
            Literal::U32(v) => format!("{v}u"),
            Literal::F32(bits) => {
                let v = f32::from_bits(bits);
                if v.is_finite() {
                    let s = format!("{v:?}");
                    format!("{s}f")
                } else {
                    format!("bitcast<f32>({bits}u)")
                }
            }
            Literal::F16(bits) => {
                let v = half::f16::from_bits(bits);
                if v.is_finite() {
                    format!("{:?}h", v.to_f32())
                } else {
                    format!("f16(bitcast<f32>({}u))", v.to_f32().to_bits())
                }
            }
            Literal::I64(_) | Literal::U64(_) | Literal::F64(_) => {
                unreachable!("64-bit literals are rejected by check_types")
            }
        }
    }

    fn expr(&self, e: &Expr) -> String {
        match &e.kind {
            ExprKind::Literal(l) => self.literal(*l),
            ExprKind::Local(id) => self.local(*id),
            ExprKind::Scalar(i) => {
                let name = self.k.params[*i as usize].name();
                if e.ty == ScalarType::Bool {
                    format!("(dc_params.p_{name} != 0u)")
                } else if e.ty == ScalarType::F16 {
                    format!("f16(dc_params.p_{name})")
                } else {
                    format!("dc_params.p_{name}")
                }
            }
            ExprKind::Builtin(b, a) => {
                let v = match b {
                    Builtin::GlobalId => "dc_global",
                    Builtin::LocalId => "dc_lid",
                    Builtin::GroupId => "dc_group",
                    Builtin::GroupSize => "dc_gsize",
                    Builtin::NumGroups => "dc_ngroups",
                };
                format!("{v}.{}", a.name())
            }
            ExprKind::Len(mem) => self.len_of(*mem),
            ExprKind::Load {
                mem: Memory::Buffer(b),
                ..
            } if self.lane => {
                let name = self.k.params[*b as usize].name();
                let stored = self.vector.as_ref().is_some_and(|p| p.stored.contains(b));
                if stored {
                    format!("(*r_{name})")
                } else {
                    format!("r_{name}")
                }
            }
            ExprKind::Load { mem, index } => {
                let idx = self.expr(index);
                let value = if self.atomic.contains(mem) {
                    let load = format!("atomicLoad(&{})", self.element(*mem, &idx));
                    if self.f32_as_bits(e.ty) {
                        format!("bitcast<f32>({load})")
                    } else {
                        load
                    }
                } else {
                    self.element(*mem, &idx)
                };
                match self.bounds_check(*mem, &idx) {
                    // Out of bounds in checked mode: 0 (the clamped load select discards
                    // is harmless under robust buffer access).
                    Some(check) => format!("select({}(), {value}, {check})", self.type_name(e.ty)),
                    None => value,
                }
            }
            ExprKind::Unary(op, a) => {
                let a_s = self.expr(a);
                let a_s = if *op == UnaryOp::Neg {
                    runtime(a, a_s)
                } else {
                    a_s
                };
                match (op, a.ty.scalar) {
                    (UnaryOp::Neg, _) => format!("(-{a_s})"),
                    (UnaryOp::Not, ScalarType::Bool) => format!("(!{a_s})"),
                    (UnaryOp::Not, _) => format!("(~{a_s})"),
                }
            }
            ExprKind::Binary(op, a, b) => {
                let (x, y) = (self.expr(a), self.expr(b));
                // An operation on constants only is a WGSL const-expression, which is
                // evaluated at shader creation, where overflow and division by zero are
                // errors; the IR defines them (wrapping, x / 0 == x, ...), as WGSL does at
                // run time. A runtime identity on the left operand keeps it a runtime
                // operation.
                let x = if is_const(b) { runtime(a, x) } else { x };
                // naga also rejects an integer division or remainder by a constant zero
                // whatever the dividend: a divisor that is not a non-zero literal goes
                // through the identity too (`x / 2u` stays as it is).
                let nonzero_literal = matches!(
                    b.kind,
                    ExprKind::Literal(l) if l.as_i128().is_some_and(|v| v != 0)
                );
                let y = if matches!(op, BinaryOp::Div | BinaryOp::Rem)
                    && a.ty.scalar.is_int()
                    && !nonzero_literal
                {
                    runtime(b, y)
                } else {
                    y
                };
                match op {
                    BinaryOp::Shl | BinaryOp::Shr => {
                        // Shift amounts are taken modulo the bit width (IR semantics).
                        format!("({x} {} ({y} & 31u))", op.symbol())
                    }
                    BinaryOp::BitXor if a.ty == ScalarType::Bool => format!("({x} != {y})"),
                    // IEEE equality with NaN tested on the bits (see dotcompute_ir's
                    // semantics): drivers may assume NaN-free floats and fold `x != x`.
                    // Vulkan lets f16 division be 2.5 ulp off (NVIDIA is 2 ulp off); in
                    // f32 and rounded to f16 it is at most one f16 unit off (rarely).
                    BinaryOp::Div if a.ty == ScalarType::F16 => {
                        format!("f16(f32({x}) / f32({y}))")
                    }
                    // f16 values widen to f32 exactly (NaN stays NaN) for the bit tests.
                    BinaryOp::Eq if a.ty == ScalarType::F16 => {
                        format!("dc_feq(f32({x}), f32({y}))")
                    }
                    BinaryOp::Ne if a.ty == ScalarType::F16 => {
                        format!("(!dc_feq(f32({x}), f32({y})))")
                    }
                    BinaryOp::Eq if a.ty.scalar.is_float() => format!("dc_feq({x}, {y})"),
                    BinaryOp::Ne if a.ty.scalar.is_float() => format!("(!dc_feq({x}, {y}))"),
                    _ => format!("({x} {} {y})", op.symbol()),
                }
            }
            ExprKind::Cast(a) => self.cast(a, e.ty.scalar),
            ExprKind::Bitcast(a) => format!("bitcast<{}>({})", self.ty(e.ty.scalar), self.expr(a)),
            ExprKind::Math(f, args) => {
                let mut a: Vec<String> = args.iter().map(|x| self.expr(x)).collect();
                // As for binary operations (`abs(MIN)` overflows in a const-expression).
                if args.iter().all(is_const) {
                    a[0] = runtime(&args[0], a[0].clone());
                }
                match f {
                    // abs(MIN) == MIN as WGSL defines, but NVIDIA's Vulkan compiler treats
                    // the builtin's result as non-negative (`0 > abs(MIN)` came out false
                    // on the H100: found by the random-kernel test); a guarded negation
                    // computes the same without the builtin.
                    MathFn::Abs if args[0].ty == ScalarType::I32 => {
                        return format!("dc_abs_i32({})", a[0])
                    }
                    // min(max(x, lo), hi): WGSL's clamp requires lo <= hi for ints.
                    MathFn::Clamp => return format!("min(max({}, {}), {})", a[0], a[1], a[2]),
                    // On the bits: WGSL has no isnan, and drivers fold `x != x`.
                    MathFn::IsNan => return format!("dc_is_nan(f32({}))", a[0]),
                    MathFn::IsFinite => return format!("dc_is_finite(f32({}))", a[0]),
                    // WGSL's round sends halves to even; the IR's (Rust's) away from zero.
                    MathFn::Round if args[0].ty == ScalarType::F16 => {
                        return format!("f16(dc_round(f32({})))", a[0])
                    }
                    MathFn::Round => return format!("dc_round({})", a[0]),
                    MathFn::Recip if args[0].ty == ScalarType::F16 => {
                        return format!("(1.0h / {})", a[0])
                    }
                    MathFn::Recip => return format!("(1.0 / {})", a[0]),
                    MathFn::Rsqrt => return format!("inverseSqrt({})", a[0]),
                    MathFn::CountOnes => return format!("u32(countOneBits({}))", a[0]),
                    MathFn::LeadingZeros => return format!("u32(countLeadingZeros({}))", a[0]),
                    MathFn::TrailingZeros => return format!("u32(countTrailingZeros({}))", a[0]),
                    MathFn::ReverseBits => return format!("reverseBits({})", a[0]),
                    // WGSL has no overloading: one helper per type (32-bit only here).
                    MathFn::SaturatingAdd => {
                        return format!("dc_sat_add_{}({}, {})", args[0].ty, a[0], a[1])
                    }
                    MathFn::SaturatingSub => {
                        return format!("dc_sat_sub_{}({}, {})", args[0].ty, a[0], a[1])
                    }
                    _ => {}
                }
                // The IR's function names are WGSL's builtin names.
                let name = f.name();
                format!("{name}({})", a.join(", "))
            }
            ExprKind::Subgroup(op, args) => {
                let a: Vec<String> = args.iter().map(|x| self.expr(x)).collect();
                match op {
                    SubgroupOp::Size => "dc_sg_size".into(),
                    SubgroupOp::Lane => "dc_sg_lane".into(),
                    // Lanes are taken modulo the (power-of-two) size, as on CUDA.
                    SubgroupOp::Shuffle => {
                        format!("subgroupShuffle({}, {} & (dc_sg_size - 1u))", a[0], a[1])
                    }
                    SubgroupOp::ShuffleXor => {
                        format!("subgroupShuffleXor({}, {} & (dc_sg_size - 1u))", a[0], a[1])
                    }
                    // WGSL leaves lanes shifted out undefined; the IR keeps the own value.
                    SubgroupOp::ShuffleUp => format!(
                        "select({x}, subgroupShuffleUp({x}, {d}), dc_sg_lane >= {d})",
                        x = a[0],
                        d = a[1]
                    ),
                    SubgroupOp::ShuffleDown => format!(
                        "select({x}, subgroupShuffleDown({x}, {d}), dc_sg_lane + {d} < dc_sg_size)",
                        x = a[0],
                        d = a[1]
                    ),
                    SubgroupOp::Add => format!("subgroupAdd({})", a[0]),
                    SubgroupOp::Min => format!("subgroupMin({})", a[0]),
                    SubgroupOp::Max => format!("subgroupMax({})", a[0]),
                    SubgroupOp::ExclusiveAdd => format!("subgroupExclusiveAdd({})", a[0]),
                    SubgroupOp::InclusiveAdd => format!("subgroupInclusiveAdd({})", a[0]),
                    SubgroupOp::Ballot => format!("subgroupBallot({}).x", a[0]),
                    SubgroupOp::Any => format!("subgroupAny({})", a[0]),
                    SubgroupOp::All => format!("subgroupAll({})", a[0]),
                }
            }
            ExprKind::Select {
                cond,
                then,
                otherwise,
            } => format!(
                "select({}, {}, {})",
                self.expr(otherwise),
                self.expr(then),
                self.expr(cond)
            ),
            ExprKind::Extract { value, lane } => {
                format!("({}).{}", self.expr(value), Type::lane_name(*lane))
            }
            // Constant lanes pass through the runtime identity, so that a vector of
            // literals is no WGSL const-expression (whose overflow is a creation error).
            ExprKind::Construct(lanes) => {
                let a: Vec<String> = lanes.iter().map(|x| runtime(x, self.expr(x))).collect();
                format!("{}({})", self.type_name(e.ty), a.join(", "))
            }
        }
    }

    fn cast(&self, a: &Expr, to: ScalarType) -> String {
        let x = self.expr(a);
        match (a.ty.scalar, to) {
            (from, to) if from == to => x,
            (ScalarType::F32, ScalarType::I32) => format!("dc_f32_to_i32({x})"),
            (ScalarType::F32, ScalarType::U32) => format!("dc_f32_to_u32({x})"),
            // f16 to an integer: widen exactly, then saturate like f32.
            (ScalarType::F16, ScalarType::I32) => format!("dc_f32_to_i32(f32({x}))"),
            (ScalarType::F16, ScalarType::U32) => format!("dc_f32_to_u32(f32({x}))"),
            (ScalarType::Bool, t) => format!("select({t}(0), {t}(1), {x})", t = self.ty(t)),
            // i32 <-> u32 reinterpret the bits (Rust `as`), int -> f32 rounds to nearest.
            (_, t) => format!("{}({x})", self.ty(t)),
        }
    }
}

/// Helpers with the IR's cast semantics (Rust's saturating `as`). NaN is detected on the
/// Whether `e` is a WGSL const-expression: built from literals only.
fn is_const(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Literal(_) => true,
        ExprKind::Unary(_, a) | ExprKind::Cast(a) | ExprKind::Bitcast(a) => is_const(a),
        ExprKind::Binary(_, a, b) => is_const(a) && is_const(b),
        ExprKind::Math(_, args) => args.iter().all(is_const),
        ExprKind::Select {
            cond,
            then,
            otherwise,
        } => is_const(cond) && is_const(then) && is_const(otherwise),
        _ => false,
    }
}

/// `text` (the WGSL of `e`) as a runtime value when `e` is constant: through the identity
/// helper of its type (f16 and bool are left alone: no f16 helper without `enable f16`,
/// and boolean operations cannot fail).
fn runtime(e: &Expr, text: String) -> String {
    if !is_const(e) {
        return text;
    }
    match e.ty.as_scalar() {
        Some(ScalarType::I32) => format!("dc_rt_i32({text})"),
        Some(ScalarType::U32) => format!("dc_rt_u32({text})"),
        Some(ScalarType::F32) => format!("dc_rt_f32({text})"),
        _ => text,
    }
}

/// Checked mode: `i < n`, and otherwise the launch's first violation recorded in
/// `dc_err` (the invocation that sets the flag writes the rest). The compare-exchange is
/// retried on a spurious failure.
const CHECKED_HELPER: &str = "fn dc_in(i: u32, n: u32, what: u32) -> bool {
    if (i < n) {
        return true;
    }
    loop {
        let r = atomicCompareExchangeWeak(&dc_err[0], 0u, 1u);
        if (r.exchanged) {
            atomicStore(&dc_err[1], what);
            atomicStore(&dc_err[2], i);
            atomicStore(&dc_err[3], n);
            break;
        }
        if (r.old_value != 0u) {
            break;
        }
    }
    return false;
}
";

/// bits: drivers may fold `x != x` to false (lavapipe does), integer tests they must keep.
const HELPERS: &str = "
// Identities that make an operation on constants a runtime one (see `runtime`).
fn dc_rt_i32(x: i32) -> i32 {
    return x;
}

fn dc_rt_u32(x: u32) -> u32 {
    return x;
}

fn dc_rt_f32(x: f32) -> f32 {
    return x;
}

fn dc_abs_i32(x: i32) -> i32 {
    if (x < 0i && x != (-2147483647i - 1i)) {
        return -x;
    }
    return x;
}

fn dc_is_nan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

fn dc_is_finite(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u;
}

fn dc_feq(x: f32, y: f32) -> bool {
    return !dc_is_nan(x) && !dc_is_nan(y) && x == y;
}

fn dc_sat_add_u32(a: u32, b: u32) -> u32 {
    let r = a + b;
    return select(r, 0xffffffffu, r < a);
}

fn dc_sat_sub_u32(a: u32, b: u32) -> u32 {
    return select(0u, a - b, a > b);
}

fn dc_sat_add_i32(a: i32, b: i32) -> i32 {
    let r = a + b;
    let overflow = ((a ^ r) & (b ^ r)) < 0i;
    return select(r, select(2147483647i, i32(-2147483648), a < 0i), overflow);
}

fn dc_sat_sub_i32(a: i32, b: i32) -> i32 {
    let r = a - b;
    let overflow = ((a ^ b) & (a ^ r)) < 0i;
    return select(r, select(2147483647i, i32(-2147483648), a < 0i), overflow);
}

fn dc_round(x: f32) -> f32 {
    let t = trunc(x);
    if (abs(x - t) >= 0.5f) { return t + sign(x); }
    return t;
}

fn dc_f32_to_i32(x: f32) -> i32 {
    if (dc_is_nan(x)) { return 0i; }
    if (x >= 2147483648.0f) { return 2147483647i; }
    if (x <= -2147483648.0f) { return i32(-2147483648); }
    return i32(x);
}

fn dc_f32_to_u32(x: f32) -> u32 {
    if (dc_is_nan(x) || x <= 0.0f) { return 0u; }
    if (x >= 4294967296.0f) { return 4294967295u; }
    return u32(x);
}
";

/// The counter's values of a constant loop the WGSL printer writes out: at most
/// [`UNROLL_TRIPS`] trips, a body (nested loops included) that neither breaks, continues
/// nor returns, and at most [`UNROLL_STATEMENTS`] statements once written out.
fn unrollable((start, end, step): (i128, i128, i128), body: &[Stmt]) -> Option<Vec<i128>> {
    let values: Vec<i128> = (start..end).step_by(step as usize).collect();
    let mut jumps = false;
    walk_stmts(body, &mut |x| {
        jumps |= matches!(x, Stmt::Break | Stmt::Continue | Stmt::Return);
    });
    let small = values.len() <= UNROLL_TRIPS
        && unrolled_size(body).saturating_mul(values.len()) <= UNROLL_STATEMENTS;
    (small && !jumps).then_some(values)
}

/// Statements `body` prints as, with the loops the printer writes out counted once per
/// trip (a loop it keeps counts its body once).
fn unrolled_size(body: &[Stmt]) -> usize {
    body.iter()
        .map(|s| match s {
            Stmt::For {
                start,
                end,
                step,
                body,
                ..
            } => {
                let trips = crate::cfamily::small_constant_range(start, end, step, ScalarType::I64)
                    .and_then(|r| unrollable(r, body))
                    .map_or(1, |v| v.len());
                1 + trips.saturating_mul(unrolled_size(body))
            }
            Stmt::If {
                then, otherwise, ..
            } => 1 + unrolled_size(then) + unrolled_size(otherwise),
            Stmt::Loop { body } => 1 + unrolled_size(body),
            _ => 1,
        })
        .fold(0, usize::saturating_add)
}

/// The most trips of a loop the WGSL printer writes out. 64: a register-blocked
/// product's 8×8 accumulators are set in one 64-trip loop, which must be written out for
/// drivers to keep them in registers.
const UNROLL_TRIPS: usize = 64;

/// The most statements a written-out loop may print as. Writing out every loop of a
/// register-blocked product (16 steps × 80 statements) made a module NVIDIA's Vulkan
/// compiler took 161 s to build; keeping the outermost loop keeps it to a few seconds
/// while the accumulators stay in registers.
const UNROLL_STATEMENTS: usize = 1024;

#[cfg(test)]
mod tests {
    use super::*;

    fn words(bytes: &[u8]) -> Vec<u32> {
        bytes
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn uniform_layouts_are_word_per_scalar_padded_to_16_bytes() {
        let s = [Literal::f32(1.5), Literal::Bool(true), Literal::I32(-2)];
        let generated = pack_uniforms([10, 1, 1], [3, 2, 1], &s, &[], &[]);
        assert_eq!(
            words(&generated),
            vec![
                10,
                1,
                1,
                3,
                2,
                1,
                6,
                1.5f32.to_bits(),
                1,
                (-2i32) as u32,
                0,
                0
            ]
        );
        assert_eq!(
            words(&pack_scalars(&s)),
            vec![1.5f32.to_bits(), 1, (-2i32) as u32, 0]
        );
        assert_eq!(words(&pack_scalars(&[Literal::U32(7)])), vec![7, 0, 0, 0]);
        assert_eq!(pack_scalars(&[]).len(), 16);
    }
}
