//! The library's error type. Every variant displays as one line that names where the bad input is
//! (`file:line: field: what is wrong`), which the CLI prints as is and maps to exit code 2.

use std::path::Path;

/// Bad input or a failed read/write, located as precisely as possible.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A value in a file is wrong: `file:line: field: message`.
    #[error("{file}:{line}: {field}: {message}")]
    Field {
        /// The file, as the user named it.
        file: String,
        /// 1-based line number.
        line: usize,
        /// The key or column at fault (dotted path for nested keys).
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// A whole file is wrong or unreadable: `file: message`.
    #[error("{file}: {message}")]
    File {
        /// The file, as the user named it.
        file: String,
        /// What is wrong with it.
        message: String,
    },
    /// A setting is out of range: `at: key = value problem` (`at: key problem` when the value is
    /// not known), where `at` is `file:line`, the file alone (the key took its default) or `--set`.
    #[error("{at}: {key}{} {problem}", if .value.is_empty() { String::new() } else { format!(" = {}", .value) })]
    Setting {
        /// Where the setting was made.
        at: String,
        /// Dotted key path.
        key: String,
        /// The value as written.
        value: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A valid scenario cannot be run as asked (it would pass the clock's end, or need more
    /// memory than the budget): `scenario NAME: message`.
    #[error("scenario {scenario}: {message}")]
    Run {
        /// The scenario's name.
        scenario: String,
        /// What stopped it.
        message: String,
    },
    /// A command-line value is wrong: `--flag: message`.
    #[error("{flag}: {message}")]
    Arg {
        /// The flag at fault, with its dashes.
        flag: String,
        /// What is wrong with it.
        message: String,
    },
    /// SIGINT or SIGTERM stopped the work ([`crate::interrupt`]); the CLI exits with 130.
    #[error("interrupted{}", if .kept.is_empty() { String::new() } else { format!(": {}", .kept) })]
    Interrupted {
        /// What was kept (`12 of 56 points in DIR: run again with --resume`), or empty.
        kept: String,
    },
}

/// One invalid setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// Dotted key path, e.g. `bus.drop_rate` or `faults[0].worker`.
    pub key: String,
    /// The value as written.
    pub value: String,
    /// What is wrong, e.g. `is outside 0..=1`.
    pub problem: String,
}

impl Invalid {
    /// The error for `key` set to `value`, which `problem` says is wrong.
    pub fn new(key: &str, value: impl ToString, problem: &str) -> Invalid {
        Invalid {
            key: key.to_string(),
            value: value.to_string(),
            problem: problem.to_string(),
        }
    }
}

/// Shorthand for results in dynsim.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A bad value at `file:line` in `field`.
    pub fn field(
        file: impl AsRef<Path>,
        line: usize,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Error::Field {
            file: escape_controls(&file.as_ref().display().to_string()),
            line,
            field: escape_controls(&field.into()),
            message: one_line(message.into()),
        }
    }

    /// This error as the fault of command-line option `flag`, which named its file:
    /// `--flag FILE: message` (other errors are already located and stay as they are).
    pub fn for_flag(self, flag: &str) -> Self {
        match self {
            Error::File { file, message } => Error::Arg {
                flag: format!("{flag} {file}"),
                message,
            },
            other => other,
        }
    }

    /// A problem with the file as a whole.
    pub fn file(file: impl AsRef<Path>, message: impl Into<String>) -> Self {
        Error::File {
            file: escape_controls(&file.as_ref().display().to_string()),
            message: one_line(message.into()),
        }
    }

    /// An out-of-range setting made at `at` (`file:line`, the file, or `--set`); a value or
    /// problem that spans lines is folded onto one.
    pub fn setting(
        at: impl Into<String>,
        key: impl Into<String>,
        value: impl Into<String>,
        problem: impl Into<String>,
    ) -> Self {
        Error::Setting {
            at: escape_controls(&at.into()),
            key: escape_controls(&key.into()),
            value: escape_controls(&value.into()),
            problem: one_line(problem.into()),
        }
    }

    /// A scenario that cannot be run as asked.
    pub fn run(scenario: impl Into<String>, message: impl Into<String>) -> Self {
        let scenario: String = scenario.into();
        Error::Run {
            scenario: if scenario.is_empty() {
                "(unnamed)".to_string()
            } else {
                scenario
            },
            message: one_line(message.into()),
        }
    }

    /// A bad command-line value.
    pub fn arg(flag: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Arg {
            flag: escape_controls(&flag.into()),
            message: one_line(message.into()),
        }
    }
}

/// A name or value as it was written, with control characters (a line end in a quoted TOML key,
/// say) spelled as escapes, so that it stays on the error's one line.
fn escape_controls(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_string();
    }
    text.chars()
        .map(|c| match c {
            c if c.is_control() => c.escape_default().to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// Folds a multi-line message (some parsers' errors span lines) onto one line.
fn one_line(message: String) -> String {
    if !message.contains('\n') {
        return message;
    }
    message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Reads a whole text file, naming it in the error; a leading byte-order mark is dropped.
pub fn read_text(path: &Path) -> Result<String> {
    let mut text = std::fs::read_to_string(path)
        .map_err(|e| Error::file(path, format!("cannot read: {e}")))?;
    // A byte-order mark (editors on Windows write one) is not the text's.
    if text.starts_with('\u{feff}') {
        text.drain(..'\u{feff}'.len_utf8());
    }
    Ok(text)
}
