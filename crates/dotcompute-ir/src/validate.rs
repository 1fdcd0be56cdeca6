//! The IR validator: every invariant listed in the crate docs is checked here, so that
//! backends can trust a validated kernel.

use crate::kernel::*;
use crate::types::{ScalarType, Type};
use thiserror::Error;

/// Why a kernel is malformed. `path` locates the problem (`body[2].then[0]`).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid kernel `{kernel}` at {path}: {message}")]
pub struct ValidationError {
    pub kernel: String,
    pub path: String,
    pub message: String,
}

/// Checks every invariant of the IR. See the crate documentation for the list.
pub fn validate(kernel: &Kernel) -> Result<(), ValidationError> {
    let mut v = Validator {
        kernel,
        path: Vec::new(),
        in_scope: vec![false; kernel.locals.len()],
        declared: vec![false; kernel.locals.len()],
        loop_depth: 0,
    };
    v.signature()?;
    v.block(&kernel.body, "body")
}

struct Validator<'k> {
    kernel: &'k Kernel,
    path: Vec<String>,
    /// Locals visible at the current point.
    in_scope: Vec<bool>,
    /// Locals declared anywhere so far (each may be declared once).
    declared: Vec<bool>,
    loop_depth: u32,
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl<'k> Validator<'k> {
    fn err<T>(&self, message: impl Into<String>) -> Result<T, ValidationError> {
        Err(ValidationError {
            kernel: self.kernel.name.clone(),
            path: if self.path.is_empty() {
                "signature".into()
            } else {
                self.path.join(".")
            },
            message: message.into(),
        })
    }

    fn signature(&mut self) -> Result<(), ValidationError> {
        let k = self.kernel;
        if k.version != IR_VERSION {
            return self.err(format!(
                "IR version {} is not supported (this build reads version {IR_VERSION})",
                k.version
            ));
        }
        if !is_identifier(&k.name) {
            return self.err(format!("kernel name `{}` is not an identifier", k.name));
        }
        let mut names = std::collections::HashSet::new();
        for (i, p) in k.params.iter().enumerate() {
            if !is_identifier(p.name()) {
                return self.err(format!(
                    "parameter {i} name `{}` is not an identifier",
                    p.name()
                ));
            }
            if !names.insert(p.name()) {
                return self.err(format!("parameter name `{}` is used twice", p.name()));
            }
            let ty = match p {
                Param::Buffer { elem, .. } => {
                    if !elem.is_well_formed() {
                        return self.err(format!(
                            "buffer `{}` has element type {elem}: vectors have 2 or 4 lanes \
                             of f32, i32 or u32",
                            p.name()
                        ));
                    }
                    elem.scalar
                }
                Param::Scalar { ty, .. } => *ty,
            };
            if ty.is_storage_only() {
                return self.err(format!(
                    "parameter `{}` has type {ty}, which kernels cannot use yet (bf16 is a \
                     storage type: buffers, transfers and Device::matmul; f16 is a kernel type)",
                    p.name()
                ));
            }
            if let Param::Buffer { elem, name, .. } = p {
                if *elem == ScalarType::Bool {
                    return self.err(format!(
                        "buffer `{name}` has element type bool, which cannot be stored in \
                         buffers; use u32"
                    ));
                }
            }
        }
        let mut dynamic = 0;
        for s in &k.shared {
            if !is_identifier(&s.name) {
                return self.err(format!(
                    "shared array name `{}` is not an identifier",
                    s.name
                ));
            }
            if s.elem == ScalarType::Bool || s.elem.is_storage_only() {
                return self.err(format!(
                    "shared array `{}` has element type {}",
                    s.name, s.elem
                ));
            }
            match s.len {
                SharedLen::Static(0) => {
                    return self.err(format!("shared array `{}` has length 0", s.name))
                }
                SharedLen::Static(_) => {}
                SharedLen::Dynamic => dynamic += 1,
            }
        }
        if dynamic > 1 {
            return self.err(format!(
                "{dynamic} dynamic shared arrays; a kernel may have at most one"
            ));
        }
        for a in &k.local_arrays {
            if !is_identifier(&a.name) {
                return self.err(format!(
                    "local array name `{}` is not an identifier",
                    a.name
                ));
            }
            if a.elem == ScalarType::Bool || a.elem.is_storage_only() {
                return self.err(format!(
                    "local array `{}` has element type {}",
                    a.name, a.elem
                ));
            }
            if !(1..=crate::build::LOCAL_ARRAY_MAX).contains(&a.len) {
                return self.err(format!(
                    "local array `{}` has length {} (1..={} allowed)",
                    a.name,
                    a.len,
                    crate::build::LOCAL_ARRAY_MAX
                ));
            }
        }
        for l in &k.locals {
            if !is_identifier(&l.name) {
                return self.err(format!("local name `{}` is not an identifier", l.name));
            }
            if !l.ty.is_well_formed() {
                return self.err(format!("local `{}` has type {}", l.name, l.ty));
            }
        }
        Ok(())
    }

    fn block(&mut self, stmts: &[Stmt], name: &str) -> Result<(), ValidationError> {
        let saved_scope = self.in_scope.clone();
        for (i, s) in stmts.iter().enumerate() {
            self.path.push(format!("{name}[{i}]"));
            self.stmt(s)?;
            self.path.pop();
        }
        self.in_scope = saved_scope;
        Ok(())
    }

    fn local(&self, id: u32) -> Result<&'k Local, ValidationError> {
        match self.kernel.locals.get(id as usize) {
            Some(l) => Ok(l),
            None => self.err(format!(
                "local {id} does not exist ({} locals)",
                self.kernel.locals.len()
            )),
        }
    }

    fn declare(&mut self, id: u32) -> Result<&'k Local, ValidationError> {
        let l = self.local(id)?;
        if self.declared[id as usize] {
            return self.err(format!("local `{}` ({id}) is declared twice", l.name));
        }
        self.declared[id as usize] = true;
        self.in_scope[id as usize] = true;
        Ok(l)
    }

    fn use_local(&self, id: u32) -> Result<&'k Local, ValidationError> {
        let l = self.local(id)?;
        if !self.in_scope[id as usize] {
            return self.err(format!(
                "local `{}` ({id}) is used outside the block that declares it",
                l.name
            ));
        }
        Ok(l)
    }

    fn memory(&self, mem: Memory, write: bool) -> Result<Type, ValidationError> {
        match mem {
            Memory::Buffer(i) => match self.kernel.params.get(i as usize) {
                Some(Param::Buffer { elem, access, name }) => {
                    if write && *access == Access::Read {
                        return self.err(format!(
                            "buffer `{name}` is read-only (`&[T]`) but is written here; \
                             declare it `&mut [T]`"
                        ));
                    }
                    Ok(*elem)
                }
                Some(Param::Scalar { name, .. }) => {
                    self.err(format!("parameter `{name}` is a scalar, not a buffer"))
                }
                None => self.err(format!("buffer parameter {i} does not exist")),
            },
            Memory::Shared(i) => match self.kernel.shared.get(i as usize) {
                Some(s) => Ok(s.elem.into()),
                None => self.err(format!("shared array {i} does not exist")),
            },
            Memory::Local(i) => match self.kernel.local_arrays.get(i as usize) {
                Some(a) => Ok(a.elem.into()),
                None => self.err(format!("local array {i} does not exist")),
            },
        }
    }

    fn expect(&self, e: &Expr, ty: impl Into<Type>, what: &str) -> Result<(), ValidationError> {
        let ty = ty.into();
        self.expr(e)?;
        if e.ty != ty {
            return self.err(format!("{what} must be {ty}, found {}", e.ty));
        }
        Ok(())
    }

    fn stmt(&mut self, s: &Stmt) -> Result<(), ValidationError> {
        match s {
            Stmt::Let { local, init } => {
                if let Some(init) = init {
                    // The initialiser is evaluated before the local comes into scope.
                    self.expr(init)?;
                }
                let l = self.declare(*local)?;
                if let Some(init) = init {
                    if init.ty != l.ty {
                        return self.err(format!(
                            "local `{}` has type {} but is initialised with {}",
                            l.name, l.ty, init.ty
                        ));
                    }
                }
            }
            Stmt::Assign { local, value } => {
                let l = self.use_local(*local)?;
                if !l.mutable {
                    return self.err(format!("local `{}` is immutable", l.name));
                }
                self.expect(value, l.ty, &format!("the value assigned to `{}`", l.name))?;
            }
            Stmt::Store { mem, index, value } => {
                let elem = self.memory(*mem, true)?;
                self.expect(index, ScalarType::U32, "an index")?;
                self.expect(value, elem, "the stored value")?;
            }
            Stmt::Atomic {
                op,
                mem,
                index,
                args,
                result,
            } => {
                let elem = self.memory(*mem, true)?;
                if let Memory::Local(_) = mem {
                    return self.err(format!(
                        "atomic {} on a local array: local arrays are private to a thread; \
                         use a plain read and write",
                        op.name()
                    ));
                }
                if elem.is_vector() || !op.supports(elem.scalar) {
                    return self.err(format!(
                        "atomic {} is not defined on {elem} (u32 and i32 support all \
                         atomics, f32 supports add)",
                        op.name()
                    ));
                }
                self.expect(index, ScalarType::U32, "an index")?;
                if args.len() != op.arity() {
                    return self.err(format!(
                        "atomic {} takes {} operand(s), found {}",
                        op.name(),
                        op.arity(),
                        args.len()
                    ));
                }
                for a in args {
                    self.expect(a, elem, "an atomic operand")?;
                }
                if let Some(r) = result {
                    let l = self.use_local(*r)?;
                    if !l.mutable || l.ty != elem {
                        return self.err(format!(
                            "atomic result local `{}` must be a mutable {elem}",
                            l.name
                        ));
                    }
                }
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                self.expect(cond, ScalarType::Bool, "an if condition")?;
                self.block(then, "then")?;
                self.block(otherwise, "else")?;
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                self.expr(start)?;
                self.expr(end)?;
                self.expr(step)?;
                let saved = self.in_scope.clone();
                let l = self.declare(*var)?;
                if !(l.ty == ScalarType::U32 || l.ty == ScalarType::I32) {
                    return self.err(format!(
                        "loop variable `{}` must be u32 or i32, found {}",
                        l.name, l.ty
                    ));
                }
                if l.mutable {
                    return self.err(format!("loop variable `{}` must be immutable", l.name));
                }
                for (e, what) in [(start, "start"), (end, "end"), (step, "step")] {
                    if e.ty != l.ty {
                        return self.err(format!(
                            "loop {what} has type {} but `{}` is {}",
                            e.ty, l.name, l.ty
                        ));
                    }
                }
                self.loop_depth += 1;
                self.block(body, "body")?;
                self.loop_depth -= 1;
                self.in_scope = saved;
            }
            Stmt::Loop { body } => {
                self.loop_depth += 1;
                self.block(body, "body")?;
                self.loop_depth -= 1;
            }
            Stmt::Break | Stmt::Continue => {
                if self.loop_depth == 0 {
                    return self.err("break or continue outside a loop");
                }
            }
            Stmt::Return | Stmt::Barrier => {}
            Stmt::Mma {
                shape,
                acc,
                base,
                a,
                b,
            } => {
                let name = shape.name();
                let elem = self.memory(*acc, true)?;
                if !matches!(acc, Memory::Local(_)) || elem != Type::from(ScalarType::F32) {
                    return self.err(format!(
                        "the accumulator of {name} must be an f32 local array, found `{}` of \
                         {elem}",
                        self.kernel.memory_name(*acc)
                    ));
                }
                self.expect(base, ScalarType::U32, "the accumulator's first index")?;
                if let Err(e) = shape.check_operand_counts(a.len(), b.len()) {
                    return self.err(e);
                }
                for x in a.iter().chain(b) {
                    self.expect(x, shape.operand_type(), &format!("an {name} operand"))?;
                }
            }
        }
        Ok(())
    }

    /// The type of `e`, which must be a scalar (`what` names its role in errors).
    fn scalar_of(&self, e: &Expr, what: &str) -> Result<ScalarType, ValidationError> {
        match e.ty.as_scalar() {
            Some(t) => Ok(t),
            None => self.err(format!("{what} must be a scalar, found {}", e.ty)),
        }
    }

    /// The expressions that may have a vector type: loads, locals, lane-wise arithmetic,
    /// selects and constructions.
    fn vector_expr(&self, e: &Expr) -> Result<(), ValidationError> {
        let ty = e.ty;
        if !ty.is_well_formed() {
            return self.err(format!(
                "type {ty} is not defined (vectors have 2 or 4 lanes of f32, i32 or u32)"
            ));
        }
        match &e.kind {
            ExprKind::Local(_) | ExprKind::Load { .. } | ExprKind::Select { .. } => {
                self.scalar_expr(e, ty)
            }
            ExprKind::Unary(UnaryOp::Neg, a) => {
                self.expect(a, ty, "the operand of a vector negation")?;
                if ty.scalar == ScalarType::U32 {
                    return self.err(format!("unary Neg is not defined on {ty}"));
                }
                Ok(())
            }
            ExprKind::Binary(op, a, b) => {
                use BinaryOp::*;
                // Integer `/` and `%` exist only split into lanes (what the builder
                // emits), so each lane gets the scalar division-by-zero rule.
                let ok = matches!(op, Add | Sub | Mul) || (*op == Div && ty.scalar.is_float());
                if !ok {
                    return self.err(format!(
                        "`{} {} {}` is not defined on vectors (they take + - * and float /; \
                         integer / and % are written lane by lane)",
                        a.ty,
                        op.symbol(),
                        b.ty
                    ));
                }
                self.expect(a, ty, "a vector operand")?;
                self.expect(b, ty, "a vector operand")
            }
            ExprKind::Construct(lanes) => {
                if lanes.len() != ty.lanes as usize {
                    return self.err(format!("{ty} is built from {} values", lanes.len()));
                }
                for l in lanes {
                    self.expect(l, ty.scalar, "a vector lane")?;
                }
                Ok(())
            }
            _ => self.err(format!("this expression cannot have the vector type {ty}")),
        }
    }

    fn expr(&self, e: &Expr) -> Result<(), ValidationError> {
        if e.ty.is_vector() {
            return self.vector_expr(e);
        }
        self.scalar_expr(e, e.ty)
    }

    /// The checks shared by scalar and vector expressions (`ty` is `e.ty`); vector
    /// operands are refused everywhere a scalar is needed.
    fn scalar_expr(&self, e: &Expr, ty: Type) -> Result<(), ValidationError> {
        // Only the kinds `vector_expr` hands over may carry a vector type here.
        let scalar = ty.scalar;
        match &e.kind {
            ExprKind::Literal(l) => {
                if ty != l.ty() {
                    return self.err(format!("literal {l} is labelled {ty}"));
                }
            }
            ExprKind::Local(id) => {
                let l = self.use_local(*id)?;
                if l.ty != ty {
                    return self.err(format!(
                        "local `{}` is {} but is read as {ty}",
                        l.name, l.ty
                    ));
                }
            }
            ExprKind::Scalar(i) => match self.kernel.params.get(*i as usize) {
                Some(Param::Scalar { ty: pty, name }) => {
                    if ty != *pty {
                        return self.err(format!("scalar `{name}` is {pty} but is read as {ty}"));
                    }
                }
                _ => return self.err(format!("parameter {i} is not a scalar parameter")),
            },
            ExprKind::Builtin(b, _) => {
                if ty != ScalarType::U32 {
                    return self.err(format!("builtin {} is u32, labelled {ty}", b.name()));
                }
            }
            ExprKind::Subgroup(op, args) => {
                if args.len() != op.arity() {
                    return self.err(format!(
                        "{} takes {} operand(s), found {}",
                        op.name(),
                        op.arity(),
                        args.len()
                    ));
                }
                for a in args {
                    self.expr(a)?;
                }
                let arg = match args.first() {
                    Some(a) => self.scalar_of(a, "a subgroup operand")?,
                    None => ScalarType::U32,
                };
                let arg_ok = match args.first() {
                    None => true,
                    Some(_) if op.takes_bool() => arg == ScalarType::Bool,
                    // f16 would need a rounding after every combining step.
                    Some(_) => arg.is_numeric() && arg != ScalarType::F16,
                };
                if !arg_ok {
                    return self.err(format!("{} is not defined on {arg}", op.name()));
                }
                if let Some(b) = args.get(1) {
                    if b.ty != ScalarType::U32 {
                        return self.err(format!("{}'s lane operand must be u32", op.name()));
                    }
                }
                if ty != op.result_type(arg) {
                    return self.err(format!(
                        "{} yields {}, labelled {ty}",
                        op.name(),
                        op.result_type(arg)
                    ));
                }
            }
            ExprKind::Len(mem) => {
                self.memory(*mem, false)?;
                if ty != ScalarType::U32 {
                    return self.err("a length is u32");
                }
            }
            ExprKind::Load { mem, index } => {
                let elem = self.memory(*mem, false)?;
                self.expect(index, ScalarType::U32, "an index")?;
                if elem != ty {
                    return self.err(format!(
                        "load from `{}` yields {elem}, labelled {ty}",
                        self.kernel.memory_name(*mem)
                    ));
                }
            }
            ExprKind::Unary(op, a) => {
                self.expr(a)?;
                let at = self.scalar_of(a, "a unary operand")?;
                let ok = match op {
                    UnaryOp::Neg => at.is_float() || at.is_signed_int(),
                    UnaryOp::Not => at == ScalarType::Bool || at.is_int(),
                };
                if !ok || a.ty != ty {
                    return self.err(format!("unary {op:?} is not defined on {}", a.ty));
                }
            }
            ExprKind::Binary(op, a, b) => {
                self.expr(a)?;
                self.expr(b)?;
                let at = self.scalar_of(a, "an operand")?;
                let bt = self.scalar_of(b, "an operand")?;
                self.binary(*op, at, bt, scalar)?;
            }
            ExprKind::Cast(a) => {
                self.expr(a)?;
                let at = self.scalar_of(a, "a cast operand")?;
                if ty == ScalarType::Bool && at != ScalarType::Bool {
                    return self.err(format!(
                        "cast from {at} to bool is not defined; compare with zero instead"
                    ));
                }
            }
            ExprKind::Bitcast(a) => {
                self.expr(a)?;
                let at = self.scalar_of(a, "a bitcast operand")?;
                if !crate::build::bitcast_allowed(at, scalar) {
                    return self.err(format!(
                        "bitcast from {at} to {ty} is not defined: both must be 4-byte or \
                         both 8-byte numeric scalars"
                    ));
                }
            }
            ExprKind::Math(f, args) => {
                if args.len() != f.arity() {
                    return self.err(format!(
                        "{} takes {} argument(s), found {}",
                        f.name(),
                        f.arity(),
                        args.len()
                    ));
                }
                let arg_ty = match args.first() {
                    Some(a) => self.scalar_of(a, "a math argument")?,
                    None => scalar,
                };
                if ty != f.result_type(arg_ty) {
                    return self.err(format!(
                        "{} of {arg_ty} gives {}, but the expression says {ty}",
                        f.name(),
                        f.result_type(arg_ty)
                    ));
                }
                for a in args {
                    self.expr(a)?;
                    if a.ty != arg_ty {
                        return self.err(format!(
                            "{} arguments are {} and {arg_ty}; they must agree",
                            f.name(),
                            a.ty
                        ));
                    }
                }
                let ok = f.accepts(arg_ty);
                if !ok {
                    return self.err(format!("{} is not defined on {arg_ty}", f.name()));
                }
            }
            ExprKind::Select {
                cond,
                then,
                otherwise,
            } => {
                self.expect(cond, ScalarType::Bool, "a select condition")?;
                self.expect(then, ty, "a select arm")?;
                self.expect(otherwise, ty, "a select arm")?;
            }
            ExprKind::Extract { value, lane } => {
                self.expr(value)?;
                if !value.ty.is_vector() || *lane >= value.ty.lanes {
                    return self.err(format!("lane {lane} of {} does not exist", value.ty));
                }
                if ty != value.ty.scalar {
                    return self.err(format!(
                        "a lane of {} is {}, labelled {ty}",
                        value.ty, value.ty.scalar
                    ));
                }
            }
            ExprKind::Construct(_) => {
                return self.err(format!("a vector construction is labelled {ty}"));
            }
        }
        Ok(())
    }

    fn binary(
        &self,
        op: BinaryOp,
        a: ScalarType,
        b: ScalarType,
        ty: ScalarType,
    ) -> Result<(), ValidationError> {
        use BinaryOp::*;
        let (ok, result) = match op {
            Add | Sub | Mul | Div | Rem => (a == b && a.is_numeric(), a),
            BitAnd | BitOr | BitXor => (a == b && (a.is_int() || a == ScalarType::Bool), a),
            Shl | Shr => (a.is_int() && b == ScalarType::U32, a),
            Eq | Ne => (a == b, ScalarType::Bool),
            Lt | Le | Gt | Ge => (a == b && a.is_numeric(), ScalarType::Bool),
            LogicalAnd | LogicalOr => (a == ScalarType::Bool && b == ScalarType::Bool, a),
        };
        if !ok {
            let hint = if matches!(op, Shl | Shr) {
                " (the shift amount must be u32)"
            } else {
                ""
            };
            return self.err(format!("`{a} {} {b}` is not defined{hint}", op.symbol()));
        }
        if result != ty {
            return self.err(format!(
                "`{a} {} {b}` yields {result}, labelled {ty}",
                op.symbol()
            ));
        }
        Ok(())
    }
}
