//! What a kernel needs of a device beyond the core language (32-bit integers and floats,
//! barriers, shared memory, atomics): one vocabulary for both sides. A kernel's
//! requirements are computed once from its IR ([`Features::required_by`]); a device
//! reports what it offers (`dotcompute_hal::Capabilities::features`); the facade checks
//! the difference in one place and names everything missing in one error.

use crate::kernel::{walk_stmts, Kernel, Param, Stmt};
use crate::ScalarType;

/// A set of device features a kernel can need.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Features(u8);

impl Features {
    /// The empty set: the core language only.
    pub const NONE: Features = Features(0);
    /// Subgroup operations (`subgroup_add`, `subgroup_ballot`, ...).
    pub const SUBGROUPS: Features = Features(1);
    /// `f16` arithmetic.
    pub const F16: Features = Features(1 << 1);
    /// 64-bit floats.
    pub const F64: Features = Features(1 << 2);
    /// 64-bit integers (`u64`, `i64`).
    pub const I64: Features = Features(1 << 3);
    /// Tensor-core multiply-accumulate (`mma_m16n8k8_tf32`, `mma_m16n8k16_f16`).
    pub const TENSOR_CORES: Features = Features(1 << 4);

    /// Every feature with what it is called in errors and where a device shows it.
    pub const ALL: [(Features, &'static str, &'static str); 5] = [
        (
            Features::SUBGROUPS,
            "subgroup operations",
            "capability `subgroup_size`; on wgpu the adapter feature SUBGROUP",
        ),
        (
            Features::F16,
            "f16 arithmetic",
            "capability `f16`; on wgpu the adapter feature SHADER_F16",
        ),
        (
            Features::F64,
            "f64 arithmetic",
            "capability `f64`; WGSL has no f64, Metal neither",
        ),
        (
            Features::I64,
            "64-bit integers",
            "capability `i64`; WGSL has no 64-bit integers",
        ),
        (
            Features::TENSOR_CORES,
            "tensor cores",
            "capability `tensor_cores`: CUDA devices of compute capability 8.0 or later",
        ),
    ];

    /// The union of `self` and `other`.
    pub const fn with(self, other: Features) -> Features {
        Features(self.0 | other.0)
    }
    /// `other` when `on`, else nothing: `Features::F16.when(caps.f16)`.
    pub const fn when(self, on: bool) -> Features {
        if on {
            self
        } else {
            Features::NONE
        }
    }
    /// Whether every feature of `other` is in `self`.
    pub const fn contains(self, other: Features) -> bool {
        self.0 & other.0 == other.0
    }
    /// The features of `self` that `offered` lacks.
    pub const fn missing_from(self, offered: Features) -> Features {
        Features(self.0 & !offered.0)
    }
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// The features in the set, in [`Features::ALL`]'s order, with their names and where
    /// a device shows them.
    pub fn entries(self) -> impl Iterator<Item = (Features, &'static str, &'static str)> {
        Features::ALL
            .into_iter()
            .filter(move |(f, _, _)| self.contains(*f))
    }

    /// What `kernel` needs: its subgroup and tensor-core operations, and the types that
    /// appear anywhere in it (parameters, shared, local and private arrays, locals,
    /// expressions).
    pub fn required_by(kernel: &Kernel) -> Features {
        let mut types = 0u8;
        let mut note = |t: ScalarType| {
            types |= match t {
                ScalarType::F16 => Features::F16.0,
                ScalarType::F64 => Features::F64.0,
                ScalarType::I64 | ScalarType::U64 => Features::I64.0,
                _ => 0,
            }
        };
        for p in &kernel.params {
            match p {
                Param::Buffer { elem, .. } => note(elem.scalar),
                Param::Scalar { ty, .. } => note(*ty),
            }
        }
        kernel.shared.iter().for_each(|s| note(s.elem));
        kernel.locals.iter().for_each(|l| note(l.ty.scalar));
        kernel.local_arrays.iter().for_each(|a| note(a.elem));
        walk_stmts(&kernel.body, &mut |s: &Stmt| {
            for e in s.exprs() {
                e.walk(&mut |e| note(e.ty.scalar));
            }
        });
        Features(types)
            .with(Features::SUBGROUPS.when(kernel.uses_subgroups()))
            .with(Features::TENSOR_CORES.when(kernel.uses_tensor_cores()))
    }
}

impl std::ops::BitOr for Features {
    type Output = Features;
    fn bitor(self, other: Features) -> Features {
        self.with(other)
    }
}

impl std::fmt::Display for Features {
    /// The features' names, comma-separated (`none` for the empty set).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        let names: Vec<&str> = self.entries().map(|(_, name, _)| name).collect();
        f.write_str(&names.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_features_are_the_difference_and_display_in_order() {
        let needs = Features::TENSOR_CORES | Features::F16 | Features::SUBGROUPS;
        let offered = Features::SUBGROUPS | Features::F64;
        let missing = needs.missing_from(offered);
        assert_eq!(missing, Features::F16 | Features::TENSOR_CORES);
        assert_eq!(missing.to_string(), "f16 arithmetic, tensor cores");
        assert!(needs.contains(missing) && !offered.contains(missing));
        assert!(needs.missing_from(needs).is_empty());
        assert_eq!(Features::NONE.to_string(), "none");
        // Every feature is one bit, named once.
        for (i, (f, _, _)) in Features::ALL.iter().enumerate() {
            assert_eq!(f.0.count_ones(), 1);
            assert!(Features::ALL[i + 1..].iter().all(|(g, _, _)| g != f));
        }
    }
}
