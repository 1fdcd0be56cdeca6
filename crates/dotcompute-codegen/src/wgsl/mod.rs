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
//!   parameters, laid out by [`uniform_slots`] (filled by `dotcompute_hal::plan`);
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
use dotcompute_ir::interface::Slot;
use dotcompute_ir::*;
use std::collections::BTreeSet;
use std::fmt::Write;

mod expr;
mod helpers;
mod module;
mod stmt;
use helpers::*;

/// Specialisation of one kernel for one pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WgslOptions {
    pub group_size: [u32; 3],
    /// Length of the dynamic shared array (ignored when the kernel has none).
    pub dynamic_shared_len: u32,
    /// Buffers are bound at offsets aligned down to the adapter's storage-offset alignment
    /// and the kernel adds each one's remaining element offset (`off_<name>` in the
    /// uniform block, after the scalars, see [`uniform_slots`]): the
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
    /// Unroll grid-stride loops over read-only buffers, four loads per trip (see
    /// `crate::unrolled`; `DOTCOMPUTE_UNROLL=0` turns it off in the backends).
    pub unroll: bool,
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
            unroll: true,
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
    /// What each 4-byte word of the uniform block holds, in order ([`uniform_slots`]);
    /// empty when the module has no uniform block.
    pub uniforms: Vec<Slot>,
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

/// The words of a generated module's uniform block, in order: grid (3), groups (3),
/// total groups, each scalar parameter (one 4-byte word; `bool` as 0/1, `f16` as `f32`),
/// then with `view_offsets` each buffer's element offset, then the length of each `f16`
/// buffer. The struct the module declares is printed from this list.
pub fn uniform_slots(kernel: &Kernel, view_offsets: bool) -> Vec<Slot> {
    let mut slots: Vec<Slot> = (0..3).map(Slot::Grid).collect();
    slots.extend((0..3).map(Slot::Groups));
    slots.push(Slot::TotalGroups);
    slots.extend(raw_uniform_slots(kernel));
    let params = || kernel.params.iter().enumerate().map(|(i, p)| (i as u32, p));
    if view_offsets {
        slots.extend(
            params()
                .filter(|(_, p)| matches!(p, Param::Buffer { .. }))
                .map(|(i, _)| Slot::ElementOffset(i)),
        );
    }
    slots.extend(
        params()
            .filter(|(_, p)| matches!(p, Param::Buffer { elem, .. } if *elem == ScalarType::F16))
            .map(|(i, _)| Slot::BufferLen(i)),
    );
    slots
}

/// The forms a generated WGSL module can take besides the plain one: the grid-stride form
/// ([`WgslOptions::strided`]) and the vector form of four 4-byte lanes
/// ([`WgslOptions::vector`]).
pub fn forms(kernel: &Kernel) -> dotcompute_ir::interface::Forms {
    dotcompute_ir::interface::Forms {
        strided: dotcompute_ir::analysis::grid_stride_eligible(kernel),
        vector: dotcompute_ir::analysis::vector_plan_32bit(kernel).map(|p| p.width),
    }
}

/// The uniform words of a hand-written kernel: each scalar parameter, one 4-byte word, in
/// order (none when it has no scalars). Generated modules put the same words after their
/// launch geometry.
pub fn raw_uniform_slots(kernel: &Kernel) -> Vec<Slot> {
    kernel
        .params
        .iter()
        .enumerate()
        .filter(|(_, p)| matches!(p, Param::Scalar { .. }))
        .map(|(i, _)| Slot::Arg(i as u32))
        .collect()
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
    let unrolled = crate::unrolled(
        kernel,
        opts.unroll && !opts.checked && !opts.strided && !opts.vector,
    );
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
        ranges: dotcompute_ir::ranges::ValueRanges::new(kernel, opts.group_size),
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
    Ok(WgslModule {
        source: g.out,
        uniform_binding: buffers.len() as u32,
        violation_binding: record.then_some(buffers.len() as u32 + 1),
        buffers,
        uniforms: uniform_slots(kernel, opts.view_offsets),
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
    /// The ranges of the kernel's `u32` values, which prove array indices in bounds.
    ranges: dotcompute_ir::ranges::ValueRanges<'k>,
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The uniform block's struct is printed from the slot list, field for field; the
    /// planner fills the words in the same order.
    #[test]
    fn the_uniform_struct_follows_the_slot_list() {
        let mut b = Builder::new("mixed");
        let x = b.buffer("x", ScalarType::F32, Access::ReadWrite);
        let _h = b.buffer("h", ScalarType::F16, Access::Read);
        let s = b.scalar("s", ScalarType::F32);
        let _flag = b.scalar("flag", ScalarType::Bool);
        let i = b.builtin(Builtin::GlobalId, Axis::X);
        let v = b.load(x, i.clone()).unwrap();
        let v = b.binary(BinaryOp::Mul, v, s).unwrap();
        b.store(x, i, v).unwrap();
        let k = b.finish().unwrap();
        for view_offsets in [false, true] {
            let slots = uniform_slots(&k, view_offsets);
            let mut expected: Vec<Slot> = vec![
                Slot::Grid(0),
                Slot::Grid(1),
                Slot::Grid(2),
                Slot::Groups(0),
                Slot::Groups(1),
                Slot::Groups(2),
                Slot::TotalGroups,
                Slot::Arg(2),
                Slot::Arg(3),
            ];
            if view_offsets {
                expected.extend([Slot::ElementOffset(0), Slot::ElementOffset(1)]);
            }
            expected.push(Slot::BufferLen(1));
            assert_eq!(slots, expected);
            let opts = WgslOptions {
                view_offsets,
                ..WgslOptions::default()
            };
            let module = generate(&k, &opts).unwrap();
            assert_eq!(module.uniforms, slots);
            let body = module.source.split("struct DcParams {\n").nth(1).unwrap();
            let fields: Vec<&str> = body
                .lines()
                .take_while(|l| *l != "}")
                .map(|l| l.trim().split(':').next().unwrap())
                .collect();
            let mut names = vec![
                "grid_x",
                "grid_y",
                "grid_z",
                "groups_x",
                "groups_y",
                "groups_z",
                "total_groups",
                "p_s",
                "p_flag",
            ];
            if view_offsets {
                names.extend(["off_x", "off_h"]);
            }
            names.push("len_h");
            assert_eq!(fields, names);
        }
        assert_eq!(raw_uniform_slots(&k), vec![Slot::Arg(2), Slot::Arg(3)]);
    }
}
