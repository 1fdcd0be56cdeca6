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

pub fn run(name: &str, n: usize, reps: usize) -> ExitCode {
    match name {
        "vector-add" => vector_add(n, reps.max(1)),
        other => {
            eprintln!("error: unknown benchmark `{other}`; available: vector-add");
            ExitCode::from(2)
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
