//! Expressions: loads, builtins, operators, vectors, casts, math, subgroup operations,
//! atomics and matrix steps, each type-checked as it is built.

use super::*;

impl Builder {
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
    pub(super) fn vector_binary(&mut self, op: BinaryOp, a: Expr, b: Expr) -> R<V> {
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
    pub(super) fn vector_of(&self, ty: Type, lanes: Vec<V>) -> R<Expr> {
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
}
