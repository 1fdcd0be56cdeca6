//! The threads of one threadgroup, run as coroutines that meet where a GPU's threads meet:
//! at `threadgroup_barrier` (the whole group) and at every `simd_*` function (the 32 lanes
//! of a SIMD-group, in lock-step). Between those points each thread runs alone, in an
//! order that is either the threads' own (`ThreadOrder::InOrder`) or shuffled per group
//! and per round from a seed (`ThreadOrder::Shuffled`), so that a kernel which reads what
//! another thread writes without a barrier between them gives a wrong result here, as it
//! can on a GPU.
//!
//! What the shuffle cannot show: a race that every order resolves the same way, such as
//! an unsynchronised `s[0] += 1` from many threads (each thread's read-modify-write runs
//! whole between two meeting points).

use super::ShimThread;
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use dotcompute_hal::{Error, Result};
use std::cell::{Cell, RefCell};

/// Lanes of a SIMD-group: an Apple GPU's width (the generated MSL's helpers assume it).
pub const SIMD_WIDTH: u32 = 32;

/// The order in which the runner resumes the threads of a group between meeting points.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ThreadOrder {
    /// Thread 0 first, then 1, … (the order of the CPU backend).
    #[default]
    InOrder,
    /// A fresh permutation for every group and every round, drawn from `seed`.
    Shuffled { seed: u64 },
}

impl ThreadOrder {
    /// The generator of group `group`'s permutations, or `None` in order.
    pub fn rng(self, group: [u32; 3]) -> Option<fastrand::Rng> {
        match self {
            ThreadOrder::InOrder => None,
            ThreadOrder::Shuffled { seed } => {
                let key = (group[0] as u64) << 40 ^ (group[1] as u64) << 20 ^ group[2] as u64;
                Some(fastrand::Rng::with_seed(
                    seed ^ key.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                ))
            }
        }
    }

    /// `DOTCOMPUTE_MSL_SHIM_ORDER`: `in-order` (or unset), or `shuffled:SEED`.
    pub fn from_env() -> std::result::Result<ThreadOrder, String> {
        match dotcompute_hal::settings::value("DOTCOMPUTE_MSL_SHIM_ORDER") {
            None => Ok(ThreadOrder::InOrder),
            Some(v) if v == "in-order" => Ok(ThreadOrder::InOrder),
            Some(v) => v
                .strip_prefix("shuffled:")
                .and_then(|seed| seed.parse().ok())
                .map(|seed| ThreadOrder::Shuffled { seed })
                .ok_or_else(|| {
                    format!(
                        "DOTCOMPUTE_MSL_SHIM_ORDER={v:?}: expected `in-order` or                          `shuffled:SEED` (SEED a u64)"
                    )
                }),
        }
    }
}

/// Why a kernel thread handed control back to the runner.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Suspend {
    /// `threadgroup_barrier` at this line of the MSL.
    Barrier(u32),
    /// A `simd_*` function: which one, the value's type code, its bits and the lane /
    /// mask / delta argument.
    Simd(SimdCall),
}

/// One lane's call of a SIMD-group function (codes as in the shim header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimdCall {
    pub op: u32,
    pub ty: u32,
    pub bits: u64,
    pub arg: u32,
}

// The header's DC_SIMD_* and dc_shim_simd_type codes.
const SHUFFLE: u32 = 0;
const SHUFFLE_XOR: u32 = 1;
const SHUFFLE_UP: u32 = 2;
const SHUFFLE_DOWN: u32 = 3;
const SUM: u32 = 4;
const MIN: u32 = 5;
const MAX: u32 = 6;
const PREFIX_EXCLUSIVE_SUM: u32 = 7;
const PREFIX_INCLUSIVE_SUM: u32 = 8;
const BALLOT: u32 = 9;
const ANY: u32 = 10;
const ALL: u32 = 11;
const TY_U32: u32 = 0;
const TY_I32: u32 = 1;
const TY_F32: u32 = 2;
const TY_BOOL: u32 = 3;

/// What a read of a lane the SIMD-group lacks gives (undefined on a GPU): a value no test
/// expects, so that relying on it fails.
pub const POISON: u64 = 0xDEAD_BEEF;

fn op_name(op: u32) -> &'static str {
    match op {
        SHUFFLE => "simd_shuffle",
        SHUFFLE_XOR => "simd_shuffle_xor",
        SHUFFLE_UP => "simd_shuffle_up",
        SHUFFLE_DOWN => "simd_shuffle_down",
        SUM => "simd_sum",
        MIN => "simd_min",
        MAX => "simd_max",
        PREFIX_EXCLUSIVE_SUM => "simd_prefix_exclusive_sum",
        PREFIX_INCLUSIVE_SUM => "simd_prefix_inclusive_sum",
        BALLOT => "simd_ballot",
        ANY => "simd_any",
        ALL => "simd_all",
        _ => "an unknown SIMD-group function",
    }
}

/// A SIMD-group's values as the type they have, for arithmetic.
#[derive(Clone, Copy)]
enum Value {
    U32(u32),
    I32(i32),
    F32(f32),
}

impl Value {
    fn of(ty: u32, bits: u64) -> Value {
        match ty {
            TY_I32 => Value::I32(bits as u32 as i32),
            TY_F32 => Value::F32(f32::from_bits(bits as u32)),
            // TY_U32 and TY_BOOL (0 or 1); the header has no other code.
            TY_U32 | TY_BOOL => Value::U32(bits as u32),
            _ => Value::U32(bits as u32),
        }
    }
    fn bits(self) -> u64 {
        match self {
            Value::U32(v) => v as u64,
            Value::I32(v) => v as u32 as u64,
            Value::F32(v) => v.to_bits() as u64,
        }
    }
    fn zero(ty: u32) -> Value {
        Value::of(ty, 0)
    }
    fn combine(self, other: Value, op: u32) -> Value {
        match (self, other) {
            (Value::U32(a), Value::U32(b)) => Value::U32(match op {
                MIN => a.min(b),
                MAX => a.max(b),
                _ => a.wrapping_add(b),
            }),
            (Value::I32(a), Value::I32(b)) => Value::I32(match op {
                MIN => a.min(b),
                MAX => a.max(b),
                _ => a.wrapping_add(b),
            }),
            (Value::F32(a), Value::F32(b)) => Value::F32(match op {
                MIN => a.min(b),
                MAX => a.max(b),
                _ => a + b,
            }),
            // One SIMD-group call has one type (checked before).
            (a, _) => a,
        }
    }
}

/// The result of every lane of one SIMD-group call. `lanes[l]` is lane `l`'s call, `None`
/// for a lane the SIMD-group lacks (past the end of a partial group). Reductions and
/// prefix sums go over the lanes present, in lane order; a shuffle from a lane that is
/// absent gives [`POISON`]; `simd_shuffle_up` / `_down` past the SIMD-group's edge give
/// the caller's own value, as Metal specifies.
pub fn simd_results(lanes: &[Option<SimdCall>]) -> Vec<Option<u64>> {
    let Some(first) = lanes.iter().flatten().next().copied() else {
        return vec![None; lanes.len()];
    };
    let width = SIMD_WIDTH as usize;
    let value = |l: usize| lanes.get(l).copied().flatten().map(|c| c.bits);
    let present: Vec<usize> = (0..lanes.len()).filter(|&l| lanes[l].is_some()).collect();
    let fold = |upto: usize, inclusive: bool| {
        present
            .iter()
            .filter(|&&l| l < upto || (inclusive && l == upto))
            .map(|&l| Value::of(first.ty, lanes[l].map_or(0, |c| c.bits)))
            .fold(None, |acc: Option<Value>, v| {
                Some(acc.map_or(v, |a| a.combine(v, first.op)))
            })
    };
    let truth = |l: usize| lanes[l].is_some_and(|c| c.bits & 1 != 0);
    lanes
        .iter()
        .enumerate()
        .map(|(lane, call)| {
            let call = (*call)?;
            let own = call.bits;
            Some(match first.op {
                SHUFFLE => value(call.arg as usize).unwrap_or(POISON),
                SHUFFLE_XOR => value(lane ^ call.arg as usize).unwrap_or(POISON),
                SHUFFLE_UP => match lane.checked_sub(call.arg as usize) {
                    Some(source) => value(source).unwrap_or(POISON),
                    None => own,
                },
                SHUFFLE_DOWN => {
                    let source = lane + call.arg as usize;
                    if source >= width {
                        own
                    } else {
                        value(source).unwrap_or(POISON)
                    }
                }
                SUM | MIN | MAX => fold(width, true).map_or(0, Value::bits),
                PREFIX_EXCLUSIVE_SUM => fold(lane, false).unwrap_or(Value::zero(first.ty)).bits(),
                PREFIX_INCLUSIVE_SUM => fold(lane, true).map_or(0, Value::bits),
                BALLOT => present
                    .iter()
                    .filter(|&&l| truth(l))
                    .fold(0u64, |m, &l| m | 1 << l),
                ANY => present.iter().any(|&l| truth(l)) as u64,
                ALL => present.iter().all(|&l| truth(l)) as u64,
                _ => own,
            })
        })
        .collect()
}

thread_local! {
    /// The yielder of the coroutine running on this host thread, for the hooks.
    static YIELDER: Cell<*const Yielder<u64, Suspend>> = const { Cell::new(std::ptr::null()) };
    /// Coroutine stacks kept per worker thread: mapping them costs more than a group.
    static STACKS: RefCell<Vec<DefaultStack>> = const { RefCell::new(Vec::new()) };
}

/// Suspends the calling kernel thread with `why`; returns what the runner resumes it
/// with (a SIMD-group function's result). Outside a coroutine (never, for the kernels the
/// runner gives coroutines) it returns `fallback`.
fn suspend(why: Suspend, fallback: u64) -> u64 {
    let y = YIELDER.with(|c| c.get());
    if y.is_null() {
        return fallback;
    }
    // SAFETY: set by the coroutine that is running now, for its own lifetime.
    let input = unsafe { (*y).suspend(why) };
    // Other threads ran meanwhile and set their own: this one is running again.
    YIELDER.with(|c| c.set(y));
    input
}

/// Called by `threadgroup_barrier` in the library.
pub unsafe extern "C" fn barrier_hook(site: u32) {
    suspend(Suspend::Barrier(site), 0);
}

/// Called by every `simd_*` function in the library.
pub unsafe extern "C" fn simd_hook(op: u32, ty: u32, bits: u64, arg: u32) -> u64 {
    suspend(Suspend::Simd(SimdCall { op, ty, bits, arg }), bits)
}

/// Stack of one kernel thread (generated kernels keep at most 1024 locals of 8 bytes).
const THREAD_STACK_BYTES: usize = 64 * 1024;

/// Where a thread stands between rounds.
#[derive(Clone, Copy, PartialEq)]
enum State {
    /// To be resumed with this value (a SIMD-group function's result, or 0).
    Ready(u64),
    At(Suspend),
    Done,
}

/// Runs the group's threads (`threads`, in linear order within the group) as coroutines until all have finished. A barrier
/// that not every thread reaches, or a SIMD-group function that not every lane of a
/// SIMD-group reaches together, is an error naming where.
pub fn run_in_lockstep(
    kernel: &str,
    group: [u32; 3],
    threads: &[ShimThread],
    order: ThreadOrder,
    run: impl Fn(&ShimThread),
) -> Result<()> {
    let run: &dyn Fn(&ShimThread) = &run;
    // SAFETY: corosensei needs 'static closures; every coroutine below finishes or is
    // reset before this function returns, and nothing borrowed outlives it.
    let run: &'static dyn Fn(&ShimThread) = unsafe { std::mem::transmute(run) };
    let mut live: Vec<Option<Coroutine<u64, Suspend, (), DefaultStack>>> = Vec::new();
    for &t in threads {
        let stack = match STACKS.with(|s| s.borrow_mut().pop()) {
            Some(stack) => stack,
            None => DefaultStack::new(THREAD_STACK_BYTES).map_err(|e| Error::OutOfMemory {
                device: "msl-shim".into(),
                requested: THREAD_STACK_BYTES as u64,
                detail: format!("a kernel thread's stack could not be mapped: {e}"),
            })?,
        };
        live.push(Some(Coroutine::with_stack(
            stack,
            move |y: &Yielder<u64, Suspend>, _first: u64| {
                YIELDER.with(|c| c.set(y as *const _));
                run(&t);
            },
        )));
    }
    let result = schedule(kernel, group, order, &mut live);
    // Suspended threads hold C++ frames, which must not be unwound: drop them without
    // unwinding (the kernel's frames own no resources).
    for co in live.iter_mut().flatten() {
        if !co.done() {
            // SAFETY: nothing on the coroutine's stack needs dropping (plain C++ frames
            // and the closure's Copy captures).
            unsafe { co.force_reset() };
        }
    }
    result
}

fn schedule(
    kernel: &str,
    group: [u32; 3],
    order: ThreadOrder,
    live: &mut [Option<Coroutine<u64, Suspend, (), DefaultStack>>],
) -> Result<()> {
    let divergence = |detail: String| Error::BarrierDivergence {
        kernel: kernel.to_string(),
        group,
        detail,
    };
    let mut states = vec![State::Ready(0); live.len()];
    let mut sequence: Vec<usize> = (0..live.len()).collect();
    let mut rng = order.rng(group);
    loop {
        if let Some(rng) = rng.as_mut() {
            rng.shuffle(&mut sequence);
        }
        for &t in &sequence {
            let State::Ready(input) = states[t] else {
                continue;
            };
            let Some(co) = live[t].as_mut() else { continue };
            let outcome = co.resume(input);
            // The coroutine set YIELDER for itself; clear it between threads.
            YIELDER.with(|c| c.set(std::ptr::null()));
            states[t] = match outcome {
                CoroutineResult::Yield(why) => State::At(why),
                CoroutineResult::Return(()) => {
                    if let Some(co) = live[t].take() {
                        let stack = co.into_stack();
                        STACKS.with(|s| s.borrow_mut().push(stack));
                    }
                    State::Done
                }
            };
        }
        // SIMD-group functions first: lanes there wait for their SIMD-group only.
        if states
            .iter()
            .any(|s| matches!(s, State::At(Suspend::Simd(_))))
        {
            resolve_simd_groups(&mut states).map_err(divergence)?;
            continue;
        }
        let waiting: Vec<u32> = states
            .iter()
            .filter_map(|s| match s {
                State::At(Suspend::Barrier(site)) => Some(*site),
                _ => None,
            })
            .collect();
        let Some(&site) = waiting.first() else {
            return Ok(()); // every thread finished
        };
        if let Some(other) = waiting.iter().find(|&&s| s != site) {
            return Err(divergence(format!(
                "threads wait at different barriers (lines {site} and {other} of the MSL)"
            )));
        }
        let finished = states.iter().filter(|s| **s == State::Done).count();
        if finished > 0 {
            return Err(divergence(format!(
                "{finished} thread(s) finished while {} waited at the barrier on line {site} \
                 of the MSL",
                waiting.len()
            )));
        }
        states.fill(State::Ready(0));
    }
}

/// Computes every SIMD-group function the lanes wait at, and readies those lanes. Every
/// lane of a SIMD-group must be at the same function (the IR's rule), or it is an error.
fn resolve_simd_groups(states: &mut [State]) -> std::result::Result<(), String> {
    let width = SIMD_WIDTH as usize;
    // The threads are the whole group in linear order (kernels with SIMD-group functions
    // run whole groups), so SIMD-group `k` is threads `32k..32k + 32`, lane = index % 32.
    for first_thread in (0..states.len()).step_by(width) {
        let members = first_thread..(first_thread + width).min(states.len());
        let calls: Vec<(usize, SimdCall)> = members
            .clone()
            .filter_map(|t| match states[t] {
                State::At(Suspend::Simd(call)) => Some((t, call)),
                _ => None,
            })
            .collect();
        let Some(&(_, first)) = calls.first() else {
            continue;
        };
        if calls.len() != members.len()
            || calls
                .iter()
                .any(|(_, c)| (c.op, c.ty) != (first.op, first.ty))
        {
            let describe = |t: usize| match states[t] {
                State::At(Suspend::Simd(c)) => op_name(c.op).to_string(),
                State::At(Suspend::Barrier(site)) => format!("the barrier on line {site}"),
                State::Done => "its end".to_string(),
                State::Ready(_) => "running".to_string(),
            };
            let odd = members
                .clone()
                .find(|&t| describe(t) != describe(members.start))
                .unwrap_or(members.start);
            return Err(format!(
                "SIMD-group divergence: lane {} is at {} while lane {} is at {} (every lane \
                 of a SIMD-group must reach a SIMD-group function together)",
                members.start - first_thread,
                describe(members.start),
                odd - first_thread,
                describe(odd)
            ));
        }
        let mut lanes = vec![None; width];
        for &(t, call) in &calls {
            lanes[t - first_thread] = Some(call);
        }
        let results = simd_results(&lanes);
        for &(t, _) in &calls {
            states[t] = State::Ready(results[t - first_thread].unwrap_or(POISON));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(op: u32, ty: u32, values: &[u64], arg: u32) -> Vec<Option<SimdCall>> {
        let mut lanes = vec![None; 32];
        for (l, &bits) in values.iter().enumerate() {
            lanes[l] = Some(SimdCall { op, ty, bits, arg });
        }
        lanes
    }

    #[test]
    fn simd_functions_follow_metal_over_the_lanes_present() {
        // 5 lanes of a partial SIMD-group: i32 values -2, 7, 0, 7, 3.
        let v: Vec<u64> = [-2i32, 7, 0, 7, 3]
            .iter()
            .map(|&x| x as u32 as u64)
            .collect();
        let at = |r: &[Option<u64>], l: usize| r[l].unwrap() as u32 as i32;
        let sum = simd_results(&calls(SUM, TY_I32, &v, 0));
        assert_eq!(at(&sum, 4), 15);
        assert_eq!(sum[5], None, "absent lanes get no result");
        assert_eq!(at(&simd_results(&calls(MIN, TY_I32, &v, 0)), 0), -2);
        assert_eq!(at(&simd_results(&calls(MAX, TY_I32, &v, 0)), 2), 7);
        let excl = simd_results(&calls(PREFIX_EXCLUSIVE_SUM, TY_I32, &v, 0));
        let incl = simd_results(&calls(PREFIX_INCLUSIVE_SUM, TY_I32, &v, 0));
        assert_eq!(
            (0..5).map(|l| at(&excl, l)).collect::<Vec<_>>(),
            [0, -2, 5, 5, 12]
        );
        assert_eq!(
            (0..5).map(|l| at(&incl, l)).collect::<Vec<_>>(),
            [-2, 5, 5, 12, 15]
        );
        // Shuffles: lane 4 reads lane 1; lane 3 ^ 1 = 2; lane 4 ^ 1 = 5 is absent.
        let sh = simd_results(&calls(SHUFFLE, TY_I32, &v, 1));
        assert_eq!(at(&sh, 4), 7);
        let xor = simd_results(&calls(SHUFFLE_XOR, TY_I32, &v, 1));
        assert_eq!(at(&xor, 3), 0);
        assert_eq!(xor[4], Some(POISON));
        let up = simd_results(&calls(SHUFFLE_UP, TY_I32, &v, 2));
        assert_eq!(
            (at(&up, 1), at(&up, 4)),
            (7, 0),
            "lanes below delta keep their own"
        );
        let down = simd_results(&calls(SHUFFLE_DOWN, TY_I32, &v, 2));
        assert_eq!(at(&down, 0), 0);
        assert_eq!(down[3], Some(POISON), "lane 5 is absent");
        // A full group: shuffle_down past lane 31 keeps the caller's value.
        let full: Vec<u64> = (0..32).collect();
        let down = simd_results(&calls(SHUFFLE_DOWN, TY_U32, &full, 3));
        assert_eq!((down[28], down[29]), (Some(31), Some(29)));
        // Votes over the lanes present.
        let b: Vec<u64> = vec![1, 0, 1, 1, 0];
        assert_eq!(
            simd_results(&calls(BALLOT, TY_BOOL, &b, 0))[0],
            Some(0b1101)
        );
        assert_eq!(simd_results(&calls(ANY, TY_BOOL, &b, 0))[1], Some(1));
        assert_eq!(simd_results(&calls(ALL, TY_BOOL, &b, 0))[1], Some(0));
        // f32 sums in lane order.
        let f: Vec<u64> = [0.5f32, 1.25, -3.0]
            .iter()
            .map(|x| x.to_bits() as u64)
            .collect();
        let fsum = simd_results(&calls(SUM, TY_F32, &f, 0));
        assert_eq!(f32::from_bits(fsum[2].unwrap() as u32), -1.25);
    }
}
