//! The interface of a compiled kernel, in one vocabulary for every generator.
//!
//! Each code generator lays out the values a launch passes beside the kernel's own
//! arguments in its own place: CUDA as extra entry-point parameters, WGSL as the words of
//! a uniform block, MSL as the words of `dc_info`. What goes there is the same small set
//! of things (an argument, a buffer's length, a grid or group size, ...), so every
//! generator describes its layout as an ordered list of [`Slot`]s, printed from the same
//! walk as the declarations it describes, and one planner (`dotcompute_hal::plan`) fills
//! any list from a launch. A backend never decides what a slot holds, and the generator
//! and the backend agree on every position by construction.
//!
//! The same goes for the *forms* a kernel offers ([`Forms`]): the plain form (one thread
//! per logical thread), the grid-stride form and the vector form. Whether a launch takes
//! one is the planner's choice, from the forms offered, the launch and the device's
//! policy.

/// What a launch puts in one slot of a kernel's interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Slot {
    /// IR parameter `i`: a buffer's device address (plus the view's offset) or a scalar's
    /// value.
    Arg(u32),
    /// The length, in elements, of buffer parameter `i`.
    BufferLen(u32),
    /// The logical grid in threads along dimension `d`.
    Grid(u8),
    /// Threads per group along dimension `d`.
    Group(u8),
    /// Groups along dimension `d` (`ceil(grid / group)`, before any folding).
    Groups(u8),
    /// The product of the three group counts.
    TotalGroups,
    /// The dynamic shared array's length in elements (0 when there is none).
    DynamicSharedLen,
    /// Buffer parameter `i`'s offset, in elements, past the aligned offset it is bound at
    /// (WGSL's view-offset variant).
    ElementOffset(u32),
    /// The device address of the launch's violation record (checked CUDA modules).
    ViolationRecord,
}

/// The forms a compiled kernel offers besides the plain one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Forms {
    /// A grid-stride form, which may run with fewer groups than the grid needs
    /// ([`crate::analysis::grid_stride_eligible`]).
    pub strided: bool,
    /// A vector form running this many consecutive logical threads per iteration on
    /// 16-byte loads and stores ([`crate::analysis::vector_plan`]); it needs every buffer
    /// argument to start on 16 bytes.
    pub vector: Option<u32>,
}

impl Forms {
    /// The plain form alone.
    pub const PLAIN: Forms = Forms {
        strided: false,
        vector: None,
    };
}
