//! Core v2 figures on any backend (`--backend`): streams, graphs, stream acquisition and
//! pooled allocation with streams, each against a reference measured in the same run.
//!
//! * `streams`: 4 independent small kernels on 4 streams of one device, against the same
//!   4 one after another on the default stream (and on 4 devices, the old way to get
//!   concurrency). `--trace FILE` writes a Perfetto timeline of one round of each.
//! * `graph` (measured here, reported by the suite): a 100-node chain as one graph
//!   replay, against the same 100 launches one by one; the figure is the cost per node.
//! * `stream-acquire`: opening and dropping a stream, against a pooled alloc + free.
//! * `alloc`: pooled alloc + free of 1 MiB while another stream is open and in use.

use crate::suite::Stats;
use dotcompute::prelude::*;
use dotcompute::{BackendKind, Graph, GraphArg};
use std::time::{Duration, Instant};

#[kernel]
fn busy(x: &mut [u32], iters: u32) {
    let i = global_id().x;
    if i < x.len() {
        let mut v = x[i];
        for _k in 0..iters {
            v = v * 1664525u32 + 1013904223u32;
        }
        x[i] = v;
    }
}

#[kernel]
fn chain_step(x: &mut [u32], a: u32) {
    let i = global_id().x;
    if i < x.len() {
        x[i] = x[i] * a + i;
    }
}

fn busy_ref(v: u32, iters: u32) -> u32 {
    (0..iters).fold(v, |v, _| v.wrapping_mul(1664525).wrapping_add(1013904223))
}

type Res<T> = Result<T, String>;

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Times `f` `reps` times after 3 warm-ups; returns the median.
fn time(reps: usize, f: impl FnMut() -> Res<()>) -> Res<Duration> {
    Ok(median_of(&time_stats(reps, f)?))
}

fn median_of(s: &Stats) -> Duration {
    Duration::from_secs_f64(s.median_s)
}

/// Times `f` `reps` times after 3 warm-ups (host wall time).
fn time_stats(reps: usize, f: impl FnMut() -> Res<()>) -> Res<Stats> {
    wall_stats(3, reps, f)
}

/// Times `f` `reps` times after `warmup` runs, each on the host from its start to its
/// return.
pub(crate) fn wall_stats(warmup: usize, reps: usize, mut f: impl FnMut() -> Res<()>) -> Res<Stats> {
    for _ in 0..warmup {
        f()?;
    }
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        f()?;
        v.push(t.elapsed());
    }
    Ok(Stats::from_times(v, false))
}

pub fn run(name: &str, backend: &str, reps: usize, trace: Option<&str>) -> Res<()> {
    let device = Device::by_name(backend).map_err(s)?;
    println!("device: {}", device.label());
    match name {
        "streams" => streams(&device, reps, trace),
        "stream-acquire" => stream_acquire(&device),
        "alloc" => alloc(&device),
        other => Err(format!("unknown benchmark `{other}`")),
    }
}

/// Threads per small kernel and loop trips: a few groups, tens of microseconds on a GPU.
const SMALL_THREADS: usize = 2048;

/// Wall times of one round of 4 small kernels: one after another on the default stream,
/// on 4 streams of one device, and on 4 devices; every buffer verified.
pub struct StreamTimes {
    pub kernels: usize,
    pub threads: usize,
    pub iters: u32,
    pub serial: Stats,
    pub streams: Stats,
    pub devices: Stats,
}

fn streams(device: &Device, reps: usize, trace: Option<&str>) -> Res<()> {
    let StreamTimes {
        threads: n,
        iters,
        serial: t_serial,
        streams: t_streams,
        devices: t_devices,
        ..
    } = measure_streams(device, reps, trace)?;
    let (t_serial, t_streams, t_devices) = (
        median_of(&t_serial),
        median_of(&t_streams),
        median_of(&t_devices),
    );
    println!(
        "4 independent kernels of {n} threads × {iters} iterations, median of {reps} after 3 warm-ups (wall time, enqueue to synchronize)"
    );
    println!(
        "  one after another, default stream  {:>10.1} µs",
        us(t_serial)
    );
    println!(
        "  4 streams of one device            {:>10.1} µs",
        us(t_streams)
    );
    println!(
        "  4 devices (one stream each)        {:>10.1} µs",
        us(t_devices)
    );
    println!(
        "  speed-up, 4 streams / serial       {:>10.2}× (target ≥ 1.8 on CUDA)",
        t_serial.as_secs_f64() / t_streams.as_secs_f64()
    );
    println!(
        "  speed-up, 4 devices / serial       {:>10.2}×",
        t_serial.as_secs_f64() / t_devices.as_secs_f64()
    );
    Ok(())
}

pub fn measure_streams(device: &Device, reps: usize, trace: Option<&str>) -> Res<StreamTimes> {
    let iters: u32 = match device.backend_kind() {
        BackendKind::Cuda => 20_000,
        _ => 2_000,
    };
    let n = SMALL_THREADS;
    let streams: Vec<Stream> = (0..4)
        .map(|_| device.stream())
        .collect::<Result<_, _>>()
        .map_err(s)?;
    let mut bufs: Vec<Buffer<u32>> = (0..4)
        .map(|k| device.upload(&(0..n as u32).map(|i| i ^ k).collect::<Vec<_>>()))
        .collect::<Result<_, _>>()
        .map_err(s)?;
    let others: Vec<Device> = (0..4)
        .map(|_| Device::by_name(&format!("{}", device.backend_kind())))
        .collect::<Result<_, _>>()
        .map_err(s)?;
    let mut other_bufs: Vec<Buffer<u32>> = others
        .iter()
        .map(|d| d.upload(&vec![1u32; n]))
        .collect::<Result<_, _>>()
        .map_err(s)?;
    let mut rounds = 0u32;
    let serial = |bufs: &mut Vec<Buffer<u32>>| -> Res<()> {
        for b in bufs.iter_mut() {
            busy::launch(device, Launch::threads(n), b, iters).map_err(s)?;
        }
        device.synchronize().map_err(s)
    };
    let concurrent = |bufs: &mut Vec<Buffer<u32>>| -> Res<()> {
        for (b, st) in bufs.iter_mut().zip(&streams) {
            busy::launch(st, Launch::threads(n), b, iters).map_err(s)?;
        }
        device.synchronize().map_err(s)
    };
    let t_serial = time_stats(reps, || {
        rounds += 1;
        serial(&mut bufs)
    })?;
    let t_streams = time_stats(reps, || {
        rounds += 1;
        concurrent(&mut bufs)
    })?;
    let t_devices = time_stats(reps, || {
        for (b, d) in other_bufs.iter_mut().zip(&others) {
            busy::launch(d, Launch::threads(n), b, iters).map_err(s)?;
        }
        for d in &others {
            d.synchronize().map_err(s)?;
        }
        Ok(())
    })?;
    // Every element of every buffer went through the same number of rounds.
    let total = rounds * iters;
    for (k, b) in bufs.iter().enumerate() {
        let got = b.to_vec().map_err(s)?;
        if let Some(i) = (0..n).find(|&i| got[i] != busy_ref(i as u32 ^ k as u32, total)) {
            return Err(format!(
                "buffer {k} element {i} is wrong after {rounds} rounds"
            ));
        }
    }
    if let Some(path) = trace {
        device.synchronize().map_err(s)?;
        device.set_profiling(true);
        serial(&mut bufs)?;
        concurrent(&mut bufs)?;
        let events = device.write_trace(path).map_err(s)?;
        device.set_profiling(false);
        eprintln!("  trace: {events} events (one serial round, then one on 4 streams) in {path}");
    }
    Ok(StreamTimes {
        kernels: 4,
        threads: n,
        iters,
        serial: t_serial,
        streams: t_streams,
        devices: t_devices,
    })
}

/// A chain of dependent launches: one by one, and as one graph replay (both verified).
pub struct GraphTimes {
    pub nodes: usize,
    pub one_by_one: Stats,
    pub replay: Stats,
    /// A replay's device time (timestamps where the backend has them, else wall).
    pub replay_device: Stats,
    /// A replay right after one node's scalar changed (`ExecGraph::set`).
    pub replay_after_set: Stats,
    pub native: bool,
    /// Driver-graph captures over the whole measurement (1: every change was patched).
    pub captures: u32,
}

pub fn measure_graph(device: &Device, reps: usize) -> Res<GraphTimes> {
    const NODES: usize = 100;
    let n = 256;
    let start: Vec<u32> = (0..n as u32).collect();
    let mut x_one = device.upload(&start).map_err(s)?;
    let mut x_graph = device.upload(&start).map_err(s)?;
    let a = |k: usize| (2 * k + 1) as u32;
    let mut g = Graph::new(device);
    let hx = g.buffer_mut(&mut x_graph).map_err(s)?;
    let mut prev = None;
    let mut nodes = Vec::with_capacity(NODES);
    for k in 0..NODES {
        let deps: Vec<_> = prev.into_iter().collect();
        prev = Some(
            g.launch(
                &chain_step::KERNEL,
                Launch::threads(n),
                &[hx.arg(), GraphArg::scalar(a(k))],
                &deps,
            )
            .map_err(s)?,
        );
        nodes.extend(prev);
    }
    let mut exec = g.instantiate().map_err(s)?;
    let one_by_one = |x: &mut Buffer<u32>| -> Res<()> {
        for k in 0..NODES {
            chain_step::launch(device, Launch::threads(n), x, a(k)).map_err(s)?;
        }
        device.synchronize().map_err(s)
    };
    // Equal results before timing: one replay against 100 launches from the same start.
    one_by_one(&mut x_one)?;
    exec.launch(device).map_err(s)?;
    if exec.read(hx).map_err(s)? != x_one.to_vec().map_err(s)? {
        return Err("the graph's result differs from the launches one by one".into());
    }
    let t_one = time_stats(reps, || one_by_one(&mut x_one))?;
    let t_graph = time_stats(reps, || {
        exec.launch(device).map_err(s)?;
        device.synchronize().map_err(s)
    })?;
    // The replay's own time on the device, where the backend timestamps it.
    let mut device_times = Vec::with_capacity(reps);
    let mut device_clock = true;
    for _ in 0..reps {
        let (t, on_device) =
            crate::suite::timed_run(device, &mut || exec.launch(device).map_err(s))?;
        device_times.push(t);
        device_clock &= on_device;
    }
    let replay_device = Stats::from_times(device_times, device_clock);
    // A replay after changing the middle node's scalar, first checked against the same
    // launches one by one from the same start.
    let middle = NODES / 2;
    let changed = a(middle) + 2;
    x_one.write(&start).map_err(s)?;
    for k in 0..NODES {
        let v = if k == middle { changed } else { a(k) };
        chain_step::launch(device, Launch::threads(n), &mut x_one, v).map_err(s)?;
    }
    exec.write(hx, &start).map_err(s)?;
    exec.set(nodes[middle], "a", changed).map_err(s)?;
    exec.launch(device).map_err(s)?;
    if exec.read(hx).map_err(s)? != x_one.to_vec().map_err(s)? {
        return Err("the graph's result after a scalar change differs from the launches".into());
    }
    let mut flip = false;
    let t_set = time_stats(reps, || {
        flip = !flip;
        let v = if flip { a(middle) } else { changed };
        exec.set(nodes[middle], "a", v).map_err(s)?;
        exec.launch(device).map_err(s)?;
        device.synchronize().map_err(s)
    })?;
    Ok(GraphTimes {
        nodes: NODES,
        one_by_one: t_one,
        replay: t_graph,
        replay_device,
        replay_after_set: t_set,
        native: exec.is_native(),
        captures: exec.captures(),
    })
}

fn stream_acquire(device: &Device) -> Res<()> {
    const OPS: u32 = 10_000;
    let mut acquire = || -> Res<()> {
        for _ in 0..OPS {
            let st = device.stream().map_err(s)?;
            drop(st);
        }
        Ok(())
    };
    let mut alloc = || -> Res<()> {
        for _ in 0..OPS {
            drop(device.alloc::<f32>(1024).map_err(s)?);
        }
        Ok(())
    };
    let t_stream = time(15, &mut acquire)? / OPS;
    let t_alloc = time(15, &mut alloc)? / OPS;
    println!("median of 15 batches of {OPS}, after 3 warm-up batches");
    println!("  open + drop a stream        {:>8.3} µs", us(t_stream));
    println!(
        "  pooled alloc + free (4 KiB) {:>8.3} µs (reference)",
        us(t_alloc)
    );
    println!(
        "  stream / alloc              {:>8.2}   (DotCompute claimed 0.62 µs for its command-buffer pool; not measured here)",
        t_stream.as_secs_f64() / t_alloc.as_secs_f64()
    );
    Ok(())
}

fn alloc(device: &Device) -> Res<()> {
    const OPS: u32 = 10_000;
    // Another stream open and busy, as in a program that uses streams.
    let st = device.stream().map_err(s)?;
    let mut x = device.upload(&vec![1u32; 1 << 16]).map_err(s)?;
    busy::launch(&st, Launch::threads(1 << 16), &mut x, 100).map_err(s)?;
    let t = time(15, || {
        for _ in 0..OPS {
            drop(device.alloc::<f32>(1 << 18).map_err(s)?);
        }
        Ok(())
    })? / OPS;
    let stats = device.memory_stats();
    println!("pooled alloc + free of 1 MiB, median of 15 batches of {OPS}");
    println!("  alloc + free   {:>8.3} µs (target ≤ 0.3)", us(t));
    println!(
        "  pool           {} driver allocations, {} hits",
        stats.driver_allocations, stats.pool_hits
    );
    st.synchronize().map_err(s)?;
    Ok(())
}
