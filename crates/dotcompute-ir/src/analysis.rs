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

/// Whether any statement is a tensor-core multiply-accumulate (a device capability, and
/// whole-group launches).
pub fn uses_tensor_cores(k: &Kernel) -> bool {
    let mut found = false;
    walk_stmts(&k.body, &mut |s| found |= matches!(s, Stmt::Mma { .. }));
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
        ok &= !matches!(s, Stmt::Barrier | Stmt::Mma { .. });
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

/// Whether a barrier must also order global memory: some buffer is both read and written
/// (stored or updated atomically) by the kernel, so one thread may read what another of
/// its group wrote before the barrier; or some buffer write can precede a barrier in
/// execution order (two threads' writes of one element would then be ordered by it).
/// Otherwise the threads of a group communicate only through shared memory, and a
/// workgroup-memory barrier is all the IR's `Barrier` needs (WGSL's `storageBarrier` is
/// a device-scope fence on NVIDIA Vulkan).
pub fn barrier_orders_buffers(k: &Kernel) -> bool {
    read_and_written(k) || write_then_barrier(&k.body, &mut false)
}

/// Whether a buffer write can be followed by a barrier in execution order; `wrote` says
/// whether one may have happened before `stmts` (and is updated).
fn write_then_barrier(stmts: &[Stmt], wrote: &mut bool) -> bool {
    for s in stmts {
        match s {
            Stmt::Barrier if *wrote => return true,
            Stmt::Store {
                mem: Memory::Buffer(_),
                ..
            }
            | Stmt::Atomic {
                mem: Memory::Buffer(_),
                ..
            } => *wrote = true,
            Stmt::If {
                then, otherwise, ..
            } => {
                let (mut a, mut b) = (*wrote, *wrote);
                if write_then_barrier(then, &mut a) || write_then_barrier(otherwise, &mut b) {
                    return true;
                }
                *wrote = a || b;
            }
            // A write in one iteration precedes the barriers of the next: two passes.
            Stmt::For { body, .. } | Stmt::Loop { body } => {
                let mut w = *wrote;
                if write_then_barrier(body, &mut w) || (w && write_then_barrier(body, &mut w)) {
                    return true;
                }
                *wrote = w;
            }
            _ => {}
        }
    }
    false
}

/// Whether some buffer is both loaded and written by the kernel.
fn read_and_written(k: &Kernel) -> bool {
    let (mut loaded, mut written) = (BTreeSet::new(), BTreeSet::new());
    walk_stmts(&k.body, &mut |s| {
        match s {
            Stmt::Store {
                mem: Memory::Buffer(b),
                ..
            }
            | Stmt::Atomic {
                mem: Memory::Buffer(b),
                ..
            } => {
                written.insert(*b);
            }
            _ => {}
        }
        for e in s.exprs() {
            e.walk(&mut |e| {
                if let ExprKind::Load {
                    mem: Memory::Buffer(b),
                    ..
                } = e.kind
                {
                    loaded.insert(b);
                }
            });
        }
    });
    loaded.intersection(&written).next().is_some()
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

/// [`vector_plan`] where every buffer the kernel touches holds 4-byte scalars (`f32`,
/// `i32`, `u32`): four logical threads per 16-byte vector of each, the form WGSL can
/// bind (`array<vec4<T>>`).
pub fn vector_plan_32bit(k: &Kernel) -> Option<VectorPlan> {
    let plan = vector_plan(k)?;
    let all_32bit = plan.touched().iter().all(|&b| {
        matches!(
            k.memory_elem(Memory::Buffer(b)),
            Some(t) if !t.is_vector()
                && matches!(t.scalar, crate::ScalarType::F32 | crate::ScalarType::I32 | crate::ScalarType::U32)
        )
    });
    (all_32bit && plan.width == 4).then_some(plan)
}

fn is_global_x(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Builtin(Builtin::GlobalId, Axis::X))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Access, Builder, ScalarType, V};

    /// `out[g] = 1` placed `before` or after a barrier (in a loop when `looped`).
    fn kernel(before: bool, looped: bool, read_out: bool) -> Kernel {
        let mut b = Builder::new("k");
        let out = b.buffer("out", ScalarType::F32, Access::ReadWrite);
        let g = b.builtin(Builtin::GlobalId, Axis::X);
        if looped {
            b.begin_for("i", V::host(0u32), V::host(4u32), None)
                .unwrap();
        }
        let value = if read_out {
            b.load(out, g.clone()).unwrap()
        } else {
            V::host(1.0f32)
        };
        if before {
            b.store(out, g.clone(), value).unwrap();
            b.barrier();
        } else {
            b.barrier();
            b.store(out, g.clone(), value).unwrap();
        }
        if looped {
            b.end_for().unwrap();
        }
        b.finish().unwrap()
    }

    #[test]
    fn barriers_order_buffers_only_when_threads_can_observe_it() {
        // A write after the last barrier, read nowhere: shared memory is all a barrier
        // orders (transpose, matmul, reductions end this way).
        assert!(!barrier_orders_buffers(&kernel(false, false, false)));
        // A write before a barrier, a write before the next iteration's barrier, and a
        // buffer read and written all need the storage fence.
        assert!(barrier_orders_buffers(&kernel(true, false, false)));
        assert!(barrier_orders_buffers(&kernel(false, true, false)));
        assert!(barrier_orders_buffers(&kernel(false, false, true)));
    }
}
