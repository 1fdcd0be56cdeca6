//! # dotcompute-hal: the backend contract
//!
//! Backends plug in behind two static traits split by concern, in the style of wgpu-hal
//! and CubeCL's runtime servers:
//!
//! * [`Backend`]: the device: memory (a [`SizeClassPool`]), programs ([`Program`], keyed
//!   by content), streams opened and closed, profiling, typed [`Capabilities`], and
//!   optional extensions ([`Blas`]: vendor matrix products) instead of `Ok(false)` methods;
//! * [`Queue`]: work on a [`StreamId`]: writes, reads, copies, fills, launches, fences,
//!   waits between streams, and capture into driver graphs.
//!
//! The facade uses them through the object-safe mirror [`DynBackend`] (a blanket impl
//! over every `Backend + Queue`), and finds backends through the [`registry`]: each
//! backend crate exports one [`BackendDescriptor`].
//!
//! ## Contract
//!
//! *This layer validates* launch geometry against device limits ([`Launch::resolve`]:
//! empty grids, group sizes, group counts, shared memory, the dynamic shared length).
//!
//! *Backends trust* the facade for everything else it checks before calling them:
//! argument count and types against the program's signature, buffers belonging to the
//! device, non-empty buffers, offsets and lengths in range, open stream ids, and the
//! ordering of a buffer's uses across streams (the facade inserts [`Queue::wait_stream`]
//! where a buffer moves between streams, and hands freed blocks back with the streams
//! that may still use them). *Backends guarantee* that every failure (out of memory, a
//! kernel fault they can detect, a driver error) comes back as an [`Error`], never a
//! panic, and that the device stays usable afterwards.

mod backend;
mod device;
pub mod disk;
pub mod dump;
pub mod dynamic;
mod error;
mod launch;
pub mod native;
pub mod plan;
pub mod pool;
mod program;
pub mod registry;
pub mod settings;
mod stream;
pub mod words;

pub use backend::{
    Backend, Blas, BoundArg, Capture, GraphExec, HostMemory, LaunchRequest, MatmulRequest,
    Precision, Queue,
};
pub use device::{
    AtomicF32Add, BackendKind, Capabilities, DeviceInfo, DeviceType, GeneratedProduct, Limits,
    RawLanguage,
};
pub use dynamic::{DynBackend, RawBuffer};
pub use error::{Error, LostFlag, Result};
pub use launch::{
    checked_from_env, decode_violation, Launch, ResolvedLaunch, LOOP_BUDGET_CODE, VIOLATION_WORDS,
};
pub use pool::{MemoryStats, SizeClassPool};
pub use program::{
    content_key, instance_part, leak_name, Instances, KernelDef, KeyHasher, KeyMap, Program,
    ProgramKey, ProgramSource, RawSource,
};
pub use registry::BackendDescriptor;
pub use stream::{Completed, Fence, StreamId, StreamSet, Timing, CAPTURE_STREAMS, MAX_STREAMS};
