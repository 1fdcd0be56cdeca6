//! A kernel that never ends (issue 27, item 6): on CUDA, a wait past
//! `DOTCOMPUTE_CUDA_TIMEOUT_S` makes the device lost and returns, instead of hanging the
//! process. (wgpu has had its `DOTCOMPUTE_WGPU_TIMEOUT_S` since core v2; the CPU backend
//! has no cancellation yet, so it is not run there.)

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
