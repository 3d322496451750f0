//! A counting global allocator: every allocation the process makes, on any thread, counted on
//! top of the system allocator, so a benchmark or test can report allocations per operation.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

/// A [`GlobalAlloc`] that forwards every call unchanged to [`System`] and counts the calls that
/// allocate (`alloc`, `alloc_zeroed` and `realloc`), and the bytes currently allocated.
///
/// Install it with `#[global_allocator]` in a binary, bench or test; then
/// [`allocations`](CountingAllocator::allocations) read before and after an operation gives the
/// allocations that operation made. The count covers all threads, so read it around a quiet,
/// sequential stretch of code.
///
/// # Example
///
/// ```
/// use quorumlock_harness::CountingAllocator;
///
/// #[global_allocator]
/// static ALLOC: CountingAllocator = CountingAllocator::new();
///
/// let before = ALLOC.allocations();
/// let buffer = std::hint::black_box(vec![0u8; 64]);
/// let made = ALLOC.allocations() - before;
/// assert!(made >= 1);
/// drop(buffer);
/// ```
#[derive(Debug, Default)]
pub struct CountingAllocator {
    /// Allocating calls since the allocator was created.
    allocations: AtomicU64,
    /// Bytes allocated and not yet freed (as requested: the system allocator's own overhead is
    /// not counted).
    live_bytes: AtomicU64,
}

impl CountingAllocator {
    /// A counter at zero, usable in a `static`.
    #[must_use]
    pub const fn new() -> CountingAllocator {
        CountingAllocator {
            allocations: AtomicU64::new(0),
            live_bytes: AtomicU64::new(0),
        }
    }

    /// Allocating calls (`alloc`, `alloc_zeroed`, `realloc`) so far, on all threads.
    #[must_use]
    pub fn allocations(&self) -> u64 {
        self.allocations.load(Ordering::Relaxed)
    }

    /// Bytes allocated and not freed yet, on all threads: read before and after building
    /// something that stays alive to get what it holds (the sizes asked for, without the system
    /// allocator's own overhead).
    #[must_use]
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes.load(Ordering::Relaxed)
    }

    fn count(&self) {
        self.allocations.fetch_add(1, Ordering::Relaxed);
    }

    fn grew(&self, bytes: usize) {
        self.live_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    fn shrank(&self, bytes: usize) {
        self.live_bytes.fetch_sub(bytes as u64, Ordering::Relaxed);
    }
}

// SAFETY: every method forwards to the system allocator with the caller's arguments unchanged, so
// `System`'s guarantees carry over; the counters are relaxed atomics and never allocate.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.count();
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc::alloc`'s contract.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            self.grew(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.count();
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc::alloc_zeroed`'s contract.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            self.grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged; `ptr` came from `System` through this allocator, with
        // this `layout`.
        unsafe { System.dealloc(ptr, layout) }
        self.shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.count();
        // SAFETY: forwarded unchanged; `ptr` came from `System` through this allocator, and the
        // caller upholds `GlobalAlloc::realloc`'s contract for `layout` and `new_size`.
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        if !moved.is_null() {
            // On failure the old block stays allocated, at its old size.
            self.shrank(layout.size());
            self.grew(new_size);
        }
        moved
    }
}
