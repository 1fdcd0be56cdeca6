use dotcompute::prelude::*;

// A local whose initial value is an error: its later uses (indexed, read, assigned) add
// no error of their own.

#[kernel]
fn uses_a_failed_local(x: &mut [f32]) {
    let i = global_id().x;
    let mut v = vec![1.0f32];
    x[i] = v[0] + v;
    v = 2.0;
}

fn main() {}
