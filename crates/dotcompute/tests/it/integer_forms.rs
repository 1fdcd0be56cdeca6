//! Integer expressions in the forms the random-kernel test found wrong on NVIDIA's Vulkan
//! compiler (2026-11-28, kernel seed 4710405778595751319: `u32(7.75) - ~(3u & u32(a))`
//! with `a = i32::MIN` came out as `~0 - 7` instead of `7 - ~0`), each part alone, on
//! every backend present, against the CPU element by element.

use crate::common;
use dotcompute::prelude::*;

/// Eight results per thread, from loaded values so that no compiler can fold them.
#[kernel]
fn complement_forms(a: &[i32], b: &[u32], x: &[f32], out: &mut [u32]) {
    let i = global_id().x;
    if i < a.len() {
        let xa = x[i] as u32;
        let masked = 3u32 & (a[i] as u32);
        let seven = (15.5f32 * 0.5f32) as u32;
        let t1 = seven - !masked;
        let t2 = ((xa << b[i]) / (xa & xa)) % 2147483648u32;
        out[8 * i] = t1;
        out[8 * i + 1] = t2;
        out[8 * i + 2] = t2.max(t1);
        out[8 * i + 3] = !masked;
        out[8 * i + 4] = b[i] - !(a[i] as u32);
        out[8 * i + 5] = !(a[i] as u32) - b[i];
        out[8 * i + 6] = xa - !b[i];
        out[8 * i + 7] = ((a[i] - !(b[i] as i32)) as u32) ^ (t2.max(t1) ^ b[i]);
    }
}

/// The three input arrays of these kernels.
type Inputs = (Vec<i32>, Vec<u32>, Vec<f32>);

/// `n` random inputs, `first` at the first indices.
fn random_inputs(seed: u64, n: usize, first: &[(i32, u32, f32)]) -> Inputs {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut a: Vec<i32> = (0..n).map(|_| rng.i32(..)).collect();
    let mut b: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
    let mut x: Vec<f32> = (0..n).map(|_| rng.f32() * 200.0 - 50.0).collect();
    for (j, &(aj, bj, xj)) in first.iter().enumerate() {
        (a[j], b[j], x[j]) = (aj, bj, xj);
    }
    (a, b, x)
}

/// The forms (result `j` is form `j % per_thread` of its thread) with a wrong result, each
/// once, in order.
fn wrong_forms(got: &[u32], want: &[u32], per_thread: usize) -> Vec<usize> {
    let wrong: std::collections::BTreeSet<usize> = (0..got.len())
        .filter(|&j| got[j] != want[j])
        .map(|j| j % per_thread)
        .collect();
    wrong.into_iter().collect()
}

/// What `launch` leaves in `len` poisoned outputs on `d`, with the inputs uploaded.
fn outputs(
    d: &Device,
    (a, b, x): &Inputs,
    len: usize,
    launch: impl Fn(
        &Device,
        &Buffer<i32>,
        &Buffer<u32>,
        &Buffer<f32>,
        &mut Buffer<u32>,
    ) -> dotcompute::Result<()>,
) -> Vec<u32> {
    let (da, db, dx) = (
        d.upload(a).unwrap(),
        d.upload(b).unwrap(),
        d.upload(x).unwrap(),
    );
    let mut out = d.alloc_filled(len, 0xDEAD_BEEFu32).unwrap();
    launch(d, &da, &db, &dx, &mut out).unwrap();
    out.to_vec().unwrap()
}

#[test]
fn subtracting_a_complement_matches_the_cpu_on_every_backend() {
    let cpu = Device::cpu();
    let seed = common::seed();
    let n = 1000 + 37;
    // The random kernel's inputs first.
    let first = [
        (i32::MIN, 47, 64.75),
        (i32::MAX, 0, 1.0),
        (-1, u32::MAX, 0.0),
    ];
    let inputs = random_inputs(seed, n, &first);
    let (a, b, x) = &inputs;
    let run = |d: &Device| {
        outputs(d, &inputs, 8 * n, |d, a, b, x, out| {
            complement_forms::launch(d, Launch::threads(n).group(64), a, b, x, out)
        })
    };
    let want = run(&cpu);
    // By hand for the first inputs: 7 - !0 = 8, 64 << 15 / 64 = 32768.
    assert_eq!(&want[..4], &[8, 32768, 32768, u32::MAX], "the CPU itself");
    for d in common::devices() {
        let got = run(&d);
        for (j, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g,
                w,
                "{}: element {j} (thread {}, form {}), inputs a={} b={} x={}, seed {seed}",
                d.info().label(),
                j / 8,
                j % 8,
                a[j / 8],
                b[j / 8],
                x[j / 8]
            );
        }
        eprintln!("{}: {} results as on the CPU", d.info().label(), got.len());
    }
}

/// The random kernel as the reducer left it (`reduce::a_disagreement` in the Metal crate's
/// tests, on an H100: `max(u32(x), u32(15.5) - !u32(a))` with `x = 64.75`,
/// `a = i32::MIN` gave `0x7ffffff0` on NVIDIA Vulkan, CUDA `0x80000010`), and its
/// neighbours, so that the failing form is known by what differs.
#[kernel]
fn complement_in_max(a: &[i32], b: &[u32], x: &[f32], out: &mut [u32]) {
    let i = global_id().x;
    if i < a.len() {
        let xa = x[i] as u32;
        let ua = a[i] as u32;
        let c = 15.5f32 as u32;
        out[8 * i] = (x[0] as u32).max(c - !(a[0] as u32));
        out[8 * i + 1] = xa.max(c - !ua);
        out[8 * i + 2] = c - !ua;
        out[8 * i + 3] = xa.max(15u32 - !ua);
        out[8 * i + 4] = xa.min(c - !ua);
        out[8 * i + 5] = b[i].max(15u32 - !ua);
        out[8 * i + 6] = xa.max((b[i] & 15u32) - !ua);
        out[8 * i + 7] = xa.max(ua.wrapping_add(16u32));
    }
}

#[test]
fn a_complement_subtracted_inside_max_matches_the_cpu_on_every_backend() {
    let cpu = Device::cpu();
    let seed = common::seed();
    let n = 1000 + 37;
    let inputs = random_inputs(seed, n, &[(i32::MIN, 47, 64.75), (i32::MAX, 15, 1.0)]);
    let (a, b, x) = &inputs;
    let run = |d: &Device| {
        outputs(d, &inputs, 8 * n, |d, a, b, x, out| {
            complement_in_max::launch(d, Launch::threads(n).group(64), a, b, x, out)
        })
    };
    let want = run(&cpu);
    // By hand for the reducer's inputs: 15 - !0x8000_0000 = 0x8000_0010.
    assert_eq!(want[0], 0x8000_0010, "the CPU itself");
    for d in common::devices() {
        let got = run(&d);
        let wrong: Vec<String> = (0..8 * n)
            .filter(|&j| got[j] != want[j])
            .map(|j| {
                format!(
                    "element {j} (thread {}, form {}): {:#x} against {:#x}, inputs a={} b={} x={}",
                    j / 8,
                    j % 8,
                    got[j],
                    want[j],
                    a[j / 8],
                    b[j / 8],
                    x[j / 8]
                )
            })
            .collect();
        let forms = wrong_forms(&got, &want, 8);
        assert!(
            wrong.is_empty(),
            "{}: {} wrong results, forms {forms:?}, seed {seed}; first: {}",
            d.info().label(),
            wrong.len(),
            wrong[..wrong.len().min(12)].join("\n")
        );
        eprintln!("{}: {} results as on the CPU", d.info().label(), got.len());
    }
}

/// Forms of the failing one with values every thread shares (loaded at index 0 or passed as
/// a scalar), where NVIDIA Vulkan went wrong and the per-thread forms did not.
#[kernel]
fn uniform_complement_forms(a: &[i32], b: &[u32], x: &[f32], s: u32, out: &mut [u32]) {
    let i = global_id().x;
    if i < a.len() {
        let x0 = x[0] as u32;
        let ua0 = a[0] as u32;
        let b0 = b[0];
        let c = 15.5f32 as u32;
        out[12 * i] = x0.max(c - !ua0);
        out[12 * i + 1] = c - !ua0;
        out[12 * i + 2] = b0.max(c - !ua0);
        out[12 * i + 3] = x0.max(15u32 - !ua0);
        out[12 * i + 4] = x0.max(c.wrapping_add(ua0).wrapping_add(1u32));
        out[12 * i + 5] = x0.min(c - !ua0);
        out[12 * i + 6] = x0.max(b0 - !ua0);
        out[12 * i + 7] = x0.max(c - (ua0 ^ 4294967295u32));
        out[12 * i + 8] = x0.max(15u32 - !s);
        out[12 * i + 9] = b0.max(s - !ua0);
        out[12 * i + 10] = x0.max(ua0.wrapping_add(16u32));
        out[12 * i + 11] = (((x0 as i32).max((c as i32) - !(ua0 as i32))) as u32) ^ b[i];
    }
}

#[test]
fn uniform_complement_forms_match_the_cpu_on_every_backend() {
    let cpu = Device::cpu();
    let seed = common::seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    let n = 1000 + 37;
    let b: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
    // The reducer's inputs at index 0, then values near the edges where a swapped or
    // negated subtraction shows.
    let cases: [(i32, u32, f32, u32); 5] = [
        (i32::MIN, 47, 64.75, 0x8000_0000),
        (i32::MAX, 15, 1.0, 7),
        (-1, u32::MAX, 0.0, 0),
        (rng.i32(..), rng.u32(..), rng.f32() * 100.0, rng.u32(..)),
        (0, 0, 3.0, u32::MAX),
    ];
    let mut failures = Vec::new();
    for (a0, b0, x0, s) in cases {
        let a: Vec<i32> = (0..n)
            .map(|j| if j == 0 { a0 } else { rng.i32(..) })
            .collect();
        let mut b = b.clone();
        b[0] = b0;
        let x: Vec<f32> = (0..n)
            .map(|j| if j == 0 { x0 } else { rng.f32() })
            .collect();
        let inputs = (a, b, x);
        let run = |d: &Device| {
            outputs(d, &inputs, 12 * n, |d, a, b, x, out| {
                uniform_complement_forms::launch(d, Launch::threads(n).group(64), a, b, x, s, out)
            })
        };
        let want = run(&cpu);
        for d in common::devices() {
            let got = run(&d);
            let forms = wrong_forms(&got, &want, 12);
            let first: Vec<String> = forms
                .iter()
                .map(|&f| format!("form {f}: {:#x} against {:#x}", got[f], want[f]))
                .collect();
            if !forms.is_empty() {
                failures.push(format!(
                    "{}: wrong forms {forms:?} with a0={a0} b0={b0} x0={x0} s={s}: {}",
                    d.info().label(),
                    first.join(", ")
                ));
            }
        }
    }
    assert!(failures.is_empty(), "seed {seed}:\n{}", failures.join("\n"));
}

/// Hand-written WGSL forms of the reduced kernel, one shader each (shaders sharing
/// subexpressions changed what NVIDIA's compiler did), run on every wgpu device with a
/// table of which forms come out wrong. A tool for finding the trigger and checking a
/// workaround, not a check of our code: `--ignored integer_forms::raw_wgsl_forms`.
#[cfg(feature = "wgpu")]
#[test]
#[ignore = "a tool: prints which hand-written forms a wgpu device computes wrong"]
fn raw_wgsl_forms() {
    use dotcompute::{ir::ScalarType, Arg, RawKernel, RawParam};
    let helpers = "
fn dc_is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn f2u(x: f32) -> u32 {
    if (dc_is_nan(x) || x <= 0.0f) { return 0u; }
    if (x >= 4294967296.0f) { return 4294967295u; }
    return u32(x);
}
fn f2i(x: f32) -> i32 {
    if (dc_is_nan(x)) { return 0i; }
    if (x >= 2147483648.0f) { return 2147483647i; }
    if (x <= -2147483648.0f) { return i32(-2147483648); }
    return i32(x);
}
fn ident(x: u32) -> u32 { return x; }
fn f2u_select(x: f32) -> u32 {
    return select(select(u32(x), 4294967295u, x >= 4294967296.0f), 0u, dc_is_nan(x) || x <= 0.0f);
}
@group(0) @binding(0) var<storage, read> p_a: array<i32>;
@group(0) @binding(1) var<storage, read> p_x: array<f32>;
@group(0) @binding(2) var<storage, read_write> p_out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i < arrayLength(&p_out)) {
";
    // Each form with its value by the IR's semantics (Rust's `as` is the saturating
    // float-to-integer conversion `f2u` and `f2i` implement).
    type Want = fn(i32, f32) -> u32;
    // The value most forms compute: the reduced kernel's `max(x, 15 - !a)`.
    let reduced: Want = |a, x| (x as u32).max(15u32.wrapping_sub(!(a as u32)));
    let forms: [(&str, Want); 20] = [
        (
            "p_out[i] = max(f2u(p_x[0u]), (f2u(15.5f) - (~u32(p_a[0u]))));",
            reduced,
        ),
        (
            "p_out[i] = max(f2u(p_x[0u]), (15u - (~u32(p_a[0u]))));",
            reduced,
        ),
        (
            "p_out[i] = max(u32(clamp(p_x[0u], 0.0f, 4294967040.0f)), (15u - (~u32(p_a[0u]))));",
            |a, x| (x.clamp(0.0, 4294967040.0) as u32).max(15u32.wrapping_sub(!(a as u32))),
        ),
        (
            "p_out[i] = max(f2u(p_x[0u]), ((15u + u32(p_a[0u])) + 1u));",
            |a, x| (x as u32).max(15u32.wrapping_add(a as u32).wrapping_add(1)),
        ),
        (
            "let t = f2u(p_x[0u]); p_out[i] = max(t, (15u - (~u32(p_a[0u]))));",
            reduced,
        ),
        (
            "p_out[i] = max(f2u(p_x[i]), (15u - (~u32(p_a[i]))));",
            reduced,
        ),
        (
            "p_out[i] = max(f2u_select(p_x[0u]), (15u - (~u32(p_a[0u]))));",
            reduced,
        ),
        (
            "p_out[i] = max(f2u(p_x[0u]), (15u - (u32(p_a[0u]) ^ 0xffffffffu)));",
            reduced,
        ),
        (
            "let s = 15u - (~u32(p_a[0u])); p_out[i] = max(f2u(p_x[0u]), s);",
            reduced,
        ),
        (
            "p_out[i] = max(f2u(p_x[0u]), (0u - (~u32(p_a[0u]))));",
            |a, x| (x as u32).max(0u32.wrapping_sub(!(a as u32))),
        ),
        (
            "p_out[i] = max(f2u(p_x[0u]), (15u - u32(p_a[0u])));",
            |a, x| (x as u32).max(15u32.wrapping_sub(a as u32)),
        ),
        (
            "p_out[i] = min(f2u(p_x[0u]), (15u - (~u32(p_a[0u]))));",
            |a, x| (x as u32).min(15u32.wrapping_sub(!(a as u32))),
        ),
        (
            "p_out[i] = (f2u(p_x[0u]) + (15u - (~u32(p_a[0u]))));",
            |a, x| (x as u32).wrapping_add(15u32.wrapping_sub(!(a as u32))),
        ),
        (
            "p_out[i] = max(f2u(p_x[0u]), (ident(15u) - (~u32(p_a[0u]))));",
            reduced,
        ),
        ("p_out[i] = (f2u(15.5f) - (~u32(p_a[0u])));", |a, _| {
            15u32.wrapping_sub(!(a as u32))
        }),
        (
            "p_out[i] = max(f2u(p_x[0u]), (f2u(15.5f) - u32(p_a[0u])));",
            |a, x| (x as u32).max(15u32.wrapping_sub(a as u32)),
        ),
        (
            "p_out[i] = max(f2u(p_x[i]), (f2u(15.5f) - (~u32(p_a[i]))));",
            reduced,
        ),
        (
            "p_out[i] = bitcast<u32>(max(f2i(p_x[0u]), (f2i(15.5f) - (~p_a[0u]))));",
            |a, x| (x as i32).max(15i32.wrapping_sub(!a)) as u32,
        ),
        (
            "p_out[i] = max(f2u(p_x[0u]), (ident(15u) - (~ident(u32(p_a[0u])))));",
            reduced,
        ),
        (
            "p_out[i] = max(u32(p_a[0u]), (f2u(15.5f) - (~f2u(p_x[0u]))));",
            |a, x| (a as u32).max(15u32.wrapping_sub(!(x as u32))),
        ),
    ];
    let n = 300;
    let cases = [
        (i32::MIN, 64.75f32),
        (i32::MAX, 1.0),
        (-1, 0.0),
        (0x1234_5678, 3.5),
        (-100, 1e10),
    ];
    let params = [
        RawParam::buffer("a", ScalarType::I32),
        RawParam::buffer("x", ScalarType::F32),
        RawParam::buffer_mut("out", ScalarType::U32),
    ];
    for d in crate::common::devices() {
        if d.backend_kind() != dotcompute::BackendKind::Wgpu {
            continue;
        }
        for (k, &(form, want)) in forms.iter().enumerate() {
            // The per-thread forms read element `i`; the others element 0 of every thread.
            let per_thread = form.contains("p_a[i]");
            let source = format!("{helpers}        {form}\n    }}\n}}\n");
            let kernel = RawKernel::wgsl(&format!("form{k}"), &source, &params).unwrap();
            let mut wrong = Vec::new();
            for (a0, x0) in cases {
                // Element 0 holds the case; the rest vary (for the per-thread form).
                let a: Vec<i32> = (0..n)
                    .map(|j| if j == 0 { a0 } else { a0 ^ j as i32 })
                    .collect();
                let x: Vec<f32> = (0..n).map(|j| x0 + j as f32).collect();
                let (da, dx) = (d.upload(&a).unwrap(), d.upload(&x).unwrap());
                let mut out = d.alloc_filled(n, 0xDEAD_BEEFu32).unwrap();
                d.launch_raw(
                    &kernel,
                    Launch::threads(n),
                    &[
                        Arg::buffer(&da),
                        Arg::buffer(&dx),
                        Arg::buffer_mut(&mut out),
                    ],
                )
                .unwrap();
                let got = out.to_vec().unwrap();
                for (j, g) in got.iter().enumerate() {
                    let (aj, xj) = if per_thread { (a[j], x[j]) } else { (a0, x0) };
                    let w = want(aj, xj);
                    if *g != w {
                        wrong.push(format!("a={aj} x={xj}: {g:#x} against {w:#x}"));
                        break;
                    }
                }
            }
            eprintln!(
                "{} form {k} `{form}`: {}",
                d.info().label(),
                if wrong.is_empty() {
                    "right".to_string()
                } else {
                    format!("WRONG {}", wrong.join("; "))
                }
            );
        }
    }
}
