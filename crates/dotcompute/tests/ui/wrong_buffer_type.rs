use dotcompute::prelude::*;

#[kernel]
fn scale(x: &[f32], out: &mut [f32]) {
    let i = global_id().x;
    if i < out.len() {
        out[i] = x[i] * 2.0;
    }
}

fn main() -> dotcompute::Result<()> {
    let d = Device::cpu();
    let x = d.upload(&[1u32, 2, 3])?;
    let mut out = d.alloc::<f32>(3)?;
    scale::launch(&d, Launch::threads(3), &x, &mut out)
}
