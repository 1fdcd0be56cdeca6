//! `dotcompute bench`: the performance suite.
//!
//! Every figure is a ratio against a reference measured in the same run on the same
//! device (a device-to-device copy, a hand-written kernel, the vendor library, a raw
//! driver call), after warm-up, as the median of repetitions, with minimum and maximum
//! kept; every benchmark verifies its results and a wrong result fails the run.
//!
//! Timing rule ([`measure_all`]): device time from the backend's timestamps where it has
//! them for every operation (CUDA events, wgpu timestamp queries), else host wall time
//! from enqueue to synchronize (the CPU).
//!
//! The suite writes JSON (`--json`), SVG plots (`--plot`, see [`plot`]) and a summary
//! table; `dotcompute bench-report FILE...` turns JSON files into the Markdown of
//! `docs/benchmarks.md` ([`report`]).

pub mod copies;
pub mod cpu;
pub mod matmul;
pub mod memory;
pub mod ops;
pub mod plot;
pub mod report;
pub mod runtime;
pub mod services;

use dotcompute::{BackendKind, Device};
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The suite's results error: a message (every benchmark verifies; a wrong result is an
/// error too).
pub type Res<T> = Result<T, String>;

pub fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Timing statistics of one measured operation.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Stats {
    pub median_s: f64,
    pub min_s: f64,
    pub max_s: f64,
    pub reps: usize,
    /// `device` (the backend's timestamps) or `wall` (host clock to synchronize).
    pub clock: String,
}

impl Stats {
    pub fn from_times(mut v: Vec<Duration>, device_clock: bool) -> Stats {
        v.sort();
        Stats {
            median_s: v[v.len() / 2].as_secs_f64(),
            min_s: v[0].as_secs_f64(),
            max_s: v[v.len() - 1].as_secs_f64(),
            reps: v.len(),
            clock: if device_clock { "device" } else { "wall" }.into(),
        }
    }

    /// Every time divided by `k` (a batch of `k` operations timed as one).
    pub fn per(mut self, k: usize) -> Stats {
        let k = k as f64;
        self.median_s /= k;
        self.min_s /= k;
        self.max_s /= k;
        self
    }
}

/// What a figure's value measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Unit {
    /// Bytes moved per second (reads + writes the operation must do), in 10^9.
    #[serde(rename = "GB/s")]
    GBs,
    /// Floating-point operations per second, in 10^12.
    #[serde(rename = "TFLOP/s")]
    TflopS,
    /// Microseconds per operation (lower is better).
    #[serde(rename = "µs")]
    Us,
}

impl Unit {
    pub fn higher_is_better(self) -> bool {
        self != Unit::Us
    }

    /// The value of `work` (bytes, flops, operations) done in `seconds`.
    fn value(self, work: f64, seconds: f64) -> f64 {
        match self {
            Unit::GBs => work / seconds / 1e9,
            Unit::TflopS => work / seconds / 1e12,
            Unit::Us => seconds * 1e6 / work,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Unit::GBs => "GB/s",
            Unit::TflopS => "TFLOP/s",
            Unit::Us => "µs",
        }
    }
}

/// One measured operation: a named case, its value and timing.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Measured {
    pub case: String,
    /// The backend it ran on (a cross-backend reference names another).
    pub backend: String,
    pub value: f64,
    pub time: Stats,
}

/// One figure of the suite: a case against its reference.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Figure {
    /// The benchmark (`vector-add`, `matmul`, ...).
    pub bench: String,
    pub device: String,
    /// Problem size in words (`2^24 f32`, `4096³`).
    pub size: String,
    /// The size as a number for plots (elements, or the matrix edge).
    pub x: f64,
    /// Arithmetic precision where it matters (`fp32`, `tf32`, `f16`).
    pub precision: Option<String>,
    pub unit: Unit,
    pub ours: Measured,
    pub reference: Option<Measured>,
    /// `ours.value / reference.value`: above 1 is better than the reference for rates,
    /// worse for times (`µs`).
    pub ratio: Option<f64>,
    /// The target for this ratio, where there is one.
    pub target: Option<String>,
    /// Whether every output of ours (and of the reference) was checked.
    pub verified: bool,
    pub note: Option<String>,
}

/// One benchmark's context: the device, the effort and the progress bar.
pub struct Ctx<'a> {
    pub device: &'a Device,
    pub quick: bool,
    /// Timed repetitions (after warm-up).
    pub reps: usize,
    pub progress: &'a ProgressBar,
    /// The memory [`Ctx::settle_caches`] reads, allocated on first use.
    pub settle: std::cell::RefCell<Option<Settle>>,
}

/// What [`Ctx::settle_caches`] reads.
pub enum Settle {
    /// On a GPU: [`SETTLE_BYTES`] of device memory, and the word its kernel would write
    /// (never, as the buffer is zeros; written only so the reads cannot be dropped).
    Device {
        lines: dotcompute::Buffer<dotcompute::Vec4<u32>>,
        sink: dotcompute::Buffer<u32>,
    },
    /// On the CPU device: the tuner's settle of the host's caches (twice the last-level
    /// cache, read on every core). The CPU rows' arrays of 2^24 elements (64 MiB each) fit
    /// together in the 300 MiB cache of the development machine's Xeon, so without it
    /// each run finds in the cache what the run before left (session 33: the library's
    /// scan took 5.7–6.9 ms after a copy and 8.9–10.6 ms after rayon's scan, whose
    /// written lines it had to write back).
    Host(dotcompute_ops::tune::HostCacheSettle),
}

/// Bytes read before each timed run on a GPU: 2.5× the 50 MiB L2 of an H100 or H200.
pub const SETTLE_BYTES: usize = 128 << 20;

mod settle_kernel {
    use dotcompute::prelude::*;

    /// Reads `lines` (grid-strided, 16 bytes a load); writes `sink[0]` only if their XOR
    /// is a value zeros never give.
    #[kernel]
    pub fn read_lines(lines: &[Vec4<u32>], sink: &mut [u32]) {
        let stride = num_groups().x * 256u32;
        let mut i = global_id().x;
        let mut acc = 0u32;
        while i < lines.len() {
            let q = lines[i];
            acc ^= q.x ^ q.y ^ q.z ^ q.w;
            i += stride;
        }
        if acc == 0x9e37_79b9u32 {
            sink[0] = acc;
        }
    }
}

impl Ctx<'_> {
    /// Before a timed run on a GPU: reads [`SETTLE_BYTES`] and waits, so that the run
    /// starts with no dirty lines in the L2 cache, whatever ran before it. Measured on an
    /// H200 (2026-11-30, `scripts/reduce-harness`): a 2^28-element f32 sum took 243 µs
    /// back to back or after a copy and a read, 252 µs right after a copy (whose 50 MB of
    /// written lines it must first write back); a round-robin of an operation and its
    /// reference copy charged that write-back to whichever ran after the copy. Not on a
    /// software GPU (lavapipe); off with `DOTCOMPUTE_BENCH_SETTLE=0` (the
    /// protocol before 2026-11-30). On the CPU device (since session 33, 2026-11-30): reads
    /// [`dotcompute_ops::tune::host_settle_bytes`] of host memory on every core, so that the lines the run before
    /// wrote are written back before the next run starts.
    pub fn settle_caches(&self) -> Res<()> {
        let d = self.device;
        let kind = d.info().device_type;
        let gpu = matches!(
            kind,
            dotcompute::DeviceType::DiscreteGpu
                | dotcompute::DeviceType::IntegratedGpu
                | dotcompute::DeviceType::VirtualGpu
        );
        let cpu = kind == dotcompute::DeviceType::Cpu;
        if !(gpu || cpu)
            || !dotcompute::settings::switch_or("DOTCOMPUTE_BENCH_SETTLE", true).map_err(s)?
        {
            return Ok(());
        }
        let mut settle = self.settle.borrow_mut();
        if settle.is_none() {
            *settle = Some(if cpu {
                Settle::Host(dotcompute_ops::tune::HostCacheSettle::new())
            } else {
                Settle::Device {
                    lines: d
                        .alloc_filled(SETTLE_BYTES / 16, dotcompute::Vec4::splat(0u32))
                        .map_err(s)?,
                    sink: d.alloc_filled(1, 0u32).map_err(s)?,
                }
            });
        }
        match settle.as_mut().expect("made above") {
            Settle::Host(host) => {
                host.settle();
                Ok(())
            }
            Settle::Device { lines, sink } => {
                let launch = dotcompute::Launch::threads(1024 * 256).group(256);
                settle_kernel::read_lines::launch(d, launch, lines, sink).map_err(s)?;
                d.synchronize().map_err(s)
            }
        }
    }

    pub fn backend(&self) -> String {
        self.device.backend_kind().to_string()
    }

    pub fn kind(&self) -> BackendKind {
        self.device.backend_kind()
    }

    /// A figure of `bench` at `size` (plotted at `x`) in `unit`, on this device; the
    /// builder adds our case, its reference and the rest.
    pub fn figure(&self, bench: &str, size: String, x: f64, unit: Unit) -> FigureBuilder {
        FigureBuilder {
            figure: Figure {
                bench: bench.into(),
                device: self.device.label(),
                size,
                x,
                precision: None,
                unit,
                ours: Measured {
                    case: String::new(),
                    backend: self.backend(),
                    value: f64::NAN,
                    time: Stats::from_times(vec![Duration::ZERO], false),
                },
                reference: None,
                ratio: None,
                target: None,
                verified: true,
                note: None,
            },
        }
    }

    /// Shows what runs now on the progress bar.
    pub fn step(&self, what: &str) {
        self.progress
            .set_message(format!("{}: {what}", self.device.backend_kind()));
    }
}

/// Builds a [`Figure`] (the value follows from the work and the median time).
pub struct FigureBuilder {
    figure: Figure,
}

impl FigureBuilder {
    pub fn ours(mut self, case: &str, work: f64, time: Stats) -> Self {
        let unit = self.figure.unit;
        self.figure.ours.case = case.into();
        self.figure.ours.value = unit.value(work, time.median_s);
        self.figure.ours.time = time;
        self
    }

    pub fn against(mut self, case: &str, work: f64, time: Stats) -> Self {
        let unit = self.figure.unit;
        self.figure.reference = Some(Measured {
            case: case.into(),
            backend: self.figure.ours.backend.clone(),
            value: unit.value(work, time.median_s),
            time,
        });
        self
    }

    pub fn precision(mut self, p: &str) -> Self {
        self.figure.precision = Some(p.into());
        self
    }

    pub fn target(mut self, t: &str) -> Self {
        self.figure.target = Some(t.into());
        self
    }

    pub fn note(mut self, n: impl Into<String>) -> Self {
        self.figure.note = Some(n.into());
        self
    }

    pub fn build(mut self) -> Figure {
        self.figure.ratio = self
            .figure
            .reference
            .as_ref()
            .map(|r| self.figure.ours.value / r.value);
        self.figure
    }
}

/// Runs `f` once and synchronizes: its device time when the backend timestamped every
/// operation it enqueued (fills, uploads and downloads left out when there is other
/// work), else the wall time to synchronize.
pub fn timed_run(device: &Device, f: &mut dyn FnMut() -> Res<()>) -> Res<(Duration, bool)> {
    device.synchronize().map_err(s)?;
    device.take_timings();
    device.set_profiling(true);
    let t = Instant::now();
    let outcome = f().and_then(|()| device.synchronize().map_err(s));
    let wall = t.elapsed();
    device.set_profiling(false);
    let timings = device.take_timings();
    outcome?;
    if dotcompute::settings::switch_or("DOTCOMPUTE_BENCH_KERNELS", false).map_err(s)? {
        // Diagnostics: each measured run's operations and their times, in order.
        let list: Vec<String> = timings
            .iter()
            .map(|t| format!("{} {:.1}", t.label, t.duration.as_secs_f64() * 1e6))
            .collect();
        eprintln!("kernels [{}]: {}", device.label(), list.join(" | "));
    }
    if !timings.is_empty() && timings.iter().all(|t| t.device_time) {
        // A benchmark may reset an accumulator or read a result back inside the run (to
        // check every launch): those operations are not the work measured.
        let bookkeeping = |l: &str| matches!(l, "fill" | "upload" | "download");
        let work: Duration = timings
            .iter()
            .filter(|t| !bookkeeping(&t.label))
            .map(|t| t.duration)
            .sum();
        let all: Duration = timings.iter().map(|t| t.duration).sum();
        Ok((if work.is_zero() { all } else { work }, true))
    } else {
        Ok((wall, false))
    }
}

/// Times every function of `fs` `reps` times, round-robin, after 3 warm-up rounds.
pub fn measure_all(ctx: &Ctx, fs: &mut [&mut dyn FnMut() -> Res<()>]) -> Res<Vec<Stats>> {
    for _ in 0..3 {
        for f in fs.iter_mut() {
            ctx.settle_caches()?;
            timed_run(ctx.device, *f)?;
        }
    }
    let mut times = vec![Vec::with_capacity(ctx.reps); fs.len()];
    let mut device_clock = vec![true; fs.len()];
    for _ in 0..ctx.reps {
        for (i, f) in fs.iter_mut().enumerate() {
            ctx.settle_caches()?;
            let (t, dev) = timed_run(ctx.device, *f)?;
            times[i].push(t);
            device_clock[i] &= dev;
        }
    }
    Ok(times
        .into_iter()
        .zip(device_clock)
        .map(|(t, d)| Stats::from_times(t, d))
        .collect())
}

/// Host wall time of `batch` runs of `f` then one synchronize, per run: `reps` batches
/// after 3 warm-up batches. For costs the device's clock cannot see (launch overhead,
/// allocation).
pub fn measure_batched(
    ctx: &Ctx,
    batch: usize,
    fs: &mut [&mut dyn FnMut() -> Res<()>],
) -> Res<Vec<Stats>> {
    measure_batched_with(ctx, batch, fs, &mut |_| ctx.device.synchronize().map_err(s))
}

/// As [`measure_batched`]; `wait(i)` waits for function `i`'s work (a reference may run
/// on a device of its own).
pub fn measure_batched_with(
    ctx: &Ctx,
    batch: usize,
    fs: &mut [&mut dyn FnMut() -> Res<()>],
    wait: &mut dyn FnMut(usize) -> Res<()>,
) -> Res<Vec<Stats>> {
    let mut times = vec![Vec::with_capacity(ctx.reps); fs.len()];
    for round in 0..ctx.reps + 3 {
        for (i, f) in fs.iter_mut().enumerate() {
            wait(i)?;
            let t = Instant::now();
            for _ in 0..batch {
                f()?;
            }
            wait(i)?;
            if round >= 3 {
                times[i].push(t.elapsed());
            }
        }
    }
    Ok(times
        .into_iter()
        .map(|t| Stats::from_times(t, false).per(batch))
        .collect())
}

/// A benchmark of the suite.
pub struct Bench {
    pub name: &'static str,
    pub what: &'static str,
    pub run: fn(&Ctx) -> Res<Vec<Figure>>,
}

/// Every benchmark, in the order the suite runs them.
pub fn benches() -> Vec<Bench> {
    let mut v = memory::benches();
    v.extend(copies::benches());
    v.extend(matmul::benches());
    v.extend(runtime::benches());
    v.extend(services::benches());
    v.extend(cpu::benches());
    v.extend(ops::benches());
    v
}

/// The whole JSON document of a run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Run {
    /// UTC date, `YYYY-MM-DD`.
    pub date: String,
    /// The command line that produced it.
    pub command: String,
    pub quick: bool,
    /// Host logical CPUs (the CPU backend's parallelism).
    pub host_threads: usize,
    pub devices: Vec<String>,
    pub figures: Vec<Figure>,
    /// Benchmarks that failed (an error or a wrong result), with the reason.
    pub failures: Vec<String>,
}

pub struct Options {
    pub names: Vec<String>,
    pub backend: String,
    pub quick: bool,
    pub reps: Option<usize>,
    pub json: Option<PathBuf>,
    pub plot: Option<PathBuf>,
}

/// The devices `--backend` names: one backend, or `all` (every one present).
fn devices(backend: &str) -> Res<Vec<Device>> {
    if backend.eq_ignore_ascii_case("all") {
        let v: Vec<Device> = dotcompute::registry()
            .iter()
            .filter_map(|d| Device::with_backend(d.kind).ok())
            .collect();
        return Ok(v);
    }
    backend
        .split(',')
        .map(|b| Device::by_name(b.trim()).map_err(s))
        .collect()
}

pub fn run(opts: Options) -> ExitCode {
    let all = benches();
    let known: Vec<&str> = all.iter().map(|b| b.name).collect();
    if let Some(bad) = opts.names.iter().find(|n| !known.contains(&n.as_str())) {
        eprintln!("error: unknown benchmark `{bad}`; the suite has:");
        for b in &all {
            eprintln!("  {:<11} {}", b.name, b.what);
        }
        return ExitCode::from(2);
    }
    let selected: Vec<&Bench> = all
        .iter()
        .filter(|b| opts.names.is_empty() || opts.names.iter().any(|n| n == b.name))
        .collect();
    let devices = match devices(&opts.backend) {
        Ok(d) if !d.is_empty() => d,
        Ok(_) => {
            eprintln!("error: no backend is present");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let reps = opts.reps.unwrap_or(if opts.quick { 5 } else { 15 }).max(1);
    let progress = ProgressBar::new((selected.len() * devices.len()) as u64);
    progress.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let mut run = Run {
        date: today(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        quick: opts.quick,
        host_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        devices: devices.iter().map(|d| d.label()).collect(),
        figures: Vec::new(),
        failures: Vec::new(),
    };
    for device in &devices {
        let ctx = Ctx {
            device,
            quick: opts.quick,
            reps,
            progress: &progress,
            settle: Default::default(),
        };
        for bench in &selected {
            ctx.step(bench.name);
            match (bench.run)(&ctx) {
                Ok(figures) => {
                    progress.suspend(|| {
                        for f in &figures {
                            println!("{}", one_line(f));
                        }
                    });
                    run.figures.extend(figures);
                }
                Err(e) => {
                    let line = format!("{} on {}: {e}", bench.name, device.label());
                    progress.suspend(|| eprintln!("FAILED {line}"));
                    run.failures.push(line);
                }
            }
            progress.inc(1);
        }
    }
    progress.finish_and_clear();
    run.figures.extend(cross_backend(&run.figures));
    println!("\n{}", report::summary_table(&run));
    if let Some(path) = &opts.json {
        let text = serde_json::to_string_pretty(&run).expect("figures serialize");
        if let Err(e) = std::fs::write(path, text + "\n") {
            eprintln!("error: writing {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("JSON: {}", path.display());
    }
    if let Some(dir) = &opts.plot {
        match plot::write_all(&run, dir) {
            Ok(files) => println!("plots: {}", files.join(", ")),
            Err(e) => {
                eprintln!("error: plots: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if run.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("{} benchmark(s) failed:", run.failures.len());
        for f in &run.failures {
            eprintln!("  {f}");
        }
        ExitCode::FAILURE
    }
}

/// Figures of other GPU backends against the CUDA backend on the same GPU, for the cases
/// both ran (same benchmark, case and size): the cross-backend targets.
fn cross_backend(figures: &[Figure]) -> Vec<Figure> {
    let mut out = Vec::new();
    // Cases already against a same-backend hand-written kernel would repeat themselves.
    let comparable = |f: &&Figure| f.ours.backend == "wgpu" && !f.ours.case.contains(" vs ");
    for f in figures.iter().filter(comparable) {
        let twin = figures.iter().find(|c| {
            c.ours.backend == "cuda"
                && c.bench == f.bench
                && c.ours.case == f.ours.case
                && c.size == f.size
                && c.precision == f.precision
        });
        if let Some(c) = twin {
            let mut x = f.clone();
            x.bench = format!("{} (wgpu vs CUDA)", f.bench);
            x.reference = Some(c.ours.clone());
            x.ratio = Some(f.ours.value / c.ours.value);
            x.target = cross_target(&f.bench);
            x.verified = f.verified && c.verified;
            x.note = Some("the same kernel on the CUDA backend, same GPU, same run".into());
            out.push(x);
        }
    }
    out
}

fn cross_target(bench: &str) -> Option<String> {
    match bench {
        "transpose" | "stencil" | "softmax" => Some("≥ 0.67 (within 1.5× of CUDA's time)".into()),
        "atomics" => Some("≥ 0.1 (within 10× of CUDA)".into()),
        // Times (µs): wgpu within 2× of CUDA's round trip.
        "latency" => Some("≤ 2".into()),
        _ => None,
    }
}

/// A figure in one line, as it is measured.
pub fn one_line(f: &Figure) -> String {
    let ours = format!("{:>10.3} {:<7}", f.ours.value, f.unit.label());
    let versus = match (&f.reference, f.ratio) {
        (Some(r), Some(ratio)) => format!(
            " vs {} {:.3} {} → {ratio:.3}×",
            r.case,
            r.value,
            f.unit.label()
        ),
        _ => String::new(),
    };
    format!(
        "{:<12} {:<14} {:<34} {ours}{versus}",
        f.bench,
        f.size,
        format!(
            "{}{}",
            f.ours.case,
            f.precision
                .as_ref()
                .map_or(String::new(), |p| format!(" [{p}]"))
        )
    )
}

/// Today's UTC date from the system clock (days since 1970 to a civil date, Howard
/// Hinnant's algorithm), so the JSON needs no date crate.
fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_take_median_min_and_max() {
        let ms = |v: u64| Duration::from_millis(v);
        let s = Stats::from_times(vec![ms(5), ms(1), ms(3), ms(9), ms(4)], true);
        assert_eq!((s.median_s, s.min_s, s.max_s), (0.004, 0.001, 0.009));
        assert_eq!((s.reps, s.clock.as_str()), (5, "device"));
        let p = s.per(2);
        assert_eq!(p.median_s, 0.002);
    }

    #[test]
    fn units_turn_work_and_time_into_values() {
        assert_eq!(Unit::GBs.value(2e9, 0.5), 4.0);
        assert_eq!(Unit::TflopS.value(3e12, 1.5), 2.0);
        // Microseconds per operation: 10 operations in 50 µs.
        assert!((Unit::Us.value(10.0, 50e-6) - 5.0).abs() < 1e-12);
    }

    #[test]
    fn the_date_is_a_civil_date() {
        let d = today();
        assert_eq!(d.len(), 10, "{d}");
        assert!(d.starts_with("20"), "{d}");
    }
}
