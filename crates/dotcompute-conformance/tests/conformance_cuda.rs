//! The conformance suite on the CUDA backend (the GPU machine). Skips when no CUDA driver
//! exists, unless DOTCOMPUTE_REQUIRE lists `cuda`.
dotcompute_conformance::conformance_tests!(dotcompute::BackendKind::Cuda);
