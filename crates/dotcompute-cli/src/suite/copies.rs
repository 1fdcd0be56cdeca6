//! Device-to-device copies and fills of the `Buffer` API against a `#[kernel]` that does
//! the same on the same device: the kernel is what the hardware can move, so below 1 the
//! API leaves bandwidth unused (issue 30: wgpu's driver copy moved 849 GB/s where a
//! kernel moved 3,014 GB/s on an H100).

use super::{measure_all, Bench, Ctx, Figure, Res, Unit};
use dotcompute::{BackendKind, Launch};

pub fn benches() -> Vec<Bench> {
    vec![Bench {
        name: "copy",
        what: "Buffer copy and fill against a #[kernel] copy and fill, 1 MiB to 1 GiB",
        run: copy,
    }]
}

#[dotcompute::kernel]
fn copy_kernel(src: &[f32], dst: &mut [f32]) {
    let i = global_id().x;
    if i < dst.len() {
        dst[i] = src[i];
    }
}

#[dotcompute::kernel]
fn fill_kernel(dst: &mut [f32], value: f32) {
    let i = global_id().x;
    if i < dst.len() {
        dst[i] = value;
    }
}

fn copy(ctx: &Ctx) -> Res<Vec<Figure>> {
    let sizes: &[usize] = if ctx.quick {
        &[1 << 18, 1 << 22]
    } else if ctx.kind() == BackendKind::Cpu {
        &[1 << 18, 1 << 22, 1 << 26]
    } else {
        &[1 << 18, 1 << 22, 1 << 26, 1 << 28]
    };
    let d = ctx.device;
    let mut figs = Vec::new();
    for &n in sizes {
        let mib = (4 * n) >> 20;
        let size = format!("{mib} MiB");
        ctx.step(&format!("copy {size}"));
        let src = d.alloc_filled(n, 1.5f32).map_err(super::s)?;
        let mut api_dst = d.alloc_filled(n, 0f32).map_err(super::s)?;
        let mut kernel_dst = d.alloc_filled(n, 0f32).map_err(super::s)?;
        let mut api_fill = d.alloc_filled(n, 0f32).map_err(super::s)?;
        let mut kernel_fill = d.alloc_filled(n, 0f32).map_err(super::s)?;
        let times = measure_all(
            ctx,
            &mut [
                &mut || api_dst.copy_from(&src).map_err(super::s),
                &mut || {
                    copy_kernel::launch(d, Launch::threads(n), &src, &mut kernel_dst)
                        .map_err(super::s)
                },
                &mut || api_fill.fill(2.5).map_err(super::s),
                &mut || {
                    fill_kernel::launch(d, Launch::threads(n), &mut kernel_fill, 2.5)
                        .map_err(super::s)
                },
            ],
        )?;
        let checks = [
            ("Buffer::copy_from", &api_dst, 1.5),
            ("#[kernel] copy", &kernel_dst, 1.5),
            ("Buffer::fill", &api_fill, 2.5),
            ("#[kernel] fill", &kernel_fill, 2.5),
        ];
        for (who, buffer, want) in checks {
            let got = buffer.to_vec().map_err(super::s)?;
            if let Some(i) = got.iter().position(|&v| v != want) {
                return Err(format!("{who} of {size}: element {i} is {}", got[i]));
            }
        }
        let bytes = 4.0 * n as f64;
        let f = || ctx.figure("copy", size.clone(), n as f64, Unit::GBs);
        figs.push(
            f().ours("Buffer::copy_from", 2.0 * bytes, times[0].clone())
                .against("#[kernel] copy", 2.0 * bytes, times[1].clone())
                .target("≥ 0.9")
                .note("bytes read + written")
                .build(),
        );
        figs.push(
            f().ours("Buffer::fill", bytes, times[2].clone())
                .against("#[kernel] fill", bytes, times[3].clone())
                .target("≥ 0.9")
                .note("bytes written")
                .build(),
        );
    }
    Ok(figs)
}
