//! The seed cases of `shared/seed-cases.md`: thread ids, vector add and multiply, the
//! reduction, the matrix products (hand-written, generated, vendor) and unified memory.

use super::*;

pub(super) fn thread_ids(
    d: &Target,
    size: Size,
    _: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let mut out = d.alloc_filled(n, POISON_U32)?;
    kernels::thread_ids::launch(d, Launch::threads(n), &mut out)?;
    first_mismatch(&out.to_vec()?, |i| i as u32)?;
    Ok(Outcome::default())
}

pub(super) fn vector_add(
    d: &Target,
    size: Size,
    _: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
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

pub(super) fn vector_multiply(
    d: &Target,
    size: Size,
    _: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
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
pub(super) const REDUCE_GROUPS: usize = 64;
pub(super) const REDUCE_GROUP: usize = 256;

pub(super) fn reduce_on(d: &Target, data: &[f32]) -> Result<f32, Failure> {
    let x = d.upload(data)?;
    let mut total = d.alloc_filled(1, 0.0f32)?;
    let groups = groups_for(data.len(), REDUCE_GROUP).min(REDUCE_GROUPS);
    let launch = Launch::threads(groups * REDUCE_GROUP)
        .group(REDUCE_GROUP as u32)
        .dynamic_shared(REDUCE_GROUP as u32);
    kernels::reduce_sum::launch(d, launch, &x, &mut total)?;
    Ok(total.to_vec()?[0])
}

pub(super) fn reduction_sum(
    d: &Target,
    size: Size,
    _: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
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

pub(super) fn matrix_multiply(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
    random_product(d, size, rng, |a, b, c, [m, k, n]| {
        let tile = kernels::TILE;
        let launch = Launch::grid2d(n, m).group2d(tile, tile);
        kernels::matmul_tiled::launch(d, launch, a, b, c, m as u32, n as u32, k as u32)
    })
}

/// A product of a random m×k by a random k×n matrix (entries in [-1, 1)) made by
/// `multiply(a, b, c, [m, k, n])` into a C poisoned with NaN, every element checked
/// against f64 ([`check_product`]).
fn random_product(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
    multiply: impl FnOnce(&Buffer<f32>, &Buffer<f32>, &mut Buffer<f32>, [usize; 3]) -> Result<(), Error>,
) -> Result<Outcome, Failure> {
    let [m, k, n] = size.dims;
    let a: Vec<f32> = (0..m * k).map(|_| rng.f32() * 2.0 - 1.0).collect();
    let b: Vec<f32> = (0..k * n).map(|_| rng.f32() * 2.0 - 1.0).collect();
    let (da, db) = (d.upload(&a)?, d.upload(&b)?);
    let mut dc = poisoned_f32(d, m * n)?;
    multiply(&da, &db, &mut dc, [m, k, n])?;
    check_product(&a, &b, &dc.to_vec()?, [m, k, n])
}

/// `Device::matmul_generated` (the register-blocked kernel dotcompute generates, 128×128
/// per group) on shapes below, across and off its blocking.
pub(super) fn generated_matmul(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
    random_product(d, size, rng, |a, b, c, [m, k, n]| {
        d.matmul_generated(a, b, c, m, n, k).map(drop)
    })
}

/// `Device::matmul` (the vendor path where the backend has one: cuBLAS, MPS,
/// matrixmultiply; else the generated kernel) with C poisoned with NaN, so a library that
/// reads C although β = 0 fails (an open question about MPS, issue 32 item 4). Then, where
/// the device multiplies f16 at all, an f16 product of ones with k = 4096: f32 accumulation
/// gives 4096 in every element, f16 accumulation stops at 2048 (2048 + 1 rounds back to
/// 2048), so the test shows how the library accumulates.
pub(super) fn vendor_matmul(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
    use dotcompute::f16;
    let outcome = random_product(d, size, rng, |a, b, c, [m, k, n]| {
        d.matmul(a, b, c, m, n, k).map(drop)
    })?;
    // f16: a few rows and columns are enough to see the accumulation.
    let [m, _, n] = size.dims;
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
pub(super) fn check_product(
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

pub(super) fn unified_memory(
    d: &Target,
    size: Size,
    _: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let data: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut buf = d.upload(&data)?;
    kernels::double_in_place::launch(d, Launch::threads(n), &mut buf)?;
    first_mismatch(&buf.to_vec()?, |i| 2.0 * data[i])?;
    Ok(Outcome::default())
}

// ------------------------------------------------------------------ semantics cases
