//! The profiling hook records one timing per launch and copy while on, none while off.

use crate::common;

use dotcompute::prelude::*;

#[kernel]
fn scale(x: &mut [f32], s: f32) {
    let i = global_id().x;
    if i < x.len() {
        x[i] *= s;
    }
}

fn check(d: &Device) {
    let n = 100_000;
    let mut x = d.upload(&vec![1.0f32; n]).unwrap();
    let mut y = d.alloc::<f32>(n).unwrap();
    scale::launch(d, Launch::threads(n), &mut x, 2.0).unwrap();
    assert!(d.take_timings().is_empty(), "profiling is off by default");
    d.set_profiling(true);
    scale::launch(d, Launch::threads(n), &mut x, 2.0).unwrap();
    y.copy_from(&x).unwrap();
    d.set_profiling(false);
    scale::launch(d, Launch::threads(n), &mut x, 2.0).unwrap();
    let t = d.take_timings();
    let labels: Vec<&str> = t.iter().map(|t| t.label.as_str()).collect();
    assert_eq!(labels, ["scale", "copy"], "{t:?}");
    assert!(t.iter().all(|t| t.duration.as_nanos() > 0), "{t:?}");
    if d.info().caps.timestamps {
        assert!(
            t[0].device_time,
            "the launch should be timed on the device: {t:?}"
        );
    }
    assert!(y.to_vec().unwrap().iter().all(|&v| v == 4.0));
    assert!(x.to_vec().unwrap().iter().all(|&v| v == 8.0));
}

#[test]
fn cpu_records_wall_time() {
    check(&Device::cpu());
}

#[test]
fn wgpu_records_device_time() {
    if let Some(d) = common::wgpu_device() {
        check(&d);
    }
}

#[test]
fn cuda_records_device_time() {
    if let Some(d) = common::cuda_device() {
        check(&d);
        let t = {
            d.set_profiling(true);
            let mut x = d.upload(&[1.0f32; 10]).unwrap();
            scale::launch(&d, Launch::threads(10), &mut x, 2.0).unwrap();
            d.set_profiling(false);
            d.take_timings()
        };
        assert!(t[0].device_time, "{t:?}");
    }
}

/// Issue 27, item 7: a trace that cannot be written is kept, so a retry to a good path
/// writes every event (it wrote 0 before).
#[test]
fn a_failed_trace_write_keeps_the_timings_for_the_next_one() {
    for d in common::devices() {
        d.set_profiling(true);
        let mut x = d.upload(&[1.0f32; 1000]).unwrap();
        for _ in 0..3 {
            scale::launch(&d, Launch::threads(1000), &mut x, 2.0).unwrap();
        }
        d.synchronize().unwrap();
        let bad = std::path::Path::new("/nonexistent-dir/for/sure/trace.json");
        let e = d.write_trace(bad).unwrap_err();
        assert!(e.to_string().contains("nonexistent-dir"), "{e}");
        let good = std::env::temp_dir().join(format!("dc-trace-{}.json", d.id()));
        let written = d.write_trace(&good).unwrap();
        assert!(
            written >= 3,
            "{}: {written} events after a failed write",
            d.label()
        );
        let text = std::fs::read_to_string(&good).unwrap();
        assert_eq!(
            text.matches("\"scale\"").count(),
            3,
            "{}: {text}",
            d.label()
        );
        // Taken once: the next trace is empty.
        assert_eq!(d.write_trace(&good).unwrap(), 0);
        let _ = std::fs::remove_file(&good);
        d.set_profiling(false);
    }
}
