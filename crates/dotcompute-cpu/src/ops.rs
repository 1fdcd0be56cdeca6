//! Arithmetic with the IR's semantics (see `dotcompute_ir`'s crate docs), for native
//! kernel bodies. `#[kernel]` rewrites `a + b` into `ops::add(a, b)` and so on, because
//! Rust's own integer operators panic on overflow in debug builds and on division by zero
//! in all builds, while a kernel must compute the same total function on every backend.
//! Everything here is `#[inline(always)]` and compiles to the plain instruction for floats.

use crate::runtime::{KernelIndex, KernelScalar};

/// A value of any primitive numeric type, for casts between generic types.
#[derive(Clone, Copy)]
pub enum AnyNum {
    Bool(bool),
    I64(i64),
    U64(u64),
    F32(f32),
    F64(f64),
}

/// Types a kernel can cast from: the kernel scalars and the host's other integers (a
/// `const N: usize`). Widening to 64 bits first gives the same result as a direct `as`.
pub trait CastSource: Copy {
    fn to_any(self) -> AnyNum;
}

macro_rules! cast_source {
    ($($t:ty => $v:ident as $w:ty),*) => {$(
        impl CastSource for $t {
            #[inline(always)]
            fn to_any(self) -> AnyNum { AnyNum::$v(self as $w) }
        }
    )*};
}
cast_source!(i8 => I64 as i64, i16 => I64 as i64, i32 => I64 as i64, i64 => I64 as i64,
    isize => I64 as i64, u8 => U64 as u64, u16 => U64 as u64, u32 => U64 as u64,
    u64 => U64 as u64, usize => U64 as u64, f32 => F32 as f32, f64 => F64 as f64);
impl CastSource for bool {
    #[inline(always)]
    fn to_any(self) -> AnyNum {
        AnyNum::Bool(self)
    }
}

/// Types a kernel can cast to, with `as` semantics (to `bool`: not zero).
pub trait CastTarget: Copy {
    fn from_any(v: AnyNum) -> Self;
}

macro_rules! cast_target {
    ($($t:ty),*) => {$(
        impl CastTarget for $t {
            #[inline(always)]
            fn from_any(v: AnyNum) -> Self {
                match v {
                    AnyNum::Bool(b) => b as u8 as $t,
                    AnyNum::I64(x) => x as $t,
                    AnyNum::U64(x) => x as $t,
                    AnyNum::F32(x) => x as $t,
                    AnyNum::F64(x) => x as $t,
                }
            }
        }
    )*};
}
cast_target!(i32, u32, i64, u64, f32, f64);
impl CastTarget for bool {
    #[inline(always)]
    fn from_any(v: AnyNum) -> Self {
        match v {
            AnyNum::Bool(b) => b,
            AnyNum::I64(x) => x != 0,
            AnyNum::U64(x) => x != 0,
            AnyNum::F32(x) => x != 0.0,
            AnyNum::F64(x) => x != 0.0,
        }
    }
}

/// `value as T` where `T` or the value's type is generic (`as` cannot name either);
/// monomorphised and inlined, it is the plain conversion.
#[inline(always)]
pub fn cast<T: KernelScalar + CastTarget, S: CastSource>(value: S) -> T {
    T::from_any(value.to_any())
}

/// The 4- and 8-byte kernel scalars as raw bits, for `T::bitcast(x)`.
pub trait RawBits: Copy {
    /// Size in bytes.
    const SIZE: usize;
    /// The bits, zero-extended to 64.
    fn to_raw(self) -> u64;
    /// The value whose bits are the low `SIZE` bytes of `raw`.
    fn from_raw(raw: u64) -> Self;
}

macro_rules! raw_bits {
    ($($t:ty => $size:literal, |$s:ident| $to:expr, |$r:ident| $from:expr;)*) => {$(
        impl RawBits for $t {
            const SIZE: usize = $size;
            #[inline(always)]
            fn to_raw(self) -> u64 { let $s = self; $to }
            #[inline(always)]
            fn from_raw($r: u64) -> Self { $from }
        }
    )*};
}
raw_bits! {
    u32 => 4, |s| s as u64, |r| r as u32;
    i32 => 4, |s| s as u32 as u64, |r| r as u32 as i32;
    f32 => 4, |s| s.to_bits() as u64, |r| f32::from_bits(r as u32);
    u64 => 8, |s| s, |r| r;
    i64 => 8, |s| s as u64, |r| r as i64;
    f64 => 8, |s| s.to_bits(), |r| f64::from_bits(r);
    // f16 has no integer of its size in kernels: a bitcast of it never compiles (the
    // size check), but it is a `Num` like the others.
    half::f16 => 2, |s| s.to_bits() as u64, |r| half::f16::from_bits(r as u16);
}

/// `T::bitcast(value)`: the same bits read as `T`, which must have the value's size (a
/// compile error otherwise, as the IR builder's error on the GPU path).
#[inline(always)]
pub fn bitcast<T: RawBits, S: RawBits>(value: S) -> T {
    const {
        assert!(
            T::SIZE == S::SIZE,
            "bitcast between types of different sizes"
        )
    };
    T::from_raw(value.to_raw())
}

/// `+ - * / %` with wrapping integers and the IR's division-by-zero rule.
pub trait Arith: Copy {
    fn k_add(self, o: Self) -> Self;
    fn k_sub(self, o: Self) -> Self;
    fn k_mul(self, o: Self) -> Self;
    fn k_div(self, o: Self) -> Self;
    fn k_rem(self, o: Self) -> Self;
}

/// Unary minus (signed integers wrap).
pub trait Negate: Copy {
    fn k_neg(self) -> Self;
}

/// Shifts by a `u32` amount taken modulo the bit width.
pub trait Shift: Copy {
    fn k_shl(self, n: u32) -> Self;
    fn k_shr(self, n: u32) -> Self;
}

/// `abs`, `min`, `max`, `clamp` on every numeric type.
pub trait Numeric: Copy {
    fn k_abs(self) -> Self;
    fn k_min(self, o: Self) -> Self;
    fn k_max(self, o: Self) -> Self;
}

/// Float-only math.
pub trait Float: Copy {
    fn k_sqrt(self) -> Self;
    fn k_sin(self) -> Self;
    fn k_cos(self) -> Self;
    fn k_tan(self) -> Self;
    fn k_exp(self) -> Self;
    fn k_log(self) -> Self;
    fn k_pow(self, y: Self) -> Self;
    fn k_fma(self, b: Self, c: Self) -> Self;
    fn k_floor(self) -> Self;
    fn k_ceil(self) -> Self;
    fn k_is_nan(self) -> bool;
    fn k_is_finite(self) -> bool;
    fn k_exp2(self) -> Self;
    fn k_log2(self) -> Self;
    fn k_tanh(self) -> Self;
    fn k_trunc(self) -> Self;
    fn k_round(self) -> Self;
    fn k_recip(self) -> Self;
    fn k_atan2(self, x: Self) -> Self;
    fn k_rsqrt(self) -> Self;
    fn k_powi(self, n: i32) -> Self;
}

/// Bit operations on integers.
pub trait Bits: Copy {
    fn k_count_ones(self) -> u32;
    fn k_leading_zeros(self) -> u32;
    fn k_trailing_zeros(self) -> u32;
    fn k_reverse_bits(self) -> Self;
    fn k_saturating_add(self, o: Self) -> Self;
    fn k_saturating_sub(self, o: Self) -> Self;
}

macro_rules! bits_ops {
    ($($t:ty),*) => {$(
        impl Bits for $t {
            #[inline(always)] fn k_count_ones(self) -> u32 { self.count_ones() }
            #[inline(always)] fn k_leading_zeros(self) -> u32 { self.leading_zeros() }
            #[inline(always)] fn k_trailing_zeros(self) -> u32 { self.trailing_zeros() }
            #[inline(always)] fn k_reverse_bits(self) -> Self { self.reverse_bits() }
            #[inline(always)] fn k_saturating_add(self, o: Self) -> Self { self.saturating_add(o) }
            #[inline(always)] fn k_saturating_sub(self, o: Self) -> Self { self.saturating_sub(o) }
        }
    )*};
}
bits_ops!(i32, u32, i64, u64);

#[inline(always)]
pub fn count_ones<T: Bits>(a: T) -> u32 {
    a.k_count_ones()
}
#[inline(always)]
pub fn leading_zeros<T: Bits>(a: T) -> u32 {
    a.k_leading_zeros()
}
#[inline(always)]
pub fn trailing_zeros<T: Bits>(a: T) -> u32 {
    a.k_trailing_zeros()
}
#[inline(always)]
pub fn reverse_bits<T: Bits>(a: T) -> T {
    a.k_reverse_bits()
}
/// Byte `k % 4` of `x` (byte 0 the least significant), zero-extended.
#[inline(always)]
pub fn extract_byte(x: u32, k: u32) -> u32 {
    (x >> (8 * (k & 3))) & 255
}
#[inline(always)]
pub fn saturating_add<T: Bits>(a: T, b: T) -> T {
    a.k_saturating_add(b)
}
#[inline(always)]
pub fn saturating_sub<T: Bits>(a: T, b: T) -> T {
    a.k_saturating_sub(b)
}
#[inline(always)]
pub fn exp2<T: Float>(a: T) -> T {
    a.k_exp2()
}
#[inline(always)]
pub fn log2<T: Float>(a: T) -> T {
    a.k_log2()
}
#[inline(always)]
pub fn tanh<T: Float>(a: T) -> T {
    a.k_tanh()
}
#[inline(always)]
pub fn trunc<T: Float>(a: T) -> T {
    a.k_trunc()
}
#[inline(always)]
pub fn round<T: Float>(a: T) -> T {
    a.k_round()
}
#[inline(always)]
pub fn recip<T: Float>(a: T) -> T {
    a.k_recip()
}
#[inline(always)]
pub fn rsqrt<T: Float>(a: T) -> T {
    a.k_rsqrt()
}
/// `x^n` by repeated squaring, the algorithm `Builder::powi` emits for GPUs (so the two
/// agree bit for bit; std's `powi` leaves its algorithm to LLVM).
#[inline(always)]
pub fn powi<T: Float>(a: T, n: i32) -> T {
    a.k_powi(n)
}
#[inline(always)]
pub fn atan2<T: Float>(y: T, x: T) -> T {
    y.k_atan2(x)
}

macro_rules! int_ops {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            #[inline(always)] fn k_add(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)] fn k_sub(self, o: Self) -> Self { self.wrapping_sub(o) }
            #[inline(always)] fn k_mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            #[inline(always)] fn k_div(self, o: Self) -> Self {
                if o == 0 { self } else { self.wrapping_div(o) }
            }
            #[inline(always)] fn k_rem(self, o: Self) -> Self {
                if o == 0 { 0 } else { self.wrapping_rem(o) }
            }
        }
        impl Shift for $t {
            #[inline(always)] fn k_shl(self, n: u32) -> Self { self.wrapping_shl(n) }
            #[inline(always)] fn k_shr(self, n: u32) -> Self { self.wrapping_shr(n) }
        }
        impl Numeric for $t {
            #[inline(always)] fn k_abs(self) -> Self { IntAbs::int_abs(self) }
            #[inline(always)] fn k_min(self, o: Self) -> Self { Ord::min(self, o) }
            #[inline(always)] fn k_max(self, o: Self) -> Self { Ord::max(self, o) }
        }
    )*};
}
/// `abs` of an integer: wrapping for signed types (`abs(MIN) == MIN`), the value itself
/// for unsigned ones. A trait, not a macro arm on the type's name: a `$t:ty` fragment
/// never matches the literal `i32`, which made `abs` the identity for every integer type
/// (`abs(-7) == -7`) until 2026-11-22.
trait IntAbs {
    fn int_abs(self) -> Self;
}
impl IntAbs for i32 {
    #[inline(always)]
    fn int_abs(self) -> Self {
        self.wrapping_abs()
    }
}
impl IntAbs for i64 {
    #[inline(always)]
    fn int_abs(self) -> Self {
        self.wrapping_abs()
    }
}
impl IntAbs for u32 {
    #[inline(always)]
    fn int_abs(self) -> Self {
        self
    }
}
impl IntAbs for u64 {
    #[inline(always)]
    fn int_abs(self) -> Self {
        self
    }
}
int_ops!(i32, u32, i64, u64);

impl Negate for i32 {
    #[inline(always)]
    fn k_neg(self) -> Self {
        self.wrapping_neg()
    }
}
impl Negate for i64 {
    #[inline(always)]
    fn k_neg(self) -> Self {
        self.wrapping_neg()
    }
}

// Vectors: each lane with the scalar rules (integer `/` and `%` by zero included), as
// the builder splits integer `/` and `%` into lanes for the GPUs.
macro_rules! vector_ops {
    ($($v:ident),*) => {$(
        impl<T: Arith> Arith for dotcompute_ir::$v<T> {
            #[inline(always)] fn k_add(self, o: Self) -> Self { self.zip(o, T::k_add) }
            #[inline(always)] fn k_sub(self, o: Self) -> Self { self.zip(o, T::k_sub) }
            #[inline(always)] fn k_mul(self, o: Self) -> Self { self.zip(o, T::k_mul) }
            #[inline(always)] fn k_div(self, o: Self) -> Self { self.zip(o, T::k_div) }
            #[inline(always)] fn k_rem(self, o: Self) -> Self { self.zip(o, T::k_rem) }
        }
        impl<T: Negate> Negate for dotcompute_ir::$v<T> {
            #[inline(always)] fn k_neg(self) -> Self { self.map(T::k_neg) }
        }
    )*};
}
vector_ops!(Vec2, Vec4);

macro_rules! float_ops {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            #[inline(always)] fn k_add(self, o: Self) -> Self { self + o }
            #[inline(always)] fn k_sub(self, o: Self) -> Self { self - o }
            #[inline(always)] fn k_mul(self, o: Self) -> Self { self * o }
            #[inline(always)] fn k_div(self, o: Self) -> Self { self / o }
            #[inline(always)] fn k_rem(self, o: Self) -> Self { self % o }
        }
        impl Negate for $t {
            #[inline(always)] fn k_neg(self) -> Self { -self }
        }
        impl Numeric for $t {
            #[inline(always)] fn k_abs(self) -> Self { self.abs() }
            #[inline(always)] fn k_min(self, o: Self) -> Self { self.min(o) }
            #[inline(always)] fn k_max(self, o: Self) -> Self { self.max(o) }
        }
        impl Float for $t {
            #[inline(always)] fn k_sqrt(self) -> Self { self.sqrt() }
            #[inline(always)] fn k_sin(self) -> Self { self.sin() }
            #[inline(always)] fn k_cos(self) -> Self { self.cos() }
            #[inline(always)] fn k_tan(self) -> Self { self.tan() }
            #[inline(always)] fn k_exp(self) -> Self { self.exp() }
            #[inline(always)] fn k_log(self) -> Self { self.ln() }
            #[inline(always)] fn k_pow(self, y: Self) -> Self { self.powf(y) }
            #[inline(always)] fn k_fma(self, b: Self, c: Self) -> Self { self.mul_add(b, c) }
            #[inline(always)] fn k_floor(self) -> Self { self.floor() }
            #[inline(always)] fn k_ceil(self) -> Self { self.ceil() }
            #[inline(always)] fn k_is_nan(self) -> bool { self.is_nan() }
            #[inline(always)] fn k_is_finite(self) -> bool { self.is_finite() }
            #[inline(always)] fn k_exp2(self) -> Self { self.exp2() }
            #[inline(always)] fn k_log2(self) -> Self { self.log2() }
            #[inline(always)] fn k_tanh(self) -> Self { self.tanh() }
            #[inline(always)] fn k_trunc(self) -> Self { self.trunc() }
            #[inline(always)] fn k_round(self) -> Self { self.round() }
            #[inline(always)] fn k_recip(self) -> Self { self.recip() }
            #[inline(always)] fn k_atan2(self, x: Self) -> Self { self.atan2(x) }
            #[inline(always)] fn k_rsqrt(self) -> Self { 1.0 / self.sqrt() }
            #[inline(always)] fn k_powi(self, n: i32) -> Self {
                let (mut result, mut base, mut k) = (1.0, self, n.unsigned_abs());
                while k > 0 {
                    if k & 1 == 1 {
                        result *= base;
                    }
                    base *= base;
                    k >>= 1;
                }
                if n < 0 { 1.0 / result } else { result }
            }
        }
    )*};
}
float_ops!(f32, f64);

#[inline(always)]
pub fn add<T: Arith>(a: T, b: T) -> T {
    a.k_add(b)
}
#[inline(always)]
pub fn sub<T: Arith>(a: T, b: T) -> T {
    a.k_sub(b)
}
#[inline(always)]
pub fn mul<T: Arith>(a: T, b: T) -> T {
    a.k_mul(b)
}
#[inline(always)]
pub fn div<T: Arith>(a: T, b: T) -> T {
    a.k_div(b)
}
#[inline(always)]
pub fn rem<T: Arith>(a: T, b: T) -> T {
    a.k_rem(b)
}
/// `&=`, `|=`, `^=` (no overflow is possible; here so compound assignment is uniform).
#[inline(always)]
pub fn bitand<T: std::ops::BitAnd<Output = T>>(a: T, b: T) -> T {
    a & b
}
#[inline(always)]
pub fn bitor<T: std::ops::BitOr<Output = T>>(a: T, b: T) -> T {
    a | b
}
#[inline(always)]
pub fn bitxor<T: std::ops::BitXor<Output = T>>(a: T, b: T) -> T {
    a ^ b
}
#[inline(always)]
pub fn neg<T: Negate>(a: T) -> T {
    a.k_neg()
}
#[inline(always)]
pub fn shl<T: Shift>(a: T, n: u32) -> T {
    a.k_shl(n)
}
#[inline(always)]
pub fn shr<T: Shift>(a: T, n: u32) -> T {
    a.k_shr(n)
}
#[inline(always)]
pub fn abs<T: Numeric>(a: T) -> T {
    a.k_abs()
}
#[inline(always)]
pub fn min<T: Numeric>(a: T, b: T) -> T {
    a.k_min(b)
}
#[inline(always)]
pub fn max<T: Numeric>(a: T, b: T) -> T {
    a.k_max(b)
}
/// `min(max(x, lo), hi)`: never panics, unlike Rust's `clamp`.
#[inline(always)]
pub fn clamp<T: Numeric>(x: T, lo: T, hi: T) -> T {
    x.k_max(lo).k_min(hi)
}
#[inline(always)]
pub fn is_nan<T: Float>(a: T) -> bool {
    a.k_is_nan()
}
#[inline(always)]
pub fn is_finite<T: Float>(a: T) -> bool {
    a.k_is_finite()
}
#[inline(always)]
pub fn sqrt<T: Float>(a: T) -> T {
    a.k_sqrt()
}
#[inline(always)]
pub fn sin<T: Float>(a: T) -> T {
    a.k_sin()
}
#[inline(always)]
pub fn cos<T: Float>(a: T) -> T {
    a.k_cos()
}
#[inline(always)]
pub fn tan<T: Float>(a: T) -> T {
    a.k_tan()
}
#[inline(always)]
pub fn exp<T: Float>(a: T) -> T {
    a.k_exp()
}
#[inline(always)]
pub fn log<T: Float>(a: T) -> T {
    a.k_log()
}
#[inline(always)]
pub fn pow<T: Float>(a: T, b: T) -> T {
    a.k_pow(b)
}
#[inline(always)]
pub fn fma<T: Float>(a: T, b: T, c: T) -> T {
    a.k_fma(b, c)
}
#[inline(always)]
pub fn floor<T: Float>(a: T) -> T {
    a.k_floor()
}
#[inline(always)]
pub fn ceil<T: Float>(a: T) -> T {
    a.k_ceil()
}

/// Integer types a `for` loop may count with.
pub trait LoopInt: Copy + PartialOrd {
    fn k_step(self, step: Self) -> Option<Self>;
    fn positive(self) -> bool;
}
impl LoopInt for u32 {
    #[inline(always)]
    fn k_step(self, step: Self) -> Option<Self> {
        self.checked_add(step)
    }
    #[inline(always)]
    fn positive(self) -> bool {
        self > 0
    }
}
impl LoopInt for i32 {
    #[inline(always)]
    fn k_step(self, step: Self) -> Option<Self> {
        self.checked_add(step)
    }
    #[inline(always)]
    fn positive(self) -> bool {
        self > 0
    }
}

/// `(start..end).step_by(step)` with the IR's rule that a step ≤ 0 runs no iterations.
/// The step may be any integer (`usize`, as Rust's `step_by` takes, or the range's type);
/// it is converted to the range's type with `as`.
#[inline(always)]
pub fn step_range<T: LoopInt + CastTarget, S: CastSource>(
    start: T,
    end: T,
    step: S,
) -> impl Iterator<Item = T> {
    let step = T::from_any(step.to_any());
    let mut next = if step.positive() && start < end {
        Some(start)
    } else {
        None
    };
    std::iter::from_fn(move || {
        let v = next?;
        next = v.k_step(step).filter(|n| *n < end);
        Some(v)
    })
}

/// The flat index of `a[y][x]` in a 2-D array with rows of `row_len`: `x` past the row is
/// out of bounds (the maximum index, which no array reaches), as in Rust.
#[inline(always)]
pub fn index_2d<Y: KernelIndex, X: KernelIndex>(y: Y, x: X, row_len: u32) -> u32 {
    let (y, x) = (y.to_index(), x.to_index());
    match y.checked_mul(row_len).and_then(|r| r.checked_add(x)) {
        Some(i) if x < row_len => i,
        _ => u32::MAX,
    }
}

// f16: every operation computes in f32 and rounds to the nearest f16 (ties to even),
// which is IEEE half arithmetic for + - * / and sqrt (f32 has more than twice f16's
// precision, so the double rounding is exact), and what the GPU backends do.

type F16 = half::f16;

#[inline(always)]
fn via_f32(x: F16, f: impl FnOnce(f32) -> f32) -> F16 {
    F16::from_f32(f(x.to_f32()))
}

impl Arith for F16 {
    #[inline(always)]
    fn k_add(self, o: Self) -> Self {
        via_f32(self, |a| a + o.to_f32())
    }
    #[inline(always)]
    fn k_sub(self, o: Self) -> Self {
        via_f32(self, |a| a - o.to_f32())
    }
    #[inline(always)]
    fn k_mul(self, o: Self) -> Self {
        via_f32(self, |a| a * o.to_f32())
    }
    #[inline(always)]
    fn k_div(self, o: Self) -> Self {
        via_f32(self, |a| a / o.to_f32())
    }
    #[inline(always)]
    fn k_rem(self, o: Self) -> Self {
        via_f32(self, |a| a % o.to_f32())
    }
}
impl Negate for F16 {
    #[inline(always)]
    fn k_neg(self) -> Self {
        -self
    }
}
impl Numeric for F16 {
    #[inline(always)]
    fn k_abs(self) -> Self {
        via_f32(self, f32::abs)
    }
    #[inline(always)]
    fn k_min(self, o: Self) -> Self {
        via_f32(self, |a| a.min(o.to_f32()))
    }
    #[inline(always)]
    fn k_max(self, o: Self) -> Self {
        via_f32(self, |a| a.max(o.to_f32()))
    }
}
impl Float for F16 {
    #[inline(always)]
    fn k_sqrt(self) -> Self {
        via_f32(self, f32::sqrt)
    }
    #[inline(always)]
    fn k_sin(self) -> Self {
        via_f32(self, f32::sin)
    }
    #[inline(always)]
    fn k_cos(self) -> Self {
        via_f32(self, f32::cos)
    }
    #[inline(always)]
    fn k_tan(self) -> Self {
        via_f32(self, f32::tan)
    }
    #[inline(always)]
    fn k_exp(self) -> Self {
        via_f32(self, f32::exp)
    }
    #[inline(always)]
    fn k_log(self) -> Self {
        via_f32(self, f32::ln)
    }
    #[inline(always)]
    fn k_pow(self, y: Self) -> Self {
        via_f32(self, |a| a.powf(y.to_f32()))
    }
    #[inline(always)]
    fn k_fma(self, b: Self, c: Self) -> Self {
        via_f32(self, |a| a.mul_add(b.to_f32(), c.to_f32()))
    }
    #[inline(always)]
    fn k_floor(self) -> Self {
        via_f32(self, f32::floor)
    }
    #[inline(always)]
    fn k_ceil(self) -> Self {
        via_f32(self, f32::ceil)
    }
    #[inline(always)]
    fn k_is_nan(self) -> bool {
        self.is_nan()
    }
    #[inline(always)]
    fn k_is_finite(self) -> bool {
        self.is_finite()
    }
    #[inline(always)]
    fn k_exp2(self) -> Self {
        via_f32(self, f32::exp2)
    }
    #[inline(always)]
    fn k_log2(self) -> Self {
        via_f32(self, f32::log2)
    }
    #[inline(always)]
    fn k_tanh(self) -> Self {
        via_f32(self, f32::tanh)
    }
    #[inline(always)]
    fn k_trunc(self) -> Self {
        via_f32(self, f32::trunc)
    }
    #[inline(always)]
    fn k_round(self) -> Self {
        via_f32(self, f32::round)
    }
    #[inline(always)]
    fn k_recip(self) -> Self {
        via_f32(self, f32::recip)
    }
    #[inline(always)]
    fn k_atan2(self, x: Self) -> Self {
        via_f32(self, |y| y.atan2(x.to_f32()))
    }
    #[inline(always)]
    fn k_rsqrt(self) -> Self {
        via_f32(self, |a| 1.0 / a.sqrt())
    }
    #[inline(always)]
    fn k_powi(self, n: i32) -> Self {
        // The same squaring loop, each product rounded to f16 as the GPUs do.
        let (mut result, mut base, mut k) = (F16::ONE, self, n.unsigned_abs());
        while k > 0 {
            if k & 1 == 1 {
                result = result.k_mul(base);
            }
            base = base.k_mul(base);
            k >>= 1;
        }
        if n < 0 {
            F16::ONE.k_div(result)
        } else {
            result
        }
    }
}
impl CastSource for F16 {
    #[inline(always)]
    fn to_any(self) -> AnyNum {
        AnyNum::F32(self.to_f32())
    }
}
impl CastTarget for F16 {
    #[inline(always)]
    fn from_any(v: AnyNum) -> Self {
        match v {
            AnyNum::Bool(b) => F16::from_f32(b as u8 as f32),
            // Exact in f64 below 2^53, so rounded once.
            AnyNum::I64(x) => F16::from_f64(x as f64),
            AnyNum::U64(x) => F16::from_f64(x as f64),
            AnyNum::F32(x) => F16::from_f32(x),
            AnyNum::F64(x) => F16::from_f64(x),
        }
    }
}

/// The CPU form of the tensor-core operations (`mma_m16n8k8_tf32`, `mma_m16n8k16_f16`),
/// which have none: they are 32-lane tensor-core operations and the CPU backend has
/// neither (capability `tensor_cores` is false), so the facade refuses such kernels
/// before their body runs. Reaching it anyway (a backend driven without the facade)
/// fails the launch: the runtime turns the panic into a kernel error.
pub fn mma<M: ?Sized, I, T, const N: usize>(name: &str, _acc: &M, _base: I, _operands: [T; N]) {
    panic!("{name} needs tensor cores (capability `tensor_cores`); the CPU has none")
}

// Subgroup operations on the CPU backend: a subgroup is one thread (`subgroup_size()` is
// 1), so each operation sees only the caller's value. Kernels written for any subgroup
// size (loops up to `subgroup_size()`) compute the same results as on a GPU.

#[inline(always)]
pub fn subgroup_size() -> u32 {
    1
}
#[inline(always)]
pub fn subgroup_lane() -> u32 {
    0
}
#[inline(always)]
pub fn subgroup_shuffle<T: Copy>(x: T, _lane: u32) -> T {
    x
}
#[inline(always)]
pub fn subgroup_shuffle_xor<T: Copy>(x: T, _mask: u32) -> T {
    x
}
#[inline(always)]
pub fn subgroup_shuffle_up<T: Copy>(x: T, _delta: u32) -> T {
    x
}
#[inline(always)]
pub fn subgroup_shuffle_down<T: Copy>(x: T, _delta: u32) -> T {
    x
}
#[inline(always)]
pub fn subgroup_add<T: Arith>(x: T) -> T {
    x
}
#[inline(always)]
pub fn subgroup_min<T: Numeric>(x: T) -> T {
    x
}
#[inline(always)]
pub fn subgroup_max<T: Numeric>(x: T) -> T {
    x
}
/// The sum over no lanes: zero.
#[inline(always)]
pub fn subgroup_exclusive_add<T: Arith + Default>(_x: T) -> T {
    T::default()
}
#[inline(always)]
pub fn subgroup_inclusive_add<T: Arith>(x: T) -> T {
    x
}
#[inline(always)]
pub fn subgroup_ballot(b: bool) -> u32 {
    b as u32
}
#[inline(always)]
pub fn subgroup_any(b: bool) -> bool {
    b
}
#[inline(always)]
pub fn subgroup_all(b: bool) -> bool {
    b
}

/// `e^x` in f32 without a branch or a call, so that a loop over lanes vectorises
/// (Cody-Waite range reduction `x = k ln 2 + r`, `|r| <= ln 2 / 2`, Cephes' degree-5
/// polynomial for `e^r`, then `2^k` applied in two halves so that results near the
/// overflow and underflow ends are neither lost nor rounded twice). NaN gives NaN,
/// `+inf` gives `+inf`, `-inf` gives 0; elsewhere within 1 ulp of the exact value
/// rounded to f32 (`lanes::tests`; every input was checked once by hand). Split group
/// bodies use it for `exp` in lane form; elsewhere kernels use the C library's `expf`.
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    // Past these ends the result is +inf or 0; NaN passes through `clamp`.
    let x = x.clamp(-104.0, 89.0);
    // Round x / ln 2 to the nearest integer k by adding 1.5 * 2^23.
    let shifted = x * std::f32::consts::LOG2_E + 12_582_912.0;
    let k = shifted - 12_582_912.0;
    let k_int = (shifted.to_bits() as i32).wrapping_sub(0x4B40_0000);
    // ln 2 in two parts: k * LN2_HI is exact.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let r = (x - k * LN2_HI) - k * LN2_LO;
    let p = 1.987_569_1e-4_f32;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 0.5;
    let y = p * (r * r) + r + 1.0;
    // k is within [-150, 129]: 2^k as two powers of two, each a normal f32.
    let k1 = k_int >> 1;
    let k2 = k_int - k1;
    let pow2 = |e: i32| f32::from_bits(((e + 127) as u32) << 23);
    y * pow2(k1) * pow2(k2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_edge_cases_follow_the_ir_definition() {
        assert_eq!(div(7i32, 0), 7);
        assert_eq!(rem(7i32, 0), 0);
        assert_eq!(div(i32::MIN, -1), i32::MIN);
        assert_eq!(rem(i32::MIN, -1), 0);
        assert_eq!(add(u32::MAX, 1), 0);
        assert_eq!(shl(1u32, 33), 2);
        assert_eq!(shr(-8i32, 1), -4);
        assert_eq!(abs(i32::MIN), i32::MIN);
        assert_eq!(
            abs(-7i32),
            7,
            "the identity passes the line above; this one does not"
        );
        assert_eq!(abs(-7i64), 7);
        assert_eq!(abs(i64::MIN), i64::MIN);
        assert_eq!(abs(7i32), 7);
        assert_eq!(abs(7u32), 7);
        assert_eq!(neg(i32::MIN), i32::MIN);
        assert_eq!(clamp(5.0f32, 3.0, 1.0), 1.0, "lo > hi must not panic");
        assert_eq!(min(f32::NAN, 2.0), 2.0);
    }

    #[test]
    fn step_range_matches_rust_and_stops_on_nonpositive_steps() {
        let v: Vec<u32> = step_range(1, 10, 3).collect();
        assert_eq!(v, vec![1, 4, 7]);
        assert_eq!(step_range(0u32, 10, 0).count(), 0);
        assert_eq!(step_range(0i32, 10, -1).count(), 0);
        assert_eq!(step_range(u32::MAX - 1, u32::MAX, 5).count(), 1);
    }
}
