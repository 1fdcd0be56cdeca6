// An `Arg` can only come from its constructors: rebuilding one with another range, element
// type or access (issue 27, item 3) must not compile.
use dotcompute::prelude::*;
use dotcompute::Arg;

fn main() {
    let device = Device::cpu();
    let b = device.upload(&[1.0f32, 2.0]).unwrap();
    let honest = Arg::buffer(&b);
    // The variants and their fields are gone...
    if let Arg::Buffer { offset, .. } = &honest {
        let _ = offset;
    }
    // ...and the inside is private.
    let _inside = honest.0;
}
