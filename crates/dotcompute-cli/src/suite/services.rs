//! What surrounds kernels on CUDA: the compile cache (a fresh process compiling against
//! one that finds the kernel on disk), the memory pool (against raw `cuMemAlloc` +
//! `cuMemFree`) and host transfers (each path against the raw `cuMemcpy` of the same
//! direction on page-locked memory). Other backends have no figures here: their pools and
//! caches are in-process, and their transfers are measured by `bench streams`.

use super::{Bench, Ctx, Figure, Res, Unit};
use crate::bench_cuda::{measure_compile, measure_pool, measure_transfer};
use dotcompute::BackendKind;

pub fn benches() -> Vec<Bench> {
    vec![
        Bench {
            name: "compile-cache",
            what: "preparing a kernel from the disk cache, against compiling it (fresh processes)",
            run: compile_cache,
        },
        Bench {
            name: "pool",
            what: "pooled alloc + free of 1 MiB, against the raw driver calls",
            run: pool,
        },
        Bench {
            name: "transfers",
            what: "256 MiB host <-> device per path, against raw cuMemcpy on page-locked memory",
            run: transfers,
        },
    ]
}

fn compile_cache(ctx: &Ctx) -> Res<Vec<Figure>> {
    if ctx.kind() != BackendKind::Cuda {
        return Ok(Vec::new());
    }
    ctx.step("compile-cache");
    let reps = if ctx.quick { 3 } else { 7 };
    let (cold, disk) = measure_compile(reps)?;
    Ok(vec![ctx
        .figure("compile-cache", "matmul_tiled".into(), 1.0, Unit::Us)
        .ours("disk hit in a fresh process", 1.0, disk)
        .against("NVRTC compile in a fresh process", 1.0, cold)
        .target("≤ 0.05 (≥ 20× faster)")
        .note("each a fresh process: codegen + NVRTC + module load + disk write, against read + checksum + module load")
        .build()])
}

fn pool(ctx: &Ctx) -> Res<Vec<Figure>> {
    if ctx.kind() != BackendKind::Cuda {
        return Ok(Vec::new());
    }
    ctx.step("pool");
    let (pooled, raw) = measure_pool(ctx.device, ctx.reps)?;
    Ok(vec![ctx
        .figure("pool", "1 MiB".into(), 1.0, Unit::Us)
        .ours("Device::alloc + drop (pool)", 1.0, pooled)
        .against("raw cuMemAlloc + cuMemFree", 1.0, raw)
        .build()])
}

fn transfers(ctx: &Ctx) -> Res<Vec<Figure>> {
    if ctx.kind() != BackendKind::Cuda {
        return Ok(Vec::new());
    }
    ctx.step("transfers");
    let reps = if ctx.quick { 3 } else { ctx.reps };
    let (bytes, rows) = measure_transfer(ctx.device, reps)?;
    let raw_of = |prefix: &str| {
        rows.iter()
            .find(|(label, _)| label.starts_with(prefix))
            .map(|(label, t)| (*label, t.clone()))
            .ok_or_else(|| format!("transfers: no row `{prefix}`"))
    };
    let (up_label, up) = raw_of("raw cuMemcpyHtoD")?;
    let (down_label, down) = raw_of("raw cuMemcpyDtoH")?;
    let work = bytes as f64;
    Ok(rows
        .iter()
        .filter(|(label, _)| !label.starts_with("raw"))
        .map(|(label, t)| {
            let (rl, rt) = if label.starts_with("write") || label.starts_with("upload") {
                (up_label, up.clone())
            } else {
                (down_label, down.clone())
            };
            ctx.figure("transfers", "256 MiB".into(), work, Unit::GBs)
                .ours(label, work, t.clone())
                .against(rl, work, rt)
                .build()
        })
        .collect())
}
