//! Statements: lines, blocks, memory accesses with their checks, loops (written out
//! where small and constant), atomics.

use super::*;

impl Gen<'_> {
    pub(super) fn line(&mut self, depth: usize, text: &str) {
        for _ in 0..depth {
            self.out.push_str("    ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    pub(super) fn block(&mut self, stmts: &[Stmt], d: usize) {
        for s in stmts {
            self.stmt(s, d);
        }
    }

    /// A loop that cannot run forever, as three lines: the counter's declaration, the
    /// loop's opening and the first line of its body. SPIR-V lets drivers assume that a
    /// loop without side effects ends, so an endless one is undefined behaviour; naga's
    /// `force_loop_bounding` adds this counter to every loop, which the backend turns off
    /// because most loops of generated code are `for` loops that end by construction
    /// (their counter rises every trip and they stop before it would wrap), and the
    /// counter cost a matrix product's inner loop 5 % on NVIDIA Vulkan. The rest (the
    /// kernel language's `loop` and `while`, compare-exchange retries) get the same
    /// counter here: 2^64 trips, then the loop ends.
    pub(super) fn bounded_loop(&mut self) -> [String; 3] {
        let c = self.fresh();
        [
            format!("var {c}: vec2<u32> = vec2<u32>(4294967295u);"),
            "loop {".to_string(),
            format!(
                "if (all({c} == vec2<u32>(0u))) {{ break; }} {c} = vec2<u32>({c}.x - 1u, {c}.y - u32({c}.x == 0u));"
            ),
        ]
    }

    pub(super) fn fresh(&mut self) -> String {
        self.tmp += 1;
        format!("dc_t{}", self.tmp)
    }

    /// `mem[index]`; with view offsets a buffer's index starts at its view. A shared or
    /// thread-private array's index that [`dotcompute_ir::ranges`] cannot prove in bounds
    /// is clamped to the last element (what naga's `Restrict` policy does, which the
    /// backend then turns off so that proven indices cost nothing): out-of-range accesses
    /// to those arrays are undefined in SPIR-V, and the module must stay memory-safe
    /// whatever the kernel computes. Buffers are bounded by robust buffer access.
    pub(super) fn element(&self, mem: Memory, index: &Expr) -> String {
        let text = self.expr(index);
        match mem {
            Memory::Buffer(i) if self.view_offsets => format!(
                "{}[dc_params.off_{} + {text}]",
                self.mem_name(mem),
                self.k.params[i as usize].name()
            ),
            Memory::Buffer(_) => format!("{}[{text}]", self.mem_name(mem)),
            _ if self
                .ranges
                .index_in_bounds(mem, index, self.dynamic_shared_len) =>
            {
                format!("{}[{text}]", self.mem_name(mem))
            }
            _ => format!(
                "{}[min({text}, {}u - 1u)]",
                self.mem_name(mem),
                self.len_of(mem).trim_end_matches('u')
            ),
        }
    }

    /// The length of `mem` in elements, as an expression.
    pub(super) fn len_of(&self, mem: Memory) -> String {
        match mem {
            Memory::Buffer(i) if self.k.memory_elem(mem) == Some(ScalarType::F16.into()) => {
                format!("dc_params.len_{}", self.k.params[i as usize].name())
            }
            Memory::Buffer(i) if self.is_vector_buffer(i) => {
                format!("(arrayLength(&{}) * 4u)", self.mem_name(mem))
            }
            Memory::Buffer(i) if self.view_offsets => format!(
                "(arrayLength(&{}) - dc_params.off_{})",
                self.mem_name(mem),
                self.k.params[i as usize].name()
            ),
            Memory::Buffer(_) => format!("arrayLength(&{})", self.mem_name(mem)),
            // Shared lengths are constants of this specialisation.
            Memory::Shared(i) => match self.k.shared[i as usize].len {
                SharedLen::Static(n) => format!("{n}u"),
                SharedLen::Dynamic => format!("{}u", self.dynamic_shared_len),
            },
            Memory::Local(i) => format!("{}u", self.k.local_arrays[i as usize].len),
        }
    }

    /// In checked mode, the condition under which `mem[index]` is in bounds; it records
    /// the launch's first violation (`dc_in`).
    pub(super) fn bounds_check(&self, mem: Memory, index: &str) -> Option<String> {
        self.checked
            .then(|| format!("dc_in(u32({index}), {}, {}u)", self.len_of(mem), mem.code()))
    }

    /// `&mem[index]` for atomics.
    pub(super) fn addr(&self, mem: Memory, index: &Expr) -> String {
        format!("&{}", self.element(mem, index))
    }

    pub(super) fn stmt(&mut self, s: &Stmt, d: usize) {
        match s {
            Stmt::Let { local, init } => {
                let l = &self.k.locals[*local as usize];
                let t = self.type_name(l.ty);
                let init = match init {
                    Some(e) => self.expr(e),
                    None => format!("{t}()"),
                };
                let text = format!("var {}: {t} = {init};", self.local(*local));
                self.line(d, &text);
            }
            Stmt::Assign { local, value } => {
                let text = format!("{} = {};", self.local(*local), self.expr(value));
                self.line(d, &text);
            }
            Stmt::Store {
                mem: Memory::Buffer(b),
                value,
                ..
            } if self.lane => {
                // The lane's own element (the vector form's plan indexes every access by
                // the global id).
                let name = self.k.params[*b as usize].name();
                let store = format!("*r_{name} = {};", self.expr(value));
                self.line(d, &store);
                self.line(d, &format!("*m_{name} = true;"));
            }
            Stmt::Store { mem, index, value } => {
                let text = if self.atomic.contains(mem) {
                    let v = self.expr(value);
                    let v = if self.f32_as_bits(value.ty) {
                        format!("bitcast<u32>({v})")
                    } else {
                        v
                    };
                    format!("atomicStore({}, {v});", self.addr(*mem, index))
                } else {
                    format!("{} = {};", self.element(*mem, index), self.expr(value))
                };
                let text = match self.bounds_check(*mem, &self.expr(index)) {
                    Some(check) => format!("if ({check}) {{ {text} }}"),
                    None => text,
                };
                self.line(d, &text);
            }
            Stmt::Atomic {
                op,
                mem,
                index,
                args,
                result,
            } => match self.bounds_check(*mem, &self.expr(index)) {
                Some(check) => {
                    self.line(d, &format!("if ({check}) {{"));
                    self.atomic_stmt(*op, *mem, index, args, *result, d + 1);
                    self.line(d, "}");
                }
                None => self.atomic_stmt(*op, *mem, index, args, *result, d),
            },
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                let text = format!("if ({}) {{", self.expr(cond));
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
                let v = self.local(*var);
                let scalar = self.k.locals[*var as usize].ty.scalar;
                let t = self.ty(scalar);
                let constant = crate::cfamily::small_constant_range(start, end, step, scalar);
                if let Some(trips) = constant.and_then(|r| unrollable(r, body)) {
                    // Constant bounds, a few trips, no jumps: the body once per value of
                    // the counter. WGSL has no unroll hint; unrolled, thread-private
                    // arrays indexed by the counter stay in registers, and drivers that
                    // bound loop iterations (llvmpipe ends a loop after 65,535) count
                    // only the loops that remain.
                    // Each trip binds the counter with `let`: a constant expression, so
                    // array indices built from it are constant in naga's output too.
                    for value in trips {
                        self.line(d, "{");
                        self.line(d + 1, &format!("let {v}: {t} = {t}({value});"));
                        self.block(body, d + 1);
                        self.line(d, "}");
                    }
                    return;
                }
                let (e, st) = (self.fresh(), self.fresh());
                self.line(d, "{");
                let lines = [
                    format!("var {v}: {t} = {};", self.expr(start)),
                    format!("let {e}: {t} = {};", self.expr(end)),
                    format!("let {st}: {t} = {};", self.expr(step)),
                    format!("if ({st} > {t}(0) && {v} < {e}) {{"),
                ];
                for l in &lines {
                    self.line(d + 1, l);
                }
                self.line(d + 2, "loop {");
                self.count_trip(d + 3);
                self.block(body, d + 3);
                self.line(d + 3, "continuing {");
                // Stop at the end or when the counter would overflow (Rust's ranges do).
                let next = self.fresh();
                let cont = [
                    format!("let {next}: {t} = {v} + {st};"),
                    format!("let {next}_stop = {next} <= {v} || {next} >= {e};"),
                    format!("{v} = {next};"),
                    format!("break if {next}_stop;"),
                ];
                for l in &cont {
                    self.line(d + 4, l);
                }
                self.line(d + 3, "}");
                self.line(d + 2, "}");
                self.line(d + 1, "}");
                self.line(d, "}");
            }
            Stmt::Loop { body } => {
                let [declare, open, guard] = self.bounded_loop();
                self.line(d, &declare);
                self.line(d, &open);
                self.line(d + 1, &guard);
                self.count_trip(d + 1);
                self.block(body, d + 1);
                self.line(d, "}");
            }
            Stmt::Break => self.line(d, "break;"),
            Stmt::Continue => self.line(d, "continue;"),
            Stmt::Return => {
                self.check_trips(d);
                self.line(d, "return;")
            }
            // The IR's barrier orders shared and global memory within the group.
            // Refused by `generate` before any statement is printed.
            Stmt::Mma { .. } => unreachable!("tensor-core kernels are refused for WGSL"),
            Stmt::Barrier => {
                if self.storage_barriers {
                    self.line(d, "storageBarrier();");
                }
                self.line(d, "workgroupBarrier();");
            }
        }
    }

    pub(super) fn atomic_stmt(
        &mut self,
        op: AtomicOp,
        mem: Memory,
        index: &Expr,
        args: &[Expr],
        result: Option<u32>,
        d: usize,
    ) {
        // Atomics are on scalar elements only (validated).
        let elem = self.k.memory_elem(mem).expect("validated").scalar;
        let addr = self.addr(mem, index);
        if op == AtomicOp::Load {
            // f32 elements support add only (validated), so a load is never on bits.
            if let Some(r) = result {
                self.line(d, &format!("{} = atomicLoad({addr});", self.local(r)));
            }
            return;
        }
        let a0 = self.expr(&args[0]);
        let old = self.fresh();
        let assign = |g: &Self, v: &str| match result {
            Some(r) => format!("{} = {v};", g.local(r)),
            None => String::new(),
        };
        // With the adapter's f32 atomics, an f32 add is the plain `atomicAdd` below.
        if self.f32_as_bits(elem.into()) {
            // Float add: compare-exchange on the bits until no other thread intervened.
            let ptr = self.fresh();
            let r = self.fresh();
            let [declare, open, guard] = self.bounded_loop();
            let lines = [
                format!("let {ptr} = {addr};"),
                format!("var {old}: u32 = atomicLoad({ptr});"),
                declare,
                open,
                format!("    {guard}"),
                format!("    let {r} = atomicCompareExchangeWeak({ptr}, {old}, bitcast<u32>(bitcast<f32>({old}) + {a0}));"),
                format!("    if ({r}.exchanged) {{ break; }}"),
                format!("    {old} = {r}.old_value;"),
                "}".to_string(),
                assign(self, &format!("bitcast<f32>({old})")),
            ];
            for l in &lines {
                if !l.is_empty() {
                    self.line(d, l);
                }
            }
            return;
        }
        let text = match op {
            AtomicOp::CompareExchange => {
                // atomicCompareExchangeWeak may fail spuriously; retry until it either
                // exchanged or saw a different value (a strong compare-exchange).
                let a1 = self.expr(&args[1]);
                let (ptr, r) = (self.fresh(), self.fresh());
                let t = self.ty(elem);
                let [declare, open, guard] = self.bounded_loop();
                let lines = [
                    format!("let {ptr} = {addr};"),
                    format!("var {old}: {t};"),
                    declare,
                    open,
                    format!("    {guard}"),
                    format!("    let {r} = atomicCompareExchangeWeak({ptr}, {a0}, {a1});"),
                    format!("    if ({r}.exchanged || {r}.old_value != {a0}) {{ {old} = {r}.old_value; break; }}"),
                    "}".to_string(),
                    assign(self, &old),
                ];
                for l in &lines {
                    if !l.is_empty() {
                        self.line(d, l);
                    }
                }
                return;
            }
            _ => {
                let f = match op {
                    AtomicOp::Add => "atomicAdd",
                    AtomicOp::Sub => "atomicSub",
                    AtomicOp::Min => "atomicMin",
                    AtomicOp::Max => "atomicMax",
                    AtomicOp::And => "atomicAnd",
                    AtomicOp::Or => "atomicOr",
                    AtomicOp::Xor => "atomicXor",
                    AtomicOp::Exchange => "atomicExchange",
                    AtomicOp::CompareExchange | AtomicOp::Load => unreachable!(),
                };
                let call = format!("{f}({addr}, {a0})");
                match result {
                    Some(r) => format!("{} = {call};", self.local(r)),
                    None => format!("{call};"),
                }
            }
        };
        self.line(d, &text);
    }
}

/// The counter's values of a constant loop the WGSL printer writes out: at most
/// [`UNROLL_TRIPS`] trips, a body that neither returns nor breaks out of or continues
/// this loop (a `break` of a loop nested in it stays inside a trip), and at most
/// [`UNROLL_STATEMENTS`] statements once written out.
pub(super) fn unrollable(
    (start, end, step): (i128, i128, i128),
    body: &[Stmt],
) -> Option<Vec<i128>> {
    let values: Vec<i128> = (start..end).step_by(step as usize).collect();
    let small = values.len() <= UNROLL_TRIPS
        && unrolled_size(body).saturating_mul(values.len()) <= UNROLL_STATEMENTS;
    (small && !jumps_out(body)).then_some(values)
}

/// Whether `body` returns, or breaks or continues the loop whose body it is: a `break` or
/// `continue` inside a loop nested in `body` jumps within it (a subgroup scan's
/// `while d < subgroup_size()` inside a kernel's loop over its items must not keep that
/// loop, and with it the thread's array indexed by its counter, out of registers).
fn jumps_out(body: &[Stmt]) -> bool {
    body.iter().any(|s| match s {
        Stmt::Break | Stmt::Continue | Stmt::Return => true,
        Stmt::If {
            then, otherwise, ..
        } => jumps_out(then) || jumps_out(otherwise),
        Stmt::For { body, .. } | Stmt::Loop { body } => {
            let mut returns = false;
            walk_stmts(body, &mut |x| returns |= matches!(x, Stmt::Return));
            returns
        }
        _ => false,
    })
}

/// Statements `body` prints as, with the loops the printer writes out counted once per
/// trip (a loop it keeps counts its body once).
pub(super) fn unrolled_size(body: &[Stmt]) -> usize {
    body.iter()
        .map(|s| match s {
            Stmt::For {
                start,
                end,
                step,
                body,
                ..
            } => {
                let trips = crate::cfamily::small_constant_range(start, end, step, ScalarType::I64)
                    .and_then(|r| unrollable(r, body))
                    .map_or(1, |v| v.len());
                1 + trips.saturating_mul(unrolled_size(body))
            }
            Stmt::If {
                then, otherwise, ..
            } => 1 + unrolled_size(then) + unrolled_size(otherwise),
            Stmt::Loop { body } => 1 + unrolled_size(body),
            _ => 1,
        })
        .fold(0, usize::saturating_add)
}

/// The most trips of a loop the WGSL printer writes out. 64: a register-blocked
/// product's 8×8 accumulators are set in one 64-trip loop, which must be written out for
/// drivers to keep them in registers.
pub(super) const UNROLL_TRIPS: usize = 64;

/// The most statements a written-out loop may print as. Writing out every loop of a
/// register-blocked product (16 steps × 80 statements) made a module NVIDIA's Vulkan
/// compiler took 161 s to build; keeping the outermost loop keeps it to a few seconds
/// while the accumulators stay in registers.
pub(super) const UNROLL_STATEMENTS: usize = 1024;
