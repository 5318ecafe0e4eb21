//! `cellar shell`: HBase shell commands against an embedded database.
//!
//! The pipeline is [`lexer`] (HBase shell literals) → [`parse`] (a typed [`parse::Command`] per
//! statement, with line/column errors) → [`exec`] (runs it against a [`cellar::Db`]) →
//! [`output`] (HBase's text layout, or one JSON line per command — a documented contract, see
//! README.md "Shell"). Filter strings go through [`filter`].
//!
//! Interactive on a TTY (rustyline: line editing and history in `~/.cellar_shell_history`);
//! otherwise the commands come from `-e`, a script file or stdin, every statement runs even
//! after a failed one, and the exit code is 1 when any failed.

pub mod convert;
pub mod exec;
pub mod filter;
pub mod lexer;
pub mod output;
pub mod parse;

use std::fmt;
use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;

use crate::{EXIT_OK, EXIT_USAGE};

/// A position in the shell input, 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    /// Line.
    pub line: u32,
    /// Column, in characters.
    pub col: u32,
}

/// Error kinds that do not come from the engine (see [`output::error_kind`] for those).
pub mod kind {
    /// The input is not a valid command.
    pub const PARSE: &str = "ParseError";
    /// HBase has it, this build does not.
    pub const UNSUPPORTED: &str = "Unsupported";
    /// Data commands on a disabled table (HBase's TableNotEnabledException).
    pub const TABLE_NOT_ENABLED: &str = "TableNotEnabled";
    /// `drop` of an enabled table (HBase's TableNotDisabledException).
    pub const TABLE_NOT_DISABLED: &str = "TableNotDisabled";
    /// `create_namespace` of one that exists.
    pub const NAMESPACE_EXISTS: &str = "NamespaceExists";
    /// A stored value is not what the command needs (e.g. a counter of the wrong length).
    pub const BAD_VALUE: &str = "BadValue";
    /// The shell's own files (history, the disabled-table list) could not be read or written.
    pub const IO: &str = "Io";
}

/// A failed command: its kind (the JSON `kind`), a message, and where in the input when the
/// input itself is at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellError {
    /// One of [`kind`] or an engine error's name.
    pub kind: &'static str,
    /// What went wrong.
    pub msg: String,
    /// Where, for errors in the input.
    pub pos: Option<Pos>,
    incomplete: bool,
}

impl ShellError {
    /// A parse error at `pos`.
    pub fn parse(pos: Pos, msg: String) -> Self {
        ShellError {
            kind: kind::PARSE,
            msg,
            pos: Some(pos),
            incomplete: false,
        }
    }

    /// An error of `kind` with no position.
    pub fn new(kind: &'static str, msg: impl Into<String>) -> Self {
        ShellError {
            kind,
            msg: msg.into(),
            pos: None,
            incomplete: false,
        }
    }

    /// Mark as "the input stopped early" (an unclosed bracket, a trailing comma): the
    /// interactive shell then reads another line instead of reporting it.
    pub fn incomplete(mut self) -> Self {
        self.incomplete = true;
        self
    }

    /// See [`ShellError::incomplete`].
    pub fn is_incomplete(&self) -> bool {
        self.incomplete
    }
}

impl fmt::Display for ShellError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pos {
            Some(p) => write!(f, "line {}, column {}: {}", p.line, p.col, self.msg),
            None => f.write_str(&self.msg),
        }
    }
}

/// `--format` of the shell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum Format {
    /// As the HBase shell prints.
    #[default]
    Text,
    /// One JSON object per command, on one line.
    Json,
}

/// Arguments of `cellar shell`.
#[derive(Debug, clap::Args)]
pub struct ShellArgs {
    /// Database directory (created if missing).
    #[arg(long, default_value = "./cellar-data")]
    pub db: PathBuf,
    /// Output shape.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Run these commands (separated by newlines or `;`) and exit.
    #[arg(
        short = 'e',
        long = "execute",
        value_name = "COMMANDS",
        conflicts_with = "script"
    )]
    pub execute: Option<String>,
    /// Run the commands in this file and exit (`-` for stdin).
    pub script: Option<PathBuf>,
}

/// Run `cellar shell`; returns the exit code: 0 when every command succeeded, 1 when one
/// failed, 2 when the database cannot be opened or the script read.
pub fn run(args: &ShellArgs) -> i32 {
    let source = match (&args.execute, &args.script) {
        (Some(e), _) => Some(e.clone()),
        (None, Some(p)) if p.as_os_str() != "-" => match std::fs::read(p) {
            // Scripts are text; a stray invalid byte becomes U+FFFD rather than refusing the
            // whole file (binary data belongs in \xNN escapes).
            Ok(b) => Some(String::from_utf8_lossy(&b).into_owned()),
            Err(e) => {
                eprintln!("error: {}: {e}", p.display());
                return EXIT_USAGE;
            }
        },
        (None, Some(_)) => None,
        (None, None) if std::io::stdin().is_terminal() => {
            return match exec::Shell::open(&args.db, args.format) {
                Ok(sh) => interactive(sh),
                Err(e) => {
                    eprintln!("error: cannot open {}: {e}", args.db.display());
                    EXIT_USAGE
                }
            };
        }
        (None, None) => None,
    };
    let source = match source {
        Some(s) => s,
        None => {
            let mut b = Vec::new();
            if let Err(e) = std::io::stdin().read_to_end(&mut b) {
                eprintln!("error: reading stdin: {e}");
                return EXIT_USAGE;
            }
            String::from_utf8_lossy(&b).into_owned()
        }
    };
    let mut sh = match exec::Shell::open(&args.db, args.format) {
        Ok(sh) => sh,
        Err(e) => {
            eprintln!("error: cannot open {}: {e}", args.db.display());
            return EXIT_USAGE;
        }
    };
    let outcome = sh.run_source(&source);
    let code = if outcome.failed > 0 { 1 } else { EXIT_OK };
    if let Err(e) = sh.close() {
        eprintln!("error: closing the database: {e}");
        return 1;
    }
    code
}

fn history_path() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cellar_shell_history"))
}

/// The read-eval-print loop on a terminal. A statement left open (an unclosed `{`, a trailing
/// comma) continues on the next line, as in the HBase shell.
fn interactive(mut sh: exec::Shell) -> i32 {
    use rustyline::error::ReadlineError;
    let mut rl = match rustyline::DefaultEditor::new() {
        Ok(rl) => rl,
        Err(e) => {
            eprintln!("error: cannot start line editing: {e}");
            return EXIT_USAGE;
        }
    };
    let history = history_path();
    if let Some(h) = &history {
        // No history yet is the normal first run.
        let _ = rl.load_history(h);
    }
    println!("Cellar shell; enter 'help' for the list of commands, 'exit' to leave.");
    let mut n = 1u32;
    let mut buf = String::new();
    loop {
        let prompt = if buf.is_empty() {
            format!("cellar:{n:03}> ")
        } else {
            format!("cellar:{n:03}* ")
        };
        match rl.readline(&prompt) {
            Ok(line) => {
                n += 1;
                if !buf.is_empty() {
                    buf.push('\n');
                }
                buf.push_str(&line);
                if parse::is_incomplete(&buf) {
                    continue;
                }
                let _ = rl.add_history_entry(buf.as_str());
                let src = std::mem::take(&mut buf);
                let outcome = sh.run_source(&src);
                let _ = std::io::stdout().flush();
                if outcome.exit {
                    break;
                }
            }
            // Ctrl-C drops the statement being typed, as a shell does.
            Err(ReadlineError::Interrupted) => buf.clear(),
            Err(ReadlineError::Eof) => break,
            Err(e) => {
                eprintln!("error: {e}");
                break;
            }
        }
    }
    if let Some(h) = &history {
        if let Err(e) = rl.save_history(h) {
            eprintln!("warning: cannot save history to {}: {e}", h.display());
        }
    }
    match sh.close() {
        Ok(()) => EXIT_OK,
        Err(e) => {
            eprintln!("error: closing the database: {e}");
            1
        }
    }
}
