//! `cellar`: the operator command. Subcommands are grouped by what they act on (`hfile`; the
//! database tools `levels`, `manifest-dump`, `wal-dump`, `verify`, `compact`, `ingest`, `export`, `checkpoint`,
//! `backup`; `shell`; `bench`; `reliability-report`), each a thin layer over `cellar_tools`. The hidden
//! `child` is the process the report's SIGKILL cycles kill (`cellar_tools::crash`).

use clap::{Parser, Subcommand};

// The allocator `cellar-benches compare` runs every engine with, so `cellar bench` measures
// Cellar as the comparison does (glibc's malloc spent a quarter of a scan in malloc/free and
// consolidation: benches/src/main.rs).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use cellar_tools::bench::BenchArgs;
use cellar_tools::build::BuildArgs;
use cellar_tools::crash::ChildArgs;
use cellar_tools::db::backup::BackupArgs;
use cellar_tools::db::checkpoint::CheckpointArgs;
use cellar_tools::db::compact::CompactArgs;
use cellar_tools::db::export::ExportArgs;
use cellar_tools::db::find::FindArgs;
use cellar_tools::db::ingest::IngestArgs;
use cellar_tools::db::levels::LevelsArgs;
use cellar_tools::db::manifest_dump::ManifestDumpArgs;
use cellar_tools::db::verify::DbVerifyArgs;
use cellar_tools::db::wal_dump::WalDumpArgs;
use cellar_tools::diff::DiffArgs;
use cellar_tools::dump::DumpArgs;
use cellar_tools::reliability::ReliabilityArgs;
use cellar_tools::shell::ShellArgs;
use cellar_tools::verify::VerifyArgs;

/// Cellar operator tools.
#[derive(Debug, Parser)]
#[command(name = "cellar", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build, dump and verify HFiles.
    #[command(subcommand)]
    Hfile(HfileCommand),
    /// HBase shell commands against a database directory (interactive on a TTY).
    Shell(ShellArgs),
    /// The LSM shape of a database: per table and family, each level's files (read-only).
    Levels(LevelsArgs),
    /// Every version edit of a database's manifest, in order (read-only).
    ManifestDump(ManifestDumpArgs),
    /// Every record of a database's WAL with its mutations (read-only).
    WalDump(WalDumpArgs),
    /// Every stored cell of one row: in each live HFile whose key range holds it, and in each
    /// WAL record that writes it (read-only; exit 1 if a file's bloom filter wrongly rules the
    /// row out).
    Find(FindArgs),
    /// Check a whole database: manifest, every live HFile, levels, WAL (read-only; exit codes
    /// as hfile-verify: 0 clean, 1 corruption, 2 usage or I/O error).
    Verify(DbVerifyArgs),
    /// Open a database and run its due compactions, or a major compaction.
    Compact(CompactArgs),
    /// Open a database and bulk load HFiles into a family (each file verified first, one write
    /// each, placed at the deepest level it fits; the sources are left as they are).
    Ingest(IngestArgs),
    /// Open a database and write a table's row range as one HFile per family (every version,
    /// marker and cell TTL at one read point), for `cellar ingest` into another database.
    Export(ExportArgs),
    /// Open a database and make an online checkpoint of it in a new directory (HFiles
    /// hard-linked, WAL tail copied), which opens as a database of its own.
    Checkpoint(CheckpointArgs),
    /// Incremental backups: create (opens the database), list, verify, restore, purge.
    Backup(BackupArgs),
    /// db_bench-style workloads and YCSB A–F against an embedded database.
    Bench(BenchArgs),
    /// Run a bounded slice of the reliability suite (SIGKILL cycles, simulated power losses,
    /// fault matrix, corruption sweep) and report its figures with their denominators (exit 0:
    /// no violation, 1: a violation, 2: usage or I/O error).
    ReliabilityReport(ReliabilityArgs),
    /// Internal: the workload process the SIGKILL cycles kill.
    #[command(hide = true)]
    Child(ChildArgs),
}

#[derive(Debug, Subcommand)]
enum HfileCommand {
    /// Build an HFile from a TSV file of cells.
    Build(BuildArgs),
    /// Print what an HFile holds (same as `hfile-dump`).
    Dump(DumpArgs),
    /// Verify HFiles (same as `hfile-verify`).
    Verify(VerifyArgs),
    /// Compare two HFiles cell by cell (exit 0 same cells, 1 they differ, 2 error).
    Diff(DiffArgs),
}

fn main() {
    let cli = Cli::parse();
    cellar_tools::init_logging();
    if let Command::Child(c) = &cli.command {
        std::process::exit(c.run());
    }
    if let Command::Shell(a) = &cli.command {
        // The shell writes as it goes and has its own exit codes (1: a command failed).
        std::process::exit(cellar_tools::shell::run(a));
    }
    let out = std::io::stdout().lock();
    let outcome = match &cli.command {
        Command::Hfile(HfileCommand::Build(a)) => cellar_tools::build::run(a, out),
        Command::Hfile(HfileCommand::Dump(a)) => cellar_tools::dump::run(a, out),
        Command::Hfile(HfileCommand::Verify(a)) => cellar_tools::verify::run(a, out),
        Command::Hfile(HfileCommand::Diff(a)) => cellar_tools::diff::run(a, out),
        Command::Levels(a) => cellar_tools::db::levels::run(a, out),
        Command::ManifestDump(a) => cellar_tools::db::manifest_dump::run(a, out),
        Command::WalDump(a) => cellar_tools::db::wal_dump::run(a, out),
        Command::Find(a) => cellar_tools::db::find::run(a, out),
        Command::Verify(a) => cellar_tools::db::verify::run(a, out),
        Command::Compact(a) => cellar_tools::db::compact::run(a, out),
        Command::Ingest(a) => cellar_tools::db::ingest::run(a, out),
        Command::Export(a) => cellar_tools::db::export::run(a, out),
        Command::Checkpoint(a) => cellar_tools::db::checkpoint::run(a, out),
        Command::Backup(a) => cellar_tools::db::backup::run(a, out),
        Command::Bench(a) => cellar_tools::bench::run(a, out),
        Command::ReliabilityReport(a) => cellar_tools::reliability::run(a, out),
        Command::Shell(_) | Command::Child(_) => Ok(cellar_tools::EXIT_OK),
    };
    std::process::exit(cellar_tools::finish(outcome));
}
