//! The C-family printer shared by CUDA C++ and MSL: one walk over the IR's statements and
//! expressions, with the spellings that differ between the two languages behind
//! [`Dialect`]. Each language's module (entry point, parameter list, prelude) is its own
//! file: [`crate::cuda`] and [`crate::msl`]; neither repeats the statement printer.
//!
//! What the walk fixes for both: the IR's defined semantics for C++'s undefined cases
//! (wrapping signed arithmetic, total division, masked shifts, saturating float-to-int
//! casts) go through helpers of the same names in each prelude (`dc_add`, `dc_div`,
//! `dc_shl`, `dc_f32_to_i32`, ...); `f16` values live in `float` registers and every f16
//! operation rounds its result (`dc_rh`); counted loops advance through `dc_advance`.

use dotcompute_ir::analysis::VectorPlan;
use dotcompute_ir::*;
use std::collections::BTreeSet;
use std::fmt::Write;

/// The spellings that differ between the C-family languages.
pub(crate) trait Dialect {
    /// The type of a value in a register.
    fn ty(&self, t: ScalarType) -> &'static str;
    /// A non-finite `f32` literal by its bits.
    fn nonfinite_f32(&self, bits: u32) -> String;
    /// A non-finite `f64` literal by its bits.
    fn nonfinite_f64(&self, bits: u64) -> String;
    /// The suffixes of 64-bit integer literals (`ll`, `ull` in CUDA).
    fn i64_suffixes(&self) -> (&'static str, &'static str);
    /// An f16 element read from memory, as a float.
    fn f16_load(&self, place: &str) -> String;
    /// A float value converted to the f16 element stored in memory.
    fn f16_store(&self, value: &str) -> String;
    /// A plain access to `mem`, which is also used atomically, as an lvalue.
    fn volatile_place(&self, mem: Memory, elem: ScalarType, array: &str, index: &str) -> String;
    /// An atomic read-modify-write on `array[index]` of element type `elem`; returns the
    /// old value.
    fn atomic(
        &self,
        op: AtomicOp,
        mem: Memory,
        elem: ScalarType,
        element: String,
        args: Vec<String>,
    ) -> String;
    /// The float remainder function (`fmodf` / `fmod` in CUDA).
    fn fmod(&self, f32: bool) -> &'static str;
    /// The group barrier statement.
    fn barrier(&self) -> &'static str;
    /// A subgroup operation; `ty` is the result type.
    fn subgroup(&self, op: SubgroupOp, ty: ScalarType, args: Vec<String>) -> String;
    /// The function for `f` on `float` (`f32`) or `double` arguments.
    fn math_name(&self, f: MathFn, f32: bool) -> &'static str;
    /// A bit operation on `x` of integer type `t`; the counts are `u32`.
    fn bits(&self, f: MathFn, t: ScalarType, x: &str) -> String;
    /// `x`'s bits, of type `from`, read as `to` (same size, validated).
    fn bitcast(&self, from: ScalarType, to: ScalarType, x: &str) -> String;
    /// Byte `k % 4` of `u32` `x`, zero-extended ([`MathFn::ExtractByte`]).
    fn extract_byte(&self, x: &str, k: &str) -> String {
        format!("(({x} >> (8u * ({k} & 3u))) & 255u)")
    }
}

/// The walker: one kernel's statements and expressions printed in one dialect.
pub(crate) struct Gen<'k> {
    pub(crate) d: &'static dyn Dialect,
    pub(crate) k: &'k Kernel,
    pub(crate) out: String,
    pub(crate) atomic: BTreeSet<Memory>,
    pub(crate) tmp: u32,
    /// While generating the lane function of the vector form: buffer accesses become the
    /// lane's registers (`r_<name>`), and stores also set the lane's mask (`m_<name>`).
    pub(crate) lane: Option<VectorPlan>,
    /// Checked mode: every array access is bounds-checked against its length, and the
    /// first violation is recorded through `dc_err` (`dotcompute_hal::Launch::checked`).
    pub(crate) checked: bool,
}

impl<'k> Gen<'k> {
    pub(crate) fn new(d: &'static dyn Dialect, k: &'k Kernel) -> Gen<'k> {
        Gen {
            d,
            k,
            out: String::new(),
            atomic: dotcompute_ir::analysis::atomic_memories(&k.body),
            tmp: 0,
            lane: None,
            checked: false,
        }
    }
}

impl Gen<'_> {
    pub(crate) fn mem_name(&self, mem: Memory) -> String {
        match mem {
            Memory::Buffer(i) => format!("p_{}", self.k.params[i as usize].name()),
            Memory::Shared(i) => format!("s_{}", self.k.shared[i as usize].name),
            Memory::Local(i) => format!("a_{}_{i}", self.k.local_arrays[i as usize].name),
        }
    }

    /// The parameter name of a buffer (the lane form touches nothing else).
    pub(crate) fn buffer_name(&self, mem: Memory) -> &str {
        match mem {
            Memory::Buffer(i) => self.k.params[i as usize].name(),
            Memory::Shared(i) => &self.k.shared[i as usize].name,
            Memory::Local(i) => &self.k.local_arrays[i as usize].name,
        }
    }

    /// The spelling of a value type: the dialect's scalar names, and `float4`, `int2`,
    /// `uint4`, ... for vectors (the same names in CUDA and MSL).
    pub(crate) fn type_name(&self, t: Type) -> String {
        if !t.is_vector() {
            return self.d.ty(t.scalar).to_string();
        }
        let base = match t.scalar {
            ScalarType::F32 => "float",
            ScalarType::I32 => "int",
            _ => "uint",
        };
        format!("{base}{}", t.lanes)
    }

    /// The zero of `t` (`dc_vec(f32(0), f32(0))` for a vector).
    pub(crate) fn zero(&self, t: Type) -> String {
        let scalar = format!("{}(0)", self.d.ty(t.scalar));
        if t.is_vector() {
            format!("dc_vec({})", vec![scalar; t.lanes as usize].join(", "))
        } else {
            scalar
        }
    }

    pub(crate) fn local(&self, id: u32) -> String {
        format!("l_{}_{id}", self.k.locals[id as usize].name)
    }

    pub(crate) fn fresh(&mut self) -> String {
        self.tmp += 1;
        format!("dc_t{}", self.tmp)
    }

    pub(crate) fn line(&mut self, depth: usize, text: &str) {
        for _ in 0..depth {
            self.out.push_str("    ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    pub(crate) fn block(&mut self, stmts: &[Stmt], d: usize) {
        for s in stmts {
            self.stmt(s, d);
        }
    }

    /// Whether `mem` holds f16 bits: every f16 array (buffers, shared and thread-private
    /// arrays alike), so an element copied between arrays keeps its bits without a
    /// round trip through a float register.
    pub(crate) fn stored_as_f16(&self, mem: Memory) -> bool {
        self.k.memory_elem(mem) == Some(ScalarType::F16.into())
    }

    /// The length of `mem` in elements, as an expression.
    pub(crate) fn len_of(&self, mem: Memory) -> String {
        match mem {
            Memory::Buffer(i) => format!("dc_len_{}", self.k.params[i as usize].name()),
            Memory::Shared(i) => match self.k.shared[i as usize].len {
                SharedLen::Static(n) => format!("{n}u"),
                SharedLen::Dynamic => "dc_dyn_len".into(),
            },
            Memory::Local(i) => format!("{}u", self.k.local_arrays[i as usize].len),
        }
    }

    /// In checked mode, the condition under which `mem[index]` is in bounds; it records
    /// the launch's first violation (`dc_in` of the prelude's checked helpers).
    fn bounds_check(&self, mem: Memory, index: &str) -> Option<String> {
        (self.checked && self.lane.is_none()).then(|| {
            format!(
                "dc_in((u32)({index}), {}, {:#x}u, dc_err)",
                self.len_of(mem),
                mem.code()
            )
        })
    }

    /// A statement that accesses `mem[index]`; in checked mode it runs only in bounds.
    fn guarded_line(&mut self, d: usize, mem: Memory, index: &str, text: String) {
        let text = match self.bounds_check(mem, index) {
            Some(check) => format!("if ({check}) {{ {text} }}"),
            None => text,
        };
        self.line(d, &text);
    }

    /// An lvalue for `mem[index]`; volatile when the memory is used atomically.
    pub(crate) fn place(&self, mem: Memory, index: &str) -> String {
        if self.lane.is_some() {
            // Elementwise: the index is the lane's own id, whose element is in a register.
            format!("r_{}", self.buffer_name(mem))
        } else if self.atomic.contains(&mem) {
            // Atomics are on scalar elements only (validated).
            let elem = self.k.memory_elem(mem).expect("validated").scalar;
            self.d.volatile_place(mem, elem, &self.mem_name(mem), index)
        } else {
            format!("{}[{index}]", self.mem_name(mem))
        }
    }

    pub(crate) fn stmt(&mut self, s: &Stmt, d: usize) {
        match s {
            Stmt::Let { local, init } => {
                let ty = self.k.locals[*local as usize].ty;
                let t = self.type_name(ty);
                let init = match init {
                    Some(e) => self.expr(e),
                    None => self.zero(ty),
                };
                let text = format!("{t} {} = {init};", self.local(*local));
                self.line(d, &text);
            }
            Stmt::Assign { local, value } => {
                let text = format!("{} = {};", self.local(*local), self.expr(value));
                self.line(d, &text);
            }
            Stmt::Store { mem, index, value } => {
                let value = if self.stored_as_f16(*mem) {
                    self.f16_bits(value)
                } else {
                    self.expr(value)
                };
                let index = self.expr(index);
                let mut text = format!("{} = {value};", self.place(*mem, &index));
                if self.lane.is_some() {
                    let _ = write!(text, " m_{} = true;", self.buffer_name(*mem));
                }
                self.guarded_line(d, *mem, &index, text);
            }
            Stmt::Atomic {
                op,
                mem,
                index,
                args,
                result,
            } => {
                let elem = self.k.memory_elem(*mem).expect("validated").scalar;
                let index = self.expr(index);
                let element = format!("{}[{index}]", self.mem_name(*mem));
                let args = args.iter().map(|a| self.expr(a)).collect();
                let call = self.d.atomic(*op, *mem, elem, element, args);
                let text = match result {
                    Some(r) => format!("{} = {call};", self.local(*r)),
                    None => format!("{call};"),
                };
                self.guarded_line(d, *mem, &index, text);
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                let text = format!("if ({}) {{", unwrapped(&self.expr(cond)));
                self.line(d, &text);
                self.block(then, d + 1);
                if otherwise.is_empty() {
                    self.line(d, "}");
                } else {
                    self.line(d, "} else {");
                    self.block(otherwise, d + 1);
                    self.line(d, "}");
                }
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                // Bounds and step are evaluated once; a step of 0 runs nothing; the loop
                // stops when the counter would overflow (as Rust's ranges do).
                // `continue` in a do-while jumps to the condition, which advances.
                let v = self.local(*var);
                let scalar = self.k.locals[*var as usize].ty.scalar;
                let t = self.d.ty(scalar);
                if let Some((first, end, step)) = small_constant_range(start, end, step, scalar) {
                    // Constant bounds, a few trips and no possible overflow: a plain loop
                    // the compiler fully unrolls, so that thread-private arrays indexed by
                    // the counter (register blocks) stay in registers.
                    self.line(d, "#pragma unroll");
                    let head = format!("for ({t} {v} = {first}; {v} < {end}; {v} += {step}) {{");
                    self.line(d, &head);
                    self.block(body, d + 1);
                    self.line(d, "}");
                    return;
                }
                let (e, st) = (self.fresh(), self.fresh());
                self.line(d, "{");
                let head = [
                    format!("{t} {v} = {};", self.expr(start)),
                    format!("const {t} {e} = {};", self.expr(end)),
                    format!("const {t} {st} = {};", self.expr(step)),
                    format!("if ({st} > ({t})0 && {v} < {e}) {{"),
                ];
                for l in &head {
                    self.line(d + 1, l);
                }
                self.line(d + 2, "do {");
                self.block(body, d + 3);
                let tail = format!("}} while (dc_advance({v}, {st}, {e}));");
                self.line(d + 2, &tail);
                self.line(d + 1, "}");
                self.line(d, "}");
            }
            Stmt::Loop { body } => {
                self.line(d, "for (;;) {");
                self.block(body, d + 1);
                self.line(d, "}");
            }
            Stmt::Break => self.line(d, "break;"),
            Stmt::Continue => self.line(d, "continue;"),
            Stmt::Return => self.line(d, "return;"),
            Stmt::Barrier => self.line(d, self.d.barrier()),
            Stmt::Mma {
                shape,
                acc,
                base,
                a,
                b,
            } => {
                // Every lane runs the instruction (it is collective); in checked mode an
                // accumulator index outside the array is recorded and its elements are
                // neither read nor written.
                let (n, ok) = (self.fresh(), self.fresh());
                let array = self.mem_name(*acc);
                self.line(d, "{");
                let first = format!("const u32 {n} = {};", self.expr(base));
                self.line(d + 1, &first);
                let check = match (
                    self.bounds_check(*acc, &n),
                    self.bounds_check(*acc, &format!("{n} + 3u")),
                ) {
                    (Some(lo), Some(hi)) => format!("{lo} && {hi}"),
                    _ => "true".into(),
                };
                let guard = format!("const bool {ok} = {check};");
                self.line(d + 1, &guard);
                let regs: Vec<String> = (0..4).map(|q| format!("{n}_d{q}")).collect();
                for (q, r) in regs.iter().enumerate() {
                    let l = format!("f32 {r} = {ok} ? {array}[{n} + {q}u] : 0.0f;");
                    self.line(d + 1, &l);
                }
                let (function, ops): (_, Vec<String>) = match shape {
                    MmaShape::M16N8K8Tf32 => (
                        "dc_mma_tf32",
                        a.iter().chain(b).map(|x| self.expr(x)).collect(),
                    ),
                    MmaShape::M16N8K16F16 => (
                        "dc_mma_f16",
                        a.iter().chain(b).map(|x| self.f16_bits(x)).collect(),
                    ),
                };
                let call = format!("{function}({}, {});", regs.join(", "), ops.join(", "));
                self.line(d + 1, &call);
                let store: Vec<String> = regs
                    .iter()
                    .enumerate()
                    .map(|(q, r)| format!("{array}[{n} + {q}u] = {r};"))
                    .collect();
                let store = format!("if ({ok}) {{ {} }}", store.join(" "));
                self.line(d + 1, &store);
                self.line(d, "}");
            }
        }
    }

    /// The f16 bits of an f16 value stored to memory or passed to a tensor-core
    /// operation: an element loaded from memory is passed as stored (no round trip
    /// through a float register, which the compiler cannot see through: the conversions
    /// are assembly).
    fn f16_bits(&self, e: &Expr) -> String {
        match &e.kind {
            ExprKind::Load { mem, index } if self.stored_as_f16(*mem) => {
                let index = self.expr(index);
                let place = self.place(*mem, &index);
                match self.bounds_check(*mem, &index) {
                    // Out of bounds in checked mode: the load gives 0, as any load.
                    Some(check) => format!("({check} ? {place} : (unsigned short)0)"),
                    None => place,
                }
            }
            _ => self.d.f16_store(&self.expr(e)),
        }
    }

    pub(crate) fn literal(&self, l: Literal) -> String {
        match l {
            Literal::Bool(b) => b.to_string(),
            Literal::I32(i32::MIN) => "(-2147483647 - 1)".into(),
            Literal::I32(v) => format!("{v}"),
            Literal::U32(v) => format!("{v}u"),
            // The dialect's own suffix: MSL has `l`, not C's `ll` (issue 32, item 9).
            Literal::I64(i64::MIN) => {
                let l = self.d.i64_suffixes().0;
                format!("(-9223372036854775807{l} - 1{l})")
            }
            Literal::I64(v) => format!("{v}{}", self.d.i64_suffixes().0),
            Literal::U64(v) => format!("{v}{}", self.d.i64_suffixes().1),
            Literal::F32(bits) => {
                let v = f32::from_bits(bits);
                if v.is_finite() {
                    // `{:?}` is the shortest text that reads back to the same value.
                    format!("{v:?}f")
                } else {
                    self.d.nonfinite_f32(bits)
                }
            }
            Literal::F64(bits) => {
                let v = f64::from_bits(bits);
                if v.is_finite() {
                    format!("{v:?}")
                } else {
                    self.d.nonfinite_f64(bits)
                }
            }
            // An f16 constant is its exact value as a float (see the module docs).
            Literal::F16(bits) => self.literal(Literal::f32(half::f16::from_bits(bits).to_f32())),
        }
    }

    pub(crate) fn expr(&self, e: &Expr) -> String {
        match &e.kind {
            ExprKind::Literal(l) => self.literal(*l),
            ExprKind::Local(id) => self.local(*id),
            ExprKind::Scalar(i) => format!("p_{}", self.k.params[*i as usize].name()),
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
            ExprKind::Load { mem, index } => {
                let index = self.expr(index);
                let place = self.place(*mem, &index);
                let value = if self.stored_as_f16(*mem) {
                    self.d.f16_load(&place)
                } else {
                    place
                };
                match self.bounds_check(*mem, &index) {
                    // Out of bounds in checked mode: the load gives 0.
                    Some(check) => format!("({check} ? {value} : {})", self.zero(e.ty)),
                    None => value,
                }
            }
            ExprKind::Unary(UnaryOp::Neg, a) if a.ty.is_vector() => {
                format!("dc_vneg({})", self.expr(a))
            }
            ExprKind::Unary(op, a) => {
                let x = self.expr(a);
                match (op, a.ty.scalar) {
                    (UnaryOp::Neg, t) if t.is_signed_int() => format!("dc_neg({x})"),
                    (UnaryOp::Neg, t) if t.is_int() => format!("(({})0 - {x})", self.d.ty(t)),
                    (UnaryOp::Neg, _) => format!("(-{x})"),
                    (UnaryOp::Not, ScalarType::Bool) => format!("(!{x})"),
                    (UnaryOp::Not, _) => format!("(~{x})"),
                }
            }
            ExprKind::Binary(op, a, b) if e.ty == ScalarType::F16 => {
                // Computed in f32, rounded to f16 (see the module docs).
                let (x, y) = (self.expr(a), self.expr(b));
                match op {
                    BinaryOp::Rem => format!("dc_rh({}({x}, {y}))", self.d.fmod(true)),
                    _ => format!("dc_rh({x} {} {y})", op.symbol()),
                }
            }
            // Lane-wise through the prelude's vector helpers (integer `/` and `%` were
            // split into lanes by the builder).
            ExprKind::Binary(op, a, b) if e.ty.is_vector() => {
                let f = match op {
                    BinaryOp::Add => "dc_vadd",
                    BinaryOp::Sub => "dc_vsub",
                    BinaryOp::Mul => "dc_vmul",
                    _ => "dc_vdiv",
                };
                format!("{f}({}, {})", self.expr(a), self.expr(b))
            }
            ExprKind::Binary(op, a, b) => {
                let (x, y) = (self.expr(a), self.expr(b));
                let t = a.ty.scalar;
                use BinaryOp::*;
                match op {
                    Add | Sub | Mul if t.is_signed_int() => {
                        let f = ["dc_add", "dc_sub", "dc_mul"][*op as usize];
                        format!("{f}({x}, {y})")
                    }
                    Div if t.is_int() => format!("dc_div({x}, {y})"),
                    Rem if t.is_int() => format!("dc_rem({x}, {y})"),
                    Rem => format!("{}({x}, {y})", self.d.fmod(t == ScalarType::F32)),
                    Shl => format!("dc_shl({x}, {y})"),
                    Shr => format!("dc_shr({x}, {y})"),
                    BitXor if t == ScalarType::Bool => format!("({x} != {y})"),
                    BitAnd | BitOr if t == ScalarType::Bool => {
                        format!("((bool)({x} {} {y}))", op.symbol())
                    }
                    _ => format!("({x} {} {y})", op.symbol()),
                }
            }
            ExprKind::Cast(a) => self.cast(a, e.ty.scalar),
            ExprKind::Bitcast(a) => self.d.bitcast(a.ty.scalar, e.ty.scalar, &self.expr(a)),
            // f16 math runs on the f32 functions and rounds the result (see the module docs).
            ExprKind::Math(f, args) if e.ty == ScalarType::F16 => {
                format!("dc_rh({})", self.math(*f, args))
            }
            ExprKind::Math(f, args) => self.math(*f, args),
            ExprKind::Subgroup(op, args) => {
                let a: Vec<String> = args.iter().map(|x| self.expr(x)).collect();
                self.d.subgroup(*op, e.ty.scalar, a)
            }
            ExprKind::Extract { value, lane } => {
                format!("({}).{}", self.expr(value), Type::lane_name(*lane))
            }
            ExprKind::Construct(lanes) => {
                let a: Vec<String> = lanes.iter().map(|x| self.expr(x)).collect();
                format!("dc_vec({})", a.join(", "))
            }
            ExprKind::Select {
                cond,
                then,
                otherwise,
            } => format!(
                "({} ? {} : {})",
                self.expr(cond),
                self.expr(then),
                self.expr(otherwise)
            ),
        }
    }

    /// A math function call (`args` are the IR operands).
    pub(crate) fn math(&self, f: MathFn, args: &[Expr]) -> String {
        let a: Vec<String> = args.iter().map(|x| self.expr(x)).collect();
        // The argument's type picks the function (predicates return bool).
        let t = args[0].ty.scalar;
        let f32 = t == ScalarType::F32 || t == ScalarType::F16;
        let name = match f {
            MathFn::IsNan => return format!("((bool)isnan({}))", a[0]),
            MathFn::IsFinite => return format!("((bool)isfinite({}))", a[0]),
            MathFn::Recip if f32 => return format!("(1.0f / {})", a[0]),
            MathFn::Recip => return format!("(1.0 / {})", a[0]),
            // Bit operations on the unsigned bits (32 or 64 wide); the counts are
            // u32 like Rust's.
            MathFn::CountOnes
            | MathFn::LeadingZeros
            | MathFn::TrailingZeros
            | MathFn::ReverseBits => return self.d.bits(f, t, &a[0]),
            MathFn::ExtractByte => return self.d.extract_byte(&a[0], &a[1]),
            MathFn::Abs if !t.is_float() => "dc_abs",
            MathFn::SaturatingAdd => "dc_sat_add",
            MathFn::SaturatingSub => "dc_sat_sub",
            MathFn::Min if !t.is_float() => "dc_min",
            MathFn::Max if !t.is_float() => "dc_max",
            MathFn::Clamp if !t.is_float() => "dc_clamp",
            MathFn::Clamp if f32 => "dc_clampf",
            MathFn::Clamp => "dc_clampd",
            _ => self.d.math_name(f, f32),
        };
        format!("{name}({})", a.join(", "))
    }

    pub(crate) fn cast(&self, a: &Expr, to: ScalarType) -> String {
        use ScalarType::*;
        let x = self.expr(a);
        match (a.ty.scalar, to) {
            (from, to) if from == to => x,
            // To f16: through f32 (an f64 may round twice; see the crate docs), then round.
            (_, F16) => format!("dc_rh((f32)({x}))"),
            // From f16: the value is already an f32.
            (F16, I32 | U32 | I64 | U64) => format!("dc_f32_to_{to}({x})"),
            (F32 | F64, I32 | U32 | I64 | U64) => format!("dc_{}_to_{}({x})", a.ty.scalar, to),
            // int -> float rounds to nearest, float <-> float rounds to nearest, int -> int
            // truncates or extends, bool -> int is 0 or 1: C++'s conversions on CUDA.
            (_, t) => format!("(({}){x})", self.d.ty(t)),
        }
    }
}

/// Integer helpers of both preludes: they give C++'s undefined integer cases the IR's
/// meaning. Each language's prelude defines the type names (`i32` .. `u64`, `f32`) and
/// `DC_FN` before them. 64-bit constants are spelled by cast, since MSL has no `ll`.
pub(crate) const INT_HELPERS: &str = r#"
// Signed + - * and negation wrap (two's complement) through the unsigned types.
DC_FN i32 dc_add(i32 a, i32 b) { return (i32)((u32)a + (u32)b); }
DC_FN i32 dc_sub(i32 a, i32 b) { return (i32)((u32)a - (u32)b); }
DC_FN i32 dc_mul(i32 a, i32 b) { return (i32)((u32)a * (u32)b); }
DC_FN i32 dc_neg(i32 a) { return (i32)(0u - (u32)a); }
DC_FN i64 dc_add(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }
DC_FN i64 dc_sub(i64 a, i64 b) { return (i64)((u64)a - (u64)b); }
DC_FN i64 dc_mul(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }
DC_FN i64 dc_neg(i64 a) { return (i64)((u64)0 - (u64)a); }
DC_FN u32 dc_add(u32 a, u32 b) { return a + b; }
DC_FN u64 dc_add(u64 a, u64 b) { return a + b; }

// x / 0 == x, x % 0 == 0, MIN / -1 == MIN, MIN % -1 == 0.
DC_FN i32 dc_div(i32 a, i32 b) { return b == 0 ? a : (b == -1 ? dc_neg(a) : a / b); }
DC_FN i64 dc_div(i64 a, i64 b) { return b == 0 ? a : (b == -1 ? dc_neg(a) : a / b); }
DC_FN u32 dc_div(u32 a, u32 b) { return b == 0 ? a : a / b; }
DC_FN u64 dc_div(u64 a, u64 b) { return b == 0 ? a : a / b; }
DC_FN i32 dc_rem(i32 a, i32 b) { return (b == 0 || b == -1) ? 0 : a % b; }
DC_FN i64 dc_rem(i64 a, i64 b) { return (b == 0 || b == -1) ? 0 : a % b; }
DC_FN u32 dc_rem(u32 a, u32 b) { return b == 0 ? 0 : a % b; }
DC_FN u64 dc_rem(u64 a, u64 b) { return b == 0 ? 0 : a % b; }

// Shift amounts are taken modulo the bit width; >> is arithmetic for signed types.
DC_FN i32 dc_shl(i32 a, u32 s) { return (i32)((u32)a << (s & 31u)); }
DC_FN u32 dc_shl(u32 a, u32 s) { return a << (s & 31u); }
DC_FN i64 dc_shl(i64 a, u32 s) { return (i64)((u64)a << (s & 63u)); }
DC_FN u64 dc_shl(u64 a, u32 s) { return a << (s & 63u); }
DC_FN i32 dc_shr(i32 a, u32 s) { return a >> (s & 31u); }
DC_FN u32 dc_shr(u32 a, u32 s) { return a >> (s & 31u); }
DC_FN i64 dc_shr(i64 a, u32 s) { return a >> (s & 63u); }
DC_FN u64 dc_shr(u64 a, u32 s) { return a >> (s & 63u); }

// Integer abs wraps (abs(MIN) == MIN; the signed forms are each dialect's DC_ABS_SIGNED);
// min, max and clamp for integers.
DC_ABS_SIGNED
DC_FN u32 dc_abs(u32 a) { return a; }
DC_FN u64 dc_abs(u64 a) { return a; }
DC_FN u32 dc_sat_add(u32 a, u32 b) { u32 r = a + b; return r < a ? 0xffffffffu : r; }
DC_FN u64 dc_sat_add(u64 a, u64 b) { u64 r = a + b; return r < a ? ~(u64)0 : r; }
DC_FN u32 dc_sat_sub(u32 a, u32 b) { return a > b ? a - b : 0u; }
DC_FN u64 dc_sat_sub(u64 a, u64 b) { return a > b ? a - b : (u64)0; }
DC_FN i32 dc_sat_add(i32 a, i32 b) { i32 r = (i32)((u32)a + (u32)b); return ((a ^ r) & (b ^ r)) < 0 ? (a < 0 ? (i32)0x80000000u : 0x7fffffff) : r; }
DC_FN i64 dc_sat_add(i64 a, i64 b) { i64 r = (i64)((u64)a + (u64)b); return ((a ^ r) & (b ^ r)) < 0 ? (a < 0 ? (i64)(((u64)1) << 63) : (i64)(~((u64)1 << 63))) : r; }
DC_FN i32 dc_sat_sub(i32 a, i32 b) { i32 r = (i32)((u32)a - (u32)b); return ((a ^ b) & (a ^ r)) < 0 ? (a < 0 ? (i32)0x80000000u : 0x7fffffff) : r; }
DC_FN i64 dc_sat_sub(i64 a, i64 b) { i64 r = (i64)((u64)a - (u64)b); return ((a ^ b) & (a ^ r)) < 0 ? (a < 0 ? (i64)(((u64)1) << 63) : (i64)(~((u64)1 << 63))) : r; }
template <typename T> DC_FN T dc_min(T a, T b) { return b < a ? b : a; }
template <typename T> DC_FN T dc_max(T a, T b) { return a < b ? b : a; }
template <typename T> DC_FN T dc_clamp(T x, T lo, T hi) { return dc_min(dc_max(x, lo), hi); }
"#;

/// The counted-loop helper of both preludes (`DC_THREAD` is MSL's address space of a
/// thread's own variables, and nothing in CUDA).
pub(crate) const LOOP_HELPERS: &str = r#"
// Advances a counted loop; false at the end or when the counter would overflow.
template <typename T> DC_FN bool dc_advance(DC_THREAD T& v, T step, T end) {
    T next = dc_add(v, step);
    bool go = next > v && next < end;
    v = next;
    return go;
}
"#;

/// The vector helpers of both preludes, emitted only for kernels that use vector types:
/// `dc_vec` builds a vector from its lanes (CUDA's vector types have no constructors,
/// MSL's do; one spelling serves both), and `dc_vadd` .. `dc_vneg` combine lanes with the
/// scalar rules (signed lanes wrap through `dc_add`). Each prelude defines `float2` ..
/// `uint4` (CUDA and Metal have them built in) before this text.
pub(crate) const VECTOR_HELPERS: &str = r#"
// Vectors: lane-wise with the scalar rules.
DC_FN f32 dc_add(f32 a, f32 b) { return a + b; }
DC_FN f32 dc_sub(f32 a, f32 b) { return a - b; }
DC_FN f32 dc_mul(f32 a, f32 b) { return a * b; }
DC_FN f32 dc_neg(f32 a) { return -a; }
DC_FN u32 dc_sub(u32 a, u32 b) { return a - b; }
DC_FN u32 dc_mul(u32 a, u32 b) { return a * b; }
DC_FN u32 dc_neg(u32 a) { return 0u - a; }
#define DC_VEC2(V, S) \
DC_FN V dc_vec(S x, S y) { V v; v.x = x; v.y = y; return v; } \
DC_FN V dc_vadd(V a, V b) { return dc_vec(dc_add(a.x, b.x), dc_add(a.y, b.y)); } \
DC_FN V dc_vsub(V a, V b) { return dc_vec(dc_sub(a.x, b.x), dc_sub(a.y, b.y)); } \
DC_FN V dc_vmul(V a, V b) { return dc_vec(dc_mul(a.x, b.x), dc_mul(a.y, b.y)); } \
DC_FN V dc_vdiv(V a, V b) { return dc_vec(a.x / b.x, a.y / b.y); } \
DC_FN V dc_vneg(V a) { return dc_vec(dc_neg(a.x), dc_neg(a.y)); }
#define DC_VEC4(V, S) \
DC_FN V dc_vec(S x, S y, S z, S w) { V v; v.x = x; v.y = y; v.z = z; v.w = w; return v; } \
DC_FN V dc_vadd(V a, V b) { return dc_vec(dc_add(a.x, b.x), dc_add(a.y, b.y), dc_add(a.z, b.z), dc_add(a.w, b.w)); } \
DC_FN V dc_vsub(V a, V b) { return dc_vec(dc_sub(a.x, b.x), dc_sub(a.y, b.y), dc_sub(a.z, b.z), dc_sub(a.w, b.w)); } \
DC_FN V dc_vmul(V a, V b) { return dc_vec(dc_mul(a.x, b.x), dc_mul(a.y, b.y), dc_mul(a.z, b.z), dc_mul(a.w, b.w)); } \
DC_FN V dc_vdiv(V a, V b) { return dc_vec(a.x / b.x, a.y / b.y, a.z / b.z, a.w / b.w); } \
DC_FN V dc_vneg(V a) { return dc_vec(dc_neg(a.x), dc_neg(a.y), dc_neg(a.z), dc_neg(a.w)); }
DC_VEC2(float2, f32)
DC_VEC2(int2, i32)
DC_VEC2(uint2, u32)
DC_VEC4(float4, f32)
DC_VEC4(int4, i32)
DC_VEC4(uint4, u32)
"#;

/// The bounds of a `for` loop over literal bounds with a positive literal step, at most
/// [`UNROLL_TRIPS`] trips, whose counter cannot overflow past `end` (so a C `for` with
/// `<` is exact): `(start, end, step)`.
pub(crate) fn small_constant_range(
    start: &Expr,
    end: &Expr,
    step: &Expr,
    ty: ScalarType,
) -> Option<(i128, i128, i128)> {
    let lit = |e: &Expr| match &e.kind {
        ExprKind::Literal(l) => l.as_i128(),
        _ => None,
    };
    let (s, e, st) = (lit(start)?, lit(end)?, lit(step)?);
    let max = match ty {
        ScalarType::I32 => i32::MAX as i128,
        ScalarType::U32 => u32::MAX as i128,
        ScalarType::I64 => i64::MAX as i128,
        ScalarType::U64 => u64::MAX as i128,
        _ => return None,
    };
    let trips = if e > s {
        (e - s + st - 1) / st.max(1)
    } else {
        0
    };
    (st > 0 && trips <= UNROLL_TRIPS && e + st <= max && s >= -(1 << 31)).then_some((s, e, st))
}

/// The most trips of a loop [`small_constant_range`] unrolls: 128 covers the
/// accumulators of a 64×64 tensor-core warp tile, which must stay in registers (a loop
/// left rolled indexes its array dynamically and moves it to local memory).
const UNROLL_TRIPS: i128 = 128;

/// `expr` without the parentheses around the whole of it, if it has them: a condition is
/// printed inside `if (...)` already, and `if ((a == b))` is clang's
/// `-Wparentheses-equality` warning (the MSL shim compiles with warnings as errors, as
/// Apple's compiler would show them).
fn unwrapped(expr: &str) -> &str {
    let Some(inner) = expr.strip_prefix('(').and_then(|e| e.strip_suffix(')')) else {
        return expr;
    };
    // The first `(` must close at the very end: `(a) && (b)` is not wrapped.
    let mut depth = 0i32;
    for c in inner.chars() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return expr;
                }
            }
            _ => {}
        }
    }
    if depth == 0 {
        inner
    } else {
        expr
    }
}

#[cfg(test)]
mod tests {
    use super::unwrapped;

    #[test]
    fn only_parentheses_around_the_whole_condition_are_dropped() {
        assert_eq!(unwrapped("(a == b)"), "a == b");
        assert_eq!(unwrapped("((a == b) && (c < d))"), "(a == b) && (c < d)");
        assert_eq!(unwrapped("(a == b) && (c < d)"), "(a == b) && (c < d)");
        assert_eq!(unwrapped("(a) + (b)"), "(a) + (b)");
        assert_eq!(unwrapped("f(x)"), "f(x)");
        assert_eq!(unwrapped("x"), "x");
    }
}
