//! Hand-written MSL kernels (issue 30, item 5): signatures that do not match the declared
//! parameters are errors naming the argument, made before any device sees the kernel;
//! devices that cannot run MSL (the CPU, CUDA, wgpu on Vulkan) refuse the launch with an
//! error naming where it runs, lose nothing and stay usable. (It runs through the Linux
//! shim in `dotcompute-metal`'s tests; no Apple hardware is here.)

use crate::bad_input::still_works;
use crate::common;
use dotcompute::ir::ScalarType;
use dotcompute::{Arg, Error, Launch, RawKernel, RawLanguage, RawParam};

const SCALE: &str = "
#include <metal_stdlib>
using namespace metal;
struct Params { float k; uint n; };
kernel void scale(const device float* x [[buffer(0)]],
                  device float* y [[buffer(1)]],
                  constant Params& p [[buffer(2)]],
                  uint3 id [[thread_position_in_grid]]) {
    if (id.x < p.n) { y[id.x] = p.k * x[id.x]; }
}
";

fn params() -> Vec<RawParam> {
    vec![
        RawParam::buffer("x", ScalarType::F32),
        RawParam::buffer_mut("y", ScalarType::F32),
        RawParam::scalar("k", ScalarType::F32),
        RawParam::scalar("n", ScalarType::U32),
    ]
}

/// Source, entry point, group, parameters, and a part of the expected error.
type Case = (String, &'static str, [u32; 3], Vec<RawParam>, &'static str);

fn compile_log(source: &str, entry: &str, group: [u32; 3], params: &[RawParam]) -> String {
    match RawKernel::msl("scale", source, entry, group, params) {
        Err(Error::Compile { log, backend, .. }) => {
            assert_eq!(backend, "metal");
            log
        }
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted: {source}"),
    }
}

#[test]
fn msl_signatures_that_do_not_match_the_parameters_are_errors_naming_the_argument() {
    let k = RawKernel::msl("scale", SCALE, "scale", [64, 1, 1], &params()).unwrap();
    assert_eq!(k.language(), RawLanguage::Msl);
    let p = params();
    let f32_y = |elem| {
        let mut p = params();
        p[1] = RawParam::buffer_mut("y", elem);
        p
    };
    let read_only_y = {
        let mut p = params();
        p[1] = RawParam::buffer("y", ScalarType::F32);
        p
    };
    let i32_k = {
        let mut p = params();
        p[2] = RawParam::scalar("k", ScalarType::I32);
        p
    };
    let cases: Vec<Case> = vec![
        (
            SCALE.into(),
            "scal",
            [64, 1, 1],
            p.clone(),
            "no kernel function `kernel void scal",
        ),
        (
            SCALE.into(),
            "scale",
            [64, 1, 1],
            f32_y(ScalarType::U32),
            "is u32, but binding 1 is an array of f32",
        ),
        (SCALE.into(), "scale", [64, 1, 1], read_only_y, "writable"),
        (
            SCALE.into(),
            "scale",
            [64, 1, 1],
            i32_k,
            "scalar parameter 0 is i32, but field 0",
        ),
        (
            SCALE.into(),
            "scale",
            [64, 1, 1],
            p[..3].to_vec(),
            "scalar parameter",
        ),
        (
            SCALE.into(),
            "scale",
            [64, 1, 1],
            p[1..].to_vec(),
            "declares 2 storage buffers",
        ),
        (
            SCALE.replace("buffer(2)", "buffer(5)"),
            "scale",
            [64, 1, 1],
            p.clone(),
            "binding 2",
        ),
        (
            SCALE.replace("const device float* x", "device double* x"),
            "scale",
            [64, 1, 1],
            p.clone(),
            "`double` is not an element type",
        ),
        (
            SCALE.replace(
                "uint3 id [[thread_position_in_grid]]",
                "uint3 id [[thread_position_in_grid]], device float* z [[buffer(3)]]",
            ),
            "scale",
            [64, 1, 1],
            p.clone(),
            "takes its buffers first",
        ),
        (
            SCALE.into(),
            "scale",
            [0, 1, 1],
            p.clone(),
            "1 to 1024 threads",
        ),
        (
            SCALE.into(),
            "scale",
            [64, 32, 1],
            p.clone(),
            "1 to 1024 threads",
        ),
    ];
    for (source, entry, group, params, expected) in cases {
        let log = compile_log(&source, entry, group, &params);
        assert!(log.contains(expected), "expected `{expected}` in: {log}");
    }
}

/// Every device here (CPU, lavapipe; CUDA and NVIDIA Vulkan on the GPU machine) refuses
/// a launch of MSL with an error that says where it runs, writes nothing, and works on.
#[test]
fn devices_without_msl_refuse_the_launch_and_stay_usable() {
    let k = RawKernel::msl("scale", SCALE, "scale", [64, 1, 1], &params()).unwrap();
    for d in common::devices() {
        assert!(
            !d.info().caps.raw_languages.contains(&RawLanguage::Msl),
            "{d:?}"
        );
        let x = d.upload(&[1.0f32; 100]).unwrap();
        let mut y = d.alloc_filled(100, f32::NAN).unwrap();
        let e = d
            .launch_raw(
                &k,
                Launch::threads(100),
                &[
                    Arg::buffer(&x),
                    Arg::buffer_mut(&mut y),
                    Arg::scalar(2.0f32),
                    Arg::scalar(100u32),
                ],
            )
            .unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("MSL") && text.contains("metal"),
            "{d:?}: {text}"
        );
        assert!(
            y.to_vec().unwrap().iter().all(|v| v.is_nan()),
            "{d:?} wrote"
        );
        still_works(&d);
    }
}
