use dotcompute::prelude::*;

#[kernel]
fn uses_match(out: &mut [u32]) {
    let i = global_id().x;
    let v = match i {
        0 => 1u32,
        _ => 2u32,
    };
    out[i] = v;
}

fn main() {}
