//! `dotcompute bench`: figures are ratios against a reference measured in the same run,
//! after warm-up, as the median of many repetitions.

use dotcompute::{Device, Launch};
use dotcompute_conformance::kernels;
use rayon::prelude::*;
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Medians of `a` and `b`, timed alternately so both see the same machine conditions
/// (the 2-core CI machines are shared and noisy), after 3 warm-up rounds.
fn time_pair<A: FnMut(), B: FnMut()>(reps: usize, mut a: A, mut b: B) -> (Duration, Duration) {
    for _ in 0..3 {
        a(); // warm-up: page faults, pool, rayon threads
        b();
    }
    let (mut ta, mut tb) = (Vec::with_capacity(reps), Vec::with_capacity(reps));
    for _ in 0..reps {
        let t = Instant::now();
        a();
        ta.push(t.elapsed());
        let t = Instant::now();
        b();
        tb.push(t.elapsed());
    }
    (median(ta), median(tb))
}

pub fn run(
    name: &str,
    n: usize,
    reps: usize,
    backend: &str,
    group: Option<u32>,
    trace: Option<&str>,
) -> ExitCode {
    match (name, backend) {
        ("streams" | "graph" | "stream-acquire" | "alloc" | "matmul", _) => {
            match crate::bench_core::run(name, backend, reps.max(1), trace) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        (cuda, _) if cuda.starts_with("cuda-") => crate::bench_cuda::run(cuda, reps.max(1)),
        ("checked", other) => {
            match Device::by_name(other).and_then(|d| checked_overhead(&d, n, reps.max(1))) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        ("atomics", other) => {
            verified(Device::by_name(other).and_then(|d| contended_atomics(&d, n, reps.max(1))))
        }
        ("transpose", other) => {
            verified(Device::by_name(other).and_then(|d| transpose(&d, reps.max(1))))
        }
        ("softmax", other) => {
            verified(Device::by_name(other).and_then(|d| softmax(&d, reps.max(1))))
        }
        ("vector-add", "cpu") => vector_add(n, reps.max(1)),
        ("vector-add", other) => match Device::by_name(other) {
            Ok(d) => match vector_add_vs_copy(&d, n, reps.max(1), group) {
                Ok(code) => code,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            },
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        (other, _) => {
            eprintln!("error: unknown benchmark `{other}`; available: vector-add, checked, atomics, transpose, softmax, streams, graph, stream-acquire, alloc, cuda-launch, cuda-compile, cuda-pool, cuda-transfer");
            ExitCode::from(2)
        }
    }
}

/// The exit code of a benchmark that verifies its results: success only when it ran and
/// every result was right (it has printed what was wrong otherwise).
fn verified(outcome: dotcompute::Result<bool>) -> ExitCode {
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// VectorAdd through `#[kernel]` on the CPU backend versus a hand-written rayon loop doing
/// the same work on host vectors, plus a plain memcpy of one operand for scale.
fn vector_add(n: usize, reps: usize) -> ExitCode {
    let device = Device::cpu();
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let b: Vec<f32> = (0..n).map(|i| i as f32 * 0.25).collect();
    let run = || -> dotcompute::Result<ExitCode> {
        let (da, db) = (device.upload(&a)?, device.upload(&b)?);
        let mut dout = device.alloc::<f32>(n)?;
        let mut err = None;
        let mut host_out = vec![0.0f32; n];
        let (t_kernel, t_rayon) = time_pair(
            reps,
            || {
                if let Err(e) =
                    kernels::vector_add::launch(&device, Launch::threads(n), &da, &db, &mut dout)
                {
                    err = Some(e);
                }
            },
            || {
                host_out
                    .par_iter_mut()
                    .zip(a.par_iter().zip(b.par_iter()))
                    .for_each(|(o, (x, y))| *o = x + y);
            },
        );
        if let Some(e) = err {
            return Err(e);
        }
        // Both paths did the full work: every element must agree.
        if dout.to_vec()? != host_out {
            eprintln!("error: the kernel's result differs from the reference loop");
            return Ok(ExitCode::FAILURE);
        }
        let mut copy = vec![0.0f32; n];
        let (t_copy, _) = time_pair(reps, || copy.copy_from_slice(&a), || {});
        let gbs = |bytes: usize, t: Duration| bytes as f64 / t.as_secs_f64() / 1e9;
        let add_bytes = 3 * 4 * n;
        println!(
            "vector add, {n} f32, cpu ({} rayon threads), median of {reps} after 3 warm-ups",
            rayon::current_num_threads()
        );
        println!(
            "  #[kernel] on the CPU backend  {:>9.3} ms  {:>7.2} GB/s",
            t_kernel.as_secs_f64() * 1e3,
            gbs(add_bytes, t_kernel)
        );
        println!(
            "  hand-written rayon loop       {:>9.3} ms  {:>7.2} GB/s",
            t_rayon.as_secs_f64() * 1e3,
            gbs(add_bytes, t_rayon)
        );
        println!(
            "  memcpy of one operand         {:>9.3} ms  {:>7.2} GB/s",
            t_copy.as_secs_f64() * 1e3,
            gbs(2 * 4 * n, t_copy)
        );
        let ratio = t_kernel.as_secs_f64() / t_rayon.as_secs_f64();
        println!("  kernel time / rayon time      {ratio:.3} (target ≤ 1.5)");
        Ok(ExitCode::SUCCESS)
    };
    match run() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Launches per timed batch: per-launch time is a batch's wall time (submissions back to
/// back, one synchronize at the end) divided by this, which hides the host round trip.
const BATCH: usize = 20;

/// VectorAdd on a device versus a device-to-device copy on the same device, as
/// bandwidth: the kernel moves 12 bytes per element (two reads, one write), the copy 8.
fn vector_add_vs_copy(
    device: &Device,
    n: usize,
    reps: usize,
    group: Option<u32>,
) -> dotcompute::Result<ExitCode> {
    let a: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.5).collect();
    let b: Vec<f32> = (0..n).map(|i| (i % 777) as f32 * 0.25).collect();
    let (da, db) = (device.upload(&a)?, device.upload(&b)?);
    let mut out = device.alloc_filled(n, f32::NAN)?;
    let mut copy_dst = device.alloc::<f32>(n)?;
    let launch = || match group {
        Some(g) => Launch::threads(n).group(g),
        None => Launch::threads(n),
    };
    let kernel_batch = |out: &mut dotcompute::Buffer<f32>| -> dotcompute::Result<Duration> {
        let t = Instant::now();
        for _ in 0..BATCH {
            kernels::vector_add::launch(device, launch(), &da, &db, out)?;
        }
        device.synchronize()?;
        Ok(t.elapsed() / BATCH as u32)
    };
    let copy_batch = |dst: &mut dotcompute::Buffer<f32>| -> dotcompute::Result<Duration> {
        let t = Instant::now();
        for _ in 0..BATCH {
            dst.copy_from(&da)?;
        }
        device.synchronize()?;
        Ok(t.elapsed() / BATCH as u32)
    };
    for _ in 0..3 {
        kernel_batch(&mut out)?;
        copy_batch(&mut copy_dst)?;
    }
    let (mut tk, mut tc) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        tk.push(kernel_batch(&mut out)?);
        tc.push(copy_batch(&mut copy_dst)?);
    }
    let (tk, tc) = (median(tk), median(tc));
    let got = out.to_vec()?;
    let wrong = (0..n).filter(|&i| got[i] != a[i] + b[i]).count();
    if wrong > 0 || copy_dst.to_vec()? != a {
        eprintln!("error: {wrong} wrong elements in the kernel's output (or a wrong copy)");
        return Ok(ExitCode::FAILURE);
    }
    let gbs = |bytes: usize, t: Duration| bytes as f64 / t.as_secs_f64() / 1e9;
    let (kbw, cbw) = (gbs(12 * n, tk), gbs(8 * n, tc));
    println!(
        "vector add, {n} f32 on {}, group {}, median of {reps} batches of {BATCH} after 3 warm-ups",
        device.label(),
        group.map_or("default".to_string(), |g| g.to_string())
    );
    let row = |name: &str, t: Duration, bw: f64| {
        println!(
            "  {name:<30}{:>9.3} ms  {bw:>8.1} GB/s",
            t.as_secs_f64() * 1e3
        )
    };
    println!("wall clock (submission included):");
    row("#[kernel] vector add", tk, kbw);
    row("device-to-device copy", tc, cbw);
    println!("  kernel bandwidth / copy bandwidth  {:.3}", kbw / cbw);
    // Device time of each operation alone, from timestamp queries where the backend has
    // them: the fair comparison of the GPU work itself.
    device.set_profiling(true);
    for _ in 0..reps {
        kernels::vector_add::launch(device, launch(), &da, &db, &mut out)?;
        copy_dst.copy_from(&da)?;
    }
    device.synchronize()?;
    device.set_profiling(false);
    let timings = device.take_timings();
    let pick = |label: &str| -> Option<Duration> {
        let v: Vec<Duration> = timings
            .iter()
            .filter(|t| t.label == label && t.device_time)
            .map(|t| t.duration)
            .collect();
        (v.len() == reps).then(|| median(v))
    };
    match (pick("vector_add"), pick("copy")) {
        (Some(gk), Some(gc)) => {
            let (gkbw, gcbw) = (gbs(12 * n, gk), gbs(8 * n, gc));
            println!("device time (timestamp queries, median of {reps}):");
            row("#[kernel] vector add", gk, gkbw);
            row("device-to-device copy", gc, gcbw);
            // The targets of the backends' issues: 0.9 for CUDA, 0.8 for wgpu.
            let target = if device.backend_kind() == dotcompute::BackendKind::Cuda {
                0.9
            } else {
                0.8
            };
            println!(
                "  kernel bandwidth / copy bandwidth  {:.3} (target >= {target} on the GPU machine)",
                gkbw / gcbw
            );
        }
        _ => println!("device time: this device has no timestamp queries for both operations"),
    }
    if device.backend_kind() == dotcompute::BackendKind::Cuda {
        hand_written_cuda(device, n, reps, &da, &db, &mut out)?;
    }
    if device.backend_kind() == dotcompute::BackendKind::Wgpu {
        hand_written_wgsl(device, n, reps, &da, &db, &mut out)?;
    }
    if !user_vec4(device, &a, &b, reps)? {
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The median device time of `reps` runs of `run` after 3 warm-ups (the profiled
/// timings of everything `run` enqueues, summed per run).
fn device_median(
    device: &Device,
    reps: usize,
    mut run: impl FnMut() -> dotcompute::Result<()>,
) -> dotcompute::Result<Duration> {
    for _ in 0..3 {
        run()?;
    }
    device.synchronize()?;
    device.take_timings();
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        device.set_profiling(true);
        run()?;
        device.synchronize()?;
        device.set_profiling(false);
        times.push(device.take_timings().iter().map(|t| t.duration).sum());
    }
    Ok(median(times))
}

/// `x` as whole 16-byte vectors (a tail of fewer than 4 is left out).
fn pack4(x: &[f32]) -> Vec<dotcompute::Vec4<f32>> {
    x.chunks_exact(4)
        .map(|c| dotcompute::Vec4::new(c[0], c[1], c[2], c[3]))
        .collect()
}

/// The same vector add written by a user with `Vec4<f32>` elements (one 16-byte access
/// per element), on `n / 4` vectors; its output is verified. Whether it fails is the
/// return value.
fn user_vec4(device: &Device, a: &[f32], b: &[f32], reps: usize) -> dotcompute::Result<bool> {
    use dotcompute::Vec4;
    let v = a.len() / 4;
    let (a4, b4) = (pack4(a), pack4(b));
    let (da, db) = (device.upload(&a4)?, device.upload(&b4)?);
    let mut out = device.alloc_filled(v, Vec4::splat(f32::NAN))?;
    let t = device_median(device, reps, || {
        kernels::vector_add4::launch(device, Launch::threads(v), &da, &db, &mut out)
    })?;
    let got = out.to_vec()?;
    if (0..v).any(|i| got[i] != a4[i] + b4[i]) {
        eprintln!("error: the Vec4 vector add gave wrong elements");
        return Ok(false);
    }
    println!(
        "  #[kernel] with Vec4<f32>         {:>9.3} ms  {:>8.1} GB/s",
        t.as_secs_f64() * 1e3,
        (48 * v) as f64 / t.as_secs_f64() / 1e9
    );
    Ok(true)
}

/// Hand-written WGSL vector adds on the same buffers, as the references a skeptic would
/// pick on wgpu: one element per invocation, and a vec4 grid-stride loop (the kernel the
/// issue measured at 4.3 TB/s on an H200), each verified.
fn hand_written_wgsl(
    device: &Device,
    n: usize,
    reps: usize,
    a: &dotcompute::Buffer<f32>,
    b: &dotcompute::Buffer<f32>,
    out: &mut dotcompute::Buffer<f32>,
) -> dotcompute::Result<()> {
    use dotcompute::ir::ScalarType;
    use dotcompute::{Arg, RawKernel, RawParam, Vec4};
    // 65,535 groups at most in x: a grid-stride loop over a fixed 8,192 groups of 256.
    const SCALAR: &str = "
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = arrayLength(&c);
    for (var i = id.x; i < n; i += nwg.x * 256u) {
        c[i] = a[i] + b[i];
    }
}";
    const VEC4: &str = "
@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> c: array<vec4<f32>>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = arrayLength(&c);
    for (var i = id.x; i < n; i += nwg.x * 256u) {
        c[i] = a[i] + b[i];
    }
}";
    let launch = Launch::threads(8192 * 256).group(256);
    let scalar = RawKernel::wgsl(
        "add_scalar",
        SCALAR,
        &[
            RawParam::buffer("a", ScalarType::F32),
            RawParam::buffer("b", ScalarType::F32),
            RawParam::buffer_mut("c", ScalarType::F32),
        ],
    )?;
    let t = device_median(device, reps, || {
        device.launch_raw(
            &scalar,
            launch,
            &[Arg::buffer(a), Arg::buffer(b), Arg::buffer_mut(out)],
        )
    })?;
    println!(
        "  hand-written WGSL, f32           {:>9.3} ms  {:>8.1} GB/s",
        t.as_secs_f64() * 1e3,
        (12 * n) as f64 / t.as_secs_f64() / 1e9
    );
    // vec4: its own buffers of n / 4 vectors (a buffer's element type is fixed).
    let v = n / 4;
    let (a4, b4) = (pack4(&a.to_vec()?), pack4(&b.to_vec()?));
    let (da4, db4) = (device.upload(&a4)?, device.upload(&b4)?);
    let mut c4 = device.alloc_filled(v, Vec4::splat(f32::NAN))?;
    let vec4 = RawKernel::wgsl(
        "add_vec4",
        VEC4,
        &[
            RawParam::buffer("a", Vec4::<f32>::TYPE),
            RawParam::buffer("b", Vec4::<f32>::TYPE),
            RawParam::buffer_mut("c", Vec4::<f32>::TYPE),
        ],
    )?;
    let t = device_median(device, reps, || {
        device.launch_raw(
            &vec4,
            launch,
            &[
                Arg::buffer(&da4),
                Arg::buffer(&db4),
                Arg::buffer_mut(&mut c4),
            ],
        )
    })?;
    let got = c4.to_vec()?;
    if (0..v).any(|i| got[i] != a4[i] + b4[i]) {
        return Err(dotcompute::Error::Backend {
            backend: "wgpu".into(),
            message: "the hand-written vec4 WGSL gave wrong elements".into(),
        });
    }
    println!(
        "  hand-written WGSL, vec4          {:>9.3} ms  {:>8.1} GB/s",
        t.as_secs_f64() * 1e3,
        (48 * v) as f64 / t.as_secs_f64() / 1e9
    );
    Ok(())
}

/// Hand-written CUDA C++ vector adds on the same buffers, as further references: the
/// plain one-element-per-thread kernel and a float4 grid-stride kernel.
fn hand_written_cuda(
    device: &Device,
    n: usize,
    reps: usize,
    a: &dotcompute::Buffer<f32>,
    b: &dotcompute::Buffer<f32>,
    out: &mut dotcompute::Buffer<f32>,
) -> dotcompute::Result<()> {
    use dotcompute::{ir::ScalarType, Arg, RawKernel, RawParam};
    const SOURCE: &str = r#"
extern "C" __global__ void add_scalar(const float* __restrict__ a, const float* __restrict__ b,
                                      float* __restrict__ c, unsigned long long n) {
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
extern "C" __global__ void add_vec4(const float* __restrict__ a, const float* __restrict__ b,
                                    float* __restrict__ c, unsigned long long n) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long n4 = n / 4;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 x = reinterpret_cast<const float4*>(a)[i];
        float4 y = reinterpret_cast<const float4*>(b)[i];
        reinterpret_cast<float4*>(c)[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
    for (unsigned long long i = n4 * 4 + (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) c[i] = a[i] + b[i];
}
"#;
    let params = [
        RawParam::buffer("a", ScalarType::F32),
        RawParam::buffer("b", ScalarType::F32),
        RawParam::buffer_mut("c", ScalarType::F32),
        RawParam::scalar("n", ScalarType::U64),
    ];
    let sms = device.info().compute_units as usize;
    for (entry, launch) in [
        ("add_scalar", Launch::threads(n).group(256)),
        ("add_vec4", Launch::threads(sms * 2048).group(256)),
    ] {
        let k = RawKernel::cuda(entry, SOURCE, &params)?;
        let args = |out: &mut dotcompute::Buffer<f32>| {
            device.launch_raw(
                &k,
                launch,
                &[
                    Arg::buffer(a),
                    Arg::buffer(b),
                    Arg::buffer_mut(out),
                    Arg::scalar(n as u64),
                ],
            )
        };
        for _ in 0..3 {
            args(out)?;
        }
        device.synchronize()?;
        device.take_timings();
        device.set_profiling(true);
        for _ in 0..reps {
            args(out)?;
        }
        device.set_profiling(false);
        let t = median(
            device
                .take_timings()
                .into_iter()
                .map(|t| t.duration)
                .collect(),
        );
        println!(
            "  hand-written CUDA {entry:<12}{:>9.3} ms  {:>8.1} GB/s",
            t.as_secs_f64() * 1e3,
            (12 * n) as f64 / t.as_secs_f64() / 1e9
        );
    }
    Ok(())
}

/// The tiled transpose through a padded 2-D shared tile (`kernels::transpose_2d`, one
/// barrier per tile) of a 4096×4095 f32 matrix, the issue's 2-D shared-memory figure:
/// median device time of `reps` after 3 warm-ups, as bytes moved (read + write) per
/// second; the output is verified.
fn transpose(device: &Device, reps: usize) -> dotcompute::Result<bool> {
    let (w, h) = (4096usize, 4095usize);
    let input: Vec<f32> = (0..w * h).map(|i| (i % 10007) as f32).collect();
    let din = device.upload(&input)?;
    let mut out = device.alloc_filled(w * h, f32::NAN)?;
    let t2 = kernels::TILE_2D as usize;
    let launch = Launch::grid2d(w.next_multiple_of(t2), h.next_multiple_of(t2))
        .group2d(t2 as u32, t2 as u32);
    let t = device_median(device, reps, || {
        kernels::transpose_2d::launch(device, launch, &din, &mut out, w as u32, h as u32)
    })?;
    let got = out.to_vec()?;
    let wrong = (0..h)
        .flat_map(|y| (0..w).map(move |x| (x, y)))
        .filter(|&(x, y)| got[x * h + y] != input[y * w + x])
        .count();
    if wrong > 0 {
        eprintln!("error: {wrong} wrong elements in the transpose");
        return Ok(false);
    }
    println!(
        "transpose {h}x{w} f32 on {}, tiles {t2}x{t2}: {:.3} ms, {:.1} GB/s (read + write), median of {reps}",
        device.label(),
        t.as_secs_f64() * 1e3,
        (8 * w * h) as f64 / t.as_secs_f64() / 1e9
    );
    Ok(true)
}

/// Row softmax of an 8192×1000 f32 matrix (`kernels::softmax_rows`, one group per row,
/// two shared-memory reductions): median device time of `reps` after 3 warm-ups, as the
/// bytes the kernel reads (twice) and writes per second; every element is checked
/// against an f64 reference (relative error at most 1e-5).
fn softmax(device: &Device, reps: usize) -> dotcompute::Result<bool> {
    let (rows, cols) = (8192usize, 1000usize);
    let x: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7919) % 2003) as f32 * 0.005 - 5.0)
        .collect();
    let dx = device.upload(&x)?;
    let mut out = device.alloc_filled(rows * cols, f32::NAN)?;
    let g = kernels::SOFTMAX_GROUP;
    let launch = Launch::threads(rows * g as usize).group(g);
    let t = device_median(device, reps, || {
        kernels::softmax_rows::launch(device, launch, &dx, &mut out, cols as u32)
    })?;
    let got = out.to_vec()?;
    let mut worst = 0.0f64;
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let top = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let sum: f64 = row.iter().map(|&v| (v as f64 - top).exp()).sum();
        for c in 0..cols {
            let want = (row[c] as f64 - top).exp() / sum;
            worst = worst.max((got[r * cols + c] as f64 - want).abs() / want);
        }
    }
    if worst.is_nan() || worst > 1e-5 {
        eprintln!("error: softmax relative error {worst:e} (at most 1e-5 allowed)");
        return Ok(false);
    }
    println!(
        "softmax {rows}x{cols} f32 on {}, {g} threads per row: {:.3} ms, {:.1} GB/s (2 reads + 1 write), max relative error {worst:.1e}, median of {reps}",
        device.label(),
        t.as_secs_f64() * 1e3,
        (12 * rows * cols) as f64 / t.as_secs_f64() / 1e9
    );
    Ok(true)
}

/// f32 atomic adds from `n` threads (at most 2^24, so the sum is exact) to one address:
/// the median time of `reps` launches after 3 warm-ups, device time where the backend
/// measures it; every launch's sum is checked. Compare backends by running it on each
/// (the issue's reference: CUDA, same GPU).
fn contended_atomics(device: &Device, n: usize, reps: usize) -> dotcompute::Result<bool> {
    let n = n.min(1 << 24);
    let mut total = device.alloc_filled(1, 0.0f32)?;
    let run = |total: &mut dotcompute::Buffer<f32>| -> dotcompute::Result<()> {
        total.fill(0.0)?;
        kernels::contended_add::launch(device, Launch::threads(n), total, n as u32)
    };
    for _ in 0..3 {
        run(&mut total)?;
    }
    device.synchronize()?;
    device.take_timings();
    let mut times = Vec::with_capacity(reps);
    let mut device_time = true;
    for _ in 0..reps {
        device.set_profiling(true);
        run(&mut total)?;
        device.synchronize()?;
        device.set_profiling(false);
        let t = device.take_timings();
        device_time &= t.iter().all(|t| t.device_time);
        times.push(
            t.iter()
                .filter(|t| t.label == "contended_add")
                .map(|t| t.duration)
                .sum(),
        );
        let sum = total.to_vec()?[0];
        if sum != n as f32 {
            eprintln!("error: {n} atomic adds of 1.0 gave {sum}");
            return Ok(false);
        }
    }
    let t = median(times);
    println!(
        "{n} threads adding 1.0 to one f32 on {} ({}, {}): {:.3} ms, median of {reps}, every sum exact",
        device.label(),
        match device.info().caps.atomic_f32_add {
            dotcompute::AtomicF32Add::Native => "native f32 atomics",
            dotcompute::AtomicF32Add::CompareExchangeLoop => "compare-exchange loop",
        },
        if device_time { "device time" } else { "host wall time" },
        t.as_secs_f64() * 1e3
    );
    Ok(true)
}

/// The cost of checked mode (`Launch::checked`): each kernel launched unchecked and
/// checked, alternately, every launch waited for (a checked launch waits to read its
/// violation record, so the unchecked reference waits too), median of `reps` after 3
/// warm-ups. A bandwidth-bound kernel (vector add, `n` elements) and one whose inner loop
/// is shared-memory accesses (the tiled 512³ matrix product).
fn checked_overhead(device: &Device, n: usize, reps: usize) -> dotcompute::Result<()> {
    let a: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.5).collect();
    let b: Vec<f32> = (0..n).map(|i| (i % 777) as f32 * 0.25).collect();
    let (da, db) = (device.upload(&a)?, device.upload(&b)?);
    let mut out = device.alloc_filled(n, f32::NAN)?;
    let m = 512usize;
    let ma: Vec<f32> = (0..m * m).map(|i| (i % 13) as f32 * 0.125).collect();
    let (dma, dmb) = (device.upload(&ma)?, device.upload(&ma)?);
    let mut dmc = device.alloc_filled(m * m, f32::NAN)?;
    let tile = kernels::TILE;
    let mut time = |kernel: usize, checked: bool| -> dotcompute::Result<Duration> {
        let t = Instant::now();
        match kernel {
            0 => kernels::vector_add::launch(
                device,
                Launch::threads(n).checked(checked),
                &da,
                &db,
                &mut out,
            )?,
            _ => kernels::matmul_tiled::launch(
                device,
                Launch::grid2d(m, m).group2d(tile, tile).checked(checked),
                &dma,
                &dmb,
                &mut dmc,
                m as u32,
                m as u32,
                m as u32,
            )?,
        }
        device.synchronize()?;
        Ok(t.elapsed())
    };
    println!(
        "checked mode on {}: median of {reps} launches each (every launch waited for), after 3 warm-ups",
        device.label()
    );
    println!(
        "  {:<28}{:>12}{:>12}{:>10}",
        "kernel", "unchecked", "checked", "ratio"
    );
    for (kernel, name) in [
        (0, format!("vector add ({n} f32)")),
        (1, format!("tiled matmul {m}³ f32")),
    ] {
        for _ in 0..3 {
            time(kernel, false)?;
            time(kernel, true)?;
        }
        let (mut tu, mut tc) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            tu.push(time(kernel, false)?);
            tc.push(time(kernel, true)?);
        }
        let (tu, tc) = (median(tu), median(tc));
        println!(
            "  {name:<28}{:>9.3} ms{:>9.3} ms{:>10.2}",
            tu.as_secs_f64() * 1e3,
            tc.as_secs_f64() * 1e3,
            tc.as_secs_f64() / tu.as_secs_f64()
        );
    }
    // Both forms computed the same results.
    let got = out.to_vec()?;
    if (0..n).any(|i| got[i] != a[i] + b[i]) {
        return Err(dotcompute::Error::Backend {
            backend: device.label(),
            message: "checked vector add gave a wrong element".into(),
        });
    }
    Ok(())
}
