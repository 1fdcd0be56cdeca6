use dotcompute::prelude::*;

#[kernel]
fn writes_its_input(a: &[f32], out: &mut [f32]) {
    let i = global_id().x;
    let fixed = [0.0f32; 4];
    a[i] = 1.0;
    fixed[0] = 2.0;
    out[i] = fixed[0];
}

fn main() {}
