use dotcompute::prelude::*;

#[kernel]
fn uses_a_closure(out: &mut [f32]) {
    let i = global_id().x;
    let f = |x: f32| x * 2.0;
    out[i] = 1.0;
}

fn main() {}
