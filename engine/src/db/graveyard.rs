//! Files replaced by a compaction wait here until no reader can reach them.
//!
//! Every version lists its files as shared pointers, and a reader keeps the super-version (so
//! the version, so the pointers) it started with until it ends. Once a file has left the
//! current version, new readers cannot reach it; when the graveyard's pointer is the last one,
//! no old reader can either, and the file may be deleted. The pointer type is generic so the
//! loom model below checks the protocol with loom's `Arc` while the engine uses std's.
//!
//! A trivial move lists the moved file in the next version under a new pointer (its level
//! changed), while older versions keep the old one. The file's last pointer being the
//! graveyard's then no longer means no reader can reach it: a reader of a version from before
//! the move reaches it through the old pointer. So a move hands the old pointer here too
//! ([`Graveyard::moved`]): while any old pointer of a file number is still referenced, the
//! file is not deleted. (Without this, a scan open across a move and a compaction of the moved
//! file failed with "no such file".)

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

/// A pointer to a file's entry in a version; entries of one file in different levels (a
/// trivial move makes a new one) have the same number.
pub(crate) trait FileEntry: Counted {
    fn file_number(&self) -> u64;
}

impl FileEntry for std::sync::Arc<crate::types::FileMeta> {
    fn file_number(&self) -> u64 {
        self.number
    }
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Graveyard<P> {
    /// Files replaced: deleted once nothing else references them.
    waiting: Vec<P>,
    /// Old entries of moved files, which live on under a new entry: never deleted through
    /// these, but while one is referenced its file is not deleted either.
    moved: Vec<P>,
}

impl<P> Default for Graveyard<P> {
    fn default() -> Self {
        Graveyard {
            waiting: Vec::new(),
            moved: Vec::new(),
        }
    }
}

impl<P: FileEntry> Graveyard<P> {
    /// Hand over a file that no longer is in the current version. The caller must have
    /// swapped the version out *before*: a file still current could be picked up again.
    pub(crate) fn bury(&mut self, file: P) {
        self.waiting.push(file);
    }

    /// Hand over the entry a trivial move replaced (after the version swap, as `bury`).
    pub(crate) fn moved(&mut self, old_entry: P) {
        self.moved.push(old_entry);
    }

    /// The files no one else references any more, removed from the graveyard: the caller
    /// deletes them.
    pub(crate) fn collect(&mut self) -> Vec<P> {
        // An old entry no reader holds can never be reached again (it is in no version a
        // reader could still take): forget it. The rest pin their file numbers.
        self.moved.retain(|m| m.strong_count() > 1);
        let pinned: std::collections::BTreeSet<u64> =
            self.moved.iter().map(FileEntry::file_number).collect();
        let mut dead = Vec::new();
        let mut keep = Vec::with_capacity(self.waiting.len());
        for f in self.waiting.drain(..) {
            if f.strong_count() == 1 && !pinned.contains(&f.file_number()) {
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

    /// A file entry for the tests: (number, level).
    impl FileEntry for Arc<(u64, u32)> {
        fn file_number(&self) -> u64 {
            self.0
        }
    }

    #[test]
    fn a_moved_file_is_released_only_after_readers_of_its_old_entry() {
        let mut g = Graveyard::default();
        let at_l0 = Arc::new((7u64, 0u32));
        let old_reader = at_l0.clone();
        // Moved to L1: a new entry; the old one goes to the graveyard.
        let at_l1 = Arc::new((7u64, 1u32));
        g.moved(at_l0);
        // Another file moved, whose old entry no one holds: forgotten at the next pass.
        g.moved(Arc::new((8, 0)));
        // The moved file is then compacted away: its new entry is buried, no one holds it.
        g.bury(at_l1);
        assert!(
            g.collect().is_empty(),
            "deleted under a reader of the old entry"
        );
        assert_eq!(g.len(), 1);
        assert_eq!(g.moved.len(), 1);
        drop(old_reader);
        let dead = g.collect();
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].0, 7);
        assert_eq!((g.len(), g.moved.len()), (0, 0));
    }

    #[test]
    fn a_file_is_released_only_after_its_last_reader() {
        let mut g = Graveyard::default();
        let f = Arc::new((7u64, 0u32));
        let reader = f.clone();
        g.bury(f);
        assert!(g.collect().is_empty());
        assert_eq!(g.len(), 1);
        drop(reader);
        let dead = g.collect();
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].0, 7);
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

    impl FileEntry for Arc<File> {
        fn file_number(&self) -> u64 {
            1
        }
    }

    /// The current version's files.
    type Current = Arc<RwLock<Arc<Vec<Arc<File>>>>>;
    type Shared = Arc<Mutex<Graveyard<Arc<File>>>>;

    /// A reader: takes the current version under the read lock and reads its files (none may
    /// be deleted), then ends, which is followed by a collection pass (the engine runs one
    /// after every compaction and when idle).
    fn spawn_reader(current: &Current, graveyard: &Shared) -> thread::JoinHandle<()> {
        let (current, graveyard) = (current.clone(), graveyard.clone());
        thread::spawn(move || {
            let v = current.read().unwrap().clone();
            for f in v.iter() {
                assert!(!f.deleted.load(Ordering::SeqCst), "read a deleted file");
            }
            drop(v);
            delete_released(&graveyard);
        })
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
            let current: Current = Arc::new(RwLock::new(Arc::new(vec![file])));
            let graveyard: Shared = Arc::new(Mutex::new(Graveyard::default()));

            let reader = spawn_reader(&current, &graveyard);

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

    /// As above, but the compaction side first moves the file (a new entry in the next
    /// version, the old one to the graveyard as moved) and then compacts it away (the new
    /// entry buried), while a reader may hold the version from before the move.
    #[test]
    fn a_file_moved_then_compacted_is_not_deleted_under_a_reader_of_the_old_entry() {
        loom::model(|| {
            let deleted = Arc::new(AtomicBool::new(false));
            let entry = || {
                Arc::new(File {
                    deleted: deleted.clone(),
                })
            };
            let current: Current = Arc::new(RwLock::new(Arc::new(vec![entry()])));
            let graveyard: Shared = Arc::new(Mutex::new(Graveyard::default()));

            let reader = spawn_reader(&current, &graveyard);

            // The move.
            let before = std::mem::replace(&mut *current.write().unwrap(), Arc::new(vec![entry()]));
            for f in before.iter() {
                graveyard.lock().unwrap().moved(f.clone());
            }
            drop(before);
            // The compaction of the moved file.
            let moved = std::mem::replace(&mut *current.write().unwrap(), Arc::new(Vec::new()));
            for f in moved.iter() {
                graveyard.lock().unwrap().bury(f.clone());
            }
            drop(moved);
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
