//! `#[kernel]` rejects unsupported constructs with an error spanned at the construct that
//! names it. Expected messages are in `tests/ui/*.stderr` (regenerate with
//! `TRYBUILD=overwrite cargo test -p dotcompute --test ui` and review the diff).

#[test]
fn unsupported_constructs_are_spanned_compile_errors() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
