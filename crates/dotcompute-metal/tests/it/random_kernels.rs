//! Random well-typed kernels, differentially: each is built from random expression trees
//! (integer and float arithmetic, bit operations, shifts, division and remainder,
//! comparisons and selects, casts between `i32`, `u32` and `f32`, min / max / abs / clamp,
//! rounding, an `if` and a counted loop, 4-lane `i32` vectors, an atomic on the thread's
//! own element (every operation, compare-exchange and load included, its old value used) and
//! contended atomics of one commutative operation per kernel on a 17-element array, and
//! a group phase: a shared array written, read across the group between barriers (also in
//! a counted loop of barriers), and contended atomics on a shared array whose totals go to
//! global memory)
//! over random inputs, then run as MSL through the
//! shim, as WGSL on wgpu (lavapipe in CI; NVIDIA Vulkan on the GPU machine) and as CUDA C++
//! where present, and every output element must agree. The IR defines every operation
//! used (C++'s and WGSL's undefined cases included), so any difference is a generator
//! bug. Float values stay small multiples of powers of two (integers enter floats below
//! 1000 in magnitude; products are by 2, 0.5, 0.25 or -1; no division or transcendental),
//! so every float result is exact on every backend, and equality is the test. (With
//! rounded results lavapipe disagreed: it reassociates `(b + a) - c`, which the IR's
//! separately rounded operations forbid but Vulkan permits; found by this test.)
//!
//! Found and fixed by this test: WGSL const-expressions. An operation on literals only
//! (`2u % 0u`, `2147483647 + 1`, `abs(-2147483648)`) is evaluated when the shader is
//! created, where the IR's defined results are errors, and naga rejects any integer
//! division by a constant zero; the WGSL generator now routes such operands through a
//! runtime identity (`dc_rt_*`).
//!
//! Time-boxed: `DOTCOMPUTE_FUZZ_SECONDS` (default 20). Each kernel's seed is printed on
//! failure; `DOTCOMPUTE_SEED` replays one.

use dotcompute::ir::{
    Access, AtomicOp, Axis, BinaryOp, Builder, Builtin, Expr, ExprKind, Kernel, MathFn, ScalarType,
    UnaryOp, V,
};
use dotcompute::{Arg, BackendKind, Device, KernelDef, Launch};
use std::cell::RefCell;
use std::time::{Duration, Instant};

thread_local! {
    /// The kernel the next `KernelDef` builds (a `KernelDef` takes a plain `fn`).
    static CURRENT: RefCell<Option<Kernel>> = const { RefCell::new(None) };
}

fn current() -> Result<Kernel, dotcompute::ir::BuildError> {
    Ok(CURRENT.with(|c| c.borrow().clone().expect("a kernel was set")))
}

const I: ScalarType = ScalarType::I32;
const U: ScalarType = ScalarType::U32;
const F: ScalarType = ScalarType::F32;

/// Builds random expressions of one type from the thread's inputs.
struct Gen<'b> {
    b: &'b mut Builder,
    rng: fastrand::Rng,
    inputs: [(ScalarType, V); 3],
}

impl Gen<'_> {
    /// One random commutative atomic of a random value into `mem[slot % HIST]` (its old
    /// value unused: under contention the order of the threads is not fixed).
    fn contended_atomic(&mut self, mem: dotcompute::ir::Mem) {
        let op = COMMUTATIVE[self.rng.usize(..COMMUTATIVE.len())];
        let slot = self.expr(U, 2);
        let slot = self
            .b
            .binary(BinaryOp::Rem, slot, V::host(HIST as u32))
            .unwrap();
        let value = self.expr(I, 2);
        self.b.atomic(op, mem, slot, vec![value]).unwrap();
    }

    fn lit(&mut self, ty: ScalarType) -> V {
        let small = [0i32, 1, -1, 2, 3, 7, 31, 32, 33, -2147483648, 2147483647];
        match ty {
            I => V::host(small[self.rng.usize(..small.len())]),
            U => V::host(small[self.rng.usize(..small.len())] as u32),
            _ => V::host((self.rng.i32(-64..64) as f32) * 0.5),
        }
    }

    fn expr(&mut self, ty: ScalarType, depth: u32) -> V {
        if depth == 0 || self.rng.u8(..4) == 0 {
            return match self.rng.u8(..3) {
                0 => self.lit(ty),
                _ => {
                    let (t, v) = self.inputs[self.rng.usize(..3)].clone();
                    self.cast(v, t, ty)
                }
            };
        }
        let d = depth - 1;
        let r = self.rng.u8(..10);
        match (ty, r) {
            (_, 0) => {
                // A cast from another type.
                let from = [I, U, F][self.rng.usize(..3)];
                let v = self.expr(from, d);
                self.cast(v, from, ty)
            }
            (_, 1) => {
                // select(a < b, x, y) through a comparison.
                let t = [I, U, F][self.rng.usize(..3)];
                let (a, c) = (self.expr(t, d), self.expr(t, d));
                let op = [
                    BinaryOp::Lt,
                    BinaryOp::Le,
                    BinaryOp::Eq,
                    BinaryOp::Ne,
                    BinaryOp::Gt,
                ][self.rng.usize(..5)];
                let cond = self.b.binary(op, a, c).unwrap();
                let (x, y) = (self.expr(ty, d), self.expr(ty, d));
                select(cond, x, y, ty)
            }
            (_, 2) => {
                let f = [MathFn::Min, MathFn::Max, MathFn::Abs][self.rng.usize(..3)];
                let args = match f {
                    MathFn::Abs => vec![self.expr(ty, d)],
                    _ => vec![self.expr(ty, d), self.expr(ty, d)],
                };
                self.b.math(f, args).unwrap()
            }
            (F, 3) => {
                let f = [MathFn::Floor, MathFn::Ceil, MathFn::Trunc, MathFn::Round]
                    [self.rng.usize(..4)];
                let a = self.expr(F, d);
                self.b.math(f, vec![a]).unwrap()
            }
            (F, _) => {
                // + - * only: exact for these magnitudes.
                let op = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul][self.rng.usize(..3)];
                let (a, c) = (self.expr(F, d), self.expr(F, d));
                // Keep products small and exact: multiply by a power of two (or -1).
                let c = if op == BinaryOp::Mul {
                    V::host([0.5f32, 2.0, -1.0, 0.25][self.rng.usize(..4)])
                } else {
                    c
                };
                self.b.binary(op, a, c).unwrap()
            }
            (_, 3) => {
                let a = self.expr(ty, d);
                self.b
                    .unary(
                        [UnaryOp::Not, UnaryOp::Neg][self.rng.usize(..if ty == I { 2 } else { 1 })],
                        a,
                    )
                    .unwrap()
            }
            (_, 4) => {
                // Shift by any amount: the IR takes it modulo the width.
                let (a, s) = (self.expr(ty, d), self.expr(U, d));
                let op = [BinaryOp::Shl, BinaryOp::Shr][self.rng.usize(..2)];
                self.b.binary(op, a, s).unwrap()
            }
            (_, _) => {
                let ops = [
                    BinaryOp::Add,
                    BinaryOp::Sub,
                    BinaryOp::Mul,
                    BinaryOp::Div,
                    BinaryOp::Rem,
                    BinaryOp::BitAnd,
                    BinaryOp::BitOr,
                    BinaryOp::BitXor,
                ];
                let op = ops[self.rng.usize(..ops.len())];
                let (a, c) = (self.expr(ty, d), self.expr(ty, d));
                self.b.binary(op, a, c).unwrap()
            }
        }
    }

    fn cast(&mut self, v: V, from: ScalarType, to: ScalarType) -> V {
        if from == to {
            return v;
        }
        // Integers enter float arithmetic below 1000 in magnitude, so every float result
        // is exact: a GPU compiler may reassociate float additions (lavapipe does), which
        // changes rounded results but not exact ones.
        let v = if to == F {
            let m = if from == I {
                V::host(1000i32)
            } else {
                V::host(1000u32)
            };
            self.b.binary(BinaryOp::Rem, v, m).unwrap()
        } else {
            v
        };
        self.b.cast(v, to).unwrap()
    }
}

fn select(cond: V, x: V, y: V, ty: ScalarType) -> V {
    let typed = |v: V| match v {
        V::Typed(e) => e,
        other => panic!("expected a typed value, got {other:?}"),
    };
    V::Typed(Expr {
        ty: ty.into(),
        kind: ExprKind::Select {
            cond: Box::new(typed(cond)),
            then: Box::new(typed(x)),
            otherwise: Box::new(typed(y)),
        },
    })
}

/// Elements of the contended atomic array.
const HIST: usize = 17;

/// The commutative, associative atomics: contended, their final values do not depend on
/// the order of the threads.
const COMMUTATIVE: [AtomicOp; 7] = [
    AtomicOp::Add,
    AtomicOp::Sub,
    AtomicOp::Min,
    AtomicOp::Max,
    AtomicOp::And,
    AtomicOp::Or,
    AtomicOp::Xor,
];

/// A random kernel over `a: &[i32]`, `b: &[u32]`, `x: &[f32]` writing `oi`, `ou`, `of`,
/// with atomics on `own` (one element per thread) and `hist` (`HIST`, contended).
pub(crate) fn random_kernel(seed: u64) -> Kernel {
    let mut b = Builder::new(&format!("random_{seed:x}"));
    let (a, bu, x) = (
        b.buffer("a", I, Access::Read),
        b.buffer("b", U, Access::Read),
        b.buffer("x", F, Access::Read),
    );
    let (oi, ou, of) = (
        b.buffer("oi", I, Access::ReadWrite),
        b.buffer("ou", U, Access::ReadWrite),
        b.buffer("of", F, Access::ReadWrite),
    );
    let (own, hist) = (
        b.buffer("own", U, Access::ReadWrite),
        b.buffer("hist", I, Access::ReadWrite),
    );
    let (osh, shist) = (
        b.buffer("osh", U, Access::ReadWrite),
        b.buffer("shist", I, Access::ReadWrite),
    );
    let i = b.builtin(Builtin::GlobalId, Axis::X);
    let len = b.len(oi);
    let inside = b.binary(BinaryOp::Lt, i.clone(), len).unwrap();
    b.begin_if(inside).unwrap();
    let va = b.load(a, i.clone()).unwrap();
    let vb = b.load(bu, i.clone()).unwrap();
    let vx = b.load(x, i.clone()).unwrap();
    let mut g = Gen {
        b: &mut b,
        rng: fastrand::Rng::with_seed(seed),
        inputs: [(I, va), (U, vb), (F, vx)],
    };
    let depth = g.rng.u32(2..5);
    let ei = g.expr(I, depth);
    let eu = g.expr(U, depth);
    let ef = g.expr(F, depth);
    // A mutable accumulator through an if and a short counted loop.
    let acc = g.b.let_("acc", Some(I.into()), true, ei).unwrap();
    let cond_l = g.expr(U, 2);
    let cond_r = g.expr(U, 2);
    let cond = g.b.binary(BinaryOp::Lt, cond_l, cond_r).unwrap();
    g.b.begin_if(cond).unwrap();
    let bump = g.expr(I, 2);
    let cur = g.b.get(acc);
    let sum = g.b.binary(BinaryOp::Add, cur, bump).unwrap();
    g.b.assign(acc, sum).unwrap();
    g.b.end_if().unwrap();
    let trips = g.rng.u32(0..4);
    let k =
        g.b.begin_for("k", V::host(0u32), V::host(trips), None)
            .unwrap();
    let cur = g.b.get(acc);
    let kv = g.b.get(k);
    let kv = g.b.cast(kv, I).unwrap();
    let step = g.b.binary(BinaryOp::Mul, cur, kv).unwrap();
    let cur = g.b.get(acc);
    let next = g.b.binary(BinaryOp::Sub, cur, step).unwrap();
    g.b.assign(acc, next).unwrap();
    g.b.end_for().unwrap();
    // Vectors: four random lanes, lane-wise arithmetic (integer / and % split into
    // lanes), two lanes folded into the accumulator.
    let lanes: Vec<V> = (0..4).map(|_| g.expr(I, 2)).collect();
    let v = g.b.vector(lanes).unwrap();
    let k = g.expr(I, 1);
    let kv = g.b.splat(k, 4).unwrap();
    let op = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Rem,
    ][g.rng.usize(..5)];
    let w = g.b.binary(op, v.clone(), kv).unwrap();
    let w = g.b.binary(BinaryOp::Sub, w, v).unwrap();
    let w = g.b.let_("w", None, false, w).unwrap();
    let (l0, l3) = (g.b.get(w), g.b.get(w));
    let (l0, l3) = (g.b.lane(l0, 0).unwrap(), g.b.lane(l3, 3).unwrap());
    let folded = g.b.binary(BinaryOp::BitXor, l0, l3).unwrap();
    let cur = g.b.get(acc);
    let next = g.b.binary(BinaryOp::Add, cur, folded).unwrap();
    g.b.assign(acc, next).unwrap();
    // An atomic on the thread's own element: no other thread touches it, so its old value
    // is the host's `b[i]` and every operation is deterministic.
    let own_op = AtomicOp::ALL[g.rng.usize(..AtomicOp::ALL.len())];
    let mut args = Vec::new();
    if own_op.arity() > 0 {
        args.push(g.expr(U, 2));
    }
    if own_op == AtomicOp::CompareExchange {
        // Expect the element's value half of the time, so the exchange happens.
        let expected = if g.rng.bool() {
            g.b.load(bu, i.clone()).unwrap()
        } else {
            g.expr(U, 1)
        };
        args.insert(0, expected);
    }
    let old = g.b.atomic(own_op, own, i.clone(), args).unwrap();
    let eu = g.b.binary(BinaryOp::BitXor, eu, old).unwrap();
    // Contended atomics: one commutative, associative operation per kernel, so the final
    // values do not depend on the order of the threads (their old values would, so they
    // are not used).
    g.contended_atomic(hist);
    let acc_v = g.b.get(acc);
    b.store(oi, i.clone(), acc_v).unwrap();
    b.store(ou, i.clone(), eu).unwrap();
    b.store(of, i.clone(), ef).unwrap();
    b.end_if().unwrap();
    group_phase(&mut b, seed, [a, bu, x], osh, shist, i);
    b.finish().unwrap()
}

/// Threads per group in every random kernel (the group phase's shared array).
const GROUP: u32 = 64;

/// The group phase, run by every thread of the group (those past the end too, so that
/// barriers are reached by all): a shared array `s` is written, read at a neighbour after
/// a barrier, rewritten, passed round in a counted loop of barriers, and read at a
/// permuted index into `osh`; a shared `sh` receives contended atomics of one commutative
/// operation, and its totals are added into the global `shist` after a barrier.
fn group_phase(
    b: &mut Builder,
    seed: u64,
    [a, bu, x]: [dotcompute::ir::Mem; 3],
    osh: dotcompute::ir::Mem,
    shist: dotcompute::ir::Mem,
    i: V,
) {
    let s = b.shared("s", U, V::host(GROUP)).unwrap();
    let sh = b.shared("sh", I, V::host(HIST as u32)).unwrap();
    let l = b.builtin(Builtin::LocalId, Axis::X);
    // Threads past the end read the last element.
    let len = b.len(a);
    let last = b.binary(BinaryOp::Sub, len, V::host(1u32)).unwrap();
    let j = b.math(MathFn::Min, vec![i.clone(), last]).unwrap();
    let va = b.load(a, j.clone()).unwrap();
    let vb = b.load(bu, j.clone()).unwrap();
    let vx = b.load(x, j).unwrap();
    let mut g = Gen {
        b,
        rng: fastrand::Rng::with_seed(seed ^ 0x5A5A_0F0F),
        inputs: [(I, va), (U, vb), (F, vx)],
    };
    let mine = g.expr(U, 3);
    g.b.store(s, l.clone(), mine).unwrap();
    let small =
        g.b.binary(BinaryOp::Lt, l.clone(), V::host(HIST as u32))
            .unwrap();
    g.b.begin_if(small.clone()).unwrap();
    let li = g.b.cast(l.clone(), I).unwrap();
    let init = g.b.binary(BinaryOp::Mul, li, V::host(3i32)).unwrap();
    let init = g.b.binary(BinaryOp::Sub, init, V::host(20i32)).unwrap();
    g.b.store(sh, l.clone(), init).unwrap();
    g.b.end_if().unwrap();
    g.b.barrier();
    // Contended atomics on shared memory (old values unused: their order is not fixed).
    g.contended_atomic(sh);
    // A neighbour's value, changed, written back after everyone has read.
    let r = g.rng.u32(1..GROUP);
    let at = g.b.binary(BinaryOp::Add, l.clone(), V::host(r)).unwrap();
    let at = g.b.binary(BinaryOp::Rem, at, V::host(GROUP)).unwrap();
    let t = g.b.load(s, at).unwrap();
    let e = g.expr(U, 2);
    let t = g.b.binary(BinaryOp::BitXor, t, e).unwrap();
    let t = g.b.let_("t", Some(U.into()), false, t).unwrap();
    g.b.barrier();
    let tv = g.b.get(t);
    g.b.store(s, l.clone(), tv).unwrap();
    g.b.barrier();
    // Rounds of read-neighbour, barrier, combine-own, barrier.
    let rounds = g.rng.u32(0..4);
    let k =
        g.b.begin_for("k", V::host(0u32), V::host(rounds), None)
            .unwrap();
    let kv = g.b.get(k);
    let at = g.b.binary(BinaryOp::Add, l.clone(), kv).unwrap();
    let at = g.b.binary(BinaryOp::Add, at, V::host(1u32)).unwrap();
    let at = g.b.binary(BinaryOp::Rem, at, V::host(GROUP)).unwrap();
    let v = g.b.load(s, at).unwrap();
    let v = g.b.let_("v", Some(U.into()), false, v).unwrap();
    g.b.barrier();
    let own = g.b.load(s, l.clone()).unwrap();
    let vv = g.b.get(v);
    let combine = [BinaryOp::Add, BinaryOp::BitXor, BinaryOp::Sub][g.rng.usize(..3)];
    let next = g.b.binary(combine, own, vv).unwrap();
    g.b.store(s, l.clone(), next).unwrap();
    g.b.barrier();
    g.b.end_for().unwrap();
    // A permuted read (odd multiplier: a permutation of the group).
    let mult = g.rng.u32(0..GROUP / 2) * 2 + 1;
    let off = g.rng.u32(0..GROUP);
    let at = g.b.binary(BinaryOp::Mul, l.clone(), V::host(mult)).unwrap();
    let at = g.b.binary(BinaryOp::Add, at, V::host(off)).unwrap();
    let at = g.b.binary(BinaryOp::Rem, at, V::host(GROUP)).unwrap();
    let fin = g.b.load(s, at).unwrap();
    let olen = g.b.len(osh);
    let inside = g.b.binary(BinaryOp::Lt, i.clone(), olen).unwrap();
    g.b.begin_if(inside).unwrap();
    g.b.store(osh, i, fin).unwrap();
    g.b.end_if().unwrap();
    // The group's shared totals into global memory (addition: any group order).
    g.b.barrier();
    g.b.begin_if(small).unwrap();
    let total = g.b.load(sh, l.clone()).unwrap();
    g.b.atomic(AtomicOp::Add, shist, l, vec![total]).unwrap();
    g.b.end_if().unwrap();
}

/// What a random kernel leaves: its three outputs and its two atomic arrays.
#[derive(Debug)]
pub(crate) struct Outputs {
    pub oi: Vec<i32>,
    pub ou: Vec<u32>,
    pub of: Vec<f32>,
    pub own: Vec<u32>,
    pub hist: Vec<i32>,
    pub osh: Vec<u32>,
    pub shist: Vec<i32>,
}

impl Outputs {
    /// The first place the two differ (floats compared by value): the element, if the
    /// difference is in one, and a description.
    pub fn first_difference(&self, o: &Outputs) -> Option<(Option<usize>, String)> {
        if let Some(j) = (0..self.oi.len()).find(|&j| {
            self.oi[j] != o.oi[j]
                || self.ou[j] != o.ou[j]
                || self.of[j] != o.of[j]
                || self.own[j] != o.own[j]
                || self.osh[j] != o.osh[j]
        }) {
            return Some((
                Some(j),
                format!(
                    "element {j}: (oi, ou, of, own, osh) = ({}, {}, {}, {}, {}) against \
                     ({}, {}, {}, {}, {})",
                    self.oi[j],
                    self.ou[j],
                    self.of[j],
                    self.own[j],
                    self.osh[j],
                    o.oi[j],
                    o.ou[j],
                    o.of[j],
                    o.own[j],
                    o.osh[j]
                ),
            ));
        }
        if self.shist != o.shist {
            return Some((
                None,
                format!("shist {:?} against {:?}", self.shist, o.shist),
            ));
        }
        (self.hist != o.hist).then(|| (None, format!("hist {:?} against {:?}", self.hist, o.hist)))
    }
}

/// The outputs of `kernel` on `device` for the given inputs.
fn run(device: &Device, kernel: &Kernel, a: &[i32], b: &[u32], x: &[f32]) -> Outputs {
    try_run(device, kernel, a, b, x)
        .unwrap_or_else(|e| panic!("{} failed to launch: {e}", device.label()))
}

/// The outputs of `kernel` on `device`, or the launch's error.
pub(crate) fn try_run(
    device: &Device,
    kernel: &Kernel,
    a: &[i32],
    b: &[u32],
    x: &[f32],
) -> Result<Outputs, dotcompute::Error> {
    CURRENT.with(|c| *c.borrow_mut() = Some(kernel.clone()));
    let def = KernelDef::new("random", current, None);
    let n = a.len();
    let (da, db, dx) = (
        device.upload(a).unwrap(),
        device.upload(b).unwrap(),
        device.upload(x).unwrap(),
    );
    let mut oi = device.alloc_filled(n, 0x5EED_5EEDu32 as i32).unwrap();
    let mut ou = device.alloc_filled(n, 0xDEAD_BEEFu32).unwrap();
    let mut of = device.alloc_filled(n, f32::NAN).unwrap();
    let mut own = device.upload(b).unwrap();
    let start: Vec<i32> = (0..HIST as i32).map(|k| k * 1000 - 7000).collect();
    let mut hist = device.upload(&start).unwrap();
    let mut osh = device.alloc_filled(n, 0xFEED_FACEu32).unwrap();
    let mut shist = device.upload(&start).unwrap();
    device.launch_kernel(
        &def,
        Launch::threads(n).group(GROUP),
        &[
            Arg::buffer(&da),
            Arg::buffer(&db),
            Arg::buffer(&dx),
            Arg::buffer_mut(&mut oi),
            Arg::buffer_mut(&mut ou),
            Arg::buffer_mut(&mut of),
            Arg::buffer_mut(&mut own),
            Arg::buffer_mut(&mut hist),
            Arg::buffer_mut(&mut osh),
            Arg::buffer_mut(&mut shist),
        ],
    )?;
    Ok(Outputs {
        oi: oi.to_vec()?,
        ou: ou.to_vec()?,
        of: of.to_vec()?,
        own: own.to_vec()?,
        hist: hist.to_vec()?,
        osh: osh.to_vec()?,
        shist: shist.to_vec()?,
    })
}

/// Seeds of kernels a backend once computed wrong, replayed first by every run:
/// 4710405778595751319, `u32(7.75) - ~(3u & u32(a))` inside a `max`, wrong on NVIDIA
/// Vulkan (H100, driver 580) until the WGSL generator wrote `a - ~b` as `(a + b) + 1`.
const KNOWN_FAILURES: [u64; 1] = [4710405778595751319];

/// The inputs kernel `seed` runs on: 1 to 3000 elements, half of them special values.
pub(crate) fn random_inputs(seed: u64) -> (Vec<i32>, Vec<u32>, Vec<f32>) {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x1234_5678);
    let n = 1 + rng.usize(..3000);
    let special = [0i32, 1, -1, 31, 32, i32::MIN, i32::MAX, -100, 100];
    let a: Vec<i32> = (0..n)
        .map(|_| {
            if rng.bool() {
                special[rng.usize(..special.len())]
            } else {
                rng.i32(-100..=100)
            }
        })
        .collect();
    let b: Vec<u32> = (0..n)
        .map(|_| {
            if rng.bool() {
                special[rng.usize(..special.len())] as u32
            } else {
                rng.u32(0..=200)
            }
        })
        .collect();
    let x: Vec<f32> = (0..n).map(|_| rng.i32(-400..=400) as f32 * 0.25).collect();
    (a, b, x)
}

#[test]
fn random_kernels_agree_on_every_backend() {
    // The MSL shim where clang exists (CI), then wgpu and CUDA (the GPU machine, which
    // has no clang, compares CUDA with NVIDIA Vulkan); the first is the reference.
    let required = dotcompute_conformance::required_backends().unwrap_or_default();
    let mut devices: Vec<Device> = dotcompute_metal::shim::ShimBackend::new()
        .ok()
        .map(|b| Device::from_backend(Box::new(b)))
        .into_iter()
        .collect();
    if devices.is_empty() {
        // The shim's absence fails here only where it is required.
        crate::shim_device();
    }
    for kind in [BackendKind::Wgpu, BackendKind::Cuda] {
        match Device::with_backend(kind) {
            Ok(d) => devices.push(d),
            Err(e) => {
                assert!(!required.contains(&kind), "{kind} is required: {e}");
                eprintln!("skipping {kind}: {e}");
            }
        }
    }
    if devices.len() < 2 {
        return eprintln!("skipping: fewer than two backends to compare");
    }
    let (reference, others) = devices.split_first().expect("two devices");
    let budget = Duration::from_secs_f64(
        std::env::var("DOTCOMPUTE_FUZZ_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(20.0),
    );
    let replay: Option<u64> = std::env::var("DOTCOMPUTE_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let mut seeds = fastrand::Rng::new();
    let start = Instant::now();
    let mut kernels = 0;
    // Kernels that once failed come first, every run.
    let mut known = KNOWN_FAILURES.iter();
    while start.elapsed() < budget {
        let seed = replay.unwrap_or_else(|| known.next().copied().unwrap_or_else(|| seeds.u64(..)));
        let kernel = random_kernel(seed);
        let (a, b, x) = random_inputs(seed);
        let n = a.len();
        let want = run(reference, &kernel, &a, &b, &x);
        if replay.is_some() {
            // A replay shows the kernel and the reference's first outputs.
            eprintln!("{}", dotcompute_codegen_ir_text(&kernel));
            if std::env::var_os("DOTCOMPUTE_SHOW_CUDA").is_some() {
                eprintln!("{}", dotcompute_codegen::cuda::generate(&kernel).source);
            }
            for j in 0..n.min(10) {
                eprintln!(
                    "element {j}: inputs ({}, {}, {}) -> ({}, {}, {}, own {}) on {}",
                    a[j],
                    b[j],
                    x[j],
                    want.oi[j],
                    want.ou[j],
                    want.of[j],
                    want.own[j],
                    reference.label()
                );
            }
            eprintln!("hist: {:?}", want.hist);
        }
        for other in others {
            let got = run(other, &kernel, &a, &b, &x);
            if let Some((at, difference)) = want.first_difference(&got) {
                let inputs = at.map_or(String::new(), |j| {
                    format!(" (inputs a={}, b={}, x={})", a[j], b[j], x[j])
                });
                panic!(
                    "kernel seed {seed} (replay: DOTCOMPUTE_SEED={seed}): {} against {}: \
                     {difference}{inputs}\n{}",
                    reference.label(),
                    other.label(),
                    dotcompute_codegen_ir_text(&kernel)
                );
            }
        }
        kernels += 1;
        if replay.is_some() {
            break;
        }
    }
    eprintln!(
        "{kernels} random kernels agreed between {} and {} in {:.1} s",
        reference.label(),
        others
            .iter()
            .map(|d| d.label())
            .collect::<Vec<_>>()
            .join(", "),
        start.elapsed().as_secs_f64()
    );
}

pub(crate) fn dotcompute_codegen_ir_text(k: &Kernel) -> String {
    use dotcompute_codegen::Target;
    dotcompute_codegen::IrText.generate(k)
}
