use dotcompute::prelude::*;

// A generic #[kernel] with an error, launched with its type inferred from the arguments:
// its own error is the only one.

#[kernel]
fn broken_axpy<T: Float>(a: T, x: &[T], y: &mut [T]) {
    let i = global_id().x;
    if i < y.len() {
        y[i] = a * x[i] + y[i] + dbg!(a);
    }
}

fn main() -> dotcompute::Result<()> {
    let device = Device::cpu();
    let x = device.upload(&[1.0f32, 2.0])?;
    let mut y = device.alloc_filled(2, 0.0f32)?;
    broken_axpy::launch(&device, Launch::threads(2), 2.0f32, &x, &mut y)?;
    Ok(())
}
