//! Scalar types and literal values.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The value types of the IR. Every IR value has exactly one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
pub enum ScalarType {
    Bool,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
    /// IEEE half precision. In kernels every operation on it is rounded to the nearest
    /// `f16` (ties to even) as IEEE half arithmetic is; devices need the `f16`
    /// capability. Not in [`ScalarType::ALL`] (the types every device has).
    F16,
    /// bfloat16: a storage type only, like [`ScalarType::F16`].
    BF16,
    /// Bytes: a storage type only (buffers and transfers); kernels read a byte buffer as
    /// little-endian `u32` words (`Buffer::<u8>::as_words` in the facade).
    U8,
}

impl ScalarType {
    /// All types, in a fixed order.
    pub const ALL: [ScalarType; 7] = [
        ScalarType::Bool,
        ScalarType::I32,
        ScalarType::U32,
        ScalarType::I64,
        ScalarType::U64,
        ScalarType::F32,
        ScalarType::F64,
    ];

    /// Size in bytes as stored in a buffer (`bool` is never stored in buffers).
    pub fn size_bytes(self) -> usize {
        match self {
            ScalarType::Bool | ScalarType::U8 => 1,
            ScalarType::F16 | ScalarType::BF16 => 2,
            ScalarType::I32 | ScalarType::U32 | ScalarType::F32 => 4,
            ScalarType::I64 | ScalarType::U64 | ScalarType::F64 => 8,
        }
    }
    pub fn is_int(self) -> bool {
        matches!(
            self,
            ScalarType::I32 | ScalarType::U32 | ScalarType::I64 | ScalarType::U64
        )
    }
    pub fn is_signed_int(self) -> bool {
        matches!(self, ScalarType::I32 | ScalarType::I64)
    }
    pub fn is_float(self) -> bool {
        matches!(self, ScalarType::F16 | ScalarType::F32 | ScalarType::F64)
    }
    pub fn is_numeric(self) -> bool {
        self.is_int() || self.is_float()
    }
    /// The Rust spelling (`f32`, `u32`, ...), also used in error messages.
    pub fn name(self) -> &'static str {
        match self {
            ScalarType::Bool => "bool",
            ScalarType::I32 => "i32",
            ScalarType::U32 => "u32",
            ScalarType::I64 => "i64",
            ScalarType::U64 => "u64",
            ScalarType::F32 => "f32",
            ScalarType::F64 => "f64",
            ScalarType::F16 => "f16",
            ScalarType::BF16 => "bf16",
            ScalarType::U8 => "u8",
        }
    }
    /// Whether the type exists only in memory (`bf16`, `u8`): no kernel may use it.
    pub fn is_storage_only(self) -> bool {
        matches!(self, ScalarType::BF16 | ScalarType::U8)
    }
    /// Parses the Rust spelling.
    pub fn from_name(name: &str) -> Option<ScalarType> {
        ScalarType::ALL
            .into_iter()
            .chain([ScalarType::F16])
            .find(|t| t.name() == name)
    }
}

impl fmt::Display for ScalarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The type of an IR value: a scalar, or a vector of 2 or 4 lanes of one scalar type
/// (`Vec2<f32>`, `Vec4<u32>`). Vectors exist for 8- and 16-byte loads and stores: they
/// are buffer elements and local values, built with `Vec4::new` / `Vec4::splat`, read one
/// lane at a time (`v.x`), and combined lane by lane with `+ - * /` (and `%` on
/// integers) and unary `-`, with the scalar semantics of each lane. Their lanes are
/// `f32`, `i32` or `u32`.
///
/// Serialized as the bare scalar type when it is one, so kernels without vectors keep
/// the serialized form (and content key) they had before vectors existed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(from = "TypeRepr", into = "TypeRepr")]
pub struct Type {
    /// The type of each lane (the type itself for a scalar).
    pub scalar: ScalarType,
    /// 1 for a scalar; 2 or 4 for a vector.
    pub lanes: u8,
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum TypeRepr {
    Scalar(ScalarType),
    Vector { vector: ScalarType, lanes: u8 },
}

impl From<TypeRepr> for Type {
    fn from(r: TypeRepr) -> Type {
        match r {
            TypeRepr::Scalar(scalar) => Type { scalar, lanes: 1 },
            TypeRepr::Vector { vector, lanes } => Type {
                scalar: vector,
                lanes,
            },
        }
    }
}

impl From<Type> for TypeRepr {
    fn from(t: Type) -> TypeRepr {
        if t.lanes == 1 {
            TypeRepr::Scalar(t.scalar)
        } else {
            TypeRepr::Vector {
                vector: t.scalar,
                lanes: t.lanes,
            }
        }
    }
}

impl From<ScalarType> for Type {
    fn from(scalar: ScalarType) -> Type {
        Type { scalar, lanes: 1 }
    }
}

/// `ty == ScalarType::F32` holds for the scalar `f32` only, not for `Vec4<f32>`.
impl PartialEq<ScalarType> for Type {
    fn eq(&self, other: &ScalarType) -> bool {
        self.lanes == 1 && self.scalar == *other
    }
}

impl Type {
    /// The lane types a vector may have.
    pub const VECTOR_LANES: [ScalarType; 3] = [ScalarType::F32, ScalarType::I32, ScalarType::U32];

    pub const fn scalar(scalar: ScalarType) -> Type {
        Type { scalar, lanes: 1 }
    }
    pub const fn vector(scalar: ScalarType, lanes: u8) -> Type {
        Type { scalar, lanes }
    }
    pub fn is_vector(self) -> bool {
        self.lanes > 1
    }
    /// The scalar type, if this is one.
    pub fn as_scalar(self) -> Option<ScalarType> {
        (self.lanes == 1).then_some(self.scalar)
    }
    /// Size in bytes as stored in a buffer.
    pub fn size_bytes(self) -> usize {
        self.scalar.size_bytes() * self.lanes as usize
    }
    /// Whether the type is one the IR defines: a scalar, or 2 or 4 lanes of `f32`, `i32`
    /// or `u32`.
    pub fn is_well_formed(self) -> bool {
        self.lanes == 1
            || (matches!(self.lanes, 2 | 4) && Type::VECTOR_LANES.contains(&self.scalar))
    }
    /// The name of lane `i` (`x y z w`).
    pub fn lane_name(i: u8) -> &'static str {
        ["x", "y", "z", "w"][i as usize]
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lanes == 1 {
            write!(f, "{}", self.scalar)
        } else {
            write!(f, "Vec{}<{}>", self.lanes, self.scalar)
        }
    }
}

/// A constant. Floats are stored as their bit patterns so that literals hash and compare
/// exactly (NaN payloads and -0.0 included).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Literal {
    Bool(bool),
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
    F32(u32),
    F64(u64),
    /// An `f16`, by its bits.
    F16(u16),
}

/// A 32-bit or `bool` literal's value, for [`Literal::cast`].
#[derive(Clone, Copy)]
enum Num {
    Int(i64),
    Float(f32),
}

impl Literal {
    /// The literal `Cast` makes of this one, with the IR's cast semantics (Rust's `as`:
    /// floats to integers saturate and NaN becomes 0, integers to `f32` round to nearest,
    /// `i32` and `u32` reinterpret the bits, `bool` is 0 or 1), for the 32-bit and `bool`
    /// types; `None` for the others.
    pub fn cast(self, to: ScalarType) -> Option<Literal> {
        use ScalarType as S;
        let v = match self {
            Literal::Bool(b) => Num::Int(b as i64),
            Literal::I32(v) => Num::Int(v as i64),
            Literal::U32(v) => Num::Int(v as i64),
            Literal::F32(bits) => Num::Float(f32::from_bits(bits)),
            _ => return None,
        };
        Some(match (v, to) {
            (_, t) if t == self.ty() => self,
            (Num::Int(i), S::I32) => Literal::I32(i as i32),
            (Num::Int(i), S::U32) => Literal::U32(i as u32),
            (Num::Int(i), S::F32) => Literal::F32((i as f32).to_bits()),
            (Num::Float(f), S::I32) => Literal::I32(f as i32),
            (Num::Float(f), S::U32) => Literal::U32(f as u32),
            _ => return None,
        })
    }

    /// The value of an integer literal.
    pub fn as_i128(self) -> Option<i128> {
        match self {
            Literal::I32(v) => Some(v as i128),
            Literal::U32(v) => Some(v as i128),
            Literal::I64(v) => Some(v as i128),
            Literal::U64(v) => Some(v as i128),
            _ => None,
        }
    }
    pub fn ty(self) -> ScalarType {
        match self {
            Literal::Bool(_) => ScalarType::Bool,
            Literal::I32(_) => ScalarType::I32,
            Literal::U32(_) => ScalarType::U32,
            Literal::I64(_) => ScalarType::I64,
            Literal::U64(_) => ScalarType::U64,
            Literal::F32(_) => ScalarType::F32,
            Literal::F64(_) => ScalarType::F64,
            Literal::F16(_) => ScalarType::F16,
        }
    }
    pub fn f32(v: f32) -> Literal {
        Literal::F32(v.to_bits())
    }
    pub fn f64(v: f64) -> Literal {
        Literal::F64(v.to_bits())
    }
    /// An integer literal of type `ty`, if `v` fits.
    pub fn int(ty: ScalarType, v: i128) -> Option<Literal> {
        Some(match ty {
            ScalarType::I32 => Literal::I32(i32::try_from(v).ok()?),
            ScalarType::U32 => Literal::U32(u32::try_from(v).ok()?),
            ScalarType::I64 => Literal::I64(i64::try_from(v).ok()?),
            ScalarType::U64 => Literal::U64(u64::try_from(v).ok()?),
            ScalarType::F32 => Literal::f32(v as f32),
            ScalarType::F64 => Literal::f64(v as f64),
            ScalarType::F16 => Literal::F16(half::f16::from_f64(v as f64).to_bits()),
            ScalarType::Bool | ScalarType::BF16 | ScalarType::U8 => return None,
        })
    }
    /// A float literal of float type `ty`.
    pub fn float(ty: ScalarType, v: f64) -> Option<Literal> {
        match ty {
            ScalarType::F32 => Some(Literal::f32(v as f32)),
            ScalarType::F64 => Some(Literal::f64(v)),
            ScalarType::F16 => Some(Literal::F16(half::f16::from_f64(v).to_bits())),
            _ => None,
        }
    }
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Literal::Bool(v) => write!(f, "{v}"),
            Literal::I32(v) => write!(f, "{v}i32"),
            Literal::U32(v) => write!(f, "{v}u32"),
            Literal::I64(v) => write!(f, "{v}i64"),
            Literal::U64(v) => write!(f, "{v}u64"),
            Literal::F32(b) => write!(f, "{:?}f32", f32::from_bits(b)),
            Literal::F64(b) => write!(f, "{:?}f64", f64::from_bits(b)),
            Literal::F16(b) => write!(f, "{}f16", half::f16::from_bits(b)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every cast `Literal::cast` folds agrees with Rust's `as` on values at the edges.
    #[test]
    fn literal_casts_are_rusts_as() {
        let floats = [
            15.5f32,
            -0.75,
            4294967296.0,
            2147483648.0,
            -2147483904.0,
            f32::NAN,
            f32::INFINITY,
            -1e30,
            0.0,
        ];
        for f in floats {
            let l = Literal::F32(f.to_bits());
            assert_eq!(l.cast(ScalarType::U32), Some(Literal::U32(f as u32)), "{f}");
            assert_eq!(l.cast(ScalarType::I32), Some(Literal::I32(f as i32)), "{f}");
        }
        for i in [i32::MIN, -1, 0, 7, 16_777_217, i32::MAX] {
            let l = Literal::I32(i);
            assert_eq!(l.cast(ScalarType::U32), Some(Literal::U32(i as u32)));
            assert_eq!(
                l.cast(ScalarType::F32),
                Some(Literal::F32((i as f32).to_bits()))
            );
            let u = Literal::U32(i as u32);
            assert_eq!(u.cast(ScalarType::I32), Some(Literal::I32(i)));
            assert_eq!(
                u.cast(ScalarType::F32),
                Some(Literal::F32((i as u32 as f32).to_bits()))
            );
        }
        assert_eq!(
            Literal::Bool(true).cast(ScalarType::U32),
            Some(Literal::U32(1))
        );
        assert_eq!(
            Literal::Bool(false).cast(ScalarType::F32),
            Some(Literal::F32(0))
        );
        assert_eq!(Literal::I64(3).cast(ScalarType::I32), None);
        assert_eq!(Literal::I32(3).cast(ScalarType::F16), None);
    }
}
