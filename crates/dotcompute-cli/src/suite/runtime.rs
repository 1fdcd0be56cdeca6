//! Runtime costs: launch overhead against a raw driver launch, streams against one
//! stream, and graph replay against launches one by one (host wall time: the device
//! clock cannot see enqueue costs).

use super::{measure_batched, Bench, Ctx, Figure, Res, Unit};
use dotcompute::{BackendKind, Launch};
use rayon::prelude::*;

pub fn benches() -> Vec<Bench> {
    vec![
        Bench {
            name: "launch",
            what: "an empty kernel launched back to back, against a raw driver launch",
            run: launch,
        },
        Bench {
            name: "streams",
            what: "4 small kernels on 4 streams, against the same 4 on one stream",
            run: streams,
        },
        Bench {
            name: "graph",
            what: "a 100-node chain as one graph replay, against 100 launches",
            run: graph,
        },
    ]
}

#[dotcompute::kernel]
fn empty_launch(out: &mut [u32]) {
    let _unused = out.len();
}

fn launch(ctx: &Ctx) -> Res<Vec<Figure>> {
    let batch = if ctx.quick { 200 } else { 2000 };
    ctx.step("launch");
    let ours = "empty #[kernel] launch";
    let f = || ctx.figure("launch", format!("batches of {batch}"), 1.0, Unit::Us);
    match ctx.kind() {
        BackendKind::Cuda => {
            // The raw reference launches the same generated function through cudarc on
            // the same context.
            let (_, td, tr) = crate::bench_cuda::measure_launch(ctx.reps, batch as u32)?;
            Ok(vec![f()
                .ours(ours, 1.0, td)
                .against("raw cuLaunchKernel (cudarc)", 1.0, tr)
                .target("≤ 1.2")
                .build()])
        }
        kind => {
            let d = ctx.device;
            let mut out = d.alloc_filled(1, 7u32).map_err(super::s)?;
            // The CPU's raw counterpart of a launch of one group: a rayon parallel loop.
            let mut raw = || {
                (0..1u32).into_par_iter().for_each(|i| {
                    std::hint::black_box(i);
                });
                Ok(())
            };
            let times = measure_batched(
                ctx,
                batch,
                &mut [
                    &mut || empty_launch::launch(d, Launch::threads(1), &mut out).map_err(super::s),
                    &mut raw,
                ],
            )?;
            if out.to_vec().map_err(super::s)? != vec![7] {
                return Err("the empty kernel changed its buffer".into());
            }
            let mut fig = f().ours(ours, 1.0, times[0].clone());
            if kind == BackendKind::Cpu {
                fig = fig.against("rayon parallel loop of one item", 1.0, times[1].clone());
            } else {
                fig = fig
                    .note("no raw wgpu reference in this run; see the CUDA figure of the same GPU");
            }
            Ok(vec![fig.build()])
        }
    }
}

fn streams(ctx: &Ctx) -> Res<Vec<Figure>> {
    ctx.step("streams");
    let t = crate::bench_core::measure_streams(ctx.device, ctx.reps, None)?;
    let size = format!("{}×{} threads × {} iters", t.kernels, t.threads, t.iters);
    let f = || ctx.figure("streams", size.clone(), t.kernels as f64, Unit::Us);
    let mut figs = vec![f()
        .ours("4 streams of one device", 1.0, t.streams.clone())
        .against("one after another, default stream", 1.0, t.serial.clone())
        .note("time per round; below 1 is the overlap")
        .build()];
    figs.push(
        f().ours("4 devices, one stream each", 1.0, t.devices)
            .against("one after another, default stream", 1.0, t.serial)
            .build(),
    );
    Ok(figs)
}

fn graph(ctx: &Ctx) -> Res<Vec<Figure>> {
    ctx.step("graph");
    let g = crate::bench_core::measure_graph(ctx.device, ctx.reps)?;
    let nodes = g.nodes as f64;
    Ok(vec![ctx
        .figure("graph", format!("{} nodes", g.nodes), nodes, Unit::Us)
        .ours("graph replay, per node", nodes, g.replay)
        .against("launches one by one, per launch", nodes, g.one_by_one)
        .note(if g.native {
            "driver graph"
        } else {
            "replayed by the facade"
        })
        .build()])
}
