//! The registry and `Device::best()` on the machine at hand (the CPU and lavapipe in CI,
//! CUDA and NVIDIA Vulkan on the GPU machine).

use dotcompute::registry::rank;
use dotcompute::{backends, BackendKind, Device, DeviceType};

#[test]
fn best_is_the_highest_ranked_device_present() {
    if std::env::var(dotcompute::BACKEND_ENV).is_ok_and(|v| !v.trim().is_empty()) {
        eprintln!(
            "skipping: {} overrides Device::best()",
            dotcompute::BACKEND_ENV
        );
        return;
    }
    let present: Vec<_> = backends()
        .into_iter()
        .filter_map(|s| s.devices.ok())
        .flatten()
        .collect();
    let top = present
        .iter()
        .map(rank)
        .max()
        .expect("the CPU is always present");
    let best = Device::best().unwrap();
    assert_eq!(
        rank(best.info()),
        top,
        "Device::best() chose {} ({:?}) among {:?}",
        best.label(),
        best.info().device_type,
        present
            .iter()
            .map(|d| (d.backend, d.device_type))
            .collect::<Vec<_>>()
    );
    // A GPU API emulated on the CPU never wins over the native CPU backend.
    assert_ne!(best.info().device_type, DeviceType::SoftwareGpu);
}

#[test]
fn every_registered_backend_is_listed_and_the_cpu_is_present() {
    let listed: Vec<BackendKind> = backends().iter().map(|s| s.kind).collect();
    for d in dotcompute::registry() {
        assert!(
            listed.contains(&d.kind),
            "{} is registered but not listed",
            d.kind
        );
    }
    let cpu = backends()
        .into_iter()
        .find(|s| s.kind == BackendKind::Cpu)
        .unwrap();
    assert_eq!(cpu.devices.unwrap().len(), 1);
}
