//! `DOTCOMPUTE_*` environment variables, parsed strictly: a value that is not one of the
//! accepted ones is `Error::Config` naming the variable, the value and what is accepted,
//! never a silent default and never a panic (issue 27: `DOTCOMPUTE_CHECKED=true` meant
//! off, `DOTCOMPUTE_WGPU_TIMEOUT_S=-5` meant 300 s and `=inf` panicked).

use crate::error::{Error, Result};
use std::time::Duration;

/// The variable's value, trimmed; `None` when unset or empty.
fn value(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// What [`switch`] accepts.
pub const SWITCH_VALUES: &str =
    "1, on, true or yes to turn it on; 0, off, false or no to turn it off";

/// An on/off variable: `Ok(None)` when unset or empty.
pub fn switch(name: &'static str) -> Result<Option<bool>> {
    let Some(v) = value(name) else {
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

/// An on/off variable with a default for unset.
pub fn switch_or(name: &'static str, default: bool) -> Result<bool> {
    Ok(switch(name)?.unwrap_or(default))
}

/// A duration in seconds: a positive, finite number of at most a year (`Ok(default)`
/// when unset or empty).
pub fn seconds(name: &'static str, default: Duration) -> Result<Duration> {
    let Some(v) = value(name) else {
        return Ok(default);
    };
    const YEAR: f64 = 365.0 * 24.0 * 3600.0;
    match v.parse::<f64>() {
        Ok(s) if s > 0.0 && s <= YEAR => Ok(Duration::from_secs_f64(s)),
        _ => Err(Error::Config {
            variable: name,
            value: v,
            expected: "a number of seconds greater than 0 and at most 31536000 (a year)",
        }),
    }
}

/// One of `choices` (compared without case): `Ok(None)` when unset or empty.
pub fn choice(
    name: &'static str,
    choices: &[&'static str],
    expected: &'static str,
) -> Result<Option<&'static str>> {
    let Some(v) = value(name) else {
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

/// The directory for dotcompute's on-disk caches of kind `sub` (`cuda`, `ops`):
/// `$DOTCOMPUTE_CACHE_DIR/sub`, else `$XDG_CACHE_HOME/dotcompute/sub`, else
/// `~/.cache/dotcompute/sub`; `None` when `DOTCOMPUTE_CACHE=off` (or no home is known).
pub fn cache_dir(sub: &str) -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    if std::env::var("DOTCOMPUTE_CACHE").is_ok_and(|v| v.eq_ignore_ascii_case("off")) {
        return None;
    }
    let base = if let Some(d) = std::env::var_os("DOTCOMPUTE_CACHE_DIR").filter(|d| !d.is_empty()) {
        PathBuf::from(d)
    } else if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        PathBuf::from(d).join("dotcompute")
    } else {
        PathBuf::from(std::env::var_os("HOME")?)
            .join(".cache")
            .join("dotcompute")
    };
    Some(base.join(sub))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Each test uses its own variable: tests run in parallel in one process.
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
            std::env::set_var(name, v);
            assert_eq!(switch(name).unwrap(), Some(want), "{v}");
        }
        std::env::set_var(name, "");
        assert_eq!(switch(name).unwrap(), None);
        for v in ["2", "maybe", "enable"] {
            std::env::set_var(name, v);
            let e = switch(name).unwrap_err();
            assert!(
                e.to_string().contains(name) && e.to_string().contains(v),
                "{e}"
            );
        }
        std::env::remove_var(name);
        assert!(switch_or(name, true).unwrap());
    }

    #[test]
    fn seconds_are_positive_finite_and_bounded() {
        let name = "DOTCOMPUTE_TEST_SECONDS";
        let default = Duration::from_secs(300);
        std::env::set_var(name, "2.5");
        assert_eq!(seconds(name, default).unwrap(), Duration::from_millis(2500));
        for v in ["inf", "1e300", "-5", "0", "abc", "NaN"] {
            std::env::set_var(name, v);
            let e = seconds(name, default).unwrap_err();
            assert!(matches!(e, Error::Config { .. }), "{v}: {e}");
        }
        std::env::remove_var(name);
        assert_eq!(seconds(name, default).unwrap(), default);
    }

    #[test]
    fn choices_are_matched_without_case() {
        let name = "DOTCOMPUTE_TEST_CHOICE";
        std::env::set_var(name, "Always");
        assert_eq!(choice(name, &["always"], "always").unwrap(), Some("always"));
        std::env::set_var(name, "sometimes");
        assert!(choice(name, &["always"], "always").is_err());
        std::env::remove_var(name);
    }
}
