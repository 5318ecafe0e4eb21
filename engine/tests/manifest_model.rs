//! Model-based test: random sequences of valid (and some invalid) edits go through
//! `log_and_apply` and, in parallel, through a deliberately naive model; after every step the
//! state must match the model, and after reopening (at random points and at the end) it must
//! still match. A tiny `max_size` makes roll-over part of every run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use cellar::format::cell::CellKey;
use cellar::fs::{RealFs, SharedFs};
use cellar::manifest::{Manifest, ManifestOptions, ManifestState, TableEntry, VersionEdit};
use cellar::schema::{FamilyDescriptor, TableDescriptor, TableName};
use cellar::types::{FamilyId, FileMeta, FileNumber, SeqNo, TableId};
use cellar::Error;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

#[derive(Debug, Clone, Default, PartialEq)]
struct Model {
    namespaces: BTreeSet<String>,
    /// id → (full name, [(family id, family name)])
    tables: BTreeMap<TableId, (String, Vec<(FamilyId, String)>)>,
    /// number → (family, level)
    files: BTreeMap<FileNumber, (FamilyId, u32)>,
    flushed: BTreeMap<FamilyId, SeqNo>,
    last_seq: SeqNo,
    log_number: u64,
}

impl Model {
    fn families(&self) -> Vec<FamilyId> {
        self.tables
            .values()
            .flat_map(|(_, f)| f.iter().map(|(id, _)| *id))
            .collect()
    }

    fn forget_family(&mut self, fid: FamilyId) {
        self.files.retain(|_, (f, _)| *f != fid);
        self.flushed.remove(&fid);
    }
}

fn observed(s: &ManifestState) -> Model {
    Model {
        namespaces: s.namespaces().clone(),
        tables: s
            .tables()
            .iter()
            .map(|(id, t)| {
                let fams = t
                    .family_ids
                    .iter()
                    .zip(&t.descriptor.families)
                    .map(|(fid, f)| (*fid, f.name.clone()))
                    .collect();
                (*id, (t.descriptor.name.to_string(), fams))
            })
            .collect(),
        files: s
            .current()
            .all_files()
            .map(|f| (f.number, (f.family, f.level)))
            .collect(),
        flushed: s
            .current()
            .families()
            .filter(|f| s.flushed_seq(*f) > 0)
            .map(|f| (f, s.flushed_seq(f)))
            .collect(),
        last_seq: s.last_seq(),
        log_number: s.log_number(),
    }
}

/// Files get key ranges derived from their number, so no two ever overlap.
fn file(number: u64, family: u32, level: u32, seq: u64) -> FileMeta {
    FileMeta {
        number,
        family,
        level,
        size: number * 3,
        smallest: CellKey::first_on_row(format!("k{number:08}a").as_bytes()).encode(),
        largest: CellKey::first_on_row(format!("k{number:08}z").as_bytes()).encode(),
        min_seq: seq.saturating_sub(5),
        max_seq: seq,
        min_ts: 1,
        max_ts: seq,
        entries: 1,
        deletes: 0,
        created_ms: number,
        crc: None,
        range_clean: 0,
    }
}

fn family_desc(rng: &mut StdRng, name: &str) -> FamilyDescriptor {
    let mut f = FamilyDescriptor::new(name).max_versions(rng.random_range(1..10));
    if rng.random_bool(0.3) {
        f = f.ttl(std::time::Duration::from_millis(
            rng.random_range(1..1_000_000),
        ));
    }
    f
}

/// One random step: an edit valid for `s` and the model after it, or an invalid edit (None).
fn step(rng: &mut StdRng, s: &mut ManifestState, m: &Model) -> (VersionEdit, Option<Model>) {
    let mut e = VersionEdit::default();
    let mut next = m.clone();
    let fams = m.families();
    match rng.random_range(0..10) {
        0 => {
            let ns = format!("ns{}", rng.random_range(0..6));
            if m.namespaces.contains(&ns) {
                // Invalid: already exists.
                e.create_namespaces.push(ns);
                return (e, None);
            }
            e.create_namespaces.push(ns.clone());
            next.namespaces.insert(ns);
        }
        1 => {
            let ns = m.namespaces.iter().find(|n| {
                *n != "default"
                    && !m
                        .tables
                        .values()
                        .any(|(t, _)| t.starts_with(&format!("{n}:")))
            });
            match ns {
                Some(ns) => {
                    e.drop_namespaces.push(ns.clone());
                    next.namespaces.remove(ns);
                }
                None => {
                    e.drop_namespaces.push("default".into());
                    return (e, None);
                }
            }
        }
        2 | 3 => {
            let ns: Vec<_> = m.namespaces.iter().cloned().collect();
            let ns = ns.choose(rng).cloned().unwrap_or_default();
            let id = s.next_table_id();
            let name = if ns == "default" {
                format!("t{id}")
            } else {
                format!("{ns}:t{id}")
            };
            let n = rng.random_range(1..4);
            let mut d = TableDescriptor::new(&name);
            let mut ids = Vec::new();
            for i in 0..n {
                d = d.family(family_desc(rng, &format!("f{i}")));
                ids.push(s.next_family_id() + i);
            }
            next.tables.insert(
                id,
                (
                    TableName::parse(&name).unwrap().to_string(),
                    ids.iter()
                        .enumerate()
                        .map(|(i, fid)| (*fid, format!("f{i}")))
                        .collect(),
                ),
            );
            e.put_tables.push(TableEntry {
                id,
                descriptor: d,
                family_ids: ids,
            });
        }
        4 => {
            // Alter: drop the last family if there are two or more, else add one.
            let Some((&id, _)) = m.tables.iter().next() else {
                e.drop_tables.push(999);
                return (e, None);
            };
            let mut entry = s.table(id).unwrap().clone();
            if entry.family_ids.len() > 1 {
                let gone = entry.family_ids.pop().unwrap();
                entry.descriptor.families.pop();
                next.forget_family(gone);
            } else {
                let name = format!("g{}", s.next_family_id());
                entry.descriptor = entry.descriptor.family(family_desc(rng, &name));
                entry.family_ids.push(s.next_family_id());
            }
            next.tables.get_mut(&id).unwrap().1 = entry
                .family_ids
                .iter()
                .zip(&entry.descriptor.families)
                .map(|(f, d)| (*f, d.name.clone()))
                .collect();
            e.put_tables.push(entry);
        }
        5 => {
            let ids: Vec<_> = m.tables.keys().copied().collect();
            let Some(&id) = ids.choose(rng) else {
                return (e, Some(next));
            };
            e.drop_tables.push(id);
            for (fid, _) in &next.tables.remove(&id).unwrap().1 {
                next.forget_family(*fid);
            }
        }
        6..=8 => {
            // Flush: a new L0 file.
            let Some(&fid) = fams.choose(rng) else {
                return (e, Some(next));
            };
            let seq = m.last_seq + rng.random_range(1..50);
            let n = s.allocate_file_number();
            e.added_files.push(file(n, fid, 0, seq));
            e.flushed_seq.push((fid, seq));
            e.last_seq = Some(seq);
            next.files.insert(n, (fid, 0));
            next.flushed.insert(fid, seq);
            next.last_seq = seq;
            if rng.random_bool(0.3) {
                e.log_number = Some(m.log_number + 1);
                next.log_number += 1;
            }
        }
        _ => {
            // Compaction: move one file down, or merge two into a new one.
            let files: Vec<_> = m.files.iter().map(|(n, v)| (*n, *v)).collect();
            let Some(&(n, (fid, level))) = files.choose(rng) else {
                e.deleted_files.push((1, 0, 424242));
                return (e, None);
            };
            if level < 6 && rng.random_bool(0.5) {
                e.deleted_files.push((fid, level, n));
                e.added_files.push(file(n, fid, level + 1, m.last_seq));
                next.files.insert(n, (fid, level + 1));
            } else {
                e.deleted_files.push((fid, level, n));
                next.files.remove(&n);
                let out = s.allocate_file_number();
                let to = (level + 1).min(6);
                e.added_files.push(file(out, fid, to, m.last_seq));
                next.files.insert(out, (fid, to));
            }
        }
    }
    (e, Some(next))
}

fn fs() -> SharedFs {
    Arc::new(RealFs)
}

fn run(seed: u64, steps: usize, dir: &Path) {
    let mut rng = StdRng::seed_from_u64(seed);
    let opts = ManifestOptions { max_size: 1024 };
    let (mut man, mut s) = Manifest::create_with(fs(), dir, opts.clone()).unwrap();
    let mut model = observed(&s);
    let mut rolls = 0;
    for i in 0..steps {
        let (e, want) = step(&mut rng, &mut s, &model);
        let number = man.number();
        let before = s.clone();
        match (man.log_and_apply(&mut s, e.clone()), want) {
            (Ok(()), Some(want)) => model = want,
            (Err(Error::InvalidArgument(_)), None) => assert_eq!(s, before),
            (got, want) => panic!(
                "seed {seed} step {i}: {e:?} gave {got:?}, expected {}",
                if want.is_some() { "Ok" } else { "refusal" }
            ),
        }
        rolls += usize::from(man.number() != number);
        assert_eq!(observed(&s), model, "seed {seed} step {i}");
        if rng.random_bool(0.05) {
            drop(man);
            let (m2, s2) = Manifest::open_with(fs(), dir, opts.clone()).unwrap();
            assert_eq!(observed(&s2), model, "seed {seed} reopen at step {i}");
            assert!(s2.next_file_number() > s.next_file_number() - 1);
            (man, s) = (m2, s2);
        }
    }
    drop(man);
    let (_m, s2) = Manifest::open(fs(), dir).unwrap();
    assert_eq!(observed(&s2), model, "seed {seed} final reopen");
    assert!(rolls > 0, "seed {seed}: the run never rolled over");
}

#[test]
fn random_edits_match_the_model_across_reopens() {
    for seed in 0..6 {
        let dir = tempfile::tempdir().unwrap();
        run(seed, 250, dir.path());
    }
}
