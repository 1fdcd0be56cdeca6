//! The cases themselves: the seed cases of `shared/seed-cases.md`, semantics cases and
//! memory cases, each a function from a [`Target`], a size and a seeded generator to an
//! [`Outcome`] or a [`Failure`]. The harness that runs them is in the crate root. The cases
//! live in rooms by concern (`seed`, `semantics`, `language`, `memory`); the table and the
//! helpers they share are here.

mod language;
mod memory;
mod seed;
mod semantics;

use self::{language::*, memory::*, seed::*, semantics::*};
use crate::kernels;
use crate::{fail, Case, Failure, Outcome, Size, Target, SEED_SIZES};
use dotcompute::{BackendKind, Buffer, Device, Element, Error, Launch, Vec2, Vec4};

fn seed_sizes() -> Vec<Size> {
    SEED_SIZES.iter().map(|&n| Size::n(n)).collect()
}

/// Every case, in table order.
pub fn cases() -> Vec<Case> {
    let c = |name, group, sizes, run| Case {
        name,
        group,
        sizes,
        run,
    };
    vec![
        c("ThreadIds", "kernel", seed_sizes(), thread_ids),
        c("VectorAdd", "kernel", seed_sizes(), vector_add),
        c("VectorMultiply", "kernel", seed_sizes(), vector_multiply),
        c("ReductionSum", "kernel", seed_sizes(), reduction_sum),
        c(
            "MatrixMultiply",
            "kernel",
            [1, 17, 64, 256, 1000]
                .iter()
                .map(|&s| Size::mkn(s, s, s))
                .chain([Size::mkn(64, 128, 32)])
                .collect(),
            matrix_multiply,
        ),
        c(
            "GeneratedMatmul",
            "kernel",
            [1, 17, 130, 257]
                .iter()
                .map(|&s| Size::mkn(s, s, s))
                .chain([Size::mkn(64, 128, 32), Size::mkn(200, 1000, 129)])
                .collect(),
            generated_matmul,
        ),
        c(
            "VendorMatmul",
            "kernel",
            [1, 17, 130]
                .iter()
                .map(|&s| Size::mkn(s, s, s))
                .chain([Size::mkn(200, 1000, 129)])
                .collect(),
            vendor_matmul,
        ),
        c("UnifiedMemory", "kernel", seed_sizes(), unified_memory),
        c(
            "GridIds3D",
            "semantics",
            vec![Size::n(1), Size::n(2)],
            grid_ids_3d,
        ),
        c("SharedAtomics", "semantics", seed_sizes(), shared_atomics),
        c(
            "IntegerSemantics",
            "semantics",
            vec![Size::n(4099)],
            integer_semantics,
        ),
        c(
            "IntegerAbs",
            "semantics",
            vec![Size::n(4099), Size::n(1_000_003)],
            integer_abs,
        ),
        c(
            "FloatNaN",
            "semantics",
            vec![Size::n(4099), Size::n(1_000_003)],
            float_nan,
        ),
        c("MoreMath", "semantics", vec![Size::n(4099)], math_more),
        c(
            "MatchInt",
            "semantics",
            vec![Size::n(4099), Size::n(1_000_003)],
            match_int,
        ),
        c(
            "WrapSaturate",
            "semantics",
            vec![Size::n(4099), Size::n(1_000_003)],
            wrap_saturate,
        ),
        c(
            "BitOps",
            "semantics",
            vec![Size::n(4099), Size::n(1_000_003)],
            bit_ops,
        ),
        c(
            "Bitcast",
            "semantics",
            vec![Size::n(4099), Size::n(1_000_003)],
            bitcast,
        ),
        c(
            "KernelFunctions",
            "language",
            vec![Size::n(1), Size::n(4099), Size::n(1_000_003)],
            kernel_functions,
        ),
        c(
            "GenericKernels",
            "language",
            vec![Size::n(1), Size::n(4099), Size::n(1_000_003)],
            generic_kernels,
        ),
        c(
            "LocalArrays",
            "language",
            vec![Size::n(1), Size::n(4099), Size::n(1_000_003)],
            local_arrays,
        ),
        c(
            "ConstSizedLocalArrays",
            "language",
            vec![Size::n(1), Size::n(4099), Size::n(1_000_003)],
            const_sized_local_arrays,
        ),
        c(
            "ViewArgs",
            "language",
            vec![Size::n(1), Size::n(4099), Size::n(1_000_003)],
            view_args,
        ),
        c(
            "Subgroups",
            "language",
            vec![Size::n(1), Size::n(4099), Size::n(1_000_003)],
            subgroups,
        ),
        c(
            "VectorTypes",
            "language",
            vec![Size::n(1), Size::n(4099), Size::n(1_000_003)],
            vector_types,
        ),
        c(
            "SharedArray2D",
            "language",
            vec![
                Size::mkn(1, 1, 1),
                Size::mkn(37, 53, 1),
                Size::mkn(1000, 1031, 1),
            ],
            shared_array_2d,
        ),
        c(
            "LiteralInference",
            "language",
            vec![Size::n(1), Size::n(4099)],
            literal_inference,
        ),
        c(
            "HalfFloats",
            "language",
            vec![Size::n(1), Size::n(4099), Size::n(1_000_003)],
            half_floats,
        ),
        c(
            "AtomicOps",
            "semantics",
            vec![Size::n(1), Size::n(1000), Size::n(100_003)],
            atomic_ops,
        ),
        c(
            "AtomicLoad",
            "semantics",
            vec![Size::n(1), Size::n(1000), Size::n(1_000_003)],
            atomic_loads,
        ),
        c(
            "MathFunctions",
            "semantics",
            vec![Size::n(4099)],
            math_functions,
        ),
        c(
            "ControlFlow",
            "semantics",
            vec![Size::n(1), Size::n(5003)],
            control_flow,
        ),
        c(
            "ElementwiseMasked",
            "semantics",
            [1, 3, 4, 5, 1023, 1_000_003]
                .iter()
                .map(|&n| Size::n(n))
                .collect(),
            elementwise_masked,
        ),
        c("UploadDownload", "memory", seed_sizes(), upload_download),
        c("CopyAndViews", "memory", seed_sizes(), copy_and_views),
        c("Fill", "memory", seed_sizes(), fill),
        c("AllocZero", "memory", vec![Size::n(0)], alloc_zero),
        c("AllocTooLarge", "memory", vec![Size::n(1)], alloc_too_large),
        c("PoolReuse", "memory", vec![Size::n(10_000)], pool_reuse),
        c(
            "CheckedMode",
            "reliability",
            vec![Size::n(1000), Size::n(1_000_003)],
            checked_mode,
        ),
    ]
}

pub(super) const POISON_U32: u32 = 0xDEAD_BEEF;

pub(super) fn poisoned_f32(device: &Device, n: usize) -> Result<Buffer<f32>, Failure> {
    Ok(device.alloc_filled(n, f32::NAN)?)
}

/// Distance in units in the last place between two finite f32s (NaN → infinity).
pub(super) fn ulps(a: f32, b: f32) -> f64 {
    if a.is_nan() || b.is_nan() {
        return f64::INFINITY;
    }
    let key = |x: f32| {
        let i = x.to_bits() as i32;
        if i < 0 {
            i64::from(i32::MIN) - i64::from(i)
        } else {
            i64::from(i)
        }
    };
    (key(a) - key(b)).unsigned_abs() as f64
}

pub(super) fn first_mismatch<T: PartialEq + std::fmt::Debug>(
    got: &[T],
    want: impl Fn(usize) -> T,
) -> Result<(), Failure> {
    for (i, g) in got.iter().enumerate() {
        let w = want(i);
        if *g != w {
            return fail(format!("element {i}: got {g:?}, expected {w:?}"));
        }
    }
    Ok(())
}

pub(super) fn groups_for(n: usize, group: usize) -> usize {
    n.div_ceil(group)
}

// ------------------------------------------------------------------ kernel cases
