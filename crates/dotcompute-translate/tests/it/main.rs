//! The translator's output as data: each kernel's module (IR builder, `launch`, native
//! CPU body, the CPU's split group body) formatted and compared with a reviewed
//! snapshot, and its errors as text. A change to what `#[kernel]` generates shows here
//! as a diff to review (`cargo insta review`), not only as a behaviour elsewhere.

use syn::ItemFn;

/// The module `#[kernel]` makes of `src`, formatted.
fn kernel(src: &str) -> String {
    let f: ItemFn = syn::parse_str(src).expect("the test's kernel parses");
    let tokens = dotcompute_translate::kernel(&f).expect("the kernel translates");
    prettyplease::unparse(&syn::parse2(tokens).expect("the output is a file of items"))
}

/// What `#[kernel_fn]` makes of `src`, formatted.
fn helper(src: &str) -> String {
    let f: ItemFn = syn::parse_str(src).expect("the test's helper parses");
    let tokens = dotcompute_translate::helper(&f).expect("the helper translates");
    prettyplease::unparse(&syn::parse2(tokens).expect("the output is a file of items"))
}

/// The errors `#[kernel]` reports for `src`, one per line.
fn kernel_errors(src: &str) -> String {
    let f: ItemFn = syn::parse_str(src).expect("the test's kernel parses");
    match dotcompute_translate::kernel(&f) {
        Ok(_) => panic!("the kernel translated, but it should not have"),
        Err(errors) => errors
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

#[test]
fn a_map_becomes_a_builder_a_launch_and_a_native_body() {
    insta::assert_snapshot!(kernel(
        "pub fn vector_add(a: &[f32], b: &[f32], out: &mut [f32]) {
            let i = global_id().x;
            if i < out.len() {
                out[i] = a[i] + b[i];
            }
        }"
    ));
}

#[test]
fn a_kernel_with_barriers_gets_a_group_body_split_at_them() {
    insta::assert_snapshot!(kernel(
        "fn group_sum(x: &[u32], sums: &mut [u32]) {
            let s = shared::<u32, 64>();
            let lid = local_id().x;
            s[lid] = x[global_id().x];
            barrier();
            let mut half = 32u32;
            while half > 0 {
                if lid < half {
                    s[lid] += s[lid + half];
                }
                barrier();
                half /= 2;
            }
            if lid == 0 {
                sums[group_id().x] = s[0];
            }
        }"
    ));
}

#[test]
fn a_generic_kernel_has_one_definition_per_instance() {
    insta::assert_snapshot!(kernel(
        "fn scale<T: Num, const K: u32>(x: &[T], out: &mut [T], by: T) {
            let i = global_id().x;
            let mut held = [T::zero(); K as usize];
            for k in 0..K {
                held[k] = x[i] * by;
            }
            if i < out.len() {
                out[i] = held[0];
            }
        }"
    ));
}

#[test]
fn a_kernel_fn_is_inlined_by_its_builder() {
    insta::assert_snapshot!(helper(
        "fn clamp01(v: f32) -> f32 {
            let mut r = v;
            if r < 0.0 {
                r = 0.0;
            }
            r.min(1.0)
        }"
    ));
}

#[test]
fn every_mistake_is_reported_once_at_its_place() {
    insta::assert_snapshot!(kernel_errors(
        "fn wrong(mut x: &[f32], flags: &mut [bool], out: &mut [f32]) -> f32 {
            let (a, b) = (1, 2);
            let r = &out[0];
            out[0] = x[0];
        }"
    ));
}
