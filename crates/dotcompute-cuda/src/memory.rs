//! Device memory (a size-class pool over `cuMemAlloc`) and page-locked host memory.

use crate::driver::{self, bind, driver_error};
use crate::CudaBackend;
use cudarc::driver::{result as cu, sys};
use dotcompute_hal::{Error, HostMemory, Result, StreamSet};

/// A pooled device allocation.
pub struct CudaBuffer {
    pub(crate) ptr: sys::CUdeviceptr,
    pub(crate) class: usize,
}

impl CudaBuffer {
    /// The device address (for interoperation with other CUDA code on the same context).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }
}

impl CudaBackend {
    pub(crate) fn alloc_block(&self, bytes: usize) -> Result<(CudaBuffer, StreamSet)> {
        bind(&self.ctx)?;
        // A block from the pool's cache is handed out at once; the driver is called (the
        // pool holds no lock then) only while no other thread captures a graph
        // (`driver::CaptureGate`).
        let (ptr, class, users) = self.pool.acquire(
            bytes,
            |class| {
                self.ctx
                    .capture_gate
                    // SAFETY: plain allocation; the memory is owned by the pool from here on.
                    .exclusive(|| unsafe { cu::malloc_sync(class) })
                    .map_err(|e| self.alloc_error(bytes, e))
            },
            self.driver_free(),
        )?;
        Ok((CudaBuffer { ptr, class }, users))
    }

    fn alloc_error(&self, bytes: usize, e: cudarc::driver::DriverError) -> Error {
        if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            Error::OutOfMemory {
                device: self.info.label(),
                requested: bytes as u64,
                detail: format!("cuMemAlloc: {}", driver::describe(e)),
            }
        } else {
            driver_error("cuMemAlloc", e)
        }
    }

    /// A function that returns blocks to the driver once no stream uses them: it waits
    /// for every user stream before the first block only (trim frees many at once). Not
    /// `cuCtxSynchronize`: a device-wide synchronisation invalidates graph captures
    /// running on other threads (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, seen under the
    /// 16-thread stress run), and capture streams hold no work to wait for.
    pub(crate) fn driver_free(&self) -> impl FnMut(sys::CUdeviceptr) + '_ {
        let mut drained = false;
        move |ptr| {
            if !drained {
                // A failed wait (a lost device) still frees: the pool forgets the block.
                let _ = dotcompute_hal::Queue::synchronize_all(self);
                drained = true;
            }
            // cuMemFree may synchronise the device: not while another thread captures a
            // graph (`driver::CaptureGate`).
            // SAFETY: the context is current (callers bind it); the block is not owned by
            // any buffer, and after the wait no work that used it is pending.
            let _ = self
                .ctx
                .capture_gate
                .exclusive(|| unsafe { cu::free_sync(ptr) });
        }
    }

    pub(crate) fn alloc_pinned(&self, bytes: usize) -> Result<Option<Box<dyn HostMemory>>> {
        if bytes == 0 {
            return Ok(None);
        }
        bind(&self.ctx)?;
        // PORTABLE: page-locked for every context, so a copy on any device is a DMA.
        const PORTABLE: u32 = 0x01;
        // SAFETY: plain allocation, freed by PinnedMemory's Drop.
        let ptr = self
            .ctx
            .capture_gate
            .exclusive(|| unsafe { cu::malloc_host(bytes, PORTABLE) })
            .map_err(|e| {
                if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                    Error::OutOfMemory {
                        device: self.info.label(),
                        requested: bytes as u64,
                        detail: format!(
                            "cuMemHostAlloc (page-locked host memory): {}",
                            driver::describe(e)
                        ),
                    }
                } else {
                    driver_error("cuMemHostAlloc", e)
                }
            })?;
        Ok(Some(Box::new(PinnedMemory {
            ptr: ptr.cast(),
            len: bytes,
            ctx: self.ctx.clone(),
        })))
    }
}

/// Page-locked host memory from `cuMemHostAlloc`.
struct PinnedMemory {
    ptr: *mut u8,
    len: usize,
    ctx: std::sync::Arc<crate::driver::Context>,
}

// SAFETY: plain memory; the facade serialises access to it.
unsafe impl Send for PinnedMemory {}
// SAFETY: shared use is sound for the reason above (Send).
unsafe impl Sync for PinnedMemory {}

impl HostMemory for PinnedMemory {
    fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
}

impl Drop for PinnedMemory {
    fn drop(&mut self) {
        // The facade has waited for every transfer using the memory; the context is
        // alive (the memory's owner holds the device).
        if bind(&self.ctx).is_ok() {
            // SAFETY: allocated by cuMemHostAlloc, freed once.
            // Not while another thread captures (`driver::CaptureGate`).
            let _ = self
                .ctx
                .capture_gate
                .exclusive(|| unsafe { cu::free_host(self.ptr.cast()) });
        }
    }
}

/// Whether `ptr` is page-locked host memory known to the driver.
pub(crate) fn is_page_locked(ptr: *const u8) -> bool {
    let mut kind: u32 = 0;
    // SAFETY: queries an attribute; fails (harmlessly) for ordinary pageable memory.
    let r = unsafe {
        sys::cuPointerGetAttribute(
            (&mut kind as *mut u32).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            ptr as sys::CUdeviceptr,
        )
    };
    r == sys::CUresult::CUDA_SUCCESS && kind == sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32
}
