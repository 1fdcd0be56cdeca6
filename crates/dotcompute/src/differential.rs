//! Differential testing: one kernel, the same inputs, two devices, and every output
//! element compared under the documented semantics, for users' own tests.
//!
//! ```
//! use dotcompute::prelude::*;
//! use dotcompute::differential::{differential, Tolerance};
//!
//! #[kernel]
//! fn square(x: &[f32], out: &mut [f32]) {
//!     let i = global_id().x;
//!     if i < out.len() {
//!         out[i] = x[i] * x[i];
//!     }
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let input: Vec<f32> = (0..10_000).map(|i| i as f32 * 0.01).collect();
//! let run = |d: &Device| -> dotcompute::Result<Vec<f32>> {
//!     let x = d.upload(&input)?;
//!     let mut out = d.alloc_filled(input.len(), f32::NAN)?;
//!     square::launch(d, Launch::threads(input.len()), &x, &mut out)?;
//!     out.to_vec()
//! };
//! // The best device against the CPU, the oracle: `*` is correctly rounded everywhere.
//! let agreement = differential(&Device::best()?, &Device::cpu(), Tolerance::EXACT, run)?;
//! assert_eq!(agreement.elements, 10_000);
//! # Ok(())
//! # }
//! ```
//!
//! ## What "agree" means (the IR's semantics, `dotcompute_ir`)
//!
//! * Integers and booleans: equal.
//! * Floats: within [`Tolerance::float_ulps`] units in the last place, counted on the
//!   ordered bit patterns; every NaN equals every NaN (payloads are not specified), and
//!   `+0 == -0`. `+ - * /` and `sqrt` are correctly rounded on every backend, so kernels
//!   made of them agree exactly ([`Tolerance::EXACT`]); transcendental functions follow
//!   each backend's documented precision (a few ulp on the CPU and CUDA, looser bounds
//!   on Vulkan), so give those a tolerance.
//!
//! ## Per-backend rules
//!
//! [`differential`] compares under the rules the two devices can honour
//! ([`Tolerance::for_devices`]): where either device flushes subnormals
//! (`Capabilities::subnormals` is false, as on NVIDIA's Vulkan driver), a subnormal
//! result agrees with a zero of either sign. Where either device does not give the IR's
//! exact `+ - *` (`Capabilities::exact_float` is false: Metal, or Vulkan with
//! `DOTCOMPUTE_WGPU_FLOAT=relaxed`), the compiler may fuse or reassociate, which no ulp
//! bound covers; a disagreement then names those devices
//! ([`ElementMismatch::relaxed_devices`]) so the reader knows where to look.

use crate::{Device, Element, Error};
use std::fmt;

/// How far two float results may be apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tolerance {
    /// Units in the last place (0: equal, NaN == NaN, +0 == -0).
    pub float_ulps: u64,
    /// A subnormal agrees with a zero of either sign (a device that flushes subnormals).
    pub subnormals_as_zero: bool,
}

impl Tolerance {
    /// Floats equal (up to NaN payloads and the sign of zero); integers always are.
    pub const EXACT: Tolerance = Tolerance {
        float_ulps: 0,
        subnormals_as_zero: false,
    };
    /// Floats within `n` ulp.
    pub const fn ulps(n: u64) -> Tolerance {
        Tolerance {
            float_ulps: n,
            subnormals_as_zero: false,
        }
    }

    /// This tolerance under the rules both devices honour: subnormals as zero where
    /// either flushes them (`Capabilities::subnormals`). [`differential`] applies it.
    pub fn for_devices(self, left: &Device, right: &Device) -> Tolerance {
        let flushes = |d: &Device| !d.info().caps.subnormals;
        Tolerance {
            subnormals_as_zero: self.subnormals_as_zero || flushes(left) || flushes(right),
            ..self
        }
    }
}

/// Element types that two backends' outputs can be compared in.
pub trait Agree: Element {
    /// The distance of `a` from `b` in ulp (0 for equal integers), or `None` when they
    /// disagree whatever the tolerance (different integers, NaN against a number).
    fn distance(a: Self, b: Self) -> Option<u64>;
    /// `v` with a subnormal replaced by zero (floats; other types are returned as they are).
    fn flush_subnormal(v: Self) -> Self {
        v
    }
}

macro_rules! exact {
    ($($t:ty),*) => {$(
        impl Agree for $t {
            fn distance(a: $t, b: $t) -> Option<u64> {
                (a == b).then_some(0)
            }
        }
    )*};
}
exact!(i32, u32, i64, u64);

/// Ordered integer keys of float bit patterns: adjacent floats differ by 1.
macro_rules! float {
    ($t:ty, $bits:ty, $signed:ty) => {
        impl Agree for $t {
            fn distance(a: $t, b: $t) -> Option<u64> {
                if a.is_nan() || b.is_nan() {
                    return (a.is_nan() && b.is_nan()).then_some(0);
                }
                if a == b {
                    return Some(0); // includes +0 == -0
                }
                let key = |v: $t| {
                    let bits = v.to_bits() as $signed;
                    if bits < 0 {
                        <$signed>::MIN - bits
                    } else {
                        bits
                    }
                };
                Some((key(a) as i128 - key(b) as i128).unsigned_abs() as u64)
            }
            fn flush_subnormal(v: $t) -> $t {
                if v.is_subnormal() {
                    0.0
                } else {
                    v
                }
            }
        }
    };
}
float!(f32, u32, i32);
float!(f64, u64, i64);

impl Agree for half::f16 {
    fn distance(a: half::f16, b: half::f16) -> Option<u64> {
        if a.is_nan() || b.is_nan() {
            return (a.is_nan() && b.is_nan()).then_some(0);
        }
        if a == b {
            return Some(0);
        }
        let key = |v: half::f16| {
            let bits = v.to_bits() as i16;
            if bits < 0 {
                i16::MIN as i32 - bits as i32
            } else {
                bits as i32
            }
        };
        Some((key(a) - key(b)).unsigned_abs() as u64)
    }
    fn flush_subnormal(v: half::f16) -> half::f16 {
        // Exponent bits zero, mantissa not: a subnormal.
        if v.to_bits() & 0x7C00 == 0 && v.to_bits() & 0x03FF != 0 {
            half::f16::ZERO
        } else {
            v
        }
    }
}

/// Two outputs agreed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Agreement {
    /// Elements compared.
    pub elements: usize,
    /// The largest float distance seen, in ulp (0 for integers).
    pub max_ulps: u64,
}

/// Why a differential run failed.
#[derive(Debug)]
pub enum Disagreement {
    /// The kernel failed on one device.
    Run { device: String, error: Box<Error> },
    /// The outputs have different lengths.
    Length {
        left: (String, usize),
        right: (String, usize),
    },
    /// The first element that differs beyond the tolerance.
    Element(Box<ElementMismatch>),
}

/// The first element of two outputs that differs beyond the tolerance.
#[derive(Debug)]
pub struct ElementMismatch {
    pub index: usize,
    /// Device and value (as text) on each side.
    pub left: (String, String),
    pub right: (String, String),
    /// The distance in ulp, when both are numbers.
    pub ulps: Option<u64>,
    pub tolerance: Tolerance,
    /// The devices compared that do not give the IR's exact `+ - *`
    /// (`Capabilities::exact_float`): contraction or reassociation there may explain
    /// the difference.
    pub relaxed_devices: Vec<String>,
}

impl fmt::Display for Disagreement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Disagreement::Run { device, error } => write!(f, "on {device}: {error}"),
            Disagreement::Length { left, right } => write!(
                f,
                "{} returned {} elements, {} returned {}",
                left.0, left.1, right.0, right.1
            ),
            Disagreement::Element(m) => {
                let ElementMismatch {
                    index,
                    left,
                    right,
                    ulps,
                    tolerance,
                    relaxed_devices,
                } = &**m;
                write!(
                    f,
                    "element {index}: {} gave {}, {} gave {}",
                    left.0, left.1, right.0, right.1
                )?;
                if let Some(u) = ulps {
                    write!(
                        f,
                        " ({u} ulp apart; the tolerance is {})",
                        tolerance.float_ulps
                    )?;
                }
                if !relaxed_devices.is_empty() {
                    write!(
                        f,
                        "; {} may fuse or reassociate float operations \
                         (Capabilities::exact_float is false)",
                        relaxed_devices.join(" and ")
                    )?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Disagreement {}

/// Compares two outputs element by element (`names` label them in the error).
pub fn compare<T: Agree + fmt::Debug>(
    left: (&str, &[T]),
    right: (&str, &[T]),
    tolerance: Tolerance,
) -> Result<Agreement, Disagreement> {
    if left.1.len() != right.1.len() {
        return Err(Disagreement::Length {
            left: (left.0.to_string(), left.1.len()),
            right: (right.0.to_string(), right.1.len()),
        });
    }
    let mut max_ulps = 0;
    for (index, (&a, &b)) in left.1.iter().zip(right.1).enumerate() {
        let d = if tolerance.subnormals_as_zero {
            T::distance(T::flush_subnormal(a), T::flush_subnormal(b))
        } else {
            T::distance(a, b)
        };
        match d {
            Some(u) if u <= tolerance.float_ulps => max_ulps = max_ulps.max(u),
            ulps => {
                return Err(Disagreement::Element(Box::new(ElementMismatch {
                    index,
                    left: (left.0.to_string(), format!("{a:?}")),
                    right: (right.0.to_string(), format!("{b:?}")),
                    ulps,
                    tolerance,
                    relaxed_devices: Vec::new(),
                })))
            }
        }
    }
    Ok(Agreement {
        elements: left.1.len(),
        max_ulps,
    })
}

/// Runs `run` (which uploads the same inputs, launches the kernel and reads its output)
/// on `left` and on `right`, and compares every element of the two outputs.
pub fn differential<T, F>(
    left: &Device,
    right: &Device,
    tolerance: Tolerance,
    run: F,
) -> Result<Agreement, Disagreement>
where
    T: Agree + fmt::Debug,
    F: Fn(&Device) -> crate::Result<Vec<T>>,
{
    let output = |d: &Device| {
        run(d).map_err(|error| Disagreement::Run {
            device: d.label(),
            error: Box::new(error),
        })
    };
    let (a, b) = (output(left)?, output(right)?);
    let tolerance = tolerance.for_devices(left, right);
    compare((&left.label(), &a), (&right.label(), &b), tolerance).map_err(|e| match e {
        Disagreement::Element(mut m) => {
            m.relaxed_devices = [left, right]
                .iter()
                .filter(|d| !d.info().caps.exact_float)
                .map(|d| d.label())
                .collect();
            Disagreement::Element(m)
        }
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_agree_within_ulps_nans_agree_and_zeros_agree() {
        assert_eq!(f32::distance(1.0, 1.0), Some(0));
        assert_eq!(f32::distance(0.0, -0.0), Some(0));
        assert_eq!(f32::distance(f32::NAN, -f32::NAN), Some(0));
        assert_eq!(f32::distance(f32::NAN, 1.0), None);
        assert_eq!(
            f32::distance(1.0, f32::from_bits(1.0f32.to_bits() + 3)),
            Some(3)
        );
        // Across zero: the smallest positive and negative subnormals are 2 apart.
        assert_eq!(
            f32::distance(f32::from_bits(1), -f32::from_bits(1)),
            Some(2)
        );
        assert_eq!(i32::distance(-7, 7), None);
        let e = compare(
            ("a", &[1.0f32, 2.0]),
            ("b", &[1.0, 2.5]),
            Tolerance::ulps(4),
        )
        .unwrap_err();
        assert!(e.to_string().contains("element 1"), "{e}");
    }

    #[test]
    fn subnormals_agree_with_zero_only_where_a_device_flushes_them() {
        let tiny = f32::from_bits(5); // subnormal
        let normal = f32::MIN_POSITIVE; // smallest normal: never flushed
        let exact = compare(("a", &[tiny]), ("b", &[0.0f32]), Tolerance::EXACT);
        assert!(exact.is_err(), "a subnormal against zero passed exactly");
        let flushing = Tolerance {
            subnormals_as_zero: true,
            ..Tolerance::EXACT
        };
        compare(("a", &[tiny, -tiny]), ("b", &[0.0f32, 0.0]), flushing).unwrap();
        compare(("a", &[-tiny]), ("b", &[-0.0f32]), flushing).unwrap();
        assert!(compare(("a", &[normal]), ("b", &[0.0f32]), flushing).is_err());
        assert!(compare(("a", &[tiny]), ("b", &[1.0f32]), flushing).is_err());
        // The CPU keeps subnormals: two CPU devices keep the exact rule.
        let cpu = Device::cpu();
        assert!(!Tolerance::EXACT.for_devices(&cpu, &cpu).subnormals_as_zero);
    }
}
