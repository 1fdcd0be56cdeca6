//! Hand-written MSL (`RawKernel::msl`) run through the shim: the source as written, bound
//! by the plan the native backend would encode (buffers at their `[[buffer(i)]]`, the
//! scalar block after them, whole groups of the declared size).

use crate::shim_device;
use dotcompute::{ir::ScalarType, Arg, Launch, RawKernel, RawParam};

const SAXPY: &str = "
#include <metal_stdlib>
using namespace metal;

// The scalars, 4 bytes each in parameter order (the bool travels as a uint).
struct Params {
    float a;
    uint n;
    uint negate;
};

kernel void saxpy(const device float* x [[buffer(0)]],
                  device float* y [[buffer(1)]],
                  constant Params& p [[buffer(2)]],
                  uint id [[thread_position_in_grid]],
                  uint3 group [[threadgroup_position_in_grid]]) {
    if (id < p.n) {
        float v = p.a * x[id] + y[id];
        y[id] = p.negate != 0u ? -v : v + 0.0f * float(group.x);
    }
}
";

fn saxpy() -> RawKernel {
    RawKernel::msl(
        "saxpy",
        SAXPY,
        "saxpy",
        [64, 1, 1],
        &[
            RawParam::buffer("x", ScalarType::F32),
            RawParam::buffer_mut("y", ScalarType::F32),
            RawParam::scalar("a", ScalarType::F32),
            RawParam::scalar("n", ScalarType::U32),
            RawParam::scalar("negate", ScalarType::Bool),
        ],
    )
    .unwrap()
}

/// Every element of a raw MSL kernel's output, at sizes that are not multiples of the
/// group (the last group's threads past `n` must leave the poison alone), a view at an
/// offset, and both values of the bool scalar.
#[test]
fn hand_written_msl_runs_through_the_shim_and_writes_every_element() {
    let Some(d) = shim_device() else { return };
    let seed = dotcompute_conformance::seed_from_env();
    let mut rng = fastrand::Rng::with_seed(seed);
    let k = saxpy();
    for (n, negate) in [(1usize, false), (63, true), (1000, false), (4097, true)] {
        let x: Vec<f32> = (0..n).map(|_| rng.f32() * 2.0 - 1.0).collect();
        let y: Vec<f32> = (0..n).map(|_| rng.f32() * 2.0 - 1.0).collect();
        let dx = d.upload(&x).unwrap();
        // Poison past n: the kernel must not write there.
        let mut dy = d.alloc_filled(n + 70, f32::NAN).unwrap();
        dy.slice_mut(0..n).unwrap().write(&y).unwrap();
        d.launch_raw(
            &k,
            Launch::threads(n),
            &[
                Arg::buffer(&dx),
                Arg::buffer_mut(&mut dy),
                Arg::scalar(1.5f32),
                Arg::scalar(n as u32),
                Arg::scalar(negate),
            ],
        )
        .unwrap();
        let got = dy.to_vec().unwrap();
        for i in 0..n {
            let v = 1.5 * x[i] + y[i];
            let want = if negate { -v } else { v };
            assert_eq!(got[i], want, "n {n}, element {i} (seed {seed})");
        }
        assert!(got[n..].iter().all(|v| v.is_nan()), "n {n}: wrote past n");
    }
}

/// A raw kernel whose group differs from the declared one, or that the shim cannot run
/// (threadgroup memory declared in its body), is an error; the device stays usable.
#[test]
fn raw_msl_errors_leave_the_shim_usable() {
    let Some(d) = shim_device() else { return };
    let k = saxpy();
    let x = d.upload(&[1.0f32; 8]).unwrap();
    let mut y = d.alloc_filled(8, 0.0f32).unwrap();
    let e = d
        .launch_raw(
            &k,
            Launch::threads(8).group(32),
            &[
                Arg::buffer(&x),
                Arg::buffer_mut(&mut y),
                Arg::scalar(2.0f32),
                Arg::scalar(8u32),
                Arg::scalar(false),
            ],
        )
        .unwrap_err();
    assert!(
        e.to_string().contains("[64, 1, 1]") || e.to_string().contains("64"),
        "{e}"
    );
    let tg = RawKernel::msl(
        "tg",
        "kernel void tg(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
             threadgroup float t[64]; t[i % 64] = 1.0f; y[i] = t[i % 64]; }",
        "tg",
        [64, 1, 1],
        &[RawParam::buffer_mut("y", ScalarType::F32)],
    )
    .unwrap();
    let e = d
        .launch_raw(&tg, Launch::threads(8), &[Arg::buffer_mut(&mut y)])
        .unwrap_err();
    assert!(e.to_string().contains("threadgroup memory"), "{e}");
    d.launch_raw(
        &k,
        Launch::threads(8),
        &[
            Arg::buffer(&x),
            Arg::buffer_mut(&mut y),
            Arg::scalar(2.0f32),
            Arg::scalar(8u32),
            Arg::scalar(false),
        ],
    )
    .unwrap();
    assert_eq!(y.to_vec().unwrap(), vec![2.0f32; 8]);
}
