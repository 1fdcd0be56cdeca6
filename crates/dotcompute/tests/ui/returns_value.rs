use dotcompute::prelude::*;

#[kernel]
fn returns(out: &mut [f32]) -> f32 {
    1.0
}

fn main() {}
