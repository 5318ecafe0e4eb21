//! `hfile-dump FILE...`: print a Cellar HFile's metadata, index, blocks, bloom filter, cells and
//! statistics. Exit codes: 0 ok, 1 corrupt file, 2 usage or I/O error.

use clap::Parser;

use cellar_tools::dump::{self, DumpArgs};

/// Print what a Cellar HFile holds (HBase's `hbase hfile`).
#[derive(Debug, Parser)]
#[command(name = "hfile-dump", version)]
struct Cli {
    #[command(flatten)]
    args: DumpArgs,
}

fn main() {
    let cli = Cli::parse();
    let code = cellar_tools::finish(dump::run(&cli.args, std::io::stdout().lock()));
    std::process::exit(code);
}
