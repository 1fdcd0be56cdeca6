//! Bandwidth-bound kernels, each as a fraction of a device-to-device copy measured
//! alternately in the same run (the fastest a kernel that moves the same bytes can go),
//! and against hand-written kernels on the same backend where a skeptic would pick one:
//! vector add, the user-written sum reduction, tiled transpose, row softmax, a 5-point
//! stencil and contended f32 atomics.

use super::{measure_all, Bench, Ctx, Figure, Res, Stats, Unit};
use dotcompute::ir::ScalarType;
use dotcompute::{Arg, BackendKind, Buffer, Device, Launch, RawKernel, RawParam, Vec4};
use dotcompute_conformance::kernels;
use rayon::prelude::*;

pub fn benches() -> Vec<Bench> {
    vec![
        Bench {
            name: "vector-add",
            what: "c = a + b, f32 and Vec4<f32>, against a device-to-device copy and hand-written kernels",
            run: vector_add,
        },
        Bench {
            name: "reduce",
            what: "the user-written grid-stride sum reduction against a copy and a hand-written one",
            run: reduce,
        },
        Bench {
            name: "transpose",
            what: "tiled transpose 4096×4095 through shared memory, against a copy",
            run: transpose,
        },
        Bench {
            name: "softmax",
            what: "row softmax 8192×1000, two shared-memory reductions per row, against a copy",
            run: softmax,
        },
        Bench {
            name: "stencil",
            what: "5-point stencil 4097×2049, against a copy",
            run: stencil,
        },
        Bench {
            name: "atomics",
            what: "f32 atomic adds from many threads to one address, against the same adds spread",
            run: atomics,
        },
    ]
}

pub(super) const COPY: &str = "device-to-device copy";

/// A copy of `n` f32 for reference: source and destination buffers.
pub(super) struct CopyRef {
    src: Buffer<f32>,
    dst: Buffer<f32>,
}

impl CopyRef {
    fn new(device: &Device, n: usize) -> Res<CopyRef> {
        Ok(CopyRef {
            src: device.alloc_filled(n, 1.5f32).map_err(super::s)?,
            dst: device.alloc_filled(n, 0.0f32).map_err(super::s)?,
        })
    }

    fn run(&mut self) -> Res<()> {
        self.dst.copy_from(&self.src).map_err(super::s)
    }

    /// Whether every copied element arrived (the reference is verified like the cases).
    fn verify(&self) -> Res<()> {
        let got = self.dst.to_vec().map_err(super::s)?;
        match got.iter().position(|&x| x != 1.5) {
            Some(i) => Err(format!("the reference copy is wrong at element {i}")),
            None => Ok(()),
        }
    }

    /// Bytes a copy of `n` f32 moves (read + write).
    pub(super) fn bytes(n: usize) -> f64 {
        8.0 * n as f64
    }
}

/// Times `kernel` alternately with a copy of `n` f32 on the same device (the copy
/// verified): `(kernel, copy)`.
pub(super) fn versus_copy(
    ctx: &Ctx,
    n: usize,
    mut kernel: impl FnMut() -> Res<()>,
) -> Res<(Stats, Stats)> {
    let mut copy = CopyRef::new(ctx.device, n)?;
    let mut times = measure_all(ctx, &mut [&mut kernel, &mut || copy.run()])?;
    copy.verify()?;
    let t_copy = times.pop().expect("two timings");
    Ok((times.pop().expect("two timings"), t_copy))
}

fn pow2_label(n: usize, what: &str) -> String {
    if n.is_power_of_two() {
        format!("2^{} {what}", n.trailing_zeros())
    } else {
        format!("{n} {what}")
    }
}

/// Seeded test data in [-1, 1) (fastrand; the seed is in the error if a check fails).
fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..n).map(|_| rng.f32() * 2.0 - 1.0).collect()
}

fn vector_add(ctx: &Ctx) -> Res<Vec<Figure>> {
    let sizes: &[usize] = if ctx.quick {
        &[1 << 20, 1 << 22]
    } else if ctx.kind() == BackendKind::Cpu {
        &[1 << 20, 1 << 22, 1 << 24]
    } else {
        &[1 << 20, 1 << 22, 1 << 24, 1 << 26]
    };
    let mut out = Vec::new();
    for &n in sizes {
        ctx.step(&format!("vector-add {}", pow2_label(n, "f32")));
        out.extend(vector_add_at(ctx, n)?);
    }
    Ok(out)
}

fn vector_add_at(ctx: &Ctx, n: usize) -> Res<Vec<Figure>> {
    let d = ctx.device;
    let seed = 0x5eed_0000 + n as u64;
    let (a, b) = (data(n, seed), data(n, seed + 1));
    let (da, db) = (
        d.upload(&a).map_err(super::s)?,
        d.upload(&b).map_err(super::s)?,
    );
    let mut dc = d.alloc_filled(n, f32::NAN).map_err(super::s)?;
    let v = n / 4;
    let (a4, b4) = (pack4(&a), pack4(&b));
    let (da4, db4) = (
        d.upload(&a4).map_err(super::s)?,
        d.upload(&b4).map_err(super::s)?,
    );
    let mut dc4 = d.alloc_filled(v, Vec4::splat(f32::NAN)).map_err(super::s)?;
    let mut copy = CopyRef::new(d, n)?;
    let mut hand = HandWritten::for_device(ctx)?;
    let mut host_c = vec![0.0f32; n];
    let mut hand_c4 = d.alloc_filled(v, Vec4::splat(f32::NAN)).map_err(super::s)?;
    let kind = ctx.kind();
    let times = measure_all(
        ctx,
        &mut [
            &mut || {
                kernels::vector_add::launch(d, Launch::threads(n), &da, &db, &mut dc)
                    .map_err(super::s)
            },
            &mut || copy.run(),
            &mut || {
                kernels::vector_add4::launch(d, Launch::threads(v), &da4, &db4, &mut dc4)
                    .map_err(super::s)
            },
            &mut || match &mut hand {
                Some(h) => h.vector_add4(d, &da4, &db4, &mut hand_c4),
                // The CPU's hand-written reference: a rayon loop over host vectors.
                None => {
                    host_c
                        .par_iter_mut()
                        .zip(a.par_iter().zip(b.par_iter()))
                        .for_each(|(c, (x, y))| *c = x + y);
                    Ok(())
                }
            },
        ],
    )?;
    let got = dc.to_vec().map_err(super::s)?;
    if let Some(i) = (0..n).find(|&i| got[i] != a[i] + b[i]) {
        return Err(format!(
            "vector add: element {i} is {}, expected {} (seed {seed})",
            got[i],
            a[i] + b[i]
        ));
    }
    let got4 = dc4.to_vec().map_err(super::s)?;
    if let Some(i) = (0..v).find(|&i| got4[i] != a4[i] + b4[i]) {
        return Err(format!(
            "Vec4 vector add: vector {i} is wrong (seed {seed})"
        ));
    }
    if hand.is_some() {
        let h4 = hand_c4.to_vec().map_err(super::s)?;
        if (0..v).any(|i| h4[i] != a4[i] + b4[i]) {
            return Err("the hand-written vec4 reference gave wrong elements".into());
        }
    } else if (0..n).any(|i| host_c[i] != a[i] + b[i]) {
        return Err("the hand-written rayon reference gave wrong elements".into());
    }
    copy.verify()?;
    let size = pow2_label(n, "f32");
    let bytes = 12.0 * n as f64;
    let [t_kernel, t_copy, t_vec4, t_hand]: [Stats; 4] =
        times.try_into().map_err(|_| "four timings")?;
    let f = |case: &str, t: &Stats| {
        ctx.figure("vector-add", size.clone(), n as f64, Unit::GBs)
            .ours(case, bytes, t.clone())
    };
    let hand_case = match kind {
        BackendKind::Cuda => "hand-written float4 CUDA",
        BackendKind::Wgpu => "hand-written vec4 WGSL",
        _ => "hand-written rayon loop",
    };
    let target_hand = (kind == BackendKind::Wgpu).then_some("≥ 0.9");
    let mut figs = vec![
        f("#[kernel] f32", &t_kernel)
            .against(COPY, CopyRef::bytes(n), t_copy.clone())
            .build(),
        f("#[kernel] Vec4<f32>", &t_vec4)
            .against(COPY, CopyRef::bytes(n), t_copy)
            .build(),
    ];
    let mut vs_hand =
        f("#[kernel] f32 vs hand-written", &t_kernel).against(hand_case, bytes, t_hand);
    if let Some(t) = target_hand {
        vs_hand = vs_hand.target(t);
    }
    if kind == BackendKind::Cpu {
        vs_hand = vs_hand.note("the rayon loop works on host vectors");
    }
    figs.push(vs_hand.build());
    Ok(figs)
}

/// `x` as whole 16-byte vectors (a tail of fewer than 4 is left out).
fn pack4(x: &[f32]) -> Vec<Vec4<f32>> {
    x.chunks_exact(4)
        .map(|c| Vec4::new(c[0], c[1], c[2], c[3]))
        .collect()
}

/// The hand-written references of a GPU backend: CUDA C++ or WGSL, compiled once.
struct HandWritten {
    add4: RawKernel,
    add4_launch: Launch,
    reduce: Option<(RawKernel, Launch)>,
    cuda: bool,
}

/// float4 grid-stride vector add, and a float4 grid-stride sum with a warp-shuffle tree
/// and one atomic per block: the fastest forms a CUDA programmer would write by hand.
const CUDA_SOURCE: &str = r#"
extern "C" __global__ void add_vec4(const float4* __restrict__ a, const float4* __restrict__ b,
                                    float4* __restrict__ c, unsigned long long n4) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 x = a[i], y = b[i];
        c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
}
extern "C" __global__ void reduce_vec4(const float* __restrict__ x, float* __restrict__ total,
                                       unsigned long long n) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long n4 = n / 4;
    float acc = 0.0f;
    for (unsigned long long i = tid; i < n4; i += stride) {
        float4 v = reinterpret_cast<const float4*>(x)[i];
        acc += (v.x + v.y) + (v.z + v.w);
    }
    for (unsigned long long i = n4 * 4 + tid; i < n; i += stride) acc += x[i];
    for (int o = 16; o > 0; o /= 2) acc += __shfl_down_sync(0xffffffffu, acc, o);
    __shared__ float warp_sums[32];
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        acc = threadIdx.x < blockDim.x / 32 ? warp_sums[threadIdx.x] : 0.0f;
        for (int o = 16; o > 0; o /= 2) acc += __shfl_down_sync(0xffffffffu, acc, o);
        if (threadIdx.x == 0) atomicAdd(total, acc);
    }
}
"#;

/// vec4 grid-stride vector add over at most 8,192 groups (65,535 is the dispatch limit).
const WGSL_ADD4: &str = "
@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> c: array<vec4<f32>>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = arrayLength(&c);
    for (var i = id.x; i < n; i += nwg.x * 256u) {
        c[i] = a[i] + b[i];
    }
}";

impl HandWritten {
    fn for_device(ctx: &Ctx) -> Res<Option<HandWritten>> {
        let v4 = Vec4::<f32>::TYPE;
        let sms = ctx.device.info().compute_units.max(1) as usize;
        Ok(match ctx.kind() {
            BackendKind::Cuda => {
                let add_params = [
                    RawParam::buffer("a", v4),
                    RawParam::buffer("b", v4),
                    RawParam::buffer_mut("c", v4),
                    RawParam::scalar("n4", ScalarType::U64),
                ];
                let reduce_params = [
                    RawParam::buffer("x", ScalarType::F32),
                    RawParam::buffer_mut("total", ScalarType::F32),
                    RawParam::scalar("n", ScalarType::U64),
                ];
                Some(HandWritten {
                    add4: RawKernel::cuda("add_vec4", CUDA_SOURCE, &add_params)
                        .map_err(super::s)?,
                    add4_launch: Launch::threads(sms * 2048).group(256),
                    reduce: Some((
                        RawKernel::cuda("reduce_vec4", CUDA_SOURCE, &reduce_params)
                            .map_err(super::s)?,
                        Launch::threads(sms * 2048).group(256),
                    )),
                    cuda: true,
                })
            }
            BackendKind::Wgpu => Some(HandWritten {
                add4: RawKernel::wgsl(
                    "add_vec4",
                    WGSL_ADD4,
                    &[
                        RawParam::buffer("a", v4),
                        RawParam::buffer("b", v4),
                        RawParam::buffer_mut("c", v4),
                    ],
                )
                .map_err(super::s)?,
                add4_launch: Launch::threads(8192 * 256).group(256),
                reduce: None,
                cuda: false,
            }),
            _ => None,
        })
    }

    fn vector_add4(
        &mut self,
        d: &Device,
        a: &Buffer<Vec4<f32>>,
        b: &Buffer<Vec4<f32>>,
        c: &mut Buffer<Vec4<f32>>,
    ) -> Res<()> {
        let n4 = c.len() as u64;
        let mut args = vec![Arg::buffer(a), Arg::buffer(b), Arg::buffer_mut(c)];
        if self.cuda {
            args.push(Arg::scalar(n4));
        }
        d.launch_raw(&self.add4, self.add4_launch, &args)
            .map_err(super::s)
    }
}

/// Groups of the user's reduction: enough to fill the device (8 groups of 256 per
/// compute unit), as a user who read the occupancy guide would launch it.
fn reduce_launch(device: &Device, n: usize) -> Launch {
    const GROUP: usize = 256;
    // wgpu does not report compute units: a fixed 1,024 groups, enough for any GPU.
    let units = match device.info().compute_units {
        0 => 128,
        u => u as usize,
    };
    let groups = (units * 8).min(n.div_ceil(GROUP));
    Launch::threads(groups * GROUP)
        .group(GROUP as u32)
        .dynamic_shared(GROUP as u32)
}

fn reduce(ctx: &Ctx) -> Res<Vec<Figure>> {
    let n: usize = match (ctx.quick, ctx.kind()) {
        (true, _) => 1 << 22,
        (false, BackendKind::Cpu) => 1 << 24,
        _ => 1 << 28,
    };
    ctx.step(&format!("reduce {}", pow2_label(n, "f32")));
    let d = ctx.device;
    // Multiples of 1/4 below 4.25: every partial sum of up to 2^22 of them is exact in
    // f32 on its own, and the f64 reference bounds what the atomics' order can change.
    let x: Vec<f32> = (0..n).map(|i| (i % 17) as f32 * 0.25).collect();
    let want: f64 = x.iter().map(|&v| v as f64).sum();
    let dx = d.upload(&x).map_err(super::s)?;
    let mut total = d.alloc_filled(1, f32::NAN).map_err(super::s)?;
    let mut hand_total = d.alloc_filled(1, f32::NAN).map_err(super::s)?;
    let mut copy = CopyRef::new(d, n)?;
    let hand = HandWritten::for_device(ctx)?.and_then(|h| h.reduce);
    let launch = reduce_launch(d, n);
    let mut sums = Vec::new();
    let mut hand_sums = Vec::new();
    let mut fs: Vec<Box<dyn FnMut() -> Res<()> + '_>> = vec![
        Box::new(|| {
            total.fill(0.0).map_err(super::s)?;
            kernels::reduce_sum::launch(d, launch, &dx, &mut total).map_err(super::s)?;
            sums.push(total.to_vec().map_err(super::s)?[0]);
            Ok(())
        }),
        Box::new(|| copy.run()),
    ];
    if let Some((k, l)) = &hand {
        fs.push(Box::new(|| {
            hand_total.fill(0.0).map_err(super::s)?;
            d.launch_raw(
                k,
                *l,
                &[
                    Arg::buffer(&dx),
                    Arg::buffer_mut(&mut hand_total),
                    Arg::scalar(n as u64),
                ],
            )
            .map_err(super::s)?;
            hand_sums.push(hand_total.to_vec().map_err(super::s)?[0]);
            Ok(())
        }));
    }
    let mut refs: Vec<&mut dyn FnMut() -> Res<()>> = fs.iter_mut().map(|f| &mut **f as _).collect();
    let times = measure_all(ctx, &mut refs)?;
    drop(refs);
    drop(fs);
    copy.verify()?;
    for (who, got) in [("#[kernel]", &sums), ("hand-written", &hand_sums)] {
        if let Some(bad) = got
            .iter()
            .find(|&&s| ((s as f64 - want) / want).abs() > 1e-4)
        {
            return Err(format!("{who} reduction gave {bad}, expected {want}"));
        }
    }
    let size = pow2_label(n, "f32");
    let read = 4.0 * n as f64;
    let mut figs = vec![ctx
        .figure("reduce", size.clone(), n as f64, Unit::GBs)
        .ours("#[kernel] scalar, shared tree", read, times[0].clone())
        .against(COPY, CopyRef::bytes(n), times[1].clone())
        .note("bytes read per second over the copy's bytes moved per second")
        .build()];
    if hand.is_some() {
        figs.push(
            ctx.figure("reduce", size, n as f64, Unit::GBs)
                .ours("#[kernel] scalar vs hand-written", read, times[0].clone())
                .against("hand-written float4 + shuffle CUDA", read, times[2].clone())
                .target("≥ 0.9")
                .build(),
        );
    }
    Ok(figs)
}

fn transpose(ctx: &Ctx) -> Res<Vec<Figure>> {
    let (w, h) = if ctx.quick {
        (1024usize, 1023usize)
    } else {
        (4096, 4095)
    };
    ctx.step(&format!("transpose {w}×{h}"));
    let d = ctx.device;
    let input = data(w * h, 0x7a05);
    let din = d.upload(&input).map_err(super::s)?;
    let mut out = d.alloc_filled(w * h, f32::NAN).map_err(super::s)?;
    let t2 = kernels::TILE_2D as usize;
    let launch = Launch::grid2d(w.next_multiple_of(t2), h.next_multiple_of(t2))
        .group2d(t2 as u32, t2 as u32);
    let (t_kernel, t_copy) = versus_copy(ctx, w * h, || {
        kernels::transpose_2d::launch(d, launch, &din, &mut out, w as u32, h as u32)
            .map_err(super::s)
    })?;
    let got = out.to_vec().map_err(super::s)?;
    for y in 0..h {
        for x in 0..w {
            if got[x * h + y] != input[y * w + x] {
                return Err(format!("transpose: element ({x}, {y}) is wrong"));
            }
        }
    }
    Ok(vec![ctx
        .figure(
            "transpose",
            format!("{w}×{h} f32"),
            (w * h) as f64,
            Unit::GBs,
        )
        .ours("#[kernel] 2-D shared tile", 8.0 * (w * h) as f64, t_kernel)
        .against(COPY, CopyRef::bytes(w * h), t_copy)
        .build()])
}

fn softmax(ctx: &Ctx) -> Res<Vec<Figure>> {
    let (rows, cols) = if ctx.quick {
        (2048usize, 1000usize)
    } else {
        (8192, 1000)
    };
    ctx.step(&format!("softmax {rows}×{cols}"));
    let d = ctx.device;
    let x: Vec<f32> = data(rows * cols, 0x50f7).iter().map(|v| v * 5.0).collect();
    let dx = d.upload(&x).map_err(super::s)?;
    let mut out = d.alloc_filled(rows * cols, f32::NAN).map_err(super::s)?;
    let g = kernels::SOFTMAX_GROUP;
    let launch = Launch::threads(rows * g as usize).group(g);
    let (t_kernel, t_copy) = versus_copy(ctx, rows * cols, || {
        kernels::softmax_rows::launch(d, launch, &dx, &mut out, cols as u32).map_err(super::s)
    })?;
    check_softmax(&x, cols, &out.to_vec().map_err(super::s)?)?;
    Ok(vec![ctx
        .figure(
            "softmax",
            format!("{rows}×{cols} f32"),
            (rows * cols) as f64,
            Unit::GBs,
        )
        .ours(
            "#[kernel] two shared reductions",
            12.0 * (rows * cols) as f64,
            t_kernel,
        )
        .against(COPY, CopyRef::bytes(rows * cols), t_copy)
        .note("bytes: the row read twice and written once")
        .build()])
}

/// Every element of a row softmax of `x` (rows of `cols`) against f64, to 1e-5 relative.
pub fn check_softmax(x: &[f32], cols: usize, got: &[f32]) -> Res<()> {
    for (r, row) in x.chunks(cols).enumerate() {
        let top = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let sum: f64 = row.iter().map(|&v| (v as f64 - top).exp()).sum();
        for c in 0..cols {
            let want = (row[c] as f64 - top).exp() / sum;
            let err = (got[r * cols + c] as f64 - want).abs() / want;
            if err.is_nan() || err > 1e-5 {
                return Err(format!("softmax: ({r}, {c}) relative error {err:e}"));
            }
        }
    }
    Ok(())
}

fn stencil(ctx: &Ctx) -> Res<Vec<Figure>> {
    let (w, h) = if ctx.quick {
        (1025usize, 513usize)
    } else {
        (4097, 2049)
    };
    ctx.step(&format!("stencil {w}×{h}"));
    let d = ctx.device;
    let x = data(w * h, 0x57e4);
    let dx = d.upload(&x).map_err(super::s)?;
    let mut out = d.alloc_filled(w * h, f32::NAN).map_err(super::s)?;
    let (t_kernel, t_copy) = versus_copy(ctx, w * h, || {
        kernels::stencil5::launch(d, Launch::grid2d(w, h), &dx, &mut out, w as u32, h as u32)
            .map_err(super::s)
    })?;
    let got = out.to_vec().map_err(super::s)?;
    for yy in 0..h {
        for xx in 0..w {
            let i = yy * w + xx;
            let want = if xx == 0 || yy == 0 || xx == w - 1 || yy == h - 1 {
                x[i] as f64
            } else {
                0.5 * x[i] as f64
                    + 0.125
                        * (x[i - 1] as f64 + x[i + 1] as f64 + x[i - w] as f64 + x[i + w] as f64)
            };
            // f32 arithmetic, fused or not: a few ulps of values below 1.5 in size.
            if (got[i] as f64 - want).abs() > 1e-6 {
                return Err(format!(
                    "stencil: ({xx}, {yy}) is {}, expected {want}",
                    got[i]
                ));
            }
        }
    }
    Ok(vec![ctx
        .figure("stencil", format!("{w}×{h} f32"), (w * h) as f64, Unit::GBs)
        .ours("#[kernel] 5-point", 8.0 * (w * h) as f64, t_kernel)
        .against(COPY, CopyRef::bytes(w * h), t_copy)
        .note("bytes: one read and one write per point (neighbours come from cache)")
        .build()])
}

fn atomics(ctx: &Ctx) -> Res<Vec<Figure>> {
    // At most 2^24 adds of 1.0, so every sum is exact.
    let n: usize = if ctx.quick || ctx.kind() == BackendKind::Cpu {
        1 << 16
    } else {
        1 << 20
    };
    ctx.step(&format!("atomics {}", pow2_label(n, "threads")));
    let d = ctx.device;
    let mut total = d.alloc_filled(1, 0.0f32).map_err(super::s)?;
    let mut spread = d.alloc_filled(n, 0.0f32).map_err(super::s)?;
    let mut sums = Vec::new();
    let times = measure_all(
        ctx,
        &mut [
            &mut || {
                total.fill(0.0).map_err(super::s)?;
                kernels::contended_add::launch(d, Launch::threads(n), &mut total, n as u32)
                    .map_err(super::s)?;
                sums.push(total.to_vec().map_err(super::s)?[0]);
                Ok(())
            },
            &mut || {
                kernels::spread_add::launch(d, Launch::threads(n), &mut spread).map_err(super::s)
            },
        ],
    )?;
    if let Some(bad) = sums.iter().find(|&&s| s != n as f32) {
        return Err(format!("{n} contended adds of 1.0 gave {bad}"));
    }
    let rounds = spread.to_vec().map_err(super::s)?;
    if rounds.iter().any(|&v| v != rounds[0]) || rounds[0] < 1.0 {
        return Err("the spread adds disagree".into());
    }
    let how = match ctx.device.info().caps.atomic_f32_add {
        dotcompute::AtomicF32Add::Native => "native f32 atomics",
        dotcompute::AtomicF32Add::CompareExchangeLoop => "compare-exchange loop",
    };
    Ok(vec![ctx
        .figure("atomics", pow2_label(n, "threads"), n as f64, Unit::Us)
        .ours("contended f32 add, one address", 1.0, times[0].clone())
        .against("the same adds, one address each", 1.0, times[1].clone())
        .note(format!("{how}; time per launch"))
        .build()])
}
