use dotcompute::prelude::*;

#[kernel]
fn vector_add(a: &[f32], b: &[f32], out: &mut [f32]) {
    let i = global_id().x;
    if i < out.len() {
        out[i] = a[i] + b[i];
    }
}

const GROUP: u32 = 256;

#[kernel]
fn reduce_sum(x: &[f32], total: &mut [f32]) {
    let partial = shared::<f32, GROUP>();
    let lid = local_id().x;
    let mut acc: f32 = 0.0;
    let stride = group_size().x * num_groups().x;
    let mut i = global_id().x;
    while i < x.len() {
        acc += x[i];
        i += stride;
    }
    partial[lid] = acc;
    barrier();
    let mut s = group_size().x / 2;
    while s > 0 {
        if lid < s {
            partial[lid] += partial[lid + s];
        }
        barrier();
        s /= 2;
    }
    if lid == 0 {
        atomic_add(&total[0], partial[0]);
    }
}

#[test]
fn smoke() {
    let d = Device::cpu();
    let n = 1000;
    let a = d.upload(&vec![1.5f32; n]).unwrap();
    let b = d.upload(&(0..n).map(|i| i as f32).collect::<Vec<_>>()).unwrap();
    let mut out = d.alloc_filled(n, f32::NAN).unwrap();
    vector_add::launch(&d, Launch::threads(n), &a, &b, &mut out).unwrap();
    let r = out.to_vec().unwrap();
    for i in 0..n {
        assert_eq!(r[i], 1.5 + i as f32);
    }
    println!("{}", reduce_sum::ir().unwrap().to_json());
    let x = d.upload(&vec![1.0f32; 100_000]).unwrap();
    let mut t = d.alloc_filled(1, 0.0f32).unwrap();
    reduce_sum::launch(&d, Launch::threads(256 * 16).group(256), &x, &mut t).unwrap();
    assert_eq!(t.to_vec().unwrap()[0], 100_000.0);
}
