//! # dotcompute-ir: the kernel IR
//!
//! Every kernel, whether written in Rust with `#[kernel]` or built by hand, becomes a
//! [`Kernel`]: a signature (buffer and scalar parameters, shared arrays) and a body of
//! structured statements (blocks, `if`/`else`, counted `for`, `loop` with
//! `break`/`continue`). Structured control flow maps one-to-one onto CUDA C++, WGSL and
//! MSL; a CFG form is not needed until optimisation passes exist.
//!
//! ## Contract
//!
//! *Validates* ([`validate`]): the version; identifiers; at most one dynamic shared array;
//! no `bool` in memory; vector types are well formed and appear only in loads, stores,
//! locals, lane-wise arithmetic, selects and constructions; every expression's recorded type equals the type its operands
//! produce; locals are declared once and used only inside the block that declares them;
//! assignments only to mutable locals; stores and atomics only into writable memory;
//! atomics only on element types that support them; indices are `u32`; `break` and
//! `continue` only inside loops. Backends may trust a validated kernel for all of these.
//!
//! *Does not check* (it cannot, statically): that every thread of a group reaches the same
//! barriers (backends report divergence where they can detect it), data races between
//! threads, and indices in bounds (the CPU backend reports out-of-bounds accesses).
//!
//! ## Invariants
//!
//! * Types are explicit on every value ([`Expr::ty`]); there are no implicit conversions.
//! * Expressions have no side effects; atomics are statements ([`Stmt::Atomic`]) whose
//!   previous value lands in a local. So evaluation order inside an expression never
//!   matters, except for the short-circuit operators, which every target keeps.
//! * Builtin coordinates (`global_id`, `local_id`, ...) and lengths are `u32`.
//!
//! ## Semantics every backend follows
//!
//! The CPU backend runs the Rust text of a kernel natively; GPU backends run code generated
//! from this IR. Both follow these definitions, which are Rust's *release* semantics made
//! total (no panics):
//!
//! * Integer `+ - *`, negation and `abs` wrap (two's complement).
//! * Integer `x / 0 == x` and `x % 0 == 0`; `MIN / -1 == MIN` and `MIN % -1 == 0` (WGSL's
//!   definition, which a GPU can follow with one select).
//! * Shifts use the amount modulo the bit width (`x << 33 == x << 1` for 32-bit `x`); the
//!   amount is `u32`; `>>` is arithmetic for signed types.
//! * `as` casts follow Rust: float to integer rounds toward zero and saturates, NaN gives
//!   0; integer to integer truncates or sign-extends; integer to float rounds to nearest;
//!   `bool as int` is 0 or 1. There is no cast to `bool`.
//! * `T::bitcast(x)` reads `x`'s bits as `T` of the same size (`f32`/`u32`/`i32`,
//!   `f64`/`u64`/`i64`), keeping every bit pattern: what `to_bits` and `from_bits` do.
//! * Float `min`/`max` return the other operand when one is NaN (IEEE minNum/maxNum);
//!   `clamp(x, lo, hi)` is `min(max(x, lo), hi)`. Of `+0` and `-0` they may return
//!   either (CUDA's `fminf` gives `-0`, the CPU `+0`).
//! * Float comparisons follow IEEE 754: with a NaN operand `==`, `<`, `<=`, `>`, `>=` are
//!   false and `!=` is true, so `x != x` is the portable NaN test; `is_nan()` and
//!   `is_finite()` test the bits. GPU compilers may assume NaN-free floats (lavapipe
//!   folded `x != x` to false), so generated WGSL tests `==` / `!=` operands for NaN on
//!   their bits.
//! * Subnormal floats are kept on the CPU and CUDA (NVRTC without `-ftz`), and on wgpu
//!   where the Vulkan device reports `shaderDenormPreserveFloat32` (generated kernels then
//!   carry SPIR-V's `DenormPreserve 32`): `Capabilities::subnormals`. NVIDIA's Vulkan
//!   driver (580, H100) and lavapipe report no such guarantee, and NVIDIA flushes (on an
//!   H100, `0.0 == 5.9e-39` was true through wgpu, and `min` / `max` / `clamp` returned
//!   0 for subnormal results), so there a subnormal may behave as zero.
//! * `for v in (a..b).step_by(s)` evaluates `a`, `b`, `s` once; a step of 0 runs no
//!   iterations (Rust would panic).
//! * Float `+ - *` are correctly rounded, one operation at a time: never contracted into
//!   a fused multiply-add and never reassociated. The CPU runs them as written, CUDA
//!   compiles with `--fmad=false`, and wgpu hands generated kernels to Vulkan as SPIR-V
//!   with `NoContraction` on every float operation (`Capabilities::exact_float`). Where
//!   that is not possible (DX12; Metal, never run; Vulkan without SPIR-V passthrough;
//!   `DOTCOMPUTE_WGPU_FLOAT=relaxed`) the driver may fuse `a * b + c` and reassociate
//!   sums, and `exact_float` is false; `Device::require_exact_float` refuses such a
//!   device. One exception remains: lavapipe folds `x + 0.0` to `x` when the zero is a
//!   constant, keeping the sign of a negative zero. `/` and `sqrt` are correctly
//!   rounded on the CPU and within Vulkan's bounds (2.5 ulp) on wgpu. `fma` rounds once on
//!   the CPU; WGSL may evaluate it unfused (two roundings). `sin`, `cos`, `tan`, `exp`,
//!   `log` and `pow` follow each backend's documented precision: a few ulp on the CPU,
//!   Vulkan's bounds on wgpu (for example 2^-11 absolute for `sin`/`cos` on [-π, π], and
//!   nothing promised outside it). The conformance tests state their tolerances.
//! * Indices are `u32`; an integer index of another type is converted with `as u32`.
//! * Vectors ([`Type`] with 2 or 4 lanes of `f32`, `i32` or `u32`: `Vec2<T>`, `Vec4<T>`)
//!   are buffer elements (one 8- or 16-byte load or store each), locals and kernel
//!   function values. `+ - * /` (and `%` on integers) and unary `-` apply lane by lane
//!   with the scalar rules above; integer `/` and `%` are split into one scalar
//!   operation per lane ([`ExprKind::Construct`] of [`ExprKind::Extract`]s), so every
//!   backend divides with the code it already has. Lanes are read with `v.x` .. `v.w`
//!   and never assigned one at a time; comparisons, casts, math functions, atomics and
//!   subgroup operations take scalars. Shared and local arrays hold scalars.
//!
//! ## Stability
//!
//! [`Kernel::content_hash`] hashes the canonical serialized form (which includes
//! [`IR_VERSION`]); equal kernels hash equally in every process and on every machine, so it
//! keys compile caches. Change `IR_VERSION` whenever the meaning of an IR shape changes.

pub mod analysis;
mod build;
mod features;
pub mod interface;
mod kernel;
mod ops;
pub mod ranges;
mod types;
pub mod unroll;
mod validate;
pub mod vector;

pub use build::{BuildError, Builder, HostValue, Mem, Slot, Var, LOCAL_ARRAY_MAX, V};
pub use features::Features;
pub use kernel::*;
pub use types::{Literal, ScalarType, Type};
pub use validate::{validate, ValidationError};
pub use vector::{Vec2, Vec4};

use sha2::{Digest, Sha256};

/// Errors reading a serialized kernel.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("kernel IR is not valid JSON for IR version {IR_VERSION}: {0}")]
    Syntax(#[from] serde_json::Error),
    #[error(transparent)]
    Invalid(#[from] ValidationError),
}

impl Kernel {
    /// The canonical serialized form (JSON; field order is fixed by the type definitions).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("kernel IR always serializes")
    }

    /// Reads and validates a serialized kernel.
    pub fn from_json(text: &str) -> Result<Kernel, DecodeError> {
        let k: Kernel = serde_json::from_str(text)?;
        validate(&k)?;
        Ok(k)
    }

    /// SHA-256 of the canonical serialized form: a stable content hash for cache keys.
    pub fn content_hash(&self) -> [u8; 32] {
        Sha256::digest(self.to_json().as_bytes()).into()
    }

    /// [`Kernel::content_hash`] as lowercase hex.
    pub fn content_hash_hex(&self) -> String {
        self.content_hash()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}
