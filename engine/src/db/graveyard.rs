//! Files replaced by a compaction wait here until no reader can reach them.
//!
//! Every version lists its files as shared pointers, and a reader keeps the super-version (so
//! the version, so the pointers) it started with until it ends. Once a file has left the
//! current version, new readers cannot reach it; when the graveyard's pointer is the last one,
//! no old reader can either, and the file may be deleted. The pointer type is generic so the
//! loom model below checks the protocol with loom's `Arc` while the engine uses std's.

/// A shared pointer whose count of strong references can be read.
pub(crate) trait Counted {
    /// Strong references alive, this one included.
    fn strong_count(&self) -> usize;
}

impl<T> Counted for std::sync::Arc<T> {
    fn strong_count(&self) -> usize {
        std::sync::Arc::strong_count(self)
    }
}

#[cfg(loom)]
impl<T> Counted for loom::sync::Arc<T> {
    fn strong_count(&self) -> usize {
        loom::sync::Arc::strong_count(self)
    }
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Graveyard<P> {
    waiting: Vec<P>,
}

impl<P> Default for Graveyard<P> {
    fn default() -> Self {
        Graveyard {
            waiting: Vec::new(),
        }
    }
}

impl<P: Counted> Graveyard<P> {
    /// Hand over a file that no longer is in the current version. The caller must have
    /// swapped the version out *before*: a file still current could be picked up again.
    pub(crate) fn bury(&mut self, file: P) {
        self.waiting.push(file);
    }

    /// The files no one else references any more, removed from the graveyard: the caller
    /// deletes them.
    pub(crate) fn collect(&mut self) -> Vec<P> {
        let mut dead = Vec::new();
        let mut keep = Vec::with_capacity(self.waiting.len());
        for f in self.waiting.drain(..) {
            if f.strong_count() == 1 {
                dead.push(f);
            } else {
                keep.push(f);
            }
        }
        self.waiting = keep;
        dead
    }

    /// Files waiting.
    pub(crate) fn len(&self) -> usize {
        self.waiting.len()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_file_is_released_only_after_its_last_reader() {
        let mut g = Graveyard::default();
        let f = Arc::new(7u64);
        let reader = f.clone();
        g.bury(f);
        assert!(g.collect().is_empty());
        assert_eq!(g.len(), 1);
        drop(reader);
        let dead = g.collect();
        assert_eq!(dead.len(), 1);
        assert_eq!(*dead[0], 7);
        assert_eq!(g.len(), 0);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use loom::sync::atomic::{AtomicBool, Ordering};
    use loom::sync::{Arc, Mutex, RwLock};
    use loom::thread;

    use super::*;

    /// A file; `deleted` is set when the compaction side deletes it.
    struct File {
        deleted: Arc<AtomicBool>,
    }

    fn delete_released(g: &Mutex<Graveyard<Arc<File>>>) {
        let dead = g.lock().unwrap().collect();
        for f in dead {
            f.deleted.store(true, Ordering::SeqCst);
        }
    }

    /// A reader takes the current version under the read lock and reads its files; the
    /// compaction swaps in a version without the file, buries it and deletes what the
    /// graveyard releases, possibly while the reader is in the middle. No reader ever reads a
    /// deleted file, and once both sides are done the file is deleted.
    #[test]
    fn no_reader_sees_a_deleted_file_and_the_last_one_out_releases_it() {
        loom::model(|| {
            let deleted = Arc::new(AtomicBool::new(false));
            let file = Arc::new(File {
                deleted: deleted.clone(),
            });
            let current: Arc<RwLock<Arc<Vec<Arc<File>>>>> =
                Arc::new(RwLock::new(Arc::new(vec![file])));
            let graveyard: Arc<Mutex<Graveyard<Arc<File>>>> =
                Arc::new(Mutex::new(Graveyard::default()));

            let reader = {
                let (current, graveyard) = (current.clone(), graveyard.clone());
                thread::spawn(move || {
                    let v = current.read().unwrap().clone();
                    for f in v.iter() {
                        assert!(!f.deleted.load(Ordering::SeqCst), "read a deleted file");
                    }
                    drop(v);
                    // A reader's end is followed by a collection pass (the engine runs one
                    // after every compaction and when idle).
                    delete_released(&graveyard);
                })
            };

            let old = std::mem::replace(&mut *current.write().unwrap(), Arc::new(Vec::new()));
            {
                let mut g = graveyard.lock().unwrap();
                for f in old.iter() {
                    g.bury(f.clone());
                }
            }
            drop(old);
            delete_released(&graveyard);

            reader.join().unwrap();
            delete_released(&graveyard);
            assert!(
                deleted.load(Ordering::SeqCst),
                "the file outlived every reader"
            );
        });
    }
}
