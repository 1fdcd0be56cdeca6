use dotcompute::prelude::*;

#[kernel]
fn casts_to_usize(out: &mut [f32]) {
    let i = global_id().x as usize;
    out[0] = 1.0;
}

fn main() {}
