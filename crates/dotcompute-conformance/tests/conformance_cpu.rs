//! The conformance suite on the CPU backend.
dotcompute_conformance::conformance_tests!(dotcompute::BackendKind::Cpu);
