//! A sum reduction written with vector loads and subgroup operations, checked exactly and
//! timed against a device-to-device copy of the same data on the same device.
//!
//! ```text
//! cargo run --release --example vector_sum -p dotcompute            # best device, 2^24 floats
//! cargo run --release --example vector_sum -p dotcompute -- 28 20   # 2^28 floats, 20 repetitions
//! DOTCOMPUTE_BACKEND=wgpu cargo run --release --example vector_sum -p dotcompute
//! ```
//!
//! The figure it prints is bandwidth against bandwidth: the bytes the reduction reads per
//! second over the bytes the copy moves (reads plus writes) per second, both as device
//! time from timestamp queries, medians of the repetitions after a warm-up.
use dotcompute::prelude::*;
use std::time::Duration;

/// Threads per group: a multiple of every subgroup size (1 on the CPU, 32 on CUDA).
const GROUP: u32 = 256;

/// Adds `x` into `total[0]`. Each thread sums 16-byte vectors in a grid-stride loop, the
/// subgroup adds its threads' sums without memory, one sum per subgroup goes through
/// shared memory, and the group's first subgroup adds those and does one atomic add.
#[kernel]
fn vector_sum(x: &[Vec4<f32>], total: &mut [f32]) {
    // One partial sum per subgroup: at most GROUP of them (subgroups of one lane).
    let partials = shared::<f32, 256>();
    let stride = num_groups().x * group_size().x;
    let mut acc = Vec4::splat(0.0f32);
    let mut i = global_id().x;
    while i < x.len() {
        acc = acc + x[i];
        i += stride;
    }
    let sum = subgroup_add(acc.x + acc.y + acc.z + acc.w);
    let size = subgroup_size();
    let lane = subgroup_lane();
    let subgroup = local_id().x / size;
    if lane == 0 {
        partials[subgroup] = sum;
    }
    barrier();
    if subgroup == 0 {
        let count = (group_size().x + size - 1) / size;
        let mut t = 0.0f32;
        let mut j = lane;
        while j < count {
            t += partials[j];
            j += size;
        }
        let t = subgroup_add(t);
        if lane == 0 {
            atomic_add(&total[0], t);
        }
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() -> dotcompute::Result<()> {
    let mut args = std::env::args().skip(1);
    let log2: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(24);
    let reps: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(10)
        .max(1);
    let device = Device::best()?;
    let n = 1usize << log2; // floats
                            // Small integers: every partial sum is exact in f32, whatever the order of the
                            // atomic adds, so the result must equal the host's sum exactly.
    let seed = 0x5eed_u64;
    let mut state = seed;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) % 3) as f32 - 1.0
    };
    let data: Vec<Vec4<f32>> = (0..n / 4)
        .map(|_| Vec4::new(next(), next(), next(), next()))
        .collect();
    let want: f64 = data.iter().map(|v| (v.x + v.y + v.z + v.w) as f64).sum();
    let x = device.upload(&data)?;
    let mut total = device.alloc_filled(1, f32::NAN)?;
    let mut copy = device.alloc::<Vec4<f32>>(n / 4)?;
    // Enough groups to fill a large GPU; each thread then loops over many vectors.
    let groups = (n / 4).div_ceil(GROUP as usize).min(2048);
    let launch = || Launch::threads(groups * GROUP as usize).group(GROUP);

    let run = |total: &mut Buffer<f32>| -> dotcompute::Result<f32> {
        total.fill(0.0)?;
        vector_sum::launch(&device, launch(), &x, total)?;
        Ok(total.to_vec()?[0])
    };
    let got = run(&mut total)?;
    println!(
        "sum of 2^{log2} f32 on {}: {got} (host: {want}, seed {seed:#x})",
        device.label()
    );
    if got as f64 != want {
        eprintln!("error: the device's sum {got} differs from the host's {want}");
        std::process::exit(1);
    }
    copy.copy_from(&x)?;
    if copy.to_vec()? != data {
        eprintln!("error: the reference copy is wrong");
        std::process::exit(1);
    }

    // Timing: the kernel alone and the copy alone, as device time where the backend
    // measures it (host wall time on the CPU backend).
    device.set_profiling(true);
    for _ in 0..reps + 2 {
        total.fill(0.0)?;
        vector_sum::launch(&device, launch(), &x, &mut total)?;
        copy.copy_from(&x)?;
    }
    device.synchronize()?;
    device.set_profiling(false);
    let timings = device.take_timings();
    let pick = |label: &str| {
        let v: Vec<Duration> = timings
            .iter()
            .filter(|t| t.label == label)
            .skip(2) // warm-up
            .map(|t| t.duration)
            .collect();
        median(v)
    };
    let (t_sum, t_copy) = (pick("vector_sum"), pick("copy"));
    let device_time = timings.iter().all(|t| t.device_time);
    let bytes = (n * 4) as f64;
    let sum_bw = bytes / t_sum.as_secs_f64() / 1e9;
    let copy_bw = 2.0 * bytes / t_copy.as_secs_f64() / 1e9;
    println!(
        "{}, median of {reps} after 2 warm-ups, group {GROUP}, {groups} groups:",
        if device_time {
            "device time"
        } else {
            "host wall time"
        }
    );
    println!(
        "  vector_sum (reads {:.0} MiB)      {:>9.3} ms {sum_bw:>8.1} GB/s",
        bytes / 1048576.0,
        t_sum.as_secs_f64() * 1e3
    );
    println!(
        "  device-to-device copy (moves 2x)  {:>9.3} ms {copy_bw:>8.1} GB/s",
        t_copy.as_secs_f64() * 1e3
    );
    println!(
        "  read bandwidth / copy bandwidth    {:.3}",
        sum_bw / copy_bw
    );
    // A final check after the timed runs: the last timed launch summed correctly too.
    let last = total.to_vec()?[0];
    if last as f64 != want {
        eprintln!("error: a timed launch gave {last}, expected {want}");
        std::process::exit(1);
    }
    Ok(())
}
