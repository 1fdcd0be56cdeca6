//! `#[kernel]` rejects unsupported constructs with an error spanned at the construct that
//! names it, and safe code cannot forge a kernel argument (`forged_arg.rs`: `Arg` is
//! opaque). Expected messages are in `tests/ui/*.stderr` (regenerate with
//! `TRYBUILD=overwrite cargo test -p dotcompute --test ui` and review the diff).

#[test]
fn unsupported_constructs_are_spanned_compile_errors() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
