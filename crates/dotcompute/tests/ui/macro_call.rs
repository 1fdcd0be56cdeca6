use dotcompute::prelude::*;

#[kernel]
fn prints(out: &mut [u32]) {
    println!("hello from a kernel");
}

fn main() {}
