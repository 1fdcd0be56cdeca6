//! The tuner: its file damaged, its winner gone, off, forced and misspelt; each in a
//! child process (settings and the tuner's memory are per process), each with every
//! result checked.

use crate::common::devices;
use dotcompute::{Device, Precision};
use dotcompute_ops::histogram::histogram_even_f32;
use dotcompute_ops::reduce::reduce;
use dotcompute_ops::ReduceOp;
use std::path::{Path, PathBuf};

/// Whether a device here runs the tuned child's operations through the tuner: every one
/// but the CPU device (whose histogram and sum compute on the host, with nothing to
/// choose; its scan and transpose tune, below). Without one (`DOTCOMPUTE_ONLY=cpu` where no C++ compiler runs
/// the MSL shim) the tuner tests skip, saying so.
fn a_device_tunes() -> bool {
    let tunes = devices()
        .iter()
        .any(|d| d.backend_kind() != dotcompute::BackendKind::Cpu);
    if !tunes {
        eprintln!("skipping: no device here tunes (the CPU device computes on the host)");
    }
    tunes
}

/// A fresh cache directory for one test.
fn fresh_dir(name: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let dir = std::env::temp_dir().join(format!("dc-tune-{name}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(dir.join("ops")).unwrap();
    dir
}

/// Runs `tune::tuned_child` with the cache in `dir` and `autotune`; its output.
fn child(dir: &Path, autotune: &str) -> String {
    child_named("tune::tuned_child", dir, autotune)
}

/// Runs the ignored test `name` with the cache in `dir` and `autotune`; its output.
fn child_named(name: &str, dir: &Path, autotune: &str) -> String {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            name,
            "--nocapture",
            "--test-threads=1",
        ])
        .env("DOTCOMPUTE_CACHE_DIR", dir)
        .env("DOTCOMPUTE_AUTOTUNE", autotune)
        .env_remove("DOTCOMPUTE_CACHE")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "child failed:\n{text}");
    text
}

/// The tuner file's entries (key → winner), each checked to name a candidate and to keep
/// every candidate's figures.
fn entries(dir: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(dir.join("ops/tune.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let map = v.as_object().expect("an object of choices");
    map.iter()
        .map(|(k, c)| {
            let winner = c["winner"].as_str().unwrap().to_string();
            let names: Vec<&str> = c["candidates"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["name"].as_str().unwrap())
                .collect();
            // Histograms: three group counts and the copies, f32 samples also two vector
            // forms, bytes six byte-value forms; reductions: three counts, 32-bit
            // elements also two vector forms; products: the vendor's and the generated.
            let vectors = ["F32", "I32", "U32"].iter().any(|t| k.contains(t));
            let candidates = if k.contains("histogram_even_u8") {
                10
            } else if k.contains("histogram_even_f32") {
                6
            } else if k.contains("histogram") {
                4
            } else if k.contains("matmul") {
                2
            } else if vectors {
                5
            } else {
                3
            };
            assert_eq!(names.len(), candidates, "{k}: every candidate is kept");
            assert!(
                names.contains(&winner.as_str()),
                "{k}: winner {winner} not among {names:?}"
            );
            (k.clone(), winner)
        })
        .collect()
}

#[test]
fn a_damaged_tuner_file_is_replaced_and_results_stay_right() {
    if !a_device_tunes() {
        return;
    }
    let dir = fresh_dir("damaged");
    std::fs::write(dir.join("ops/tune.json"), "{ \"truncated\": { \"winn").unwrap();
    let text = child(&dir, "on");
    assert!(text.contains("TUNED-CHILD-OK"), "{text}");
    let e = entries(&dir);
    assert!(!e.is_empty(), "the tuner wrote nothing");
    eprintln!("{e:#?}");
}

#[test]
fn a_cached_winner_that_is_no_longer_a_candidate_is_measured_again() {
    if !a_device_tunes() {
        return;
    }
    let dir = fresh_dir("gone");
    child(&dir, "on");
    let path = dir.join("ops/tune.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    for (_, c) in v.as_object_mut().unwrap() {
        c["winner"] = serde_json::Value::from("65536 groups");
    }
    std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
    let out = child(&dir, "on");
    assert!(out.contains("TUNED-CHILD-OK"), "{out}");
    assert!(entries(&dir).iter().all(|(_, w)| w != "65536 groups"));
}

#[test]
fn off_measures_nothing_force_measures_again_and_a_bad_value_is_an_error() {
    if !a_device_tunes() {
        return;
    }
    let dir = fresh_dir("modes");
    std::fs::remove_dir_all(dir.join("ops")).unwrap();
    child(&dir, "off");
    assert!(
        !dir.join("ops/tune.json").exists(),
        "off wrote a tuner file"
    );
    child(&dir, "force");
    let first = std::fs::read_to_string(dir.join("ops/tune.json")).unwrap();
    child(&dir, "force");
    let second = std::fs::read_to_string(dir.join("ops/tune.json")).unwrap();
    assert_ne!(first, second, "force did not measure again");
    // The child reports the error and passes; a child that fails fails here.
    let text = child(&dir, "sometimes");
    assert!(text.contains("CONFIG-ERROR-REPORTED"), "{text}");
}

#[test]
fn the_cpu_devices_large_keys_are_measured_from_cold_caches() {
    let dir = fresh_dir("cold");
    let text = child_named("tune::cold_child", &dir, "on");
    assert!(text.contains("COLD-CHILD-OK"), "{text}");
    let file = std::fs::read_to_string(dir.join("ops/tune.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&file).unwrap();
    let scans: Vec<(&String, &serde_json::Value)> = v
        .as_object()
        .expect("an object of choices")
        .iter()
        .filter(|(k, _)| k.contains("| scan |"))
        .collect();
    assert_eq!(scans.len(), 2, "{file}");
    for (key, c) in scans {
        // Size classes 2^23 and 2^21: cold from 2^22.
        let cold = key.ends_with("2^23");
        assert_eq!(c["cold_caches"].as_bool(), Some(cold), "{key}: {c}");
        // Each candidate measured, or cut by the tuning budget (cold samples on two busy
        // cores may spend it: CI-like runs did, with 2 tests at a time); the winner was
        // measured.
        let winner = c["winner"].as_str().unwrap();
        for m in c["candidates"].as_array().unwrap() {
            let measured = m["median_s"].as_f64().is_some();
            let cut = m["note"].as_str().is_some_and(|n| n.contains("budget"));
            assert!(measured || cut, "{key}: {m} neither measured nor cut");
            assert!(
                m["name"] != winner || measured,
                "{key}: winner {m} not measured"
            );
        }
    }
}

/// Run by `the_cpu_devices_large_keys_are_measured_from_cold_caches`: exclusive sums of
/// u32 on the CPU device of 2^22 + 3 (cold) and 2^20 + 1 (warm) elements, every element
/// checked.
#[test]
#[ignore = "run by the tuner tests"]
fn cold_child() {
    if std::env::var("DOTCOMPUTE_AUTOTUNE").is_err() {
        return;
    }
    let d = Device::cpu();
    let seed = 34;
    let mut rng = fastrand::Rng::with_seed(seed);
    for n in [(1 << 22) + 3, (1 << 20) + 1] {
        let x: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
        let dx = d.upload(&x).unwrap();
        let mut y = d.alloc_filled(n, 0xdead_beefu32).unwrap();
        dotcompute_ops::scan::exclusive_sum(&d, &dx, &mut y).unwrap();
        let mut running = 0u32;
        for (i, (&g, &v)) in y.to_vec().unwrap().iter().zip(&x).enumerate() {
            assert_eq!(g, running, "n {n}, element {i}, seed {seed}");
            running = running.wrapping_add(v);
        }
    }
    println!("COLD-CHILD-OK");
}

/// Run by the tests above: a histogram and an integer sum on the first non-CPU device
/// (the CPU if none), and a matrix product on the first device with a vendor product;
/// every count, the sum and every element of the product checked.
#[test]
#[ignore = "run by the tuner tests"]
fn tuned_child() {
    if std::env::var("DOTCOMPUTE_AUTOTUNE").is_err() {
        return;
    }
    let all = devices();
    let d: &Device = all
        .iter()
        .find(|d| d.backend_kind() != dotcompute::BackendKind::Cpu)
        .unwrap_or(&all[0]);
    let mut rng = fastrand::Rng::with_seed(7);
    // Above the tuner's 2^18-element threshold.
    let x: Vec<f32> = (0..300_007).map(|_| rng.f32() * 10.0).collect();
    let dx = d.upload(&x).unwrap();
    let mut h = d.alloc_filled(10, 99u32).unwrap();
    let r = histogram_even_f32(d, &dx, 10, 0.0, 10.0, &mut h);
    if std::env::var("DOTCOMPUTE_AUTOTUNE").unwrap() == "sometimes" {
        let e = r.unwrap_err();
        assert!(e.to_string().contains("DOTCOMPUTE_AUTOTUNE"), "{e}");
        println!("CONFIG-ERROR-REPORTED: {e}");
        return;
    }
    r.unwrap();
    let mut want = vec![0u32; 10];
    for &v in &x {
        want[((v * 1.0).floor() as usize).min(9)] += 1;
    }
    assert_eq!(h.to_vec().unwrap(), want, "{}", d.label());
    if std::env::var("DOTCOMPUTE_AUTOTUNE").unwrap() == "force" {
        // `force` measures once per key and process: the same call again reuses it.
        let file = dotcompute_ops::tune::file().unwrap().expect("a tuner file");
        let before = std::fs::read_to_string(&file).unwrap();
        let mut again = d.alloc_filled(10, 99u32).unwrap();
        histogram_even_f32(d, &dx, 10, 0.0, 10.0, &mut again).unwrap();
        assert_eq!(again.to_vec().unwrap(), want, "{} again", d.label());
        let after = std::fs::read_to_string(&file).unwrap();
        assert_eq!(after, before, "force measured twice in one process");
    }
    let ints: Vec<i32> = (0..300_007).map(|_| rng.i32(-1000..1000)).collect();
    let di = d.upload(&ints).unwrap();
    assert_eq!(
        reduce(d, &di, ReduceOp::Sum).unwrap(),
        ints.iter().sum::<i32>()
    );
    if let Some(d) = crate::matmul::with_vendor_product(&all) {
        // Small integers: every candidate's sums are exact.
        let (m, n, k) = (67, 65, 63);
        let a: Vec<f32> = (0..m * k).map(|_| rng.i32(-8..8) as f32).collect();
        let b: Vec<f32> = (0..k * n).map(|_| rng.i32(-8..8) as f32).collect();
        let (da, db) = (d.upload(&a).unwrap(), d.upload(&b).unwrap());
        let mut c = d.alloc_filled(m * n, f32::NAN).unwrap();
        dotcompute_ops::matmul::matmul(d, &da, &db, &mut c, m, n, k, Precision::Full).unwrap();
        let got = c.to_vec().unwrap();
        for i in 0..m {
            for j in 0..n {
                let want: f32 = (0..k).map(|l| a[i * k + l] * b[l * n + j]).sum();
                assert_eq!(got[i * n + j], want, "{} ({i}, {j})", d.label());
            }
        }
    }
    println!("TUNED-CHILD-OK on {}", d.label());
}
