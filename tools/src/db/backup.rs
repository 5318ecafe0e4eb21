//! `cellar backup create|list|verify|restore|purge`: incremental backups (`Db::backup`,
//! `cellar::Backups`, SPEC.md §17.11).
//!
//! - `create DIR ROOT` opens the database (takes its lock, like `compact`) and adds a backup
//!   under `ROOT`, copying only the HFiles no earlier backup there holds;
//! - `list ROOT` prints each complete backup from its file list;
//! - `verify ROOT [--id N]` reads every stored byte of one backup (default: every backup) and
//!   checks lengths and CRC-32Cs: exit 1 on a difference, as `hfile-verify`;
//! - `restore ROOT TARGET [--id N]` (default: the newest) copies and checks every file into a
//!   new directory, which then opens as a database (exit 1 if a file differs);
//! - `purge ROOT --keep N` removes all but the newest N backups and the HFiles only they held.

use std::io::Write;
use std::path::PathBuf;

use cellar::{BackupInfo, Backups};
use serde::Serialize;

use super::{emit, open_existing, DbFormat};
use crate::text::human_size;
use crate::{Result, EXIT_OK};

/// `cellar backup` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum BackupCommand {
    /// Open a database and add a backup of it under ROOT.
    Create {
        /// The database directory.
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// The backup root (created if missing).
        #[arg(value_name = "ROOT")]
        root: PathBuf,
    },
    /// The complete backups under ROOT.
    List {
        /// The backup root.
        #[arg(value_name = "ROOT")]
        root: PathBuf,
    },
    /// Read every stored byte of a backup and check it (exit 1 on a difference).
    Verify {
        /// The backup root.
        #[arg(value_name = "ROOT")]
        root: PathBuf,
        /// Only this backup (default: every one).
        #[arg(long)]
        id: Option<u64>,
    },
    /// Restore a backup into a new directory (checked as it is copied).
    Restore {
        /// The backup root.
        #[arg(value_name = "ROOT")]
        root: PathBuf,
        /// The new database directory; must not exist.
        #[arg(value_name = "TARGET")]
        target: PathBuf,
        /// The backup (default: the newest).
        #[arg(long)]
        id: Option<u64>,
    },
    /// Keep the newest N backups; remove the rest and the HFiles only they held.
    Purge {
        /// The backup root.
        #[arg(value_name = "ROOT")]
        root: PathBuf,
        /// Backups to keep.
        #[arg(long)]
        keep: usize,
    },
}

/// Arguments of `cellar backup`.
#[derive(Debug, Clone, clap::Args)]
pub struct BackupArgs {
    #[command(subcommand)]
    pub command: BackupCommand,
    /// Output shape.
    #[arg(long, value_enum, default_value_t = DbFormat::Text, global = true)]
    pub format: DbFormat,
}

#[derive(Debug, Serialize)]
struct BackupJson {
    id: u64,
    manifest_seq: u64,
    files: usize,
    bytes: u64,
    new_shared_bytes: u64,
}

impl From<&BackupInfo> for BackupJson {
    fn from(b: &BackupInfo) -> Self {
        BackupJson {
            id: b.id,
            manifest_seq: b.manifest_seq,
            files: b.files.len(),
            bytes: b.total_bytes(),
            new_shared_bytes: b.new_shared_bytes,
        }
    }
}

#[derive(Debug, Serialize)]
struct Doc {
    ok: bool,
    action: &'static str,
    root: String,
    backups: Vec<BackupJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    removed_backups: Option<Vec<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    removed_shared_bytes: Option<u64>,
}

fn line(b: &BackupInfo) -> String {
    format!(
        "backup {}: {} files, {}, manifest through seq {}{}\n",
        b.id,
        b.files.len(),
        human_size(b.total_bytes()),
        b.manifest_seq,
        if b.new_shared_bytes > 0 {
            format!(", {} new", human_size(b.new_shared_bytes))
        } else {
            String::new()
        }
    )
}

/// Run `cellar backup`; returns the exit code.
pub fn run<W: Write>(args: &BackupArgs, mut out: W) -> Result<i32> {
    let mut doc = Doc {
        ok: true,
        action: "",
        root: String::new(),
        backups: Vec::new(),
        target: None,
        removed_backups: None,
        removed_shared_bytes: None,
    };
    let mut text = String::new();
    match &args.command {
        BackupCommand::Create { dir, root } => {
            let db = open_existing(dir)?;
            let b = db.backup(root)?;
            db.close()?;
            doc.action = "create";
            doc.root = root.display().to_string();
            text.push_str(&line(&b));
            doc.backups.push((&b).into());
        }
        BackupCommand::List { root } => {
            let b = Backups::open(root);
            doc.action = "list";
            doc.root = root.display().to_string();
            for info in b.list()? {
                text.push_str(&line(&info));
                doc.backups.push((&info).into());
            }
            if doc.backups.is_empty() {
                text.push_str("no backups\n");
            }
        }
        BackupCommand::Verify { root, id } => {
            let b = Backups::open(root);
            doc.action = "verify";
            doc.root = root.display().to_string();
            let ids = match id {
                Some(id) => vec![*id],
                None => b.ids()?,
            };
            for id in ids {
                let info = b.verify(id)?;
                text.push_str(&format!("backup {id}: OK ({} files)\n", info.files.len()));
                doc.backups.push((&info).into());
            }
        }
        BackupCommand::Restore { root, target, id } => {
            let b = Backups::open(root);
            let id = match id {
                Some(id) => *id,
                None => b.latest()?,
            };
            let info = b.restore(id, target)?;
            doc.action = "restore";
            doc.root = root.display().to_string();
            doc.target = Some(target.display().to_string());
            text.push_str(&format!(
                "restored backup {id} into {} ({} files, {})\n",
                target.display(),
                info.files.len(),
                human_size(info.total_bytes())
            ));
            doc.backups.push((&info).into());
        }
        BackupCommand::Purge { root, keep } => {
            let b = Backups::open(root);
            let p = b.purge(*keep)?;
            doc.action = "purge";
            doc.root = root.display().to_string();
            text.push_str(&format!(
                "removed backups {:?}, {} shared HFiles ({}), {} incomplete\n",
                p.removed_backups,
                p.removed_shared_files,
                human_size(p.removed_shared_bytes),
                p.removed_incomplete
            ));
            for info in b.list()? {
                doc.backups.push((&info).into());
            }
            doc.removed_backups = Some(p.removed_backups);
            doc.removed_shared_bytes = Some(p.removed_shared_bytes);
        }
    }
    emit(&mut out, args.format, &doc, |_| text)?;
    Ok(EXIT_OK)
}
