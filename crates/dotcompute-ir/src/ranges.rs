//! Value ranges of `u32` expressions, for proving array indices in bounds.
//!
//! Code generators for targets that must stay memory-safe whatever a kernel computes
//! (WGSL through SPIR-V on Vulkan: out-of-range shared or private array accesses there
//! are undefined) clamp every index they cannot prove below the array's length. Most
//! indices of library kernels are sums and products of the local id, loop counters and
//! constants, whose ranges follow from the group size and the loop bounds; this module
//! computes those ranges so that only the rest pay for a clamp (a matrix product's 16
//! shared reads per 64 multiply-adds each took one).
//!
//! The contract: [`ValueRanges::of`] returns an interval that contains every value the
//! expression can take in any execution of the kernel with the given group size, or the
//! whole `u32` range. It is flow-insensitive: a local's range is the union of the ranges
//! of everything ever stored into it (its initial value, each assignment, the atomic
//! results written to it, its loop's counter values); a local that grows from itself
//! (`k0 = k0 + 16`) is unbounded, one that only shrinks itself (`s = s / 2`) keeps the
//! bound of its start. The IR's total semantics are followed exactly
//! (wrapping arithmetic, `x / 0 == x`, `x % 0 == 0`, shift amounts modulo 32): an
//! operation whose result may wrap is unbounded.

use crate::kernel::*;
use crate::ops::{BinaryOp, Builtin, MathFn};
use crate::types::{Literal, ScalarType};
use std::cell::RefCell;
use std::collections::HashMap;

/// An inclusive interval of `u32` values (`lo <= hi`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub lo: u32,
    pub hi: u32,
}

impl Range {
    /// Every `u32`.
    pub const FULL: Range = Range {
        lo: 0,
        hi: u32::MAX,
    };

    pub fn exactly(v: u32) -> Range {
        Range { lo: v, hi: v }
    }

    /// The interval `[lo, hi]` of two 64-bit bounds, or `FULL` when `hi` leaves `u32`.
    fn checked(lo: u64, hi: u64) -> Range {
        match u32::try_from(hi) {
            Ok(hi) => Range { lo: lo as u32, hi },
            Err(_) => Range::FULL,
        }
    }

    pub fn union(self, o: Range) -> Range {
        Range {
            lo: self.lo.min(o.lo),
            hi: self.hi.max(o.hi),
        }
    }
}

/// Where a local's values come from.
enum Source<'k> {
    /// An expression evaluated into it (its `let` initialiser or an assignment).
    Value(&'k Expr),
    /// The counter of `for var in start..end`: from `start` up to below `end`.
    Counter { start: &'k Expr, end: &'k Expr },
    /// Anything: an atomic's previous value. (A declaration without initialiser is a
    /// `Value` of zero.)
    Unknown,
}

/// The ranges of one kernel's `u32` expressions for one group size (see the module
/// docs). Local ranges are computed on first use and kept.
pub struct ValueRanges<'k> {
    group_size: [u32; 3],
    k: &'k Kernel,
    sources: HashMap<u32, Vec<Source<'k>>>,
    /// Finished local ranges.
    locals: RefCell<HashMap<u32, Range>>,
    /// The locals whose ranges are being computed, innermost last, each with its
    /// current approximation (`None`: no value yet).
    in_progress: RefCell<Vec<(u32, Option<Range>)>>,
}

/// The value of a local declared without initialiser (the zero of its type; only `u32`
/// locals are ever asked for).
static ZERO: Expr = Expr {
    ty: crate::types::Type::scalar(ScalarType::U32),
    kind: ExprKind::Literal(Literal::U32(0)),
};

/// Rounds of a self-dependent local's iteration before it is taken as unbounded.
const ROUNDS: usize = 8;

impl<'k> ValueRanges<'k> {
    pub fn new(k: &'k Kernel, group_size: [u32; 3]) -> ValueRanges<'k> {
        let mut sources: HashMap<u32, Vec<Source<'k>>> = HashMap::new();
        collect(&k.body, &mut sources);
        ValueRanges {
            group_size,
            k,
            sources,
            locals: RefCell::new(HashMap::new()),
            in_progress: RefCell::new(Vec::new()),
        }
    }

    /// Whether `index` is provably below the length of `mem` (a shared array of static
    /// length `len` or a local array); `dynamic_len` is the length of the dynamic shared
    /// array in this specialisation. Buffers are never proven (their length is the
    /// launch's).
    pub fn index_in_bounds(&self, mem: Memory, index: &Expr, dynamic_len: u32) -> bool {
        let len = match mem {
            Memory::Buffer(_) => return false,
            Memory::Shared(i) => match self.k.shared.get(i as usize).map(|s| s.len) {
                Some(SharedLen::Static(n)) => n,
                Some(SharedLen::Dynamic) => dynamic_len,
                None => return false,
            },
            Memory::Local(i) => match self.k.local_arrays.get(i as usize) {
                Some(a) => a.len,
                None => return false,
            },
        };
        self.of(index).hi < len
    }

    /// The range of a `u32` expression; `FULL` for any other type.
    pub fn of(&self, e: &Expr) -> Range {
        self.eval(e).unwrap_or(Range::FULL)
    }

    /// The range of `e`, or `None` where it has no value yet (it reads a local in the
    /// first round of its own iteration).
    fn eval(&self, e: &Expr) -> Option<Range> {
        if e.ty != ScalarType::U32 {
            return Some(Range::FULL);
        }
        Some(match &e.kind {
            ExprKind::Literal(Literal::U32(v)) => Range::exactly(*v),
            ExprKind::Local(id) => return self.local(*id),
            ExprKind::Builtin(Builtin::LocalId, axis) => Range {
                lo: 0,
                hi: self.group_size[axis.index()].saturating_sub(1),
            },
            ExprKind::Builtin(Builtin::GroupSize, axis) => {
                Range::exactly(self.group_size[axis.index()])
            }
            ExprKind::Len(Memory::Shared(i)) => match self.k.shared.get(*i as usize) {
                Some(SharedArray {
                    len: SharedLen::Static(n),
                    ..
                }) => Range::exactly(*n),
                _ => Range::FULL,
            },
            ExprKind::Binary(op, a, b) => self.binary(*op, self.eval(a)?, self.eval(b)?),
            ExprKind::Cast(a) if a.ty == ScalarType::U32 => return self.eval(a),
            ExprKind::Cast(a) if a.ty == ScalarType::Bool => Range { lo: 0, hi: 1 },
            ExprKind::Select {
                then, otherwise, ..
            } => {
                return match (self.eval(then), self.eval(otherwise)) {
                    (Some(a), Some(b)) => Some(a.union(b)),
                    (a, b) => a.or(b),
                };
            }
            ExprKind::Math(f, args) => {
                let ranges = args
                    .iter()
                    .map(|a| self.eval(a))
                    .collect::<Option<Vec<_>>>()?;
                self.math(*f, &ranges, args)
            }
            _ => Range::FULL,
        })
    }

    /// A local's range: the union of its sources' ranges. A local that reads itself
    /// (`s = s / 2`) is iterated from no value up, with its current approximation
    /// standing for itself (a falling lower bound widened to 0), until a round changes
    /// nothing (then every value stored into
    /// it lies in the range: an invariant) or for [`ROUNDS`] rounds, after which it is
    /// unbounded. A local read while another one's range is being computed from it is
    /// unbounded there, so that no finished range depends on an approximation.
    fn local(&self, id: u32) -> Option<Range> {
        if let Some(known) = self.locals.borrow().get(&id) {
            return Some(*known);
        }
        {
            let stack = self.in_progress.borrow();
            if let Some(at) = stack.iter().position(|(l, _)| *l == id) {
                return if at + 1 == stack.len() {
                    stack[at].1
                } else {
                    Some(Range::FULL)
                };
            }
        }
        self.in_progress.borrow_mut().push((id, None));
        let mut current: Option<Range> = None;
        let mut stable = false;
        for _ in 0..ROUNDS {
            let mut next = self.sources_range(id);
            // Widening: a falling lower bound drops to 0 at once (a halving local would
            // otherwise take a round per bit).
            if let (Some(n), Some(c)) = (&mut next, current) {
                if n.lo < c.lo {
                    n.lo = 0;
                }
            }
            if next == current {
                stable = true;
                break;
            }
            current = next;
            if let Some(top) = self.in_progress.borrow_mut().last_mut() {
                top.1 = current;
            }
        }
        self.in_progress.borrow_mut().pop();
        let range = match current {
            Some(r) if stable => r,
            _ => Range::FULL,
        };
        self.locals.borrow_mut().insert(id, range);
        Some(range)
    }

    /// The union of the ranges of what is stored into local `id`, with the current
    /// approximation of `id` standing for itself.
    fn sources_range(&self, id: u32) -> Option<Range> {
        let mut range: Option<Range> = None;
        for source in self.sources.get(&id).map_or(&[][..], |s| s) {
            let r = match source {
                Source::Value(e) => self.eval(e),
                Source::Counter { start, end } => match (self.eval(start), self.eval(end)) {
                    // Inside the loop the counter is at least `start` and below `end`.
                    (Some(start), Some(end)) => Some(Range {
                        lo: start.lo,
                        hi: end.hi.saturating_sub(1).max(start.lo),
                    }),
                    _ => None,
                },
                Source::Unknown => Some(Range::FULL),
            };
            range = match (range, r) {
                (Some(a), Some(b)) => Some(a.union(b)),
                (a, b) => a.or(b),
            };
        }
        // A local with no store at all is never read (the IR declares each with `Let`).
        range.or(Some(Range::FULL))
    }

    fn binary(&self, op: BinaryOp, a: Range, b: Range) -> Range {
        let (alo, ahi, blo, bhi) = (a.lo as u64, a.hi as u64, b.lo as u64, b.hi as u64);
        match op {
            BinaryOp::Add => Range::checked(alo + blo, ahi + bhi),
            BinaryOp::Mul => Range::checked(alo * blo, ahi * bhi),
            BinaryOp::Sub if alo >= bhi => Range::checked(alo - bhi, ahi - blo),
            // `x / 0 == x`: a zero divisor leaves the dividend.
            BinaryOp::Div => Range {
                lo: a.lo / b.hi.max(1),
                hi: a.hi / b.lo.max(1),
            },
            // `x % 0 == 0`; otherwise below both the divisor and the dividend + 1.
            BinaryOp::Rem => Range {
                lo: 0,
                hi: a.hi.min(b.hi.max(1) - 1),
            },
            BinaryOp::BitAnd => Range {
                lo: 0,
                hi: a.hi.min(b.hi),
            },
            BinaryOp::BitOr | BinaryOp::BitXor => Range {
                lo: 0,
                hi: all_ones_to(a.hi.max(b.hi)),
            },
            // The amount is taken modulo 32; a known amount gives a known shift.
            BinaryOp::Shr if b.lo == b.hi => Range {
                lo: a.lo >> (b.lo % 32),
                hi: a.hi >> (b.lo % 32),
            },
            BinaryOp::Shr => Range { lo: 0, hi: a.hi },
            BinaryOp::Shl if b.lo == b.hi => {
                let s = b.lo % 32;
                Range::checked(alo << s, ahi << s)
            }
            _ => Range::FULL,
        }
    }

    fn math(&self, f: MathFn, ranges: &[Range], args: &[Expr]) -> Range {
        let r = |i: usize| ranges.get(i).copied().unwrap_or(Range::FULL);
        match f {
            MathFn::Min => Range {
                lo: r(0).lo.min(r(1).lo),
                hi: r(0).hi.min(r(1).hi),
            },
            MathFn::Max => Range {
                lo: r(0).lo.max(r(1).lo),
                hi: r(0).hi.max(r(1).hi),
            },
            // `min(max(x, lo), hi)`.
            MathFn::Clamp => {
                let (x, lo, hi) = (r(0), r(1), r(2));
                let m = Range {
                    lo: x.lo.max(lo.lo),
                    hi: x.hi.max(lo.hi),
                };
                Range {
                    lo: m.lo.min(hi.lo),
                    hi: m.hi.min(hi.hi),
                }
            }
            // Bit counts of a 32- or 64-bit operand.
            MathFn::CountOnes | MathFn::LeadingZeros | MathFn::TrailingZeros => Range {
                lo: 0,
                hi: args
                    .first()
                    .map_or(64, |a| a.ty.scalar.size_bytes() as u32 * 8),
            },
            MathFn::ExtractByte => Range { lo: 0, hi: 255 },
            _ => Range::FULL,
        }
    }
}

/// The smallest `2^n - 1` at or above `v`: the largest result of `|` or `^` on values up
/// to `v`.
fn all_ones_to(v: u32) -> u32 {
    if v == 0 {
        0
    } else {
        u32::MAX >> v.leading_zeros()
    }
}

/// Every store into a local, by local.
fn collect<'k>(stmts: &'k [Stmt], sources: &mut HashMap<u32, Vec<Source<'k>>>) {
    for s in stmts {
        let (local, source) = match s {
            Stmt::Let { local, init } => (*local, Source::Value(init.as_ref().unwrap_or(&ZERO))),
            Stmt::Assign { local, value } => (*local, Source::Value(value)),
            Stmt::Atomic {
                result: Some(local),
                ..
            } => (*local, Source::Unknown),
            Stmt::For {
                var,
                start,
                end,
                body,
                ..
            } => {
                collect(body, sources);
                (*var, Source::Counter { start, end })
            }
            Stmt::If {
                then, otherwise, ..
            } => {
                collect(then, sources);
                collect(otherwise, sources);
                continue;
            }
            Stmt::Loop { body } => {
                collect(body, sources);
                continue;
            }
            _ => continue,
        };
        sources.entry(local).or_default().push(source);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Axis;
    use crate::types::Type;

    const U32: Type = Type::scalar(ScalarType::U32);

    fn expr(kind: ExprKind) -> Expr {
        Expr { ty: U32, kind }
    }

    fn kernel() -> Kernel {
        Kernel {
            version: crate::IR_VERSION,
            name: "k".into(),
            params: vec![],
            shared: vec![],
            locals: vec![],
            local_arrays: vec![],
            body: vec![],
        }
    }

    /// A random `u32` expression over the local id and constants, `depth` levels deep.
    fn random_expr(rng: &mut fastrand::Rng, depth: u32) -> Expr {
        if depth == 0 || rng.u32(0..4) == 0 {
            return match rng.u32(0..3) {
                0 => expr(ExprKind::Builtin(Builtin::LocalId, Axis::X)),
                1 => expr(ExprKind::Literal(Literal::U32(rng.u32(0..70)))),
                _ => expr(ExprKind::Literal(Literal::U32(rng.u32(..)))),
            };
        }
        use BinaryOp::*;
        let ops = [Add, Sub, Mul, Div, Rem, BitAnd, BitOr, BitXor, Shl, Shr];
        let (kind, op, f) = (rng.u32(0..4), ops[rng.usize(0..ops.len())], rng.usize(0..3));
        let mut sub = || Box::new(random_expr(rng, depth - 1));
        match kind {
            0 => expr(ExprKind::Select {
                cond: Box::new(Expr {
                    ty: Type::scalar(ScalarType::Bool),
                    kind: ExprKind::Literal(Literal::Bool(true)),
                }),
                then: sub(),
                otherwise: sub(),
            }),
            1 => {
                let f = [MathFn::Min, MathFn::Max, MathFn::Clamp][f];
                let n = if f == MathFn::Clamp { 3 } else { 2 };
                expr(ExprKind::Math(f, (0..n).map(|_| *sub()).collect()))
            }
            _ => expr(ExprKind::Binary(op, sub(), sub())),
        }
    }

    /// The IR's semantics (crate docs): wrapping arithmetic, `x / 0 == x`, `x % 0 == 0`,
    /// shift amounts modulo 32. A `Select` takes both arms (its condition is constant
    /// here, the range covers either).
    fn eval(e: &Expr, lid: u32, pick_then: bool) -> u32 {
        let ev = |e: &Expr| eval(e, lid, pick_then);
        match &e.kind {
            ExprKind::Literal(Literal::U32(v)) => *v,
            ExprKind::Builtin(Builtin::LocalId, _) => lid,
            ExprKind::Select {
                then, otherwise, ..
            } => {
                if pick_then {
                    ev(then)
                } else {
                    ev(otherwise)
                }
            }
            ExprKind::Math(f, args) => {
                let a: Vec<u32> = args.iter().map(ev).collect();
                match f {
                    MathFn::Min => a[0].min(a[1]),
                    MathFn::Max => a[0].max(a[1]),
                    _ => a[0].max(a[1]).min(a[2]),
                }
            }
            ExprKind::Binary(op, a, b) => {
                let (a, b) = (ev(a), ev(b));
                match op {
                    BinaryOp::Add => a.wrapping_add(b),
                    BinaryOp::Sub => a.wrapping_sub(b),
                    BinaryOp::Mul => a.wrapping_mul(b),
                    BinaryOp::Div => a.checked_div(b).unwrap_or(a),
                    BinaryOp::Rem => a.checked_rem(b).unwrap_or(0),
                    BinaryOp::BitAnd => a & b,
                    BinaryOp::BitOr => a | b,
                    BinaryOp::BitXor => a ^ b,
                    BinaryOp::Shl => a << (b % 32),
                    BinaryOp::Shr => a >> (b % 32),
                    _ => unreachable!(),
                }
            }
            _ => unreachable!(),
        }
    }

    /// Every value a random expression takes, for every local id of a group and either
    /// arm of each select, lies in the range computed for it; and the ranges are not all
    /// trivially `FULL` (the test would pass on an analysis that proves nothing).
    #[test]
    fn every_value_lies_in_its_range() {
        let seed = std::env::var("DOTCOMPUTE_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| fastrand::u64(..));
        let mut rng = fastrand::Rng::with_seed(seed);
        let k = kernel();
        let mut bounded = 0;
        for _ in 0..20_000 {
            let group = rng.u32(1..300);
            let ranges = ValueRanges::new(&k, [group, 1, 1]);
            let e = random_expr(&mut rng, 4);
            let r = ranges.of(&e);
            if r != Range::FULL {
                bounded += 1;
            }
            for lid in 0..group {
                for pick_then in [true, false] {
                    let v = eval(&e, lid, pick_then);
                    assert!(
                        r.lo <= v && v <= r.hi,
                        "seed {seed}: {e:?} is {v} at local id {lid} of {group}, outside {r:?}"
                    );
                }
            }
        }
        assert!(
            bounded > 5_000,
            "seed {seed}: only {bounded} bounded ranges"
        );
    }

    /// Locals: a loop counter is below its end, a local assigned in two places takes the
    /// union, a local that only shrinks itself (`half >>= 1`) stays within its start, and
    /// one that grows itself is unbounded.
    #[test]
    fn locals_take_the_union_of_their_stores_and_counters_stay_below_their_end() {
        let lit = |v: u32| expr(ExprKind::Literal(Literal::U32(v)));
        let local = |i: u32| expr(ExprKind::Local(i));
        let add =
            |a: Expr, b: Expr| expr(ExprKind::Binary(BinaryOp::Add, Box::new(a), Box::new(b)));
        let mut k = kernel();
        for (name, mutable) in [("i", false), ("v", true), ("acc", true), ("half", true)] {
            k.locals.push(Local {
                name: name.into(),
                ty: U32,
                mutable,
            });
        }
        k.body = vec![
            Stmt::Let {
                local: 1,
                init: None,
            },
            Stmt::Let {
                local: 2,
                init: Some(lit(1)),
            },
            Stmt::Let {
                local: 3,
                init: Some(lit(128)),
            },
            Stmt::For {
                var: 0,
                start: lit(2),
                end: lit(10),
                step: lit(3),
                body: vec![
                    Stmt::If {
                        cond: Expr {
                            ty: Type::scalar(ScalarType::Bool),
                            kind: ExprKind::Literal(Literal::Bool(true)),
                        },
                        then: vec![Stmt::Assign {
                            local: 1,
                            value: add(local(0), lit(100)),
                        }],
                        otherwise: vec![],
                    },
                    Stmt::Assign {
                        local: 2,
                        value: add(local(2), lit(1)),
                    },
                    Stmt::Assign {
                        local: 3,
                        value: expr(ExprKind::Binary(
                            BinaryOp::Shr,
                            Box::new(local(3)),
                            Box::new(lit(1)),
                        )),
                    },
                ],
            },
        ];
        let r = ValueRanges::new(&k, [64, 1, 1]);
        assert_eq!(r.of(&local(0)), Range { lo: 2, hi: 9 });
        assert_eq!(r.of(&local(1)), Range { lo: 0, hi: 109 });
        assert_eq!(r.of(&local(2)), Range::FULL);
        assert_eq!(r.of(&local(3)), Range { lo: 0, hi: 128 });
        assert_eq!(
            r.of(&expr(ExprKind::Builtin(Builtin::LocalId, Axis::X))),
            Range { lo: 0, hi: 63 }
        );
    }
}
