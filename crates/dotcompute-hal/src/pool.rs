//! A size-class memory pool shared by every backend: requests are rounded up to a class
//! (powers of two split in quarters, so at most 25% is wasted), freed blocks are kept per
//! class and handed out again, and statistics say how often the driver was really asked.
//!
//! Each free block carries the set of streams whose enqueued work may still use it (its
//! *users*). The pool hands the set out with the block, so the new owner's first use on
//! another stream waits for those streams: a block freed while a kernel on stream 2 still
//! reads it can be written on stream 1 at once, and the write is ordered after the read.

use crate::error::Result;
use crate::stream::StreamSet;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Pool statistics, in bytes and counts since the device was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Allocations that reached the driver / OS.
    pub driver_allocations: u64,
    /// Blocks returned to the driver / OS (by `trim` or on drop).
    pub driver_frees: u64,
    /// Allocations served from the pool.
    pub pool_hits: u64,
    /// Bytes of blocks held by live buffers (class sizes).
    pub bytes_in_use: u64,
    /// Bytes of free blocks kept for reuse.
    pub bytes_cached: u64,
    /// Highest `bytes_in_use` seen.
    pub peak_bytes_in_use: u64,
}

/// The smallest block handed out.
pub const MIN_CLASS: usize = 256;

/// The size class a request of `bytes` is served from.
pub fn size_class(bytes: usize) -> usize {
    if bytes <= MIN_CLASS {
        return MIN_CLASS;
    }
    let pow = bytes.next_power_of_two();
    let quarter = (pow / 8).max(1); // between pow/2 and pow, steps of a quarter of pow/2
    bytes.div_ceil(quarter) * quarter
}

struct Inner<H> {
    free: BTreeMap<usize, Vec<(H, StreamSet)>>,
    stats: MemoryStats,
}

/// A pool of blocks of type `H` (a backend's raw allocation handle).
pub struct SizeClassPool<H> {
    inner: Mutex<Inner<H>>,
}

impl<H> Default for SizeClassPool<H> {
    fn default() -> Self {
        SizeClassPool {
            inner: Mutex::new(Inner {
                free: BTreeMap::new(),
                stats: MemoryStats::default(),
            }),
        }
    }
}

impl<H> SizeClassPool<H> {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<H>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A block of at least `bytes`; returns it with its class size and the streams that
    /// may still use it. On a miss `alloc` is called with the class size; if it fails, the
    /// cache is trimmed with `free` and `alloc` is tried once more before the error is
    /// returned.
    pub fn acquire(
        &self,
        bytes: usize,
        mut alloc: impl FnMut(usize) -> Result<H>,
        free: impl FnMut(H),
    ) -> Result<(H, usize, StreamSet)> {
        let class = size_class(bytes);
        {
            let mut inner = self.lock();
            if let Some((h, users)) = inner.free.get_mut(&class).and_then(|v| v.pop()) {
                let s = &mut inner.stats;
                s.pool_hits += 1;
                s.bytes_cached -= class as u64;
                s.bytes_in_use += class as u64;
                s.peak_bytes_in_use = s.peak_bytes_in_use.max(s.bytes_in_use);
                return Ok((h, class, users));
            }
        }
        let h = match alloc(class) {
            Ok(h) => h,
            Err(_) => {
                self.trim(free);
                alloc(class)?
            }
        };
        let mut inner = self.lock();
        let s = &mut inner.stats;
        s.driver_allocations += 1;
        s.bytes_in_use += class as u64;
        s.peak_bytes_in_use = s.peak_bytes_in_use.max(s.bytes_in_use);
        Ok((h, class, StreamSet::EMPTY))
    }

    /// Returns a block of class `class` for reuse; `users` may still use it.
    pub fn release(&self, h: H, class: usize, users: StreamSet) {
        let mut inner = self.lock();
        inner.stats.bytes_in_use -= class as u64;
        inner.stats.bytes_cached += class as u64;
        inner.free.entry(class).or_default().push((h, users));
    }

    /// Hands every cached block to `free` (the driver's deallocation). The caller has
    /// waited for every stream first.
    pub fn trim(&self, mut free: impl FnMut(H)) {
        let blocks: Vec<H> = {
            let mut inner = self.lock();
            let blocks: Vec<H> = std::mem::take(&mut inner.free)
                .into_values()
                .flatten()
                .map(|(h, _)| h)
                .collect();
            inner.stats.driver_frees += blocks.len() as u64;
            inner.stats.bytes_cached = 0;
            blocks
        };
        blocks.into_iter().for_each(&mut free);
    }

    pub fn stats(&self) -> MemoryStats {
        self.lock().stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_round_up_by_at_most_a_quarter() {
        assert_eq!(size_class(0), MIN_CLASS);
        assert_eq!(size_class(257), 320); // classes above 256: 320, 384, 448, 512
        for bytes in [300usize, 1000, 4097, 1 << 20, (1 << 20) + 1, 123_456_789] {
            let c = size_class(bytes);
            assert!(c >= bytes, "{bytes} -> {c}");
            assert!((c - bytes) as f64 <= bytes as f64 * 0.25, "{bytes} -> {c}");
            assert_eq!(size_class(c), c, "a class is its own class");
        }
    }

    #[test]
    fn reuse_counts_hits_and_returns_bytes() {
        let pool = SizeClassPool::<usize>::new();
        let mut next = 0;
        let (a, ca, _) = pool
            .acquire(
                1000,
                |c| {
                    next += 1;
                    Ok(c)
                },
                |_| {},
            )
            .unwrap();
        pool.release(a, ca, StreamSet(0b110));
        let (_b, cb, users) = pool.acquire(1000, |_| panic!("must hit"), |_| {}).unwrap();
        assert_eq!(ca, cb);
        assert_eq!(
            users,
            StreamSet(0b110),
            "a reused block names the streams that used it"
        );
        let s = pool.stats();
        assert_eq!((s.driver_allocations, s.pool_hits), (1, 1));
        assert_eq!(s.bytes_in_use, cb as u64);
    }
}
