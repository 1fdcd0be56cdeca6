//! Hand-written kernels for one backend.

use dotcompute_hal::{Error, Launch, Program, RawLanguage, RawSource, Result};
use dotcompute_ir::{Access, Kernel, Param, ScalarType, Type, IR_VERSION};
use std::sync::Arc;

/// One parameter of a hand-written kernel, in launch-argument order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RawParam {
    /// A storage buffer; the `i`-th buffer parameter is `@group(0) @binding(i)`. Its
    /// element is a scalar or a vector (`Vec4::<f32>::TYPE` for `array<vec4<f32>>`).
    Buffer {
        name: String,
        elem: Type,
        writable: bool,
    },
    /// A scalar; scalars are packed, 4 bytes each in parameter order, into the uniform
    /// block at the binding after the last buffer.
    Scalar { name: String, ty: ScalarType },
}

impl RawParam {
    pub fn buffer(name: &str, elem: impl Into<Type>) -> RawParam {
        RawParam::Buffer {
            name: name.into(),
            elem: elem.into(),
            writable: false,
        }
    }
    pub fn buffer_mut(name: &str, elem: impl Into<Type>) -> RawParam {
        RawParam::Buffer {
            name: name.into(),
            elem: elem.into(),
            writable: true,
        }
    }
    pub fn scalar(name: &str, ty: ScalarType) -> RawParam {
        RawParam::Scalar {
            name: name.into(),
            ty,
        }
    }
}

/// A kernel written directly in a backend's language, with explicit bindings. Launch it
/// with [`Device::launch_raw`](crate::Device::launch_raw); arguments are checked against
/// the declared parameters exactly as for `#[kernel]` functions.
///
/// WGSL conventions: entry point `main` (or the one given), group 0, buffer parameter
/// *i* at `@binding(i)`, and, if there are scalars, a uniform struct at the next binding
/// whose fields are the scalars in order (`f32`, `i32` or `u32`; a `bool` is a `u32`).
/// The shader's `@workgroup_size` is the launch's group size. Threads are dispatched as
/// whole groups covering the grid, and the shader does its own bounds checks (raw
/// shaders see the dispatch as it is: no folding past the per-dimension group limit).
///
/// ```
/// # #[cfg(feature = "wgpu")] {
/// use dotcompute::{Arg, Device, Launch, RawKernel, RawParam, ir::ScalarType, BackendKind};
/// let source = "
///   struct Params { a: f32 }
///   @group(0) @binding(0) var<storage, read> x: array<f32>;
///   @group(0) @binding(1) var<storage, read_write> y: array<f32>;
///   @group(0) @binding(2) var<uniform> p: Params;
///   @compute @workgroup_size(64)
///   fn main(@builtin(global_invocation_id) id: vec3<u32>) {
///       if (id.x < arrayLength(&y)) { y[id.x] = p.a * x[id.x] + y[id.x]; }
///   }";
/// let saxpy = RawKernel::wgsl("saxpy", source, &[
///     RawParam::buffer("x", ScalarType::F32),
///     RawParam::buffer_mut("y", ScalarType::F32),
///     RawParam::scalar("a", ScalarType::F32),
/// ]).unwrap();
/// if let Ok(d) = Device::with_backend(BackendKind::Wgpu) {
///     let x = d.upload(&[1.0f32, 2.0, 3.0]).unwrap();
///     let mut y = d.upload(&[10.0f32, 20.0, 30.0]).unwrap();
///     d.launch_raw(&saxpy, Launch::threads(3), &[Arg::buffer(&x), Arg::buffer_mut(&mut y), Arg::scalar(2.0f32)]).unwrap();
///     assert_eq!(y.to_vec().unwrap(), vec![12.0, 24.0, 36.0]);
/// }
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct RawKernel {
    program: Arc<Program>,
}

impl RawKernel {
    /// A WGSL kernel with entry point `main`. The source is parsed and validated by naga
    /// now, and its bindings are checked against `params`; every mismatch is an error
    /// naming the binding.
    #[cfg(feature = "wgpu")]
    pub fn wgsl(name: &str, source: &str, params: &[RawParam]) -> Result<RawKernel> {
        RawKernel::wgsl_entry(name, source, "main", params)
    }

    /// As [`RawKernel::wgsl`], with another entry point.
    #[cfg(feature = "wgpu")]
    pub fn wgsl_entry(
        name: &str,
        source: &str,
        entry: &str,
        params: &[RawParam],
    ) -> Result<RawKernel> {
        let refl = dotcompute_codegen::naga_out::reflect_compute(source, entry)
            .map_err(|log| compile_error(name, log))?;
        RawKernel::reflected(
            name,
            "wgpu",
            &refl,
            params,
            (RawLanguage::Wgsl, source.into(), None, entry),
        )
    }

    /// A SPIR-V compute kernel (`words`, entry point `entry`), run as it is through
    /// wgpu's SPIR-V passthrough on Vulkan adapters that have it
    /// ([`Capabilities::raw_languages`](crate::Capabilities) lists
    /// [`RawLanguage::Spirv`]); launching it elsewhere is an error naming where it runs.
    ///
    /// The module is read and validated by naga's SPIR-V front end now, and its interface
    /// must follow the WGSL conventions of [`RawKernel::wgsl`]: descriptor set 0, buffer
    /// parameter *i* at binding *i* (a runtime array, or a block whose last member is
    /// one), the scalars in one uniform block at the next binding, a fixed `LocalSize`.
    /// Every mismatch with `params` is an [`Error::Compile`] naming the binding. What runs
    /// is exactly these words: no bounds checks or float rules are added, so the module
    /// must not read or write past its buffers.
    ///
    /// ```
    /// # #[cfg(feature = "wgpu")] {
    /// use dotcompute::{Arg, Device, Launch, RawKernel, RawParam, ir::ScalarType, BackendKind};
    /// # let module = dotcompute_codegen::naga_out::validate_wgsl("
    /// #   @group(0) @binding(0) var<storage, read_write> y: array<u32>;
    /// #   @compute @workgroup_size(64)
    /// #   fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    /// #       if (id.x < arrayLength(&y)) { y[id.x] = y[id.x] * 2u; }
    /// #   }").unwrap();
    /// # let words = dotcompute_codegen::naga_out::to_spirv(&module).unwrap();
    /// // `words`: a SPIR-V module from any compiler (glslang, DXC, slangc, naga, ...).
    /// let double = RawKernel::spirv("double", &words, "main", &[
    ///     RawParam::buffer_mut("y", ScalarType::U32),
    /// ]).unwrap();
    /// if let Ok(d) = Device::with_backend(BackendKind::Wgpu) {
    ///     let mut y = d.upload(&[1u32, 2, 3]).unwrap();
    ///     let launched = d.launch_raw(&double, Launch::threads(3), &[Arg::buffer_mut(&mut y)]);
    ///     if d.info().caps.raw_languages.contains(&dotcompute::RawLanguage::Spirv) {
    ///         launched.unwrap();
    ///         assert_eq!(y.to_vec().unwrap(), vec![2, 4, 6]);
    ///     } else {
    ///         assert!(launched.is_err());
    ///     }
    /// }
    /// # }
    /// ```
    #[cfg(feature = "wgpu")]
    pub fn spirv(name: &str, words: &[u32], entry: &str, params: &[RawParam]) -> Result<RawKernel> {
        let refl = dotcompute_codegen::naga_out::reflect_spirv(words, entry)
            .map_err(|log| compile_error(name, log))?;
        let summary = format!(
            "; SPIR-V module of {} words, entry point `{entry}`",
            words.len()
        );
        RawKernel::reflected(
            name,
            "wgpu",
            &refl,
            params,
            (RawLanguage::Spirv, summary, Some(words.into()), entry),
        )
    }

    /// A Metal Shading Language kernel: `kernel void <entry>(...)` in `source`, run with
    /// `group` threads per threadgroup (MSL declares no group size; every launch of the
    /// kernel uses this one, a different `Launch` group is an error). It runs on the native
    /// Metal backend, and on wgpu devices whose adapter is Metal with passthrough
    /// ([`Capabilities::raw_languages`](crate::Capabilities) lists [`RawLanguage::Msl`]);
    /// launching it elsewhere is an error naming where it runs.
    ///
    /// The conventions are those of [`RawKernel::wgsl`], in MSL's words: buffer parameter
    /// *i* is `device T* name [[buffer(i)]]` (`const device T*` or `constant T*` when
    /// read-only); the scalars, if any, are one `constant S& name [[buffer(n)]]` after the
    /// last buffer, where `S` is a struct of the source whose fields are the scalars in
    /// order (`float`, `int`, `uint`; a `bool` is a `uint`); thread positions
    /// (`[[thread_position_in_grid]]` and the other five of `dotcompute_codegen::msl_raw`)
    /// come after the buffers. The signature is read now (MSL has no reflection without
    /// Apple's compiler) and every mismatch with `params` is an [`Error::Compile`] naming
    /// the argument; the body is compiled by Metal at the first launch. Threads are
    /// dispatched as whole groups covering the grid, and the kernel checks its own bounds
    /// (pass lengths as scalars). What runs is the source as written.
    ///
    /// ```
    /// use dotcompute::{RawKernel, RawParam, RawLanguage, ir::ScalarType};
    /// let saxpy = RawKernel::msl("saxpy", "
    ///     #include <metal_stdlib>
    ///     using namespace metal;
    ///     struct Params { float a; uint n; };
    ///     kernel void saxpy(const device float* x [[buffer(0)]],
    ///                       device float* y [[buffer(1)]],
    ///                       constant Params& p [[buffer(2)]],
    ///                       uint id [[thread_position_in_grid]]) {
    ///         if (id < p.n) { y[id] = p.a * x[id] + y[id]; }
    ///     }", "saxpy", [64, 1, 1], &[
    ///     RawParam::buffer("x", ScalarType::F32),
    ///     RawParam::buffer_mut("y", ScalarType::F32),
    ///     RawParam::scalar("a", ScalarType::F32),
    ///     RawParam::scalar("n", ScalarType::U32),
    /// ]).unwrap();
    /// assert_eq!(saxpy.language(), RawLanguage::Msl);
    /// // A scalar the block does not hold is refused now, not at the launch.
    /// let e = RawKernel::msl("saxpy", "struct Params { float a; };
    ///     kernel void saxpy(constant Params& p [[buffer(0)]]) {}", "saxpy", [64, 1, 1], &[
    ///     RawParam::scalar("a", ScalarType::F32),
    ///     RawParam::scalar("n", ScalarType::U32),
    /// ]).unwrap_err();
    /// assert!(e.to_string().contains("2 scalar parameter"), "{e}");
    /// ```
    pub fn msl(
        name: &str,
        source: &str,
        entry: &str,
        group: [u32; 3],
        params: &[RawParam],
    ) -> Result<RawKernel> {
        use dotcompute_codegen::msl_raw::{reflect, MslArg};
        let compile = |log: String| raw_compile_error(name, "metal", log);
        if group.contains(&0) || group.iter().map(|&g| g as u64).product::<u64>() > 1024 {
            return Err(Error::InvalidGroupSize {
                kernel: name.into(),
                detail: format!(
                    "{group:?}: a threadgroup has 1 to 1024 threads (Metal's largest), none \
                     of its dimensions 0"
                ),
            });
        }
        let args = reflect(source, entry).map_err(compile)?;
        let mut refl = dotcompute_codegen::Reflection {
            workgroup_size: group,
            storage: Vec::new(),
            uniform: None,
            workgroup_bytes: 0,
        };
        for arg in &args {
            match arg {
                MslArg::Buffer {
                    index,
                    elem,
                    read_only,
                    ..
                } => refl.storage.push((*index, *read_only, *elem)),
                MslArg::Block { index, fields, .. } => {
                    let scalars: Vec<ScalarType> = params
                        .iter()
                        .filter_map(|p| match p {
                            RawParam::Scalar { ty, .. } => Some(*ty),
                            RawParam::Buffer { .. } => None,
                        })
                        .collect();
                    // A bool travels as a uint; the block must hold each scalar in order.
                    let word = |t: ScalarType| {
                        if t == ScalarType::Bool {
                            ScalarType::U32
                        } else {
                            t
                        }
                    };
                    if let Some(i) = (0..scalars.len().min(fields.len()))
                        .find(|&i| word(scalars[i]) != fields[i])
                    {
                        return Err(compile(format!(
                            "scalar parameter {i} is {}, but field {i} of the block at \
                             [[buffer({index})]] is {}",
                            scalars[i], fields[i]
                        )));
                    }
                    if fields.len() != scalars.len() {
                        return Err(compile(format!(
                            "{} scalar parameter(s) were given; the block at \
                             [[buffer({index})]] has {} field(s)",
                            scalars.len(),
                            fields.len()
                        )));
                    }
                    refl.uniform = Some((*index, 4 * fields.len() as u32));
                }
                MslArg::Position { .. } => {}
            }
        }
        refl.storage.sort_by_key(|s| s.0);
        RawKernel::reflected(
            name,
            "metal",
            &refl,
            params,
            (RawLanguage::Msl, source.into(), None, entry),
        )
    }

    /// A kernel whose interface was reflected from its module: `params` checked against
    /// `refl`; `code` is the language, text, SPIR-V words and entry point of its source.
    fn reflected(
        name: &str,
        backend: &str,
        refl: &dotcompute_codegen::Reflection,
        params: &[RawParam],
        code: (RawLanguage, String, Option<std::sync::Arc<[u32]>>, &str),
    ) -> Result<RawKernel> {
        let compile = |log: String| raw_compile_error(name, backend, log);
        let (language_kind, text, spirv, entry) = code;
        let language = language_kind.name();
        let mut ir_params = Vec::new();
        let mut buffer_bindings = Vec::new();
        let mut scalars = 0u32;
        for p in params {
            match p {
                RawParam::Buffer {
                    name: pname,
                    elem,
                    writable,
                } => {
                    let binding = buffer_bindings.len() as u32;
                    let Some(&(_, read_only, ty)) = refl.storage.iter().find(|s| s.0 == binding)
                    else {
                        return Err(compile(format!(
                            "buffer parameter `{pname}` should be at binding {binding} of group 0, which the {language} does not declare"
                        )));
                    };
                    if ty != *elem {
                        return Err(compile(format!(
                            "buffer parameter `{pname}` is {elem}, but binding {binding} is an array of {ty}"
                        )));
                    }
                    if !read_only && !writable {
                        return Err(compile(format!(
                            "binding {binding} is writable in the {language}; declare `{pname}` with RawParam::buffer_mut"
                        )));
                    }
                    buffer_bindings.push((binding, read_only));
                    ir_params.push(Param::Buffer {
                        name: pname.clone(),
                        elem: *elem,
                        access: if *writable {
                            Access::ReadWrite
                        } else {
                            Access::Read
                        },
                    });
                }
                RawParam::Scalar { name: pname, ty } => {
                    if matches!(ty, ScalarType::I64 | ScalarType::U64 | ScalarType::F64) {
                        return Err(compile(format!(
                            "scalar `{pname}` is {ty}; raw {language} kernels take 32-bit scalars"
                        )));
                    }
                    scalars += 1;
                    ir_params.push(Param::Scalar {
                        name: pname.clone(),
                        ty: *ty,
                    });
                }
            }
        }
        if refl.storage.len() != buffer_bindings.len() {
            return Err(compile(format!(
                "the {language} declares {} storage buffers, {} buffer parameters were given",
                refl.storage.len(),
                buffer_bindings.len()
            )));
        }
        let uniform_binding = match (refl.uniform, scalars) {
            (None, 0) => None,
            (Some((b, size)), n) if b == buffer_bindings.len() as u32 && size >= 4 * n && n > 0 => Some(b),
            (u, n) => {
                return Err(compile(format!(
                    "{n} scalar parameter(s) need a uniform block of at least {} bytes at binding {}; the {language} has {u:?} (binding, size)",
                    4 * n,
                    buffer_bindings.len()
                )))
            }
        };
        let signature = Kernel {
            version: IR_VERSION,
            name: name.into(),
            params: ir_params,
            shared: Vec::new(),
            locals: Vec::new(),
            local_arrays: Vec::new(),
            body: Vec::new(),
        };
        dotcompute_ir::validate(&signature).map_err(|e| compile(e.to_string()))?;
        let source = RawSource {
            language: language_kind,
            text,
            spirv,
            entry: entry.into(),
            workgroup_size: Some(refl.workgroup_size),
            buffer_bindings,
            uniform_binding,
            workgroup_bytes: refl.workgroup_bytes,
        };
        Ok(RawKernel {
            program: Arc::new(Program::raw(Arc::new(signature), source)),
        })
    }

    /// A CUDA C++ kernel: `source` defines `extern "C" __global__ void <entry>(...)` whose
    /// parameters are `params` in order, a buffer as a pointer to its element type
    /// (`float*`, `const int*`, ...) and a scalar by value (`bool` is one byte). Nothing
    /// else is passed: the kernel checks its own bounds (pass lengths as scalars). The
    /// source is compiled by NVRTC at the first launch on a CUDA device (a failure is an
    /// [`Error::Compile`] quoting the source lines around each error) and cached like
    /// generated kernels. C++ cannot be reflected here, so the declared parameters are the
    /// contract: arguments are checked against them, and they must match the source.
    ///
    /// ```
    /// use dotcompute::{Arg, Device, Launch, RawKernel, RawParam, ir::ScalarType, BackendKind};
    /// let saxpy = RawKernel::cuda("saxpy", r#"
    ///     extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned n) {
    ///         unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    ///         if (i < n) y[i] = a * x[i] + y[i];
    ///     }"#, &[
    ///     RawParam::buffer("x", ScalarType::F32),
    ///     RawParam::buffer_mut("y", ScalarType::F32),
    ///     RawParam::scalar("a", ScalarType::F32),
    ///     RawParam::scalar("n", ScalarType::U32),
    /// ]).unwrap();
    /// if let Ok(d) = Device::with_backend(BackendKind::Cuda) {
    ///     let x = d.upload(&[1.0f32, 2.0, 3.0]).unwrap();
    ///     let mut y = d.upload(&[10.0f32, 20.0, 30.0]).unwrap();
    ///     d.launch_raw(&saxpy, Launch::threads(3), &[Arg::buffer(&x), Arg::buffer_mut(&mut y),
    ///         Arg::scalar(2.0f32), Arg::scalar(3u32)]).unwrap();
    ///     assert_eq!(y.to_vec().unwrap(), vec![12.0, 24.0, 36.0]);
    /// }
    /// ```
    pub fn cuda(entry: &str, source: &str, params: &[RawParam]) -> Result<RawKernel> {
        let compile = |log: String| Error::Compile {
            kernel: entry.into(),
            backend: "cuda".into(),
            log,
        };
        if !source.contains(entry) {
            return Err(compile(format!(
                "the source does not mention the entry point `{entry}`"
            )));
        }
        let ir_params = params
            .iter()
            .map(|p| match p {
                RawParam::Buffer {
                    name,
                    elem,
                    writable,
                } => Param::Buffer {
                    name: name.clone(),
                    elem: *elem,
                    access: if *writable {
                        Access::ReadWrite
                    } else {
                        Access::Read
                    },
                },
                RawParam::Scalar { name, ty } => Param::Scalar {
                    name: name.clone(),
                    ty: *ty,
                },
            })
            .collect();
        let signature = Kernel {
            version: IR_VERSION,
            name: entry.into(),
            params: ir_params,
            shared: Vec::new(),
            locals: Vec::new(),
            local_arrays: Vec::new(),
            body: Vec::new(),
        };
        dotcompute_ir::validate(&signature).map_err(|e| compile(e.to_string()))?;
        Ok(RawKernel {
            program: Arc::new(Program::raw(
                Arc::new(signature),
                RawSource {
                    language: RawLanguage::Cuda,
                    text: source.into(),
                    spirv: None,
                    entry: entry.into(),
                    workgroup_size: None,
                    workgroup_bytes: 0,
                    buffer_bindings: Vec::new(),
                    uniform_binding: None,
                },
            )),
        })
    }

    pub fn name(&self) -> &str {
        self.program.name()
    }
    /// The kernel's language.
    pub fn language(&self) -> RawLanguage {
        self.source().language
    }
    pub(crate) fn program(&self) -> &Program {
        &self.program
    }
    pub(crate) fn source(&self) -> &RawSource {
        self.program
            .raw_source()
            .expect("a raw kernel's program is raw")
    }

    /// The shared `Arc` of the kernel's program (graph nodes keep it).
    pub(crate) fn program_arc(&self) -> Arc<Program> {
        self.program.clone()
    }

    /// The launch as this kernel runs it: the shader's own group size (a different one
    /// is an error).
    pub(crate) fn group_for(&self, launch: Launch) -> Result<Launch> {
        Ok(match (self.source().workgroup_size, launch.group_size()) {
            (None, _) => launch,
            (Some([x, y, z]), None) => launch.group3d(x, y, z),
            (Some(declared), Some(g)) if g == declared => launch,
            (Some([x, y, z]), Some(g)) => {
                return Err(Error::InvalidGroupSize {
                    kernel: self.name().into(),
                    detail: format!(
                    "{g:?} was requested, but the shader declares @workgroup_size({x}, {y}, {z})"
                ),
                })
            }
        })
    }
}

/// A raw kernel's compile error on the wgpu backend.
#[cfg(feature = "wgpu")]
fn compile_error(kernel: &str, log: String) -> Error {
    raw_compile_error(kernel, "wgpu", log)
}

/// A raw kernel's compile error on `backend`.
fn raw_compile_error(kernel: &str, backend: &str, log: String) -> Error {
    Error::Compile {
        kernel: kernel.into(),
        backend: backend.into(),
        log,
    }
}
