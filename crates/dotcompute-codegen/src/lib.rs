//! # dotcompute-codegen: from IR to target source
//!
//! Generators, one module each: [`cuda`] (CUDA C++ for NVRTC), [`wgsl`] (the wgpu
//! backend), [`msl`] (the Metal backend and its Linux shim), and [`IrText`], a readable,
//! Rust-like listing of a kernel's IR with every value's type (`dotcompute emit --target
//! ir`). With the `naga` feature (on by default), [`naga_out`] validates WGSL and writes
//! naga's MSL, SPIR-V and HLSL from it, and [`spirv`] writes the strict SPIR-V the wgpu
//! backend hands Vulkan: a build for CUDA or native Metal alone leaves naga out
//! (`dotcompute` without its `wgpu` feature).
//!
//! ## Contract
//!
//! *Trusts* its input to be validated IR (`dotcompute_ir::validate`): generators do not
//! re-check types. *Guarantees* deterministic output: the same IR gives byte-identical
//! source, so generated source can be snapshot-tested and hashed into cache keys.

mod cfamily;
pub mod cuda;
pub mod msl;
pub mod msl_raw;
#[cfg(feature = "naga")]
pub mod naga_out;
#[cfg(feature = "naga")]
pub mod spirv;
pub mod wgsl;

use dotcompute_ir::*;
use std::fmt::Write;

/// What a hand-written kernel's entry point expects: read from naga's IR for WGSL and
/// SPIR-V (`naga_out`), from the signature for MSL ([`msl_raw`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reflection {
    pub workgroup_size: [u32; 3],
    /// `(binding, read_only, element type)` of each storage buffer in group 0, by binding.
    pub storage: Vec<(u32, bool, dotcompute_ir::Type)>,
    /// Binding and size in bytes of the uniform block in group 0, if any.
    pub uniform: Option<(u32, u32)>,
    /// Bytes of `var<workgroup>` memory the module declares (checked against the device's
    /// limit at launch).
    pub workgroup_bytes: u64,
}

/// A SPIR-V module as text: a header with the word count and SHA-256, then the words in
/// hex, eight per line (naga has no disassembler; `spirv-dis` reads the binary form).
pub fn spirv_listing(words: &[u32]) -> String {
    use sha2::{Digest, Sha256};
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let hash: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut out = format!("; SPIR-V, {} words, sha256 {hash}\n", words.len());
    for chunk in words.chunks(8) {
        let line: Vec<String> = chunk.iter().map(|w| format!("{w:08x}")).collect();
        out.push_str(&line.join(" "));
        out.push('\n');
    }
    out
}

/// Version of the generators' output; part of compile-cache keys.
pub const CODEGEN_VERSION: u32 = 1;

/// A code generator.
pub trait Target {
    /// Short name (`ir`, `wgsl`, `cuda`, ...).
    fn name(&self) -> &'static str;
    /// Source text for `kernel`.
    fn generate(&self, kernel: &Kernel) -> String;
}

/// The IR as readable text.
pub struct IrText;

impl Target for IrText {
    fn name(&self) -> &'static str {
        "ir"
    }
    fn generate(&self, k: &Kernel) -> String {
        let mut p = Printer {
            k,
            out: String::new(),
        };
        p.kernel();
        p.out
    }
}

struct Printer<'k> {
    k: &'k Kernel,
    out: String,
}

impl Printer<'_> {
    fn kernel(&mut self) {
        let k = self.k;
        let _ = writeln!(
            self.out,
            "// dotcompute IR v{} hash {}",
            k.version,
            &k.content_hash_hex()[..16]
        );
        let params: Vec<String> = k
            .params
            .iter()
            .map(|p| match p {
                Param::Buffer { name, elem, access } => format!(
                    "{name}: {}[{elem}]",
                    if *access == Access::ReadWrite {
                        "&mut "
                    } else {
                        "&"
                    }
                ),
                Param::Scalar { name, ty } => format!("{name}: {ty}"),
            })
            .collect();
        let _ = writeln!(self.out, "kernel {}({}) {{", k.name, params.join(", "));
        for s in &k.shared {
            let len = match s.len {
                SharedLen::Static(n) => n.to_string(),
                SharedLen::Dynamic => "dynamic".into(),
            };
            let _ = writeln!(self.out, "    shared {}: [{}; {len}];", s.name, s.elem);
        }
        self.block(&k.body, 1);
        self.out.push_str("}\n");
    }

    fn local(&self, id: u32) -> String {
        format!("{}_{id}", self.k.locals[id as usize].name)
    }

    fn block(&mut self, stmts: &[Stmt], depth: usize) {
        for s in stmts {
            self.stmt(s, depth);
        }
    }

    fn line(&mut self, depth: usize, text: &str) {
        let _ = writeln!(self.out, "{}{text}", "    ".repeat(depth));
    }

    fn stmt(&mut self, s: &Stmt, d: usize) {
        match s {
            Stmt::Let { local, init } => {
                let l = &self.k.locals[*local as usize];
                let m = if l.mutable { "mut " } else { "" };
                let init = init.as_ref().map_or("zero".to_string(), |e| self.expr(e));
                let text = format!("let {m}{}: {} = {init};", self.local(*local), l.ty);
                self.line(d, &text);
            }
            Stmt::Assign { local, value } => {
                let text = format!("{} = {};", self.local(*local), self.expr(value));
                self.line(d, &text);
            }
            Stmt::Store { mem, index, value } => {
                let text = format!(
                    "{}[{}] = {};",
                    self.k.memory_name(*mem),
                    self.expr(index),
                    self.expr(value)
                );
                self.line(d, &text);
            }
            Stmt::Atomic {
                op,
                mem,
                index,
                args,
                result,
            } => {
                let operands: String = args.iter().map(|a| format!(", {}", self.expr(a))).collect();
                let call = format!(
                    "atomic_{}(&{}[{}]{operands})",
                    op.name(),
                    self.k.memory_name(*mem),
                    self.expr(index),
                );
                let text = match result {
                    Some(r) => format!("{} = {call};", self.local(*r)),
                    None => format!("{call};"),
                };
                self.line(d, &text);
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                let text = format!("if {} {{", self.expr(cond));
                self.line(d, &text);
                self.block(then, d + 1);
                if !otherwise.is_empty() {
                    self.line(d, "} else {");
                    self.block(otherwise, d + 1);
                }
                self.line(d, "}");
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                let text = format!(
                    "for {} in ({}..{}).step_by({}) {{",
                    self.local(*var),
                    self.expr(start),
                    self.expr(end),
                    self.expr(step)
                );
                self.line(d, &text);
                self.block(body, d + 1);
                self.line(d, "}");
            }
            Stmt::Loop { body } => {
                self.line(d, "loop {");
                self.block(body, d + 1);
                self.line(d, "}");
            }
            Stmt::Break => self.line(d, "break;"),
            Stmt::Continue => self.line(d, "continue;"),
            Stmt::Return => self.line(d, "return;"),
            Stmt::Barrier => self.line(d, "barrier();"),
            Stmt::Mma {
                shape,
                acc,
                base,
                a,
                b,
            } => {
                let ops: Vec<String> = a.iter().chain(b).map(|x| self.expr(x)).collect();
                let text = format!(
                    "{}(&mut {}[{}], {});",
                    shape.name(),
                    self.k.memory_name(*acc),
                    self.expr(base),
                    ops.join(", ")
                );
                self.line(d, &text);
            }
        }
    }

    fn expr(&self, e: &Expr) -> String {
        match &e.kind {
            ExprKind::Literal(l) => l.to_string(),
            ExprKind::Local(id) => self.local(*id),
            ExprKind::Scalar(i) => self.k.params[*i as usize].name().to_string(),
            ExprKind::Builtin(b, a) => format!("{}().{}", b.name(), a.name()),
            ExprKind::Len(m) => format!("{}.len()", self.k.memory_name(*m)),
            ExprKind::Subgroup(op, args) => {
                let a: Vec<String> = args.iter().map(|x| self.expr(x)).collect();
                format!("{}({})", op.name(), a.join(", "))
            }
            ExprKind::Load { mem, index } => {
                format!("{}[{}]", self.k.memory_name(*mem), self.expr(index))
            }
            ExprKind::Unary(op, a) => format!(
                "{}{}",
                if *op == UnaryOp::Neg { "-" } else { "!" },
                self.expr(a)
            ),
            ExprKind::Binary(op, a, b) => {
                format!("({} {} {})", self.expr(a), op.symbol(), self.expr(b))
            }
            ExprKind::Cast(a) => format!("({} as {})", self.expr(a), e.ty),
            ExprKind::Bitcast(a) => format!("{}::bitcast({})", e.ty, self.expr(a)),
            ExprKind::Math(f, args) => {
                let args: Vec<String> = args.iter().map(|a| self.expr(a)).collect();
                format!("{}({})", f.name(), args.join(", "))
            }
            ExprKind::Select {
                cond,
                then,
                otherwise,
            } => format!(
                "select({}, {}, {})",
                self.expr(cond),
                self.expr(then),
                self.expr(otherwise)
            ),
            ExprKind::Extract { value, lane } => {
                format!("{}.{}", self.expr(value), Type::lane_name(*lane))
            }
            ExprKind::Construct(lanes) => {
                let a: Vec<String> = lanes.iter().map(|x| self.expr(x)).collect();
                format!("Vec{}::new({})", lanes.len(), a.join(", "))
            }
        }
    }
}

/// The kernel with its grid-stride loops over read-only buffers unrolled, four loads per
/// trip ([`dotcompute_ir::unroll`]), where `allowed` (the caller's option, not in checked
/// mode, not in an automatic grid-stride or vector form); `None` when nothing changes.
/// CUDA and WGSL use it. The generators read no environment: backends pass
/// `DOTCOMPUTE_UNROLL` (`dotcompute_hal::settings::unroll`) as an option.
pub(crate) fn unrolled(kernel: &Kernel, allowed: bool) -> Option<Kernel> {
    allowed
        .then(|| dotcompute_ir::unroll::unroll_strided_loads(kernel))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_a_hand_built_kernel() {
        let mut b = Builder::new("scale");
        let x = b.buffer("x", ScalarType::F32, Access::ReadWrite);
        let s = b.scalar("s", ScalarType::F32);
        let i = b.builtin(Builtin::GlobalId, Axis::X);
        let v = b.load(x, i.clone()).unwrap();
        let v = b.binary(BinaryOp::Mul, v, s).unwrap();
        b.store(x, i, v).unwrap();
        let k = b.finish().unwrap();
        let text = IrText.generate(&k);
        assert!(
            text.contains("kernel scale(x: &mut [f32], s: f32) {"),
            "{text}"
        );
        assert!(
            text.contains("x[global_id().x] = (x[global_id().x] * s);"),
            "{text}"
        );
    }
}
