//! `cellar-benches`: the side-by-side comparison of Cellar with its peers.
//!
//! ```text
//! cargo run --release -p cellar-benches --features peers -- compare --num 2000000
//! ```
//!
//! Without `--features peers` only Cellar is built in (the default build stays fast).

use clap::{Parser, Subcommand};

// Every engine of a comparison runs in this binary, so they share the allocator: glibc's spent
// a quarter of a Cellar scan in malloc/free and consolidation, and db_bench is usually built
// with jemalloc for the same reason.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use cellar_benches::compare::{self, CompareArgs};

#[derive(Debug, Parser)]
#[command(
    name = "cellar-benches",
    about = "Cellar side by side with RocksDB, fjall and redb"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run the workloads through every engine, interleaved, and print medians and ratios.
    Compare(CompareArgs),
    /// One engine's run in a child process (started by `compare`).
    #[command(hide = true)]
    CompareChild {
        #[arg(long)]
        engine: String,
        #[arg(long)]
        phase: String,
        #[command(flatten)]
        args: CompareArgs,
    },
}

fn main() {
    let cli = Cli::parse();
    cellar_tools::init_logging();
    let r = match cli.cmd {
        Cmd::Compare(a) => compare::run(&a),
        Cmd::CompareChild {
            engine,
            phase,
            args,
        } => compare::child(&args, &engine, &phase).map(|()| 0),
    };
    match r {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(2);
        }
    }
}
