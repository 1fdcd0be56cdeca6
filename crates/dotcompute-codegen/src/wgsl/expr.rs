//! Expressions: literals, operators, calls, casts (through the helpers with the IR's
//! semantics).

use super::*;

impl Gen<'_> {
    pub(super) fn literal(&self, l: Literal) -> String {
        match l {
            Literal::Bool(b) => b.to_string(),
            Literal::I32(i32::MIN) => "i32(-2147483648)".into(),
            Literal::I32(v) => format!("{v}i"),
            Literal::U32(v) => format!("{v}u"),
            Literal::F32(bits) => {
                let v = f32::from_bits(bits);
                if v.is_finite() {
                    let s = format!("{v:?}");
                    format!("{s}f")
                } else {
                    format!("bitcast<f32>({bits}u)")
                }
            }
            Literal::F16(bits) => {
                let v = half::f16::from_bits(bits);
                if v.is_finite() {
                    format!("{:?}h", v.to_f32())
                } else {
                    format!("f16(bitcast<f32>({}u))", v.to_f32().to_bits())
                }
            }
            Literal::I64(_) | Literal::U64(_) | Literal::F64(_) => {
                unreachable!("64-bit literals are rejected by check_types")
            }
        }
    }

    pub(super) fn expr(&self, e: &Expr) -> String {
        if let Some(sum) = complement_subtraction_as_sum(e) {
            return self.expr(&sum);
        }
        match &e.kind {
            ExprKind::Literal(l) => self.literal(*l),
            ExprKind::Local(id) => self.local(*id),
            ExprKind::Scalar(i) => {
                let name = self.k.params[*i as usize].name();
                if e.ty == ScalarType::Bool {
                    format!("(dc_params.p_{name} != 0u)")
                } else if e.ty == ScalarType::F16 {
                    format!("f16(dc_params.p_{name})")
                } else {
                    format!("dc_params.p_{name}")
                }
            }
            ExprKind::Builtin(b, a) => {
                let v = match b {
                    Builtin::GlobalId => "dc_global",
                    Builtin::LocalId => "dc_lid",
                    Builtin::GroupId => "dc_group",
                    Builtin::GroupSize => "dc_gsize",
                    Builtin::NumGroups => "dc_ngroups",
                };
                format!("{v}.{}", a.name())
            }
            ExprKind::Len(mem) => self.len_of(*mem),
            ExprKind::Load {
                mem: Memory::Buffer(b),
                ..
            } if self.lane => {
                let name = self.k.params[*b as usize].name();
                let stored = self.vector.as_ref().is_some_and(|p| p.stored.contains(b));
                if stored {
                    format!("(*r_{name})")
                } else {
                    format!("r_{name}")
                }
            }
            ExprKind::Load { mem, index } => {
                let idx = self.expr(index);
                let value = if self.atomic.contains(mem) {
                    let load = format!("atomicLoad(&{})", self.element(*mem, index));
                    if self.f32_as_bits(e.ty) {
                        format!("bitcast<f32>({load})")
                    } else {
                        load
                    }
                } else {
                    self.element(*mem, index)
                };
                match self.bounds_check(*mem, &idx) {
                    // Out of bounds in checked mode: 0 (the clamped load select discards
                    // is harmless under robust buffer access).
                    Some(check) => format!("select({}(), {value}, {check})", self.type_name(e.ty)),
                    None => value,
                }
            }
            ExprKind::Unary(op, a) => {
                let a_s = self.expr(a);
                let a_s = if *op == UnaryOp::Neg {
                    runtime(a, a_s)
                } else {
                    a_s
                };
                match (op, a.ty.scalar) {
                    (UnaryOp::Neg, _) => format!("(-{a_s})"),
                    (UnaryOp::Not, ScalarType::Bool) => format!("(!{a_s})"),
                    (UnaryOp::Not, _) => format!("(~{a_s})"),
                }
            }
            ExprKind::Binary(op, a, b) => {
                let (x, y) = (self.expr(a), self.expr(b));
                // An operation on constants only is a WGSL const-expression, which is
                // evaluated at shader creation, where overflow and division by zero are
                // errors; the IR defines them (wrapping, x / 0 == x, ...), as WGSL does at
                // run time. A runtime identity on the left operand keeps it a runtime
                // operation.
                let x = if is_const(b) { runtime(a, x) } else { x };
                // naga also rejects an integer division or remainder by a constant zero
                // whatever the dividend: a divisor that is not a non-zero literal goes
                // through the identity too (`x / 2u` stays as it is).
                let nonzero_literal = matches!(
                    b.kind,
                    ExprKind::Literal(l) if l.as_i128().is_some_and(|v| v != 0)
                );
                let y = if matches!(op, BinaryOp::Div | BinaryOp::Rem)
                    && a.ty.scalar.is_int()
                    && !nonzero_literal
                {
                    runtime(b, y)
                } else {
                    y
                };
                match op {
                    BinaryOp::Shl | BinaryOp::Shr => {
                        // Shift amounts are taken modulo the bit width (IR semantics).
                        format!("({x} {} ({y} & 31u))", op.symbol())
                    }
                    BinaryOp::BitXor if a.ty == ScalarType::Bool => format!("({x} != {y})"),
                    // IEEE equality with NaN tested on the bits (see dotcompute_ir's
                    // semantics): drivers may assume NaN-free floats and fold `x != x`.
                    // Vulkan lets f16 division be 2.5 ulp off (NVIDIA is 2 ulp off); in
                    // f32 and rounded to f16 it is at most one f16 unit off (rarely).
                    BinaryOp::Div if a.ty == ScalarType::F16 => {
                        format!("f16(f32({x}) / f32({y}))")
                    }
                    // f16 values widen to f32 exactly (NaN stays NaN) for the bit tests.
                    BinaryOp::Eq if a.ty == ScalarType::F16 => {
                        format!("dc_feq(f32({x}), f32({y}))")
                    }
                    BinaryOp::Ne if a.ty == ScalarType::F16 => {
                        format!("(!dc_feq(f32({x}), f32({y})))")
                    }
                    BinaryOp::Eq if a.ty.scalar.is_float() => format!("dc_feq({x}, {y})"),
                    BinaryOp::Ne if a.ty.scalar.is_float() => format!("(!dc_feq({x}, {y}))"),
                    _ => format!("({x} {} {y})", op.symbol()),
                }
            }
            ExprKind::Cast(a) => self.cast(a, e.ty.scalar),
            ExprKind::Bitcast(a) => format!("bitcast<{}>({})", self.ty(e.ty.scalar), self.expr(a)),
            ExprKind::Math(f, args) => {
                let mut a: Vec<String> = args.iter().map(|x| self.expr(x)).collect();
                // As for binary operations (`abs(MIN)` overflows in a const-expression).
                if args.iter().all(is_const) {
                    a[0] = runtime(&args[0], a[0].clone());
                }
                match f {
                    // abs(MIN) == MIN as WGSL defines, but NVIDIA's Vulkan compiler treats
                    // the builtin's result as non-negative (`0 > abs(MIN)` came out false
                    // on the H100: found by the random-kernel test); a guarded negation
                    // computes the same without the builtin.
                    MathFn::Abs if args[0].ty == ScalarType::I32 => {
                        return format!("dc_abs_i32({})", a[0])
                    }
                    // min(max(x, lo), hi): WGSL's clamp requires lo <= hi for ints.
                    MathFn::Clamp => return format!("min(max({}, {}), {})", a[0], a[1], a[2]),
                    // On the bits: WGSL has no isnan, and drivers fold `x != x`.
                    MathFn::IsNan => return format!("dc_is_nan(f32({}))", a[0]),
                    MathFn::IsFinite => return format!("dc_is_finite(f32({}))", a[0]),
                    // WGSL's round sends halves to even; the IR's (Rust's) away from zero.
                    MathFn::Round if args[0].ty == ScalarType::F16 => {
                        return format!("f16(dc_round(f32({})))", a[0])
                    }
                    MathFn::Round => return format!("dc_round({})", a[0]),
                    MathFn::Recip if args[0].ty == ScalarType::F16 => {
                        return format!("(1.0h / {})", a[0])
                    }
                    MathFn::Recip => return format!("(1.0 / {})", a[0]),
                    MathFn::Rsqrt => return format!("inverseSqrt({})", a[0]),
                    MathFn::CountOnes => return format!("u32(countOneBits({}))", a[0]),
                    MathFn::LeadingZeros => return format!("u32(countLeadingZeros({}))", a[0]),
                    MathFn::TrailingZeros => return format!("u32(countTrailingZeros({}))", a[0]),
                    MathFn::ReverseBits => return format!("reverseBits({})", a[0]),
                    MathFn::ExtractByte => {
                        return format!("extractBits({}, 8u * ({} & 3u), 8u)", a[0], a[1])
                    }
                    // WGSL has no overloading: one helper per type (32-bit only here).
                    MathFn::SaturatingAdd => {
                        return format!("dc_sat_add_{}({}, {})", args[0].ty, a[0], a[1])
                    }
                    MathFn::SaturatingSub => {
                        return format!("dc_sat_sub_{}({}, {})", args[0].ty, a[0], a[1])
                    }
                    _ => {}
                }
                // The IR's function names are WGSL's builtin names.
                let name = f.name();
                format!("{name}({})", a.join(", "))
            }
            ExprKind::Subgroup(op, args) => {
                let a: Vec<String> = args.iter().map(|x| self.expr(x)).collect();
                match op {
                    SubgroupOp::Size => "dc_sg_size".into(),
                    SubgroupOp::Lane => "dc_sg_lane".into(),
                    // Lanes are taken modulo the (power-of-two) size, as on CUDA.
                    SubgroupOp::Shuffle => {
                        format!("subgroupShuffle({}, {} & (dc_sg_size - 1u))", a[0], a[1])
                    }
                    SubgroupOp::ShuffleXor => {
                        format!("subgroupShuffleXor({}, {} & (dc_sg_size - 1u))", a[0], a[1])
                    }
                    // WGSL leaves lanes shifted out undefined; the IR keeps the own value.
                    SubgroupOp::ShuffleUp => format!(
                        "select({x}, subgroupShuffleUp({x}, {d}), dc_sg_lane >= {d})",
                        x = a[0],
                        d = a[1]
                    ),
                    SubgroupOp::ShuffleDown => format!(
                        "select({x}, subgroupShuffleDown({x}, {d}), dc_sg_lane + {d} < dc_sg_size)",
                        x = a[0],
                        d = a[1]
                    ),
                    SubgroupOp::Add => format!("subgroupAdd({})", a[0]),
                    SubgroupOp::Min => format!("subgroupMin({})", a[0]),
                    SubgroupOp::Max => format!("subgroupMax({})", a[0]),
                    SubgroupOp::ExclusiveAdd => format!("subgroupExclusiveAdd({})", a[0]),
                    SubgroupOp::InclusiveAdd => format!("subgroupInclusiveAdd({})", a[0]),
                    SubgroupOp::Ballot => format!("subgroupBallot({}).x", a[0]),
                    SubgroupOp::Any => format!("subgroupAny({})", a[0]),
                    SubgroupOp::All => format!("subgroupAll({})", a[0]),
                }
            }
            ExprKind::Select {
                cond,
                then,
                otherwise,
            } => format!(
                "select({}, {}, {})",
                self.expr(otherwise),
                self.expr(then),
                self.expr(cond)
            ),
            ExprKind::Extract { value, lane } => {
                format!("({}).{}", self.expr(value), Type::lane_name(*lane))
            }
            // Constant lanes pass through the runtime identity, so that a vector of
            // literals is no WGSL const-expression (whose overflow is a creation error).
            ExprKind::Construct(lanes) => {
                let a: Vec<String> = lanes.iter().map(|x| runtime(x, self.expr(x))).collect();
                format!("{}({})", self.type_name(e.ty), a.join(", "))
            }
        }
    }

    pub(super) fn cast(&self, a: &Expr, to: ScalarType) -> String {
        // A cast of a literal is folded here rather than left to a helper call that the
        // driver folds after inlining: such a call was part of the shape NVIDIA's Vulkan
        // compiler got wrong (see `complement_subtraction_as_sum`), and a literal is
        // shorter anyway.
        if let ExprKind::Literal(l) = a.kind {
            if let Some(folded) = l.cast(to) {
                return self.literal(folded);
            }
        }
        let x = self.expr(a);
        match (a.ty.scalar, to) {
            (from, to) if from == to => x,
            (ScalarType::F32, ScalarType::I32) => format!("dc_f32_to_i32({x})"),
            (ScalarType::F32, ScalarType::U32) => format!("dc_f32_to_u32({x})"),
            // f16 to an integer: widen exactly, then saturate like f32.
            (ScalarType::F16, ScalarType::I32) => format!("dc_f32_to_i32(f32({x}))"),
            (ScalarType::F16, ScalarType::U32) => format!("dc_f32_to_u32(f32({x}))"),
            (ScalarType::Bool, t) => format!("select({t}(0), {t}(1), {x})", t = self.ty(t)),
            // i32 <-> u32 reinterpret the bits (Rust `as`), int -> f32 rounds to nearest.
            (_, t) => format!("{}({x})", self.ty(t)),
        }
    }
}

/// `a - !b` on 32-bit integers as `(a + b) + 1`, the same value under wrapping
/// arithmetic (`!b == -b - 1`). NVIDIA's Vulkan compiler (H100, driver 580) computed
/// `a - ~b` as `~b - a` inside a `max` whose other operand came from the float-to-integer
/// helper, in shaders CUDA, the CPU, lavapipe and the MSL shim ran right (random kernel
/// seed 4710405778595751319; hand-written forms in `integer_forms::raw_wgsl_forms` of the
/// facade's tests); the sum is the form it computed right. Scalars only: vectors would
/// need a splat of the one.
fn complement_subtraction_as_sum(e: &Expr) -> Option<Expr> {
    let ExprKind::Binary(BinaryOp::Sub, a, b) = &e.kind else {
        return None;
    };
    let ExprKind::Unary(UnaryOp::Not, y) = &b.kind else {
        return None;
    };
    let one = match e.ty.as_scalar()? {
        ScalarType::I32 => Literal::I32(1),
        ScalarType::U32 => Literal::U32(1),
        _ => return None,
    };
    let sum = Expr {
        ty: e.ty,
        kind: ExprKind::Binary(BinaryOp::Add, a.clone(), y.clone()),
    };
    Some(Expr {
        ty: e.ty,
        kind: ExprKind::Binary(
            BinaryOp::Add,
            Box::new(sum),
            Box::new(Expr {
                ty: e.ty,
                kind: ExprKind::Literal(one),
            }),
        ),
    })
}

/// Whether `e` is a WGSL const-expression: built from literals only.
pub(super) fn is_const(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Literal(_) => true,
        ExprKind::Unary(_, a) | ExprKind::Cast(a) | ExprKind::Bitcast(a) => is_const(a),
        ExprKind::Binary(_, a, b) => is_const(a) && is_const(b),
        ExprKind::Math(_, args) => args.iter().all(is_const),
        ExprKind::Select {
            cond,
            then,
            otherwise,
        } => is_const(cond) && is_const(then) && is_const(otherwise),
        _ => false,
    }
}

/// `text` (the WGSL of `e`) as a runtime value when `e` is constant: through the identity
/// helper of its type (f16 and bool are left alone: no f16 helper without `enable f16`,
/// and boolean operations cannot fail).
pub(super) fn runtime(e: &Expr, text: String) -> String {
    if !is_const(e) {
        return text;
    }
    match e.ty.as_scalar() {
        Some(ScalarType::I32) => format!("dc_rt_i32({text})"),
        Some(ScalarType::U32) => format!("dc_rt_u32({text})"),
        Some(ScalarType::F32) => format!("dc_rt_f32({text})"),
        _ => text,
    }
}
