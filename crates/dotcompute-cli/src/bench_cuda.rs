//! CUDA benchmarks, each against a reference measured in the same run:
//!
//! * `cuda-launch`: an empty kernel launched through dotcompute versus the same CUDA
//!   function launched with a raw `cuLaunchKernel` (cudarc's result layer);
//! * `cuda-compile`: preparing a kernel in a fresh process with a cold disk cache (NVRTC)
//!   versus a fresh process that finds it on disk;
//! * `cuda-pool`: a pooled allocation and free versus raw `cuMemAlloc` + `cuMemFree`.

use crate::suite::Stats;
use cudarc::driver::{result as cu, sys};
use dotcompute::{BackendKind, Device, Launch};
use dotcompute_cuda::{CacheOutcome, CudaBackend};
use std::ffi::c_void;
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

#[dotcompute::kernel]
fn empty(out: &mut [u32]) {
    let _unused = out.len();
}

type Res<T> = Result<T, String>;

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

pub fn run(name: &str, reps: usize) -> ExitCode {
    let result = match name {
        "cuda-launch" => launch(reps),
        "cuda-compile" => compile(reps),
        "cuda-compile-child" => compile_child(),
        "cuda-pool" => pool(reps),
        "cuda-transfer" => transfer(reps),
        _ => Err(format!("unknown CUDA benchmark `{name}`")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Launches per timed batch; per-launch cost = batch wall time / BATCH (enqueue cost plus
/// the GPU's launch rate, the same for both sides).
const BATCH: u32 = 2000;

fn launch(reps: usize) -> Res<()> {
    let (device, td, tr) = measure_launch(reps, BATCH)?;
    let (td, tr) = (
        Duration::from_secs_f64(td.median_s),
        Duration::from_secs_f64(tr.median_s),
    );
    println!(
        "empty-kernel launch on {}, median of {reps} batches of {BATCH} after 3 warm-ups",
        device.label()
    );
    println!("  dotcompute launch (typed, checked)  {:>8.3} µs", us(td));
    println!("  raw cuLaunchKernel (cudarc)         {:>8.3} µs", us(tr));
    println!(
        "  dotcompute / raw                    {:>8.3} (target <= 1.2)",
        td.as_secs_f64() / tr.as_secs_f64()
    );
    Ok(())
}

/// Per-launch wall time of an empty kernel through dotcompute and through a raw
/// `cuLaunchKernel` of the same function: `reps` batches of `batch` launches and one
/// synchronize, after 3 warm-up batches.
pub fn measure_launch(reps: usize, batch: u32) -> Res<(Device, Stats, Stats)> {
    let device = Device::with_backend(BackendKind::Cuda).map_err(s)?;
    let mut out = device.alloc_filled(1, 7u32).map_err(s)?;
    // The reference: the same generated function, launched by hand on another stream of
    // the same (primary) context with the same six parameters.
    let reference = CudaBackend::new().map_err(s)?;
    let program = empty::KERNEL.program().map_err(s)?;
    let (func, stream) = reference.raw_handles(program).map_err(s)?;
    let raw_out = dotcompute_hal_buffer(&reference)?;
    let mut slots: [u64; 6] = [raw_out, 1, 1, 1, 1, 0];
    let mut dotcompute_batch = || -> Res<Duration> {
        let t = Instant::now();
        for _ in 0..batch {
            empty::launch(&device, Launch::threads(1), &mut out).map_err(s)?;
        }
        device.synchronize().map_err(s)?;
        Ok(t.elapsed() / batch)
    };
    let mut raw_batch = || -> Res<Duration> {
        let mut params: Vec<*mut c_void> =
            slots.iter_mut().map(|p| (p as *mut u64).cast()).collect();
        let t = Instant::now();
        for _ in 0..batch {
            // SAFETY: the parameters match the generated kernel's ABI (pointer, length,
            // grid x/y/z, dynamic shared length) and point at live storage.
            unsafe { cu::launch_kernel(func, (1, 1, 1), (256, 1, 1), 0, stream, &mut params) }
                .map_err(|e| format!("cuLaunchKernel: {e:?}"))?;
        }
        // SAFETY: the stream is live.
        unsafe { cu::stream::synchronize(stream) }.map_err(|e| format!("{e:?}"))?;
        Ok(t.elapsed() / batch)
    };
    for _ in 0..3 {
        dotcompute_batch()?;
        raw_batch()?;
    }
    let (mut td, mut tr) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        td.push(dotcompute_batch()?);
        tr.push(raw_batch()?);
    }
    if out.to_vec().map_err(s)? != vec![7] {
        return Err("the empty kernel changed its buffer".into());
    }
    Ok((
        device,
        Stats::from_times(td, false),
        Stats::from_times(tr, false),
    ))
}

/// A one-element device buffer of the reference backend, as a raw address.
fn dotcompute_hal_buffer(backend: &CudaBackend) -> Res<u64> {
    use dotcompute_cuda::Backend;
    let (b, _) = backend.alloc(4).map_err(s)?;
    // Not returned to the pool: the block stays allocated until the backend is dropped,
    // after the benchmark.
    Ok(b.device_ptr())
}

/// The child: creates a backend (not timed), then times preparing a kernel and prints
/// `<outcome> <microseconds>`.
fn compile_child() -> Res<()> {
    let backend = CudaBackend::new().map_err(s)?;
    let program = dotcompute_conformance::kernels::matmul_tiled::KERNEL
        .program()
        .map_err(s)?;
    let t = Instant::now();
    let outcome = backend.prepare_program(program).map_err(s)?;
    let elapsed = t.elapsed();
    println!("{outcome:?} {:.1}", us(elapsed));
    Ok(())
}

fn child(dir: &std::path::Path) -> Res<(String, f64)> {
    let exe = std::env::current_exe().map_err(s)?;
    let out = std::process::Command::new(exe)
        .args(["bench", "cuda-compile-child"])
        .env("DOTCOMPUTE_CACHE_DIR", dir)
        .output()
        .map_err(s)?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        return Err(format!(
            "child failed: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut it = text.split_whitespace();
    let outcome = it.next().unwrap_or_default().to_string();
    let micros = it
        .next()
        .and_then(|v| v.parse().ok())
        .ok_or("bad child output")?;
    Ok((outcome, micros))
}

fn compile(reps: usize) -> Res<()> {
    let reps = reps.clamp(3, 15);
    let (c, d) = measure_compile(reps)?;
    let (c, d) = (
        Duration::from_secs_f64(c.median_s),
        Duration::from_secs_f64(d.median_s),
    );
    print_compile(reps, c, d);
    Ok(())
}

/// Preparing `matmul_tiled` in a fresh process with an empty disk cache (codegen, NVRTC,
/// module load, disk write), then in another fresh process that finds it on disk:
/// `reps` pairs, each child checked to report the outcome expected of it.
pub fn measure_compile(reps: usize) -> Res<(Stats, Stats)> {
    let (mut cold, mut disk) = (Vec::new(), Vec::new());
    for i in 0..reps {
        let dir = std::env::temp_dir().join(format!("dc-bench-cache-{}-{i}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (o1, t1) = child(&dir)?;
        let (o2, t2) = child(&dir)?;
        let _ = std::fs::remove_dir_all(&dir);
        if o1 != format!("{:?}", CacheOutcome::Compiled)
            || o2 != format!("{:?}", CacheOutcome::Disk)
        {
            return Err(format!(
                "expected a compile then a disk hit, got {o1} then {o2}"
            ));
        }
        cold.push(Duration::from_secs_f64(t1 / 1e6));
        disk.push(Duration::from_secs_f64(t2 / 1e6));
    }
    Ok((
        Stats::from_times(cold, false),
        Stats::from_times(disk, false),
    ))
}

fn print_compile(reps: usize, c: Duration, d: Duration) {
    println!("compile cache, kernel matmul_tiled, fresh process each time, median of {reps}");
    println!(
        "  cold: codegen + NVRTC + cuModuleLoadData + disk write  {:>10.1} µs",
        us(c)
    );
    println!(
        "  disk hit: read + checksum + cuModuleLoadData           {:>10.1} µs",
        us(d)
    );
    println!(
        "  cold / disk hit                                        {:>10.1} (target >= 20)",
        c.as_secs_f64() / d.as_secs_f64()
    );
}

const POOL_BATCH: u32 = 10_000;

fn pool(reps: usize) -> Res<()> {
    let device = Device::with_backend(BackendKind::Cuda).map_err(s)?;
    let (tp, tr) = measure_pool(&device, reps)?;
    let (tp, tr) = (
        Duration::from_secs_f64(tp.median_s),
        Duration::from_secs_f64(tr.median_s),
    );
    let stats = device.memory_stats();
    println!(
        "alloc + free of 1 MiB on {}, median of {reps} batches",
        device.label()
    );
    println!(
        "  dotcompute pool (Device::alloc + drop)  {:>9.3} µs (target <= 1)",
        us(tp)
    );
    println!(
        "  raw cuMemAlloc + cuMemFree              {:>9.3} µs",
        us(tr)
    );
    println!(
        "  pool: {} driver allocations, {} hits",
        stats.driver_allocations, stats.pool_hits
    );
    Ok(())
}

/// Allocation and free of 1 MiB on `device` (a CUDA device): through the pool, and raw
/// `cuMemAlloc` + `cuMemFree`; per pair, `reps` batches after 3 warm-up batches.
pub fn measure_pool(device: &Device, reps: usize) -> Res<(Stats, Stats)> {
    let bytes = 1 << 20;
    let pooled = || -> Res<Duration> {
        let t = Instant::now();
        for _ in 0..POOL_BATCH {
            let b = device.alloc::<u32>(bytes / 4).map_err(s)?;
            drop(std::hint::black_box(b));
        }
        Ok(t.elapsed() / POOL_BATCH)
    };
    let raw = || -> Res<Duration> {
        let n = POOL_BATCH / 10;
        let t = Instant::now();
        for _ in 0..n {
            // SAFETY: allocate and free at once; nothing uses the memory.
            unsafe {
                let p: sys::CUdeviceptr = cu::malloc_sync(bytes).map_err(|e| format!("{e:?}"))?;
                cu::free_sync(p).map_err(|e| format!("{e:?}"))?;
            }
        }
        Ok(t.elapsed() / n)
    };
    for _ in 0..3 {
        pooled()?;
        raw()?;
    }
    let (mut tp, mut tr) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        tp.push(pooled()?);
        tr.push(raw()?);
    }
    Ok((Stats::from_times(tp, false), Stats::from_times(tr, false)))
}

/// Host-device bandwidth of 256 MiB: `Buffer::write`/`read_into` from ordinary (pageable)
/// memory, `upload_async`/`download_async` through a page-locked `HostBuffer` (then a
/// wait), and, as the reference, raw synchronous `cuMemcpyHtoD`/`DtoH` on the same
/// page-locked memory.
fn transfer(reps: usize) -> Res<()> {
    let device = Device::with_backend(BackendKind::Cuda).map_err(s)?;
    let (bytes, rows) = measure_transfer(&device, reps)?;
    println!(
        "256 MiB host <-> device on {}, median of {reps} after 2 warm-ups",
        device.label()
    );
    for (label, t) in rows {
        println!(
            "  {label:<38} {:>8.2} ms  {:>6.1} GB/s",
            t.median_s * 1e3,
            bytes as f64 / t.median_s / 1e9
        );
    }
    Ok(())
}

/// The rows of [`transfer`] as (label, time) with the bytes moved: writes from pageable
/// memory, `upload_async` from a `HostBuffer`, raw `cuMemcpyHtoD`, then the three reads.
/// The data read back is checked.
pub fn measure_transfer(device: &Device, reps: usize) -> Res<(usize, Vec<(&'static str, Stats)>)> {
    let n = 64 << 20;
    let bytes = n * 4;
    let pageable = vec![1.25f32; n];
    let mut pageable_back = vec![0f32; n];
    let mut staging = device.alloc_host::<f32>(n).map_err(s)?;
    staging.as_mut_slice().map_err(s)?.fill(1.25);
    let mut buf = device.alloc::<f32>(n).map_err(s)?;
    // The reference's own memory (the device's context is current on this thread now).
    // SAFETY: plain allocations, freed below; only the raw rows use them.
    let (dptr, host_ptr) = unsafe {
        (
            cu::malloc_sync(bytes).map_err(|e| format!("{e:?}"))?,
            cu::malloc_host(bytes, 0).map_err(|e| format!("{e:?}"))?,
        )
    };
    type Step<'a> = Box<
        dyn FnMut(&mut dotcompute::Buffer<f32>, &mut dotcompute::HostBuffer<f32>) -> Res<()> + 'a,
    >;
    let mut rows: Vec<(&str, Step)> = vec![
        (
            "write from pageable memory",
            Box::new(|b, _| b.write(&pageable).map_err(s)),
        ),
        (
            "upload_async from HostBuffer + wait",
            Box::new(|b, h| {
                b.upload_async(h).map_err(s)?;
                h.wait().map_err(s)
            }),
        ),
        (
            "raw cuMemcpyHtoD from page-locked",
            Box::new(|_, _| {
                // SAFETY: both ranges hold `bytes`; nothing else uses them meanwhile.
                unsafe { sys::cuMemcpyHtoD_v2(dptr, host_ptr.cast(), bytes) }
                    .result()
                    .map_err(|e| format!("{e:?}"))
            }),
        ),
        (
            "read_into pageable memory",
            Box::new(|b, _| b.read_into(&mut pageable_back).map_err(s)),
        ),
        (
            "download_async to HostBuffer + wait",
            Box::new(|b, h| {
                b.download_async(h).map_err(s)?;
                h.wait().map_err(s)
            }),
        ),
        (
            "raw cuMemcpyDtoH to page-locked",
            Box::new(|_, _| {
                // SAFETY: as above.
                unsafe { sys::cuMemcpyDtoH_v2(host_ptr.cast(), dptr, bytes) }
                    .result()
                    .map_err(|e| format!("{e:?}"))
            }),
        ),
    ];
    let mut out = Vec::new();
    for (label, step) in rows.iter_mut() {
        device.synchronize().map_err(s)?;
        let mut times = Vec::new();
        for i in 0..reps + 2 {
            let t = Instant::now();
            step(&mut buf, &mut staging)?;
            device.synchronize().map_err(s)?;
            if i >= 2 {
                times.push(t.elapsed());
            }
        }
        out.push((*label, Stats::from_times(times, false)));
    }
    drop(rows);
    // SAFETY: allocated above; the device is idle.
    unsafe {
        let _ = cu::free_sync(dptr);
        let _ = cu::free_host(host_ptr);
    }
    if pageable_back.iter().any(|&v| v != 1.25) {
        return Err("transfer: the data read back is wrong".into());
    }
    Ok((bytes, out))
}
