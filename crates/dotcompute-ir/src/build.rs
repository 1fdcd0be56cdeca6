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

    fn default_of(&self, v: V) -> R<Expr> {
        match v {
            V::Typed(e) => Ok(e),
            V::Lanes(lanes) => {
                let scalar = match lanes.first() {
                    Some(V::Float(_)) => ScalarType::F32,
                    _ => ScalarType::I32,
                };
                self.vector_of(Type::vector(scalar, lanes.len() as u8), lanes)
            }
            V::Int(n) => match i32::try_from(n) {
                Ok(n) => Ok(lit(Literal::I32(n))),
                Err(_) => self.err(format!(
                    "integer literal {n} does not fit i32; add a suffix (`{n}u64`)"
                )),
            },
            V::Float(f) => Ok(lit(Literal::f64(f))),
        }
    }

    fn hint(&self, e: &Expr) -> String {
        if let ExprKind::Local(id) = e.kind {
            if self.defaulted[id as usize] {
                let l = &self.kernel.locals[id as usize];
                return format!(
                    "; local `{}` took {} from an untyped literal, as Rust does when nothing \
                     constrains it: annotate it (`let {}: T = ...`) or suffix the literal",
                    l.name, l.ty, l.name
                );
            }
        }
        String::new()
    }

    /// Converts `v` to `ty`, fixing the type of an untyped literal.
    fn coerce(&mut self, v: V, ty: impl Into<Type>, what: &str) -> R<Expr> {
        let ty: Type = ty.into();
        match v {
            V::Typed(e) if e.ty == ty => Ok(e),
            V::Typed(e) if self.retype(&e, ty) => Ok(Expr { ty, ..e }),
            V::Typed(e) => {
                let hint = self.hint(&e);
                self.err(format!("{what} must be {ty}, found {}{hint}", e.ty))
            }
            V::Lanes(lanes) if ty.is_vector() && lanes.len() == ty.lanes as usize => {
                self.vector_of(ty, lanes)
            }
            V::Lanes(lanes) => self.err(format!(
                "{what} must be {ty}, found a vector of {} lanes",
                lanes.len()
            )),
            V::Int(_) | V::Float(_) if ty.is_vector() => self.err(format!(
                "{what} must be {ty}, found a number: make a vector of it with \
                 `Vec{}::splat(x)`",
                ty.lanes
            )),
            V::Int(n) => match Literal::int(ty.scalar, n) {
                Some(l) => Ok(lit(l)),
                None => self.err(format!("{what}: integer literal {n} is not a valid {ty}")),
            },
            V::Float(f) => match Literal::float(ty.scalar, f) {
                Some(l) => Ok(lit(l)),
                None => self.err(format!("{what} must be {ty}, found a float literal")),
            },
        }
    }

    fn index(&self, v: V) -> R<Expr> {
        match v {
            V::Typed(e) if e.ty == ScalarType::U32 => Ok(e),
            // Other integer indices are converted to u32 exactly as the CPU path does
            // (`as u32`), so a negative index becomes a huge one and is out of bounds.
            V::Typed(e) if e.ty.as_scalar().is_some_and(ScalarType::is_int) => Ok(Expr {
                ty: ScalarType::U32.into(),
                kind: ExprKind::Cast(Box::new(e)),
            }),
            V::Typed(e) => {
                let hint = self.hint(&e);
                self.err(format!("an index must be an integer, found {}{hint}", e.ty))
            }
            V::Int(n) if (0..=u32::MAX as i128).contains(&n) => Ok(lit(Literal::U32(n as u32))),
            V::Int(n) => self.err(format!("index {n} is outside the u32 range")),
            V::Float(_) => self.err("an index must be an integer, found a float literal"),
            V::Lanes(_) => self.err("an index must be an integer, found a vector"),
        }
    }

    /// Rust infers `let x = 1.5;` from how `x` is used later; the builder, which sees
    /// statements in order, first gives it the default type (`f64`, `i32`). When the
    /// first read of such a local meets a value of another type, and the local has not
    /// been assigned, its declaration is retyped to that type, as rustc's inference would
    /// have it (`let x = 1.5; a[i] * x` with `a: &[f32]`). Returns whether `e` was
    /// such a local and now has type `ty`.
    fn retype(&mut self, e: &Expr, ty: Type) -> bool {
        let ExprKind::Local(id) = e.kind else {
            return false;
        };
        // Untyped literals are scalars; a vector comes only from `splat` or `new`.
        let Some(ty) = ty.as_scalar() else {
            return false;
        };
        let i = id as usize;
        if !self.defaulted[i] || self.assigned[i] || self.uses[i].get() != 1 {
            return false;
        }
        let literal = match self.untyped_init[i] {
            Some(V::Int(n)) => Literal::int(ty, n),
            Some(V::Float(f)) => Literal::float(ty, f),
            _ => None,
        };
        let Some(literal) = literal else {
            return false;
        };
        let found = self
            .frames
            .iter_mut()
            .any(|(_, stmts)| set_let_init(stmts, id, lit(literal)));
        if !found {
            return false;
        }
        self.kernel.locals[i].ty = ty.into();
        self.defaulted[i] = false;
        self.untyped_init[i] = None;
        true
    }

    /// Gives two values one type: a literal adopts the other side's type.
    fn unify(&mut self, a: V, b: V, what: &str) -> R<(Expr, Expr)> {
        match (a, b) {
            (V::Typed(a), V::Typed(b)) if a.ty != b.ty && self.retype(&a, b.ty) => {
                Ok((Expr { ty: b.ty, ..a }, b))
            }
            (V::Typed(a), V::Typed(b)) if a.ty != b.ty && self.retype(&b, a.ty) => {
                let ty = a.ty;
                Ok((a, Expr { ty, ..b }))
            }
            (V::Typed(a), V::Typed(b)) => {
                if a.ty != b.ty {
                    let hint = format!("{}{}", self.hint(&a), self.hint(&b));
                    return self.err(format!(
                        "{what}: operands have different types, {} and {}{hint}",
                        a.ty, b.ty
                    ));
                }
                Ok((a, b))
            }
            (V::Typed(a), b) => {
                let b = self.coerce(b, a.ty, what)?;
                Ok((a, b))
            }
            (a, V::Typed(b)) => {
                let a = self.coerce(a, b.ty, what)?;
                Ok((a, b))
            }
            (a, b) => {
                let a = self.default_of(a)?;
                let b = self.coerce(b, a.ty, what)?;
                Ok((a, b))
            }
        }
    }

    fn push(&mut self, s: Stmt) {
        self.frames.last_mut().expect("root frame").1.push(s);
    }

    fn new_local(&mut self, name: &str, ty: Type, mutable: bool, defaulted: bool) -> Var {
        let id = self.kernel.locals.len() as u32;
        self.kernel.locals.push(Local {
            name: name.into(),
            ty,
            mutable,
        });
        self.defaulted.push(defaulted);
        self.untyped_init.push(None);
        self.uses.push(std::cell::Cell::new(0));
        self.assigned.push(false);
        self.pending.push(false);
        Var { id }
    }

    // ---- expressions ----

    pub fn get(&self, var: Var) -> V {
        let uses = &self.uses[var.id as usize];
        uses.set(uses.get().saturating_add(1));
        V::Typed(Expr {
            ty: self.kernel.locals[var.id as usize].ty,
            kind: ExprKind::Local(var.id),
        })
    }

    pub fn load(&mut self, mem: Mem, index: V) -> R<V> {
        let index = self.index(index)?;
        Ok(V::Typed(Expr {
            ty: mem.elem,
            kind: ExprKind::Load {
                mem: mem.mem,
                index: Box::new(index),
            },
        }))
    }

    pub fn len(&mut self, mem: Mem) -> V {
        V::Typed(Expr {
            ty: ScalarType::U32.into(),
            kind: ExprKind::Len(mem.mem),
        })
    }

    pub fn builtin(&mut self, b: Builtin, axis: Axis) -> V {
        V::Typed(Expr {
            ty: ScalarType::U32.into(),
            kind: ExprKind::Builtin(b, axis),
        })
    }

    pub fn unary(&mut self, op: UnaryOp, a: V) -> R<V> {
        let a = match (op, a) {
            (UnaryOp::Neg, V::Int(n)) => return Ok(V::Int(-n)),
            (UnaryOp::Neg, V::Float(f)) => return Ok(V::Float(-f)),
            (_, a) => self.default_of(a)?,
        };
        let t = a.ty.scalar;
        let ok = match op {
            UnaryOp::Neg => t.is_float() || t.is_signed_int(),
            UnaryOp::Not => !a.ty.is_vector() && (t == ScalarType::Bool || t.is_int()),
        };
        if !ok {
            let sym = if op == UnaryOp::Neg { "-" } else { "!" };
            return self.err(format!("unary `{sym}` is not defined on {}", a.ty));
        }
        Ok(V::Typed(Expr {
            ty: a.ty,
            kind: ExprKind::Unary(op, Box::new(a)),
        }))
    }

    pub fn binary(&mut self, op: BinaryOp, a: V, b: V) -> R<V> {
        use BinaryOp::*;
        // Fold arithmetic on two untyped literals so `2 * TILE` stays a flexible literal.
        match (op, &a, &b) {
            (Add, V::Int(x), V::Int(y)) => return Ok(V::Int(x + y)),
            (Sub, V::Int(x), V::Int(y)) => return Ok(V::Int(x - y)),
            (Mul, V::Int(x), V::Int(y)) => return Ok(V::Int(x * y)),
            (Add, V::Float(x), V::Float(y)) => return Ok(V::Float(x + y)),
            (Sub, V::Float(x), V::Float(y)) => return Ok(V::Float(x - y)),
            (Mul, V::Float(x), V::Float(y)) => return Ok(V::Float(x * y)),
            _ => {}
        }
        let what = format!("operator `{}`", op.symbol());
        let (a, b) = match op {
            Shl | Shr => {
                let a = self.default_of(a)?;
                let b = self.coerce(b, ScalarType::U32, "a shift amount")?;
                (a, b)
            }
            LogicalAnd | LogicalOr => (
                self.coerce(a, ScalarType::Bool, &what)?,
                self.coerce(b, ScalarType::Bool, &what)?,
            ),
            _ => self.unify(a, b, &what)?,
        };
        if a.ty.is_vector() || b.ty.is_vector() {
            return self.vector_binary(op, a, b);
        }
        let ty = a.ty.scalar;
        let (ok, result) = match op {
            Add | Sub | Mul | Div | Rem => (ty.is_numeric(), ty),
            BitAnd | BitOr | BitXor => (ty.is_int() || ty == ScalarType::Bool, ty),
            Shl | Shr => (ty.is_int(), ty),
            Eq | Ne => (true, ScalarType::Bool),
            Lt | Le | Gt | Ge => (ty.is_numeric(), ScalarType::Bool),
            LogicalAnd | LogicalOr => (true, ScalarType::Bool),
        };
        if !ok {
            return self.err(format!("{what} is not defined on {ty}"));
        }
        if let Some(folded) = fold_u32(op, &a, &b) {
            return Ok(V::lit(Literal::U32(folded)));
        }
        Ok(V::Typed(Expr {
            ty: result.into(),
            kind: ExprKind::Binary(op, Box::new(a), Box::new(b)),
        }))
    }

    /// Lane-wise `+ - * /` (and `%` on integers) on two vectors of one type. Integer
    /// `/` and `%` become one scalar operation per lane, so each lane follows the IR's
    /// division-by-zero rule with the scalar code every backend already has.
    fn vector_binary(&mut self, op: BinaryOp, a: Expr, b: Expr) -> R<V> {
        use BinaryOp::*;
        let ty = a.ty;
        let allowed = matches!(op, Add | Sub | Mul | Div) || (op == Rem && ty.scalar.is_int());
        if !allowed || a.ty != b.ty {
            return self.err(format!(
                "`{} {} {}` is not defined: vectors take + - * / (and % on integers) with a \
                 vector of the same type, lane by lane; compare or shift their lanes (`v.x`)",
                a.ty,
                op.symbol(),
                b.ty
            ));
        }
        if ty.scalar.is_int() && matches!(op, Div | Rem) {
            let lanes = (0..ty.lanes)
                .map(|lane| Expr {
                    ty: ty.scalar.into(),
                    kind: ExprKind::Binary(
                        op,
                        Box::new(extract(a.clone(), lane)),
                        Box::new(extract(b.clone(), lane)),
                    ),
                })
                .collect();
            return Ok(V::Typed(Expr {
                ty,
                kind: ExprKind::Construct(lanes),
            }));
        }
        Ok(V::Typed(Expr {
            ty,
            kind: ExprKind::Binary(op, Box::new(a), Box::new(b)),
        }))
    }

    /// `Vec2::new(x, y)` / `Vec4::new(x, y, z, w)`: a vector of the lanes' common type
    /// (untyped literals take it). With only untyped lanes, the vector's lane type is
    /// inferred from where it is used, as Rust does (see [`V::Lanes`]).
    pub fn vector(&mut self, lanes: Vec<V>) -> R<V> {
        let n = lanes.len();
        let typed = lanes.iter().find_map(|a| match a {
            V::Typed(e) => Some(e.ty),
            _ => None,
        });
        let Some(ty) = typed else {
            if lanes.iter().any(|l| matches!(l, V::Lanes(_))) {
                return self.err(format!("the lanes of Vec{n} must be scalars"));
            }
            return Ok(V::Lanes(lanes));
        };
        let vty = Type::vector(ty.scalar, n as u8);
        if ty.is_vector() || !vty.is_well_formed() {
            return self.err(format!(
                "Vec{n} of {ty} is not defined: vectors have 2 or 4 lanes of f32, i32 or u32"
            ));
        }
        Ok(V::Typed(self.vector_of(vty, lanes)?))
    }

    /// The vector of type `ty` made of `lanes` (each converted to the lane type).
    fn vector_of(&self, ty: Type, lanes: Vec<V>) -> R<Expr> {
        if !ty.is_well_formed() {
            return self.err(format!(
                "{ty} is not defined: vectors have 2 or 4 lanes of f32, i32 or u32"
            ));
        }
        let what = format!("a lane of {ty}");
        let lanes = lanes
            .into_iter()
            .map(|a| match a {
                V::Typed(e) if e.ty == ty.scalar => Ok(e),
                V::Typed(e) => self.err(format!("{what} must be {}, found {}", ty.scalar, e.ty)),
                V::Int(n) => Literal::int(ty.scalar, n).map(lit).ok_or(()).or_else(|_| {
                    self.err(format!(
                        "{what}: integer literal {n} is not a valid {}",
                        ty.scalar
                    ))
                }),
                V::Float(f) => Literal::float(ty.scalar, f)
                    .map(lit)
                    .ok_or(())
                    .or_else(|_| {
                        self.err(format!(
                            "{what} must be {}, found a float literal",
                            ty.scalar
                        ))
                    }),
                V::Lanes(_) => self.err(format!("{what} must be a scalar")),
            })
            .collect::<R<Vec<_>>>()?;
        Ok(Expr {
            ty,
            kind: ExprKind::Construct(lanes),
        })
    }

    /// `Vec{lanes}::splat(x)`.
    pub fn splat(&mut self, x: V, lanes: u8) -> R<V> {
        self.vector(vec![x; lanes as usize])
    }

    /// `v.x` (lane 0), `v.y`, `v.z`, `v.w`.
    pub fn lane(&mut self, v: V, lane: u8) -> R<V> {
        let v = self.default_of(v)?;
        if !v.ty.is_vector() {
            return self.err(format!(
                "`.{}` reads a vector's lane, and this is {}",
                Type::lane_name(lane.min(3)),
                v.ty
            ));
        }
        if lane >= v.ty.lanes {
            return self.err(format!(
                "{} has no lane `.{}`",
                v.ty,
                Type::lane_name(lane.min(3))
            ));
        }
        Ok(V::Typed(extract(v, lane)))
    }

    pub fn cast(&mut self, a: V, ty: ScalarType) -> R<V> {
        if let V::Typed(e) = &a {
            if e.ty.is_vector() {
                return self.err(format!(
                    "`as` converts scalars, and this is {}: convert each lane (`v.x as {ty}`)",
                    e.ty
                ));
            }
        }
        if ty == ScalarType::Bool {
            return self.err("`as bool` is not defined; compare with zero instead");
        }
        match a {
            V::Int(n) => Ok(V::Typed(match Literal::int(ty, n) {
                Some(l) => lit(l),
                // Rust `as` wraps out-of-range integer literals; so do we.
                None => {
                    let e = self.default_of(V::Int(n))?;
                    cast_expr(e, ty)
                }
            })),
            V::Float(f) if ty.is_float() => Ok(V::Typed(lit(Literal::float(ty, f).unwrap()))),
            V::Float(f) => Ok(V::Typed(cast_expr(lit(Literal::f64(f)), ty))),
            V::Typed(e) if e.ty == ty => Ok(V::Typed(e)),
            V::Typed(e) => Ok(V::Typed(cast_expr(e, ty))),
            V::Lanes(_) => self.err(format!(
                "`as` converts scalars, and this is a vector: convert each lane (`v.x as {ty}`)"
            )),
        }
    }

    /// `T::bitcast(a)`: `a`'s bits as `ty`, which must have `a`'s size.
    pub fn bitcast(&mut self, a: V, ty: ScalarType) -> R<V> {
        let e = match a {
            V::Lanes(_) => {
                return self
                    .err("`bitcast` reinterprets scalars, and this is a vector: bitcast each lane")
            }
            V::Typed(e) if e.ty.is_vector() => {
                return self.err(format!(
                    "`bitcast` reinterprets scalars, and this is {}: bitcast each lane",
                    e.ty
                ))
            }
            V::Typed(e) => e,
            // An untyped literal takes the type of the same size as the target, as
            // `f32::from_bits(0x7fc0_0000)` reads a u32.
            V::Int(_) | V::Float(_) => {
                let lit_ty = match (ty.size_bytes(), &a) {
                    (4, V::Int(_)) => ScalarType::U32,
                    (8, V::Int(_)) => ScalarType::U64,
                    (4, V::Float(_)) => ScalarType::F32,
                    _ => ScalarType::F64,
                };
                self.coerce(a, lit_ty, "a bitcast operand")?
            }
        };
        let from = e.ty.scalar;
        if !bitcast_allowed(from, ty) {
            return self.err(format!(
                "`{ty}::bitcast` takes a value of the same size ({}), not {from}",
                same_size_names(ty)
            ));
        }
        if from == ty {
            return Ok(V::Typed(e));
        }
        Ok(V::Typed(Expr {
            ty: ty.into(),
            kind: ExprKind::Bitcast(Box::new(e)),
        }))
    }

    pub fn math(&mut self, f: MathFn, args: Vec<V>) -> R<V> {
        if args.len() != f.arity() {
            return self.err(format!(
                "{} takes {} argument(s), found {}",
                f.name(),
                f.arity(),
                args.len()
            ));
        }
        // The first typed argument fixes the type; all-literal calls default like Rust.
        let ty = match args.iter().find_map(|a| match a {
            V::Typed(e) => Some(e.ty),
            _ => None,
        }) {
            Some(t) => t,
            None => self.default_of(args[0].clone())?.ty,
        };
        let Some(ty) = ty.as_scalar() else {
            return self.err(format!(
                "{} takes scalars, and this is {ty}: apply it to each lane (`v.x`)",
                f.name()
            ));
        };
        let what = format!("an argument of {}", f.name());
        let args = args
            .into_iter()
            .map(|a| self.coerce(a, ty, &what))
            .collect::<R<Vec<_>>>()?;
        let ok = f.accepts(ty);
        if !ok {
            return self.err(format!("{} is not defined on {ty}", f.name()));
        }
        Ok(V::Typed(Expr {
            ty: f.result_type(ty).into(),
            kind: ExprKind::Math(f, args),
        }))
    }

    /// `x.powi(n)`: `x` to the `i32` power `n` by repeated squaring, emitted as a loop
    /// (the CPU backend runs the same algorithm, so results agree bit for bit).
    pub fn powi(&mut self, x: V, n: V) -> R<V> {
        let x = match x {
            V::Typed(e) => e,
            other => self.default_of(other)?,
        };
        if !x.ty.as_scalar().is_some_and(ScalarType::is_float) {
            return self.err(format!("powi is defined on floats, found {}", x.ty));
        }
        let ty = x.ty;
        let n = self.coerce(n, ScalarType::I32, "the exponent of powi")?;
        let n = self.let_("powi_n", None, false, V::Typed(n))?;
        let result = self.let_("powi_r", Some(ty), true, V::Int(1))?;
        let base = self.let_("powi_b", None, true, V::Typed(x))?;
        // |n| as u32: abs wraps at i32::MIN, whose bits are then 2^31 as u32.
        let abs = self.math(MathFn::Abs, vec![self.get(n)])?;
        let abs = self.cast(abs, ScalarType::U32)?;
        let k = self.let_("powi_k", None, true, abs)?;
        self.begin_loop();
        let more = self.binary(BinaryOp::Gt, self.get(k), V::Int(0))?;
        self.break_unless(more)?;
        let bit = self.binary(BinaryOp::BitAnd, self.get(k), V::Int(1))?;
        let odd = self.binary(BinaryOp::Eq, bit, V::Int(1))?;
        self.begin_if(odd)?;
        let product = self.binary(BinaryOp::Mul, self.get(result), self.get(base))?;
        self.assign(result, product)?;
        self.end_if()?;
        let square = self.binary(BinaryOp::Mul, self.get(base), self.get(base))?;
        self.assign(base, square)?;
        let half = self.binary(BinaryOp::Shr, self.get(k), V::Int(1))?;
        self.assign(k, half)?;
        self.end_loop()?;
        let negative = self.binary(BinaryOp::Lt, self.get(n), V::Int(0))?;
        self.begin_if(negative)?;
        let inverse = self.binary(BinaryOp::Div, V::Int(1), self.get(result))?;
        self.assign(result, inverse)?;
        self.end_if()?;
        Ok(self.get(result))
    }

    /// A subgroup operation (see [`SubgroupOp`]).
    pub fn subgroup(&mut self, op: SubgroupOp, args: Vec<V>) -> R<V> {
        if args.len() != op.arity() {
            return self.err(format!(
                "{} takes {} argument(s), found {}",
                op.name(),
                op.arity(),
                args.len()
            ));
        }
        let mut args = args.into_iter();
        let mut exprs = Vec::new();
        if let Some(x) = args.next() {
            let x = if op.takes_bool() {
                self.coerce(
                    x,
                    ScalarType::Bool,
                    &format!("the argument of {}", op.name()),
                )?
            } else {
                match x {
                    V::Typed(e) => e,
                    other => self.default_of(other)?,
                }
            };
            let numeric = x.ty.as_scalar().is_some_and(ScalarType::is_numeric);
            if !op.takes_bool() && (!numeric || x.ty == ScalarType::F16) {
                return self.err(format!("{} is not defined on {}", op.name(), x.ty));
            }
            exprs.push(x);
        }
        if let Some(lane) = args.next() {
            exprs.push(self.coerce(
                lane,
                ScalarType::U32,
                &format!("the lane of {}", op.name()),
            )?);
        }
        let ty = op.result_type(exprs.first().map_or(ScalarType::U32, |e| e.ty.scalar));
        Ok(V::Typed(Expr {
            ty: ty.into(),
            kind: ExprKind::Subgroup(op, exprs),
        }))
    }

    /// An atomic read-modify-write; returns the previous value.
    pub fn atomic(&mut self, op: AtomicOp, mem: Mem, index: V, args: Vec<V>) -> R<V> {
        if mem.elem.is_vector() || !op.supports(mem.elem.scalar) {
            return self.err(format!(
                "atomic_{} is not defined on {} (u32 and i32 support every atomic, f32 \
                 supports add)",
                op.name(),
                mem.elem
            ));
        }
        if args.len() != op.arity() {
            return self.err(format!(
                "atomic_{} takes {} value(s) after the address, found {}",
                op.name(),
                op.arity(),
                args.len()
            ));
        }
        let index = self.index(index)?;
        let what = format!("an operand of atomic_{}", op.name());
        let args = args
            .into_iter()
            .map(|a| self.coerce(a, mem.elem, &what))
            .collect::<R<Vec<_>>>()?;
        let n = self.kernel.locals.len();
        let result = self.new_local(&format!("atomic_old_{n}"), mem.elem, true, false);
        self.push(Stmt::Let {
            local: result.id,
            init: None,
        });
        self.push(Stmt::Atomic {
            op,
            mem: mem.mem,
            index,
            args,
            result: Some(result.id),
        });
        Ok(self.get(result))
    }

    /// A tensor-core multiply-accumulate ([`Stmt::Mma`]) into `acc[base..base + 4]`.
    pub fn mma(&mut self, shape: MmaShape, acc: Mem, base: V, a: Vec<V>, b: Vec<V>) -> R<()> {
        let name = shape.name();
        let Memory::Local(array) = acc.mem else {
            return self.err(format!(
                "the accumulator of {name} is a thread's local array (`let mut acc = \
                 [0.0f32; N];`), not a buffer or shared array"
            ));
        };
        if acc.elem != Type::from(ScalarType::F32) {
            return self.err(format!(
                "the accumulator of {name} holds f32, not {}",
                acc.elem
            ));
        }
        if let Err(e) = shape.check_operand_counts(a.len(), b.len()) {
            return self.err(e);
        }
        let base = self.index(base)?;
        // A constant first index is checked here; others, like any index, are checked in
        // checked mode (`Launch::checked`) and trusted otherwise.
        let len = self.kernel.local_arrays[array as usize].len;
        if let ExprKind::Literal(l) = &base.kind {
            if let Some(first) = l.as_i128().filter(|i| i + 4 > len as i128) {
                return self.err(format!(
                    "{name} writes elements {first}..{} of `{}`, which holds {len}",
                    first + 4,
                    self.kernel.local_arrays[array as usize].name
                ));
            }
        }
        let what = format!("an operand of {name}");
        let mut operands = |xs: Vec<V>| {
            xs.into_iter()
                .map(|x| self.coerce(x, shape.operand_type(), &what))
                .collect::<R<Vec<_>>>()
        };
        let (a, b) = (operands(a)?, operands(b)?);
        self.push(Stmt::Mma {
            shape,
            acc: acc.mem,
            base,
            a,
            b,
        });
        Ok(())
    }

    // ---- statements ----

    /// `let [mut] name[: ty] = init;`
    pub fn let_(&mut self, name: &str, ty: Option<Type>, mutable: bool, init: V) -> R<Var> {
        let untyped = init.clone();
        let (init, defaulted) = match ty {
            Some(ty) => (
                self.coerce(init, ty, &format!("the initialiser of `{name}`"))?,
                false,
            ),
            None => {
                let untyped = !matches!(init, V::Typed(_));
                (self.default_of(init)?, untyped)
            }
        };
        let var = self.new_local(name, init.ty, mutable, defaulted);
        if defaulted {
            self.untyped_init[var.id as usize] = Some(untyped);
        }
        self.push(Stmt::Let {
            local: var.id,
            init: Some(init),
        });
        Ok(var)
    }

    pub fn assign(&mut self, var: Var, value: V) -> R<()> {
        let local = &self.kernel.locals[var.id as usize];
        if !local.mutable {
            return self.err(format!(
                "cannot assign twice to immutable local `{}`",
                local.name
            ));
        }
        let (ty, name) = (local.ty, local.name.clone());
        let value = self.coerce(value, ty, &format!("the value assigned to `{name}`"))?;
        self.assigned[var.id as usize] = true;
        self.push(Stmt::Assign {
            local: var.id,
            value,
        });
        Ok(())
    }

    pub fn store(&mut self, mem: Mem, index: V, value: V) -> R<()> {
        let index = self.index(index)?;
        let value = self.coerce(value, mem.elem, "the stored value")?;
        self.push(Stmt::Store {
            mem: mem.mem,
            index,
            value,
        });
        Ok(())
    }

    pub fn barrier(&mut self) {
        self.push(Stmt::Barrier);
    }
    pub fn ret(&mut self) {
        self.push(Stmt::Return);
    }
    pub fn brk(&mut self) {
        self.push(Stmt::Break);
    }
    pub fn cont(&mut self) {
        self.push(Stmt::Continue);
    }

    pub fn begin_if(&mut self, cond: V) -> R<()> {
        let cond = self.coerce(cond, ScalarType::Bool, "an if condition")?;
        self.frames.push((Frame::Then { cond }, Vec::new()));
        Ok(())
    }

    pub fn begin_else(&mut self) -> R<()> {
        match self.frames.pop() {
            Some((Frame::Then { cond }, then)) => {
                self.frames.push((Frame::Else { cond, then }, Vec::new()));
                Ok(())
            }
            _ => self.err("internal: else without if"),
        }
    }

    pub fn end_if(&mut self) -> R<()> {
        let s = match self.frames.pop() {
            Some((Frame::Then { cond }, then)) => Stmt::If {
                cond,
                then,
                otherwise: Vec::new(),
            },
            Some((Frame::Else { cond, then }, otherwise)) => Stmt::If {
                cond,
                then,
                otherwise,
            },
            _ => return self.err("internal: end_if without if"),
        };
        self.push(s);
        Ok(())
    }

    /// Starts `if cond { .. } else { .. }` used as a value; each arm ends with `set_value`.
    pub fn begin_if_value(&mut self, cond: V) -> R<Slot> {
        let n = self.kernel.locals.len();
        let var = self.new_local(
            &format!("if_value_{n}"),
            ScalarType::Bool.into(),
            true,
            false,
        );
        self.pending[var.id as usize] = true;
        self.push(Stmt::Let {
            local: var.id,
            init: None,
        });
        self.begin_if(cond)?;
        Ok(Slot { var })
    }

    pub fn set_value(&mut self, slot: Slot, v: V) -> R<()> {
        let id = slot.var.id as usize;
        if self.pending[id] {
            let e = self.default_of(v.clone())?;
            self.kernel.locals[id].ty = e.ty;
            self.pending[id] = false;
        }
        self.assign(slot.var, v)
    }

    pub fn end_if_value(&mut self, slot: Slot) -> R<V> {
        self.end_if()?;
        if self.pending[slot.var.id as usize] {
            return self.err("an if expression needs a value in both arms");
        }
        Ok(self.get(slot.var))
    }

    /// Starts `for name in (start..end).step_by(step)`; returns the loop variable.
    pub fn begin_for(&mut self, name: &str, start: V, end: V, step: Option<V>) -> R<Var> {
        let defaulted = !matches!(start, V::Typed(_)) && !matches!(end, V::Typed(_));
        let (start, end) = self.unify(start, end, "a for range")?;
        let ty = match start.ty.as_scalar() {
            Some(t @ (ScalarType::U32 | ScalarType::I32)) => t,
            _ => {
                return self.err(format!(
                    "a for range must be u32 or i32, found {}",
                    start.ty
                ))
            }
        };
        let step = match step {
            Some(s) => self.coerce(s, ty, "a step_by amount")?,
            None => lit(Literal::int(ty, 1).unwrap()),
        };
        let var = self.new_local(name, ty.into(), false, defaulted);
        self.frames.push((
            Frame::For {
                var: var.id,
                start,
                end,
                step,
            },
            Vec::new(),
        ));
        Ok(var)
    }

    pub fn end_for(&mut self) -> R<()> {
        match self.frames.pop() {
            Some((
                Frame::For {
                    var,
                    start,
                    end,
                    step,
                },
                body,
            )) => {
                self.push(Stmt::For {
                    var,
                    start,
                    end,
                    step,
                    body,
                });
                Ok(())
            }
            _ => self.err("internal: end_for without for"),
        }
    }

    pub fn begin_loop(&mut self) {
        self.frames.push((Frame::Loop, Vec::new()));
    }

    /// Inside a loop: `if !cond { break }` (how `while` is expressed).
    pub fn break_unless(&mut self, cond: V) -> R<()> {
        let cond = self.coerce(cond, ScalarType::Bool, "a while condition")?;
        self.push(Stmt::If {
            cond: Expr {
                ty: ScalarType::Bool.into(),
                kind: ExprKind::Unary(UnaryOp::Not, Box::new(cond)),
            },
            then: vec![Stmt::Break],
            otherwise: Vec::new(),
        });
        Ok(())
    }

    pub fn end_loop(&mut self) -> R<()> {
        match self.frames.pop() {
            Some((Frame::Loop, body)) => {
                self.push(Stmt::Loop { body });
                Ok(())
            }
            _ => self.err("internal: end_loop without loop"),
        }
    }

    /// Finishes and validates the kernel.
    pub fn finish(mut self) -> R<Kernel> {
        if self.frames.len() != 1 {
            return self.err("internal: unclosed block");
        }
        self.kernel.body = self.frames.pop().unwrap().1;
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
