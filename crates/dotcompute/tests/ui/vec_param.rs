use dotcompute::prelude::*;

#[kernel]
fn takes_a_vec(out: Vec<f32>) {}

fn main() {}
