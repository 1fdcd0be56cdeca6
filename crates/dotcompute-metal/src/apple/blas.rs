//! The vendor matrix product: `MPSMatrixMultiplication` on the device buffers (f32,
//! f16), encoded on the stream's command buffer like a launch: no host round trip.

use super::{MetalBackend, MetalBuffer};
use dotcompute_hal::{Blas, Error, MatmulRequest, Result, StreamId};
use dotcompute_ir::ScalarType;
use objc2::AllocAnyThread;
use objc2_metal_performance_shaders::{
    MPSDataType, MPSMatrix, MPSMatrixDescriptor, MPSMatrixMultiplication,
};

impl Blas<MetalBuffer> for MetalBackend {
    unsafe fn gemm(&self, stream: StreamId, r: &MatmulRequest<'_, MetalBuffer>) -> Result<()> {
        // MPS objects and descriptors are autoreleased: drained per product.
        objc2::rc::autoreleasepool(|_| self.gemm_in_pool(stream, r))
    }
}

impl MetalBackend {
    fn gemm_in_pool(&self, stream: StreamId, r: &MatmulRequest<'_, MetalBuffer>) -> Result<()> {
        let (data_type, elem) = match r.elem {
            ScalarType::F32 => (MPSDataType::Float32, 4),
            ScalarType::F16 => (MPSDataType::Float16, 2),
            other => {
                return Err(Error::Unsupported {
                    op: "matmul",
                    detail: format!("MPS multiplies f32 and f16 matrices, not {other}"),
                })
            }
        };
        let matrix = |buffer: &MetalBuffer, rows: usize, columns: usize| {
            // SAFETY: the facade checked that the buffer holds rows × columns elements.
            unsafe {
                let descriptor =
                    MPSMatrixDescriptor::matrixDescriptorWithRows_columns_rowBytes_dataType(
                        rows,
                        columns,
                        columns * elem,
                        data_type,
                    );
                MPSMatrix::initWithBuffer_descriptor(
                    MPSMatrix::alloc(),
                    &buffer.buffer,
                    &descriptor,
                )
            }
        };
        let (a, b, c) = (
            matrix(r.a, r.m, r.k),
            matrix(r.b, r.k, r.n),
            matrix(r.c, r.m, r.n),
        );
        // SAFETY: dimensions match the matrices above; c = 1·a·b + 0·c.
        let product = unsafe {
            MPSMatrixMultiplication::initWithDevice_transposeLeft_transposeRight_resultRows_resultColumns_interiorColumns_alpha_beta(
                MPSMatrixMultiplication::alloc(),
                &self.device,
                false,
                false,
                r.m,
                r.n,
                r.k,
                1.0,
                0.0,
            )
        };
        let cb = self.command_buffer(stream)?;
        // SAFETY: the matrices and the kernel belong to this device.
        unsafe {
            product.encodeToCommandBuffer_leftMatrix_rightMatrix_resultMatrix(&cb, &a, &b, &c)
        };
        self.submit(stream, cb, "matmul (MPS)");
        Ok(())
    }
}
