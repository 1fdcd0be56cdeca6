//! Shared by the integration tests.
#![allow(dead_code)]

use dotcompute::{BackendKind, Device};

/// A device of backend `kind`, or `None` (the test then does nothing) when the backend is
/// absent, unless `DOTCOMPUTE_REQUIRE` lists it, in which case its absence fails the test.
pub fn device_of(kind: BackendKind) -> Option<Device> {
    match Device::with_backend(kind) {
        Ok(d) => Some(d),
        Err(e) => {
            let required = std::env::var("DOTCOMPUTE_REQUIRE").unwrap_or_default();
            assert!(
                !required
                    .split(',')
                    .any(|b| BackendKind::parse(b) == Some(kind)),
                "{kind} is required by DOTCOMPUTE_REQUIRE: {e}"
            );
            eprintln!("skipping: {e}");
            None
        }
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
