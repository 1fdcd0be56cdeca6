//! wgpu-specific bad input: buffers past the adapter's storage-binding limit, and 64-bit
//! kernels, which WGSL cannot express. Skips without an adapter unless DOTCOMPUTE_REQUIRE
//! lists wgpu.
#![cfg(feature = "wgpu")]

use crate::common::wgpu_device;

use dotcompute::prelude::*;
use dotcompute::Error;

#[kernel]
fn touch(out: &mut [u32]) {
    let i = global_id().x;
    if i < out.len() {
        out[i] = i;
    }
}

#[kernel]
fn double_f64(x: &mut [f64]) {
    let i = global_id().x;
    if i < x.len() {
        x[i] *= 2.0;
    }
}

#[test]
fn a_buffer_beyond_the_binding_limit_is_a_clear_error() {
    let Some(d) = wgpu_device() else { return };
    // The largest storage binding lavapipe allows is 128 MiB; NVIDIA allows ~2 GiB. Use
    // a buffer just above the limit when the device can allocate it.
    let limit = 128usize << 20;
    let n = limit / 4 + 1024;
    let Ok(mut big) = d.alloc::<u32>(n) else {
        return;
    };
    match touch::launch(&d, Launch::threads(n), &mut big) {
        Err(Error::TooLarge { what, limit, found }) => {
            assert!(what.contains("`out`"), "{what}");
            assert!(what.contains("largest storage binding"), "{what}");
            assert!(found > limit, "{found} bytes against a limit of {limit}");
            assert!(found >= (n * 4) as u64, "{found} bytes for {n} u32");
        }
        Ok(()) => eprintln!("this adapter binds more than 128 MiB; nothing to check"),
        Err(e) => panic!("expected a binding-size error, got {e}"),
    }
    // The device keeps working.
    let mut small = d.alloc_filled(1000, 0xDEADBEEFu32).unwrap();
    touch::launch(&d, Launch::threads(1000), &mut small).unwrap();
    assert!(small
        .to_vec()
        .unwrap()
        .iter()
        .enumerate()
        .all(|(i, &v)| v == i as u32));
}

#[test]
fn a_64_bit_kernel_is_refused_naming_the_missing_features() {
    let Some(d) = wgpu_device() else { return };
    assert!(
        !d.info().caps.f64 && !d.info().caps.i64,
        "{:?}",
        d.info().caps
    );
    let mut x = d.upload(&[1.0f64, 2.0]).unwrap();
    let e = double_f64::launch(&d, Launch::threads(2), &mut x).unwrap_err();
    assert!(
        matches!(&e, Error::Unsupported { op, .. } if *op == "f64 arithmetic"),
        "{e:?}"
    );
    assert!(e.to_string().contains("double_f64"), "{e}");
    assert!(e.to_string().contains(&d.label()), "{e}");
    // Nothing ran.
    assert_eq!(x.to_vec().unwrap(), [1.0, 2.0]);
    // Two missing features, one error naming both.
    let mut wide = d.upload(&[3u64, 4]).unwrap();
    let e = widen_f64::launch(&d, Launch::threads(2), &mut wide, &mut x).unwrap_err();
    assert!(
        matches!(&e, Error::Unsupported { op, .. } if *op == "f64 arithmetic"),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(
        text.contains("f64 arithmetic") && text.contains("64-bit integers"),
        "{text}"
    );
    assert_eq!(wide.to_vec().unwrap(), [3, 4]);
    // The device keeps working.
    let mut small = d.alloc_filled(10, 7u32).unwrap();
    touch::launch(&d, Launch::threads(10), &mut small).unwrap();
}

/// `x[i] += n[i]` over `u64` counts into `f64`: needs both 64-bit features.
#[kernel]
fn widen_f64(n: &mut [u64], x: &mut [f64]) {
    let i = global_id().x;
    if i < x.len() {
        x[i] += n[i] as f64;
        n[i] += 1;
    }
}

/// Each thread writes its global id, and a group's first thread also its group id, with
/// a barrier (which keeps the kernel out of the grid-stride form).
#[kernel]
fn ids_with_barrier(out: &mut [u32], groups: &mut [u32]) {
    let i = global_id().x;
    barrier();
    if i < out.len() {
        out[i] = i;
    }
    if local_id().x == 0 && group_id().x < groups.len() {
        groups[group_id().x] = group_id().x;
    }
}

/// Dispatches past the adapter's 65,535 groups per dimension are folded and unfolded in
/// the shader; within the limit the groups are dispatched as they are. Both give every
/// thread and group its id.
#[test]
fn folded_and_direct_dispatches_give_every_thread_its_id() {
    let Some(d) = wgpu_device() else { return };
    let max = 65_535usize; // wgpu's default max_compute_workgroups_per_dimension
    for groups in [1000usize, max + 7] {
        let n = groups * 64 - 3; // a partial last group
        let mut out = d.alloc_filled(n, u32::MAX).unwrap();
        let mut ids = d.alloc_filled(groups, u32::MAX).unwrap();
        ids_with_barrier::launch(&d, Launch::threads(n).group(64), &mut out, &mut ids).unwrap();
        let got = out.to_vec().unwrap();
        let wrong = (0..n).filter(|&i| got[i] != i as u32).count();
        assert_eq!(wrong, 0, "{groups} groups: {wrong} wrong thread ids");
        let got = ids.to_vec().unwrap();
        let wrong = (0..groups).filter(|&g| got[g] != g as u32).count();
        assert_eq!(wrong, 0, "{groups} groups: {wrong} wrong group ids");
    }
}

/// Issue 27, item 4: a backend error while a graph replays names the graph and the node,
/// with the backend's error inside (here wgpu's binding limit, known only at replay).
#[test]
fn a_graph_node_error_names_the_graph_and_the_node() {
    let Some(d) = wgpu_device() else { return };
    let limit = 128usize << 20;
    let n = limit / 4 + 1024;
    let Ok(mut big) = d.alloc::<u32>(n) else {
        return;
    };
    let mut g = dotcompute::Graph::new(&d);
    let hb = g.buffer_mut(&mut big).unwrap();
    g.launch(&touch::KERNEL, Launch::threads(n), &[hb.arg()], &[])
        .unwrap();
    let mut exec = g.instantiate().unwrap();
    match exec.launch(&d) {
        Err(Error::InGraph {
            graph,
            nodes,
            source,
        }) => {
            assert!(graph > 0);
            assert_eq!(nodes, "#0 touch");
            assert!(
                matches!(*source, Error::TooLarge { ref what, .. } if what.contains("`out`")),
                "{source}"
            );
        }
        Ok(()) => eprintln!("this adapter binds more than 128 MiB; nothing to check"),
        Err(e) => panic!("expected an error naming the graph and node, got {e}"),
    }
    drop(exec);
    // The device keeps working.
    let mut small = d.alloc_filled(10, 0xDEADBEEFu32).unwrap();
    touch::launch(&d, Launch::threads(10), &mut small).unwrap();
    assert_eq!(small.to_vec().unwrap()[9], 9);
}
