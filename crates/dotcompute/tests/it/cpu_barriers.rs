//! The CPU backend's two schedules for kernels with barriers: split at the barriers (the
//! default) and one coroutine per thread. Every output element is checked against a host
//! reference where one is simple to state, otherwise against the other schedule and
//! against the wgpu backend (lavapipe here, NVIDIA Vulkan on the GPU machine). Divergent
//! barriers are errors under both, and the device keeps working.

use crate::common::{seed, wgpu_device};
use dotcompute::cpu::{set_barrier_schedule, set_lanes, split_launches, BarrierSchedule};
use dotcompute::prelude::*;
use dotcompute::{Device, Error};
use std::sync::Mutex;

/// The schedule is one setting per process: tests that switch it take turns.
static SCHEDULE: Mutex<()> = Mutex::new(());

/// How the CPU runs a kernel with barriers: split at them with the barrier-free regions
/// in lane form where they have one (the default), split and thread by thread, or one
/// coroutine per thread.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Lanes,
    Threads,
    Coroutines,
}

const SCHEDULES: [Mode; 3] = [Mode::Lanes, Mode::Threads, Mode::Coroutines];

/// Runs `f` under `m`; asserts that a split kernel took the split path exactly when `m`
/// splits (`splits`), and restores the default.
fn under<R>(m: Mode, splits: bool, f: impl FnOnce() -> R) -> R {
    let _turn = SCHEDULE.lock().unwrap_or_else(|p| p.into_inner());
    set_barrier_schedule(match m {
        Mode::Coroutines => BarrierSchedule::Coroutines,
        _ => BarrierSchedule::Fission,
    });
    set_lanes(m == Mode::Lanes);
    let before = split_launches();
    let r = f();
    let split = split_launches() > before;
    set_barrier_schedule(BarrierSchedule::Fission);
    set_lanes(true);
    assert_eq!(
        split,
        splits && m != Mode::Coroutines,
        "{m:?}: the split path {} taken",
        if split { "was" } else { "was not" }
    );
    r
}

/// Inclusive prefix sums within each group of 256 (Hillis-Steele: two barriers per step,
/// a value lifted across the first).
#[kernel]
fn block_scan(x: &[u32], out: &mut [u32]) {
    let tmp = shared::<u32, 256>();
    let i = global_id().x;
    let l = local_id().x;
    tmp[l] = if i < x.len() { x[i] } else { 0 };
    barrier();
    let mut off = 1u32;
    while off < group_size().x {
        let add = if l >= off { tmp[l - off] } else { 0 };
        barrier();
        tmp[l] += add;
        barrier();
        off *= 2;
    }
    if i < x.len() {
        out[i] = tmp[l];
    }
}

/// Each group's sum by a shared tree, written by every thread minus its own value (so a
/// thread's value must survive three barriers in its slot).
#[kernel]
fn group_sums(x: &[f32], out: &mut [f32]) {
    let part = shared::<f32, 128>();
    let i = global_id().x;
    let l = local_id().x;
    let v = if i < x.len() { x[i] } else { 0.0 };
    part[l] = v;
    barrier();
    let mut s = group_size().x / 2;
    while s > 0 {
        if l < s {
            part[l] += part[l + s];
        }
        barrier();
        s /= 2;
    }
    let total = part[0];
    if i < x.len() {
        out[i] = total - v;
    }
}

/// Control flow around barriers: a `loop` left by a uniform `break` and a mid-body
/// `continue`, a local array lifted across barriers, an `if` and a `match` containing
/// barriers, a strided `for` with a barrier, shadowed names, and a `return` taken by
/// every thread of some groups.
#[kernel]
fn barrier_shapes(x: &[i32], out: &mut [i32], rounds: u32) {
    let sh = shared::<i32, 64>();
    let l = local_id().x;
    let i = global_id().x;
    let n = group_size().x;
    if group_id().x % 5 == 3 {
        return;
    }
    let mut acc = [0i32; 4];
    let v = if i < x.len() { x[i] } else { 1 };
    let mut r = 0u32;
    loop {
        sh[l] = v + r as i32;
        barrier();
        let k = r % 4;
        match k {
            0 => acc[0] += sh[(l + 1) % n],
            1 => acc[1] += sh[(l + 3) % n],
            _ => acc[k] -= sh[l ^ 1],
        }
        barrier();
        r += 1;
        if r >= rounds {
            break;
        }
        if r % 3 == 1 {
            continue;
        }
        let v = v * 2;
        acc[3] ^= v;
    }
    if rounds > 3 {
        sh[l] = acc[0] + acc[1];
        barrier();
        acc[2] += sh[n - 1 - l];
    } else {
        acc[3] = 7;
    }
    let v = acc[0] ^ acc[1];
    for t in (0..rounds).step_by(2) {
        barrier();
        sh[l] = v + t as i32;
        barrier();
        acc[3] += sh[(l + t) % n];
    }
    match rounds % 2 {
        0 => {
            barrier();
            sh[l] = acc[3];
            barrier();
            acc[0] = sh[0];
        }
        _ => acc[0] = -acc[0],
    }
    if i < x.len() {
        for j in 0..4u32 {
            out[4 * i + j] = acc[j];
        }
    }
}

/// Group-uniform locals (one copy per group in the split body): a trip count that differs
/// between groups, values reassigned between barriers; beside look-alikes that must stay
/// per thread: one assigned under a per-thread `if`, one declared twice.
#[kernel]
fn uniform_lookalikes(x: &[u32], out: &mut [u32], extra: u32) {
    let sh = shared::<u32, 64>();
    let l = local_id().x;
    let i = global_id().x;
    let rounds = group_id().x % 4 + extra;
    let mut step = 1u32;
    let mut mine = if i < x.len() { x[i] } else { l };
    let mut odd = 0u32;
    let mut t = 5u32;
    let mut r = 0u32;
    while r < rounds {
        sh[l] = mine + step;
        barrier();
        mine = sh[(l + step) % 64] ^ (mine >> 3);
        if l % 2 == 1 {
            odd += step;
        }
        barrier();
        step = step * 3 % 61 + 1;
        t += r;
        r += 1;
    }
    let t = t * 7 + odd;
    if i < x.len() {
        out[i] = mine ^ step ^ t ^ (r << 24);
    }
}

/// Steps guarded by a comparison of `local_id().x` with a group-uniform bound, in every
/// form the splitter runs over a range of threads instead of all of them (in a
/// one-dimensional group; a 2-D group must still run every thread).
#[kernel]
fn guarded_steps(out: &mut [u32], w: u32, k: u32) {
    let t = shared::<u32, 256>();
    let lid = local_id().x;
    let slot = local_id().y * group_size().x + lid;
    t[slot] = 0;
    barrier();
    if lid < k {
        t[slot] += 1;
    }
    barrier();
    if k > lid {
        t[slot] += 2;
    }
    barrier();
    if lid <= k {
        t[slot] += 4;
    }
    barrier();
    if lid == k {
        t[slot] += 8;
    }
    barrier();
    if lid >= k {
        t[slot] += 16;
    }
    barrier();
    if local_id().x > k {
        t[slot] += 32;
    }
    barrier();
    if k <= lid {
        t[slot] += 64;
    }
    barrier();
    if lid < 3 {
        t[slot] += 128;
    }
    barrier();
    let gx = global_id().x;
    let gy = global_id().y;
    if gx < w && gy * w + gx < out.len() {
        out[gy * w + gx] = t[slot];
    }
}

/// Barrier-free regions in the shapes lane form takes: a trip count that differs between
/// threads, nested branches that differ, value `if`s, `&&` guarding a load that is out of
/// bounds where the guard fails, another chunk's shared value, division by per-thread
/// values, a compound store, f32 math (`exp`, `sqrt`, `max`), values kept across
/// barriers, and a last group cut short by the array's end.
#[kernel]
fn lane_shapes(x: &[i32], f: &[f32], out: &mut [i32], fout: &mut [f32], k: u32) {
    let sh = shared::<i32, 128>();
    let fsh = shared::<f32, 128>();
    let l = local_id().x;
    let i = global_id().x;
    let g = group_size().x;
    let v = if i < x.len() { x[i] } else { -7 };
    let mut trips = 0i32;
    let mut j = 0u32;
    while j < l % 13 + k {
        trips += (j % 5) as i32 - 2;
        j += 1;
    }
    if v > 0 {
        if v % 3 == 0 {
            trips += 100;
        } else {
            trips -= v / 7;
        }
    } else if v < -500 {
        trips *= 2;
    } else {
        trips ^= v;
    }
    sh[l] = trips;
    let fv = if i < f.len() { f[i] } else { 0.0 };
    fsh[l] = (fv * 0.25).exp() + fv.max(0.5).sqrt();
    barrier();
    let near = if l % 2 == 0 { sh[g - 1 - l] } else { sh[l] + 1 };
    let up = i + 1 < x.len() && x[i + 1] > v;
    let ratio = if v != 0 { trips / v } else { trips % 7 };
    let mut acc = near * 3 + ratio;
    if up {
        acc += sh[0];
    }
    barrier();
    sh[l] += acc;
    barrier();
    if i < out.len() {
        out[i] = sh[l] ^ sh[(l + 1) % g] ^ (trips << 3);
        fout[i] = fsh[g - 1 - l] * 2.0 + fsh[0];
    }
}

/// `lane_shapes` on the host, group by group (groups of `g`).
fn lane_shapes_reference(x: &[i32], f: &[f32], g: usize, k: u32) -> (Vec<i32>, Vec<f32>) {
    let n = x.len();
    let (mut out, mut fout) = (vec![0i32; n], vec![0f32; n]);
    for base in (0..n).step_by(g) {
        let v: Vec<i32> = (0..g)
            .map(|l| x.get(base + l).copied().unwrap_or(-7))
            .collect();
        let mut trips = vec![0i32; g];
        let mut fsh = vec![0f32; g];
        for l in 0..g {
            for j in 0..l as u32 % 13 + k {
                trips[l] += (j % 5) as i32 - 2;
            }
            trips[l] = match v[l] {
                v if v > 0 && v % 3 == 0 => trips[l] + 100,
                v if v > 0 => trips[l] - v / 7,
                v if v < -500 => trips[l].wrapping_mul(2),
                v => trips[l] ^ v,
            };
            let fv = f.get(base + l).copied().unwrap_or(0.0);
            fsh[l] = (fv * 0.25).exp() + fv.max(0.5).sqrt();
        }
        let mut sh = trips.clone();
        let acc: Vec<i32> = (0..g)
            .map(|l| {
                let near = if l % 2 == 0 { sh[g - 1 - l] } else { sh[l] + 1 };
                let up = base + l + 1 < n && x[base + l + 1] > v[l];
                let ratio = if v[l] != 0 {
                    trips[l] / v[l]
                } else {
                    trips[l] % 7
                };
                near * 3 + ratio + if up { sh[0] } else { 0 }
            })
            .collect();
        for l in 0..g {
            sh[l] += acc[l];
        }
        for l in 0..g.min(n - base) {
            out[base + l] = sh[l] ^ sh[(l + 1) % g] ^ (trips[l] << 3);
            fout[base + l] = fsh[g - 1 - l] * 2.0 + fsh[0];
        }
    }
    (out, fout)
}

#[test]
fn lane_form_regions_match_the_host_and_the_other_schedules() {
    // Every region of the kernel has a lane form: the ids before `let g` (a group-level
    // local, which splits them from the rest), and the four between barriers. (A test
    // that lane form did not quietly fall back to one thread at a time.)
    assert_eq!(lane_shapes::__DC_LANE_REGIONS, 5);
    let d = Device::cpu();
    let seed = seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    for (g, n) in [
        (128usize, 128 * 37 + 5),
        (100, 100 * 11 + 67),
        (128, 1 << 20),
    ] {
        let x: Vec<i32> = (0..n).map(|_| rng.i32(-1000..1000)).collect();
        let f: Vec<f32> = (0..n).map(|_| rng.f32() * 20.0 - 10.0).collect();
        let (dx, df) = (d.upload(&x).unwrap(), d.upload(&f).unwrap());
        for k in [0u32, 3, 20] {
            let (want, fwant) = lane_shapes_reference(&x, &f, g, k);
            for m in SCHEDULES {
                let what = format!("{m:?}, group {g}, n {n}, k {k} (seed {seed})");
                let mut out = d.alloc_filled(n, i32::MIN + 7).unwrap();
                let mut fout = d.alloc_filled(n, f32::NAN).unwrap();
                under(m, true, || {
                    lane_shapes::launch(
                        &d,
                        Launch::threads(n).group(g as u32),
                        &dx,
                        &df,
                        &mut out,
                        &mut fout,
                        k,
                    )
                    .unwrap()
                });
                same(&out.to_vec().unwrap(), &want, &what);
                // f32 `exp` in lane form is within 1 ulp of the C library's.
                for (e, (got, want)) in fout.to_vec().unwrap().iter().zip(&fwant).enumerate() {
                    assert!(
                        (got - want).abs() <= want.abs() * 4e-7,
                        "{what}: fout[{e}] is {got} instead of {want}"
                    );
                }
            }
        }
    }
}

/// Lane form in a 2-D group (rows of 16): `local_id().x` one per lane, `local_id().y` and
/// `global_id().y` one per chunk; a bool kept across the barrier; a tile read back
/// reversed in both axes.
#[kernel]
fn lane_tile_2d(x: &[u32], out: &mut [u32], w: u32, h: u32) {
    let t = shared::<u32, 64>();
    let lx = local_id().x;
    let ly = local_id().y;
    let gx = global_id().x;
    let gy = global_id().y;
    let inside = gx < w && gy < h;
    t[ly * 16 + lx] = if inside { x[gy * w + gx] * 3 + ly } else { 7 };
    barrier();
    let back = t[(3 - ly) * 16 + (15 - lx)];
    if inside {
        out[gy * w + gx] = back ^ (lx << 8) ^ (gy << 16);
    }
}

#[test]
fn lane_form_in_two_dimensional_groups_matches_the_host() {
    assert_eq!(lane_tile_2d::__DC_LANE_REGIONS, 2);
    let d = Device::cpu();
    let seed = seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    let (w, h) = (53usize, 19usize);
    let x: Vec<u32> = (0..w * h).map(|_| rng.u32(..)).collect();
    let mut want = vec![0u32; w * h];
    for by in 0..h.div_ceil(4) {
        for bx in 0..w.div_ceil(16) {
            let tile: Vec<u32> = (0..64)
                .map(|k| {
                    let (lx, ly) = (k % 16, k / 16);
                    let (gx, gy) = (bx * 16 + lx, by * 4 + ly);
                    match gx < w && gy < h {
                        true => x[gy * w + gx].wrapping_mul(3).wrapping_add(ly as u32),
                        false => 7,
                    }
                })
                .collect();
            for ly in 0..4 {
                for lx in 0..16 {
                    let (gx, gy) = (bx * 16 + lx, by * 4 + ly);
                    if gx < w && gy < h {
                        let back = tile[(3 - ly) * 16 + (15 - lx)];
                        want[gy * w + gx] = back ^ ((lx as u32) << 8) ^ ((gy as u32) << 16);
                    }
                }
            }
        }
    }
    let dx = d.upload(&x).unwrap();
    for m in SCHEDULES {
        let mut out = d.alloc_filled(w * h, 0xDEAD_BEEFu32).unwrap();
        under(m, true, || {
            lane_tile_2d::launch(
                &d,
                Launch::grid2d(w, h).group2d(16, 4),
                &dx,
                &mut out,
                w as u32,
                h as u32,
            )
            .unwrap()
        });
        same(
            &out.to_vec().unwrap(),
            &want,
            &format!("{m:?} (seed {seed})"),
        );
    }
}

/// Lane `bool`s in both their forms: comparisons (mask words) and scalars or literals
/// (`bool`), meeting in assignments, compound `&=` / `|=`, `!`, `==` and `!=` between
/// bools, `&` with a uniform flag, value `if`s with a uniform and a per-thread condition,
/// casts from `bool`, a typed `bool` local, `&&` / `||` (with a uniform left side too),
/// a `while` on a bool local, and bools kept across barriers in both forms.
#[kernel]
fn lane_bools(x: &[i32], out: &mut [u32], k: u32) {
    let sh = shared::<i32, 64>();
    let l = local_id().x;
    let i = global_id().x;
    let v = if i < x.len() { x[i] } else { 5 };
    let flag = k > 2;
    let mut found = false;
    if v % 3 == 0 {
        found = v > 40;
    }
    let mut ok: bool = true;
    ok &= v % 7 != 0;
    ok |= flag && v < -90;
    let neg = !(v > 0);
    let mix = flag & (v < 0);
    let same = flag == (v > 0);
    let pick = if flag { v > 10 } else { false };
    let other = if v > 0 { found } else { v < -100 };
    let odd: bool = (v & 1) == 1;
    let wide = !flag || v > 150;
    let mut go = true;
    let mut steps = 0u32;
    while go {
        steps += 1;
        go = steps < (v as u32) % 5 + k;
    }
    sh[l] = v;
    barrier();
    let before = found != neg;
    let seen = found || sh[(l + 1) % 64] > v;
    barrier();
    sh[l] = (found as i32) + (ok as i32) * 2;
    barrier();
    if i < out.len() {
        out[i] = (sh[l] as u32)
            | (neg as u32) << 2
            | (mix as u32) << 3
            | (same as u32) << 4
            | (pick as u32) << 5
            | (other as u32) << 6
            | (odd as u32) << 7
            | (before as u32) << 8
            | (seen as u32) << 9
            | steps << 10
            | (wide as u32) << 20;
    }
}

/// `lane_bools` on the host (groups of 64).
fn lane_bools_reference(x: &[i32], k: u32) -> Vec<u32> {
    let n = x.len();
    let v = |j: usize| x.get(j).copied().unwrap_or(5);
    (0..n)
        .map(|i| {
            let base = i - i % 64;
            let (v, next) = (v(i), v(base + (i % 64 + 1) % 64));
            let flag = k > 2;
            let found = v % 3 == 0 && v > 40;
            let ok = v % 7 != 0 || (flag && v < -90);
            let neg = v <= 0;
            let mix = flag && v < 0;
            let same = flag == (v > 0);
            let pick = flag && v > 10;
            let other = if v > 0 { found } else { v < -100 };
            let odd = v & 1 != 0;
            let wide = !flag || v > 150;
            let mut steps = 0u32;
            loop {
                steps += 1;
                if steps >= (v as u32) % 5 + k {
                    break;
                }
            }
            let before = found != neg;
            let seen = found || next > v;
            (found as u32 + ok as u32 * 2)
                | (neg as u32) << 2
                | (mix as u32) << 3
                | (same as u32) << 4
                | (pick as u32) << 5
                | (other as u32) << 6
                | (odd as u32) << 7
                | (before as u32) << 8
                | (seen as u32) << 9
                | steps << 10
                | (wide as u32) << 20
        })
        .collect()
}

#[test]
fn lane_bools_in_both_forms_match_the_host() {
    // Every region has a lane form (a test that the bools did not quietly send one back
    // to one thread at a time).
    assert_eq!(lane_bools::__DC_LANE_REGIONS, 5);
    let d = Device::cpu();
    let seed = seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    let n = 64 * 300 + 37;
    let x: Vec<i32> = (0..n).map(|_| rng.i32(-200..200)).collect();
    let dx = d.upload(&x).unwrap();
    for k in [0u32, 3] {
        let want = lane_bools_reference(&x, k);
        for m in SCHEDULES {
            let mut out = d.alloc_filled(n, 0xDEAD_BEEFu32).unwrap();
            under(m, true, || {
                lane_bools::launch(&d, Launch::threads(n).group(64), &dx, &mut out, k).unwrap()
            });
            same(
                &out.to_vec().unwrap(),
                &want,
                &format!("{m:?}, k {k} (seed {seed})"),
            );
        }
    }
}

/// Loads and stores at `global_id().x + shift`, which lane form takes as runs (one
/// vector access, no test that the indices count up): past the end they must raise the
/// error a thread's access raises, not touch memory.
#[kernel]
fn lane_runs_past_the_end(x: &[f32], out: &mut [f32], shift: u32) {
    let sh = shared::<f32, 64>();
    let l = local_id().x;
    let i = global_id().x;
    sh[l] = x[i + shift] * 2.0;
    barrier();
    out[shift + i] = sh[63 - l];
}

#[test]
fn lane_runs_past_the_end_are_out_of_bounds_errors_and_lose_nothing() {
    assert_eq!(lane_runs_past_the_end::__DC_LANE_REGIONS, 2);
    let d = Device::cpu();
    let seed = seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    let n = 64 * 40;
    let x: Vec<f32> = (0..n + 8).map(|_| rng.f32()).collect();
    let (long, short) = (d.upload(&x).unwrap(), d.upload(&x[..n]).unwrap());
    for m in SCHEDULES {
        let what = format!("{m:?} (seed {seed})");
        // In bounds: every element, reversed within each group.
        for shift in [0u32, 5] {
            let mut out = d.alloc_filled(n + 8, f32::NAN).unwrap();
            under(m, true, || {
                lane_runs_past_the_end::launch(
                    &d,
                    Launch::threads(n).group(64),
                    &long,
                    &mut out,
                    shift,
                )
                .unwrap()
            });
            let got = out.to_vec().unwrap();
            for (e, &v) in got.iter().enumerate() {
                let want = match e.checked_sub(shift as usize) {
                    Some(i) if i < n => x[i - i % 64 + 63 - i % 64 + shift as usize] * 2.0,
                    _ => f32::NAN,
                };
                assert!(
                    v == want || (v.is_nan() && want.is_nan()),
                    "{what}: out[{e}] is {v}, not {want}"
                );
            }
        }
        // A load past the end of `x`, then a store past the end of `out`.
        let mut out = d.alloc_filled(n + 8, f32::NAN).unwrap();
        let e = under(m, true, || {
            lane_runs_past_the_end::launch(&d, Launch::threads(n).group(64), &short, &mut out, 3)
                .unwrap_err()
        });
        assert_out_of_bounds(&e, "x", &what);
        let mut out = d.alloc_filled(n, f32::NAN).unwrap();
        let e = under(m, true, || {
            lane_runs_past_the_end::launch(&d, Launch::threads(n).group(64), &long, &mut out, 3)
                .unwrap_err()
        });
        assert_out_of_bounds(&e, "out", &what);
        crate::bad_input::still_works(&d);
    }
}

/// Loads in a loop at indices affine in its variable (`i + k * 64`, a run; `sh[k]`, one
/// index): lane form runs a copy of the loop without bounds tests where a check before
/// it shows every trip in bounds, and the checked loop elsewhere, which must raise the
/// error a thread's load raises.
#[kernel]
fn lane_affine_loads(x: &[f32], out: &mut [f32], reach: u32) {
    let sh = shared::<f32, 64>();
    let l = local_id().x;
    let i = global_id().x;
    sh[l] = x[i] * 0.5;
    barrier();
    let mut acc = 0.0f32;
    for k in 0..reach {
        acc += x[i + k * 64] * 2.0 + sh[k];
    }
    out[i] = acc;
}

#[test]
fn lane_loops_without_bounds_tests_only_where_every_trip_is_in_bounds() {
    assert_eq!(lane_affine_loads::__DC_LANE_REGIONS, 2);
    let d = Device::cpu();
    let seed = seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    let n = 64 * 50;
    let x: Vec<f32> = (0..n + 64 * 10)
        .map(|_| (rng.i32(-50..50) as f32) * 0.25)
        .collect();
    for m in SCHEDULES {
        let what = |r: u32| format!("{m:?}, reach {r} (seed {seed})");
        for reach in [0u32, 1, 10] {
            let dx = d.upload(&x[..n + 64 * reach as usize]).unwrap();
            let mut out = d.alloc_filled(n, f32::NAN).unwrap();
            under(m, true, || {
                lane_affine_loads::launch(&d, Launch::threads(n).group(64), &dx, &mut out, reach)
                    .unwrap()
            });
            let want: Vec<f32> = (0..n)
                .map(|i| {
                    let base = i - i % 64;
                    (0..reach as usize).fold(0.0f32, |acc, k| {
                        acc + x[i + k * 64] * 2.0 + x[base + k] * 0.5
                    })
                })
                .collect();
            same(&out.to_vec().unwrap(), &want, &what(reach));
        }
        // The last trip's run past the end of `x` for the last group's threads.
        let dx = d.upload(&x[..n + 64 * 9 - 5]).unwrap();
        let mut out = d.alloc_filled(n, f32::NAN).unwrap();
        let e = under(m, true, || {
            lane_affine_loads::launch(&d, Launch::threads(n).group(64), &dx, &mut out, 10)
                .unwrap_err()
        });
        assert_out_of_bounds(&e, "x", &what(10));
        // `sh[k]` past the shared array's 64 elements.
        let big = d.upload(&vec![1.0f32; n + 64 * 70]).unwrap();
        let mut out = d.alloc_filled(n, f32::NAN).unwrap();
        let e = under(m, true, || {
            lane_affine_loads::launch(&d, Launch::threads(n).group(64), &big, &mut out, 70)
                .unwrap_err()
        });
        assert_out_of_bounds(&e, "sh", &what(70));
        crate::bad_input::still_works(&d);
    }
}

/// Mutable locals that lane form tracks as runs: a grid-stride loop's index (a run while
/// every lane of a chunk takes `j += step`, split where some lanes have left the loop),
/// the same local brought in from its slot after a barrier (not a run until assigned
/// one), split by an assignment only some lanes take, made a run and then not one
/// (counting down), then a run again, with loads and stores through it.
#[kernel]
fn lane_strided_runs(x: &[f32], out: &mut [f32], cols: u32, step: u32) {
    let sh = shared::<f32, 32>();
    let l = local_id().x;
    let base = group_id().x * cols;
    let mut acc = 0.0f32;
    let mut j = l;
    while j < cols {
        acc += x[base + j];
        j += step;
    }
    sh[l] = acc;
    barrier();
    j = l;
    if l % 2 == 1 {
        j += 32;
    }
    out[base + j] = sh[31 - l];
    j = l;
    j = 63 - j;
    if l % 2 == 1 {
        out[base + j] = sh[l] * 3.0;
    }
    j = l + 64;
    while j < cols {
        out[base + j] = x[base + j] * 2.0 + acc;
        j += 32;
    }
}

fn lane_strided_runs_reference(x: &[f32], groups: usize, cols: usize, step: usize) -> Vec<f32> {
    let mut out = vec![f32::NAN; groups * cols];
    for (row, o) in x.chunks(cols).zip(out.chunks_mut(cols)).take(groups) {
        let acc: Vec<f32> = (0..32)
            .map(|l| (l..cols).step_by(step).fold(0.0f32, |a, j| a + row[j]))
            .collect();
        for l in 0..32 {
            o[if l % 2 == 1 { l + 32 } else { l }] = acc[31 - l];
            if l % 2 == 1 {
                o[63 - l] = acc[l] * 3.0;
            }
            for j in (l + 64..cols).step_by(32) {
                o[j] = row[j] * 2.0 + acc[l];
            }
        }
    }
    out
}

#[test]
fn mutable_runs_match_the_host_where_lanes_part_and_raise_the_errors_of_one_thread() {
    assert_eq!(lane_strided_runs::__DC_LANE_REGIONS, 3);
    let d = Device::cpu();
    let seed = seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    let groups = 37;
    let x: Vec<f32> = (0..groups * 333)
        .map(|_| rng.i32(-40..40) as f32 * 0.25)
        .collect();
    let launch = Launch::threads(groups * 32).group(32);
    for m in SCHEDULES {
        let what =
            |cols: usize, step: u32| format!("{m:?}, {cols} columns, step {step} (seed {seed})");
        for (cols, step) in [(64usize, 32u32), (100, 32), (100, 7), (333, 32), (333, 1)] {
            let dx = d.upload(&x[..groups * cols]).unwrap();
            let mut out = d.alloc_filled(groups * cols, f32::NAN).unwrap();
            under(m, true, || {
                lane_strided_runs::launch(&d, launch, &dx, &mut out, cols as u32, step).unwrap()
            });
            // Bit for bit: elements no thread writes keep their NaN.
            let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
            let want = lane_strided_runs_reference(&x, groups, cols, step as usize);
            same(&bits(out.to_vec().unwrap()), &bits(want), &what(cols, step));
        }
        // The last group's grid-stride load past the end of `x`, then its store past the
        // end of `out`.
        let short = d.upload(&x[..groups * 100 - 3]).unwrap();
        let mut out = d.alloc_filled(groups * 100, f32::NAN).unwrap();
        let e = under(m, true, || {
            lane_strided_runs::launch(&d, launch, &short, &mut out, 100, 32).unwrap_err()
        });
        assert_out_of_bounds(&e, "x", &what(100, 32));
        let dx = d.upload(&x[..groups * 100]).unwrap();
        let mut out = d.alloc_filled(groups * 100 - 3, f32::NAN).unwrap();
        let e = under(m, true, || {
            lane_strided_runs::launch(&d, launch, &dx, &mut out, 100, 32).unwrap_err()
        });
        assert_out_of_bounds(&e, "out", &what(100, 32));
        crate::bad_input::still_works(&d);
    }
}

/// Conditions that compare a run (`global_id().x + shift`, which wraps for a large
/// shift) with values the same for every lane, in every operator and both orders: lane
/// form tests the run's ends once and, where every lane (or none) holds, runs the one
/// branch without a compare of lanes. `if`s with and without `else`, value `if`s
/// guarding a load, `&&` with a uniform side, a `while` over a mutable run, and a
/// mutable run that such an `if` moves (a run still where every lane moved it).
#[kernel]
fn lane_run_bounds(x: &[u32], out: &mut [u32], moved: &mut [u32], lo: u32, hi: u32, shift: u32) {
    let sh = shared::<u32, 64>();
    let l = local_id().x;
    let i = global_id().x;
    let r = i + shift;
    let mut v = 0u32;
    if r < hi {
        v += 1;
    }
    if r <= hi {
        v += 2;
    }
    if r > lo {
        v += 4;
    }
    if r >= lo {
        v += 8;
    }
    if hi > r {
        v += 16;
    }
    if hi >= r {
        v += 32;
    }
    if lo < r {
        v += 64;
    }
    if lo <= r {
        v += 128;
    }
    if r >= lo && r < hi {
        v += 256;
    } else {
        v += 512;
    }
    let w = if lo <= r && r < hi { x[r - lo] } else { 7 };
    let z = if shift > 5 && r < hi { 3u32 } else { 5 };
    let mut q = l;
    if r < hi {
        q += 64;
    }
    moved[group_id().x * 128 + q] = i;
    let mut j = l;
    let mut trips = 0u32;
    while j < lo % 97 {
        trips += 1;
        j += 3;
    }
    sh[l] = v;
    barrier();
    if i < out.len() {
        out[i] = sh[l] * 1000 + w + z * 100_000_000 + trips * 10_000_000;
    }
}

/// `moved` of [`lane_run_bounds`] for `threads` threads (whole groups of 64).
fn lane_run_bounds_moved(threads: usize, hi: u32, shift: u32) -> Vec<u32> {
    let mut moved = vec![0xDEAD_BEEFu32; threads * 2];
    for i in 0..threads as u32 {
        let q = i % 64 + if i.wrapping_add(shift) < hi { 64 } else { 0 };
        moved[(i / 64 * 128 + q) as usize] = i;
    }
    moved
}

fn lane_run_bounds_reference(x: &[u32], n: usize, lo: u32, hi: u32, shift: u32) -> Vec<u32> {
    (0..n as u32)
        .map(|i| {
            let r = i.wrapping_add(shift);
            let tests = [
                r < hi,
                r <= hi,
                r > lo,
                r >= lo,
                hi > r,
                hi >= r,
                lo < r,
                lo <= r,
            ];
            let mut v: u32 = (0..8).filter(|&b| tests[b]).map(|b| 1u32 << b).sum();
            let inside = lo <= r && r < hi;
            v += if inside { 256 } else { 512 };
            let w = if inside { x[(r - lo) as usize] } else { 7 };
            let z = if shift > 5 && r < hi { 3u32 } else { 5 };
            let l = i % 64;
            let trips = (lo % 97).saturating_sub(l).div_ceil(3);
            v * 1000 + w + z * 100_000_000 + trips * 10_000_000
        })
        .collect()
}

#[test]
fn run_comparisons_tested_at_their_ends_match_the_host() {
    assert_eq!(lane_run_bounds::__DC_LANE_REGIONS, 2);
    let d = Device::cpu();
    let seed = seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    let n = 64 * 9 + 13;
    let x: Vec<u32> = (0..4096).map(|_| rng.u32(0..1000)).collect();
    let dx = d.upload(&x).unwrap();
    // Bounds on chunk edges and inside chunks, empty and reversed ranges, and shifts
    // that make the run wrap inside a chunk.
    let cases = [
        (0u32, 0u32, 0u32),
        (8, 64, 0),
        (13, 203, 0),
        (203, 13, 0),
        (100, 100, 0),
        (0, 600, 3),
        (37, 589, 5),
        (5, 4000, 1000),
        (u32::MAX - 300, u32::MAX, u32::MAX - 400),
        (0, 300, u32::MAX - 200),
        (u32::MAX - 3, u32::MAX, u32::MAX - 9),
    ];
    for m in SCHEDULES {
        for (lo, hi, shift) in cases {
            let what = format!("{m:?}, lo {lo}, hi {hi}, shift {shift} (seed {seed})");
            let mut out = d.alloc_filled(n, 0xDEAD_BEEFu32).unwrap();
            // Every thread of the last, partial group writes `moved` too.
            let threads = n.next_multiple_of(64);
            let mut moved = d.alloc_filled(threads * 2, 0xDEAD_BEEFu32).unwrap();
            under(m, true, || {
                lane_run_bounds::launch(
                    &d,
                    Launch::threads(n).group(64),
                    &dx,
                    &mut out,
                    &mut moved,
                    lo,
                    hi,
                    shift,
                )
                .unwrap()
            });
            let want = lane_run_bounds_reference(&x, n, lo, hi, shift);
            same(&out.to_vec().unwrap(), &want, &what);
            let want = lane_run_bounds_moved(threads, hi, shift);
            same(&moved.to_vec().unwrap(), &want, &format!("{what}, moved"));
        }
    }
}

/// A region that is one loop over a range the same for the whole group, in groups of 24
/// (three chunks), its loads at `k * n + i` and `sh[k]` unchecked where every trip is in
/// bounds. The running value depends on the order of the steps (`acc * 0.5 + ..`). (Also
/// the test of a form that ran two chunks per trip, measured and not kept.)
#[kernel]
fn lane_uniform_steps(a: &[f32], w: &[f32], out: &mut [f32], len: u32) {
    let sh = shared::<f32, 24>();
    let l = local_id().x;
    let i = global_id().x;
    let n = out.len();
    let mut acc = 1.0f32;
    sh[l] = w[l];
    barrier();
    for k in 0..len {
        acc = acc * 0.5 + a[k * n + i] * sh[k];
    }
    barrier();
    out[i] = acc;
}

#[test]
fn loops_over_uniform_ranges_match_the_host_and_raise_the_errors_of_one_thread() {
    assert_eq!(lane_uniform_steps::__DC_LANE_REGIONS, 4);
    let d = Device::cpu();
    let seed = seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    let n = 24 * 37;
    let a: Vec<f32> = (0..n * 30)
        .map(|_| rng.i32(-20..20) as f32 * 0.125)
        .collect();
    let w: Vec<f32> = (0..24).map(|_| rng.i32(-8..8) as f32 * 0.25).collect();
    let dw = d.upload(&w).unwrap();
    for m in SCHEDULES {
        let what = |len: u32| format!("{m:?}, len {len} (seed {seed})");
        for len in [0u32, 1, 7, 24] {
            // (at least one row: an empty buffer is an error of its own)
            let da = d.upload(&a[..n * (len as usize).max(1)]).unwrap();
            let mut out = d.alloc_filled(n, f32::NAN).unwrap();
            under(m, true, || {
                lane_uniform_steps::launch(
                    &d,
                    Launch::threads(n).group(24),
                    &da,
                    &dw,
                    &mut out,
                    len,
                )
                .unwrap()
            });
            let want: Vec<f32> = (0..n)
                .map(|i| (0..len as usize).fold(1.0f32, |acc, k| acc * 0.5 + a[k * n + i] * w[k]))
                .collect();
            same(&out.to_vec().unwrap(), &want, &what(len));
        }
        // `a` one element short: the last thread's last step is past its end.
        let da = d.upload(&a[..n * 7 - 1]).unwrap();
        let mut out = d.alloc_filled(n, f32::NAN).unwrap();
        let e = under(m, true, || {
            lane_uniform_steps::launch(&d, Launch::threads(n).group(24), &da, &dw, &mut out, 7)
                .unwrap_err()
        });
        assert_out_of_bounds(&e, "a", &what(7));
        // 30 steps: `sh[k]` past the shared array's 24 elements.
        let da = d.upload(&a).unwrap();
        let e = under(m, true, || {
            lane_uniform_steps::launch(&d, Launch::threads(n).group(24), &da, &dw, &mut out, 30)
                .unwrap_err()
        });
        assert_out_of_bounds(&e, "sh", &what(30));
        crate::bad_input::still_works(&d);
    }
}

#[kernel]
fn barrier_in_divergent_if(out: &mut [u32]) {
    let l = local_id().x;
    if l < 5 {
        barrier();
    }
    out[global_id().x] = l;
}

#[kernel]
fn barrier_in_divergent_loop(out: &mut [u32]) {
    let l = local_id().x;
    for k in 0..l % 3 {
        barrier();
        out[global_id().x] = k;
    }
}

#[kernel]
fn divergent_break(out: &mut [u32]) {
    let l = local_id().x;
    let mut k = 0u32;
    loop {
        barrier();
        k += 1;
        if k > l {
            break;
        }
    }
    out[global_id().x] = k;
}

#[kernel]
fn return_before_barrier(out: &mut [u32]) {
    let l = local_id().x;
    if l == 7 {
        return;
    }
    barrier();
    out[global_id().x] = l;
}

/// Calls a kernel function with barriers: the split cannot see them, so this kernel keeps
/// its coroutines.
#[kernel]
fn helper_with_barriers(x: &[f32], out: &mut [f32]) {
    let part = shared::<f32, 64>();
    let i = global_id().x;
    part[local_id().x] = if i < x.len() { x[i] } else { 0.0 };
    barrier();
    let total = tree_total(part);
    if i < x.len() {
        out[i] = total;
    }
}

#[kernel_fn]
fn tree_total(part: &mut [f32]) -> f32 {
    let l = local_id().x;
    let mut s = group_size().x / 2;
    while s > 0 {
        if l < s {
            part[l] += part[l + s];
        }
        barrier();
        s /= 2;
    }
    part[0]
}

/// Asserts that `e` is an out-of-bounds access of the kernel argument `arg`.
fn assert_out_of_bounds(e: &Error, arg: &str, what: &str) {
    assert!(
        matches!(e, Error::OutOfBounds { arg: a, .. } if a == arg),
        "{what}: {e:?}"
    );
}

/// Every element of `got` equals `want`'s; the first that does not fails with `what`.
fn same<T: PartialEq + std::fmt::Debug>(got: &[T], want: &[T], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    if let Some(k) = (0..got.len()).find(|&k| got[k] != want[k]) {
        panic!(
            "{what}: element {k} is {:?} instead of {:?}",
            got[k], want[k]
        );
    }
}

fn scan_reference(x: &[u32], group: usize) -> Vec<u32> {
    let mut out = vec![0u32; x.len()];
    for (chunk_in, chunk_out) in x.chunks(group).zip(out.chunks_mut(group)) {
        let mut run = 0u32;
        for (o, &v) in chunk_out.iter_mut().zip(chunk_in) {
            run = run.wrapping_add(v);
            *o = run;
        }
    }
    out
}

#[test]
fn block_scan_matches_the_host_under_both_schedules() {
    let d = Device::cpu();
    let seed = seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    // Not a multiple of the group, and over a million elements.
    for n in [1usize, 255, 257, 1_000_003] {
        let x: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
        let want = scan_reference(&x, 256);
        let dx = d.upload(&x).unwrap();
        for s in SCHEDULES {
            let mut out = d.alloc_filled(n, 0xDEAD_BEEFu32).unwrap();
            under(s, true, || {
                block_scan::launch(&d, Launch::threads(n).group(256), &dx, &mut out).unwrap()
            });
            same(
                &out.to_vec().unwrap(),
                &want,
                &format!("{s:?}, n={n} (seed {seed})"),
            );
        }
    }
}

#[test]
fn group_sums_match_the_host_under_both_schedules() {
    let d = Device::cpu();
    let seed = seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    let n = 100_003usize;
    // Small integers: every sum is exact in f32, whatever the order.
    let x: Vec<f32> = (0..n).map(|_| rng.i32(-1000..1000) as f32).collect();
    let dx = d.upload(&x).unwrap();
    let mut want = vec![0f32; n];
    for (c, chunk) in x.chunks(128).enumerate() {
        let total: f32 = chunk.iter().sum();
        for (k, v) in chunk.iter().enumerate() {
            want[c * 128 + k] = total - v;
        }
    }
    for s in SCHEDULES {
        let mut out = d.alloc_filled(n, f32::NAN).unwrap();
        under(s, true, || {
            group_sums::launch(&d, Launch::threads(n).group(128), &dx, &mut out).unwrap()
        });
        same(
            &out.to_vec().unwrap(),
            &want,
            &format!("{s:?} (seed {seed})"),
        );
    }
}

#[test]
fn control_flow_around_barriers_agrees_between_schedules_and_with_wgpu() {
    let d = Device::cpu();
    let seed = seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    let n = 64 * 37 + 13;
    let x: Vec<i32> = (0..n).map(|_| rng.i32(-1000..1000)).collect();
    let poison = i32::MIN + 12345;
    let run = |dev: &Device, s: Mode, rounds: u32| -> Vec<i32> {
        let dx = dev.upload(&x).unwrap();
        let mut out = dev.alloc_filled(4 * n, poison).unwrap();
        let mut launch = || {
            barrier_shapes::launch(dev, Launch::threads(n).group(64), &dx, &mut out, rounds)
                .unwrap()
        };
        if dev.backend_kind() == dotcompute::BackendKind::Cpu {
            under(s, true, launch);
        } else {
            launch();
        }
        out.to_vec().unwrap()
    };
    let gpu = wgpu_device();
    for rounds in [1u32, 2, 4, 7] {
        let split = run(&d, Mode::Lanes, rounds);
        let threads = run(&d, Mode::Threads, rounds);
        let coroutines = run(&d, Mode::Coroutines, rounds);
        same(
            &threads,
            &split,
            &format!("rounds {rounds}, thread by thread against lanes (seed {seed})"),
        );
        // Groups that return at once leave their elements poisoned; the others write all.
        for (k, &v) in split.iter().enumerate() {
            let group = k / 4 / 64;
            assert_eq!(
                v == poison,
                group % 5 == 3,
                "rounds {rounds}: element {k} = {v} (seed {seed})"
            );
        }
        same(
            &coroutines,
            &split,
            &format!("rounds {rounds}, coroutines against the split (seed {seed})"),
        );
        if let Some(g) = &gpu {
            let other = run(g, Mode::Lanes, rounds);
            same(
                &other,
                &split,
                &format!(
                    "rounds {rounds}, {} against the CPU (seed {seed})",
                    g.label()
                ),
            );
        }
    }
}

/// `uniform_lookalikes` on the host, group by group.
fn lookalikes_reference(x: &[u32], extra: u32) -> Vec<u32> {
    let n = x.len();
    let mut out = vec![0u32; n];
    for g in 0..n.div_ceil(64) {
        let rounds = g as u32 % 4 + extra;
        let mut mine: Vec<u32> = (0..64)
            .map(|l| x.get(g * 64 + l).copied().unwrap_or(l as u32))
            .collect();
        let mut odd = [0u32; 64];
        let (mut step, mut t, mut r) = (1u32, 5u32, 0u32);
        while r < rounds {
            let sh: Vec<u32> = mine.iter().map(|m| m.wrapping_add(step)).collect();
            for l in 0..64 {
                mine[l] = sh[(l + step as usize) % 64] ^ (mine[l] >> 3);
                if l % 2 == 1 {
                    odd[l] += step;
                }
            }
            step = step * 3 % 61 + 1;
            t += r;
            r += 1;
        }
        for l in 0..64 {
            if let Some(o) = out.get_mut(g * 64 + l) {
                *o = mine[l] ^ step ^ (t * 7 + odd[l]) ^ (r << 24);
            }
        }
    }
    out
}

#[test]
fn group_uniform_locals_and_their_look_alikes_are_right_under_both_schedules() {
    let d = Device::cpu();
    let seed = seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    let n = 64 * 41 + 9;
    let x: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
    let dx = d.upload(&x).unwrap();
    for extra in [0u32, 3] {
        let want = lookalikes_reference(&x, extra);
        for s in SCHEDULES {
            let mut out = d.alloc_filled(n, 0xDEAD_BEEFu32).unwrap();
            under(s, true, || {
                uniform_lookalikes::launch(&d, Launch::threads(n).group(64), &dx, &mut out, extra)
                    .unwrap()
            });
            same(
                &out.to_vec().unwrap(),
                &want,
                &format!("{s:?}, extra {extra} (seed {seed})"),
            );
        }
    }
}

/// What `guarded_steps` stores for a thread whose `local_id().x` is `lid`.
fn guarded_steps_reference(lid: u32, k: u32) -> u32 {
    [
        (lid < k, 1),
        (k > lid, 2),
        (lid <= k, 4),
        (lid == k, 8),
        (lid >= k, 16),
        (lid > k, 32),
        (k <= lid, 64),
        (lid < 3, 128),
    ]
    .iter()
    .filter(|(taken, _)| *taken)
    .map(|(_, bit)| bit)
    .sum()
}

#[test]
fn steps_guarded_by_the_thread_id_run_for_exactly_the_threads_they_name() {
    let d = Device::cpu();
    // 1-D: a group of 96 (not a power of two), the last group partial.
    let n = 96 * 5 + 17;
    // 2-D: 16×6 groups on a 53×13 grid (partial groups on both axes).
    let (w, h) = (53usize, 13usize);
    for k in [0u32, 2, 3, 15, 16, 17, 95, 96, 200, u32::MAX] {
        let want_1d: Vec<u32> = (0..n)
            .map(|i| guarded_steps_reference((i % 96) as u32, k))
            .collect();
        let want_2d: Vec<u32> = (0..w * h)
            .map(|i| guarded_steps_reference((i % w % 16) as u32, k))
            .collect();
        for s in SCHEDULES {
            let mut out = d.alloc_filled(n, 0xDEAD_BEEFu32).unwrap();
            under(s, true, || {
                guarded_steps::launch(&d, Launch::threads(n).group(96), &mut out, n as u32, k)
                    .unwrap()
            });
            same(
                &out.to_vec().unwrap(),
                &want_1d,
                &format!("{s:?}, 1-D, k {k}"),
            );
            let mut out = d.alloc_filled(w * h, 0xDEAD_BEEFu32).unwrap();
            under(s, true, || {
                guarded_steps::launch(
                    &d,
                    Launch::grid2d(w, h).group2d(16, 6),
                    &mut out,
                    w as u32,
                    k,
                )
                .unwrap()
            });
            same(
                &out.to_vec().unwrap(),
                &want_2d,
                &format!("{s:?}, 2-D, k {k}"),
            );
        }
    }
}

#[test]
fn divergent_barriers_are_errors_under_both_schedules() {
    let d = Device::cpu();
    for s in SCHEDULES {
        let mut out = d.alloc_filled(96, 0u32).unwrap();
        let l = Launch::threads(96).group(32);
        let errors = under(s, true, || {
            [
                barrier_in_divergent_if::launch(&d, l, &mut out),
                barrier_in_divergent_loop::launch(&d, l, &mut out),
                divergent_break::launch(&d, l, &mut out),
                return_before_barrier::launch(&d, l, &mut out),
            ]
        });
        for (k, e) in errors.into_iter().enumerate() {
            match e {
                Err(Error::BarrierDivergence { .. }) => {}
                other => panic!("{s:?}: kernel {k}: expected BarrierDivergence, got {other:?}"),
            }
        }
        // The device still works, and so do barriers.
        let x: Vec<u32> = (1..=300).collect();
        let dx = d.upload(&x).unwrap();
        let mut out = d.alloc_filled(300, 0u32).unwrap();
        under(s, true, || {
            block_scan::launch(&d, Launch::threads(300).group(256), &dx, &mut out).unwrap()
        });
        assert_eq!(out.to_vec().unwrap(), scan_reference(&x, 256));
    }
}

#[test]
fn a_kernel_function_with_barriers_keeps_coroutines_and_is_right() {
    let d = Device::cpu();
    let n = 1000usize;
    let x: Vec<f32> = (0..n).map(|k| (k % 17) as f32).collect();
    let dx = d.upload(&x).unwrap();
    for s in SCHEDULES {
        let mut out = d.alloc_filled(n, f32::NAN).unwrap();
        under(s, false, || {
            helper_with_barriers::launch(&d, Launch::threads(n).group(64), &dx, &mut out).unwrap()
        });
        let got = out.to_vec().unwrap();
        for (k, &g) in got.iter().enumerate() {
            let group = k / 64;
            let want: f32 = x[group * 64..((group + 1) * 64).min(n)].iter().sum();
            assert_eq!(g, want, "{s:?}: element {k}");
        }
    }
}
