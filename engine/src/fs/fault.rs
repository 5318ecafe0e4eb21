//! `FaultFs<F>`: a wrapper that makes chosen operations of any [`FileSystem`] fail
//! (RELIABILITY.md §2.1 c).
//!
//! A [`Rule`] names an operation kind (or any), an optional path substring, the hit it fires
//! on, whether it keeps firing after that, and the [`Fault`]. Every operation is counted per
//! kind and logged, so a sweep can run a workload once to count operations and then fail the
//! n-th one for every n.
//!
//! Besides failing operations, a `FaultFs` can make a write *short* (part of the buffer written,
//! the short count returned, as `write(2)` may) or *interrupted* (EINTR, nothing written): both
//! are transient and every engine write path (`File::write_all_at`, hence the WAL's pwrite
//! device and the HFile `AppendWriter`) must continue them. And it can model a disk filling up:
//! [`FaultFs::set_space_budget`] allows N more bytes of writes in total, then every write,
//! allocation and file creation fails with ENOSPC (a write that straddles the limit is short,
//! as on a real file system) until the budget is raised or removed.
//!
//! Files opened through a `FaultFs` report no raw descriptor, so the WAL uses its pwrite
//! device and every byte it writes passes through the rules (io_uring would bypass them).

use std::any::Any;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::sim::{FsyncFailMode, SimFile, SimFs};
use super::{File, FileSystem, LockGuard};

/// Operation kinds a rule can match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpKind {
    /// `File::write_at`.
    Write,
    /// `File::sync_data`.
    SyncData,
    /// `FileSystem::sync_dir`.
    SyncDir,
    /// `FileSystem::create`, and `FileSystem::hard_link` (a new name; matched against it).
    Create,
    /// `FileSystem::rename` (matched against both paths).
    Rename,
    /// `FileSystem::remove`.
    Remove,
    /// `FileSystem::open`.
    Open,
    /// `File::allocate`.
    Allocate,
    /// `File::truncate`.
    Truncate,
}

impl OpKind {
    /// Every kind, in declaration order.
    pub const ALL: [OpKind; 9] = [
        OpKind::Write,
        OpKind::SyncData,
        OpKind::SyncDir,
        OpKind::Create,
        OpKind::Rename,
        OpKind::Remove,
        OpKind::Open,
        OpKind::Allocate,
        OpKind::Truncate,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// What an operation hit by a rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    /// Fail with EIO; nothing is done.
    Eio,
    /// Fail with ENOSPC; nothing is done.
    NoSpace,
    /// On `sync_data`: the data is made durable, then EIO is reported. Other kinds: as `Eio`.
    SyncErrorButPersisted,
    /// On `sync_data`: EIO, and the unsynced data leaves the durable image for good when the
    /// inner file system is a [`SimFs`] (Linux after a writeback error); on other file systems
    /// plain EIO with the data left dirty. Other kinds: as `Eio`.
    SyncErrorAndDrop,
    /// On `write_at`: write the first half of the buffer (at least one byte) and return that
    /// count. Not an error; the caller must continue. Other kinds: not injected.
    ShortWrite,
    /// Fail with EINTR; nothing is done. Transient: the caller retries.
    Interrupted,
}

/// When and where to inject a fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Kind matched; `None` matches every kind.
    pub kind: Option<OpKind>,
    /// Kinds never matched (with `kind: None`: e.g. a full disk still opens files).
    pub except: Vec<OpKind>,
    /// Only operations on paths containing this (e.g. `/wal/`, `.hfile`, `MANIFEST`, `CURRENT`).
    pub path_contains: Option<String>,
    /// Fire on this matching operation, counting from 1.
    pub nth: u64,
    /// Keep firing on every matching operation after the n-th.
    pub persistent: bool,
    /// The fault.
    pub fault: Fault,
}

impl Rule {
    /// Fail the first operation of `kind` with `fault`.
    pub fn on(kind: OpKind, fault: Fault) -> Rule {
        Rule {
            kind: Some(kind),
            except: Vec::new(),
            path_contains: None,
            nth: 1,
            persistent: false,
            fault,
        }
    }

    /// Fail the first operation of any kind with `fault`.
    pub fn any_op(fault: Fault) -> Rule {
        Rule {
            kind: None,
            ..Rule::on(OpKind::Write, fault)
        }
    }

    /// Only on paths containing `s`.
    pub fn path(mut self, s: &str) -> Rule {
        self.path_contains = Some(s.to_owned());
        self
    }

    /// Never on operations of `kind`.
    pub fn except(mut self, kind: OpKind) -> Rule {
        self.except.push(kind);
        self
    }

    /// On the n-th matching operation (1-based; 0 is taken as 1).
    pub fn nth(mut self, n: u64) -> Rule {
        self.nth = n.max(1);
        self
    }

    /// On every matching operation from the n-th on.
    pub fn persistent(mut self) -> Rule {
        self.persistent = true;
        self
    }

    fn matches(&self, kind: OpKind, paths: &[&Path]) -> bool {
        self.kind.is_none_or(|k| k == kind)
            && !self.except.contains(&kind)
            && self.path_contains.as_deref().is_none_or(|s| {
                paths
                    .iter()
                    .any(|p| p.to_str().is_some_and(|p| p.contains(s)))
            })
    }
}

/// One operation seen, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpRecord {
    /// Its kind.
    pub kind: OpKind,
    /// The path (the source of a rename).
    pub path: PathBuf,
    /// The fault injected, if one was.
    pub fault: Option<Fault>,
}

/// Operations kept in the log; a runaway workload must not exhaust memory.
const LOG_CAP: usize = 1 << 20;

#[derive(Debug, Default)]
struct State {
    rules: Vec<(Rule, u64)>,
    counts: [u64; 9],
    log: Vec<OpRecord>,
    /// Bytes that may still be written; `None`: unlimited.
    space_left: Option<u64>,
    /// Operations failed with ENOSPC by the budget.
    budget_failures: u64,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
}

impl Shared {
    /// Count the operation and decide whether it fails. Every matching rule counts the hit,
    /// the first one due fires.
    fn check(&self, kind: OpKind, paths: &[&Path]) -> Option<Fault> {
        let mut st = self.state.lock();
        st.counts[kind.index()] += 1;
        let mut fired = None;
        for (rule, hits) in st.rules.iter_mut() {
            if !rule.matches(kind, paths) {
                continue;
            }
            *hits += 1;
            let due = *hits == rule.nth || (rule.persistent && *hits > rule.nth);
            if due && fired.is_none() {
                fired = Some(rule.fault);
            }
        }
        if st.log.len() < LOG_CAP {
            st.log.push(OpRecord {
                kind,
                path: paths.first().map(|p| p.to_path_buf()).unwrap_or_default(),
                fault: fired,
            });
        }
        fired
    }

    /// Take up to `want` bytes from the space budget: how many may be written (`want` when
    /// there is no budget), or ENOSPC when it is exhausted. `want == 0` checks only.
    fn take_space(&self, kind: OpKind, path: &Path, want: u64) -> io::Result<u64> {
        let mut st = self.state.lock();
        let Some(left) = st.space_left else {
            return Ok(want);
        };
        if left == 0 {
            st.budget_failures += 1;
            if st.log.len() < LOG_CAP {
                st.log.push(OpRecord {
                    kind,
                    path: path.to_path_buf(),
                    fault: Some(Fault::NoSpace),
                });
            }
            return Err(fault_error(Fault::NoSpace));
        }
        let n = want.min(left);
        st.space_left = Some(left - n);
        Ok(n)
    }
}

const EIO: i32 = 5;
const EINTR: i32 = 4;
const ENOSPC: i32 = 28;

fn fault_error(f: Fault) -> io::Error {
    match f {
        Fault::NoSpace => io::Error::from_raw_os_error(ENOSPC),
        Fault::Interrupted => io::Error::from_raw_os_error(EINTR),
        _ => io::Error::from_raw_os_error(EIO),
    }
}

/// The fault-injecting wrapper. Clones share rules and counters.
#[derive(Debug, Clone)]
pub struct FaultFs<F: FileSystem> {
    inner: F,
    /// Set when `F` is a [`SimFs`], for the fsync-failure modes that change the durable image.
    sim: Option<SimFs>,
    shared: Arc<Shared>,
}

impl<F: FileSystem> FaultFs<F> {
    /// Wrap `inner` with no rules.
    pub fn new(inner: F) -> FaultFs<F> {
        let sim = (&inner as &dyn Any).downcast_ref::<SimFs>().cloned();
        FaultFs {
            inner,
            sim,
            shared: Arc::new(Shared::default()),
        }
    }

    /// The wrapped file system (to heal: use it directly, or clear the rules).
    pub fn inner(&self) -> &F {
        &self.inner
    }

    /// Add a rule; its hit count starts now.
    pub fn add_rule(&self, rule: Rule) {
        self.shared.state.lock().rules.push((rule, 0));
    }

    /// Remove every rule (counters and log are kept).
    pub fn clear_rules(&self) {
        self.shared.state.lock().rules.clear();
    }

    /// Operations of `kind` seen so far.
    pub fn count(&self, kind: OpKind) -> u64 {
        self.shared.state.lock().counts[kind.index()]
    }

    /// Operations of every kind seen so far.
    pub fn total(&self) -> u64 {
        self.shared.state.lock().counts.iter().sum()
    }

    /// Operations seen so far that `rule` would match, ignoring its `nth` (for sweeps).
    pub fn count_matching(&self, rule: &Rule) -> u64 {
        let st = self.shared.state.lock();
        st.log
            .iter()
            .filter(|r| rule.matches(r.kind, &[r.path.as_path()]))
            .count() as u64
    }

    /// Every operation seen, in order (capped at about a million).
    pub fn log(&self) -> Vec<OpRecord> {
        self.shared.state.lock().log.clone()
    }

    /// Operations that had a fault injected.
    pub fn injected(&self) -> Vec<OpRecord> {
        let st = self.shared.state.lock();
        st.log
            .iter()
            .filter(|r| r.fault.is_some())
            .cloned()
            .collect()
    }

    /// Allow `bytes` more bytes of writes in total, after which writes, allocations and file
    /// creations fail with ENOSPC (a full disk); `None` removes the limit (space came back).
    pub fn set_space_budget(&self, bytes: Option<u64>) {
        self.shared.state.lock().space_left = bytes;
    }

    /// Bytes the budget still allows (`None`: no budget).
    pub fn space_left(&self) -> Option<u64> {
        self.shared.state.lock().space_left
    }

    /// Operations the space budget failed with ENOSPC so far.
    pub fn budget_failures(&self) -> u64 {
        self.shared.state.lock().budget_failures
    }

    /// Zero the counters and the log (rules keep their hit counts).
    pub fn reset_counts(&self) {
        let mut st = self.shared.state.lock();
        st.counts = [0; 9];
        st.log.clear();
    }

    fn wrap(&self, inner: Arc<dyn File>, sim: Option<Arc<SimFile>>, path: &Path) -> Arc<dyn File> {
        Arc::new(FaultFile {
            inner,
            sim,
            path: path.to_path_buf(),
            shared: self.shared.clone(),
        })
    }
}

/// A file opened through a [`FaultFs`]. Its rules match the path it was opened under.
#[derive(Debug)]
pub struct FaultFile {
    inner: Arc<dyn File>,
    sim: Option<Arc<SimFile>>,
    path: PathBuf,
    shared: Arc<Shared>,
}

impl FaultFile {
    fn check(&self, kind: OpKind) -> io::Result<()> {
        match self.shared.check(kind, &[&self.path]) {
            Some(Fault::ShortWrite) | None => Ok(()),
            Some(f) => Err(fault_error(f)),
        }
    }
}

impl File for FaultFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.inner.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        let mut buf = buf;
        match self.shared.check(OpKind::Write, &[&self.path]) {
            None => {}
            Some(Fault::ShortWrite) if buf.len() > 1 => buf = &buf[..buf.len() / 2],
            Some(Fault::ShortWrite) => {}
            Some(f) => return Err(fault_error(f)),
        }
        if buf.is_empty() {
            return self.inner.write_at(buf, offset);
        }
        // Like a real file system, a write that does not fit entirely is short; the next one
        // gets ENOSPC. (Overwrites are charged too: simple, and the engine never overwrites.)
        let n = self
            .shared
            .take_space(OpKind::Write, &self.path, buf.len() as u64)?;
        let written = self.inner.write_at(&buf[..n as usize], offset)?;
        if (written as u64) < n {
            // Return what the inner write did not use.
            if let Some(left) = self.shared.state.lock().space_left.as_mut() {
                *left += n - written as u64;
            }
        }
        Ok(written)
    }

    fn sync_data(&self) -> io::Result<()> {
        match self.shared.check(OpKind::SyncData, &[&self.path]) {
            None => self.inner.sync_data(),
            Some(Fault::SyncErrorButPersisted) => {
                match &self.sim {
                    Some(s) => {
                        let _ = s.fail_sync(FsyncFailMode::ErrorButPersisted);
                    }
                    None => self.inner.sync_data()?,
                }
                Err(fault_error(Fault::Eio))
            }
            Some(Fault::SyncErrorAndDrop) => Err(match &self.sim {
                Some(s) => s.fail_sync(FsyncFailMode::ErrorAndDrop),
                None => fault_error(Fault::Eio),
            }),
            Some(f) => Err(fault_error(f)),
        }
    }

    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        self.check(OpKind::Allocate)?;
        // Preallocation reserves no budget (the budget counts bytes written), but a full disk
        // refuses it.
        self.shared.take_space(OpKind::Allocate, &self.path, 0)?;
        self.inner.allocate(len)
    }

    fn truncate(&self, len: u64) -> io::Result<()> {
        self.check(OpKind::Truncate)?;
        self.inner.truncate(len)
    }

    fn raw_fd(&self) -> Option<i32> {
        // An io_uring write on the descriptor would bypass the rules.
        None
    }
}

impl<F: FileSystem> FaultFs<F> {
    fn check(&self, kind: OpKind, paths: &[&Path]) -> io::Result<()> {
        match self.shared.check(kind, paths) {
            Some(Fault::ShortWrite) | None => Ok(()),
            Some(f) => Err(fault_error(f)),
        }
    }
}

impl<F: FileSystem> FileSystem for FaultFs<F> {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }

    fn create(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        self.check(OpKind::Create, &[path])?;
        // A full disk has no room for a new inode's first block either.
        self.shared.take_space(OpKind::Create, path, 0)?;
        match &self.sim {
            Some(s) => {
                let f = s.create_sim(path)?;
                Ok(self.wrap(f.clone(), Some(f), path))
            }
            None => Ok(self.wrap(self.inner.create(path)?, None, path)),
        }
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        self.check(OpKind::Open, &[path])?;
        match &self.sim {
            Some(s) => {
                let f = s.open_sim(path)?;
                Ok(self.wrap(f.clone(), Some(f), path))
            }
            None => Ok(self.wrap(self.inner.open(path)?, None, path)),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.check(OpKind::Rename, &[from, to])?;
        self.inner.rename(from, to)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        // A new name is a creation.
        self.check(OpKind::Create, &[to])?;
        self.inner.hard_link(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.check(OpKind::Remove, &[path])?;
        self.inner.remove(path)
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        self.check(OpKind::Remove, &[dir])?;
        self.inner.remove_dir(dir)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list(dir)
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        self.inner.exists(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.check(OpKind::SyncDir, &[dir])?;
        self.inner.sync_dir(dir)
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn LockGuard>> {
        self.inner.lock(path)
    }
}

#[cfg(test)]
mod tests {
    use super::super::sim::CrashPolicy;
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn nth_and_persistent_rules_with_path_filter() {
        let fs = FaultFs::new(SimFs::new());
        fs.create_dir_all(&p("/wal")).unwrap();
        fs.add_rule(Rule::on(OpKind::Write, Fault::NoSpace).path("/wal/").nth(2));
        let w = fs.create(&p("/wal/1.wal")).unwrap();
        let other = fs.create(&p("/x")).unwrap();
        other.write_all_at(b"a", 0).unwrap();
        w.write_all_at(b"a", 0).unwrap();
        let e = w.write_all_at(b"b", 1).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(28));
        w.write_all_at(b"c", 1).unwrap();
        assert_eq!(fs.count(OpKind::Write), 4);
        assert_eq!(fs.injected().len(), 1);

        fs.add_rule(Rule::on(OpKind::SyncData, Fault::Eio).persistent());
        assert!(w.sync_data().is_err());
        assert!(other.sync_data().is_err());
        fs.clear_rules();
        w.sync_data().unwrap();
    }

    #[test]
    fn every_kind_can_fail() {
        let fs = FaultFs::new(SimFs::new());
        let f = fs.create(&p("/a")).unwrap();
        fs.add_rule(Rule::any_op(Fault::Eio).persistent());
        assert!(f.write_at(b"x", 0).is_err());
        assert!(f.sync_data().is_err());
        assert!(f.allocate(10).is_err());
        assert!(f.truncate(0).is_err());
        assert!(fs.create(&p("/b")).is_err());
        assert!(fs.open(&p("/a")).is_err());
        assert!(fs.rename(&p("/a"), &p("/c")).is_err());
        assert!(fs.remove(&p("/a")).is_err());
        assert!(fs.sync_dir(&p("/")).is_err());
        for k in OpKind::ALL {
            assert!(fs.count(k) >= 1, "{k:?} not counted");
        }
        // Nothing happened underneath.
        assert_eq!(fs.inner().contents(&p("/a")).unwrap(), b"");
        assert!(!fs.inner().exists(&p("/b")).unwrap());
    }

    #[test]
    fn sync_failure_modes_reach_the_sim_durable_image() {
        let sim = SimFs::new();
        let fs = FaultFs::new(sim.clone());
        let f = fs.create(&p("/f")).unwrap();
        fs.sync_dir(&p("/")).unwrap();
        f.write_all_at(b"abc", 0).unwrap();
        fs.add_rule(Rule::on(OpKind::SyncData, Fault::SyncErrorAndDrop));
        assert!(f.sync_data().is_err());
        f.sync_data().unwrap();
        assert_eq!(
            sim.crash(CrashPolicy::DropAll, 0)
                .contents(&p("/f"))
                .unwrap(),
            b""
        );
        f.write_all_at(b"abc", 0).unwrap();
        fs.add_rule(Rule::on(OpKind::SyncData, Fault::SyncErrorButPersisted));
        assert!(f.sync_data().is_err());
        assert_eq!(
            sim.crash(CrashPolicy::DropAll, 0)
                .contents(&p("/f"))
                .unwrap(),
            b"abc"
        );
    }

    #[test]
    fn short_writes_and_eintr_are_continued_by_write_all_at() {
        let fs = FaultFs::new(SimFs::new());
        let f = fs.create(&p("/a")).unwrap();
        fs.add_rule(Rule::on(OpKind::Write, Fault::ShortWrite).nth(1));
        assert_eq!(f.write_at(b"abcdef", 0).unwrap(), 3);
        // The first rule due fires: EINTR on the 2nd write from now, short writes otherwise.
        fs.add_rule(Rule::on(OpKind::Write, Fault::Interrupted).nth(2));
        fs.add_rule(Rule::on(OpKind::Write, Fault::ShortWrite).persistent());
        f.write_all_at(b"0123456789", 0).unwrap();
        assert_eq!(fs.inner().contents(&p("/a")).unwrap(), b"0123456789");
        assert!(fs
            .injected()
            .iter()
            .any(|r| r.fault == Some(Fault::Interrupted)));
        // EINTR on a sync is an error like any other: an fsync is never retried.
        fs.clear_rules();
        fs.add_rule(Rule::on(OpKind::SyncData, Fault::Interrupted));
        assert_eq!(
            f.sync_data().unwrap_err().kind(),
            io::ErrorKind::Interrupted
        );
    }

    #[test]
    fn space_budget_fills_up_then_frees() {
        let fs = FaultFs::new(SimFs::new());
        let f = fs.create(&p("/a")).unwrap();
        fs.set_space_budget(Some(5));
        assert_eq!(f.write_at(b"abc", 0).unwrap(), 3);
        // Straddles the limit: short, then ENOSPC.
        assert_eq!(f.write_at(b"defg", 3).unwrap(), 2);
        let e = f.write_at(b"fg", 5).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(28));
        assert!(crate::error::is_no_space_io(&e));
        let e = f.write_all_at(b"xyz", 5).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(28));
        assert!(fs.create(&p("/b")).is_err());
        assert!(f.allocate(100).is_err());
        assert_eq!(fs.budget_failures(), 4);
        assert_eq!(fs.space_left(), Some(0));
        fs.set_space_budget(None);
        f.write_all_at(b"fg", 5).unwrap();
        assert_eq!(fs.inner().contents(&p("/a")).unwrap(), b"abcdefg");
        fs.create(&p("/b")).unwrap();
    }

    #[test]
    fn count_matching_supports_sweeps() {
        let fs = FaultFs::new(SimFs::new());
        let f = fs.create(&p("/MANIFEST-1")).unwrap();
        for i in 0..5 {
            f.write_all_at(b"x", i).unwrap();
        }
        let r = Rule::on(OpKind::Write, Fault::Eio).path("MANIFEST");
        assert_eq!(fs.count_matching(&r), 5);
        assert_eq!(fs.count_matching(&Rule::any_op(Fault::Eio)), 6);
        assert_eq!(
            fs.count_matching(&Rule::any_op(Fault::Eio).except(OpKind::Create)),
            5
        );
        assert!(fs.open(&p("/MANIFEST-1")).unwrap().raw_fd().is_none());
    }
}
