//! Runtime costs: launch overhead against a raw driver launch, streams against one
//! stream, and graph replay against launches one by one (host wall time: the device
//! clock cannot see enqueue costs).

use super::{
    measure_batched, measure_batched_with, timed_run, Bench, Ctx, Figure, Res, Stats, Unit,
};
use dotcompute::{BackendKind, Launch};
use dotcompute_conformance::kernels;
use rayon::prelude::*;
use std::time::{Duration, Instant};

pub fn benches() -> Vec<Bench> {
    vec![
        Bench {
            name: "launch",
            what: "an empty kernel launched back to back, against a raw driver launch",
            run: launch,
        },
        Bench {
            name: "latency",
            what: "wall clock as a user sees it: launch + synchronize of an empty kernel and of a 64 MB stencil",
            run: latency,
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
        BackendKind::Wgpu => {
            let d = ctx.device;
            let mut out = d.alloc_filled(1, 7u32).map_err(super::s)?;
            let raw = RawWgpuLaunch::new(d.info().ordinal)?;
            let mut raw_launch = || raw.launch();
            let times = measure_batched_with(
                ctx,
                batch,
                &mut [
                    &mut || empty_launch::launch(d, Launch::threads(1), &mut out).map_err(super::s),
                    &mut raw_launch,
                ],
                // The raw reference waits on its own device.
                &mut |i| match i {
                    0 => d.synchronize().map_err(super::s),
                    _ => raw.wait(),
                },
            )?;
            if out.to_vec().map_err(super::s)? != vec![7] {
                return Err("the empty kernel changed its buffer".into());
            }
            Ok(vec![f()
                .ours(ours, 1.0, times[0].clone())
                .against(
                    "raw wgpu: one pass, one dispatch, one submit",
                    1.0,
                    times[1].clone(),
                )
                .note(
                    "the raw reference reuses one bind group on its own device of the same adapter",
                )
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
            }
            Ok(vec![fig.build()])
        }
    }
}

/// Median, minimum and maximum of `samples` runs of `f` (after `samples / 10 + 3` warm-up
/// runs), each timed on the host from its start to its return.
fn wall_samples(samples: usize, f: &mut dyn FnMut() -> Res<()>) -> Res<Stats> {
    crate::bench_core::wall_stats(samples / 10 + 3, samples, f)
}

/// What a user's clock sees (issue 30): one empty launch + `synchronize()` (the round
/// trip) against the raw driver's, and one launch + `synchronize()` of a memory-bound 2-D
/// kernel over 2 × 32 MB against its device time plus that round trip.
fn latency(ctx: &Ctx) -> Res<Vec<Figure>> {
    let samples = if ctx.quick { 100 } else { 500 };
    let mut figs = Vec::new();
    let round_trip = latency_round_trip(ctx, samples, &mut figs)?;
    figs.push(latency_stencil(ctx, samples, &round_trip)?);
    Ok(figs)
}

/// The round trip of an empty launch + `synchronize()` (its figures, against the raw
/// driver's where the backend has one, go to `figs`).
fn latency_round_trip(ctx: &Ctx, samples: usize, figs: &mut Vec<Figure>) -> Res<Stats> {
    ctx.step("latency: round trip");
    let d = ctx.device;
    let trip = "empty launch + synchronize";
    let f = |size: &str| ctx.figure("latency", size.into(), 1.0, Unit::Us);
    let mut out = d.alloc_filled(1, 7u32).map_err(super::s)?;
    let round_trip = match ctx.kind() {
        BackendKind::Cuda => {
            // Ours and the raw launch of the same function + cuStreamSynchronize, one at
            // a time.
            let (_, ours, raw) = crate::bench_cuda::measure_launch(samples, 1)?;
            figs.push(
                f("empty kernel")
                    .ours(trip, 1.0, ours.clone())
                    .against("raw cuLaunchKernel + cuStreamSynchronize", 1.0, raw)
                    .build(),
            );
            ours
        }
        BackendKind::Wgpu => {
            let raw = RawWgpuLaunch::new(d.info().ordinal)?;
            let ours = wall_samples(samples, &mut || {
                empty_launch::launch(d, Launch::threads(1), &mut out).map_err(super::s)?;
                d.synchronize().map_err(super::s)
            })?;
            let blocking = wall_samples(samples, &mut || {
                raw.launch()?;
                raw.wait()
            })?;
            let spinning = wall_samples(samples, &mut || {
                raw.launch()?;
                raw.spin()
            })?;
            figs.push(
                f("empty kernel")
                    .ours(trip, 1.0, ours.clone())
                    .against("raw wgpu: submit + blocking poll", 1.0, blocking.clone())
                    .build(),
            );
            let steps = raw.steps(samples)?;
            for (what, stats) in steps {
                figs.push(
                    f("empty kernel, raw wgpu step")
                        .ours(what, 1.0, stats)
                        .note("where a raw round trip's time goes (host clock)")
                        .build(),
                );
            }
            figs.push(
                f("empty kernel, raw wgpu")
                    .ours("submit + poll until done, no blocking", 1.0, spinning)
                    .against("submit + blocking poll", 1.0, blocking)
                    .note("the driver's blocking wait against polling without blocking")
                    .build(),
            );
            ours
        }
        _ => wall_samples(samples, &mut || {
            empty_launch::launch(d, Launch::threads(1), &mut out).map_err(super::s)?;
            d.synchronize().map_err(super::s)
        })?,
    };
    if !matches!(ctx.kind(), BackendKind::Cuda | BackendKind::Wgpu) {
        figs.push(
            f("empty kernel")
                .ours(trip, 1.0, round_trip.clone())
                .build(),
        );
    }
    if out.to_vec().map_err(super::s)? != vec![7] {
        return Err("the empty kernel changed its buffer".into());
    }

    Ok(round_trip)
}

/// One launch + `synchronize()` of the 5-point stencil of the bench's stencil figure,
/// against its device time plus `round_trip`.
fn latency_stencil(ctx: &Ctx, samples: usize, round_trip: &Stats) -> Res<Figure> {
    let d = ctx.device;
    let f = |size: &str| ctx.figure("latency", size.into(), 1.0, Unit::Us);
    let (w, h) = if ctx.quick {
        (1025usize, 513usize)
    } else {
        (4097, 2049)
    };
    ctx.step(&format!("latency: stencil {w}×{h}"));
    let x: Vec<f32> = (0..w * h).map(|i| (i % 1000) as f32 * 1e-3).collect();
    let dx = d.upload(&x).map_err(super::s)?;
    let mut dout = d.alloc_filled(w * h, f32::NAN).map_err(super::s)?;
    let mut stencil = || {
        kernels::stencil5::launch(d, Launch::grid2d(w, h), &dx, &mut dout, w as u32, h as u32)
            .map_err(super::s)
    };
    let mut enqueue = Vec::new();
    let wall = wall_samples(samples / 5, &mut || {
        let t = Instant::now();
        stencil()?;
        enqueue.push(t.elapsed());
        d.synchronize().map_err(super::s)
    })?;
    let enqueue = Stats::from_times(enqueue, false);
    let mut device = Vec::new();
    let mut device_clock = true;
    for _ in 0..samples / 5 {
        let (t, on_device) = timed_run(d, &mut stencil)?;
        device.push(t);
        device_clock &= on_device;
    }
    let device = Stats::from_times(device, device_clock);
    let got = dout.to_vec().map_err(super::s)?;
    for yy in 1..h - 1 {
        let i = yy * w + w / 2;
        let want = 0.5 * x[i] + 0.125 * (x[i - 1] + x[i + 1] + x[i - w] + x[i + w]);
        if (got[i] - want).abs() > 1e-5 {
            return Err(format!(
                "latency stencil: row {yy} is {}, expected {want}",
                got[i]
            ));
        }
    }
    // The bound: the kernel's own time plus one round trip.
    let bound = Stats {
        median_s: device.median_s + round_trip.median_s,
        min_s: device.min_s + round_trip.min_s,
        max_s: device.max_s + round_trip.max_s,
        reps: device.reps,
        clock: device.clock.clone(),
    };
    let size = format!("{w}×{h} f32 stencil");
    Ok(f(&size)
        .ours("launch + synchronize", 1.0, wall)
        .against("device time + round trip", 1.0, bound)
        .target("≤ 1.1")
        .note(format!(
            "device time {:.1} µs ({} clock), round trip {:.1} µs, enqueue {:.1} µs",
            device.median_s * 1e6,
            device.clock,
            round_trip.median_s * 1e6,
            enqueue.median_s * 1e6
        ))
        .build())
}

/// What a hand-written wgpu program does per dispatch, on a device of its own on the
/// same adapter: the pipeline and bind group of an empty kernel made once, then per
/// launch one command encoder, one compute pass, one dispatch of one group and one
/// submission.
struct RawWgpuLaunch {
    device: wgpu::Device,
    queue: wgpu::Queue,
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
}

const RAW_EMPTY_WGSL: &str = "
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x > arrayLength(&out) { out[0] = 0u; }
}
";

impl RawWgpuLaunch {
    fn new(ordinal: usize) -> Res<RawWgpuLaunch> {
        let adapter = dotcompute_wgpu::adapters()
            .into_iter()
            .nth(ordinal)
            .ok_or("the wgpu adapter is gone")?;
        let (device, queue) =
            pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor::default()))
                .map_err(super::s)?;
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("raw empty"),
            source: wgpu::ShaderSource::Wgsl(RAW_EMPTY_WGSL.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("raw empty"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("raw out"),
            size: 4,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("raw empty"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: buffer.as_entire_binding(),
            }],
        });
        Ok(RawWgpuLaunch {
            device,
            queue,
            pipeline,
            bind_group,
        })
    }

    fn launch(&self) -> Res<()> {
        let mut encoder = self.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &self.bind_group, &[]);
            pass.dispatch_workgroups(1, 1, 1);
        }
        self.queue.submit(Some(encoder.finish()));
        Ok(())
    }

    /// A round trip in three steps, each timed on its own `samples` times: recording
    /// the pass and finishing the command buffer, `Queue::submit`, and polling without
    /// blocking until the work is done.
    fn steps(&self, samples: usize) -> Res<Vec<(&'static str, Stats)>> {
        let (mut record, mut submit, mut done) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..samples + 10 {
            let t = Instant::now();
            let mut encoder = self.device.create_command_encoder(&Default::default());
            {
                let mut pass = encoder.begin_compute_pass(&Default::default());
                pass.set_pipeline(&self.pipeline);
                pass.set_bind_group(0, &self.bind_group, &[]);
                pass.dispatch_workgroups(1, 1, 1);
            }
            let commands = encoder.finish();
            let t1 = Instant::now();
            self.queue.submit(Some(commands));
            let t2 = Instant::now();
            self.spin()?;
            if i >= 10 {
                record.push(t1 - t);
                submit.push(t2 - t1);
                done.push(t2.elapsed());
            }
        }
        Ok(vec![
            ("record + finish", Stats::from_times(record, false)),
            ("Queue::submit", Stats::from_times(submit, false)),
            (
                "submit returned → done (poll)",
                Stats::from_times(done, false),
            ),
        ])
    }

    /// Polls without blocking until the queue is empty.
    fn spin(&self) -> Res<()> {
        let start = Instant::now();
        loop {
            let status = self.device.poll(wgpu::PollType::Poll).map_err(super::s)?;
            if status.is_queue_empty() {
                return Ok(());
            }
            if start.elapsed() > Duration::from_secs(60) {
                return Err("the raw wgpu device did not finish in 60 s".into());
            }
            std::thread::yield_now();
        }
    }

    fn wait(&self) -> Res<()> {
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: None,
                timeout: Some(std::time::Duration::from_secs(60)),
            })
            .map(|_| ())
            .map_err(super::s)
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
    let kind = format!(
        "{}; device time per node {:.2} µs ({} clock)",
        if g.native {
            "driver graph"
        } else {
            "replayed by the facade"
        },
        g.replay_device.median_s * 1e6 / nodes,
        g.replay_device.clock
    );
    Ok(vec![
        ctx.figure("graph", format!("{} nodes", g.nodes), nodes, Unit::Us)
            .ours("graph replay, per node", nodes, g.replay.clone())
            .against("launches one by one, per launch", nodes, g.one_by_one)
            .note(kind.clone())
            .build(),
        ctx.figure(
            "graph",
            format!("{} nodes, one scalar changed", g.nodes),
            1.0,
            Unit::Us,
        )
        .ours("set one scalar, then replay", 1.0, g.replay_after_set)
        .against("replay", 1.0, g.replay)
        .note(format!("{kind}; {} capture(s) in all", g.captures))
        .build(),
    ])
}
