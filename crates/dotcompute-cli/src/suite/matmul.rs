//! Matrix products from 256 to 8192 per path and precision: the generated
//! register-blocked kernel (`Device::matmul_generated`) against the backend's vendor
//! library (cuBLAS on CUDA, matrixmultiply on the CPU) in FP32, and on CUDA cuBLAS in
//! TF32 and f16 against cuBLAS FP32 and the generated tensor-core TF32 kernel
//! (`Device::matmul_generated_with`) against cuBLAS TF32. Where a backend has no vendor library (wgpu), the
//! reference is the plain 16×16 tiled kernel a user would write first.
//! Every product is checked on 64 sampled elements against an f64 reference.

use super::{measure_all, Bench, Ctx, Figure, Res, Stats, Unit};
use dotcompute::{BackendKind, Buffer, Device, Launch, MatmulPath, Precision};
use dotcompute_conformance::kernels;
use half::f16;

pub fn benches() -> Vec<Bench> {
    vec![Bench {
        name: "matmul",
        what: "square products 256…8192: generated against vendor, per precision",
        run: matmul,
    }]
}

fn sizes(ctx: &Ctx) -> &'static [usize] {
    match (ctx.quick, ctx.kind()) {
        (true, _) => &[256, 512],
        (false, BackendKind::Cpu) => &[256, 512, 1024],
        _ => &[256, 512, 1024, 2048, 4096, 8192],
    }
}

fn matmul(ctx: &Ctx) -> Res<Vec<Figure>> {
    let mut out = Vec::new();
    if ctx.kind() != BackendKind::Cpu {
        out.push(first_product(ctx)?);
    }
    for &n in sizes(ctx) {
        ctx.step(&format!("matmul {n}³"));
        out.extend(at_size(ctx, n)?);
    }
    Ok(out)
}

/// The wall time of this process's first generated FP32 product (1024³, then
/// `synchronize`): its pipeline is built then, so this is what a user's first call costs
/// (with the driver's own shader cache as it is: run with it empty for a cold figure).
fn first_product(ctx: &Ctx) -> Res<Figure> {
    let d = ctx.device;
    let n = 1024;
    let a = d.alloc_filled(n * n, 1.0f32).map_err(super::s)?;
    let mut c = d.alloc_filled(n * n, f32::NAN).map_err(super::s)?;
    d.synchronize().map_err(super::s)?;
    let t = std::time::Instant::now();
    d.matmul_generated(&a, &a, &mut c, n, n, n)
        .map_err(super::s)?;
    d.synchronize().map_err(super::s)?;
    let first = t.elapsed();
    if let Some(i) = c
        .to_vec()
        .map_err(super::s)?
        .iter()
        .position(|&v| v != n as f32)
    {
        return Err(format!("first product: element {i} is wrong"));
    }
    Ok(ctx
        .figure("matmul", "first call, 1024³".into(), n as f64, Unit::Us)
        .precision("fp32")
        .ours(
            &format!(
                "generated, {} (pipeline build + run)",
                d.generated_fp32_kernel(n, n)
            ),
            1.0,
            Stats::from_times(vec![first], false),
        )
        .build())
}

/// The inputs of one size: random f32 in [-1, 1), seeded by the size.
struct Inputs {
    n: usize,
    a: Vec<f32>,
    b: Vec<f32>,
}

impl Inputs {
    /// Checks 64 sampled elements of `c` against f64 dot products of `a` and `b` (as
    /// given: the f16 product passes its rounded inputs), each within `rel` of the sum of
    /// the products' magnitudes.
    fn check(&self, what: &str, c: &[f32], a: &[f32], b: &[f32], rel: f64) -> Res<()> {
        let n = self.n;
        let mut rng = fastrand::Rng::with_seed(n as u64);
        for _ in 0..64 {
            let (i, j) = (rng.usize(..n), rng.usize(..n));
            let (mut want, mut mag) = (0.0f64, 0.0f64);
            for p in 0..n {
                let t = a[i * n + p] as f64 * b[p * n + j] as f64;
                want += t;
                mag += t.abs();
            }
            let got = c[i * n + j] as f64;
            if got.is_nan() || (got - want).abs() > rel * mag + 1e-30 {
                return Err(format!(
                    "{what} {n}³: c[{i}][{j}] = {got}, expected {want} (allowed {:e})",
                    rel * mag
                ));
            }
        }
        Ok(())
    }
}

/// f32 rounding of the error bound of an n-term dot product, loosely (2 n eps).
fn fp32_rel(n: usize) -> f64 {
    2.0 * n as f64 * f32::EPSILON as f64
}

fn at_size(ctx: &Ctx, n: usize) -> Res<Vec<Figure>> {
    let d = ctx.device;
    let mut rng = fastrand::Rng::with_seed(0x3a7 + n as u64);
    let inputs = Inputs {
        n,
        a: (0..n * n).map(|_| rng.f32() * 2.0 - 1.0).collect(),
        b: (0..n * n).map(|_| rng.f32() * 2.0 - 1.0).collect(),
    };
    let (da, db) = (
        d.upload(&inputs.a).map_err(super::s)?,
        d.upload(&inputs.b).map_err(super::s)?,
    );
    let poisoned = |d: &Device| d.alloc_filled(n * n, f32::NAN).map_err(super::s);
    let (mut c_gen, mut c_ref) = (poisoned(d)?, poisoned(d)?);
    let flops = 2.0 * (n as f64).powi(3);
    let size = format!("{n}³");
    let vendor = d.matmul(&da, &db, &mut c_ref, n, n, n).map_err(super::s)? == MatmulPath::Vendor;
    // The CPU's generated kernel (split at its barriers, no SIMD across threads) is far
    // from matrixmultiply: only the small sizes, or the run takes minutes.
    let generated = ctx.kind() != BackendKind::Cpu || n <= 512;
    let mut figs = Vec::new();
    let vendor_name = match ctx.kind() {
        BackendKind::Cuda => "cuBLAS",
        BackendKind::Cpu => "matrixmultiply",
        _ => "vendor",
    };
    if generated {
        let reference_case = if vendor {
            format!("{vendor_name} fp32")
        } else {
            "generated 16×16 tiled (the first kernel a user writes)".into()
        };
        let tile = kernels::TILE;
        let times = measure_all(
            ctx,
            &mut [
                &mut || {
                    d.matmul_generated(&da, &db, &mut c_gen, n, n, n)
                        .map_err(super::s)
                },
                &mut || {
                    if vendor {
                        d.matmul(&da, &db, &mut c_ref, n, n, n)
                            .map(|_| ())
                            .map_err(super::s)
                    } else {
                        let l = Launch::grid2d(n, n).group2d(tile, tile);
                        let nn = n as u32;
                        kernels::matmul_tiled::launch(d, l, &da, &db, &mut c_ref, nn, nn, nn)
                            .map_err(super::s)
                    }
                },
            ],
        )?;
        let rel = fp32_rel(n);
        inputs.check(
            "generated",
            &c_gen.to_vec().map_err(super::s)?,
            &inputs.a,
            &inputs.b,
            rel,
        )?;
        inputs.check(
            &reference_case,
            &c_ref.to_vec().map_err(super::s)?,
            &inputs.a,
            &inputs.b,
            rel,
        )?;
        let mut f = ctx
            .figure("matmul", size.clone(), n as f64, Unit::TflopS)
            .precision("fp32")
            .ours(
                &format!("generated {}", d.generated_fp32_kernel(n, n)),
                flops,
                times[0].clone(),
            )
            .against(&reference_case, flops, times[1].clone());
        if vendor && ctx.kind() == BackendKind::Cuda {
            f = f.target("≥ 0.5 at 4096 (stretch 0.65)");
        }
        figs.push(f.build());
    }
    if ctx.kind() == BackendKind::Cuda {
        figs.extend(cublas_precisions(ctx, &inputs, &da, &db, flops, &size)?);
    }
    Ok(figs)
}

/// cuBLAS TF32 and f16 (f32 accumulation) against cuBLAS FP32, and the generated TF32
/// and f16 kernels against cuBLAS at the same precision, same inputs.
fn cublas_precisions(
    ctx: &Ctx,
    inputs: &Inputs,
    da: &Buffer<f32>,
    db: &Buffer<f32>,
    flops: f64,
    size: &str,
) -> Res<Vec<Figure>> {
    let d = ctx.device;
    let n = inputs.n;
    let (a16, b16): (Vec<f16>, Vec<f16>) = (
        inputs.a.iter().map(|&x| f16::from_f32(x)).collect(),
        inputs.b.iter().map(|&x| f16::from_f32(x)).collect(),
    );
    let (da16, db16) = (
        d.upload(&a16).map_err(super::s)?,
        d.upload(&b16).map_err(super::s)?,
    );
    let mut c16 = d.alloc_filled(n * n, f16::NAN).map_err(super::s)?;
    let mut c32 = d.alloc_filled(n * n, f32::NAN).map_err(super::s)?;
    let mut ctf = d.alloc_filled(n * n, f32::NAN).map_err(super::s)?;
    let mut cgen = d.alloc_filled(n * n, f32::NAN).map_err(super::s)?;
    let mut cgen16 = d.alloc_filled(n * n, f16::NAN).map_err(super::s)?;
    let times: Vec<Stats> = measure_all(
        ctx,
        &mut [
            &mut || {
                d.matmul(da, db, &mut c32, n, n, n)
                    .map(|_| ())
                    .map_err(super::s)
            },
            &mut || {
                d.matmul_with(da, db, &mut ctf, n, n, n, Precision::Tf32)
                    .map(|_| ())
                    .map_err(super::s)
            },
            &mut || {
                d.matmul(&da16, &db16, &mut c16, n, n, n)
                    .map(|_| ())
                    .map_err(super::s)
            },
            &mut || {
                d.matmul_generated_with(da, db, &mut cgen, n, n, n, Precision::Tf32)
                    .map_err(super::s)
            },
            &mut || {
                d.matmul_generated(&da16, &db16, &mut cgen16, n, n, n)
                    .map_err(super::s)
            },
        ],
    )?;
    // TF32 keeps 10 mantissa bits of each input: about 2^-10 of each product's size.
    inputs.check(
        "cuBLAS TF32",
        &ctf.to_vec().map_err(super::s)?,
        &inputs.a,
        &inputs.b,
        2.0 / 1024.0,
    )?;
    inputs.check(
        "generated TF32",
        &cgen.to_vec().map_err(super::s)?,
        &inputs.a,
        &inputs.b,
        2.0 / 1024.0,
    )?;
    let widen = |v: &[f16]| -> Vec<f32> { v.iter().map(|x| x.to_f32()).collect() };
    let (ra, rb) = (widen(&a16), widen(&b16));
    // f16 output: half an f16 ulp of the result, bounded by the products' magnitudes.
    for (case, c) in [("cuBLAS f16", &c16), ("generated f16", &cgen16)] {
        let got = widen(&c.to_vec().map_err(super::s)?);
        inputs.check(case, &got, &ra, &rb, 2.0 / 2048.0)?;
    }
    let fp32 = "cuBLAS fp32";
    Ok(vec![
        ctx.figure("matmul", size.into(), n as f64, Unit::TflopS)
            .precision("tf32")
            .ours("cuBLAS TF32", flops, times[1].clone())
            .against(fp32, flops, times[0].clone())
            .build(),
        ctx.figure("matmul", size.into(), n as f64, Unit::TflopS)
            .precision("tf32")
            .ours("generated TF32 (mma.sync)", flops, times[3].clone())
            .against("cuBLAS TF32", flops, times[1].clone())
            .target("≥ 0.3 at 4096")
            .note("generated kernel on mma_m16n8k8_tf32: 128×128 blocks, 4 warps of 64×64, 32 deep, 16-byte loads where k and n are multiples of 4, register-staged double buffering")
            .build(),
        ctx.figure("matmul", size.into(), n as f64, Unit::TflopS)
            .precision("f16")
            .ours("cuBLAS f16, f32 accumulation", flops, times[2].clone())
            .against(fp32, flops, times[0].clone())
            .build(),
        ctx.figure("matmul", size.into(), n as f64, Unit::TflopS)
            .precision("f16")
            .ours("generated f16 (mma.sync), f32 accumulation", flops, times[4].clone())
            .against("cuBLAS f16, f32 accumulation", flops, times[2].clone())
            .note("generated kernel on mma_m16n8k16_f16: 128×128 blocks, 4 warps of 64×64, 32 deep, register-staged double buffering")
            .build(),
    ])
}
