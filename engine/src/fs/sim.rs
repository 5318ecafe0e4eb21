//! `SimFs`: an in-memory, deterministic model of a POSIX file system that can lose power
//! (RELIABILITY.md §2.1 b).
//!
//! Every file keeps two images: the *written* one, which reads see (the page cache), and the
//! *durable* one, which survives a crash, plus the ordered list of data operations done since
//! the last `sync_data`. Every directory keeps the entries reads see, the durable entries, and
//! the entry operations (create, rename, remove, mkdir) done since the last `sync_dir`. The
//! model is strict on purpose: nothing reaches the durable image without an explicit sync, so a
//! missing `sync_data` or `sync_dir` in the engine shows up as lost data after [`SimFs::crash`].
//!
//! [`SimFs::crash`] returns a *new* file system holding only what a power loss would leave; the
//! old one keeps working, because the crashed engine's threads may still be writing to it.
//!
//! Simplifications, each chosen because the engine does not depend on the missing behaviour:
//! directories cannot be renamed or removed; a rename across directories is an unlink in one
//! and a link in the other (each durable with its own directory's sync); paths are normalized
//! lexically and relative paths are taken from `/`.

use std::collections::{BTreeMap, HashSet};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{File, FileSystem, LockGuard};

/// Files past this size are refused: a wild offset from a bug must fail, not exhaust memory.
const MAX_FILE_SIZE: u64 = 1 << 32;

/// What survives of the unsynced state when [`SimFs::crash`] simulates a power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPolicy {
    /// Only synced data and synced directory entries survive (the LevelDB/RocksDB/Pebble model).
    DropAll,
    /// Per file, a random prefix of the unsynced data operations survives whole; per
    /// directory, a random subset of the unsynced entry operations survives (a strict file
    /// system does not order them).
    KeepRandomPrefix,
    /// As `KeepRandomPrefix`, but the write at the cut and the writes after it may survive in
    /// pieces: each `sector`-aligned piece independently, so later pages can persist while
    /// earlier ones do not (LazyFS's and SQLite `test6.c`'s model).
    Tear {
        /// Sector size in bytes (512 on most disks).
        sector: u64,
    },
    /// As `Tear`, but a piece that does not survive may hold garbage (zeros or random bytes)
    /// instead of the old content (LevelDB #251, PebblesDB #28).
    Garble {
        /// Sector size in bytes.
        sector: u64,
    },
}

/// What a failed fdatasync did to the durable image (Linux semantics; "fsyncgate").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncFailMode {
    /// EIO, and the dirty data is dropped from the durable image but stays readable: a later
    /// successful sync does *not* bring it back (Linux marks the pages clean).
    ErrorAndDrop,
    /// EIO, but the data did reach the durable image (RocksDB #4990).
    ErrorButPersisted,
}

type Ino = u64;

#[derive(Debug, Clone)]
enum DataOp {
    Write { off: u64, data: Vec<u8> },
    SetLen(u64),
}

#[derive(Debug, Clone, Default)]
struct Inode {
    written: Vec<u8>,
    durable: Vec<u8>,
    unsynced: Vec<DataOp>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    File(Ino),
    Dir,
}

/// An entry operation not yet made durable by `sync_dir`. Removes and renames carry the node so
/// that applying a subset of them after a crash cannot move or drop an unrelated file.
#[derive(Debug, Clone)]
enum EntryOp {
    Link {
        name: String,
        node: Node,
    },
    Unlink {
        name: String,
        node: Node,
    },
    Rename {
        from: String,
        to: String,
        node: Node,
    },
}

#[derive(Debug, Clone, Default)]
struct Dir {
    current: BTreeMap<String, Node>,
    durable: BTreeMap<String, Node>,
    pending: Vec<EntryOp>,
}

#[derive(Debug, Default, Clone)]
struct State {
    /// Keyed by normalized path; `/` always exists and is durable.
    dirs: BTreeMap<PathBuf, Dir>,
    /// Every inode ever created, including unlinked ones (the graveyard): a durable entry may
    /// still name a removed file until its directory is synced.
    inodes: BTreeMap<Ino, Inode>,
    /// Removed directories (the graveyard of `dirs`): until the parent is synced, a crash may
    /// bring the entry back, and with it whatever of the directory's own entries was durable.
    removed_dirs: BTreeMap<PathBuf, Dir>,
    next_ino: Ino,
    locks: HashSet<PathBuf>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
}

/// The in-memory crash-simulating file system. Clones share one state.
#[derive(Debug, Clone)]
pub struct SimFs {
    shared: Arc<Shared>,
}

impl Default for SimFs {
    fn default() -> Self {
        SimFs::new()
    }
}

/// Deterministic generator (SplitMix64) so that a crash replays from its seed; the engine
/// library does not depend on `rand`.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..=n`.
    fn upto(&mut self, n: usize) -> usize {
        (self.next() % (n as u64 + 1)) as usize
    }
    /// True with probability 1/d.
    fn one_in(&mut self, d: u64) -> bool {
        self.next() % d.max(1) == 0
    }
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.to_owned())
}

fn not_found(p: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file", p.display()),
    )
}

/// Lexical normalization; relative paths are taken from `/`.
fn normalize(p: &Path) -> io::Result<PathBuf> {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(s) => {
                if s.to_str().is_none() {
                    return Err(invalid("SimFs paths must be UTF-8"));
                }
                out.push(s);
            }
        }
    }
    Ok(out)
}

/// Parent directory and entry name of a normalized path (not `/`).
fn split(p: &Path) -> io::Result<(PathBuf, String)> {
    let parent = p.parent().ok_or_else(|| invalid("the root has no name"))?;
    let name = p
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| invalid("path has no file name"))?;
    Ok((parent.to_path_buf(), name.to_owned()))
}

fn to_usize(n: u64) -> io::Result<usize> {
    if n > MAX_FILE_SIZE {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            "SimFs file size limit",
        ));
    }
    usize::try_from(n).map_err(|_| invalid("offset does not fit in memory"))
}

fn apply_data(buf: &mut Vec<u8>, op: &DataOp) {
    match op {
        DataOp::Write { off, data } => {
            // Offsets were checked against MAX_FILE_SIZE when the op was recorded.
            let off = *off as usize;
            let end = off + data.len();
            if buf.len() < end {
                buf.resize(end, 0);
            }
            buf[off..end].copy_from_slice(data);
        }
        DataOp::SetLen(n) => buf.resize(*n as usize, 0),
    }
}

fn apply_entry(entries: &mut BTreeMap<String, Node>, op: &EntryOp) {
    match op {
        EntryOp::Link { name, node } => {
            entries.insert(name.clone(), *node);
        }
        EntryOp::Unlink { name, node } => {
            if entries.get(name) == Some(node) {
                entries.remove(name);
            }
        }
        EntryOp::Rename { from, to, node } => {
            // The rename's journal entry names the inode, so it lands even if the create that
            // preceded it did not.
            if entries.get(from) == Some(node) {
                entries.remove(from);
            }
            entries.insert(to.clone(), *node);
        }
    }
}

/// The durable image of one file after a crash under `policy`.
fn crash_image(ino: &Inode, policy: CrashPolicy, rng: &mut Rng) -> Vec<u8> {
    let mut img = ino.durable.clone();
    let ops = &ino.unsynced;
    let (keep, sector, garble) = match policy {
        CrashPolicy::DropAll => return img,
        CrashPolicy::KeepRandomPrefix => {
            let k = rng.upto(ops.len());
            for op in &ops[..k] {
                apply_data(&mut img, op);
            }
            return img;
        }
        CrashPolicy::Tear { sector } => (rng.upto(ops.len()), sector.max(1), false),
        CrashPolicy::Garble { sector } => (rng.upto(ops.len()), sector.max(1), true),
    };
    for op in &ops[..keep] {
        apply_data(&mut img, op);
    }
    for (i, op) in ops[keep..].iter().enumerate() {
        // Length changes are metadata: after the cut they are lost with the journal.
        let DataOp::Write { off, data } = op else {
            continue;
        };
        // The write at the cut is likelier to be partly on disk than the later ones.
        let odds = if i == 0 { 2 } else { 4 };
        let mut pos = *off;
        let end = off + data.len() as u64;
        while pos < end {
            let piece_end = ((pos / sector + 1) * sector).min(end);
            let lo = (pos - off) as usize;
            let hi = (piece_end - off) as usize;
            if rng.one_in(odds) {
                apply_data(
                    &mut img,
                    &DataOp::Write {
                        off: pos,
                        data: data[lo..hi].to_vec(),
                    },
                );
            } else if garble && rng.one_in(2) {
                let junk: Vec<u8> = if rng.one_in(2) {
                    vec![0; hi - lo]
                } else {
                    (lo..hi).map(|_| rng.next() as u8).collect()
                };
                apply_data(
                    &mut img,
                    &DataOp::Write {
                        off: pos,
                        data: junk,
                    },
                );
            }
            pos = piece_end;
        }
    }
    img
}

impl State {
    fn lookup(&self, p: &Path) -> Option<Node> {
        if p == Path::new("/") {
            return Some(Node::Dir);
        }
        let parent = p.parent()?;
        let name = p.file_name()?.to_str()?;
        self.dirs.get(parent)?.current.get(name).copied()
    }

    fn file_ino(&self, p: &Path) -> io::Result<Ino> {
        match self.lookup(p) {
            Some(Node::File(i)) => Ok(i),
            Some(Node::Dir) => Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("{}: is a directory", p.display()),
            )),
            None => Err(not_found(p)),
        }
    }

    fn dir_mut(&mut self, p: &Path) -> io::Result<&mut Dir> {
        self.dirs.get_mut(p).ok_or_else(|| not_found(p))
    }

    fn new_file(&mut self, p: &Path) -> io::Result<Ino> {
        let (parent, name) = split(p)?;
        let ino = self.next_ino;
        let dir = self.dir_mut(&parent)?;
        if dir.current.contains_key(&name) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{}: exists", p.display()),
            ));
        }
        let node = Node::File(ino);
        dir.current.insert(name.clone(), node);
        dir.pending.push(EntryOp::Link { name, node });
        self.next_ino += 1;
        self.inodes.insert(ino, Inode::default());
        Ok(ino)
    }

    /// Directory entries after a crash: the durable ones plus a policy-chosen subset of the
    /// pending operations, applied in their original order.
    fn crashed_entries(dir: &Dir, policy: CrashPolicy, rng: &mut Rng) -> BTreeMap<String, Node> {
        let mut entries = dir.durable.clone();
        if policy != CrashPolicy::DropAll {
            for op in &dir.pending {
                if rng.one_in(2) {
                    apply_entry(&mut entries, op);
                }
            }
        }
        entries
    }
}

impl SimFs {
    /// An empty file system holding only `/`.
    pub fn new() -> SimFs {
        let mut st = State {
            next_ino: 1,
            ..State::default()
        };
        st.dirs.insert(PathBuf::from("/"), Dir::default());
        SimFs {
            shared: Arc::new(Shared {
                state: Mutex::new(st),
            }),
        }
    }

    /// An independent copy of the whole file system as it is now: what reads see, what is
    /// durable and what is pending, as if the process had been killed (SIGKILL keeps the page
    /// cache) or the directory backed up. Locks are not copied (their holders are not).
    pub fn fork(&self) -> SimFs {
        let mut st = self.shared.state.lock().clone();
        st.locks.clear();
        SimFs {
            shared: Arc::new(Shared {
                state: Mutex::new(st),
            }),
        }
    }

    /// The state a power loss would leave, as a new file system; `self` is unchanged and keeps
    /// working. Deterministic for a given state, `policy` and `seed`. Locks are not carried
    /// over (a crash kills their holders).
    pub fn crash(&self, policy: CrashPolicy, seed: u64) -> SimFs {
        let st = self.shared.state.lock();
        let mut rng = Rng(seed);
        let mut out = State {
            next_ino: st.next_ino,
            ..State::default()
        };
        // Walk from the root so a directory whose own entry did not survive takes its whole
        // subtree with it.
        let mut stack = vec![PathBuf::from("/")];
        while let Some(path) = stack.pop() {
            let Some(dir) = st.dirs.get(&path).or_else(|| st.removed_dirs.get(&path)) else {
                continue;
            };
            let entries = State::crashed_entries(dir, policy, &mut rng);
            for (name, node) in &entries {
                match node {
                    Node::Dir => stack.push(path.join(name)),
                    Node::File(i) => {
                        if out.inodes.contains_key(i) {
                            continue;
                        }
                        if let Some(ino) = st.inodes.get(i) {
                            let img = crash_image(ino, policy, &mut rng);
                            out.inodes.insert(
                                *i,
                                Inode {
                                    written: img.clone(),
                                    durable: img,
                                    unsynced: Vec::new(),
                                },
                            );
                        }
                    }
                }
            }
            out.dirs.insert(
                path,
                Dir {
                    current: entries.clone(),
                    durable: entries,
                    pending: Vec::new(),
                },
            );
        }
        // An entry naming an inode that vanished cannot occur (inodes are never freed), but a
        // dangling one would make reads fail obscurely, so drop it defensively.
        let live: HashSet<Ino> = out.inodes.keys().copied().collect();
        for d in out.dirs.values_mut() {
            d.current.retain(|_, n| match n {
                Node::File(i) => live.contains(i),
                Node::Dir => true,
            });
            d.durable = d.current.clone();
        }
        SimFs {
            shared: Arc::new(Shared {
                state: Mutex::new(out),
            }),
        }
    }

    /// Create a file, returning the concrete handle (for [`SimFile::fail_sync`]).
    pub fn create_sim(&self, path: &Path) -> io::Result<Arc<SimFile>> {
        let p = normalize(path)?;
        let ino = self.shared.state.lock().new_file(&p)?;
        Ok(Arc::new(SimFile {
            shared: self.shared.clone(),
            ino,
        }))
    }

    /// Open a file, returning the concrete handle (for [`SimFile::fail_sync`]).
    pub fn open_sim(&self, path: &Path) -> io::Result<Arc<SimFile>> {
        let p = normalize(path)?;
        let ino = self.shared.state.lock().file_ino(&p)?;
        Ok(Arc::new(SimFile {
            shared: self.shared.clone(),
            ino,
        }))
    }

    /// What reads of `path` see now, or `None` if it is not a file.
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        let p = normalize(path).ok()?;
        let st = self.shared.state.lock();
        let ino = st.file_ino(&p).ok()?;
        st.inodes.get(&ino).map(|i| i.written.clone())
    }

    /// Replace what reads of `path` see (and its durable image): for corruption tests.
    pub fn set_contents(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let p = normalize(path)?;
        let mut st = self.shared.state.lock();
        let ino = st.file_ino(&p)?;
        let node = st.inodes.get_mut(&ino).ok_or_else(|| not_found(&p))?;
        node.written = bytes.to_vec();
        node.durable = bytes.to_vec();
        node.unsynced.clear();
        Ok(())
    }

    /// Every file reachable now, sorted.
    pub fn files(&self) -> Vec<PathBuf> {
        let st = self.shared.state.lock();
        let mut out: Vec<PathBuf> = st
            .dirs
            .iter()
            .flat_map(|(d, dir)| {
                dir.current.iter().filter_map(move |(n, node)| match node {
                    Node::File(_) => Some(d.join(n)),
                    Node::Dir => None,
                })
            })
            .collect();
        out.sort();
        out
    }

    /// Bytes and entry operations not yet durable: `(unsynced data ops, pending entry ops)`.
    pub fn unsynced(&self) -> (usize, usize) {
        let st = self.shared.state.lock();
        (
            st.inodes.values().map(|i| i.unsynced.len()).sum(),
            st.dirs.values().map(|d| d.pending.len()).sum(),
        )
    }
}

/// An open file of a [`SimFs`]; it keeps its inode after a rename or remove, as a descriptor
/// does.
#[derive(Debug)]
pub struct SimFile {
    shared: Arc<Shared>,
    ino: Ino,
}

impl SimFile {
    fn with<T>(&self, f: impl FnOnce(&mut Inode) -> io::Result<T>) -> io::Result<T> {
        let mut st = self.shared.state.lock();
        let ino = st
            .inodes
            .get_mut(&self.ino)
            .ok_or_else(|| io::Error::other("SimFs inode vanished"))?;
        f(ino)
    }

    fn record(&self, op: DataOp) -> io::Result<()> {
        self.with(|i| {
            apply_data(&mut i.written, &op);
            i.unsynced.push(op);
            Ok(())
        })
    }

    /// An fdatasync that fails with EIO, with the durable-image effect of `mode`.
    pub fn fail_sync(&self, mode: FsyncFailMode) -> io::Error {
        let r = self.with(|i| {
            let ops = std::mem::take(&mut i.unsynced);
            if mode == FsyncFailMode::ErrorButPersisted {
                for op in &ops {
                    apply_data(&mut i.durable, op);
                }
            }
            Ok(())
        });
        match r {
            Ok(()) => io::Error::from_raw_os_error(5),
            Err(e) => e,
        }
    }
}

impl File for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.with(|i| {
            let Ok(off) = usize::try_from(offset) else {
                return Ok(0);
            };
            if off >= i.written.len() {
                return Ok(0);
            }
            let n = buf.len().min(i.written.len() - off);
            buf[..n].copy_from_slice(&i.written[off..off + n]);
            Ok(n)
        })
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        to_usize(offset.saturating_add(buf.len() as u64))?;
        self.record(DataOp::Write {
            off: offset,
            data: buf.to_vec(),
        })?;
        Ok(buf.len())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.with(|i| {
            for op in std::mem::take(&mut i.unsynced) {
                apply_data(&mut i.durable, &op);
            }
            Ok(())
        })
    }

    fn len(&self) -> io::Result<u64> {
        self.with(|i| Ok(i.written.len() as u64))
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        to_usize(len)?;
        if len <= self.len()? {
            return Ok(());
        }
        self.record(DataOp::SetLen(len))
    }

    fn truncate(&self, len: u64) -> io::Result<()> {
        to_usize(len)?;
        self.record(DataOp::SetLen(len))
    }

    fn raw_fd(&self) -> Option<i32> {
        // No descriptor: the WAL then uses its pwrite device, through this trait.
        None
    }
}

/// A lock held on a [`SimFs`] path.
#[derive(Debug)]
pub struct SimLock {
    shared: Arc<Shared>,
    path: PathBuf,
}

impl LockGuard for SimLock {}

impl Drop for SimLock {
    fn drop(&mut self) {
        self.shared.state.lock().locks.remove(&self.path);
    }
}

impl FileSystem for SimFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let p = normalize(dir)?;
        let mut st = self.shared.state.lock();
        let mut cur = PathBuf::from("/");
        for c in p.components().skip(1) {
            let Component::Normal(name) = c else {
                continue;
            };
            let name = name.to_str().ok_or_else(|| invalid("non-UTF-8 path"))?;
            let child = cur.join(name);
            match st.lookup(&child) {
                Some(Node::Dir) => {}
                Some(Node::File(_)) => {
                    return Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        format!("{}: a file", child.display()),
                    ))
                }
                None => {
                    let parent = st.dir_mut(&cur)?;
                    parent.current.insert(name.to_owned(), Node::Dir);
                    parent.pending.push(EntryOp::Link {
                        name: name.to_owned(),
                        node: Node::Dir,
                    });
                    st.dirs.insert(child.clone(), Dir::default());
                }
            }
            cur = child;
        }
        Ok(())
    }

    fn create(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        Ok(self.create_sim(path)?)
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        Ok(self.open_sim(path)?)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let from = normalize(from)?;
        let to = normalize(to)?;
        let mut st = self.shared.state.lock();
        let node = Node::File(st.file_ino(&from)?);
        if st.lookup(&to) == Some(Node::Dir) {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("{}: is a directory", to.display()),
            ));
        }
        let (fdir, fname) = split(&from)?;
        let (tdir, tname) = split(&to)?;
        if !st.dirs.contains_key(&tdir) {
            return Err(not_found(&tdir));
        }
        if from == to {
            return Ok(());
        }
        if fdir == tdir {
            let d = st.dir_mut(&fdir)?;
            d.current.remove(&fname);
            d.current.insert(tname.clone(), node);
            d.pending.push(EntryOp::Rename {
                from: fname,
                to: tname,
                node,
            });
        } else {
            let d = st.dir_mut(&fdir)?;
            d.current.remove(&fname);
            d.pending.push(EntryOp::Unlink { name: fname, node });
            let d = st.dir_mut(&tdir)?;
            d.current.insert(tname.clone(), node);
            d.pending.push(EntryOp::Link { name: tname, node });
        }
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let p = normalize(path)?;
        let mut st = self.shared.state.lock();
        let node = Node::File(st.file_ino(&p)?);
        let (dir, name) = split(&p)?;
        let d = st.dir_mut(&dir)?;
        d.current.remove(&name);
        // The inode stays in `inodes` (the graveyard): the durable entry may bring it back.
        d.pending.push(EntryOp::Unlink { name, node });
        Ok(())
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        let p = normalize(dir)?;
        let mut st = self.shared.state.lock();
        match st.lookup(&p) {
            Some(Node::Dir) if p != Path::new("/") => {}
            Some(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::NotADirectory,
                    format!("{}: not a removable directory", p.display()),
                ))
            }
            None => return Err(not_found(&p)),
        }
        if !st.dir_mut(&p)?.current.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::DirectoryNotEmpty,
                format!("{}: directory not empty", p.display()),
            ));
        }
        let (parent, name) = split(&p)?;
        let d = st.dir_mut(&parent)?;
        d.current.remove(&name);
        d.pending.push(EntryOp::Unlink {
            name,
            node: Node::Dir,
        });
        if let Some(old) = st.dirs.remove(&p) {
            st.removed_dirs.insert(p, old);
        }
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let p = normalize(dir)?;
        let st = self.shared.state.lock();
        let d = st.dirs.get(&p).ok_or_else(|| not_found(&p))?;
        Ok(d.current.keys().cloned().collect())
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        let p = normalize(path)?;
        Ok(self.shared.state.lock().lookup(&p).is_some())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let p = normalize(dir)?;
        let mut st = self.shared.state.lock();
        let d = st.dir_mut(&p)?;
        d.durable = d.current.clone();
        d.pending.clear();
        Ok(())
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn LockGuard>> {
        let p = normalize(path)?;
        let mut st = self.shared.state.lock();
        if st.locks.contains(&p) {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        // Like flock on a real file system, the lock file is created if missing.
        if st.lookup(&p).is_none() {
            st.new_file(&p)?;
        }
        st.locks.insert(p.clone());
        Ok(Box::new(SimLock {
            shared: self.shared.clone(),
            path: p,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    fn read_all(fs: &SimFs, path: &str) -> Option<Vec<u8>> {
        fs.contents(&p(path))
    }

    /// `/d` durable, with file `/d/f` created and synced (entry and `base` data).
    fn setup(base: &[u8]) -> (SimFs, Arc<dyn File>) {
        let fs = SimFs::new();
        fs.create_dir_all(&p("/d")).unwrap();
        fs.sync_dir(&p("/")).unwrap();
        let f = fs.create(&p("/d/f")).unwrap();
        f.write_all_at(base, 0).unwrap();
        f.sync_data().unwrap();
        fs.sync_dir(&p("/d")).unwrap();
        (fs, f)
    }

    #[test]
    fn reads_see_written_bytes_and_crash_keeps_only_synced_ones() {
        let (fs, f) = setup(b"hello");
        f.write_all_at(b" world", 5).unwrap();
        assert_eq!(read_all(&fs, "/d/f").unwrap(), b"hello world");
        let c = fs.crash(CrashPolicy::DropAll, 1);
        assert_eq!(read_all(&c, "/d/f").unwrap(), b"hello");
        // The old file system keeps working after the crash image was taken.
        f.write_all_at(b"!", 11).unwrap();
        assert_eq!(read_all(&fs, "/d/f").unwrap(), b"hello world!");
        assert_eq!(read_all(&c, "/d/f").unwrap(), b"hello");
    }

    #[test]
    fn fork_copies_written_and_durable_state_independently() {
        let (fs, f) = setup(b"synced");
        f.write_all_at(b"+dirty", 6).unwrap();
        let _lock = fs.lock(&p("/LOCK")).unwrap();
        let copy = fs.fork();
        assert_eq!(read_all(&copy, "/d/f").unwrap(), b"synced+dirty");
        // The copy keeps the distinction between durable and pending bytes...
        assert_eq!(
            read_all(&copy.crash(CrashPolicy::DropAll, 0), "/d/f").unwrap(),
            b"synced"
        );
        // ...does not share later writes either way, and holds no lock.
        f.write_all_at(b"!", 12).unwrap();
        copy.open(&p("/d/f"))
            .unwrap()
            .write_all_at(b"?", 12)
            .unwrap();
        assert_eq!(read_all(&fs, "/d/f").unwrap(), b"synced+dirty!");
        assert_eq!(read_all(&copy, "/d/f").unwrap(), b"synced+dirty?");
        assert!(copy.lock(&p("/LOCK")).is_ok());
    }

    #[test]
    fn drop_all_loses_unsynced_entries_and_restores_removed_files() {
        let (fs, _f) = setup(b"x");
        let g = fs.create(&p("/d/g")).unwrap();
        g.write_all_at(b"gg", 0).unwrap();
        g.sync_data().unwrap();
        fs.remove(&p("/d/f")).unwrap();
        assert!(!fs.exists(&p("/d/f")).unwrap());
        let c = fs.crash(CrashPolicy::DropAll, 7);
        assert_eq!(c.list(&p("/d")).unwrap(), vec!["f".to_string()]);
        assert_eq!(read_all(&c, "/d/f").unwrap(), b"x");
        fs.sync_dir(&p("/d")).unwrap();
        let c = fs.crash(CrashPolicy::DropAll, 7);
        assert_eq!(c.list(&p("/d")).unwrap(), vec!["g".to_string()]);
    }

    #[test]
    fn unsynced_directory_takes_its_subtree() {
        let fs = SimFs::new();
        fs.create_dir_all(&p("/a/b")).unwrap();
        let f = fs.create(&p("/a/b/f")).unwrap();
        f.sync_data().unwrap();
        fs.sync_dir(&p("/a/b")).unwrap();
        fs.sync_dir(&p("/a")).unwrap();
        // `/a` itself was never made durable in `/`.
        let c = fs.crash(CrashPolicy::DropAll, 0);
        assert!(!c.exists(&p("/a")).unwrap());
        fs.sync_dir(&p("/")).unwrap();
        let c = fs.crash(CrashPolicy::DropAll, 0);
        assert!(c.exists(&p("/a/b/f")).unwrap());
    }

    #[test]
    fn remove_dir_takes_empty_directories_and_is_durable_only_after_parent_sync() {
        let fs = SimFs::new();
        fs.create_dir_all(&p("/a/b")).unwrap();
        let f = fs.create(&p("/a/b/f")).unwrap();
        f.sync_data().unwrap();
        for d in ["/a/b", "/a", "/"] {
            fs.sync_dir(&p(d)).unwrap();
        }
        let e = fs.remove_dir(&p("/a/b")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::DirectoryNotEmpty);
        assert_eq!(
            fs.remove_dir(&p("/a/b/f")).unwrap_err().kind(),
            io::ErrorKind::NotADirectory
        );
        assert_eq!(
            fs.remove_dir(&p("/a/x")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        fs.remove(&p("/a/b/f")).unwrap();
        fs.remove_dir(&p("/a/b")).unwrap();
        assert!(!fs.exists(&p("/a/b")).unwrap());
        assert!(fs.list(&p("/a/b")).is_err());
        assert!(fs.create(&p("/a/b/g")).is_err());
        // Neither the unlink nor the rmdir was synced: the directory comes back with its file.
        let c = fs.crash(CrashPolicy::DropAll, 0);
        assert!(c.exists(&p("/a/b/f")).unwrap());
        fs.sync_dir(&p("/a/b")).unwrap_err();
        fs.sync_dir(&p("/a")).unwrap();
        let c = fs.crash(CrashPolicy::DropAll, 0);
        assert!(!c.exists(&p("/a/b")).unwrap());
        // A directory made again under the same name is a new, empty one.
        fs.create_dir_all(&p("/a/b")).unwrap();
        assert!(fs.list(&p("/a/b")).unwrap().is_empty());
    }

    #[test]
    fn rename_is_durable_only_after_dir_sync() {
        let (fs, _f) = setup(b"old");
        let t = fs.create(&p("/d/t")).unwrap();
        t.write_all_at(b"new", 0).unwrap();
        t.sync_data().unwrap();
        fs.rename(&p("/d/t"), &p("/d/f")).unwrap();
        assert_eq!(read_all(&fs, "/d/f").unwrap(), b"new");
        let c = fs.crash(CrashPolicy::DropAll, 3);
        assert_eq!(read_all(&c, "/d/f").unwrap(), b"old");
        fs.sync_dir(&p("/d")).unwrap();
        let c = fs.crash(CrashPolicy::DropAll, 3);
        assert_eq!(read_all(&c, "/d/f").unwrap(), b"new");
        assert!(!c.exists(&p("/d/t")).unwrap());
    }

    #[test]
    fn keep_random_prefix_keeps_a_prefix_of_writes() {
        let (fs, f) = setup(b"");
        for i in 0..8u8 {
            f.write_all_at(&[b'a' + i; 4], u64::from(i) * 4).unwrap();
        }
        let mut lens = std::collections::BTreeSet::new();
        for seed in 0..64 {
            let c = fs.crash(CrashPolicy::KeepRandomPrefix, seed);
            let img = read_all(&c, "/d/f").unwrap();
            assert_eq!(img.len() % 4, 0);
            for (i, chunk) in img.chunks(4).enumerate() {
                assert_eq!(chunk, [b'a' + i as u8; 4], "seed {seed}: not a prefix");
            }
            lens.insert(img.len());
        }
        assert!(
            lens.len() > 3,
            "prefixes of several lengths expected: {lens:?}"
        );
    }

    #[test]
    fn keep_random_prefix_keeps_a_subset_of_entry_ops() {
        let (fs, _f) = setup(b"");
        for i in 0..6 {
            fs.create(&p(&format!("/d/n{i}"))).unwrap();
        }
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..32 {
            let c = fs.crash(CrashPolicy::KeepRandomPrefix, seed);
            seen.insert(c.list(&p("/d")).unwrap());
        }
        assert!(seen.len() > 4);
    }

    #[test]
    fn tear_cuts_at_sector_boundaries_and_can_reorder() {
        let (fs, f) = setup(b"");
        f.allocate(4096).unwrap();
        f.sync_data().unwrap();
        f.write_all_at(&[1u8; 4096], 0).unwrap();
        let mut out_of_order = false;
        for seed in 0..64 {
            let c = fs.crash(CrashPolicy::Tear { sector: 512 }, seed);
            let img = read_all(&c, "/d/f").unwrap();
            assert_eq!(img.len(), 4096);
            let sectors: Vec<bool> = img
                .chunks(512)
                .map(|s| {
                    assert!(
                        s.iter().all(|&b| b == s[0]),
                        "seed {seed}: cut inside a sector"
                    );
                    s[0] == 1
                })
                .collect();
            if sectors.windows(2).any(|w| !w[0] && w[1]) {
                out_of_order = true;
            }
        }
        assert!(
            out_of_order,
            "a later sector should sometimes persist alone"
        );
    }

    #[test]
    fn garble_leaves_garbage_in_lost_sectors() {
        let (fs, f) = setup(b"");
        f.allocate(8192).unwrap();
        f.sync_data().unwrap();
        f.write_all_at(&[1u8; 8192], 0).unwrap();
        let mut garbage = false;
        for seed in 0..32 {
            let c = fs.crash(CrashPolicy::Garble { sector: 512 }, seed);
            let img = read_all(&c, "/d/f").unwrap();
            for s in img.chunks(512) {
                if s.iter().any(|&b| b != 0 && b != 1) {
                    garbage = true;
                }
            }
        }
        assert!(garbage);
    }

    #[test]
    fn crash_is_deterministic_per_seed() {
        let (fs, f) = setup(b"");
        for i in 0..16u64 {
            f.write_all_at(&[i as u8; 700], i * 700).unwrap();
        }
        for seed in 0..8 {
            let a = fs.crash(CrashPolicy::Garble { sector: 512 }, seed);
            let b = fs.crash(CrashPolicy::Garble { sector: 512 }, seed);
            assert_eq!(read_all(&a, "/d/f"), read_all(&b, "/d/f"));
        }
    }

    #[test]
    fn fsync_failure_modes() {
        let (fs, _f) = setup(b"a");
        let f = fs.open_sim(&p("/d/f")).unwrap();
        f.write_all_at(b"b", 1).unwrap();
        let e = f.fail_sync(FsyncFailMode::ErrorAndDrop);
        assert_eq!(e.raw_os_error(), Some(5));
        // Still readable, but a later successful sync does not bring it back.
        assert_eq!(read_all(&fs, "/d/f").unwrap(), b"ab");
        f.sync_data().unwrap();
        assert_eq!(
            read_all(&fs.crash(CrashPolicy::DropAll, 0), "/d/f").unwrap(),
            b"a"
        );
        f.write_all_at(b"c", 2).unwrap();
        let _ = f.fail_sync(FsyncFailMode::ErrorButPersisted);
        // Only the byte written after the dropped one persisted; the hole reads as the durable
        // length extension (zero).
        assert_eq!(
            read_all(&fs.crash(CrashPolicy::DropAll, 0), "/d/f").unwrap(),
            b"a\0c"
        );
    }

    #[test]
    fn lock_is_exclusive_until_dropped() {
        let fs = SimFs::new();
        let g = fs.lock(&p("/LOCK")).unwrap();
        assert_eq!(
            fs.lock(&p("/LOCK")).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        drop(g);
        let _g = fs.lock(&p("/LOCK")).unwrap();
        // A crashed copy has no holders.
        let c = fs.crash(CrashPolicy::DropAll, 0);
        assert!(c.lock(&p("/LOCK")).is_ok());
    }

    #[test]
    fn errors_for_bad_paths() {
        let fs = SimFs::new();
        assert_eq!(
            fs.create(&p("/nodir/f")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(
            fs.open(&p("/nofile")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        fs.create(&p("/f")).unwrap();
        assert_eq!(
            fs.create(&p("/f")).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        assert!(fs.create_dir_all(&p("/f/x")).is_err());
        let f = fs.open(&p("/f")).unwrap();
        assert!(f.write_at(b"x", u64::MAX - 1).is_err());
        assert_eq!(f.read_at(&mut [0u8; 4], u64::MAX).unwrap(), 0);
    }
}
