//! The conformance suite on every registered backend present (the CPU and lavapipe in CI;
//! CUDA and NVIDIA Vulkan on the GPU machine). An absent backend skips, unless
//! DOTCOMPUTE_REQUIRE lists it.
dotcompute_conformance::conformance_tests!();
