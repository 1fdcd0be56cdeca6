use crate::common::{devices, pass_forms, seed, sizes, slow};
use dotcompute_ops::scan::{
    exclusive_scan, exclusive_sum, inclusive_scan, inclusive_sum, scan_by_heads, scan_by_offsets,
};
use dotcompute_ops::{tune, ReduceOp};

#[test]
fn integer_scans_are_exact_on_every_size() {
    let seed = seed();
    for d in devices() {
        for form in pass_forms(&d) {
            tune::with_candidate(form, || integer_sums_of_every_size(d.clone(), seed, form));
        }
    }
}

fn integer_sums_of_every_size(d: dotcompute::Device, seed: u64, form: &str) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut sizes = sizes(&d);
    if form == "three-pass-subgroup" && slow(&d) {
        // More tiles than one group's round in the second pass (1,024 tiles of 1,024 on
        // software GPUs; on GPUs the large size, 2^24 + 5, has 4,097 tiles of 4,096).
        sizes.push((1 << 20) + 1025);
    }
    if form == "three-pass-subgroup-vec4" {
        // Two elements after the last whole quad (the sizes above leave one or three):
        // after a quad of the same tile (1,030: tiles of 1,024 on software GPUs) and alone
        // in the last tile (4,098: tiles of 4,096 on GPUs).
        sizes.extend([1030, 4098]);
    }
    for n in sizes {
        let x: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
        // The whole range: the sums wrap, as the documentation says they do.
        let i: Vec<i32> = (0..n).map(|_| rng.i32(..)).collect();
        let (dx, di) = (d.upload(&x).unwrap(), d.upload(&i).unwrap());
        let mut ex = d.alloc_filled(n, 0xDEAD_BEEFu32).unwrap();
        let mut inc = d.alloc_filled(n, -7i32).unwrap();
        exclusive_sum(&d, &dx, &mut ex).unwrap();
        inclusive_sum(&d, &di, &mut inc).unwrap();
        let (ex, inc) = (ex.to_vec().unwrap(), inc.to_vec().unwrap());
        let (mut acc, mut iacc) = (0u32, 0i32);
        for k in 0..n {
            assert_eq!(
                ex[k],
                acc,
                "{} {form} n={n} exclusive [{k}] seed {seed}",
                d.label()
            );
            acc = acc.wrapping_add(x[k]);
            iacc = iacc.wrapping_add(i[k]);
            assert_eq!(
                inc[k],
                iacc,
                "{} {form} n={n} inclusive [{k}] seed {seed}",
                d.label()
            );
        }
    }
}

#[test]
fn float_scans_of_exact_values_are_exact() {
    // Small integers as floats: every partial sum is exact, so any order gives one answer.
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        for n in sizes(&d) {
            let x: Vec<f32> = (0..n).map(|_| rng.i32(-8..8) as f32).collect();
            let dx = d.upload(&x).unwrap();
            let mut y = d.alloc_filled(n, f32::NAN).unwrap();
            exclusive_sum(&d, &dx, &mut y).unwrap();
            let y = y.to_vec().unwrap();
            let mut acc = 0.0f32;
            for k in 0..n {
                assert_eq!(y[k], acc, "{} n={n} [{k}] seed {seed}", d.label());
                acc += x[k];
            }
        }
    }
}

#[test]
fn scans_on_a_stream_and_bad_lengths() {
    for d in devices() {
        let s = d.stream().unwrap();
        let x = d.upload(&[1u32; 5000]).unwrap();
        let mut y = d.alloc_filled(5000, 0u32).unwrap();
        inclusive_sum(&s, &x, &mut y).unwrap();
        let got = s.read(&y).unwrap();
        assert!(
            got.iter().enumerate().all(|(k, &v)| v == k as u32 + 1),
            "{}",
            d.label()
        );
        let mut short = d.alloc::<u32>(4999).unwrap();
        let e = exclusive_sum(&d, &x, &mut short).unwrap_err();
        assert!(
            e.to_string().contains("4999") && e.to_string().contains("5000"),
            "{e}"
        );
    }
}

/// The reference: exclusive or inclusive scan with `f` from `id`, restarting at heads.
fn reference<T: Copy>(x: &[T], heads: &[bool], inclusive: bool, id: T, f: fn(T, T) -> T) -> Vec<T> {
    let mut running = id;
    let mut out = Vec::with_capacity(x.len());
    for (k, &v) in x.iter().enumerate() {
        if heads.get(k).copied().unwrap_or(false) {
            running = id;
        }
        if inclusive {
            running = f(running, v);
            out.push(running);
        } else {
            out.push(running);
            running = f(running, v);
        }
    }
    out
}

#[test]
fn min_and_max_scans_of_every_size() {
    let seed = seed();
    for d in devices() {
        for form in pass_forms(&d) {
            tune::with_candidate(form, || min_and_max_of_every_size(d.clone(), seed, form));
        }
    }
}

fn min_and_max_of_every_size(d: dotcompute::Device, seed: u64, form: &str) {
    let mut rng = fastrand::Rng::with_seed(seed);
    for n in sizes(&d) {
        let x: Vec<i32> = (0..n).map(|_| rng.i32(..)).collect();
        let f: Vec<f32> = (0..n).map(|_| rng.f32() * 1000.0 - 500.0).collect();
        let (dx, df) = (d.upload(&x).unwrap(), d.upload(&f).unwrap());
        for inclusive in [false, true] {
            let label = format!(
                "{} {form} n={n} inclusive {inclusive} seed {seed}",
                d.label()
            );
            let mut y = d.alloc_filled(n, 7i32).unwrap();
            let mut g = d.alloc_filled(n, f32::NAN).unwrap();
            if inclusive {
                inclusive_scan(&d, &dx, &mut y, ReduceOp::Min).unwrap();
                inclusive_scan(&d, &df, &mut g, ReduceOp::Max).unwrap();
            } else {
                exclusive_scan(&d, &dx, &mut y, ReduceOp::Min).unwrap();
                exclusive_scan(&d, &df, &mut g, ReduceOp::Max).unwrap();
            }
            let want = reference(&x, &[], inclusive, i32::MAX, |a, b| a.min(b));
            assert_eq!(y.to_vec().unwrap(), want, "min {label}");
            let want = reference(&f, &[], inclusive, f32::NEG_INFINITY, |a: f32, b| a.max(b));
            assert_eq!(g.to_vec().unwrap(), want, "max {label}");
        }
    }
}

#[test]
fn segmented_scans_by_heads_and_by_offsets() {
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        for n in sizes(&d) {
            // Head densities: none, sparse (segments cross tiles), dense, every element;
            // on slow devices the large sizes take two (lavapipe runs each barrier in
            // software: this test alone took minutes there).
            let densities: &[u32] = if slow(&d) && n > 5000 {
                &[1, 1000]
            } else {
                &[0, 1, 300, 1000]
            };
            for &per_mille in densities {
                let heads: Vec<bool> = (0..n).map(|_| rng.u32(..1000) < per_mille).collect();
                let x: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
                let f: Vec<f32> = (0..n).map(|_| rng.f32() * 100.0).collect();
                let dh = d
                    .upload(
                        &heads
                            .iter()
                            .map(|&h| h as u32 * rng.u32(1..))
                            .collect::<Vec<_>>(),
                    )
                    .unwrap();
                let (dx, df) = (d.upload(&x).unwrap(), d.upload(&f).unwrap());
                for inclusive in [false, true] {
                    let label = format!(
                        "{} n={n} heads {per_mille}/1000 inclusive {inclusive} seed {seed}",
                        d.label()
                    );
                    let mut y = d.alloc_filled(n, 7u32).unwrap();
                    scan_by_heads(&d, &dx, &dh, &mut y, ReduceOp::Sum, inclusive).unwrap();
                    let want = reference(&x, &heads, inclusive, 0, u32::wrapping_add);
                    assert_eq!(y.to_vec().unwrap(), want, "sum {label}");
                    let mut g = d.alloc_filled(n, f32::NAN).unwrap();
                    scan_by_heads(&d, &df, &dh, &mut g, ReduceOp::Min, inclusive).unwrap();
                    let want =
                        reference(&f, &heads, inclusive, f32::INFINITY, |a: f32, b| a.min(b));
                    assert_eq!(g.to_vec().unwrap(), want, "min {label}");
                }
            }
            // By offsets: one huge segment and many tiny or empty ones.
            let mut offsets = vec![0u32];
            while (*offsets.last().unwrap() as usize) < n {
                let last = *offsets.last().unwrap() as usize;
                let len = match rng.u32(..10) {
                    0 => 0,
                    1 => n / 2,
                    _ => rng.usize(1..4),
                };
                offsets.push((last + len).min(n) as u32);
            }
            if n == 0 {
                offsets.push(0);
            }
            let mut heads = vec![false; n];
            for &o in &offsets[..offsets.len() - 1] {
                if (o as usize) < n {
                    heads[o as usize] = true;
                }
            }
            let x: Vec<i32> = (0..n).map(|_| rng.i32(-1000..1000)).collect();
            let (dx, doff) = (d.upload(&x).unwrap(), d.upload(&offsets).unwrap());
            let mut y = d.alloc_filled(n, 7i32).unwrap();
            scan_by_offsets(&d, &dx, &doff, &mut y, ReduceOp::Max, false).unwrap();
            let want = reference(&x, &heads, false, i32::MIN, |a, b| a.max(b));
            assert_eq!(
                y.to_vec().unwrap(),
                want,
                "{} n={n} by offsets seed {seed}",
                d.label()
            );
        }
    }
}

#[test]
fn bad_heads_and_offsets_are_errors() {
    for d in devices() {
        let x = d.upload(&[1u32; 100]).unwrap();
        let mut y = d.alloc_filled(100, 9u32).unwrap();
        let few = d.upload(&[1u32; 99]).unwrap();
        let e = scan_by_heads(&d, &x, &few, &mut y, ReduceOp::Sum, true).unwrap_err();
        assert!(e.to_string().contains("heads have 99"), "{e}");
        for (bad, says) in [
            (vec![0u32, 50, 40, 100], "must not decrease"),
            (vec![0u32, 50, 101], "past the input"),
            (vec![1u32, 50, 100], "must start at 0"),
            (vec![0u32, 50, 99], "must start at 0"),
        ] {
            let off = d.upload(&bad).unwrap();
            let e = scan_by_offsets(&d, &x, &off, &mut y, ReduceOp::Sum, true).unwrap_err();
            assert!(e.to_string().contains(says), "{bad:?}: {e}");
        }
        assert!(
            y.to_vec().unwrap().iter().all(|&v| v == 9),
            "{}: wrote after an error",
            d.label()
        );
    }
}

/// The kernel a pinned scan form must run on `d` (its name with the element type and the
/// elements a thread, and for the subgroup form its constants: an exclusive sum's pass
/// 3): a pin that were ignored (a form missing from the candidates it is
/// looked up in) would let the form tests check the default form again and pass.
fn kernel_of(d: &dotcompute::Device, form: &str) -> String {
    let software = d.info().device_type == dotcompute::DeviceType::SoftwareGpu;
    match form {
        "single-pass" => "scan_single_pass_u32_32".into(),
        "single-pass-narrow" => "scan_single_pass_u32_16".into(),
        "three-pass" if software => "scan_tiles_u32_0".into(),
        "three-pass" => "scan_tiles_u32_16".into(),
        "three-pass-narrow" => "scan_tiles_u32_8".into(),
        "three-pass-subgroup" if software => "subgroup_scan_tiles_u32_4_0_0_0".into(),
        "three-pass-subgroup" => "subgroup_scan_tiles_u32_16_0_0_0".into(),
        "three-pass-subgroup-narrow" => "subgroup_scan_tiles_u32_8_0_0_0".into(),
        "three-pass-subgroup-vec4" if software => "subgroup_scan_vec4_u32_4_0_0".into(),
        "three-pass-subgroup-vec4" => "subgroup_scan_vec4_u32_16_0_0".into(),
        other => panic!("no kernel known for the form {other}"),
    }
}

#[test]
fn each_pinned_form_runs_its_own_kernels() {
    for d in devices() {
        if d.backend_kind() == dotcompute::BackendKind::Cpu {
            continue; // the CPU device scans in host code, without kernels
        }
        let n = 10_000;
        let x = d.upload(&vec![1u32; n]).unwrap();
        let mut y = d.alloc_filled(n, 7u32).unwrap();
        for form in pass_forms(&d) {
            d.synchronize().unwrap();
            d.take_timings();
            d.set_profiling(true);
            tune::with_candidate(form, || exclusive_sum(&d, &x, &mut y)).unwrap();
            d.synchronize().unwrap();
            d.set_profiling(false);
            let labels: Vec<String> = d.take_timings().into_iter().map(|t| t.label).collect();
            let want = kernel_of(&d, form);
            assert!(
                labels.contains(&want),
                "{} {form}: ran {labels:?}, not {want}",
                d.label()
            );
            assert_eq!(y.to_vec().unwrap(), (0..n as u32).collect::<Vec<_>>());
        }
    }
}
