//! Shared by the integration tests.
#![allow(dead_code)]

use dotcompute::{BackendKind, Device};

/// A device of backend `kind`, or `None` (the test then does nothing) when the backend is
/// absent, unless `DOTCOMPUTE_REQUIRE` lists it, in which case its absence fails the test.
pub fn device_of(kind: BackendKind) -> Option<Device> {
    match Device::with_backend(kind) {
        Ok(d) => Some(d),
        Err(e) => {
            assert!(
                !required(kind),
                "{kind} is required by DOTCOMPUTE_REQUIRE: {e}"
            );
            eprintln!("skipping: {e}");
            None
        }
    }
}

/// Whether `DOTCOMPUTE_REQUIRE` lists backend `kind` (its absence then fails a test; an
/// unknown name fails it too).
pub fn required(kind: BackendKind) -> bool {
    dotcompute::settings::backends("DOTCOMPUTE_REQUIRE")
        .unwrap_or_else(|e| panic!("{e}"))
        .contains(&kind)
}

/// How a child run of one of this binary's ignored tests ended, and what it printed.
pub struct ChildRun {
    /// `None`: still running at the deadline, and killed.
    pub status: Option<std::process::ExitStatus>,
    /// Its standard output, then its standard error.
    pub text: String,
}

/// Runs the ignored test `name` of this test binary in a child process with `env` set
/// (for settings read once per process or when a device opens, or for work that may
/// hang). With a `deadline`, a child still running then is killed.
pub fn run_test_in_child(
    name: &str,
    env: &[(&str, &str)],
    deadline: Option<std::time::Duration>,
) -> ChildRun {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--ignored",
        "--exact",
        name,
        "--nocapture",
        "--test-threads=1",
    ])
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut status = None;
    if let Some(deadline) = deadline {
        let started = std::time::Instant::now();
        loop {
            if let Some(s) = child.try_wait().unwrap() {
                status = Some(s);
                break;
            }
            if started.elapsed() > deadline {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    let out = child.wait_with_output().unwrap();
    ChildRun {
        // Without a deadline the child ran to its end.
        status: status.or(deadline.is_none().then_some(out.status)),
        text: format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// A wgpu device (see [`device_of`]).
pub fn wgpu_device() -> Option<Device> {
    device_of(BackendKind::Wgpu)
}

/// A CUDA device (see [`device_of`]).
pub fn cuda_device() -> Option<Device> {
    device_of(BackendKind::Cuda)
}

/// A seed from `DOTCOMPUTE_SEED` or a random one, printed so a failure can be replayed.
pub fn seed() -> u64 {
    let seed = std::env::var("DOTCOMPUTE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("seed {seed} (set DOTCOMPUTE_SEED={seed} to replay)");
    seed
}

/// One device of every registered backend present (absent ones skip, unless
/// `DOTCOMPUTE_REQUIRE` lists them, which fails the test).
pub fn devices() -> Vec<Device> {
    dotcompute::registry()
        .iter()
        .filter_map(|d| device_of(d.kind))
        .collect()
}

/// Row-major `a · b` (m×k · k×n) in f64 and, per element, Σ|a·b|, which bounds the
/// rounding error of a product computed in lower precision.
pub fn reference_matmul(
    a: &[f64],
    b: &[f64],
    m: usize,
    n: usize,
    k: usize,
) -> (Vec<f64>, Vec<f64>) {
    let mut c = vec![0.0; m * n];
    let mut mag = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            let x = a[i * k + p];
            for j in 0..n {
                c[i * n + j] += x * b[p * n + j];
                mag[i * n + j] += (x * b[p * n + j]).abs();
            }
        }
    }
    (c, mag)
}

/// Keeps the tests that time the driver apart from the tests that load it on purpose
/// (page-locked allocations and frees, memory handed back to the driver from many
/// threads): the driver serialises those calls, so a timed enqueue beside them measures
/// the neighbour. Timing tests hold [`timed_alone`]; loading tests hold [`loading`].
static DRIVER_LOAD: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Held by a test that times driver calls: no loading test runs meanwhile.
pub fn timed_alone() -> std::sync::RwLockWriteGuard<'static, ()> {
    DRIVER_LOAD.write().unwrap_or_else(|p| p.into_inner())
}

/// Held by a test that loads the driver from many threads on purpose.
pub fn loading() -> std::sync::RwLockReadGuard<'static, ()> {
    DRIVER_LOAD.read().unwrap_or_else(|p| p.into_inner())
}
