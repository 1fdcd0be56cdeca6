use dotcompute::prelude::*;

// Tensor-core operations take the accumulator's first element and the shape's operand
// counts: 8 + 4 for the f16 form, 4 + 2 for TF32.

#[kernel]
fn too_few_f16_operands(a: &[f16], out: &mut [f32]) {
    let mut acc = [0.0f32; 4];
    mma_m16n8k16_f16(&mut acc[0], a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[0]);
    out[0] = acc[0];
}

#[kernel]
fn accumulator_not_an_element(a: &[f32], out: &mut [f32]) {
    let acc = 0.0f32;
    mma_m16n8k8_tf32(acc, a[0], a[1], a[2], a[3], a[4], a[5]);
    out[0] = acc;
}

fn main() {}
