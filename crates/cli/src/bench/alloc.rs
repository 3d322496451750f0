//! The process's global allocator, which counts allocations: the source of the bench's
//! allocations-per-cycle figures.

use quorumlock_harness::CountingAllocator;

/// Counts every allocation the process makes (all threads), so that a quiet sequential loop can
/// report allocations per acquire+release cycle.
#[global_allocator]
pub(super) static ALLOC: CountingAllocator = CountingAllocator::new();
