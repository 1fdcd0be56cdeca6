//! Fuzzing the IR decoder, the validator and the generators: serialized kernels are
//! mutated at random (a value replaced by another number, string, boolean, null or
//! container; an array element removed or doubled; the text truncated or its bytes
//! flipped) and decoded. Decoding must return `Ok` or `Err`, never panic, and every kernel
//! the validator accepts must go through every generator (IR text, CUDA C++, checked
//! CUDA, MSL, checked MSL, WGSL, checked WGSL) without a panic: generators trust
//! validated IR, so a panic there is a validator gap.
//!
//! Time-boxed: `DOTCOMPUTE_FUZZ_SECONDS` (default 10). A failure prints the seed;
//! `DOTCOMPUTE_SEED` replays it. (cargo-fuzz needs a nightly toolchain, which this project
//! does not have; this is the same idea with a seeded generator.)

use dotcompute_codegen::{cuda, msl, wgsl, IrText, Target};
use dotcompute_ir::*;
use serde_json::Value;
use std::time::{Duration, Instant};

/// Valid kernels to mutate: arithmetic with a loop and a select, shared memory with a
/// barrier and atomics, a local array, a dynamic shared array and 64-bit values.
fn seeds() -> Vec<Kernel> {
    let mut out = Vec::new();

    let mut b = Builder::new("arith");
    let x = b.buffer("x", ScalarType::F32, Access::ReadWrite);
    let n = b.scalar("n", ScalarType::U32);
    let i = b.builtin(Builtin::GlobalId, Axis::X);
    let inside = b.binary(BinaryOp::Lt, i.clone(), n).unwrap();
    b.begin_if(inside).unwrap();
    let acc = b
        .let_("acc", Some(ScalarType::F32.into()), true, V::host(0.0f32))
        .unwrap();
    let k = b
        .begin_for("k", V::host(0u32), V::host(4u32), None)
        .unwrap();
    let kv = b.get(k);
    let kf = b.cast(kv, ScalarType::F32).unwrap();
    let cur = b.get(acc);
    let sum = b.binary(BinaryOp::Add, cur, kf).unwrap();
    b.assign(acc, sum).unwrap();
    b.end_for().unwrap();
    let v = b.load(x, i.clone()).unwrap();
    let a = b.get(acc);
    let m = b.math(MathFn::Max, vec![v, a]).unwrap();
    b.store(x, i, m).unwrap();
    b.end_if().unwrap();
    out.push(b.finish().unwrap());

    let mut b = Builder::new("shared");
    let h = b.buffer("h", ScalarType::U32, Access::ReadWrite);
    let s = b.shared("s", ScalarType::U32, V::Int(64)).unwrap();
    let l = b.builtin(Builtin::LocalId, Axis::X);
    b.store(s, l.clone(), V::host(0u32)).unwrap();
    b.barrier();
    let bucket = b.binary(BinaryOp::Rem, l.clone(), V::host(64u32)).unwrap();
    b.atomic(AtomicOp::Add, s, bucket, vec![V::host(1u32)])
        .unwrap();
    b.barrier();
    let v = b.load(s, l.clone()).unwrap();
    b.atomic(AtomicOp::Max, h, l, vec![v]).unwrap();
    out.push(b.finish().unwrap());

    let mut b = Builder::new("local");
    let o = b.buffer("o", ScalarType::I32, Access::ReadWrite);
    let arr = b
        .local_array("arr", Some(ScalarType::I32), V::Int(8), V::host(3i32))
        .unwrap();
    let i = b.builtin(Builtin::GlobalId, Axis::X);
    let j = b
        .binary(BinaryOp::BitAnd, i.clone(), V::host(7u32))
        .unwrap();
    let v = b.load(arr, j).unwrap();
    let neg = b.unary(UnaryOp::Neg, v).unwrap();
    b.store(o, i, neg).unwrap();
    out.push(b.finish().unwrap());

    let mut b = Builder::new("wide");
    let o = b.buffer("o", ScalarType::U64, Access::ReadWrite);
    let d = b.shared_dynamic("d", ScalarType::I64).unwrap();
    let i = b.builtin(Builtin::GlobalId, Axis::X);
    let l = b.builtin(Builtin::LocalId, Axis::X);
    let wide = b.cast(i.clone(), ScalarType::I64).unwrap();
    b.store(d, l.clone(), wide).unwrap();
    let back = b.load(d, l).unwrap();
    let u = b.cast(back, ScalarType::U64).unwrap();
    let sh = b.binary(BinaryOp::Shl, u, V::host(3u32)).unwrap();
    b.store(o, i, sh).unwrap();
    out.push(b.finish().unwrap());
    out
}

/// Every node of `v`, as paths of object keys and array indices.
fn paths(v: &Value, here: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    out.push(here.clone());
    match v {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                here.push(Step::Index(i));
                paths(item, here, out);
                here.pop();
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                here.push(Step::Key(k.clone()));
                paths(item, here, out);
                here.pop();
            }
        }
        _ => {}
    }
}

#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

fn at<'v>(v: &'v mut Value, path: &[Step]) -> &'v mut Value {
    path.iter().fold(v, |v, s| match s {
        Step::Key(k) => &mut v[k.as_str()],
        Step::Index(i) => &mut v[*i],
    })
}

fn random_value(rng: &mut fastrand::Rng) -> Value {
    let numbers = [
        -1i64,
        0,
        1,
        2,
        3,
        7,
        64,
        255,
        1024,
        65535,
        65536,
        4_294_967_295,
        4_294_967_296,
        i64::MAX,
        i64::MIN,
    ];
    let names = [
        "U32",
        "I32",
        "F32",
        "F64",
        "F16",
        "BF16",
        "Bool",
        "I64",
        "U64",
        "Buffer",
        "Shared",
        "Local",
        "Read",
        "ReadWrite",
        "Dynamic",
        "X",
        "Y",
        "Z",
        "GlobalId",
        "Add",
        "Div",
        "Shl",
        "Lt",
        "Sqrt",
        "Return",
        "Break",
        "Barrier",
        "",
        "x",
    ];
    match rng.u8(..7) {
        0 | 1 => Value::from(numbers[rng.usize(..numbers.len())]),
        2 => Value::from(names[rng.usize(..names.len())]),
        3 => Value::from(rng.bool()),
        4 => Value::Null,
        5 => Value::Array(Vec::new()),
        _ => Value::from(rng.f64() * 1e6 - 5e5),
    }
}

/// One random mutation of the tree.
fn mutate(v: &mut Value, rng: &mut fastrand::Rng) {
    let mut all = Vec::new();
    paths(v, &mut Vec::new(), &mut all);
    let path = all[rng.usize(..all.len())].clone();
    match rng.u8(..4) {
        0 | 1 => *at(v, &path) = random_value(rng),
        _ => {
            // Remove or double an element of the enclosing array.
            if let Some((Step::Index(i), parent)) = path.split_last() {
                if let Value::Array(items) = at(v, parent) {
                    if rng.bool() {
                        items.remove(*i);
                    } else {
                        let copy = items[*i].clone();
                        items.insert(*i, copy);
                    }
                }
            } else {
                *at(v, &path) = random_value(rng);
            }
        }
    }
}

/// Decodes `text` and, when it validates, runs every generator on it.
fn exercise(text: &str) -> bool {
    let Ok(k) = Kernel::from_json(text) else {
        return false;
    };
    let _ = IrText.generate(&k);
    for checked in [false, true] {
        let _ = cuda::generate_with(
            &k,
            &cuda::CudaOptions {
                checked,
                unroll: true,
            },
        );
    }
    let _ = msl::generate_with(&k, false);
    let _ = msl::generate_with(&k, true);
    for checked in [false, true] {
        let _ = wgsl::generate(
            &k,
            &wgsl::WgslOptions {
                group_size: [64, 1, 1],
                dynamic_shared_len: 64,
                view_offsets: checked,
                checked,
                strided: !checked && dotcompute_ir::analysis::grid_stride_eligible(&k),
                // The vector form where it applies (it refuses other kernels cleanly).
                vector: !checked,
                storage_barriers: checked,
                native_f32_atomics: false,
                loop_budget: checked.then_some(60_000),
                unroll: !checked,
            },
        );
    }
    true
}

#[test]
fn mutated_kernels_decode_or_fail_cleanly_and_generate_without_panics() {
    let seeds: Vec<Value> = seeds()
        .iter()
        .map(|k| serde_json::from_str(&k.to_json()).unwrap())
        .collect();
    // The unmutated seeds are valid and go through every generator.
    for s in &seeds {
        assert!(exercise(&s.to_string()), "a seed kernel failed to decode");
    }
    let budget = Duration::from_secs_f64(
        std::env::var("DOTCOMPUTE_FUZZ_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(10.0),
    );
    let replay: Option<u64> = std::env::var("DOTCOMPUTE_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let mut seed_rng = fastrand::Rng::new();
    let start = Instant::now();
    let (mut runs, mut accepted) = (0u64, 0u64);
    while start.elapsed() < budget {
        let seed = replay.unwrap_or_else(|| seed_rng.u64(..));
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut v = seeds[rng.usize(..seeds.len())].clone();
        for _ in 0..rng.usize(1..4) {
            mutate(&mut v, &mut rng);
        }
        let mut text = v.to_string();
        // Sometimes damage the text itself.
        match rng.u8(..8) {
            0 => text.truncate(rng.usize(..=text.len())),
            1 => {
                let mut bytes = text.into_bytes();
                let at = rng.usize(..bytes.len());
                bytes[at] ^= 1 << rng.u8(..7);
                text = String::from_utf8_lossy(&bytes).into_owned();
            }
            _ => {}
        }
        let ok = std::panic::catch_unwind(|| exercise(&text)).unwrap_or_else(|_| {
            panic!("seed {seed} (replay: DOTCOMPUTE_SEED={seed}) panicked on:\n{text}")
        });
        runs += 1;
        accepted += ok as u64;
        if replay.is_some() {
            break;
        }
    }
    eprintln!(
        "{runs} mutated kernels in {:.1} s: {accepted} validated and went through every generator, the rest were refused",
        start.elapsed().as_secs_f64()
    );
}
