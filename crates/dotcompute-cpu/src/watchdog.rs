//! Launch time limits: cooperative cancellation of CPU kernels.
//!
//! A CPU kernel runs on the caller's thread and rayon's workers, so nothing can stop it
//! from outside. Instead the generated code polls [`crate::runtime::ThreadCtx::stop_requested`]
//! at the back-edge of every loop that can run long (`while`, `loop`, and `for` loops that
//! contain another loop; an innermost `for` is bounded by its range and stays free of the
//! test so that it still vectorises). The poll is one relaxed load of the launch's
//! [`ErrorSlot`] flag, which is raised by any error of the launch and, past the deadline,
//! by the one watchdog thread here. A stopped launch returns `Error::LaunchTimedOut`; its
//! outputs are partial, and the device stays usable (nothing is lost, unlike a GPU).

use dotcompute_hal::native::ErrorSlot;
use dotcompute_hal::Error;
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The variable that sets the limit.
pub const TIMEOUT_VARIABLE: &str = "DOTCOMPUTE_CPU_TIMEOUT_S";

/// The limit when the variable is unset: as long as CUDA's.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

struct Watched {
    slot: Arc<ErrorSlot>,
    kernel: String,
    limit: Duration,
    set_by: &'static str,
}

#[derive(Default)]
struct State {
    /// By (deadline, registration number): the first entry is the next to expire.
    watched: BTreeMap<(Instant, u64), Watched>,
    next: u64,
}

struct Watchdog {
    state: Mutex<State>,
    wake: Condvar,
}

fn watchdog() -> &'static Watchdog {
    static DOG: OnceLock<&'static Watchdog> = OnceLock::new();
    DOG.get_or_init(|| {
        let dog: &'static Watchdog = Box::leak(Box::new(Watchdog {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        }));
        // If the thread cannot start, limits are not enforced; launches still run.
        let _ = std::thread::Builder::new()
            .name("dotcompute-cpu-watchdog".into())
            .spawn(move || dog.run());
        dog
    })
}

impl Watchdog {
    fn run(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let now = Instant::now();
            while let Some(entry) = state.watched.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                let w = entry.remove();
                w.slot.raise(Error::LaunchTimedOut {
                    kernel: w.kernel,
                    seconds: w.limit.as_secs_f64(),
                    variable: w.set_by,
                });
            }
            let next = state.watched.first_key_value().map(|((d, _), _)| *d);
            state = match next {
                None => self.wake.wait(state).unwrap_or_else(|p| p.into_inner()),
                Some(deadline) => {
                    let wait = deadline.saturating_duration_since(now);
                    match self.wake.wait_timeout(state, wait) {
                        Ok((s, _)) => s,
                        Err(p) => p.into_inner().0,
                    }
                }
            };
        }
    }
}

/// Raises `Error::LaunchTimedOut` in `slot` once `limit` has passed, unless dropped first.
pub struct Watch {
    key: Option<(Instant, u64)>,
}

/// Starts watching a launch of `kernel`; `set_by` names what set the limit (for the
/// error). A limit too far away to represent is no limit.
pub fn watch(slot: &Arc<ErrorSlot>, kernel: &str, limit: Duration, set_by: &'static str) -> Watch {
    let dog = watchdog();
    let Some(deadline) = Instant::now().checked_add(limit) else {
        return Watch { key: None };
    };
    let mut state = dog.state.lock().unwrap_or_else(|p| p.into_inner());
    let key = (deadline, state.next);
    state.next += 1;
    let earliest = state
        .watched
        .first_key_value()
        .is_none_or(|(k, _)| key < *k);
    state.watched.insert(
        key,
        Watched {
            slot: slot.clone(),
            kernel: kernel.to_string(),
            limit,
            set_by,
        },
    );
    drop(state);
    if earliest {
        dog.wake.notify_one(); // the watchdog sleeps until a later deadline
    }
    Watch { key: Some(key) }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let Some(key) = self.key else {
            return;
        };
        let dog = watchdog();
        let mut state = dog.state.lock().unwrap_or_else(|p| p.into_inner());
        state.watched.remove(&key);
    }
}
