//! The one progress display of the CLI (`--progress never|auto|always`), on stderr: a bar on a
//! terminal; with `always` and no terminal, plain lines (`sweep: 3/12 points`), at most one per
//! tenth of the work for counts above 20; nothing with `never`, or with `auto` off a terminal.

use std::io::IsTerminal;
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};

/// When progress is shown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressMode {
    /// Never.
    Never,
    /// A bar when stderr is a terminal (the default).
    #[default]
    Auto,
    /// A bar on a terminal, plain lines otherwise.
    Always,
}

/// A progress display counting `unit` ("points", "runs", "requests").
pub struct Progress {
    bar: Option<ProgressBar>,
    lines: Option<Mutex<Lines>>,
}

struct Lines {
    what: String,
    unit: String,
    done: u64,
    total: u64,
    shown: u64,
}

impl Progress {
    /// A display for `what` (the command's name) counting up to `total` `unit`s (0: not known
    /// yet).
    pub fn new(mode: ProgressMode, what: &str, total: u64, unit: &str) -> Progress {
        let terminal = std::io::stderr().is_terminal();
        let bar = (mode != ProgressMode::Never && terminal).then(|| {
            let bar = ProgressBar::new(total);
            let template = format!("{{bar:40}} {{pos}}/{{len}} {unit}  {{per_sec}}  eta {{eta}}");
            bar.set_style(ProgressStyle::with_template(&template).expect("valid template"));
            bar
        });
        let lines = (mode == ProgressMode::Always && !terminal).then(|| {
            Mutex::new(Lines {
                what: what.to_string(),
                unit: unit.to_string(),
                done: 0,
                total,
                shown: 0,
            })
        });
        Progress { bar, lines }
    }

    /// `n` more done.
    pub fn inc(&self, n: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(n);
        }
        if let Some(lines) = &self.lines {
            let mut l = lines
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            l.done += n;
            l.show();
        }
    }

    /// The work grew by `n` (a planner's next round).
    pub fn grow(&self, n: u64) {
        if let Some(bar) = &self.bar {
            bar.inc_length(n);
        }
        if let Some(lines) = &self.lines {
            let mut l = lines
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            l.total += n;
        }
    }

    /// `done` of `total` done.
    pub fn set(&self, done: u64, total: u64) {
        if let Some(bar) = &self.bar {
            bar.set_length(total);
            bar.set_position(done);
        }
        if let Some(lines) = &self.lines {
            let mut l = lines
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            (l.done, l.total) = (done, total);
            l.show();
        }
    }

    /// Clears the bar.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Lines {
    /// Prints a line when the count crosses the next tenth of the total (every count up to 20).
    fn show(&mut self) {
        let step = if self.total > 20 { self.total / 10 } else { 1 };
        if self.done >= self.shown + step || (self.done == self.total && self.done > self.shown) {
            self.shown = self.done;
            eprintln!("{}: {}/{} {}", self.what, self.done, self.total, self.unit);
        }
    }
}
