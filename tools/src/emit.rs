//! Output of a tool run in one of three shapes, chosen once with `--format`.
//!
//! Sections are computed once as serializable values and rendered either as text or as JSON, so
//! the two shapes cannot drift apart. Cells are streamed in every shape: a JSON document is
//! written piece by piece rather than built in memory, so dumping a large file stays bounded.

use std::io::Write;

use serde::Serialize;

use crate::{Result, ToolError};

/// `--format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum Format {
    /// Aligned human text.
    #[default]
    Text,
    /// One JSON document for the whole run.
    Json,
    /// One JSON object per line (one per cell; one per other section).
    Jsonl,
}

/// A block of output with a text form and a JSON form.
pub trait Section: Serialize {
    /// Field name in JSON and tag in JSON lines.
    fn name(&self) -> &'static str;
    /// Append the human form (ending with a newline).
    fn text(&self, out: &mut String);
}

/// Writes sections and cells of one or more files in the chosen shape.
#[derive(Debug)]
pub struct Emitter<W: Write> {
    out: W,
    format: Format,
    files: usize,
    cells_open: bool,
    file: String,
}

fn io(e: std::io::Error) -> ToolError {
    ToolError::Output(e)
}

fn json<T: Serialize + ?Sized>(v: &T) -> String {
    // Serializing plain data (strings, numbers, maps with string keys) cannot fail.
    serde_json::to_string(v).unwrap_or_else(|e| format!("\"<unserializable: {e}>\""))
}

impl<W: Write> Emitter<W> {
    /// An emitter writing to `out`.
    pub fn new(out: W, format: Format) -> Self {
        Emitter {
            out,
            format,
            files: 0,
            cells_open: false,
            file: String::new(),
        }
    }

    /// The chosen shape.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Start the output of a file.
    pub fn begin_file(&mut self, file: &str) -> Result<()> {
        self.file = file.to_owned();
        let first = self.files == 0;
        self.files += 1;
        match self.format {
            Format::Text => {
                let sep = if first { "" } else { "\n" };
                writeln!(self.out, "{sep}File: {file}").map_err(io)
            }
            Format::Json => {
                let head = if first { "{\"files\":[" } else { "," };
                write!(self.out, "{head}{{\"file\":{}", json(file)).map_err(io)
            }
            Format::Jsonl => Ok(()),
        }
    }

    /// Write a section of the current file.
    pub fn section(&mut self, s: &dyn ErasedSection) -> Result<()> {
        self.close_cells()?;
        match self.format {
            Format::Text => {
                let mut t = String::from("\n");
                s.text(&mut t);
                self.out.write_all(t.as_bytes()).map_err(io)
            }
            Format::Json => write!(self.out, ",{}:{}", json(s.name()), s.json()).map_err(io),
            Format::Jsonl => writeln!(
                self.out,
                "{{\"file\":{},\"section\":{},\"data\":{}}}",
                json(&self.file),
                json(s.name()),
                s.json()
            )
            .map_err(io),
        }
    }

    /// Write one cell: `text` is its human line, `value` its JSON object.
    pub fn cell<T: Serialize>(&mut self, text: &str, value: &T) -> Result<()> {
        match self.format {
            Format::Text => {
                if !self.cells_open {
                    self.cells_open = true;
                    self.out.write_all(b"\n").map_err(io)?;
                }
                writeln!(self.out, "{text}").map_err(io)
            }
            Format::Json => {
                let lead = if !self.cells_open {
                    self.cells_open = true;
                    ",\"cells\":["
                } else {
                    ","
                };
                write!(self.out, "{lead}{}", json(value)).map_err(io)
            }
            Format::Jsonl => writeln!(self.out, "{}", json(value)).map_err(io),
        }
    }

    /// End the cell list of the current file (also done by the next section or file end).
    pub fn close_cells(&mut self) -> Result<()> {
        if self.cells_open {
            self.cells_open = false;
            if self.format == Format::Json {
                self.out.write_all(b"]").map_err(io)?;
            }
        }
        Ok(())
    }

    /// End the output of a file, recording the error that stopped it, if any.
    pub fn end_file(&mut self, error: Option<&ToolError>) -> Result<()> {
        self.close_cells()?;
        match (self.format, error) {
            // Text goes to a terminal: the caller prints the error on stderr, once.
            (Format::Text, _) => Ok(()),
            (Format::Json, e) => {
                let e = e.map(|e| e.to_string());
                write!(self.out, ",\"error\":{}}}", json(&e)).map_err(io)
            }
            (Format::Jsonl, Some(e)) => writeln!(
                self.out,
                "{{\"file\":{},\"error\":{}}}",
                json(&self.file),
                json(&e.to_string())
            )
            .map_err(io),
            (Format::Jsonl, None) => Ok(()),
        }
    }

    /// Close the document and flush.
    pub fn finish(&mut self, exit_code: i32) -> Result<()> {
        if self.format == Format::Json {
            let head = if self.files == 0 { "{\"files\":[" } else { "" };
            writeln!(self.out, "{head}],\"exit_code\":{exit_code}}}").map_err(io)?;
        }
        self.out.flush().map_err(io)
    }
}

/// Object-safe face of [`Section`], so sections of different types share one call.
pub trait ErasedSection {
    /// See [`Section::name`].
    fn name(&self) -> &'static str;
    /// See [`Section::text`].
    fn text(&self, out: &mut String);
    /// The JSON form.
    fn json(&self) -> String;
}

impl<T: Section> ErasedSection for T {
    fn name(&self) -> &'static str {
        Section::name(self)
    }
    fn text(&self, out: &mut String) {
        Section::text(self, out)
    }
    fn json(&self) -> String {
        json(self)
    }
}
