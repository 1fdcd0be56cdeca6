//! Lanes: a split group body's barrier-free region run for [`LANES`] threads at a time,
//! one statement for all of them, instead of one thread after another (the work-group
//! vectorisation of pocl and ISPC's gangs). Each per-thread value is a `[T; LANES]` and
//! each operation a loop over the lanes, which the compiler turns into vector
//! instructions where it can.
//!
//! Control flow that differs between the lanes runs under a *mask*: an `if` runs both
//! branches, each for the lanes that take it (skipped when none does); a `while` runs
//! until no lane continues; an assignment inside either changes only the masked lanes.
//! Lanes outside the mask (threads past the group's end, threads that have returned, or
//! threads on the other branch) may compute garbage, but they never load, store or raise
//! an error: every memory access here takes the mask, and only its lanes touch memory.
//! So a region gives the same results as the thread-by-thread loop for every kernel
//! without a data race (threads of one region writing what others of it read are a race
//! on every backend, without a barrier between them).
//!
//! Two representations keep the values in vector registers where LLVM would otherwise
//! split them into scalars: a comparison of lanes gives mask words ([`B`], all bits set
//! for true) rather than `[bool; LANES]` (packed bytes, rebuilt with scalar shifts at
//! every test), and consecutive elements move as one vector load or store
//! ([`read_run`], [`write_run`]) rather than an array copy. A lane `bool` can still be a
//! plain `bool` (a scalar splat into lanes, a `bool` buffer); [`bools`] and [`conform`]
//! let the two forms meet.
//!
//! Where the macro knows an index is a *run* (lane `l` holds `base + l`), accesses take
//! only the base ([`load_run`], [`store_run`]; [`load_run_if`] for a mutable local that
//! is a run until a masked assignment splits it), and a comparison of a run with one
//! value has scalar tests of the run's ends ([`run_below`] and its kin) that let a
//! branch run alone where every lane agrees.
//!
//! The macro (`dotcompute-macros`, `translate/lanes.rs`) decides which regions run this
//! way; the others keep the loop over threads.

use crate::fission::Group;
use crate::runtime::{KernelElem, KernelIndex, View};

/// A process-wide on/off setting, read from the environment on first use.
struct Switch(std::sync::atomic::AtomicU8);

impl Switch {
    const fn new() -> Switch {
        Switch(std::sync::atomic::AtomicU8::new(0))
    }

    #[inline(always)]
    fn get(&self, first: impl FnOnce() -> bool) -> bool {
        match self.0.load(std::sync::atomic::Ordering::Relaxed) {
            1 => true,
            2 => false,
            _ => {
                let on = first();
                self.set(on);
                on
            }
        }
    }

    fn set(&self, on: bool) {
        self.0
            .store(if on { 1 } else { 2 }, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Whether on/off variable `var` says off (strictly parsed; a value it does not accept
/// counts as on here, and the CPU device refuses every launch with `Error::Config`
/// naming it: `CpuBackend::settings_error`).
fn off_in_env(var: &'static str) -> bool {
    dotcompute_hal::settings::switch(var) == Ok(Some(false))
}

static LANE_FORM: Switch = Switch::new();

/// Whether regions that lane form takes run in it (the default), or thread by thread
/// (`DOTCOMPUTE_CPU_LANES=0`, or [`set_enabled`]); benchmarks compare the two.
#[inline(always)]
pub fn enabled() -> bool {
    LANE_FORM.get(|| !off_in_env("DOTCOMPUTE_CPU_LANES"))
}

/// Chooses lane form or thread by thread for the whole process.
pub fn set_enabled(on: bool) {
    LANE_FORM.set(on)
}

/// Runs `f`, compiled as a function of its own: a lane region optimised apart from the
/// rest of a large group body.
#[inline(never)]
pub fn apart(f: impl FnOnce()) {
    f()
}

static AVX2: Switch = Switch::new();

/// Whether the processor has AVX2 (and `DOTCOMPUTE_CPU_AVX2` is not `0`): the group
/// bodies of kernels split at barriers then run a copy compiled for it (a lane of f32 is
/// one 8-wide register, a mask blends in one instruction).
#[inline(always)]
pub fn avx2() -> bool {
    AVX2.get(|| {
        #[cfg(target_arch = "x86_64")]
        let has = std::arch::is_x86_feature_detected!("avx2");
        #[cfg(not(target_arch = "x86_64"))]
        let has = false;
        has && !off_in_env("DOTCOMPUTE_CPU_AVX2")
    })
}

/// Threads run together: 8 f32 lanes are one AVX register or two SSE ones.
pub const LANES: usize = 8;

/// One value per lane.
pub type Lanes<T> = [T; LANES];

/// Which lanes an operation applies to: all bits set (-1) or none (0) per lane, as
/// vector compares produce them (an array of `bool` compiles to packed bytes and scalar
/// bit operations instead).
pub type Mask = [i32; LANES];

/// Every lane.
pub const ALL: Mask = [-1; LANES];

/// A `bool` in a lane: all bits set (true) or none (false), one 32-bit word, as vector
/// compares produce it. A comparison of lanes gives [`Bools`], which masks combine with
/// in one instruction; a `[bool; LANES]` compiled to packed bytes and scalar bit
/// operations on every `if` and loop test.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
#[repr(transparent)]
pub struct B(i32);

/// One `bool` per lane.
pub type Bools = Lanes<B>;

impl B {
    #[inline(always)]
    pub fn new(b: bool) -> B {
        B(-(b as i32))
    }

    #[inline(always)]
    pub fn get(self) -> bool {
        self.0 != 0
    }
}

impl core::ops::Not for B {
    type Output = B;
    #[inline(always)]
    fn not(self) -> B {
        B(!self.0)
    }
}

macro_rules! lane_bool_ops {
    ($($tr:ident $f:ident $op:tt),*) => {$(
        impl core::ops::$tr for B {
            type Output = B;
            #[inline(always)]
            fn $f(self, o: B) -> B {
                B(self.0 $op o.0)
            }
        }
    )*};
}
lane_bool_ops!(BitAnd bitand &, BitOr bitor |, BitXor bitxor ^);

/// `bool` and [`B`] mixed, in either order: a lane's `bool` meets a scalar one.
macro_rules! lane_bool_mixed {
    ($($tr:ident $f:ident),*) => {$(
        impl core::ops::$tr<bool> for B {
            type Output = B;
            #[inline(always)]
            fn $f(self, o: bool) -> B {
                core::ops::$tr::$f(self, B::new(o))
            }
        }
        impl core::ops::$tr<B> for bool {
            type Output = B;
            #[inline(always)]
            fn $f(self, o: B) -> B {
                core::ops::$tr::$f(B::new(self), o)
            }
        }
    )*};
}
lane_bool_mixed!(BitAnd bitand, BitOr bitor, BitXor bitxor);

impl PartialEq<bool> for B {
    #[inline(always)]
    fn eq(&self, o: &bool) -> bool {
        self.get() == *o
    }
}

impl PartialEq<B> for bool {
    #[inline(always)]
    fn eq(&self, o: &B) -> bool {
        *self == o.get()
    }
}

impl crate::ops::CastSource for B {
    #[inline(always)]
    fn to_any(self) -> crate::ops::AnyNum {
        self.get().to_any()
    }
}

/// `c` (lane `bool`s in either form: [`B`], or `bool` from a splat scalar or a `bool`
/// buffer) as masks: an `if`'s or a loop's condition, an operand of `&&` / `||`.
#[inline(always)]
pub fn bools<T: Conform<B>>(c: Lanes<T>) -> Bools {
    conform_to(c)
}

/// A lane value as a lane of `T` holds it: itself, or a `bool` between its two forms
/// (a local that started as `false` is assigned a comparison).
pub trait Conform<T>: Copy {
    fn conform(self) -> T;
}

impl<T: Copy> Conform<T> for T {
    #[inline(always)]
    fn conform(self) -> T {
        self
    }
}

impl Conform<B> for bool {
    #[inline(always)]
    fn conform(self) -> B {
        B::new(self)
    }
}

impl Conform<bool> for B {
    #[inline(always)]
    fn conform(self) -> bool {
        self.get()
    }
}

/// `v` in the lane type of `like` (the local it is assigned to).
#[inline(always)]
pub fn conform<T: Copy + Default, U: Conform<T>>(v: Lanes<U>, _like: &Lanes<T>) -> Lanes<T> {
    conform_to(v)
}

/// `v` as lanes of `T` (a local declared with a type).
#[inline(always)]
pub fn conform_to<T: Copy + Default, U: Conform<T>>(v: Lanes<U>) -> Lanes<T> {
    each(|l| v[l].conform())
}

/// `v` in the lane type of what `then` gives (the other branch of a value `if`).
#[inline(always)]
pub fn conform_like<T: Copy + Default, U: Conform<T>>(
    v: Lanes<U>,
    _then: &impl Fn() -> Lanes<T>,
) -> Lanes<T> {
    conform_to(v)
}

/// The same value in every lane.
#[inline(always)]
pub fn splat<T: Copy>(v: T) -> Lanes<T> {
    [v; LANES]
}

/// `f(lane)` for every lane.
#[inline(always)]
pub fn each<T: Copy + Default>(mut f: impl FnMut(usize) -> T) -> Lanes<T> {
    // A counted loop over a default-filled array, not `array::from_fn`: the compiler
    // unrolls and vectorises it more readily.
    let mut out = [T::default(); LANES];
    for (l, o) in out.iter_mut().enumerate() {
        *o = f(l);
    }
    out
}

/// `new` in the masked lanes, `old` elsewhere.
#[inline(always)]
pub fn select<T: Copy + Default>(m: &Mask, new: Lanes<T>, old: Lanes<T>) -> Lanes<T> {
    each(|l| if m[l] != 0 { new[l] } else { old[l] })
}

/// `then` where `c` holds, `other` elsewhere (a value `if`).
#[inline(always)]
pub fn pick<T: Copy + Default>(c: &Bools, then: Lanes<T>, other: Lanes<T>) -> Lanes<T> {
    each(|l| if c[l].get() { then[l] } else { other[l] })
}

/// Whether any lane is masked.
#[inline(always)]
pub fn any(m: &Mask) -> bool {
    m.iter().fold(0, |a, &b| a | b) != 0
}

/// Whether every lane is masked.
#[inline(always)]
pub fn all(m: &Mask) -> bool {
    m.iter().fold(-1, |a, &b| a & b) == -1
}

/// The masked lanes where `c` holds.
#[inline(always)]
pub fn and(m: &Mask, c: &Bools) -> Mask {
    each(|l| m[l] & c[l].0)
}

/// The masked lanes where `c` does not hold.
#[inline(always)]
pub fn and_not(m: &Mask, c: &Bools) -> Mask {
    each(|l| m[l] & !c[l].0)
}

/// `LANES` consecutive elements from `p`, as one vector load: a `[T; LANES]` read as an
/// array is split by the compiler into element loads and rebuilt with inserts.
///
/// # Safety
/// `p .. p + LANES` must be valid for reads.
#[inline(always)]
pub unsafe fn read_run<T: Copy>(p: *const T) -> Lanes<T> {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{__m128i, __m256i};
        use core::mem::{size_of, transmute_copy};
        // SAFETY: the caller's range is valid for reads; each arm reads exactly
        // `size_of::<Lanes<T>>()` bytes, unaligned, into a vector of that size, and the
        // copy into `Lanes<T>` is between types of one size (plain data both).
        unsafe {
            match size_of::<Lanes<T>>() {
                16 => return transmute_copy(&(p as *const __m128i).read_unaligned()),
                32 => return transmute_copy(&(p as *const __m256i).read_unaligned()),
                64 => return transmute_copy(&(p as *const [__m256i; 2]).read_unaligned()),
                128 => return transmute_copy(&(p as *const [__m256i; 4]).read_unaligned()),
                _ => {}
            }
        }
    }
    // SAFETY: the caller's range is valid for reads.
    unsafe { (p as *const Lanes<T>).read_unaligned() }
}

/// Writes `v` to `LANES` consecutive elements from `p`, as one vector store (see
/// [`read_run`]).
///
/// # Safety
/// `p .. p + LANES` must be valid for writes.
#[inline(always)]
pub unsafe fn write_run<T: Copy>(p: *mut T, v: Lanes<T>) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{__m128i, __m256i};
        use core::mem::{size_of, transmute_copy};
        // SAFETY: the caller's range is valid for writes; each arm writes exactly
        // `size_of::<Lanes<T>>()` bytes, unaligned, from a vector of that size copied from
        // `v` (types of one size, plain data both).
        unsafe {
            match size_of::<Lanes<T>>() {
                16 => return (p as *mut __m128i).write_unaligned(transmute_copy(&v)),
                32 => return (p as *mut __m256i).write_unaligned(transmute_copy(&v)),
                64 => return (p as *mut [__m256i; 2]).write_unaligned(transmute_copy(&v)),
                128 => return (p as *mut [__m256i; 4]).write_unaligned(transmute_copy(&v)),
                _ => {}
            }
        }
    }
    // SAFETY: the caller's range is valid for writes.
    unsafe { (p as *mut Lanes<T>).write_unaligned(v) }
}

/// The ids of threads `first .. first + LANES` (see [`fits`]): along x one per lane, along
/// y and z the same for the whole chunk.
pub struct Ids {
    pub local_x: Lanes<u32>,
    pub global_x: Lanes<u32>,
    pub local_y: u32,
    pub local_z: u32,
    pub global_y: u32,
    pub global_z: u32,
}

/// Whether lane form can run the group `g`: its whole chunks of [`LANES`] threads lie in
/// one row along x (any one-dimensional group, or rows a multiple of [`LANES`] long), so
/// only `local_id().x` differs between a chunk's lanes.
#[inline(always)]
pub fn fits(g: &Group<'_>) -> bool {
    g.one_dimensional() || g.size_x() as usize % LANES == 0
}

/// The group's whole chunks in order, with their ids, found by counting along the rows
/// (no division per chunk).
pub struct Chunks {
    /// Threads in whole chunks.
    full: usize,
    first: usize,
    width: u32,
    height: u32,
    x0: u32,
    y: u32,
    z: u32,
    base: crate::runtime::UVec3,
}

impl Chunks {
    /// The whole chunks of `g` (see [`fits`]).
    #[inline(always)]
    pub fn new(g: &Group<'_>) -> Chunks {
        let n = g.threads();
        let (width, height) = match g.one_dimensional() {
            true => (u32::MAX, 1),
            false => (g.size_x(), g.size_y()),
        };
        Chunks {
            full: n - n % LANES,
            first: 0,
            width,
            height,
            x0: 0,
            y: 0,
            z: 0,
            base: g.base(),
        }
    }

    /// The whole chunks of `g` from thread `first` (a multiple of [`LANES`]) up to
    /// thread `end` (one past the last; at most the end of the last whole chunk).
    #[inline(always)]
    pub fn between(g: &Group<'_>, first: usize, end: usize) -> Chunks {
        debug_assert!(first % LANES == 0 && end <= g.threads() - g.threads() % LANES);
        let mut c = Chunks::new(g);
        c.full = end;
        if first >= end {
            c.full = 0;
        } else if first > 0 {
            // Along the rows to thread `first` (once per region: a division is fine).
            let (w, h) = (c.width as usize, c.height as usize);
            c.first = first;
            c.x0 = (first % w) as u32;
            c.y = ((first / w) % h) as u32;
            c.z = (first / w / h) as u32;
        }
        c
    }

    /// The next chunk: its first thread's number and its ids.
    #[inline(always)]
    pub fn next_chunk(&mut self) -> Option<(usize, Ids)> {
        if self.first >= self.full {
            return None;
        }
        let local_x = each(|l| self.x0 + l as u32);
        let ids = Ids {
            local_x,
            global_x: each(|l| self.base.x.wrapping_add(local_x[l])),
            local_y: self.y,
            local_z: self.z,
            global_y: self.base.y.wrapping_add(self.y),
            global_z: self.base.z.wrapping_add(self.z),
        };
        let first = self.first;
        self.first += LANES;
        self.x0 = self.x0.wrapping_add(LANES as u32);
        if self.x0 >= self.width {
            self.x0 = 0;
            self.y += 1;
            if self.y == self.height {
                self.y = 0;
                self.z += 1;
            }
        }
        Some((first, ids))
    }
}

/// `view[idx]` in the masked lanes (the others get an arbitrary value); an index out of
/// bounds in a masked lane raises the error a thread's load would.
#[inline(always)]
pub fn load<T: KernelElem, I: KernelIndex, const W: bool>(
    view: &View<'_, T, W>,
    m: &Mask,
    idx: Lanes<I>,
) -> Lanes<T> {
    view.load_lanes(m, idx)
}

/// [`load`] at `base`, `base + 1`, ... (see [`View::load_run`]).
#[inline(always)]
pub fn load_run<T: KernelElem, I: KernelIndex, const W: bool>(
    view: &View<'_, T, W>,
    m: &Mask,
    base: I,
) -> Lanes<T> {
    view.load_run(m, base)
}

/// [`store`] at `base`, `base + 1`, ...
#[inline(always)]
pub fn store_run<T: KernelElem, U: Conform<T>, I: KernelIndex>(
    view: &View<'_, T, true>,
    m: &Mask,
    base: I,
    v: Lanes<U>,
) {
    view.store_run(m, base, conform_to(v))
}

/// [`load`] at lanes that are a run from `base` when `is_run`, else at `idx()` (a
/// local that is a run until a masked assignment splits it; the lanes are built only
/// where needed).
#[inline(always)]
pub fn load_run_if<T: KernelElem, I: KernelIndex, const W: bool>(
    view: &View<'_, T, W>,
    m: &Mask,
    is_run: bool,
    base: I,
    idx: impl FnOnce() -> Lanes<I>,
) -> Lanes<T> {
    match is_run {
        true => view.load_run(m, base),
        false => view.load_lanes(m, idx()),
    }
}

/// [`store`] at lanes that are a run from `base` when `is_run`, else at `idx()`.
#[inline(always)]
pub fn store_run_if<T: KernelElem, U: Conform<T>, I: KernelIndex>(
    view: &View<'_, T, true>,
    m: &Mask,
    is_run: bool,
    base: I,
    idx: impl FnOnce() -> Lanes<I>,
    v: Lanes<U>,
) {
    match is_run {
        true => view.store_run(m, base, conform_to(v)),
        false => view.store_lanes(m, idx(), conform_to(v)),
    }
}

/// Whether every lane of the run from `base` (`base`, `base + 1`, ...) is below
/// `bound`; false where the run wraps (its lanes then do not count up).
#[inline(always)]
pub fn run_below<I: KernelIndex + PartialOrd>(base: I, bound: I) -> bool {
    base.run_last().is_some_and(|last| last < bound)
}

/// Whether every lane of the run from `base` is at most `bound` (see [`run_below`]).
#[inline(always)]
pub fn run_at_most<I: KernelIndex + PartialOrd>(base: I, bound: I) -> bool {
    base.run_last().is_some_and(|last| last <= bound)
}

/// Whether every lane of the run from `base` is above `bound` (see [`run_below`]).
#[inline(always)]
pub fn run_above<I: KernelIndex + PartialOrd>(base: I, bound: I) -> bool {
    base > bound && base.run_last().is_some()
}

/// Whether every lane of the run from `base` is at least `bound` (see [`run_below`]).
#[inline(always)]
pub fn run_at_least<I: KernelIndex + PartialOrd>(base: I, bound: I) -> bool {
    base >= bound && base.run_last().is_some()
}

/// A term of an index affine in a loop variable, as an exact non-negative integer
/// (`None` for a negative value).
pub trait Term: Copy {
    fn exact(self) -> Option<u128>;
}

macro_rules! term_unsigned {
    ($($t:ty),*) => {$(
        impl Term for $t {
            #[inline(always)]
            fn exact(self) -> Option<u128> {
                Some(self as u128)
            }
        }
    )*};
}
term_unsigned!(u32, u64, usize);

macro_rules! term_signed {
    ($($t:ty),*) => {$(
        impl Term for $t {
            #[inline(always)]
            fn exact(self) -> Option<u128> {
                (self >= 0).then_some(self as u128)
            }
        }
    )*};
}
term_signed!(i32, i64);

/// Whether `a + c·v .. a + c·v + width` lies in `view` for every `v` in `s..e`, computed
/// exactly (no wrapping): then a loop over `v` may load at `a + c·v` without a bounds
/// test (the macro's loop versioning; its index arithmetic cannot wrap either, every
/// value being below the view's `u32` length). True for an empty range.
#[inline(always)]
pub fn affine_in<T: KernelElem, const W: bool>(
    view: &View<'_, T, W>,
    a: impl Term,
    c: impl Term,
    s: impl Term,
    e: impl Term,
    width: u32,
) -> bool {
    let (Some(a), Some(c), Some(s), Some(e)) = (a.exact(), c.exact(), s.exact(), e.exact()) else {
        return false;
    };
    if s >= e {
        return true;
    }
    // Each below 2^64: the sum cannot overflow 128 bits.
    a + c * (e - 1) + width as u128 <= view.len() as u128
}

/// `view[i]` with no bounds test.
///
/// # Safety
/// `i` must be in bounds ([`affine_in`] checked it for the whole loop).
#[inline(always)]
pub unsafe fn load_one_unchecked<T: KernelElem, I: KernelIndex, const W: bool>(
    view: &View<'_, T, W>,
    i: I,
) -> T {
    // SAFETY: the caller's bound, the same contract.
    unsafe { view.load_unchecked(i) }
}

/// `view[base .. base + LANES]` with no bounds test.
///
/// # Safety
/// The run must be in bounds ([`affine_in`] checked it for the whole loop).
#[inline(always)]
pub unsafe fn load_run_unchecked<T: KernelElem, I: KernelIndex, const W: bool>(
    view: &View<'_, T, W>,
    base: I,
) -> Lanes<T> {
    // SAFETY: the caller's bound, the same contract.
    unsafe { view.load_run_unchecked(base) }
}

/// `view[i]`, the same index for every lane, if any lane is masked (the default if
/// none is: a load no thread makes must not fail).
#[inline(always)]
pub fn load_one<T: KernelElem, I: KernelIndex, const W: bool>(
    view: &View<'_, T, W>,
    m: &Mask,
    i: I,
) -> T {
    if any(m) {
        view.load(i)
    } else {
        T::default()
    }
}

/// `view[idx] = v` in the masked lanes, in lane order (thread order).
#[inline(always)]
pub fn store<T: KernelElem, U: Conform<T>, I: KernelIndex>(
    view: &View<'_, T, true>,
    m: &Mask,
    idx: Lanes<I>,
    v: Lanes<U>,
) {
    view.store_lanes(m, idx, conform_to(v))
}

/// Whether every lane is masked and `idx` counts up by one from lane 0: the chunk's
/// threads touch consecutive elements, so one vector load or store serves them.
#[inline(always)]
pub(crate) fn consecutive<I: KernelIndex>(m: &Mask, idx: &Lanes<I>) -> bool {
    let first = idx[0].to_index();
    let mut all = true;
    for l in 0..LANES {
        all &= (m[l] != 0) & (idx[l].to_index() == first.wrapping_add(l as u32));
    }
    all
}

/// `exp` of every lane: in f32 a branch-free evaluation the compiler vectorises (a call
/// to the C library per lane does not); other types lane by lane through `ops::exp`.
#[inline(always)]
pub fn exp<T: LaneExp>(a: Lanes<T>) -> Lanes<T> {
    T::exp_lanes(a)
}

/// Types with a lane-wise `exp`.
pub trait LaneExp: Copy + Default {
    fn exp_lanes(a: Lanes<Self>) -> Lanes<Self>;
}

impl LaneExp for f32 {
    #[inline(always)]
    fn exp_lanes(a: Lanes<f32>) -> Lanes<f32> {
        each(|l| crate::ops::exp_f32(a[l]))
    }
}

macro_rules! lane_exp_by_lane {
    ($($t:ty),*) => {$(
        impl LaneExp for $t {
            #[inline(always)]
            fn exp_lanes(a: Lanes<$t>) -> Lanes<$t> {
                each(|l| crate::ops::exp(a[l]))
            }
        }
    )*};
}
lane_exp_by_lane!(f64, half::f16);

#[cfg(test)]
mod tests {
    use crate::ops::exp_f32;

    /// Lane form's f32 `exp` against f64 `exp` rounded to f32: within 1 ulp on every
    /// 1021st f32 (all of them, 2.2e9 inputs in [-104, 89], gave the same bound when run
    /// once by hand), and the special values exactly.
    #[test]
    fn exp_f32_is_within_one_ulp_of_the_rounded_exact_value() {
        let mut worst = (0u32, 0f32);
        for bits in (0..=u32::MAX).step_by(1021) {
            let x = f32::from_bits(bits);
            let want = ((x as f64).exp()) as f32;
            let got = exp_f32(x);
            if x.is_nan() {
                assert!(got.is_nan(), "exp({x}) is {got}");
                continue;
            }
            if want.is_infinite() || want == 0.0 {
                // Past the ends: +inf and 0, or the last finite value / smallest
                // subnormal next to them.
                assert!(
                    got == want || (got.to_bits() as i64 - want.to_bits() as i64).abs() <= 1,
                    "exp({x:e}) is {got:e} instead of {want:e}"
                );
                continue;
            }
            let ulps = (got.to_bits() as i64 - want.to_bits() as i64).unsigned_abs() as u32;
            if ulps > worst.0 {
                worst = (ulps, x);
            }
        }
        assert!(worst.0 <= 1, "{} ulp at exp({:e})", worst.0, worst.1);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(-0.0), 1.0);
        assert_eq!(exp_f32(89.0), f32::INFINITY);
        assert_eq!(exp_f32(-104.0), 0.0);
    }
}
