//! What the kernel language can say: kernel functions, generics, local arrays, views as
//! arguments, vectors, subgroups, 2-D shared arrays, literal inference, f16.

use super::*;

pub(super) fn kernel_functions(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    // Small integers and halves: every sum and product below is exact in f32.
    let a: Vec<f32> = (0..n).map(|_| rng.i32(-64..64) as f32 * 0.5).collect();
    let ints: Vec<u32> = (0..n).map(|_| rng.u32(0..100_000)).collect();
    let (da, di) = (d.upload(&a)?, d.upload(&ints)?);
    let mut out = poisoned_f32(d, 2 * n)?;
    let mut counts = d.alloc_filled(2 * n, POISON_U32)?;
    kernels::helper_calls::launch(d, Launch::threads(n), &da, &di, &mut out, &mut counts)?;
    let (got, got_counts) = (out.to_vec()?, counts.to_vec()?);
    let collatz = |mut x: u32| {
        let mut steps = 0;
        while x > 1 && steps < 100 {
            x = if x % 2 == 0 {
                x / 2
            } else {
                x.wrapping_mul(3).wrapping_add(1)
            };
            steps += 1;
        }
        steps
    };
    for i in 0..n {
        let l = a[i] + (1.0 - a[i]) * 0.25;
        let w: f32 = a[i..(i + 3).min(n)].iter().sum();
        let v = l + w;
        let want = [v, v * v];
        // `l` is not exact (a multiply by 0.25 of a half is, the sum may round): allow
        // the one rounding of a possibly contracted multiply-add.
        let close = |g: f32, w: f32| (g - w).abs() <= 2.0 * f32::EPSILON * w.abs().max(1.0);
        if !close(got[2 * i], want[0]) || !close(got[2 * i + 1], want[1]) {
            return fail(format!(
                "element {i} (a = {}): got {:?}, expected {want:?}",
                a[i],
                &got[2 * i..2 * i + 2]
            ));
        }
        let want_counts = [collatz(ints[i]), (ints[i] % 1000) * (ints[i] % 1000)];
        if got_counts[2 * i..2 * i + 2] != want_counts {
            return fail(format!(
                "element {i} (n = {}): got {:?}, expected {want_counts:?} (collatz steps, square)",
                ints[i],
                &got_counts[2 * i..2 * i + 2]
            ));
        }
    }
    // A kernel function with barriers over a shared array.
    const GROUP: usize = 64;
    let x: Vec<f32> = (0..n).map(|_| rng.i32(-100..100) as f32).collect();
    let dx = d.upload(&x)?;
    let mut sums = poisoned_f32(d, n)?;
    kernels::helper_group_sums::launch(d, Launch::threads(n).group(GROUP as u32), &dx, &mut sums)?;
    let got = sums.to_vec()?;
    first_mismatch(&got, |i| {
        let g = i / GROUP * GROUP;
        let total: f32 = x[g..(g + GROUP).min(n)].iter().sum();
        total - x[i]
    })
    .map_err(|f| Failure {
        message: format!("group sums: {}", f.message),
        ..f
    })?;
    Ok(Outcome::default())
}

/// Host twin of `kernels::window_generic` for values that stay exact.
trait Exact: Copy + Element {
    fn to_f64(self) -> f64;
    fn from_i32(v: i32) -> Self;
}
macro_rules! exact {
    ($($t:ty),*) => {$(
        impl Exact for $t {
            fn to_f64(self) -> f64 { self as f64 }
            fn from_i32(v: i32) -> Self { v as $t }
        }
    )*};
}
exact!(i32, u32, i64, u64, f32, f64);

fn window_on<T: Exact + dotcompute::Num, const W: u32>(
    d: &Target,
    n: usize,
    rng: &mut fastrand::Rng,
    lo: i32,
) -> Result<(), Failure> {
    let x: Vec<T> = (0..n).map(|_| T::from_i32(rng.i32(lo..1000))).collect();
    let scale = T::from_i32(rng.i32(1..10));
    let dx = d.upload(&x)?;
    let mut out = d.alloc_filled(n, T::from_i32(77))?;
    kernels::window_generic::launch::<T, W>(d, Launch::threads(n), &dx, scale, &mut out)?;
    let got = out.to_vec()?;
    for i in 0..n {
        let sum: f64 = x[i..(i + W as usize).min(n)]
            .iter()
            .map(|v| v.to_f64())
            .sum();
        let want = sum * scale.to_f64() + 1.0 + (i % 7) as f64 + (i % 2) as f64;
        if got[i].to_f64() != want {
            return fail(format!(
                "window_generic::<{}, {W}> element {i}: got {:?}, expected {want}",
                <T as Element>::TYPE,
                got[i]
            ));
        }
    }
    Ok(())
}

pub(super) fn generic_kernels(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    window_on::<i32, 3>(d, n, rng, -1000)?;
    window_on::<u32, 1>(d, n, rng, 0)?;
    window_on::<f32, 4>(d, n, rng, -1000)?;
    window_on::<u32, 5>(d, n, rng, 0)?;
    if d.info().caps.f64 {
        window_on::<f64, 2>(d, n, rng, -1000)?;
    }
    if d.info().caps.i64 {
        window_on::<i64, 3>(d, n, rng, -1000)?;
        window_on::<u64, 2>(d, n, rng, 0)?;
    }
    // Each instantiation is a kernel of its own, named after its parameters.
    let names = [
        kernels::window_generic::kernel::<i32, 3>().name(),
        kernels::window_generic::kernel::<u32, 5>().name(),
    ];
    if names != ["window_generic_i32_3", "window_generic_u32_5"] {
        return fail(format!("instance names {names:?}"));
    }
    Ok(Outcome::default())
}

pub(super) fn local_arrays(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    // Small integers: every sum below is exact in f32.
    let x: Vec<f32> = (0..n).map(|_| rng.i32(-50..50) as f32).collect();
    let keys: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
    let (dx, dk) = (d.upload(&x)?, d.upload(&keys)?);
    let mut sums = poisoned_f32(d, 4 * n)?;
    let mut hist = d.alloc_filled(n, POISON_U32)?;
    kernels::local_arrays::launch(d, Launch::threads(n), &dx, &dk, &mut sums, &mut hist)?;
    let (got_sums, got_hist) = (sums.to_vec()?, hist.to_vec()?);
    for i in 0..n {
        let window: f32 = (0..8).map(|j| x[(i + j) % n]).sum();
        let want: Vec<f32> = (0..4)
            .map(|k| window * (k + 1) as f32 * 0.5 + 1.5)
            .collect();
        if got_sums[4 * i..4 * i + 4] != want[..] {
            return fail(format!(
                "thread {i}: accumulators {:?}, expected {want:?}",
                &got_sums[4 * i..4 * i + 4]
            ));
        }
        let mut total = 0u32;
        for r in 0..2u32 {
            let mut h = [r; 16];
            for j in 0..8 {
                h[(keys[(i + j) % n] % 16) as usize] += 1;
            }
            total += h[(keys[i] % 16) as usize] + h[((keys[i] + 1) % 16) as usize] * 100;
        }
        if got_hist[i] != total {
            return fail(format!(
                "thread {i}: histogram total {}, expected {total}",
                got_hist[i]
            ));
        }
    }
    Ok(Outcome::default())
}

pub(super) fn const_sized_local_arrays(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    // Small integers: every sum is exact in f32 too.
    let xi: Vec<i32> = (0..n).map(|_| rng.i32(-1000..1000)).collect();
    let want = |per: usize, i: usize, x: &dyn Fn(usize) -> i64| -> i64 {
        let total: i64 = (0..per)
            .map(|k| (0..3).map(|r| x((i + k + r * per) % n)).sum::<i64>() * (k as i64 + 1))
            .sum();
        total + (1 + 2 * per * (i % 7)) as i64 + (2 * per + 1) as i64
    };
    // f32 with PER = 3, i32 with PER = 5.
    let xf: Vec<f32> = xi.iter().map(|&v| v as f32).collect();
    let dxf = d.upload(&xf)?;
    let mut outf = poisoned_f32(d, n)?;
    kernels::const_local_arrays::launch::<f32, 3>(d, Launch::threads(n), &dxf, &mut outf)?;
    let dxi = d.upload(&xi)?;
    let mut outi = d.alloc_filled(n, POISON_U32 as i32)?;
    kernels::const_local_arrays::launch::<i32, 5>(d, Launch::threads(n), &dxi, &mut outi)?;
    let (gf, gi) = (outf.to_vec()?, outi.to_vec()?);
    for i in 0..n {
        let wf = want(3, i, &|j| xi[j] as i64);
        if gf[i] != wf as f32 {
            return fail(format!("f32, PER 3, thread {i}: {}, expected {wf}", gf[i]));
        }
        let wi = want(5, i, &|j| xi[j] as i64);
        if gi[i] as i64 != wi {
            return fail(format!("i32, PER 5, thread {i}: {}, expected {wi}", gi[i]));
        }
    }
    // Across a barrier, PER = 6, groups of 64 (n need not be a multiple).
    let xu: Vec<u32> = (0..n).map(|_| rng.u32(..1 << 28)).collect();
    let dxu = d.upload(&xu)?;
    let mut outu = d.alloc_filled(n, POISON_U32)?;
    kernels::const_local_across_barrier::launch::<6>(
        d,
        Launch::threads(n).group(64),
        &dxu,
        &mut outu,
    )?;
    let gu = outu.to_vec()?;
    for i in 0..n {
        let next = if (i + 1) % 64 == 0 { i + 1 - 64 } else { i + 1 };
        let want = xu[i] + xu.get(next).copied().unwrap_or(0) + 6;
        if gu[i] != want {
            return fail(format!(
                "across a barrier, thread {i}: {}, expected {want}",
                gu[i]
            ));
        }
    }
    Ok(Outcome::default())
}

pub(super) fn view_args(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    // Views at 3 elements (12 bytes: below any storage-offset alignment) and at 64
    // elements (256 bytes: aligned on every adapter).
    let src: Vec<f32> = (0..n + 100).map(|_| rng.i32(-1000..1000) as f32).collect();
    let dsrc = d.upload(&src)?;
    let mut out = poisoned_f32(d, n + 50)?;
    const COUNTS: usize = 17;
    let mut counts = d.alloc_filled(40, 1000u32)?;
    {
        let a = dsrc.slice(3..3 + n)?;
        let b = dsrc.slice(64..64 + n)?;
        let mut c = counts.slice_mut(7..7 + COUNTS)?;
        kernels::view_args::launch(
            d,
            Launch::threads(n),
            &a,
            &b,
            &mut out.slice_mut(5..5 + n)?,
            &mut c,
        )?;
    }
    let (got, got_counts) = (out.to_vec()?, counts.to_vec()?);
    for (i, &g) in got.iter().enumerate() {
        let want = if (5..5 + n).contains(&i) {
            let k = i - 5;
            src[3 + k] + src[64 + k] * 2.0
        } else {
            f32::NAN // the poison, untouched
        };
        if g.to_bits() != want.to_bits() {
            return fail(format!(
                "out[{i}] = {g}, expected {want} (the view is out[5..{}])",
                5 + n
            ));
        }
    }
    for (i, &g) in got_counts.iter().enumerate() {
        let want = if (7..7 + COUNTS).contains(&i) {
            let j = i - 7;
            1000 + (n / COUNTS + usize::from(j < n % COUNTS)) as u32
        } else {
            1000
        };
        if g != want {
            return fail(format!(
                "counts[{i}] = {g}, expected {want} (the view is counts[7..{}])",
                7 + COUNTS
            ));
        }
    }
    Ok(Outcome::default())
}

/// The IR's integer `/` and `%` on one lane (`x / 0 == x`, `x % 0 == 0`, `MIN / -1 == MIN`).
pub(super) fn ir_div_rem(p: i32, q: i32) -> (i32, i32) {
    match q {
        0 => (p, 0),
        -1 => (p.wrapping_neg(), 0),
        _ => (p / q, p % q),
    }
}

pub(super) fn vector_types(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    // Small integers and power-of-two divisors: every float result below is exact, so
    // every backend must match bit for bit (division included).
    let small = |rng: &mut fastrand::Rng| rng.i32(-50..50) as f32;
    let pow2 = |rng: &mut fastrand::Rng| {
        [0.25f32, 0.5, 1.0, 2.0, 4.0][rng.usize(..5)] * if rng.bool() { 1.0 } else { -1.0 }
    };
    // The inputs start 3 vectors into their buffers: vector views at an offset of 48
    // bytes (below every storage-offset alignment).
    let a: Vec<Vec4<f32>> = (0..n + 3)
        .map(|_| Vec4::new(small(rng), small(rng), small(rng), small(rng)))
        .collect();
    let b: Vec<Vec4<f32>> = (0..n)
        .map(|_| Vec4::new(pow2(rng), pow2(rng), pow2(rng), pow2(rng)))
        .collect();
    let special = [i32::MIN, i32::MAX, -1, 0, 1];
    let int = |rng: &mut fastrand::Rng| {
        if rng.u8(..8) == 0 {
            special[rng.usize(..special.len())]
        } else {
            rng.i32(..)
        }
    };
    let ia: Vec<Vec4<i32>> = (0..n)
        .map(|_| Vec4::new(int(rng), int(rng), int(rng), int(rng)))
        .collect();
    let ib: Vec<Vec4<i32>> = (0..n)
        .map(|_| Vec4::new(rng.i32(-3..4), int(rng), rng.i32(-3..4), int(rng)))
        .collect();
    let u: Vec<Vec2<u32>> = (0..n)
        .map(|_| Vec2::new(rng.u32(..), rng.u32(..)))
        .collect();
    let (da, db, dia, dib, du) = (
        d.upload(&a)?,
        d.upload(&b)?,
        d.upload(&ia)?,
        d.upload(&ib)?,
        d.upload(&u)?,
    );
    let mut out = d.alloc_filled(n, Vec4::splat(f32::NAN))?;
    let mut iout = d.alloc_filled(n, Vec4::splat(POISON_U32 as i32))?;
    let mut uout = d.alloc_filled(n, Vec2::splat(POISON_U32))?;
    let mut dots = poisoned_f32(d, n)?;
    kernels::vector_types::launch(
        d,
        Launch::threads(n),
        &da.slice(3..3 + n)?,
        &db,
        &dia,
        &dib,
        &du,
        &mut out,
        &mut iout,
        &mut uout,
        &mut dots,
    )?;
    let (got, igot, ugot, dgot) = (
        out.to_vec()?,
        iout.to_vec()?,
        uout.to_vec()?,
        dots.to_vec()?,
    );
    for i in 0..n {
        let (x, y) = (a[i + 3], b[i]);
        let acc = (x * y + Vec4::splat(1.5)) - x / y;
        let pick = if ia[i].x > 0 { acc } else { -acc };
        let want = Vec4::new(pick.w, pick.z, -pick.y, pick.x);
        if got[i].to_array().map(f32::to_bits) != want.to_array().map(f32::to_bits) {
            return fail(format!("out[{i}] = {:?}, expected {want:?}", got[i]));
        }
        let iwant = ia[i].zip(ib[i], |p, q| {
            let (div, rem) = ir_div_rem(p, q);
            div.wrapping_add(rem).wrapping_sub(p.wrapping_mul(q))
        });
        if igot[i] != iwant {
            return fail(format!(
                "iout[{i}] = {:?}, expected {iwant:?} (p = {:?}, q = {:?})",
                igot[i], ia[i], ib[i]
            ));
        }
        let v = u[i];
        let uwant = Vec2::new(v.x.wrapping_mul(3), v.y.wrapping_mul(v.x))
            .zip(Vec2::splat(7u32), u32::wrapping_sub);
        if ugot[i] != uwant {
            return fail(format!("uout[{i}] = {:?}, expected {uwant:?}", ugot[i]));
        }
        let p = x * y;
        let dwant = p.x + p.y + p.z + p.w;
        if dgot[i].to_bits() != dwant.to_bits() {
            return fail(format!("dots[{i}] = {}, expected {dwant}", dgot[i]));
        }
    }
    // Checked: an overrun of a vector buffer is reported in vectors, and the device
    // stays usable (the CPU backend always checks).
    {
        let mut short = d.alloc_filled(n, Vec4::splat(0.0f32))?;
        let overrun = kernels::vector_overrun::launch(
            d,
            Launch::threads(n + 2).checked(true),
            &da.slice(3..3 + n)?,
            &mut short,
        );
        match overrun {
            Err(Error::OutOfBounds { index, len, .. }) if index >= n as u64 && len == n as u64 => {}
            other => {
                return fail(format!(
                    "a checked launch of {} threads over {n} vectors gave {other:?}, expected \
                     OutOfBounds",
                    n + 2
                ))
            }
        }
        kernels::vector_overrun::launch(d, Launch::threads(n), &da.slice(3..3 + n)?, &mut short)?;
        let copied = short.to_vec()?;
        if copied[..] != a[3..3 + n] {
            return fail("after a checked overrun, a vector copy gave wrong values");
        }
    }
    Ok(Outcome::default())
}

pub(super) fn subgroups(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
    if d.info().caps.subgroup_size.is_none() {
        // The error a kernel with subgroup operations gets there is tested in `bad_input`.
        return Ok(Outcome::skipped("the device has no subgroups"));
    }
    let n = size.dims[0];
    // 64 threads per group: whole subgroups of 32 or fewer lanes; 100: the last subgroup
    // of each group is partial wherever the size does not divide 100.
    for group in [64usize, 100] {
        subgroups_with(d, n, group, rng)?;
    }
    Ok(Outcome::default())
}

pub(super) fn subgroups_with(
    d: &Target,
    n: usize,
    group: usize,
    rng: &mut fastrand::Rng,
) -> Result<(), Failure> {
    const W: usize = kernels::SUBGROUP_OUTPUTS as usize;
    let x: Vec<i32> = (0..n).map(|_| rng.i32(-100..100)).collect();
    let f: Vec<f32> = x.iter().map(|&v| v as f32 * 0.5).collect();
    let (dx, df) = (d.upload(&x)?, d.upload(&f)?);
    let mut out = d.alloc_filled(n * W, POISON_U32 as i32)?;
    let mut fout = poisoned_f32(d, n * 2)?;
    let launch = Launch::threads(n).group(group as u32);
    kernels::subgroup_ops::launch(d, launch, &dx, &df, &mut out, &mut fout)?;
    let (got, fgot) = (out.to_vec()?, fout.to_vec()?);
    let size = got[0] as usize;
    let [lo, hi] = d.info().caps.subgroup_size.unwrap_or([1, 1]);
    if size == 0 || !(lo as usize..=hi as usize).contains(&size) {
        return fail(format!(
            "subgroup_size() = {size}, outside the device's [{lo}, {hi}]"
        ));
    }
    // Values of every thread that ran, padding threads (past n) included as 0.
    let value = |t: usize| if t < n { x[t] } else { 0 };
    for i in 0..n {
        let row = &got[i * W..i * W + W];
        let local = i % group;
        let lane = local % size;
        let base = i - lane; // the subgroup's first thread
        let end = (i - local + group).min(base + size); // past its last thread
        let member = |l: usize| (base + l < end).then(|| value(base + l));
        let members: Vec<i32> = (base..end).map(value).collect();
        let mut want: [Option<i32>; W] = [None; W];
        want[0] = Some(size as i32);
        want[1] = Some(lane as i32);
        want[2] = member((lane + 1) % size);
        want[3] = member((lane ^ 1) % size);
        want[4] = if lane < 1 {
            Some(x[i])
        } else {
            member(lane - 1)
        };
        want[5] = if lane + 2 >= size {
            Some(x[i])
        } else {
            member(lane + 2)
        };
        want[6] = Some(members.iter().fold(0i32, |a, &b| a.wrapping_add(b)));
        want[7] = members.iter().min().copied();
        want[8] = members.iter().max().copied();
        want[9] = Some(members[..lane].iter().sum());
        want[10] = Some(members[..=lane].iter().sum());
        let ballot = (0..members.len().min(32))
            .filter(|&l| members[l] > 0)
            .fold(0u32, |m, l| m | 1 << l);
        want[11] = Some(ballot as i32);
        want[12] = Some(members.iter().any(|&v| v > 90) as i32);
        want[13] = Some(members.iter().all(|&v| v > -90) as i32);
        let names = [
            "subgroup_size",
            "subgroup_lane",
            "shuffle(lane + 1)",
            "shuffle_xor(1)",
            "shuffle_up(1)",
            "shuffle_down(2)",
            "add",
            "min",
            "max",
            "exclusive_add",
            "inclusive_add",
            "ballot(v > 0)",
            "any(v > 90)",
            "all(v > -90)",
        ];
        for k in 0..W {
            // None: the operation read a lane the partial subgroup lacks (undefined).
            if want[k].is_some_and(|w| w != row[k]) {
                return fail(format!(
                    "group size {group}, thread {i} (lane {lane} of {size}): {} = {}, \
                     expected {} (subgroup values {members:?})",
                    names[k],
                    row[k],
                    want[k].unwrap_or_default()
                ));
            }
        }
        let fsum: f32 = members.iter().map(|&v| v as f32 * 0.5).sum();
        let fx = member((lane ^ 2) % size).map(|v| v as f32 * 0.5);
        if fgot[2 * i] != fsum || fx.is_some_and(|w| w != fgot[2 * i + 1]) {
            return fail(format!(
                "group size {group}, thread {i}: f32 add {} (expected {fsum}), \
                 shuffle_xor(2) {} (expected {fx:?})",
                fgot[2 * i],
                fgot[2 * i + 1]
            ));
        }
    }
    Ok(())
}

pub(super) fn shared_array_2d(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
    let (h, w) = (size.dims[0], size.dims[1]);
    let input: Vec<f32> = (0..h * w).map(|_| rng.f32()).collect();
    let din = d.upload(&input)?;
    let mut out = poisoned_f32(d, h * w)?;
    let t = kernels::TILE_2D;
    let launch = Launch::grid2d(
        w.next_multiple_of(t as usize),
        h.next_multiple_of(t as usize),
    )
    .group2d(t, t);
    kernels::transpose_2d::launch(d, launch, &din, &mut out, w as u32, h as u32)?;
    let got = out.to_vec()?;
    // out is w×h: out[c][r] = input[r][c].
    first_mismatch(&got, |i| input[(i % h) * w + i / h])?;
    Ok(Outcome::default())
}

pub(super) fn literal_inference(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let a: Vec<f32> = (0..n).map(|_| rng.i32(-100..100) as f32 * 0.5).collect();
    let ns: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
    let (da, dn) = (d.upload(&a)?, d.upload(&ns)?);
    let mut out = poisoned_f32(d, n)?;
    let mut out_n = d.alloc_filled(n, POISON_U32)?;
    kernels::literal_inference::launch(d, Launch::threads(n), &da, &dn, &mut out, &mut out_n)?;
    let got = out.to_vec()?;
    first_mismatch(&got, |i| {
        let acc: f32 = (0..4)
            .chain((0..8).step_by(2))
            .map(|j| a[(i + j) % n])
            .fold(0.0, |s, v| s + v);
        a[i] * 1.5 + acc
    })?;
    first_mismatch(&out_n.to_vec()?, |i| ns[i] % 7 + (ns[i] >> 3))?;
    Ok(Outcome::default())
}

pub(super) fn half_floats(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
    use dotcompute::f16;
    if !d.info().caps.f16 {
        // The error such a launch gets is tested in `bad_input`.
        return Ok(Outcome::skipped("the device has no f16"));
    }
    let n = size.dims[0];
    let h = |v: f32| f16::from_f32(v);
    let a: Vec<f16> = (0..n).map(|_| h((rng.f32() - 0.5) * 16.0)).collect();
    // Divisors away from zero: |b| in [0.5, 8].
    let b: Vec<f16> = (0..n)
        .map(|_| h((0.5 + rng.f32() * 7.5) * if rng.bool() { 1.0 } else { -1.0 }))
        .collect();
    let (da, db) = (d.upload(&a)?, d.upload(&b)?);
    let mut out = d.alloc_filled(n * 6, f16::NAN)?;
    let mut wide = poisoned_f32(d, n)?;
    let mut ints = d.alloc_filled(n, POISON_U32 as i32)?;
    kernels::half_ops::launch(
        d,
        Launch::threads(n),
        &da,
        &db,
        &mut out,
        &mut wide,
        &mut ints,
    )?;
    let (got, got_wide, got_ints) = (out.to_vec()?, wide.to_vec()?, ints.to_vec()?);
    // Distance in f16 units in the last place (both finite).
    let ulps = |x: f16, y: f16| {
        let key = |v: f16| {
            let b = v.to_bits() as i32;
            if b & 0x8000 != 0 {
                -(b & 0x7fff)
            } else {
                b
            }
        };
        (key(x) - key(y)).unsigned_abs()
    };
    let names = [
        "a + b",
        "a * b",
        "a - b",
        "a / b",
        "sqrt(|a|)",
        "f16(f32(a) * 0.1)",
    ];
    let mut worst = 0u32;
    for i in 0..n {
        let (x, y) = (a[i].to_f32(), b[i].to_f32());
        let want = [
            h(x + y),
            h(x * y),
            h(x - y),
            h(x / y),
            h(x.abs().sqrt()),
            h(x * 0.1),
        ];
        for k in 0..6 {
            let g = got[i * 6 + k];
            // + - * and the conversion are correctly rounded everywhere; a GPU's f16
            // division and square root may be off by one unit.
            let tol = if k == 3 || k == 4 { 1 } else { 0 };
            let e = ulps(g, want[k]);
            if g.is_nan() || e > tol {
                return fail(format!(
                    "{} with a = {}, b = {}: got {g}, expected {} ({e} ulp)",
                    names[k], a[i], b[i], want[k]
                ));
            }
            worst = worst.max(e);
        }
        let acc = (0..4).fold(0.0f32, |s, k| {
            let j = (i + k) % n;
            s + a[j].to_f32() * b[j].to_f32()
        });
        if got_wide[i] != acc {
            return fail(format!(
                "f32 accumulation at {i}: got {}, expected {acc}",
                got_wide[i]
            ));
        }
        let want_int = h(x * 8.0).to_f32() as i32;
        if got_ints[i] != want_int {
            return fail(format!(
                "i32 cast at {i} (a = {}): got {}, expected {want_int}",
                a[i], got_ints[i]
            ));
        }
    }
    Ok(Outcome::within(worst as f64))
}
