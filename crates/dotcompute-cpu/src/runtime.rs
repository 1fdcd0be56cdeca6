//! What native kernel bodies run against: typed views of buffers and shared arrays, the
//! per-thread context, and the executor that schedules threads.

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use dotcompute_hal::native::{NativeArg, NativeLaunch};
use dotcompute_hal::{Error, Result};
use dotcompute_ir::{Literal, Memory, ScalarType, SharedLen, Type, Vec2, Vec4};
use rayon::prelude::*;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

/// Element and scalar types a kernel can use.
pub trait KernelScalar: KernelElem {
    const SCALAR: ScalarType;
    fn from_literal(l: Literal) -> Option<Self>;
}

/// Element types of buffers a kernel binds: the scalars and the vectors
/// ([`dotcompute_ir::Vec4`]) of 32-bit lanes.
pub trait KernelElem: Copy + Default + Send + Sync + 'static {
    const TYPE: Type;
}

macro_rules! kernel_scalar {
    ($($t:ty => $st:ident, $pat:pat => $v:expr;)*) => {$(
        impl KernelElem for $t {
            const TYPE: Type = Type::scalar(ScalarType::$st);
        }
        impl KernelScalar for $t {
            const SCALAR: ScalarType = ScalarType::$st;
            fn from_literal(l: Literal) -> Option<Self> {
                match l { $pat => Some($v), _ => None }
            }
        }
    )*};
}
kernel_scalar! {
    bool => Bool, Literal::Bool(v) => v;
    i32 => I32, Literal::I32(v) => v;
    u32 => U32, Literal::U32(v) => v;
    i64 => I64, Literal::I64(v) => v;
    u64 => U64, Literal::U64(v) => v;
    f32 => F32, Literal::F32(b) => f32::from_bits(b);
    f64 => F64, Literal::F64(b) => f64::from_bits(b);
    half::f16 => F16, Literal::F16(b) => half::f16::from_bits(b);
}

macro_rules! kernel_vector {
    ($($t:ty),*) => {$(
        impl KernelElem for Vec2<$t> {
            const TYPE: Type = Vec2::<$t>::TYPE;
        }
        impl KernelElem for Vec4<$t> {
            const TYPE: Type = Vec4::<$t>::TYPE;
        }
    )*};
}
kernel_vector!(f32, i32, u32);

/// Integer types usable as indices; converted with `as u32` like the IR does.
pub trait KernelIndex: Copy + Default {
    fn to_index(self) -> u32;
    /// `self + l`, wrapping as the kernel language's `+` does: lane `l` of a run that
    /// starts at `self`.
    fn lane(self, l: usize) -> Self;
    /// The last lane of a run that starts at `self`, `None` where the run wraps.
    fn run_last(self) -> Option<Self>;
}
macro_rules! kernel_index {
    ($($t:ty),*) => {$(
        impl KernelIndex for $t {
            #[inline(always)]
            fn to_index(self) -> u32 { self as u32 }
            #[inline(always)]
            fn lane(self, l: usize) -> Self { self.wrapping_add(l as $t) }
            #[inline(always)]
            fn run_last(self) -> Option<Self> {
                self.checked_add((crate::lanes::LANES - 1) as $t)
            }
        }
    )*};
}
kernel_index!(u32, i32, u64, i64);

/// A 3-vector of `u32` coordinates (`global_id().x`, ...).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UVec3 {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}

/// Where an out-of-bounds access is reported.
#[derive(Clone, Copy)]
struct Origin<'a> {
    launch: &'a NativeLaunch<'a>,
    mem: Memory,
}

impl Origin<'_> {
    #[cold]
    #[inline(never)]
    fn out_of_bounds(&self, index: u32, len: u32) {
        self.launch.errors.raise(Error::OutOfBounds {
            kernel: self.launch.kernel.name.clone(),
            arg: self.launch.kernel.memory_name(self.mem).to_string(),
            index: index as u64,
            len: len as u64,
        });
    }
}

/// A typed, bounds-checked view of an array. Loads outside the array return the default
/// value, stores outside it are dropped, and either raises an `OutOfBounds` error that the
/// launch returns; nothing outside the array is ever touched.
///
/// Threads access views concurrently through raw pointers, as GPU threads do: two threads
/// writing the same element without an atomic is a data race in the kernel (its result is
/// unspecified on every backend), which the CPU backend does not detect.
pub struct View<'a, T, const WRITABLE: bool> {
    ptr: *mut T,
    len: u32,
    origin: Origin<'a>,
    _t: PhantomData<&'a T>,
}

impl<T, const W: bool> Clone for View<'_, T, W> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const W: bool> Copy for View<'_, T, W> {}
// SAFETY: see the type's documentation; the memory outlives the launch.
unsafe impl<T: Send, const W: bool> Send for View<'_, T, W> {}
// SAFETY: as for `Send`.
unsafe impl<T: Sync, const W: bool> Sync for View<'_, T, W> {}

/// A read-only global buffer (`&[T]` parameter).
pub type GlobalRef<'a, T> = View<'a, T, false>;
/// A read-write global buffer (`&mut [T]` parameter).
pub type GlobalMut<'a, T> = View<'a, T, true>;
/// A workgroup-shared array.
pub type SharedArr<'a, T> = View<'a, T, true>;

impl<'a, T: KernelElem, const W: bool> View<'a, T, W> {
    /// Binds argument `index` of the launch, checking its type.
    pub fn bind(launch: &'a NativeLaunch<'a>, index: usize) -> Result<Self> {
        let arg_name = || {
            launch
                .kernel
                .params
                .get(index)
                .map_or("?".to_string(), |p| p.name().to_string())
        };
        let mismatch = |found: String| Error::ArgumentType {
            kernel: launch.kernel.name.clone(),
            arg: arg_name(),
            expected: format!("{}[{}]", if W { "&mut " } else { "&" }, T::TYPE),
            found,
        };
        match launch.args.get(index) {
            Some(&NativeArg::Buffer {
                ptr,
                len,
                elem,
                writable,
            }) => {
                if elem != T::TYPE || (W && !writable) {
                    return Err(mismatch(format!(
                        "a {} buffer of {elem}",
                        if writable { "writable" } else { "read-only" }
                    )));
                }
                Ok(View {
                    ptr: ptr as *mut T,
                    len: u32::try_from(len).unwrap_or(u32::MAX),
                    origin: Origin {
                        launch,
                        mem: Memory::Buffer(index as u32),
                    },
                    _t: PhantomData,
                })
            }
            Some(NativeArg::Scalar(l)) => Err(mismatch(format!("a scalar {}", l.ty()))),
            None => Err(Error::ArgumentCount {
                kernel: launch.kernel.name.clone(),
                expected: launch.kernel.params.len(),
                found: launch.args.len(),
            }),
        }
    }

    /// Number of elements.
    #[inline(always)]
    pub fn len(&self) -> u32 {
        self.len
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    pub fn load<I: KernelIndex>(&self, index: I) -> T {
        let i = index.to_index();
        if i < self.len {
            // SAFETY: in bounds of an allocation that outlives the launch.
            unsafe { self.ptr.add(i as usize).read() }
        } else {
            self.origin.out_of_bounds(i, self.len);
            T::default()
        }
    }

    /// `self[idx[l]]` for the masked lanes `l` (the others get an arbitrary element, or
    /// the default): one check for the chunk, then loads without a branch per lane,
    /// which the compiler can turn into a vector gather. Out of bounds in a masked lane,
    /// each lane goes through [`View::load`], which raises the error.
    #[inline(always)]
    pub fn load_lanes<I: KernelIndex>(
        &self,
        m: &crate::lanes::Mask,
        idx: crate::lanes::Lanes<I>,
    ) -> crate::lanes::Lanes<T> {
        use crate::lanes::{each, LANES};
        if self.is_run(m, &idx) {
            // SAFETY: elements idx[0] .. idx[0] + LANES are in bounds.
            let run = unsafe { self.ptr.add(idx[0].to_index() as usize) };
            // SAFETY: the same run, valid for reads.
            return unsafe { crate::lanes::read_run(run) };
        }
        let mut in_bounds = self.len > 0;
        for l in 0..LANES {
            in_bounds &= (m[l] == 0) | (idx[l].to_index() < self.len);
        }
        if in_bounds {
            // SAFETY: a masked lane's index is in bounds (checked above); the others read
            // element 0, which exists (len > 0).
            each(|l| unsafe {
                self.ptr
                    .add(if m[l] != 0 {
                        idx[l].to_index() as usize
                    } else {
                        0
                    })
                    .read()
            })
        } else {
            each(|l| {
                if m[l] != 0 {
                    self.load(idx[l])
                } else {
                    T::default()
                }
            })
        }
    }

    /// `self[base + l]` for the masked lanes `l`, where the macro knows the indices form
    /// a run (`local_id().x` plus a value the same for every lane): one vector load when
    /// every lane is masked and the run is in bounds, with no test that the indices are
    /// consecutive; otherwise as [`View::load_lanes`]. Only the base is passed: the
    /// lanes' indices, needed on the slow path alone, are built there (passed in, the
    /// compiler computed them before the branch).
    #[inline(always)]
    pub fn load_run<I: KernelIndex>(
        &self,
        m: &crate::lanes::Mask,
        base: I,
    ) -> crate::lanes::Lanes<T> {
        if let Some(run) = self.run_at(m, base) {
            // SAFETY: `run_at` checked the run's LANES elements are in bounds.
            return unsafe { crate::lanes::read_run(run) };
        }
        self.load_lanes(m, crate::lanes::each(|l| base.lane(l)))
    }

    /// `self[index]` with no bounds test.
    ///
    /// # Safety
    /// `index` must be in bounds.
    #[inline(always)]
    pub unsafe fn load_unchecked<I: KernelIndex>(&self, index: I) -> T {
        // SAFETY: the caller's bound.
        unsafe { self.ptr.add(index.to_index() as usize).read() }
    }

    /// `self[base .. base + LANES]` as one vector load, with no bounds test.
    ///
    /// # Safety
    /// The run must be in bounds.
    #[inline(always)]
    pub unsafe fn load_run_unchecked<I: KernelIndex>(&self, base: I) -> crate::lanes::Lanes<T> {
        // SAFETY: the caller's bound.
        unsafe { crate::lanes::read_run(self.ptr.add(base.to_index() as usize)) }
    }

    /// A pointer to the run of `LANES` elements from `base` where every lane is masked
    /// and the run is in bounds.
    #[inline(always)]
    fn run_at<I: KernelIndex>(&self, m: &crate::lanes::Mask, base: I) -> Option<*mut T> {
        let b = base.to_index();
        (crate::lanes::all(m) && self.run_fits(b)).then(|| {
            // SAFETY: in bounds, checked just above.
            unsafe { self.ptr.add(b as usize) }
        })
    }

    /// Whether the `LANES` elements from `first` are in bounds (in 64 bits the end
    /// cannot wrap: one compare).
    #[inline(always)]
    fn run_fits(&self, first: u32) -> bool {
        first as u64 + crate::lanes::LANES as u64 <= self.len as u64
    }

    /// Whether every lane is masked and `idx` counts up by one from an element with
    /// `LANES` elements in bounds from it: one vector load or store serves the chunk.
    #[inline(always)]
    fn is_run<I: KernelIndex>(&self, m: &crate::lanes::Mask, idx: &crate::lanes::Lanes<I>) -> bool {
        crate::lanes::consecutive(m, idx) && self.run_fits(idx[0].to_index())
    }

    /// A checked pointer to element `index`, or `None` (and an error raised).
    #[inline(always)]
    fn slot<I: KernelIndex>(&self, index: I) -> Option<*mut T> {
        let i = index.to_index();
        if i < self.len {
            // SAFETY: in bounds.
            Some(unsafe { self.ptr.add(i as usize) })
        } else {
            self.origin.out_of_bounds(i, self.len);
            None
        }
    }
}

impl<T: KernelElem> View<'_, T, true> {
    #[inline(always)]
    pub fn store<I: KernelIndex>(&self, index: I, value: T) {
        if let Some(p) = self.slot(index) {
            // SAFETY: in bounds; see the type's note on races.
            unsafe { p.write(value) }
        }
    }

    /// `self[idx[l]] = v[l]` for the masked lanes `l`, in lane order: one vector store
    /// where every lane is masked and the indices are consecutive and in bounds, else
    /// each lane through [`View::store`].
    #[inline(always)]
    pub fn store_lanes<I: KernelIndex>(
        &self,
        m: &crate::lanes::Mask,
        idx: crate::lanes::Lanes<I>,
        v: crate::lanes::Lanes<T>,
    ) {
        use crate::lanes::LANES;
        if self.is_run(m, &idx) {
            // SAFETY: elements idx[0] .. idx[0] + LANES are in bounds; see the type's note
            // on races.
            let run = unsafe { self.ptr.add(idx[0].to_index() as usize) };
            // SAFETY: the same run, valid for writes (races as the type's note says).
            unsafe { crate::lanes::write_run(run, v) };
            return;
        }
        for l in 0..LANES {
            if m[l] != 0 {
                self.store(idx[l], v[l]);
            }
        }
    }

    /// `self[base + l] = v[l]` for the masked lanes `l` of a run (see
    /// [`View::load_run`]).
    #[inline(always)]
    pub fn store_run<I: KernelIndex>(
        &self,
        m: &crate::lanes::Mask,
        base: I,
        v: crate::lanes::Lanes<T>,
    ) {
        if let Some(run) = self.run_at(m, base) {
            // SAFETY: in bounds; see the type's note on races.
            unsafe { crate::lanes::write_run(run, v) };
            return;
        }
        self.store_lanes(m, crate::lanes::each(|l| base.lane(l)), v)
    }
}

/// Integer element types with every atomic operation.
///
/// # Safety (for callers of the methods)
/// `p` must be valid, aligned, and point into memory that outlives the call.
pub trait AtomicInt: KernelScalar {
    /// # Safety
    /// See the trait documentation.
    unsafe fn atomic_rmw(p: *mut Self, op: AtomicKind, v: Self) -> Self;
    /// # Safety
    /// See the trait documentation.
    unsafe fn atomic_cas(p: *mut Self, expected: Self, new: Self) -> Self;
    /// # Safety
    /// See the trait documentation.
    unsafe fn atomic_load(p: *mut Self) -> Self;
}

/// Element types with atomic add (integers and `f32`).
///
/// # Safety (for callers of the method)
/// `p` must be valid, aligned, and point into memory that outlives the call.
pub trait AtomicAdd: KernelScalar {
    /// # Safety
    /// See the trait documentation.
    unsafe fn atomic_add(p: *mut Self, v: Self) -> Self;
}

#[doc(hidden)]
#[derive(Clone, Copy)]
pub enum AtomicKind {
    Sub,
    Min,
    Max,
    And,
    Or,
    Xor,
    Exchange,
}

macro_rules! atomic_int {
    ($t:ty, $a:ty) => {
        impl AtomicInt for $t {
            #[inline(always)]
            unsafe fn atomic_rmw(p: *mut Self, op: AtomicKind, v: Self) -> Self {
                // SAFETY: the caller passes a valid, aligned pointer.
                let a = unsafe { <$a>::from_ptr(p) };
                let o = Ordering::Relaxed;
                match op {
                    AtomicKind::Sub => a.fetch_sub(v, o),
                    AtomicKind::Min => a.fetch_min(v, o),
                    AtomicKind::Max => a.fetch_max(v, o),
                    AtomicKind::And => a.fetch_and(v, o),
                    AtomicKind::Or => a.fetch_or(v, o),
                    AtomicKind::Xor => a.fetch_xor(v, o),
                    AtomicKind::Exchange => a.swap(v, o),
                }
            }
            #[inline(always)]
            unsafe fn atomic_load(p: *mut Self) -> Self {
                // SAFETY: the caller passes a valid, aligned pointer.
                unsafe { <$a>::from_ptr(p) }.load(Ordering::Relaxed)
            }
            #[inline(always)]
            unsafe fn atomic_cas(p: *mut Self, expected: Self, new: Self) -> Self {
                // SAFETY: the caller passes a valid, aligned pointer.
                let a = unsafe { <$a>::from_ptr(p) };
                match a.compare_exchange(expected, new, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(v) | Err(v) => v,
                }
            }
        }
        impl AtomicAdd for $t {
            #[inline(always)]
            unsafe fn atomic_add(p: *mut Self, v: Self) -> Self {
                // SAFETY: the caller passes a valid, aligned pointer.
                unsafe { <$a>::from_ptr(p) }.fetch_add(v, Ordering::Relaxed)
            }
        }
    };
}
atomic_int!(u32, AtomicU32);
atomic_int!(i32, AtomicI32);

impl AtomicAdd for f32 {
    #[inline(always)]
    unsafe fn atomic_add(p: *mut Self, v: Self) -> Self {
        // SAFETY: the caller passes a valid, aligned pointer; f32 and u32 have the same
        // size and alignment.
        let a = unsafe { AtomicU32::from_ptr(p as *mut u32) };
        let mut old = a.load(Ordering::Relaxed);
        loop {
            let new = (f32::from_bits(old) + v).to_bits();
            match a.compare_exchange_weak(old, new, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return f32::from_bits(old),
                Err(cur) => old = cur,
            }
        }
    }
}

impl<T: AtomicAdd> View<'_, T, true> {
    #[inline(always)]
    pub fn atomic_add<I: KernelIndex>(&self, index: I, v: T) -> T {
        // SAFETY: `slot` returns in-bounds pointers into memory that outlives the launch;
        // buffers are 64-byte aligned and shared arrays 8-byte aligned.
        self.slot(index)
            .map_or(T::default(), |p| unsafe { T::atomic_add(p, v) })
    }
}

macro_rules! atomic_methods {
    ($($name:ident => $kind:ident),*) => {
        impl<T: AtomicInt> View<'_, T, true> {
            $(
            #[inline(always)]
            pub fn $name<I: KernelIndex>(&self, index: I, v: T) -> T {
                // SAFETY: as in `atomic_add`.
                self.slot(index).map_or(T::default(), |p| unsafe { T::atomic_rmw(p, AtomicKind::$kind, v) })
            }
            )*
            #[inline(always)]
            pub fn atomic_load<I: KernelIndex>(&self, index: I) -> T {
                // SAFETY: as in `atomic_add`.
                self.slot(index).map_or(T::default(), |p| unsafe { T::atomic_load(p) })
            }
            #[inline(always)]
            pub fn atomic_compare_exchange<I: KernelIndex>(&self, index: I, expected: T, new: T) -> T {
                // SAFETY: as in `atomic_add`.
                self.slot(index).map_or(T::default(), |p| unsafe { T::atomic_cas(p, expected, new) })
            }
        }
    };
}
atomic_methods!(atomic_sub => Sub, atomic_min => Min, atomic_max => Max, atomic_and => And,
    atomic_or => Or, atomic_xor => Xor, atomic_exchange => Exchange);

/// Reads scalar argument `index`, checking its type.
pub fn scalar<T: KernelScalar>(launch: &NativeLaunch<'_>, index: usize) -> Result<T> {
    match launch.args.get(index) {
        Some(NativeArg::Scalar(l)) => T::from_literal(*l).ok_or_else(|| Error::ArgumentType {
            kernel: launch.kernel.name.clone(),
            arg: launch.kernel.params[index].name().to_string(),
            expected: T::SCALAR.name().into(),
            found: l.ty().name().into(),
        }),
        Some(NativeArg::Buffer { elem, .. }) => Err(Error::ArgumentType {
            kernel: launch.kernel.name.clone(),
            arg: launch
                .kernel
                .params
                .get(index)
                .map_or("?".into(), |p| p.name().to_string()),
            expected: T::SCALAR.name().into(),
            found: format!("a buffer of {elem}"),
        }),
        None => Err(Error::ArgumentCount {
            kernel: launch.kernel.name.clone(),
            expected: launch.kernel.params.len(),
            found: launch.args.len(),
        }),
    }
}

/// Shared memory of one group: one block, each array at an 8-aligned offset.
pub(crate) struct GroupMem<'a> {
    launch: &'a NativeLaunch<'a>,
    block: Vec<u64>,
    /// (byte offset, length) per shared array.
    layout: Vec<(usize, u32)>,
}

impl<'a> GroupMem<'a> {
    pub(crate) fn new(launch: &'a NativeLaunch<'a>) -> GroupMem<'a> {
        let mut layout = Vec::new();
        let mut bytes = 0usize;
        for s in &launch.kernel.shared {
            let len = match s.len {
                SharedLen::Static(n) => n,
                SharedLen::Dynamic => launch.geometry.dynamic_shared_len,
            };
            layout.push((bytes, len));
            bytes += (len as usize * s.elem.size_bytes()).next_multiple_of(8);
        }
        // Shared memory is undefined at group start; poison it (NaN / 0xFFFFFFFF) rather
        // than zero it, so a kernel that reads before writing shows wrong results here too.
        GroupMem {
            launch,
            block: vec![u64::MAX; bytes / 8],
            layout,
        }
    }
}

/// What a native kernel body sees of its thread.
pub struct ThreadCtx<'a> {
    pub global_id: UVec3,
    pub local_id: UVec3,
    pub group_id: UVec3,
    pub group_size: UVec3,
    pub num_groups: UVec3,
    pub(crate) mem: &'a GroupMem<'a>,
    pub(crate) yielder: Option<&'a Yielder<(), u32>>,
}

impl<'a> ThreadCtx<'a> {
    /// Whether the launch should stop: it raised an error (another thread's out-of-bounds
    /// access, say) or ran past its time limit ([`crate::watchdog`]). Polled by the
    /// generated code at loop back-edges, which then leave the loop.
    #[inline(always)]
    pub fn stop_requested(&self) -> bool {
        self.mem.launch.errors.is_raised()
    }

    /// The group's shared array number `slot` (declaration order).
    #[inline(always)]
    pub fn shared<T: KernelScalar>(&self, slot: usize) -> SharedArr<'a, T> {
        let (offset, len) = self.mem.layout[slot];
        debug_assert_eq!(self.mem.launch.kernel.shared[slot].elem, T::SCALAR);
        View {
            // SAFETY: the offset lies inside the group's block (see GroupMem::new).
            ptr: unsafe { (self.mem.block.as_ptr() as *mut u8).add(offset) } as *mut T,
            len,
            origin: Origin {
                launch: self.mem.launch,
                mem: Memory::Shared(slot as u32),
            },
            _t: PhantomData,
        }
    }

    /// A view of a thread-private array (`let mut acc = [0.0f32; 8];`) stored in
    /// `storage` on the thread's stack; `slot` is its index in `Kernel::local_arrays`
    /// (declaration order), which names it in out-of-bounds errors.
    #[inline(always)]
    pub fn local_array<'s, T: KernelScalar>(
        &'s self,
        storage: &'s mut [T],
        slot: usize,
    ) -> View<'s, T, true> {
        View {
            ptr: storage.as_mut_ptr(),
            len: u32::try_from(storage.len()).unwrap_or(u32::MAX),
            origin: Origin {
                launch: self.mem.launch,
                mem: Memory::Local(slot as u32),
            },
            _t: PhantomData,
        }
    }

    /// Waits until every thread of the group reaches barrier number `site`.
    #[inline]
    pub fn barrier(&self, site: u32) {
        if let Some(y) = self.yielder {
            y.suspend(site);
        }
    }
}

/// Stack size of one kernel thread in a kernel with barriers.
const THREAD_STACK_BYTES: usize = 64 * 1024;

thread_local! {
    /// Coroutine stacks kept per worker thread: mapping them is far slower than a barrier.
    static STACKS: RefCell<Vec<DefaultStack>> = const { RefCell::new(Vec::new()) };
}

pub(crate) fn unflatten(i: u64, dims: [u32; 3]) -> UVec3 {
    let x = (i % dims[0] as u64) as u32;
    let rest = i / dims[0] as u64;
    UVec3 {
        x,
        y: (rest % dims[1] as u64) as u32,
        z: (rest / dims[1] as u64) as u32,
    }
}

pub(crate) fn uvec(a: [u32; 3]) -> UVec3 {
    UVec3 {
        x: a[0],
        y: a[1],
        z: a[2],
    }
}

/// Runs a kernel body for every thread of the launch and returns the first error any
/// thread raised. Groups run in parallel on rayon. Inside a group:
///
/// * without `barrier()`, threads run one after another in a plain loop (a valid schedule,
///   and one the compiler can optimise), skipping threads outside the grid;
/// * with `barrier()`, every thread of the group is a coroutine; the group's threads run
///   round-robin, each until its next barrier, so no thread passes a barrier before all
///   have reached it. Threads that reach different barriers, or end while others wait,
///   are reported as `BarrierDivergence`.
///
/// `checked` and `fast` are the same kernel body; `fast` additionally assumes that arrays
/// indexed by `global_id().x` are in bounds, which lets the compiler drop those bounds
/// checks and vectorise. It is only called for threads whose `global_id().x` is below
/// `fast_limit` (the smallest length among those arrays), in one-dimensional launches of
/// kernels without barriers or shared memory; everything else runs `checked`.
pub fn execute<C, F>(launch: &NativeLaunch<'_>, fast_limit: u32, checked: C, fast: F) -> Result<()>
where
    C: Fn(&ThreadCtx<'_>) + Sync,
    F: Fn(&ThreadCtx<'_>) + Sync,
{
    let g = launch.geometry;
    let kernel = launch.kernel;
    // Walked once per launch (not per group): barriers need coroutines, and barriers or
    // subgroup operations need every thread of a group to run.
    let uses_barrier = kernel.uses_barrier();
    let whole_groups = uses_barrier || kernel.uses_subgroups();
    let one_dimensional = g.grid[1] == 1 && g.grid[2] == 1 && g.group[1] == 1 && g.group[2] == 1;
    if !whole_groups && kernel.shared.is_empty() && one_dimensional {
        run_1d(launch, fast_limit, &checked, &fast);
    } else {
        for_each_group(launch, |mem, group_id| {
            if uses_barrier {
                run_group_coroutines(launch, group_id, mem, &checked);
            } else {
                run_group_loop(launch, group_id, mem, whole_groups, &checked);
            }
        });
    }
    match launch.errors.take() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Calls `f` for every group of the launch, in parallel on rayon (with one block of
/// shared memory per worker), until a group raises an error.
pub(crate) fn for_each_group<F>(launch: &NativeLaunch<'_>, f: F)
where
    F: Fn(&GroupMem<'_>, UVec3) + Sync,
{
    let g = launch.geometry;
    let total = g.total_groups();
    let workers = rayon::current_num_threads() as u64;
    let min_len = (total / (workers * 16)).max(1) as usize;
    (0..total as usize)
        .into_par_iter()
        .with_min_len(min_len)
        .for_each_init(
            || GroupMem::new(launch),
            |mem, gi| {
                if launch.errors.is_raised() {
                    return; // the launch already failed: finish quickly
                }
                f(mem, unflatten(gi as u64, g.groups));
            },
        );
}

/// One-dimensional barrier-free launches: contiguous chunks of global ids, each a plain
/// counted loop over exactly the threads of the grid.
fn run_1d<C, F>(launch: &NativeLaunch<'_>, fast_limit: u32, checked: &C, fast: &F)
where
    C: Fn(&ThreadCtx<'_>) + Sync,
    F: Fn(&ThreadCtx<'_>) + Sync,
{
    let g = launch.geometry;
    let n = g.grid[0];
    let workers = rayon::current_num_threads() as u32;
    // Enough chunks to balance load, each a whole number of groups and at least 4096 ids.
    let chunk = (n / (workers * 8))
        .max(4096)
        .next_multiple_of(g.group[0])
        .max(g.group[0]);
    let chunks = n.div_ceil(chunk);
    let empty = GroupMem {
        launch,
        block: Vec::new(),
        layout: Vec::new(),
    };
    (0..chunks).into_par_iter().for_each(|c| {
        if launch.errors.is_raised() {
            return;
        }
        let start = c * chunk;
        let end = start.saturating_add(chunk).min(n);
        if end <= fast_limit {
            loop_1d(&g, start, end, &empty, fast);
        } else {
            loop_1d(&g, start, end, &empty, checked);
        }
    });
}

#[inline(always)]
fn loop_1d<B>(
    g: &dotcompute_hal::ResolvedLaunch,
    start: u32,
    end: u32,
    mem: &GroupMem<'_>,
    body: &B,
) where
    B: Fn(&ThreadCtx<'_>) + Sync,
{
    let group = g.group[0];
    let mut ctx = ThreadCtx {
        global_id: UVec3::default(),
        local_id: UVec3::default(),
        group_id: UVec3::default(),
        group_size: uvec(g.group),
        num_groups: uvec(g.groups),
        mem,
        yielder: None,
    };
    for x in start..end {
        // The divisions vanish when the body does not read local or group ids.
        ctx.global_id.x = x;
        ctx.local_id.x = x % group;
        ctx.group_id.x = x / group;
        body(&ctx);
    }
}

#[inline(always)]
fn run_group_loop<F>(
    launch: &NativeLaunch<'_>,
    group_id: UVec3,
    mem: &GroupMem<'_>,
    whole: bool,
    body: &F,
) where
    F: Fn(&ThreadCtx<'_>) + Sync,
{
    let g = launch.geometry;
    let base = [
        group_id.x * g.group[0],
        group_id.y * g.group[1],
        group_id.z * g.group[2],
    ];
    // Threads outside the grid do not run (Launch's documented rule for kernels without
    // barriers or subgroup operations; those run whole groups). The bounds are hoisted so
    // the inner loop is a plain counted loop.
    let end = [0, 1, 2].map(|d| {
        if whole {
            g.group[d]
        } else {
            (g.grid[d] - base[d]).min(g.group[d])
        }
    });
    let mut ctx = ThreadCtx {
        global_id: UVec3::default(),
        local_id: UVec3::default(),
        group_id,
        group_size: uvec(g.group),
        num_groups: uvec(g.groups),
        mem,
        yielder: None,
    };
    for lz in 0..end[2] {
        for ly in 0..end[1] {
            for lx in 0..end[0] {
                ctx.local_id = UVec3 {
                    x: lx,
                    y: ly,
                    z: lz,
                };
                ctx.global_id = UVec3 {
                    x: base[0] + lx,
                    y: base[1] + ly,
                    z: base[2] + lz,
                };
                body(&ctx);
            }
        }
    }
}

type ThreadBody<'b> = dyn for<'x> Fn(&ThreadCtx<'x>) + Sync + 'b;

fn run_group_coroutines<F>(launch: &NativeLaunch<'_>, group_id: UVec3, mem: &GroupMem<'_>, body: &F)
where
    F: Fn(&ThreadCtx<'_>) + Sync,
{
    let g = launch.geometry;
    let body: &ThreadBody<'_> = body;
    // SAFETY: corosensei requires 'static closures. Every coroutine created below is
    // finished or dropped (which unwinds it) before this function returns, also when it
    // unwinds, because `threads` is declared after the borrows it erases and so is dropped
    // first. Nothing of `body`, `mem` or `launch` is used after that.
    let body: &'static ThreadBody<'static> = unsafe { std::mem::transmute(body) };
    // SAFETY: as for `body` just above.
    let mem: &'static GroupMem<'static> = unsafe { std::mem::transmute(mem) };
    let mut stacks = STACKS.with(|s| std::mem::take(&mut *s.borrow_mut()));
    let n = g.group_threads() as usize;
    let mut threads: Vec<Option<Coroutine<(), u32, (), DefaultStack>>> = Vec::with_capacity(n);
    for l in 0..n as u64 {
        let local_id = unflatten(l, g.group);
        let stack = match stacks.pop() {
            Some(s) => s,
            None => match DefaultStack::new(THREAD_STACK_BYTES) {
                Ok(s) => s,
                Err(e) => {
                    launch.errors.raise(Error::OutOfMemory {
                        device: "cpu".into(),
                        requested: THREAD_STACK_BYTES as u64,
                        detail: format!("a kernel thread's stack could not be mapped: {e}"),
                    });
                    return;
                }
            },
        };
        let ctx_fields = (
            UVec3 {
                x: group_id.x * g.group[0] + local_id.x,
                y: group_id.y * g.group[1] + local_id.y,
                z: group_id.z * g.group[2] + local_id.z,
            },
            local_id,
        );
        threads.push(Some(Coroutine::with_stack(
            stack,
            move |yielder: &Yielder<(), u32>, ()| {
                let ctx = ThreadCtx {
                    global_id: ctx_fields.0,
                    local_id: ctx_fields.1,
                    group_id,
                    group_size: uvec(g.group),
                    num_groups: uvec(g.groups),
                    mem,
                    yielder: Some(yielder),
                };
                body(&ctx);
            },
        )));
    }
    let divergence = |detail: String| Error::BarrierDivergence {
        kernel: launch.kernel.name.clone(),
        group: [group_id.x, group_id.y, group_id.z],
        detail,
    };
    // On divergence the function returns early: the suspended coroutines are dropped
    // (unwinding their stacks) and their stacks are not recycled; that path is rare.
    let mut live = n;
    while live > 0 {
        let mut site: Option<u32> = None;
        let mut finished_now = 0;
        let mut waiting = 0;
        for slot in threads.iter_mut() {
            let Some(co) = slot else { continue };
            match co.resume(()) {
                CoroutineResult::Yield(s) => {
                    waiting += 1;
                    if let Some(prev) = site {
                        if prev != s {
                            launch.errors.raise(divergence(format!(
                                "threads wait at different barriers (#{prev} and #{s})"
                            )));
                            return;
                        }
                    }
                    site = Some(s);
                }
                CoroutineResult::Return(()) => {
                    finished_now += 1;
                    live -= 1;
                    let co = slot.take().unwrap();
                    stacks.push(co.into_stack());
                }
            }
        }
        if waiting > 0 && finished_now > 0 {
            launch.errors.raise(divergence(format!(
                "{finished_now} thread(s) finished while {waiting} waited at barrier #{}",
                site.unwrap_or(0)
            )));
            return;
        }
    }
    STACKS.with(|s| s.borrow_mut().extend(stacks));
}
