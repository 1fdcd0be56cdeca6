//! A kernel builder. `#[kernel]` generates a function that drives it, so the IR is built
//! at run time by ordinary Rust (host constants specialise kernels for free).
//!
//! The builder infers the types of untyped literals the way Rust does for simple cases:
//! a literal takes the type of the other operand or of its destination, and an
//! unconstrained literal defaults to `i32` or `f64`. A local declared with an untyped
//! literal (`let x = 1.5;`) takes the type of its first use when that use meets another
//! type before any assignment (`a[i] * x` with `a: &[f32]`, `acc += a[i]`), as rustc's
//! inference would. Rust's own inference can look further ahead; where the two still
//! disagree the builder reports a type error naming the local to annotate, it never
//! guesses silently.

use crate::kernel::*;
use crate::types::{Literal, ScalarType, Type};
use crate::validate::validate;
use thiserror::Error;

mod constants;
mod control;
mod ops;
mod typing;

/// `a op b` for two `u32` literals, where the IR's result is plain arithmetic: wrapping
/// `+ - *`, and `/ %` by a non-zero divisor. Host constants of generic kernels
/// (`WIDTH / 8` with `const WIDTH: u32`) then stay constants, so loops bounded by them
/// unroll and arrays sized by them are accepted, as with plain `const` items.
fn fold_u32(op: BinaryOp, a: &Expr, b: &Expr) -> Option<u32> {
    let (ExprKind::Literal(Literal::U32(x)), ExprKind::Literal(Literal::U32(y))) =
        (&a.kind, &b.kind)
    else {
        return None;
    };
    let (x, y) = (*x, *y);
    match op {
        BinaryOp::Add => Some(x.wrapping_add(y)),
        BinaryOp::Sub => Some(x.wrapping_sub(y)),
        BinaryOp::Mul => Some(x.wrapping_mul(y)),
        BinaryOp::Div if y != 0 => Some(x / y),
        BinaryOp::Rem if y != 0 => Some(x % y),
        _ => None,
    }
}

/// `a op b` for two integer literals of one type and a comparison `op`, or two boolean
/// literals and a logical `op`: the condition of `if FUSED == 1` in a generic kernel is
/// then a constant, and the finished kernel keeps only the arm it takes
/// ([`constants`]).
fn fold_condition(op: BinaryOp, a: &Expr, b: &Expr) -> Option<bool> {
    let (ExprKind::Literal(x), ExprKind::Literal(y)) = (&a.kind, &b.kind) else {
        return None;
    };
    if x.ty() != y.ty() {
        return None;
    }
    if let (Literal::Bool(p), Literal::Bool(q)) = (x, y) {
        return match op {
            BinaryOp::LogicalAnd => Some(*p && *q),
            BinaryOp::LogicalOr => Some(*p || *q),
            BinaryOp::Eq => Some(p == q),
            BinaryOp::Ne => Some(p != q),
            _ => None,
        };
    }
    let (x, y) = (x.as_i128()?, y.as_i128()?);
    match op {
        BinaryOp::Eq => Some(x == y),
        BinaryOp::Ne => Some(x != y),
        BinaryOp::Lt => Some(x < y),
        BinaryOp::Le => Some(x <= y),
        BinaryOp::Gt => Some(x > y),
        BinaryOp::Ge => Some(x >= y),
        _ => None,
    }
}

/// A kernel could not be built from its Rust source.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("kernel `{kernel}`{}: {message}", if *.line > 0 { format!(", line {}", .line) } else { String::new() })]
pub struct BuildError {
    pub kernel: String,
    /// Source line of the offending statement, 0 when unknown.
    pub line: u32,
    pub message: String,
}

/// A value under construction: typed, or a literal whose type is not fixed yet.
#[derive(Clone, Debug, PartialEq)]
pub enum V {
    Typed(Expr),
    /// An integer literal without suffix.
    Int(i128),
    /// A float literal without suffix.
    Float(f64),
    /// A vector whose lanes are all untyped literals (`Vec2::splat(7)`): it takes the
    /// lane type of the vector it meets, as Rust infers it, and defaults to f32 or i32.
    Lanes(Vec<V>),
}

impl V {
    /// A host value (a suffixed literal or a host constant) as a kernel value.
    pub fn host<T: HostValue>(v: T) -> V {
        v.into_v()
    }
    fn lit(l: Literal) -> V {
        V::Typed(Expr {
            ty: l.ty().into(),
            kind: ExprKind::Literal(l),
        })
    }
}

/// Host values usable inside kernels. `usize` and `isize` become untyped integers, so a
/// `const N: usize` adapts to the type it is used with.
pub trait HostValue {
    fn into_v(self) -> V;
}

macro_rules! host_value {
    ($($t:ty => $l:expr),*) => {$(
        impl HostValue for $t {
            fn into_v(self) -> V {
                #[allow(clippy::redundant_closure_call)]
                V::lit(($l)(self))
            }
        }
    )*};
}
host_value!(
    bool => Literal::Bool,
    i32 => Literal::I32,
    u32 => Literal::U32,
    i64 => Literal::I64,
    u64 => Literal::U64,
    f32 => Literal::f32,
    f64 => Literal::f64,
    half::f16 => |v: half::f16| Literal::F16(v.to_bits())
);
impl HostValue for usize {
    fn into_v(self) -> V {
        V::Int(self as i128)
    }
}
impl HostValue for isize {
    fn into_v(self) -> V {
        V::Int(self as i128)
    }
}

/// A local variable handle.
#[derive(Clone, Copy, Debug)]
pub struct Var {
    id: u32,
}

/// A buffer parameter or shared array handle.
#[derive(Clone, Copy, Debug)]
pub struct Mem {
    mem: Memory,
    elem: Type,
}

impl Mem {
    /// The element type of the array (a vector only for buffers).
    pub fn elem(&self) -> Type {
        self.elem
    }
}

/// The result slot of an `if` used as an expression.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    var: Var,
}

enum Frame {
    Root,
    Then {
        cond: Expr,
    },
    Else {
        cond: Expr,
        then: Vec<Stmt>,
    },
    For {
        var: u32,
        start: Expr,
        end: Expr,
        step: Expr,
    },
    Loop,
}

/// Builds one kernel. Every method that can fail returns a `BuildError` with the line set
/// by the last call to [`Builder::line`].
pub struct Builder {
    kernel: Kernel,
    /// Locals whose type came from defaulting an untyped literal (for better errors).
    defaulted: Vec<bool>,
    /// The untyped literal a defaulted local was declared with, per local.
    untyped_init: Vec<Option<V>>,
    /// Reads of each local so far.
    uses: Vec<std::cell::Cell<u32>>,
    /// Whether each local has been assigned since its declaration.
    assigned: Vec<bool>,
    /// Slots whose type is still open.
    pending: Vec<bool>,
    frames: Vec<(Frame, Vec<Stmt>)>,
    line: u32,
}

type R<T> = Result<T, BuildError>;

/// The most elements of one local array: they are meant to live in registers.
pub const LOCAL_ARRAY_MAX: u32 = 1024;

impl Builder {
    pub fn new(name: &str) -> Builder {
        Builder {
            kernel: Kernel {
                version: IR_VERSION,
                name: name.to_string(),
                params: Vec::new(),
                shared: Vec::new(),
                locals: Vec::new(),
                local_arrays: Vec::new(),
                body: Vec::new(),
            },
            defaulted: Vec::new(),
            untyped_init: Vec::new(),
            uses: Vec::new(),
            assigned: Vec::new(),
            pending: Vec::new(),
            frames: vec![(Frame::Root, Vec::new())],
            line: 0,
        }
    }

    fn err<T>(&self, message: impl Into<String>) -> R<T> {
        Err(BuildError {
            kernel: self.kernel.name.clone(),
            line: self.line,
            message: message.into(),
        })
    }

    /// Sets the source line reported by later errors.
    pub fn line(&mut self, line: u32) {
        self.line = line;
    }

    // ---- signature ----

    pub fn buffer(&mut self, name: &str, elem: impl Into<Type>, access: Access) -> Mem {
        let elem = elem.into();
        let i = self.kernel.params.len() as u32;
        self.kernel.params.push(Param::Buffer {
            name: name.into(),
            elem,
            access,
        });
        Mem {
            mem: Memory::Buffer(i),
            elem,
        }
    }

    pub fn scalar(&mut self, name: &str, ty: ScalarType) -> V {
        let i = self.kernel.params.len() as u32;
        self.kernel.params.push(Param::Scalar {
            name: name.into(),
            ty,
        });
        V::Typed(Expr {
            ty: ty.into(),
            kind: ExprKind::Scalar(i),
        })
    }

    /// A shared array of `len` elements (`len` from the kernel text or host constants).
    pub fn shared(&mut self, name: &str, elem: ScalarType, len: V) -> R<Mem> {
        let len = match len {
            V::Int(n) => n,
            V::Typed(Expr {
                kind: ExprKind::Literal(l),
                ..
            }) => match l {
                Literal::I32(v) => v as i128,
                Literal::U32(v) => v as i128,
                Literal::I64(v) => v as i128,
                Literal::U64(v) => v as i128,
                _ => return self.err("a shared array length must be an integer"),
            },
            _ => {
                return self.err(
                    "a shared array length must be a constant; use shared_dynamic for a \
                     length chosen at launch",
                )
            }
        };
        if len <= 0 || len > u32::MAX as i128 {
            return self.err(format!(
                "shared array `{name}` length {len} is outside 1..=4294967295"
            ));
        }
        Ok(self.push_shared(name, elem, SharedLen::Static(len as u32)))
    }

    /// The kernel's dynamic shared array, sized by `Launch::dynamic_shared`.
    pub fn shared_dynamic(&mut self, name: &str, elem: ScalarType) -> R<Mem> {
        if self.kernel.dynamic_shared().is_some() {
            return self.err("a kernel may have at most one shared_dynamic array");
        }
        Ok(self.push_shared(name, elem, SharedLen::Dynamic))
    }

    /// `let name = [init; len];`: a thread-private array, every element set to `init`
    /// here (a loop the backends unroll).
    pub fn local_array(&mut self, name: &str, elem: Option<ScalarType>, len: V, init: V) -> R<Mem> {
        let len = match len {
            V::Int(n) => n,
            V::Typed(Expr {
                kind: ExprKind::Literal(l),
                ..
            }) => l.as_i128().unwrap_or(-1),
            _ => return self.err("a local array's length must be a constant"),
        };
        if !(1..=LOCAL_ARRAY_MAX as i128).contains(&len) {
            return self.err(format!(
                "local array `{name}` length {len} is outside 1..={LOCAL_ARRAY_MAX} (local \
                 arrays live in registers; use shared memory or a buffer for more)"
            ));
        }
        let init = match elem {
            Some(ty) => self.coerce(init, ty, &format!("the elements of `{name}`"))?,
            None => self.default_of(init)?,
        };
        if init.ty == ScalarType::Bool {
            return self.err("local arrays of bool are not supported; use u32");
        }
        let Some(elem) = init.ty.as_scalar() else {
            return self.err(format!(
                "local arrays of {} are not supported: local arrays hold scalars",
                init.ty
            ));
        };
        let i = self.kernel.local_arrays.len() as u32;
        self.kernel.local_arrays.push(LocalArray {
            name: name.into(),
            elem,
            len: len as u32,
        });
        let mem = Mem {
            mem: Memory::Local(i),
            elem: elem.into(),
        };
        let value = self.let_(
            &format!("{name}_init"),
            Some(elem.into()),
            false,
            V::Typed(init),
        )?;
        let k = self.begin_for(
            &format!("{name}_k"),
            V::host(0u32),
            V::host(len as u32),
            None,
        )?;
        let (index, value) = (self.get(k), self.get(value));
        self.store(mem, index, value)?;
        self.end_for()?;
        Ok(mem)
    }

    fn push_shared(&mut self, name: &str, elem: ScalarType, len: SharedLen) -> Mem {
        let i = self.kernel.shared.len() as u32;
        self.kernel.shared.push(SharedArray {
            name: name.into(),
            elem,
            len,
        });
        Mem {
            mem: Memory::Shared(i),
            elem: elem.into(),
        }
    }

    // ---- typing helpers ----

    /// `v` as a value of type `ty` (an untyped literal takes it; a typed value must have
    /// it): a `#[kernel_fn]`'s result, `T::zero()`.
    pub fn typed(&mut self, v: V, ty: impl Into<Type>, what: &str) -> R<V> {
        Ok(V::Typed(self.coerce(v, ty.into(), what)?))
    }

    /// The type a `#[kernel_fn]`'s type parameter `name` takes at one call: the element
    /// type of its first array argument, else the type of its first typed value, else
    /// the default type of its first literal.
    pub fn infer_type(&self, name: &str, arrays: &[Type], values: &[&V]) -> R<ScalarType> {
        let t = if let Some(&t) = arrays.first() {
            t
        } else if let Some(V::Typed(e)) = values.iter().find(|v| matches!(v, V::Typed(_))) {
            e.ty
        } else {
            match values.first() {
                Some(&v) => self.default_of(v.clone())?.ty,
                None => return self.err(format!("type parameter `{name}` cannot be inferred")),
            }
        };
        match t.as_scalar() {
            Some(t) => Ok(t),
            None => self.err(format!(
                "type parameter `{name}` would be {t}; type parameters stand for scalar types"
            )),
        }
    }

    /// Checks an array passed to a `#[kernel_fn]` parameter `name` of element `elem`
    /// (writable if `writable`).
    pub fn check_array(
        &self,
        mem: Mem,
        elem: impl Into<Type>,
        writable: bool,
        name: &str,
    ) -> R<()> {
        let elem = elem.into();
        if mem.elem != elem {
            return self.err(format!(
                "argument `{name}` must be an array of {elem}, found an array of {}",
                mem.elem
            ));
        }
        let read_only = matches!(mem.mem, Memory::Buffer(i)
            if matches!(self.kernel.params[i as usize], Param::Buffer { access: Access::Read, .. }));
        if writable && read_only {
            return self.err(format!(
                "argument `{name}` must be writable (`&mut [{elem}]`), found a read-only buffer"
            ));
        }
        Ok(())
    }

    /// Finishes and validates the kernel.
    pub fn finish(mut self) -> R<Kernel> {
        if self.frames.len() != 1 {
            return self.err("internal: unclosed block");
        }
        self.kernel.body = self.frames.pop().unwrap().1;
        constants::propagate_constants(&mut self.kernel);
        validate(&self.kernel).map_err(|e| BuildError {
            kernel: self.kernel.name.clone(),
            line: 0,
            message: format!("at {}: {}", e.path, e.message),
        })?;
        Ok(self.kernel)
    }
}

fn lit(l: Literal) -> Expr {
    Expr {
        ty: l.ty().into(),
        kind: ExprKind::Literal(l),
    }
}

/// Whether `T::bitcast` is defined from `from` to `to`: two 4-byte or two 8-byte
/// numeric scalars (f16 and bf16 have no integer of their size in kernels).
pub(crate) fn bitcast_allowed(from: ScalarType, to: ScalarType) -> bool {
    use ScalarType::*;
    let width = |t| match t {
        I32 | U32 | F32 => Some(4),
        I64 | U64 | F64 => Some(8),
        _ => None,
    };
    width(from).is_some() && width(from) == width(to)
}

fn same_size_names(ty: ScalarType) -> &'static str {
    match ty.size_bytes() {
        4 => "f32, u32 or i32",
        8 => "f64, u64 or i64",
        _ => "no kernel type: it has none of its size",
    }
}

fn cast_expr(e: Expr, ty: ScalarType) -> Expr {
    Expr {
        ty: ty.into(),
        kind: ExprKind::Cast(Box::new(e)),
    }
}

/// Lane `lane` of vector `v`.
fn extract(v: Expr, lane: u8) -> Expr {
    Expr {
        ty: v.ty.scalar.into(),
        kind: ExprKind::Extract {
            value: Box::new(v),
            lane,
        },
    }
}

/// Replaces the initialiser of local `id`'s declaration among `stmts` and the blocks
/// nested in them; whether the declaration was found.
fn set_let_init(stmts: &mut [Stmt], id: u32, value: Expr) -> bool {
    let mut value = Some(value);
    walk_stmts_mut(stmts, &mut |s| match s {
        Stmt::Let { local, init } if *local == id && value.is_some() => *init = value.take(),
        _ => {}
    });
    value.is_none()
}
