//! Compaction and selection against plain Rust.

use crate::common::{devices, seed, selection_forms, sizes, slow};
use dotcompute_ops::select::{copy_if, partition, run_length_encode, unique, Flag};
use dotcompute_ops::tune;

/// Keep fractions: none, a few, half, most, all.
const KEEP_PER_MILLE: [u32; 5] = [0, 3, 500, 990, 1000];

#[test]
fn copy_if_and_partition_keep_order_on_every_size() {
    let seed = seed();
    for d in devices() {
        for form in selection_forms(&d) {
            tune::with_candidate(form, || {
                copy_if_and_partition_of_every_size(d.clone(), seed, form)
            });
        }
    }
}

fn copy_if_and_partition_of_every_size(d: dotcompute::Device, seed: u64, form: &str) {
    let mut rng = fastrand::Rng::with_seed(seed);
    for n in sizes(&d) {
        let keep = KEEP_PER_MILLE[rng.usize(..KEEP_PER_MILLE.len())];
        let x: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
        // Any non-zero flag keeps, not only 1.
        let flags: Vec<u32> = (0..n)
            .map(|_| {
                if rng.u32(..1000) < keep {
                    rng.u32(1..)
                } else {
                    0
                }
            })
            .collect();
        let want_kept: Vec<u32> = x
            .iter()
            .zip(&flags)
            .filter(|p| *p.1 != 0)
            .map(|p| *p.0)
            .collect();
        let mut want_part = want_kept.clone();
        want_part.extend(x.iter().zip(&flags).filter(|p| *p.1 == 0).map(|p| *p.0));
        let label = format!("{} {form} n={n} keep {keep}/1000 seed {seed}", d.label());
        let dx = d.upload(&x).unwrap();
        check_selection(&d, &dx, &flags, &want_kept, &want_part, &label);
        // The same flags as bytes (any non-zero byte keeps).
        let bytes: Vec<u8> = flags
            .iter()
            .map(|&f| (f % 255) as u8 + u8::from(f != 0))
            .collect();
        let label = format!("{label}, byte flags");
        check_selection(&d, &dx, &bytes, &want_kept, &want_part, &label);
    }
}

/// Copy-if and partition of `x` by `flags` against the expected results, into outputs
/// poisoned past what they should receive.
fn check_selection<F: Flag>(
    d: &dotcompute::Device,
    dx: &dotcompute::Buffer<u32>,
    flags: &[F],
    want_kept: &[u32],
    want_part: &[u32],
    label: &str,
) {
    let n = dx.len();
    let df = d.upload(flags).unwrap();
    let mut kept = d.alloc_filled(n + 3, 0xDEAD_BEEFu32).unwrap();
    let count = copy_if(d, dx, &df, &mut kept).unwrap();
    assert_eq!(count, want_kept.len(), "{label}");
    let got = kept.to_vec().unwrap();
    assert_eq!(got[..count], want_kept[..], "{label}");
    assert!(
        got[count..].iter().all(|&v| v == 0xDEAD_BEEF),
        "{label}: wrote past the kept"
    );
    let mut part = d.alloc_filled(n, 0xDEAD_BEEFu32).unwrap();
    assert_eq!(partition(d, dx, &df, &mut part).unwrap(), count, "{label}");
    assert_eq!(part.to_vec().unwrap(), want_part, "{label}");
}

#[test]
fn unique_and_run_length_encoding_of_runs() {
    let seed = seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        for n in sizes(&d) {
            // Runs of random lengths (1 to 3,000, crossing tiles) of a few values.
            let mut x = Vec::with_capacity(n);
            while x.len() < n {
                let v = rng.i32(-3..3);
                let len = if rng.bool() {
                    rng.usize(1..4)
                } else {
                    rng.usize(1..3000)
                };
                x.extend(std::iter::repeat_n(v, len.min(n - x.len())));
            }
            let mut want = x.clone();
            want.dedup();
            let mut want_counts = Vec::new();
            let mut k = 0;
            while k < n {
                let start = k;
                while k < n && x[k] == x[start] {
                    k += 1;
                }
                want_counts.push((k - start) as u32);
            }
            let label = format!("{} n={n} seed {seed}", d.label());
            let dx = d.upload(&x).unwrap();
            let mut y = d.alloc_filled(want.len(), 99i32).unwrap();
            assert_eq!(unique(&d, &dx, &mut y).unwrap(), want.len(), "{label}");
            assert_eq!(y.to_vec().unwrap(), want, "{label}");
            // An output with room for every element (CUDA's single pass), poisoned past
            // the kept ones.
            let mut roomy = d.alloc_filled(n + 1, 99i32).unwrap();
            assert_eq!(unique(&d, &dx, &mut roomy).unwrap(), want.len(), "{label}");
            let roomy = roomy.to_vec().unwrap();
            assert_eq!(roomy[..want.len()], want[..], "{label} (room for all)");
            assert!(
                roomy[want.len()..].iter().all(|&v| v == 99),
                "{label}: wrote past the kept"
            );
            let mut values = d.alloc_filled(want.len() + 1, 99i32).unwrap();
            let mut counts = d.alloc_filled(want.len() + 1, 0xDEADu32).unwrap();
            let runs = run_length_encode(&d, &dx, &mut values, &mut counts).unwrap();
            assert_eq!(runs, want.len(), "{label}");
            let (values, counts) = (values.to_vec().unwrap(), counts.to_vec().unwrap());
            assert_eq!(values[..runs], want[..], "{label}");
            assert_eq!(counts[..runs], want_counts[..], "{label}");
            assert_eq!(
                (values[runs], counts[runs]),
                (99, 0xDEAD),
                "{label}: wrote past the runs"
            );
        }
        // Floats by `==`: NaNs never join a run, -0.0 joins 0.0.
        let x = [f32::NAN, f32::NAN, 0.0, -0.0, 1.0, 1.0, f32::INFINITY];
        let dx = d.upload(&x).unwrap();
        let mut y = d.alloc_filled(7, 5.0f32).unwrap();
        let count = unique(&d, &dx, &mut y).unwrap();
        let y = y.to_vec().unwrap();
        assert_eq!(count, 5, "{}: {y:?}", d.label());
        assert!(y[0].is_nan() && y[1].is_nan(), "{}: {y:?}", d.label());
        assert_eq!(y[2..5], [0.0, 1.0, f32::INFINITY], "{}", d.label());
    }
}

#[test]
fn short_outputs_and_mismatched_flags_are_errors_that_write_nothing() {
    for d in devices() {
        let x = d.upload(&(0..10_000u32).collect::<Vec<_>>()).unwrap();
        let flags = d.upload(&vec![1u32; 10_000]).unwrap();
        let mut short = d.alloc_filled(9_999, 7u32).unwrap();
        let e = copy_if(&d, &x, &flags, &mut short).unwrap_err();
        assert!(
            e.to_string().contains("9999") && e.to_string().contains("10000"),
            "{e}"
        );
        assert!(
            short.to_vec().unwrap().iter().all(|&v| v == 7),
            "{}",
            d.label()
        );
        let e = partition(&d, &x, &flags, &mut short).unwrap_err();
        assert!(e.to_string().contains("9999"), "{e}");
        let few_flags = d.upload(&[1u32; 3]).unwrap();
        let mut out = d.alloc::<u32>(10_000).unwrap();
        let e = copy_if(&d, &x, &few_flags, &mut out).unwrap_err();
        assert!(e.to_string().contains("flags have 3"), "{e}");
        // Byte flags: counted in bytes, not in the words a kernel reads them as.
        let few_bytes = d.upload(&[1u8; 9_999]).unwrap();
        let e = partition(&d, &x, &few_bytes, &mut out).unwrap_err();
        assert!(e.to_string().contains("flags have 9999"), "{e}");
        let bytes = d.upload(&vec![1u8; 10_000]).unwrap();
        let e = copy_if(&d, &x, &bytes, &mut short).unwrap_err();
        assert!(e.to_string().contains("9999"), "{e}");
        assert!(short.to_vec().unwrap().iter().all(|&v| v == 7));
        let mut counts = d.alloc_filled(3, 7u32).unwrap();
        let e = run_length_encode(&d, &x, &mut out, &mut counts).unwrap_err();
        assert!(e.to_string().contains("room for 3"), "{e}");
        assert_eq!(counts.to_vec().unwrap(), [7, 7, 7], "{}", d.label());
        // Empty input: nothing kept, nothing needed; the device still works.
        let empty = d.alloc::<u32>(0).unwrap();
        let mut none = d.alloc::<u32>(0).unwrap();
        assert_eq!(unique(&d, &empty, &mut none).unwrap(), 0);
        assert_eq!(copy_if(&d, &empty, &empty, &mut none).unwrap(), 0);
        assert_eq!(copy_if(&d, &x, &flags, &mut out).unwrap(), 10_000);
    }
}

/// On a stream, with f64 where the device has it: the same answers.
#[test]
fn selection_on_a_stream() {
    for d in devices() {
        let s = d.stream().unwrap();
        let x: Vec<f32> = (0..70_001).map(|k| (k / 7) as f32).collect();
        let dx = d.upload(&x).unwrap();
        let mut y = d.alloc::<f32>(70_001).unwrap();
        assert_eq!(unique(&s, &dx, &mut y).unwrap(), 10_001, "{}", d.label());
        let got = s.read(&y).unwrap();
        assert!((0..10_001).all(|k| got[k] == k as f32), "{}", d.label());
    }
}

/// The kernel each pinned selection form must run (by its name's start: the element type
/// and constants follow): a pin that were ignored would let the form tests check the
/// default form again and pass.
fn selection_kernel_of(form: &str) -> &'static str {
    match form {
        "single-pass" => "select_single_pass_u32_0_0_16",
        "single-pass-narrow" => "select_single_pass_u32_0_0_8",
        "three-pass" => "scatter_kept_u32_0_0",
        "three-pass-subgroup" => "scatter_kept_subgroup_u32_0_0_",
        other => panic!("no kernel known for the selection form {other}"),
    }
}

#[test]
fn each_pinned_selection_form_runs_its_own_kernels() {
    for d in devices() {
        if d.backend_kind() == dotcompute::BackendKind::Cpu {
            continue; // the CPU device selects in host code, without kernels
        }
        let n = 10_000u32;
        let x = d.upload(&(0..n).collect::<Vec<_>>()).unwrap();
        let flags = d
            .upload(&(0..n).map(|i| i % 3).collect::<Vec<_>>())
            .unwrap();
        let want: Vec<u32> = (0..n).filter(|i| i % 3 != 0).collect();
        for form in selection_forms(&d) {
            let mut y = d.alloc_filled(n as usize, 7u32).unwrap();
            d.synchronize().unwrap();
            d.take_timings();
            d.set_profiling(true);
            let kept = tune::with_candidate(form, || copy_if(&d, &x, &flags, &mut y)).unwrap();
            d.synchronize().unwrap();
            d.set_profiling(false);
            let labels: Vec<String> = d.take_timings().into_iter().map(|t| t.label).collect();
            let want_kernel = selection_kernel_of(form);
            assert!(
                labels.iter().any(|l| l.starts_with(want_kernel)),
                "{} {form}: ran {labels:?}, not {want_kernel}",
                d.label()
            );
            assert_eq!(kept, want.len(), "{} {form}", d.label());
            assert_eq!(
                y.to_vec().unwrap()[..kept],
                want[..],
                "{} {form}",
                d.label()
            );
        }
    }
}

/// With byte flags, the three passes' subgroup form counts them a word at a time
/// (`count_byte_flags`) wherever the subgroup width is fixed and at most 32, and still
/// keeps the right elements (sizes that end inside a flag word and inside a tile).
#[test]
fn byte_flags_are_counted_a_word_at_a_time_where_subgroups_allow() {
    let seed = seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    for d in devices() {
        if d.backend_kind() == dotcompute::BackendKind::Cpu {
            continue; // the CPU device selects in host code, without kernels
        }
        let word_count = matches!(d.info().caps.subgroup_size,
            Some([lo, hi]) if lo == hi && hi.is_power_of_two() && hi <= 32);
        for n in [1usize, 3, 4, 5, 2047, 2049, 4097, 70_001] {
            let x: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
            let bytes: Vec<u8> = (0..n)
                .map(|_| if rng.bool() { rng.u8(1..) } else { 0 })
                .collect();
            let want: Vec<u32> = x
                .iter()
                .zip(&bytes)
                .filter(|p| *p.1 != 0)
                .map(|p| *p.0)
                .collect();
            let (dx, df) = (d.upload(&x).unwrap(), d.upload(&bytes).unwrap());
            let mut y = d.alloc_filled(n, 0xdead_beefu32).unwrap();
            d.synchronize().unwrap();
            d.take_timings();
            d.set_profiling(true);
            let kept =
                tune::with_candidate("three-pass-subgroup", || copy_if(&d, &dx, &df, &mut y))
                    .unwrap();
            d.synchronize().unwrap();
            d.set_profiling(false);
            let labels: Vec<String> = d.take_timings().into_iter().map(|t| t.label).collect();
            let label = format!("{} n={n} seed {seed}: ran {labels:?}", d.label());
            if word_count {
                assert!(
                    labels.iter().any(|l| l.starts_with("count_byte_flags")),
                    "{label}"
                );
            }
            assert_eq!(kept, want.len(), "{label}");
            assert_eq!(y.to_vec().unwrap()[..kept], want[..], "{label}");
        }
    }
}

/// Above 2^26 elements the tiles' counts are many (more than 32,768) and hardware GPUs
/// scan them in the subgroup form's three passes instead of one group's chain: copy-if
/// and partition of such a size, by word and byte flags, every element checked.
#[test]
fn selections_past_two_to_the_26_scan_their_counts_in_passes() {
    let seed = seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    let n = (1usize << 26) + 4097;
    for d in devices().into_iter().filter(|d| !slow(d)) {
        let x: Vec<u32> = (0..n as u32).collect();
        let flags: Vec<u32> = (0..n).map(|_| u32::from(rng.u8(..) < 77)).collect();
        let want_kept: Vec<u32> = (0..n as u32).filter(|&i| flags[i as usize] != 0).collect();
        let mut want_part = want_kept.clone();
        want_part.extend((0..n as u32).filter(|&i| flags[i as usize] == 0));
        let bytes: Vec<u8> = flags.iter().map(|&f| f as u8).collect();
        let dx = d.upload(&x).unwrap();
        for form in selection_forms(&d) {
            let label = format!("{} {form} n={n} seed {seed}", d.label());
            tune::with_candidate(form, || {
                check_selection(&d, &dx, &flags, &want_kept, &want_part, &label);
                check_selection(&d, &dx, &bytes, &want_kept, &want_part, &label);
            });
        }
    }
}
