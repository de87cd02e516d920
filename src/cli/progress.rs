//! The one progress bar of the CLI: drawn on a terminal, hidden (drawing nothing) otherwise.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// A bar counting `unit` ("requests", "points") up to `total`, with a rate and an estimate.
pub fn progress_bar(total: u64, unit: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    let template = format!("{{bar:40}} {{pos}}/{{len}} {unit}  {{per_sec}}  eta {{eta}}");
    bar.set_style(ProgressStyle::with_template(&template).expect("valid template"));
    bar
}
