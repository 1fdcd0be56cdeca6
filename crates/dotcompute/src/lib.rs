//! # dotcompute
//!
//! Write a compute kernel once, in Rust, and run it on any backend dotcompute has: the CPU,
//! CUDA, wgpu (Vulkan / Metal / DX12) and, on Apple platforms, native Metal (written and
//! type-checked, never run on Apple hardware here: see the README's backend table for
//! what exists and what was checked).
//!
//! ```
//! use dotcompute::prelude::*;
//!
//! #[kernel]
//! fn vector_add(a: &[f32], b: &[f32], out: &mut [f32]) {
//!     let i = global_id().x;
//!     if i < out.len() {
//!         out[i] = a[i] + b[i];
//!     }
//! }
//!
//! # fn main() -> dotcompute::Result<()> {
//! let device = Device::best()?;
//! let n = 1000;
//! let a = device.upload(&vec![1.0f32; n])?;
//! let b = device.upload(&(0..n).map(|i| i as f32).collect::<Vec<_>>())?;
//! let mut out = device.alloc::<f32>(n)?;
//! vector_add::launch(&device, Launch::threads(n), &a, &b, &mut out)?;
//! let result = out.to_vec()?;
//! assert_eq!(result[10], 11.0);
//! # Ok(())
//! # }
//! ```
//!
//! ## The kernel language
//!
//! A `#[kernel]` function is ordinary Rust in a small subset, compiled twice: by rustc for
//! the CPU and into the IR (`dotcompute-ir`) for GPUs. Anything outside the subset is a
//! compile error naming the construct.
//!
//! * **Parameters**: `&[T]` (read-only buffer), `&mut [T]` (read-write buffer), `T` (scalar
//!   by value), with `T` one of `i32 u32 i64 u64 f32 f64` (`bool` for scalars), and `f16`
//!   on devices with the `f16` capability (CPU, CUDA, wgpu with SHADER_F16): every f16
//!   operation rounds to f16; `f16::cast(1.5)` or `x as f16` make f16 values (an untyped
//!   literal cannot, as for Rust's `half`). `bf16` is a storage type only.
//! * **Locals**: `let [mut] x [: T] = expr;` An untyped literal that nothing constrains
//!   defaults to `i32` / `f64` as in Rust; annotate when you mean another type.
//! * **Control flow**: `if`/`else` (also as a value), `match` on integers (also as a
//!   value; patterns are literals or constants, ranges, `|`, `_` and guards),
//!   `for i in a..b`, `for i in (a..b).step_by(s)`, `while`, `loop`, `break`, `continue`,
//!   `return`. Write a loop with constant bounds as `for`: on wgpu a `for` loop of up to
//!   64 constant trips is written out, while `while` and `loop` keep a trip counter that
//!   NVIDIA's Vulkan compiler does not unroll (a byte histogram's `while k < 4` ran at half
//!   the speed of `for k in 0..4`).
//! * **Arrays**: `a[i]`, `a[i] = v`, `a[i] += v`, `a.len()` (`u32`). Thread-private
//!   arrays: `let mut acc = [0.0f32; 8];` (constant length, at most 1024; every element
//!   set to the value). In a generic kernel the length may name its const parameters, of
//!   any integer type, with arithmetic: `[T::zero(); PER]`, `[0u32; PER * 2 + 1]` (on the
//!   CPU such an array has room for 1024 elements on the thread's stack). Indices are `u32` (other
//!   integer types are converted with `as u32`). Accesses are bounds-checked on the CPU.
//! * **Builtins**: `global_id()`, `local_id()`, `group_id()`, `group_size()`,
//!   `num_groups()`, each read as `.x`, `.y` or `.z` (`u32`).
//! * **Shared memory**: `let tile = shared::<f32, 256>();` (length from a constant
//!   expression, host constants included), 2-D as `shared::<[[f32; 33]; 32]>()` indexed
//!   `tile[row][column]` (row-major; a column past the row is out of bounds), and at most one
//!   `let s = shared_dynamic::<f32>();` sized at launch with `Launch::dynamic_shared(len)`.
//!   `barrier()` synchronises the group; every thread of the group must reach it.
//! * **Atomics** on buffers and shared arrays: `atomic_add(&a[i], v)` and `atomic_sub`,
//!   `atomic_min`, `atomic_max`, `atomic_and`, `atomic_or`, `atomic_xor`,
//!   `atomic_exchange`, `atomic_compare_exchange(&a[i], expected, new)` on `u32`/`i32`;
//!   `atomic_add` also on `f32`. Each returns the previous value. `atomic_load(&a[i])`
//!   reads an element atomically without writing it (what a waiting thread polls).
//! * **Math**: `sqrt rsqrt sin cos tan tanh exp exp2 ln log2 powf powi atan2 floor ceil trunc round
//!   recip mul_add` on floats (`round` sends halves away from zero, as Rust does), and the
//!   tests `is_nan()` / `is_finite()` (`bool`); `abs min max clamp` on every numeric type;
//!   `count_ones leading_zeros trailing_zeros` (`u32`), `reverse_bits`, `wrapping_add/sub/mul`
//!   and `saturating_add/sub` on integers; `x.extract_byte(k)` on `u32` (byte `k % 4`,
//!   zero-extended: one instruction where the GPU has a byte permute); `as`
//!   casts between scalar types. Float comparisons are IEEE's on every backend: with a
//!   NaN, `!=` is true and the others false, so `x != x` tests for NaN.
//!   `powi(n: i32)` is repeated squaring (then one division for `n < 0`) on every
//!   backend, so results agree bit for bit; `rsqrt` is within 2 ulp. Every backend has
//!   all of them (f64 ones where the device has `f64`, f16 ones where it has `f16`);
//!   `let d = (dx * dx + dy * dy).sqrt();`.
//! * **Host constants**: any name that is not a local or parameter (a `const`,
//!   `f32::MAX`) is read from the host when the kernel is built, which specialises it.
//! * **Subgroups** (warps, SIMD-groups): `subgroup_size()`, `subgroup_lane()` (`u32`),
//!   `subgroup_shuffle(x, lane)`, `subgroup_shuffle_xor(x, mask)`,
//!   `subgroup_shuffle_up(x, delta)`, `subgroup_shuffle_down(x, delta)`,
//!   `subgroup_add/min/max(x)`, `subgroup_exclusive_add(x)`, `subgroup_inclusive_add(x)`
//!   on numbers, and `subgroup_ballot(b)` (`u32`, lanes 0-31), `subgroup_any(b)`,
//!   `subgroup_all(b)`. A subgroup is `subgroup_size()` consecutive threads of a group:
//!   32 on CUDA, the adapter's size on wgpu (capability `subgroup_size`; without it a
//!   launch is `Error::Unsupported`), 1 on the CPU backend, where each operation sees only
//!   its own thread. Every thread of a subgroup must reach each operation; write kernels
//!   that work for any size. Semantics: `dotcompute_ir::SubgroupOp`.
//! * **Tensor cores**: `mma_m16n8k8_tf32(&mut acc[i], a0, a1, a2, a3, b0, b1)`, one
//!   subgroup's 16×8×8 multiply-accumulate with TF32 inputs and f32 accumulators (PTX
//!   `mma.sync`; capability `tensor_cores`: CUDA from compute capability 8.0; elsewhere
//!   a launch is `Error::Unsupported`). Fragment layout: [`lang::mma_m16n8k8_tf32`].
//!   `mma_m16n8k16_f16(&mut acc[i], a0, .., a7, b0, .., b3)` is the 16×8×16 form with
//!   f16 inputs ([`lang::mma_m16n8k16_f16`]).
//! * **Kernel functions**: a kernel calls functions marked [`#[kernel_fn]`](kernel_fn),
//!   written in the same subset. They take scalars and arrays (`&[T]`, `&mut [T]`: pass a
//!   buffer parameter or a shared array by name) and return a scalar or nothing; they may
//!   use builtins, atomics, `barrier()` and other kernel functions, but not `return`
//!   (end with the value) or shared-array declarations. Each call is inlined into the
//!   kernel's IR, so backends see one function. Their type parameters are inferred from
//!   the arguments (no turbofish). Calling a plain Rust function is a compile error.
//! * **Generic kernels**: `fn k<T: Float, const TILE: u32>(..)` ([`Num`], [`Float`],
//!   [`Int`] bound the type parameters; const parameters are host constants). Each
//!   instantiation is its own kernel (`k::launch::<f32, 16>(..)`, type parameters
//!   inferred from the arguments when no const parameter needs naming), built on first
//!   use and named `k_f32_16`. In generic code `T::zero()`, `T::one()`, `T::cast(x)` and
//!   `x as T` give `T` values, `T::bitcast(x)` the same bits as `T`; an untyped literal cannot be a `T`, as in Rust. See
//!   [`lang`].
//!
//! Arithmetic follows one definition on every backend (wrapping integers, `x / 0 == x`,
//! shifts modulo the width, saturating float-to-int casts): see `dotcompute_ir`.
//!
//! ## Launches
//!
//! [`Launch`] counts *threads*, not groups: `Launch::threads(n)`,
//! `Launch::grid2d(w, h).group2d(16, 16)`. In a kernel without `barrier()` or subgroup
//! operations threads outside the grid do not run; a kernel with either runs whole groups
//! and must bound its own accesses. Launch errors (empty grid, group or grid beyond the device's limits, too much
//! shared memory, wrong or foreign buffers) are `Err`s naming the problem, and the device
//! stays usable.
//!
//! ## Type safety
//!
//! A `#[kernel]`'s `launch` function is typed by the kernel's signature, so mistakes are
//! compile errors. This compiles:
//!
//! ```
//! use dotcompute::prelude::*;
//! #[kernel]
//! fn scale(x: &mut [f32], s: f32) {
//!     let i = global_id().x;
//!     if i < x.len() { x[i] *= s; }
//! }
//! let d = Device::cpu();
//! let mut x = d.upload(&[1.0f32, 2.0]).unwrap();
//! scale::launch(&d, Launch::threads(2), &mut x, 3.0).unwrap();
//! assert_eq!(x.to_vec().unwrap(), vec![3.0, 6.0]);
//! ```
//!
//! A scalar of the wrong type does not:
//!
//! ```compile_fail
//! # use dotcompute::prelude::*;
//! # #[kernel]
//! # fn scale(x: &mut [f32], s: f32) { let i = global_id().x; if i < x.len() { x[i] *= s; } }
//! # let d = Device::cpu();
//! # let mut x = d.upload(&[1.0f32, 2.0]).unwrap();
//! scale::launch(&d, Launch::threads(2), &mut x, 3u32).unwrap();
//! ```
//!
//! Nor does a missing argument, a buffer of the wrong element type, or a read-only borrow
//! where the kernel writes:
//!
//! ```compile_fail
//! # use dotcompute::prelude::*;
//! # #[kernel]
//! # fn scale(x: &mut [f32], s: f32) { let i = global_id().x; if i < x.len() { x[i] *= s; } }
//! # let d = Device::cpu();
//! # let mut x = d.upload(&[1.0f32, 2.0]).unwrap();
//! scale::launch(&d, Launch::threads(2), &mut x).unwrap();
//! ```
//!
//! ```compile_fail
//! # use dotcompute::prelude::*;
//! # #[kernel]
//! # fn scale(x: &mut [f32], s: f32) { let i = global_id().x; if i < x.len() { x[i] *= s; } }
//! # let d = Device::cpu();
//! let mut ints = d.upload(&[1u32, 2]).unwrap();
//! scale::launch(&d, Launch::threads(2), &mut ints, 3.0).unwrap();
//! ```
//!
//! ```compile_fail
//! # use dotcompute::prelude::*;
//! # #[kernel]
//! # fn scale(x: &mut [f32], s: f32) { let i = global_id().x; if i < x.len() { x[i] *= s; } }
//! # let d = Device::cpu();
//! # let x = d.upload(&[1.0f32, 2.0]).unwrap();
//! scale::launch(&d, Launch::threads(2), &x, 3.0).unwrap();
//! ```
//!
//! A buffer cannot be freed while a launch uses it: the launch borrows it, and launches on
//! the CPU backend complete before they return (asynchronous backends keep the memory
//! alive until their work completes).
//!
//! ## Asynchronous work, transfers and events
//!
//! GPU backends enqueue launches, copies and fills and return; reads (`to_vec`,
//! `read_into`) and [`Device::synchronize`] wait. [`Device::record_event`] gives an
//! [`Event`] to wait on or poll. For transfers that overlap with host work, stage data in a
//! [`HostBuffer`] ([`Device::alloc_host`]; page-locked on CUDA) and use
//! [`Buffer::upload_async`] / [`Buffer::download_async`]; the host buffer waits for its
//! transfer before it hands out its contents.
//!
//! ## Streams, graphs and timelines
//!
//! [`Device::stream`] opens more in-order queues on a device ([`Stream`]); a typed launch
//! takes a `Device` (its default stream) or a `Stream`. A buffer used on two streams is
//! ordered automatically (see [`Stream`]), and events order work that shares no buffer.
//! A [`Graph`] of launches, copies and fills with explicit dependencies is instantiated
//! once ([`ExecGraph`]; a CUDA graph on CUDA) and replayed with new scalars or buffers.
//! With profiling on, [`Device::write_trace`] writes a Perfetto timeline, one track per
//! stream ([`trace`]).
//!
//! ## 16-bit floats
//!
//! [`f16`](struct@f16) and [`bf16`] buffers can be allocated, filled, copied and transferred on every
//! backend, and multiplied with [`Device::matmul`] where the backend has a vendor library
//! (cuBLAS). Both come with the prelude, and a kernel's `f16` is always dotcompute's (a
//! module holding only kernels needs no `use dotcompute::f16`). Kernels use `f16` as a scalar type (buffers, locals, arithmetic, `as` casts,
//! the [`Float`] math) on devices whose capabilities list `f16`; `bf16` is a storage type
//! only (no kernel arithmetic).
//!
//! ## Seeing the generated code
//!
//! Every kernel shows what the backends compile from it: `my_kernel::kernel()` (or
//! `my_kernel::kernel::<f32, 4>()` for one generic instance) with
//! [`KernelSource::source`] and a [`Target`] (`Ir`, `Cuda`, `Wgsl`, `Msl`); no device
//! needed. `DOTCOMPUTE_DUMP=<dir>` writes each source a backend compiles, as it compiles
//! it (`<kernel>.<key>.<variant>.cu|wgsl|metal`), exactly as the launch specialised it.
//!
//! ```
//! use dotcompute::prelude::*;
//! use dotcompute::Target;
//!
//! #[kernel]
//! fn double(x: &mut [f32]) {
//!     let i = global_id().x;
//!     if i < x.len() {
//!         x[i] = x[i] * 2.0;
//!     }
//! }
//!
//! println!("{}", double::kernel().source(Target::Cuda)?);
//! # Ok::<(), dotcompute::Error>(())
//! ```
//!
//! ## Errors
//!
//! Every fallible operation returns [`Result`]; nothing panics on bad input. See [`Error`].

// Lets `#[kernel]` expansions inside this crate name it as `::dotcompute`.
extern crate self as dotcompute;

mod args;
mod buffer;
mod device;
pub mod differential;
mod graph;
mod host;
pub mod lang;
mod linalg;
mod raw;
pub mod registry;
mod source;
mod stream;
pub mod trace;
mod tracking;

pub use buffer::{
    Arg, Buffer, BufferView, BufferViewMut, ByteQuads, ByteWords, Element, KernelBuffer,
    KernelBufferMut, ScalarArg, Vec4s, Vec4sMut,
};
pub use device::{Device, BACKEND_ENV};
/// Strict parsing of `DOTCOMPUTE_*` settings (for crates built on dotcompute, such as
/// `dotcompute-ops`).
pub use dotcompute_hal::settings;
pub use dotcompute_hal::{
    AtomicF32Add, BackendDescriptor, BackendKind, Capabilities, DeviceInfo, DeviceType, Error,
    GeneratedProduct, KernelDef, Launch, Limits, MemoryStats, RawLanguage, ResolvedLaunch, Result,
    StreamId, Timing,
};
pub use dotcompute_ir::vector::{Vec2, Vec4};
pub use dotcompute_macros::{kernel, kernel_fn};
pub use graph::{
    ExecGraph, Graph, GraphArg, GraphBuffer, GraphBufferMut, Lend, NodeId, Recorded, Recorder,
};
pub use half::{bf16, f16};
pub use host::{Event, HostBuffer};
pub use lang::{Float, Int, Num};
#[doc(hidden)]
pub use linalg::library_kernels;
pub use linalg::{MatmulElement, MatmulPath, Precision};
pub use raw::{RawKernel, RawParam};
pub use registry::{backends, registry, BackendStatus};
pub use source::{KernelSource, SourceOptions, Target};
pub use stream::{AsStream, Stream};
/// A buffer's use-tracking state (which streams used it); opaque.
pub use tracking::Uses;

/// The kernel IR, for inspecting what `#[kernel]` produced or building kernels by hand.
pub use dotcompute_ir as ir;

/// How the CPU backend runs kernels with barriers: split at the barriers into loops over
/// a group's threads (the default), or one coroutine per thread
/// (`DOTCOMPUTE_CPU_BARRIERS=coroutines`). Both give the same results; `docs/architecture.md`
/// compares them.
pub mod cpu {
    pub use dotcompute_cpu::fission::{
        barrier_schedule, set_barrier_schedule, split_launches, BarrierSchedule,
    };
    /// Whether split group bodies run their barrier-free regions a chunk of threads at a
    /// time in vector lanes (the default), or thread by thread
    /// (`DOTCOMPUTE_CPU_LANES=0`); both give the same results (f32 `exp` within 1 ulp).
    pub use dotcompute_cpu::lanes::{enabled as lanes_enabled, set_enabled as set_lanes};
}

/// What the wgpu backend reports about how it ran kernels.
#[cfg(feature = "wgpu")]
pub mod wgpu {
    pub use dotcompute_wgpu::vector_launches;
}

/// Everything a typical program needs.
pub mod prelude {
    // `f16` / `bf16` come with the prelude: a kernel's `f16` always means dotcompute's
    // (no import needed there), and host code gets it without an import that a
    // kernels-only module would see reported as unused.
    pub use crate::{
        bf16, f16, kernel, kernel_fn, AsStream, Buffer, Device, Float, Int, KernelSource, Launch,
        Num, Stream, Vec2, Vec4,
    };
}

/// Paths used by code that `#[kernel]` generates. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::{Arg, AsStream};

    /// Implemented by every `#[kernel_fn]` (and by the stand-in a failed one leaves, so
    /// that its callers get no second error). A kernel calling anything else gets this
    /// trait's message.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not a kernel function: mark it `#[kernel_fn]` to call it from a kernel",
        label = "kernels call `#[kernel_fn]` functions (and the builtins) only",
        note = "a `#[kernel_fn]` takes scalars and `&[T]` / `&mut [T]` arrays and returns a scalar or nothing"
    )]
    pub trait KernelFunction {}

    /// Every call a kernel makes goes through this check first: one error, "mark it
    /// `#[kernel_fn]`", at the call of anything else.
    #[inline(always)]
    pub fn kernel_fn<F: KernelFunction + ?Sized>(f: &F) -> &F {
        f
    }

    /// The methods a kernel calls on a callee: a `#[kernel_fn]`'s own (inherent, so they
    /// win) or these stand-ins, reached only after [`kernel_fn`] has reported a callee
    /// that is not one (or for a failed `#[kernel_fn]`'s stand-in); never run, the
    /// compile error stops the build.
    pub trait NotKernelFn {
        fn __dc_barrier(&self) -> bool {
            false
        }
        fn __dc_build<A, R>(
            &self,
            _b: &mut dotcompute_ir::Builder,
            _args: A,
        ) -> ::core::result::Result<R, dotcompute_ir::BuildError> {
            unreachable!("a callee that is not a #[kernel_fn] was called")
        }
        fn __dc_native<A, R>(&self, _ctx: &dotcompute_cpu::runtime::ThreadCtx<'_>, _args: A) -> R {
            unreachable!("a callee that is not a #[kernel_fn] was called")
        }
    }
    impl<T: ?Sized> NotKernelFn for T {}
    pub use dotcompute_cpu::ops;
    pub use dotcompute_hal::native::NativeLaunch;
    pub use dotcompute_hal::{instance_part, leak_name, Instances, KernelDef};
    pub use dotcompute_ir as ir;
    pub mod cpu {
        pub use dotcompute_cpu::fission::{
            barrier_schedule, execute_groups, Alive, ArraySlots, BarrierSchedule, Exit, Flow,
            Group, LocalArray, Slots,
        };
        pub use dotcompute_cpu::lanes;
        pub use dotcompute_cpu::runtime::{
            execute, scalar, GlobalMut, GlobalRef, KernelScalar, SharedArr, ThreadCtx, View,
        };
    }
}
