//! # dotcompute-hal: the backend contract
//!
//! Backends plug in behind [`Backend`] (static, with its own buffer type) and are used
//! through its object-safe mirror [`DynBackend`], in the style of wgpu-hal.
//!
//! ## Contract
//!
//! *This layer validates* launch geometry against device limits ([`Launch::resolve`]:
//! empty grids, group sizes, group counts, shared memory, the dynamic shared length).
//!
//! *Backends trust* the facade for everything else it checks before calling them: argument
//! count and types against the kernel signature, buffers belonging to the device,
//! non-empty buffers, offsets and lengths in range. *Backends guarantee* that every
//! failure (out of memory, a kernel fault they can detect, a driver error) comes back as
//! an [`Error`], never a panic, and that the device stays usable afterwards.

mod backend;
mod device;
mod error;
mod launch;
pub mod native;
pub mod pool;

pub use backend::{
    Backend, BoundArg, Completed, DynBackend, Fence, HostMemory, KernelDef, LaunchRequest,
    MatmulRequest, RawBuffer, RawSource, Timing,
};
pub use device::{BackendKind, DeviceInfo, Limits};
pub use error::{Error, Result};
pub use launch::{Launch, ResolvedLaunch};
pub use pool::{MemoryStats, SizeClassPool};
