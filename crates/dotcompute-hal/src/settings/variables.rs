//! Every `DOTCOMPUTE_*` variable in one table: who reads it, when its value takes effect,
//! what it accepts and what it does. The environment is read once per process, into
//! [`super::Config`], and only for the variables here. `docs/configuration.md` prints the same table, `dotcompute settings`
//! checks each one's current value, and a test fails when a variable appears in the
//! sources without a row here (or a row without a variable).

use super::{backends, choices, seconds, switch};
use crate::error::Result;
use std::time::Duration;

/// Who reads a variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// dotcompute itself, in a user's program.
    Library,
    /// The `dotcompute` command (`validate`, `bench`, `emit`) and the test suites.
    Tools,
    /// dotcompute's own tests, for their child processes and parser tests.
    Tests,
}

/// One row of the table.
#[derive(Clone, Copy, Debug)]
pub struct Variable {
    pub name: &'static str,
    pub scope: Scope,
    /// When its value (read from the environment once per process) is parsed and takes
    /// effect (`when a device opens`, `at each compile`, ...).
    pub read: &'static str,
    /// The values it accepts (and the default).
    pub accepts: &'static str,
    pub effect: &'static str,
    /// Parses the current value strictly (`Error::Config` naming the variable); `None`
    /// for free text (paths, counts read by tests).
    pub check: Option<fn() -> Result<()>>,
}

const SWITCH_ON: &str = "on/off switch (1, on, true, yes / 0, off, false, no); default on";
const SWITCH_OFF: &str = "on/off switch (1, on, true, yes / 0, off, false, no); default off";

fn check_switch(name: &'static str) -> Result<()> {
    switch(name).map(drop)
}

fn check_seconds(name: &'static str) -> Result<()> {
    seconds(name, Duration::from_secs(1)).map(drop)
}

/// Every variable, grouped by scope.
pub const VARIABLES: &[Variable] = &[
    Variable {
        name: "DOTCOMPUTE_BACKEND",
        scope: Scope::Library,
        read: "at each `Device::best()`",
        accepts: "cpu, cuda, wgpu (or vulkan), metal",
        effect: "the backend `Device::best()` opens instead of the best present",
        check: Some(|| {
            backends("DOTCOMPUTE_BACKEND").map(drop)
        }),
    },
    Variable {
        name: "DOTCOMPUTE_CHECKED",
        scope: Scope::Library,
        read: "once per process",
        accepts: SWITCH_OFF,
        effect: "checked mode (every array access bounds-checked) for launches that do not choose with `Launch::checked`",
        check: Some(|| check_switch("DOTCOMPUTE_CHECKED")),
    },
    Variable {
        name: "DOTCOMPUTE_CACHE",
        scope: Scope::Library,
        read: "when a CUDA or wgpu device opens; at each tuned library operation",
        accepts: SWITCH_ON,
        effect: "off: no on-disk caches (CUDA modules, wgpu pipelines, the ops tuner's choices)",
        check: Some(|| check_switch("DOTCOMPUTE_CACHE")),
    },
    Variable {
        name: "DOTCOMPUTE_CACHE_DIR",
        scope: Scope::Library,
        read: "with `DOTCOMPUTE_CACHE`",
        accepts: "a directory; default `$XDG_CACHE_HOME/dotcompute`, else `~/.cache/dotcompute`",
        effect: "where the on-disk caches live (`cuda/`, `wgpu/`, `ops/` below it)",
        check: None,
    },
    Variable {
        name: "DOTCOMPUTE_DUMP",
        scope: Scope::Library,
        read: "at each compile (the directory is created then)",
        accepts: "a directory (created if missing)",
        effect: "every source a backend compiles (CUDA C++, WGSL, MSL, generated or hand-written) is written there, named by kernel, content key and variant",
        check: None,
    },
    Variable {
        name: "DOTCOMPUTE_UNROLL",
        scope: Scope::Library,
        read: "when a CUDA or wgpu device opens; at each `KernelSource::source` and `dotcompute emit`",
        accepts: SWITCH_ON,
        effect: "off: generated CUDA and WGSL keep grid-stride loops over read-only buffers rolled (comparisons)",
        check: Some(|| check_switch("DOTCOMPUTE_UNROLL")),
    },
    Variable {
        name: "DOTCOMPUTE_AUTOTUNE",
        scope: Scope::Library,
        read: "at each tuned library operation",
        accepts: "on (default), off, force",
        effect: "on: `dotcompute-ops` measures its candidates once per device, operation, type and size class and keeps the winner; off: documented defaults; force: measure again (once per key and process) and overwrite",
        check: Some(|| choices::AUTOTUNE.read().map(drop)),
    },
    Variable {
        name: "DOTCOMPUTE_MATMUL_KERNEL",
        scope: Scope::Library,
        read: "once per process (a refused value at each product)",
        accepts: "pipelined, quads, tiled; default: the device's `Capabilities::generated_product`",
        effect: "which generated FP32/f64 product runs (comparisons)",
        check: Some(|| choices::MATMUL_KERNEL.read().map(drop)),
    },
    Variable {
        name: "DOTCOMPUTE_TF32_KERNEL",
        scope: Scope::Library,
        read: "once per process (a refused value at each product)",
        accepts: "w32d32, w32d16, w64d16, w64d32 (default), w64d16n256, each also with `-scalar`",
        effect: "the shape of the generated TF32 tensor-core product (comparisons)",
        check: Some(|| choices::TF32_KERNEL.read().map(drop)),
    },
    Variable {
        name: "DOTCOMPUTE_F16_KERNEL",
        scope: Scope::Library,
        read: "once per process (a refused value at each product)",
        accepts: "n128d16, n128d32 (default), n256d16",
        effect: "the shape of the generated f16 tensor-core product (comparisons)",
        check: Some(|| choices::F16_KERNEL.read().map(drop)),
    },
    Variable {
        name: "DOTCOMPUTE_CPU_TIMEOUT_S",
        scope: Scope::Library,
        read: "when the CPU device opens (an invalid value: every launch's error)",
        accepts: "seconds, more than 0 and at most a year; default 300",
        effect: "how long a CPU launch may run before it is stopped at a loop back-edge (`Error::LaunchTimedOut`)",
        check: Some(|| check_seconds("DOTCOMPUTE_CPU_TIMEOUT_S")),
    },
    Variable {
        name: "DOTCOMPUTE_CPU_LANES",
        scope: Scope::Library,
        read: "once per process (an invalid value: every CPU launch's error)",
        accepts: SWITCH_ON,
        effect: "off: split group bodies run thread by thread instead of 8 lanes at a time (comparisons)",
        check: Some(|| check_switch("DOTCOMPUTE_CPU_LANES")),
    },
    Variable {
        name: "DOTCOMPUTE_CPU_AVX2",
        scope: Scope::Library,
        read: "once per process (an invalid value: every CPU launch's error)",
        accepts: "on/off switch; default on where the processor has AVX2",
        effect: "off: the lane form's AVX2 paths are not taken (comparisons)",
        check: Some(|| check_switch("DOTCOMPUTE_CPU_AVX2")),
    },
    Variable {
        name: "DOTCOMPUTE_CPU_BARRIERS",
        scope: Scope::Library,
        read: "once per process (an invalid value: every CPU launch's error)",
        accepts: "fission (default), coroutines",
        effect: "how the CPU runs kernels with barriers: split at the barriers, or one coroutine per thread (comparisons)",
        check: Some(|| choices::CPU_BARRIERS.read().map(drop)),
    },
    Variable {
        name: "DOTCOMPUTE_CUDA_TIMEOUT_S",
        scope: Scope::Library,
        read: "when a CUDA device opens",
        accepts: "seconds, more than 0 and at most a year; default 300",
        effect: "how long any wait for the device may last before it is reported lost (`Device::set_time_limit` replaces it for one device)",
        check: Some(|| check_seconds("DOTCOMPUTE_CUDA_TIMEOUT_S")),
    },
    Variable {
        name: "DOTCOMPUTE_CUDA_GRID_STRIDE",
        scope: Scope::Library,
        read: "when a CUDA device opens",
        accepts: SWITCH_ON,
        effect: "off: eligible kernels never take the grid-stride form (comparisons)",
        check: Some(|| check_switch("DOTCOMPUTE_CUDA_GRID_STRIDE")),
    },
    Variable {
        name: "DOTCOMPUTE_CUDA_VECTORIZE",
        scope: Scope::Library,
        read: "when a CUDA device opens",
        accepts: SWITCH_ON,
        effect: "off: elementwise kernels never take the 16-byte vector form (comparisons)",
        check: Some(|| check_switch("DOTCOMPUTE_CUDA_VECTORIZE")),
    },
    Variable {
        name: "DOTCOMPUTE_WGPU_TIMEOUT_S",
        scope: Scope::Library,
        read: "when a wgpu device opens",
        accepts: "seconds, more than 0 and at most a year; default 300",
        effect: "how long any wait for the device may last before it is reported lost",
        check: Some(|| check_seconds("DOTCOMPUTE_WGPU_TIMEOUT_S")),
    },
    Variable {
        name: "DOTCOMPUTE_WGPU_FLOAT",
        scope: Scope::Library,
        read: "when a wgpu device opens",
        accepts: "strict (default), relaxed",
        effect: "relaxed: generated kernels go to the driver as WGSL, which may contract and reassociate float arithmetic (comparisons)",
        check: Some(|| choices::WGPU_FLOAT.read().map(drop)),
    },
    Variable {
        name: "DOTCOMPUTE_WGPU_DISABLE",
        scope: Scope::Library,
        read: "when wgpu adapters are listed and a device opens",
        accepts: "feature names separated by commas: subgroups, f16, float-atomics, timestamps, passthrough",
        effect: "the device lacks those features as a device without them would (tests of code meant to run everywhere)",
        check: None,
    },
    Variable {
        name: "DOTCOMPUTE_WGPU_STRIDED",
        scope: Scope::Library,
        read: "when a wgpu device opens",
        accepts: SWITCH_ON,
        effect: "off: eligible kernels never take the grid-stride form (comparisons)",
        check: Some(|| check_switch("DOTCOMPUTE_WGPU_STRIDED")),
    },
    Variable {
        name: "DOTCOMPUTE_WGPU_VECTORS",
        scope: Scope::Library,
        read: "when a wgpu device opens",
        accepts: SWITCH_ON,
        effect: "off: elementwise kernels never take the `vec4` form (comparisons)",
        check: Some(|| check_switch("DOTCOMPUTE_WGPU_VECTORS")),
    },
    Variable {
        name: "DOTCOMPUTE_WGPU_BATCH",
        scope: Scope::Library,
        read: "when a wgpu device opens",
        accepts: SWITCH_ON,
        effect: "off: every launch is submitted at once instead of 32 to a command buffer (comparisons)",
        check: Some(|| check_switch("DOTCOMPUTE_WGPU_BATCH")),
    },
    Variable {
        name: "DOTCOMPUTE_WGPU_CHUNKS",
        scope: Scope::Library,
        read: "when a wgpu device opens",
        accepts: SWITCH_ON,
        effect: "off: a graph replay is submitted at once instead of 16 launches at a time (comparisons)",
        check: Some(|| check_switch("DOTCOMPUTE_WGPU_CHUNKS")),
    },
    Variable {
        name: "DOTCOMPUTE_WGPU_SPIN",
        scope: Scope::Library,
        read: "when a wgpu device opens",
        accepts: "on/off switch; default on for hardware adapters, off for software ones",
        effect: "off: waits block in the driver from the start instead of polling for up to 2 ms first (comparisons)",
        check: Some(|| check_switch("DOTCOMPUTE_WGPU_SPIN")),
    },
    Variable {
        name: "DOTCOMPUTE_WGPU_TRANSFER_KERNELS",
        scope: Scope::Library,
        read: "when a wgpu device opens",
        accepts: SWITCH_ON,
        effect: "off: copies and fills use the driver's copy and queue writes instead of kernels (comparisons)",
        check: Some(|| check_switch("DOTCOMPUTE_WGPU_TRANSFER_KERNELS")),
    },
    Variable {
        name: "DOTCOMPUTE_WGPU_STORAGE_BARRIERS",
        scope: Scope::Library,
        read: "when a wgpu device opens",
        accepts: "analysed (default), always",
        effect: "always: every barrier also orders storage buffers, not only where a thread can observe it (comparisons)",
        check: Some(|| choices::WGPU_STORAGE_BARRIERS.read().map(drop)),
    },
    Variable {
        name: "DOTCOMPUTE_MSL_SHIM_ORDER",
        scope: Scope::Tools,
        read: "when the MSL shim device opens",
        accepts: "in-order (default), shuffled:SEED",
        effect: "the shim resumes each group's threads in a seeded random order between barriers and SIMD-group functions (a missing barrier shows as a wrong result)",
        check: None,
    },
    Variable {
        name: "DOTCOMPUTE_MSL_SHIM_CXX",
        scope: Scope::Tools,
        read: "when the MSL shim compiles",
        accepts: "a C++ compiler; default clang++",
        effect: "the compiler that builds generated MSL against the shim's `<metal_stdlib>`",
        check: None,
    },
    Variable {
        name: "DOTCOMPUTE_REQUIRE",
        scope: Scope::Tools,
        read: "by the test suites and `dotcompute validate`",
        accepts: "backend names separated by commas",
        effect: "a listed backend that is absent fails the run instead of being skipped (`scripts/test.sh`: cpu,wgpu)",
        check: Some(|| backends("DOTCOMPUTE_REQUIRE").map(drop)),
    },
    Variable {
        name: "DOTCOMPUTE_ONLY",
        scope: Scope::Tools,
        read: "by the conformance suite and the ops tests",
        accepts: "backend names separated by commas",
        effect: "only these backends run (the macOS workflow runs Metal and wgpu-on-Metal apart)",
        check: Some(|| backends("DOTCOMPUTE_ONLY").map(drop)),
    },
    Variable {
        name: "DOTCOMPUTE_REQUIRE_MSL_SHIM",
        scope: Scope::Tools,
        read: "by the Metal and ops tests",
        accepts: SWITCH_OFF,
        effect: "a missing C++ compiler fails the tests of the generated MSL instead of skipping them (CI sets it)",
        check: Some(|| check_switch("DOTCOMPUTE_REQUIRE_MSL_SHIM")),
    },
    Variable {
        name: "DOTCOMPUTE_SEED",
        scope: Scope::Tools,
        read: "by the conformance suite, the tests' random inputs and the random-kernel test",
        accepts: "a u64",
        effect: "replays the random inputs of a failed conformance run (each failure prints its seed)",
        check: None,
    },
    Variable {
        name: "DOTCOMPUTE_BENCH_KERNELS",
        scope: Scope::Tools,
        read: "by `dotcompute bench`, after each measured run",
        accepts: SWITCH_OFF,
        effect: "prints each measured run's operations and their times to stderr, for diagnosing a slow figure",
        check: Some(|| check_switch("DOTCOMPUTE_BENCH_KERNELS")),
    },
    Variable {
        name: "DOTCOMPUTE_BENCH_SETTLE",
        scope: Scope::Tools,
        read: "by `dotcompute bench`, before each measured run on a GPU",
        accepts: SWITCH_ON,
        effect: "off: measured runs no longer start by reading 128 MiB (which leaves no dirty line in the L2 cache, so no run pays for the writes of the one before); the protocol before 2026-11-30",
        check: Some(|| check_switch("DOTCOMPUTE_BENCH_SETTLE")),
    },
    Variable {
        name: "DOTCOMPUTE_BENCH_OPS",
        scope: Scope::Tools,
        read: "by `dotcompute bench ops`, when it starts",
        accepts: "a comma-separated list of reduce, scan, copy-if, sort, histogram, softmax, transpose, matmul, rayon (the CPU's rayon references), graph (recorded operations replayed against the same calls made directly); default all",
        effect: "runs only those parts of the library-operations benchmark",
        check: Some(|| choices::BENCH_OPS.read_list().map(drop)),
    },
    Variable {
        name: "DOTCOMPUTE_BENCH_SORTS",
        scope: Scope::Tools,
        read: "by `dotcompute bench ops`, when it starts its sorts",
        accepts: "a comma-separated list of onesweep8, multisplit8, tiles8, tiles8-packed, radix4; default every algorithm the device offers",
        effect: "times only those sort algorithms (each still only where the device offers it)",
        check: Some(|| choices::BENCH_SORTS.read_list().map(drop)),
    },
    Variable {
        name: "DOTCOMPUTE_ONESWEEP_DUMP",
        scope: Scope::Tools,
        read: "by the ignored ops unit test `write_the_passes_cuda_for_the_harness`",
        accepts: "an existing directory",
        effect: "the CUDA C++ of the Onesweep pass (keys, pairs) and counting kernel is written there for `scripts/onesweep-harness`",
        check: None,
    },
    Variable {
        name: "DOTCOMPUTE_STRESS_OPS",
        scope: Scope::Tests,
        read: "by the facade's stress tests",
        accepts: "a count; default 10,000",
        effect: "operations per thread of the 16-thread stress tests",
        check: None,
    },
    Variable {
        name: "DOTCOMPUTE_FUZZ_SECONDS",
        scope: Scope::Tests,
        read: "by the Metal crate's random-kernel test",
        accepts: "seconds; default 20",
        effect: "how long random kernels are generated and compared across backends",
        check: None,
    },
    Variable {
        name: "DOTCOMPUTE_REDUCE_OUT",
        scope: Scope::Tests,
        read: "by the Metal crate's reducer (`reduce::a_disagreement`, ignored unless asked)",
        accepts: "a directory",
        effect: "where the reduced kernel of `DOTCOMPUTE_SEED` is written (IR, WGSL, CUDA C++, values)",
        check: None,
    },
    Variable {
        name: "DOTCOMPUTE_SHOW_CUDA",
        scope: Scope::Tests,
        read: "by the Metal crate's random-kernel test",
        accepts: "set or unset",
        effect: "prints each random kernel's CUDA C++",
        check: None,
    },
    Variable {
        name: "DOTCOMPUTE_TEST_BACKEND",
        scope: Scope::Tests,
        read: "by the time-limit tests' child processes",
        accepts: "a backend name",
        effect: "which backend a child process runs its endless kernel on",
        check: None,
    },
    Variable {
        name: "DOTCOMPUTE_TEST_BAD_SETTING",
        scope: Scope::Tests,
        read: "by the bad-settings test's child processes",
        accepts: "a variable name",
        effect: "which variable the child process sets to a bad value and checks",
        check: None,
    },
    Variable {
        name: "DOTCOMPUTE_TEST_SWITCH",
        scope: Scope::Tests,
        read: "by this crate's parser tests",
        accepts: "anything",
        effect: "each parser test uses its own variable (tests run in parallel in one process)",
        check: None,
    },
    Variable {
        name: "DOTCOMPUTE_TEST_SECONDS",
        scope: Scope::Tests,
        read: "by this crate's parser tests",
        accepts: "anything",
        effect: "as `DOTCOMPUTE_TEST_SWITCH`",
        check: None,
    },
    Variable {
        name: "DOTCOMPUTE_TEST_LIMIT",
        scope: Scope::Tests,
        read: "by this crate's parser tests",
        accepts: "anything",
        effect: "as `DOTCOMPUTE_TEST_SWITCH`",
        check: None,
    },
    Variable {
        name: "DOTCOMPUTE_TEST_CHOICE",
        scope: Scope::Tests,
        read: "by this crate's parser tests",
        accepts: "anything",
        effect: "as `DOTCOMPUTE_TEST_SWITCH`",
        check: None,
    },
    Variable {
        name: "DOTCOMPUTE_TEST_BACKENDS",
        scope: Scope::Tests,
        read: "by this crate's parser tests",
        accepts: "anything",
        effect: "as `DOTCOMPUTE_TEST_SWITCH`",
        check: None,
    },
];

/// The table as Markdown (`docs/configuration.md` holds this text).
pub fn markdown() -> String {
    let mut out = String::from(
        "| variable | read by | takes effect | accepts | effect |\n|---|---|---|---|---|\n",
    );
    for v in VARIABLES {
        let scope = match v.scope {
            Scope::Library => "library",
            Scope::Tools => "tools",
            Scope::Tests => "tests",
        };
        out.push_str(&format!(
            "| `{}` | {scope} | {} | {} | {} |\n",
            v.name, v.read, v.accepts, v.effect
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::path::Path;

    fn workspace() -> &'static Path {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .nth(2)
            .unwrap()
    }

    /// Whether the sources are here (not on the GPU machine, which gets test binaries).
    fn sources_present() -> bool {
        let here = workspace().join("docs/configuration.md").exists();
        if !here {
            eprintln!("skipping: the workspace's sources are not on this machine");
        }
        here
    }

    /// Every `DOTCOMPUTE_*` name in the Rust sources, scripts and CI files.
    fn names_in_sources() -> BTreeSet<String> {
        fn walk(dir: &Path, found: &mut BTreeSet<String>) {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return;
            };
            for e in entries.flatten() {
                let p = e.path();
                let name = e.file_name().to_string_lossy().to_string();
                if p.is_dir() {
                    if name != "target" && !name.starts_with('.') || name == ".ci" {
                        walk(&p, found);
                    }
                } else if (name.ends_with(".rs") || name.ends_with(".sh") || name == "run")
                    // This table names every variable; the rest of the sources read them.
                    && !p.ends_with("settings/variables.rs")
                {
                    let text = std::fs::read_to_string(&p).unwrap_or_default();
                    let mut rest = text.as_str();
                    while let Some(at) = rest.find("DOTCOMPUTE_") {
                        let tail = &rest[at..];
                        let len = tail
                            .find(|c: char| {
                                !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                            })
                            .unwrap_or(tail.len());
                        found.insert(tail[..len].trim_end_matches('_').to_string());
                        rest = &tail[len..];
                    }
                }
            }
        }
        let mut found = BTreeSet::new();
        for dir in ["crates", "scripts", ".ci"] {
            walk(&workspace().join(dir), &mut found);
        }
        found
    }

    #[test]
    fn every_variable_in_the_sources_has_a_row_and_every_row_a_variable() {
        if !sources_present() {
            return;
        }
        let listed: BTreeSet<String> = VARIABLES.iter().map(|v| v.name.to_string()).collect();
        assert_eq!(listed.len(), VARIABLES.len(), "a variable listed twice");
        let found = names_in_sources();
        // A prefix a test matches on (`DOTCOMPUTE_WGPU` for every wgpu variable) is not a
        // variable of its own.
        let unlisted: Vec<&String> = found
            .iter()
            .filter(|n| !listed.contains(*n))
            .filter(|n| !listed.iter().any(|l| l.starts_with(&format!("{n}_"))))
            .collect();
        assert!(
            unlisted.is_empty(),
            "read but not in settings::VARIABLES: {unlisted:?}"
        );
        let unread: Vec<&String> = listed.iter().filter(|n| !found.contains(*n)).collect();
        assert!(
            unread.is_empty(),
            "in settings::VARIABLES but read nowhere: {unread:?}"
        );
    }

    #[test]
    fn the_configuration_page_holds_the_table() {
        if !sources_present() {
            return;
        }
        let page = std::fs::read_to_string(workspace().join("docs/configuration.md")).unwrap();
        assert!(
            page.contains(&markdown()),
            "docs/configuration.md must hold settings::variables::markdown() as it is now \
             (`dotcompute settings --markdown` prints it)"
        );
    }

    #[test]
    fn every_check_passes_when_unset() {
        for v in VARIABLES
            .iter()
            .filter(|v| !v.name.starts_with("DOTCOMPUTE_TEST"))
        {
            if super::super::Config::get().os_value(v.name).is_none() {
                if let Some(check) = v.check {
                    check().unwrap_or_else(|e| panic!("{}: {e}", v.name));
                }
            }
        }
    }
}
