//! Seeing the code generated from one's own kernel (issue 31): `KernelSource::source` for
//! every target, generic instances and hand-written kernels, and `DOTCOMPUTE_DUMP`, which
//! writes what each launch compiled.

use crate::common;
use dotcompute::prelude::*;
use dotcompute::{BackendKind, Error, SourceOptions, Target};

/// A kernel with a barrier and shared memory (never run in a grid-stride form).
#[kernel]
fn neighbour_sum(x: &[u32], out: &mut [u32]) {
    let s = shared::<u32, 64>();
    let l = local_id().x;
    let i = global_id().x;
    s[l] = if i < x.len() { x[i] } else { 0u32 };
    barrier();
    if i < out.len() {
        out[i] = s[l] + s[(l + 1) % 64];
    }
}

#[kernel]
fn scale_by<T: Num, const K: u32>(x: &mut [T]) {
    let i = global_id().x;
    if i < x.len() {
        x[i] = x[i] * T::cast(K);
    }
}

#[test]
fn every_target_shows_the_kernel_including_generic_instances() {
    let def = neighbour_sum::kernel();
    let expect = [
        (Target::Ir, "neighbour_sum"),
        (Target::Cuda, "__global__"),
        (Target::Wgsl, "@workgroup_size(256, 1, 1)"),
        (Target::Msl, "kernel void"),
    ];
    for (target, marker) in expect {
        let text = def.source(target).unwrap();
        assert!(text.contains(marker), "{target:?} lacks {marker}:\n{text}");
        assert!(text.contains("neighbour_sum"), "{target:?}:\n{text}");
    }
    // Options change what they should: the group size in WGSL, checks everywhere.
    let small = SourceOptions {
        group: [64, 1, 1],
        ..SourceOptions::default()
    };
    let wgsl64 = def.source_with(Target::Wgsl, small).unwrap();
    assert!(wgsl64.contains("@workgroup_size(64, 1, 1)"), "{wgsl64}");
    let checked = SourceOptions {
        checked: true,
        ..SourceOptions::default()
    };
    for target in [Target::Cuda, Target::Wgsl, Target::Msl] {
        assert_ne!(
            def.source(target).unwrap(),
            def.source_with(target, checked).unwrap(),
            "{target:?}: the checked form is the same text"
        );
    }
    // A generic instance is shown under its instance name, and instances differ.
    let f32x3 = scale_by::kernel::<f32, 3>().source(Target::Cuda).unwrap();
    let i32x5 = scale_by::kernel::<i32, 5>().source(Target::Cuda).unwrap();
    assert!(
        f32x3.contains("float") && !f32x3.contains("int32_t*"),
        "{f32x3}"
    );
    assert!(i32x5.contains("int"), "{i32x5}");
    assert_ne!(f32x3, i32x5);
    let ir = scale_by::kernel::<f32, 3>().source(Target::Ir).unwrap();
    assert!(ir.contains("scale_by"), "{ir}");
}

#[cfg(feature = "wgpu")]
#[test]
fn a_hand_written_kernel_shows_its_own_text_and_refuses_other_languages() {
    const COPY: &str = "
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&y)) { y[id.x] = x[id.x]; }
}
";
    use dotcompute::ir::ScalarType;
    let k = dotcompute::RawKernel::wgsl(
        "copy_u32",
        COPY,
        &[
            dotcompute::RawParam::buffer("x", ScalarType::U32),
            dotcompute::RawParam::buffer_mut("y", ScalarType::U32),
        ],
    )
    .unwrap();
    assert_eq!(k.source(Target::Wgsl).unwrap(), COPY);
    for target in [Target::Cuda, Target::Msl] {
        let e = k.source(target).unwrap_err();
        assert!(
            matches!(e, Error::Unsupported { .. }) && e.to_string().contains("copy_u32"),
            "{e}"
        );
    }
}

#[test]
fn dotcompute_dump_writes_what_each_gpu_launch_compiled() {
    let dir = std::env::temp_dir().join(format!("dotcompute-dump-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = common::run_test_in_child(
        "generated_source::dump_child",
        &[("DOTCOMPUTE_DUMP", dir.to_str().unwrap())],
        Some(std::time::Duration::from_secs(600)),
    );
    eprintln!("child (status {:?}):\n{}", run.status, run.text);
    assert!(run.text.contains("DUMP-CHECKED"), "{}", run.text);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Run by the test above with `DOTCOMPUTE_DUMP` set: launches `neighbour_sum` on every
/// GPU present (group 64), checks every output element, then the dumped files.
#[test]
#[ignore = "run by dotcompute_dump_writes_what_each_gpu_launch_compiled"]
fn dump_child() {
    let Some(dir) = std::env::var_os("DOTCOMPUTE_DUMP").map(std::path::PathBuf::from) else {
        return;
    };
    let key = neighbour_sum::kernel().program().unwrap().key.hex();
    let n = 4099usize;
    let seed = common::seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    let x: Vec<u32> = (0..n).map(|_| rng.u32(..1 << 30)).collect();
    let mut gpus = 0;
    for d in common::devices() {
        let kind = d.info().backend;
        let xs = d.upload(&x).unwrap();
        let mut out = d.alloc_filled(n, 0xDEAD_BEEFu32).unwrap();
        neighbour_sum::launch(&d, Launch::threads(n).group(64), &xs, &mut out).unwrap();
        let got = out.to_vec().unwrap();
        for i in 0..n {
            let next = if (i + 1) % 64 == 0 { i + 1 - 64 } else { i + 1 };
            let want = x[i] + x.get(next).copied().unwrap_or(0);
            assert_eq!(
                got[i],
                want,
                "{}: element {i} (seed {seed})",
                d.info().label()
            );
        }
        let (ext, exact) = match kind {
            BackendKind::Cuda => ("cu", Some(neighbour_sum::kernel().source(Target::Cuda))),
            BackendKind::Wgpu => ("wgsl", None),
            _ => continue,
        };
        gpus += 1;
        let files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: no dump directory: {e}", d.info().label()))
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy().to_string();
                name.starts_with(&format!("neighbour_sum.{}", &key[..16]))
                    && name.ends_with(&format!(".{ext}"))
            })
            .collect();
        assert!(
            !files.is_empty(),
            "{}: nothing dumped for .{ext}",
            d.info().label()
        );
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            let (header, body) = text.split_once('\n').unwrap();
            assert!(
                header.contains("neighbour_sum") && header.contains(&key),
                "{}: {header}",
                f.display()
            );
            if let Some(exact) = &exact {
                assert_eq!(body, exact.as_ref().unwrap(), "{}", f.display());
            } else {
                assert!(
                    body.contains("@workgroup_size(64, 1, 1)"),
                    "{}",
                    f.display()
                );
            }
            eprintln!("{}: {}", d.info().label(), f.display());
        }
    }
    // A dump directory that became unusable (the variable is read once per process, so
    // the path stays; a file now stands there) is an error naming the variable at the
    // compile that needed it, and the device stays usable.
    let moved = dir.with_extension("moved");
    let block = |blocked: bool| {
        if blocked {
            std::fs::rename(&dir, &moved).unwrap();
            std::fs::write(&dir, b"x").unwrap();
        } else {
            std::fs::remove_file(&dir).unwrap();
            std::fs::rename(&moved, &dir).unwrap();
        }
    };
    for d in common::devices() {
        if !matches!(d.info().backend, BackendKind::Cuda | BackendKind::Wgpu) {
            continue;
        }
        let xs = d.upload(&x).unwrap();
        let mut out = d.alloc_filled(n, 7u32).unwrap();
        block(true);
        // The checked form, not compiled before: a new compile on both.
        let launch = Launch::threads(n).group(64).checked(true);
        let e = neighbour_sum::launch(&d, launch, &xs, &mut out).unwrap_err();
        assert!(
            matches!(e, Error::Config { .. }) && e.to_string().contains("DOTCOMPUTE_DUMP"),
            "{}: {e}",
            d.info().label()
        );
        assert!(
            out.to_vec().unwrap().iter().all(|&v| v == 7),
            "a refused launch wrote"
        );
        // With the directory back, the same device compiles and runs it.
        block(false);
        neighbour_sum::launch(&d, launch, &xs, &mut out).unwrap();
        assert_eq!(out.to_vec().unwrap()[..2], [x[0] + x[1], x[1] + x[2]]);
    }
    println!("DUMP-CHECKED on {gpus} GPU device(s)");
}

/// Reads `x` from a `while` loop whose trips the generator cannot bound.
#[kernel]
fn halvings(x: &[u32], out: &mut [u32]) {
    let i = global_id().x;
    if i < x.len() {
        let mut v = x[i];
        let mut n = 0u32;
        while v > 0 {
            v /= 2;
            n += 1;
        }
        out[i] = n;
    }
}

/// The WGSL printer clamps a shared or private array index only where it cannot prove
/// it in bounds (the SPIR-V it hands Vulkan drivers has no clamps of naga's): with 64
/// threads `s[l]` and `s[(l + 1) % 64]` are proven, with 256 `s[l]` is not. The
/// register-blocked matrix product, where each clamp cost time, proves all of its
/// indices. Loops that do not end by construction (`while`) get a trip counter; `for`
/// loops do not.
#[test]
fn wgsl_clamps_only_unproven_array_indices_and_bounds_only_open_loops() {
    let opts = |group| SourceOptions {
        group,
        ..SourceOptions::default()
    };
    let def = neighbour_sum::kernel();
    let wgsl64 = def.source_with(Target::Wgsl, opts([64, 1, 1])).unwrap();
    assert!(!wgsl64.contains("min("), "{wgsl64}");
    let wgsl256 = def.source_with(Target::Wgsl, opts([256, 1, 1])).unwrap();
    assert!(wgsl256.contains("[min(l_l_"), "{wgsl256}");
    assert!(wgsl256.contains(", 64u - 1u)]"), "{wgsl256}");
    assert!(!wgsl256.contains("% 64u), 64u - 1u)"), "{wgsl256}");

    let product = dotcompute::library_kernels()
        .into_iter()
        .find(|k| k.name() == "matmul_pipelined_f32_1_0_1")
        .expect("the product is a library kernel");
    let text = product
        .source_with(Target::Wgsl, opts([16, 16, 1]))
        .unwrap();
    assert!(text.contains("s_ta["), "{text}");
    assert!(!text.contains("[min("), "{text}");

    let open = halvings::kernel().source(Target::Wgsl).unwrap();
    assert_eq!(open.matches("vec2<u32>(4294967295u)").count(), 1, "{open}");
    let closed = neighbour_sum::kernel().source(Target::Wgsl).unwrap();
    assert!(!closed.contains("4294967295u)"), "{closed}");
}
