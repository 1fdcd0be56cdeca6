use dotcompute::prelude::*;

#[kernel]
fn misindexes(a: &[f32], out: &mut [f32]) {
    let tile = shared::<[[f32; 17]; 16]>();
    let i = local_id().x;
    tile[i] = a[i];
    out[i] = a[i][0];
}

fn main() {}
