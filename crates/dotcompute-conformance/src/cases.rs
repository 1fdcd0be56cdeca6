//! The cases themselves: the seed cases of `shared/seed-cases.md`, semantics cases and
//! memory cases, each a function from a [`Target`], a size and a seeded generator to an
//! [`Outcome`] or a [`Failure`]. The harness that runs them is in the crate root.

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

/// Checked launches (`Launch::checked`): a correct kernel gives every element right; a
/// store past a buffer, past a shared array or past a local array is
/// `Error::OutOfBounds` naming the kernel, the array, the index and the length, on every
/// backend (the CPU always checks); and the device keeps working after each.
fn checked_mode(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let a: Vec<f32> = (0..n).map(|_| rng.f32() * 100.0 - 50.0).collect();
    let da = d.upload(&a)?;
    let run_correct = |what: &str| -> Result<(), Failure> {
        let mut out = poisoned_f32(d, n)?;
        kernels::shifted_double::launch(d, Launch::threads(n).checked(true), &da, &mut out, 0)?;
        let got = out.to_vec()?;
        for i in 0..n {
            if got[i] != a[i] * 2.0 {
                return fail(format!(
                    "{what}: element {i}: got {}, expected {}",
                    got[i],
                    a[i] * 2.0
                ));
            }
        }
        Ok(())
    };
    run_correct("a checked launch of a correct kernel")?;
    let expect_oob = |result: dotcompute::Result<()>,
                      kernel: &str,
                      array: &str,
                      at: u64,
                      length: u64|
     -> Result<(), Failure> {
        match result {
            Err(Error::OutOfBounds {
                kernel: k,
                arg,
                index,
                len,
            }) if k == kernel && arg == array && index == at && len == length => Ok(()),
            Err(e) => fail(format!(
                "{kernel}: expected OutOfBounds {{ arg: {array}, index: {at}, len: {length} }}, got: {e}"
            )),
            Ok(()) => fail(format!(
                "{kernel}: a checked launch that accesses {array}[{at}] (length {length}) succeeded"
            )),
        }
    };
    let mut out = poisoned_f32(d, n)?;
    let shifted =
        kernels::shifted_double::launch(d, Launch::threads(n).checked(true), &da, &mut out, 1);
    expect_oob(shifted, "shifted_double", "out", n as u64, n as u64)?;
    run_correct("after a buffer overrun")?;

    let mut ids = d.alloc_filled(n, POISON_U32)?;
    let shared =
        kernels::shared_overrun::launch(d, Launch::threads(n).group(64).checked(true), &mut ids, 1);
    expect_oob(shared, "shared_overrun", "tile", 64, 64)?;
    run_correct("after a shared-array overrun")?;

    let local = kernels::local_overrun::launch(d, Launch::threads(n).checked(true), &mut ids, 4);
    expect_oob(local, "local_overrun", "acc", 4, 4)?;
    run_correct("after a local-array overrun")?;
    Ok(Outcome::default())
}

// ------------------------------------------------------------------ helpers

const POISON_U32: u32 = 0xDEAD_BEEF;

fn poisoned_f32(device: &Device, n: usize) -> Result<Buffer<f32>, Failure> {
    Ok(device.alloc_filled(n, f32::NAN)?)
}

/// Distance in units in the last place between two finite f32s (NaN → infinity).
fn ulps(a: f32, b: f32) -> f64 {
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

fn first_mismatch<T: PartialEq + std::fmt::Debug>(
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

fn groups_for(n: usize, group: usize) -> usize {
    n.div_ceil(group)
}

// ------------------------------------------------------------------ kernel cases

fn thread_ids(d: &Target, size: Size, _: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let mut out = d.alloc_filled(n, POISON_U32)?;
    kernels::thread_ids::launch(d, Launch::threads(n), &mut out)?;
    first_mismatch(&out.to_vec()?, |i| i as u32)?;
    Ok(Outcome::default())
}

fn vector_add(d: &Target, size: Size, _: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 2.5).collect();
    let b: Vec<f32> = (0..n).map(|i| i as f32 * 1.5).collect();
    let (da, db) = (d.upload(&a)?, d.upload(&b)?);
    let mut out = poisoned_f32(d, n)?;
    kernels::vector_add::launch(d, Launch::threads(n), &da, &db, &mut out)?;
    let got = out.to_vec()?;
    if n > 1 && got[1] != 4.0 {
        return fail(format!("out[1] = {}, expected 4.0", got[1]));
    }
    // f32 addition is correctly rounded on every backend: exact equality.
    first_mismatch(&got, |i| a[i] + b[i])?;
    Ok(Outcome::default())
}

fn vector_multiply(d: &Target, size: Size, _: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.1).sin()).collect();
    let da = d.upload(&a)?;
    let mut out = poisoned_f32(d, n)?;
    #[allow(clippy::approx_constant)] // seed-cases.md specifies 3.14, not π
    let scale = 3.14f32;
    kernels::vector_multiply::launch(d, Launch::threads(n), &da, scale, &mut out)?;
    let got = out.to_vec()?;
    let mut worst = 0.0f64;
    for (i, &g) in got.iter().enumerate() {
        let e = ulps(g, a[i] * scale);
        if e > 1.0 {
            return Err(Failure {
                message: format!("element {i}: got {g}, expected {} ({e} ulp)", a[i] * scale),
                max_error: e,
            });
        }
        worst = worst.max(e);
    }
    Ok(Outcome::within(worst))
}

/// Groups the reduction uses at most; bounds the f32 rounding of the final atomic adds.
const REDUCE_GROUPS: usize = 64;
const REDUCE_GROUP: usize = 256;

fn reduce_on(d: &Target, data: &[f32]) -> Result<f32, Failure> {
    let x = d.upload(data)?;
    let mut total = d.alloc_filled(1, 0.0f32)?;
    let groups = groups_for(data.len(), REDUCE_GROUP).min(REDUCE_GROUPS);
    let launch = Launch::threads(groups * REDUCE_GROUP)
        .group(REDUCE_GROUP as u32)
        .dynamic_shared(REDUCE_GROUP as u32);
    kernels::reduce_sum::launch(d, launch, &x, &mut total)?;
    Ok(total.to_vec()?[0])
}

fn reduction_sum(d: &Target, size: Size, _: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let ones = reduce_on(d, &vec![1.0f32; n])?;
    if ones != n as f32 {
        return fail(format!("sum of {n} ones = {ones}"));
    }
    let sevens: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
    let want: f64 = sevens.iter().map(|&v| v as f64).sum();
    let got = reduce_on(d, &sevens)? as f64;
    let rel = if want == 0.0 {
        got.abs()
    } else {
        ((got - want) / want).abs()
    };
    if rel.is_nan() || rel > 1e-6 {
        return Err(Failure {
            message: format!("sum(i % 7) = {got}, expected {want} (relative error {rel:e})"),
            max_error: rel,
        });
    }
    Ok(Outcome::within(rel))
}

fn matrix_multiply(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let [m, k, n] = size.dims;
    let a: Vec<f32> = (0..m * k).map(|_| rng.f32() * 2.0 - 1.0).collect();
    let b: Vec<f32> = (0..k * n).map(|_| rng.f32() * 2.0 - 1.0).collect();
    let (da, db) = (d.upload(&a)?, d.upload(&b)?);
    let mut dc = poisoned_f32(d, m * n)?;
    let tile = kernels::TILE;
    let launch = Launch::grid2d(n, m).group2d(tile, tile);
    kernels::matmul_tiled::launch(d, launch, &da, &db, &mut dc, m as u32, n as u32, k as u32)?;
    check_product(&a, &b, &dc.to_vec()?, [m, k, n])
}

/// `Device::matmul_generated` (the register-blocked kernel dotcompute generates, 128×128
/// per group) on shapes below, across and off its blocking.
fn generated_matmul(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let [m, k, n] = size.dims;
    let a: Vec<f32> = (0..m * k).map(|_| rng.f32() * 2.0 - 1.0).collect();
    let b: Vec<f32> = (0..k * n).map(|_| rng.f32() * 2.0 - 1.0).collect();
    let (da, db) = (d.upload(&a)?, d.upload(&b)?);
    let mut dc = poisoned_f32(d, m * n)?;
    d.matmul_generated(&da, &db, &mut dc, m, n, k)?;
    check_product(&a, &b, &dc.to_vec()?, [m, k, n])
}

/// `Device::matmul` (the vendor path where the backend has one: cuBLAS, MPS,
/// matrixmultiply; else the generated kernel) with C poisoned with NaN, so a library that
/// reads C although β = 0 fails (an open question about MPS, issue 32 item 4). Then, where
/// the device multiplies f16 at all, an f16 product of ones with k = 4096: f32 accumulation
/// gives 4096 in every element, f16 accumulation stops at 2048 (2048 + 1 rounds back to
/// 2048), so the test shows how the library accumulates.
fn vendor_matmul(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    use dotcompute::f16;
    let [m, k, n] = size.dims;
    let a: Vec<f32> = (0..m * k).map(|_| rng.f32() * 2.0 - 1.0).collect();
    let b: Vec<f32> = (0..k * n).map(|_| rng.f32() * 2.0 - 1.0).collect();
    let (da, db) = (d.upload(&a)?, d.upload(&b)?);
    let mut dc = poisoned_f32(d, m * n)?;
    d.matmul(&da, &db, &mut dc, m, n, k)?;
    let outcome = check_product(&a, &b, &dc.to_vec()?, [m, k, n])?;
    // f16: a few rows and columns are enough to see the accumulation.
    let (m, n, k) = (m.min(33), n.min(17), 4096);
    let ones = d.upload(&vec![f16::ONE; k * m.max(n)])?;
    let mut c = d.alloc_filled(m * n, f16::NAN)?;
    match d.matmul(&ones, &ones, &mut c, m, n, k) {
        Ok(_) => {}
        // f16 products need a vendor library (cuBLAS, MPS): elsewhere they are refused.
        Err(Error::Unsupported { .. }) => return Ok(outcome),
        Err(e) => return Err(e.into()),
    }
    let got = c.to_vec()?;
    if let Some((i, v)) = got.iter().enumerate().find(|(_, v)| v.to_f32() != 4096.0) {
        return fail(format!(
            "f16 product of ones with k = {k}: C[{}][{}] = {v}, expected 4096 (f32 \
             accumulation; 2048 would mean the library accumulates in f16, NaN that it \
             read C)",
            i / n,
            i % n
        ));
    }
    Ok(outcome)
}

/// Every element of `c = a · b` against an f64 reference, and the norm-wise error.
fn check_product(
    a: &[f32],
    b: &[f32],
    c: &[f32],
    [m, k, n]: [usize; 3],
) -> Result<Outcome, Failure> {
    let (mut diff2, mut ref2) = (0.0f64, 0.0f64);
    for i in 0..m {
        for j in 0..n {
            let (mut r, mut mag) = (0.0f64, 0.0f64);
            for p in 0..k {
                let t = a[i * k + p] as f64 * b[p * n + j] as f64;
                r += t;
                mag += t.abs();
            }
            let g = c[i * n + j] as f64;
            let err = (g - r).abs();
            // Per element: within the f32 dot-product bound (k · eps · Σ|a·b|), loosely.
            let bound = 2.0 * k as f64 * f32::EPSILON as f64 * mag + 1e-30;
            if err.is_nan() || err > bound {
                return Err(Failure {
                    message: format!(
                        "C[{i}][{j}] = {g}, reference {r} (error {err:e} > bound {bound:e})"
                    ),
                    max_error: err,
                });
            }
            diff2 += (g - r) * (g - r);
            ref2 += r * r;
        }
    }
    let rel = (diff2 / ref2.max(1e-300)).sqrt();
    if rel >= 1e-5 {
        return Err(Failure {
            message: format!("‖C − R‖ / ‖R‖ = {rel:e} ≥ 1e-5"),
            max_error: rel,
        });
    }
    Ok(Outcome::within(rel))
}

fn unified_memory(d: &Target, size: Size, _: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let data: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut buf = d.upload(&data)?;
    kernels::double_in_place::launch(d, Launch::threads(n), &mut buf)?;
    first_mismatch(&buf.to_vec()?, |i| 2.0 * data[i])?;
    Ok(Outcome::default())
}

// ------------------------------------------------------------------ semantics cases

fn grid_ids_3d(d: &Target, size: Size, _: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    // Two shapes, neither a multiple of its group in any dimension.
    let ((w, h, depth), (gx, gy, gz)) = if size.dims[0] == 1 {
        ((37, 19, 5), (8, 4, 2))
    } else {
        ((300, 7, 3), (64, 2, 2))
    };
    let total = w * h * depth;
    let mut out = d.alloc_filled(total * 2, POISON_U32)?;
    let launch = Launch::grid3d(w, h, depth).group3d(gx, gy, gz);
    kernels::grid_ids::launch(d, launch, &mut out, w as u32, h as u32)?;
    let got = out.to_vec()?;
    for z in 0..depth {
        for y in 0..h {
            for x in 0..w {
                let idx = (z * h + y) * w + x;
                let local = (x % gx as usize) + 100 * (y % gy as usize) + 10000 * (z % gz as usize);
                if got[idx * 2] != idx as u32 || got[idx * 2 + 1] != local as u32 {
                    return fail(format!(
                        "thread ({x},{y},{z}): wrote ({}, {}), expected ({idx}, {local})",
                        got[idx * 2],
                        got[idx * 2 + 1]
                    ));
                }
            }
        }
    }
    Ok(Outcome::default())
}

fn shared_atomics(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let values: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
    let mut want = [0u32; 64];
    for v in &values {
        want[(v % 64) as usize] += 1;
    }
    let dv = d.upload(&values)?;
    let mut hist = d.alloc_filled(64, 0u32)?;
    kernels::histogram64::launch(d, Launch::threads(n).group(128), &dv, &mut hist)?;
    first_mismatch(&hist.to_vec()?, |i| want[i])?;
    Ok(Outcome::default())
}

/// The IR's integer rules, written independently of the CPU backend's `ops`.
fn int_reference(x: i32, y: i32, f: f32) -> [i32; 8] {
    let div = if y == 0 {
        x
    } else if x == i32::MIN && y == -1 {
        i32::MIN
    } else {
        x / y
    };
    let rem = if y == 0 || (x == i32::MIN && y == -1) {
        0
    } else {
        x % y
    };
    let sh = (y as u32) & 31;
    let cast = if f.is_nan() {
        0
    } else if f >= 2147483648.0 {
        i32::MAX
    } else if f < -2147483648.0 {
        i32::MIN
    } else {
        f.trunc() as i64 as i32
    };
    [
        div,
        rem,
        ((x as i64 * y as i64) as u64 & 0xFFFF_FFFF) as u32 as i32,
        ((x as i64 + y as i64 - 7) as u64 & 0xFFFF_FFFF) as u32 as i32,
        ((x as u32) << sh) as i32,
        x >> sh,
        cast,
        ((x as u32) >> 3) as i32,
    ]
}

fn integer_semantics(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let specials = [0, 1, -1, i32::MIN, i32::MAX, 31, 32, 33, -33];
    let pick = |rng: &mut fastrand::Rng| {
        if rng.bool() {
            specials[rng.usize(..specials.len())]
        } else {
            rng.i32(..)
        }
    };
    let a: Vec<i32> = (0..n).map(|_| pick(rng)).collect();
    let b: Vec<i32> = (0..n).map(|_| pick(rng)).collect();
    let fspecial = [
        f32::NAN,
        f32::INFINITY,
        -f32::INFINITY,
        3e9,
        -3e9,
        -0.5,
        2.9,
        -2.9,
    ];
    let fl: Vec<f32> = (0..n)
        .map(|_| {
            if rng.bool() {
                fspecial[rng.usize(..fspecial.len())]
            } else {
                (rng.f32() - 0.5) * 1e10
            }
        })
        .collect();
    let (da, db, df) = (d.upload(&a)?, d.upload(&b)?, d.upload(&fl)?);
    let mut out = d.alloc_filled(n * 8, POISON_U32 as i32)?;
    kernels::int_semantics::launch(d, Launch::threads(n), &da, &db, &df, &mut out)?;
    let got = out.to_vec()?;
    for i in 0..n {
        let want = int_reference(a[i], b[i], fl[i]);
        if got[i * 8..i * 8 + 8] != want {
            return fail(format!(
                "inputs ({}, {}, {}): got {:?}, expected {want:?} (div, rem, mul, add-7, shl, shr, f32 as i32, u32 shr)",
                a[i],
                b[i],
                fl[i],
                &got[i * 8..i * 8 + 8]
            ));
        }
    }
    Ok(Outcome::default())
}

fn integer_abs(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    // Mostly negative values: the identity is right only for non-negative ones and MIN.
    let specials = [
        i32::MIN,
        i32::MIN + 1,
        -1000,
        -1001,
        -7,
        -1,
        0,
        1,
        999,
        1001,
        i32::MAX,
    ];
    let pick = |rng: &mut fastrand::Rng| {
        if rng.u8(..4) == 0 {
            specials[rng.usize(..specials.len())]
        } else {
            rng.i32(..)
        }
    };
    let a: Vec<i32> = (0..n).map(|_| pick(rng)).collect();
    let b: Vec<i32> = (0..n).map(|_| pick(rng)).collect();
    let (da, db) = (d.upload(&a)?, d.upload(&b)?);
    let mut out = d.alloc_filled(n * 4, POISON_U32 as i32)?;
    kernels::int_abs_min_max::launch(d, Launch::threads(n), &da, &db, &mut out)?;
    let got = out.to_vec()?;
    for i in 0..n {
        let (x, y) = (a[i], b[i]);
        let want = [x.wrapping_abs(), x.min(y), x.max(y), x.clamp(-1000, 1000)];
        if got[i * 4..i * 4 + 4] != want {
            return fail(format!(
                "inputs ({x}, {y}): got {:?}, expected {want:?} (abs, min, max, clamp(-1000, 1000))",
                &got[i * 4..i * 4 + 4]
            ));
        }
    }
    if d.info().caps.i64 {
        let a: Vec<i64> = (0..n)
            .map(|k| match k % 5 {
                0 => i64::MIN,
                1 => -(rng.i64(1..)),
                _ => rng.i64(..),
            })
            .collect();
        let da = d.upload(&a)?;
        let mut out = d.alloc_filled(n, POISON_U32 as i64)?;
        kernels::int64_abs::launch(d, Launch::threads(n), &da, &mut out)?;
        let got = out.to_vec()?;
        if let Some(i) = (0..n).find(|&i| got[i] != a[i].wrapping_abs()) {
            return fail(format!(
                "i64 abs({}) gave {}, expected {}",
                a[i],
                got[i],
                a[i].wrapping_abs()
            ));
        }
    }
    Ok(Outcome::default())
}

/// What `nan_tests` computes, in Rust (IEEE comparisons).
fn nan_flags<T: PartialOrd + Copy>(a: T, b: T, is_nan: bool, is_finite: bool) -> u32 {
    // The kernel's own spelling, NaN-sensitive on purpose.
    #[allow(clippy::eq_op, clippy::neg_cmp_op_on_partial_ord)]
    let tests = [
        a != a,
        a == a,
        is_nan,
        is_finite,
        a < b,
        a != b,
        a == b,
        !(a >= b),
    ];
    tests
        .iter()
        .enumerate()
        .map(|(k, &t)| (t as u32) << k)
        .sum()
}

fn float_nan(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let specials = [
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7f80_0001), // a signalling NaN's bits
        f32::from_bits(0xffc1_2345), // negative, with a payload
        f32::INFINITY,
        -f32::INFINITY,
        0.0,
        -0.0,
        1.0,
        f32::MAX,
        f32::MIN_POSITIVE,
        // No subnormals: NVIDIA's Vulkan driver flushes them to zero in comparisons
        // (0.0 == 5.9e-39 there), which dotcompute_ir allows on wgpu.
    ];
    let pick = |rng: &mut fastrand::Rng| {
        if rng.bool() {
            specials[rng.usize(..specials.len())]
        } else {
            (rng.f32() - 0.5) * 100.0
        }
    };
    let x: Vec<f32> = (0..n).map(|_| pick(rng)).collect();
    let y: Vec<f32> = (0..n)
        .map(|i| if i % 7 == 0 { x[i] } else { pick(rng) })
        .collect();
    nan_flags_on(d, &x, &y, f32::is_nan, f32::is_finite)?;
    if d.info().caps.f64 {
        let x: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let y: Vec<f64> = y.iter().map(|&v| v as f64).collect();
        nan_flags_on(d, &x, &y, f64::is_nan, f64::is_finite)?;
    }
    Ok(Outcome::default())
}

/// Runs `nan_tests` on `x` and `y` and checks every element's flags.
fn nan_flags_on<T: dotcompute::Float + std::fmt::Debug>(
    d: &Target,
    x: &[T],
    y: &[T],
    is_nan: fn(T) -> bool,
    is_finite: fn(T) -> bool,
) -> Result<(), Failure> {
    let (dx, dy) = (d.upload(x)?, d.upload(y)?);
    let mut out = d.alloc_filled(x.len(), POISON_U32)?;
    kernels::nan_tests::launch(d, Launch::threads(x.len()), &dx, &dy, &mut out)?;
    let got = out.to_vec()?;
    for i in 0..x.len() {
        let want = nan_flags(x[i], y[i], is_nan(x[i]), is_finite(x[i]));
        if got[i] != want {
            return fail(format!(
                "{} inputs ({:?} = bytes {:02x?}, {:?}): flags {:#010b}, expected {want:#010b} (bits: x!=x, x==x, is_nan, is_finite, x<y, x!=y, x==y, !(x>=y))",
                <T as Element>::TYPE,
                x[i],
                bytemuck::bytes_of(&x[i]),
                y[i],
                got[i]
            ));
        }
    }
    Ok(())
}

fn atomic_ops(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let v: Vec<u32> = (0..n).map(|_| rng.u32(0..1000)).collect();
    let uinit = [
        7u32,
        1 << 31,
        u32::MAX,
        0,
        u32::MAX,
        0,
        0x5A5A_5A5A,
        u32::MAX,
        0,
    ];
    let iinit = [i32::MAX, i32::MIN, 12345, 77, -77];
    let dv = d.upload(&v)?;
    let mut uc = d.upload(&uinit)?;
    let mut ic = d.upload(&iinit)?;
    let mut old = d.alloc_filled(n * 9, POISON_U32)?;
    kernels::atomic_ops::launch(
        d,
        Launch::threads(n).group(64),
        &dv,
        &mut uc,
        &mut ic,
        &mut old,
    )?;
    let (u, i, old) = (uc.to_vec()?, ic.to_vec()?, old.to_vec()?);
    let signed: Vec<i32> = v.iter().map(|&x| x as i32 - 500).collect();
    let mut bits = 0u32;
    for x in &v {
        bits |= 1 << (x % 32);
    }
    let want_u = [
        v.iter().fold(uinit[0], |a, &x| a.wrapping_add(x)),
        v.iter().fold(uinit[1], |a, &x| a.wrapping_sub(x)),
        *v.iter().min().unwrap(),
        *v.iter().max().unwrap(),
        !bits,
        bits,
        v.iter().fold(uinit[6], |a, &x| a ^ x),
    ];
    if u[..7] != want_u {
        return fail(format!("u32 counters {:?}, expected {want_u:?}", &u[..7]));
    }
    if u[7] >= n as u32 || u[8] != 1 {
        return fail(format!(
            "compare-exchange: winner {} and {} winners, expected one winner < {n}",
            u[7], u[8]
        ));
    }
    let (imin, imax) = (*signed.iter().min().unwrap(), *signed.iter().max().unwrap());
    let wide: Vec<i32> = v
        .iter()
        .map(|&x| if x % 7 == 0 { i32::MIN } else { x as i32 - 500 })
        .collect();
    let (iadd, isub) = (
        wide.iter().fold(iinit[3], |a, &w| a.wrapping_add(w)),
        wide.iter().fold(iinit[4], |a, &w| a.wrapping_sub(w)),
    );
    if i[0] != imin || i[1] != imax || !signed.contains(&i[2]) || i[3] != iadd || i[4] != isub {
        return fail(format!(
            "i32 counters {i:?}, expected [{imin}, {imax}, one of the values, {iadd}, {isub}]"
        ));
    }
    // Old values: every thread wrote all nine (the add's old value is at most the total,
    // far below the poison), the smallest add-old is the initial value, and min/max olds
    // never lie beyond the final extremes.
    let first_add = (0..n).map(|t| old[t * 9]).min().unwrap_or(uinit[0]);
    if first_add != uinit[0] {
        return fail(format!(
            "the first atomic_add saw {first_add}, expected the initial {}",
            uinit[0]
        ));
    }
    for t in 0..n {
        let o = &old[t * 9..t * 9 + 9];
        if o[0] == POISON_U32 {
            return fail(format!("thread {t} wrote no old values"));
        }
        if o[2] < u[2] || o[3] > u[3] || (o[7] as i32) < imin || (o[8] as i32) > imax {
            return fail(format!(
                "thread {t}: old values {o:?} are outside what min/max allow"
            ));
        }
    }
    Ok(Outcome::default())
}

fn math_functions(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let x: Vec<f32> = (0..n).map(|_| (rng.f32() - 0.5) * 20.0).collect();
    let y: Vec<f32> = (0..n).map(|_| (rng.f32() - 0.5) * 8.0).collect();
    let (dx, dy) = (d.upload(&x)?, d.upload(&y)?);
    let mut out = poisoned_f32(d, n * 14)?;
    kernels::math_f32::launch(d, Launch::threads(n), &dx, &dy, &mut out)?;
    let got = out.to_vec()?;
    // The CPU and CUDA document a few ulp for these functions; Vulkan only looser bounds.
    let cpu = matches!(d.backend_kind(), BackendKind::Cpu | BackendKind::Cuda);
    let names = [
        "sqrt", "sin", "cos", "tan", "exp", "ln", "powf", "abs", "min", "max", "mul_add", "floor",
        "ceil", "clamp",
    ];
    compare_table(
        &got,
        &names,
        &x,
        &y,
        |i| {
            let (a, b) = (x[i] as f64, y[i] as f64);
            vec![
                a.abs().sqrt(),
                (a * 0.3f32 as f64).sin(),
                (a * 0.3f32 as f64).cos(),
                (a * 0.1f32 as f64).tan(),
                (a * 0.5).exp(),
                (a.abs() + 0.5).ln(),
                (a.abs() + 0.1).powf(b * 0.5),
                a.abs(),
                a.min(b),
                a.max(b),
                a.mul_add(b, 0.5),
                a.floor(),
                b.ceil(),
                a.clamp(-1.0, 1.0),
            ]
        },
        |f, i, w| {
            // Tolerances follow each backend's documented precision (dotcompute_ir docs):
            // exact for abs/min/max/floor/ceil/clamp; 3 ulp for sqrt; the unfused bound for
            // mul_add; for the transcendentals 4 ulp on the CPU and Vulkan's bounds on GPUs
            // (2^-11 absolute for sin/cos on [-π, π], relative bounds for the others).
            let (a, b) = (x[i] as f64, y[i] as f64);
            let ulp = f32::EPSILON as f64;
            match f {
                7 | 8 | 9 | 11 | 12 | 13 => 0.0,
                0 => 3.0 * ulp * w.abs(),
                // a·b rounded, then the sum rounded: half an ulp of each, doubled for slack.
                10 => ulp * ((a * b).abs() + 0.5 + w.abs()),
                _ if cpu => 4.0 * ulp * w.abs() + 2e-6,
                _ => 1e-4 * w.abs() + 5e-4,
            }
        },
    )
}

/// Checks a table of `f32` outputs, `names.len()` per input: output `f` of input `i` against
/// `want(i)[f]` within `tol(f, i, want)`. Returns the largest error.
fn compare_table(
    got: &[f32],
    names: &[&str],
    x: &[f32],
    y: &[f32],
    want: impl Fn(usize) -> Vec<f64>,
    tol: impl Fn(usize, usize, f64) -> f64,
) -> Result<Outcome, Failure> {
    let width = names.len();
    let mut worst = 0.0f64;
    for i in 0..x.len() {
        for (f, w) in want(i).into_iter().enumerate() {
            let g = got[i * width + f] as f64;
            let tol = tol(f, i, w);
            let err = (g - w).abs();
            if err.is_nan() || err > tol + 1e-30 {
                return Err(Failure {
                    message: format!(
                        "{}({}, {}) = {g}, expected {w} (error {err:e} > {tol:e})",
                        names[f], x[i], y[i]
                    ),
                    max_error: err,
                });
            }
            worst = worst.max(err);
        }
    }
    Ok(Outcome::within(worst))
}

fn math_more(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let x: Vec<f32> = (0..n).map(|_| (rng.f32() - 0.5) * 20.0).collect();
    let y: Vec<f32> = (0..n).map(|_| (rng.f32() - 0.5) * 8.0).collect();
    let (dx, dy) = (d.upload(&x)?, d.upload(&y)?);
    let mut out = poisoned_f32(d, n * 10)?;
    kernels::math_more_f32::launch(d, Launch::threads(n), &dx, &dy, &mut out)?;
    let got = out.to_vec()?;
    let cpu = matches!(d.backend_kind(), BackendKind::Cpu | BackendKind::Cuda);
    let names = [
        "exp2",
        "log2",
        "tanh",
        "trunc",
        "round",
        "round(half)",
        "recip",
        "atan2",
        "rsqrt",
        "powi",
    ];
    compare_table(
        &got,
        &names,
        &x,
        &y,
        |i| {
            // Exact results are computed in f32 as the kernel does; the others in f64.
            let (af, bf) = (x[i], y[i]);
            let (a, b) = (af as f64, bf as f64);
            let half = (af * 2.0).floor() * 0.5;
            vec![
                (a * 0.5).exp2(),
                (a.abs() + 0.5).log2(),
                ((af * 0.2) as f64).tanh(),
                af.trunc() as f64,
                af.round() as f64,
                half.round() as f64,
                1.0 / ((bf + 5.0) as f64),
                a.atan2(b),
                1.0 / (af.abs() + 0.5).sqrt() as f64,
                // Repeated squaring in f32, as the kernel language defines powi.
                powi_reference(bf, (i % 16) as i32 - 6) as f64,
            ]
        },
        |f, i, w| {
            // trunc and round are exact everywhere; recip is a division (2.5 ulp on
            // Vulkan); the transcendentals follow the MathFunctions case's bounds.
            let ulp = f32::EPSILON as f64;
            match f {
                // powi is the same sequence of f32 multiplications everywhere, then for
                // a negative exponent a division (2.5 ulp on Vulkan).
                9 if i % 16 < 6 => 3.0 * ulp * w.abs(),
                3..=5 | 9 => 0.0,
                6 | 8 => 3.0 * ulp * w.abs(),
                _ if cpu => 4.0 * ulp * w.abs() + 2e-6,
                _ => 1e-4 * w.abs() + 5e-4,
            }
        },
    )
}

/// `x^n` by repeated squaring in f32: the kernel language's definition of `powi`, written
/// out here so that the reference does not depend on the code under test.
fn powi_reference(x: f32, n: i32) -> f32 {
    let (mut result, mut base, mut k) = (1.0f32, x, n.unsigned_abs());
    while k > 0 {
        if k & 1 == 1 {
            result *= base;
        }
        base *= base;
        k >>= 1;
    }
    if n < 0 {
        1.0 / result
    } else {
        result
    }
}

fn bit_ops(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let specials = [0u32, 1, 2, 0x8000_0000, u32::MAX, 0x0001_0000, 0xF0F0_F0F0];
    let pick = |rng: &mut fastrand::Rng| {
        if rng.u8(..4) == 0 {
            specials[rng.usize(..specials.len())]
        } else {
            // Varied widths, so leading/trailing zero counts vary.
            rng.u32(..) >> rng.u32(0..32)
        }
    };
    let u: Vec<u32> = (0..n).map(|_| pick(rng)).collect();
    let s: Vec<i32> = (0..n).map(|_| pick(rng) as i32).collect();
    let (du, ds) = (d.upload(&u)?, d.upload(&s)?);
    let mut out = d.alloc_filled(n * 7, POISON_U32)?;
    let mut rev = d.alloc_filled(n, POISON_U32 as i32)?;
    kernels::bits32::launch(d, Launch::threads(n), &du, &ds, &mut out, &mut rev)?;
    let (got, got_rev) = (out.to_vec()?, rev.to_vec()?);
    for i in 0..n {
        let (x, y) = (u[i], s[i]);
        let want = [
            x.count_ones(),
            x.leading_zeros(),
            x.trailing_zeros(),
            x.reverse_bits(),
            y.count_ones(),
            y.leading_zeros(),
            y.trailing_zeros(),
        ];
        if got[i * 7..i * 7 + 7] != want || got_rev[i] != y.reverse_bits() {
            return fail(format!(
                "inputs ({x:#x}, {y:#x}): got {:?} and {:#x}, expected {want:?} and {:#x} (u32 count_ones, leading_zeros, trailing_zeros, reverse_bits; the same on i32)",
                &got[i * 7..i * 7 + 7],
                got_rev[i],
                y.reverse_bits()
            ));
        }
    }
    if d.info().caps.i64 {
        let v: Vec<u64> = (0..n)
            .map(|k| match k % 6 {
                0 => 0,
                1 => u64::MAX,
                2 => 1 << 63,
                _ => rng.u64(..) >> rng.u32(0..64),
            })
            .collect();
        let dv = d.upload(&v)?;
        let mut counts = d.alloc_filled(n * 3, POISON_U32)?;
        let mut rev = d.alloc_filled(n, POISON_U32 as u64)?;
        kernels::bits64::launch(d, Launch::threads(n), &dv, &mut counts, &mut rev)?;
        let (got, got_rev) = (counts.to_vec()?, rev.to_vec()?);
        for i in 0..n {
            let x = v[i];
            let want = [x.count_ones(), x.leading_zeros(), x.trailing_zeros()];
            if got[i * 3..i * 3 + 3] != want || got_rev[i] != x.reverse_bits() {
                return fail(format!(
                    "u64 input {x:#x}: got {:?} and {:#x}, expected {want:?} and {:#x}",
                    &got[i * 3..i * 3 + 3],
                    got_rev[i],
                    x.reverse_bits()
                ));
            }
        }
    }
    Ok(Outcome::default())
}

/// Bit patterns for `bitcast`: zeros of both signs, subnormals, infinities, quiet and
/// signalling NaNs with payloads of both signs, extremes, and random bits.
fn bit_patterns32(n: usize, rng: &mut fastrand::Rng) -> Vec<u32> {
    let specials = [
        0u32,
        0x8000_0000,
        1,
        0x8000_0001,
        0x007f_ffff,
        0x7f80_0000,
        0xff80_0000,
        0x7fc0_0000,
        0xffc0_0001,
        0x7f80_0001,
        0x7fbf_ffff,
        0x7f7f_ffff,
        u32::MAX,
    ];
    (0..n)
        .map(|k| specials.get(k).copied().unwrap_or_else(|| rng.u32(..)))
        .collect()
}

fn bitcast(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let u = bit_patterns32(n, rng);
    let f: Vec<f32> = bit_patterns32(n, rng)
        .into_iter()
        .map(f32::from_bits)
        .collect();
    let (df, du) = (d.upload(&f)?, d.upload(&u)?);
    let mut bits = d.alloc_filled(n * 4, POISON_U32)?;
    let mut floats = d.alloc_filled(n, f32::from_bits(POISON_U32))?;
    let mut ints = d.alloc_filled(n, POISON_U32 as i32)?;
    kernels::bitcast32::launch(
        d,
        Launch::threads(n),
        &df,
        &du,
        &mut bits,
        &mut floats,
        &mut ints,
    )?;
    let (got, got_f, got_i) = (bits.to_vec()?, floats.to_vec()?, ints.to_vec()?);
    for i in 0..n {
        let (x, y) = (f[i].to_bits(), u[i]);
        let want = [x, y, y, x ^ 0x7f80_0000];
        if got[i * 4..i * 4 + 4] != want || got_f[i].to_bits() != y || got_i[i] != x as i32 {
            return fail(format!(
                "f = {x:#010x}, u = {y:#010x}: got {:x?}, f32 {:#010x}, i32 {:#010x}; expected {want:x?}, {y:#010x}, {x:#010x} (f's bits, u through f32, u through i32/f32/i32, a generic helper ^ a literal's bits; u as f32; f as i32)",
                &got[i * 4..i * 4 + 4],
                got_f[i].to_bits(),
                got_i[i]
            ));
        }
    }
    if d.info().caps.f64 && d.info().caps.i64 {
        let u: Vec<u64> = (0..n)
            .map(|k| match k % 8 {
                0 => 0x8000_0000_0000_0000,
                1 => 0x7ff8_0000_0000_0001,
                2 => 0xfff0_0000_0000_0000,
                3 => 1,
                _ => rng.u64(..),
            })
            .collect();
        let f: Vec<f64> = u.iter().rev().map(|&b| f64::from_bits(b)).collect();
        let (df, du) = (d.upload(&f)?, d.upload(&u)?);
        let mut bits = d.alloc_filled(n * 2, POISON_U32 as u64)?;
        let mut floats = d.alloc_filled(n, f64::from_bits(POISON_U32 as u64))?;
        let mut ints = d.alloc_filled(n, POISON_U32 as i64)?;
        kernels::bitcast64::launch(
            d,
            Launch::threads(n),
            &df,
            &du,
            &mut bits,
            &mut floats,
            &mut ints,
        )?;
        let (got, got_f, got_i) = (bits.to_vec()?, floats.to_vec()?, ints.to_vec()?);
        for i in 0..n {
            let (x, y) = (f[i].to_bits(), u[i]);
            if got[i * 2..i * 2 + 2] != [x, y] || got_f[i].to_bits() != y || got_i[i] != x as i64 {
                return fail(format!(
                    "f64 bits {x:#018x}, u64 {y:#018x}: got {:x?}, {:#018x}, {:#018x}",
                    &got[i * 2..i * 2 + 2],
                    got_f[i].to_bits(),
                    got_i[i]
                ));
            }
        }
    }
    Ok(Outcome::default())
}

fn wrap_saturate(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let specials = [i32::MIN, i32::MIN + 1, -1, 0, 1, i32::MAX - 1, i32::MAX];
    let pick = |rng: &mut fastrand::Rng| {
        if rng.bool() {
            specials[rng.usize(..specials.len())]
        } else {
            rng.i32(..)
        }
    };
    let a: Vec<i32> = (0..n).map(|_| pick(rng)).collect();
    let b: Vec<i32> = (0..n).map(|_| pick(rng)).collect();
    let (da, db) = (d.upload(&a)?, d.upload(&b)?);
    let mut out = d.alloc_filled(n * 5, POISON_U32 as i32)?;
    let mut uout = d.alloc_filled(n * 2, POISON_U32)?;
    kernels::wrap_sat32::launch(d, Launch::threads(n), &da, &db, &mut out, &mut uout)?;
    let (got, ugot) = (out.to_vec()?, uout.to_vec()?);
    for i in 0..n {
        let (x, y) = (a[i], b[i]);
        let (ux, uy) = (x as u32, y as u32);
        let want = [
            x.wrapping_add(y),
            x.wrapping_sub(y),
            x.wrapping_mul(y),
            x.saturating_add(y),
            x.saturating_sub(y),
        ];
        let uwant = [ux.saturating_add(uy), ux.saturating_sub(uy)];
        if got[i * 5..i * 5 + 5] != want || ugot[i * 2..i * 2 + 2] != uwant {
            return fail(format!(
                "inputs ({x}, {y}): got {:?} / {:?}, expected {want:?} / {uwant:?} (i32 wrapping add, sub, mul, saturating add, sub / u32 saturating add, sub)",
                &got[i * 5..i * 5 + 5],
                &ugot[i * 2..i * 2 + 2]
            ));
        }
    }
    if d.info().caps.i64 {
        let s64 = [i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX - 1, i64::MAX];
        let pick = |rng: &mut fastrand::Rng| {
            if rng.bool() {
                s64[rng.usize(..s64.len())]
            } else {
                rng.i64(..)
            }
        };
        let a: Vec<i64> = (0..n).map(|_| pick(rng)).collect();
        let b: Vec<i64> = (0..n).map(|_| pick(rng)).collect();
        let (da, db) = (d.upload(&a)?, d.upload(&b)?);
        let mut out = d.alloc_filled(n * 2, POISON_U32 as i64)?;
        let mut uout = d.alloc_filled(n * 2, POISON_U32 as u64)?;
        kernels::sat64::launch(d, Launch::threads(n), &da, &db, &mut out, &mut uout)?;
        let (got, ugot) = (out.to_vec()?, uout.to_vec()?);
        for i in 0..n {
            let (x, y) = (a[i], b[i]);
            let want = [x.saturating_add(y), x.saturating_sub(y)];
            let uwant = [
                (x as u64).saturating_add(y as u64),
                (x as u64).saturating_sub(y as u64),
            ];
            if got[i * 2..i * 2 + 2] != want || ugot[i * 2..i * 2 + 2] != uwant {
                return fail(format!(
                    "64-bit inputs ({x}, {y}): got {:?} / {:?}, expected {want:?} / {uwant:?}",
                    &got[i * 2..i * 2 + 2],
                    &ugot[i * 2..i * 2 + 2]
                ));
            }
        }
    }
    Ok(Outcome::default())
}

fn match_int(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let v: Vec<i32> = (0..n)
        .map(|k| match k % 4 {
            0 => rng.i32(-8..12),
            1 => rng.i32(990..1010),
            _ => rng.i32(-100_000..100_000),
        })
        .collect();
    let dv = d.upload(&v)?;
    let mut out = d.alloc_filled(n * 2, POISON_U32 as i32)?;
    kernels::match_int::launch(d, Launch::threads(n), &dv, &mut out)?;
    let got = out.to_vec()?;
    for i in 0..n {
        let x = v[i];
        let a = match x {
            0 => 100,
            1 | 2 => 200,
            3..=9 => 300 + x,
            -5..0 => -1,
            _ if x > 1000 => 7,
            _ => x.wrapping_mul(2),
        };
        let b = match x.wrapping_rem(3) {
            0 => 10,
            1 => 11,
            _ => x,
        };
        if got[i * 2..i * 2 + 2] != [a, b] {
            return fail(format!(
                "input {x}: got {:?}, expected {:?} (match as a value, match as a statement)",
                &got[i * 2..i * 2 + 2],
                [a, b]
            ));
        }
    }
    Ok(Outcome::default())
}

fn kernel_functions(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    // Small integers and halves: every sum and product below is exact in f32.
    let a: Vec<f32> = (0..n).map(|_| rng.i32(-64..64) as f32 * 0.5).collect();
    let ints: Vec<u32> = (0..n).map(|_| rng.u32(0..100_000)).collect();
    let (da, di) = (d.upload(&a)?, d.upload(&ints)?);
    let mut out = poisoned_f32(d, 2 * n)?;
    let mut counts = d.alloc_filled(2 * n, POISON_U32)?;
    kernels::helper_calls::launch(d, Launch::threads(n), &da, &di, &mut out, &mut counts)?;
    let (got, got_counts) = (out.to_vec()?, counts.to_vec()?);
    let collatz = |mut x: u32| {
        let mut steps = 0;
        while x > 1 && steps < 100 {
            x = if x % 2 == 0 {
                x / 2
            } else {
                x.wrapping_mul(3).wrapping_add(1)
            };
            steps += 1;
        }
        steps
    };
    for i in 0..n {
        let l = a[i] + (1.0 - a[i]) * 0.25;
        let w: f32 = a[i..(i + 3).min(n)].iter().sum();
        let v = l + w;
        let want = [v, v * v];
        // `l` is not exact (a multiply by 0.25 of a half is, the sum may round): allow
        // the one rounding of a possibly contracted multiply-add.
        let close = |g: f32, w: f32| (g - w).abs() <= 2.0 * f32::EPSILON * w.abs().max(1.0);
        if !close(got[2 * i], want[0]) || !close(got[2 * i + 1], want[1]) {
            return fail(format!(
                "element {i} (a = {}): got {:?}, expected {want:?}",
                a[i],
                &got[2 * i..2 * i + 2]
            ));
        }
        let want_counts = [collatz(ints[i]), (ints[i] % 1000) * (ints[i] % 1000)];
        if got_counts[2 * i..2 * i + 2] != want_counts {
            return fail(format!(
                "element {i} (n = {}): got {:?}, expected {want_counts:?} (collatz steps, square)",
                ints[i],
                &got_counts[2 * i..2 * i + 2]
            ));
        }
    }
    // A kernel function with barriers over a shared array.
    const GROUP: usize = 64;
    let x: Vec<f32> = (0..n).map(|_| rng.i32(-100..100) as f32).collect();
    let dx = d.upload(&x)?;
    let mut sums = poisoned_f32(d, n)?;
    kernels::helper_group_sums::launch(d, Launch::threads(n).group(GROUP as u32), &dx, &mut sums)?;
    let got = sums.to_vec()?;
    first_mismatch(&got, |i| {
        let g = i / GROUP * GROUP;
        let total: f32 = x[g..(g + GROUP).min(n)].iter().sum();
        total - x[i]
    })
    .map_err(|f| Failure {
        message: format!("group sums: {}", f.message),
        ..f
    })?;
    Ok(Outcome::default())
}

/// Host twin of `kernels::window_generic` for values that stay exact.
trait Exact: Copy + Element {
    fn to_f64(self) -> f64;
    fn from_i32(v: i32) -> Self;
}
macro_rules! exact {
    ($($t:ty),*) => {$(
        impl Exact for $t {
            fn to_f64(self) -> f64 { self as f64 }
            fn from_i32(v: i32) -> Self { v as $t }
        }
    )*};
}
exact!(i32, u32, i64, u64, f32, f64);

fn window_on<T: Exact + dotcompute::Num, const W: u32>(
    d: &Target,
    n: usize,
    rng: &mut fastrand::Rng,
    lo: i32,
) -> Result<(), Failure> {
    let x: Vec<T> = (0..n).map(|_| T::from_i32(rng.i32(lo..1000))).collect();
    let scale = T::from_i32(rng.i32(1..10));
    let dx = d.upload(&x)?;
    let mut out = d.alloc_filled(n, T::from_i32(77))?;
    kernels::window_generic::launch::<T, W>(d, Launch::threads(n), &dx, scale, &mut out)?;
    let got = out.to_vec()?;
    for i in 0..n {
        let sum: f64 = x[i..(i + W as usize).min(n)]
            .iter()
            .map(|v| v.to_f64())
            .sum();
        let want = sum * scale.to_f64() + 1.0 + (i % 7) as f64 + (i % 2) as f64;
        if got[i].to_f64() != want {
            return fail(format!(
                "window_generic::<{}, {W}> element {i}: got {:?}, expected {want}",
                <T as Element>::TYPE,
                got[i]
            ));
        }
    }
    Ok(())
}

fn generic_kernels(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    window_on::<i32, 3>(d, n, rng, -1000)?;
    window_on::<u32, 1>(d, n, rng, 0)?;
    window_on::<f32, 4>(d, n, rng, -1000)?;
    window_on::<u32, 5>(d, n, rng, 0)?;
    if d.info().caps.f64 {
        window_on::<f64, 2>(d, n, rng, -1000)?;
    }
    if d.info().caps.i64 {
        window_on::<i64, 3>(d, n, rng, -1000)?;
        window_on::<u64, 2>(d, n, rng, 0)?;
    }
    // Each instantiation is a kernel of its own, named after its parameters.
    let names = [
        kernels::window_generic::kernel::<i32, 3>().name(),
        kernels::window_generic::kernel::<u32, 5>().name(),
    ];
    if names != ["window_generic_i32_3", "window_generic_u32_5"] {
        return fail(format!("instance names {names:?}"));
    }
    Ok(Outcome::default())
}

fn local_arrays(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    // Small integers: every sum below is exact in f32.
    let x: Vec<f32> = (0..n).map(|_| rng.i32(-50..50) as f32).collect();
    let keys: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
    let (dx, dk) = (d.upload(&x)?, d.upload(&keys)?);
    let mut sums = poisoned_f32(d, 4 * n)?;
    let mut hist = d.alloc_filled(n, POISON_U32)?;
    kernels::local_arrays::launch(d, Launch::threads(n), &dx, &dk, &mut sums, &mut hist)?;
    let (got_sums, got_hist) = (sums.to_vec()?, hist.to_vec()?);
    for i in 0..n {
        let window: f32 = (0..8).map(|j| x[(i + j) % n]).sum();
        let want: Vec<f32> = (0..4)
            .map(|k| window * (k + 1) as f32 * 0.5 + 1.5)
            .collect();
        if got_sums[4 * i..4 * i + 4] != want[..] {
            return fail(format!(
                "thread {i}: accumulators {:?}, expected {want:?}",
                &got_sums[4 * i..4 * i + 4]
            ));
        }
        let mut total = 0u32;
        for r in 0..2u32 {
            let mut h = [r; 16];
            for j in 0..8 {
                h[(keys[(i + j) % n] % 16) as usize] += 1;
            }
            total += h[(keys[i] % 16) as usize] + h[((keys[i] + 1) % 16) as usize] * 100;
        }
        if got_hist[i] != total {
            return fail(format!(
                "thread {i}: histogram total {}, expected {total}",
                got_hist[i]
            ));
        }
    }
    Ok(Outcome::default())
}

fn const_sized_local_arrays(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    // Small integers: every sum is exact in f32 too.
    let xi: Vec<i32> = (0..n).map(|_| rng.i32(-1000..1000)).collect();
    let want = |per: usize, i: usize, x: &dyn Fn(usize) -> i64| -> i64 {
        let total: i64 = (0..per)
            .map(|k| (0..3).map(|r| x((i + k + r * per) % n)).sum::<i64>() * (k as i64 + 1))
            .sum();
        total + (1 + 2 * per * (i % 7)) as i64 + (2 * per + 1) as i64
    };
    // f32 with PER = 3, i32 with PER = 5.
    let xf: Vec<f32> = xi.iter().map(|&v| v as f32).collect();
    let dxf = d.upload(&xf)?;
    let mut outf = poisoned_f32(d, n)?;
    kernels::const_local_arrays::launch::<f32, 3>(d, Launch::threads(n), &dxf, &mut outf)?;
    let dxi = d.upload(&xi)?;
    let mut outi = d.alloc_filled(n, POISON_U32 as i32)?;
    kernels::const_local_arrays::launch::<i32, 5>(d, Launch::threads(n), &dxi, &mut outi)?;
    let (gf, gi) = (outf.to_vec()?, outi.to_vec()?);
    for i in 0..n {
        let wf = want(3, i, &|j| xi[j] as i64);
        if gf[i] != wf as f32 {
            return fail(format!("f32, PER 3, thread {i}: {}, expected {wf}", gf[i]));
        }
        let wi = want(5, i, &|j| xi[j] as i64);
        if gi[i] as i64 != wi {
            return fail(format!("i32, PER 5, thread {i}: {}, expected {wi}", gi[i]));
        }
    }
    // Across a barrier, PER = 6, groups of 64 (n need not be a multiple).
    let xu: Vec<u32> = (0..n).map(|_| rng.u32(..1 << 28)).collect();
    let dxu = d.upload(&xu)?;
    let mut outu = d.alloc_filled(n, POISON_U32)?;
    kernels::const_local_across_barrier::launch::<6>(
        d,
        Launch::threads(n).group(64),
        &dxu,
        &mut outu,
    )?;
    let gu = outu.to_vec()?;
    for i in 0..n {
        let next = if (i + 1) % 64 == 0 { i + 1 - 64 } else { i + 1 };
        let want = xu[i] + xu.get(next).copied().unwrap_or(0) + 6;
        if gu[i] != want {
            return fail(format!(
                "across a barrier, thread {i}: {}, expected {want}",
                gu[i]
            ));
        }
    }
    Ok(Outcome::default())
}

fn view_args(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    // Views at 3 elements (12 bytes: below any storage-offset alignment) and at 64
    // elements (256 bytes: aligned on every adapter).
    let src: Vec<f32> = (0..n + 100).map(|_| rng.i32(-1000..1000) as f32).collect();
    let dsrc = d.upload(&src)?;
    let mut out = poisoned_f32(d, n + 50)?;
    const COUNTS: usize = 17;
    let mut counts = d.alloc_filled(40, 1000u32)?;
    {
        let a = dsrc.slice(3..3 + n)?;
        let b = dsrc.slice(64..64 + n)?;
        let mut c = counts.slice_mut(7..7 + COUNTS)?;
        kernels::view_args::launch(
            d,
            Launch::threads(n),
            &a,
            &b,
            &mut out.slice_mut(5..5 + n)?,
            &mut c,
        )?;
    }
    let (got, got_counts) = (out.to_vec()?, counts.to_vec()?);
    for (i, &g) in got.iter().enumerate() {
        let want = if (5..5 + n).contains(&i) {
            let k = i - 5;
            src[3 + k] + src[64 + k] * 2.0
        } else {
            f32::NAN // the poison, untouched
        };
        if g.to_bits() != want.to_bits() {
            return fail(format!(
                "out[{i}] = {g}, expected {want} (the view is out[5..{}])",
                5 + n
            ));
        }
    }
    for (i, &g) in got_counts.iter().enumerate() {
        let want = if (7..7 + COUNTS).contains(&i) {
            let j = i - 7;
            1000 + (n / COUNTS + usize::from(j < n % COUNTS)) as u32
        } else {
            1000
        };
        if g != want {
            return fail(format!(
                "counts[{i}] = {g}, expected {want} (the view is counts[7..{}])",
                7 + COUNTS
            ));
        }
    }
    Ok(Outcome::default())
}

/// The IR's integer `/` and `%` on one lane (`x / 0 == x`, `x % 0 == 0`, `MIN / -1 == MIN`).
fn ir_div_rem(p: i32, q: i32) -> (i32, i32) {
    match q {
        0 => (p, 0),
        -1 => (p.wrapping_neg(), 0),
        _ => (p / q, p % q),
    }
}

fn vector_types(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    // Small integers and power-of-two divisors: every float result below is exact, so
    // every backend must match bit for bit (division included).
    let small = |rng: &mut fastrand::Rng| rng.i32(-50..50) as f32;
    let pow2 = |rng: &mut fastrand::Rng| {
        [0.25f32, 0.5, 1.0, 2.0, 4.0][rng.usize(..5)] * if rng.bool() { 1.0 } else { -1.0 }
    };
    // The inputs start 3 vectors into their buffers: vector views at an offset of 48
    // bytes (below every storage-offset alignment).
    let a: Vec<Vec4<f32>> = (0..n + 3)
        .map(|_| Vec4::new(small(rng), small(rng), small(rng), small(rng)))
        .collect();
    let b: Vec<Vec4<f32>> = (0..n)
        .map(|_| Vec4::new(pow2(rng), pow2(rng), pow2(rng), pow2(rng)))
        .collect();
    let special = [i32::MIN, i32::MAX, -1, 0, 1];
    let int = |rng: &mut fastrand::Rng| {
        if rng.u8(..8) == 0 {
            special[rng.usize(..special.len())]
        } else {
            rng.i32(..)
        }
    };
    let ia: Vec<Vec4<i32>> = (0..n)
        .map(|_| Vec4::new(int(rng), int(rng), int(rng), int(rng)))
        .collect();
    let ib: Vec<Vec4<i32>> = (0..n)
        .map(|_| Vec4::new(rng.i32(-3..4), int(rng), rng.i32(-3..4), int(rng)))
        .collect();
    let u: Vec<Vec2<u32>> = (0..n)
        .map(|_| Vec2::new(rng.u32(..), rng.u32(..)))
        .collect();
    let (da, db, dia, dib, du) = (
        d.upload(&a)?,
        d.upload(&b)?,
        d.upload(&ia)?,
        d.upload(&ib)?,
        d.upload(&u)?,
    );
    let mut out = d.alloc_filled(n, Vec4::splat(f32::NAN))?;
    let mut iout = d.alloc_filled(n, Vec4::splat(POISON_U32 as i32))?;
    let mut uout = d.alloc_filled(n, Vec2::splat(POISON_U32))?;
    let mut dots = poisoned_f32(d, n)?;
    kernels::vector_types::launch(
        d,
        Launch::threads(n),
        &da.slice(3..3 + n)?,
        &db,
        &dia,
        &dib,
        &du,
        &mut out,
        &mut iout,
        &mut uout,
        &mut dots,
    )?;
    let (got, igot, ugot, dgot) = (
        out.to_vec()?,
        iout.to_vec()?,
        uout.to_vec()?,
        dots.to_vec()?,
    );
    for i in 0..n {
        let (x, y) = (a[i + 3], b[i]);
        let acc = (x * y + Vec4::splat(1.5)) - x / y;
        let pick = if ia[i].x > 0 { acc } else { -acc };
        let want = Vec4::new(pick.w, pick.z, -pick.y, pick.x);
        if got[i].to_array().map(f32::to_bits) != want.to_array().map(f32::to_bits) {
            return fail(format!("out[{i}] = {:?}, expected {want:?}", got[i]));
        }
        let iwant = ia[i].zip(ib[i], |p, q| {
            let (div, rem) = ir_div_rem(p, q);
            div.wrapping_add(rem).wrapping_sub(p.wrapping_mul(q))
        });
        if igot[i] != iwant {
            return fail(format!(
                "iout[{i}] = {:?}, expected {iwant:?} (p = {:?}, q = {:?})",
                igot[i], ia[i], ib[i]
            ));
        }
        let v = u[i];
        let uwant = Vec2::new(v.x.wrapping_mul(3), v.y.wrapping_mul(v.x))
            .zip(Vec2::splat(7u32), u32::wrapping_sub);
        if ugot[i] != uwant {
            return fail(format!("uout[{i}] = {:?}, expected {uwant:?}", ugot[i]));
        }
        let p = x * y;
        let dwant = p.x + p.y + p.z + p.w;
        if dgot[i].to_bits() != dwant.to_bits() {
            return fail(format!("dots[{i}] = {}, expected {dwant}", dgot[i]));
        }
    }
    // Checked: an overrun of a vector buffer is reported in vectors, and the device
    // stays usable (the CPU backend always checks).
    {
        let mut short = d.alloc_filled(n, Vec4::splat(0.0f32))?;
        let overrun = kernels::vector_overrun::launch(
            d,
            Launch::threads(n + 2).checked(true),
            &da.slice(3..3 + n)?,
            &mut short,
        );
        match overrun {
            Err(Error::OutOfBounds { index, len, .. }) if index >= n as u64 && len == n as u64 => {}
            other => {
                return fail(format!(
                    "a checked launch of {} threads over {n} vectors gave {other:?}, expected \
                     OutOfBounds",
                    n + 2
                ))
            }
        }
        kernels::vector_overrun::launch(d, Launch::threads(n), &da.slice(3..3 + n)?, &mut short)?;
        let copied = short.to_vec()?;
        if copied[..] != a[3..3 + n] {
            return fail("after a checked overrun, a vector copy gave wrong values");
        }
    }
    Ok(Outcome::default())
}

fn subgroups(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    if d.info().caps.subgroup_size.is_none() {
        // The error a kernel with subgroup operations gets there is tested in `bad_input`.
        return Ok(Outcome::skipped("the device has no subgroups"));
    }
    let n = size.dims[0];
    // 64 threads per group: whole subgroups of 32 or fewer lanes; 100: the last subgroup
    // of each group is partial wherever the size does not divide 100.
    for group in [64usize, 100] {
        subgroups_with(d, n, group, rng)?;
    }
    Ok(Outcome::default())
}

fn subgroups_with(
    d: &Target,
    n: usize,
    group: usize,
    rng: &mut fastrand::Rng,
) -> Result<(), Failure> {
    const W: usize = kernels::SUBGROUP_OUTPUTS as usize;
    let x: Vec<i32> = (0..n).map(|_| rng.i32(-100..100)).collect();
    let f: Vec<f32> = x.iter().map(|&v| v as f32 * 0.5).collect();
    let (dx, df) = (d.upload(&x)?, d.upload(&f)?);
    let mut out = d.alloc_filled(n * W, POISON_U32 as i32)?;
    let mut fout = poisoned_f32(d, n * 2)?;
    let launch = Launch::threads(n).group(group as u32);
    kernels::subgroup_ops::launch(d, launch, &dx, &df, &mut out, &mut fout)?;
    let (got, fgot) = (out.to_vec()?, fout.to_vec()?);
    let size = got[0] as usize;
    let [lo, hi] = d.info().caps.subgroup_size.unwrap_or([1, 1]);
    if size == 0 || !(lo as usize..=hi as usize).contains(&size) {
        return fail(format!(
            "subgroup_size() = {size}, outside the device's [{lo}, {hi}]"
        ));
    }
    // Values of every thread that ran, padding threads (past n) included as 0.
    let value = |t: usize| if t < n { x[t] } else { 0 };
    for i in 0..n {
        let row = &got[i * W..i * W + W];
        let local = i % group;
        let lane = local % size;
        let base = i - lane; // the subgroup's first thread
        let end = (i - local + group).min(base + size); // past its last thread
        let member = |l: usize| (base + l < end).then(|| value(base + l));
        let members: Vec<i32> = (base..end).map(value).collect();
        let mut want: [Option<i32>; W] = [None; W];
        want[0] = Some(size as i32);
        want[1] = Some(lane as i32);
        want[2] = member((lane + 1) % size);
        want[3] = member((lane ^ 1) % size);
        want[4] = if lane < 1 {
            Some(x[i])
        } else {
            member(lane - 1)
        };
        want[5] = if lane + 2 >= size {
            Some(x[i])
        } else {
            member(lane + 2)
        };
        want[6] = Some(members.iter().fold(0i32, |a, &b| a.wrapping_add(b)));
        want[7] = members.iter().min().copied();
        want[8] = members.iter().max().copied();
        want[9] = Some(members[..lane].iter().sum());
        want[10] = Some(members[..=lane].iter().sum());
        let ballot = (0..members.len().min(32))
            .filter(|&l| members[l] > 0)
            .fold(0u32, |m, l| m | 1 << l);
        want[11] = Some(ballot as i32);
        want[12] = Some(members.iter().any(|&v| v > 90) as i32);
        want[13] = Some(members.iter().all(|&v| v > -90) as i32);
        let names = [
            "subgroup_size",
            "subgroup_lane",
            "shuffle(lane + 1)",
            "shuffle_xor(1)",
            "shuffle_up(1)",
            "shuffle_down(2)",
            "add",
            "min",
            "max",
            "exclusive_add",
            "inclusive_add",
            "ballot(v > 0)",
            "any(v > 90)",
            "all(v > -90)",
        ];
        for k in 0..W {
            // None: the operation read a lane the partial subgroup lacks (undefined).
            if want[k].is_some_and(|w| w != row[k]) {
                return fail(format!(
                    "group size {group}, thread {i} (lane {lane} of {size}): {} = {}, \
                     expected {} (subgroup values {members:?})",
                    names[k],
                    row[k],
                    want[k].unwrap_or_default()
                ));
            }
        }
        let fsum: f32 = members.iter().map(|&v| v as f32 * 0.5).sum();
        let fx = member((lane ^ 2) % size).map(|v| v as f32 * 0.5);
        if fgot[2 * i] != fsum || fx.is_some_and(|w| w != fgot[2 * i + 1]) {
            return fail(format!(
                "group size {group}, thread {i}: f32 add {} (expected {fsum}), \
                 shuffle_xor(2) {} (expected {fx:?})",
                fgot[2 * i],
                fgot[2 * i + 1]
            ));
        }
    }
    Ok(())
}

fn shared_array_2d(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let (h, w) = (size.dims[0], size.dims[1]);
    let input: Vec<f32> = (0..h * w).map(|_| rng.f32()).collect();
    let din = d.upload(&input)?;
    let mut out = poisoned_f32(d, h * w)?;
    let t = kernels::TILE_2D;
    let launch = Launch::grid2d(
        w.next_multiple_of(t as usize),
        h.next_multiple_of(t as usize),
    )
    .group2d(t, t);
    kernels::transpose_2d::launch(d, launch, &din, &mut out, w as u32, h as u32)?;
    let got = out.to_vec()?;
    // out is w×h: out[c][r] = input[r][c].
    first_mismatch(&got, |i| input[(i % h) * w + i / h])?;
    Ok(Outcome::default())
}

fn literal_inference(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let a: Vec<f32> = (0..n).map(|_| rng.i32(-100..100) as f32 * 0.5).collect();
    let ns: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
    let (da, dn) = (d.upload(&a)?, d.upload(&ns)?);
    let mut out = poisoned_f32(d, n)?;
    let mut out_n = d.alloc_filled(n, POISON_U32)?;
    kernels::literal_inference::launch(d, Launch::threads(n), &da, &dn, &mut out, &mut out_n)?;
    let got = out.to_vec()?;
    first_mismatch(&got, |i| {
        let acc: f32 = (0..4)
            .chain((0..8).step_by(2))
            .map(|j| a[(i + j) % n])
            .fold(0.0, |s, v| s + v);
        a[i] * 1.5 + acc
    })?;
    first_mismatch(&out_n.to_vec()?, |i| ns[i] % 7 + (ns[i] >> 3))?;
    Ok(Outcome::default())
}

fn half_floats(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    use dotcompute::f16;
    if !d.info().caps.f16 {
        // The error such a launch gets is tested in `bad_input`.
        return Ok(Outcome::skipped("the device has no f16"));
    }
    let n = size.dims[0];
    let h = |v: f32| f16::from_f32(v);
    let a: Vec<f16> = (0..n).map(|_| h((rng.f32() - 0.5) * 16.0)).collect();
    // Divisors away from zero: |b| in [0.5, 8].
    let b: Vec<f16> = (0..n)
        .map(|_| h((0.5 + rng.f32() * 7.5) * if rng.bool() { 1.0 } else { -1.0 }))
        .collect();
    let (da, db) = (d.upload(&a)?, d.upload(&b)?);
    let mut out = d.alloc_filled(n * 6, f16::NAN)?;
    let mut wide = poisoned_f32(d, n)?;
    let mut ints = d.alloc_filled(n, POISON_U32 as i32)?;
    kernels::half_ops::launch(
        d,
        Launch::threads(n),
        &da,
        &db,
        &mut out,
        &mut wide,
        &mut ints,
    )?;
    let (got, got_wide, got_ints) = (out.to_vec()?, wide.to_vec()?, ints.to_vec()?);
    // Distance in f16 units in the last place (both finite).
    let ulps = |x: f16, y: f16| {
        let key = |v: f16| {
            let b = v.to_bits() as i32;
            if b & 0x8000 != 0 {
                -(b & 0x7fff)
            } else {
                b
            }
        };
        (key(x) - key(y)).unsigned_abs()
    };
    let names = [
        "a + b",
        "a * b",
        "a - b",
        "a / b",
        "sqrt(|a|)",
        "f16(f32(a) * 0.1)",
    ];
    let mut worst = 0u32;
    for i in 0..n {
        let (x, y) = (a[i].to_f32(), b[i].to_f32());
        let want = [
            h(x + y),
            h(x * y),
            h(x - y),
            h(x / y),
            h(x.abs().sqrt()),
            h(x * 0.1),
        ];
        for k in 0..6 {
            let g = got[i * 6 + k];
            // + - * and the conversion are correctly rounded everywhere; a GPU's f16
            // division and square root may be off by one unit.
            let tol = if k == 3 || k == 4 { 1 } else { 0 };
            let e = ulps(g, want[k]);
            if g.is_nan() || e > tol {
                return fail(format!(
                    "{} with a = {}, b = {}: got {g}, expected {} ({e} ulp)",
                    names[k], a[i], b[i], want[k]
                ));
            }
            worst = worst.max(e);
        }
        let acc = (0..4).fold(0.0f32, |s, k| {
            let j = (i + k) % n;
            s + a[j].to_f32() * b[j].to_f32()
        });
        if got_wide[i] != acc {
            return fail(format!(
                "f32 accumulation at {i}: got {}, expected {acc}",
                got_wide[i]
            ));
        }
        let want_int = h(x * 8.0).to_f32() as i32;
        if got_ints[i] != want_int {
            return fail(format!(
                "i32 cast at {i} (a = {}): got {}, expected {want_int}",
                a[i], got_ints[i]
            ));
        }
    }
    Ok(Outcome::within(worst as f64))
}

fn control_flow_reference(n: u32) -> [u32; 4] {
    let limit = n % 50;
    let acc: u32 = (0..limit).step_by(3).filter(|k| k % 2 == 1).sum();
    let mut j = 0u32;
    while j < limit {
        j += 7;
        if j > 30 {
            break;
        }
    }
    let (mut steps, mut v) = (0u32, n);
    while !(v <= 1 || steps >= 40) {
        v = if v % 2 == 0 {
            v / 2
        } else {
            v.wrapping_mul(3).wrapping_add(1)
        };
        steps += 1;
    }
    let signed: i32 = (-3..limit as i32)
        .map(|t| {
            if t < 0 {
                -t
            } else if t > 10 {
                1
            } else {
                t * 2
            }
        })
        .sum();
    [acc, j, steps, signed as u32]
}

fn control_flow(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let input: Vec<u32> = (0..n).map(|_| rng.u32(0..100_000)).collect();
    let di = d.upload(&input)?;
    let mut out = d.alloc_filled(n * 4, POISON_U32)?;
    kernels::control_flow::launch(d, Launch::threads(n), &di, &mut out)?;
    let got = out.to_vec()?;
    for i in 0..n {
        let want = control_flow_reference(input[i]);
        if got[i * 4..i * 4 + 4] != want {
            return fail(format!(
                "input {}: got {:?}, expected {want:?} (acc, j, steps, signed)",
                input[i],
                &got[i * 4..i * 4 + 4]
            ));
        }
    }
    Ok(Outcome::default())
}

// ------------------------------------------------------------------ memory cases

fn elementwise_masked(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let x: Vec<f32> = (0..n).map(|_| rng.f32() * 100.0 - 50.0).collect();
    let flags: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
    let y0: Vec<f32> = (0..n).map(|_| rng.f32() * 100.0 - 50.0).collect();
    let c0: Vec<i32> = (0..n).map(|_| rng.i32(..)).collect();
    let (dx, dflags) = (d.upload(&x)?, d.upload(&flags)?);
    let (mut dy, mut dc) = (d.upload(&y0)?, d.upload(&c0)?);
    // Three threads more than elements: the kernel's own bounds check must stop them.
    kernels::elementwise_masked::launch(d, Launch::threads(n + 3), &dx, &dflags, &mut dy, &mut dc)?;
    // y * 2 is exact, so one rounding follows whether or not a backend fuses the add.
    let want_y = |i: usize| match flags[i] % 4 {
        0 => y0[i],
        _ => y0[i] * 2.0 + x[i],
    };
    let want_c = |i: usize| match flags[i] % 4 {
        1 => c0[i].wrapping_mul(7).wrapping_add(1),
        _ => c0[i],
    };
    let got_y = dy.to_vec()?;
    for (i, g) in got_y.iter().enumerate() {
        if g.to_bits() != want_y(i).to_bits() {
            return fail(format!(
                "y[{i}] (flag {}): got {g}, expected {}",
                flags[i] % 4,
                want_y(i)
            ));
        }
    }
    first_mismatch(&dc.to_vec()?, want_c)?;
    Ok(Outcome::default())
}

fn round_trip<T: Element>(d: &Device, data: &[T]) -> Result<(), Failure> {
    let buf = d.upload(data)?;
    let back = buf.to_vec()?;
    let (a, b): (&[u8], &[u8]) = (bytemuck::cast_slice(data), bytemuck::cast_slice(&back));
    if a != b {
        let i = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(0) / std::mem::size_of::<T>();
        return fail(format!(
            "{}: element {i} differs after upload/to_vec",
            std::any::type_name::<T>()
        ));
    }
    Ok(())
}

fn upload_download(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    // Random bit patterns: NaN payloads and -0.0 must survive too.
    round_trip(
        d,
        &(0..n)
            .map(|_| f32::from_bits(rng.u32(..)))
            .collect::<Vec<_>>(),
    )?;
    round_trip(d, &(0..n).map(|_| rng.i32(..)).collect::<Vec<_>>())?;
    round_trip(d, &(0..n).map(|_| rng.u32(..)).collect::<Vec<_>>())?;
    if d.info().caps.f64 {
        round_trip(
            d,
            &(0..n)
                .map(|_| f64::from_bits(rng.u64(..)))
                .collect::<Vec<_>>(),
        )?;
    }
    Ok(Outcome::default())
}

fn copy_and_views(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let src: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
    let dsrc = d.upload(&src)?;
    // Whole-buffer device-to-device copy.
    let mut ddst = d.alloc_filled(n, POISON_U32)?;
    ddst.copy_from(&dsrc)?;
    first_mismatch(&ddst.to_vec()?, |i| src[i])?;
    // A partial copy between offsets, mirrored on host vectors.
    let len = rng.usize(0..=n);
    let so = rng.usize(0..=n - len);
    let dof = rng.usize(0..=n - len);
    let mut host = vec![POISON_U32; n];
    host[dof..dof + len].copy_from_slice(&src[so..so + len]);
    let mut ddst = d.alloc_filled(n, POISON_U32)?;
    ddst.slice_mut(dof..dof + len)?
        .copy_from(&dsrc.slice(so..so + len)?)?;
    first_mismatch(&ddst.to_vec()?, |i| host[i])?;
    // Reading a view, and a view of a view.
    let view = dsrc.slice(so..so + len)?;
    first_mismatch(&view.to_vec()?, |i| src[so + i])?;
    let inner = view.slice(len / 3..len - len / 3)?;
    first_mismatch(&inner.to_vec()?, |i| src[so + len / 3 + i])?;
    // Writing through a view.
    let patch: Vec<u32> = (0..len).map(|_| rng.u32(..)).collect();
    host[dof..dof + len].copy_from_slice(&patch);
    ddst.slice_mut(dof..dof + len)?.write(&patch)?;
    first_mismatch(&ddst.to_vec()?, |i| host[i])?;
    // Out-of-range views are errors, not panics.
    if dsrc.slice(0..n + 1).is_ok() || ddst.slice_mut(n..n + 1).is_ok() {
        return fail("a view past the end was accepted");
    }
    let mut short = d.alloc::<u32>(n.saturating_sub(1))?;
    if short.copy_from(&dsrc).is_ok() {
        return fail("a copy between buffers of different lengths was accepted");
    }
    Ok(Outcome::default())
}

fn fill(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let value = rng.f32() * 100.0 - 50.0;
    let mut b = d.alloc_filled(n, f32::NAN)?;
    b.fill(value)?;
    first_mismatch(&b.to_vec()?, |_| value)?;
    // A sub-range fill leaves the rest alone; an 8-byte pattern.
    let mut w = d.alloc_filled(n, 7u64)?;
    let (lo, hi) = (n / 4, n - n / 4);
    w.slice_mut(lo..hi)?.fill(0x0123_4567_89AB_CDEF)?;
    first_mismatch(&w.to_vec()?, |i| {
        if (lo..hi).contains(&i) {
            0x0123_4567_89AB_CDEF
        } else {
            7
        }
    })?;
    Ok(Outcome::default())
}

fn alloc_zero(d: &Target, _: Size, _: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let mut empty = d.alloc::<f32>(0)?;
    if !empty.is_empty() || !empty.to_vec()?.is_empty() {
        return fail("an empty buffer is not empty");
    }
    empty.fill(1.0)?;
    match kernels::double_in_place::launch(d, Launch::threads(1), &mut empty) {
        Err(Error::EmptyBuffer { .. }) => {}
        other => {
            return fail(format!(
                "binding an empty buffer gave {other:?}, expected EmptyBuffer"
            ))
        }
    }
    Ok(Outcome::default())
}

fn alloc_too_large(d: &Target, _: Size, _: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let too_many = (d.info().memory_bytes / 4 + 1) as usize * 2;
    match d.alloc::<f32>(too_many) {
        Err(Error::OutOfMemory { .. }) => {}
        Ok(_) => {
            return fail(format!(
                "allocating {too_many} f32 succeeded on a device of {} bytes",
                d.info().memory_bytes
            ))
        }
        Err(e) => return fail(format!("expected OutOfMemory, got: {e}")),
    }
    // The device keeps working.
    let b = d.upload(&[1u32, 2, 3])?;
    first_mismatch(&b.to_vec()?, |i| i as u32 + 1)?;
    Ok(Outcome::default())
}

fn pool_reuse(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let cycles = size.dims[0];
    let sizes = [1usize, 100, 1000, 4096, 10_000, 65_536, 250_000];
    // Warm the pool with one buffer of each size, as a running program would have.
    drop(
        sizes
            .iter()
            .map(|&s| d.alloc::<f32>(s))
            .collect::<Result<Vec<_>, _>>()?,
    );
    let before = d.memory_stats();
    let mut live: Vec<Buffer<f32>> = Vec::new();
    for _ in 0..cycles {
        live.push(d.alloc::<f32>(sizes[rng.usize(..sizes.len())])?);
        if live.len() > 4 || rng.bool() {
            live.swap_remove(rng.usize(..live.len()));
        }
    }
    drop(live);
    let after = d.memory_stats();
    let driver = after.driver_allocations - before.driver_allocations;
    let hits = after.pool_hits - before.pool_hits;
    let served = hits as f64 / (hits + driver) as f64;
    if served < 0.9 {
        return fail(format!(
            "the pool served {:.1}% of {cycles} allocations (driver: {driver})",
            served * 100.0
        ));
    }
    if after.bytes_in_use != before.bytes_in_use {
        return fail(format!(
            "bytes in use went from {} to {}",
            before.bytes_in_use, after.bytes_in_use
        ));
    }
    Ok(Outcome::within(1.0 - served))
}
