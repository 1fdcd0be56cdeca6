//! Hand-written WGSL kernels: run on wgpu with every element checked; interface mismatches,
//! syntax errors, group-size conflicts and CPU launches are clear errors.
#![cfg(feature = "wgpu")]

use crate::common::wgpu_device;

use dotcompute::ir::ScalarType;
use dotcompute::{Arg, Device, Error, Launch, RawKernel, RawParam};

const AXPY_U32: &str = "
struct Params { k: u32 }
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&y)) {
        y[id.x] = x[id.x] * p.k + y[id.x];
    }
}
";

fn params() -> Vec<RawParam> {
    vec![
        RawParam::buffer("x", ScalarType::U32),
        RawParam::buffer_mut("y", ScalarType::U32),
        RawParam::scalar("k", ScalarType::U32),
    ]
}

#[test]
fn a_raw_wgsl_kernel_computes_every_element() {
    let Some(d) = wgpu_device() else { return };
    let k = RawKernel::wgsl("axpy_u32", AXPY_U32, &params()).unwrap();
    let seed = fastrand::u64(..);
    let mut rng = fastrand::Rng::with_seed(seed);
    let n = 1_000_003;
    let x: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
    let y0: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
    let factor = rng.u32(..);
    let dx = d.upload(&x).unwrap();
    let mut dy = d.upload(&y0).unwrap();
    d.launch_raw(
        &k,
        Launch::threads(n),
        &[
            Arg::buffer(&dx),
            Arg::buffer_mut(&mut dy),
            Arg::scalar(factor),
        ],
    )
    .unwrap();
    let got = dy.to_vec().unwrap();
    for i in 0..n {
        let want = x[i].wrapping_mul(factor).wrapping_add(y0[i]);
        assert_eq!(got[i], want, "element {i} (seed {seed})");
    }
}

#[test]
fn raw_kernel_interface_mismatches_are_errors_naming_the_binding() {
    let wrong_type = RawKernel::wgsl(
        "k",
        AXPY_U32,
        &[
            RawParam::buffer("x", ScalarType::F32),
            RawParam::buffer_mut("y", ScalarType::U32),
            RawParam::scalar("k", ScalarType::U32),
        ],
    )
    .unwrap_err();
    assert!(
        wrong_type
            .to_string()
            .contains("binding 0 is an array of u32"),
        "{wrong_type}"
    );
    let read_only = RawKernel::wgsl(
        "k",
        AXPY_U32,
        &[
            RawParam::buffer("x", ScalarType::U32),
            RawParam::buffer("y", ScalarType::U32),
            RawParam::scalar("k", ScalarType::U32),
        ],
    )
    .unwrap_err();
    assert!(read_only.to_string().contains("buffer_mut"), "{read_only}");
    let no_scalar = RawKernel::wgsl("k", AXPY_U32, &params()[..2]).unwrap_err();
    assert!(no_scalar.to_string().contains("uniform"), "{no_scalar}");
    let missing = RawKernel::wgsl("k", AXPY_U32, &params()[..1]).unwrap_err();
    assert!(
        missing.to_string().contains("2 storage buffers"),
        "{missing}"
    );
}

#[test]
fn a_wgsl_syntax_error_is_a_compile_error_quoting_the_line() {
    let broken = AXPY_U32.replace("x[id.x] * p.k", "x[id.x] ** p.k");
    let e = RawKernel::wgsl("broken", &broken, &params()).unwrap_err();
    assert!(matches!(e, Error::Compile { .. }), "{e:?}");
    assert!(
        e.to_string().contains("x[id.x] ** p.k"),
        "the message should quote the line: {e}"
    );
}

#[test]
fn a_conflicting_group_size_and_a_cpu_launch_are_errors() {
    let k = RawKernel::wgsl("axpy_u32", AXPY_U32, &params()).unwrap();
    let cpu = Device::cpu();
    let x = cpu.upload(&[1u32; 8]).unwrap();
    let mut y = cpu.upload(&[1u32; 8]).unwrap();
    let e = cpu
        .launch_raw(
            &k,
            Launch::threads(8),
            &[Arg::buffer(&x), Arg::buffer_mut(&mut y), Arg::scalar(2u32)],
        )
        .unwrap_err();
    assert!(e.to_string().contains("runs only on wgpu"), "{e}");
    assert!(matches!(e, dotcompute::Error::Unsupported { .. }), "{e:?}");
    let e = cpu
        .launch_raw(
            &k,
            Launch::threads(8).group(32),
            &[Arg::buffer(&x), Arg::buffer_mut(&mut y), Arg::scalar(2u32)],
        )
        .unwrap_err();
    assert!(matches!(e, Error::InvalidGroupSize { .. }), "{e:?}");
    // Arguments are checked as for #[kernel] functions.
    let e = cpu
        .launch_raw(&k, Launch::threads(8), &[Arg::buffer(&x)])
        .unwrap_err();
    assert!(matches!(e, Error::ArgumentCount { .. }), "{e:?}");
}

/// A raw kernel whose `var<workgroup>` arrays take `WORDS` u32s.
fn workgroup_kernel(words: u32) -> String {
    format!(
        "
var<workgroup> tile: array<u32, {words}>;
@group(0) @binding(0) var<storage, read_write> y: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(local_invocation_index) l: u32) {{
    tile[l] = id.x;
    workgroupBarrier();
    if (id.x < arrayLength(&y)) {{
        y[id.x] = tile[63u - l];
    }}
}}
"
    )
}

#[test]
fn raw_wgsl_beyond_the_workgroup_memory_limit_is_an_error() {
    let Some(d) = wgpu_device() else { return };
    let params = [RawParam::buffer_mut("y", ScalarType::U32)];
    let limit = d.info().limits.max_shared_bytes;
    // Within the limit: runs, every element checked (each group reverses its ids).
    let k = RawKernel::wgsl("reverse", &workgroup_kernel(64), &params).unwrap();
    let mut y = d.alloc_filled(256, 0xDEAD_BEEFu32).unwrap();
    d.launch_raw(&k, Launch::threads(256), &[Arg::buffer_mut(&mut y)])
        .unwrap();
    let got = y.to_vec().unwrap();
    assert!(
        got.iter()
            .enumerate()
            .all(|(i, &v)| v as usize == i / 64 * 64 + 63 - i % 64),
        "{got:?}"
    );
    // 80 KB on a device with less: an error naming kernel, size and limit; nothing ran.
    let words = (80 * 1024 / 4) as u32;
    assert!(words as u64 * 4 > limit, "the device allows {limit} bytes");
    let k = RawKernel::wgsl("too_much", &workgroup_kernel(words), &params).unwrap();
    let mut y = d.alloc_filled(256, 7u32).unwrap();
    let e = d
        .launch_raw(&k, Launch::threads(256), &[Arg::buffer_mut(&mut y)])
        .unwrap_err();
    assert!(
        matches!(&e, Error::SharedMemoryTooLarge { requested, limit: l, .. }
            if *requested == words as u64 * 4 && *l == limit),
        "{e:?}"
    );
    assert_eq!(y.to_vec().unwrap(), vec![7u32; 256]);
}

#[test]
fn a_raw_wgsl_group_beyond_the_device_limit_is_an_error_and_nothing_runs() {
    let Some(d) = wgpu_device() else { return };
    let limit = d.info().limits.max_group_threads;
    let too_many = (limit + 64).next_multiple_of(64);
    let text = AXPY_U32.replace(
        "@workgroup_size(64)",
        &format!("@workgroup_size({too_many})"),
    );
    let k = RawKernel::wgsl("axpy_big_group", &text, &params()).unwrap();
    let dx = d.upload(&[1u32; 256]).unwrap();
    let mut dy = d.alloc_filled(256, 5u32).unwrap();
    let e = d
        .launch_raw(
            &k,
            Launch::threads(256),
            &[
                Arg::buffer(&dx),
                Arg::buffer_mut(&mut dy),
                Arg::scalar(2u32),
            ],
        )
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidGroupSize { .. }) && e.to_string().contains(&limit.to_string()),
        "{e:?}"
    );
    assert_eq!(dy.to_vec().unwrap(), vec![5u32; 256]);
}
