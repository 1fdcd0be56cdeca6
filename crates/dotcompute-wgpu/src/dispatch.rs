//! Dispatches: the pipeline, bind group and group counts of one launch, with the grid
//! folded into the adapter's per-dimension limits.

use super::*;
use dotcompute_hal::plan::{self, ArgView, FormPolicy, SlotExtras};

/// The planner's view of an argument: wgpu binds buffers by handle, so a view's
/// "address" is its byte offset (what the vector form's 16-byte rule is about).
fn view(a: &BoundArg<'_, WgpuBuffer>) -> ArgView {
    ArgView::of(a, |_| 0)
}

impl WgpuBackend {
    /// The pipeline, bind group and dispatch of one launch.
    pub(crate) fn prepare_dispatch(
        &self,
        request: &LaunchRequest<'_, WgpuBuffer>,
    ) -> Result<Dispatch> {
        let program = request.program;
        let kernel = &*program.kernel;
        let g = request.geometry;
        // A view at an offset the adapter cannot bind at is bound from the aligned offset
        // below it; the kernel variant with view offsets adds the rest (in elements).
        let align = self.limits.min_storage_buffer_offset_alignment.max(1) as usize;
        let unaligned = request
            .args
            .iter()
            .any(|a| matches!(a, BoundArg::Buffer { offset, .. } if offset % align != 0));
        let (pipeline, dispatch, view_offsets) = match program.raw_source() {
            Some(_) if unaligned => {
                return Err(Error::Unsupported {
                    op: "launch_raw",
                    detail: format!(
                        "a raw kernel's buffer views must start at a multiple of {align} \
                         bytes on this adapter (min_storage_buffer_offset_alignment)"
                    ),
                })
            }
            Some(raw) => {
                let (pipeline, dispatch) = self.raw_pipeline(program, raw, g.groups)?;
                (pipeline, dispatch, false)
            }
            None => {
                let (pipeline, dispatch) = self.generated_pipeline(request, unaligned)?;
                (pipeline, dispatch, unaligned)
            }
        };
        // The uniform block: the module's words in its order, filled by the planner.
        let uniforms = &pipeline.module.uniforms;
        let mut values = vec![0u64; uniforms.len()];
        let extras = SlotExtras {
            violation_record: 0,
            binding_alignment: align as u64,
        };
        plan::fill_slots(uniforms, &request.args, view, &g, &extras, &mut values)?;
        let uniform_bytes = plan::pack_words(&values);
        let ranges = self.binding_ranges(request, &pipeline, view_offsets, align)?;
        // Checked launches: a zeroed violation record, read after the launch.
        let record = pipeline.module.violation_binding.map(|binding| {
            let buffer = self
                .device
                .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some("dotcompute violation record"),
                    contents: &[0u8; dotcompute_hal::VIOLATION_WORDS * 4],
                    usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                });
            (binding, buffer)
        });
        // A launch like an earlier one (same pipeline, bindings and uniform bytes) reuses
        // its bind group and uniform buffer: both are immutable once made.
        let key = BindKey {
            pipeline: Arc::as_ptr(&pipeline) as usize,
            ranges: ranges
                .iter()
                .map(|&(b, buf, off, size)| (b, buf.clone(), off, size))
                .collect(),
            uniforms: uniform_bytes.clone(),
        };
        if record.is_none() {
            let cache = self.bind_groups.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(hit) = cache.get(&key) {
                return Ok(Dispatch {
                    pipeline,
                    bind_group: hit.bind_group.clone(),
                    groups: dispatch,
                    record: None,
                });
            }
        }
        let bind_group = self.bind_group(
            &kernel.name,
            &pipeline,
            &ranges,
            &uniform_bytes,
            &record,
            key,
        );
        Ok(Dispatch {
            pipeline,
            bind_group,
            groups: dispatch,
            record: record.map(|(_, buffer)| (buffer, program.kernel.clone())),
        })
    }

    /// The pipeline and group counts of a generated kernel, in the form the planner
    /// chose where it cannot be observed (see `dotcompute_hal::plan::plan_form`).
    fn generated_pipeline(
        &self,
        request: &LaunchRequest<'_, WgpuBuffer>,
        unaligned: bool,
    ) -> Result<(Arc<Pipeline>, [u32; 3])> {
        let program = request.program;
        let kernel = &*program.kernel;
        let g = request.geometry;
        let forms = *self
            .forms
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(program.key)
            .or_insert_with(|| wgsl::forms(kernel));
        let policy = FormPolicy {
            strided: self.strided,
            // The vector form binds each buffer as 16-byte vectors from where its view
            // starts: every one must be bindable there and hold whole vectors.
            vectors: self.vectors && !unaligned,
            max_groups: wgsl::STRIDED_GROUPS,
            strided_only_beyond: false,
            one_dimensional: true,
            whole_vectors: true,
        };
        let planned = plan::plan_form(forms, &request.args, view, &g, &policy);
        let dispatch = match planned.form {
            Form::Plain => self.dispatch_for(&kernel.name, g.groups)?,
            Form::Vector(_) => {
                VECTOR_LAUNCHES.with(|c| c.set(c.get() + 1));
                planned.groups
            }
            Form::Strided => planned.groups,
        };
        let pipeline = self.pipeline(
            program,
            g.group,
            g.dynamic_shared_len,
            unaligned,
            g.checked,
            planned.form,
        )?;
        Ok((pipeline, dispatch))
    }

    /// (binding, buffer, offset, size) of every buffer parameter, each checked against
    /// the adapter's largest storage binding. With view offsets a binding starts at the
    /// aligned offset below its view.
    fn binding_ranges<'r>(
        &self,
        request: &LaunchRequest<'r, WgpuBuffer>,
        pipeline: &Pipeline,
        view_offsets: bool,
        align: usize,
    ) -> Result<Vec<(u32, &'r wgpu::Buffer, u64, u64)>> {
        let kernel = &*request.program.kernel;
        let max_binding = self.limits.max_storage_buffer_binding_size;
        let mut ranges = Vec::with_capacity(pipeline.module.buffers.len());
        for &(param, binding, _) in &pipeline.module.buffers {
            let BoundArg::Buffer {
                buffer,
                offset,
                len,
                elem,
                ..
            } = &request.args[param as usize]
            else {
                return Err(Error::internal(BACKEND, "a buffer parameter got a scalar"));
            };
            // With view offsets the binding starts at the aligned offset below the view.
            let skipped = if view_offsets { offset % align } else { 0 };
            // Storage bindings are sized in whole words (an f16 buffer's last word may
            // hold one element past its end; the kernel takes its length from the
            // uniform block, and pool blocks are larger than that).
            let size = ((skipped + *len * elem.size_bytes()) as u64)
                .next_multiple_of(4)
                .min(buffer.buffer.size() - (offset - skipped) as u64);
            if size > max_binding {
                return Err(Error::TooLarge {
                    what: format!(
                        "kernel `{}`, argument `{}`: bytes bound (this adapter's largest storage binding)",
                        kernel.name,
                        kernel.params[param as usize].name()
                    ),
                    limit: max_binding,
                    found: size,
                });
            }
            ranges.push((binding, &buffer.buffer, (offset - skipped) as u64, size));
        }
        Ok(ranges)
    }

    /// A new bind group for `ranges` and the uniform bytes (and the checked-mode record),
    /// kept in the cache under `key` unless the launch is checked.
    fn bind_group(
        &self,
        label: &str,
        pipeline: &Arc<Pipeline>,
        ranges: &[(u32, &wgpu::Buffer, u64, u64)],
        uniform_bytes: &[u8],
        record: &Option<(u32, wgpu::Buffer)>,
        key: BindKey,
    ) -> wgpu::BindGroup {
        let uniforms = self
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("dotcompute launch parameters"),
                contents: uniform_bytes,
                usage: wgpu::BufferUsages::UNIFORM,
            });
        let mut entries: Vec<wgpu::BindGroupEntry> = ranges
            .iter()
            .map(|&(binding, buffer, offset, size)| wgpu::BindGroupEntry {
                binding,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer,
                    offset,
                    size: NonZeroU64::new(size),
                }),
            })
            .collect();
        if !pipeline.module.uniforms.is_empty() {
            entries.push(wgpu::BindGroupEntry {
                binding: pipeline.module.uniform_binding,
                resource: uniforms.as_entire_binding(),
            });
        }
        if let Some((binding, buffer)) = &record {
            entries.push(wgpu::BindGroupEntry {
                binding: *binding,
                resource: buffer.as_entire_binding(),
            });
        }
        let bind_group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(label),
            layout: &pipeline.layout,
            entries: &entries,
        });
        if record.is_none() {
            let mut cache = self.bind_groups.lock().unwrap_or_else(|p| p.into_inner());
            if cache.len() >= BIND_GROUP_CACHE {
                cache.clear();
            }
            cache.insert(
                key,
                CachedBinding {
                    _pipeline: pipeline.clone(),
                    bind_group: bind_group.clone(),
                    _uniforms: uniforms,
                },
            );
        }
        bind_group
    }

    /// The dispatch of a generated kernel's `groups`: as they are when every dimension
    /// fits the adapter's limit (the shader then takes its group id as is), else folded.
    pub(crate) fn dispatch_for(&self, kernel: &str, groups: [u32; 3]) -> Result<[u32; 3]> {
        let max = self.limits.max_compute_workgroups_per_dimension.max(1);
        if groups.iter().all(|&g| g <= max) {
            return Ok(groups);
        }
        self.fold(kernel, groups.iter().map(|&g| g as u64).product())
    }

    /// Splits `total` groups into a dispatch of at most `max` per dimension.
    pub(crate) fn fold(&self, kernel: &str, total: u64) -> Result<[u32; 3]> {
        let max = self.limits.max_compute_workgroups_per_dimension.max(1) as u64;
        let x = total.min(max);
        let y = total.div_ceil(x).min(max);
        let z = total.div_ceil(x * y);
        if z > max || total > u32::MAX as u64 {
            return Err(Error::GridTooLarge {
                kernel: kernel.into(),
                detail: format!(
                    "{total} groups; this adapter dispatches at most {} groups in all",
                    (max * max * max).min(u32::MAX as u64)
                ),
            });
        }
        Ok([x as u32, y as u32, z as u32])
    }
}
