//! The cuBLAS extension: `Device::matmul`'s vendor path.

use crate::driver::{self, bind, BACKEND};
use crate::memory::CudaBuffer;
use crate::{lock, CudaBackend};
use cudarc::cublas::{result as blas, sys as blas_sys};
use dotcompute_hal::{Blas, Error, MatmulRequest, Precision, Result, StreamId};
use dotcompute_ir::ScalarType;

/// Element types cuBLAS multiplies here: FP32 / FP64 GEMM, and 16-bit GemmEx with f32
/// accumulation on tensor cores.
pub(crate) const BLAS_TYPES: [ScalarType; 4] = [
    ScalarType::F32,
    ScalarType::F64,
    ScalarType::F16,
    ScalarType::BF16,
];

pub(crate) struct BlasHandle(pub blas_sys::cublasHandle_t);
// SAFETY: a cuBLAS handle may be used from any thread, one call at a time; the backend
// serialises calls with a mutex (the handle's stream is set per call).
unsafe impl Send for BlasHandle {}
// SAFETY: shared use is sound for the reason above (Send).
unsafe impl Sync for BlasHandle {}

impl CudaBackend {
    /// The cuBLAS handle, created on first use.
    pub(crate) fn blas_handle(&self) -> std::result::Result<&BlasHandle, String> {
        self.blas
            .get_or_init(|| {
                if !driver::cublas_present() {
                    return Err("cuBLAS library (libcublas.so) not found".into());
                }
                bind(&self.ctx).map_err(|e| e.to_string())?;
                let h = blas::create_handle().map_err(|e| format!("cublasCreate: {e:?}"))?;
                Ok(BlasHandle(h))
            })
            .as_ref()
            .map_err(|e| e.clone())
    }
}

impl Blas<CudaBuffer> for CudaBackend {
    unsafe fn gemm(&self, s: StreamId, r: &MatmulRequest<'_, CudaBuffer>) -> Result<()> {
        bind(&self.ctx)?;
        let stream = self.stream(s)?;
        let h = self
            .blas_handle()
            .map_err(|reason| Error::Unsupported {
                op: "a vendor matrix product",
                detail: reason,
            })?
            .0;
        // One call at a time per handle: the handle's stream is set for this call.
        let _serial = lock(&self.blas_calls);
        let (m, n, k) = (r.m as i32, r.n as i32, r.k as i32);
        let op = blas_sys::cublasOperation_t::CUBLAS_OP_N;
        let label = if r.precision == Precision::Tf32 && r.elem == ScalarType::F32 {
            "matmul (cuBLAS TF32)"
        } else {
            "matmul (cuBLAS)"
        };
        self.timed(s, stream, label, || {
            // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: swap the operands, keep the
            // data.
            // SAFETY: the facade checked that a, b, c hold m×k, k×n and m×n elements of
            // `r.elem`; alpha and beta live across the (synchronous-to-enqueue) call; the
            // handle and stream are live.
            unsafe {
                blas::set_stream(h, stream as _).and_then(|()| match r.elem {
                    // FP32 data through TF32 tensor cores, FP32 accumulation.
                    // FP32 data through TF32 tensor cores, FP32 accumulation.
                    ScalarType::F32 if r.precision == Precision::Tf32 => gemm_ex(
                        h,
                        (n, m, k),
                        r,
                        blas_sys::cudaDataType::CUDA_R_32F,
                        blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
                    ),
                    ScalarType::F32 => blas::sgemm(
                        h,
                        op,
                        op,
                        n,
                        m,
                        k,
                        &1.0f32,
                        r.b.ptr as _,
                        n,
                        r.a.ptr as _,
                        k,
                        &0.0f32,
                        r.c.ptr as _,
                        n,
                    ),
                    ScalarType::F64 => blas::dgemm(
                        h,
                        op,
                        op,
                        n,
                        m,
                        k,
                        &1.0f64,
                        r.b.ptr as _,
                        n,
                        r.a.ptr as _,
                        k,
                        &0.0f64,
                        r.c.ptr as _,
                        n,
                    ),
                    // 16-bit inputs and output, f32 accumulation (alpha and beta are then
                    // f32), tensor cores where the device has them.
                    half_type => gemm_ex(
                        h,
                        (n, m, k),
                        r,
                        if half_type == ScalarType::F16 {
                            blas_sys::cudaDataType::CUDA_R_16F
                        } else {
                            blas_sys::cudaDataType::CUDA_R_16BF
                        },
                        blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                    ),
                })
            }
            .map_err(|e| Error::Driver {
                backend: BACKEND.into(),
                operation: "cuBLAS gemm".into(),
                code: e.0 as i64,
                name: format!("{:?}", e.0),
                detail: format!("{m}×{k} · {k}×{n}, {}", r.elem),
            })
        })
    }
}

/// `cublasGemmEx` of row-major `c = a · b` as column-major `cᵀ = bᵀ · aᵀ` (`dims` is
/// `(n, m, k)` in cuBLAS's order), with data type `t` for all three matrices, compute
/// type `compute` and f32 alpha = 1, beta = 0, on tensor cores where the device has them.
///
/// # Safety
/// As for `Blas::gemm`: the buffers hold their matrices of type `t`; the handle is live.
unsafe fn gemm_ex(
    h: blas_sys::cublasHandle_t,
    (n, m, k): (i32, i32, i32),
    r: &MatmulRequest<'_, CudaBuffer>,
    t: blas_sys::cudaDataType,
    compute: blas_sys::cublasComputeType_t,
) -> std::result::Result<(), cudarc::cublas::result::CublasError> {
    let op = blas_sys::cublasOperation_t::CUBLAS_OP_N;
    let (one, zero) = (1.0f32, 0.0f32);
    // SAFETY: the caller's contract; alpha and beta outlive the call.
    unsafe {
        blas::gemm_ex(
            h,
            op,
            op,
            n,
            m,
            k,
            (&one as *const f32).cast(),
            r.b.ptr as _,
            t,
            n,
            r.a.ptr as _,
            t,
            k,
            (&zero as *const f32).cast(),
            r.c.ptr as _,
            t,
            n,
            compute,
            blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT_TENSOR_OP,
        )
    }
}
