//! The conformance suite on every registered backend present (the CPU and lavapipe in CI;
//! CUDA and NVIDIA Vulkan on the GPU machine). An absent backend skips, unless
//! DOTCOMPUTE_REQUIRE lists it.
dotcompute_conformance::conformance_tests!();

/// A CUDA kernel that stores far outside its buffer faults the device (a sticky
/// `CUDA_ERROR_ILLEGAL_ADDRESS`): every later call on it, and on its buffers, is
/// `Error::DeviceLost`, and so is opening the device again while a handle of the lost one
/// is alive. Once every handle is dropped the device opens afresh and passes every
/// conformance case at every size. Runs where CUDA is present (the GPU machine).
#[test]
fn a_faulted_cuda_device_is_lost_and_opens_again() {
    use dotcompute::{BackendKind, Device, Error, Launch};
    use dotcompute_conformance::kernels;
    let required = dotcompute_conformance::required_backends().unwrap();
    let device = match Device::with_backend(BackendKind::Cuda) {
        Ok(d) => d,
        Err(e) if required.contains(&BackendKind::Cuda) => panic!("CUDA is required: {e}"),
        Err(e) => return eprintln!("skipping: {e}"),
    };
    let lost = |what: &str, r: Result<(), Error>| match r {
        Err(Error::DeviceLost { reason, .. }) => eprintln!("{what}: DeviceLost ({reason})"),
        other => panic!("{what}: expected DeviceLost, got {other:?}"),
    };
    let mut out = device.alloc_filled(1024, 0.0f32).unwrap();
    // 0xF000_0000 f32 elements = 15 GiB past the buffer: unmapped on every GPU here.
    let launched = kernels::scatter_far::launch(
        &device,
        Launch::threads(1024).checked(false),
        &mut out,
        0xF000_0000,
    );
    // The fault surfaces at the launch or at the next wait.
    lost(
        "the faulting launch",
        launched.and_then(|()| device.synchronize()),
    );
    lost("alloc", device.alloc::<f32>(16).map(|_| ()));
    lost("reading a buffer", out.to_vec().map(|_| ()));
    lost(
        "a launch",
        kernels::scatter_far::launch(&device, Launch::threads(1024), &mut out, 0),
    );
    lost(
        "opening the device while its lost handles live",
        Device::with_backend(BackendKind::Cuda).map(|_| ()),
    );
    drop(out);
    drop(device);
    let fresh = Device::with_backend(BackendKind::Cuda).expect("the device opens after the fault");
    let seed = dotcompute_conformance::seed_from_env();
    let mut passed = 0;
    for case in dotcompute_conformance::cases() {
        for &size in &case.sizes {
            let r = dotcompute_conformance::run_case(&fresh, &case, size, seed);
            assert!(
                r.passed,
                "{} at {} failed on the recovered device (seed {seed}): {}",
                r.case, r.size, r.message
            );
            passed += 1;
        }
    }
    eprintln!("the recovered CUDA device passed {passed} conformance case-sizes");
}
