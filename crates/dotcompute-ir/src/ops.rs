//! The IR's vocabulary of operations: builtins and their axes, unary and binary operators,
//! math functions, subgroup operations and atomics, each with the names the kernel
//! language and the generators use.

use crate::types::ScalarType;
use serde::{Deserialize, Serialize};

/// Per-thread launch coordinates. Each is a 3-vector read one axis at a time, as `u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Builtin {
    /// `group_id * group_size + local_id`.
    GlobalId,
    /// The thread's index inside its group.
    LocalId,
    /// The group's index inside the grid.
    GroupId,
    /// Threads per group.
    GroupSize,
    /// Groups in the launch.
    NumGroups,
}

impl Builtin {
    pub const ALL: [Builtin; 5] = [
        Builtin::GlobalId,
        Builtin::LocalId,
        Builtin::GroupId,
        Builtin::GroupSize,
        Builtin::NumGroups,
    ];
    /// The kernel language's name (`global_id`).
    pub fn name(self) -> &'static str {
        match self {
            Builtin::GlobalId => "global_id",
            Builtin::LocalId => "local_id",
            Builtin::GroupId => "group_id",
            Builtin::GroupSize => "group_size",
            Builtin::NumGroups => "num_groups",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Axis {
    X,
    Y,
    Z,
}

impl Axis {
    pub fn index(self) -> usize {
        self as usize
    }
    pub fn name(self) -> &'static str {
        ["x", "y", "z"][self as usize]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UnaryOp {
    /// Arithmetic negation; wrapping for integers.
    Neg,
    /// Logical not for `bool`, bitwise not for integers.
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// Short-circuit: the right operand is evaluated only when the left is true.
    LogicalAnd,
    /// Short-circuit: the right operand is evaluated only when the left is false.
    LogicalOr,
}

impl BinaryOp {
    pub fn symbol(self) -> &'static str {
        use BinaryOp::*;
        match self {
            Add => "+",
            Sub => "-",
            Mul => "*",
            Div => "/",
            Rem => "%",
            BitAnd => "&",
            BitOr => "|",
            BitXor => "^",
            Shl => "<<",
            Shr => ">>",
            Eq => "==",
            Ne => "!=",
            Lt => "<",
            Le => "<=",
            Gt => ">",
            Ge => ">=",
            LogicalAnd => "&&",
            LogicalOr => "||",
        }
    }
    pub fn is_comparison(self) -> bool {
        use BinaryOp::*;
        matches!(self, Eq | Ne | Lt | Le | Gt | Ge)
    }
}

/// Math functions. Float-only unless noted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MathFn {
    Sqrt,
    Sin,
    Cos,
    Tan,
    Exp,
    /// Natural logarithm (Rust's `ln`).
    Log,
    /// `x.powf(y)`.
    Pow,
    /// Any numeric type; wrapping for signed integers (`abs(MIN) == MIN`).
    Abs,
    /// Any numeric type; for floats, a NaN operand yields the other operand.
    Min,
    /// Any numeric type; for floats, a NaN operand yields the other operand.
    Max,
    /// `a * b + c` with a single rounding.
    Fma,
    Floor,
    Ceil,
    /// Any numeric type; defined as `min(max(x, lo), hi)`, never an error.
    Clamp,
    /// Floats: `2^x`.
    Exp2,
    /// Floats: base-2 logarithm.
    Log2,
    /// Floats: hyperbolic tangent.
    Tanh,
    /// Floats: round toward zero.
    Trunc,
    /// Floats: round to nearest, halves away from zero (Rust's `round`, not WGSL's).
    Round,
    /// Floats: `1 / x`.
    Recip,
    /// Floats: `atan2(y, x)` (Rust's `y.atan2(x)`), in `[-π, π]`.
    Atan2,
    /// Integers: set bits, as `u32`.
    CountOnes,
    /// Integers: zero bits above the highest set bit (the width for 0), as `u32`.
    LeadingZeros,
    /// Integers: zero bits below the lowest set bit (the width for 0), as `u32`.
    TrailingZeros,
    /// Integers: the bits in reverse order, same type.
    ReverseBits,
    /// Integers: `a + b` clamped to the type's range (Rust's `saturating_add`).
    SaturatingAdd,
    /// Integers: `a - b` clamped to the type's range (Rust's `saturating_sub`).
    SaturatingSub,
    /// Floats; `bool`: whether the value is a NaN (any sign, any payload).
    IsNan,
    /// Floats: `1 / sqrt(x)`, within 2 ulp (the GPUs' reciprocal square root instruction).
    /// WGSL's `inverseSqrt` leaves `x <= 0` undefined; the IR defines it as the CPU does
    /// (`+inf` at 0, NaN below), which CUDA gives, and conformance tests only `x > 0`.
    Rsqrt,
    /// Floats; `bool`: whether the value is neither infinite nor NaN.
    IsFinite,
    /// `u32`: byte `k % 4` of `x` (byte 0 the least significant), zero-extended:
    /// `(x >> (8 * (k % 4))) & 255`. One byte-permute instruction on NVIDIA GPUs (CUDA's
    /// `__byte_perm`), a bit-field extract on Vulkan (WGSL's `extractBits`); written as
    /// shifts, compilers fold a following shift or mask into the extraction (a byte
    /// histogram's counter index `(x >> 3) & 0x1fe0`), which cost a fifth of its speed
    /// on an H200.
    ExtractByte,
}

impl MathFn {
    pub const ALL: [MathFn; 31] = [
        MathFn::Sqrt,
        MathFn::Sin,
        MathFn::Cos,
        MathFn::Tan,
        MathFn::Exp,
        MathFn::Log,
        MathFn::Pow,
        MathFn::Abs,
        MathFn::Min,
        MathFn::Max,
        MathFn::Fma,
        MathFn::Floor,
        MathFn::Ceil,
        MathFn::Clamp,
        MathFn::Exp2,
        MathFn::Log2,
        MathFn::Tanh,
        MathFn::Trunc,
        MathFn::Round,
        MathFn::Recip,
        MathFn::Rsqrt,
        MathFn::Atan2,
        MathFn::CountOnes,
        MathFn::LeadingZeros,
        MathFn::TrailingZeros,
        MathFn::ReverseBits,
        MathFn::SaturatingAdd,
        MathFn::SaturatingSub,
        MathFn::IsNan,
        MathFn::IsFinite,
        MathFn::ExtractByte,
    ];
    /// The Rust method a kernel calls (`x.ln()`, `x.powf(y)`, `a.mul_add(b, c)`): the
    /// receiver is the first operand.
    pub fn method(self) -> &'static str {
        match self {
            MathFn::Log => "ln",
            MathFn::Pow => "powf",
            MathFn::Fma => "mul_add",
            other => other.name(),
        }
    }
    pub fn arity(self) -> usize {
        match self {
            MathFn::Pow
            | MathFn::Min
            | MathFn::Max
            | MathFn::Atan2
            | MathFn::SaturatingAdd
            | MathFn::SaturatingSub
            | MathFn::ExtractByte => 2,
            MathFn::Fma | MathFn::Clamp => 3,
            _ => 1,
        }
    }
    /// Whether the result is `bool` (a test on the argument) rather than the argument's type.
    pub fn is_predicate(self) -> bool {
        matches!(self, MathFn::IsNan | MathFn::IsFinite)
    }
    /// The result type for arguments of type `arg`.
    pub fn result_type(self, arg: ScalarType) -> ScalarType {
        match self {
            MathFn::IsNan | MathFn::IsFinite => ScalarType::Bool,
            MathFn::CountOnes | MathFn::LeadingZeros | MathFn::TrailingZeros => ScalarType::U32,
            _ => arg,
        }
    }
    /// Bit operations: defined on integers only.
    pub fn int_only(self) -> bool {
        matches!(
            self,
            MathFn::CountOnes
                | MathFn::LeadingZeros
                | MathFn::TrailingZeros
                | MathFn::ReverseBits
                | MathFn::SaturatingAdd
                | MathFn::SaturatingSub
                | MathFn::ExtractByte
        )
    }
    pub fn float_only(self) -> bool {
        !self.int_only()
            && !matches!(
                self,
                MathFn::Abs | MathFn::Min | MathFn::Max | MathFn::Clamp
            )
    }
    /// Whether `ty` is a valid argument type.
    pub fn accepts(self, ty: ScalarType) -> bool {
        if self == MathFn::ExtractByte {
            ty == ScalarType::U32
        } else if self.float_only() {
            ty.is_float()
        } else if self.int_only() {
            ty.is_int()
        } else {
            ty.is_numeric()
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            MathFn::Sqrt => "sqrt",
            MathFn::Sin => "sin",
            MathFn::Cos => "cos",
            MathFn::Tan => "tan",
            MathFn::Exp => "exp",
            MathFn::Log => "log",
            MathFn::Pow => "pow",
            MathFn::Abs => "abs",
            MathFn::Min => "min",
            MathFn::Max => "max",
            MathFn::Fma => "fma",
            MathFn::Floor => "floor",
            MathFn::Ceil => "ceil",
            MathFn::Clamp => "clamp",
            MathFn::Exp2 => "exp2",
            MathFn::Log2 => "log2",
            MathFn::Tanh => "tanh",
            MathFn::Trunc => "trunc",
            MathFn::Round => "round",
            MathFn::Recip => "recip",
            MathFn::Atan2 => "atan2",
            MathFn::CountOnes => "count_ones",
            MathFn::LeadingZeros => "leading_zeros",
            MathFn::TrailingZeros => "trailing_zeros",
            MathFn::ReverseBits => "reverse_bits",
            MathFn::SaturatingAdd => "saturating_add",
            MathFn::SaturatingSub => "saturating_sub",
            MathFn::IsNan => "is_nan",
            MathFn::Rsqrt => "rsqrt",
            MathFn::IsFinite => "is_finite",
            MathFn::ExtractByte => "extract_byte",
        }
    }
}

/// Subgroup (warp, SIMD-group) operations: the threads of a subgroup exchange values
/// without memory. A subgroup is `subgroup_size()` consecutive threads of a group in
/// linear order (`x` fastest); the last one of a group is partial when the group size is
/// not a multiple of the subgroup size, and reading its missing lanes is undefined.
/// Every thread of the subgroup must reach the operation (like `barrier()` for a group),
/// so a kernel using them runs whole groups, like a kernel with barriers.
///
/// The size is the device's: 32 on CUDA, the adapter's on wgpu (4 to 128), and 1 on the
/// CPU backend, where every operation sees only the calling thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SubgroupOp {
    /// `u32`: threads per subgroup.
    Size,
    /// `u32`: the thread's index in its subgroup.
    Lane,
    /// `(x, lane: u32)`: `x` of thread `lane % size`.
    Shuffle,
    /// `(x, mask: u32)`: `x` of thread `(lane ^ mask) % size`.
    ShuffleXor,
    /// `(x, delta: u32)`: `x` of thread `lane - delta`, or the caller's own `x` where
    /// `lane < delta`.
    ShuffleUp,
    /// `(x, delta: u32)`: `x` of thread `lane + delta`, or the caller's own `x` where
    /// `lane + delta >= size`.
    ShuffleDown,
    /// `(x)`: the sum over the subgroup (wrapping for integers; float order unspecified).
    /// Subgroup operations take `i32 u32 i64 u64 f32 f64`, not `f16`.
    Add,
    /// `(x)`: the minimum over the subgroup.
    Min,
    /// `(x)`: the maximum over the subgroup.
    Max,
    /// `(x)`: the sum over the lanes below the caller's (0 for lane 0).
    ExclusiveAdd,
    /// `(x)`: the sum over the lanes up to and including the caller's.
    InclusiveAdd,
    /// `(b: bool) -> u32`: bit `i` set when lane `i` passed true (lanes 0 to 31).
    Ballot,
    /// `(b: bool) -> bool`: whether any lane passed true.
    Any,
    /// `(b: bool) -> bool`: whether every lane passed true.
    All,
}

impl SubgroupOp {
    pub const ALL: [SubgroupOp; 14] = [
        SubgroupOp::Size,
        SubgroupOp::Lane,
        SubgroupOp::Shuffle,
        SubgroupOp::ShuffleXor,
        SubgroupOp::ShuffleUp,
        SubgroupOp::ShuffleDown,
        SubgroupOp::Add,
        SubgroupOp::Min,
        SubgroupOp::Max,
        SubgroupOp::ExclusiveAdd,
        SubgroupOp::InclusiveAdd,
        SubgroupOp::Ballot,
        SubgroupOp::Any,
        SubgroupOp::All,
    ];
    /// The kernel language's name (`subgroup_add`), also the CPU backend's function.
    pub fn name(self) -> &'static str {
        match self {
            SubgroupOp::Size => "subgroup_size",
            SubgroupOp::Lane => "subgroup_lane",
            SubgroupOp::Shuffle => "subgroup_shuffle",
            SubgroupOp::ShuffleXor => "subgroup_shuffle_xor",
            SubgroupOp::ShuffleUp => "subgroup_shuffle_up",
            SubgroupOp::ShuffleDown => "subgroup_shuffle_down",
            SubgroupOp::Add => "subgroup_add",
            SubgroupOp::Min => "subgroup_min",
            SubgroupOp::Max => "subgroup_max",
            SubgroupOp::ExclusiveAdd => "subgroup_exclusive_add",
            SubgroupOp::InclusiveAdd => "subgroup_inclusive_add",
            SubgroupOp::Ballot => "subgroup_ballot",
            SubgroupOp::Any => "subgroup_any",
            SubgroupOp::All => "subgroup_all",
        }
    }
    /// Arguments taken.
    pub fn arity(self) -> usize {
        match self {
            SubgroupOp::Size | SubgroupOp::Lane => 0,
            SubgroupOp::Shuffle
            | SubgroupOp::ShuffleXor
            | SubgroupOp::ShuffleUp
            | SubgroupOp::ShuffleDown => 2,
            _ => 1,
        }
    }
    /// Whether the (first) argument is `bool` rather than a number.
    pub fn takes_bool(self) -> bool {
        matches!(self, SubgroupOp::Ballot | SubgroupOp::Any | SubgroupOp::All)
    }
    /// The result type for a first argument of type `arg` (`U32` without arguments).
    pub fn result_type(self, arg: ScalarType) -> ScalarType {
        match self {
            SubgroupOp::Size | SubgroupOp::Lane | SubgroupOp::Ballot => ScalarType::U32,
            SubgroupOp::Any | SubgroupOp::All => ScalarType::Bool,
            _ => arg,
        }
    }
}

/// Atomic operations on one element of a buffer or shared array, all relaxed (no order
/// with other addresses): the read-modify-writes, each returning the previous value, and
/// [`AtomicOp::Load`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AtomicOp {
    Add,
    Sub,
    Min,
    Max,
    And,
    Or,
    Xor,
    Exchange,
    /// Arguments `(expected, new)`: stores `new` if the value equals `expected`.
    CompareExchange,
    /// No arguments: the element's current value, read as an atomic (never a value
    /// cached from an earlier read, never torn), without writing it. What a thread
    /// waiting on another polls: a read-modify-write such as `atomic_or(.., 0)` returns
    /// the same value but serialises every poller on the address (CUDA's single-pass
    /// scan ran at 0.79× of a copy with it and 0.87× with loads, H200, 2026-11-27).
    Load,
}

impl AtomicOp {
    pub const ALL: [AtomicOp; 10] = [
        AtomicOp::Add,
        AtomicOp::Sub,
        AtomicOp::Min,
        AtomicOp::Max,
        AtomicOp::And,
        AtomicOp::Or,
        AtomicOp::Xor,
        AtomicOp::Exchange,
        AtomicOp::CompareExchange,
        AtomicOp::Load,
    ];
    pub fn name(self) -> &'static str {
        match self {
            AtomicOp::Add => "add",
            AtomicOp::Sub => "sub",
            AtomicOp::Min => "min",
            AtomicOp::Max => "max",
            AtomicOp::And => "and",
            AtomicOp::Or => "or",
            AtomicOp::Xor => "xor",
            AtomicOp::Exchange => "exchange",
            AtomicOp::CompareExchange => "compare_exchange",
            AtomicOp::Load => "load",
        }
    }
    /// Number of value operands (besides the address).
    pub fn arity(self) -> usize {
        match self {
            AtomicOp::CompareExchange => 2,
            AtomicOp::Load => 0,
            _ => 1,
        }
    }
    /// Whether the operation is defined on elements of type `ty`.
    pub fn supports(self, ty: ScalarType) -> bool {
        match ty {
            ScalarType::U32 | ScalarType::I32 => true,
            ScalarType::F32 => self == AtomicOp::Add,
            _ => false,
        }
    }
}
