use dotcompute::prelude::*;

#[kernel]
fn hypot(a: &[f32], out: &mut [f32]) {
    let i = global_id().x;
    out[i] = a[i].hypot(2.0);
}

fn main() {}
