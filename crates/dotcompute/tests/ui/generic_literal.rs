use dotcompute::prelude::*;

// An untyped float literal cannot be a `T`, as in Rust: use `T::cast(2.0)`.
#[kernel]
fn doubles<T: Float>(x: &[T], out: &mut [T]) {
    let i = global_id().x;
    if i < out.len() {
        out[i] = x[i] * 2.0;
    }
}

fn main() {}
