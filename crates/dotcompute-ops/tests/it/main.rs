//! dotcompute-ops against plain-Rust references on every backend present (absent ones
//! skip, unless `DOTCOMPUTE_REQUIRE` lists them). Outputs are poisoned first, inputs are
//! random with the seed printed, sizes include 0, 1, group ± 1, tile ± 1, primes and
//! ≥ 2^24 on GPUs.

mod common;
mod graph;
mod matmul;
mod more;
mod reduce;
mod scan;
mod select;
mod sort;
mod threads;
mod topk;
mod tune;
