//! The musl build's allocator. `bin/prov` against musl exists to start
//! `prov run` quickly, a process of a few milliseconds; musl's malloc gives
//! freed memory back to the kernel at once, and the `mmap`/`munmap` pairs
//! and their page faults were a fifth of its CPU (benches/README.md). So
//! its allocations come from a static arena, handed out in order and never
//! reused; a block that does not fit, or a large one, comes from musl's
//! malloc as before. A musl-only installation (no `prov-full`) runs every
//! subcommand on this build: its arena is used up early and the rest is
//! musl's, so a long run (the run preparer, a big query) wastes at most the
//! arena. Not `static-alloc`'s `Bump`: its storage is uninitialised, so a
//! zeroed block would need a memset, where ours is zero from the kernel's
//! fresh pages like `calloc`'s.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The musl build's arena: address space only, in .bss; the kernel backs
/// the pages that are touched.
pub const ARENA_BYTES: usize = 8 << 20;
/// Larger blocks (the 256 KiB receive buffer) go to malloc, which maps
/// them fresh and unmaps them when freed, without using up the arena.
const LARGEST_FROM_ARENA: usize = 64 << 10;

pub struct ArenaFirst<const BYTES: usize> {
    storage: UnsafeCell<[u8; BYTES]>,
    /// Bytes of `storage` handed out so far (alignment padding included).
    used: AtomicUsize,
}

// SAFETY: `storage` is only reached through ranges that `used` hands out
// once each (an atomic compare-exchange), so no two threads share a byte.
unsafe impl<const BYTES: usize> Sync for ArenaFirst<BYTES> {}

impl<const BYTES: usize> ArenaFirst<BYTES> {
    pub const fn new() -> Self {
        Self { storage: UnsafeCell::new([0; BYTES]), used: AtomicUsize::new(0) }
    }

    fn start(&self) -> usize {
        self.storage.get() as usize
    }

    fn owns(&self, ptr: *mut u8) -> bool {
        (self.start()..self.start() + BYTES).contains(&(ptr as usize))
    }

    /// A block never handed out before (so still zero), or None when it
    /// does not fit or is too large for the arena.
    fn take_block(&self, layout: Layout) -> Option<*mut u8> {
        if layout.size() > LARGEST_FROM_ARENA {
            return None;
        }
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let offset = (self.start() + used).next_multiple_of(layout.align()) - self.start();
            let end = offset.checked_add(layout.size()).filter(|&end| end <= BYTES)?;
            match self.used.compare_exchange_weak(used, end, Ordering::Relaxed, Ordering::Relaxed) {
                // SAFETY: offset + size <= BYTES: within `storage`.
                Ok(_) => return Some(unsafe { self.storage.get().cast::<u8>().add(offset) }),
                Err(now) => used = now,
            }
        }
    }
}

// SAFETY: every block is either a range of `storage` handed out once (never
// freed, so never handed out twice) or musl's own; `owns` tells them apart,
// and musl's blocks go back to musl alone.
unsafe impl<const BYTES: usize> GlobalAlloc for ArenaFirst<BYTES> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout, passed on.
        self.take_block(layout).unwrap_or_else(|| unsafe { System.alloc(layout) })
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`; the arena's blocks are zero already.
        self.take_block(layout).unwrap_or_else(|| unsafe { System.alloc_zeroed(layout) })
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !self.owns(ptr) {
            // SAFETY: musl's block, with the layout it was allocated with.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !self.owns(ptr) {
            // SAFETY: musl's block; the caller's new size.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: the caller guarantees a valid layout for new_size.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: a fresh block of new_size bytes (or null), disjoint from
        // the old one, which stays valid (arena blocks are never reused).
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks hold at least the bytes copied.
            unsafe { std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size)) };
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn blocks_are_aligned_zeroed_disjoint_and_then_come_from_malloc() {
        static ARENA: ArenaFirst<4096> = ArenaFirst::new();
        let arena = &ARENA;
        let mut blocks = Vec::new();
        for (i, align) in [1, 8, 16, 64, 4096, 8].into_iter().cycle().take(60).enumerate() {
            let l = layout(100 + i, align);
            // SAFETY: `l` has a non-zero size, as GlobalAlloc requires.
            let p = unsafe { arena.alloc_zeroed(l) };
            assert!(!p.is_null());
            assert_eq!(p as usize % align, 0, "block {i} misaligned");
            // SAFETY: `p` is a live block of `l.size()` bytes, zeroed by alloc_zeroed.
            assert!(unsafe { std::slice::from_raw_parts(p, l.size()) }.iter().all(|&b| b == 0));
            // SAFETY: the same block, ours alone until it is freed below.
            unsafe { p.write_bytes(i as u8 + 1, l.size()) };
            blocks.push((p, l, i as u8 + 1));
        }
        // 60 blocks of over 100 bytes: the first few from the arena, the rest from malloc.
        assert!(blocks.iter().any(|&(p, ..)| arena.owns(p)));
        assert!(blocks.iter().any(|&(p, ..)| !arena.owns(p)));
        for &(p, l, fill) in &blocks {
            // SAFETY: every block is still live and was filled in full above.
            assert!(unsafe { std::slice::from_raw_parts(p, l.size()) }.iter().all(|&b| b == fill), "overlap");
        }
        for (p, l, _) in blocks {
            // SAFETY: each block came from this arena with this layout, freed once.
            unsafe { arena.dealloc(p, l) };
        }
    }

    #[test]
    fn large_blocks_go_to_malloc_and_realloc_keeps_the_contents() {
        static ARENA: ArenaFirst<{ 1 << 20 }> = ArenaFirst::new();
        let arena = &ARENA;
        // SAFETY: a non-zero size, as GlobalAlloc requires.
        let big = unsafe { arena.alloc_zeroed(layout(LARGEST_FROM_ARENA + 1, 8)) };
        assert!(!big.is_null() && !arena.owns(big));
        // SAFETY: `big` came from this arena with this layout and is freed once.
        unsafe { arena.dealloc(big, layout(LARGEST_FROM_ARENA + 1, 8)) };

        // SAFETY: a non-zero size.
        let mut p = unsafe { arena.alloc(layout(16, 8)) };
        assert!(arena.owns(p));
        // SAFETY: `p` is a live block of 16 bytes, the source a distinct 16-byte literal.
        unsafe { p.copy_from_nonoverlapping(b"0123456789abcdef".as_ptr(), 16) };
        let mut size = 16;
        // Grows through the arena, then past the arena's largest block into malloc.
        while size < 4 * LARGEST_FROM_ARENA {
            // SAFETY: `p` is live with layout (size, 8); the new size is non-zero.
            p = unsafe { arena.realloc(p, layout(size, 8), size * 2) };
            size *= 2;
            assert!(!p.is_null());
            // SAFETY: the grown block holds at least 16 bytes, the first 16 copied over.
            assert_eq!(unsafe { std::slice::from_raw_parts(p, 16) }, b"0123456789abcdef");
        }
        assert!(!arena.owns(p));
        // SAFETY: `p` is live with layout (size, 8); 8 is non-zero.
        p = unsafe { arena.realloc(p, layout(size, 8), 8) };
        // SAFETY: the shrunk block holds 8 bytes, copied from the old one.
        assert_eq!(unsafe { std::slice::from_raw_parts(p, 8) }, b"01234567");
        // SAFETY: `p` came from this arena with layout (8, 8) and is freed once.
        unsafe { arena.dealloc(p, layout(8, 8)) };
    }
}
