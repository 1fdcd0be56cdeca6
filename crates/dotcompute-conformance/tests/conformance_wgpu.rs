//! The conformance suite on the wgpu backend (lavapipe in CI; NVIDIA Vulkan on the GPU
//! machine). Skips when no adapter exists, unless DOTCOMPUTE_REQUIRE lists `wgpu`.
dotcompute_conformance::conformance_tests!(dotcompute::BackendKind::Wgpu);
