//! The kernels of the seed cases, written once with `#[kernel]`.

use dotcompute::{kernel, kernel_fn, Float, Num, Vec2, Vec4};

/// Tile edge of the matrix multiply.
pub const TILE: u32 = 16;

/// `out[i] = i`.
#[kernel]
pub fn thread_ids(out: &mut [u32]) {
    let i = global_id().x;
    if i < out.len() {
        out[i] = i;
    }
}

/// `out[i] = a[i] + b[i]`.
#[kernel]
pub fn vector_add(a: &[f32], b: &[f32], out: &mut [f32]) {
    let i = global_id().x;
    if i < out.len() {
        out[i] = a[i] + b[i];
    }
}

/// `out[i] = a[i] * scale`, the scalar bound by value.
#[kernel]
pub fn vector_multiply(a: &[f32], scale: f32, out: &mut [f32]) {
    let i = global_id().x;
    if i < out.len() {
        out[i] = a[i] * scale;
    }
}

/// Sums `x` into `total[0]`: a grid-stride loop per thread, a tree reduction in the
/// dynamically sized shared array (one element per thread of a power-of-two group), and
/// one atomic add per group.
#[kernel]
pub fn reduce_sum(x: &[f32], total: &mut [f32]) {
    let partial = shared_dynamic::<f32>();
    let lid = local_id().x;
    let stride = group_size().x * num_groups().x;
    let mut acc: f32 = 0.0;
    let mut i = global_id().x;
    while i < x.len() {
        acc += x[i];
        i += stride;
    }
    partial[lid] = acc;
    barrier();
    let mut s = group_size().x / 2;
    while s > 0 {
        if lid < s {
            partial[lid] += partial[lid + s];
        }
        barrier();
        s /= 2;
    }
    if lid == 0 {
        atomic_add(&total[0], partial[0]);
    }
}

/// `c = a · b` for row-major `a` (m×k), `b` (k×n), `c` (m×n), tiled through shared memory.
/// Launch as `Launch::grid2d(n, m).group2d(TILE, TILE)`.
#[kernel]
pub fn matmul_tiled(a: &[f32], b: &[f32], c: &mut [f32], m: u32, n: u32, k: u32) {
    let ta = shared::<f32, { TILE * TILE }>();
    let tb = shared::<f32, { TILE * TILE }>();
    let col = global_id().x;
    let row = global_id().y;
    let lx = local_id().x;
    let ly = local_id().y;
    let mut acc: f32 = 0.0;
    let tiles = (k + TILE - 1) / TILE;
    for t in 0..tiles {
        let ak = t * TILE + lx;
        let bk = t * TILE + ly;
        ta[ly * TILE + lx] = if row < m && ak < k {
            a[row * k + ak]
        } else {
            0.0
        };
        tb[ly * TILE + lx] = if bk < k && col < n {
            b[bk * n + col]
        } else {
            0.0
        };
        barrier();
        for kk in 0..TILE {
            acc += ta[ly * TILE + kk] * tb[kk * TILE + lx];
        }
        barrier();
    }
    if row < m && col < n {
        c[row * n + col] = acc;
    }
}

/// `data[i] *= 2.0` in place: one read-write binding.
#[kernel]
pub fn double_in_place(data: &mut [f32]) {
    let i = global_id().x;
    if i < data.len() {
        data[i] *= 2.0;
    }
}

/// Writes, for every thread of a 3D grid of width `w` and height `h`, its linear index and
/// an encoding of its local id, or 0xFFFFFFFF when `global != group * size + local` on
/// any axis. No bounds check: threads outside the grid must not run.
#[kernel]
pub fn grid_ids(out: &mut [u32], w: u32, h: u32) {
    let gx = global_id().x;
    let gy = global_id().y;
    let gz = global_id().z;
    let idx = (gz * h + gy) * w + gx;
    let ok = gx == group_id().x * group_size().x + local_id().x
        && gy == group_id().y * group_size().y + local_id().y
        && gz == group_id().z * group_size().z + local_id().z;
    out[idx * 2] = idx;
    out[idx * 2 + 1] = if ok {
        local_id().x + 100 * local_id().y + 10000 * local_id().z
    } else {
        0xFFFF_FFFFu32
    };
}

/// Counts `values[i] % 64` per bucket: atomics on a shared histogram, then on the global
/// one.
#[kernel]
pub fn histogram64(values: &[u32], hist: &mut [u32]) {
    let local = shared::<u32, 64>();
    let lid = local_id().x;
    if lid < 64 {
        local[lid] = 0;
    }
    barrier();
    let i = global_id().x;
    if i < values.len() {
        atomic_add(&local[values[i] % 64], 1u32);
    }
    barrier();
    if lid < 64 {
        atomic_add(&hist[lid], local[lid]);
    }
}

/// The IR's integer and cast rules, eight results per input pair.
#[kernel]
pub fn int_semantics(a: &[i32], b: &[i32], fl: &[f32], out: &mut [i32]) {
    let i = global_id().x;
    if i < a.len() {
        let x = a[i];
        let y = b[i];
        let base = i * 8;
        out[base] = x / y;
        out[base + 1] = x % y;
        out[base + 2] = x * y;
        out[base + 3] = x + y - 7;
        out[base + 4] = x << (y as u32);
        out[base + 5] = x >> (y as u32);
        out[base + 6] = fl[i] as i32;
        out[base + 7] = ((x as u32) >> 3u32) as i32;
    }
}

/// `abs`, `min`, `max` and `clamp` on `i32` (the CPU backend's `abs` once returned its
/// input for every integer type, and its only unit test used `i32::MIN`, where that is
/// right).
#[kernel]
pub fn int_abs_min_max(a: &[i32], b: &[i32], out: &mut [i32]) {
    let i = global_id().x;
    if i < a.len() {
        let x = a[i];
        let y = b[i];
        out[i * 4] = x.abs();
        out[i * 4 + 1] = x.min(y);
        out[i * 4 + 2] = x.max(y);
        out[i * 4 + 3] = x.clamp(-1000, 1000);
    }
}

/// `abs` on `i64` (devices with 64-bit integers).
#[kernel]
pub fn int64_abs(a: &[i64], out: &mut [i64]) {
    let i = global_id().x;
    if i < a.len() {
        out[i] = a[i].abs();
    }
}

/// NaN semantics (IEEE 754; see `dotcompute_ir`): each bit of `out[i]` is one test on
/// `x[i]` and `y[i]`. `x != x` is the portable NaN test, which lavapipe once folded to
/// false. Instantiated for `f32` and (where devices have it) `f64`.
#[kernel]
pub fn nan_tests<T: Float>(x: &[T], y: &[T], out: &mut [u32]) {
    let i = global_id().x;
    if i < x.len() {
        let a = x[i];
        let b = y[i];
        let mut flags = 0u32;
        if a != a {
            flags = flags | 1u32;
        }
        if a == a {
            flags = flags | 2u32;
        }
        if a.is_nan() {
            flags = flags | 4u32;
        }
        if a.is_finite() {
            flags = flags | 8u32;
        }
        if a < b {
            flags = flags | 16u32;
        }
        if a != b {
            flags = flags | 32u32;
        }
        if a == b {
            flags = flags | 64u32;
        }
        if !(a >= b) {
            flags = flags | 128u32;
        }
        out[i] = flags;
    }
}

/// More float functions: `exp2 log2 tanh trunc round recip atan2`, with halves for
/// `round` (Rust rounds them away from zero, WGSL's builtin to even).
#[kernel]
pub fn math_more_f32(x: &[f32], y: &[f32], out: &mut [f32]) {
    let i = global_id().x;
    if i < x.len() {
        let a = x[i];
        let b = y[i];
        let o = i * 10;
        out[o] = (a * 0.5).exp2();
        out[o + 1] = (a.abs() + 0.5).log2();
        out[o + 2] = (a * 0.2).tanh();
        out[o + 3] = a.trunc();
        out[o + 4] = a.round();
        out[o + 5] = ((a * 2.0).floor() * 0.5).round();
        out[o + 6] = (b + 5.0).recip();
        out[o + 7] = a.atan2(b);
        out[o + 8] = (a.abs() + 0.5).rsqrt();
        out[o + 9] = b.powi((i % 16) as i32 - 6);
    }
}

/// Bit operations on `u32` and `i32`: `count_ones leading_zeros trailing_zeros
/// reverse_bits`.
#[kernel]
pub fn bits32(u: &[u32], s: &[i32], out: &mut [u32], rev: &mut [i32]) {
    let i = global_id().x;
    if i < u.len() {
        let x = u[i];
        let y = s[i];
        let o = i * 7;
        out[o] = x.count_ones();
        out[o + 1] = x.leading_zeros();
        out[o + 2] = x.trailing_zeros();
        out[o + 3] = x.reverse_bits();
        out[o + 4] = y.count_ones();
        out[o + 5] = y.leading_zeros();
        out[o + 6] = y.trailing_zeros();
        rev[i] = y.reverse_bits();
    }
}

/// `extract_byte` on `u32`: each byte by a constant index, then by an index read at run
/// time (`k[i]`, taken modulo 4), then an extracted byte scaled into a counter index as
/// a byte histogram computes one (where compilers fold shifts and masks together).
#[kernel]
pub fn bytes32(u: &[u32], k: &[u32], out: &mut [u32]) {
    let i = global_id().x;
    if i < u.len() {
        let x = u[i];
        let o = i * 6;
        out[o] = x.extract_byte(0);
        out[o + 1] = x.extract_byte(1);
        out[o + 2] = x.extract_byte(2);
        out[o + 3] = x.extract_byte(3);
        out[o + 4] = x.extract_byte(k[i]);
        out[o + 5] = (x.extract_byte(k[i] + 1) << 5) | (i % 32);
    }
}

/// `T::bitcast` among the 4-byte types: a float's bits, bits read as a float and as a
/// signed integer, round trips through float and integer registers, a generic helper, a
/// literal.
#[kernel]
pub fn bitcast32(f: &[f32], u: &[u32], bits: &mut [u32], floats: &mut [f32], ints: &mut [i32]) {
    let i = global_id().x;
    if i < f.len() {
        let x = u[i];
        bits[i * 4] = u32::bitcast(f[i]);
        bits[i * 4 + 1] = u32::bitcast(f32::bitcast(x));
        bits[i * 4 + 2] = u32::bitcast(i32::bitcast(f32::bitcast(i32::bitcast(x))));
        bits[i * 4 + 3] = bits_of(f[i]) ^ u32::bitcast(f32::bitcast(0x7f80_0000u32));
        floats[i] = f32::bitcast(x);
        ints[i] = i32::bitcast(f[i]);
    }
}

/// A generic helper: any 4-byte value's bits.
#[kernel_fn]
fn bits_of<T: Num>(v: T) -> u32 {
    u32::bitcast(v)
}

/// `T::bitcast` among the 8-byte types (devices with `f64` and 64-bit integers).
#[kernel]
pub fn bitcast64(f: &[f64], u: &[u64], bits: &mut [u64], floats: &mut [f64], ints: &mut [i64]) {
    let i = global_id().x;
    if i < f.len() {
        bits[i * 2] = u64::bitcast(f[i]);
        bits[i * 2 + 1] = u64::bitcast(i64::bitcast(f64::bitcast(u[i])));
        floats[i] = f64::bitcast(u[i]);
        ints[i] = i64::bitcast(f[i]);
    }
}

/// The bit operations on `u64` (devices with 64-bit integers).
#[kernel]
pub fn bits64(u: &[u64], counts: &mut [u32], rev: &mut [u64]) {
    let i = global_id().x;
    if i < u.len() {
        let x = u[i];
        counts[i * 3] = x.count_ones();
        counts[i * 3 + 1] = x.leading_zeros();
        counts[i * 3 + 2] = x.trailing_zeros();
        rev[i] = x.reverse_bits();
    }
}

/// `wrapping_add/sub/mul` and `saturating_add/sub` on `i32` and `u32`.
#[kernel]
pub fn wrap_sat32(a: &[i32], b: &[i32], out: &mut [i32], uout: &mut [u32]) {
    let i = global_id().x;
    if i < a.len() {
        let x = a[i];
        let y = b[i];
        let ux = x as u32;
        let uy = y as u32;
        out[i * 5] = x.wrapping_add(y);
        out[i * 5 + 1] = x.wrapping_sub(y);
        out[i * 5 + 2] = x.wrapping_mul(y);
        out[i * 5 + 3] = x.saturating_add(y);
        out[i * 5 + 4] = x.saturating_sub(y);
        uout[i * 2] = ux.saturating_add(uy);
        uout[i * 2 + 1] = ux.saturating_sub(uy);
    }
}

/// `saturating_add/sub` on `i64` and `u64` (devices with 64-bit integers).
#[kernel]
pub fn sat64(a: &[i64], b: &[i64], out: &mut [i64], uout: &mut [u64]) {
    let i = global_id().x;
    if i < a.len() {
        let x = a[i];
        let y = b[i];
        out[i * 2] = x.saturating_add(y);
        out[i * 2 + 1] = x.saturating_sub(y);
        uout[i * 2] = (x as u64).saturating_add(y as u64);
        uout[i * 2 + 1] = (x as u64).saturating_sub(y as u64);
    }
}

/// `match` on integers, as a value and as a statement: literals, `|`, inclusive and
/// exclusive ranges (negative too), a guard, `_`.
#[kernel]
pub fn match_int(v: &[i32], out: &mut [i32]) {
    let i = global_id().x;
    if i < v.len() {
        let x = v[i];
        let a = match x {
            0 => 100,
            1 | 2 => 200,
            3..=9 => 300 + x,
            -5..0 => -1,
            _ if x > 1000 => 7,
            _ => x * 2,
        };
        match x % 3 {
            0 => {
                out[i * 2 + 1] = 10;
            }
            1 => out[i * 2 + 1] = 11,
            _ => {
                out[i * 2 + 1] = x;
            }
        }
        out[i * 2] = a;
    }
}

/// Every atomic operation on `u32` and `i32`: each thread applies its op to a counter and
/// keeps the old value, so both the final counters and the set of old values are checked.
#[kernel]
pub fn atomic_ops(v: &[u32], uc: &mut [u32], ic: &mut [i32], old: &mut [u32]) {
    let i = global_id().x;
    if i < v.len() {
        let x = v[i];
        let s = x as i32 - 500;
        old[i * 9] = atomic_add(&uc[0], x);
        old[i * 9 + 1] = atomic_sub(&uc[1], x);
        old[i * 9 + 2] = atomic_min(&uc[2], x);
        old[i * 9 + 3] = atomic_max(&uc[3], x);
        old[i * 9 + 4] = atomic_and(&uc[4], !(1u32 << (x % 32)));
        old[i * 9 + 5] = atomic_or(&uc[5], 1u32 << (x % 32));
        old[i * 9 + 6] = atomic_xor(&uc[6], x);
        old[i * 9 + 7] = atomic_min(&ic[0], s) as u32;
        old[i * 9 + 8] = atomic_max(&ic[1], s) as u32;
        // Exactly one thread wins the exchange of the initial value.
        let prev = atomic_compare_exchange(&uc[7], 0xFFFF_FFFFu32, i);
        if prev == 0xFFFF_FFFFu32 {
            atomic_add(&uc[8], 1u32);
        }
        atomic_exchange(&ic[2], s);
        // Signed add and sub wrap, INT_MIN operands included (CUDA's atomicSub(int) negates
        // its operand, undefined in C++ for INT_MIN: found by the random-kernel test).
        let w = if x % 7 == 0 { i32::MIN } else { s };
        atomic_add(&ic[3], w);
        atomic_sub(&ic[4], w);
    }
}

/// Threads per group of [`atomic_loads`].
pub const ATOMIC_LOAD_GROUP: u32 = 64;

/// `atomic_load` on a buffer and a shared array: each thread adds `v[i]` to its own
/// counter and reads it back by a load (`out[3i]`), reads the shared slot its neighbour
/// in the group wrote before the barrier (`out[3i + 1]`: the neighbour's global index
/// × 3 + 1), and loads its `i32` (`out[3i + 2]`, unchanged). Every thread of a group
/// reaches the barrier, those past the end too.
#[kernel]
pub fn atomic_loads(v: &[u32], counts: &mut [u32], signed: &mut [i32], out: &mut [u32]) {
    let s = shared::<u32, ATOMIC_LOAD_GROUP>();
    let i = global_id().x;
    let lid = local_id().x;
    atomic_exchange(&s[lid], i * 3u32 + 1u32);
    barrier();
    if i < v.len() {
        atomic_add(&counts[i], v[i]);
        out[i * 3] = atomic_load(&counts[i]);
        out[i * 3 + 1] = atomic_load(&s[(lid + 1u32) % ATOMIC_LOAD_GROUP]);
        out[i * 3 + 2] = atomic_load(&signed[i]) as u32;
    }
}

/// The math functions on `f32`, one output each per input.
#[kernel]
pub fn math_f32(x: &[f32], y: &[f32], out: &mut [f32]) {
    let i = global_id().x;
    if i < x.len() {
        let a = x[i];
        let b = y[i];
        let o = i * 14;
        out[o] = a.abs().sqrt();
        out[o + 1] = (a * 0.3).sin();
        out[o + 2] = (a * 0.3).cos();
        out[o + 3] = (a * 0.1).tan();
        out[o + 4] = (a * 0.5).exp();
        out[o + 5] = (a.abs() + 0.5).ln();
        out[o + 6] = (a.abs() + 0.1).powf(b * 0.5);
        out[o + 7] = a.abs();
        out[o + 8] = a.min(b);
        out[o + 9] = a.max(b);
        out[o + 10] = a.mul_add(b, 0.5);
        out[o + 11] = a.floor();
        out[o + 12] = b.ceil();
        out[o + 13] = a.clamp(-1.0, 1.0);
    }
}

/// Loops with `step_by`, `continue`, `break`, `while`, `loop`, nested ifs and an `if`
/// value: the result is checked against the same function on the host.
#[kernel]
pub fn control_flow(n: &[u32], out: &mut [u32]) {
    let i = global_id().x;
    if i < n.len() {
        let limit = n[i] % 50;
        let mut acc: u32 = 0;
        for k in (0..limit).step_by(3) {
            if k % 2 == 0 {
                continue;
            }
            acc += k;
        }
        let mut j: u32 = 0;
        while j < limit {
            j += 7;
            if j > 30 {
                break;
            }
        }
        let mut steps: u32 = 0;
        let mut v = n[i];
        loop {
            if v <= 1 || steps >= 40 {
                break;
            }
            v = if v % 2 == 0 { v / 2 } else { 3 * v + 1 };
            steps += 1;
        }
        let mut signed: i32 = 0;
        for t in -3..(limit as i32) {
            signed += if t < 0 {
                -t
            } else if t > 10 {
                1
            } else {
                t * 2
            };
        }
        out[i * 4] = acc;
        out[i * 4 + 1] = j;
        out[i * 4 + 2] = steps;
        out[i * 4 + 3] = signed as u32;
    }
}

/// An elementwise kernel whose threads do different things: by `flags[i] % 4`, thread `i`
/// leaves everything untouched (0, an early `return`), updates `y` in place (1, 2, 3) and
/// also `count` (1). The grid may be longer than the buffers. On CUDA it runs in the
/// vector form (four threads per iteration), so lanes of one 16-byte chunk disagree.
#[kernel]
pub fn elementwise_masked(x: &[f32], flags: &[u32], y: &mut [f32], count: &mut [i32]) {
    let i = global_id().x;
    if i >= y.len() {
        return;
    }
    let f = flags[i] % 4;
    if f == 0 {
        return;
    }
    y[i] = y[i] * 2.0 + x[i];
    if f == 1 {
        count[i] = count[i] * 7 + 1;
    }
}

// ------------------------------------------------------------------ kernel functions

/// `a + (b - a) * t`.
#[kernel_fn]
pub fn lerp(a: f32, b: f32, t: f32) -> f32 {
    a + (b - a) * t
}

/// `x * x` for any numeric type (wrapping for integers).
#[kernel_fn]
pub fn square<T: Num>(x: T) -> T {
    x * x
}

/// The sum of `a[start..start + width]`, clipped to the array.
#[kernel_fn]
pub fn window_sum(a: &[f32], start: u32, width: u32) -> f32 {
    let mut s: f32 = 0.0;
    let end = (start + width).min(a.len());
    for j in start..end {
        s += a[j];
    }
    s
}

/// Stores `v` and its square (a helper calling a generic helper) at `2i` and `2i + 1`.
#[kernel_fn]
pub fn store_pair(out: &mut [f32], i: u32, v: f32) {
    out[2 * i] = v;
    out[2 * i + 1] = square(v);
}

/// Collatz steps from `n` to 1, at most 100.
#[kernel_fn]
pub fn collatz_steps(n: u32) -> u32 {
    let mut x = n;
    let mut steps = 0u32;
    while x > 1 && steps < 100 {
        x = if x % 2 == 0 { x / 2 } else { 3 * x + 1 };
        steps += 1;
    }
    steps
}

/// The sum of `partial[0..group_size().x]` (a power of two), left in `partial[0]` and
/// returned to every thread: a tree reduction with barriers inside a kernel function.
#[kernel_fn]
pub fn group_sum(partial: &mut [f32]) -> f32 {
    let lid = local_id().x;
    let mut s = group_size().x / 2;
    while s > 0 {
        if lid < s {
            partial[lid] += partial[lid + s];
        }
        barrier();
        s /= 2;
    }
    let total = partial[0];
    barrier();
    total
}

/// Kernel functions: scalar, generic, array-reading, array-writing and nested calls, with
/// untyped literals taking the parameters' types.
#[kernel]
pub fn helper_calls(a: &[f32], ints: &[u32], out: &mut [f32], counts: &mut [u32]) {
    let i = global_id().x;
    if i < a.len() {
        let l = lerp(a[i], 1.0, 0.25);
        let w = window_sum(a, i, 3);
        store_pair(out, i, l + w);
        counts[2 * i] = collatz_steps(ints[i]);
        counts[2 * i + 1] = square(ints[i] % 1000);
    }
}

/// Each group's sum through `group_sum`, written by every thread of the group minus its
/// own value (so every thread's copy of the result is checked).
#[kernel]
pub fn helper_group_sums(x: &[f32], out: &mut [f32]) {
    let partial = shared::<f32, 64>();
    let i = global_id().x;
    let lid = local_id().x;
    let v = if i < x.len() { x[i] } else { 0.0 };
    partial[lid] = v;
    barrier();
    let total = group_sum(partial);
    if i < x.len() {
        out[i] = total - v;
    }
}

/// A generic kernel with a const parameter: `out[i] = scale * sum(x[i..i + W]) + 1 +
/// (i % 7)`, with `T::zero()`, `T::one()`, `T::cast()` and `as T`.
#[kernel]
pub fn window_generic<T: Num, const W: u32>(x: &[T], scale: T, out: &mut [T]) {
    let i = global_id().x;
    if i < out.len() {
        let mut acc = T::zero();
        for k in 0..W {
            let j = i + k;
            if j < x.len() {
                acc += x[j];
            }
        }
        out[i] = acc * scale + T::one() + T::cast(i % 7) + (i % 2) as T;
    }
}

/// Multiplies every element of `a` by `s` (a local array passed to a kernel function).
#[kernel_fn]
pub fn scale_all(a: &mut [f32], s: f32) {
    for k in 0..a.len() {
        a[k] *= s;
    }
}

/// Thread-private arrays: a register block of 4 accumulators (static indices after
/// unrolling), a 16-bin histogram indexed by data, declared inside a loop (so filled
/// afresh each iteration), an immutable array, and one passed to a kernel function.
#[kernel]
pub fn local_arrays(x: &[f32], keys: &[u32], sums: &mut [f32], hist: &mut [u32]) {
    let i = global_id().x;
    if i < x.len() {
        let mut acc = [0.0f32; 4];
        let weights = [1.5f32; 4];
        for j in 0..8u32 {
            let v = x[(i + j) % x.len()];
            for k in 0..acc.len() {
                acc[k] += v * (k + 1) as f32;
            }
        }
        scale_all(acc, 0.5);
        for k in 0..4u32 {
            sums[i * 4 + k] = acc[k] + weights[k];
        }
        let mut total: u32 = 0;
        for r in 0..2u32 {
            let mut h: [u32; 16] = [r; 16];
            for j in 0..8u32 {
                let key = keys[(i + j) % keys.len()] % 16;
                h[key] += 1;
            }
            total += h[keys[i] % 16] + h[(keys[i] + 1) % 16] * 100;
        }
        hist[i] = total;
    }
}

/// Thread-private arrays sized by a const parameter and by arithmetic of it (issue 31:
/// `[v; PER]` with `const PER: u32` did not compile natively).
#[kernel]
pub fn const_local_arrays<T: Num, const PER: u32>(x: &[T], out: &mut [T]) {
    let i = global_id().x;
    if i < out.len() {
        let mut acc = [T::zero(); PER];
        for j in 0..PER * 3 {
            acc[j % PER] += x[(i + j) % x.len()];
        }
        let mut wide = [1u32; PER * 2 + 1];
        for k in 0..wide.len() {
            wide[k] += k * (i % 7);
        }
        let mut total = T::zero();
        for k in 0..PER {
            total += acc[k] * T::cast(k + 1);
        }
        out[i] = total + T::cast(wide[PER * 2] + wide.len());
    }
}

/// A const-sized local array live across a barrier (the CPU keeps it per thread in the
/// split group body).
#[kernel]
pub fn const_local_across_barrier<const PER: u32>(x: &[u32], out: &mut [u32]) {
    let s = shared::<u32, 64>();
    let l = local_id().x;
    let i = global_id().x;
    let mut keep = [0u32; PER + 1];
    for k in 0..PER + 1 {
        keep[k] = k;
        if i < x.len() {
            keep[k] += x[i];
        }
    }
    s[l] = keep[PER];
    barrier();
    if i < out.len() {
        out[i] = keep[0] + s[(l + 1) % 64];
    }
}

/// `out[i] = a[i] + 2 b[i]` and a count per `i % counts.len()`: launched on views at
/// offsets (aligned and not), which the kernel indexes from 0.
#[kernel]
pub fn view_args(a: &[f32], b: &[f32], out: &mut [f32], counts: &mut [u32]) {
    let i = global_id().x;
    if i < out.len() {
        out[i] = a[i] + b[i] * 2.0;
        atomic_add(&counts[i % counts.len()], 1u32);
    }
}

/// Outputs of `subgroup_ops` per thread (see the conformance case).
pub const SUBGROUP_OUTPUTS: u32 = 14;

/// Every subgroup operation on `i32` (and two on `f32`), written per thread. Threads past
/// the end of the data take 0 (a kernel with subgroup operations runs whole groups).
#[kernel]
pub fn subgroup_ops(x: &[i32], f: &[f32], out: &mut [i32], fout: &mut [f32]) {
    let i = global_id().x;
    let v = if i < x.len() { x[i] } else { 0 };
    let fv = if i < f.len() { f[i] } else { 0.0 };
    let lane = subgroup_lane();
    let size = subgroup_size();
    let shuffled = subgroup_shuffle(v, lane + 1);
    let xored = subgroup_shuffle_xor(v, 1);
    let up = subgroup_shuffle_up(v, 1);
    let down = subgroup_shuffle_down(v, 2);
    let sum = subgroup_add(v);
    let lo = subgroup_min(v);
    let hi = subgroup_max(v);
    let before = subgroup_exclusive_add(v);
    let upto = subgroup_inclusive_add(v);
    let ballot = subgroup_ballot(v > 0);
    let any = subgroup_any(v > 90);
    let all = subgroup_all(v > -90);
    let fsum = subgroup_add(fv);
    let fx = subgroup_shuffle_xor(fv, 2);
    if i < x.len() {
        let o = i * SUBGROUP_OUTPUTS;
        out[o] = size as i32;
        out[o + 1] = lane as i32;
        out[o + 2] = shuffled;
        out[o + 3] = xored;
        out[o + 4] = up;
        out[o + 5] = down;
        out[o + 6] = sum;
        out[o + 7] = lo;
        out[o + 8] = hi;
        out[o + 9] = before;
        out[o + 10] = upto;
        out[o + 11] = ballot as i32;
        out[o + 12] = if any { 1 } else { 0 };
        out[o + 13] = if all { 1 } else { 0 };
        fout[i * 2] = fsum;
        fout[i * 2 + 1] = fx;
    }
}

/// Edge of the tiles of `transpose_2d`.
pub const TILE_2D: u32 = 16;

/// `out = inᵀ` for an `h`×`w` row-major matrix through a padded 2-D shared tile
/// (`[[f32; 17]; 16]`: the extra column keeps a column's reads on distinct banks).
#[kernel]
pub fn transpose_2d(input: &[f32], out: &mut [f32], w: u32, h: u32) {
    let tile = shared::<[[f32; TILE_2D as usize + 1]; TILE_2D as usize]>();
    let lx = local_id().x;
    let ly = local_id().y;
    let x = group_id().x * TILE_2D + lx;
    let y = group_id().y * TILE_2D + ly;
    tile[ly][lx] = if x < w && y < h {
        input[y * w + x]
    } else {
        0.0
    };
    barrier();
    let tx = group_id().y * TILE_2D + lx;
    let ty = group_id().x * TILE_2D + ly;
    if tx < h && ty < w {
        out[ty * h + tx] = tile[lx][ly];
    }
}

/// Locals declared with untyped literals and typed by their first use, as rustc infers
/// them (`scale`, `acc`: f32; `k`: u32), and a `usize` step.
#[kernel]
pub fn literal_inference(a: &[f32], n: &[u32], out: &mut [f32], out_n: &mut [u32]) {
    let i = global_id().x;
    if i < a.len() {
        let scale = 1.5;
        let mut acc = 0.0;
        for j in 0..4u32 {
            acc += a[(i + j) % a.len()];
        }
        // `step_by` takes a usize, as in Rust.
        let stride = 2u32;
        for j in (0..8u32).step_by(stride as usize) {
            acc += a[(i + j) % a.len()];
        }
        out[i] = a[i] * scale + acc;
        let k = 7;
        out_n[i] = n[i] % k + (n[i] >> 3);
    }
}

/// f16 arithmetic (each operation rounded to f16), conversions both ways, a saturating
/// cast to i32 and an f32 accumulation of f16 products.
#[kernel]
pub fn half_ops(a: &[f16], b: &[f16], out: &mut [f16], wide: &mut [f32], ints: &mut [i32]) {
    let i = global_id().x;
    if i < a.len() {
        let x = a[i];
        let y = b[i];
        let o = i * 6;
        out[o] = x + y;
        out[o + 1] = x * y;
        out[o + 2] = x - y;
        out[o + 3] = x / y;
        out[o + 4] = x.abs().sqrt();
        out[o + 5] = (x as f32 * 0.1) as f16;
        let mut acc = 0.0f32;
        for k in 0..4u32 {
            let j = (i + k) % a.len();
            acc += a[j] as f32 * b[j] as f32;
        }
        wide[i] = acc;
        ints[i] = (x * f16::cast(8.0)) as i32;
    }
}

/// `out[i + shift] = 2 a[i]`: with `shift > 0` the last threads write past `out`
/// (`CheckedMode`).
#[kernel]
pub fn shifted_double(a: &[f32], out: &mut [f32], shift: u32) {
    let i = global_id().x;
    if i < a.len() {
        out[i + shift] = a[i] * 2.0;
    }
}

/// Each thread stores its local id at `tile[lid + extra]`: with `extra > 0` the last
/// thread of a 64-thread group writes past the shared array (`CheckedMode`).
#[kernel]
pub fn shared_overrun(out: &mut [u32], extra: u32) {
    let tile = shared::<u32, 64>();
    let l = local_id().x;
    tile[l + extra] = l;
    barrier();
    let i = global_id().x;
    if i < out.len() {
        out[i] = tile[l];
    }
}

/// Stores into a thread-private array at `k`: out of bounds for `k >= 4` (`CheckedMode`).
#[kernel]
pub fn local_overrun(out: &mut [u32], k: u32) {
    let i = global_id().x;
    let mut acc = [0u32; 4];
    acc[k] = i;
    if i < out.len() {
        out[i] = acc[0] + acc[1] + acc[2] + acc[3];
    }
}

/// Writes `far` elements past each thread's own: with a large `far` (and no checked mode)
/// the store lands outside any allocation, which faults a GPU (the device-fault test).
#[kernel]
pub fn scatter_far(out: &mut [f32], far: u32) {
    let i = global_id().x;
    if i < out.len() {
        out[i + far] = 1.0;
    }
}

/// The dot product of two 4-lane vectors: vectors as `#[kernel_fn]` arguments.
#[kernel_fn]
pub fn dot4(a: Vec4<f32>, b: Vec4<f32>) -> f32 {
    let p = a * b;
    p.x + p.y + p.z + p.w
}

/// Vector types: 16- and 8-byte elements loaded and stored whole, lane-wise arithmetic
/// (float `/`, integer `/` and `%` by zero, wrapping `*`), lanes read and rebuilt, a
/// vector chosen by an `if`, and vectors through a kernel function.
#[kernel]
pub fn vector_types(
    a: &[Vec4<f32>],
    b: &[Vec4<f32>],
    ia: &[Vec4<i32>],
    ib: &[Vec4<i32>],
    u: &[Vec2<u32>],
    out: &mut [Vec4<f32>],
    iout: &mut [Vec4<i32>],
    uout: &mut [Vec2<u32>],
    dots: &mut [f32],
) {
    let i = global_id().x;
    if i < out.len() {
        let x = a[i];
        let y = b[i];
        let mut acc = x * y + Vec4::splat(1.5);
        acc = acc - x / y;
        let pick = if ia[i].x > 0 { acc } else { -acc };
        out[i] = Vec4::new(pick.w, pick.z, -pick.y, pick.x);
        let p = ia[i];
        let q = ib[i];
        iout[i] = p / q + p % q - p * q;
        let v: Vec2<u32> = u[i];
        uout[i] = v * Vec2::new(3u32, v.x) - Vec2::splat(7);
        dots[i] = dot4(x, y);
    }
}

/// Copies `a` to `out` without a bounds test: `n + k` threads overrun both by `k`.
#[kernel]
pub fn vector_overrun(a: &[Vec4<f32>], out: &mut [Vec4<f32>]) {
    let i = global_id().x;
    out[i] = a[i];
}

/// `out[i] = a[i] + b[i]` on 16-byte vectors: the vector add a user writes with `Vec4`.
#[kernel]
pub fn vector_add4(a: &[Vec4<f32>], b: &[Vec4<f32>], out: &mut [Vec4<f32>]) {
    let i = global_id().x;
    if i < out.len() {
        out[i] = a[i] + b[i];
    }
}

/// Every thread below `count` adds 1.0 to `total[0]`: f32 atomics under full contention.
#[kernel]
pub fn contended_add(total: &mut [f32], count: u32) {
    let i = global_id().x;
    if i < count {
        atomic_add(&total[0], 1.0f32);
    }
}

/// Threads per row of `softmax_rows`.
pub const SOFTMAX_GROUP: u32 = 256;

/// Row softmax of a row-major matrix with `cols` columns, one group of
/// [`SOFTMAX_GROUP`] threads per row: the row's maximum and sum through shared-memory
/// tree reductions (the row-softmax figure).
#[kernel]
pub fn softmax_rows(x: &[f32], out: &mut [f32], cols: u32) {
    let red = shared::<f32, 256>();
    let lid = local_id().x;
    let base = group_id().x * cols;
    let mut m = f32::NEG_INFINITY;
    let mut j = lid;
    while j < cols {
        m = m.max(x[base + j]);
        j += SOFTMAX_GROUP;
    }
    red[lid] = m;
    barrier();
    let mut s = SOFTMAX_GROUP / 2;
    while s > 0 {
        if lid < s {
            red[lid] = red[lid].max(red[lid + s]);
        }
        barrier();
        s /= 2;
    }
    let top = red[0];
    barrier();
    let mut sum = 0.0f32;
    j = lid;
    while j < cols {
        sum += (x[base + j] - top).exp();
        j += SOFTMAX_GROUP;
    }
    red[lid] = sum;
    barrier();
    s = SOFTMAX_GROUP / 2;
    while s > 0 {
        if lid < s {
            red[lid] += red[lid + s];
        }
        barrier();
        s /= 2;
    }
    let total = red[0];
    j = lid;
    while j < cols {
        out[base + j] = (x[base + j] - top).exp() / total;
        j += SOFTMAX_GROUP;
    }
}

/// 5-point stencil on a row-major `w`×`h` grid, written as a new user would (one thread
/// per point, neighbours read from memory): `out = x/2 + (north + south + east + west)/8`
/// inside, `out = x` on the border (the stencil figure).
/// Launch as `Launch::grid2d(w, h)`.
#[kernel]
pub fn stencil5(x: &[f32], out: &mut [f32], w: u32, h: u32) {
    let gx = global_id().x;
    let gy = global_id().y;
    if gx < w && gy < h {
        let i = gy * w + gx;
        if gx == 0 || gy == 0 || gx == w - 1 || gy == h - 1 {
            out[i] = x[i];
        } else {
            out[i] = 0.5 * x[i] + 0.125 * (x[i - 1] + x[i + 1] + x[i - w] + x[i + w]);
        }
    }
}

/// Every thread below `total.len()` adds 1.0 to its own element: f32 atomics without
/// contention (the reference of `contended_add`).
#[kernel]
pub fn spread_add(total: &mut [f32]) {
    let i = global_id().x;
    if i < total.len() {
        atomic_add(&total[i], 1.0f32);
    }
}

/// Threads per group of [`block_scan`].
pub const SCAN_GROUP: u32 = 256;

/// Inclusive prefix sums (wrapping) within each group of [`SCAN_GROUP`] threads
/// (Hillis-Steele: two barriers per step, the neighbour's value held across the first).
#[kernel]
pub fn block_scan(x: &[u32], out: &mut [u32]) {
    let tmp = shared::<u32, { SCAN_GROUP }>();
    let i = global_id().x;
    let l = local_id().x;
    tmp[l] = if i < x.len() { x[i] } else { 0 };
    barrier();
    let mut off = 1u32;
    while off < SCAN_GROUP {
        let add = if l >= off { tmp[l - off] } else { 0 };
        barrier();
        tmp[l] += add;
        barrier();
        off *= 2;
    }
    if i < x.len() {
        out[i] = tmp[l];
    }
}
