//! Progress bars: only when stderr is a terminal, so pipes, logs and tests see clean output.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `len` units (`bytes` selects byte formatting), or a hidden one when stderr is not a
/// TTY.
pub fn bar(len: u64, message: &str, bytes: bool) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let template = if bytes {
        "{msg} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta})"
    } else {
        "{msg} [{bar:40}] {human_pos}/{human_len} ({per_sec}, {eta})"
    };
    let style = ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    let pb = ProgressBar::new(len).with_style(style);
    pb.set_message(message.to_owned());
    pb
}
