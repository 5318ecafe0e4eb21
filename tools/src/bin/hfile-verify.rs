//! `hfile-verify FILE...|DIR`: check every structure of Cellar HFiles. Exit codes: 0 all clean,
//! 1 corruption found, 2 usage or I/O error (or a format version this build cannot read).

use clap::Parser;

use cellar_tools::verify::{self, VerifyArgs};

/// Verify Cellar HFiles: checksums, key order, index, bloom filter, file info, layout.
#[derive(Debug, Parser)]
#[command(name = "hfile-verify", version)]
struct Cli {
    #[command(flatten)]
    args: VerifyArgs,
}

fn main() {
    let cli = Cli::parse();
    let code = cellar_tools::finish(verify::run(&cli.args, std::io::stdout().lock()));
    std::process::exit(code);
}
