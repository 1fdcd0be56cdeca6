#![allow(dead_code)]

use dotcompute::{BackendKind, Device};

/// Whether `DOTCOMPUTE_REQUIRE` lists `kind` (an unknown name fails the test).
pub fn required(kind: BackendKind) -> bool {
    listed("DOTCOMPUTE_REQUIRE").contains(&kind)
}

/// Whether `DOTCOMPUTE_ONLY` (when set) lists `kind`: the conformance suite's filter, so a
/// job can run one backend alone.
fn wanted(kind: BackendKind) -> bool {
    let only = listed("DOTCOMPUTE_ONLY");
    only.is_empty() || only.contains(&kind)
}

/// The backends `variable` lists, parsed as the conformance suite parses them.
fn listed(variable: &'static str) -> Vec<BackendKind> {
    dotcompute::settings::backends(variable).unwrap_or_else(|e| panic!("{e}"))
}

/// One device of every backend present (those `DOTCOMPUTE_ONLY` lists, when set), and the
/// Metal path: the generated MSL run on the CPU through clang (the shim; required where
/// `DOTCOMPUTE_REQUIRE_MSL_SHIM=1`).
pub fn devices() -> Vec<Device> {
    let mut devices: Vec<Device> = dotcompute::registry()
        .iter()
        .filter(|d| wanted(d.kind))
        .filter_map(|d| match Device::with_backend(d.kind) {
            Ok(dev) => Some(dev),
            Err(e) => {
                assert!(!required(d.kind), "{} is required: {e}", d.kind);
                eprintln!("skipping: {e}");
                None
            }
        })
        .collect();
    match dotcompute_metal::shim::ShimBackend::new() {
        Ok(b) => devices.push(Device::from_backend(Box::new(b))),
        Err(e) => {
            let required = dotcompute::settings::switch_or("DOTCOMPUTE_REQUIRE_MSL_SHIM", false)
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(!required, "the MSL shim is required but unavailable: {e}");
            eprintln!("skipping the MSL shim: {e}");
        }
    }
    let labels: Vec<String> = devices.iter().map(|d| d.label()).collect();
    eprintln!("devices: {}", labels.join("; "));
    devices
}

/// A seed from `DOTCOMPUTE_SEED` or a random one, printed.
pub fn seed() -> u64 {
    let seed = std::env::var("DOTCOMPUTE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("seed {seed} (set DOTCOMPUTE_SEED={seed} to replay)");
    seed
}

/// Whether the device is slow (the CPU, or lavapipe): large cases stay near 300,000 there
/// (the CPU runs the sort's barrier-heavy kernels through its split group bodies, and
/// lavapipe its barriers in software: a million pairs take seconds).
pub fn slow(d: &Device) -> bool {
    d.backend_kind() == BackendKind::Cpu
        || d.backend_kind() == BackendKind::Metal
        || d.info().name.contains("llvmpipe")
}

/// Sizes to test on `d`: edges around the group (256) and the tiles (2,048, 4,096 and 8,192),
/// powers of two ± 1, a prime, and one large size (≥ 2^24 on GPUs, 300,007 elsewhere).
pub fn sizes(d: &Device) -> Vec<usize> {
    let large = if slow(d) { 300_007 } else { (1 << 24) + 5 };
    vec![
        0, 1, 2, 255, 256, 257, 2047, 2048, 2049, 4095, 4097, 8191, 8193, 65535, 65537, 100_003,
        large,
    ]
}

/// The forms a scan of 32-bit integers can take on `d`: CUDA has a single pass (with a
/// decoupled look-back) beside the three passes every GPU has, GPUs the three passes
/// in narrow tiles too, and devices with subgroups the three passes scanned by subgroups
/// in registers; the CPU device scans in host code, in one sweep or two passes, with
/// cached or streamed stores. Tests run every form (pinned with `tune::with_candidate`).
pub fn pass_forms(d: &dotcompute::Device) -> Vec<&'static str> {
    let mut forms = Vec::new();
    if d.backend_kind() == dotcompute::BackendKind::Cpu {
        // The CPU device's whole scans: one sweep or two passes, cached or streamed stores.
        return vec![
            "cached-stores",
            "streamed-stores",
            "two-passes, cached-stores",
            "two-passes, streamed-stores",
        ];
    }
    if d.backend_kind() == dotcompute::BackendKind::Cuda {
        forms.extend(["single-pass", "single-pass-narrow"]);
    }
    forms.push("three-pass");
    // Software GPUs take their loop counts at run time and have no narrow form.
    let software = d.info().device_type == dotcompute::DeviceType::SoftwareGpu;
    if !software {
        forms.push("three-pass-narrow");
    }
    if d.info().caps.subgroup_size.is_some() {
        forms.extend(["three-pass-subgroup", "three-pass-subgroup-vec4"]);
        if !software {
            forms.push("three-pass-subgroup-narrow");
        }
    }
    forms
}

/// The forms a copy-if or a unique can take on `d`: the scan's but its narrow three
/// passes and its quads, which selection does not have (pinning them would run the
/// default three passes again).
pub fn selection_forms(d: &dotcompute::Device) -> Vec<&'static str> {
    if d.backend_kind() == dotcompute::BackendKind::Cpu {
        return vec!["three-pass"]; // host code: one form
    }
    pass_forms(d)
        .into_iter()
        .filter(|&f| !f.ends_with("-vec4"))
        .filter(|&f| !(f.starts_with("three-pass") && f.ends_with("-narrow")))
        .collect()
}

/// The GPU transpose's tile orders and heights, the tuner's candidates (pinned in turn by
/// the tests and the timing probe).
pub const TRANSPOSE_ORDERS: [&str; 8] = [
    "row-raster",
    "column-raster",
    "row-raster-64",
    "column-raster-64",
    "row-raster-128",
    "column-raster-128",
    "column-raster-64-sectors",
    "column-raster-128-sectors",
];
