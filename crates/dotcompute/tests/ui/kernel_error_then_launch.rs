use dotcompute::prelude::*;

// A #[kernel] with an error, launched and named elsewhere: its own error is the only one
// (no "cannot find module" at the launch).

#[kernel]
fn broken(x: &mut [f32]) {
    let i = global_id().x;
    x[i] = dbg!(1.0f32);
}

fn main() -> dotcompute::Result<()> {
    let device = Device::cpu();
    let mut x = device.alloc_filled(4, 0.0f32)?;
    broken::launch(&device, Launch::threads(4), &mut x)?;
    let _def = broken::kernel();
    let _same = &broken::KERNEL;
    Ok(())
}
