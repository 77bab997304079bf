//! The progress bar, only where a person watches: piping `rl bench` into a file or a CI log must
//! not fill it with redraws.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

pub fn bar(len: u64, quiet: bool, template: &str) -> ProgressBar {
    if quiet || !std::io::stdout().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template(template) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb
}
