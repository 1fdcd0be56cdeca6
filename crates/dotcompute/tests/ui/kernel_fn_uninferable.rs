use dotcompute::prelude::*;

#[kernel_fn]
fn zero<T: Num>(n: u32) -> T {
    T::zero()
}

fn main() {}
