//! Code generation's integration tests.

mod decode_fuzz;
