use dotcompute::prelude::*;

// A #[kernel_fn] calling a plain function: the same one error as from a kernel.

fn sq(x: f32) -> f32 {
    x * x
}

#[kernel_fn]
fn norm(x: f32, y: f32) -> f32 {
    (sq(x) + y * y).sqrt()
}

fn main() {}
