use crate::common::{devices, seed};
use dotcompute_ops::reduce::reduce;
use dotcompute_ops::scan::exclusive_sum;
use dotcompute_ops::select::copy_if;
use dotcompute_ops::softmax::softmax_rows;
use dotcompute_ops::sort::sort_pairs;
use dotcompute_ops::transpose::transpose;
use dotcompute_ops::{tune, Order, ReduceOp};

/// 16 threads share one device, each sorting (every algorithm in turn), scanning,
/// reducing, compacting (flags in words or bytes), transposing (both tile orders) and taking row softmaxes of its
/// own data on the device or on its own stream, dropping buffers as it goes: every
/// result is checked.
#[test]
fn sixteen_threads_share_a_device_with_no_wrong_result() {
    let seed = seed();
    for d in devices() {
        std::thread::scope(|scope| {
            for t in 0..16u64 {
                let d = d.clone();
                scope.spawn(move || {
                    let mut rng = fastrand::Rng::with_seed(seed ^ t);
                    let stream = d.stream().unwrap();
                    for round in 0..8 {
                        let n = rng.usize(1..20_000);
                        let keys: Vec<u32> = (0..n).map(|_| rng.u32(..1000)).collect();
                        let vals: Vec<u32> = (0..n as u32).collect();
                        let (mut dk, mut dv) = (d.upload(&keys).unwrap(), d.upload(&vals).unwrap());
                        let on_stream = round % 2 == 1;
                        // CUDA's single pass (whose look-back waits on other groups),
                        // the multisplit and the ranked tiles, apart and packed, take
                        // turns, each on the device and on a stream (where a name is
                        // absent the default runs; the 4-bit sort is left out: lavapipe
                        // takes minutes to compile it cold).
                        let algorithm = ["onesweep8", "multisplit8", "tiles8", "tiles8-packed"]
                            [(round / 2) % 4];
                        tune::with_candidate(algorithm, || {
                            if on_stream {
                                sort_pairs(&stream, &mut dk, &mut dv, Order::Ascending)
                            } else {
                                sort_pairs(&d, &mut dk, &mut dv, Order::Ascending)
                            }
                        })
                        .unwrap();
                        let mut want: Vec<(u32, u32)> = keys.iter().copied().zip(vals).collect();
                        want.sort_by_key(|p| p.0);
                        let got: Vec<(u32, u32)> = dk
                            .to_vec()
                            .unwrap()
                            .into_iter()
                            .zip(dv.to_vec().unwrap())
                            .collect();
                        assert_eq!(
                            got,
                            want,
                            "{} thread {t} round {round} seed {seed}",
                            d.label()
                        );
                        let mut ex = d.alloc_filled(n, 1u32).unwrap();
                        exclusive_sum(&d, &dk, &mut ex).unwrap();
                        drop(dv);
                        let total = reduce(&d, &dk, ReduceOp::Sum).unwrap();
                        let ex = ex.to_vec().unwrap();
                        let last = ex[n - 1].wrapping_add(want[n - 1].0);
                        assert_eq!(last, total, "{} thread {t} round {round}", d.label());
                        assert_eq!(total, keys.iter().sum::<u32>(), "{} thread {t}", d.label());
                        // Copy-if of the odd keys into room for all (CUDA's single pass),
                        // the flags in words and in bytes by turns.
                        let flags: Vec<u32> = want.iter().map(|p| p.0 & 1).collect();
                        let mut kept = d.alloc_filled(n, u32::MAX).unwrap();
                        let count = if round % 3 == 0 {
                            let bytes: Vec<u8> = flags.iter().map(|&f| f as u8).collect();
                            copy_if(&d, &dk, &d.upload(&bytes).unwrap(), &mut kept).unwrap()
                        } else {
                            copy_if(&d, &dk, &d.upload(&flags).unwrap(), &mut kept).unwrap()
                        };
                        let odd: Vec<u32> =
                            want.iter().map(|p| p.0).filter(|k| k & 1 == 1).collect();
                        let kept = kept.to_vec().unwrap();
                        assert_eq!(
                            kept[..count],
                            odd[..],
                            "{} thread {t} round {round}",
                            d.label()
                        );
                        // A matrix of the sorted keys: transposed on the stream, then
                        // its rows' softmax (rows of up to 600 take the held forms).
                        let cols = 1 + rng.usize(..n.min(600));
                        let rows = n / cols;
                        let m: Vec<u32> = want[..rows * cols].iter().map(|p| p.0).collect();
                        let dm = d.upload(&m).unwrap();
                        let mut mt = d.alloc_filled(rows * cols, u32::MAX).unwrap();
                        let order =
                            ["row-raster", "column-raster-64", "column-raster-128"][round % 3];
                        tune::with_candidate(order, || {
                            transpose(&stream, &dm, rows, cols, &mut mt)
                        })
                        .unwrap();
                        let mt = mt.to_vec().unwrap();
                        let transposed =
                            (0..rows * cols).all(|k| mt[(k % cols) * rows + k / cols] == m[k]);
                        assert!(
                            transposed,
                            "{} thread {t} round {round} {rows}x{cols}",
                            d.label()
                        );
                        let x: Vec<f32> = m.iter().map(|&k| k as f32 / 100.0).collect();
                        let dx = d.upload(&x).unwrap();
                        let mut y = d.alloc_filled(rows * cols, f32::NAN).unwrap();
                        softmax_rows(&stream, &dx, cols, &mut y).unwrap();
                        let y = y.to_vec().unwrap();
                        for (row, got) in x.chunks(cols).zip(y.chunks(cols)) {
                            let top = row.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v as f64));
                            let sum: f64 = row.iter().map(|&v| (v as f64 - top).exp()).sum();
                            for (&v, &g) in row.iter().zip(got) {
                                let want = (v as f64 - top).exp() / sum;
                                assert!(
                                    (g as f64 - want).abs() <= 2e-5 * want + 1e-30,
                                    "{} thread {t} round {round} softmax {g} want {want}",
                                    d.label()
                                );
                            }
                        }
                    }
                });
            }
        });
    }
}

#[test]
#[ignore = "timing probe"]
fn probe_times() {
    for d in crate::common::devices() {
        for n in [5000usize, 1 << 20] {
            let x = d.upload(&vec![1u32; n]).unwrap();
            let mut y = d.alloc::<u32>(n).unwrap();
            for rep in 0..2 {
                let t = std::time::Instant::now();
                exclusive_sum(&d, &x, &mut y).unwrap();
                y.to_vec().unwrap();
                let scan = t.elapsed();
                let t = std::time::Instant::now();
                reduce(&d, &x, ReduceOp::Sum).unwrap();
                let red = t.elapsed();
                let mut k = d.upload(&vec![3u32; n]).unwrap();
                let mut v = d.upload(&vec![3u32; n]).unwrap();
                let t = std::time::Instant::now();
                sort_pairs(&d, &mut k, &mut v, Order::Ascending).unwrap();
                k.to_vec().unwrap();
                eprintln!(
                    "{} n={n} rep {rep}: scan {scan:?} reduce {red:?} sort {:?}",
                    d.label(),
                    t.elapsed()
                );
            }
        }
    }
}

#[test]
#[ignore = "timing probe"]
fn probe_histogram() {
    for d in crate::common::devices() {
        let x = d.upload(&vec![1.5f32; 200_003]).unwrap();
        for bins in [7u32, 4096] {
            let mut h = d.alloc::<u32>(bins as usize).unwrap();
            let t = std::time::Instant::now();
            dotcompute_ops::histogram::histogram_even_f32(&d, &x, bins, 0.0, 10.0, &mut h).unwrap();
            h.to_vec().unwrap();
            eprintln!("{} bins {bins}: {:?}", d.label(), t.elapsed());
        }
    }
}

/// Wall-clock bandwidth of each transpose tile order over shapes that separate the
/// alignment of rows from the size (GPUs only; prints, checks nothing).
#[test]
#[ignore = "timing probe"]
fn probe_transpose() {
    for d in crate::common::devices() {
        if crate::common::slow(&d) {
            continue;
        }
        for (rows, cols) in [
            (4096usize, 4096usize),
            (4096, 4095),
            (4095, 4096),
            (8192, 8192),
            (8191, 8193),
            (8192, 8193),
            (8193, 8192),
            (16384, 16384),
            (16383, 16385),
        ] {
            let x = d.alloc_filled(rows * cols, 1u32).unwrap();
            let mut y = d.alloc::<u32>(rows * cols).unwrap();
            for order in crate::common::TRANSPOSE_ORDERS {
                let mut best = f64::MAX;
                for _ in 0..3 {
                    let t = std::time::Instant::now();
                    for _ in 0..20 {
                        tune::with_candidate(order, || transpose(&d, &x, rows, cols, &mut y))
                            .unwrap();
                    }
                    d.synchronize().unwrap();
                    best = best.min(t.elapsed().as_secs_f64() / 20.0);
                }
                eprintln!(
                    "{} transpose {rows}x{cols} {order}: {:.1} us, {:.0} GB/s",
                    d.label(),
                    best * 1e6,
                    (8 * rows * cols) as f64 / best / 1e9
                );
            }
        }
    }
}

/// 2^26 elements through CUDA's single passes (copy-if with half kept, the exclusive
/// scan) and the Onesweep sort of pairs a few times, for a profiler to attach to (`ncu
/// -k regex:single_pass`, `regex:onesweep_pass`); prints wall times, checks nothing.
#[test]
#[ignore = "profiling probe"]
fn probe_single_passes() {
    for d in crate::common::devices() {
        if d.backend_kind() != dotcompute::BackendKind::Cuda {
            continue;
        }
        let n = 1usize << 26;
        let mut rng = fastrand::Rng::with_seed(7);
        let x: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
        let flags: Vec<u32> = (0..n).map(|_| rng.u32(..2)).collect();
        let (dx, df) = (d.upload(&x).unwrap(), d.upload(&flags).unwrap());
        let mut out = d.alloc::<u32>(n).unwrap();
        for _ in 0..3 {
            let t = std::time::Instant::now();
            let kept = copy_if(&d, &dx, &df, &mut out).unwrap();
            let copy_if_time = t.elapsed();
            let t = std::time::Instant::now();
            exclusive_sum(&d, &dx, &mut out).unwrap();
            d.synchronize().unwrap();
            let scan_time = t.elapsed();
            let mut keys = d.upload(&x).unwrap();
            let mut values = d.upload(&x).unwrap();
            let t = std::time::Instant::now();
            sort_pairs(&d, &mut keys, &mut values, Order::Ascending).unwrap();
            d.synchronize().unwrap();
            eprintln!(
                "{}: copy-if kept {kept} in {copy_if_time:?}, scan {scan_time:?}, sort pairs {:?}",
                d.label(),
                t.elapsed()
            );
        }
    }
}

/// 16 threads share one device, each recording its own graph of a pair sort and an
/// exclusive sum of the sorted keys (`Graph::record`), replaying it with new keys on the
/// device or its own stream, and sorting directly between replays, dropping graphs and
/// buffers as it goes: every result is checked.
#[test]
fn sixteen_threads_record_and_replay_operation_graphs_with_no_wrong_result() {
    let seed = seed();
    for d in devices() {
        std::thread::scope(|scope| {
            for t in 0..16u64 {
                let d = d.clone();
                scope.spawn(move || {
                    let mut rng = fastrand::Rng::with_seed(seed ^ t);
                    let stream = d.stream().unwrap();
                    for round in 0..3 {
                        let n = rng.usize(1..20_000);
                        let what =
                            format!("{} thread {t} round {round} n {n} seed {seed}", d.label());
                        let mut keys = d.alloc_filled(n, 0u32).unwrap();
                        let mut values = d.alloc_filled(n, 0u32).unwrap();
                        let mut sums = d.alloc_filled(n, 0u32).unwrap();
                        let mut graph = dotcompute::Graph::new(&d);
                        let recorded = graph
                            .record((&mut keys, &mut values, &mut sums), &[], |q, (k, v, s)| {
                                sort_pairs(q, k, v, Order::Ascending)?;
                                exclusive_sum(q, k, s)
                            })
                            .unwrap();
                        let (gk, gv, gs) = recorded.buffers;
                        let mut exec = graph.instantiate().unwrap();
                        for replay in 0..2 {
                            let k: Vec<u32> = (0..n).map(|_| rng.u32(..1000)).collect();
                            exec.write(gk, &k).unwrap();
                            exec.write(gv, &(0..n as u32).collect::<Vec<_>>()).unwrap();
                            exec.fill(gs, u32::MAX).unwrap();
                            if (round + replay) % 2 == 1 {
                                exec.launch(&stream).unwrap();
                            } else {
                                exec.launch(&d).unwrap();
                            }
                            let mut want: Vec<(u32, u32)> = k.iter().copied().zip(0..).collect();
                            want.sort_by_key(|p| p.0);
                            let got_k = exec.read(gk).unwrap();
                            let got_v = exec.read(gv).unwrap();
                            let got_s = exec.read(gs).unwrap();
                            let mut acc = 0u32;
                            for (i, &(wk, wv)) in want.iter().enumerate() {
                                assert_eq!(
                                    (got_k[i], got_v[i]),
                                    (wk, wv),
                                    "{what} replay {replay} [{i}]"
                                );
                                assert_eq!(got_s[i], acc, "{what} replay {replay} sum [{i}]");
                                acc = acc.wrapping_add(wk);
                            }
                            // A direct sort of other data between replays.
                            let other: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
                            let mut direct = d.upload(&other).unwrap();
                            dotcompute_ops::sort::sort_keys(
                                &stream,
                                &mut direct,
                                Order::Descending,
                            )
                            .unwrap();
                            let mut want_other = other;
                            want_other.sort_unstable_by(|a, b| b.cmp(a));
                            assert_eq!(direct.to_vec().unwrap(), want_other, "{what} direct");
                        }
                        drop(exec);
                        drop(sums);
                        // The buffers are the thread's again.
                        assert!(keys.to_vec().unwrap().is_sorted(), "{what}");
                    }
                });
            }
        });
    }
}
