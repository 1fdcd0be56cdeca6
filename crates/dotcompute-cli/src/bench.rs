//! The single benchmarks with their own report (the suite is `crate::suite`): checked
//! mode's cost, and the Core v2 and CUDA figures of `bench_core` and `bench_cuda`.

use dotcompute::{Device, Launch};
use dotcompute_conformance::kernels;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The benchmarks `dotcompute bench NAME` runs on their own (besides `cuda-*`).
pub const SINGLE: &[&str] = &["checked", "stream-acquire", "alloc"];

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

pub fn run(name: &str, n: usize, reps: usize, backend: &str, trace: Option<&str>) -> ExitCode {
    let outcome = match name {
        "streams" | "stream-acquire" | "alloc" => {
            crate::bench_core::run(name, backend, reps.max(1), trace)
        }
        cuda if cuda.starts_with("cuda-") => return crate::bench_cuda::run(cuda, reps.max(1)),
        "checked" => Device::by_name(backend)
            .map_err(|e| e.to_string())
            .and_then(|d| {
                check_elements(&d, n, 3, 4)?;
                checked_overhead(&d, n, reps.max(1)).map_err(|e| e.to_string())
            }),
        other => Err(format!(
            "`{other}` is not a single benchmark; available: {}, streams with --trace, cuda-launch, cuda-compile, cuda-pool, cuda-transfer",
            SINGLE.join(", ")
        )),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Whether `buffers` device buffers of `n` elements of `elem_bytes` each (and their host
/// copies) can exist: checked before anything is allocated, so a size too large is a
/// one-line error, not an aborted allocation (`--n 4000000000000` aborted before).
pub(crate) fn check_elements(
    device: &Device,
    n: usize,
    buffers: usize,
    elem_bytes: usize,
) -> Result<(), String> {
    if n == 0 {
        return Err("--n must be at least 1".into());
    }
    if n > u32::MAX as usize {
        return Err(format!(
            "--n {n} is more elements than a kernel can index ({}: indices are u32)",
            u32::MAX
        ));
    }
    let bytes = n as u128 * elem_bytes as u128;
    let info = device.info();
    if bytes > info.limits.max_buffer_bytes as u128 {
        return Err(format!(
            "--n {n} needs buffers of {bytes} bytes; {} allows at most {} bytes per buffer",
            device.label(),
            info.limits.max_buffer_bytes
        ));
    }
    if bytes * buffers as u128 > info.memory_bytes as u128 {
        return Err(format!(
            "--n {n} needs {} bytes in {buffers} buffers; {} has {} bytes",
            bytes * buffers as u128,
            device.label(),
            info.memory_bytes
        ));
    }
    // The host copies: reserve them without aborting when the host cannot.
    let mut probe: Vec<u8> = Vec::new();
    probe
        .try_reserve_exact(bytes as usize)
        .map_err(|e| format!("--n {n}: the host cannot hold {bytes} bytes ({e})"))?;
    Ok(())
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
        return Err(dotcompute::Error::internal(
            format!("checked mode on {}", device.label()),
            "checked vector add gave a wrong element",
        ));
    }
    Ok(())
}
