//! `dotcompute-ops` (issue 28): reduce, scan and radix sort on typed buffers, each against
//! a device-to-device copy of the same bytes measured in the same run (the bandwidth
//! ceiling), results checked against plain Rust. Sizes: 2^28 elements on GPUs, 2^24 on
//! the CPU (2^22 with `--quick`), as the speed table.

use super::{measure_all, Bench, Ctx, Figure, Res, Unit};
use dotcompute::{BackendKind, Buffer};
use dotcompute_ops::{reduce, scan, sort, Order, ReduceOp};

pub fn benches() -> Vec<Bench> {
    vec![Bench {
        name: "ops",
        what: "library operations (reduce sum f32, exclusive scan u32, radix sort u32 keys and pairs) against a copy",
        run: ops,
    }]
}

const COPY: &str = "device-to-device copy";

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
    let n = size(ctx);
    let d = ctx.device;
    let s = super::s;
    let mut rng = fastrand::Rng::with_seed(28);
    let mut figs = Vec::new();
    // The copy: n u32 (4n bytes read, 4n written).
    let src: Buffer<u32> = d.alloc_filled(n, 3).map_err(s)?;
    let mut dst: Buffer<u32> = d.alloc_filled(n, 0).map_err(s)?;
    let copy_bytes = 8.0 * n as f64;

    // reduce sum f32 (bytes read against the copy's bytes moved).
    ctx.step(&format!("reduce sum {} f32", label(n)));
    let x: Vec<f32> = (0..n).map(|i| (i % 17) as f32 * 0.25).collect();
    let want: f64 = x.iter().map(|&v| v as f64).sum();
    let dx = d.upload(&x).map_err(s)?;
    drop(x);
    let mut total = d.alloc_filled(1, f32::NAN).map_err(s)?;
    let times = measure_all(
        ctx,
        &mut [
            &mut || reduce::reduce_into(d, &dx, ReduceOp::Sum, &mut total).map_err(s),
            &mut || dst.copy_from(&src).map_err(s),
        ],
    )?;
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
        .against(COPY, copy_bytes, times[1].clone())
        .target("≥ 1.0 (bytes read / copy's bytes moved)")
        .build(),
    );

    // exclusive scan u32 (reads n, writes n: the copy's bytes).
    ctx.step(&format!("exclusive scan {} u32", label(n)));
    let keys: Vec<u32> = (0..n).map(|_| rng.u32(..1000)).collect();
    let dk = d.upload(&keys).map_err(s)?;
    let mut out = d.alloc_filled(n, 0u32).map_err(s)?;
    let times = measure_all(
        ctx,
        &mut [
            &mut || scan::exclusive_sum(d, &dk, &mut out).map_err(s),
            &mut || dst.copy_from(&src).map_err(s),
        ],
    )?;
    let got = out.to_vec().map_err(s)?;
    let mut acc = 0u32;
    for (i, (&g, &k)) in got.iter().zip(&keys).enumerate() {
        if g != acc {
            return Err(format!("exclusive scan wrong at {i}: {g}, expected {acc}"));
        }
        acc = acc.wrapping_add(k);
    }
    drop(got);
    drop(out);
    figs.push(
        ctx.figure(
            "ops",
            format!("exclusive scan {} u32", label(n)),
            n as f64,
            Unit::GBs,
        )
        .ours("dotcompute_ops::scan", copy_bytes, times[0].clone())
        .against(COPY, copy_bytes, times[1].clone())
        .target("≥ 0.85")
        .build(),
    );

    // radix sort: keys, then pairs (GB/s of keys sorted = 4 bytes per key; GKey/s in the
    // note).
    let full: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
    let mut want = full.clone();
    want.sort_unstable();
    for pairs in [false, true] {
        let what = if pairs { "pairs" } else { "keys" };
        ctx.step(&format!("radix sort {} u32 {what}", label(n)));
        let mut sk = d.alloc_filled(n, 0u32).map_err(s)?;
        let mut sv = d.alloc_filled(if pairs { n } else { 1 }, 0u32).map_err(s)?;
        let times = measure_all(
            ctx,
            &mut [
                &mut || {
                    // Reloading the unsorted keys is bookkeeping (an upload), not timed on
                    // device clocks.
                    sk.write(&full).map_err(s)?;
                    if pairs {
                        sv.write(&full).map_err(s)?;
                        sort::sort_pairs(d, &mut sk, &mut sv, Order::Ascending).map_err(s)
                    } else {
                        sort::sort_keys(d, &mut sk, Order::Ascending).map_err(s)
                    }
                },
                &mut || dst.copy_from(&src).map_err(s),
            ],
        )?;
        if sk.to_vec().map_err(s)? != want {
            return Err(format!("radix sort of {what} gave a wrong order"));
        }
        if pairs && sv.to_vec().map_err(s)? != want {
            return Err("radix sort of pairs moved a value away from its key".into());
        }
        let gkeys = n as f64 / times[0].median_s / 1e9;
        figs.push(
            ctx.figure(
                "ops",
                format!("radix sort {} u32 {what}", label(n)),
                n as f64,
                Unit::GBs,
            )
            .ours(
                "dotcompute_ops::sort (4-bit LSD, reduce-then-scan)",
                4.0 * n as f64,
                times[0].clone(),
            )
            .against(COPY, copy_bytes, times[1].clone())
            .note(format!(
                "{gkeys:.2} GKey/s; the issue's target on CUDA is ≥ 35 (keys) / 25 (pairs) GKey/s"
            ))
            .build(),
        );
    }
    Ok(figs)
}
