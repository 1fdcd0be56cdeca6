//! The autotuner: for an operation with more than one good configuration, measures the
//! candidates once per (device, driver, operation, element type, size class), keeps the
//! winner in memory and on disk, and reuses it in later processes.
//!
//! * **File**: `$DOTCOMPUTE_CACHE_DIR/ops/tune.json`, else
//!   `$XDG_CACHE_HOME/dotcompute/ops/tune.json`, else `~/.cache/dotcompute/ops/tune.json`:
//!   one JSON object per key with the winner and every candidate's median, minimum,
//!   maximum and repetitions (or its error), so a user can read why. `DOTCOMPUTE_CACHE=off`
//!   keeps choices in memory only.
//! * **`DOTCOMPUTE_AUTOTUNE`**: `on` (default), `off` (each operation's documented default,
//!   its first candidate, without measuring), `force` (measure again, once per key and
//!   process, and overwrite: later calls in the same process reuse what it measured).
//! * **Never a panic, never a different exact result.** An unreadable file is reported
//!   through `tracing` and replaced; a cached winner that is no longer a candidate is
//!   dropped with a warning and measured again; a candidate that fails while measured is
//!   recorded as failed and skipped. Exact operations give the same output whichever
//!   candidate runs; float sums state a bound that holds for every candidate.
//! * **Small inputs** (below 2^18 elements) take the default without measuring: launches,
//!   not the configuration, bound them.
//! * **Budget**: measuring stops after `BUDGET` (2 s) of tuning or when a candidate is
//!   clearly slower (its fastest run above 1.5× the best median so far after two runs).
//! * **Clock**: host wall time of 4 runs and one wait for the device, the same on every
//!   backend; device timers would need the device's profiling switch, which is the
//!   user's.
//! * **Cold caches on the CPU device** from [`COLD_FROM_CLASS`] (2^22 elements): each sample is one
//!   run after [`HostCacheSettle`] has pushed the data out of the host's caches, as the
//!   benchmarks measure it. Four runs back to back over the same arrays measure the
//!   cache the run before left warm, which a pipeline of different operations on large
//!   arrays does not see: on the 16-core host of an H200 (300 MiB of L3, session 34) the
//!   CPU scan's two-pass form with ordinary stores measured back to back 3% faster than
//!   its single sweep with streamed stores, and 1.28–1.38× slower than it from cold caches
//!   in the bench. The settle's memory (twice the last-level cache) is held only while a
//!   key is measured.

use dotcompute::{AsStream, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most time one key may spend measuring.
pub const BUDGET: Duration = Duration::from_secs(2);
/// Timed samples per candidate at most (after one warm-up sample).
const REPS: usize = 5;
/// Runs per sample.
const BATCH: usize = 4;

/// How much faster than the best so far a later candidate must be to take its place.
/// Candidates are listed default first, so a tie keeps the earlier: on an H200 NVIDIA
/// Vulkan's 8191 × 8193 transpose went to the form measured 250.2 µs against 250.3 on
/// the host clock, 4 % slower on the device's (2026-11-30), and the next run may pick the
/// other.
const TIE: f64 = 0.01;
/// Below this many elements an operation is bound by launches, not by its configuration:
/// the default runs without measuring.
pub const MIN_TUNED: usize = 1 << 18;
/// From this size class (keys of 2^22 elements: more than 2^21) the CPU device's
/// candidates are measured from cold caches (see the module's doc): 2^22 four-byte
/// elements in and out (32 MiB) outgrow the private caches of every core of a 16-core
/// host together. By class, not by count, so that every call of one key is measured
/// alike.
pub const COLD_FROM_CLASS: u32 = 22;

/// Host memory read on every core to push other data out of the host's caches and have
/// their written lines written back: [`host_settle_bytes`] of it. The tuner measures the
/// CPU device's large keys after it; `dotcompute bench` settles before each timed run on
/// the CPU device with it.
pub struct HostCacheSettle {
    words: Vec<u64>,
}

impl HostCacheSettle {
    /// Allocates (and touches) the memory read.
    pub fn new() -> Self {
        Self {
            words: vec![1u64; host_settle_bytes() / 8],
        }
    }

    /// Reads all of it, in parallel chunks.
    pub fn settle(&self) {
        use rayon::prelude::*;
        let x = self
            .words
            .par_chunks(1 << 16)
            .map(|c| c.iter().fold(0, |a, &b| a ^ b))
            .reduce(|| 0, |a, b| a ^ b);
        std::hint::black_box(x);
    }
}

impl Default for HostCacheSettle {
    fn default() -> Self {
        Self::new()
    }
}

/// Bytes [`HostCacheSettle`] reads: twice the host's last-level cache (from
/// `/sys/devices/system/cpu/cpu0/cache`), 64 MiB to 1 GiB, 512 MiB where the system does
/// not say. Twice, because a cache's replacement is not strict LRU: one pass of its own
/// size leaves some of what was there before.
pub fn host_settle_bytes() -> usize {
    let level3 = (0..8).find_map(|i| {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
        let level = std::fs::read_to_string(format!("{dir}/level")).ok()?;
        if level.trim() != "3" {
            return None;
        }
        let size = std::fs::read_to_string(format!("{dir}/size")).ok()?;
        let size = size.trim();
        let (digits, unit) = size.split_at(size.find(|c: char| !c.is_ascii_digit())?);
        let n: usize = digits.parse().ok()?;
        Some(match unit {
            "K" => n << 10,
            "M" => n << 20,
            _ => n,
        })
    });
    level3.map_or(512 << 20, |b| (2 * b).clamp(64 << 20, 1 << 30))
}

/// How the tuner behaves (`DOTCOMPUTE_AUTOTUNE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    On,
    Off,
    Force,
}

/// One candidate's figures.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Measured {
    pub name: String,
    /// Seconds; `None` where it failed or was cut short before a timed run.
    pub median_s: Option<f64>,
    pub min_s: Option<f64>,
    pub max_s: Option<f64>,
    pub reps: usize,
    /// Why it has no figure (an error, or cut short).
    pub note: Option<String>,
}

/// The stored choice for one key.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Choice {
    pub winner: String,
    pub candidates: Vec<Measured>,
    /// Seconds spent measuring.
    pub tuning_s: f64,
    /// Whether each sample was one run from cold caches (the CPU device's large keys,
    /// [`COLD_FROM_CLASS`]), not four back to back. Absent in files before it: false.
    #[serde(default)]
    pub cold_caches: bool,
}

#[derive(Default)]
struct State {
    /// `None` until the file was read.
    choices: Option<BTreeMap<String, Choice>>,
    /// The keys this process measured: under `force` they are measured once per process,
    /// then served like cached choices.
    measured: BTreeSet<String>,
}

static STATE: Mutex<State> = Mutex::new(State {
    choices: None,
    measured: BTreeSet::new(),
});

thread_local! {
    /// Candidates pinned on this thread by [`with_candidate`], innermost last.
    static PINNED: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` with candidate `name` chosen by every operation that offers a candidate of
/// that name, on this thread only, without measuring or recording anything: for tests
/// that must cover each candidate, and for reproducing a choice. An operation without
/// such a candidate (or a device that cannot run it) chooses as usual.
///
/// ```
/// use dotcompute::prelude::*;
/// use dotcompute_ops::{sort::sort_keys, tune, Order};
/// let d = Device::cpu();
/// let mut k = d.upload(&[3u32, 1, 2])?;
/// tune::with_candidate("radix4", || sort_keys(&d, &mut k, Order::Ascending))?;
/// assert_eq!(k.to_vec()?, [1, 2, 3]);
/// # Ok::<(), dotcompute::Error>(())
/// ```
pub fn with_candidate<R>(name: &str, f: impl FnOnce() -> R) -> R {
    struct Unpin;
    impl Drop for Unpin {
        fn drop(&mut self) {
            PINNED.with(|p| p.borrow_mut().pop());
        }
    }
    PINNED.with(|p| p.borrow_mut().push(name.to_string()));
    let _unpin = Unpin; // also on a panic in `f`
    f()
}

/// The index of the innermost pinned candidate among `candidates`, if any.
pub(crate) fn pinned(candidates: &[&str]) -> Option<usize> {
    PINNED.with(|p| {
        p.borrow()
            .iter()
            .rev()
            .find_map(|name| candidates.iter().position(|c| c == name))
    })
}

/// The mode the environment selects (`Error::Config` for an unknown value).
pub fn mode() -> Result<Mode> {
    Ok(match dotcompute::settings::choices::AUTOTUNE.read()? {
        Some("off") => Mode::Off,
        Some("force") => Mode::Force,
        _ => Mode::On,
    })
}

/// The tuner's file, if the environment allows one (`Error::Config` for a
/// `DOTCOMPUTE_CACHE` value that is not an on/off word).
pub fn file() -> Result<Option<PathBuf>> {
    Ok(dotcompute::settings::cache_dir("ops")?.map(|dir| dir.join("tune.json")))
}

fn load() -> BTreeMap<String, Choice> {
    // `choose` checked the setting before the first load.
    let Ok(Some(path)) = file() else {
        return BTreeMap::new();
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return BTreeMap::new(),
        Err(e) => {
            tracing::warn!(path = %path.display(), "tuner file unreadable, choices measured again: {e}");
            return BTreeMap::new();
        }
    };
    serde_json::from_str(&text).unwrap_or_else(|e| {
        tracing::warn!(path = %path.display(), "tuner file damaged, choices measured again and the file replaced: {e}");
        BTreeMap::new()
    })
}

fn store(choices: &BTreeMap<String, Choice>) {
    let Ok(Some(path)) = file() else { return };
    let write = || -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let text = serde_json::to_string_pretty(choices).map_err(std::io::Error::other)?;
        // Whole or not at all: a reader never sees half a file.
        let tmp = path.with_extension(format!("json.{}", std::process::id()));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, &path)
    };
    if let Err(e) = write() {
        tracing::warn!(path = %path.display(), "could not write the tuner file (choices kept in memory): {e}");
    }
}

/// A size class: ⌈log2 n⌉.
pub(crate) fn size_class(n: usize) -> u32 {
    usize::BITS - n.saturating_sub(1).leading_zeros()
}

/// The key of a choice: device and driver, operation, element type, and the size class
/// (⌈log2 n⌉).
pub fn key(queue: &impl AsStream, op: &str, ty: &str, n: usize) -> String {
    let info = queue.device().info();
    let class = size_class(n);
    format!(
        "{} | {} | {op} | {ty} | 2^{class}",
        queue.device().label(),
        info.driver
    )
}

/// [`choose`] for work on `queue`: while `queue` records into a graph, nothing can be
/// measured (the candidates' runs would become nodes), so a key with no cached winner
/// takes the default (0) instead of being measured.
pub(crate) fn choose_on(
    queue: &impl AsStream,
    key: &str,
    n: usize,
    candidates: &[&str],
    run: impl FnMut(usize) -> Result<()>,
    sync: impl FnMut() -> Result<()>,
) -> Result<usize> {
    let cold = crate::host::is_cpu(queue) && size_class(n) >= COLD_FROM_CLASS;
    choose_measuring(key, n, candidates, !queue.recording(), cold, run, sync)
}

/// The index of the candidate to run for `key`: the default (0) when off or for fewer
/// than [`MIN_TUNED`] elements, the cached winner when known, else the fastest of `candidates` measured with `run(i)` (which
/// must leave only the operation's own outputs changed). `sync` waits for the queue.
pub fn choose(
    key: &str,
    n: usize,
    candidates: &[&str],
    run: impl FnMut(usize) -> Result<()>,
    sync: impl FnMut() -> Result<()>,
) -> Result<usize> {
    choose_measuring(key, n, candidates, true, false, run, sync)
}

/// [`choose`], measuring only where `measure` allows (else the default stands in for a
/// winner not yet known); `cold`: each sample one run after a [`HostCacheSettle`].
fn choose_measuring(
    key: &str,
    n: usize,
    candidates: &[&str],
    measure: bool,
    cold: bool,
    mut run: impl FnMut(usize) -> Result<()>,
    mut sync: impl FnMut() -> Result<()>,
) -> Result<usize> {
    if let Some(i) = pinned(candidates) {
        return Ok(i);
    }
    let mode = mode()?;
    // A cache setting the tuner cannot read is an error here, not a silent default.
    file()?;
    if mode == Mode::Off || candidates.len() < 2 || n < MIN_TUNED {
        return Ok(0);
    }
    {
        let mut state = STATE.lock().unwrap_or_else(|p| p.into_inner());
        let measured_here = state.measured.contains(key);
        let choices = state.choices.get_or_insert_with(load);
        // `force` measures again, once per process; where nothing can be measured the
        // cache still serves.
        if mode == Mode::On || !measure || measured_here {
            if let Some(c) = choices.get(key) {
                match candidates.iter().position(|&name| name == c.winner) {
                    Some(i) => return Ok(i),
                    None if measure => {
                        tracing::warn!(key, winner = %c.winner, "the cached winner is no longer a candidate: measured again");
                        choices.remove(key);
                    }
                    None => {}
                }
            }
        }
    }
    if !measure {
        return Ok(0);
    }
    // Measured outside the lock: other keys (and other threads) go on.
    let started = Instant::now();
    let settle = cold.then(HostCacheSettle::new);
    let batch = if cold { 1 } else { BATCH };
    let mut figures: Vec<Measured> = Vec::new();
    let mut best: Option<(usize, f64)> = None;
    for (i, &name) in candidates.iter().enumerate() {
        let mut m = Measured {
            name: name.to_string(),
            median_s: None,
            min_s: None,
            max_s: None,
            reps: 0,
            note: None,
        };
        if started.elapsed() > BUDGET {
            m.note = Some("not measured: the tuning budget was spent".into());
            figures.push(m);
            continue;
        }
        let mut times = Vec::new();
        let mut failed = None;
        for rep in 0..=REPS {
            if let Some(settle) = &settle {
                settle.settle();
            }
            let t = Instant::now();
            // A sample is BATCH runs and one wait: the wait's own cost (a poll of the
            // device, ~0.3 ms on wgpu) would otherwise drown sub-millisecond differences
            // (on an H200 it made wgpu's reduce pick 512 groups, 20% slower on device
            // clocks). From cold caches one run: the CPU device's wait is free.
            let ran = (0..batch).try_for_each(|_| run(i)).and_then(|()| sync());
            if let Err(e) = ran {
                failed = Some(e.to_string());
                break;
            }
            if rep > 0 {
                times.push(t.elapsed().as_secs_f64() / batch as f64);
            }
            let fastest = times.iter().copied().fold(f64::INFINITY, f64::min);
            if times.len() >= 2 && best.is_some_and(|(_, b)| fastest > 1.5 * b) {
                break; // clearly slower: no need for more runs
            }
            if started.elapsed() > BUDGET && !times.is_empty() {
                break;
            }
        }
        if let Some(e) = failed {
            tracing::warn!(
                key,
                candidate = name,
                "candidate failed while tuned (skipped): {e}"
            );
            m.note = Some(format!("failed: {e}"));
        } else if !times.is_empty() {
            times.sort_by(f64::total_cmp);
            let median = times[times.len() / 2];
            m.median_s = Some(median);
            m.min_s = times.first().copied();
            m.max_s = times.last().copied();
            m.reps = times.len();
            if best.is_none_or(|(_, b)| median < b * (1.0 - TIE)) {
                best = Some((i, median));
            }
        }
        figures.push(m);
    }
    let Some((winner, _)) = best else {
        // Every candidate failed: the default runs, and its error reaches the caller.
        return Ok(0);
    };
    let choice = Choice {
        winner: candidates[winner].to_string(),
        candidates: figures,
        tuning_s: started.elapsed().as_secs_f64(),
        cold_caches: cold,
    };
    tracing::info!(key, winner = %choice.winner, tuning_s = choice.tuning_s, "tuned");
    let mut state = STATE.lock().unwrap_or_else(|p| p.into_inner());
    state.measured.insert(key.to_string());
    let choices = state.choices.get_or_insert_with(load);
    choices.insert(key.to_string(), choice);
    store(choices);
    Ok(winner)
}
