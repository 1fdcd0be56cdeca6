//! `cargo run --example vector_add -p dotcompute`: the README's example.
use dotcompute::prelude::*;

#[kernel]
fn vector_add(a: &[f32], b: &[f32], out: &mut [f32]) {
    let i = global_id().x;
    if i < out.len() {
        out[i] = a[i] + b[i];
    }
}

fn main() -> dotcompute::Result<()> {
    let device = Device::best()?; // CUDA > Metal > wgpu > CPU; DOTCOMPUTE_BACKEND overrides
    let n = 1_000_003;
    let a = device.upload(&vec![1.0f32; n])?;
    let b = device.upload(&(0..n).map(|i| i as f32).collect::<Vec<_>>())?;
    let mut out = device.alloc::<f32>(n)?;
    vector_add::launch(&device, Launch::threads(n), &a, &b, &mut out)?;
    let result = out.to_vec()?;
    assert_eq!(result[41], 42.0);
    let wrong = result
        .iter()
        .enumerate()
        .filter(|&(i, &v)| v != 1.0 + i as f32)
        .count();
    println!("{n} elements on {}: {wrong} wrong", device.label());
    Ok(())
}
