//! Grid-stride loops that the CUDA and WGSL generators unroll (`dotcompute_ir::unroll`),
//! on every backend present, against the CPU backend.

use crate::common;
use dotcompute::prelude::*;

/// A grid-stride loop the CUDA and WGSL generators unroll (four loads per trip, then the
/// loop as written for the rest): locals declared in the body, a branch, and the buffer
/// read twice per iteration. Each thread's sums run in the same order on every backend,
/// and the body has no multiplication a driver could fuse with an add (NVIDIA's Vulkan
/// compiler turned `acc + (2x + x)` into `fma(x, 3, acc)` once the loop was unrolled,
/// which Vulkan allows), so every backend must match the CPU bit for bit, for lengths
/// below, at and far above the three strides the unrolled loop needs.
#[kernel]
fn strided_mix(x: &[f32], out: &mut [f32]) {
    let stride = group_size().x * num_groups().x;
    let g = global_id().x;
    let mut i = g;
    let mut acc = 0.0f32;
    let mut lo = f32::INFINITY;
    let mut count = 0u32;
    while i < x.len() {
        let v = x[i];
        if v > 0.5 {
            count += 1;
        }
        acc += x[i];
        lo = lo.min(v - 0.25);
        i += stride;
    }
    out[3 * g] = acc;
    out[3 * g + 1] = count as f32;
    out[3 * g + 2] = lo;
}

#[test]
fn unrolled_grid_stride_loops_match_the_cpu_bit_for_bit() {
    let cpu = Device::cpu();
    let seed = common::seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    let threads = 4096usize;
    for n in [
        1usize,
        100,
        3 * threads - 1,
        3 * threads + 1,
        4 * threads + 7,
        (1 << 20) + 3,
    ] {
        let x: Vec<f32> = (0..n).map(|_| rng.f32()).collect();
        let run = |dev: &Device| {
            let dx = dev.upload(&x).unwrap();
            let mut out = dev.alloc_filled(3 * threads, f32::NAN).unwrap();
            strided_mix::launch(dev, Launch::threads(threads).group(256), &dx, &mut out).unwrap();
            out.to_vec().unwrap()
        };
        let want = run(&cpu);
        for d in common::devices() {
            let got = run(&d);
            for k in 0..3 * threads {
                assert_eq!(
                    got[k].to_bits(),
                    want[k].to_bits(),
                    "n={n}: element {k}: {} {} cpu {} (seed {seed})",
                    d.label(),
                    got[k],
                    want[k]
                );
            }
        }
    }
}
