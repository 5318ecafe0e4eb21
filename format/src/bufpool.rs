//! A per-thread pool of the byte buffers block cursors rebuild keys in, and the engine's
//! Gets pack a row's cells in.
//!
//! A Get makes a cursor per level of a file's index and one over the data block, and each
//! needs a key buffer and a scratch buffer for the restart keys its binary search rebuilds.
//! Each cursor allocated its key buffer and grew its scratch buffer from empty (callgrind of
//! cached Gets: that growth alone was 1.7% of their instructions). A cursor now takes its
//! buffers from this thread's pool and gives them back when dropped, so a thread that reads
//! over and over reuses a handful of warm buffers: readrandom on 2M cached keys gained 2–7%
//! in each of 4 alternated pairs of runs.
//!
//! The pool is bounded in both directions: it keeps at most `KEEP` buffers, and a buffer
//! that grew past `MAX_KEPT` bytes (a cursor over huge keys) is freed instead of kept, so an
//! idle thread holds at most `KEEP × MAX_KEPT` bytes here.

use std::cell::RefCell;

/// Capacity a fresh buffer starts with: room for a typical cell key.
pub const START: usize = 64;
/// Most buffers a thread keeps.
const KEEP: usize = 16;
/// Largest buffer (capacity) worth keeping.
const MAX_KEPT: usize = 4 << 10;

thread_local! {
    static POOL: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer with room for [`START`] bytes or more: a kept one when the thread has one.
pub fn take() -> Vec<u8> {
    // `try_with` fails only while the thread's locals are being destroyed; `try_borrow_mut`
    // cannot fail (nothing here calls out while the pool is borrowed), but a fresh buffer is
    // the answer either way.
    POOL.try_with(|p| p.try_borrow_mut().ok().and_then(|mut p| p.pop()))
        .ok()
        .flatten()
        .unwrap_or_else(|| Vec::with_capacity(START))
}

/// Give `buf` back to this thread's pool (or free it: too large, pool full, thread exiting).
pub fn give(mut buf: Vec<u8>) {
    if buf.capacity() < START || buf.capacity() > MAX_KEPT {
        return;
    }
    buf.clear();
    let _ = POOL.try_with(|p| {
        if let Ok(mut p) = p.try_borrow_mut() {
            if p.len() < KEEP {
                p.push(buf);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_and_bounds() {
        // A fresh thread: the test harness may have used this one's pool.
        std::thread::spawn(|| {
            let mut a = take();
            assert!(a.is_empty() && a.capacity() >= START);
            a.extend_from_slice(b"some key bytes");
            let ptr = a.as_ptr();
            give(a);
            let b = take();
            assert!(b.is_empty(), "a kept buffer comes back cleared");
            assert_eq!(b.as_ptr(), ptr, "the kept buffer is reused");
            // Too large to keep.
            let mut big = Vec::with_capacity(MAX_KEPT + 1);
            big.push(1u8);
            give(big);
            give(b);
            let n = POOL.with(|p| p.borrow().len());
            assert_eq!(n, 1);
            // At most KEEP kept.
            for _ in 0..KEEP + 5 {
                give(Vec::with_capacity(START));
            }
            assert_eq!(POOL.with(|p| p.borrow().len()), KEEP);
        })
        .join()
        .unwrap();
    }
}
