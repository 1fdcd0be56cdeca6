//! Constant propagation over a built kernel: a local that holds one literal for the whole
//! kernel (its `let` initialiser, never assigned) becomes that literal where it is used.
//!
//! Host constants reach kernels through locals: a kernel function's parameters are locals
//! bound to its arguments (`fixed_or(ITEMS, items)` in `dotcompute-ops`), and a generic
//! kernel keeps its tile sizes in `let`s. Until they are literals, a loop bounded by one
//! has no constant trip count in the IR, so the WGSL printer cannot write it out (NVRTC
//! folds such locals itself; NVIDIA's Vulkan compiler gets a loop with naga's iteration
//! counter). The pass repeats until nothing changes: substitute, fold integer arithmetic
//! (the builder's own rule, `fold_u32`) and comparisons and logic on literals
//! (`fold_condition`), keep the taken arm of an `if` on a constant (which can leave more
//! locals unassigned). It is the one place conditions on constants are folded.

use super::{fold_condition, fold_u32};
use crate::kernel::*;
use crate::types::Literal;
use std::collections::{HashMap, HashSet};

/// Propagates constant locals through `kernel`'s body until nothing changes.
pub(crate) fn propagate_constants(kernel: &mut Kernel) {
    // Each round removes at least one local from the set of candidates or one `if`, so
    // the number of rounds is bounded; the cap only guards against a defect here.
    for _ in 0..64 {
        let constants = constant_locals(&kernel.body);
        let mut changed = false;
        rewrite_exprs(&mut kernel.body, &mut |e| {
            changed |= substitute_and_fold(e, &constants);
        });
        changed |= keep_taken_arms(&mut kernel.body);
        if !changed {
            return;
        }
    }
}

/// Locals every write of which stores one and the same literal: a `let` of a literal never
/// assigned, or a `let` without a value assigned that literal only (the builder's slot for
/// `if ... { A } else { B }` as a value, once the `if` kept one arm). A kernel's Rust body
/// cannot read a local before its first write (rustc checks it, and the CPU backend
/// compiles the same body), so every read sees that literal.
fn constant_locals(body: &[Stmt]) -> HashMap<u32, Literal> {
    let mut literal: HashMap<u32, Literal> = HashMap::new();
    let mut varying = HashSet::new();
    let mut write = |local: u32, value: Option<&Expr>| match value.map(|e| &e.kind) {
        Some(ExprKind::Literal(l)) => {
            if *literal.entry(local).or_insert(*l) != *l {
                varying.insert(local);
            }
        }
        _ => {
            varying.insert(local);
        }
    };
    walk_stmts(body, &mut |s| match s {
        Stmt::Let { init: None, .. } => {}
        Stmt::Let {
            local,
            init: Some(value),
        }
        | Stmt::Assign { local, value } => write(*local, Some(value)),
        Stmt::Atomic {
            result: Some(local),
            ..
        }
        | Stmt::For { var: local, .. } => write(*local, None),
        _ => {}
    });
    literal.retain(|local, _| !varying.contains(local));
    literal
}

/// Replaces a constant local by its literal, or folds an operation on literals; whether
/// `e` changed.
fn substitute_and_fold(e: &mut Expr, constants: &HashMap<u32, Literal>) -> bool {
    let folded = match &e.kind {
        ExprKind::Local(id) => constants.get(id).copied(),
        ExprKind::Binary(op, a, b) => fold_u32(*op, a, b)
            .map(Literal::U32)
            .or_else(|| fold_condition(*op, a, b).map(Literal::Bool)),
        ExprKind::Unary(UnaryOp::Not, a) => match a.kind {
            ExprKind::Literal(Literal::Bool(b)) => Some(Literal::Bool(!b)),
            _ => None,
        },
        _ => None,
    };
    match folded {
        // A local's literal has the local's type (the builder coerced the initialiser).
        Some(l) if l.ty() == e.ty.scalar && !e.ty.is_vector() => {
            e.kind = ExprKind::Literal(l);
            true
        }
        _ => false,
    }
}

/// Replaces each `if` on a boolean literal by the statements of the arm it takes, so
/// every backend sees straight-line code (`if FUSED == 1` in a generic kernel: NVIDIA's
/// Vulkan compiler does not fold such a branch cheaply when it stands in a loop body
/// written out many times); whether anything changed. The arm's statements join the
/// enclosing block (locals are numbered per kernel, so no name can clash); an arm that
/// leaves its block early stays behind its (constant) condition, where it cannot make
/// the statements after it unreachable text.
fn keep_taken_arms(block: &mut Vec<Stmt>) -> bool {
    let mut changed = false;
    let mut out = Vec::with_capacity(block.len());
    for mut s in block.drain(..) {
        match &mut s {
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                changed |= keep_taken_arms(then);
                changed |= keep_taken_arms(otherwise);
                if let ExprKind::Literal(Literal::Bool(taken)) = cond.kind {
                    let arm = std::mem::take(if taken { then } else { otherwise });
                    let jumps = arm
                        .iter()
                        .any(|s| matches!(s, Stmt::Return | Stmt::Break | Stmt::Continue));
                    if !jumps {
                        out.extend(arm);
                        changed = true;
                        continue;
                    }
                    if !taken || !otherwise.is_empty() {
                        *then = arm;
                        otherwise.clear();
                        *cond = Expr {
                            ty: cond.ty,
                            kind: ExprKind::Literal(Literal::Bool(true)),
                        };
                        changed = true;
                    } else {
                        *then = arm;
                    }
                }
            }
            Stmt::For { body, .. } | Stmt::Loop { body } => changed |= keep_taken_arms(body),
            _ => {}
        }
        out.push(s);
    }
    *block = out;
    changed
}
