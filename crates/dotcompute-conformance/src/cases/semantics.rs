//! What kernels compute: grid ids, atomics, integer and float semantics, math, bit
//! operations, bit casts, wrapping and saturating arithmetic, `match`, control flow.

use super::*;

pub(super) fn grid_ids_3d(
    d: &Target,
    size: Size,
    _: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
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

pub(super) fn shared_atomics(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
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
pub(super) fn int_reference(x: i32, y: i32, f: f32) -> [i32; 8] {
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

pub(super) fn integer_semantics(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
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

pub(super) fn integer_abs(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
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
pub(super) fn nan_flags<T: PartialOrd + Copy>(a: T, b: T, is_nan: bool, is_finite: bool) -> u32 {
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

pub(super) fn float_nan(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
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
pub(super) fn nan_flags_on<T: dotcompute::Float + std::fmt::Debug>(
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

pub(super) fn atomic_ops(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
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

pub(super) fn atomic_loads(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let group = kernels::ATOMIC_LOAD_GROUP as usize;
    let v: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
    let counts: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
    let signed: Vec<i32> = (0..n).map(|_| rng.i32(..)).collect();
    let dv = d.upload(&v)?;
    let mut dc = d.upload(&counts)?;
    let mut ds = d.upload(&signed)?;
    let mut out = d.alloc_filled(n * 3, POISON_U32)?;
    // Whole groups: the threads past the end write their shared slot too.
    let threads = n.div_ceil(group) * group;
    kernels::atomic_loads::launch(
        d,
        Launch::threads(threads).group(group as u32),
        &dv,
        &mut dc,
        &mut ds,
        &mut out,
    )?;
    let (got, final_counts) = (out.to_vec()?, dc.to_vec()?);
    for i in 0..n {
        let added = counts[i].wrapping_add(v[i]);
        let neighbour = (i / group) * group + (i % group + 1) % group;
        let want = [added, neighbour as u32 * 3 + 1, signed[i] as u32];
        if got[i * 3..i * 3 + 3] != want || final_counts[i] != added {
            return fail(format!(
                "thread {i}: loads {:?} and counter {}, expected {want:?} and {added}",
                &got[i * 3..i * 3 + 3],
                final_counts[i]
            ));
        }
    }
    Ok(Outcome::default())
}

pub(super) fn math_functions(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
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
pub(super) fn compare_table(
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

pub(super) fn math_more(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
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
pub(super) fn powi_reference(x: f32, n: i32) -> f32 {
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

pub(super) fn bit_ops(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
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
    // extract_byte: constant and run-time indices (0 to 8: taken modulo 4).
    let ks: Vec<u32> = (0..n).map(|_| rng.u32(0..9)).collect();
    let dk = d.upload(&ks)?;
    let mut bytes = d.alloc_filled(n * 6, POISON_U32)?;
    kernels::bytes32::launch(d, Launch::threads(n), &du, &dk, &mut bytes)?;
    let got = bytes.to_vec()?;
    for i in 0..n {
        let (x, k) = (u[i], ks[i]);
        let byte = |k: u32| (x >> (8 * (k % 4))) & 255;
        let want = [
            byte(0),
            byte(1),
            byte(2),
            byte(3),
            byte(k),
            (byte(k + 1) << 5) | (i as u32 % 32),
        ];
        if got[i * 6..i * 6 + 6] != want {
            return fail(format!(
                "extract_byte of {x:#x} (run-time index {k}): got {:?}, expected {want:?} (bytes 0 to 3, byte k, byte k + 1 as a counter index)",
                &got[i * 6..i * 6 + 6]
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
pub(super) fn bit_patterns32(n: usize, rng: &mut fastrand::Rng) -> Vec<u32> {
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

pub(super) fn bitcast(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
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

pub(super) fn wrap_saturate(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
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

pub(super) fn match_int(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
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

pub(super) fn control_flow_reference(n: u32) -> [u32; 4] {
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

pub(super) fn control_flow(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
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

pub(super) fn elementwise_masked(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
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
