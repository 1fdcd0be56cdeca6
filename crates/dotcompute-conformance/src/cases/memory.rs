//! Buffers and launches: transfers, copies and views, fills, empty and too-large
//! allocations, pool reuse, and checked mode.

use super::*;

/// Checked launches (`Launch::checked`): a correct kernel gives every element right; a
/// store past a buffer, past a shared array or past a local array is
/// `Error::OutOfBounds` naming the kernel, the array, the index and the length, on every
/// backend (the CPU always checks); and the device keeps working after each.
pub(super) fn checked_mode(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let a: Vec<f32> = (0..n).map(|_| rng.f32() * 100.0 - 50.0).collect();
    let da = d.upload(&a)?;
    let run_correct = |what: &str| -> Result<(), Failure> {
        let mut out = poisoned_f32(d, n)?;
        kernels::shifted_double::launch(d, Launch::threads(n).checked(true), &da, &mut out, 0)?;
        let got = out.to_vec()?;
        for i in 0..n {
            if got[i] != a[i] * 2.0 {
                return fail(format!(
                    "{what}: element {i}: got {}, expected {}",
                    got[i],
                    a[i] * 2.0
                ));
            }
        }
        Ok(())
    };
    run_correct("a checked launch of a correct kernel")?;
    let expect_oob = |result: dotcompute::Result<()>,
                      kernel: &str,
                      array: &str,
                      at: u64,
                      length: u64|
     -> Result<(), Failure> {
        match result {
            Err(Error::OutOfBounds {
                kernel: k,
                arg,
                index,
                len,
            }) if k == kernel && arg == array && index == at && len == length => Ok(()),
            Err(e) => fail(format!(
                "{kernel}: expected OutOfBounds {{ arg: {array}, index: {at}, len: {length} }}, got: {e}"
            )),
            Ok(()) => fail(format!(
                "{kernel}: a checked launch that accesses {array}[{at}] (length {length}) succeeded"
            )),
        }
    };
    let mut out = poisoned_f32(d, n)?;
    let shifted =
        kernels::shifted_double::launch(d, Launch::threads(n).checked(true), &da, &mut out, 1);
    expect_oob(shifted, "shifted_double", "out", n as u64, n as u64)?;
    run_correct("after a buffer overrun")?;

    let mut ids = d.alloc_filled(n, POISON_U32)?;
    let shared =
        kernels::shared_overrun::launch(d, Launch::threads(n).group(64).checked(true), &mut ids, 1);
    expect_oob(shared, "shared_overrun", "tile", 64, 64)?;
    run_correct("after a shared-array overrun")?;

    let local = kernels::local_overrun::launch(d, Launch::threads(n).checked(true), &mut ids, 4);
    expect_oob(local, "local_overrun", "acc", 4, 4)?;
    run_correct("after a local-array overrun")?;
    Ok(Outcome::default())
}

// ------------------------------------------------------------------ helpers

pub(super) fn round_trip<T: Element>(d: &Device, data: &[T]) -> Result<(), Failure> {
    let buf = d.upload(data)?;
    let back = buf.to_vec()?;
    let (a, b): (&[u8], &[u8]) = (bytemuck::cast_slice(data), bytemuck::cast_slice(&back));
    if a != b {
        let i = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(0) / std::mem::size_of::<T>();
        return fail(format!(
            "{}: element {i} differs after upload/to_vec",
            std::any::type_name::<T>()
        ));
    }
    Ok(())
}

pub(super) fn upload_download(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    // Random bit patterns: NaN payloads and -0.0 must survive too.
    round_trip(
        d,
        &(0..n)
            .map(|_| f32::from_bits(rng.u32(..)))
            .collect::<Vec<_>>(),
    )?;
    round_trip(d, &(0..n).map(|_| rng.i32(..)).collect::<Vec<_>>())?;
    round_trip(d, &(0..n).map(|_| rng.u32(..)).collect::<Vec<_>>())?;
    if d.info().caps.f64 {
        round_trip(
            d,
            &(0..n)
                .map(|_| f64::from_bits(rng.u64(..)))
                .collect::<Vec<_>>(),
        )?;
    }
    Ok(Outcome::default())
}

pub(super) fn copy_and_views(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let src: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
    let dsrc = d.upload(&src)?;
    // Whole-buffer device-to-device copy.
    let mut ddst = d.alloc_filled(n, POISON_U32)?;
    ddst.copy_from(&dsrc)?;
    first_mismatch(&ddst.to_vec()?, |i| src[i])?;
    // A partial copy between offsets, mirrored on host vectors.
    let len = rng.usize(0..=n);
    let so = rng.usize(0..=n - len);
    let dof = rng.usize(0..=n - len);
    let mut host = vec![POISON_U32; n];
    host[dof..dof + len].copy_from_slice(&src[so..so + len]);
    let mut ddst = d.alloc_filled(n, POISON_U32)?;
    ddst.slice_mut(dof..dof + len)?
        .copy_from(&dsrc.slice(so..so + len)?)?;
    first_mismatch(&ddst.to_vec()?, |i| host[i])?;
    // Reading a view, and a view of a view.
    let view = dsrc.slice(so..so + len)?;
    first_mismatch(&view.to_vec()?, |i| src[so + i])?;
    let inner = view.slice(len / 3..len - len / 3)?;
    first_mismatch(&inner.to_vec()?, |i| src[so + len / 3 + i])?;
    // Writing through a view.
    let patch: Vec<u32> = (0..len).map(|_| rng.u32(..)).collect();
    host[dof..dof + len].copy_from_slice(&patch);
    ddst.slice_mut(dof..dof + len)?.write(&patch)?;
    first_mismatch(&ddst.to_vec()?, |i| host[i])?;
    // Out-of-range views are errors, not panics.
    if dsrc.slice(0..n + 1).is_ok() || ddst.slice_mut(n..n + 1).is_ok() {
        return fail("a view past the end was accepted");
    }
    let mut short = d.alloc::<u32>(n.saturating_sub(1))?;
    if short.copy_from(&dsrc).is_ok() {
        return fail("a copy between buffers of different lengths was accepted");
    }
    Ok(Outcome::default())
}

pub(super) fn fill(d: &Target, size: Size, rng: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let n = size.dims[0];
    let value = rng.f32() * 100.0 - 50.0;
    let mut b = d.alloc_filled(n, f32::NAN)?;
    b.fill(value)?;
    first_mismatch(&b.to_vec()?, |_| value)?;
    // A sub-range fill leaves the rest alone; an 8-byte pattern.
    let mut w = d.alloc_filled(n, 7u64)?;
    let (lo, hi) = (n / 4, n - n / 4);
    w.slice_mut(lo..hi)?.fill(0x0123_4567_89AB_CDEF)?;
    first_mismatch(&w.to_vec()?, |i| {
        if (lo..hi).contains(&i) {
            0x0123_4567_89AB_CDEF
        } else {
            7
        }
    })?;
    Ok(Outcome::default())
}

pub(super) fn alloc_zero(d: &Target, _: Size, _: &mut fastrand::Rng) -> Result<Outcome, Failure> {
    let mut empty = d.alloc::<f32>(0)?;
    if !empty.is_empty() || !empty.to_vec()?.is_empty() {
        return fail("an empty buffer is not empty");
    }
    empty.fill(1.0)?;
    match kernels::double_in_place::launch(d, Launch::threads(1), &mut empty) {
        Err(Error::EmptyBuffer { .. }) => {}
        other => {
            return fail(format!(
                "binding an empty buffer gave {other:?}, expected EmptyBuffer"
            ))
        }
    }
    Ok(Outcome::default())
}

pub(super) fn alloc_too_large(
    d: &Target,
    _: Size,
    _: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
    let too_many = (d.info().memory_bytes / 4 + 1) as usize * 2;
    match d.alloc::<f32>(too_many) {
        Err(Error::OutOfMemory { .. }) => {}
        Ok(_) => {
            return fail(format!(
                "allocating {too_many} f32 succeeded on a device of {} bytes",
                d.info().memory_bytes
            ))
        }
        Err(e) => return fail(format!("expected OutOfMemory, got: {e}")),
    }
    // The device keeps working.
    let b = d.upload(&[1u32, 2, 3])?;
    first_mismatch(&b.to_vec()?, |i| i as u32 + 1)?;
    Ok(Outcome::default())
}

pub(super) fn pool_reuse(
    d: &Target,
    size: Size,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, Failure> {
    let cycles = size.dims[0];
    let sizes = [1usize, 100, 1000, 4096, 10_000, 65_536, 250_000];
    // Warm the pool with one buffer of each size, as a running program would have.
    drop(
        sizes
            .iter()
            .map(|&s| d.alloc::<f32>(s))
            .collect::<Result<Vec<_>, _>>()?,
    );
    let before = d.memory_stats();
    let mut live: Vec<Buffer<f32>> = Vec::new();
    for _ in 0..cycles {
        live.push(d.alloc::<f32>(sizes[rng.usize(..sizes.len())])?);
        if live.len() > 4 || rng.bool() {
            live.swap_remove(rng.usize(..live.len()));
        }
    }
    drop(live);
    let after = d.memory_stats();
    let driver = after.driver_allocations - before.driver_allocations;
    let hits = after.pool_hits - before.pool_hits;
    let served = hits as f64 / (hits + driver) as f64;
    if served < 0.9 {
        return fail(format!(
            "the pool served {:.1}% of {cycles} allocations (driver: {driver})",
            served * 100.0
        ));
    }
    if after.bytes_in_use != before.bytes_in_use {
        return fail(format!(
            "bytes in use went from {} to {}",
            before.bytes_in_use, after.bytes_in_use
        ));
    }
    Ok(Outcome::within(1.0 - served))
}
