use dotcompute::prelude::*;

#[kernel]
fn destructures(out: &mut [u32]) {
    let (a, b) = (1u32, 2u32);
}

fn main() {}
