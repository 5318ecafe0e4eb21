//! `crash-harness`: SIGKILL the engine in a child process at random times and at named kill
//! points, reopen, check every invariant, repeat on the same directory (see
//! `cellar_tools::crash`). Exits 1 on any violation.
//!
//! ```text
//! cargo run --release -p cellar-tools --features kill-points --bin crash-harness -- \
//!     --point-rounds 10 --random-kills 200 --seed 7
//! ```

use clap::{Parser, Subcommand};

use cellar_tools::crash::{run, ChildArgs, HarnessArgs};

#[derive(Debug, Parser)]
#[command(name = "crash-harness", version)]
struct Cli {
    #[command(subcommand)]
    child: Option<Child>,
    #[command(flatten)]
    args: HarnessArgs,
}

#[derive(Debug, Subcommand)]
enum Child {
    /// Internal: the workload process the harness kills.
    #[command(hide = true)]
    Child(ChildArgs),
}

fn main() {
    let cli = Cli::parse();
    if let Some(Child::Child(c)) = &cli.child {
        std::process::exit(c.run());
    }
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("crash-harness: cannot find its own executable: {e}");
            std::process::exit(2);
        }
    };
    match run(&cli.args, &exe) {
        Ok(report) => {
            let _ = report.print(&mut std::io::stdout().lock());
            std::process::exit(i32::from(!report.violations.is_empty()));
        }
        Err(e) => {
            eprintln!("crash-harness: {e}");
            std::process::exit(2);
        }
    }
}
