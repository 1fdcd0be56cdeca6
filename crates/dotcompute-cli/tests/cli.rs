//! The CLI on bad input (issue 27, item 7): a clear one-line error and a non-zero exit,
//! never an abort, a backtrace or a silent success.

use std::process::Command;

/// The CLI built with this test, or (on the GPU machine, where the build's paths do not
/// exist) the one beside this test binary.
fn exe() -> std::path::PathBuf {
    let built = std::path::PathBuf::from(env!("CARGO_BIN_EXE_dotcompute"));
    if built.exists() {
        return built;
    }
    std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .join("dotcompute")
}

fn dotcompute(args: &[&str]) -> (i32, String) {
    let out = Command::new(exe())
        .args(args)
        .env("DOTCOMPUTE_BACKEND", "cpu")
        .output()
        .expect("the CLI runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn sizes_too_large_for_the_device_or_the_host_are_refused_before_allocating() {
    for (n, says) in [
        ("4000000000000", "more elements than a kernel can index"),
        ("0", "at least 1"),
    ] {
        let (code, text) = dotcompute(&["bench", "checked", "--backend", "cpu", "--n", n]);
        assert_ne!(code, 0, "--n {n}: {text}");
        assert!(text.contains(says), "--n {n}: {text}");
        assert!(
            !text.contains("panicked") && !text.contains("memory allocation"),
            "{text}"
        );
        assert_eq!(
            text.trim().lines().count(),
            1,
            "--n {n}: one line, got {text}"
        );
    }
}

#[test]
fn bench_report_without_a_file_is_an_error() {
    let (code, text) = dotcompute(&["bench-report"]);
    assert_ne!(code, 0, "{text}");
    assert!(text.contains("FILES"), "{text}");
    let (code, text) = dotcompute(&["bench-report", "/nonexistent/run.json"]);
    assert_ne!(code, 0, "{text}");
    assert!(text.contains("/nonexistent/run.json"), "{text}");
}

/// `dotcompute settings`: every variable with its value; a value dotcompute would refuse
/// is named with the reason and the exit is non-zero (issue 29's one table).
#[test]
fn settings_lists_every_variable_and_refuses_bad_values() {
    let (code, text) = dotcompute(&["settings"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("DOTCOMPUTE_CPU_BARRIERS") && text.contains("docs/configuration.md"));
    let out = Command::new(exe())
        .args(["settings"])
        .env("DOTCOMPUTE_CACHE", "disabled")
        .env("DOTCOMPUTE_WGPU_STRIDED", "0")
        .output()
        .expect("the CLI runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let line = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .unwrap()
            .to_string()
    };
    assert!(line("DOTCOMPUTE_CACHE ").contains("REFUSED"), "{text}");
    assert!(line("DOTCOMPUTE_WGPU_STRIDED").ends_with("ok"), "{text}");
    let (code, table) = dotcompute(&["settings", "--markdown"]);
    assert_eq!(code, 0);
    assert!(table.starts_with("| variable |"), "{table}");
}

/// `emit all` writes every kernel for every target, skipping (with the device's reason) the
/// tensor-core products where the target has none; it used to stop with an error at the
/// first of them for WGSL.
#[test]
fn emit_all_writes_every_target_and_skips_what_a_target_cannot_run() {
    let dir = std::env::temp_dir().join(format!("dc-emit-all-{}", std::process::id()));
    let mut counts = Vec::new();
    for (target, extension) in [
        ("ir", "ir"),
        ("cuda", "cu"),
        ("wgsl", "wgsl"),
        ("msl", "metal"),
    ] {
        let out = dir.join(target);
        let (code, text) = dotcompute(&[
            "emit",
            "all",
            "--target",
            target,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "emit all --target {target}: {text}");
        let written = std::fs::read_dir(&out)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .and_then(|x| x.to_str())
                    == Some(extension)
            })
            .count();
        let skipped = text.matches("skipped `").count();
        if matches!(target, "wgsl" | "msl") {
            assert!(text.contains("tensor-core"), "{target}: {text}");
        }
        counts.push((target, written, skipped));
    }
    let _ = std::fs::remove_dir_all(&dir);
    let all = counts[0].1;
    assert!(all > 10, "{counts:?}");
    for (target, written, skipped) in counts {
        assert_eq!(
            written + skipped,
            all,
            "{target}: every kernel written or skipped"
        );
    }
}
