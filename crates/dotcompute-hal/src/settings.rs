//! `DOTCOMPUTE_*` environment variables: every one in one table ([`VARIABLES`]), read
//! from the environment **once per process** into one [`Config`] (at the first use of any
//! of them), and parsed strictly: a value that is not one of the accepted ones is
//! `Error::Config` naming the variable, the value and what is accepted, never a silent
//! default and never a panic (issue 27: `DOTCOMPUTE_CHECKED=true` meant off,
//! `DOTCOMPUTE_WGPU_TIMEOUT_S=-5` meant 300 s and `=inf` panicked).
//!
//! Read once because a library that reads its environment at every compile or launch
//! answers differently as the environment changes under it, and changing it while other
//! threads read it is undefined behaviour on most C libraries (`std::env::set_var` is
//! `unsafe` in Rust 2024 for that reason). A program that wants other settings sets the
//! variables before it first uses dotcompute, or starts a child process, as dotcompute's
//! own tests do. Each reader still parses where it uses a value, so a refused value is the
//! error of the operation that needed it (a device that does not open, a launch that is
//! refused), named by the table's "when" column.

use crate::error::{Error, Result};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

mod variables;
pub use variables::{markdown, Scope, Variable, VARIABLES};

/// Variables outside dotcompute's own that [`Config::cache_dir`] falls back on.
const FALLBACKS: &[&str] = &["XDG_CACHE_HOME", "HOME"];

/// The values of every variable in [`VARIABLES`] (and of `XDG_CACHE_HOME` and `HOME`), as
/// the environment held them when the process first asked for one.
#[derive(Debug, Default)]
pub struct Config {
    values: HashMap<&'static str, OsString>,
}

impl Config {
    /// The process's configuration: the environment read once, at the first call.
    pub fn get() -> &'static Config {
        static CONFIG: OnceLock<Config> = OnceLock::new();
        CONFIG.get_or_init(|| Config::from_lookup(|name| std::env::var_os(name)))
    }

    /// A configuration from `lookup` instead of the environment (tests, tools that show
    /// what a set of values would do). Only the table's variables are asked for.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> Config {
        let names = VARIABLES
            .iter()
            .map(|v| v.name)
            .chain(FALLBACKS.iter().copied());
        Config {
            values: names
                .filter_map(|name| lookup(name).map(|v| (name, v)))
                .filter(|(_, v)| !v.is_empty())
                .collect(),
        }
    }

    /// The raw value, `None` when unset or empty. Asking for a name the table lacks is a
    /// mistake in dotcompute (the settings test finds such a name in the sources too).
    pub fn os_value(&self, name: &str) -> Option<&OsStr> {
        debug_assert!(
            VARIABLES.iter().any(|v| v.name == name) || FALLBACKS.contains(&name),
            "{name} is not in settings::VARIABLES"
        );
        self.values.get(name).map(OsString::as_os_str)
    }

    /// The value as text, trimmed; `None` when unset or empty.
    pub fn value(&self, name: &str) -> Option<String> {
        self.os_value(name)
            .map(|v| v.to_string_lossy().trim().to_string())
            .filter(|v| !v.is_empty())
    }

    /// A path-valued variable (not trimmed: a path may end in a space).
    pub fn path(&self, name: &str) -> Option<PathBuf> {
        self.os_value(name).map(PathBuf::from)
    }

    /// An on/off variable: `Ok(None)` when unset or empty.
    pub fn switch(&self, name: &'static str) -> Result<Option<bool>> {
        let Some(v) = self.value(name) else {
            return Ok(None);
        };
        match v.to_ascii_lowercase().as_str() {
            "1" | "on" | "true" | "yes" => Ok(Some(true)),
            "0" | "off" | "false" | "no" => Ok(Some(false)),
            _ => Err(Error::Config {
                variable: name,
                value: v,
                expected: SWITCH_VALUES,
            }),
        }
    }

    /// A duration in seconds: a positive, finite number of at most a year (`Ok(default)`
    /// when unset or empty).
    pub fn seconds(&self, name: &'static str, default: Duration) -> Result<Duration> {
        let Some(v) = self.value(name) else {
            return Ok(default);
        };
        match v.parse::<f64>() {
            Ok(s) if s > 0.0 && s <= MAX_TIME_LIMIT.as_secs_f64() => Ok(Duration::from_secs_f64(s)),
            _ => Err(Error::Config {
                variable: name,
                value: v,
                expected: "a number of seconds greater than 0 and at most 31536000 (a year)",
            }),
        }
    }

    /// One of `choices` (compared without case): `Ok(None)` when unset or empty.
    pub fn choice(
        &self,
        name: &'static str,
        choices: &[&'static str],
        expected: &'static str,
    ) -> Result<Option<&'static str>> {
        let Some(v) = self.value(name) else {
            return Ok(None);
        };
        choices
            .iter()
            .find(|c| c.eq_ignore_ascii_case(&v))
            .copied()
            .map(Some)
            .ok_or(Error::Config {
                variable: name,
                value: v,
                expected,
            })
    }

    /// A comma-separated list of some of `choices` (compared without case, each once,
    /// in `choices`' order): `Ok(None)` when unset or empty.
    pub fn choice_list(
        &self,
        name: &'static str,
        choices: &[&'static str],
        expected: &'static str,
    ) -> Result<Option<Vec<&'static str>>> {
        let Some(v) = self.value(name) else {
            return Ok(None);
        };
        let refused = || Error::Config {
            variable: name,
            value: v.clone(),
            expected,
        };
        let mut chosen = Vec::new();
        for part in v.split(',').map(str::trim) {
            let c = choices
                .iter()
                .find(|c| c.eq_ignore_ascii_case(part))
                .ok_or_else(refused)?;
            chosen.push(*c);
        }
        Ok(Some(
            choices
                .iter()
                .copied()
                .filter(|c| chosen.contains(c))
                .collect(),
        ))
    }

    /// A comma-separated list of backends: see [`backends`].
    pub fn backends(&self, name: &'static str) -> Result<Vec<crate::BackendKind>> {
        let Some(list) = self.value(name) else {
            return Ok(Vec::new());
        };
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                crate::BackendKind::parse(s).ok_or_else(|| Error::Config {
                    variable: name,
                    value: list.clone(),
                    expected:
                        "backend names separated by commas: cpu, cuda, wgpu (or vulkan), metal",
                })
            })
            .collect()
    }

    /// The directory for on-disk caches of kind `sub`: see [`cache_dir`].
    pub fn cache_dir(&self, sub: &str) -> Result<Option<PathBuf>> {
        if !self.switch("DOTCOMPUTE_CACHE")?.unwrap_or(true) {
            return Ok(None);
        }
        let base = if let Some(d) = self.path("DOTCOMPUTE_CACHE_DIR") {
            d
        } else if let Some(d) = self.path("XDG_CACHE_HOME") {
            d.join("dotcompute")
        } else {
            let Some(home) = self.path("HOME") else {
                return Ok(None);
            };
            home.join(".cache").join("dotcompute")
        };
        Ok(Some(base.join(sub)))
    }
}

/// The variable's value in the process's [`Config`], trimmed; `None` when unset or empty.
pub fn value(name: &str) -> Option<String> {
    Config::get().value(name)
}

/// What [`switch`] accepts.
pub const SWITCH_VALUES: &str =
    "1, on, true or yes to turn it on; 0, off, false or no to turn it off";

/// An on/off variable of the process's [`Config`]: `Ok(None)` when unset or empty.
pub fn switch(name: &'static str) -> Result<Option<bool>> {
    Config::get().switch(name)
}

/// An on/off variable with a default for unset.
pub fn switch_or(name: &'static str, default: bool) -> Result<bool> {
    Ok(switch(name)?.unwrap_or(default))
}

/// `DOTCOMPUTE_UNROLL` (an on/off switch, on by default): whether generated CUDA and WGSL
/// unroll grid-stride loops over read-only buffers. Backends read it when a device opens
/// and pass it to the code generators, which read no environment.
pub fn unroll() -> Result<bool> {
    switch_or("DOTCOMPUTE_UNROLL", true)
}

/// A duration in seconds from the process's [`Config`]: a positive, finite number of at
/// most a year (`Ok(default)` when unset or empty).
pub fn seconds(name: &'static str, default: Duration) -> Result<Duration> {
    Config::get().seconds(name, default)
}

/// The longest time limit accepted anywhere, in variables ([`seconds`]) and in code: a
/// year. Longer ones would overflow `Instant` arithmetic on some platforms.
pub const MAX_TIME_LIMIT: Duration = Duration::from_secs(365 * 24 * 3600);

/// Who set a time limit, for the error that reports it.
pub const SET_BY_DEVICE: &str = "Device::set_time_limit";
/// Who set a launch's own time limit.
pub const SET_BY_LAUNCH: &str = "Launch::time_limit";

/// Checks a time limit given in code (`op` names the call): more than zero, at most
/// [`MAX_TIME_LIMIT`].
pub fn check_time_limit(op: &'static str, limit: Duration) -> Result<Duration> {
    if limit.is_zero() || limit > MAX_TIME_LIMIT {
        return Err(Error::Range {
            op,
            detail: format!("a time limit must be more than 0 and at most a year, not {limit:?}"),
        });
    }
    Ok(limit)
}

/// A device's time limit: how long one launch (CPU) or one wait for the device (GPUs)
/// may last. Read from the backend's variable when the device opens (an invalid value is
/// kept as the error every launch returns), replaceable at run time by
/// `Device::set_time_limit`. Each error past the limit names what set it.
pub struct TimeLimit {
    state: std::sync::RwLock<(Result<Duration>, &'static str)>,
}

impl TimeLimit {
    /// The limit from `variable` (seconds) of the process's [`Config`], or `default` when
    /// unset.
    pub fn from_env(variable: &'static str, default: Duration) -> TimeLimit {
        TimeLimit::from_config(Config::get(), variable, default)
    }
    /// The limit from `variable` of `config`.
    pub fn from_config(config: &Config, variable: &'static str, default: Duration) -> TimeLimit {
        TimeLimit {
            state: std::sync::RwLock::new((config.seconds(variable, default), variable)),
        }
    }
    /// The limit and what set it (the variable or [`SET_BY_DEVICE`]).
    pub fn get(&self) -> Result<(Duration, &'static str)> {
        let state = self.state.read().unwrap_or_else(|p| p.into_inner());
        Ok((state.0.clone()?, state.1))
    }
    /// Replaces the limit (and any error of the variable's value).
    pub fn set(&self, limit: Duration) -> Result<()> {
        let limit = check_time_limit(SET_BY_DEVICE, limit)?;
        *self.state.write().unwrap_or_else(|p| p.into_inner()) = (Ok(limit), SET_BY_DEVICE);
        Ok(())
    }
}

/// One of `choices` (compared without case) from the process's [`Config`]: `Ok(None)`
/// when unset or empty.
pub fn choice(
    name: &'static str,
    choices: &[&'static str],
    expected: &'static str,
) -> Result<Option<&'static str>> {
    Config::get().choice(name, choices, expected)
}

/// A variable that takes one of a fixed list of values: the one definition its reader
/// and the settings table ([`VARIABLES`]) both use.
#[derive(Clone, Copy, Debug)]
pub struct Choice {
    pub name: &'static str,
    pub values: &'static [&'static str],
    /// How an error lists the values.
    pub expected: &'static str,
}

impl Choice {
    /// The value (compared without case): `Ok(None)` when unset or empty.
    pub fn read(&self) -> Result<Option<&'static str>> {
        choice(self.name, self.values, self.expected)
    }

    /// Some of the values, comma-separated (see [`Config::choice_list`]): `Ok(None)` when
    /// unset or empty.
    pub fn read_list(&self) -> Result<Option<Vec<&'static str>>> {
        Config::get().choice_list(self.name, self.values, self.expected)
    }
}

/// Every variable that takes one of a fixed list of values.
pub mod choices {
    use super::Choice;

    pub const MATMUL_KERNEL: Choice = Choice {
        name: "DOTCOMPUTE_MATMUL_KERNEL",
        values: &["pipelined", "quads", "tiled"],
        expected: "pipelined (strided rows), quads (rows in runs of four) or tiled",
    };
    pub const TF32_KERNEL: Choice = Choice {
        name: "DOTCOMPUTE_TF32_KERNEL",
        values: &[
            "w32d32",
            "w32d16",
            "w64d16",
            "w64d32",
            "w64d16n256",
            "w32d32-scalar",
            "w32d16-scalar",
            "w64d16-scalar",
            "w64d32-scalar",
            "w64d16n256-scalar",
        ],
        expected: "w32d32, w32d16, w64d16, w64d32 or w64d16n256, each also with -scalar",
    };
    pub const F16_KERNEL: Choice = Choice {
        name: "DOTCOMPUTE_F16_KERNEL",
        values: &["n128d16", "n128d32", "n256d16"],
        expected: "n128d16, n128d32 or n256d16",
    };
    /// The parts of `dotcompute bench ops` to run (a list: [`Choice::read_list`]).
    pub const BENCH_OPS: Choice = Choice {
        name: "DOTCOMPUTE_BENCH_OPS",
        values: &[
            "reduce",
            "scan",
            "copy-if",
            "sort",
            "histogram",
            "softmax",
            "transpose",
            "matmul",
            "rayon",
            "graph",
        ],
        expected: "a comma-separated list of reduce, scan, copy-if, sort, histogram, softmax, transpose, matmul, rayon, graph",
    };
    /// The sort algorithms `dotcompute bench ops` times (a list: [`Choice::read_list`]).
    pub const BENCH_SORTS: Choice = Choice {
        name: "DOTCOMPUTE_BENCH_SORTS",
        values: &[
            "onesweep8",
            "multisplit8",
            "tiles8",
            "tiles8-packed",
            "radix4",
        ],
        expected: "a comma-separated list of onesweep8, multisplit8, tiles8, tiles8-packed, radix4",
    };
    pub const AUTOTUNE: Choice = Choice {
        name: "DOTCOMPUTE_AUTOTUNE",
        values: &["on", "off", "force"],
        expected: "on, off or force",
    };
    pub const CPU_BARRIERS: Choice = Choice {
        name: "DOTCOMPUTE_CPU_BARRIERS",
        values: &["fission", "coroutines"],
        expected: "`fission` (the default) or `coroutines`",
    };
    pub const WGPU_FLOAT: Choice = Choice {
        name: "DOTCOMPUTE_WGPU_FLOAT",
        values: &["strict", "relaxed"],
        expected: "`strict` (the default) or `relaxed`",
    };
    pub const WGPU_STORAGE_BARRIERS: Choice = Choice {
        name: "DOTCOMPUTE_WGPU_STORAGE_BARRIERS",
        values: &["always", "analysed"],
        expected: "`always` (every barrier orders storage buffers) or `analysed` (the default)",
    };
}

/// A comma-separated list of backends (`cpu,wgpu`): empty when unset or empty, and an
/// unknown name is `Error::Config`. The test suites read `DOTCOMPUTE_REQUIRE` (backends
/// whose absence fails the run) and `DOTCOMPUTE_ONLY` (the only backends to run) here, so
/// every suite reads them alike.
pub fn backends(name: &'static str) -> Result<Vec<crate::BackendKind>> {
    Config::get().backends(name)
}

/// The directory for dotcompute's on-disk caches of kind `sub` (`cuda`, `wgpu`, `ops`):
/// `$DOTCOMPUTE_CACHE_DIR/sub`, else `$XDG_CACHE_HOME/dotcompute/sub`, else
/// `~/.cache/dotcompute/sub`; `Ok(None)` when `DOTCOMPUTE_CACHE` (an on/off switch, on by
/// default) is off, or no home is known. A value the switch does not accept is an error
/// (`DOTCOMPUTE_CACHE=0` used to leave every cache on: only `off` turned it off).
pub fn cache_dir(sub: &str) -> Result<Option<PathBuf>> {
    Config::get().cache_dir(sub)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A configuration holding `name = value` alone.
    fn with(name: &str, value: &str) -> Config {
        Config::from_lookup(|n| (n == name).then(|| value.into()))
    }

    #[test]
    fn switches_accept_the_usual_words_and_refuse_the_rest() {
        let name = "DOTCOMPUTE_TEST_SWITCH";
        for (v, want) in [
            ("1", true),
            (" ON ", true),
            ("True", true),
            ("no", false),
            ("0", false),
        ] {
            assert_eq!(with(name, v).switch(name).unwrap(), Some(want), "{v}");
        }
        assert_eq!(with(name, "").switch(name).unwrap(), None);
        for v in ["2", "maybe", "enable"] {
            let e = with(name, v).switch(name).unwrap_err();
            assert!(
                e.to_string().contains(name) && e.to_string().contains(v),
                "{e}"
            );
        }
        assert_eq!(Config::default().switch(name).unwrap(), None);
    }

    #[test]
    fn seconds_are_positive_finite_and_bounded() {
        let name = "DOTCOMPUTE_TEST_SECONDS";
        let default = Duration::from_secs(300);
        assert_eq!(
            with(name, "2.5").seconds(name, default).unwrap(),
            Duration::from_millis(2500)
        );
        for v in ["inf", "1e300", "-5", "0", "abc", "NaN"] {
            let e = with(name, v).seconds(name, default).unwrap_err();
            assert!(matches!(e, Error::Config { .. }), "{v}: {e}");
        }
        assert_eq!(Config::default().seconds(name, default).unwrap(), default);
    }

    #[test]
    fn a_time_limit_is_read_once_and_replaced_by_set() {
        let name = "DOTCOMPUTE_TEST_LIMIT";
        let limit = TimeLimit::from_config(&with(name, "abc"), name, Duration::from_secs(300));
        assert!(matches!(limit.get(), Err(Error::Config { .. })));
        for bad in [Duration::ZERO, MAX_TIME_LIMIT + Duration::from_secs(1)] {
            assert!(
                matches!(limit.set(bad), Err(Error::Range { .. })),
                "{bad:?}"
            );
        }
        assert!(limit.get().is_err(), "a refused value changes nothing");
        limit.set(Duration::from_millis(1500)).unwrap();
        assert_eq!(
            limit.get().unwrap(),
            (Duration::from_millis(1500), SET_BY_DEVICE)
        );
        let from_default = TimeLimit::from_config(&Config::default(), name, Duration::from_secs(7));
        assert_eq!(from_default.get().unwrap(), (Duration::from_secs(7), name));
    }

    #[test]
    fn choices_are_matched_without_case() {
        let name = "DOTCOMPUTE_TEST_CHOICE";
        let always = with(name, "Always").choice(name, &["always"], "always");
        assert_eq!(always.unwrap(), Some("always"));
        assert!(with(name, "sometimes")
            .choice(name, &["always"], "always")
            .is_err());
    }

    #[test]
    fn choice_lists_keep_the_choices_order_and_refuse_unknown_parts() {
        let name = "DOTCOMPUTE_TEST_CHOICE";
        let parts = with(name, "Sort, scan").choice_list(name, &["scan", "sort"], "parts");
        assert_eq!(parts.unwrap(), Some(vec!["scan", "sort"]));
        assert!(with(name, "scan,sorts")
            .choice_list(name, &["scan", "sort"], "parts")
            .is_err());
        assert_eq!(
            with(name, "")
                .choice_list(name, &["scan"], "parts")
                .unwrap(),
            None
        );
    }

    #[test]
    fn backend_lists_are_parsed_strictly() {
        use crate::BackendKind;
        let name = "DOTCOMPUTE_TEST_BACKENDS";
        assert_eq!(Config::default().backends(name).unwrap(), []);
        assert_eq!(
            with(name, " cpu, Wgpu ,,cuda").backends(name).unwrap(),
            [BackendKind::Cpu, BackendKind::Wgpu, BackendKind::Cuda]
        );
        let e = with(name, "cpu,cuba")
            .backends(name)
            .unwrap_err()
            .to_string();
        assert!(e.contains(name) && e.contains("cpu,cuba"), "{e}");
    }

    #[test]
    fn the_cache_directory_falls_back_in_order_and_can_be_turned_off() {
        let config = |pairs: &[(&str, &str)]| {
            let pairs: Vec<(String, String)> = pairs
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect();
            Config::from_lookup(move |n| pairs.iter().find(|(k, _)| k == n).map(|(_, v)| v.into()))
        };
        let dir = |c: Config| c.cache_dir("ops").unwrap();
        let all = [
            ("DOTCOMPUTE_CACHE_DIR", "/c"),
            ("XDG_CACHE_HOME", "/x"),
            ("HOME", "/h"),
        ];
        assert_eq!(dir(config(&all)), Some(PathBuf::from("/c/ops")));
        assert_eq!(
            dir(config(&all[1..])),
            Some(PathBuf::from("/x/dotcompute/ops"))
        );
        assert_eq!(
            dir(config(&all[2..])),
            Some(PathBuf::from("/h/.cache/dotcompute/ops"))
        );
        assert_eq!(dir(config(&[])), None);
        assert_eq!(dir(config(&[("DOTCOMPUTE_CACHE", "off"), all[0]])), None);
        assert!(config(&[("DOTCOMPUTE_CACHE", "0ff")])
            .cache_dir("ops")
            .is_err());
    }

    #[test]
    fn the_environment_is_read_once() {
        let name = "DOTCOMPUTE_TEST_SWITCH";
        // The first use reads the environment; a value set after it changes nothing.
        if Config::get().os_value(name).is_some() {
            eprintln!("skipping: {name} was set when the process started");
            return;
        }
        std::env::set_var(name, "on");
        assert_eq!(switch(name).unwrap(), None, "a later value was read");
        assert_eq!(Config::get().os_value(name), None);
        std::env::remove_var(name);
    }

    #[test]
    fn only_the_tables_variables_are_read() {
        let asked = std::sync::Mutex::new(Vec::new());
        Config::from_lookup(|n| {
            asked.lock().unwrap().push(n.to_string());
            None
        });
        let asked = asked.into_inner().unwrap();
        assert_eq!(asked.len(), VARIABLES.len() + FALLBACKS.len());
        assert!(asked
            .iter()
            .all(|n| n.starts_with("DOTCOMPUTE_") || FALLBACKS.contains(&n.as_str())));
    }
}
