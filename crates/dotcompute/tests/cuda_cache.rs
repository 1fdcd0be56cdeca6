//! The CUDA compile cache across backends (each a fresh context, as a new process would
//! have): NVRTC once, then the disk; damaged entries are detected and rebuilt. Skips
//! without a CUDA driver unless DOTCOMPUTE_REQUIRE lists `cuda`.

#[path = "it/common.rs"]
mod common;

use dotcompute::prelude::*;
use dotcompute_cuda::{CacheOutcome, CudaBackend};

#[kernel]
fn cached_scale(x: &mut [f32], s: f32) {
    let i = global_id().x;
    if i < x.len() {
        x[i] *= s;
    }
}

#[test]
fn compiles_once_then_hits_memory_then_disk_and_rebuilds_damaged_entries() {
    let dir = std::env::temp_dir().join(format!("dc-cuda-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // Set before anything reads the settings (they are read once per process); this
    // binary holds this one test, so no other thread reads them first.
    std::env::set_var("DOTCOMPUTE_CACHE_DIR", &dir);
    if common::cuda_device().is_none() {
        return;
    }
    let ir = cached_scale::KERNEL.program().unwrap();

    let first = CudaBackend::new().unwrap();
    assert_eq!(first.prepare_program(ir).unwrap(), CacheOutcome::Compiled);
    assert_eq!(first.prepare_program(ir).unwrap(), CacheOutcome::Memory);
    let entries: Vec<_> = std::fs::read_dir(dir.join("cuda"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = entries[0].clone();
    assert_eq!(entry.extension().unwrap(), "cubin");
    drop(first);

    let second = CudaBackend::new().unwrap();
    assert_eq!(second.prepare_program(ir).unwrap(), CacheOutcome::Disk);
    drop(second);

    // Truncated, bit-flipped and garbage entries are each detected and rebuilt.
    let good = std::fs::read(&entry).unwrap();
    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x10;
    for damaged in [
        good[..good.len() / 3].to_vec(),
        flipped,
        b"not a cubin".to_vec(),
    ] {
        std::fs::write(&entry, &damaged).unwrap();
        let b = CudaBackend::new().unwrap();
        assert_eq!(b.prepare_program(ir).unwrap(), CacheOutcome::Compiled);
        assert_eq!(b.compile_stats().corrupt_entries, 1);
        assert_eq!(
            std::fs::read(&entry).unwrap(),
            good,
            "the entry is rewritten"
        );
    }

    // A rebuilt entry gives correct results through the facade, in a device that reads it.
    let d = Device::with_backend(dotcompute::BackendKind::Cuda).unwrap();
    let mut x = d.upload(&vec![1.5f32; 1000]).unwrap();
    cached_scale::launch(&d, Launch::threads(1000), &mut x, 2.0).unwrap();
    assert!(x.to_vec().unwrap().iter().all(|&v| v == 3.0));
    std::env::remove_var("DOTCOMPUTE_CACHE_DIR");
    let _ = std::fs::remove_dir_all(&dir);
}
