//! Unrolling of grid-stride loops that stream a read-only buffer (the CUDA and WGSL
//! generators apply it; `DOTCOMPUTE_UNROLL=0` turns it off, for comparisons).
//!
//! A user's grid-stride loop,
//!
//! ```text
//! while i < x.len() { acc += x[i]; i += stride; }
//! ```
//!
//! keeps one load in flight per thread: the next load waits for the bound check, and a
//! GPU compiler cannot hoist it (the index may wrap, so it cannot count the iterations).
//! [`unroll_strided_loads`] rewrites such a loop into
//!
//! ```text
//! let lim = if stride <= u32::MAX / 3 && x.len() >= 3 * stride { x.len() - 3 * stride } else { 0 };
//! while i < lim {                      // i + 3·stride < x.len(): four loads in bounds
//!     let t0 = x[i]; let t1 = x[i + stride]; let t2 = x[i + 2·stride]; let t3 = x[i + 3·stride];
//!     body[x[i] := t0]; i += stride;   // four copies of the body, in order
//!     ...
//! }
//! while i < x.len() { body; i += stride; } // the remaining iterations, as written
//! ```
//!
//! which issues four independent loads per trip. The results are identical: the body runs
//! the same iterations in the same order, and the hoisted loads read a buffer no thread
//! writes (a read-only parameter). Only loops of exactly this shape are rewritten: a
//! `u32` counter tested first against the length of the buffer it indexes, advanced last
//! by a loop-invariant stride, a body without `break`, `continue`, `return`, barriers,
//! subgroup operations or other assignments to the counter. Locals declared in the body
//! are renamed in each copy (every local is declared once).

use crate::kernel::{
    walk_stmts, Access, BinaryOp, Expr, ExprKind, Kernel, Local, Memory, Param, Stmt, UnaryOp,
};
use crate::types::{Literal, ScalarType, Type};

/// Loads in flight per trip of an unrolled loop.
pub const UNROLL: u32 = 4;

/// Rewrites every grid-stride loop of `kernel` that streams a read-only buffer (see the
/// module docs); `None` when none matches. The result is valid IR when `kernel` is.
pub fn unroll_strided_loads(kernel: &Kernel) -> Option<Kernel> {
    let mut k = kernel.clone();
    let mut body = std::mem::take(&mut k.body);
    let count = visit(&mut body, &mut k);
    k.body = body;
    (count > 0).then_some(k)
}

fn visit(stmts: &mut Vec<Stmt>, k: &mut Kernel) -> usize {
    let mut count = 0;
    let mut i = 0;
    while i < stmts.len() {
        match &mut stmts[i] {
            Stmt::If {
                then, otherwise, ..
            } => {
                count += visit(then, k);
                count += visit(otherwise, k);
            }
            Stmt::For { body, .. } | Stmt::Loop { body } => count += visit(body, k),
            _ => {}
        }
        match unroll(&stmts[i], k) {
            Some(replacement) => {
                let n = replacement.len();
                stmts.splice(i..i + 1, replacement);
                count += 1;
                i += n;
            }
            None => i += 1,
        }
    }
    count
}

const U32: Type = Type::scalar(ScalarType::U32);

fn u32_lit(v: u32) -> Expr {
    Expr {
        ty: U32,
        kind: ExprKind::Literal(Literal::U32(v)),
    }
}

fn bin(op: BinaryOp, a: Expr, b: Expr, ty: Type) -> Expr {
    Expr {
        ty,
        kind: ExprKind::Binary(op, Box::new(a), Box::new(b)),
    }
}

fn local(id: u32, ty: Type) -> Expr {
    Expr {
        ty,
        kind: ExprKind::Local(id),
    }
}

/// A grid-stride loop's parts.
struct Shape<'a> {
    counter: u32,
    bound: &'a Expr,
    stride: &'a Expr,
    /// The statements between the test and the step.
    middle: &'a [Stmt],
    /// `counter = counter + stride`.
    step: &'a Stmt,
    /// Every statement of the loop body.
    body: &'a [Stmt],
}

fn shape(s: &Stmt) -> Option<Shape<'_>> {
    let Stmt::Loop { body } = s else { return None };
    let (first, rest) = body.split_first()?;
    let (last, middle) = rest.split_last()?;
    let Stmt::If {
        cond,
        then,
        otherwise,
    } = first
    else {
        return None;
    };
    if !matches!(then.as_slice(), [Stmt::Break]) || !otherwise.is_empty() {
        return None;
    }
    let ExprKind::Unary(UnaryOp::Not, test) = &cond.kind else {
        return None;
    };
    let ExprKind::Binary(BinaryOp::Lt, counter, bound) = &test.kind else {
        return None;
    };
    let ExprKind::Local(i) = counter.kind else {
        return None;
    };
    let Stmt::Assign {
        local: target,
        value,
    } = last
    else {
        return None;
    };
    if *target != i {
        return None;
    }
    let stride = match &value.kind {
        ExprKind::Binary(BinaryOp::Add, a, b) if a.kind == ExprKind::Local(i) => &**b,
        ExprKind::Binary(BinaryOp::Add, a, b) if b.kind == ExprKind::Local(i) => &**a,
        _ => return None,
    };
    Some(Shape {
        counter: i,
        bound,
        stride,
        middle,
        step: last,
        body,
    })
}

/// Locals assigned anywhere in `stmts` (the loop body), or declared there.
fn assigned(stmts: &[Stmt], out: &mut Vec<u32>) {
    walk_stmts(stmts, &mut |s| match s {
        Stmt::Let { local, .. } | Stmt::Assign { local, .. } => out.push(*local),
        Stmt::Atomic {
            result: Some(r), ..
        } => out.push(*r),
        Stmt::For { var, .. } => out.push(*var),
        _ => {}
    });
}

/// Whether `e` has the same value at every trip: no load, no subgroup operation, no
/// local in `changing`.
fn invariant(e: &Expr, changing: &[u32]) -> bool {
    let mut ok = true;
    e.walk(&mut |x| match &x.kind {
        ExprKind::Load { .. } | ExprKind::Subgroup(..) => ok = false,
        ExprKind::Local(l) if changing.contains(l) => ok = false,
        _ => {}
    });
    ok
}

/// Whether the body is straight enough to copy: no exits, barriers or subgroup
/// operations at any depth.
fn copyable(stmts: &[Stmt]) -> bool {
    let mut ok = true;
    walk_stmts(stmts, &mut |s| {
        if matches!(
            s,
            Stmt::Break | Stmt::Continue | Stmt::Return | Stmt::Barrier | Stmt::Mma { .. }
        ) {
            ok = false;
        }
        for e in s.exprs() {
            e.walk(&mut |x| {
                if matches!(x.kind, ExprKind::Subgroup(..)) {
                    ok = false
                }
            });
        }
    });
    ok
}

/// A loop `unroll` takes: its shape, the read-only buffer whose loads at the counter are
/// hoisted, and their type.
struct Unrollable<'a> {
    shape: Shape<'a>,
    buffer: u32,
    elem: Type,
}

impl Unrollable<'_> {
    /// Whether `e` is a load `unroll` hoists: the buffer at the counter.
    fn hoisted(&self, e: &Expr) -> bool {
        loads_at_counter(e, self.buffer, self.shape.counter)
    }
}

/// Whether `e` loads `buffer` at local `counter`.
fn loads_at_counter(e: &Expr, buffer: u32, counter: u32) -> bool {
    matches!(&e.kind, ExprKind::Load { mem: Memory::Buffer(m), index }
        if *m == buffer && index.kind == ExprKind::Local(counter))
}

/// `s` as `unroll` needs it: a `u32` counter bounded by a read-only buffer's length, an
/// invariant stride, a middle that copies and leaves the counter alone, and a load of the
/// buffer at the counter in it.
fn unrollable<'a>(s: &'a Stmt, k: &Kernel) -> Option<Unrollable<'a>> {
    let shape = shape(s)?;
    let i = shape.counter;
    if k.locals.get(i as usize)?.ty != U32 {
        return None;
    }
    // The bound is a read-only buffer's length: the buffer whose loads are hoisted.
    let ExprKind::Len(Memory::Buffer(b)) = shape.bound.kind else {
        return None;
    };
    if !matches!(
        k.params.get(b as usize),
        Some(Param::Buffer {
            access: Access::Read,
            ..
        })
    ) {
        return None;
    }
    let mut changing = Vec::new();
    assigned(shape.body, &mut changing);
    if !invariant(shape.stride, &changing) || !copyable(shape.middle) {
        return None;
    }
    let mut counter_assigned = Vec::new();
    assigned(shape.middle, &mut counter_assigned);
    if counter_assigned.contains(&i) {
        return None;
    }
    // The type of the hoisted loads (none: nothing to hoist).
    let mut found = None;
    walk_stmts(shape.middle, &mut |st| {
        for e in st.exprs() {
            e.walk(&mut |e| {
                if loads_at_counter(e, b, i) {
                    found = Some(e.ty);
                }
            });
        }
    });
    Some(Unrollable {
        shape,
        buffer: b,
        elem: found?,
    })
}

fn unroll(s: &Stmt, k: &mut Kernel) -> Option<Vec<Stmt>> {
    let u = unrollable(s, k)?;
    let (i, bound, stride) = (u.shape.counter, u.shape.bound, u.shape.stride);
    let name = k.locals[i as usize].name.clone();
    let lim = push_local(k, format!("{name}_unroll_lim"), U32, false);
    let three = bin(BinaryOp::Mul, stride.clone(), u32_lit(UNROLL - 1), U32);
    let b_ty = Type::scalar(ScalarType::Bool);
    let fits = bin(
        BinaryOp::LogicalAnd,
        bin(
            BinaryOp::Le,
            stride.clone(),
            u32_lit(u32::MAX / (UNROLL - 1)),
            b_ty,
        ),
        bin(BinaryOp::Ge, bound.clone(), three.clone(), b_ty),
        b_ty,
    );
    let limit = Stmt::Let {
        local: lim,
        init: Some(Expr {
            ty: U32,
            kind: ExprKind::Select {
                cond: Box::new(fits),
                then: Box::new(bin(BinaryOp::Sub, bound.clone(), three, U32)),
                otherwise: Box::new(u32_lit(0)),
            },
        }),
    };
    let unrolled = unrolled_body(&u, lim, &name, k);
    Some(vec![limit, Stmt::Loop { body: unrolled }, s.clone()])
}

/// The unrolled loop's body: leave below `lim`, load the `UNROLL` elements, then the
/// middle and the step `UNROLL` times, each copy reading its loaded element.
fn unrolled_body(u: &Unrollable, lim: u32, name: &str, k: &mut Kernel) -> Vec<Stmt> {
    let (i, stride, b, elem) = (u.shape.counter, u.shape.stride, u.buffer, u.elem);
    let b_ty = Type::scalar(ScalarType::Bool);
    let mut unrolled = vec![Stmt::If {
        cond: Expr {
            ty: b_ty,
            kind: ExprKind::Unary(
                UnaryOp::Not,
                Box::new(bin(BinaryOp::Lt, local(i, U32), local(lim, U32), b_ty)),
            ),
        },
        then: vec![Stmt::Break],
        otherwise: Vec::new(),
    }];
    let mut temps = Vec::new();
    for j in 0..UNROLL {
        let t = push_local(k, format!("{name}_load{j}"), elem, false);
        let index = match j {
            0 => local(i, U32),
            _ => bin(
                BinaryOp::Add,
                local(i, U32),
                bin(BinaryOp::Mul, stride.clone(), u32_lit(j), U32),
                U32,
            ),
        };
        unrolled.push(Stmt::Let {
            local: t,
            init: Some(Expr {
                ty: elem,
                kind: ExprKind::Load {
                    mem: Memory::Buffer(b),
                    index: Box::new(index),
                },
            }),
        });
        temps.push(t);
    }
    for &t in &temps {
        let mut copy = u.shape.middle.to_vec();
        rename_declared(&mut copy, k);
        crate::kernel::rewrite_exprs(&mut copy, &mut |e| {
            if u.hoisted(e) {
                *e = local(t, elem);
            }
        });
        unrolled.extend(copy);
        unrolled.push(u.shape.step.clone());
    }
    unrolled
}

fn push_local(k: &mut Kernel, name: String, ty: Type, mutable: bool) -> u32 {
    k.locals.push(Local { name, ty, mutable });
    (k.locals.len() - 1) as u32
}

/// Gives every local declared in `stmts` a new id (a copy of the declaration), and
/// rewrites its uses in `stmts`.
fn rename_declared(stmts: &mut [Stmt], k: &mut Kernel) {
    let mut declared = Vec::new();
    declared_in(stmts, &mut declared);
    if declared.is_empty() {
        return;
    }
    let map: Vec<(u32, u32)> = declared
        .into_iter()
        .map(|old| {
            let l = k.locals[old as usize].clone();
            (old, push_local(k, l.name, l.ty, l.mutable))
        })
        .collect();
    let new = |id: u32| map.iter().find(|(o, _)| *o == id).map_or(id, |(_, n)| *n);
    crate::kernel::walk_stmts_mut(stmts, &mut |s| match s {
        Stmt::Let { local, .. } | Stmt::Assign { local, .. } => *local = new(*local),
        Stmt::Atomic {
            result: Some(r), ..
        } => *r = new(*r),
        Stmt::For { var, .. } => *var = new(*var),
        _ => {}
    });
    crate::kernel::rewrite_exprs(stmts, &mut |e| {
        if let ExprKind::Local(id) = &mut e.kind {
            *id = new(*id);
        }
    });
}

fn declared_in(stmts: &[Stmt], out: &mut Vec<u32>) {
    walk_stmts(stmts, &mut |s| match s {
        Stmt::Let { local, .. } => out.push(*local),
        Stmt::For { var, .. } => out.push(*var),
        _ => {}
    });
}
