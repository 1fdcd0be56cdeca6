use dotcompute::prelude::*;

// A plain function: kernels call only `#[kernel_fn]`s, and rustc says it is not one.

fn helper(x: f32) -> f32 {
    x * 2.0
}

#[kernel]
fn calls_a_function(out: &mut [f32]) {
    let i = global_id().x;
    out[i] = helper(1.0);
}

fn main() {}
