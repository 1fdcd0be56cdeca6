//! The kernel IR proper: a kernel is a signature plus a tree of statements.

use crate::types::{Literal, ScalarType, Type};
use serde::{Deserialize, Serialize};

pub use crate::ops::*;

/// Bumped whenever the IR's shape or meaning changes; part of every hash and serialized form.
pub const IR_VERSION: u32 = 1;

/// How a kernel may use a global buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Access {
    /// `&[T]`: loads only.
    Read,
    /// `&mut [T]`: loads, stores and atomics.
    ReadWrite,
}

/// A kernel parameter, bound by position at launch.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Param {
    /// A global buffer of `elem` (a scalar or a vector type).
    Buffer {
        name: String,
        elem: Type,
        access: Access,
    },
    /// A scalar passed by value.
    Scalar { name: String, ty: ScalarType },
}

impl Param {
    pub fn name(&self) -> &str {
        match self {
            Param::Buffer { name, .. } | Param::Scalar { name, .. } => name,
        }
    }
}

/// The length of a workgroup-shared array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SharedLen {
    /// Fixed when the kernel is built (may come from host constants).
    Static(u32),
    /// Given at launch (`Launch::dynamic_shared(len)`); at most one per kernel.
    Dynamic,
}

/// A workgroup-shared array. Its contents are undefined at group start.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SharedArray {
    pub name: String,
    pub elem: ScalarType,
    pub len: SharedLen,
}

/// A thread-private variable. Locals are declared by `Stmt::Let` or `Stmt::For`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Local {
    pub name: String,
    pub ty: Type,
    pub mutable: bool,
}

/// A thread-private array of constant length (`let mut acc = [0.0f32; 8];`), for
/// register blocking. Each thread has its own; its contents are set where it is declared
/// (the builder emits the fill), so backends declare it once at the top of the kernel.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LocalArray {
    pub name: String,
    pub elem: ScalarType,
    pub len: u32,
}

/// An addressable array: a buffer parameter, a shared array or a thread-private array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Memory {
    /// Index into `Kernel::params` (must be a `Param::Buffer`).
    Buffer(u32),
    /// Index into `Kernel::shared`.
    Shared(u32),
    /// Index into `Kernel::local_arrays`. Not an atomic target.
    Local(u32),
}

impl Memory {
    /// The array as one `u32`, for the violation record of checked launches: buffer
    /// parameter `i` is `i`, shared array `i` is `0x1_0000 | i`, local array `i` is
    /// `0x2_0000 | i`.
    pub fn code(self) -> u32 {
        match self {
            Memory::Buffer(i) => i,
            Memory::Shared(i) => 0x1_0000 | i,
            Memory::Local(i) => 0x2_0000 | i,
        }
    }
    /// The array of a [`Memory::code`].
    pub fn from_code(code: u32) -> Memory {
        let i = code & 0xffff;
        match code >> 16 {
            0 => Memory::Buffer(i),
            1 => Memory::Shared(i),
            _ => Memory::Local(i),
        }
    }
}

/// A typed expression. Expressions have no side effects: atomics are statements.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Expr {
    pub ty: Type,
    pub kind: ExprKind,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ExprKind {
    Literal(Literal),
    /// Index into `Kernel::locals`.
    Local(u32),
    /// A scalar parameter, by index into `Kernel::params`.
    Scalar(u32),
    Builtin(Builtin, Axis),
    /// Element count of a buffer or shared array, as `u32`.
    Len(Memory),
    /// `mem[index]`; `index` is `u32`.
    Load {
        mem: Memory,
        index: Box<Expr>,
    },
    Unary(UnaryOp, Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// Conversion to `Expr::ty` with Rust `as` semantics (see the crate docs).
    Cast(Box<Expr>),
    /// The operand's bits read as `Expr::ty`, a scalar of the same size that is not `bool`
    /// (`f32`, `u32`, `i32` among themselves; `f64`, `u64`, `i64`): Rust's `to_bits`,
    /// `from_bits` and `as` between signed and unsigned integers of one width. Every bit
    /// pattern is kept, NaN payloads and subnormals included.
    Bitcast(Box<Expr>),
    Math(MathFn, Vec<Expr>),
    /// A subgroup operation (see [`SubgroupOp`]); `Shuffle*` take a `u32` second operand.
    Subgroup(SubgroupOp, Vec<Expr>),
    /// Both arms are evaluated; the result is `then` when `cond` is true.
    Select {
        cond: Box<Expr>,
        then: Box<Expr>,
        otherwise: Box<Expr>,
    },
    /// Lane `lane` (0 is `x`) of a vector value; the expression has the lane type.
    Extract {
        value: Box<Expr>,
        lane: u8,
    },
    /// A vector from one scalar per lane, in order (`Vec4::new(x, y, z, w)`).
    Construct(Vec<Expr>),
}

/// A statement. Blocks are `Vec<Stmt>`; scoping follows nesting.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Stmt {
    /// Declares `local` in the current block, optionally initialised (otherwise it holds
    /// the zero of its type).
    Let {
        local: u32,
        init: Option<Expr>,
    },
    /// Assigns to a mutable local that is in scope.
    Assign {
        local: u32,
        value: Expr,
    },
    /// `mem[index] = value`; the memory must be writable.
    Store {
        mem: Memory,
        index: Expr,
        value: Expr,
    },
    /// An atomic read-modify-write of `mem[index]`; the previous value is written to
    /// `result` (a local declared earlier) when given.
    Atomic {
        op: AtomicOp,
        mem: Memory,
        index: Expr,
        args: Vec<Expr>,
        result: Option<u32>,
    },
    If {
        cond: Expr,
        then: Vec<Stmt>,
        otherwise: Vec<Stmt>,
    },
    /// `for var in (start..end).step_by(step)`: `start`, `end` and `step` are evaluated once,
    /// before the first iteration; `var` is a fresh immutable integer local of the loop.
    For {
        var: u32,
        start: Expr,
        end: Expr,
        step: Expr,
        body: Vec<Stmt>,
    },
    /// Repeats `body` until `Break` or `Return`. `while c { .. }` is `Loop` whose body
    /// starts with `if !c { break }`.
    Loop {
        body: Vec<Stmt>,
    },
    Break,
    Continue,
    /// Ends this thread's execution of the kernel.
    Return,
    /// Workgroup barrier: every thread of the group must reach the same barrier
    /// (uniform control flow) before any passes it; orders shared and global memory
    /// accesses of the group.
    Barrier,
    /// A tensor-core multiply-accumulate by one subgroup of 32 threads (a CUDA warp):
    /// `D += A · B` with `D` 16×8 in f32 and the products summed in f32; `shape` gives
    /// the depth of `A` (16×K) and `B` (K×8) and their element type (see [`MmaShape`],
    /// which documents the fragment each thread holds). `acc[base..base + 4]` holds
    /// the thread's fragment of `D`: with `g = lane / 4` and `t = lane % 4` (`lane` its
    /// subgroup lane), `[D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]]`. `acc` is an
    /// f32 local array; the four elements must lie inside it. Like a subgroup operation
    /// every thread of the subgroup must reach it, in uniform control flow, and the
    /// subgroup must be complete (32 threads). It needs the device capability
    /// `tensor_cores`.
    Mma {
        shape: MmaShape,
        acc: Memory,
        base: Expr,
        a: Vec<Expr>,
        b: Vec<Expr>,
    },
}

/// The tensor-core operations of [`Stmt::Mma`]: the shapes of PTX `mma.sync` with f32
/// accumulators, one per operand type. With `g = lane / 4` and `t = lane % 4`, a
/// thread's operands are (row-major `A` 16×K, `B` K×8):
///
/// - `M16N8K8Tf32` (`mma_m16n8k8_tf32`), f32 operands rounded to TF32 (10 mantissa
///   bits, to nearest) before they are multiplied:
///   `a = [A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4]]`, `b = [B[t][g], B[t+4][g]]`.
/// - `M16N8K16F16` (`mma_m16n8k16_f16`), f16 operands, multiplied exactly:
///   `a = [A[g][2t], A[g][2t+1], A[g+8][2t], A[g+8][2t+1], A[g][2t+8], A[g][2t+9],
///   A[g+8][2t+8], A[g+8][2t+9]]`, `b = [B[2t][g], B[2t+1][g], B[2t+8][g], B[2t+9][g]]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MmaShape {
    M16N8K8Tf32,
    M16N8K16F16,
}

impl MmaShape {
    pub const ALL: [MmaShape; 2] = [MmaShape::M16N8K8Tf32, MmaShape::M16N8K16F16];
    /// The kernel-language function.
    pub fn name(self) -> &'static str {
        match self {
            MmaShape::M16N8K8Tf32 => "mma_m16n8k8_tf32",
            MmaShape::M16N8K16F16 => "mma_m16n8k16_f16",
        }
    }
    /// The type of the `A` and `B` operands.
    pub fn operand_type(self) -> ScalarType {
        match self {
            MmaShape::M16N8K8Tf32 => ScalarType::F32,
            MmaShape::M16N8K16F16 => ScalarType::F16,
        }
    }
    /// The depth K of the product.
    pub fn depth(self) -> u32 {
        match self {
            MmaShape::M16N8K8Tf32 => 8,
            MmaShape::M16N8K16F16 => 16,
        }
    }
    /// Elements of `A` each thread passes (16·K / 32).
    pub fn a_len(self) -> usize {
        self.depth() as usize / 2
    }
    /// Elements of `B` each thread passes (K·8 / 32).
    pub fn b_len(self) -> usize {
        self.depth() as usize / 4
    }
    /// Whether `a` and `b` operands are this shape's counts; the message when not.
    pub fn check_operand_counts(self, a: usize, b: usize) -> Result<(), String> {
        if a == self.a_len() && b == self.b_len() {
            return Ok(());
        }
        Err(format!(
            "{} takes {} elements of A and {} of B, found {a} and {b}",
            self.name(),
            self.a_len(),
            self.b_len()
        ))
    }
}

/// A complete kernel.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Kernel {
    /// Always `IR_VERSION` for kernels produced by this crate.
    pub version: u32,
    pub name: String,
    pub params: Vec<Param>,
    pub shared: Vec<SharedArray>,
    pub locals: Vec<Local>,
    /// Thread-private arrays (absent from the serialized form when there are none, so
    /// kernels without them keep their content keys).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub local_arrays: Vec<LocalArray>,
    pub body: Vec<Stmt>,
}

/// Calls `f` on every statement of `stmts` and of the blocks nested in them, each
/// statement before the statements inside it.
pub fn walk_stmts(stmts: &[Stmt], f: &mut impl FnMut(&Stmt)) {
    for s in stmts {
        f(s);
        match s {
            Stmt::If {
                then, otherwise, ..
            } => {
                walk_stmts(then, f);
                walk_stmts(otherwise, f);
            }
            Stmt::For { body, .. } | Stmt::Loop { body } => walk_stmts(body, f),
            _ => {}
        }
    }
}

/// The mutable twin of [`walk_stmts`], for passes that rewrite a kernel in place: calls
/// `f` on every statement of `stmts` and of the blocks nested in them, each statement
/// before the statements inside it (which `f` may have replaced).
pub fn walk_stmts_mut(stmts: &mut [Stmt], f: &mut impl FnMut(&mut Stmt)) {
    for s in stmts {
        f(s);
        match s {
            Stmt::If {
                then, otherwise, ..
            } => {
                walk_stmts_mut(then, f);
                walk_stmts_mut(otherwise, f);
            }
            Stmt::For { body, .. } | Stmt::Loop { body } => walk_stmts_mut(body, f),
            _ => {}
        }
    }
}

/// Calls `f` on every expression of `stmts` and of the blocks nested in them, inner
/// expressions before the expression that contains them (so a rewrite of an operand is
/// seen by the rewrite of its parent).
pub fn rewrite_exprs(stmts: &mut [Stmt], f: &mut impl FnMut(&mut Expr)) {
    walk_stmts_mut(stmts, &mut |s| {
        for e in s.exprs_mut() {
            e.walk_mut(f);
        }
    });
}

impl Stmt {
    /// The statement's own expressions, mutably (see [`Stmt::exprs`]).
    pub fn exprs_mut(&mut self) -> Vec<&mut Expr> {
        match self {
            Stmt::Let { init, .. } => init.iter_mut().collect(),
            Stmt::Assign { value, .. } => vec![value],
            Stmt::Store { index, value, .. } => vec![index, value],
            Stmt::Atomic { index, args, .. } => std::iter::once(index).chain(args).collect(),
            Stmt::If { cond, .. } => vec![cond],
            Stmt::For {
                start, end, step, ..
            } => vec![start, end, step],
            Stmt::Loop { .. } | Stmt::Break | Stmt::Continue | Stmt::Return | Stmt::Barrier => {
                vec![]
            }
            Stmt::Mma { base, a, b, .. } => std::iter::once(base).chain(a).chain(b).collect(),
        }
    }

    /// The statement's own expressions (not those of statements nested in it).
    pub fn exprs(&self) -> Vec<&Expr> {
        match self {
            Stmt::Let { init, .. } => init.iter().collect(),
            Stmt::Assign { value, .. } => vec![value],
            Stmt::Store { index, value, .. } => vec![index, value],
            Stmt::Atomic { index, args, .. } => std::iter::once(index).chain(args).collect(),
            Stmt::If { cond, .. } => vec![cond],
            Stmt::For {
                start, end, step, ..
            } => vec![start, end, step],
            Stmt::Loop { .. } | Stmt::Break | Stmt::Continue | Stmt::Return | Stmt::Barrier => {
                vec![]
            }
            Stmt::Mma { base, a, b, .. } => std::iter::once(base)
                .chain(a.iter())
                .chain(b.iter())
                .collect(),
        }
    }
}

impl Expr {
    /// Calls `f` on every subexpression and then on this expression (inner before outer),
    /// mutably: the rewrite half of [`Expr::walk`].
    pub fn walk_mut(&mut self, f: &mut impl FnMut(&mut Expr)) {
        match &mut self.kind {
            ExprKind::Load { index, .. } => index.walk_mut(f),
            ExprKind::Unary(_, a) | ExprKind::Cast(a) | ExprKind::Bitcast(a) => a.walk_mut(f),
            ExprKind::Extract { value, .. } => value.walk_mut(f),
            ExprKind::Binary(_, a, b) => {
                a.walk_mut(f);
                b.walk_mut(f);
            }
            ExprKind::Math(_, args) | ExprKind::Subgroup(_, args) | ExprKind::Construct(args) => {
                args.iter_mut().for_each(|a| a.walk_mut(f))
            }
            ExprKind::Select {
                cond,
                then,
                otherwise,
            } => {
                cond.walk_mut(f);
                then.walk_mut(f);
                otherwise.walk_mut(f);
            }
            ExprKind::Literal(_)
            | ExprKind::Local(_)
            | ExprKind::Scalar(_)
            | ExprKind::Len(_)
            | ExprKind::Builtin(..) => {}
        }
        f(self);
    }

    /// Calls `f` on this expression and on every subexpression, outer before inner.
    pub fn walk(&self, f: &mut impl FnMut(&Expr)) {
        f(self);
        match &self.kind {
            ExprKind::Load { index, .. } => index.walk(f),
            ExprKind::Unary(_, a) | ExprKind::Cast(a) | ExprKind::Bitcast(a) => a.walk(f),
            ExprKind::Binary(_, a, b) => {
                a.walk(f);
                b.walk(f);
            }
            ExprKind::Math(_, args) | ExprKind::Subgroup(_, args) | ExprKind::Construct(args) => {
                args.iter().for_each(|a| a.walk(f))
            }
            ExprKind::Extract { value, .. } => value.walk(f),
            ExprKind::Select {
                cond,
                then,
                otherwise,
            } => {
                cond.walk(f);
                then.walk(f);
                otherwise.walk(f);
            }
            ExprKind::Literal(_)
            | ExprKind::Local(_)
            | ExprKind::Scalar(_)
            | ExprKind::Len(_)
            | ExprKind::Builtin(..) => {}
        }
    }
}

impl Kernel {
    /// The positions of the buffer parameters among all parameters, in order (buffer
    /// *i* of a hand-written kernel's bindings is parameter `buffer_params().nth(i)`).
    pub fn buffer_params(&self) -> impl Iterator<Item = u32> + '_ {
        self.params
            .iter()
            .enumerate()
            .filter(|(_, p)| matches!(p, Param::Buffer { .. }))
            .map(|(i, _)| i as u32)
    }

    /// Whether any statement is a `Barrier` (see [`crate::analysis::uses_barrier`]).
    pub fn uses_barrier(&self) -> bool {
        crate::analysis::uses_barrier(self)
    }

    /// Whether any expression is a subgroup operation.
    pub fn uses_subgroups(&self) -> bool {
        crate::analysis::uses_subgroups(self)
    }

    /// Whether every thread of each group runs, the grid's padding included: kernels with
    /// barriers, subgroup operations or tensor-core operations, which need their whole group or subgroup (see
    /// the crate docs' launch rule).
    pub fn runs_whole_groups(&self) -> bool {
        self.uses_barrier() || self.uses_subgroups() || self.uses_tensor_cores()
    }

    /// Whether any statement is a tensor-core multiply-accumulate ([`Stmt::Mma`]): a
    /// device capability, and whole-group launches.
    pub fn uses_tensor_cores(&self) -> bool {
        crate::analysis::uses_tensor_cores(self)
    }

    /// The dynamically sized shared array, if the kernel has one.
    pub fn dynamic_shared(&self) -> Option<(u32, &SharedArray)> {
        self.shared
            .iter()
            .enumerate()
            .find(|(_, s)| s.len == crate::SharedLen::Dynamic)
            .map(|(i, s)| (i as u32, s))
    }

    /// Bytes of shared memory one group needs, given the dynamic array's length.
    pub fn shared_bytes(&self, dynamic_len: u32) -> u64 {
        self.shared
            .iter()
            .map(|s| {
                let len = match s.len {
                    SharedLen::Static(n) => n,
                    SharedLen::Dynamic => dynamic_len,
                };
                len as u64 * s.elem.size_bytes() as u64
            })
            .sum()
    }

    /// The element type of a memory reference, if it is valid (a vector only for
    /// buffers).
    pub fn memory_elem(&self, mem: Memory) -> Option<Type> {
        match mem {
            Memory::Buffer(i) => match self.params.get(i as usize)? {
                Param::Buffer { elem, .. } => Some(*elem),
                Param::Scalar { .. } => None,
            },
            Memory::Shared(i) => self.shared.get(i as usize).map(|s| s.elem.into()),
            Memory::Local(i) => self.local_arrays.get(i as usize).map(|a| a.elem.into()),
        }
    }

    /// Whether any buffer, local or expression has a vector type.
    pub fn uses_vectors(&self) -> bool {
        let typed = self.params.iter().any(|p| match p {
            Param::Buffer { elem, .. } => elem.is_vector(),
            Param::Scalar { .. } => false,
        }) || self.locals.iter().any(|l| l.ty.is_vector());
        let mut found = typed;
        walk_stmts(&self.body, &mut |s| {
            for e in s.exprs() {
                e.walk(&mut |e| found |= e.ty.is_vector());
            }
        });
        found
    }

    /// A human-readable name for a memory reference.
    pub fn memory_name(&self, mem: Memory) -> &str {
        match mem {
            Memory::Buffer(i) => self.params.get(i as usize).map_or("?", |p| p.name()),
            Memory::Shared(i) => self.shared.get(i as usize).map_or("?", |s| &s.name),
            Memory::Local(i) => self.local_arrays.get(i as usize).map_or("?", |a| &a.name),
        }
    }
}
