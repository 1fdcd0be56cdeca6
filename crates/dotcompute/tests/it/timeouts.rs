//! A kernel that never ends (issue 27, item 6): on CUDA, a wait past
//! `DOTCOMPUTE_CUDA_TIMEOUT_S` makes the device lost and returns, instead of hanging the
//! process. On the CPU, the generated code polls at loop back-edges and a launch past
//! `DOTCOMPUTE_CPU_TIMEOUT_S` stops with `Error::LaunchTimedOut`, the device still usable.
//! (wgpu has had its `DOTCOMPUTE_WGPU_TIMEOUT_S` since core v2.)

use crate::common;
use dotcompute::prelude::*;
use dotcompute::BackendKind;

/// Spins until `flag[0]` equals `stop`, reading it with an atomic (a side effect the
/// compiler must keep); nobody writes it, so with any other value it never ends.
#[kernel]
fn spin_until(flag: &mut [u32], stop: u32) {
    let i = global_id().x;
    if i < 1 {
        let mut seen = atomic_add(&mut flag[0], 0u32);
        while seen != stop {
            seen = atomic_add(&mut flag[0], 0u32);
        }
    }
}

#[test]
fn a_kernel_that_never_ends_makes_the_cuda_device_lost_after_the_timeout() {
    if common::cuda_device().is_none() {
        return;
    }
    // The child must report well before the deadline; a hang fails the test, not the run.
    let run = common::run_test_in_child(
        "timeouts::never_ending_kernel_child",
        &[("DOTCOMPUTE_CUDA_TIMEOUT_S", "2")],
        Some(std::time::Duration::from_secs(45)),
    );
    let (status, text) = (run.status, run.text);
    eprintln!("child (status {status:?}):\n{text}");
    // Its exit is the driver's business (it ends the kernel with the process); the
    // report is what a caller needs.
    assert!(
        text.contains("TIMEOUT-REPORTED"),
        "the child did not report a lost device within 45 s (the wait is not bounded):\n{text}"
    );
}

/// Run by the test above with `DOTCOMPUTE_CUDA_TIMEOUT_S=2`: launches the spinning kernel,
/// then a read must fail with `DeviceLost` naming the limit within a few seconds. Exits
/// the process at once afterwards (the kernel still runs; the driver ends it with the
/// process).
#[test]
#[ignore = "run by a_kernel_that_never_ends_makes_the_cuda_device_lost_after_the_timeout"]
fn never_ending_kernel_child() {
    if std::env::var("DOTCOMPUTE_CUDA_TIMEOUT_S").is_err() {
        return;
    }
    let d = Device::with_backend(BackendKind::Cuda).unwrap();
    let mut flag = d.alloc_filled(1, 7u32).unwrap();
    spin_until::launch(&d, Launch::threads(1), &mut flag, 8).unwrap();
    let started = std::time::Instant::now();
    let e = flag.to_vec().unwrap_err();
    let waited = started.elapsed();
    assert!(matches!(e, dotcompute::Error::DeviceLost { .. }), "{e}");
    assert!(e.to_string().contains("DOTCOMPUTE_CUDA_TIMEOUT_S"), "{e}");
    assert!(waited.as_secs_f64() < 10.0, "took {waited:?}");
    // Every later call on the device is the same error, at once.
    let e2 = d
        .alloc::<u32>(4)
        .map(|_| ())
        .and_then(|_| d.synchronize())
        .unwrap_err();
    assert!(matches!(e2, dotcompute::Error::DeviceLost { .. }), "{e2}");
    println!("TIMEOUT-REPORTED after {waited:?}: {e}");
    std::process::exit(0);
}

/// Spins at group level: a `while` loop holding barriers (the CPU's split group body).
#[kernel]
fn spin_with_barriers(flag: &mut [u32], stop: u32) {
    let s = shared::<u32, 64>();
    let l = local_id().x;
    let mut k = l;
    while flag[0] != stop {
        s[l] = k;
        barrier();
        k = s[(l + 1) % 64];
        barrier();
    }
    if global_id().x < flag.len() {
        flag[global_id().x] = k;
    }
}

/// A `loop` whose `break` never comes, inside a lane-form friendly body.
#[kernel]
fn endless_loop(out: &mut [u32], stop: u32) {
    let i = global_id().x;
    if i < out.len() {
        let mut x = i;
        loop {
            x = x * 1664525u32 + 1013904223u32;
            if x == stop && stop == 0u32 && x != 0u32 {
                break;
            }
        }
        out[i] = x;
    }
}

/// Bounded but far too long: nested `for` loops (polled at the outer one).
#[kernel]
fn nested_for(out: &mut [u32], outer: u32, inner: u32) {
    let i = global_id().x;
    if i < out.len() {
        let mut x = i;
        for a in 0..outer {
            for b in 0..inner {
                x = x * 3u32 + (a ^ b);
            }
        }
        out[i] = x;
    }
}

#[test]
fn a_kernel_that_never_ends_is_stopped_on_the_cpu_and_the_device_stays_usable() {
    let run = common::run_test_in_child(
        "timeouts::cpu_never_ending_kernels_child",
        &[("DOTCOMPUTE_CPU_TIMEOUT_S", "1")],
        Some(std::time::Duration::from_secs(60)),
    );
    eprintln!("child (status {:?}):\n{}", run.status, run.text);
    assert!(
        run.text.contains("CPU-TIMEOUTS-REPORTED"),
        "the child did not stop its never-ending kernels within 60 s:\n{}",
        run.text
    );
}

/// Run by the test above with `DOTCOMPUTE_CPU_TIMEOUT_S=1`: each never-ending kernel
/// (per-thread `while`, group-level `while` with barriers, `loop`, nested `for`), in
/// default and checked mode, returns `LaunchTimedOut` within a few seconds, and a normal
/// launch on the same device is right afterwards.
#[test]
#[ignore = "run by a_kernel_that_never_ends_is_stopped_on_the_cpu_and_the_device_stays_usable"]
fn cpu_never_ending_kernels_child() {
    if std::env::var("DOTCOMPUTE_CPU_TIMEOUT_S").is_err() {
        return;
    }
    let d = Device::cpu();
    let expect_stopped = |what: &str, r: dotcompute::Result<()>, started: std::time::Instant| {
        let waited = started.elapsed();
        let e = r.expect_err(what);
        assert!(
            matches!(e, dotcompute::Error::LaunchTimedOut { .. }),
            "{what}: {e}"
        );
        assert!(e.to_string().contains("DOTCOMPUTE_CPU_TIMEOUT_S"), "{e}");
        assert!(waited.as_secs_f64() < 8.0, "{what}: took {waited:?}");
        eprintln!("{what}: stopped after {waited:?}: {e}");
    };
    for checked in [false, true] {
        let mut flag = d.alloc_filled(1000, 7u32).unwrap();
        let t = std::time::Instant::now();
        let r = spin_until::launch(&d, Launch::threads(1000).checked(checked), &mut flag, 8);
        expect_stopped("per-thread while", r, t);

        let t = std::time::Instant::now();
        let r = spin_with_barriers::launch(
            &d,
            Launch::threads(64 * 40).group(64).checked(checked),
            &mut flag,
            8,
        );
        expect_stopped("group-level while with barriers", r, t);

        let mut out = d.alloc_filled(100_003, 0u32).unwrap();
        let t = std::time::Instant::now();
        let r = endless_loop::launch(&d, Launch::threads(100_003).checked(checked), &mut out, 0);
        expect_stopped("loop without break", r, t);

        let t = std::time::Instant::now();
        let r = nested_for::launch(
            &d,
            Launch::threads(4099).checked(checked),
            &mut out,
            u32::MAX,
            1 << 16,
        );
        expect_stopped("nested for", r, t);
    }
    // The device is usable, and a kernel with loops that end runs to its right result.
    let n = 1237usize;
    let mut out = d.alloc_filled(n, 0xDEAD_BEEFu32).unwrap();
    nested_for::launch(&d, Launch::threads(n), &mut out, 3, 5).unwrap();
    let got = out.to_vec().unwrap();
    for (i, g) in got.iter().enumerate() {
        let mut x = i as u32;
        for a in 0..3u32 {
            for b in 0..5u32 {
                x = x.wrapping_mul(3).wrapping_add(a ^ b);
            }
        }
        assert_eq!(*g, x, "element {i}");
    }
    println!("CPU-TIMEOUTS-REPORTED");
}

/// Per-launch and per-device limits on the CPU (issue 27: "a launch timeout, per device
/// and per launch"): each stops the never-ending kernel and names what set it; a launch
/// that ends inside its limit is right on every element; another handle of the CPU keeps
/// its own limit; the device stays usable throughout. In this process: a CPU launch is
/// stopped, not lost.
#[test]
fn per_launch_and_per_device_time_limits_stop_cpu_kernels_and_name_their_source() {
    use std::time::{Duration, Instant};
    let d = Device::cpu();
    let mut flag = d.alloc_filled(1000, 7u32).unwrap();
    let expect = |what: &str, r: dotcompute::Result<()>, started: Instant, set_by: &str| {
        let waited = started.elapsed();
        let e = r.expect_err(what);
        assert!(
            matches!(e, dotcompute::Error::LaunchTimedOut { .. }),
            "{what}: {e}"
        );
        assert!(e.to_string().contains(set_by), "{what}: {e}");
        assert!(
            (0.4..8.0).contains(&waited.as_secs_f64()),
            "{what}: took {waited:?}"
        );
        eprintln!("{what}: stopped after {waited:?}: {e}");
    };
    for checked in [false, true] {
        let launch = Launch::threads(1000)
            .checked(checked)
            .time_limit(Duration::from_millis(500));
        let t = Instant::now();
        let r = spin_until::launch(&d, launch, &mut flag, 8);
        expect("launch limit", r, t, "Launch::time_limit");
    }
    let default = d.time_limit().unwrap();
    d.set_time_limit(Duration::from_millis(500)).unwrap();
    assert_eq!(d.time_limit().unwrap(), Duration::from_millis(500));
    let t = Instant::now();
    let r = spin_until::launch(&d, Launch::threads(1000), &mut flag, 8);
    expect("device limit", r, t, "Device::set_time_limit");
    // A launch's own limit overrides the device's, longer as well as shorter.
    let n = 100_003usize;
    let mut out = d.alloc_filled(n, 0xDEAD_BEEFu32).unwrap();
    let launch = Launch::threads(n).time_limit(Duration::from_secs(120));
    nested_for::launch(&d, launch, &mut out, 3, 5).unwrap();
    check_nested_for(&out.to_vec().unwrap(), 3, 5);
    // Another handle of the CPU keeps its own limit.
    assert_eq!(Device::cpu().time_limit().unwrap(), default);
    d.set_time_limit(default).unwrap();
}

/// `nested_for`'s result for every element.
fn check_nested_for(got: &[u32], outer: u32, inner: u32) {
    for (i, g) in got.iter().enumerate() {
        let mut x = i as u32;
        for a in 0..outer {
            for b in 0..inner {
                x = x.wrapping_mul(3).wrapping_add(a ^ b);
            }
        }
        assert_eq!(*g, x, "element {i} of {}", got.len());
    }
}

/// Bad limits are `Err`s that change nothing, on every device: a zero or over-a-year
/// launch limit (the output keeps its poison), the same for the device limit (the old
/// one stays), and a graph node with its own limit. A limit that is kept is right on
/// every element on every device (GPUs wait for the launch under it).
#[test]
fn bad_time_limits_are_errors_and_good_ones_give_right_results_on_every_device() {
    use std::time::Duration;
    for d in common::devices() {
        let label = d.info().label();
        let n = 4099usize;
        let mut out = d.alloc_filled(n, 0xDEAD_BEEFu32).unwrap();
        if !d.info().caps.time_limits {
            let e = d.set_time_limit(Duration::from_secs(5)).unwrap_err();
            assert!(
                matches!(e, dotcompute::Error::Unsupported { .. }),
                "{label}: {e}"
            );
            continue;
        }
        let before = d.time_limit().unwrap();
        for bad in [Duration::ZERO, Duration::from_secs(366 * 24 * 3600)] {
            let launch = Launch::threads(n).time_limit(bad);
            let e = nested_for::launch(&d, launch, &mut out, 3, 5).unwrap_err();
            assert!(
                matches!(e, dotcompute::Error::Range { .. })
                    && e.to_string().contains("time limit"),
                "{label} {bad:?}: {e}"
            );
            let e = d.set_time_limit(bad).unwrap_err();
            assert!(matches!(e, dotcompute::Error::Range { .. }), "{label}: {e}");
            assert_eq!(d.time_limit().unwrap(), before, "{label}");
        }
        assert!(
            out.to_vec().unwrap().iter().all(|&v| v == 0xDEAD_BEEF),
            "{label}: a refused launch wrote"
        );
        {
            let mut node_out = d.alloc_filled(n, 0u32).unwrap();
            let mut graph = dotcompute::Graph::new(&d);
            let h = graph.buffer_mut(&mut node_out).unwrap();
            let e = graph
                .launch(
                    &nested_for::KERNEL,
                    Launch::threads(n).time_limit(Duration::from_secs(5)),
                    &[
                        h.arg(),
                        dotcompute::GraphArg::scalar(3u32),
                        dotcompute::GraphArg::scalar(5u32),
                    ],
                    &[],
                )
                .unwrap_err();
            assert!(
                e.to_string().contains("time limit") && e.to_string().contains("nested_for"),
                "{label}: {e}"
            );
        }
        // Kept limits: the launch's own (on a GPU it waits under it) and the device's.
        let launch = Launch::threads(n).time_limit(Duration::from_secs(120));
        nested_for::launch(&d, launch, &mut out, 3, 5).unwrap();
        check_nested_for(&out.to_vec().unwrap(), 3, 5);
        d.set_time_limit(Duration::from_secs(120)).unwrap();
        let mut again = d.alloc_filled(n, 0xDEAD_BEEFu32).unwrap();
        nested_for::launch(&d, Launch::threads(n).checked(true), &mut again, 4, 2).unwrap();
        check_nested_for(&again.to_vec().unwrap(), 4, 2);
        d.set_time_limit(before).unwrap();
        eprintln!("{label}: bad limits refused, kept ones right");
    }
}

/// A GPU launch past its own limit: the device is lost, reported within seconds and
/// naming `Launch::time_limit` (a running GPU kernel cannot be stopped), on CUDA and on
/// wgpu devices that are GPUs (lavapipe ends long loops itself: `it::long_loops`).
#[test]
fn a_gpu_launch_past_its_own_time_limit_reports_the_device_lost() {
    let mut backends = Vec::new();
    if common::cuda_device().is_some() {
        backends.push("cuda");
    }
    if common::wgpu_device()
        .is_some_and(|d| d.info().device_type != dotcompute::DeviceType::SoftwareGpu)
    {
        backends.push("wgpu");
    }
    for backend in backends {
        let run = common::run_test_in_child(
            "timeouts::gpu_launch_limit_child",
            &[("DOTCOMPUTE_TEST_BACKEND", backend)],
            Some(std::time::Duration::from_secs(45)),
        );
        eprintln!("{backend} child (status {:?}):\n{}", run.status, run.text);
        assert!(
            run.text.contains("LAUNCH-LIMIT-REPORTED"),
            "{backend}: no lost device reported within 45 s:\n{}",
            run.text
        );
    }
}

/// Run by the test above: a spinning kernel with a 2 s launch limit on the backend named
/// by `DOTCOMPUTE_TEST_BACKEND`; exits the process after the report (the kernel still
/// runs; the driver ends it with the process).
#[test]
#[ignore = "run by a_gpu_launch_past_its_own_time_limit_reports_the_device_lost"]
fn gpu_launch_limit_child() {
    let Some(kind) = std::env::var("DOTCOMPUTE_TEST_BACKEND")
        .ok()
        .and_then(|b| BackendKind::parse(&b))
    else {
        return;
    };
    let d = Device::with_backend(kind).unwrap();
    let mut flag = d.alloc_filled(1, 7u32).unwrap();
    let started = std::time::Instant::now();
    let launch = Launch::threads(1).time_limit(std::time::Duration::from_secs(2));
    let e = spin_until::launch(&d, launch, &mut flag, 8).unwrap_err();
    let waited = started.elapsed();
    assert!(matches!(e, dotcompute::Error::DeviceLost { .. }), "{e}");
    assert!(e.to_string().contains("Launch::time_limit"), "{e}");
    assert!(e.to_string().contains("spin_until"), "{e}");
    assert!(
        (1.5..10.0).contains(&waited.as_secs_f64()),
        "took {waited:?}"
    );
    let e2 = d.synchronize().unwrap_err();
    assert!(matches!(e2, dotcompute::Error::DeviceLost { .. }), "{e2}");
    println!("LAUNCH-LIMIT-REPORTED after {waited:?}: {e}");
    std::process::exit(0);
}
