//! One floating-point meaning on every backend (issue 27, item 5): float `+ - * /` are
//! correctly rounded one at a time (never contracted into a fused multiply-add, never
//! reassociated), and subnormal inputs and results are kept, on every backend whose
//! device reports it can (`Capabilities::exact_float`). Each kernel below is a set of
//! expression shapes drivers like to rewrite (`a * b + c`, `a * a - b * b + c`, sums of
//! products, `min` / `max` / `clamp` of subnormals); inputs are seeded random floats of
//! every magnitude mixed with ±0, ±inf, NaN, subnormals and near-overflow values. Every
//! output must equal the CPU's bit for bit (any NaN equals any NaN: payloads are not
//! specified; `min` / `max` of +0 and -0 may give either zero).
//!
//! Before the strict SPIR-V path, NVIDIA's Vulkan driver fused `a * b + c` (200,305 of
//! 1,000,003 results differed), lavapipe reassociated `a * a - b * b + c`, and NVIDIA
//! flushed subnormal results of `min` / `max` / `clamp`.

use crate::common;
use dotcompute::prelude::*;
use dotcompute::BackendKind;

#[kernel]
fn contractible(a: &[f32], b: &[f32], c: &[f32], out: &mut [f32]) {
    let i = global_id().x;
    if i < a.len() {
        let x = a[i];
        let y = b[i];
        let z = c[i];
        out[8 * i] = x * y + z;
        out[8 * i + 1] = x * y - z;
        out[8 * i + 2] = z - x * y;
        out[8 * i + 3] = x * x - y * y + z;
        out[8 * i + 4] = (x + y) + z;
        out[8 * i + 5] = x * y * z + x;
        out[8 * i + 6] = -(x * y) + z * z;
        // (No division: `/` is within 2.5 ulp on Vulkan, not correctly rounded.)
        out[8 * i + 7] = (x * z + y) * (y - x * 0.75);
    }
}

#[kernel]
fn sums_of_products(a: &[f32], b: &[f32], c: &[f32], out: &mut [f32]) {
    let i = global_id().x;
    if i < a.len() {
        let j = (i + 1) % a.len();
        let mut acc = 0.0f32;
        acc += a[i] * b[i];
        acc += a[j] * b[j];
        acc += c[i] * c[j];
        out[4 * i] = acc;
        out[4 * i + 1] = a[i] * b[j] + a[j] * b[i];
        out[4 * i + 2] = (a[i] + b[i]) * (a[i] - b[i]) + c[i];
        out[4 * i + 3] = a[i] * 0.5 + b[i] * 0.25 + c[i] * 0.125;
    }
}

#[kernel]
fn min_max_clamp(a: &[f32], b: &[f32], c: &[f32], out: &mut [f32]) {
    let i = global_id().x;
    if i < a.len() {
        let x = a[i];
        let y = b[i];
        let z = c[i];
        out[6 * i] = x.min(y);
        out[6 * i + 1] = x.max(y);
        out[6 * i + 2] = x.clamp(-1.0e-39, 1.0e-39);
        out[6 * i + 3] = (x * 1.0e-30).min(z);
        out[6 * i + 4] = (x - y).max(z * 1.0e-10);
        out[6 * i + 5] = x * 1.0e-38 + y * 1.0e-38;
    }
}

/// Random floats: mostly ordinary values over many magnitudes, with ±0, ±inf, NaN and
/// values near the largest float mixed in; with `subnormals`, also subnormals and values
/// near the smallest normal. Without, magnitudes stay within 2^-40..2^40, so no product
/// or sum of the kernels below is subnormal either: then a device that flushes
/// subnormals must still agree exactly.
fn edge_floats(rng: &mut fastrand::Rng, n: usize, subnormals: bool) -> Vec<f32> {
    let sign = |rng: &mut fastrand::Rng| if rng.bool() { 1.0 } else { -1.0 };
    (0..n)
        .map(|_| match rng.u8(..20) {
            0 if subnormals => f32::from_bits(rng.u32(1..0x0080_0000)) * sign(rng),
            3 if subnormals => f32::MIN_POSITIVE * (rng.f32() * 4.0) * sign(rng),
            1 => [0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN][rng.usize(..5)],
            2 => f32::MAX * (rng.f32() * 0.5 + 0.5) * sign(rng),
            _ => {
                let magnitude = 2f32.powi(rng.i32(-40..40));
                (1.0 + rng.f32()) * magnitude * sign(rng)
            }
        })
        .collect()
}

/// Equal bits, or both NaN; with `zero_sign_free`, also +0 against -0.
fn same_float(x: f32, y: f32, zero_sign_free: bool) -> bool {
    x.to_bits() == y.to_bits()
        || (x.is_nan() && y.is_nan())
        || (zero_sign_free && x == 0.0 && y == 0.0)
}

type FloatKernel = fn(&Device, usize, &Buffer<f32>, &Buffer<f32>, &Buffer<f32>, &mut Buffer<f32>);

#[test]
fn float_arithmetic_is_bit_identical_to_the_cpu_on_every_exact_backend() {
    let seed = common::seed();
    let n = (1 << 20) + 3;
    let kernels: [(&str, usize, bool, FloatKernel); 3] = [
        ("contractible", 8, false, |d, n, a, b, c, out| {
            contractible::launch(d, Launch::threads(n), a, b, c, out).unwrap()
        }),
        ("sums_of_products", 4, false, |d, n, a, b, c, out| {
            sums_of_products::launch(d, Launch::threads(n), a, b, c, out).unwrap()
        }),
        // Makes subnormals from normal inputs too: only where they are kept.
        ("min_max_clamp", 6, true, |d, n, a, b, c, out| {
            min_max_clamp::launch(d, Launch::threads(n), a, b, c, out).unwrap()
        }),
    ];
    let cpu = Device::cpu();
    let mut compared = 0;
    for d in common::devices() {
        if d.backend_kind() == BackendKind::Cpu {
            continue;
        }
        let caps = &d.info().caps;
        // The strict option refuses exactly the devices this test does not hold to it.
        match d.require_exact_float() {
            Ok(()) => assert!(caps.exact_float && caps.subnormals),
            Err(e) => {
                assert!(!(caps.exact_float && caps.subnormals), "{e}");
                assert!(e.to_string().contains(&d.label()), "{e}");
            }
        }
        for subnormal_inputs in [false, true] {
            let mut rng = fastrand::Rng::with_seed(seed ^ subnormal_inputs as u64);
            let a = edge_floats(&mut rng, n, subnormal_inputs);
            let b = edge_floats(&mut rng, n, subnormal_inputs);
            let c = edge_floats(&mut rng, n, subnormal_inputs);
            let run = |d: &Device, width: usize, k: FloatKernel| {
                let (ga, gb, gc) = (
                    d.upload(&a).unwrap(),
                    d.upload(&b).unwrap(),
                    d.upload(&c).unwrap(),
                );
                let mut out = d
                    .alloc_filled(width * n, f32::from_bits(0x7fc0_dead))
                    .unwrap();
                k(d, n, &ga, &gb, &gc, &mut out);
                out.to_vec().unwrap()
            };
            for &(name, width, makes_subnormals, k) in &kernels {
                let want = run(&cpu, width, k);
                let got = run(&d, width, k);
                // lavapipe's code generator folds `x + 0.0` to `x` when the zero is a
                // constant, keeping a negative zero's sign (Mesa 22.3; the one exception
                // it has, documented in dotcompute_ir's semantics table).
                let software = d.info().device_type == dotcompute::DeviceType::SoftwareGpu;
                // `min` / `max` of +0 and -0 may give either zero (IEEE minNum; CUDA's
                // `fminf` gives -0, the CPU +0): outputs 0-4 of min_max_clamp.
                let zero_sign_free =
                    |i: usize| software || (name == "min_max_clamp" && i % width < 5);
                let bad: Vec<usize> = (0..want.len())
                    .filter(|&i| !same_float(got[i], want[i], zero_sign_free(i)))
                    .collect();
                let mut per_output = vec![0usize; width];
                for &i in &bad {
                    per_output[i % width] += 1;
                }
                let must_agree = caps.exact_float
                    && (caps.subnormals || !(subnormal_inputs || makes_subnormals));
                eprintln!(
                    "{}: {name}, subnormal inputs {subnormal_inputs}: {} of {} differ from the \
                     CPU (by output {per_output:?}; exact_float {}, subnormals {}, must agree \
                     {must_agree})",
                    d.label(),
                    bad.len(),
                    want.len(),
                    caps.exact_float,
                    caps.subnormals
                );
                if !must_agree {
                    continue;
                }
                compared += 1;
                if let Some(&i) = bad.first() {
                    let e = i / width;
                    panic!(
                        "{}: {name}: {} of {} outputs differ from the CPU; first: output {} of \
                         element {e} (a = {:e}, b = {:e}, c = {:e}): {:e} ({:#x}), CPU {:e} \
                         ({:#x}) (seed {seed})",
                        d.label(),
                        bad.len(),
                        want.len(),
                        i % width,
                        a[e],
                        b[e],
                        c[e],
                        got[i],
                        got[i].to_bits(),
                        want[i],
                        want[i].to_bits()
                    );
                }
            }
        }
    }
    eprintln!("{compared} kernel runs compared bit for bit with the CPU");
}

#[kernel]
fn min_max(a: &[f32], b: &[f32], out: &mut [f32]) {
    let i = global_id().x;
    if i < a.len() {
        out[2 * i] = a[i].min(b[i]);
        out[2 * i + 1] = a[i].max(b[i]);
    }
}

/// Issue 27, item 5: `differential` compares under the rules both devices honour. On a
/// device that does not promise subnormals (NVIDIA Vulkan flushes them), subnormal results
/// agree with zero; the log shows whether the plain exact comparison failed there.
#[test]
fn differential_uses_the_per_backend_subnormal_rule() {
    use dotcompute::differential::{compare, differential, Tolerance};
    let seed = common::seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    let n = 4099;
    let tiny = |rng: &mut fastrand::Rng| {
        let v = f32::from_bits(rng.u32(1..0x0080_0000));
        if rng.bool() {
            -v
        } else {
            v
        }
    };
    let a: Vec<f32> = (0..n).map(|_| tiny(&mut rng)).collect();
    let b: Vec<f32> = (0..n)
        .map(|i| match i % 3 {
            0 => tiny(&mut rng),
            1 => 0.0,
            _ => -0.0,
        })
        .collect();
    let run = |d: &Device| -> dotcompute::Result<Vec<f32>> {
        let (da, db) = (d.upload(&a)?, d.upload(&b)?);
        let mut out = d.alloc_filled(2 * n, f32::NAN)?;
        min_max::launch(d, Launch::threads(n), &da, &db, &mut out)?;
        out.to_vec()
    };
    let cpu = Device::cpu();
    let want = run(&cpu).unwrap();
    for d in common::devices() {
        let agreed = differential(&d, &cpu, Tolerance::EXACT, run)
            .unwrap_or_else(|e| panic!("seed {seed}: {}: {e}", d.label()));
        let got = run(&d).unwrap();
        let plain = compare(("device", &got), ("cpu", &want), Tolerance::EXACT);
        eprintln!(
            "{}: subnormals {}, agreed on {} elements; plain exact comparison: {}",
            d.label(),
            d.info().caps.subnormals,
            agreed.elements,
            plain
                .as_ref()
                .map_or_else(|e| e.to_string(), |_| "agreed".into())
        );
        // Where subnormals are promised, they must be kept exactly; where they are not
        // (lavapipe keeps them anyway, NVIDIA Vulkan flushes), only the rule applies.
        if d.info().caps.subnormals {
            plain.unwrap_or_else(|e| panic!("seed {seed}: {}: {e}", d.label()));
        }
    }
}
