//! The `Queue` half of the backend: writes, reads, copies, fills and launches on the one
//! wgpu queue (every dotcompute stream is an ordered view of it), and the batching of
//! launches into passes.

use super::*;

impl Queue for WgpuBackend {
    unsafe fn write(
        &self,
        s: StreamId,
        dst: &WgpuBuffer,
        offset: usize,
        data: &[u8],
    ) -> Result<()> {
        self.check_lost()?;
        if !word_aligned(offset, data.len()) {
            // 16-bit elements: widen to whole words, keeping the bytes around the range
            // (pool blocks are whole words, so the widened range is inside the block).
            let (start, end) = widen(offset, data.len());
            let mut words = vec![0u8; end - start];
            // SAFETY: the widened words are inside the block (the caller's range is, and
            // blocks are whole words), and the caller's ordering contract covers them.
            unsafe {
                self.read(s, dst, start, &mut words[..COPY_ALIGN])?;
                let last = words.len() - COPY_ALIGN;
                if last > 0 {
                    self.read(s, dst, end - COPY_ALIGN, &mut words[last..])?;
                }
                words[offset - start..offset - start + data.len()].copy_from_slice(data);
                return self.write(s, dst, start, &words);
            }
        }
        // A queue write runs before the next submission: recorded launches go first.
        self.with_queue(|queue| queue.write_buffer(&dst.buffer, offset as u64, data));
        self.check_uncaptured()
    }

    unsafe fn read(
        &self,
        _: StreamId,
        src: &WgpuBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<()> {
        // A lost device's staging buffer may still wait on a mapping: touch nothing.
        self.check_lost()?;
        // Every stream is the one queue (crate docs).
        if !word_aligned(offset, out.len()) {
            let (start, end) = widen(offset, out.len());
            let mut words = vec![0u8; end - start];
            // SAFETY: the widened words are inside the block, as in `write`.
            unsafe { self.read(StreamId::DEFAULT, src, start, &mut words)? };
            out.copy_from_slice(&words[offset - start..offset - start + out.len()]);
            return Ok(());
        }
        let size = out.len() as u64;
        let mut staging = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        if staging.as_ref().is_none_or(|s| s.size() < size) {
            let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
            let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("dotcompute staging"),
                size: size
                    .next_power_of_two()
                    .min(self.limits.max_buffer_size)
                    .max(size),
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            if let Some(e) = pollster::block_on(scope.pop()) {
                return Err(Error::OutOfMemory {
                    device: self.info.label(),
                    requested: size,
                    detail: format!("the staging buffer for a read: {e}"),
                });
            }
            *staging = Some(buffer);
        }
        let staging = staging.as_ref().expect("just created");
        let mut encoder = self.device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(&src.buffer, offset as u64, staging, 0, size);
        self.submit(encoder)?;
        self.read_mapped(staging, out, "the staging buffer")
    }

    unsafe fn copy(
        &self,
        s: StreamId,
        src: &WgpuBuffer,
        src_offset: usize,
        dst: &WgpuBuffer,
        dst_offset: usize,
        bytes: usize,
    ) -> Result<()> {
        self.check_lost()?;
        if !word_aligned(src_offset, bytes) || !word_aligned(dst_offset, bytes) {
            // Buffer copies move whole words: 16-bit ranges go through the host.
            let mut data = vec![0u8; bytes];
            // SAFETY: the caller's ranges and ordering, moved through the host.
            unsafe {
                self.read(s, src, src_offset, &mut data)?;
                return self.write(s, dst, dst_offset, &data);
            }
        }
        if self.transfer_kernels && bytes >= transfer::KERNEL_MIN_BYTES && src.buffer != dst.buffer
        {
            let source = transfer::End {
                buffer: &src.buffer,
                offset: src_offset,
            };
            let target = transfer::End {
                buffer: &dst.buffer,
                offset: dst_offset,
            };
            return self.run_transfer(s, "copy", &transfer::Op::Copy(source), &target, bytes);
        }
        let mut encoder = self.device.create_command_encoder(&Default::default());
        let stamps = match &self.stamps {
            Some(s) if self.profiling() => Some(s.lock().unwrap_or_else(|p| p.into_inner())),
            _ => None,
        };
        let stamped = stamps.as_ref().filter(|st| st.inside_encoders);
        if let Some(st) = stamped {
            encoder.write_timestamp(&st.set, 0);
        }
        encoder.copy_buffer_to_buffer(
            &src.buffer,
            src_offset as u64,
            &dst.buffer,
            dst_offset as u64,
            bytes as u64,
        );
        match stamped {
            Some(st) => {
                encoder.write_timestamp(&st.set, 1);
                self.submit_timed(encoder, st, s, "copy")
            }
            None if self.profiling() => {
                let start = std::time::Instant::now();
                self.submit(encoder)?;
                self.wait()?;
                self.record(s, "copy", start, start.elapsed(), false);
                Ok(())
            }
            None => self.submit(encoder),
        }
    }

    unsafe fn fill(
        &self,
        s: StreamId,
        dst: &WgpuBuffer,
        offset: usize,
        bytes: usize,
        pattern: &[u8],
    ) -> Result<()> {
        self.check_lost()?;
        if !word_aligned(offset, bytes) {
            let data: Vec<u8> = pattern.iter().copied().cycle().take(bytes).collect();
            // SAFETY: the caller's range and ordering.
            return unsafe { self.write(s, dst, offset, &data) };
        }
        if let Some(words) = transfer::fill_pattern(pattern)
            .filter(|_| self.transfer_kernels && bytes >= transfer::KERNEL_MIN_BYTES)
        {
            let target = transfer::End {
                buffer: &dst.buffer,
                offset,
            };
            return self.run_transfer(s, "fill", &transfer::Op::Fill(words), &target, bytes);
        }
        // Written from a host chunk of the repeated pattern, at most 4 MiB at a time, in
        // whole words and whole patterns.
        let unit = pattern.len().max(COPY_ALIGN);
        let chunk_len = (4 << 20).min(bytes) / unit * unit;
        let chunk: Vec<u8> = pattern.iter().copied().cycle().take(chunk_len).collect();
        self.with_queue(|queue| {
            let mut done = 0;
            while done < bytes {
                let n = chunk_len.min(bytes - done);
                queue.write_buffer(&dst.buffer, (offset + done) as u64, &chunk[..n]);
                done += n;
            }
        });
        self.check_uncaptured()
    }

    unsafe fn launch(&self, s: StreamId, request: &LaunchRequest<'_, WgpuBuffer>) -> Result<()> {
        // SAFETY: the caller's request, as a batch of one.
        unsafe { self.launch_batch(s, std::slice::from_ref(request)) }
    }

    /// One command encoder and one compute pass for all of `requests`: wgpu orders the
    /// dispatches of a pass (a barrier between dependent ones), and one submission costs
    /// what one launch did. With profiling on, the pass is timed as a whole (one launch:
    /// the kernel's name; several: `graph (N launches)`).
    unsafe fn launch_batch(
        &self,
        s: StreamId,
        requests: &[LaunchRequest<'_, WgpuBuffer>],
    ) -> Result<()> {
        self.check_lost()?;
        // A launch with its own time limit: earlier work first, under the device's limit
        // (one queue: all of it), then this launch alone under its own.
        let limited = requests.iter().filter_map(|r| r.geometry.time_limit).min();
        if limited.is_some() {
            self.wait()?;
        }
        // wgpu's error scopes belong to the calling thread: a validation error of this
        // launch comes back to this caller, not to whichever thread calls next.
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let result = self.launch_batch_scoped(s, requests);
        match (result, pollster::block_on(scope.pop())) {
            (Err(e), _) => Err(e),
            (Ok(()), Some(e)) => Err(wgpu_error("launch", &e)),
            (Ok(()), None) => match limited {
                Some(limit) => self.wait_within(
                    limit,
                    settings::SET_BY_LAUNCH,
                    &format!("kernel `{}`", requests[0].program.kernel.name),
                ),
                None => Ok(()),
            },
        }
    }

    fn synchronize(&self, _: StreamId) -> Result<()> {
        self.wait()
    }

    fn synchronize_all(&self) -> Result<()> {
        self.wait()
    }

    fn wait_stream(&self, _: StreamId, _: StreamId) -> Result<()> {
        Ok(()) // one queue: the signaller's work was submitted first and runs first
    }
}

impl WgpuBackend {
    /// Runs a copy or fill kernel ([`transfer`]) over `bytes` of `dst` (word-aligned),
    /// recorded with the launches like one of them, or timed on its own when profiling.
    pub(crate) fn run_transfer(
        &self,
        s: StreamId,
        label: &str,
        op: &transfer::Op<'_>,
        dst: &transfer::End<'_>,
        bytes: usize,
    ) -> Result<()> {
        let kernels = self
            .transfers
            .get_or_init(|| {
                let kernels = transfer::TransferKernels::new(&self.device, self.cache());
                self.save_pipeline_cache();
                kernels
            })
            .as_ref()
            .map_err(|e| backend_err(e.clone()))?;
        let limits = transfer::BindingLimits {
            align: self.limits.min_storage_buffer_offset_alignment.max(4) as usize,
            max_binding: self.limits.max_storage_buffer_binding_size,
        };
        let encode =
            |encoder: &mut wgpu::CommandEncoder,
             timestamp_writes: Option<wgpu::ComputePassTimestampWrites<'_>>| {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(label),
                    timestamp_writes,
                });
                transfer::encode(&self.device, kernels, &limits, &mut pass, op, dst, bytes);
            };
        let stamps = match &self.stamps {
            Some(st) if self.profiling() => Some(st.lock().unwrap_or_else(|p| p.into_inner())),
            _ => None,
        };
        if self.batch && stamps.is_none() && !self.profiling() {
            self.record_pending(|encoder| encode(encoder, None));
            return self.check_uncaptured();
        }
        let mut encoder = self.device.create_command_encoder(&Default::default());
        match &stamps {
            Some(st) => {
                encode(
                    &mut encoder,
                    Some(wgpu::ComputePassTimestampWrites {
                        query_set: &st.set,
                        beginning_of_pass_write_index: Some(0),
                        end_of_pass_write_index: Some(1),
                    }),
                );
                self.submit_timed(encoder, st, s, label)
            }
            None if self.profiling() => {
                let start = std::time::Instant::now();
                encode(&mut encoder, None);
                self.submit(encoder)?;
                self.wait()?;
                self.record(s, label, start, start.elapsed(), false);
                Ok(())
            }
            None => {
                encode(&mut encoder, None);
                self.submit(encoder)
            }
        }
    }

    /// Records work into the pending command buffer (submitted with later work, before
    /// any other queue operation: see [`QueueOrder`]), submitting it once it holds
    /// [`BATCH_LAUNCHES`] passes.
    pub(crate) fn record_pending(&self, f: impl FnOnce(&mut wgpu::CommandEncoder)) {
        let mut order = self.order.lock().unwrap_or_else(|p| p.into_inner());
        let (encoder, passes) = order
            .pending
            .get_or_insert_with(|| (self.device.create_command_encoder(&Default::default()), 0));
        f(encoder);
        *passes += 1;
        if *passes >= BATCH_LAUNCHES {
            // Submitted under the lock, like every queue operation.
            let (encoder, _) = order.pending.take().expect("just filled");
            self.queue.submit(Some(encoder.finish()));
        }
    }

    /// `launch_batch` inside its error scope.
    pub(crate) fn launch_batch_scoped(
        &self,
        s: StreamId,
        requests: &[LaunchRequest<'_, WgpuBuffer>],
    ) -> Result<()> {
        let prepared = requests
            .iter()
            .map(|r| self.prepare_dispatch(r))
            .collect::<Result<Vec<_>>>()?;
        let label = match requests {
            [one] => one.program.kernel.name.clone(),
            many => format!("graph ({} launches)", many.len()),
        };
        let stamps = match &self.stamps {
            Some(st) if self.profiling() => Some(st.lock().unwrap_or_else(|p| p.into_inner())),
            _ => None,
        };
        let checked = prepared.iter().any(|d| d.record.is_some());
        if self.batch && stamps.is_none() && !checked {
            // Recorded into the pending command buffer; submitted with later work.
            if !self.chunked || prepared.len() <= CHUNK_LAUNCHES {
                self.record_pending(|encoder| encode_pass(encoder, &label, &prepared, None));
                return self.check_uncaptured();
            }
            // A long batch (a graph replay): each chunk is submitted as soon as it is
            // recorded, so the GPU runs it while the next one is recorded (recording took
            // 3.4 µs per dispatch and the GPU 2.2 µs on an H200, one after the other).
            for chunk in prepared.chunks(CHUNK_LAUNCHES) {
                self.record_pending(|encoder| encode_pass(encoder, &label, chunk, None));
                self.flush()?;
            }
            return Ok(());
        }
        let mut encoder = self.device.create_command_encoder(&Default::default());
        encode_pass(
            &mut encoder,
            &label,
            &prepared,
            stamps.as_ref().map(|st| wgpu::ComputePassTimestampWrites {
                query_set: &st.set,
                beginning_of_pass_write_index: Some(0),
                end_of_pass_write_index: Some(1),
            }),
        );
        // Checked launches: copy each violation record out with the same submission.
        let records: Vec<(wgpu::Buffer, &Arc<dotcompute_ir::Kernel>)> = prepared
            .iter()
            .filter_map(|d| d.record.as_ref())
            .map(|(record, kernel)| {
                let readback = self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("dotcompute violation readback"),
                    size: record.size(),
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                encoder.copy_buffer_to_buffer(record, 0, &readback, 0, record.size());
                (readback, kernel)
            })
            .collect();
        match &stamps {
            Some(st) => self.submit_timed(encoder, st, s, &label)?,
            None => self.submit(encoder)?,
        }
        for (readback, kernel) in records {
            let mut bytes = [0u8; dotcompute_hal::VIOLATION_WORDS * 4];
            self.read_mapped(&readback, &mut bytes, "the violation record")?;
            let words: [u32; dotcompute_hal::VIOLATION_WORDS] = std::array::from_fn(|i| {
                u32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap())
            });
            if let Some(violation) = dotcompute_hal::decode_violation(kernel, words) {
                return Err(violation);
            }
        }
        Ok(())
    }
}

/// One compute pass dispatching `prepared` in order (wgpu orders dependent dispatches of
/// a pass), optionally timestamped.
pub(crate) fn encode_pass(
    encoder: &mut wgpu::CommandEncoder,
    label: &str,
    prepared: &[Dispatch],
    timestamp_writes: Option<wgpu::ComputePassTimestampWrites<'_>>,
) {
    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
        label: Some(label),
        timestamp_writes,
    });
    for d in prepared {
        pass.set_pipeline(&d.pipeline.pipeline);
        pass.set_bind_group(0, &d.bind_group, &[]);
        pass.dispatch_workgroups(d.groups[0], d.groups[1], d.groups[2]);
    }
}
