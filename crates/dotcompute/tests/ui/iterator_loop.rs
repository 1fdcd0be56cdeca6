use dotcompute::prelude::*;

#[kernel]
fn iterates(a: &[f32], out: &mut [f32]) {
    for x in a.iter() {
        out[0] = 1.0;
    }
}

fn main() {}
