//! Kernels with barriers, split at their barriers (loop fission, pocl's "work-group
//! functions").
//!
//! `#[kernel]` emits, next to the per-thread body, a *group body* for each kernel whose
//! barriers it can place: the code between two barriers (a *region*) runs as a loop over
//! the group's threads, so a barrier is simply the end of one loop and the start of the
//! next. Locals that live across a barrier are lifted into per-thread [`Slots`]; control
//! flow that contains a barrier (`for`, `while`, `loop`, `if`) runs once for the group,
//! its condition or range evaluated by every thread and checked to agree
//! ([`Group::agree`]), which is what barrier semantics require of a kernel anyway; where
//! the macro can tell that a condition or a local has the same value in every thread (it
//! is built from constants, parameters and group-wide ids only), the group body computes
//! it once. `break` and `continue` out of such a loop and `return` are reported by each
//! thread as a [`Flow`] and must agree too ([`Alive`]). Anything that does not agree is
//! `Error::BarrierDivergence`, as with coroutines.
//!
//! The macro falls back to coroutines ([`crate::runtime::execute`]) where it cannot split
//! the body (a barrier inside a `#[kernel_fn]`, or inside an expression), and
//! `DOTCOMPUTE_CPU_BARRIERS=coroutines` (or [`set_barrier_schedule`]) selects coroutines
//! for every kernel, for comparison.

use crate::runtime::{uvec, GroupMem, ThreadCtx, UVec3};
use dotcompute_hal::native::NativeLaunch;
use dotcompute_hal::{Error, Result};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// How kernels with barriers run on the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarrierSchedule {
    /// Split at barriers, one loop over the group's threads per region (the default).
    Fission,
    /// One stackful coroutine per thread, switched at every barrier.
    Coroutines,
}

/// 0: not read yet, 1: fission, 2: coroutines.
static SCHEDULE: AtomicU8 = AtomicU8::new(0);

/// The schedule in force: [`set_barrier_schedule`]'s, else `DOTCOMPUTE_CPU_BARRIERS`
/// (`coroutines` or `fission`), else fission.
pub fn barrier_schedule() -> BarrierSchedule {
    match SCHEDULE.load(Ordering::Relaxed) {
        1 => BarrierSchedule::Fission,
        2 => BarrierSchedule::Coroutines,
        _ => {
            // A value the setting does not accept counts as the default here; the CPU
            // device refuses every launch with `Error::Config` naming it.
            let s = match barrier_setting() {
                Ok(Some("coroutines")) => BarrierSchedule::Coroutines,
                _ => BarrierSchedule::Fission,
            };
            set_barrier_schedule(s);
            s
        }
    }
}

/// `DOTCOMPUTE_CPU_BARRIERS`, strictly parsed: `fission` or `coroutines`.
pub(crate) fn barrier_setting() -> dotcompute_hal::Result<Option<&'static str>> {
    dotcompute_hal::settings::choices::CPU_BARRIERS.read()
}

/// Selects the schedule for kernels with barriers, for the whole process (benchmarks and
/// tests compare the two; both give the same results).
pub fn set_barrier_schedule(s: BarrierSchedule) {
    let v = match s {
        BarrierSchedule::Fission => 1,
        BarrierSchedule::Coroutines => 2,
    };
    SCHEDULE.store(v, Ordering::Relaxed);
}

static SPLIT_LAUNCHES: AtomicU64 = AtomicU64::new(0);

/// Launches run as group bodies split at barriers so far in this process (tests check
/// that a kernel took this path and did not fall back to coroutines).
pub fn split_launches() -> u64 {
    SPLIT_LAUNCHES.load(Ordering::Relaxed)
}

/// One group as a group body sees it.
pub struct Group<'a> {
    launch: &'a NativeLaunch<'a>,
    mem: &'a GroupMem<'a>,
    group_id: UVec3,
    base: UVec3,
    group_size: UVec3,
    num_groups: UVec3,
    local_ids: &'a [UVec3],
}

impl<'a> Group<'a> {
    /// Threads in the group.
    #[inline(always)]
    pub fn threads(&self) -> usize {
        self.local_ids.len()
    }

    /// Whether the group is one-dimensional: thread `th`'s `local_id().x` is `th`.
    #[inline(always)]
    pub fn one_dimensional(&self) -> bool {
        self.group_size.y == 1 && self.group_size.z == 1
    }

    /// `global_id()` of the group's first thread.
    #[inline(always)]
    pub(crate) fn base(&self) -> UVec3 {
        self.base
    }

    /// The group's size along x.
    #[inline(always)]
    pub(crate) fn size_x(&self) -> u32 {
        self.group_size.x
    }

    /// The group's size along y.
    #[inline(always)]
    pub(crate) fn size_y(&self) -> u32 {
        self.group_size.y
    }

    /// The context of thread `th` (linear local index).
    #[inline(always)]
    pub fn ctx(&self, th: usize) -> ThreadCtx<'a> {
        // In a one-dimensional group the local id is the thread's number: written so, the
        // compiler sees `local_id().x` as the loop counter (no table load, and conditions
        // such as `lid < s` become loop bounds).
        let l = if self.one_dimensional() {
            UVec3 {
                x: th as u32,
                y: 0,
                z: 0,
            }
        } else {
            self.local_ids[th]
        };
        ThreadCtx {
            global_id: UVec3 {
                x: self.base.x + l.x,
                y: self.base.y + l.y,
                z: self.base.z + l.z,
            },
            local_id: l,
            group_id: self.group_id,
            group_size: self.group_size,
            num_groups: self.num_groups,
            mem: self.mem,
            yielder: None,
        }
    }

    /// The value that every live thread computes with `value(th)` and that must be the
    /// same for all (the condition of an `if` or `while`, or the range of a `for`, around
    /// a barrier); `None` when the group body must end: no live thread, or the threads
    /// disagree (divergence, reported with `what`). `alive` is `None` for kernels without
    /// `return`, where every thread is live. The first live thread's value is compared
    /// with the others' without a branch per thread.
    #[inline(always)]
    pub fn agree<T: PartialEq + Copy>(
        &self,
        alive: Option<&Alive>,
        what: &str,
        mut value: impl FnMut(usize) -> T,
    ) -> Option<T> {
        let n = self.threads();
        let live = |th: usize| alive.is_none_or(|a| a.is(th));
        let first = (0..n).find(|&th| live(th))?;
        let agreed = value(first);
        let mut differs = false;
        for th in first + 1..n {
            if live(th) {
                differs |= value(th) != agreed;
            }
        }
        if differs {
            self.diverged(format!(
                "{what} differs between threads; it must be the same for the whole group"
            ));
            return None;
        }
        Some(agreed)
    }

    /// Reports barrier divergence in this group; the group body returns after it.
    #[cold]
    #[inline(never)]
    pub fn diverged(&self, detail: String) {
        let g = self.group_id;
        self.launch.errors.raise(Error::BarrierDivergence {
            kernel: self.launch.kernel.name.clone(),
            group: [g.x, g.y, g.z],
            detail,
        });
    }
}

/// How one thread left a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Ran to the region's end.
    Next,
    /// `return`: the thread has finished.
    Return,
    /// `break` out of the loop around the region.
    Break,
    /// `continue` the loop around the region.
    Continue,
}

/// What the group does after a region whose threads may leave the loop around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Go on with the next statement.
    Next,
    Break,
    Continue,
    /// End the group body: every thread has returned, or divergence was reported.
    Stop,
}

/// Which threads of the group still run, and how they left the current region.
pub struct Alive {
    alive: Vec<bool>,
    live: usize,
    breaks: usize,
    continues: usize,
}

impl Alive {
    pub fn new(n: usize) -> Alive {
        Alive {
            alive: vec![true; n],
            live: n,
            breaks: 0,
            continues: 0,
        }
    }

    #[inline(always)]
    pub fn is(&self, th: usize) -> bool {
        self.alive[th]
    }

    /// Forgets how threads left the previous region.
    #[inline(always)]
    pub fn begin_region(&mut self) {
        self.breaks = 0;
        self.continues = 0;
    }

    #[inline(always)]
    pub fn note(&mut self, th: usize, flow: Flow) {
        match flow {
            Flow::Next => {}
            Flow::Return => {
                self.alive[th] = false;
                self.live -= 1;
            }
            Flow::Break => self.breaks += 1,
            Flow::Continue => self.continues += 1,
        }
    }

    /// After a region inside a loop that contains barriers: every thread must leave the
    /// loop, or continue it, or go on, together. A `continue` in the loop body's last
    /// region (`continue_is_next`) is the same as going on.
    pub fn exit(&self, g: &Group<'_>, continue_is_next: bool) -> Exit {
        if self.live == 0 {
            return Exit::Stop;
        }
        let continues = if continue_is_next { 0 } else { self.continues };
        if self.breaks == self.live {
            Exit::Break
        } else if continues == self.live {
            Exit::Continue
        } else if self.breaks == 0 && continues == 0 {
            Exit::Next
        } else {
            g.diverged(format!(
                "{} thread(s) left a loop containing a barrier and {} continued it while {} \
                 went on",
                self.breaks,
                continues,
                self.live - self.breaks - continues
            ));
            Exit::Stop
        }
    }

    /// Barrier number `site`: true when the group body must end (every thread has
    /// returned, or some have while others wait here: divergence, reported).
    #[inline(always)]
    pub fn barrier(&self, g: &Group<'_>, site: u32) -> bool {
        if self.live == self.alive.len() {
            return false;
        }
        if self.live > 0 {
            g.diverged(format!(
                "{} thread(s) finished while {} waited at barrier #{site}",
                self.alive.len() - self.live,
                self.live
            ));
        }
        true
    }
}

/// One lifted local: a value per thread, of a kernel scalar or vector type (so it has a
/// default: the slots start filled with it). The element type is inferred from the
/// first `set`.
pub struct Slots<T> {
    values: Vec<T>,
}

impl<T: Copy + Default> Slots<T> {
    #[inline(always)]
    pub fn new(n: usize) -> Slots<T> {
        Slots {
            values: vec![T::default(); n],
        }
    }

    /// Asserted once before a loop over the group's `n` threads, which lets the compiler
    /// drop the bounds checks of `get` and `set` inside it.
    #[inline(always)]
    pub fn for_threads(&self, n: usize) {
        assert_eq!(self.values.len(), n);
    }

    #[inline(always)]
    pub fn set(&mut self, th: usize, v: T) {
        self.values[th] = v;
    }

    #[inline(always)]
    pub fn get(&self, th: usize) -> T {
        self.values[th]
    }

    /// The values of threads `first .. first + LANES` (one bounds check).
    #[inline(always)]
    pub fn get_lanes(&self, first: usize) -> crate::lanes::Lanes<T> {
        let run = &self.values[first..first + crate::lanes::LANES];
        // SAFETY: `run` is LANES elements long.
        unsafe { crate::lanes::read_run(run.as_ptr()) }
    }

    /// Stores the values of threads `first .. first + LANES` (a lane `bool` in either
    /// form).
    #[inline(always)]
    pub fn set_lanes<U: crate::lanes::Conform<T>>(
        &mut self,
        first: usize,
        v: crate::lanes::Lanes<U>,
    ) {
        let run = &mut self.values[first..first + crate::lanes::LANES];
        let v = crate::lanes::conform_to(v);
        // SAFETY: `run` is LANES elements long.
        unsafe { crate::lanes::write_run(run.as_mut_ptr(), v) };
    }
}

/// One lifted local array: `len` elements per thread, indexed in place.
pub struct ArraySlots<T> {
    len: usize,
    values: Vec<T>,
}

impl<T: Copy + Default> ArraySlots<T> {
    #[inline(always)]
    pub fn new(n: usize, len: usize) -> ArraySlots<T> {
        ArraySlots {
            len,
            values: vec![T::default(); n * len],
        }
    }

    #[inline(always)]
    pub fn for_threads(&self, n: usize) {
        assert_eq!(self.values.len(), n * self.len);
    }

    /// Thread `th`'s array, every element set to `v` (a declaration).
    #[inline(always)]
    pub fn fill(&mut self, th: usize, v: T) -> &mut [T] {
        let a = self.get_mut(th);
        a.fill(v);
        a
    }

    #[inline(always)]
    pub fn get_mut(&mut self, th: usize) -> &mut [T] {
        &mut self.values[th * self.len..(th + 1) * self.len]
    }
}

/// A thread-private array whose length is known only when the kernel instance runs (a
/// const parameter, or arithmetic of them, which Rust cannot use as an array length in
/// generic code): room for `CAP` elements on the stack, of which only the first `len` are
/// set and used. `len` beyond `CAP` is cut to `CAP` (the kernel's build refuses lengths
/// over the IR's limit first).
pub struct LocalArray<T, const CAP: usize> {
    data: [std::mem::MaybeUninit<T>; CAP],
    len: usize,
}

impl<T: Copy, const CAP: usize> LocalArray<T, CAP> {
    #[inline(always)]
    pub fn new(v: T, len: usize) -> LocalArray<T, CAP> {
        let mut data = [std::mem::MaybeUninit::uninit(); CAP];
        let len = len.min(CAP);
        for slot in &mut data[..len] {
            slot.write(v);
        }
        LocalArray { data, len }
    }

    /// The `len` elements.
    #[inline(always)]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: the first `len` elements were written in `new`; MaybeUninit<T> has T's
        // layout.
        unsafe { std::slice::from_raw_parts_mut(self.data.as_mut_ptr().cast::<T>(), self.len) }
    }
}

/// Runs a group body for every group of the launch, in parallel on rayon, and returns
/// the first error any group raised.
pub fn execute_groups<G>(launch: &NativeLaunch<'_>, body: G) -> Result<()>
where
    G: Fn(&Group<'_>) + Sync,
{
    SPLIT_LAUNCHES.fetch_add(1, Ordering::Relaxed);
    let g = launch.geometry;
    let n = g.group_threads() as usize;
    let local_ids: Vec<UVec3> = (0..n as u64)
        .map(|l| crate::runtime::unflatten(l, g.group))
        .collect();
    crate::runtime::for_each_group(launch, |mem, group_id| {
        body(&Group {
            launch,
            mem,
            group_id,
            base: UVec3 {
                x: group_id.x * g.group[0],
                y: group_id.y * g.group[1],
                z: group_id.z * g.group[2],
            },
            group_size: uvec(g.group),
            num_groups: uvec(g.groups),
            local_ids: &local_ids,
        })
    });
    match launch.errors.take() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
