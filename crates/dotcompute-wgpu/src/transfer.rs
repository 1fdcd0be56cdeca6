//! Device-to-device copies and fills run as compute kernels.
//!
//! Why: on NVIDIA Vulkan `copy_buffer_to_buffer` moved 849 GB/s where a copy kernel moved
//! 3,014 GB/s on the same H100 (2026-11-25), and fills were written from the host in
//! 4 MiB chunks. So a word-aligned copy or fill of at least [`KERNEL_MIN_BYTES`] runs one
//! of the kernels below; smaller ones keep the driver's copy and the queue write, which
//! cost less to set up.
//!
//! Each kernel strides over its range (so one dispatch of at most [`MAX_GROUPS`] groups
//! covers any binding) and moves 16-byte vectors where both ends of the range allow, else
//! 4-byte words. A binding must start at a multiple of the adapter's
//! `min_storage_buffer_offset_alignment` and hold at most its largest storage binding: the
//! range is bound from the aligned offset below it (the kernel adds the rest, in units)
//! and split into chunks that fit.

use std::num::NonZeroU64;
use wgpu::util::DeviceExt;

/// The smallest transfer that runs as a kernel.
pub(crate) const KERNEL_MIN_BYTES: usize = 1 << 20;

/// Threads per group of the transfer kernels.
const GROUP: u32 = 256;

/// The most groups one dispatch uses (each thread then strides): within every adapter's
/// per-dimension limit, and few trips per thread even for a 4 GiB binding (lavapipe ends
/// a thread's loops after 65,535 trips).
const MAX_GROUPS: u32 = 65_535;

/// `src`, `dst`: the range's first unit inside each binding; `count`: units to move;
/// `pattern`: a fill's 16 bytes (the fill's pattern repeated), word `i` of the range
/// taking `pattern[i % 4]`.
const PARAMS: &str = "
struct Params { src: u32, dst: u32, count: u32, pad: u32, pattern: vec4<u32> }
@group(0) @binding(2) var<uniform> p: Params;
";

fn copy_source(unit: &str) -> String {
    format!(
        "{PARAMS}
@group(0) @binding(0) var<storage, read> src: array<{unit}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{unit}>;
@compute @workgroup_size({GROUP})
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {{
    let stride = groups.x * {GROUP}u;
    for (var i = id.x; i < p.count; i += stride) {{
        dst[p.dst + i] = src[p.src + i];
    }}
}}
"
    )
}

fn fill_source(unit: &str, value: &str) -> String {
    format!(
        "{PARAMS}
@group(0) @binding(1) var<storage, read_write> dst: array<{unit}>;
@compute @workgroup_size({GROUP})
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {{
    let stride = groups.x * {GROUP}u;
    for (var i = id.x; i < p.count; i += stride) {{
        dst[p.dst + i] = {value};
    }}
}}
"
    )
}

/// A transfer pipeline and its bind group layout (taken once: each `get_bind_group_layout`
/// call makes a new handle).
struct TransferPipeline {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
}

/// The four transfer pipelines of a device, made on first use.
pub(crate) struct TransferKernels {
    copy_words: TransferPipeline,
    copy_vectors: TransferPipeline,
    fill_words: TransferPipeline,
    fill_vectors: TransferPipeline,
}

impl TransferKernels {
    /// Builds the pipelines; a wgpu error here is a defect of this module, returned as
    /// its message.
    pub(crate) fn new(
        device: &wgpu::Device,
        cache: Option<&wgpu::PipelineCache>,
    ) -> Result<TransferKernels, String> {
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let make = |label: &str, source: String| {
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            });
            let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(label),
                layout: None,
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache,
            });
            let layout = pipeline.get_bind_group_layout(0);
            TransferPipeline { pipeline, layout }
        };
        let kernels = TransferKernels {
            copy_words: make("dotcompute copy (words)", copy_source("u32")),
            copy_vectors: make("dotcompute copy (vectors)", copy_source("vec4<u32>")),
            fill_words: make(
                "dotcompute fill (words)",
                fill_source("u32", "p.pattern[i % 4u]"),
            ),
            fill_vectors: make(
                "dotcompute fill (vectors)",
                fill_source("vec4<u32>", "p.pattern"),
            ),
        };
        match pollster::block_on(scope.pop()) {
            Some(e) => Err(format!("internal: a transfer kernel did not build: {e}")),
            None => Ok(kernels),
        }
    }
}

/// One end of a transfer: a buffer and the byte offset the range starts at.
pub(crate) struct End<'a> {
    pub buffer: &'a wgpu::Buffer,
    pub offset: usize,
}

/// What a transfer kernel does: copy from a source, or fill with a pattern.
pub(crate) enum Op<'a> {
    Copy(End<'a>),
    /// The pattern (1, 2, 4, 8 or 16 bytes; see [`fill_pattern`]) as 16 bytes.
    Fill([u32; 4]),
}

/// A fill pattern as the 16 bytes the fill kernels repeat, when its length divides 16
/// (element sizes 1, 2, 4, 8 and 16 bytes); `None` otherwise.
pub(crate) fn fill_pattern(pattern: &[u8]) -> Option<[u32; 4]> {
    if pattern.is_empty() || 16 % pattern.len() != 0 {
        return None;
    }
    let bytes: Vec<u8> = pattern.iter().copied().cycle().take(16).collect();
    Some(std::array::from_fn(|i| {
        u32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().expect("4 bytes"))
    }))
}

/// The adapter limits a transfer is planned against.
pub(crate) struct BindingLimits {
    /// `min_storage_buffer_offset_alignment`.
    pub align: usize,
    /// `max_storage_buffer_binding_size`.
    pub max_binding: u64,
}

impl BindingLimits {
    /// The largest chunk one dispatch moves: its binding, starting up to `align - 1`
    /// bytes before it, must fit the largest binding. A multiple of 16 bytes, so each
    /// chunk keeps the range's vector alignment and a fill's pattern phase.
    fn chunk(&self) -> usize {
        let max = self.max_binding.min(u32::MAX as u64) as usize;
        (max.saturating_sub(self.align) / 16 * 16).max(16)
    }
}

/// Encodes the dispatches that move `bytes` (a multiple of 4) to `dst`: a copy from
/// `op`'s source or a fill with its pattern. Both offsets are multiples of 4.
pub(crate) fn encode(
    device: &wgpu::Device,
    kernels: &TransferKernels,
    limits: &BindingLimits,
    pass: &mut wgpu::ComputePass<'_>,
    op: &Op<'_>,
    dst: &End<'_>,
    bytes: usize,
) {
    let chunk = limits.chunk();
    let mut done = 0;
    while done < bytes {
        let n = chunk.min(bytes - done);
        let dst_range = bound(limits, dst.buffer, dst.offset + done, n);
        let src_range = match op {
            Op::Copy(src) => Some(bound(limits, src.buffer, src.offset + done, n)),
            Op::Fill(_) => None,
        };
        // 16-byte units where the range starts on a vector inside each binding and holds
        // whole vectors.
        let vectors = n % 16 == 0
            && dst_range.skipped % 16 == 0
            && src_range.as_ref().is_none_or(|r| r.skipped % 16 == 0);
        let unit = if vectors { 16 } else { 4 };
        let (pipeline, pattern) = match (op, vectors) {
            (Op::Copy(_), true) => (&kernels.copy_vectors, [0; 4]),
            (Op::Copy(_), false) => (&kernels.copy_words, [0; 4]),
            (Op::Fill(p), true) => (&kernels.fill_vectors, *p),
            (Op::Fill(p), false) => (&kernels.fill_words, *p),
        };
        let count = (n / unit) as u32;
        let words = [
            src_range.as_ref().map_or(0, |r| (r.skipped / unit) as u32),
            (dst_range.skipped / unit) as u32,
            count,
            0,
            pattern[0],
            pattern[1],
            pattern[2],
            pattern[3],
        ];
        let params = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("dotcompute transfer parameters"),
            contents: &words
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .collect::<Vec<u8>>(),
            usage: wgpu::BufferUsages::UNIFORM,
        });
        let mut entries = vec![
            dst_range.entry(1),
            wgpu::BindGroupEntry {
                binding: 2,
                resource: params.as_entire_binding(),
            },
        ];
        if let Some(r) = &src_range {
            entries.push(r.entry(0));
        }
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("dotcompute transfer"),
            layout: &pipeline.layout,
            entries: &entries,
        });
        pass.set_pipeline(&pipeline.pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(count.div_ceil(GROUP).clamp(1, MAX_GROUPS), 1, 1);
        done += n;
    }
}

/// A binding that holds `len` bytes from `offset`: it starts at the aligned offset below,
/// `skipped` bytes earlier.
struct Bound<'a> {
    buffer: &'a wgpu::Buffer,
    start: u64,
    size: u64,
    skipped: usize,
}

impl Bound<'_> {
    fn entry(&self, binding: u32) -> wgpu::BindGroupEntry<'_> {
        wgpu::BindGroupEntry {
            binding,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: self.buffer,
                offset: self.start,
                size: NonZeroU64::new(self.size),
            }),
        }
    }
}

fn bound<'a>(
    limits: &BindingLimits,
    buffer: &'a wgpu::Buffer,
    offset: usize,
    len: usize,
) -> Bound<'a> {
    let skipped = offset % limits.align.max(1);
    Bound {
        buffer,
        start: (offset - skipped) as u64,
        size: (skipped + len) as u64,
        skipped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_patterns_repeat_to_sixteen_bytes() {
        assert_eq!(fill_pattern(&[0xab]), Some([0xabab_abab; 4]));
        assert_eq!(fill_pattern(&[1, 2]), Some([0x0201_0201; 4]));
        assert_eq!(fill_pattern(&[1, 0, 0, 0, 2, 0, 0, 0]), Some([1, 2, 1, 2]));
        let sixteen: Vec<u8> = (0..16).collect();
        assert_eq!(
            fill_pattern(&sixteen),
            Some([0x0302_0100, 0x0706_0504, 0x0b0a_0908, 0x0f0e_0d0c])
        );
        // Patterns whose length does not divide 16 stay on the host path.
        assert_eq!(fill_pattern(&[1, 2, 3]), None);
        assert_eq!(fill_pattern(&[0; 12]), None);
        assert_eq!(fill_pattern(&[]), None);
    }

    #[test]
    fn chunks_fit_the_largest_binding_and_keep_vector_alignment() {
        let limits = BindingLimits {
            align: 256,
            max_binding: 128 << 20,
        };
        let chunk = limits.chunk();
        assert_eq!(chunk % 16, 0);
        assert!(chunk + 255 <= 128 << 20);
        let huge = BindingLimits {
            align: 64,
            max_binding: u64::MAX,
        };
        assert!(huge.chunk() + 63 <= u32::MAX as usize);
    }
}
