//! Launch geometry. `Launch` always means *total threads* per dimension plus an optional
//! group size; each backend converts the resolved form to its own grid terms.

use crate::device::Limits;
use crate::error::{Error, Result};
use dotcompute_ir::Kernel;

/// How many threads to run. One meaning on every backend:
///
/// * `grid` is the number of threads in each dimension (not groups).
/// * The group size, when not given, is 256 (1D), 16×16 (2D) or 8×8×4 (3D), clamped to the
///   device's limits.
/// * Groups cover the grid, so the last group in a dimension may stick out. In a kernel
///   without `barrier()` or subgroup operations the threads outside the grid do not run
///   at all. In a kernel with either, every thread of every group runs (barriers must be
///   reached by the whole group, subgroup operations by the whole subgroup), so such
///   kernels must bound their own accesses, for example with `len()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    grid: [u64; 3],
    dims: u8,
    group: Option<[u32; 3]>,
    dynamic_shared: Option<u32>,
    checked: Option<bool>,
    time_limit: Option<std::time::Duration>,
}

impl Launch {
    /// `n` threads in one dimension.
    pub fn threads(n: usize) -> Launch {
        Launch::of_grid([n as u64, 1, 1], 1)
    }
    /// A `width × height` grid of threads.
    pub fn grid2d(width: usize, height: usize) -> Launch {
        Launch::of_grid([width as u64, height as u64, 1], 2)
    }
    /// An `x × y × z` grid of threads.
    pub fn grid3d(x: usize, y: usize, z: usize) -> Launch {
        Launch::of_grid([x as u64, y as u64, z as u64], 3)
    }
    /// A grid of `dims` dimensions with every option left to its default.
    fn of_grid(grid: [u64; 3], dims: u8) -> Launch {
        Launch {
            grid,
            dims,
            group: None,
            dynamic_shared: None,
            checked: None,
            time_limit: None,
        }
    }
    /// Threads per group along x (the other dimensions are 1).
    pub fn group(mut self, x: u32) -> Launch {
        self.group = Some([x, 1, 1]);
        self
    }
    pub fn group2d(mut self, x: u32, y: u32) -> Launch {
        self.group = Some([x, y, 1]);
        self
    }
    pub fn group3d(mut self, x: u32, y: u32, z: u32) -> Launch {
        self.group = Some([x, y, z]);
        self
    }
    /// Length, in elements, of the kernel's `shared_dynamic` array.
    pub fn dynamic_shared(mut self, len: u32) -> Launch {
        self.dynamic_shared = Some(len);
        self
    }
    /// Checked mode for this launch: generated GPU code bounds-checks every buffer,
    /// shared-array and local-array access, skips the ones out of bounds (a load gives 0),
    /// and the launch returns the first as `Error::OutOfBounds`, as the CPU backend always
    /// does. It waits for the launch to finish. Without this call the environment decides
    /// (`DOTCOMPUTE_CHECKED=1` turns it on; off by default: checks cost time).
    pub fn checked(mut self, on: bool) -> Launch {
        self.checked = Some(on);
        self
    }
    /// A time limit for this launch alone, in place of the device's
    /// (`Device::set_time_limit`, or the backend's `DOTCOMPUTE_*_TIMEOUT_S`). The launch
    /// first waits for the work queued before it on its stream (under the device's limit),
    /// then for itself under this one, so it is synchronous, like a checked launch. Past
    /// the limit a CPU launch is stopped (`Error::LaunchTimedOut`, the device stays
    /// usable); a GPU kernel cannot be stopped, so the GPU device is lost
    /// (`Error::DeviceLost` naming the kernel and the limit). A device whose capabilities
    /// lack `time_limits` refuses the launch. Between 0 (excluded) and a year.
    pub fn time_limit(mut self, limit: std::time::Duration) -> Launch {
        self.time_limit = Some(limit);
        self
    }
    /// The group size, if one was given.
    pub fn group_size(&self) -> Option<[u32; 3]> {
        self.group
    }
    pub fn grid(&self) -> [u64; 3] {
        self.grid
    }
    pub fn dims(&self) -> u8 {
        self.dims
    }

    /// Checks the launch against the kernel and the device and fixes every size.
    pub fn resolve(&self, kernel: &Kernel, limits: &Limits) -> Result<ResolvedLaunch> {
        let name = || kernel.name.clone();
        if self.grid.contains(&0) {
            return Err(Error::EmptyLaunch {
                kernel: name(),
                detail: format!("grid {:?}", &self.grid[..self.dims as usize]),
            });
        }
        let group = self.checked_group(kernel, limits)?;
        let (grid, groups) = self.grid_and_groups(kernel, group, limits)?;
        let (dynamic_shared_len, shared) = self.shared_memory(kernel, limits)?;
        Ok(ResolvedLaunch {
            grid,
            group,
            groups,
            dynamic_shared_len,
            shared_bytes: shared,
            checked: match self.checked {
                Some(c) => c,
                None => checked_from_env()?,
            },
            default_group: self.group.is_none(),
            time_limit: self
                .time_limit
                .map(|l| crate::settings::check_time_limit(crate::settings::SET_BY_LAUNCH, l))
                .transpose()?,
        })
    }

    /// The group size (the launch's, or the default for its dimensions clamped to the
    /// device), checked against the device's limits.
    fn checked_group(&self, kernel: &Kernel, limits: &Limits) -> Result<[u32; 3]> {
        let name = || kernel.name.clone();
        let group = match self.group {
            Some(g) => g,
            None => {
                let g = match self.dims {
                    1 => [256, 1, 1],
                    2 => [16, 16, 1],
                    _ => [8, 8, 4],
                };
                clamp_group(g, limits)
            }
        };
        if group.contains(&0) {
            return Err(Error::InvalidGroupSize {
                kernel: name(),
                detail: format!("{group:?} has a zero dimension"),
            });
        }
        let threads: u64 = group.iter().map(|&g| g as u64).product();
        if threads > limits.max_group_threads as u64 {
            return Err(Error::InvalidGroupSize {
                kernel: name(),
                detail: format!(
                    "{group:?} is {threads} threads per group; the device allows {}",
                    limits.max_group_threads
                ),
            });
        }
        for (d, (&size, &max)) in group.iter().zip(&limits.max_group_size).enumerate() {
            if size > max {
                return Err(Error::InvalidGroupSize {
                    kernel: name(),
                    detail: format!("dimension {d} is {size}; the device allows {max}"),
                });
            }
        }
        Ok(group)
    }

    /// The grid in threads and in groups of `group`, each dimension checked against the
    /// device's group counts and the u32 ids.
    fn grid_and_groups(
        &self,
        kernel: &Kernel,
        group: [u32; 3],
        limits: &Limits,
    ) -> Result<([u32; 3], [u32; 3])> {
        let name = || kernel.name.clone();
        let mut grid = [1u32; 3];
        let mut groups = [1u32; 3];
        for d in 0..3 {
            // Global ids are u32, so no dimension may exceed u32::MAX threads.
            if self.grid[d] > u32::MAX as u64 {
                return Err(Error::GridTooLarge {
                    kernel: name(),
                    detail: format!(
                        "dimension {d} has {} threads; at most {} (ids are u32)",
                        self.grid[d],
                        u32::MAX
                    ),
                });
            }
            let n = self.grid[d].div_ceil(group[d] as u64);
            if n > limits.max_groups[d] as u64 {
                return Err(Error::GridTooLarge {
                    kernel: name(),
                    detail: format!(
                        "dimension {d} needs {n} groups of {}; the device allows {}",
                        group[d], limits.max_groups[d]
                    ),
                });
            }
            grid[d] = self.grid[d] as u32;
            groups[d] = n as u32;
        }
        Ok((grid, groups))
    }

    /// The dynamic shared array's length (given exactly when the kernel declares one) and
    /// the shared bytes per group, both checked against the device's limits.
    fn shared_memory(&self, kernel: &Kernel, limits: &Limits) -> Result<(u32, u64)> {
        let name = || kernel.name.clone();
        let dynamic_shared_len = match (kernel.dynamic_shared(), self.dynamic_shared) {
            (Some(_), Some(len)) if len > 0 => len,
            (Some((_, s)), _) => {
                return Err(Error::DynamicShared {
                    kernel: name(),
                    detail: format!(
                        "the kernel declares the dynamic shared array `{}`; give its length \
                         (at least 1) with Launch::dynamic_shared(len)",
                        s.name
                    ),
                })
            }
            (None, Some(_)) => {
                return Err(Error::DynamicShared {
                    kernel: name(),
                    detail: "Launch::dynamic_shared was given but the kernel declares no \
                             shared_dynamic array"
                        .into(),
                })
            }
            (None, None) => 0,
        };
        let shared = kernel.shared_bytes(dynamic_shared_len);
        if shared > limits.max_shared_bytes {
            return Err(Error::SharedMemoryTooLarge {
                kernel: name(),
                requested: shared,
                limit: limits.max_shared_bytes,
            });
        }
        // Statically sized arrays alone have a lower limit on CUDA (48 KiB); the driver
        // would refuse the module with a message that names no array.
        let static_shared = kernel.shared_bytes(0);
        if static_shared > limits.max_static_shared_bytes {
            return Err(Error::SharedMemoryTooLarge {
                kernel: name(),
                requested: static_shared,
                limit: limits.max_static_shared_bytes,
            });
        }
        Ok((dynamic_shared_len, shared))
    }
}

fn clamp_group(mut g: [u32; 3], limits: &Limits) -> [u32; 3] {
    for (size, &max) in g.iter_mut().zip(&limits.max_group_size) {
        *size = (*size).min(max).max(1);
    }
    while g.iter().map(|&x| x as u64).product::<u64>() > limits.max_group_threads as u64 {
        let d = (0..3).max_by_key(|&d| g[d]).unwrap();
        g[d] = (g[d] / 2).max(1);
    }
    g
}

/// A launch checked against one kernel and device: every size fixed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResolvedLaunch {
    /// Threads per dimension as requested.
    pub grid: [u32; 3],
    /// Threads per group.
    pub group: [u32; 3],
    /// Groups per dimension (`ceil(grid / group)`).
    pub groups: [u32; 3],
    /// Elements of the dynamic shared array (0 when the kernel has none).
    pub dynamic_shared_len: u32,
    /// Shared memory bytes per group.
    pub shared_bytes: u64,
    /// Checked mode ([`Launch::checked`]).
    pub checked: bool,
    /// The launch's own time limit ([`Launch::time_limit`]): the backend waits for it.
    pub time_limit: Option<std::time::Duration>,
    /// Whether the group size is the default (the launch gave none): a backend whose
    /// compiled kernel allows fewer threads per group than the device may then shrink it
    /// (Metal's per-pipeline `maxTotalThreadsPerThreadgroup`); a group the user gave is
    /// never changed.
    pub default_group: bool,
}

/// `DOTCOMPUTE_CHECKED` (read once per process; an on/off switch, see
/// [`crate::settings::switch`]): a value it does not accept is an error of every launch
/// that does not choose for itself, not a silent "off".
pub fn checked_from_env() -> Result<bool> {
    static ON: std::sync::OnceLock<Result<bool>> = std::sync::OnceLock::new();
    ON.get_or_init(|| crate::settings::switch_or("DOTCOMPUTE_CHECKED", false))
        .clone()
}

/// The record a checked kernel writes on its first out-of-bounds access: four `u32`
/// words, `[set, memory, index, len]`, zero until set. `memory` is
/// `dotcompute_ir::Memory::code` of the array.
pub const VIOLATION_WORDS: usize = 4;

/// The "array" code of a thread that ran past a driver's loop budget (the WGSL
/// generator's `LOOP_BUDGET_CODE`).
pub const LOOP_BUDGET_CODE: u32 = 0xffff_ff00;

/// The error a violation record reports, if it was set.
pub fn decode_violation(kernel: &Kernel, words: [u32; VIOLATION_WORDS]) -> Option<Error> {
    if words[0] == 0 {
        return None;
    }
    if words[1] == LOOP_BUDGET_CODE {
        return Some(Error::Unsupported {
            op: "long loops on this device",
            detail: format!(
                "kernel `{}`: a thread ran {} loop trips; this device (llvmpipe) ends a \
                 thread's loops after 65,535 trips in all, so results past {} trips could \
                 be cut short and the launch is refused; run it on another backend",
                kernel.name, words[2], words[3]
            ),
        });
    }
    let mem = dotcompute_ir::Memory::from_code(words[1]);
    Some(Error::OutOfBounds {
        kernel: kernel.name.clone(),
        arg: kernel.memory_name(mem).to_string(),
        index: words[2] as u64,
        len: words[3] as u64,
    })
}

impl ResolvedLaunch {
    pub fn group_threads(&self) -> u32 {
        self.group[0] * self.group[1] * self.group[2]
    }
    pub fn total_groups(&self) -> u64 {
        self.groups.iter().map(|&g| g as u64).product()
    }
}
