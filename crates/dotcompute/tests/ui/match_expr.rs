use dotcompute::prelude::*;

// `match` on integers is supported; a binding pattern is not.
#[kernel]
fn uses_match(out: &mut [u32]) {
    let i = global_id().x;
    let v = match i {
        0 => 1u32,
        n => n,
    };
    out[i] = v;
}

fn main() {}
