use dotcompute::prelude::*;

// A #[kernel_fn] with an error, called from a kernel: its own error is the only one (no
// "cannot find" for the call after it).

#[kernel_fn]
fn early(x: f32) -> f32 {
    if x < 0.0 {
        return 0.0;
    }
    x
}

#[kernel]
fn uses_early(out: &mut [f32]) {
    let i = global_id().x;
    if i < out.len() {
        let y = early(out[i]);
        out[i] = y * 2.0;
    }
}

fn main() {}
