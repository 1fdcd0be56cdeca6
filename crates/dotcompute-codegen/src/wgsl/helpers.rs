//! WGSL text every module may need: the checked-mode bounds test and the helpers with
//! the IR's semantics for casts, saturation and NaN.

/// Checked mode: `i < n`, and otherwise the launch's first violation recorded in
/// `dc_err` (the invocation that sets the flag writes the rest). The flag is set by
/// `atomicOr`, which cannot fail, so the helper has no loop: a retried weak
/// compare-exchange (its form before 2026-11-28) put a loop inside the branch of every
/// checked access, and lavapipe then ran the subgroup operations after such a branch
/// with lanes missing (the multisplit sort's scatter lost keys, silently).
pub(super) const CHECKED_HELPER: &str = "fn dc_in(i: u32, n: u32, what: u32) -> bool {
    if (i < n) {
        return true;
    }
    if (atomicOr(&dc_err[0], 1u) == 0u) {
        atomicStore(&dc_err[1], what);
        atomicStore(&dc_err[2], i);
        atomicStore(&dc_err[3], n);
    }
    return false;
}
";

/// Helpers with the IR's semantics: runtime identities, integer `abs`, float comparisons,
/// saturating arithmetic, rounding and casts (Rust's `as`). NaN is detected on the bits:
/// drivers may fold `x != x` to false (lavapipe does), integer tests they must keep.
pub(super) const HELPERS: &str = "
// Identities that make an operation on constants a runtime one (see `runtime`).
fn dc_rt_i32(x: i32) -> i32 {
    return x;
}

fn dc_rt_u32(x: u32) -> u32 {
    return x;
}

fn dc_rt_f32(x: f32) -> f32 {
    return x;
}

fn dc_abs_i32(x: i32) -> i32 {
    if (x < 0i && x != (-2147483647i - 1i)) {
        return -x;
    }
    return x;
}

fn dc_is_nan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

fn dc_is_finite(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u;
}

fn dc_feq(x: f32, y: f32) -> bool {
    return !dc_is_nan(x) && !dc_is_nan(y) && x == y;
}

fn dc_sat_add_u32(a: u32, b: u32) -> u32 {
    let r = a + b;
    return select(r, 0xffffffffu, r < a);
}

fn dc_sat_sub_u32(a: u32, b: u32) -> u32 {
    return select(0u, a - b, a > b);
}

fn dc_sat_add_i32(a: i32, b: i32) -> i32 {
    let r = a + b;
    let overflow = ((a ^ r) & (b ^ r)) < 0i;
    return select(r, select(2147483647i, i32(-2147483648), a < 0i), overflow);
}

fn dc_sat_sub_i32(a: i32, b: i32) -> i32 {
    let r = a - b;
    let overflow = ((a ^ b) & (a ^ r)) < 0i;
    return select(r, select(2147483647i, i32(-2147483648), a < 0i), overflow);
}

fn dc_round(x: f32) -> f32 {
    let t = trunc(x);
    if (abs(x - t) >= 0.5f) { return t + sign(x); }
    return t;
}

fn dc_f32_to_i32(x: f32) -> i32 {
    if (dc_is_nan(x)) { return 0i; }
    if (x >= 2147483648.0f) { return 2147483647i; }
    if (x <= -2147483648.0f) { return i32(-2147483648); }
    return i32(x);
}

fn dc_f32_to_u32(x: f32) -> u32 {
    if (dc_is_nan(x) || x <= 0.0f) { return 0u; }
    if (x >= 4294967296.0f) { return 4294967295u; }
    return u32(x);
}
";
