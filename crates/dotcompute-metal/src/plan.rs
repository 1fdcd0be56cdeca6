//! The host side of a Metal launch as data: which buffer goes at which index and offset,
//! the bytes of each `setBytes`, the threadgroup-memory lengths and the dispatch. Plain
//! Rust, computed and unit-tested on every platform; the Objective-C layer only carries a
//! plan out (one encoder call per entry), and the Linux test run executes the same plan
//! against the generated MSL (`shim`).
//!
//! The plan is derived from the generated module's binding list ([`MslModule::bindings`]),
//! the same list the generator printed the `[[buffer(i)]]` / `[[threadgroup(i)]]`
//! attributes from, so the encoder and the kernel agree on every index by construction.

use dotcompute_codegen::msl::{MslBinding, MslModule};
use dotcompute_hal::plan::{fill_slots, ArgView, SlotExtras};
use dotcompute_hal::{BoundArg, Error, ResolvedLaunch, Result};
use dotcompute_ir::{Kernel, Literal, Param, ScalarType, SharedLen};

/// One launch argument as the plan sees it (the buffer itself stays with the caller).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PlanArg {
    /// A buffer view: byte offset into its buffer and length in elements.
    Buffer {
        offset: u64,
        len: u64,
    },
    Scalar(Literal),
}

/// The plan's view of a launch's arguments, and each argument's buffer (`None` for a
/// scalar), in parameter order: what an executor binds at `BufferBinding::arg`.
pub fn plan_args<'a, B>(args: &[BoundArg<'a, B>]) -> (Vec<Option<&'a B>>, Vec<PlanArg>) {
    args.iter()
        .map(|a| match a {
            BoundArg::Buffer {
                buffer,
                offset,
                len,
                ..
            } => (
                Some(*buffer),
                PlanArg::Buffer {
                    offset: *offset as u64,
                    len: *len as u64,
                },
            ),
            BoundArg::Scalar(l) => (None, PlanArg::Scalar(*l)),
        })
        .unzip()
}

/// `setBuffer:offset:atIndex:` for launch argument `arg`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferBinding {
    pub index: u32,
    pub arg: usize,
    pub offset: u64,
}

/// `setBytes:length:atIndex:`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BytesBinding {
    pub index: u32,
    pub bytes: Vec<u8>,
}

/// `setThreadgroupMemoryLength:atIndex:` (a multiple of 16 bytes, as Metal requires).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadgroupLength {
    pub index: u32,
    pub bytes: u32,
}

/// How the grid is dispatched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dispatch {
    /// `dispatchThreads:threadsPerThreadgroup:`: exactly `threads` threads; the last group
    /// of a dimension is partial. For kernels whose threads outside the grid do not run.
    Threads {
        threads: [u32; 3],
        per_group: [u32; 3],
    },
    /// `dispatchThreadgroups:threadsPerThreadgroup:`: whole groups, for kernels with
    /// barriers or subgroup operations, whose every group runs all its threads (the
    /// launch rule of `dotcompute_hal::Launch`).
    Threadgroups {
        groups: [u32; 3],
        per_group: [u32; 3],
    },
}

impl Dispatch {
    /// Threads per group.
    pub fn per_group(&self) -> [u32; 3] {
        match *self {
            Dispatch::Threads { per_group, .. } | Dispatch::Threadgroups { per_group, .. } => {
                per_group
            }
        }
    }
}

/// Everything one compute encoder does for one launch, in order: bind, size, dispatch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodingPlan {
    /// The kernel function of the pipeline.
    pub entry: String,
    pub buffers: Vec<BufferBinding>,
    pub bytes: Vec<BytesBinding>,
    pub threadgroup_memory: Vec<ThreadgroupLength>,
    pub dispatch: Dispatch,
    /// Checked launches: the buffer index of the violation record, which the executor
    /// binds zeroed (`dotcompute_hal::VIOLATION_WORDS` `u32`s) and reads after the
    /// launch (`dotcompute_hal::decode_violation`).
    pub violation_record: Option<u32>,
}

/// What the compiled pipeline and the device allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipelineLimits {
    /// The pipeline's `maxTotalThreadsPerThreadgroup` (it can be below the device's limit
    /// for kernels that use many registers).
    pub max_threads_per_group: u32,
    /// The device's `maxThreadgroupMemoryLength`.
    pub max_threadgroup_memory: u64,
}

/// The bytes `setBytes` sends for a scalar: the parameter's MSL type (`constant T&`) in
/// little-endian. An f16 scalar is a `float` in MSL (f16 values live in float registers).
pub fn scalar_bytes(value: Literal) -> Vec<u8> {
    match value {
        Literal::Bool(b) => vec![b as u8],
        Literal::I32(v) => v.to_le_bytes().to_vec(),
        Literal::U32(v) => v.to_le_bytes().to_vec(),
        Literal::I64(v) => v.to_le_bytes().to_vec(),
        Literal::U64(v) => v.to_le_bytes().to_vec(),
        Literal::F32(bits) => bits.to_le_bytes().to_vec(),
        Literal::F64(bits) => bits.to_le_bytes().to_vec(),
        Literal::F16(bits) => half::f16::from_bits(bits).to_f32().to_le_bytes().to_vec(),
    }
}

/// The scalar block of a hand-written kernel: each scalar argument in order, 4 bytes
/// (a `bool` as a `uint`; the facade refuses 64-bit scalars for hand-written kernels).
fn scalar_block(args: &[PlanArg]) -> Vec<u8> {
    args.iter()
        .filter_map(|a| match *a {
            PlanArg::Scalar(Literal::Bool(b)) => Some((b as u32).to_le_bytes().to_vec()),
            PlanArg::Scalar(value) => Some(scalar_bytes(value)),
            PlanArg::Buffer { .. } => None,
        })
        .flatten()
        .collect()
}

/// Plans one launch of `module` (generated from `kernel`) with `geometry` and `args` (one
/// per kernel parameter, already checked by the facade against the signature).
pub fn encode(
    module: &MslModule,
    kernel: &Kernel,
    geometry: &ResolvedLaunch,
    args: &[PlanArg],
    limits: PipelineLimits,
) -> Result<EncodingPlan> {
    let internal =
        |detail: String| Error::internal("metal", format!("kernel `{}`: {detail}", kernel.name));
    if args.len() != kernel.params.len() {
        return Err(internal(format!(
            "{} arguments for {} parameters",
            args.len(),
            kernel.params.len()
        )));
    }
    // A default group larger than this pipeline allows is halved along its largest
    // dimension until it fits (a group the user gave is an error instead).
    let mut geometry = *geometry;
    if geometry.default_group {
        while geometry.group_threads() > limits.max_threads_per_group.max(1) {
            let d = (0..3).max_by_key(|&d| geometry.group[d]).unwrap_or(0);
            geometry.group[d] = (geometry.group[d] / 2).max(1);
        }
        geometry.groups = [0, 1, 2].map(|d| geometry.grid[d].div_ceil(geometry.group[d]));
    }
    let geometry = &geometry;
    let threads = geometry.group_threads();
    if threads > limits.max_threads_per_group {
        return Err(Error::InvalidGroupSize {
            kernel: kernel.name.clone(),
            detail: format!(
                "{:?} is {threads} threads per group; this kernel's Metal pipeline allows \
                 {} (maxTotalThreadsPerThreadgroup)",
                geometry.group, limits.max_threads_per_group
            ),
        });
    }

    let mut plan = EncodingPlan {
        entry: module.entry.clone(),
        buffers: Vec::new(),
        bytes: Vec::new(),
        threadgroup_memory: Vec::new(),
        violation_record: None,
        // Hand-written kernels run whole groups of their declared size, as on wgpu.
        dispatch: if module.raw || kernel.runs_whole_groups() {
            Dispatch::Threadgroups {
                groups: geometry.groups,
                per_group: geometry.group,
            }
        } else {
            Dispatch::Threads {
                threads: geometry.grid,
                per_group: geometry.group,
            }
        },
    };
    let mut threadgroup_total = 0u64;
    for binding in &module.bindings {
        match *binding {
            MslBinding::Param { param, index } => {
                match (&kernel.params[param as usize], args[param as usize]) {
                    (Param::Buffer { .. }, PlanArg::Buffer { offset, .. }) => {
                        plan.buffers.push(BufferBinding {
                            index,
                            arg: param as usize,
                            offset,
                        })
                    }
                    (Param::Scalar { .. }, PlanArg::Scalar(value)) => {
                        plan.bytes.push(BytesBinding {
                            index,
                            bytes: scalar_bytes(value),
                        })
                    }
                    (p, a) => return Err(internal(format!("parameter `{}` got {a:?}", p.name()))),
                }
            }
            MslBinding::ViolationRecord { index } => plan.violation_record = Some(index),
            MslBinding::Scalars { index } => plan.bytes.push(BytesBinding {
                index,
                bytes: scalar_block(args),
            }),
            MslBinding::Info { index } => plan.bytes.push(BytesBinding {
                index,
                bytes: info_bytes(module, geometry, args)?,
            }),
            MslBinding::Threadgroup { shared, index } => {
                let s = &kernel.shared[shared as usize];
                let len = match s.len {
                    SharedLen::Static(n) => n as u64,
                    SharedLen::Dynamic => geometry.dynamic_shared_len as u64,
                };
                let elem = if s.elem == ScalarType::F16 {
                    2
                } else {
                    s.elem.size_bytes() as u64
                };
                // Metal wants a non-zero multiple of 16.
                let bytes = (len * elem).max(1).next_multiple_of(16);
                threadgroup_total += bytes;
                plan.threadgroup_memory.push(ThreadgroupLength {
                    index,
                    bytes: bytes as u32,
                });
            }
        }
    }
    if threadgroup_total > limits.max_threadgroup_memory {
        return Err(Error::SharedMemoryTooLarge {
            kernel: kernel.name.clone(),
            requested: threadgroup_total,
            limit: limits.max_threadgroup_memory,
        });
    }
    Ok(plan)
}

/// The `dc_info` words the module declares ([`MslModule::info`]), filled by the planner,
/// as `setBytes` sends them (4 bytes each, little-endian).
fn info_bytes(module: &MslModule, geometry: &ResolvedLaunch, args: &[PlanArg]) -> Result<Vec<u8>> {
    let mut values = vec![0u64; module.info.len()];
    let view = |a: &PlanArg| match *a {
        PlanArg::Buffer { offset, len } => ArgView::Buffer {
            address: offset,
            offset,
            len,
            elem_bytes: 1,
        },
        PlanArg::Scalar(l) => ArgView::Scalar(l),
    };
    fill_slots(
        &module.info,
        args,
        view,
        geometry,
        &SlotExtras::default(),
        &mut values,
    )?;
    Ok(values
        .iter()
        .flat_map(|&v| (v as u32).to_le_bytes())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use dotcompute_ir::{Access, Axis, BinaryOp, Builder, Builtin, V};

    /// `x[i] = x[i] * s` with a 64-element shared scratch array and a barrier.
    fn kernel(barrier: bool) -> Kernel {
        let mut b = Builder::new("scale");
        let x = b.buffer("x", ScalarType::F32, Access::ReadWrite);
        let s = b.scalar("s", ScalarType::F32);
        let tile = b.shared("tile", ScalarType::F32, V::Int(64)).unwrap();
        let i = b.builtin(Builtin::GlobalId, Axis::X);
        let v = b.load(x, i.clone()).unwrap();
        let v = b.binary(BinaryOp::Mul, v, s).unwrap();
        let l = b.builtin(Builtin::LocalId, Axis::X);
        b.store(tile, l, v.clone()).unwrap();
        if barrier {
            b.barrier();
        }
        b.store(x, i, v).unwrap();
        b.finish().unwrap()
    }

    fn geometry(grid: u32, group: u32) -> ResolvedLaunch {
        ResolvedLaunch {
            grid: [grid, 1, 1],
            group: [group, 1, 1],
            groups: [grid.div_ceil(group), 1, 1],
            dynamic_shared_len: 0,
            shared_bytes: 256,
            checked: false,
            default_group: false,
            time_limit: None,
        }
    }

    const LIMITS: PipelineLimits = PipelineLimits {
        max_threads_per_group: 1024,
        max_threadgroup_memory: 32 * 1024,
    };

    fn plan(k: &Kernel, g: &ResolvedLaunch, limits: PipelineLimits) -> Result<EncodingPlan> {
        let module = dotcompute_codegen::msl::generate(k).unwrap();
        let args = [
            PlanArg::Buffer {
                offset: 64,
                len: 1000,
            },
            PlanArg::Scalar(Literal::f32(2.5)),
        ];
        encode(&module, k, g, &args, limits)
    }

    #[test]
    fn every_argument_scalar_and_array_is_bound_where_the_kernel_reads_it() {
        let k = kernel(false);
        let p = plan(&k, &geometry(1000, 256), LIMITS).unwrap();
        assert_eq!(p.entry, "dc_scale");
        assert_eq!(
            p.buffers,
            [BufferBinding {
                index: 0,
                arg: 0,
                offset: 64
            }]
        );
        let info: Vec<u8> = [1000u32, 1, 1, 256, 1, 1, 0, 1000]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        assert_eq!(
            p.bytes,
            [
                BytesBinding {
                    index: 1,
                    bytes: 2.5f32.to_le_bytes().to_vec()
                },
                BytesBinding {
                    index: 2,
                    bytes: info
                },
            ]
        );
        // 64 f32 = 256 bytes, at threadgroup index 0.
        assert_eq!(
            p.threadgroup_memory,
            [ThreadgroupLength {
                index: 0,
                bytes: 256
            }]
        );
    }

    #[test]
    fn the_grid_is_threads_and_only_whole_group_kernels_dispatch_groups() {
        let g = geometry(1000, 256);
        assert_eq!(
            plan(&kernel(false), &g, LIMITS).unwrap().dispatch,
            Dispatch::Threads {
                threads: [1000, 1, 1],
                per_group: [256, 1, 1]
            }
        );
        assert_eq!(
            plan(&kernel(true), &g, LIMITS).unwrap().dispatch,
            Dispatch::Threadgroups {
                groups: [4, 1, 1],
                per_group: [256, 1, 1]
            }
        );
    }

    #[test]
    fn groups_beyond_the_pipeline_limit_and_too_much_threadgroup_memory_are_errors() {
        let k = kernel(false);
        let small = PipelineLimits {
            max_threads_per_group: 128,
            ..LIMITS
        };
        let e = plan(&k, &geometry(1000, 256), small).unwrap_err();
        assert!(matches!(e, Error::InvalidGroupSize { .. }), "{e}");
        assert!(
            e.to_string().contains("maxTotalThreadsPerThreadgroup"),
            "{e}"
        );
        let tiny = PipelineLimits {
            max_threadgroup_memory: 128,
            ..LIMITS
        };
        let e = plan(&k, &geometry(1000, 256), tiny).unwrap_err();
        assert!(
            matches!(e, Error::SharedMemoryTooLarge { requested: 256, .. }),
            "{e}"
        );
    }

    #[test]
    fn a_default_group_shrinks_to_the_pipeline_limit_and_a_given_one_does_not() {
        let small = PipelineLimits {
            max_threads_per_group: 96,
            ..LIMITS
        };
        let default = ResolvedLaunch {
            default_group: true,
            ..geometry(1000, 256)
        };
        let p = plan(&kernel(false), &default, small).unwrap();
        assert_eq!(
            p.dispatch,
            Dispatch::Threads {
                threads: [1000, 1, 1],
                per_group: [64, 1, 1]
            }
        );
        // The kernel reads the group size from dc_info: the shrunk one.
        let info = &p.bytes.iter().find(|b| b.index == 2).unwrap().bytes;
        assert_eq!(u32::from_le_bytes(info[12..16].try_into().unwrap()), 64);
        let barrier = plan(&kernel(true), &default, small).unwrap();
        assert_eq!(
            barrier.dispatch,
            Dispatch::Threadgroups {
                groups: [16, 1, 1],
                per_group: [64, 1, 1]
            }
        );
        assert!(plan(&kernel(false), &geometry(1000, 256), small).is_err());
    }

    #[test]
    fn scalars_are_sent_as_their_msl_type() {
        assert_eq!(scalar_bytes(Literal::Bool(true)), [1]);
        assert_eq!(scalar_bytes(Literal::I64(-2)), (-2i64).to_le_bytes());
        // f16 scalars are floats in MSL.
        let h = half::f16::from_f32(1.5).to_bits();
        assert_eq!(scalar_bytes(Literal::F16(h)), 1.5f32.to_le_bytes());
    }
}
