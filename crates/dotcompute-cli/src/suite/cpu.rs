//! The CPU backend's kernels with barriers: split at the barriers (the default schedule)
//! against one coroutine per thread (the schedule before it), both in the same run, and
//! the split scan and softmax against the same algorithm as a plain host loop. Every
//! output of both schedules is checked.

use super::{measure_all, s, Bench, Ctx, Figure, Res, Unit};
use dotcompute::cpu::{set_barrier_schedule, BarrierSchedule};
use dotcompute::{BackendKind, Launch};
use dotcompute_conformance::kernels;

pub fn benches() -> Vec<Bench> {
    vec![Bench {
        name: "cpu-barriers",
        what: "CPU kernels with barriers split at the barriers, against a coroutine per thread",
        run: cpu_barriers,
    }]
}

const SPLIT: &str = "split at barriers";
const COROUTINES: &str = "coroutine per thread";

/// Times `launch` under both schedules, round-robin; `check` verifies after each.
fn both_schedules(
    ctx: &Ctx,
    launch: &mut dyn FnMut() -> Res<()>,
    check: &mut dyn FnMut() -> Res<()>,
) -> Res<(super::Stats, super::Stats)> {
    let mut outcome = Ok(());
    let times = {
        let launch = std::cell::RefCell::new(launch);
        let mut split = || {
            set_barrier_schedule(BarrierSchedule::Fission);
            (launch.borrow_mut())()
        };
        let mut coroutines = || {
            set_barrier_schedule(BarrierSchedule::Coroutines);
            (launch.borrow_mut())()
        };
        measure_all(ctx, &mut [&mut split, &mut coroutines])
    };
    set_barrier_schedule(BarrierSchedule::Fission);
    for s in [BarrierSchedule::Fission, BarrierSchedule::Coroutines] {
        set_barrier_schedule(s);
        outcome = outcome.and_then(|()| check());
    }
    set_barrier_schedule(BarrierSchedule::Fission);
    outcome?;
    let mut t = times?.into_iter();
    Ok((t.next().unwrap(), t.next().unwrap()))
}

fn cpu_barriers(ctx: &Ctx) -> Res<Vec<Figure>> {
    if ctx.kind() != BackendKind::Cpu {
        return Ok(Vec::new());
    }
    let mut figs = scan(ctx)?;
    figs.extend(softmax(ctx)?);
    figs.extend(reduce(ctx)?);
    figs.extend(matmul(ctx)?);
    Ok(figs)
}

fn scan(ctx: &Ctx) -> Res<Vec<Figure>> {
    let n: usize = if ctx.quick { 1 << 20 } else { 1 << 24 };
    ctx.step("cpu-barriers scan");
    let d = ctx.device;
    let mut rng = fastrand::Rng::with_seed(0x5ca2);
    let x: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
    let g = kernels::SCAN_GROUP as usize;
    let want = host_scan(&x, g);
    let dx = d.upload(&x).map_err(s)?;
    let mut out = d.alloc_filled(n, 0u32).map_err(s)?;
    let launch = Launch::threads(n).group(g as u32);
    let out_cell = std::cell::RefCell::new(&mut out);
    let (split, coroutines) = both_schedules(
        ctx,
        &mut || kernels::block_scan::launch(d, launch, &dx, *out_cell.borrow_mut()).map_err(s),
        &mut || {
            let mut o = out_cell.borrow_mut();
            o.fill(0).map_err(s)?;
            kernels::block_scan::launch(d, launch, &dx, *o).map_err(s)?;
            match o.to_vec().map_err(s)? == want {
                true => Ok(()),
                false => Err("block scan: a wrong element".into()),
            }
        },
    )?;
    // The same algorithm's work as a plain loop: a running sum restarted every group.
    let mut host_out = vec![0u32; n];
    let mut host = || {
        for (ci, co) in x.chunks(g).zip(host_out.chunks_mut(g)) {
            let mut run = 0u32;
            for (o, &v) in co.iter_mut().zip(ci) {
                run = run.wrapping_add(v);
                *o = run;
            }
        }
        Ok(())
    };
    let serial = measure_all(ctx, &mut [&mut host])?.remove(0);
    if host_out != want {
        return Err("block scan: the host loop disagrees".into());
    }
    let bytes = 8.0 * n as f64;
    let size = format!("2^{} u32", n.trailing_zeros());
    Ok(vec![
        ctx.figure("cpu-barriers", size.clone(), n as f64, Unit::GBs)
            .ours(&format!("scan, {SPLIT}"), bytes, split.clone())
            .against(COROUTINES, bytes, coroutines)
            .target("≥ 10")
            .build(),
        ctx.figure("cpu-barriers", size, n as f64, Unit::GBs)
            .ours(&format!("scan, {SPLIT}"), bytes, split)
            .against("serial host loop", bytes, serial)
            .note("the host loop is one thread; the kernel runs on every core")
            .build(),
    ])
}

fn host_scan(x: &[u32], g: usize) -> Vec<u32> {
    let mut out = vec![0u32; x.len()];
    for (ci, co) in x.chunks(g).zip(out.chunks_mut(g)) {
        let mut run = 0u32;
        for (o, &v) in co.iter_mut().zip(ci) {
            run = run.wrapping_add(v);
            *o = run;
        }
    }
    out
}

fn softmax(ctx: &Ctx) -> Res<Vec<Figure>> {
    let (rows, cols) = if ctx.quick {
        (512usize, 1000usize)
    } else {
        (4096, 1000)
    };
    ctx.step("cpu-barriers softmax");
    let d = ctx.device;
    let mut rng = fastrand::Rng::with_seed(0x50f7);
    let x: Vec<f32> = (0..rows * cols).map(|_| rng.f32() * 10.0 - 5.0).collect();
    let dx = d.upload(&x).map_err(s)?;
    let mut out = d.alloc_filled(rows * cols, f32::NAN).map_err(s)?;
    let g = kernels::SOFTMAX_GROUP;
    let launch = Launch::threads(rows * g as usize).group(g);
    let out_cell = std::cell::RefCell::new(&mut out);
    let check_rows = |got: &[f32]| super::memory::check_softmax(&x, cols, got);
    let (split, coroutines) = both_schedules(
        ctx,
        &mut || {
            kernels::softmax_rows::launch(d, launch, &dx, *out_cell.borrow_mut(), cols as u32)
                .map_err(s)
        },
        &mut || {
            let mut o = out_cell.borrow_mut();
            o.fill(f32::NAN).map_err(s)?;
            kernels::softmax_rows::launch(d, launch, &dx, *o, cols as u32).map_err(s)?;
            check_rows(&o.to_vec().map_err(s)?)
        },
    )?;
    // The same two passes per row as a plain loop.
    let mut host_out = vec![0f32; rows * cols];
    let mut host = || {
        for (xr, or) in x.chunks(cols).zip(host_out.chunks_mut(cols)) {
            let top = xr.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
            let sum: f32 = xr.iter().map(|&v| (v - top).exp()).sum();
            for (o, &v) in or.iter_mut().zip(xr) {
                *o = (v - top).exp() / sum;
            }
        }
        Ok(())
    };
    let serial = measure_all(ctx, &mut [&mut host])?.remove(0);
    check_rows(&host_out)?;
    let bytes = 12.0 * (rows * cols) as f64;
    let size = format!("{rows}×{cols} f32");
    Ok(vec![
        ctx.figure(
            "cpu-barriers",
            size.clone(),
            (rows * cols) as f64,
            Unit::GBs,
        )
        .ours(&format!("softmax, {SPLIT}"), bytes, split.clone())
        .against(COROUTINES, bytes, coroutines)
        .target("≥ 10")
        .build(),
        ctx.figure("cpu-barriers", size, (rows * cols) as f64, Unit::GBs)
            .ours(&format!("softmax, {SPLIT}"), bytes, split)
            .against("serial host loop", bytes, serial)
            .note("the host loop is one thread; the kernel runs on every core")
            .build(),
    ])
}

fn reduce(ctx: &Ctx) -> Res<Vec<Figure>> {
    let n: usize = if ctx.quick { 1 << 20 } else { 1 << 24 };
    ctx.step("cpu-barriers reduce");
    let d = ctx.device;
    // Zeros and ones: every partial sum is an integer below 2^24, exact in f32 in any
    // order.
    let x: Vec<f32> = (0..n).map(|k| ((k * 7 + k / 3) % 2) as f32).collect();
    let want: f64 = x.iter().map(|&v| v as f64).sum();
    let dx = d.upload(&x).map_err(s)?;
    let mut total = d.alloc_filled(1, 0f32).map_err(s)?;
    let group = 256u32;
    let launch = Launch::threads(n / 16).group(group).dynamic_shared(group);
    let total_cell = std::cell::RefCell::new(&mut total);
    let (split, coroutines) = both_schedules(
        ctx,
        &mut || {
            let mut t = total_cell.borrow_mut();
            t.fill(0.0).map_err(s)?;
            kernels::reduce_sum::launch(d, launch, &dx, *t).map_err(s)
        },
        &mut || {
            let mut t = total_cell.borrow_mut();
            t.fill(0.0).map_err(s)?;
            kernels::reduce_sum::launch(d, launch, &dx, *t).map_err(s)?;
            let got = t.to_vec().map_err(s)?[0] as f64;
            match got == want {
                true => Ok(()),
                false => Err(format!("reduce: {got} instead of {want}")),
            }
        },
    )?;
    let bytes = 4.0 * n as f64;
    Ok(vec![ctx
        .figure(
            "cpu-barriers",
            format!("2^{} f32", n.trailing_zeros()),
            n as f64,
            Unit::GBs,
        )
        .ours(&format!("reduce, {SPLIT}"), bytes, split)
        .against(COROUTINES, bytes, coroutines)
        .target("≥ 10")
        .note("grid-stride loads, a shared tree, one atomic per group")
        .build()])
}

fn matmul(ctx: &Ctx) -> Res<Vec<Figure>> {
    let e: usize = if ctx.quick { 256 } else { 512 };
    ctx.step("cpu-barriers matmul");
    let d = ctx.device;
    let mut rng = fastrand::Rng::with_seed(0x3a7);
    // Small integers again: every product is exact.
    let a: Vec<f32> = (0..e * e).map(|_| rng.i32(-4..5) as f32).collect();
    let b: Vec<f32> = (0..e * e).map(|_| rng.i32(-4..5) as f32).collect();
    let mut want = vec![0f32; e * e];
    for i in 0..e {
        for p in 0..e {
            let v = a[i * e + p];
            for j in 0..e {
                want[i * e + j] += v * b[p * e + j];
            }
        }
    }
    let (da, db) = (d.upload(&a).map_err(s)?, d.upload(&b).map_err(s)?);
    let mut c = d.alloc_filled(e * e, f32::NAN).map_err(s)?;
    let t = kernels::TILE;
    let launch = Launch::grid2d(e, e).group2d(t, t);
    let c_cell = std::cell::RefCell::new(&mut c);
    let m = e as u32;
    let (split, coroutines) = both_schedules(
        ctx,
        &mut || {
            kernels::matmul_tiled::launch(d, launch, &da, &db, *c_cell.borrow_mut(), m, m, m)
                .map_err(s)
        },
        &mut || {
            let mut c = c_cell.borrow_mut();
            c.fill(f32::NAN).map_err(s)?;
            kernels::matmul_tiled::launch(d, launch, &da, &db, *c, m, m, m).map_err(s)?;
            match c.to_vec().map_err(s)? == want {
                true => Ok(()),
                false => Err("tiled matmul: a wrong element".into()),
            }
        },
    )?;
    let flops = 2.0 * (e * e * e) as f64;
    Ok(vec![ctx
        .figure("cpu-barriers", format!("{e}³"), e as f64, Unit::TflopS)
        .ours(&format!("tiled matmul, {SPLIT}"), flops, split)
        .against(COROUTINES, flops, coroutines)
        .precision("fp32")
        .target("≥ 10")
        .build()])
}
