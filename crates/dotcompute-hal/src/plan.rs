//! The launch planner: one pure function per decision, from a compiled kernel's interface
//! ([`dotcompute_ir::interface`]), the launch and the device's policy, to data a backend
//! only carries out.
//!
//! * [`plan_form`]: which form runs (plain, grid-stride or vector) and how many groups
//!   it dispatches;
//! * [`fill_slots`]: the value of every slot of the interface (CUDA's entry-point
//!   parameters, WGSL's uniform words, MSL's `dc_info` words), in the generator's order;
//! * [`pack_words`]: slot values as the 32-bit words of a uniform block.
//!
//! Nothing here touches a device, so every rule is tested as data (the tests below), and
//! a backend's launch code is the driver calls alone. Model: `dotcompute-metal`'s
//! `plan.rs`, which plans a whole Metal encoding the same way.

use crate::backend::BoundArg;
use crate::error::{Error, Result};
use crate::launch::ResolvedLaunch;
use dotcompute_ir::interface::{Forms, Slot};
use dotcompute_ir::Literal;

/// What the planner needs of one launch argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ArgView {
    Buffer {
        /// The device address of the view's first element (the byte offset where the
        /// backend has no addresses).
        address: u64,
        /// Byte offset of the view in its buffer.
        offset: u64,
        /// Length in elements.
        len: u64,
        /// Bytes per element.
        elem_bytes: u64,
    },
    Scalar(Literal),
}

impl ArgView {
    /// The view of a bound argument; `base` gives a buffer's device address (0 where the
    /// backend binds buffers by handle).
    pub fn of<B>(arg: &BoundArg<'_, B>, base: impl Fn(&B) -> u64) -> ArgView {
        match arg {
            BoundArg::Buffer {
                buffer,
                offset,
                len,
                elem,
                ..
            } => ArgView::Buffer {
                address: base(buffer) + *offset as u64,
                offset: *offset as u64,
                len: *len as u64,
                elem_bytes: elem.size_bytes() as u64,
            },
            BoundArg::Scalar(l) => ArgView::Scalar(*l),
        }
    }
}

/// The form a launch runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Form {
    /// One thread per logical thread, the groups the launch asked for.
    Plain,
    /// The grid-stride form: fewer groups, each thread running logical threads x, x +
    /// stride, ...
    Strided,
    /// The vector form: this many consecutive logical threads per iteration, on 16-byte
    /// loads and stores, in a grid-stride loop.
    Vector(u32),
}

/// A device's rules for choosing a form (built per launch from its settings: each field
/// is cheap).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FormPolicy {
    /// The grid-stride form may be taken.
    pub strided: bool,
    /// The vector form may be taken.
    pub vectors: bool,
    /// At most this many groups in a grid-stride or vector launch (CUDA: one resident
    /// wave; wgpu: a fixed dispatch).
    pub max_groups: u32,
    /// The grid-stride form only when the plain launch needs more than `max_groups`
    /// (CUDA, where a short launch gains nothing from it); otherwise whenever offered.
    pub strided_only_beyond: bool,
    /// The grid-stride and vector forms only for 1-D grids of 1-D groups (WGSL's forms
    /// fold x alone).
    pub one_dimensional: bool,
    /// The vector form also needs every buffer to hold whole vectors (WGSL binds
    /// `array<vec4<T>>`; CUDA's vector form finishes a tail itself).
    pub whole_vectors: bool,
}

/// A form and the groups its launch dispatches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FormPlan {
    pub form: Form,
    pub groups: [u32; 3],
}

/// Chooses the form of a launch where the choice cannot be observed: checked launches,
/// and kernels that offer no other, run plain. The vector form needs every buffer view to
/// start on 16 bytes.
pub fn plan_form<A>(
    forms: Forms,
    args: &[A],
    view: impl Fn(&A) -> ArgView,
    g: &ResolvedLaunch,
    policy: &FormPolicy,
) -> FormPlan {
    let plain = FormPlan {
        form: Form::Plain,
        groups: g.groups,
    };
    let shape_allows = !policy.one_dimensional
        || (g.grid[1] == 1 && g.grid[2] == 1 && g.group[1] == 1 && g.group[2] == 1);
    if g.checked || !shape_allows {
        return plain;
    }
    let cap = policy.max_groups.max(1) as u64;
    let group_x = g.group[0].max(1) as u64;
    if let Some(width) = forms.vector.filter(|_| policy.vectors) {
        let aligned = args.iter().all(|a| match view(a) {
            ArgView::Buffer { address, len, .. } => {
                address % 16 == 0 && (!policy.whole_vectors || len % width as u64 == 0)
            }
            ArgView::Scalar(_) => true,
        });
        if aligned {
            let groups = (g.grid[0] as u64).div_ceil(width as u64 * group_x);
            return FormPlan {
                form: Form::Vector(width),
                groups: [groups.clamp(1, cap) as u32, g.groups[1], g.groups[2]],
            };
        }
    }
    let beyond = g.groups[0] as u64 > cap;
    if forms.strided && policy.strided && (beyond || !policy.strided_only_beyond) {
        return FormPlan {
            form: Form::Strided,
            groups: [
                (g.groups[0] as u64).clamp(1, cap) as u32,
                g.groups[1],
                g.groups[2],
            ],
        };
    }
    plain
}

/// What a launch adds to its arguments' slots.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotExtras {
    /// The device address of the launch's violation record ([`Slot::ViolationRecord`]).
    pub violation_record: u64,
    /// The alignment buffers are bound at, for [`Slot::ElementOffset`]: a view at
    /// offset `o` is bound at `o - o % alignment` (1 where views are bound where they
    /// start).
    pub binding_alignment: u64,
}

/// The bits of a scalar in a 64-bit slot, little-endian from its start (a 32-bit slot
/// takes the low word): `bool` as 0 or 1, an `f16` as the `f32` every generator declares
/// its parameters with.
pub fn scalar_bits(l: Literal) -> u64 {
    match l {
        Literal::Bool(b) => b as u64,
        Literal::I32(v) => v as u32 as u64,
        Literal::U32(v) => v as u64,
        Literal::I64(v) => v as u64,
        Literal::U64(v) => v,
        Literal::F32(bits) => bits as u64,
        Literal::F64(bits) => bits,
        Literal::F16(bits) => half::f16::from_bits(bits).to_f32().to_bits() as u64,
    }
}

/// The value of `slot` for a launch of `g` with `args`.
pub fn slot_value<A>(
    slot: Slot,
    args: &[A],
    view: impl Fn(&A) -> ArgView,
    g: &ResolvedLaunch,
    extras: &SlotExtras,
) -> Result<u64> {
    let buffer = |i: u32| match args.get(i as usize).map(&view) {
        Some(ArgView::Buffer {
            offset,
            len,
            elem_bytes,
            ..
        }) => Ok((offset, len, elem_bytes)),
        _ => Err(Error::internal(
            "planner",
            format!("slot {slot:?} names argument {i}, which is not a buffer"),
        )),
    };
    Ok(match slot {
        Slot::Arg(i) => match args.get(i as usize).map(&view) {
            Some(ArgView::Buffer { address, .. }) => address,
            Some(ArgView::Scalar(l)) => scalar_bits(l),
            None => {
                return Err(Error::internal(
                    "planner",
                    format!("slot {slot:?}: the launch has {} arguments", args.len()),
                ))
            }
        },
        // Kernels take lengths as u32; the facade keeps generated kernels' views below
        // 2^32 elements, and a longer one saturates rather than wraps.
        Slot::BufferLen(i) => buffer(i)?.1.min(u32::MAX as u64),
        Slot::Grid(d) => g.grid[d as usize % 3] as u64,
        Slot::Group(d) => g.group[d as usize % 3] as u64,
        Slot::Groups(d) => g.groups[d as usize % 3] as u64,
        Slot::TotalGroups => g.groups.iter().fold(1u32, |p, &n| p.wrapping_mul(n)) as u64,
        Slot::DynamicSharedLen => g.dynamic_shared_len as u64,
        Slot::ElementOffset(i) => {
            let (offset, _, elem_bytes) = buffer(i)?;
            (offset % extras.binding_alignment.max(1)) / elem_bytes.max(1)
        }
        Slot::ViolationRecord => extras.violation_record,
    })
}

/// Fills `out[..slots.len()]` with each slot's value ([`slot_value`]).
pub fn fill_slots<A>(
    slots: &[Slot],
    args: &[A],
    view: impl Fn(&A) -> ArgView + Copy,
    g: &ResolvedLaunch,
    extras: &SlotExtras,
    out: &mut [u64],
) -> Result<()> {
    if out.len() < slots.len() {
        return Err(Error::internal(
            "planner",
            format!("{} slots for {} places", slots.len(), out.len()),
        ));
    }
    for (value, &slot) in out.iter_mut().zip(slots) {
        *value = slot_value(slot, args, view, g, extras)?;
    }
    Ok(())
}

/// Slot values as a uniform block: the low 32 bits of each, little-endian, padded with
/// zero words to a multiple of 16 bytes.
pub fn pack_words(values: &[u64]) -> Vec<u8> {
    let words = values.len().next_multiple_of(4);
    let mut bytes = Vec::with_capacity(words * 4);
    for &v in values {
        bytes.extend_from_slice(&(v as u32).to_le_bytes());
    }
    bytes.resize(words * 4, 0);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(grid: [u32; 3], group: [u32; 3], checked: bool) -> ResolvedLaunch {
        ResolvedLaunch {
            grid,
            group,
            groups: [0, 1, 2].map(|d| grid[d].div_ceil(group[d])),
            dynamic_shared_len: 7,
            shared_bytes: 0,
            checked,
            time_limit: None,
            default_group: false,
        }
    }

    fn buffer(offset: u64, len: u64) -> ArgView {
        ArgView::Buffer {
            address: 0x1000 + offset,
            offset,
            len,
            elem_bytes: 4,
        }
    }

    const CUDA_LIKE: FormPolicy = FormPolicy {
        strided: true,
        vectors: true,
        max_groups: 528,
        strided_only_beyond: true,
        one_dimensional: false,
        whole_vectors: false,
    };
    const WGPU_LIKE: FormPolicy = FormPolicy {
        strided: true,
        vectors: true,
        max_groups: 8192,
        strided_only_beyond: false,
        one_dimensional: true,
        whole_vectors: true,
    };
    const ALL: Forms = Forms {
        strided: true,
        vector: Some(4),
    };
    const STRIDED: Forms = Forms {
        strided: true,
        vector: None,
    };

    fn form(forms: Forms, args: &[ArgView], g: &ResolvedLaunch, p: &FormPolicy) -> FormPlan {
        plan_form(forms, args, |a| *a, g, p)
    }

    #[test]
    fn vector_form_needs_16_byte_views_and_whole_vectors_where_the_policy_says() {
        let g = launch([1_000_000, 1, 1], [256, 1, 1], false);
        let aligned = [buffer(0, 1_000_000), ArgView::Scalar(Literal::U32(3))];
        // 1,000,000 / (4 × 256) = 977 groups, capped at the policy's 528 on CUDA.
        assert_eq!(
            form(ALL, &aligned, &g, &CUDA_LIKE),
            FormPlan {
                form: Form::Vector(4),
                groups: [528, 1, 1]
            }
        );
        assert_eq!(
            form(ALL, &aligned, &g, &WGPU_LIKE),
            FormPlan {
                form: Form::Vector(4),
                groups: [977, 1, 1]
            }
        );
        // A tail that is not a whole vector: CUDA's vector form takes it, WGSL's cannot.
        let ragged = [buffer(0, 999_999)];
        assert_eq!(form(ALL, &ragged, &g, &CUDA_LIKE).form, Form::Vector(4));
        assert_eq!(form(ALL, &ragged, &g, &WGPU_LIKE).form, Form::Strided);
        // A view at 4 bytes: neither vector form.
        let shifted = [buffer(4, 1000)];
        assert_eq!(form(ALL, &shifted, &g, &CUDA_LIKE).form, Form::Strided);
        assert_eq!(form(ALL, &shifted, &g, &WGPU_LIKE).form, Form::Strided);
    }

    #[test]
    fn grid_stride_form_where_offered_allowed_and_unobservable() {
        let small = launch([1000, 1, 1], [256, 1, 1], false);
        let big = launch([10_000_000, 1, 1], [256, 1, 1], false);
        let args = [buffer(0, 1000)];
        // CUDA takes it only beyond one wave; wgpu whenever offered.
        assert_eq!(form(STRIDED, &args, &small, &CUDA_LIKE).form, Form::Plain);
        assert_eq!(
            form(STRIDED, &args, &big, &CUDA_LIKE),
            FormPlan {
                form: Form::Strided,
                groups: [528, 1, 1]
            }
        );
        assert_eq!(
            form(STRIDED, &args, &small, &WGPU_LIKE),
            FormPlan {
                form: Form::Strided,
                groups: [4, 1, 1]
            }
        );
        assert_eq!(form(STRIDED, &args, &big, &WGPU_LIKE).groups, [8192, 1, 1]);
        // Not offered, turned off, checked, or a 2-D launch under a 1-D policy: plain,
        // with the groups the launch asked for.
        assert_eq!(
            form(Forms::PLAIN, &args, &big, &WGPU_LIKE).form,
            Form::Plain
        );
        let off = FormPolicy {
            strided: false,
            vectors: false,
            ..WGPU_LIKE
        };
        assert_eq!(form(ALL, &args, &big, &off).form, Form::Plain);
        let checked = launch([10_000_000, 1, 1], [256, 1, 1], true);
        assert_eq!(
            form(ALL, &args, &checked, &CUDA_LIKE),
            FormPlan {
                form: Form::Plain,
                groups: checked.groups
            }
        );
        let two_d = launch([4096, 4096, 1], [256, 1, 1], false);
        assert_eq!(form(ALL, &args, &two_d, &WGPU_LIKE).form, Form::Plain);
        let wide_2d = launch([10_000_000, 2, 1], [256, 1, 1], false);
        assert_eq!(form(STRIDED, &args, &wide_2d, &WGPU_LIKE).form, Form::Plain);
        assert_eq!(
            form(STRIDED, &args, &wide_2d, &CUDA_LIKE).groups,
            [528, 2, 1]
        );
    }

    #[test]
    fn every_slot_kind_has_its_value() {
        let g = launch([100, 3, 1], [32, 2, 1], false);
        let args = [
            ArgView::Buffer {
                address: 0xdead_0000 + 40,
                offset: 40,
                len: 17,
                elem_bytes: 4,
            },
            ArgView::Scalar(Literal::I32(-2)),
            ArgView::Scalar(Literal::F16(half::f16::from_f32(1.5).to_bits())),
            ArgView::Scalar(Literal::Bool(true)),
            ArgView::Buffer {
                address: 0,
                offset: 0,
                len: 1 << 40,
                elem_bytes: 2,
            },
        ];
        let extras = SlotExtras {
            violation_record: 0xabc,
            binding_alignment: 32,
        };
        let slots = [
            Slot::Arg(0),
            Slot::Arg(1),
            Slot::Arg(2),
            Slot::Arg(3),
            Slot::BufferLen(0),
            Slot::BufferLen(4),
            Slot::Grid(0),
            Slot::Grid(1),
            Slot::Group(1),
            Slot::Groups(0),
            Slot::Groups(1),
            Slot::TotalGroups,
            Slot::DynamicSharedLen,
            Slot::ElementOffset(0),
            Slot::ViolationRecord,
        ];
        let mut out = [0u64; 15];
        fill_slots(&slots, &args, |a| *a, &g, &extras, &mut out).unwrap();
        assert_eq!(
            out,
            [
                0xdead_0000 + 40,
                0xffff_fffe,
                1.5f32.to_bits() as u64,
                1,
                17,
                u32::MAX as u64,
                100,
                3,
                2,
                4,
                2,
                8,
                7,
                2, // 40 bytes past the 32-byte boundary below: 8 bytes, 2 elements
                0xabc
            ]
        );
        // A length slot naming a scalar, an argument past the end, too few places: errors.
        assert!(slot_value(Slot::BufferLen(1), &args, |a| *a, &g, &extras).is_err());
        assert!(slot_value(Slot::Arg(9), &args, |a| *a, &g, &extras).is_err());
        assert!(fill_slots(&slots, &args, |a| *a, &g, &extras, &mut [0; 3]).is_err());
    }

    #[test]
    fn uniform_words_are_padded_to_16_bytes() {
        let bytes = pack_words(&[1, 0x1_0000_0002, 3, 4, 5]);
        assert_eq!(bytes.len(), 32);
        assert_eq!(&bytes[..8], &[1, 0, 0, 0, 2, 0, 0, 0]);
        assert!(bytes[20..].iter().all(|&b| b == 0));
        assert_eq!(pack_words(&[]).len(), 0);
        assert_eq!(pack_words(&[9]).len(), 16);
    }
}
