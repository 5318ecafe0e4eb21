//! `cellar`: the operator command. Subcommands are grouped by what they act on (`hfile` now;
//! `shell`; `bench`, `wal` later), each a thin layer over `cellar_tools`.

use clap::{Parser, Subcommand};

use cellar_tools::build::BuildArgs;
use cellar_tools::dump::DumpArgs;
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
}

#[derive(Debug, Subcommand)]
enum HfileCommand {
    /// Build an HFile from a TSV file of cells.
    Build(BuildArgs),
    /// Print what an HFile holds (same as `hfile-dump`).
    Dump(DumpArgs),
    /// Verify HFiles (same as `hfile-verify`).
    Verify(VerifyArgs),
}

fn main() {
    let cli = Cli::parse();
    if let Command::Shell(a) = &cli.command {
        // The shell writes as it goes and has its own exit codes (1: a command failed).
        std::process::exit(cellar_tools::shell::run(a));
    }
    let out = std::io::stdout().lock();
    let outcome = match &cli.command {
        Command::Hfile(HfileCommand::Build(a)) => cellar_tools::build::run(a, out),
        Command::Hfile(HfileCommand::Dump(a)) => cellar_tools::dump::run(a, out),
        Command::Hfile(HfileCommand::Verify(a)) => cellar_tools::verify::run(a, out),
        Command::Shell(_) => Ok(cellar_tools::EXIT_OK),
    };
    std::process::exit(cellar_tools::finish(outcome));
}
