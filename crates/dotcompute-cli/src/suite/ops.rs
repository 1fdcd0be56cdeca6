//! `dotcompute-ops` (issue 28): reduce, scan and radix sort on typed buffers, each against
//! a device-to-device copy of the same bytes measured in the same run (the bandwidth
//! ceiling), results checked against plain Rust. Sizes: 2^28 elements on GPUs, 2^24 on
//! the CPU (2^22 with `--quick`), as the speed table.

use super::memory::{versus_copy, CopyRef, COPY};
use super::{measure_all, Bench, Ctx, Figure, Res, Stats, Unit};
use dotcompute::{BackendKind, Buffer};
use dotcompute_ops::{histogram, reduce, scan, select, softmax, sort, transpose, Order, ReduceOp};

pub fn benches() -> Vec<Bench> {
    vec![Bench {
        name: "ops",
        what: "library operations (reduce, scan, copy-if, radix sort, histogram, softmax, transpose) against a copy, and the tuned matmul against Device::matmul",
        run: ops,
    }]
}

fn size(ctx: &Ctx) -> usize {
    match (ctx.quick, ctx.kind()) {
        (true, _) => 1 << 22,
        (false, BackendKind::Cpu) => 1 << 24,
        _ => 1 << 28,
    }
}

fn label(n: usize) -> String {
    format!("2^{}", n.trailing_zeros())
}

fn ops(ctx: &Ctx) -> Res<Vec<Figure>> {
    // `DOTCOMPUTE_BENCH_OPS` names the parts to run (all by default).
    let which = dotcompute::settings::choices::BENCH_OPS;
    let parts = which
        .read_list()
        .map_err(super::s)?
        .unwrap_or_else(|| which.values.to_vec());
    let mut figs = Vec::new();
    if parts.contains(&"reduce") {
        figs.extend(reduce_figures(ctx)?);
    }
    if parts.contains(&"scan") || parts.contains(&"copy-if") {
        figs.extend(scan_and_copy_if_figures(ctx, &parts)?);
    }
    if parts.contains(&"sort") {
        figs.extend(sort_figures(ctx)?);
    }
    figs.extend(rows_ops(ctx, &parts)?);
    if ctx.kind() == BackendKind::Cpu && parts.contains(&"rayon") {
        figs.extend(against_rayon(ctx)?);
    }
    if parts.contains(&"graph") {
        figs.extend(graph_figures(ctx)?);
    }
    Ok(figs)
}

/// A pipeline of operations (sort pairs, exclusive sum of the sorted keys, their total)
/// recorded once into a graph (`Graph::record`) and replayed, against the same three
/// calls made directly on the same buffers in the same run: host wall time per pipeline,
/// 10 pipelines and one `synchronize()` a sample. What a graph saves is the host's work
/// per launch (planning, binding, submitting), so small sizes show it most.
fn graph_figures(ctx: &Ctx) -> Res<Vec<Figure>> {
    let d = ctx.device;
    let s = super::s;
    let mut rng = fastrand::Rng::with_seed(131_131);
    let mut figs = Vec::new();
    let sizes: &[usize] = if ctx.kind() == BackendKind::Cpu {
        &[1 << 12, 1 << 16]
    } else {
        &[1 << 12, 1 << 16, 1 << 20]
    };
    for &n in sizes {
        ctx.step(&format!("recorded pipeline, {} pairs", label(n)));
        let keys: Vec<u32> = (0..n).map(|_| rng.u32(..1 << 24)).collect();
        let values: Vec<u32> = (0..n as u32).collect();
        let pipeline = |q: &dotcompute::Recorder,
                        k: &mut dotcompute::Buffer<u32>,
                        v: &mut dotcompute::Buffer<u32>,
                        sums: &mut dotcompute::Buffer<u32>,
                        total: &mut dotcompute::Buffer<u32>| {
            sort::sort_pairs(q, k, v, Order::Ascending)?;
            scan::exclusive_sum(q, k, sums)?;
            reduce::reduce_into(q, k, ReduceOp::Sum, total)
        };
        // The direct calls' buffers, and the graph's.
        let (mut dk, mut dv) = (d.upload(&keys).map_err(s)?, d.upload(&values).map_err(s)?);
        let (mut dsums, mut dtotal) =
            (d.alloc::<u32>(n).map_err(s)?, d.alloc::<u32>(1).map_err(s)?);
        let (mut gk, mut gv) = (d.upload(&keys).map_err(s)?, d.upload(&values).map_err(s)?);
        let (mut gsums, mut gtotal) =
            (d.alloc::<u32>(n).map_err(s)?, d.alloc::<u32>(1).map_err(s)?);
        // One direct run first: the tuner's choices (the sort's algorithm on CUDA), made by
        // measuring, are then cached, and the recording takes the same ones.
        sort::sort_pairs(d, &mut dk, &mut dv, Order::Ascending).map_err(s)?;
        scan::exclusive_sum(d, &dk, &mut dsums).map_err(s)?;
        let mut graph = dotcompute::Graph::new(d);
        let recorded = graph
            .record(
                (&mut gk, &mut gv, &mut gsums, &mut gtotal),
                &[],
                |q, (k, v, sums, total)| pipeline(q, k, v, sums, total),
            )
            .map_err(s)?;
        let (hk, hv, hsums, htotal) = recorded.buffers;
        let mut exec = graph.instantiate().map_err(s)?;
        let times = super::measure_batched(
            ctx,
            10,
            &mut [&mut || exec.launch(d).map_err(s), &mut || {
                sort::sort_pairs(d, &mut dk, &mut dv, Order::Ascending).map_err(s)?;
                scan::exclusive_sum(d, &dk, &mut dsums).map_err(s)?;
                reduce::reduce_into(d, &dk, ReduceOp::Sum, &mut dtotal).map_err(s)
            }],
        )?;
        // Both sorted the same keys (already sorted after the first run): the same
        // results, and the right ones.
        let mut want: Vec<(u32, u32)> = keys.iter().copied().zip(values.iter().copied()).collect();
        want.sort_by_key(|p| p.0);
        let want_keys: Vec<u32> = want.iter().map(|p| p.0).collect();
        let got = (
            exec.read(hk).map_err(s)?,
            exec.read(hv).map_err(s)?,
            exec.read(hsums).map_err(s)?,
            exec.read(htotal).map_err(s)?,
        );
        let direct = (
            dk.to_vec().map_err(s)?,
            dv.to_vec().map_err(s)?,
            dsums.to_vec().map_err(s)?,
            dtotal.to_vec().map_err(s)?,
        );
        if got != direct || got.0 != want_keys {
            return Err(format!(
                "the recorded pipeline of {n} pairs disagrees with the direct calls or the reference"
            ));
        }
        figs.push(
            ctx.figure(
                "ops",
                format!("recorded pipeline, {} pairs", label(n)),
                n as f64,
                Unit::Us,
            )
            .ours(
                "Graph::record of sort_pairs + exclusive_sum + reduce_into, replayed",
                1.0,
                times[0].clone(),
            )
            .against("the same three calls made directly", 1.0, times[1].clone())
            .note(format!(
                "{} nodes; host wall time per pipeline, 10 a sample",
                exec.levels().iter().sum::<usize>()
            ))
            .build(),
        );
    }
    Ok(figs)
}

/// Reduce sum of f32: bytes read against the copy's bytes moved.
fn reduce_figures(ctx: &Ctx) -> Res<Vec<Figure>> {
    let n = size(ctx);
    let d = ctx.device;
    let s = super::s;
    let mut figs = Vec::new();
    ctx.step(&format!("reduce sum {} f32", label(n)));
    let x: Vec<f32> = (0..n).map(|i| (i % 17) as f32 * 0.25).collect();
    let want: f64 = x.iter().map(|&v| v as f64).sum();
    let dx = d.upload(&x).map_err(s)?;
    drop(x);
    let mut total = d.alloc_filled(1, f32::NAN).map_err(s)?;
    let times: [Stats; 2] = versus_copy(ctx, n, || {
        reduce::reduce_into(d, &dx, ReduceOp::Sum, &mut total).map_err(s)
    })
    .map(|(a, b)| [a, b])?;
    let got = total.to_vec().map_err(s)?[0] as f64;
    if ((got - want) / want).abs() > 1e-5 {
        return Err(format!("reduce sum gave {got}, expected {want}"));
    }
    drop(dx);
    figs.push(
        ctx.figure(
            "ops",
            format!("reduce sum {} f32", label(n)),
            n as f64,
            Unit::GBs,
        )
        .ours("dotcompute_ops::reduce", 4.0 * n as f64, times[0].clone())
        .against(COPY, CopyRef::bytes(n), times[1].clone())
        .target("≥ 1.0 (bytes read / copy's bytes moved)")
        .build(),
    );
    Ok(figs)
}

/// Exclusive scan of u32 in each form the device has, then copy-if of half the
/// elements, each against a copy of as many 4-byte elements (bytes read + written per
/// second), verified.
fn scan_and_copy_if_figures(ctx: &Ctx, parts: &[&str]) -> Res<Vec<Figure>> {
    let n = size(ctx);
    let d = ctx.device;
    let s = super::s;
    let mut rng = fastrand::Rng::with_seed(28);
    let mut figs = Vec::new();
    let copy_bytes = CopyRef::bytes(n);

    // exclusive scan u32 (reads n, writes n: the copy's bytes), in each form the device
    // has (CUDA's single pass, and the three passes every device runs).
    let keys: Vec<u32> = (0..n).map(|_| rng.u32(..1000)).collect();
    let dk = d.upload(&keys).map_err(s)?;
    let mut out = d.alloc_filled(n, 0u32).map_err(s)?;
    let forms: &[(&str, &str)] = if ctx.kind() == BackendKind::Cuda {
        &[
            (
                "single-pass",
                "single pass, decoupled look-back, wide tiles",
            ),
            ("single-pass-narrow", "single pass, half-length tiles"),
            ("three-pass", "reduce-then-scan"),
            ("three-pass-narrow", "reduce-then-scan, half-length tiles"),
            (
                "three-pass-subgroup",
                "reduce-then-scan, subgroups in registers",
            ),
            ("three-pass-subgroup-narrow", "subgroups, half-length tiles"),
            (
                "three-pass-subgroup-vec4",
                "subgroups, four elements a lane in 16-byte accesses",
            ),
        ]
    } else if ctx.kind() == BackendKind::Cpu {
        // The CPU device scans host memory in the tuner's form (pinned apart in the rows
        // against rayon); a GPU form's name would pin nothing there.
        &[("host", "host memory, the tuner's form")]
    } else {
        &[
            ("three-pass", "reduce-then-scan"),
            ("three-pass-narrow", "reduce-then-scan, half-length tiles"),
            (
                "three-pass-subgroup",
                "reduce-then-scan, subgroups in registers",
            ),
            ("three-pass-subgroup-narrow", "subgroups, half-length tiles"),
            (
                "three-pass-subgroup-vec4",
                "subgroups, four elements a lane in 16-byte accesses",
            ),
        ]
    };
    let scan_forms = if parts.contains(&"scan") { forms } else { &[] };
    for &(form, about) in scan_forms {
        ctx.step(&format!("exclusive scan {} u32, {form}", label(n)));
        let times: [Stats; 2] = versus_copy(ctx, n, || {
            dotcompute_ops::tune::with_candidate(form, || scan::exclusive_sum(d, &dk, &mut out))
                .map_err(s)
        })
        .map(|(a, b)| [a, b])?;
        let got = out.to_vec().map_err(s)?;
        let mut acc = 0u32;
        for (i, (&g, &k)) in got.iter().zip(&keys).enumerate() {
            if g != acc {
                return Err(format!(
                    "exclusive scan ({form}) wrong at {i}: {g}, expected {acc}"
                ));
            }
            acc = acc.wrapping_add(k);
        }
        figs.push(
            ctx.figure(
                "ops",
                format!("exclusive scan {} u32, {form}", label(n)),
                n as f64,
                Unit::GBs,
            )
            .ours(
                &format!("dotcompute_ops::scan ({about})"),
                copy_bytes,
                times[0].clone(),
            )
            .against(COPY, copy_bytes, times[1].clone())
            .target("≥ 0.85")
            .build(),
        );
    }
    drop(out);

    // copy-if with half the flags set (one in two at random), in words and in bytes (as
    // a `bool` array holds them, and as CUB's selection benchmark passes them).
    let flags: Vec<u32> = (0..n).map(|_| rng.u32(..2)).collect();
    let want: Vec<u32> = keys
        .iter()
        .zip(&flags)
        .filter(|p| *p.1 != 0)
        .map(|p| *p.0)
        .collect();
    drop(keys);
    // Selection has the scan's forms but its narrow three passes and quads (pinning those
    // names would measure its default three passes again under another label).
    let selection_forms: Vec<(&str, &str)> = forms
        .iter()
        .copied()
        .filter(|(form, _)| {
            let scan_only = form.ends_with("-vec4")
                || (form.starts_with("three-pass") && form.ends_with("-narrow"));
            !scan_only && parts.contains(&"copy-if")
        })
        .collect();
    // Where a single pass may run (CUDA) the tuner chooses among the forms: its choice
    // too (a name no form has pins nothing).
    let mut selection_forms = selection_forms;
    if ctx.kind() == BackendKind::Cpu && !selection_forms.is_empty() {
        selection_forms = vec![("host", "host memory, each chunk counted, then written")];
    }
    if ctx.kind() == BackendKind::Cuda && !selection_forms.is_empty() {
        selection_forms.push(("tuned", "the tuner's choice of the forms above"));
    }
    if !selection_forms.is_empty() {
        let bytes: Vec<u8> = flags.iter().map(|&f| f as u8).collect();
        figs.extend(copy_if_figures(ctx, &dk, &flags, &want, &selection_forms)?);
        figs.extend(copy_if_figures(ctx, &dk, &bytes, &want, &selection_forms)?);
    }
    Ok(figs)
}

/// Copy-if of `dk` by `flags` (`u32` or `u8`) in each of `forms`, against a copy of as
/// many 4-byte elements: the figure is elements per second against the copy's, so bytes
/// are counted as the copy's (the flags and the kept elements written are traffic the
/// operation pays for). Every run's result is checked against `want`.
fn copy_if_figures<F: select::Flag>(
    ctx: &Ctx,
    dk: &Buffer<u32>,
    flags: &[F],
    want: &[u32],
    forms: &[(&str, &str)],
) -> Res<Vec<Figure>> {
    let (d, s, n) = (ctx.device, super::s, dk.len());
    let copy_bytes = CopyRef::bytes(n);
    let df = d.upload(flags).map_err(s)?;
    let mut out = d.alloc_filled(n, 0u32).map_err(s)?;
    let flag_type = std::any::type_name::<F>();
    let mut figs = Vec::new();
    for &(form, about) in forms {
        let what = format!(
            "copy-if {} u32, {flag_type} flags, 50% kept, {form}",
            label(n)
        );
        ctx.step(&what);
        let mut kept = 0;
        let times: [Stats; 2] = versus_copy(ctx, n, || {
            kept = dotcompute_ops::tune::with_candidate(form, || {
                select::copy_if(d, dk, &df, &mut out)
            })
            .map_err(s)?;
            Ok(())
        })
        .map(|(a, b)| [a, b])?;
        if kept != want.len() || out.to_vec().map_err(s)?[..kept] != want[..] {
            return Err(format!(
                "{what}: kept {kept}, expected {}, or a wrong element",
                want.len()
            ));
        }
        figs.push(
            ctx.figure("ops", what, n as f64, Unit::GBs)
                .ours(
                    &format!("dotcompute_ops::select::copy_if ({about}, {flag_type} flags)"),
                    copy_bytes,
                    times[0].clone(),
                )
                .against(COPY, copy_bytes, times[1].clone())
                .target("≥ 0.8 (elements per second against the copy's)")
                .build(),
        );
    }
    Ok(figs)
}

/// Radix sort of u32 keys, then pairs, by each algorithm in turn (GB/s of keys sorted =
/// 4 bytes per key; GKey/s in the note), against a copy of as many elements.
fn sort_figures(ctx: &Ctx) -> Res<Vec<Figure>> {
    let n = size(ctx);
    let d = ctx.device;
    let s = super::s;
    let mut rng = fastrand::Rng::with_seed(282_828);
    let mut figs = Vec::new();
    let copy_bytes = CopyRef::bytes(n);
    let full: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
    let mut want = full.clone();
    want.sort_unstable();
    // Each algorithm the library would run here pinned in turn (the tuner's candidates,
    // `sort_algorithms`; the CPU device sorts on the host, its row named "host").
    let mut algorithms = sort::sort_algorithms::<u32, u32>(d, n, true);
    // Forms for pairs only (packed pairs) are not timed on keys: pinned there, the
    // default would run under their name.
    let for_keys = sort::sort_algorithms::<u32, u32>(d, n, false);
    if algorithms.is_empty() {
        algorithms.push("host");
    } else if let Some(only) = dotcompute::settings::choices::BENCH_SORTS
        .read_list()
        .map_err(super::s)?
    {
        // `DOTCOMPUTE_BENCH_SORTS` narrows a GPU's algorithms (all by default).
        algorithms.retain(|a| only.contains(a));
    }
    for algorithm in algorithms {
        let about = match algorithm {
            "onesweep8" => "8-bit LSD, one pass per digit, decoupled look-back",
            "multisplit8" => "8-bit LSD, warp multisplit, reduce-then-scan",
            "tiles8" => "8-bit LSD, ranked tiles staged in shared memory, reduce-then-scan",
            "tiles8-packed" => "tiles8 with each pair moved as one 8-byte element between passes",
            "radix4" => "4-bit LSD, shared-table ranks, reduce-then-scan",
            "host" => "LSD radix sort on the host, in the buffers' memory",
            // A name the library added and this list lacks: shown as it is.
            other => other,
        };
        for pairs in [false, true] {
            if !pairs && !for_keys.is_empty() && !for_keys.contains(&algorithm) {
                continue;
            }
            let what = if pairs { "pairs" } else { "keys" };
            ctx.step(&format!("radix sort {} u32 {what}, {algorithm}", label(n)));
            let mut sk = d.alloc_filled(n, 0u32).map_err(s)?;
            let mut sv = d.alloc_filled(if pairs { n } else { 1 }, 0u32).map_err(s)?;
            let times: [Stats; 2] = versus_copy(ctx, n, || {
                // Reloading the unsorted keys is bookkeeping (an upload), not timed on
                // device clocks.
                sk.write(&full).map_err(s)?;
                dotcompute_ops::tune::with_candidate(algorithm, || {
                    if pairs {
                        sv.write(&full)?;
                        sort::sort_pairs(d, &mut sk, &mut sv, Order::Ascending)
                    } else {
                        sort::sort_keys(d, &mut sk, Order::Ascending)
                    }
                })
                .map_err(s)
            })
            .map(|(a, b)| [a, b])?;
            if sk.to_vec().map_err(s)? != want {
                return Err(format!(
                    "radix sort ({algorithm}) of {what} gave a wrong order"
                ));
            }
            if pairs && sv.to_vec().map_err(s)? != want {
                return Err(format!(
                    "radix sort ({algorithm}) of pairs moved a value away from its key"
                ));
            }
            let gkeys = n as f64 / times[0].median_s / 1e9;
            figs.push(
                ctx.figure(
                    "ops",
                    format!("radix sort {} u32 {what}, {algorithm}", label(n)),
                    n as f64,
                    Unit::GBs,
                )
                .ours(&format!("dotcompute_ops::sort ({about})"), 4.0 * n as f64, times[0].clone())
                .against(COPY, copy_bytes, times[1].clone())
                .note(format!(
                    "{gkeys:.2} GKey/s; the issue's target on CUDA is ≥ 35 (keys) / 25 (pairs) GKey/s"
                ))
                .build(),
            );
        }
    }
    drop(full);
    drop(want);
    Ok(figs)
}

/// The tuner's recorded winner for `key` (`tune::key`), or `default` where it did not
/// tune (autotune off, a small input, no cache file).
fn tuner_choice(key: &str) -> String {
    let winner = || -> Option<String> {
        let text = std::fs::read_to_string(dotcompute_ops::tune::file().ok()??).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        Some(v.get(key)?.get("winner")?.as_str()?.to_string())
    };
    winner().unwrap_or_else(|| "default".into())
}

/// A histogram row's label: the kernels and the tuner's choice on GPUs; the CPU device
/// counts on host memory instead (`dotcompute_ops::host`).
fn histogram_label(ctx: &Ctx, kernel: &str, key: &str) -> String {
    if ctx.kind() == BackendKind::Cpu {
        return "dotcompute_ops::histogram (host memory, rayon chunks)".into();
    }
    format!(
        "dotcompute_ops::histogram ({kernel}; tuner: {})",
        tuner_choice(key)
    )
}

/// Histogram, softmax and transpose, each against a copy of the same bytes moved, and
/// the tuned matmul: those of them in `parts`.
fn rows_ops(ctx: &Ctx, parts: &[&str]) -> Res<Vec<Figure>> {
    let big = !ctx.quick && ctx.kind() != BackendKind::Cpu;
    let mut figs = Vec::new();
    if parts.contains(&"histogram") {
        figs.extend(histogram_figures(ctx, &mut fastrand::Rng::with_seed(2828))?);
    }
    if parts.contains(&"softmax") {
        figs.extend(softmax_figures(
            ctx,
            &mut fastrand::Rng::with_seed(2829),
            big,
        )?);
    }
    if parts.contains(&"transpose") {
        figs.extend(transpose_figures(ctx)?);
    }
    if parts.contains(&"matmul") {
        figs.extend(matmul_figures(ctx, big)?);
    }
    Ok(figs)
}

/// Histograms of 256 even bins: f32 samples, then bytes.
fn histogram_figures(ctx: &Ctx, rng: &mut fastrand::Rng) -> Res<Vec<Figure>> {
    let d = ctx.device;
    let s = super::s;
    let mut figs = Vec::new();
    // Histogram, 256 even bins of f32 samples (bytes read against the copy's moved).
    let n = size(ctx);
    ctx.step(&format!("histogram {} f32, 256 bins", label(n)));
    let x: Vec<f32> = (0..n).map(|_| rng.f32()).collect();
    let mut want = vec![0u32; 256];
    for &v in &x {
        want[((v * 256.0).floor() as usize).min(255)] += 1;
    }
    let dx = d.upload(&x).map_err(s)?;
    drop(x);
    let mut h = d.alloc_filled(256, 0u32).map_err(s)?;
    let times: [Stats; 2] = versus_copy(ctx, n, || {
        histogram::histogram_even_f32(d, &dx, 256, 0.0, 1.0, &mut h).map_err(s)
    })
    .map(|(a, b)| [a, b])?;
    if h.to_vec().map_err(s)? != want {
        return Err("histogram counts are wrong".into());
    }
    drop(dx);
    figs.push(
        ctx.figure(
            "ops",
            format!("histogram {} f32, 256 bins", label(n)),
            n as f64,
            Unit::GBs,
        )
        .ours(
            &histogram_label(
                ctx,
                "shared atomics",
                &dotcompute_ops::tune::key(d, "histogram_even_f32", "f32", n),
            ),
            4.0 * n as f64,
            times[0].clone(),
        )
        .against(COPY, CopyRef::bytes(n), times[1].clone())
        .target("≥ 0.9 (bytes read / copy's bytes moved)")
        .build(),
    );
    // Histogram, 256 bins of byte samples: n bytes read, against a copy of as many bytes.
    ctx.step(&format!("histogram {} u8, 256 bins", label(n)));
    let x: Vec<u8> = (0..n).map(|_| rng.u8(..)).collect();
    let mut want = vec![0u32; 256];
    for &v in &x {
        want[v as usize] += 1;
    }
    let dx = d.upload(&x).map_err(s)?;
    drop(x);
    let times: [Stats; 2] = versus_copy(ctx, n / 4, || {
        histogram::histogram_even_u8(d, &dx, 256, 0, 256, &mut h).map_err(s)
    })
    .map(|(a, b)| [a, b])?;
    if h.to_vec().map_err(s)? != want {
        return Err("byte histogram counts are wrong".into());
    }
    drop(dx);
    figs.push(
        ctx.figure(
            "ops",
            format!("histogram {} u8, 256 bins", label(n)),
            n as f64,
            Unit::GBs,
        )
        .ours(
            &histogram_label(
                ctx,
                "shared atomics",
                &dotcompute_ops::tune::key(d, "histogram_even_u8", "u8", n / 4),
            ),
            n as f64,
            times[0].clone(),
        )
        .against(COPY, CopyRef::bytes(n / 4), times[1].clone())
        .target("≥ 0.9 (bytes read / copy's bytes moved)")
        .build(),
    );
    Ok(figs)
}

/// Row softmax in each form the device has, at the shapes (`big`) or a small one.
fn softmax_figures(ctx: &Ctx, rng: &mut fastrand::Rng, big: bool) -> Res<Vec<Figure>> {
    let d = ctx.device;
    let s = super::s;
    let mut figs = Vec::new();
    // Softmax per row, each form pinned in turn (the held forms need 32-lane subgroups;
    // elsewhere the pin falls back to the read-twice form, so it runs once).
    let shapes: &[(usize, usize)] = if big {
        &[(8192, 1000), (16384, 16384)]
    } else {
        &[(2048, 1000)]
    };
    let held = d.info().caps.subgroup_size == Some([32, 32]);
    // "tuned" pins no form: the tuner's choice runs.
    let forms: &[(&str, &str)] = if held {
        &[
            ("tuned", "the tuner's choice"),
            ("held", "the row held in registers, read once"),
            ("held, vector loads", "held, 16-byte loads and stores"),
            (
                "held, vector loads, 512 threads a row",
                "held, 16-byte accesses, 512 threads a row",
            ),
            ("read-twice", "online, two reads"),
        ]
    } else {
        &[("read-twice", "online, two reads")]
    };
    for &(rows, cols) in shapes {
        // A subgroup holds a row of up to 1,024 columns: no forms by threads a row.
        let forms = forms
            .iter()
            .filter(|f| cols > 1024 || !f.0.contains("threads a row"));
        let m = rows * cols;
        let x: Vec<f32> = (0..m).map(|_| (rng.f32() - 0.5) * 10.0).collect();
        let dx = d.upload(&x).map_err(s)?;
        let mut y = d.alloc_filled(m, f32::NAN).map_err(s)?;
        for &(form, about) in forms {
            ctx.step(&format!("softmax {rows}×{cols}, {form}"));
            let times: [Stats; 2] = versus_copy(ctx, m, || {
                dotcompute_ops::tune::with_candidate(form, || {
                    softmax::softmax_rows(d, &dx, cols, &mut y)
                })
                .map_err(s)
            })
            .map(|(a, b)| [a, b])?;
            super::memory::check_softmax(&x, cols, &y.to_vec().map_err(s)?)?;
            figs.push(
                ctx.figure(
                    "ops",
                    format!("softmax {rows}×{cols} f32, {form}"),
                    m as f64,
                    Unit::GBs,
                )
                .ours(
                    &format!("dotcompute_ops::softmax ({about})"),
                    8.0 * m as f64,
                    times[0].clone(),
                )
                .against(COPY, CopyRef::bytes(m), times[1].clone())
                .target("≥ 0.9")
                .note("bytes: the row read once and written once, as the copy")
                .build(),
            );
        }
    }
    Ok(figs)
}

/// A transpose row's label: the kernel and the tuner's choice of tile order on GPUs;
/// the CPU device transposes host memory instead (`dotcompute_ops::host`).
fn transpose_label(ctx: &Ctx, elements: usize) -> String {
    let ty = format!("{:?}", <u32 as dotcompute::Element>::TYPE);
    if ctx.kind() == BackendKind::Cpu {
        let key = dotcompute_ops::tune::key(
            ctx.device,
            "transpose",
            &format!("{ty} on the host"),
            elements,
        );
        return format!(
            "dotcompute_ops::transpose (host memory, by tiles; 8 × 8 AVX blocks where the CPU has AVX; tuner: {})",
            tuner_choice(&key)
        );
    }
    let key = dotcompute_ops::tune::key(ctx.device, "transpose", &ty, elements);
    format!(
        "dotcompute_ops::transpose (padded shared tile; tuner: {})",
        tuner_choice(&key)
    )
}

/// Transposes at the shapes, or a small one with `--quick`, the tuner choosing.
fn transpose_figures(ctx: &Ctx) -> Res<Vec<Figure>> {
    let d = ctx.device;
    let s = super::s;
    let mut figs = Vec::new();
    // Transpose: every element read once and written once, as the copy. The issue's
    // shapes on every device (the CPU's target is set at them too); small with `--quick`.
    let shapes: &[(usize, usize)] = if !ctx.quick {
        &[(4096, 4095), (8191, 8193)]
    } else {
        &[(1024, 1023)]
    };
    for &(rows, cols) in shapes {
        let m = rows * cols;
        ctx.step(&format!("transpose {rows}×{cols}"));
        let x: Vec<u32> = (0..m as u32).collect();
        let dx = d.upload(&x).map_err(s)?;
        let mut y = d.alloc_filled(m, 0u32).map_err(s)?;
        let times: [Stats; 2] = versus_copy(ctx, m, || {
            transpose::transpose(d, &dx, rows, cols, &mut y).map_err(s)
        })
        .map(|(a, b)| [a, b])?;
        let got = y.to_vec().map_err(s)?;
        if (0..m).any(|k| got[(k % cols) * rows + k / cols] != x[k]) {
            return Err(format!("transpose {rows}×{cols} is wrong"));
        }
        figs.push(
            ctx.figure(
                "ops",
                format!("transpose {rows}×{cols} u32"),
                m as f64,
                Unit::GBs,
            )
            .ours(&transpose_label(ctx, m), 8.0 * m as f64, times[0].clone())
            .against(COPY, CopyRef::bytes(m), times[1].clone())
            .target(if ctx.kind() == BackendKind::Cpu {
                "≥ 0.8"
            } else {
                "≥ 0.9"
            })
            .build(),
        );
    }
    Ok(figs)
}

/// The tuned product (`dotcompute_ops::matmul`) against `Device::matmul` (the vendor
/// library where there is one) on one square and two thin shapes; the tuner's choice in
/// the label. Checked against f64 on the host at 64 sampled elements.
fn matmul_figures(ctx: &Ctx, big: bool) -> Res<Vec<Figure>> {
    use dotcompute::Precision;
    let d = ctx.device;
    let s = super::s;
    let shapes: &[(usize, usize, usize)] = if big {
        &[(4096, 4096, 4096), (8192, 8192, 64), (64, 8192, 8192)]
    } else {
        &[(512, 512, 512), (1024, 1024, 32)]
    };
    let mut rng = fastrand::Rng::with_seed(3030);
    let mut figs = Vec::new();
    for &(m, n, k) in shapes {
        ctx.step(&format!("matmul {m}×{n}×{k} f32"));
        let a: Vec<f32> = (0..m * k).map(|_| rng.f32() - 0.5).collect();
        let b: Vec<f32> = (0..k * n).map(|_| rng.f32() - 0.5).collect();
        let (da, db) = (d.upload(&a).map_err(s)?, d.upload(&b).map_err(s)?);
        let mut c = d.alloc_filled(m * n, f32::NAN).map_err(s)?;
        let mut c_ref = d.alloc_filled(m * n, f32::NAN).map_err(s)?;
        let full = Precision::Full;
        let mut tuned = || {
            dotcompute_ops::matmul::matmul(d, &da, &db, &mut c, m, n, k, full)
                .map(drop)
                .map_err(s)
        };
        let mut vendor = || d.matmul(&da, &db, &mut c_ref, m, n, k).map(drop).map_err(s);
        let times = measure_all(ctx, &mut [&mut tuned, &mut vendor])?;
        let got = c.to_vec().map_err(s)?;
        for _ in 0..64 {
            let (i, j) = (rng.usize(..m), rng.usize(..n));
            let want: f64 = (0..k)
                .map(|l| a[i * k + l] as f64 * b[l * n + j] as f64)
                .sum();
            let bound: f64 = (0..k)
                .map(|l| (a[i * k + l] as f64 * b[l * n + j] as f64).abs())
                .sum::<f64>()
                * 2.0
                * (k as f64 + 2.0)
                * f64::powi(2.0, -24);
            if (got[i * n + j] as f64 - want).abs() > bound {
                return Err(format!(
                    "matmul {m}×{n}×{k}: ({i}, {j}) is {}, want {want}",
                    got[i * n + j]
                ));
            }
        }
        let flops = 2.0 * (m * n * k) as f64;
        let key = dotcompute_ops::matmul::key::<f32>(d, m, n, k, full);
        // Where the device has no vendor product, there was nothing to choose.
        let choice = if d
            .info()
            .caps
            .blas
            .contains(&dotcompute::ir::ScalarType::F32)
        {
            format!("tuner: {}", tuner_choice(&key))
        } else {
            "one candidate: generated".to_string()
        };
        figs.push(
            ctx.figure(
                "ops",
                format!("matmul {m}×{n}×{k} f32"),
                flops,
                Unit::TflopS,
            )
            .ours(
                &format!("dotcompute_ops::matmul ({choice})"),
                flops,
                times[0].clone(),
            )
            .against("Device::matmul", flops, times[1].clone())
            .target("≥ 1.0 (the better of vendor and generated)")
            .build(),
        );
    }
    Ok(figs)
}

/// The CPU device against plain rayon on a host `Vec` (the CPU references): a
/// `par_iter().sum()`, a two-pass chunked scan, a chunked fold of byte counts,
/// `par_sort_unstable` and `par_sort_unstable_by_key`. Ours works on the device buffers in
/// place (the CPU device's memory is the host's); the sorts copy their input afresh on
/// both sides every run.
fn against_rayon(ctx: &Ctx) -> Res<Vec<Figure>> {
    let n = size(ctx);
    let mut rng = fastrand::Rng::with_seed(2929);
    let mut figs = rayon_reduce(ctx, n)?;
    figs.extend(rayon_sorts(ctx, n, &mut rng)?);
    figs.extend(rayon_scan(ctx, n, &mut rng)?);
    figs.extend(rayon_byte_histogram(ctx, n, &mut rng)?);
    Ok(figs)
}

/// Reduce sum of f32 against `par_iter().sum()`.
fn rayon_reduce(ctx: &Ctx, n: usize) -> Res<Vec<Figure>> {
    use rayon::prelude::*;
    let d = ctx.device;
    let s = super::s;
    let mut figs = Vec::new();
    let x: Vec<f32> = (0..n).map(|i| (i % 17) as f32 * 0.25).collect();
    let dx = d.upload(&x).map_err(s)?;
    let mut total = d.alloc_filled(1, 0.0f32).map_err(s)?;
    let mut host_total = 0.0f32;
    let times = measure_all(
        ctx,
        &mut [
            &mut || reduce::reduce_into(d, &dx, ReduceOp::Sum, &mut total).map_err(s),
            &mut || {
                host_total = x.par_iter().sum::<f32>();
                Ok(())
            },
        ],
    )?;
    let want: f64 = x.iter().map(|&v| v as f64).sum();
    for got in [total.to_vec().map_err(s)?[0] as f64, host_total as f64] {
        if ((got - want) / want).abs() > 1e-4 {
            return Err(format!("sum {got}, expected {want}"));
        }
    }
    figs.push(
        ctx.figure(
            "ops (CPU vs rayon)",
            format!("reduce sum {} f32", label(n)),
            n as f64,
            Unit::GBs,
        )
        .ours(
            "dotcompute_ops::reduce (in place)",
            4.0 * n as f64,
            times[0].clone(),
        )
        .against(
            "rayon par_iter().sum() on a Vec",
            4.0 * n as f64,
            times[1].clone(),
        )
        .target("≥ 1.0")
        .build(),
    );
    Ok(figs)
}

/// Keys, then pairs (positions as values), against rayon's unstable parallel sorts.
fn rayon_sorts(ctx: &Ctx, n: usize, rng: &mut fastrand::Rng) -> Res<Vec<Figure>> {
    use rayon::prelude::*;
    let d = ctx.device;
    let s = super::s;
    let mut figs = Vec::new();
    let keys: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
    let dk0 = d.upload(&keys).map_err(s)?;
    let mut dk = d.alloc_filled(n, 0u32).map_err(s)?;
    let mut host = keys.clone();
    let times = measure_all(
        ctx,
        &mut [
            &mut || {
                dk.copy_from(&dk0).map_err(s)?;
                sort::sort_keys(d, &mut dk, Order::Ascending).map_err(s)
            },
            &mut || {
                host.copy_from_slice(&keys);
                host.par_sort_unstable();
                Ok(())
            },
        ],
    )?;
    if dk.to_vec().map_err(s)? != host {
        return Err("sort against rayon: different orders".into());
    }
    figs.push(
        ctx.figure(
            "ops (CPU vs rayon)",
            format!("radix sort {} u32 keys", label(n)),
            n as f64,
            Unit::GBs,
        )
        .ours(
            "dotcompute_ops::sort (in place, after a copy of the input)",
            4.0 * n as f64,
            times[0].clone(),
        )
        .against(
            "rayon par_sort_unstable on a Vec",
            4.0 * n as f64,
            times[1].clone(),
        )
        .target("≥ 1.5")
        .build(),
    );
    // Pairs: u32 keys with their positions as values.
    let positions: Vec<u32> = (0..n as u32).collect();
    let dv0 = d.upload(&positions).map_err(s)?;
    let mut dv = d.alloc_filled(n, 0u32).map_err(s)?;
    let host_pairs: Vec<(u32, u32)> = keys.iter().copied().zip(0..).collect();
    let mut hp = host_pairs.clone();
    let times = measure_all(
        ctx,
        &mut [
            &mut || {
                dk.copy_from(&dk0).map_err(s)?;
                dv.copy_from(&dv0).map_err(s)?;
                sort::sort_pairs(d, &mut dk, &mut dv, Order::Ascending).map_err(s)
            },
            &mut || {
                hp.copy_from_slice(&host_pairs);
                hp.par_sort_unstable_by_key(|p| p.0);
                Ok(())
            },
        ],
    )?;
    let (got_k, got_v) = (dk.to_vec().map_err(s)?, dv.to_vec().map_err(s)?);
    if got_k.iter().zip(&hp).any(|(k, p)| *k != p.0)
        || got_v
            .iter()
            .zip(&got_k)
            .any(|(&v, &k)| keys[v as usize] != k)
    {
        return Err("pair sort against rayon: different orders".into());
    }
    figs.push(
        ctx.figure(
            "ops (CPU vs rayon)",
            format!("radix sort {} u32 pairs", label(n)),
            n as f64,
            Unit::GBs,
        )
        .ours(
            "dotcompute_ops::sort_pairs (in place, after a copy of the input)",
            8.0 * n as f64,
            times[0].clone(),
        )
        .against(
            "rayon par_sort_unstable_by_key on a Vec of pairs",
            8.0 * n as f64,
            times[1].clone(),
        )
        .target("≥ 1.5")
        .build(),
    );
    Ok(figs)
}

/// The CPU device's scan forms (the tuner's candidate names), each also measured pinned
/// against rayon, so that the table shows what the tuner chose from.
const CPU_SCAN_FORMS: [&str; 4] = [
    "cached-stores",
    "streamed-stores",
    "two-passes, cached-stores",
    "two-passes, streamed-stores",
];

/// Exclusive scan of u32 against a two-pass chunked rayon scan: as the tuner chooses,
/// then in each of [`CPU_SCAN_FORMS`], all in one round-robin.
fn rayon_scan(ctx: &Ctx, n: usize, rng: &mut fastrand::Rng) -> Res<Vec<Figure>> {
    let d = ctx.device;
    let s = super::s;
    let mut figs = Vec::new();
    let v: Vec<u32> = (0..n).map(|_| rng.u32(..1000)).collect();
    let dvals = d.upload(&v).map_err(s)?;
    let outs = std::cell::RefCell::new(
        (0..=CPU_SCAN_FORMS.len())
            .map(|_| d.alloc_filled(n, 0u32))
            .collect::<Result<Vec<_>, _>>()
            .map_err(s)?,
    );
    let mut host_out = vec![0u32; n];
    let mut runs: Vec<Box<dyn FnMut() -> Res<()> + '_>> = Vec::new();
    runs.push(Box::new(|| {
        scan::exclusive_sum(d, &dvals, &mut outs.borrow_mut()[0]).map_err(s)
    }));
    for (k, &form) in CPU_SCAN_FORMS.iter().enumerate() {
        let (dvals, outs) = (&dvals, &outs);
        runs.push(Box::new(move || {
            dotcompute_ops::tune::with_candidate(form, || {
                scan::exclusive_sum(d, dvals, &mut outs.borrow_mut()[k + 1])
            })
            .map_err(s)
        }));
    }
    runs.push(Box::new(|| {
        rayon_exclusive_sum(&v, &mut host_out);
        Ok(())
    }));
    let mut fs: Vec<&mut dyn FnMut() -> Res<()>> = runs
        .iter_mut()
        .map(|f| &mut **f as &mut dyn FnMut() -> Res<()>)
        .collect();
    let times = measure_all(ctx, &mut fs)?;
    drop(fs);
    drop(runs);
    let mut got = Vec::new();
    for out in outs.borrow().iter() {
        got.push(out.to_vec().map_err(s)?);
    }
    got.push(host_out);
    let mut running = 0u32;
    for (i, &x) in v.iter().enumerate() {
        if let Some(k) = got.iter().position(|g| g[i] != running) {
            return Err(format!(
                "scan (run {k}) at {i}: {}, expected {running}",
                got[k][i]
            ));
        }
        running = running.wrapping_add(x);
    }
    let rayon_time = times.last().expect("rayon's run").clone();
    let labels = std::iter::once(("".to_string(), "in place".to_string())).chain(
        CPU_SCAN_FORMS
            .iter()
            .map(|f| (format!(", {f}"), format!("in place, pinned: {f}"))),
    );
    for ((suffix, about), time) in labels.zip(&times) {
        let fig = ctx
            .figure(
                "ops (CPU vs rayon)",
                format!("exclusive scan {} u32{suffix}", label(n)),
                n as f64,
                Unit::GBs,
            )
            .ours(
                &format!("dotcompute_ops::scan ({about})"),
                8.0 * n as f64,
                time.clone(),
            )
            .against(
                "a two-pass chunked rayon scan on a Vec",
                8.0 * n as f64,
                rayon_time.clone(),
            );
        // The target is the tuned call's; the pinned forms show what it chose from.
        figs.push(if suffix.is_empty() {
            fig.target("≥ 1.0").build()
        } else {
            fig.build()
        });
    }
    Ok(figs)
}

/// Byte histogram, 256 bins, against a chunked rayon fold.
fn rayon_byte_histogram(ctx: &Ctx, n: usize, rng: &mut fastrand::Rng) -> Res<Vec<Figure>> {
    use rayon::prelude::*;
    let d = ctx.device;
    let s = super::s;
    let mut figs = Vec::new();
    let bytes: Vec<u8> = (0..n).map(|_| rng.u8(..)).collect();
    let db = d.upload(&bytes).map_err(s)?;
    let mut dh = d.alloc_filled(256, 0u32).map_err(s)?;
    let mut host_h = vec![0u32; 256];
    let times = measure_all(
        ctx,
        &mut [
            &mut || histogram::histogram_even_u8(d, &db, 256, 0, 256, &mut dh).map_err(s),
            &mut || {
                host_h = bytes
                    .par_chunks(1 << 16)
                    .fold(
                        || vec![0u32; 256],
                        |mut h, c| {
                            c.iter().for_each(|&b| h[b as usize] += 1);
                            h
                        },
                    )
                    .reduce(
                        || vec![0u32; 256],
                        |mut a, b| {
                            a.iter_mut().zip(&b).for_each(|(a, b)| *a += b);
                            a
                        },
                    );
                Ok(())
            },
        ],
    )?;
    if dh.to_vec().map_err(s)? != host_h || host_h.iter().sum::<u32>() as usize != n {
        return Err("byte histogram against rayon: different counts".into());
    }
    figs.push(
        ctx.figure(
            "ops (CPU vs rayon)",
            format!("histogram {} u8, 256 bins", label(n)),
            n as f64,
            Unit::GBs,
        )
        .ours(
            "dotcompute_ops::histogram (in place)",
            n as f64,
            times[0].clone(),
        )
        .against("a chunked rayon fold on a Vec", n as f64, times[1].clone())
        .target("≥ 1.0")
        .build(),
    );
    Ok(figs)
}

/// The CPU scan reference: chunk sums in parallel, their prefix in order, then
/// each chunk scanned from its carry in parallel.
fn rayon_exclusive_sum(x: &[u32], y: &mut [u32]) {
    use rayon::prelude::*;
    const CHUNK: usize = 1 << 16;
    let sums: Vec<u32> = x
        .par_chunks(CHUNK)
        .map(|c| c.iter().fold(0u32, |a, &b| a.wrapping_add(b)))
        .collect();
    let mut carries = Vec::with_capacity(sums.len());
    let mut carry = 0u32;
    for s in sums {
        carries.push(carry);
        carry = carry.wrapping_add(s);
    }
    y.par_chunks_mut(CHUNK)
        .zip(x.par_chunks(CHUNK))
        .zip(carries)
        .for_each(|((yc, xc), mut running)| {
            for (o, &v) in yc.iter_mut().zip(xc) {
                *o = running;
                running = running.wrapping_add(v);
            }
        });
}
