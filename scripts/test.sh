#!/usr/bin/env bash
# The whole test suite, on a fresh Debian machine with Rust (what CI runs through .ci/run).
#
#   scripts/test.sh
#
# 1. installs what the tests need beyond the Rust toolchain (nothing yet: Vulkan through
#    lavapipe arrives with the wgpu backend, issue #3);
# 2. checks formatting and clippy;
# 3. runs every test (cargo nextest if present, else cargo test) and the doctests;
# 4. runs the main job, `dotcompute validate`, in release on the CPU backend.
#
# DOTCOMPUTE_REQUIRE (default `cpu`) lists backends whose absence fails the run instead of
# skipping their conformance tests. DOTCOMPUTE_SEED replays a failing random input.
set -euo pipefail
cd "$(dirname "$0")/.."

export DOTCOMPUTE_REQUIRE="${DOTCOMPUTE_REQUIRE:-cpu}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
jobs="${CARGO_BUILD_JOBS:-2}"

step() { printf '\n== %s\n' "$*"; }

step "toolchain"
cargo --version
rustc --version
rustup component add rustfmt clippy >/dev/null 2>&1 || true

step "format"
cargo fmt --all -- --check

step "clippy"
cargo clippy --workspace --all-targets -j "$jobs" -- -D warnings

step "tests (DOTCOMPUTE_REQUIRE=$DOTCOMPUTE_REQUIRE)"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace -j "$jobs" --no-fail-fast
  cargo test --workspace --doc -j "$jobs"
else
  cargo test --workspace -j "$jobs" --no-fail-fast
fi

step "dotcompute validate --backend cpu (release)"
cargo run --release -j "$jobs" -p dotcompute-cli -- validate --backend cpu
