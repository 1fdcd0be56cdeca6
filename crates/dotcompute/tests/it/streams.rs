//! Streams and events on every backend present: producer / consumer across streams
//! (joined by an event, and by the automatic ordering of buffer uses), a buffer dropped
//! while another stream still reads it, misuse, and the trace file.

use crate::common;
use dotcompute::prelude::*;
use dotcompute::{BackendKind, Error};

const POISON: u32 = 0xDEAD_BEEF;

#[kernel]
fn produce(out: &mut [u32], seed: u32, iters: u32) {
    let i = global_id().x;
    if i < out.len() {
        let mut x = seed ^ i;
        for _k in 0..iters {
            x = x * 1664525u32 + 1013904223u32;
        }
        out[i] = x;
    }
}

#[kernel]
fn consume(src: &[u32], out: &mut [u32]) {
    let i = global_id().x;
    if i < out.len() {
        out[i] = src[i] ^ 0x5555_5555u32;
    }
}

/// What `produce` writes at `i`.
fn produced(seed: u32, iters: u32, i: u32) -> u32 {
    let mut x = seed ^ i;
    for _ in 0..iters {
        x = x.wrapping_mul(1664525).wrapping_add(1013904223);
    }
    x
}

/// Enough work per thread that, on a GPU, a consumer not ordered after the producer
/// would see the poison.
fn iters_for(d: &Device) -> u32 {
    if d.backend_kind() == BackendKind::Cuda {
        2000
    } else {
        8
    }
}

fn check(what: &str, seed: u32, got: &[u32], want: impl Fn(u32) -> u32) {
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want(i as u32)) {
        panic!(
            "{what}: element {i} of {} is {:#x}, expected {:#x} (seed {seed})",
            got.len(),
            got[i],
            want(i as u32)
        );
    }
}

#[test]
fn a_consumer_on_another_stream_sees_the_producers_results() {
    let seed = common::seed() as u32;
    for d in common::devices() {
        let iters = iters_for(&d);
        let (s1, s2) = (d.stream().unwrap(), d.stream().unwrap());
        for n in [1usize, 1000, (1 << 20) + 3, 16 << 20] {
            for with_event in [true, false] {
                let mut mid = d.alloc_filled(n, POISON).unwrap();
                let mut out = d.alloc_filled(n, POISON).unwrap();
                produce::launch(&s1, Launch::threads(n), &mut mid, seed, iters).unwrap();
                if with_event {
                    let e = s1.record_event().unwrap();
                    s2.wait_event(&e).unwrap();
                }
                consume::launch(&s2, Launch::threads(n), &mid, &mut out).unwrap();
                let got = s2.read(&out).unwrap();
                check(
                    &format!("{} n={n} event={with_event}", d.label()),
                    seed,
                    &got,
                    |i| produced(seed, iters, i) ^ 0x5555_5555,
                );
            }
        }
    }
}

/// Reads `src[i]` only after a long loop: the index depends on the loop's result
/// (`zero` is 0 at run time, which no compiler can know), so the load cannot be hoisted
/// to the kernel's start, and a write to `src` racing with the kernel changes the result.
#[kernel]
fn slow_sum(src: &[u32], out: &mut [u32], iters: u32, zero: u32) {
    let i = global_id().x;
    if i < out.len() {
        let mut acc = i;
        for _k in 0..iters {
            acc = acc * 1664525u32 + 1013904223u32;
        }
        out[i] = acc + src[i ^ (acc & zero)];
    }
}

fn slow_sum_ref(i: u32, v: u32, iters: u32) -> u32 {
    let mut acc = i;
    for _ in 0..iters {
        acc = acc.wrapping_mul(1664525).wrapping_add(1013904223);
    }
    acc.wrapping_add(v)
}

#[test]
fn a_buffer_dropped_while_another_stream_reads_it_keeps_its_data_until_the_read_is_done() {
    let seed = common::seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    for d in common::devices() {
        let n = 1 << 20;
        let iters = iters_for(&d) * 4;
        let data: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
        let s2 = d.stream().unwrap();
        let input = d.upload(&data).unwrap();
        let mut result = d.alloc_filled(n, POISON).unwrap();
        slow_sum::launch(&s2, Launch::threads(n), &input, &mut result, iters, 0).unwrap();
        let hits = d.memory_stats().pool_hits;
        drop(input);
        // The same size class: the pool hands the dropped block out again at once, and a
        // write on the default stream must wait for the kernel still reading it on s2.
        let mut reused = d.alloc::<u32>(n).unwrap();
        assert_eq!(
            d.memory_stats().pool_hits,
            hits + 1,
            "{}: the block was not reused, so the test proves nothing",
            d.label()
        );
        reused.fill(POISON).unwrap();
        let got = result.to_vec().unwrap();
        check(&d.label(), seed as u32, &got, |i| {
            slow_sum_ref(i, data[i as usize], iters)
        });
        assert_eq!(reused.to_vec().unwrap()[n - 1], POISON);
    }
}

#[test]
fn the_host_reads_a_buffer_written_on_another_stream_after_the_write() {
    let seed = common::seed() as u32;
    for d in common::devices() {
        let iters = iters_for(&d);
        let n = (1 << 20) + 1;
        let s = d.stream().unwrap();
        let mut x = d.alloc_filled(n, POISON).unwrap();
        produce::launch(&s, Launch::threads(n), &mut x, seed, iters).unwrap();
        // Default stream read, no event: ordered by the buffer's use tracking.
        let got = x.to_vec().unwrap();
        check(&d.label(), seed, &got, |i| produced(seed, iters, i));
        // Host write on the default stream, then a kernel reading it on `s`.
        let data: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(7)).collect();
        x.write(&data).unwrap();
        let mut out = d.alloc_filled(n, POISON).unwrap();
        consume::launch(&s, Launch::threads(n), &x, &mut out).unwrap();
        check(&d.label(), seed, &out.to_vec().unwrap(), |i| {
            i.wrapping_mul(7) ^ 0x5555_5555
        });
    }
}

#[test]
fn events_complete_and_streams_synchronise() {
    for d in common::devices() {
        let s = d.stream().unwrap();
        let mut x = d.alloc_filled(1 << 16, 1u32).unwrap();
        produce::launch(&s, Launch::threads(1 << 16), &mut x, 1, 10).unwrap();
        let e = s.record_event().unwrap();
        e.wait().unwrap();
        assert!(e.is_complete().unwrap());
        assert_eq!(e.stream_id(), s.id());
        s.synchronize().unwrap();
        d.synchronize().unwrap();
        assert_ne!(s.id(), dotcompute::StreamId::DEFAULT);
    }
}

#[test]
fn misuse_is_an_error_and_the_device_keeps_working() {
    let other = Device::cpu();
    for d in common::devices() {
        let s = d.stream().unwrap();
        // Waiting on an event of another device.
        let foreign = other.record_event().unwrap();
        let e = s.wait_event(&foreign).unwrap_err();
        assert!(matches!(e, Error::ForeignObject { .. }), "{e}");
        assert!(e.to_string().contains(&other.label()), "{e}");
        // A buffer of another device through a stream.
        let b = other.upload(&[1u32, 2, 3]).unwrap();
        let e = s.read(&b).unwrap_err();
        assert!(matches!(e, Error::ForeignObject { .. }), "{e}");
        let mut b = other.upload(&[1u32, 2, 3]).unwrap();
        assert!(s.fill(&mut b, 0).is_err());
        // A kernel argument of another device on a stream.
        let mut out = d.alloc_filled(3, 0u32).unwrap();
        let e = consume::launch(&s, Launch::threads(3), &b, &mut out).unwrap_err();
        assert!(matches!(e, Error::WrongDevice { .. }), "{e}");
        // Too many streams: 63 more than the default one fit; the next is an error.
        drop(s);
        let streams: Vec<_> = (0..63).map(|_| d.stream().unwrap()).collect();
        let e = d.stream().unwrap_err();
        assert!(matches!(e, Error::Exhausted { .. }), "{e}");
        drop(streams);
        // Still usable.
        let s = d.stream().unwrap();
        let x = d.upload(&[5u32, 6, 7]).unwrap();
        consume::launch(&s, Launch::threads(3), &x, &mut out).unwrap();
        assert_eq!(
            s.read(&out).unwrap(),
            vec![5 ^ 0x5555_5555, 6 ^ 0x5555_5555, 7 ^ 0x5555_5555]
        );
    }
}

#[test]
fn the_trace_file_has_one_track_per_stream_and_one_event_per_operation() {
    for d in common::devices() {
        let (s1, s2) = (d.stream().unwrap(), d.stream().unwrap());
        let mut a = d.alloc_filled(4096, 0u32).unwrap();
        let mut b = d.alloc_filled(4096, 0u32).unwrap();
        d.synchronize().unwrap();
        d.set_profiling(true);
        produce::launch(&s1, Launch::threads(4096), &mut a, 1, 4).unwrap();
        produce::launch(&s2, Launch::threads(4096), &mut b, 2, 4).unwrap();
        d.synchronize().unwrap();
        let path =
            std::env::temp_dir().join(format!("dc-trace-{}-{}.json", std::process::id(), d.id()));
        let written = d.write_trace(&path).unwrap();
        d.set_profiling(false);
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        let events = json["traceEvents"].as_array().expect("traceEvents array");
        let ops: Vec<_> = events.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(ops.len(), written, "{}", d.label());
        assert!(written >= 2, "{}: {written} events", d.label());
        for e in &ops {
            for field in ["name", "pid", "tid", "ts", "dur"] {
                assert!(
                    !e[field].is_null(),
                    "{}: event without {field}: {e}",
                    d.label()
                );
            }
            assert!(e["dur"].as_f64().unwrap() >= 0.0);
        }
        let tids: std::collections::BTreeSet<u64> =
            ops.iter().map(|e| e["tid"].as_u64().unwrap()).collect();
        for s in [&s1, &s2] {
            assert!(
                tids.contains(&(s.id().0 as u64)),
                "{}: no track for stream {}",
                d.label(),
                s.id().0
            );
            assert!(
                events
                    .iter()
                    .any(|e| e["ph"] == "M" && e["tid"].as_u64() == Some(s.id().0 as u64)),
                "{}: stream {} has no name",
                d.label(),
                s.id().0
            );
        }
        assert!(ops
            .iter()
            .any(|e| e["name"] == "produce" && e["tid"].as_u64() == Some(s1.id().0 as u64)));
    }
}
