//! Device discovery: what the driver says about each device.

use crate::compile;
use crate::driver::{self, Check};
use cudarc::driver::{result as cu, sys};
use dotcompute_hal::{
    AtomicF32Add, BackendKind, Capabilities, DeviceInfo, DeviceType, GeneratedProduct, Limits,
    RawLanguage, Result,
};

/// The devices of the CUDA driver, or why there are none.
pub fn devices() -> std::result::Result<Vec<DeviceInfo>, String> {
    driver::probe()?;
    let n = cu::device::get_count().map_err(driver::describe)?;
    (0..n)
        .map(|i| device_info(i).map_err(|e| e.to_string()))
        .collect()
}

pub(crate) fn attribute(dev: sys::CUdevice, attr: sys::CUdevice_attribute) -> Result<i32> {
    // SAFETY: dev is a valid device handle.
    unsafe { cu::device::get_attribute(dev, attr) }.during("cuDeviceGetAttribute")
}

pub(crate) fn driver_version() -> i32 {
    let mut v = 0;
    // SAFETY: writes one int.
    let _ = unsafe { sys::cuDriverGetVersion(&mut v) };
    v
}

pub(crate) fn device_info(ordinal: i32) -> Result<DeviceInfo> {
    use sys::CUdevice_attribute::*;
    let dev = cu::device::get(ordinal).during("cuDeviceGet")?;
    let a = |attr| attribute(dev, attr);
    let cc = (
        a(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
        a(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
    );
    // SAFETY: dev is valid.
    let memory = unsafe { cu::device::total_mem(dev) }.during("cuDeviceTotalMem")? as u64;
    let (nv_major, nv_minor) = compile::nvrtc_version();
    let driver = driver_version();
    let integrated = a(CU_DEVICE_ATTRIBUTE_INTEGRATED)? != 0;
    Ok(DeviceInfo {
        backend: BackendKind::Cuda,
        ordinal: ordinal as usize,
        name: cu::device::get_name(dev).during("cuDeviceGetName")?,
        device_type: if integrated {
            DeviceType::IntegratedGpu
        } else {
            DeviceType::DiscreteGpu
        },
        memory_bytes: memory,
        compute_units: a(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
        limits: Limits {
            max_group_threads: a(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)? as u32,
            max_group_size: [
                a(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)? as u32,
                a(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)? as u32,
                a(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)? as u32,
            ],
            max_groups: [
                a(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)? as u32,
                a(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)? as u32,
                a(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)? as u32,
            ],
            max_shared_bytes: a(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as u64,
            max_static_shared_bytes: a(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)? as u64,
            max_buffer_bytes: memory,
            max_binding_bytes: memory,
        },
        driver: format!(
            "CUDA driver {}.{}, NVRTC {nv_major}.{nv_minor}, sm_{}{}",
            driver / 1000,
            (driver % 1000) / 10,
            cc.0,
            cc.1
        ),
        caps: Capabilities {
            f64: true,
            i64: true,
            f16: true,
            atomic_f32_add: AtomicF32Add::Native,
            timestamps: true,
            raw_languages: vec![RawLanguage::Cuda],
            concurrent_streams: true,
            native_graphs: true,
            blas: if driver::cublas_present() {
                crate::blas::BLAS_TYPES.to_vec()
            } else {
                Vec::new()
            },
            subgroup_size: Some([32, 32]),
            // mma.sync with TF32 operands: sm_80 (Ampere) and later.
            tensor_cores: cc.0 >= 8,
            exact_float: true,
            subnormals: true,
            time_limits: true,
            completes_on_enqueue: false,
            forward_progress: true,
            generated_product: GeneratedProduct::BlockedQuads,
        },
    })
}
