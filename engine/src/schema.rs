//! Namespaces, tables and column families: names and descriptors (HBase's admin model).

use std::fmt;
use std::time::Duration;

pub use cellar_format::{BloomType, CompressionType};

use crate::error::{Error, Result};

/// The namespace of a table named without one.
pub const DEFAULT_NAMESPACE: &str = "default";

/// Longest namespace, table or family name.
pub const MAX_NAME_LEN: usize = 255;

/// Check a namespace, table or family name: 1..=255 bytes of `[A-Za-z0-9_.-]`, not starting
/// with `.` or `-` — so it is always a valid path component and never contains `:`.
pub fn validate_name(kind: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && !name.starts_with(['.', '-'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "bad {kind} name {name:?}: use 1..={MAX_NAME_LEN} of [A-Za-z0-9_.-], not starting with '.' or '-'"
        )))
    }
}

/// A table's full name: `namespace:table`, or `table` in the `default` namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableName {
    /// Namespace.
    pub namespace: String,
    /// Table within the namespace.
    pub table: String,
}

impl TableName {
    /// Parse `ns:table` or `table`.
    pub fn parse(s: &str) -> Result<Self> {
        let (ns, t) = match s.split_once(':') {
            Some((ns, t)) => (ns, t),
            None => (DEFAULT_NAMESPACE, s),
        };
        validate_name("namespace", ns)?;
        validate_name("table", t)?;
        Ok(TableName {
            namespace: ns.to_owned(),
            table: t.to_owned(),
        })
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace == DEFAULT_NAMESPACE {
            f.write_str(&self.table)
        } else {
            write!(f, "{}:{}", self.namespace, self.table)
        }
    }
}

/// HBase's KEEP_DELETED_CELLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeepDeletedCells {
    /// Deleted cells are invisible and purged by major compaction.
    #[default]
    False,
    /// Deleted cells stay readable by time-ranged reads ending before the marker, and markers
    /// survive major compaction until versions or TTL remove them.
    True,
    /// As `True`, until the cells' TTL expires.
    Ttl,
}

/// A column family's settings (HBase's ColumnFamilyDescriptor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyDescriptor {
    /// Name.
    pub name: String,
    /// VERSIONS: most versions kept per column (default 3).
    pub max_versions: u32,
    /// MIN_VERSIONS: versions kept past the TTL (default 0).
    pub min_versions: u32,
    /// TTL; `None` is forever.
    pub ttl: Option<Duration>,
    /// KEEP_DELETED_CELLS.
    pub keep_deleted_cells: KeepDeletedCells,
    /// BLOOMFILTER (default ROW).
    pub bloom: BloomType,
    /// COMPRESSION (default NONE).
    pub compression: CompressionType,
    /// BLOCKSIZE (default 64 KiB).
    pub block_size: u32,
    /// NEW_VERSION_BEHAVIOR: markers mask only older writes (by sequence number).
    pub new_version_behavior: bool,
}

impl FamilyDescriptor {
    /// Defaults, as HBase's (VERSIONS 3 as the seeds say).
    pub fn new(name: impl Into<String>) -> Self {
        FamilyDescriptor {
            name: name.into(),
            max_versions: 3,
            min_versions: 0,
            ttl: None,
            keep_deleted_cells: KeepDeletedCells::False,
            bloom: BloomType::Row,
            compression: CompressionType::None,
            block_size: 64 * 1024,
            new_version_behavior: false,
        }
    }

    /// VERSIONS.
    pub fn max_versions(mut self, n: u32) -> Self {
        self.max_versions = n;
        self
    }
    /// MIN_VERSIONS.
    pub fn min_versions(mut self, n: u32) -> Self {
        self.min_versions = n;
        self
    }
    /// TTL.
    pub fn ttl(mut self, d: Duration) -> Self {
        self.ttl = Some(d);
        self
    }
    /// KEEP_DELETED_CELLS.
    pub fn keep_deleted_cells(mut self, k: KeepDeletedCells) -> Self {
        self.keep_deleted_cells = k;
        self
    }
    /// BLOOMFILTER.
    pub fn bloom(mut self, b: BloomType) -> Self {
        self.bloom = b;
        self
    }
    /// COMPRESSION.
    pub fn compression(mut self, c: CompressionType) -> Self {
        self.compression = c;
        self
    }
    /// BLOCKSIZE.
    pub fn block_size(mut self, n: u32) -> Self {
        self.block_size = n;
        self
    }
    /// NEW_VERSION_BEHAVIOR.
    pub fn new_version_behavior(mut self, on: bool) -> Self {
        self.new_version_behavior = on;
        self
    }

    /// Check the settings.
    pub fn validate(&self) -> Result<()> {
        validate_name("family", &self.name)?;
        if self.max_versions == 0 {
            return Err(Error::InvalidArgument(format!(
                "family {}: VERSIONS must be at least 1",
                self.name
            )));
        }
        if self.min_versions > self.max_versions {
            return Err(Error::InvalidArgument(format!(
                "family {}: MIN_VERSIONS {} exceeds VERSIONS {}",
                self.name, self.min_versions, self.max_versions
            )));
        }
        if self.block_size < 1024 || self.block_size > 64 << 20 {
            return Err(Error::InvalidArgument(format!(
                "family {}: BLOCKSIZE {} outside 1 KiB..=64 MiB",
                self.name, self.block_size
            )));
        }
        if let BloomType::RowPrefix(0) = self.bloom {
            return Err(Error::InvalidArgument(
                "ROWPREFIX bloom needs N >= 1".into(),
            ));
        }
        Ok(())
    }
}

/// A table's declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableDescriptor {
    /// Full name.
    pub name: TableName,
    /// Families, in declaration order.
    pub families: Vec<FamilyDescriptor>,
}

impl TableDescriptor {
    /// A table named `ns:table` or `table`; an invalid name is reported by `validate`.
    pub fn new(name: &str) -> Self {
        let parsed = TableName::parse(name).unwrap_or(TableName {
            namespace: DEFAULT_NAMESPACE.into(),
            table: name.into(),
        });
        TableDescriptor {
            name: parsed,
            families: Vec::new(),
        }
    }

    /// Add a family.
    pub fn family(mut self, f: FamilyDescriptor) -> Self {
        self.families.push(f);
        self
    }

    /// Check the name, each family, and that family names are unique and present.
    pub fn validate(&self) -> Result<()> {
        validate_name("namespace", &self.name.namespace)?;
        validate_name("table", &self.name.table)?;
        if self.families.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "table {} needs at least one family",
                self.name
            )));
        }
        for (i, f) in self.families.iter().enumerate() {
            f.validate()?;
            if self.families[..i].iter().any(|g| g.name == f.name) {
                return Err(Error::InvalidArgument(format!(
                    "table {}: family {} declared twice",
                    self.name, f.name
                )));
            }
        }
        Ok(())
    }

    /// The family named `name`.
    pub fn get_family(&self, name: &str) -> Option<&FamilyDescriptor> {
        self.families.iter().find(|f| f.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_parse_with_and_without_namespace() {
        let t = TableName::parse("ns1:users").unwrap();
        assert_eq!((t.namespace.as_str(), t.table.as_str()), ("ns1", "users"));
        assert_eq!(t.to_string(), "ns1:users");
        let t = TableName::parse("users").unwrap();
        assert_eq!(t.namespace, DEFAULT_NAMESPACE);
        assert_eq!(t.to_string(), "users");
        for bad in [
            "",
            "a:b:c",
            "../x",
            ".x",
            "a b",
            "ns:",
            ":t",
            &"x".repeat(256),
        ] {
            assert!(TableName::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn descriptors_validate() {
        let ok = TableDescriptor::new("t").family(FamilyDescriptor::new("cf"));
        assert!(ok.validate().is_ok());
        assert!(TableDescriptor::new("t").validate().is_err());
        let dup = TableDescriptor::new("t")
            .family(FamilyDescriptor::new("cf"))
            .family(FamilyDescriptor::new("cf"));
        assert!(dup.validate().is_err());
        assert!(FamilyDescriptor::new("cf")
            .max_versions(0)
            .validate()
            .is_err());
        assert!(FamilyDescriptor::new("cf")
            .min_versions(5)
            .validate()
            .is_err());
        assert!(FamilyDescriptor::new("c:f").validate().is_err());
    }
}
