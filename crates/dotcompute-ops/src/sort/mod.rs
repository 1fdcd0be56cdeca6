//! Stable LSD radix sort of 32- and 64-bit keys (`u32 i32 f32`, `u64 i64 f64`), alone or
//! with values of any kernel type, ascending or descending, over all key bits or a range
//! of them.
//!
//! Up to four algorithms, chosen by the tuner per (device, key type, values, bits, size
//! class) ([`crate::tune`]; the default first, see `algorithms`): on CUDA, Onesweep's
//! single passes (`onesweep.rs`); with 32-lane subgroups on a hardware GPU, 8-bit
//! reduce-then-scan passes in ranked tiles written in digit runs (`tiles.rs`; the
//! default on NVIDIA Vulkan: 3.8× the multisplit at 2^28 keys); where the device's
//! subgroups have one fixed width of at most 32 lanes, 8-bit passes ranked by warp
//! multisplit (`multisplit.rs`; the default on lavapipe, whose subgroups are 8 lanes
//! wide); and everywhere the 4-bit sort below. All are stable and exact, so the choice
//! never changes a result. The CPU device sorts on the host with rayon.
//!
//! The 4-bit sort: each pass sorts by 4 bits in three steps that need no forward-progress guarantee
//! between groups (reduce-then-scan, as Vulkan requires): (1) each group counts the
//! digits of its tile of 2,048 keys (`GROUP × ROUNDS`; 512 on GPUs emulated on the CPU); (2) an exclusive scan of the
//! digit-major counts gives every (digit, tile) its first output position; (3) each group
//! ranks its keys in rounds of `GROUP`: a thread marks its digit in a `16 × GROUP`
//! table, the table is scanned in digit-major order, and a key's position is its tile's
//! offset for the digit plus the keys of that digit before it (earlier rounds, then
//! lower threads), which keeps equal keys in input order. Digits are taken from each key's
//! ordered bits ([`RadixKey`]: signed keys flip the sign bit, floats follow IEEE total
//! order with NaNs last); descending order complements them, so it is stable too (equal
//! keys keep their input order) and puts NaNs first.

use crate::scan::{exclusive_sum, group_inclusive_sum};
use crate::{fixed_or, index_len, invalid, padded, GROUP};
use dotcompute::prelude::*;
use dotcompute::{AsStream, Buffer, Result};

use std::ops::Range;

/// Runs `$body` with `$kind` (the key type's [`KeyKind`]) as the const `$name`: kernels
/// that take the kind as a const generic rather than a uniform compute an unsigned key's
/// digit in three instructions where the general form (signs, floats, NaNs) takes about
/// twenty, and the single passes compute each key's digit up to four times.
macro_rules! with_key_kind {
    ($kind:expr, $name:ident => $body:expr) => {
        match $kind {
            KeyKind::Unsigned => {
                const $name: u32 = KeyKind::Unsigned as u32;
                $body
            }
            KeyKind::Signed => {
                const $name: u32 = KeyKind::Signed as u32;
                $body
            }
            KeyKind::Float => {
                const $name: u32 = KeyKind::Float as u32;
                $body
            }
        }
    };
}

mod multisplit;
mod onesweep;
pub(crate) mod segments;
mod tiles;
pub use segments::{sort_segments_keys, sort_segments_pairs};

/// Bits per pass.
const RADIX_BITS: u32 = 4;
/// Digits per pass.
const RADIX: u32 = 1 << RADIX_BITS;
/// Rounds of `GROUP` keys per tile on GPUs (a tile is `GROUP × ROUNDS` keys).
const ROUNDS: u32 = 8;
/// Rounds per tile on a GPU emulated on the CPU (lavapipe, the MSL shim), given to the
/// kernels at run time (`ROUNDS = 0`): lavapipe's compiler builds a coroutine frame per
/// barrier over the whole body, so unrolled rounds took it minutes on two cores; they
/// gain nothing from longer tiles either.
const SOFTWARE_ROUNDS: u32 = 2;
/// The rank table, `RADIX × GROUP` counters, padded.
const RANKS_PADDED: u32 = RADIX * GROUP + RADIX * GROUP / 32;

/// Key types the sort takes: `u32 i32 f32` (sorted by 32 bits) and `u64 i64 f64` (by 64,
/// on devices with 64-bit integers, and `f64` ones with doubles). The sort compares each
/// key's *ordered bits*, an unsigned integer whose order is the key's: unsigned keys as
/// they are, signed ones with the sign bit flipped, and floats in IEEE total order with
/// every NaN made the largest value, so `-inf < … < -0.0 < +0.0 < … < +inf < NaN` and NaNs
/// (whatever their sign or payload) keep their input order among themselves.
pub trait RadixKey: Num + Send + Sync {
    /// The unsigned integer of the key's size (`u32` or `u64`), in which digits are taken.
    type Bits: Int;
    /// How the ordered bits are made: [`KeyKind`].
    const KIND: KeyKind;
    /// Bits per key: 32 or 64.
    const WIDTH: u32;
    /// A float key's `+inf` bits (any larger magnitude is a NaN); 0 for integers.
    const INF_BITS: u64;
    /// The key's ordered bits (host side), zero-extended to 64.
    fn ordered_bits(self) -> u64;
    /// The low `WIDTH` bits of `raw` as [`RadixKey::Bits`].
    fn bits_from(raw: u64) -> Self::Bits;
}

/// How a key's bits become its ordered bits (a kernel uniform: one kernel per bit width).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    Unsigned = 0,
    Signed = 1,
    Float = 2,
}

macro_rules! radix_key {
    ($($t:ty, $bits:ty, $kind:ident, $inf:expr, |$k:ident| $raw:expr;)*) => {$(
        impl_radix_key!($t, $bits, $kind, $inf, |$k| $raw);
    )*};
}

macro_rules! impl_radix_key {
    ($t:ty, $bits:ty, $kind:ident, $inf:expr, |$k:ident| $raw:expr) => {
        impl RadixKey for $t {
            type Bits = $bits;
            const KIND: KeyKind = KeyKind::$kind;
            const WIDTH: u32 = <$bits>::BITS;
            const INF_BITS: u64 = $inf;
            fn ordered_bits(self) -> u64 {
                let $k = self;
                ordered(Self::KIND, $raw as u64, Self::WIDTH, Self::INF_BITS)
            }
            fn bits_from(raw: u64) -> $bits {
                raw as $bits
            }
        }
    };
}
radix_key! {
    u32, u32, Unsigned, 0, |k| k;
    u64, u64, Unsigned, 0, |k| k;
    i32, u32, Signed, 0, |k| k as u32;
    i64, u64, Signed, 0, |k| k as u64;
    f32, u32, Float, 0x7f80_0000, |k| k.to_bits();
    f64, u64, Float, 0x7ff0_0000_0000_0000, |k| k.to_bits();
}

/// A key's `width` raw bits in ascending order (the kernel's `ordered_bits`, host side).
fn ordered(kind: KeyKind, bits: u64, width: u32, inf: u64) -> u64 {
    let sign = 1u64 << (width - 1);
    let all = u64::MAX >> (64 - width);
    match kind {
        KeyKind::Unsigned => bits,
        KeyKind::Signed => bits ^ sign,
        KeyKind::Float if bits & !sign > inf => all,
        KeyKind::Float if bits & sign != 0 => !bits & all,
        KeyKind::Float => bits | sign,
    }
}

/// Sort order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Order {
    Ascending,
    Descending,
}

/// The digit of `key` at `shift` (`mask` wide) of its ordered bits (see [`RadixKey`]; `kind`
/// is a [`KeyKind`]), XOR `flip` (all ones for descending order).
#[kernel_fn]
fn radix_digit<K: Num, B: Int>(key: K, kind: u32, inf: B, flip: B, shift: u32, mask: u32) -> u32 {
    // Without branches: software Vulkan's compiler (lavapipe) took minutes over the
    // branchy form unrolled in the scatter's rounds.
    let b = B::bitcast(key);
    let sign = !(!B::zero() >> 1u32);
    let float = B::cast(kind >> 1u32);
    // Signed and float keys flip the sign bit...
    let signed = B::cast((kind & 1u32) | (kind >> 1u32));
    // ...negative floats flip every bit, and NaNs become all ones (the largest).
    let negative = B::zero() - (B::cast((b & sign) != B::zero()) & float);
    let nan = B::zero() - (B::cast((b & !sign) > inf) & float);
    let ordered = (b ^ (negative | ((B::zero() - signed) & sign))) | nan;
    u32::cast(((ordered ^ flip) >> shift) & B::cast(mask))
}

/// Step 1: `counts[d * tiles + t]` is the number of keys of tile `t` with digit `d`.
#[kernel]
fn radix_count<K: Num, B: Int, const ROUNDS: u32>(
    keys: &[K],
    counts: &mut [u32],
    n: u32,
    shift: u32,
    mask: u32,
    kind: u32,
    inf: B,
    flip: B,
    tiles: u32,
    runtime_rounds: u32,
) {
    let rounds = fixed_or(ROUNDS, runtime_rounds);
    let hist = shared::<u32, RADIX>();
    let lid = local_id().x;
    let tile = group_id().x;
    if lid < RADIX {
        hist[lid] = 0;
    }
    barrier();
    let base = tile * GROUP * rounds;
    for r in 0..rounds {
        let i = base + r * GROUP + lid;
        if i < n {
            let d = radix_digit(keys[i], kind, inf, flip, shift, mask);
            atomic_add(&hist[d], 1u32);
        }
    }
    barrier();
    if lid < RADIX {
        counts[lid * tiles + tile] = hist[lid];
    }
}

/// Step 3: moves each key (and value, when `PAIRS` is 1) of the tile to its position.
#[kernel]
fn radix_scatter<K: Num, B: Int, V: Num, const PAIRS: u32, const ROUNDS: u32>(
    keys: &[K],
    values: &[V],
    keys_out: &mut [K],
    values_out: &mut [V],
    offsets: &[u32],
    n: u32,
    shift: u32,
    mask: u32,
    kind: u32,
    inf: B,
    flip: B,
    tiles: u32,
    runtime_rounds: u32,
    runtime_digits: u32,
) {
    // `ROUNDS == 0` (software GPUs) takes the loop counts at run time (`fixed_or`); the
    // digit loops' count then too.
    let rounds = fixed_or(ROUNDS, runtime_rounds);
    let digits = if ROUNDS == 0 { runtime_digits } else { RADIX };
    let ranks = shared::<u32, RANKS_PADDED>();
    let sums = shared::<u32, GROUP>();
    let run = shared::<u32, RADIX>();
    let lid = local_id().x;
    let tile = group_id().x;
    if lid < RADIX {
        run[lid] = offsets[lid * tiles + tile];
    }
    let base = tile * GROUP * rounds;
    for r in 0..rounds {
        let start = base + r * GROUP;
        let i = start + lid;
        let valid = i < n;
        let mut key = K::zero();
        let mut d = 0u32;
        if valid {
            key = keys[i];
            d = radix_digit(key, kind, inf, flip, shift, mask);
        }
        // This thread's segment of the table (digit-major order: e = digit * GROUP + lid).
        for j in 0..digits {
            ranks[padded(lid * RADIX + j)] = 0;
        }
        barrier();
        if valid {
            ranks[padded(d * GROUP + lid)] = 1;
        }
        barrier();
        let mut local = 0u32;
        for j in 0..digits {
            local += ranks[padded(lid * RADIX + j)];
        }
        let inclusive = group_inclusive_sum(sums, local);
        let mut acc = inclusive - local;
        for j in 0..digits {
            let at = padded(lid * RADIX + j);
            let c = ranks[at];
            ranks[at] = acc;
            acc += c;
        }
        barrier();
        if valid {
            let pos = run[d] + (ranks[padded(d * GROUP + lid)] - ranks[padded(d * GROUP)]);
            keys_out[pos] = key;
            if PAIRS == 1 {
                values_out[pos] = values[i];
            }
        }
        barrier();
        if lid < RADIX {
            let mut in_round = 0u32;
            if n > start {
                in_round = (n - start).min(GROUP);
            }
            let first = ranks[padded(lid * GROUP)];
            let mut end = in_round;
            if lid + 1 < RADIX {
                end = ranks[padded((lid + 1) * GROUP)];
            }
            run[lid] += end - first;
        }
        barrier();
    }
}

/// Sorts `keys` in place, stably.
///
/// ```
/// use dotcompute::prelude::*;
/// use dotcompute_ops::{sort::sort_keys, Order};
/// let d = Device::cpu();
/// let mut k = d.upload(&[3i32, -1, 2, i32::MIN])?;
/// sort_keys(&d, &mut k, Order::Ascending)?;
/// assert_eq!(k.to_vec()?, [i32::MIN, -1, 2, 3]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn sort_keys<K: RadixKey>(
    queue: &impl AsStream,
    keys: &mut Buffer<K>,
    order: Order,
) -> Result<()> {
    radix_sort::<K, u32, 0>(queue, "sort_keys", keys, None, order, 0..K::WIDTH)
}

/// Sorts `keys` in place and moves `values` with them; equal keys keep their order.
///
/// ```
/// use dotcompute::prelude::*;
/// use dotcompute_ops::{sort::sort_pairs, Order};
/// let d = Device::cpu();
/// let mut k = d.upload(&[3u32, 1, 2, 1])?;
/// let mut v = d.upload(&[30u32, 10, 20, 11])?;
/// sort_pairs(&d, &mut k, &mut v, Order::Ascending)?;
/// assert_eq!(k.to_vec()?, [1, 1, 2, 3]);
/// assert_eq!(v.to_vec()?, [10, 11, 20, 30]); // equal keys keep their order
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn sort_pairs<K: RadixKey, V: Num>(
    queue: &impl AsStream,
    keys: &mut Buffer<K>,
    values: &mut Buffer<V>,
    order: Order,
) -> Result<()> {
    radix_sort::<K, V, 1>(queue, "sort_pairs", keys, Some(values), order, 0..K::WIDTH)
}

/// As [`sort_pairs`], comparing only bits `bits` of the keys' ordered bits (see
/// [`RadixKey`]: an `i32` key's bit 31 is its flipped sign); the other bits do not affect
/// the order. `bits` must be a non-empty range within the key's width.
///
/// ```
/// use dotcompute::prelude::*;
/// use dotcompute_ops::{sort::sort_pairs_by_bits, Order};
/// let d = Device::cpu();
/// let mut k = d.upload(&[0x12u32, 0x21, 0x11, 0x22])?;
/// let mut v = d.upload(&[0u32, 1, 2, 3])?;
/// // By the low four bits only (2, 1, 1, 2), stably.
/// sort_pairs_by_bits(&d, &mut k, &mut v, Order::Ascending, 0..4)?;
/// assert_eq!(k.to_vec()?, [0x21, 0x11, 0x12, 0x22]);
/// assert_eq!(v.to_vec()?, [1, 2, 0, 3]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn sort_pairs_by_bits<K: RadixKey, V: Num>(
    queue: &impl AsStream,
    keys: &mut Buffer<K>,
    values: &mut Buffer<V>,
    order: Order,
    bits: Range<u32>,
) -> Result<()> {
    radix_sort::<K, V, 1>(queue, "sort_pairs_by_bits", keys, Some(values), order, bits)
}

/// The names of the sort algorithms `queue`'s device can run for `n` keys of `K` (with
/// values of `V` when `pairs`), its default first: the tuner's candidates, and the names
/// [`crate::tune::with_candidate`] pins (a pinned name outside this list runs the
/// default). Empty on the CPU device, which sorts on the host whatever is pinned. Tests
/// and benchmarks that pin each algorithm in turn take the list from here, so that they
/// agree with the library on where each runs.
///
/// ```
/// use dotcompute::prelude::*;
/// let d = Device::cpu();
/// assert!(dotcompute_ops::sort::sort_algorithms::<u32, u32>(&d, 1 << 20, true).is_empty());
/// ```
pub fn sort_algorithms<K: RadixKey, V: Num>(
    queue: &impl AsStream,
    n: usize,
    pairs: bool,
) -> Vec<&'static str> {
    if crate::host::is_cpu(queue) {
        return Vec::new();
    }
    let n = u32::try_from(n).unwrap_or(u32::MAX);
    algorithms::<K, V>(queue, n, pairs)
        .into_iter()
        .map(Algorithm::name)
        .collect()
}

/// What the ordered bits of a `K` are XORed with for `order`: descending order
/// complements them.
pub(crate) fn order_flip<K: RadixKey>(order: Order) -> u64 {
    match order {
        Order::Ascending => 0,
        Order::Descending => u64::MAX >> (64 - K::WIDTH),
    }
}

/// Whether `queue`'s device can sort keys of type `K`: `Error::Unsupported` naming the
/// missing capability otherwise.
pub(crate) fn check_key_type<K: RadixKey>(queue: &impl AsStream, op: &'static str) -> Result<()> {
    let caps = &queue.device().info().caps;
    let missing = if K::WIDTH == 64 && !caps.i64 {
        Some("64-bit integers")
    } else if K::WIDTH == 64 && K::KIND == KeyKind::Float && !caps.f64 {
        Some("f64")
    } else {
        None
    };
    match missing {
        Some(what) => Err(dotcompute::Error::Unsupported {
            op,
            detail: format!(
                "{}-bit {:?} keys need {what}, which device {} lacks",
                K::WIDTH,
                K::KIND,
                queue.device().info().name
            ),
        }),
        None => Ok(()),
    }
}

pub(crate) fn radix_sort<K: RadixKey, V: Num, const PAIRS: u32>(
    queue: &impl AsStream,
    op: &'static str,
    keys: &mut Buffer<K>,
    values: Option<&mut Buffer<V>>,
    order: Order,
    bits: Range<u32>,
) -> Result<()> {
    if let Some(v) = &values {
        if v.len() != keys.len() {
            return Err(invalid(
                op,
                format!("{} values for {} keys", v.len(), keys.len()),
            ));
        }
    }
    if bits.start >= bits.end || bits.end > K::WIDTH {
        return Err(invalid(
            op,
            format!(
                "key bits {}..{} are not a non-empty range within 0..{}",
                bits.start,
                bits.end,
                K::WIDTH
            ),
        ));
    }
    check_key_type::<K>(queue, op)?;
    let n = index_len(op, keys.len())?;
    if n <= 1 {
        return Ok(());
    }
    let flip = order_flip::<K>(order);
    if crate::host::is_cpu(queue) {
        return host_sort(queue, keys, values, flip, bits);
    }
    let algorithms = algorithms::<K, V>(queue, n, PAIRS == 1);
    let winner = if algorithms.len() < 2 || crate::software_gpu(queue) {
        // Software GPUs run the default unless a test pins another: measuring them says
        // nothing of real hardware, and lavapipe's compiler takes minutes over each type's
        // 4-bit kernels.
        let names: Vec<&str> = algorithms.iter().map(|a| a.name()).collect();
        crate::tune::pinned(&names).unwrap_or(0)
    } else {
        tune_sort::<K, V, PAIRS>(queue, keys, values.as_deref(), &algorithms, flip, &bits)?
    };
    sort_with::<K, V, PAIRS>(queue, algorithms[winner], keys, values, flip, bits, n)
}

/// The ways a device can sort, the default first (`DOTCOMPUTE_AUTOTUNE=off`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Algorithm {
    /// One read and one write of the keys per 8-bit pass, with a decoupled look-back
    /// (`onesweep.rs`; CUDA only).
    Onesweep8,
    /// 8-bit passes ranked by warp multisplit (`multisplit.rs`), with subgroups this wide.
    Multisplit8 { width: u32 },
    /// 8-bit passes in ranked, staged tiles, reduce-then-scan (`tiles.rs`; 32-lane
    /// subgroups on hardware GPUs).
    Tiles8,
    /// `Tiles8` for pairs of 4-byte keys and values, moved between passes as one
    /// 8-byte element a pair (`tiles::sort_packed`).
    Tiles8Packed,
    /// 4-bit passes ranked through a shared table (`radix_passes`).
    Radix4,
}

impl Algorithm {
    /// The tuner's name of the algorithm (stable: it is kept in the tuner's file).
    fn name(self) -> &'static str {
        match self {
            Algorithm::Onesweep8 => "onesweep8",
            Algorithm::Multisplit8 { .. } => "multisplit8",
            Algorithm::Tiles8 => "tiles8",
            Algorithm::Tiles8Packed => "tiles8-packed",
            Algorithm::Radix4 => "radix4",
        }
    }
}

/// The algorithms `queue`'s device can run for `n` keys, the default first: Onesweep on
/// CUDA; else the ranked tiles where 32-lane subgroups allow them, pairs moved packed
/// between passes (`tiles8-packed`) before apart (on an H200 at 2^28
/// keys, NVIDIA Vulkan 15.1 ms against the multisplit's 56.8, CUDA 14.1 against
/// Onesweep's 10.8; `docs/benchmarks.md`); else the multisplit pass where the device's
/// subgroups allow it (it makes half the 4-bit sort's passes), except on CUDA from 2^27
/// keys, where the 4-bit pass was faster (45.5 against 56.8 ms for 2^28 keys).
fn algorithms<K, V>(queue: &impl AsStream, n: u32, pairs: bool) -> Vec<Algorithm> {
    let mut out = vec![Algorithm::Radix4];
    if let Some(width) = multisplit::width(queue).filter(|_| n <= multisplit::MAX_LEN) {
        let large_on_cuda =
            queue.device().backend_kind() == dotcompute::BackendKind::Cuda && n >= 1 << 27;
        let at = if large_on_cuda { 1 } else { 0 };
        out.insert(at, Algorithm::Multisplit8 { width });
    }
    if tiles::available::<K, V>(queue, n, pairs) {
        out.insert(0, Algorithm::Tiles8);
        // Pairs travel packed by default where they can: at 2^28 pairs on an H200,
        // 24.3 ms against 28.3 on NVIDIA Vulkan and 14.2 against 19.2 on CUDA.
        if pairs && tiles::packed_half(queue, n).is_some() {
            out.insert(0, Algorithm::Tiles8Packed);
        }
    }
    if onesweep::available::<K, V>(queue, n, pairs) {
        out.insert(0, Algorithm::Onesweep8);
    }
    out
}

/// The tuner's pick among `algorithms` for this sort, measured on copies of the keys
/// (and values): the sort works in place, and the tuner may touch only its outputs.
fn tune_sort<K: RadixKey, V: Num, const PAIRS: u32>(
    queue: &impl AsStream,
    keys: &Buffer<K>,
    values: Option<&Buffer<V>>,
    algorithms: &[Algorithm],
    flip: u64,
    bits: &Range<u32>,
) -> Result<usize> {
    let n = keys.len();
    let what = match values {
        Some(_) => format!(
            "{:?} keys, {}-byte values, {} bits",
            <K as dotcompute::Element>::TYPE,
            std::mem::size_of::<V>(),
            bits.len()
        ),
        None => format!(
            "{:?} keys, {} bits",
            <K as dotcompute::Element>::TYPE,
            bits.len()
        ),
    };
    let key = crate::tune::key(queue, "sort", &what, n);
    let names: Vec<&str> = algorithms.iter().map(|a| a.name()).collect();
    let mut copies: Option<(Buffer<K>, Option<Buffer<V>>)> = None;
    let run = |i: usize| -> Result<()> {
        if copies.is_none() {
            let v = values.map(|v| queue.scratch::<V>(v.len())).transpose()?;
            copies = Some((queue.scratch::<K>(n)?, v));
        }
        let (k, v) = copies.as_mut().expect("made above");
        queue.copy_buffer(keys, k)?;
        if let (Some(src), Some(dst)) = (values, v.as_mut()) {
            queue.copy_buffer(src, dst)?;
        }
        sort_with::<K, V, PAIRS>(
            queue,
            algorithms[i],
            k,
            v.as_mut(),
            flip,
            bits.clone(),
            n as u32,
        )
    };
    crate::tune::choose_on(queue, &key, n, &names, run, || queue.device().synchronize())
}

fn sort_with<K: RadixKey, V: Num, const PAIRS: u32>(
    queue: &impl AsStream,
    algorithm: Algorithm,
    keys: &mut Buffer<K>,
    values: Option<&mut Buffer<V>>,
    flip: u64,
    bits: Range<u32>,
    n: u32,
) -> Result<()> {
    match algorithm {
        Algorithm::Onesweep8 => {
            let mut scratch =
                onesweep::Scratch::new(queue, keys, n, bits.clone(), flip, PAIRS == 1)?;
            ping_pong::<K, V, PAIRS>(
                queue,
                keys,
                values,
                bits,
                onesweep::BITS,
                |src, dst, digit| {
                    onesweep::pass::<K, V, PAIRS>(queue, &mut scratch, src, dst, n, digit, flip)
                },
            )
        }
        Algorithm::Multisplit8 { width } => {
            let plan = multisplit::Plan::new(queue, n, width);
            let mut scratch = multisplit::Scratch::new(queue, plan.spans())?;
            ping_pong::<K, V, PAIRS>(
                queue,
                keys,
                values,
                bits,
                multisplit::BITS,
                |src, dst, digit| {
                    multisplit::pass::<K, V, PAIRS>(
                        queue,
                        &plan,
                        &mut scratch,
                        src,
                        dst,
                        n,
                        digit,
                        flip,
                    )
                },
            )
        }
        // Packed pairs need two passes or more; one goes apart, as `Tiles8`.
        Algorithm::Tiles8Packed if bits.len() > tiles::BITS as usize => match values {
            Some(values) => tiles::sort_packed::<K, V>(queue, keys, values, bits, flip, n),
            None => sort_with::<K, V, PAIRS>(queue, Algorithm::Tiles8, keys, None, flip, bits, n),
        },
        Algorithm::Tiles8 | Algorithm::Tiles8Packed => {
            let plan = tiles::Plan::new(n);
            let mut scratch = tiles::Scratch::new(queue, &plan)?;
            ping_pong::<K, V, PAIRS>(queue, keys, values, bits, tiles::BITS, |src, dst, digit| {
                tiles::pass::<K, V, PAIRS>(queue, &plan, &mut scratch, src, dst, n, digit, flip)
            })
        }
        Algorithm::Radix4 if crate::software_gpu(queue) => {
            radix_passes::<K, V, PAIRS, 0>(queue, keys, values, flip, bits, n, SOFTWARE_ROUNDS)
        }
        Algorithm::Radix4 => {
            radix_passes::<K, V, PAIRS, ROUNDS>(queue, keys, values, flip, bits, n, ROUNDS)
        }
    }
}

/// A pass's source and destination: keys and values (one unread element for keys alone).
/// Each pass's digit over `bits`, `digit_bits` at a time (the last pass narrower), as
/// `(shift, mask)`.
fn digit_passes(bits: Range<u32>, digit_bits: u32) -> impl Iterator<Item = (u32, u32)> {
    let end = bits.end;
    bits.step_by(digit_bits as usize)
        .map(move |shift| (shift, (1u32 << digit_bits.min(end - shift)) - 1))
}

type PassFrom<'a, K, V> = (&'a Buffer<K>, &'a Buffer<V>);
type PassTo<'a, K, V> = (&'a mut Buffer<K>, &'a mut Buffer<V>);

/// Runs `pass` over `bits`, `digit_bits` at a time (the last pass narrower), moving the
/// keys (and values) between the caller's buffers and one spare pair, and leaves the
/// result in the caller's buffers. `pass` gets its source, its destination and the
/// digit's `(shift, mask)`.
fn ping_pong<K: RadixKey, V: Num, const PAIRS: u32>(
    queue: &impl AsStream,
    keys: &mut Buffer<K>,
    mut values: Option<&mut Buffer<V>>,
    bits: Range<u32>,
    digit_bits: u32,
    mut pass: impl FnMut(PassFrom<'_, K, V>, PassTo<'_, K, V>, (u32, u32)) -> Result<()>,
) -> Result<()> {
    let n = keys.len();
    let mut keys_alt = queue.scratch::<K>(n)?;
    // Keys alone still bind a value buffer (one element, never read).
    let value_len = if PAIRS == 1 { n } else { 1 };
    let mut values_alt = queue.scratch::<V>(value_len)?;
    let mut no_values = queue.scratch::<V>(1)?;
    let mut in_alt = false;
    for (shift, mask) in digit_passes(bits, digit_bits) {
        let (src_k, dst_k) = if in_alt {
            (&keys_alt, &mut *keys)
        } else {
            (&*keys, &mut keys_alt)
        };
        let user_values: &mut Buffer<V> = match values.as_deref_mut() {
            Some(v) => v,
            None => &mut no_values,
        };
        // Keys alone bind the one-element buffers (never touched) in either direction.
        let (src_v, dst_v) = if PAIRS == 0 || in_alt {
            (&values_alt, &mut *user_values)
        } else {
            (&*user_values, &mut values_alt)
        };
        pass((src_k, src_v), (dst_k, dst_v), (shift, mask))?;
        in_alt = !in_alt;
    }
    if in_alt {
        queue.copy_buffer(&keys_alt, keys)?;
        if let Some(v) = values {
            queue.copy_buffer(&values_alt, v)?;
        }
    }
    Ok(())
}

/// The 4-bit passes over `bits`, with tiles of `GROUP × rounds` keys (`ROUNDS` is
/// `rounds`, or 0 for loop counts given at run time).
#[allow(clippy::too_many_arguments)]
fn radix_passes<K: RadixKey, V: Num, const PAIRS: u32, const ROUNDS: u32>(
    queue: &impl AsStream,
    keys: &mut Buffer<K>,
    values: Option<&mut Buffer<V>>,
    flip: u64,
    bits: Range<u32>,
    n: u32,
    rounds: u32,
) -> Result<()> {
    let kind = K::KIND as u32;
    let (inf, flip_bits) = (K::bits_from(K::INF_BITS), K::bits_from(flip));
    let tiles = n.div_ceil(GROUP * rounds);
    let mut counts = queue.scratch::<u32>((RADIX * tiles) as usize)?;
    let mut offsets = queue.scratch::<u32>((RADIX * tiles) as usize)?;
    let groups = Launch::threads((tiles * GROUP) as usize).group(GROUP);
    ping_pong::<K, V, PAIRS>(
        queue,
        keys,
        values,
        bits,
        RADIX_BITS,
        |(src_k, src_v), (dst_k, dst_v), (shift, mask)| {
            radix_count::launch::<K, K::Bits, ROUNDS>(
                queue,
                groups,
                src_k,
                &mut counts,
                n,
                shift,
                mask,
                kind,
                inf,
                flip_bits,
                tiles,
                rounds,
            )?;
            exclusive_sum(queue, &counts, &mut offsets)?;
            radix_scatter::launch::<K, K::Bits, V, PAIRS, ROUNDS>(
                queue, groups, src_k, src_v, dst_k, dst_v, &offsets, n, shift, mask, kind, inf,
                flip_bits, tiles, rounds, RADIX,
            )
        },
    )
}

/// The CPU device's sort: a stable radix sort on the host (`host::radix_sort`) over
/// the compared bits, on the buffers' memory in place.
fn host_sort<K: RadixKey, V: Num>(
    queue: &impl AsStream,
    keys: &mut Buffer<K>,
    values: Option<&mut Buffer<V>>,
    flip: u64,
    bits: Range<u32>,
) -> Result<()> {
    use crate::host::{radix_sort, update};
    let key_bits = move |k: K| k.ordered_bits() ^ flip;
    update(queue, keys, |k| match values {
        None => {
            radix_sort::<K, V>(k, None, bits, key_bits);
            Ok(())
        }
        Some(values) => update(queue, values, |v| radix_sort(k, Some(v), bits, key_bits)),
    })?
}
