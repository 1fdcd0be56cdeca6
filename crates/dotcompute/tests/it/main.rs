//! dotcompute's integration tests, one binary (it links once and travels to the GPU
//! machine as one file). Each module runs on every backend present.

mod bad_input;
mod common;
mod cpu_barriers;
mod cpu_matmul;
mod cuda;
mod device_transfers;
mod float_semantics;
mod generated_source;
mod graphs;
mod host_transfers;
mod integer_forms;
mod launch_reuse;
mod long_loops;
mod profiling;
mod raw_msl;
mod raw_spirv;
mod raw_wgsl;
mod registry;
mod streams;
mod stress;
mod tensor_cores;
mod timeouts;
mod unroll;
mod wgpu_limits;
mod wgpu_vectors;
