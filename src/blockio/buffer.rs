//! Aligned I/O buffers, allocated once.
//!
//! A pool is one allocation of `count * buffer_bytes` bytes, 4096-byte
//! aligned (O_DIRECT needs the memory address, the file offset and the length
//! aligned to the logical block size; 4096 covers every device we target).
//! The memory is shared through an `Arc` by the pool, every `Buffer` and every
//! `BlockIo` that registered it with io_uring, so it is freed only when the
//! last of them is gone: the kernel can never be left holding freed memory,
//! even if a caller drops a buffer instead of giving it back.
//!
//! Exclusive access is by ownership: the pool hands out each index at most
//! once, `Buffer` is not `Clone`, and `BlockIo` takes buffers by value while
//! the kernel uses them.
//!
//! A `Buffer` can also be lent memory of the caller's (`Buffer::lend`), so
//! that a read lands where the caller wants it instead of being copied
//! there from a pool buffer. The lender promises to leave that memory alone
//! until the `Buffer` is dropped; `BlockIo` hands it back like any other.

use std::alloc::{self, Layout};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::Arc;

use super::IoError;

/// Alignment of every buffer, and the unit of offsets and lengths.
pub const ALIGN_BYTES: usize = 4096;

/// Largest buffer: io_uring refuses to register buffers above 1 GiB.
pub const BUFFER_BYTES_MAX: usize = 1 << 30;

/// Most buffers in one pool: io_uring registers at most 16384 buffers
/// (`IORING_MAX_REG_BUFFERS`), and READ_FIXED takes a u16 index.
pub const BUFFER_COUNT_MAX: usize = 1 << 14;

const _: () = assert!(BUFFER_BYTES_MAX.is_multiple_of(ALIGN_BYTES));
const _: () = assert!(BUFFER_COUNT_MAX <= u16::MAX as usize + 1);
const _: () = assert!(BUFFER_BYTES_MAX <= u32::MAX as usize);

/// The pool's memory. Freed when the last `Arc` goes.
pub(super) struct Region {
    base: NonNull<u8>,
    layout: Layout,
    count: usize,
    buffer_bytes: usize,
}

// SAFETY: `Region` is a plain heap allocation. Shared access to it is only
// through `Buffer`s, each of which covers a disjoint range and is owned by one
// thread at a time (or lent to the kernel by `BlockIo`), so moving or sharing
// the `Arc<Region>` between threads cannot create a data race.
unsafe impl Send for Region {}
// SAFETY: as above; `Region` itself exposes no access to the bytes.
unsafe impl Sync for Region {}

impl Region {
    /// Start address of buffer `index`.
    pub(super) fn buffer_ptr(&self, index: usize) -> *mut u8 {
        assert!(index < self.count);
        // SAFETY: index < count, so the offset stays inside the allocation of
        // count * buffer_bytes bytes.
        unsafe { self.base.as_ptr().add(index * self.buffer_bytes) }
    }

    pub(super) fn count(&self) -> usize {
        self.count
    }

    pub(super) fn buffer_bytes(&self) -> usize {
        self.buffer_bytes
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: `base` came from `alloc_zeroed(self.layout)` and is freed
        // exactly once, here, when the last reference is gone.
        unsafe { alloc::dealloc(self.base.as_ptr(), self.layout) }
    }
}

/// Buffers allocated once, up front, 4096-byte aligned, all the same size.
pub struct BufferPool {
    region: Arc<Region>,
    free_buffers: Vec<Buffer>,
}

impl BufferPool {
    /// Allocates `count` zeroed buffers of `buffer_bytes` each.
    ///
    /// `buffer_bytes` must be a positive multiple of 4096 and at most 1 GiB,
    /// `count` between 1 and 16384; otherwise, or if the memory cannot be
    /// allocated, an error is returned (never an abort).
    pub fn new(count: usize, buffer_bytes: usize) -> Result<BufferPool, IoError> {
        let bad = |reason: &str| IoError::BadPool { count, buffer_bytes, reason: reason.to_string() };
        if buffer_bytes == 0 || !buffer_bytes.is_multiple_of(ALIGN_BYTES) {
            return Err(bad("buffer size must be a positive multiple of 4096"));
        }
        if buffer_bytes > BUFFER_BYTES_MAX {
            return Err(bad("buffer size must be at most 1 GiB"));
        }
        if count == 0 || count > BUFFER_COUNT_MAX {
            return Err(bad("buffer count must be between 1 and 16384"));
        }
        let total_bytes = count.checked_mul(buffer_bytes).ok_or_else(|| bad("total size overflows"))?;
        let layout = Layout::from_size_align(total_bytes, ALIGN_BYTES).map_err(|_| bad("total size too large"))?;
        // SAFETY: the layout has a non-zero size (count and buffer_bytes are
        // both positive).
        let base = unsafe { alloc::alloc_zeroed(layout) };
        let base = NonNull::new(base).ok_or_else(|| bad("out of memory"))?;
        let region = Arc::new(Region { base, layout, count, buffer_bytes });
        // Handed out in index order: take() pops from the end.
        let free_buffers = (0..count)
            .rev()
            .map(|index| Buffer { memory: Memory::Pooled { region: Arc::clone(&region), index } })
            .collect();
        Ok(BufferPool { region, free_buffers })
    }

    /// A free buffer, or `None` when all are out.
    pub fn take(&mut self) -> Option<Buffer> {
        self.free_buffers.pop()
    }

    /// Returns a buffer to the pool.
    ///
    /// # Panics
    /// If the buffer belongs to another pool.
    pub fn give(&mut self, buf: Buffer) {
        assert!(buf.is_in(&self.region), "buffer returned to a pool it does not belong to");
        assert!(self.free_buffers.len() < self.region.count);
        self.free_buffers.push(buf);
    }

    pub fn buffer_bytes(&self) -> usize {
        self.region.buffer_bytes
    }

    pub fn count(&self) -> usize {
        self.region.count
    }

    /// Buffers currently in the pool.
    pub fn free(&self) -> usize {
        self.free_buffers.len()
    }

    pub(super) fn region(&self) -> &Arc<Region> {
        &self.region
    }
}

impl fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferPool")
            .field("count", &self.count())
            .field("buffer_bytes", &self.buffer_bytes())
            .field("free", &self.free())
            .finish()
    }
}

/// An owned, 4096-byte aligned buffer from a pool (or lent by the caller,
/// see [`Buffer::lend`]); derefs to `[u8]` of its length. A pool's buffer
/// carries its index in the pool, which `BlockIo` uses as the io_uring
/// registered-buffer index.
pub struct Buffer {
    memory: Memory,
}

enum Memory {
    Pooled {
        region: Arc<Region>,
        index: usize,
    },
    /// Memory of the caller's, for as long as the `Buffer` lives.
    Lent {
        start: NonNull<u8>,
        bytes: usize,
    },
}

// SAFETY: a pooled buffer is a disjoint range of a `Send + Sync` region that
// this `Buffer` alone may touch; a lent one is memory its lender gave up all
// access to until the `Buffer` is dropped (the contract of `lend`), so it
// is owned like a `&mut [u8]`, which is `Send`.
unsafe impl Send for Buffer {}

impl Buffer {
    /// `memory` as a buffer of its own, for one request: a read through it
    /// lands in `memory` with no copy.
    ///
    /// # Safety
    /// Until the returned `Buffer` is dropped, nothing else may read,
    /// write, move or free `memory`: the kernel may be writing it. So the
    /// lender must get the `Buffer` back (from `BlockIo::wait` or
    /// `reclaim`) and drop it before its borrow of `memory` ends, also when
    /// an error or a panic cuts the work short.
    ///
    /// # Panics
    /// If `memory` does not start on a 4096-byte boundary or its length is
    /// not a positive multiple of 4096 (O_DIRECT needs both).
    pub unsafe fn lend(memory: &mut [u8]) -> Buffer {
        assert!((memory.as_ptr() as usize).is_multiple_of(ALIGN_BYTES), "lent memory not 4096-aligned");
        assert!(!memory.is_empty() && memory.len().is_multiple_of(ALIGN_BYTES), "lent length not a multiple of 4096");
        let start = NonNull::new(memory.as_mut_ptr()).expect("a slice's pointer is not null");
        Buffer { memory: Memory::Lent { start, bytes: memory.len() } }
    }

    /// Whether this buffer is lent memory rather than a pool's.
    pub fn is_lent(&self) -> bool {
        matches!(self.memory, Memory::Lent { .. })
    }

    /// Index of this buffer in its pool.
    ///
    /// # Panics
    /// If the buffer is lent memory.
    pub fn index(&self) -> usize {
        match self.memory {
            Memory::Pooled { index, .. } => index,
            Memory::Lent { .. } => panic!("lent memory has no pool index"),
        }
    }

    /// The buffer as 32-bit words (native byte order).
    pub fn as_u32s(&self) -> &[u32] {
        // SAFETY: the start is 4096-aligned, the length a multiple of 4096,
        // every bit pattern is a valid u32, and the memory is initialized (as
        // for `deref`); the borrow of `self` keeps it exclusive.
        unsafe { std::slice::from_raw_parts(self.as_ptr().cast::<u32>(), self.len() / 4) }
    }

    /// The buffer as mutable 32-bit words (native byte order).
    pub fn as_u32s_mut(&mut self) -> &mut [u32] {
        let words = self.len() / 4;
        // SAFETY: as for `as_u32s`; the mutable borrow of `self` is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.as_mut_ptr().cast::<u32>(), words) }
    }

    /// The buffer as 64-bit words (native byte order).
    pub fn as_u64s(&self) -> &[u64] {
        // SAFETY: as for `as_u32s` (4096-byte alignment covers u64).
        unsafe { std::slice::from_raw_parts(self.as_ptr().cast::<u64>(), self.len() / 8) }
    }

    /// The buffer as mutable 64-bit words (native byte order).
    pub fn as_u64s_mut(&mut self) -> &mut [u64] {
        let words = self.len() / 8;
        // SAFETY: as for `as_u32s_mut`.
        unsafe { std::slice::from_raw_parts_mut(self.as_mut_ptr().cast::<u64>(), words) }
    }

    /// Start of the buffer, for handing to the kernel. Only `BlockIo` uses
    /// this, while it owns the buffer.
    pub(super) fn raw_ptr(&self) -> *mut u8 {
        match &self.memory {
            Memory::Pooled { region, index } => region.buffer_ptr(*index),
            Memory::Lent { start, .. } => start.as_ptr(),
        }
    }

    /// Whether this buffer lives in `region`.
    pub(super) fn is_in(&self, region: &Arc<Region>) -> bool {
        matches!(&self.memory, Memory::Pooled { region: own, .. } if Arc::ptr_eq(own, region))
    }

    fn bytes(&self) -> usize {
        match &self.memory {
            Memory::Pooled { region, .. } => region.buffer_bytes,
            Memory::Lent { bytes, .. } => *bytes,
        }
    }
}

impl Deref for Buffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: a pooled buffer's range [index * buffer_bytes,
        // +buffer_bytes) lies inside the region, was zero-initialized, and
        // belongs to this `Buffer` alone (the pool creates one `Buffer` per
        // index and it is not `Clone`); the region stays allocated while the
        // `Buffer` holds it. Lent memory was an initialized `&mut [u8]`
        // whose lender leaves it to this `Buffer` while it lives (`lend`).
        unsafe { std::slice::from_raw_parts(self.raw_ptr(), self.bytes()) }
    }
}

impl DerefMut for Buffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `deref`; `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.raw_ptr(), self.bytes()) }
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.memory {
            Memory::Pooled { index, region } => {
                f.debug_struct("Buffer").field("index", index).field("bytes", &region.buffer_bytes).finish()
            }
            Memory::Lent { bytes, .. } => f.debug_struct("Buffer").field("lent_bytes", bytes).finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_zeroed_and_distinct() {
        let mut pool = BufferPool::new(3, 8192).unwrap();
        let mut taken = Vec::new();
        while let Some(mut buf) = pool.take() {
            assert_eq!(buf.as_ptr() as usize % ALIGN_BYTES, 0);
            assert_eq!(buf.len(), 8192);
            assert!(buf.iter().all(|&b| b == 0));
            let value = buf.index() as u8 + 1;
            buf.fill(value);
            taken.push(buf);
        }
        assert_eq!(taken.len(), 3);
        for buf in &taken {
            assert!(buf.iter().all(|&b| b == buf.index() as u8 + 1));
            assert_eq!(buf.as_u32s().len(), 2048);
            assert_eq!(buf.as_u64s().len(), 1024);
        }
    }

    #[test]
    fn exhaustion_returns_none_and_give_refills() {
        let mut pool = BufferPool::new(2, 4096).unwrap();
        assert_eq!((pool.count(), pool.free(), pool.buffer_bytes()), (2, 2, 4096));
        let a = pool.take().unwrap();
        let b = pool.take().unwrap();
        assert!(pool.take().is_none());
        assert_eq!(pool.free(), 0);
        pool.give(a);
        assert_eq!(pool.free(), 1);
        pool.give(b);
        assert_eq!(pool.free(), 2);
    }

    #[test]
    fn bad_sizes_are_errors() {
        for (count, bytes) in [(1, 0), (1, 100), (0, 4096), (BUFFER_COUNT_MAX + 1, 4096)] {
            assert!(matches!(BufferPool::new(count, bytes), Err(IoError::BadPool { .. })));
        }
        assert!(BufferPool::new(1, BUFFER_BYTES_MAX + ALIGN_BYTES).is_err());
        // 16 TiB: an error, not an abort, unless the kernel overcommits
        // blindly (vm.overcommit_memory = 1), where allocation succeeds lazily.
        let blind = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").is_ok_and(|mode| mode.trim() == "1");
        if !blind {
            assert!(BufferPool::new(BUFFER_COUNT_MAX, BUFFER_BYTES_MAX).is_err());
        }
    }

    #[test]
    #[should_panic(expected = "does not belong")]
    fn giving_to_another_pool_panics() {
        let mut first = BufferPool::new(1, 4096).unwrap();
        let mut second = BufferPool::new(1, 4096).unwrap();
        let buf = first.take().unwrap();
        second.take();
        second.give(buf);
    }

    #[test]
    fn buffer_outlives_its_pool() {
        let mut pool = BufferPool::new(1, 4096).unwrap();
        let mut buf = pool.take().unwrap();
        drop(pool);
        buf.fill(7);
        assert_eq!(buf.as_u32s()[0], 0x0707_0707);
    }
}
