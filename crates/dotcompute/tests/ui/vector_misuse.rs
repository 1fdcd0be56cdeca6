use dotcompute::prelude::*;

// Lanes are 32-bit: a Vec4 of f64 would be a 32-byte element.
#[kernel]
fn wide_lanes(a: &[Vec4<f64>]) {}

// A kernel's scalar parameters are scalars.
#[kernel]
fn vector_scalar(v: Vec4<f32>, out: &mut [f32]) {}

#[kernel]
fn lane_assignment(a: &[Vec4<f32>], out: &mut [Vec4<f32>]) {
    let i = global_id().x;
    let mut v = a[i];
    v.x = 1.0;
    let s = shared::<Vec2<u32>, 64>();
    out[i] = v;
}

fn main() {}
