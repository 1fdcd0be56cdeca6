//! The kernel language's generic bounds: what a type parameter of a `#[kernel]` or a
//! `#[kernel_fn]` may be.
//!
//! ```
//! use dotcompute::prelude::*;
//!
//! /// `y = alpha * x + y` for every float type a device has.
//! #[kernel]
//! fn axpy<T: Float>(alpha: T, x: &[T], y: &mut [T]) {
//!     let i = global_id().x;
//!     if i < y.len() {
//!         y[i] = alpha * x[i] + y[i];
//!     }
//! }
//!
//! # fn main() -> dotcompute::Result<()> {
//! let device = Device::best()?;
//! let x = device.upload(&[1.0f32, 2.0, 3.0])?;
//! let mut y = device.upload(&[1.0f32; 3])?;
//! axpy::launch(&device, Launch::threads(3), 2.0f32, &x, &mut y)?; // T = f32, inferred
//! assert_eq!(y.to_vec()?, [3.0, 5.0, 7.0]);
//! # Ok(())
//! # }
//! ```
//!
//! Inside a generic kernel, `T::zero()`, `T::one()` and `T::cast(x)` (an `as` conversion
//! from any kernel scalar) give values of type `T`; an untyped literal cannot, as in Rust.
//! `x as T` is accepted too. Each instantiation is a kernel of its own, named after its
//! parameters (`axpy_f32`), compiled and cached separately; `axpy::kernel::<f32>()` is its
//! definition.

use crate::buffer::{Element, ScalarArg};
use dotcompute_cpu::ops::{Arith, CastTarget, Float as FloatMath, Negate, Numeric, Shift};
use dotcompute_cpu::runtime::KernelScalar;

mod sealed {
    pub trait Sealed {}
    impl Sealed for i32 {}
    impl Sealed for u32 {}
    impl Sealed for i64 {}
    impl Sealed for u64 {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// A numeric kernel type: `i32 u32 i64 u64 f32 f64`. Gives a type parameter the
/// arithmetic operators, comparisons, `abs min max clamp`, casts, buffers and scalar
/// arguments.
pub trait Num:
    Element
    + ScalarArg
    + KernelScalar
    + CastTarget
    + dotcompute_cpu::ops::CastSource
    + Arith
    + Numeric
    + PartialOrd
    + sealed::Sealed
{
}

/// A float kernel type: `f32` or `f64`. Adds negation and the float math functions
/// (`sqrt`, `exp`, `mul_add`, `is_nan`, ...).
pub trait Float: Num + Negate + FloatMath {}

/// An integer kernel type: `i32 u32 i64 u64`. Adds shifts, bit operations
/// (`& | ^ !`, `count_ones`, ...), `wrapping_*` and `saturating_*`.
pub trait Int:
    Num
    + Shift
    + dotcompute_cpu::ops::Bits
    + std::ops::BitAnd<Output = Self>
    + std::ops::BitOr<Output = Self>
    + std::ops::BitXor<Output = Self>
    + std::ops::Not<Output = Self>
    + Eq
{
}

impl Num for i32 {}
impl Num for u32 {}
impl Num for i64 {}
impl Num for u64 {}
impl Num for f32 {}
impl Num for f64 {}
impl Float for f32 {}
impl Float for f64 {}
impl Int for i32 {}
impl Int for u32 {}
impl Int for i64 {}
impl Int for u64 {}
