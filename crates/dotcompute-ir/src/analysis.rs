//! Analyses of kernels that more than one code generator (or backend) needs: whether a
//! kernel uses barriers or subgroups and so runs whole groups, which memories atomics
//! touch, whether the grid-stride and vector forms apply. They live here, next to the IR,
//! rather than inside one generator.

use crate::kernel::*;
use std::collections::BTreeSet;

/// Whether any statement is a `Barrier`. Backends use it to pick an execution strategy,
/// and the launch rules depend on it (see the crate docs).
pub fn uses_barrier(k: &Kernel) -> bool {
    let mut found = false;
    walk_stmts(&k.body, &mut |s| found |= matches!(s, Stmt::Barrier));
    found
}

/// Whether any expression is a subgroup operation (a device capability, and whole-group
/// launches).
pub fn uses_subgroups(k: &Kernel) -> bool {
    let mut found = false;
    walk_stmts(&k.body, &mut |s| {
        for e in s.exprs() {
            e.walk(&mut |e| found |= matches!(e.kind, ExprKind::Subgroup(..)));
        }
    });
    found
}

/// Whether the kernel uses `f16` anywhere: a parameter, a shared, local or private array,
/// a local, or any expression (a device capability).
pub fn uses_f16(k: &Kernel) -> bool {
    let f16 = crate::ScalarType::F16;
    let declared = k.params.iter().any(|p| match p {
        Param::Buffer { elem, .. } => *elem == f16,
        Param::Scalar { ty, .. } => *ty == f16,
    }) || k.shared.iter().any(|s| s.elem == f16)
        || k.locals.iter().any(|l| l.ty == f16)
        || k.local_arrays.iter().any(|a| a.elem == f16);
    let mut found = declared;
    walk_stmts(&k.body, &mut |s| {
        for e in s.exprs() {
            e.walk(&mut |e| found |= e.ty == f16);
        }
    });
    found
}

/// The memories (buffers and shared arrays) that any atomic statement in `stmts` touches:
/// generators give them atomic or volatile access everywhere.
pub fn atomic_memories(stmts: &[Stmt]) -> BTreeSet<Memory> {
    let mut set = BTreeSet::new();
    walk_stmts(stmts, &mut |s| {
        if let Stmt::Atomic { mem, .. } = s {
            set.insert(*mem);
        }
    });
    set
}

/// Whether a kernel may run in grid-stride form: it reads no launch coordinate but its
/// global id, and has no barrier and no shared memory, so which CUDA thread runs a
/// logical thread cannot be observed.
pub fn grid_stride_eligible(k: &Kernel) -> bool {
    let mut ok = k.shared.is_empty();
    walk_stmts(&k.body, &mut |s| {
        ok &= !matches!(s, Stmt::Barrier);
        for e in s.exprs() {
            e.walk(&mut |e| match e.kind {
                ExprKind::Builtin(b, _) => ok &= b == Builtin::GlobalId,
                // A subgroup is made of particular threads: the mapping is observable.
                ExprKind::Subgroup(..) => ok = false,
                _ => {}
            });
        }
    });
    ok
}

/// How the vector form of a kernel reaches its buffers (see [`vector_plan`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VectorPlan {
    /// Logical threads per CUDA thread iteration: 16 bytes of the narrowest element.
    pub width: u32,
    /// Buffer parameters (indices into `Kernel::params`) the kernel loads from.
    pub loaded: BTreeSet<u32>,
    /// Buffer parameters the kernel stores to.
    pub stored: BTreeSet<u32>,
}

impl VectorPlan {
    /// Buffers loaded or stored.
    pub fn touched(&self) -> BTreeSet<u32> {
        self.loaded.union(&self.stored).copied().collect()
    }
}

/// Whether a kernel is elementwise, and then how its vector form reads and writes.
///
/// Elementwise means: grid-stride eligible (see [`grid_stride_eligible`]), no atomics, and
/// every buffer access indexed by the thread's own `global_id().x`, directly or through an
/// immutable local initialised with it. Then logical thread `x` touches element `x` of
/// each buffer and nothing else, so `W` consecutive logical threads can run in one CUDA
/// thread on 16-byte loads and stores, each keeping its elements in registers: results
/// are those of the scalar form (threads share no elements, so their order is free).
/// Buffers of `bool` (1 byte) are left to the scalar form, and so are kernels that use
/// vector types.
pub fn vector_plan(k: &Kernel) -> Option<VectorPlan> {
    // A kernel written with vector types already chose its access width.
    if !grid_stride_eligible(k) || k.uses_vectors() {
        return None;
    }
    // Locals that always hold the global x id: immutable, and their one `let` reads it.
    let mut lets = vec![0u32; k.locals.len()];
    let mut id_inits = BTreeSet::new();
    let mut atomics = false;
    walk_stmts(&k.body, &mut |s| match s {
        Stmt::Let { local, init } => {
            lets[*local as usize] += 1;
            if init.as_ref().is_some_and(is_global_x) {
                id_inits.insert(*local);
            }
        }
        Stmt::Atomic { .. } => atomics = true,
        _ => {}
    });
    if atomics {
        return None;
    }
    let id_locals: BTreeSet<u32> = id_inits
        .into_iter()
        .filter(|&l| lets[l as usize] == 1 && !k.locals[l as usize].mutable)
        .collect();
    let is_id = |e: &Expr| match e.kind {
        ExprKind::Local(l) => id_locals.contains(&l),
        _ => is_global_x(e),
    };
    let mut plan = VectorPlan {
        width: 0,
        loaded: BTreeSet::new(),
        stored: BTreeSet::new(),
    };
    let mut elementwise = true;
    walk_stmts(&k.body, &mut |s| {
        if let Stmt::Store { mem, index, .. } = s {
            match mem {
                Memory::Buffer(b) if is_id(index) => {
                    plan.stored.insert(*b);
                }
                _ => elementwise = false,
            }
        }
        for e in s.exprs() {
            e.walk(&mut |e| {
                if let ExprKind::Load { mem, index } = &e.kind {
                    match mem {
                        Memory::Buffer(b) if is_id(index) => {
                            plan.loaded.insert(*b);
                        }
                        _ => elementwise = false,
                    }
                }
            });
        }
    });
    let sizes: BTreeSet<usize> = plan
        .touched()
        .iter()
        .filter_map(|&b| k.memory_elem(Memory::Buffer(b)))
        .map(|t| t.size_bytes())
        .collect();
    let narrowest = *sizes.first()?;
    if !elementwise || narrowest < 4 {
        return None;
    }
    plan.width = (16 / narrowest) as u32;
    Some(plan)
}

fn is_global_x(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Builtin(Builtin::GlobalId, Axis::X))
}
