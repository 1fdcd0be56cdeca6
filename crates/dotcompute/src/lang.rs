//! The kernel language as documented items: the builtins (`global_id`, `shared`,
//! `barrier`, the atomics, the subgroup operations), each with its signature and
//! semantics, and the generic bounds a type parameter of a `#[kernel]` or a
//! `#[kernel_fn]` may have ([`Num`], [`Float`], [`Int`]). Kernels use the builtins
//! without importing them; the crate docs list the whole language (control flow, math
//! methods, casts).
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
//! `x as T` is accepted too. `T::bitcast(x)` reads `x`'s bits as `T` of the same size
//! (`u32::bitcast(f)` is `f.to_bits()`, `f32::bitcast(u)` is `f32::from_bits(u)`, `i32`
//! and `u32` reinterpret each other), keeping NaN payloads and subnormals; a bitcast
//! between sizes does not compile. Each instantiation is a kernel of its own, named after its
//! parameters (`axpy_f32`), compiled and cached separately; `axpy::kernel::<f32>()` is its
//! definition.
//!
//! ## Vectors
//!
//! [`crate::Vec2`] and [`crate::Vec4`] of `f32`, `i32` or `u32` are 8- and 16-byte buffer
//! elements (one load or store each on GPUs), locals and `#[kernel_fn]` values. Build
//! them with `Vec4::new(x, y, z, w)` or `Vec4::splat(v)`, read lanes with `v.x` .. `v.w`,
//! and combine two vectors lane by lane with `+ - *`, `/` and `%` (integer `/` and `%`
//! follow the scalar division-by-zero rule in each lane) or negate them. Lanes are not
//! assigned one at a time: assign the whole vector. Comparisons, casts and math
//! functions take scalars (apply them to `v.x` ..); shared and local arrays hold scalars.
//!
//! ```
//! use dotcompute::prelude::*;
//!
//! /// `out[i] = a[i] * s + b[i]` on 16-byte vectors, and the lanes' sum.
//! #[kernel]
//! fn scale_add4(a: &[Vec4<f32>], b: &[Vec4<f32>], s: f32, out: &mut [Vec4<f32>], sum: &mut [f32]) {
//!     let i = global_id().x;
//!     if i < out.len() {
//!         let v = a[i] * Vec4::splat(s) + b[i];
//!         out[i] = v;
//!         sum[i] = v.x + v.y + v.z + v.w;
//!     }
//! }
//!
//! # fn main() -> dotcompute::Result<()> {
//! let device = Device::best()?;
//! let a = device.upload(&[Vec4::new(1.0f32, 2.0, 3.0, 4.0)])?;
//! let b = device.upload(&[Vec4::splat(0.5f32)])?;
//! let (mut out, mut sum) = (device.alloc::<Vec4<f32>>(1)?, device.alloc::<f32>(1)?);
//! scale_add4::launch(&device, Launch::threads(1), &a, &b, 2.0, &mut out, &mut sum)?;
//! assert_eq!(out.to_vec()?, [Vec4::new(2.5, 4.5, 6.5, 8.5)]);
//! assert_eq!(sum.to_vec()?, [22.0]);
//! # Ok(())
//! # }
//! ```

use crate::buffer::{Element, ScalarArg};
use dotcompute_cpu::ops::{Arith, CastTarget, Float as FloatMath, Negate, Numeric, Shift};
use dotcompute_cpu::runtime::KernelScalar;

/// A numeric kernel type: `i32 u32 i64 u64 f32 f64 f16`. Gives a type parameter the
/// arithmetic operators, comparisons, `abs min max clamp`, casts (`T::cast(x)`, as `as`),
/// bit reinterpretation between types of one size (`u32::bitcast(x)` of an `f32` is its
/// `to_bits()`), buffers and scalar arguments. Sealed through [`Element`], which only dotcompute implements.
pub trait Num:
    Element
    + ScalarArg
    + KernelScalar
    + CastTarget
    + dotcompute_cpu::ops::CastSource
    + dotcompute_cpu::ops::RawBits
    + Arith
    + Numeric
    + PartialOrd
{
}

/// A float kernel type: `f32`, `f64` or `f16` (`f16` where the device has the `f16`
/// capability). Adds negation and the float math functions
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
impl Num for half::f16 {}
impl Float for f32 {}
impl Float for f64 {}
impl Float for half::f16 {}
impl Int for i32 {}
impl Int for u32 {}
impl Int for i64 {}
impl Int for u64 {}

// ---------------------------------------------------------------------------------------
// The builtins, as documented items. `#[kernel]` and `#[kernel_fn]` translate these names
// themselves (kernels do not import them); the items below exist so that each builtin has
// a signature and its semantics in rustdoc and in IDEs. Called outside a kernel, they
// panic with a message saying so.

/// Three `u32` coordinates, read one axis at a time (`global_id().x`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UVec3 {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}

#[cold]
fn outside_kernel(name: &str) -> ! {
    panic!(
        "dotcompute::lang::{name} is a kernel builtin: it has a meaning only inside a \
         #[kernel] or #[kernel_fn] (these items exist for documentation)"
    )
}

/// The thread's position in the launch grid: `group_id() * group_size() + local_id()`
/// per axis. In a kernel without barriers or subgroup operations every running thread
/// has `global_id() < grid` on each axis (threads of the last group past the grid do not
/// run); in one with them, padding threads run too and the kernel must bound its
/// accesses.
///
/// `let i = global_id().x;` — one output per thread:
///
/// ```
/// use dotcompute::prelude::*;
///
/// /// Every thread writes where it is: its global, local and group ids, the group size
/// /// and the group count (x axis), five words per thread.
/// #[kernel]
/// fn where_am_i(out: &mut [u32]) {
///     let i = global_id().x;
///     if i * 5 + 4 < out.len() {
///         out[i * 5] = global_id().x;
///         out[i * 5 + 1] = local_id().x;
///         out[i * 5 + 2] = group_id().x;
///         out[i * 5 + 3] = group_size().x;
///         out[i * 5 + 4] = num_groups().x;
///     }
/// }
///
/// let device = Device::cpu();
/// let mut out = device.alloc_filled(10 * 5, 0u32)?;
/// where_am_i::launch(&device, Launch::threads(10).group(4), &mut out)?;
/// let out = out.to_vec()?;
/// assert_eq!(out[7 * 5..8 * 5], [7, 3, 1, 4, 3]); // thread 7: group 1, lane 3; 3 groups of 4
/// # Ok::<(), dotcompute::Error>(())
/// ```
///
/// Backends: all (CPU, CUDA, wgpu, Metal).
pub fn global_id() -> UVec3 {
    outside_kernel("global_id")
}

/// The thread's position inside its group, `0..group_size()` per axis:
/// `let lane = local_id().x;` (example at [`global_id`]).
///
/// Backends: all (CPU, CUDA, wgpu, Metal).
pub fn local_id() -> UVec3 {
    outside_kernel("local_id")
}

/// The group's position in the launch, `0..num_groups()` per axis:
/// `let tile_row = group_id().y;` (example at [`global_id`]).
///
/// Backends: all (CPU, CUDA, wgpu, Metal).
pub fn group_id() -> UVec3 {
    outside_kernel("group_id")
}

/// Threads per group on each axis (the launch's group size):
/// `let stride = group_size().x;` (example at [`global_id`]).
///
/// Backends: all (CPU, CUDA, wgpu, Metal).
pub fn group_size() -> UVec3 {
    outside_kernel("group_size")
}

/// Groups in the launch on each axis: the grid divided by the group size, rounded up:
/// `let groups = num_groups().x;` (example at [`global_id`]).
///
/// Backends: all (CPU, CUDA, wgpu, Metal).
pub fn num_groups() -> UVec3 {
    outside_kernel("num_groups")
}

/// Declares a workgroup-shared array of `LEN` elements (`let tile = shared::<f32,
/// 256>();`), at the top level of a kernel body. `LEN` is a constant expression (host
/// constants included). A 2-D array is `shared::<[[T; COLS]; ROWS]>()`, indexed
/// `tile[row][column]`. The contents are undefined when a group starts (the CPU backend
/// fills them with NaN / `0xFFFFFFFF` so that a read before a write shows).
///
/// A group sum through shared memory and [`barrier`]:
///
/// ```
/// use dotcompute::prelude::*;
///
/// #[kernel]
/// fn group_sums(x: &[u32], sums: &mut [u32]) {
///     let tile = shared::<u32, 64>();
///     let l = local_id().x;
///     let i = global_id().x;
///     tile[l] = if i < x.len() { x[i] } else { 0u32 };
///     barrier();
///     let mut step = 32u32;
///     while step > 0 {
///         if l < step {
///             tile[l] += tile[l + step];
///         }
///         barrier();
///         step = step / 2;
///     }
///     if l == 0 {
///         sums[group_id().x] = tile[0];
///     }
/// }
///
/// let device = Device::cpu();
/// let x = device.upload(&(1..=100u32).collect::<Vec<_>>())?;
/// let mut sums = device.alloc_filled(2, 0u32)?;
/// group_sums::launch(&device, Launch::threads(100).group(64), &x, &mut sums)?;
/// assert_eq!(sums.to_vec()?, [(1..=64).sum::<u32>(), (65..=100).sum::<u32>()]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
///
/// Backends: all (CPU, CUDA, wgpu, Metal). The size counts against the device's shared memory per group
/// (`Limits::max_shared_bytes`; `Error::SharedMemoryTooLarge` beyond it).
pub fn shared<T: Num, const LEN: u32>() -> &'static mut [T] {
    outside_kernel("shared")
}

/// Declares the kernel's one dynamically sized shared array; its length is given at
/// launch with `Launch::dynamic_shared(len)` and read with `.len()`:
/// `let s = shared_dynamic::<f32>(); s[local_id().x] = 0.0;`, launched with
/// `Launch::threads(n).group(128).dynamic_shared(128)`.
///
/// Backends: all (CPU, CUDA, wgpu, Metal).
pub fn shared_dynamic<T: Num>() -> &'static mut [T] {
    outside_kernel("shared_dynamic")
}

/// Waits until every thread of the group has reached this barrier, and makes the shared
/// and global memory writes made before it visible to the group after it. Every thread of
/// the group must reach the same barrier (the CPU backend reports a divergence as
/// `Error::BarrierDivergence`). A kernel with a barrier runs whole groups.
/// `barrier();` (example at [`shared`]).
///
/// Backends: all (CPU, CUDA, wgpu, Metal).
pub fn barrier() {
    outside_kernel("barrier")
}

macro_rules! atomic_stub {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        ///
        /// `target` is an element of a buffer or shared array, `&array[index]`; returns
        /// the element's previous value. Atomic with respect to every other atomic on the
        /// element (relaxed ordering: use `barrier()` to order other memory). Example at
        /// [`atomic_add`].
        ///
        /// Backends: all, on buffers and shared arrays (`f32` [`atomic_add`] is native
        /// on CUDA and a compare-exchange loop elsewhere: `Capabilities::atomic_f32_add`).
        pub fn $name<T: Num>(target: &T, value: T) -> T {
            let _ = (target, value);
            outside_kernel(stringify!($name))
        }
    )*};
}
atomic_stub! {
    /// `*target += value` (wrapping for integers), on `i32`, `u32` and `f32`.
    ///
    /// ```
    /// use dotcompute::prelude::*;
    ///
    /// /// A histogram of 16 bins, and the largest value seen.
    /// #[kernel]
    /// fn bins(x: &[u32], hist: &mut [u32], max: &mut [u32]) {
    ///     let i = global_id().x;
    ///     if i < x.len() {
    ///         atomic_add(&hist[x[i] % 16], 1u32);
    ///         atomic_max(&max[0], x[i]);
    ///     }
    /// }
    ///
    /// let device = Device::cpu();
    /// let x = device.upload(&(0..1000u32).collect::<Vec<_>>())?;
    /// let (mut hist, mut max) = (device.alloc_filled(16, 0u32)?, device.alloc_filled(1, 0u32)?);
    /// bins::launch(&device, Launch::threads(1000), &x, &mut hist, &mut max)?;
    /// assert_eq!(hist.to_vec()?.iter().sum::<u32>(), 1000);
    /// assert_eq!(max.to_vec()?, [999]);
    /// # Ok::<(), dotcompute::Error>(())
    /// ```
    atomic_add;
    /// `*target -= value` (wrapping), on `i32` and `u32`.
    atomic_sub;
    /// `*target = min(*target, value)`, on `i32` and `u32`.
    atomic_min;
    /// `*target = max(*target, value)`, on `i32` and `u32`.
    atomic_max;
    /// `*target &= value`, on `i32` and `u32`.
    atomic_and;
    /// `*target |= value`, on `i32` and `u32`.
    atomic_or;
    /// `*target ^= value`, on `i32` and `u32`.
    atomic_xor;
    /// `*target = value`, on `i32` and `u32`.
    atomic_exchange;
}

/// If `*target == expected`, sets it to `new` (strong: never fails spuriously); returns
/// the previous value either way. On `i32` and `u32`:
/// `let won = atomic_compare_exchange(&owner[slot], 0u32, id + 1) == 0u32;`.
///
/// Backends: all, on buffers and shared arrays.
pub fn atomic_compare_exchange<T: Num>(target: &T, expected: T, new: T) -> T {
    let _ = (target, expected, new);
    outside_kernel("atomic_compare_exchange")
}

/// The current value of `target` (`&array[index]`, an element of a buffer or shared
/// array), read atomically: never a value cached from an earlier read, never torn, and
/// without writing the element. On `i32` and `u32`; relaxed ordering, like every atomic.
///
/// What a thread polls while it waits on another thread's atomic write (a flag, a
/// counter). `atomic_or(&x[i], 0)` returns the same value but is a read-modify-write:
/// every poller of one address then waits its turn (CUDA's single-pass scan waits on
/// earlier tiles' words and ran 10 % faster with loads, H200, 2026-11-27).
///
/// ```
/// use dotcompute::prelude::*;
///
/// #[kernel]
/// fn count_then_read(hits: &mut [u32], seen: &mut [u32]) {
///     let i = global_id().x;
///     if i < seen.len() {
///         atomic_add(&hits[i % hits.len()], 1u32);
///         seen[i] = atomic_load(&hits[i % hits.len()]);
///     }
/// }
///
/// let device = Device::cpu();
/// let mut hits = device.alloc_filled(4, 0u32)?;
/// let mut seen = device.alloc_filled(8, 0u32)?;
/// count_then_read::launch(&device, Launch::threads(8), &mut hits, &mut seen)?;
/// assert!(seen.to_vec()?.iter().all(|&s| (1..=2).contains(&s)));
/// # Ok::<(), dotcompute::Error>(())
/// ```
///
/// Backends: all, on buffers and shared arrays (the buffer must be `&mut`).
pub fn atomic_load<T: Num>(target: &T) -> T {
    let _ = target;
    outside_kernel("atomic_load")
}

/// Threads per subgroup (warp, SIMD-group): 32 on CUDA, the adapter's size on wgpu, 1 on
/// the CPU backend. See `dotcompute_ir::SubgroupOp` for the exact semantics of every
/// subgroup operation; a kernel using any of them runs whole groups, every thread of a
/// subgroup must reach each operation, and a device without subgroups refuses the launch
/// (`Error::Unsupported`).
///
/// A warp sum: each subgroup adds its lanes, and its first lane adds that into the total.
///
/// ```
/// use dotcompute::prelude::*;
///
/// #[kernel]
/// fn total(x: &[u32], sum: &mut [u32]) {
///     let i = global_id().x;
///     let v = if i < x.len() { x[i] } else { 0u32 };
///     let s = subgroup_add(v);
///     if subgroup_lane() == 0 {
///         atomic_add(&sum[0], s);
///     }
/// }
///
/// let device = Device::cpu(); // subgroups of one lane; 32 on CUDA
/// let x = device.upload(&(1..=1000u32).collect::<Vec<_>>())?;
/// let mut sum = device.alloc_filled(1, 0u32)?;
/// total::launch(&device, Launch::threads(1000), &x, &mut sum)?;
/// assert_eq!(sum.to_vec()?, [500_500]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
///
/// Backends: CPU (one lane), CUDA (32), wgpu where the adapter has subgroups, Metal
/// (SIMD-groups); `Capabilities::subgroup_size` says which and how wide.
pub fn subgroup_size() -> u32 {
    outside_kernel("subgroup_size")
}

/// The thread's index in its subgroup, `0..subgroup_size()`; subgroups are consecutive
/// threads of a group in linear order (`x` fastest): `if subgroup_lane() == 0 { .. }`
/// (example at [`subgroup_size`]).
///
/// Backends: as [`subgroup_size`].
pub fn subgroup_lane() -> u32 {
    outside_kernel("subgroup_lane")
}

macro_rules! subgroup_stub {
    ($($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {$(
        $(#[$doc])*
        ///
        /// Backends: as [`subgroup_size`] (example there).
        pub fn $name<T: Num>($($arg: $ty),*) -> $ret {
            let _ = ($($arg,)*);
            outside_kernel(stringify!($name))
        }
    )*};
}
subgroup_stub! {
    /// `x` of lane `lane % subgroup_size()`. With the same `lane` in every lane it is a
    /// broadcast: `subgroup_shuffle(x, 0)` gives every lane lane 0's `x`.
    subgroup_shuffle(x: T, lane: u32) -> T;
    /// `x` of lane `(subgroup_lane() ^ mask) % subgroup_size()` (butterfly exchanges).
    subgroup_shuffle_xor(x: T, mask: u32) -> T;
    /// `x` of lane `subgroup_lane() - delta`; the caller's own `x` where that is below 0.
    subgroup_shuffle_up(x: T, delta: u32) -> T;
    /// `x` of lane `subgroup_lane() + delta`; the caller's own `x` past the subgroup.
    subgroup_shuffle_down(x: T, delta: u32) -> T;
    /// The sum over the subgroup (wrapping for integers; float order unspecified).
    subgroup_add(x: T) -> T;
    /// The minimum over the subgroup.
    subgroup_min(x: T) -> T;
    /// The maximum over the subgroup.
    subgroup_max(x: T) -> T;
    /// The sum over the lanes below the caller's (0 for lane 0).
    subgroup_exclusive_add(x: T) -> T;
    /// The sum over the lanes up to and including the caller's.
    subgroup_inclusive_add(x: T) -> T;
}

/// Bit `i` set when lane `i` passed `true` (lanes 0 to 31):
/// `let active = subgroup_ballot(x[i] > 0u32).count_ones();`.
///
/// Backends: as [`subgroup_size`].
pub fn subgroup_ballot(b: bool) -> u32 {
    let _ = b;
    outside_kernel("subgroup_ballot")
}

/// A tensor-core multiply-accumulate by one subgroup of 32 threads: `D += A · B` with `D`
/// 16×8 in f32, `A` 16×8 and `B` 8×8 rounded to TF32 (10 mantissa bits) before they are
/// multiplied. `acc` is the first of four elements of an f32 local array holding this
/// thread's fragment of `D`; `a0..a3` and `b0, b1` its fragments of `A` and `B`. With
/// `g = subgroup_lane() / 4` and `t = subgroup_lane() % 4`: `a = [A[g][t], A[g+8][t],
/// A[g][t+4], A[g+8][t+4]]`, `b = [B[t][g], B[t+4][g]]`, and the four accumulators are
/// `[D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]]` (PTX `mma.sync.m16n8k8`).
///
/// A statement, not a value. Every thread of the subgroup must reach it, groups must be
/// whole subgroups (a multiple of 32 threads, else `Error::InvalidGroupSize`), and the
/// device needs capability `tensor_cores` (CUDA, compute capability 8.0 or later; other
/// devices refuse the launch with `Error::Unsupported`). `Device::matmul_generated_with`
/// with `Precision::Tf32` is a matrix product built on it.
/// `mma_m16n8k8_tf32(&mut acc[0], a0, a1, a2, a3, b0, b1);` with `let mut acc = [0.0f32; 4];`.
///
/// Backends: CUDA (compute capability 8.0 and later) only.
#[allow(clippy::too_many_arguments)]
pub fn mma_m16n8k8_tf32(acc: &mut f32, a0: f32, a1: f32, a2: f32, a3: f32, b0: f32, b1: f32) {
    let _ = (acc, a0, a1, a2, a3, b0, b1);
    outside_kernel("mma_m16n8k8_tf32")
}

/// [`mma_m16n8k8_tf32`] with f16 operands and twice the depth: `D += A · B` with `D`
/// 16×8 in f32, `A` 16×16 and `B` 16×8 in f16, multiplied exactly and summed in f32.
/// With `g = subgroup_lane() / 4` and `t = subgroup_lane() % 4`: `a = [A[g][2t],
/// A[g][2t+1], A[g+8][2t], A[g+8][2t+1], A[g][2t+8], A[g][2t+9], A[g+8][2t+8],
/// A[g+8][2t+9]]`, `b = [B[2t][g], B[2t+1][g], B[2t+8][g], B[2t+9][g]]`, and the four
/// accumulators are `[D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]]` (PTX
/// `mma.sync.m16n8k16`). Operands read straight from an f16 buffer or shared array
/// reach the instruction as stored. The same rules as [`mma_m16n8k8_tf32`];
/// `Device::matmul_generated` of `f16` matrices is a product built on it.
/// `mma_m16n8k16_f16(&mut acc[0], a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3);`.
///
/// Backends: CUDA (compute capability 8.0 and later) only.
#[allow(clippy::too_many_arguments)]
pub fn mma_m16n8k16_f16(
    acc: &mut f32,
    a0: half::f16,
    a1: half::f16,
    a2: half::f16,
    a3: half::f16,
    a4: half::f16,
    a5: half::f16,
    a6: half::f16,
    a7: half::f16,
    b0: half::f16,
    b1: half::f16,
    b2: half::f16,
    b3: half::f16,
) {
    let _ = (acc, [a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3]);
    outside_kernel("mma_m16n8k16_f16")
}

/// Whether any lane of the subgroup passed `true`: `if subgroup_any(found) { .. }`.
///
/// Backends: as [`subgroup_size`].
pub fn subgroup_any(b: bool) -> bool {
    let _ = b;
    outside_kernel("subgroup_any")
}

/// Whether every lane of the subgroup passed `true`: `if subgroup_all(done) { .. }`.
///
/// Backends: as [`subgroup_size`].
pub fn subgroup_all(b: bool) -> bool {
    let _ = b;
    outside_kernel("subgroup_all")
}

#[cfg(test)]
mod tests {
    #[test]
    #[should_panic(expected = "is a kernel builtin")]
    fn a_builtin_called_on_the_host_says_it_is_one() {
        let _ = super::global_id();
    }
}
