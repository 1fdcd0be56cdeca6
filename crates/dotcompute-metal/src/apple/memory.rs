//! Buffers: shared storage on unified-memory devices (the host reads and writes them
//! directly, no copies), private storage on discrete GPUs (host transfers go through a
//! shared staging buffer and a blit). Both come from the size-class pool.

use super::Mtl;
use dotcompute_hal::{Error, Result};
use objc2::rc::Retained;
use objc2::runtime::ProtocolObject;
use objc2_metal::{MTLBuffer, MTLDevice, MTLResourceOptions};

/// A Metal buffer of one pool size class.
pub struct MetalBuffer {
    pub(crate) buffer: Retained<ProtocolObject<dyn MTLBuffer>>,
    pub(crate) class: usize,
}

// SAFETY: MTLBuffer objects may be used from any thread (Apple's Metal threading rules:
// resources are thread-safe; their contents are ordered by our stream discipline).
unsafe impl Send for MetalBuffer {}
// SAFETY: shared use is sound for the reason above (Send).
unsafe impl Sync for MetalBuffer {}

impl MetalBuffer {
    /// The host address of a shared buffer's memory.
    pub(crate) fn contents(&self) -> *mut u8 {
        self.buffer.contents().as_ptr() as *mut u8
    }
}

/// A new buffer of `bytes` from the driver.
pub(crate) fn new_buffer(
    device: &Mtl<dyn MTLDevice>,
    bytes: usize,
    requested: usize,
    shared: bool,
) -> Result<MetalBuffer> {
    let options = if shared {
        MTLResourceOptions::StorageModeShared
    } else {
        MTLResourceOptions::StorageModePrivate
    };
    device
        .newBufferWithLength_options(bytes, options)
        .map(|buffer| MetalBuffer {
            buffer,
            class: bytes,
        })
        .ok_or_else(|| Error::OutOfMemory {
            device: "metal".into(),
            requested: requested as u64,
            detail: format!(
                "newBufferWithLength({bytes}) returned nil (device limit {} bytes per buffer)",
                device.maxBufferLength()
            ),
        })
}
