//! `dotcompute`: list devices, validate backends against the seed cases, print generated
//! code, and run benchmarks.

mod bench;
mod bench_core;
mod bench_cuda;
mod suite;

use clap::{Parser, Subcommand};
use dotcompute::differential::{differential, Agreement, Disagreement, Tolerance};
use dotcompute::{BackendKind, Device, Launch};
use dotcompute_codegen::Target;
use dotcompute_conformance as conformance;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "dotcompute",
    version,
    about = "Write a compute kernel once in Rust; run it on every backend"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Lists every backend, its devices and their properties, or why it is unavailable.
    Devices,
    /// Lists every `DOTCOMPUTE_*` variable with its current value, checked as dotcompute
    /// reads it; exits non-zero when a value would be refused.
    Settings {
        /// Prints the table of `docs/configuration.md` instead.
        #[arg(long)]
        markdown: bool,
    },
    /// Runs the seed cases on one or more backends and prints a table; exits non-zero on
    /// any failure or when a requested backend is absent.
    Validate {
        /// cpu, cuda, wgpu, metal, or all (every backend present). Default: the best
        /// backend present (DOTCOMPUTE_BACKEND overrides).
        #[arg(long)]
        backend: Option<String>,
        /// Only cases whose name contains this text (repeatable).
        #[arg(long = "case")]
        cases: Vec<String>,
        /// Seed for random inputs (default: fresh; printed in the summary).
        #[arg(long)]
        seed: Option<u64>,
    },
    /// Prints the generated code of a built-in kernel (no device needed).
    Emit {
        /// Kernel name, e.g. vector_add (`dotcompute emit list` lists them).
        kernel: String,
        /// ir, json, cuda, msl (the Metal backend's), wgsl, naga-msl (naga's MSL of the
        /// WGSL, which wgpu runs on Metal), spirv, hlsl.
        #[arg(long, default_value = "ir")]
        target: String,
        /// With kernel `all`: write every built-in kernel to this directory, one file
        /// each (`NAME.metal`, `NAME.cu`, …), instead of printing one.
        #[arg(long)]
        out: Option<std::path::PathBuf>,
    },
    /// Runs the performance suite (or the named benchmarks) and prints every figure as a
    /// ratio against a reference measured in the same run, then a summary table.
    ///
    /// Suite benchmarks: vector-add, reduce, transpose, softmax, stencil, atomics, matmul,
    /// launch, streams, graph, compile-cache, pool, transfers, cpu-barriers. Single benchmarks with their own report: checked,
    /// stream-acquire, alloc, cuda-launch, cuda-compile, cuda-pool, cuda-transfer (and
    /// `streams` with `--trace`).
    Bench {
        /// Benchmarks to run (default: the whole suite).
        names: Vec<String>,
        /// A backend (cpu, cuda, wgpu, ...), several separated by commas, or `all`.
        #[arg(long, default_value = "cpu")]
        backend: String,
        /// Small sizes and few repetitions (a smoke run: under 3 minutes on the CPU).
        #[arg(long)]
        quick: bool,
        /// Timed repetitions after warm-up (default 15, quick 5); the median is reported.
        #[arg(long)]
        reps: Option<usize>,
        /// Writes every figure as JSON.
        #[arg(long)]
        json: Option<std::path::PathBuf>,
        /// Writes SVG plots (matmul TFLOP/s and bandwidth against size) into this folder.
        #[arg(long)]
        plot: Option<std::path::PathBuf>,
        /// Elements (the single `checked` benchmark).
        #[arg(long, default_value_t = 16 * 1024 * 1024)]
        n: usize,
        /// Writes a Chrome / Perfetto trace (the single `streams` benchmark).
        #[arg(long)]
        trace: Option<String>,
    },
    /// Prints the Markdown tables of `docs/benchmarks.md` from `bench --json` files.
    BenchReport {
        /// JSON files written by `dotcompute bench --json` (at least one).
        #[arg(required = true)]
        files: Vec<std::path::PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Devices => devices(),
        Command::Settings { markdown } => settings(markdown),
        Command::Validate {
            backend,
            cases,
            seed,
        } => validate(backend.as_deref(), &cases, seed),
        Command::Emit {
            kernel,
            target,
            out,
        } => match out {
            Some(dir) if kernel == "all" => emit_all(&target, &dir),
            Some(_) => {
                eprintln!("error: --out writes every kernel: give `all` as the kernel");
                ExitCode::from(2)
            }
            None => emit(&kernel, &target),
        },
        Command::Bench {
            names,
            backend,
            quick,
            reps,
            json,
            plot,
            n,
            trace,
        } => {
            let single = |n: &String| bench::SINGLE.contains(&n.as_str()) || n.starts_with("cuda-");
            if names.len() == 1 && (single(&names[0]) || trace.is_some()) {
                bench::run(&names[0], n, reps.unwrap_or(30), &backend, trace.as_deref())
            } else {
                suite::run(suite::Options {
                    names,
                    backend,
                    quick,
                    reps,
                    json,
                    plot,
                })
            }
        }
        Command::BenchReport { files } => bench_report(&files),
    }
}

fn settings(markdown: bool) -> ExitCode {
    use dotcompute::settings::{Scope, VARIABLES};
    if markdown {
        print!("{}", dotcompute::settings::markdown());
        return ExitCode::SUCCESS;
    }
    let mut refused = 0;
    for v in VARIABLES.iter().filter(|v| v.scope != Scope::Tests) {
        let value = dotcompute::settings::value(v.name);
        let verdict = match (v.check, &value) {
            (_, None) => "unset".to_string(),
            (Some(check), Some(_)) => match check() {
                Ok(()) => "ok".to_string(),
                Err(e) => {
                    refused += 1;
                    format!("REFUSED: {e}")
                }
            },
            (None, Some(_)) => "set".to_string(),
        };
        match value {
            Some(value) => println!("{:<34} = {value:<20} {verdict}", v.name),
            None => println!("{:<34}   {:<20} {verdict}", v.name, ""),
        }
    }
    println!("(every variable, who reads it and when: docs/configuration.md)");
    if refused > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn devices() -> ExitCode {
    for status in dotcompute::backends() {
        match &status.devices {
            Ok(devices) => {
                println!("{}: available, {} device(s)", status.kind, devices.len());
                for (i, d) in devices.iter().enumerate() {
                    let l = &d.limits;
                    println!("  [{i}] {} ({:?})", d.name, d.device_type);
                    println!(
                        "      memory            {:.1} GiB",
                        d.memory_bytes as f64 / (1u64 << 30) as f64
                    );
                    println!("      compute units     {}", d.compute_units);
                    println!("      driver            {}", d.driver);
                    println!(
                        "      max group         {} threads, {:?} per dimension",
                        l.max_group_threads, l.max_group_size
                    );
                    println!("      max groups        {:?}", l.max_groups);
                    println!(
                        "      shared memory     {} bytes per group",
                        l.max_shared_bytes
                    );
                    println!("      max buffer        {} bytes", l.max_buffer_bytes);
                    println!("      capabilities      {}", d.caps.words().join(", "));
                }
            }
            Err(reason) => println!("{}: unavailable: {reason}", status.kind),
        }
    }
    ExitCode::SUCCESS
}

/// The devices `validate` runs on: the best one, one by name, or `all` (every backend
/// present; a backend `DOTCOMPUTE_REQUIRE` lists that is absent is an error, exit 2).
fn validate_devices(backend: Option<&str>) -> Result<Vec<Device>, ExitCode> {
    let mut devices = Vec::new();
    let mut absent = Vec::new();
    match backend.map(|s| s.trim().to_ascii_lowercase()) {
        None => match Device::best() {
            Ok(d) => devices.push(d),
            Err(e) => absent.push(e.to_string()),
        },
        Some(all) if all == "all" => {
            let required = match conformance::required_backends() {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("error: {e}");
                    return Err(ExitCode::from(2));
                }
            };
            // Every registered backend, then required ones this binary lacks.
            let registered: Vec<BackendKind> =
                dotcompute::registry().iter().map(|d| d.kind).collect();
            let missing = required.iter().filter(|k| !registered.contains(k));
            for &kind in registered.iter().chain(missing) {
                match Device::with_backend(kind) {
                    Ok(d) => devices.push(d),
                    Err(e) if required.contains(&kind) => {
                        absent.push(format!("{e} (required by DOTCOMPUTE_REQUIRE)"))
                    }
                    Err(e) => println!("note: skipping {e}"),
                }
            }
        }
        Some(name) => match Device::by_name(&name) {
            Ok(d) => devices.push(d),
            Err(e) => absent.push(e.to_string()),
        },
    }
    if !absent.is_empty() {
        for a in &absent {
            eprintln!("error: {a}");
        }
        return Err(ExitCode::from(2));
    }
    Ok(devices)
}

fn validate(backend: Option<&str>, filters: &[String], seed: Option<u64>) -> ExitCode {
    let devices = match validate_devices(backend) {
        Ok(devices) => devices,
        Err(code) => return code,
    };
    let seed = seed.unwrap_or_else(conformance::seed_from_env);
    let cases: Vec<_> = conformance::cases()
        .into_iter()
        .filter(|c| {
            filters.is_empty()
                || filters
                    .iter()
                    .any(|f| c.name.to_lowercase().contains(&f.to_lowercase()))
        })
        .collect();
    if cases.is_empty() {
        eprintln!("error: no case matches {filters:?}");
        return ExitCode::from(2);
    }
    println!(
        "{:<18} {:<14} {:<7} {:<6} {:>11} {:>10}",
        "case", "size", "backend", "result", "max error", "time"
    );
    let (mut passed, mut skipped, mut failed) = (0, 0, 0);
    let mut failures = Vec::new();
    let start = std::time::Instant::now();
    for device in &devices {
        for case in &cases {
            for &size in &case.sizes {
                let r = conformance::run_case(device, case, size, seed);
                let err = if r.max_error.is_nan() {
                    "-".to_string()
                } else {
                    format!("{:.2e}", r.max_error)
                };
                println!(
                    "{:<18} {:<14} {:<7} {:<6} {:>11} {:>8.1}ms",
                    r.case,
                    r.size,
                    r.backend.name(),
                    r.verdict(),
                    err,
                    r.time.as_secs_f64() * 1e3
                );
                if r.skipped.is_some() {
                    skipped += 1;
                } else if r.passed {
                    passed += 1;
                } else {
                    failed += 1;
                    failures.push(format!(
                        "{} {} on {}: {}",
                        r.case, r.size, r.backend, r.message
                    ));
                }
            }
        }
    }
    // Cross-backend: each device against the CPU (the oracle) through the differential
    // helper users have (`dotcompute::differential`), on kernels whose every output is
    // exact under the IR's semantics.
    if filters.is_empty() {
        let cpu = Device::cpu();
        for device in devices
            .iter()
            .filter(|d| d.backend_kind() != BackendKind::Cpu)
        {
            for (name, result) in cross_backend(device, &cpu, seed) {
                let ok = result.is_ok();
                println!(
                    "{:<18} {:<14} {:<7} {:<6} {:>11}",
                    name,
                    "vs cpu",
                    device.backend_kind().name(),
                    if ok { "PASS" } else { "FAIL" },
                    match &result {
                        Ok(a) => format!("{} ulp", a.max_ulps),
                        Err(_) => "-".into(),
                    }
                );
                match result {
                    Ok(_) => passed += 1,
                    Err(e) => {
                        failed += 1;
                        failures.push(format!("{name} on {} against the CPU: {e}", device.label()));
                    }
                }
            }
        }
    }
    for f in &failures {
        println!("FAIL {f}");
    }
    let names: Vec<String> = devices.iter().map(|d| d.label()).collect();
    println!("devices: {}", names.join("; "));
    println!(
        "seed {seed} (replay with --seed {seed}), {:.1} s",
        start.elapsed().as_secs_f64()
    );
    if skipped > 0 {
        println!(
            "{passed} passed, {skipped} skipped (the device lacks what they need), {failed} failed"
        );
    } else {
        println!("{passed} passed, {failed} failed");
    }
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Every built-in kernel in `target`'s language, one file each in `dir`.
fn emit_all(target: &str, dir: &std::path::Path) -> ExitCode {
    let extension = match target {
        "msl" | "naga-msl" => "metal",
        "cuda" => "cu",
        "wgsl" => "wgsl",
        "spirv" => "spvasm",
        "hlsl" => "hlsl",
        "json" => "json",
        _ => "ir",
    };
    if let Err(e) = std::fs::create_dir_all(dir) {
        eprintln!("error: cannot create {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    let mut kernels = conformance::seed_kernels();
    kernels.extend(dotcompute::library_kernels());
    let mut written = 0;
    for def in &kernels {
        // Only CUDA has tensor-core products: for Metal, WGSL and the targets naga
        // translates WGSL to, they are skipped with the error a device would give.
        if let Ok(ir) = def.ir() {
            if !matches!(target, "cuda" | "ir" | "json") && ir.uses_tensor_cores() {
                let why = emitted(ir, target).err().unwrap_or_default();
                println!("skipped `{}`: {why}", def.name());
                continue;
            }
        }
        let text = match def
            .ir()
            .map_err(|e| e.to_string())
            .and_then(|ir| emitted(ir, target))
        {
            Ok(text) => text,
            Err(e) => {
                eprintln!("error: kernel `{}`: {e}", def.name());
                return ExitCode::FAILURE;
            }
        };
        let path = dir.join(format!("{}.{extension}", def.name()));
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("error: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        written += 1;
    }
    println!("{written} kernels written to {}", dir.display());
    ExitCode::SUCCESS
}

/// One kernel's text in `target`'s language.
fn emitted(ir: &dotcompute::ir::Kernel, target: &str) -> Result<String, String> {
    match target {
        "ir" => Ok(dotcompute_codegen::IrText.generate(ir)),
        "json" => Ok(format!("{}\n", ir.to_json())),
        "msl" => dotcompute_codegen::msl::generate(ir)
            .map(|m| m.source)
            .map_err(|e| e.to_string()),
        "wgsl" | "naga-msl" | "spirv" | "hlsl" => emit_through_wgsl(ir, target),
        "cuda" => Ok(dotcompute_codegen::cuda::generate_with(
            ir,
            &dotcompute_codegen::cuda::CudaOptions {
                checked: false,
                unroll: dotcompute::settings::unroll().map_err(|e| e.to_string())?,
            },
        )
        .source),
        other => Err(format!(
            "unknown target `{other}`; available: ir, json, cuda, msl, wgsl, naga-msl, spirv, hlsl"
        )),
    }
}

fn emit(kernel: &str, target: &str) -> ExitCode {
    // The seed kernels, then the library's own (the generated matrix products).
    let mut kernels = conformance::seed_kernels();
    kernels.extend(dotcompute::library_kernels());
    if kernel == "list" {
        for k in &kernels {
            println!("{}", k.name());
        }
        return ExitCode::SUCCESS;
    }
    let Some(def) = kernels.iter().find(|k| k.name() == kernel) else {
        let names: Vec<_> = kernels.iter().map(|k| k.name()).collect();
        eprintln!(
            "error: no built-in kernel `{kernel}`; available: {}",
            names.join(", ")
        );
        return ExitCode::from(2);
    };
    let ir = match def.ir() {
        Ok(ir) => ir,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match emitted(ir, target) {
        Ok(text) => print!("{text}"),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(if e.starts_with("unknown target") {
                2
            } else {
                1
            });
        }
    }
    ExitCode::SUCCESS
}

/// The WGSL of a kernel (specialised for 256 threads per group and a dynamic shared
/// length of 256) and what naga makes of it.
fn emit_through_wgsl(ir: &dotcompute::ir::Kernel, target: &str) -> Result<String, String> {
    use dotcompute_codegen::{naga_out, wgsl};
    let opts = wgsl::WgslOptions {
        unroll: dotcompute::settings::unroll().map_err(|e| e.to_string())?,
        ..wgsl::WgslOptions::default()
    };
    let module = wgsl::generate(ir, &opts).map_err(|e| e.to_string())?;
    let naga = naga_out::validate_wgsl(&module.source)?;
    Ok(match target {
        "wgsl" => module.source,
        "naga-msl" => naga_out::to_msl(&naga)?,
        "hlsl" => naga_out::to_hlsl(&naga)?,
        _ => {
            let words = naga_out::to_spirv(&naga)?;
            dotcompute_codegen::spirv_listing(&words)
        }
    })
}

/// The differential checks of `validate`: kernels of the suite run with the same random
/// inputs on `device` and on the CPU, every element compared exactly.
fn cross_backend(
    device: &Device,
    cpu: &Device,
    seed: u64,
) -> Vec<(&'static str, Result<Agreement, Disagreement>)> {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0xD1FF);
    let n = 100_003;
    let a: Vec<i32> = (0..n).map(|_| rng.i32(..)).collect();
    let b: Vec<i32> = (0..n)
        .map(|_| {
            if rng.u8(..8) == 0 {
                [0, -1, 1][rng.usize(..3)]
            } else {
                rng.i32(..)
            }
        })
        .collect();
    let fl: Vec<f32> = (0..n).map(|_| (rng.f32() - 0.5) * 1e10).collect();
    let x: Vec<f32> = (0..n).map(|_| (rng.f32() - 0.5) * 1e6).collect();
    let ints = differential(device, cpu, Tolerance::EXACT, |d| {
        let (da, db, df) = (d.upload(&a)?, d.upload(&b)?, d.upload(&fl)?);
        let mut out = d.alloc_filled(n * 8, 0)?;
        conformance::kernels::int_semantics::launch(
            d,
            Launch::threads(n),
            &da,
            &db,
            &df,
            &mut out,
        )?;
        out.to_vec()
    });
    let floats = differential(device, cpu, Tolerance::EXACT, |d| {
        let dx = d.upload(&x)?;
        let mut out = d.alloc_filled(n, f32::NAN)?;
        conformance::kernels::vector_multiply::launch(d, Launch::threads(n), &dx, 1.7, &mut out)?;
        out.to_vec()
    });
    vec![("int semantics", ints), ("f32 multiply", floats)]
}

fn bench_report(files: &[std::path::PathBuf]) -> ExitCode {
    let mut runs = Vec::new();
    for f in files {
        let parsed = std::fs::read_to_string(f)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str::<suite::Run>(&t).map_err(|e| e.to_string()));
        match parsed {
            Ok(run) => runs.push((f.display().to_string(), run)),
            Err(e) => {
                eprintln!("error: {}: {e}", f.display());
                return ExitCode::from(2);
            }
        }
    }
    print!("{}", suite::report::markdown(&runs));
    ExitCode::SUCCESS
}
