//! Pipelines: a generated kernel's WGSL (or strict SPIR-V on Vulkan) compiled for one
//! form and group size, hand-written kernels, and the pipeline cache they go through.

use super::*;

impl WgpuBackend {
    pub(crate) fn pipeline(
        &self,
        program: &dotcompute_hal::Program,
        group: [u32; 3],
        dynamic_len: u32,
        view_offsets: bool,
        checked: bool,
        form: Form,
    ) -> Result<Arc<Pipeline>> {
        let kernel = &*program.kernel;
        let key = (program.key, group, dynamic_len, view_offsets, checked, form);
        if let Some(p) = self
            .pipelines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Ok(p.clone());
        }
        let compile_err = |log: String| Error::Compile {
            kernel: kernel.name.clone(),
            backend: BACKEND.into(),
            log,
        };
        let module = wgsl::generate(
            kernel,
            &wgsl::WgslOptions {
                group_size: group,
                dynamic_shared_len: dynamic_len,
                view_offsets,
                checked,
                strided: form != Form::Plain,
                vector: matches!(form, Form::Vector(_)),
                native_f32_atomics: self.info.caps.atomic_f32_add == AtomicF32Add::Native,
                storage_barriers: self.storage_barriers_always
                    || dotcompute_ir::analysis::barrier_orders_buffers(kernel),
                loop_budget: self.loop_budget,
                unroll: self.unroll,
            },
        )
        .map_err(|e| compile_err(e.message))?;
        // The variant: what the launch specialised (DOTCOMPUTE_DUMP file names).
        let variant = format!(
            "group {}x{}x{}{}{}{}{}",
            group[0],
            group[1],
            group[2],
            if kernel.dynamic_shared().is_some() {
                format!(" shared {dynamic_len}")
            } else {
                String::new()
            },
            if view_offsets { " offsets" } else { "" },
            if checked { " checked" } else { "" },
            match form {
                Form::Plain => "",
                Form::Strided => " strided",
                Form::Vector(_) => " vector",
            }
        );
        dotcompute_hal::dump::dump_source(program, &variant, "wgsl", "//", &module.source)?;
        // naga validates first so that a codegen bug is reported with the WGSL line.
        let validated = naga_out::validate_wgsl(&module.source).map_err(compile_err)?;
        self.compile(
            key,
            &kernel.name,
            module,
            "main",
            ShaderCode::Generated(&validated),
        )
    }

    /// Creates (and caches under `key`) the pipeline of a module whose interface
    /// `module` describes. A generated kernel goes to a Vulkan driver as strict SPIR-V
    /// where the device allows ([`WgpuBackend::strict_spirv`]); hand-written WGSL keeps
    /// wgpu's own translation; hand-written SPIR-V goes as it is.
    pub(crate) fn compile(
        &self,
        key: PipelineKey,
        name: &str,
        module: wgsl::WgslModule,
        entry: &str,
        code: ShaderCode<'_>,
    ) -> Result<Arc<Pipeline>> {
        let compile_err = |log: String| Error::Compile {
            kernel: name.to_string(),
            backend: BACKEND.into(),
            log,
        };
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let shader = self.shader_module(name, &module, entry, code)?;
        let layout = self.bind_group_layout(name, &module);
        let pipeline_layout = self
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(name),
                bind_group_layouts: &[Some(&layout)],
                ..Default::default()
            });
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(name),
                layout: Some(&pipeline_layout),
                module: &shader,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: self.cache(),
            });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(compile_err(format!(
                "{e}\n--- generated WGSL ---\n{}",
                module.source
            )));
        }
        self.save_pipeline_cache();
        let p = Arc::new(Pipeline {
            pipeline,
            layout,
            module,
        });
        self.pipelines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, p.clone());
        Ok(p)
    }

    /// The shader module of `code`: hand-written MSL or SPIR-V passed through where the
    /// adapter takes them (refused elsewhere), generated kernels as strict SPIR-V where
    /// the device allows, else WGSL through wgpu.
    fn shader_module(
        &self,
        name: &str,
        module: &wgsl::WgslModule,
        entry: &str,
        code: ShaderCode<'_>,
    ) -> Result<wgpu::ShaderModule> {
        let compile_err = |log: String| Error::Compile {
            kernel: name.to_string(),
            backend: BACKEND.into(),
            log,
        };
        let entry_point = |workgroup: [u32; 3]| {
            std::borrow::Cow::Owned(vec![wgpu::PassthroughShaderEntryPoint {
                name: entry.to_string().into(),
                workgroup_size: (workgroup[0], workgroup[1], workgroup[2]),
            }])
        };
        let passthrough =
            |words: Vec<u32>, workgroup: [u32; 3]| wgpu::ShaderModuleDescriptorPassthrough {
                label: Some(name),
                entry_points: entry_point(workgroup),
                spirv: Some(std::borrow::Cow::Owned(words)),
                ..Default::default()
            };
        let refuse = |language: RawLanguage| Error::Unsupported {
            op: "launch_raw",
            detail: format!(
                "kernel `{name}` is {}, and this adapter does not take {} as it is (it runs \
                 on {})",
                language.name(),
                language.name(),
                language.runs_on()
            ),
        };
        Ok(match (code, &self.strict_spirv) {
            (ShaderCode::Msl { workgroup }, _) => {
                if self.passthrough != Some(RawLanguage::Msl) {
                    return Err(refuse(RawLanguage::Msl));
                }
                // SAFETY: the signature was read and checked against the declared
                // parameters when the kernel was made; the pipeline layout below numbers
                // its buffers as its `[[buffer(i)]]` attributes do (wgpu's Metal backend
                // assigns buffer indices in bind-group order). What it does inside its
                // buffers is the caller's code, run as written (the documented contract
                // of RawKernel::msl).
                unsafe {
                    self.device.create_shader_module_passthrough(
                        wgpu::ShaderModuleDescriptorPassthrough {
                            label: Some(name),
                            entry_points: entry_point(workgroup),
                            msl: Some(module.source.as_str().into()),
                            ..Default::default()
                        },
                    )
                }
            }
            (ShaderCode::Spirv { words, workgroup }, _) => {
                if self.passthrough != Some(RawLanguage::Spirv) {
                    return Err(refuse(RawLanguage::Spirv));
                }
                // SAFETY: the module passed naga's SPIR-V reader and validator when the
                // kernel was made, and its interface was checked against the declared
                // parameters, which the pipeline layout below follows. What it does
                // inside its buffers is the caller's code, run as written (the documented
                // contract of RawKernel::spirv); Vulkan's robust buffer access, which wgpu
                // enables, bounds its accesses to the bound ranges.
                unsafe {
                    self.device
                        .create_shader_module_passthrough(passthrough(words.to_vec(), workgroup))
                }
            }
            (ShaderCode::Generated(naga), Some(options)) => {
                let words =
                    dotcompute_codegen::spirv::to_strict_spirv(naga, options).map_err(|e| {
                        compile_err(format!("{e}\n--- generated WGSL ---\n{}", module.source))
                    })?;
                let workgroup = naga
                    .module
                    .entry_points
                    .iter()
                    .find(|e| e.name == entry)
                    .map_or([1; 3], |e| e.workgroup_size);
                // SAFETY: naga wrote the module from WGSL it validated, with the bounds
                // checks wgpu itself uses on Vulkan (buffer accesses left to the robust
                // buffer access wgpu enables); the pass after it only adds decorations and
                // float-control modes. The pipeline layout is explicit.
                unsafe {
                    self.device
                        .create_shader_module_passthrough(passthrough(words, workgroup))
                }
            }
            _ => self
                .device
                .create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(name),
                    source: wgpu::ShaderSource::Wgsl(module.source.as_str().into()),
                }),
        })
    }

    /// The bind group layout of `module`: its storage buffers, the violation record of
    /// checked modules and the uniform block where it has one.
    fn bind_group_layout(&self, name: &str, module: &wgsl::WgslModule) -> wgpu::BindGroupLayout {
        let storage = |read_only| wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        };
        let mut entries: Vec<wgpu::BindGroupLayoutEntry> = module
            .buffers
            .iter()
            .map(|&(_, binding, read_only)| wgpu::BindGroupLayoutEntry {
                binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: storage(read_only),
                count: None,
            })
            .collect();
        if let Some(binding) = module.violation_binding {
            entries.push(wgpu::BindGroupLayoutEntry {
                binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: storage(false),
                count: None,
            });
        }
        if !module.uniforms.is_empty() {
            entries.push(wgpu::BindGroupLayoutEntry {
                binding: module.uniform_binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            });
        }
        self.device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(name),
                entries: &entries,
            })
    }

    /// The pipeline and dispatch of a hand-written kernel. Raw shaders see the dispatch
    /// as it is, so each dimension must fit the adapter's limit.
    pub(crate) fn raw_pipeline(
        &self,
        program: &dotcompute_hal::Program,
        raw: &dotcompute_hal::RawSource,
        groups: [u32; 3],
    ) -> Result<(Arc<Pipeline>, [u32; 3])> {
        let kernel = &*program.kernel;
        let max = self.limits.max_compute_workgroups_per_dimension;
        if let Some(d) = (0..3).find(|&d| groups[d] > max) {
            return Err(Error::GridTooLarge {
                kernel: kernel.name.clone(),
                detail: format!(
                    "dimension {d} needs {} groups; a raw WGSL kernel is dispatched as is and this adapter allows {max} per dimension",
                    groups[d]
                ),
            });
        }
        let key = (
            program.key,
            raw.workgroup_size.unwrap_or([0; 3]),
            u32::MAX,
            false,
            false,
            Form::Plain,
        );
        let cached = self
            .pipelines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        let pipeline = match cached {
            Some(p) => p,
            None => {
                let buffer_params = kernel.buffer_params();
                let module = wgsl::WgslModule {
                    source: raw.text.clone(),
                    buffers: buffer_params
                        .zip(&raw.buffer_bindings)
                        .map(|(i, &(b, ro))| (i, b, ro))
                        .collect(),
                    uniform_binding: raw.uniform_binding.unwrap_or(0),
                    uniforms: if raw.uniform_binding.is_some() {
                        wgsl::raw_uniform_slots(kernel)
                    } else {
                        Vec::new()
                    },
                    violation_binding: None,
                };
                let code = match (&raw.spirv, raw.language) {
                    (Some(words), _) => ShaderCode::Spirv {
                        words,
                        workgroup: raw.workgroup_size.unwrap_or([1; 3]),
                    },
                    (None, RawLanguage::Msl) => {
                        dotcompute_hal::dump::dump_source(program, "", "metal", "//", &raw.text)?;
                        ShaderCode::Msl {
                            workgroup: raw.workgroup_size.unwrap_or([1; 3]),
                        }
                    }
                    (None, _) => {
                        dotcompute_hal::dump::dump_source(program, "", "wgsl", "//", &raw.text)?;
                        ShaderCode::Wgsl
                    }
                };
                self.compile(key, &kernel.name, module, &raw.entry, code)?
            }
        };
        Ok((pipeline, groups))
    }
}
