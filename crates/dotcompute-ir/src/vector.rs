//! The Rust types of the IR's vectors ([`crate::Type`] with 2 or 4 lanes): buffer
//! elements on the host and values in kernels. Their layout is that of CUDA's
//! `float2`/`float4`, WGSL's `vec2<f32>`/`vec4<f32>` and MSL's `float2`/`float4` (lanes
//! in order, aligned to their size), so a `Buffer<Vec4<f32>>` is read with one 16-byte
//! load per element on every GPU.
//!
//! Host arithmetic (`+ - * /` and unary `-`) is Rust's on each lane; inside kernels the
//! IR's semantics apply (wrapping integers, `x / 0 == x`).

use crate::types::{ScalarType, Type};

/// Two lanes, aligned to 8 bytes (`float2`, `vec2<f32>`).
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Vec2<T> {
    pub x: T,
    pub y: T,
}

/// Four lanes, aligned to 16 bytes (`float4`, `vec4<f32>`).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Vec4<T> {
    pub x: T,
    pub y: T,
    pub z: T,
    pub w: T,
}

impl<T: Copy> Vec2<T> {
    pub const fn new(x: T, y: T) -> Self {
        Vec2 { x, y }
    }
    /// Every lane `v`.
    pub const fn splat(v: T) -> Self {
        Vec2 { x: v, y: v }
    }
    /// The lanes in order.
    pub fn to_array(self) -> [T; 2] {
        [self.x, self.y]
    }
    /// Applies `f` to each lane.
    pub fn map<U: Copy>(self, mut f: impl FnMut(T) -> U) -> Vec2<U> {
        Vec2::new(f(self.x), f(self.y))
    }
    /// Combines the lanes of `self` and `o` pairwise.
    pub fn zip<U: Copy, R: Copy>(self, o: Vec2<U>, mut f: impl FnMut(T, U) -> R) -> Vec2<R> {
        Vec2::new(f(self.x, o.x), f(self.y, o.y))
    }
}

impl<T: Copy> Vec4<T> {
    pub const fn new(x: T, y: T, z: T, w: T) -> Self {
        Vec4 { x, y, z, w }
    }
    /// Every lane `v`.
    pub const fn splat(v: T) -> Self {
        Vec4 {
            x: v,
            y: v,
            z: v,
            w: v,
        }
    }
    /// The lanes in order.
    pub fn to_array(self) -> [T; 4] {
        [self.x, self.y, self.z, self.w]
    }
    /// Applies `f` to each lane.
    pub fn map<U: Copy>(self, mut f: impl FnMut(T) -> U) -> Vec4<U> {
        Vec4::new(f(self.x), f(self.y), f(self.z), f(self.w))
    }
    /// Combines the lanes of `self` and `o` pairwise.
    pub fn zip<U: Copy, R: Copy>(self, o: Vec4<U>, mut f: impl FnMut(T, U) -> R) -> Vec4<R> {
        Vec4::new(
            f(self.x, o.x),
            f(self.y, o.y),
            f(self.z, o.z),
            f(self.w, o.w),
        )
    }
}

macro_rules! host_ops {
    ($v:ident) => {
        impl<T: Copy + std::ops::Add<Output = T>> std::ops::Add for $v<T> {
            type Output = Self;
            fn add(self, o: Self) -> Self {
                self.zip(o, |a, b| a + b)
            }
        }
        impl<T: Copy + std::ops::Sub<Output = T>> std::ops::Sub for $v<T> {
            type Output = Self;
            fn sub(self, o: Self) -> Self {
                self.zip(o, |a, b| a - b)
            }
        }
        impl<T: Copy + std::ops::Mul<Output = T>> std::ops::Mul for $v<T> {
            type Output = Self;
            fn mul(self, o: Self) -> Self {
                self.zip(o, |a, b| a * b)
            }
        }
        impl<T: Copy + std::ops::Div<Output = T>> std::ops::Div for $v<T> {
            type Output = Self;
            fn div(self, o: Self) -> Self {
                self.zip(o, |a, b| a / b)
            }
        }
        impl<T: Copy + std::ops::Neg<Output = T>> std::ops::Neg for $v<T> {
            type Output = Self;
            fn neg(self) -> Self {
                self.map(|a| -a)
            }
        }
    };
}
host_ops!(Vec2);
host_ops!(Vec4);

/// The lane types of vectors, and the IR's name for each.
pub trait VectorLane: bytemuck::Pod {
    const SCALAR: ScalarType;
}
impl VectorLane for f32 {
    const SCALAR: ScalarType = ScalarType::F32;
}
impl VectorLane for i32 {
    const SCALAR: ScalarType = ScalarType::I32;
}
impl VectorLane for u32 {
    const SCALAR: ScalarType = ScalarType::U32;
}

impl<T: VectorLane> Vec2<T> {
    /// The IR type (`Vec2<f32>`).
    pub const TYPE: Type = Type::vector(T::SCALAR, 2);
}
impl<T: VectorLane> Vec4<T> {
    /// The IR type (`Vec4<f32>`).
    pub const TYPE: Type = Type::vector(T::SCALAR, 4);
}

macro_rules! pod {
    ($($t:ty),*) => {$(
        // SAFETY: (for all four) lanes are 4-byte Pod types; `Vec2` is 8 bytes with alignment
        // 8 and `Vec4` 16 bytes with alignment 16 (asserted below), so neither has padding,
        // and every bit pattern is valid.
        unsafe impl bytemuck::Zeroable for Vec2<$t> {}
        // SAFETY: as above.
        unsafe impl bytemuck::Pod for Vec2<$t> {}
        // SAFETY: as above.
        unsafe impl bytemuck::Zeroable for Vec4<$t> {}
        // SAFETY: as above.
        unsafe impl bytemuck::Pod for Vec4<$t> {}
        const _: () = assert!(std::mem::size_of::<Vec2<$t>>() == 8);
        const _: () = assert!(std::mem::size_of::<Vec4<$t>>() == 16);
    )*};
}
pod!(f32, i32, u32);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_the_gpu_vector_types() {
        assert_eq!(std::mem::align_of::<Vec4<f32>>(), 16);
        assert_eq!(std::mem::align_of::<Vec2<u32>>(), 8);
        let v = [Vec4::new(1.0f32, 2.0, 3.0, 4.0), Vec4::splat(5.0)];
        let flat: &[f32] = bytemuck::cast_slice(&v);
        assert_eq!(flat, &[1.0, 2.0, 3.0, 4.0, 5.0, 5.0, 5.0, 5.0]);
        assert_eq!(Vec4::<i32>::TYPE.to_string(), "Vec4<i32>");
        assert_eq!(Vec2::new(3u32, 4) * Vec2::splat(2), Vec2::new(6, 8));
    }
}
