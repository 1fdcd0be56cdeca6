//! Page-locked host buffers, asynchronous uploads and downloads, events, and device
//! numbers, on every backend present (CPU always; wgpu and CUDA where available, required
//! where `DOTCOMPUTE_REQUIRE` lists them).

use crate::common;

use dotcompute::{kernel, BackendKind, Device, Error, Launch, Vec4};
use std::time::Instant;

/// `data[i] = data[i] * 3 + 1`, in place.
#[kernel]
fn triple_plus_one(data: &mut [f32]) {
    let i = global_id().x;
    if i < data.len() {
        data[i] = data[i] * 3.0 + 1.0;
    }
}

fn devices() -> Vec<Device> {
    let mut list = vec![Device::cpu()];
    list.extend(common::wgpu_device());
    list.extend(common::cuda_device());
    list
}

#[test]
fn async_round_trips_through_host_buffers_check_every_element() {
    let seed = common::seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        for n in [1usize, 1000, 1 << 20 | 7] {
            // Small integers: x * 3 + 1 is exact in f32, whatever the backend fuses.
            let data: Vec<f32> = (0..n).map(|_| rng.i32(-1000..1000) as f32).collect();
            let mut staging = d.alloc_host::<f32>(n).unwrap();
            assert_eq!(
                staging.is_page_locked(),
                d.backend_kind() == BackendKind::Cuda,
                "{d:?}"
            );
            assert!(
                staging.as_slice().unwrap().iter().all(|&x| x == 0.0),
                "zeroed"
            );
            staging.as_mut_slice().unwrap().copy_from_slice(&data);
            let mut buf = d.alloc_filled(n, f32::NAN).unwrap();
            buf.upload_async(&staging).unwrap();
            triple_plus_one::launch(&d, Launch::threads(n), &mut buf).unwrap();
            // Poison the destination first: the download must overwrite every element.
            let mut back = d.alloc_host::<f32>(n).unwrap();
            back.as_mut_slice().unwrap().fill(f32::NAN);
            buf.download_async(&mut back).unwrap();
            let got = back.as_slice().unwrap();
            for i in 0..n {
                assert_eq!(
                    got[i],
                    data[i] * 3.0 + 1.0,
                    "{d:?} n={n} element {i} (seed {seed})"
                );
            }
            // The staging buffer still holds the input (the upload only read it).
            assert_eq!(staging.as_slice().unwrap(), &data[..], "{d:?} n={n}");
        }
    }
}

#[test]
fn events_complete_after_the_work_before_them() {
    for d in devices() {
        let n = 1 << 20;
        let mut buf = d.alloc_filled(n, 2.0f32).unwrap();
        for _ in 0..4 {
            triple_plus_one::launch(&d, Launch::threads(n), &mut buf).unwrap();
        }
        let event = d.record_event().unwrap();
        event.wait().unwrap();
        assert!(event.is_complete().unwrap(), "{d:?}");
        // 2 → 7 → 22 → 67 → 202.
        let mut host = d.alloc_host::<f32>(n).unwrap();
        buf.download_async(&mut host).unwrap();
        host.wait().unwrap();
        assert!(host.is_ready().unwrap());
        assert!(
            host.as_slice().unwrap().iter().all(|&x| x == 202.0),
            "{d:?}"
        );
    }
}

#[test]
fn mismatched_transfers_are_errors_and_lose_nothing() {
    for d in devices() {
        let mut buf = d.upload(&[1.0f32, 2.0, 3.0]).unwrap();
        let mut short = d.alloc_host::<f32>(2).unwrap();
        let e = buf.upload_async(&short).unwrap_err();
        assert!(matches!(e, Error::Range { .. }), "{e}");
        assert!(e.to_string().contains("3 elements"), "{e}");
        let e = buf.download_async(&mut short).unwrap_err();
        assert!(matches!(e, Error::Range { .. }), "{e}");
        // A host buffer of another device is refused.
        let other = Device::cpu();
        let mut foreign = other.alloc_host::<f32>(3).unwrap();
        let e = buf.download_async(&mut foreign).unwrap_err();
        assert!(e.to_string().contains("belongs to"), "{e}");
        assert_eq!(buf.to_vec().unwrap(), [1.0, 2.0, 3.0], "{d:?}");
        // Zero elements: nothing to do.
        let mut empty = d.alloc::<f32>(0).unwrap();
        let mut none = d.alloc_host::<f32>(0).unwrap();
        empty.upload_async(&none).unwrap();
        empty.download_async(&mut none).unwrap();
        assert!(none.as_slice().unwrap().is_empty());
    }
}

#[test]
fn cuda_transfers_from_page_locked_memory_return_before_they_finish() {
    let Some(d) = common::cuda_device() else {
        return;
    };
    let _alone = common::timed_alone();
    let n = 64 << 20; // 256 MiB
    let mut staging = d.alloc_host::<f32>(n).unwrap();
    staging.as_mut_slice().unwrap().fill(0.5);
    let mut buf = d.alloc::<f32>(n).unwrap();
    buf.upload_async(&staging).unwrap(); // warm-up
    staging.wait().unwrap();
    // Up to three tries: a test beside this one that frees device memory (cuMemFree waits
    // for the device) can hold the driver during one enqueue. Tests that do so on purpose
    // from many threads are kept away (`common::timed_alone`): with one beside it, this
    // failed 3 tries of 3 on an H200 (5.6 ms enqueues).
    let mut tries = Vec::new();
    let (enqueue, total) = loop {
        let t = Instant::now();
        buf.upload_async(&staging).unwrap();
        let enqueue = t.elapsed();
        staging.wait().unwrap();
        let total = t.elapsed();
        eprintln!("256 MiB upload: enqueue {enqueue:?}, done after {total:?}");
        tries.push((enqueue, total));
        if enqueue * 4 < total || tries.len() == 3 {
            break (enqueue, total);
        }
    };
    assert!(
        enqueue * 4 < total,
        "upload_async blocked in each of 3 tries (enqueue, total): {tries:?}"
    );
    let gbs = (n * 4) as f64 / total.as_secs_f64() / 1e9;
    assert!(gbs > 5.0, "page-locked upload at only {gbs:.1} GB/s");
    assert!(buf.to_vec().unwrap().iter().all(|&x| x == 0.5));
}

#[test]
fn devices_by_number() {
    assert!(Device::by_name("cpu:0").is_ok());
    let e = Device::with_backend_ordinal(BackendKind::Cpu, 1).unwrap_err();
    assert!(e.to_string().contains("there is no device 1"), "{e}");
    // The backend is known; the number is what is wrong, and the message says so.
    let e = Device::by_name("cpu:x").unwrap_err();
    assert!(matches!(e, Error::Range { .. }), "{e:?}");
    assert!(
        e.to_string().contains("device number `x`") && !e.to_string().contains("unknown backend"),
        "{e}"
    );
    let e = Device::by_name("cpux:0").unwrap_err();
    assert!(matches!(e, Error::UnknownBackend(_)), "{e}");
    // A device number past the end is an error, never a panic, with or without a driver.
    let e = Device::by_name("cuda:4096").unwrap_err();
    assert!(matches!(e, Error::BackendUnavailable { .. }), "{e}");
    let e = Device::by_name("wgpu:4096").unwrap_err();
    assert!(matches!(e, Error::BackendUnavailable { .. }), "{e}");
    if let Some(d) = common::cuda_device() {
        let count = dotcompute::backends()
            .into_iter()
            .find(|b| b.kind == BackendKind::Cuda)
            .and_then(|b| b.devices.ok())
            .map_or(0, |v| v.len());
        eprintln!("{count} CUDA device(s)");
        // Every device present opens and runs a kernel.
        for i in 0..count {
            let dev = Device::with_backend_ordinal(BackendKind::Cuda, i).unwrap();
            assert_eq!(
                dev.info().name,
                Device::by_name(&format!("cuda:{i}")).unwrap().info().name
            );
            let mut b = dev.alloc_filled(1000, 1.0f32).unwrap();
            triple_plus_one::launch(&dev, Launch::threads(1000), &mut b).unwrap();
            assert!(b.to_vec().unwrap().iter().all(|&x| x == 4.0), "cuda:{i}");
        }
        let e = Device::with_backend_ordinal(BackendKind::Cuda, count).unwrap_err();
        assert!(e.to_string().contains("there is no device"), "{e}");
        drop(d);
    }
}

#[test]
fn sixteen_bit_floats_are_storage_types_on_every_backend() {
    use dotcompute::{bf16, f16};
    let seed = common::seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        // Odd lengths: not a whole number of 4-byte words.
        for n in [1usize, 3, 1001, (1 << 20) + 1] {
            let h: Vec<f16> = (0..n).map(|_| f16::from_bits(rng.u16(..0x7c00))).collect();
            let mut buf = d.alloc_filled(n, f16::NAN).unwrap();
            buf.write(&h).unwrap();
            assert_eq!(buf.to_vec().unwrap(), h, "{d:?} f16 n={n} (seed {seed})");
            let mut copy = d.alloc_filled(n, f16::NAN).unwrap();
            copy.copy_from(&buf).unwrap();
            assert_eq!(copy.to_vec().unwrap(), h, "{d:?} f16 copy n={n}");
            copy.fill(f16::from_f32(-2.5)).unwrap();
            assert!(copy
                .to_vec()
                .unwrap()
                .iter()
                .all(|&x| x == f16::from_f32(-2.5)));
            let b: Vec<bf16> = (0..n).map(|_| bf16::from_bits(rng.u16(..0x7f80))).collect();
            let mut staging = d.alloc_host::<bf16>(n).unwrap();
            staging.as_mut_slice().unwrap().copy_from_slice(&b);
            let mut bbuf = d.alloc_filled(n, bf16::NAN).unwrap();
            bbuf.upload_async(&staging).unwrap();
            let mut back = d.alloc_host::<bf16>(n).unwrap();
            bbuf.download_async(&mut back).unwrap();
            assert_eq!(
                back.as_slice().unwrap(),
                &b[..],
                "{d:?} bf16 n={n} (seed {seed})"
            );
        }
        if d.backend_kind() != BackendKind::Cuda {
            let a = d.upload(&[f16::ONE; 4]).unwrap();
            let mut c = d.alloc::<f16>(4).unwrap();
            let e = d.matmul(&a, &a, &mut c, 2, 2, 2).unwrap_err();
            assert!(matches!(e, Error::Unsupported { .. }), "{d:?}: {e}");
            assert!(e.to_string().contains("cuBLAS"), "{e}");
        }
    }
}

/// Copies a byte buffer's words (`Buffer::<u8>::as_words`).
#[kernel]
fn copy_words(words: &[u32], out: &mut [u32]) {
    let i = global_id().x;
    if i < words.len() {
        out[i] = words[i];
    }
}

/// Copies a byte buffer's quads of words (`Buffer::<u8>::as_word_quads`) as words.
#[kernel]
fn copy_quads(quads: &[Vec4<u32>], out: &mut [u32]) {
    let i = global_id().x;
    if i < quads.len() {
        let q = quads[i];
        out[4 * i] = q.x;
        out[4 * i + 1] = q.y;
        out[4 * i + 2] = q.z;
        out[4 * i + 3] = q.w;
    }
}

#[test]
fn bytes_are_a_storage_type_and_kernels_read_them_as_words() {
    let seed = common::seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        for n in [1usize, 2, 3, 5, 15, 16, 17, 1001, (1 << 20) + 3] {
            // The pool's block was last a whole-word buffer of 0xff: the new buffer's
            // padding must still read as zero.
            drop(d.alloc_filled(n.next_multiple_of(4), 0xffu8).unwrap());
            let data: Vec<u8> = (0..n).map(|_| rng.u8(..)).collect();
            let mut buf = d.alloc_filled(n, 0xabu8).unwrap();
            assert!(
                buf.to_vec().unwrap().iter().all(|&b| b == 0xab),
                "{d:?} fill n={n}"
            );
            buf.write(&data).unwrap();
            let mut want = data.clone();
            assert_eq!(buf.to_vec().unwrap(), want, "{d:?} n={n} (seed {seed})");
            if n >= 3 {
                // Odd offsets: writes and fills inside words, leaving their neighbours.
                let part: Vec<u8> = (0..n - 2).map(|_| rng.u8(..)).collect();
                buf.slice_mut(1..n - 1).unwrap().write(&part).unwrap();
                want[1..n - 1].copy_from_slice(&part);
                assert_eq!(buf.to_vec().unwrap(), want, "{d:?} view write n={n}");
                buf.slice_mut(2..n).unwrap().fill(7).unwrap();
                want[2..].fill(7);
                assert_eq!(buf.to_vec().unwrap(), want, "{d:?} view fill n={n}");
            }
            let mut copy = d.alloc_filled(n, 0x5au8).unwrap();
            copy.copy_from(&buf).unwrap();
            assert_eq!(copy.to_vec().unwrap(), want, "{d:?} copy n={n}");
            // Kernels read the bytes as little-endian words, the padding as zero.
            let words = n.div_ceil(4);
            let mut out = d.alloc_filled(words, 0xdead_beefu32).unwrap();
            copy_words::launch(&d, Launch::threads(words), &copy.as_words(), &mut out).unwrap();
            let mut padded = want.clone();
            padded.resize(words * 4, 0);
            let expected: Vec<u32> = padded
                .chunks(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            let got = out.to_vec().unwrap();
            for i in 0..words {
                assert_eq!(got[i], expected[i], "{d:?} n={n} word {i} (seed {seed})");
            }
            // And as quads: the whole 16-byte runs only, none below 16 bytes.
            let quads = n / 16;
            assert_eq!(copy.as_word_quads().is_some(), quads > 0, "{d:?} n={n}");
            if let Some(q) = copy.as_word_quads() {
                let mut out = d.alloc_filled(4 * quads, 0xdead_beefu32).unwrap();
                copy_quads::launch(&d, Launch::threads(quads), &q, &mut out).unwrap();
                assert_eq!(
                    out.to_vec().unwrap(),
                    expected[..4 * quads],
                    "{d:?} n={n} quads (seed {seed})"
                );
            }
        }
    }
}

/// Vector `i` of `v` becomes its lanes reversed plus vector `i` of `add`, in place.
#[kernel]
fn reverse_and_add_quads(v: &mut [Vec4<u32>], add: &[Vec4<u32>]) {
    let i = global_id().x;
    if i < v.len() {
        let q = v[i];
        let a = add[i];
        v[i] = Vec4::new(q.w + a.x, q.z + a.y, q.y + a.z, q.x + a.w);
    }
}

/// `Buffer::as_vec4s_mut`: kernels read and write whole runs of four, 16 bytes an
/// access; the elements after the last whole run keep their values; other element types
/// and buffers under four elements have no vector view.
#[test]
fn vector_views_write_whole_runs_of_four_and_leave_the_rest() {
    let seed = common::seed();
    for d in devices() {
        let mut rng = fastrand::Rng::with_seed(seed);
        for n in [4usize, 5, 7, 8, 1023, (1 << 20) + 3] {
            let data: Vec<u32> = (0..n).map(|_| rng.u32(..u32::MAX / 2)).collect();
            let add: Vec<u32> = (0..n).map(|_| rng.u32(..u32::MAX / 2)).collect();
            let mut x = d.upload(&data).unwrap();
            let a = d.upload(&add).unwrap();
            let quads = n / 4;
            let mut v = x.as_vec4s_mut().expect("at least four u32");
            let av = a.as_vec4s().expect("at least four u32");
            reverse_and_add_quads::launch(&d, Launch::threads(quads), &mut v, &av).unwrap();
            let got = x.to_vec().unwrap();
            for i in 0..n {
                let want = match i < 4 * quads {
                    true => data[i - i % 4 + 3 - i % 4] + add[i],
                    false => data[i],
                };
                assert_eq!(got[i], want, "{d:?} n={n} element {i} (seed {seed})");
            }
        }
        assert!(d.alloc::<u32>(3).unwrap().as_vec4s_mut().is_none());
        assert!(d.alloc::<f32>(4).unwrap().as_vec4s_mut().is_some());
        assert!(d.alloc::<u8>(64).unwrap().as_vec4s_mut().is_none());
        if d.info().caps.f64 {
            assert!(d.alloc::<f64>(8).unwrap().as_vec4s_mut().is_none());
        }
    }
}

/// `+1` on every element (writes the buffer a later host slice reads).
#[kernel]
fn bump(x: &mut [u32]) {
    let i = global_id().x;
    if i < x.len() {
        x[i] += 1;
    }
}

#[test]
fn host_slices_are_the_cpu_buffers_memory_after_earlier_work_and_none_elsewhere() {
    use dotcompute::Stream;
    let seed = common::seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    for d in common::devices() {
        let n = (1 << 20) + 3;
        let data: Vec<u32> = (0..n).map(|_| rng.u32(..u32::MAX - 1)).collect();
        let mut b = d.upload(&data).unwrap();
        // A kernel on another stream writes first: the slice must see its result.
        let s: Stream = d.stream().unwrap();
        bump::launch(&s, Launch::threads(n), &mut b).unwrap();
        match b.host_slice().unwrap() {
            Some(x) => {
                assert_eq!(d.backend_kind(), BackendKind::Cpu, "{}", d.label());
                let wrong = (0..n).filter(|&i| x[i] != data[i] + 1).count();
                assert_eq!(wrong, 0, "{wrong} stale elements (seed {seed})");
            }
            None => {
                // GPU memory is not the host's: the same data through a copy.
                assert_ne!(d.backend_kind(), BackendKind::Cpu);
                assert!(b.host_slice_mut().unwrap().is_none());
                continue;
            }
        }
        // Written in place, seen by the device (a kernel, then a copy back).
        let y = b.host_slice_mut().unwrap().unwrap();
        y[0] = 7;
        y[n - 1] = 9;
        bump::launch(&d, Launch::threads(n), &mut b).unwrap();
        let back = b.to_vec().unwrap();
        assert_eq!((back[0], back[n - 1], back[1]), (8, 10, data[1] + 2));
        // Empty buffers give empty slices.
        let mut e = d.alloc::<f32>(0).unwrap();
        assert_eq!(e.host_slice().unwrap().map(<[f32]>::len), Some(0));
        assert_eq!(e.host_slice_mut().unwrap().map(|s| s.len()), Some(0));
    }
}
