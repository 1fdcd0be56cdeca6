use dotcompute::prelude::*;

#[kernel]
fn conditional_atomic(counter: &mut [u32]) {
    let i = global_id().x;
    let hit = i > 3 && atomic_add(&counter[0], 1u32) > 0;
}

fn main() {}
