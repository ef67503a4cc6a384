//! A counting global allocator for allocation tests: a test binary installs
//! it (`#[global_allocator] static A: Counting = Counting;`), then counts
//! the allocations and reallocations its own thread makes between
//! [`start`] and [`stop`] (other threads and other times are not counted).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting this thread's allocations while asked.
pub struct Counting;

thread_local! {
    static COUNT: Cell<Option<u64>> = const { Cell::new(None) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get().map(|n| n + 1)));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get().map(|n| n + 1)));
        unsafe { System.realloc(ptr, layout, new) }
    }
}

/// Starts counting this thread's allocations (from 0).
pub fn start() {
    COUNT.with(|c| c.set(Some(0)));
}

/// Stops counting: how many allocations and reallocations since [`start`].
pub fn stop() -> u64 {
    COUNT.with(|c| c.replace(None)).unwrap_or(0)
}
