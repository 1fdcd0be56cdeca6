//! Device-to-device copies and fills on every backend present, at lengths and offsets
//! around each path's edges: below, at and above the 1 MiB from which wgpu moves them with
//! a kernel; ranges that start on a word, on 16 bytes and on the adapter's binding
//! alignment or off them; 2-, 4-, 8- and 16-byte elements. Destinations are poisoned and
//! checked element by element, inside the range and around it; sources are random (the
//! seed is printed).

use crate::common;

use dotcompute::{Device, Element, Vec4};
use half::f16;

/// Where wgpu's copies and fills switch from the driver's copy to a kernel.
const KERNEL_MIN_BYTES: usize = 1 << 20;

/// Element offsets of the source and destination ranges: aligned, off by one element,
/// off by different amounts, and past a 256-byte binding alignment.
const OFFSETS: [(usize, usize); 6] = [(0, 0), (1, 0), (0, 1), (3, 5), (4, 4), (257, 67)];

/// Range lengths in elements for elements of `size` bytes.
fn lengths(size: usize) -> Vec<usize> {
    let k = KERNEL_MIN_BYTES / size;
    vec![1, 3, 1000, k - 1, k, k + 1, 3 * k + 17]
}

fn check_type<T: Element>(
    d: &Device,
    seed: u64,
    poison: T,
    random: impl Fn(&mut fastrand::Rng) -> T,
) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let size = std::mem::size_of::<T>();
    let what = std::any::type_name::<T>();
    for n in lengths(size) {
        for (src_off, dst_off) in OFFSETS {
            let context =
                format!("{d:?}, {what}, {n} elements, offsets {src_off} → {dst_off}, seed {seed}");
            let src_data: Vec<T> = (0..src_off + n + 5).map(|_| random(&mut rng)).collect();
            let src = d.upload(&src_data).unwrap();
            let mut dst = d.alloc_filled(dst_off + n + 9, poison).unwrap();
            dst.slice_mut(dst_off..dst_off + n)
                .unwrap()
                .copy_from(&src.slice(src_off..src_off + n).unwrap())
                .unwrap_or_else(|e| panic!("copy: {context}: {e}"));
            let got = dst.to_vec().unwrap();
            for (i, g) in got.iter().enumerate() {
                let want = if (dst_off..dst_off + n).contains(&i) {
                    src_data[i - dst_off + src_off]
                } else {
                    poison
                };
                assert!(
                    *g == want,
                    "copy: {context}: element {i} is {g:?}, expected {want:?}"
                );
            }
            // A fill of the same range with a random value, over the copied data.
            let value = random(&mut rng);
            dst.slice_mut(dst_off..dst_off + n)
                .unwrap()
                .fill(value)
                .unwrap_or_else(|e| panic!("fill: {context}: {e}"));
            let got = dst.to_vec().unwrap();
            for (i, g) in got.iter().enumerate() {
                let want = if (dst_off..dst_off + n).contains(&i) {
                    value
                } else {
                    poison
                };
                assert!(
                    *g == want,
                    "fill: {context}: element {i} is {g:?}, expected {want:?}"
                );
            }
        }
    }
}

#[test]
fn device_copies_and_fills_at_every_length_and_offset_check_every_element() {
    let seed = common::seed();
    for d in common::devices() {
        // Finite halves: NaN would not compare equal to itself.
        check_type(&d, seed, f16::from_bits(0x7bff), |r| {
            f16::from_bits(r.u16(0..0x7c00))
        });
        check_type(&d, seed, u32::MAX, |r| r.u32(..u32::MAX));
        check_type(&d, seed, u64::MAX, |r| r.u64(..u64::MAX));
        check_type(&d, seed, Vec4::new(u32::MAX, 0, u32::MAX, 0), |r| {
            Vec4::new(r.u32(..), r.u32(..), r.u32(..), r.u32(..))
        });
    }
}

#[test]
fn sixteen_threads_copying_and_filling_large_ranges_get_no_wrong_result() {
    let seed = common::seed();
    for d in common::devices() {
        let d = &d;
        std::thread::scope(|scope| {
            for t in 0..16u64 {
                scope.spawn(move || {
                    let mut rng = fastrand::Rng::with_seed(seed ^ t);
                    for round in 0..4 {
                        let n = KERNEL_MIN_BYTES / 4 + rng.usize(..4096);
                        let data: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
                        let src = d.upload(&data).unwrap();
                        let mut dst = d.alloc_filled(n, 0u32).unwrap();
                        dst.copy_from(&src).unwrap();
                        drop(src);
                        let mut other = d.alloc_filled(n, 7u32).unwrap();
                        other.fill(t as u32).unwrap();
                        let got = dst.to_vec().unwrap();
                        assert!(
                            got == data,
                            "{d:?}: thread {t} round {round}: copy wrong (seed {seed})"
                        );
                        let filled = other.to_vec().unwrap();
                        assert!(
                            filled.iter().all(|&x| x == t as u32),
                            "{d:?}: thread {t} round {round}: fill wrong (seed {seed})"
                        );
                    }
                });
            }
        });
    }
}
