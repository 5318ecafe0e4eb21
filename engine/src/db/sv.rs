//! The super-version: what a read or write sees at one instant — each family's memstores, the
//! files (`Version`), and the schema — swapped as one `Arc` so a flush that turns a memstore
//! into a file is seen either before or after, never half.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::manifest::{ManifestState, Version};
use crate::memstore::MemStore;
use crate::read::range_index::RangeDeletes;
use crate::schema::{FamilyDescriptor, TableDescriptor, TableName};
use crate::types::{FamilyId, SeqNo};

/// A family's memstores: the active one takes writes; frozen ones (newest first) wait for flush.
#[derive(Debug, Clone)]
pub(crate) struct FamilyMems {
    pub active: Arc<MemStore>,
    pub frozen: Vec<Arc<MemStore>>,
}

/// One family of a table, resolved.
#[derive(Debug, Clone)]
pub(crate) struct FamilyInfo {
    pub id: FamilyId,
    pub descriptor: FamilyDescriptor,
    /// The family's row-range deletes, indexed (each reader filters by its read point).
    pub range_deletes: Arc<RangeDeletes>,
}

/// A family a read covers, with the single column asked for when there is exactly one (a
/// ROWCOL bloom probe needs it).
pub(crate) type FamilyRead = (FamilyId, Option<Vec<u8>>);

/// A table, resolved.
#[derive(Debug, Clone)]
pub(crate) struct TableInfo {
    pub descriptor: TableDescriptor,
    pub families: Vec<FamilyInfo>,
    /// Every family's id with no column chosen: what a read of the whole row reads, built
    /// once here instead of per Get.
    pub all_families: Vec<FamilyRead>,
    /// Whether some family has a TTL: a Get of this table then reads the clock before it
    /// resolves a cell.
    pub any_ttl: bool,
}

impl TableInfo {
    pub fn family(&self, name: &str) -> Option<&FamilyInfo> {
        self.families.iter().find(|f| f.descriptor.name == name)
    }
}

/// See the module docs.
#[derive(Debug, Clone)]
pub(crate) struct SuperVersion {
    pub mems: FxHashMap<FamilyId, FamilyMems>,
    pub version: Arc<Version>,
    pub tables: FxHashMap<TableName, Arc<TableInfo>>,
    /// Family id → its descriptor (for flush settings and reads by id).
    pub families: FxHashMap<FamilyId, FamilyDescriptor>,
    /// The largest oldest-read-point any flush or compaction whose files this super-version
    /// holds judged its purges at: a file may lack versions that only a read point below this
    /// could see. A reader whose read point was taken before such a file was installed must
    /// take a newer one (`DbInner::read_view`); only registered snapshots hold it down.
    pub purge_horizon: SeqNo,
}

impl SuperVersion {
    /// A super-version for `state`, reusing the memstores of `prev` for families that still
    /// exist and giving new families empty ones.
    pub fn build(state: &ManifestState, prev: Option<&SuperVersion>) -> SuperVersion {
        let mut tables = FxHashMap::default();
        let mut families = FxHashMap::default();
        let mut mems = FxHashMap::default();
        for entry in state.tables().values() {
            let infos: Vec<FamilyInfo> = entry
                .descriptor
                .families
                .iter()
                .zip(&entry.family_ids)
                .map(|(d, &id)| FamilyInfo {
                    id,
                    descriptor: d.clone(),
                    range_deletes: range_index(state, prev, &entry.descriptor.name, id),
                })
                .collect();
            for f in &infos {
                families.insert(f.id, f.descriptor.clone());
                let m = prev
                    .and_then(|p| p.mems.get(&f.id).cloned())
                    .unwrap_or_else(|| FamilyMems {
                        active: Arc::new(MemStore::new(f.id)),
                        frozen: Vec::new(),
                    });
                mems.insert(f.id, m);
            }
            tables.insert(
                entry.descriptor.name.clone(),
                Arc::new(TableInfo {
                    descriptor: entry.descriptor.clone(),
                    all_families: infos.iter().map(|f| (f.id, None)).collect(),
                    any_ttl: infos.iter().any(|f| f.descriptor.ttl.is_some()),
                    families: infos,
                }),
            );
        }
        SuperVersion {
            mems,
            version: state.current().clone(),
            tables,
            families,
            purge_horizon: prev.map_or(0, |p| p.purge_horizon),
        }
    }

    /// The indexed row-range deletes of family `id` (empty for an unknown family): what
    /// flushes and compactions apply, shared with the reads of this super-version.
    pub fn range_deletes(&self, id: FamilyId) -> Arc<RangeDeletes> {
        self.tables
            .values()
            .flat_map(|t| &t.families)
            .find(|f| f.id == id)
            .map_or_else(Default::default, |f| f.range_deletes.clone())
    }

    /// Bytes held by all memstores (active and frozen).
    pub fn memstore_bytes(&self) -> (usize, usize) {
        let mut active = 0;
        let mut frozen = 0;
        for m in self.mems.values() {
            active += m.active.approximate_bytes();
            frozen += m
                .frozen
                .iter()
                .map(|f| f.approximate_bytes())
                .sum::<usize>();
        }
        (active, frozen)
    }
}

/// The index of family `id`'s row-range deletes: the previous super-version's when they did
/// not change (the usual case: flushes and compactions rebuild the super-version), else built
/// from it (a few added or removed).
fn range_index(
    state: &ManifestState,
    prev: Option<&SuperVersion>,
    table: &TableName,
    id: FamilyId,
) -> Arc<RangeDeletes> {
    let list = state.range_deletes(id);
    let old = prev
        .and_then(|p| p.tables.get(table))
        .and_then(|t| t.families.iter().find(|f| f.id == id))
        .map(|f| &f.range_deletes);
    match old {
        Some(o) if o.list() == list => o.clone(),
        _ if list.is_empty() => Arc::new(RangeDeletes::default()),
        Some(o) => Arc::new(o.updated(list.to_vec())),
        None => Arc::new(RangeDeletes::new(list.to_vec())),
    }
}
