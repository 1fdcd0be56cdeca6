//! The argument checks shared by direct launches (`Device::launch_kernel`) and graph
//! launch nodes (`Graph::launch`): one place decides what matches a kernel's signature.

use crate::Device;
use dotcompute_hal::{Error, Program, Result};
use dotcompute_ir::{Access, Features, Kernel, Literal, Param, Type};

/// What a caller passes for one parameter, as far as the signature cares.
pub(crate) enum ArgView {
    Buffer {
        elem: Type,
        writable: bool,
        len: usize,
    },
    Scalar(Literal),
}

/// `found` arguments for `kernel`'s parameters.
pub(crate) fn check_count(kernel: &Kernel, found: usize) -> Result<()> {
    if found != kernel.params.len() {
        return Err(Error::ArgumentCount {
            kernel: kernel.name.clone(),
            expected: kernel.params.len(),
            found,
        });
    }
    Ok(())
}

/// Checks one argument against its parameter: kind, element type, access (a `&mut [T]`
/// parameter needs a writable buffer), empty buffers, buffers too long for `u32` indices.
/// Returns whether a buffer is bound writable.
pub(crate) fn check_arg(kernel: &Kernel, param: &Param, arg: ArgView) -> Result<bool> {
    let mismatch = |expected: String, found: String| Error::ArgumentType {
        kernel: kernel.name.clone(),
        arg: param.name().to_string(),
        expected,
        found,
    };
    match (param, arg) {
        (
            Param::Buffer { elem, access, .. },
            ArgView::Buffer {
                elem: arg_elem,
                writable,
                len,
            },
        ) => {
            let want_write = *access == Access::ReadWrite;
            if *elem != arg_elem || (want_write && !writable) {
                return Err(mismatch(
                    format!("{}[{elem}]", if want_write { "&mut " } else { "&" }),
                    format!(
                        "a {} buffer of {arg_elem}",
                        if writable { "writable" } else { "read-only" }
                    ),
                ));
            }
            if len == 0 {
                return Err(Error::EmptyBuffer {
                    kernel: kernel.name.clone(),
                    arg: param.name().to_string(),
                });
            }
            if len > u32::MAX as usize {
                return Err(mismatch(
                    format!("at most {} elements (indices are u32)", u32::MAX),
                    format!("{len} elements"),
                ));
            }
            Ok(writable && want_write)
        }
        (Param::Scalar { ty, .. }, ArgView::Scalar(l)) => {
            if l.ty() != *ty {
                return Err(mismatch(ty.name().into(), format!("a {} scalar", l.ty())));
            }
            Ok(false)
        }
        (Param::Buffer { elem, .. }, ArgView::Scalar(l)) => Err(mismatch(
            format!("a buffer of {elem}"),
            format!("a {} scalar", l.ty()),
        )),
        (Param::Scalar { ty, .. }, ArgView::Buffer { elem, .. }) => Err(mismatch(
            format!("a {ty} scalar"),
            format!("a buffer of {elem}"),
        )),
    }
}

/// Launch rules of a program beyond the device's limits: a kernel using tensor-core
/// operations runs groups of whole subgroups (`mma.sync` is collective over 32 lanes; a
/// partial warp would hang or fault).
pub(crate) fn check_geometry(
    program: &Program,
    geometry: &dotcompute_hal::ResolvedLaunch,
) -> Result<()> {
    if !program.features.contains(Features::TENSOR_CORES) {
        return Ok(());
    }
    let threads: u32 = geometry.group.iter().product();
    if threads % 32 != 0 {
        return Err(Error::InvalidGroupSize {
            kernel: program.name().to_string(),
            detail: format!(
                "{:?} is {threads} threads per group; a kernel using tensor-core \
                 operations needs whole subgroups (a multiple of 32)",
                geometry.group
            ),
        });
    }
    Ok(())
}

/// A hand-written program runs only on devices that take its language; a generated one
/// on devices that offer every feature it needs ([`Features`]: the kernel's, computed
/// once, against the device's). One error names all that is missing; its `op` is the
/// first missing feature's name.
pub(crate) fn check_program(program: &Program, device: &Device) -> Result<()> {
    let missing = program.features.missing_from(device.info().caps.features());
    if let Some((_, first, _)) = missing.entries().next() {
        let what: Vec<String> = missing
            .entries()
            .map(|(_, name, shown)| format!("{name} ({shown})"))
            .collect();
        return Err(Error::Unsupported {
            op: first,
            detail: format!(
                "kernel `{}` needs {}, which {} does not offer",
                program.name(),
                what.join(" and "),
                device.label()
            ),
        });
    }
    let Some(raw) = program.raw_source() else {
        return Ok(());
    };
    if device.info().caps.raw_languages.contains(&raw.language) {
        // The driver does not always refuse too much workgroup memory (a raw WGSL kernel
        // with 80 KB ran on a 32 KB device): check the declared amount here.
        let limit = device.info().limits.max_shared_bytes;
        if raw.workgroup_bytes > limit {
            return Err(Error::SharedMemoryTooLarge {
                kernel: program.name().to_string(),
                requested: raw.workgroup_bytes,
                limit,
            });
        }
        return Ok(());
    }
    Err(Error::Unsupported {
        op: "a hand-written kernel",
        detail: format!(
            "kernel `{}` is written in {} and runs only on {} devices; {} cannot run it",
            program.name(),
            raw.language.name(),
            raw.language.runs_on(),
            device.label()
        ),
    })
}
