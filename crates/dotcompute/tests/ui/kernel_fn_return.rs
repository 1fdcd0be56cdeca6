use dotcompute::prelude::*;

#[kernel_fn]
fn early(x: f32) -> f32 {
    if x < 0.0 {
        return 0.0;
    }
    x
}

fn main() {}
