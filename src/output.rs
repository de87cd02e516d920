//! The one output writer: files appear whole or not at all, and whatever an output path is, it
//! is written, never replaced.
//!
//! - `-` is standard output.
//! - A regular file (or a new one) is written to a temporary file in its folder and renamed over
//!   it only once complete, so a failed or interrupted run never leaves a half-written output;
//!   the temporary file is removed on every other exit ([`crate::interrupt`] removes it even when
//!   a second Ctrl-C quits at once).
//! - A symbolic link's target is written that way and the link kept.
//! - A path that exists and is not a regular file (`/dev/null`, a FIFO, a socket, a terminal)
//!   is opened and written in place: renaming a file over it would replace the device.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Writes `bytes` to `path` (see the module documentation for what each kind of path gets).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    AtomicFile::create(path)?.write_whole(bytes)
}

/// Writes `bytes` to standard output; a failed write (a full disk, a closed pipe) is an error,
/// not a panic and not silence. Every command prints through this.
pub fn write_stdout(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|_| out.flush())
        .map_err(|e| Error::file("<stdout>", format!("cannot write: {e}")))
}

/// Whether an output path means standard output.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Refuses two of `outputs` (each a flag and the path it was given) that name one regular file
/// (the later one would silently replace the earlier): the later flag is named. Standard output
/// and files written in place (`/dev/null`, a FIFO) may be named twice.
pub fn distinct_files(outputs: &[(&str, Option<&Path>)]) -> Result<()> {
    let mut seen: Vec<(&str, PathBuf)> = Vec::new();
    for &(flag, path) in outputs {
        let Some(dest) = path.and_then(regular_destination) else {
            continue;
        };
        if let Some((first, _)) = seen.iter().find(|(_, d)| *d == dest) {
            return Err(Error::arg(
                flag,
                format!(
                    "names the same file as {first} ({}): give each output its own file",
                    path.expect("a destination has a path").display()
                ),
            ));
        }
        seen.push((flag, dest));
    }
    Ok(())
}

/// The regular file `path` writes (links followed, its folder made absolute and canonical where
/// it exists), `None` for standard output, a file written in place or a path that cannot be
/// written (its own error comes when it is opened).
fn regular_destination(path: &Path) -> Option<PathBuf> {
    let Ok(Target::Replace(dest)) = resolve(path) else {
        return None;
    };
    let dest = std::path::absolute(&dest).ok()?;
    let name = dest.file_name()?;
    let dir = dest.parent()?;
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    Some(dir.join(name))
}

/// Where an output path leads, symbolic links followed.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// Standard output (`-`).
    Stdout,
    /// An existing file that is not a regular file: written in place.
    InPlace(PathBuf),
    /// A regular file, new or existing: written to a temporary file and renamed over it.
    Replace(PathBuf),
}

/// Resolves `path`: `-`, or the file its symbolic links lead to (a dangling link leads to the
/// file it names, which is created).
fn resolve(path: &Path) -> Result<Target> {
    if is_stdout(path) {
        return Ok(Target::Stdout);
    }
    let mut at = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = std::fs::read_link(&at)
                    .map_err(|e| Error::file(path, format!("cannot read the link: {e}")))?;
                at = match at.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            Ok(m) if m.is_dir() => {
                return Err(Error::file(path, "is a folder, not a file"));
            }
            Ok(m) if m.is_file() => return Ok(Target::Replace(at)),
            Ok(_) => return Ok(Target::InPlace(at)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Target::Replace(at)),
            Err(e) => return Err(Error::file(path, format!("cannot write: {e}"))),
        }
    }
    Err(Error::file(
        path,
        "cannot write: too many levels of symbolic links",
    ))
}

/// `e`'s message without the temporary file's path tempfile's message ends with (`... at path
/// "/dir/.dynsim-x.tmp"`): the operating system's own words ("Permission denied (os error 13)").
fn without_path(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" at path ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// A file being written (see the module documentation). [`AtomicFile::commit`] finishes it;
/// dropped without a commit, a regular file's temporary file vanishes and the destination is
/// untouched.
pub struct AtomicFile {
    /// The path as the user gave it (for errors).
    path: PathBuf,
    sink: Sink,
}

enum Sink {
    Stdout(std::io::Stdout),
    InPlace(File),
    Temp {
        tmp: tempfile::NamedTempFile,
        dest: PathBuf,
    },
}

impl AtomicFile {
    /// Starts writing `path`.
    pub fn create(path: &Path) -> Result<Self> {
        let fail = |e: std::io::Error| Error::file(path, format!("cannot write: {e}"));
        let sink = match resolve(path)? {
            Target::Stdout => Sink::Stdout(std::io::stdout()),
            Target::InPlace(at) => Sink::InPlace(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(at)
                    .map_err(fail)?,
            ),
            Target::Replace(dest) => {
                let dir = match dest.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p,
                    _ => Path::new("."),
                };
                if !dir.is_dir() {
                    return Err(Error::file(
                        path,
                        format!("cannot write: its folder {} does not exist", dir.display()),
                    ));
                }
                // The error's own text names the temporary file, which the user never named:
                // the operating system's message is kept without it.
                let tmp = tempfile::Builder::new()
                    .prefix(".dynsim-")
                    .suffix(".tmp")
                    .tempfile_in(dir)
                    .map_err(|e| {
                        Error::file(path, format!("cannot write: {}", without_path(&e)))
                    })?;
                crate::interrupt::track_temp(tmp.path());
                Sink::Temp { tmp, dest }
            }
        };
        Ok(AtomicFile {
            path: path.to_path_buf(),
            sink,
        })
    }

    /// Writes `bytes` and finishes the file ([`AtomicFile::commit`]): for an output opened
    /// before the work whose whole contents come at its end.
    pub fn write_whole(mut self, bytes: &[u8]) -> Result<()> {
        self.write_all(bytes)
            .map_err(|e| Error::file(&self.path, format!("cannot write: {e}")))?;
        self.commit()
    }

    /// Finishes the file: flushes it and, for a regular file, renames the temporary file over
    /// the destination.
    pub fn commit(mut self) -> Result<()> {
        let path = self.path.clone();
        let fail = |e: std::io::Error| Error::file(&path, format!("cannot write: {e}"));
        match std::mem::replace(&mut self.sink, Sink::Stdout(std::io::stdout())) {
            Sink::Stdout(mut out) => out.flush().map_err(fail),
            Sink::InPlace(mut f) => f.flush().map_err(fail),
            Sink::Temp { tmp, dest } => {
                // Temporary files are created private (0600); an output is an ordinary file.
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    let mode = std::fs::Permissions::from_mode(0o644);
                    tmp.as_file().set_permissions(mode).map_err(fail)?;
                }
                tmp.as_file().sync_all().map_err(fail)?;
                let temp_path = tmp.path().to_path_buf();
                let done = tmp.persist(&dest).map(|_| ()).map_err(|e| fail(e.error));
                crate::interrupt::untrack_temp(&temp_path);
                done
            }
        }
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if let Sink::Temp { tmp, .. } = &self.sink {
            crate::interrupt::untrack_temp(tmp.path());
        }
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match &mut self.sink {
            Sink::Stdout(out) => out.write(buf),
            Sink::InPlace(f) => f.write(buf),
            Sink::Temp { tmp, .. } => tmp.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.sink {
            Sink::Stdout(out) => out.flush(),
            Sink::InPlace(f) => f.flush(),
            Sink::Temp { tmp, .. } => tmp.flush(),
        }
    }
}

/// Serialises `value` as pretty JSON (two-space indent, trailing newline), the shape of every
/// JSON file dynsim writes.
pub fn pretty_json<T: serde::Serialize>(value: &T) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).expect("in-memory JSON serialisation");
    bytes.push(b'\n');
    bytes
}

/// Writes rendered files into `dir` (created if missing), each atomically.
pub fn write_dir(dir: &Path, files: &[(String, Vec<u8>)]) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::file(dir, format!("cannot create folder: {e}")))?;
    for (name, bytes) in files {
        write_atomic(&dir.join(name), bytes)?;
    }
    Ok(())
}

/// Checks, before any work, that `dir` can be an output folder (so a bad `--out` fails in a
/// second, not after a long run): neither it nor a folder above it may be a file. Creates
/// nothing. `flag` is the option that named it.
pub fn check_out_dir(flag: &str, dir: &Path) -> Result<()> {
    if is_stdout(dir) {
        return Err(Error::arg(
            flag,
            "takes a folder; - (standard output) cannot hold the files it writes",
        ));
    }
    for at in dir.ancestors().filter(|a| !a.as_os_str().is_empty()) {
        if at.exists() {
            if !at.is_dir() {
                return Err(Error::file(
                    at,
                    format!("is a file, not a folder ({flag} takes a folder)"),
                ));
            }
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt;

    #[test]
    fn writes_whole_file_and_leaves_no_temp_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        write_atomic(&path, b"{}\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{}\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(
                mode & 0o777,
                0o644,
                "an output is readable by others, not private"
            );
        }
    }

    #[test]
    fn two_outputs_naming_one_file_are_refused_by_the_later_flag() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.out");
        // The same file by another spelling (through `.`) and through a link.
        let same = dir.path().join(".").join("a.out");
        let link = dir.path().join("link.out");
        std::os::unix::fs::symlink("a.out", &link).unwrap();
        for other in [&a, &same, &link] {
            let e = distinct_files(&[("--trace", Some(&a)), ("--perfetto", Some(other))])
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("--perfetto") && e.contains("same file as --trace"),
                "{e}"
            );
        }
        let b = dir.path().join("b.out");
        let dev = Path::new("/dev/null");
        let stdout = Path::new("-");
        distinct_files(&[
            ("--trace", Some(&a)),
            ("--perfetto", Some(&b)),
            ("--x", None),
        ])
        .unwrap();
        distinct_files(&[("--trace", Some(dev)), ("--perfetto", Some(dev))]).unwrap();
        distinct_files(&[("--trace", Some(stdout)), ("--perfetto", Some(stdout))]).unwrap();
    }

    #[test]
    fn a_link_s_target_is_written_and_the_link_kept() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real.json");
        std::fs::write(&target, b"old").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink("real.json", &link).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            2,
            "no temp left"
        );
        // A dangling link creates the file it names.
        let dangling = dir.path().join("dangling.json");
        std::os::unix::fs::symlink("made.json", &dangling).unwrap();
        write_atomic(&dangling, b"x").unwrap();
        assert_eq!(std::fs::read(dir.path().join("made.json")).unwrap(), b"x");
    }

    #[test]
    fn a_device_is_written_in_place_and_a_dropped_file_leaves_nothing() {
        assert_eq!(
            resolve(Path::new("/dev/null")).unwrap(),
            Target::InPlace("/dev/null".into())
        );
        write_atomic(Path::new("/dev/null"), b"x").unwrap();
        assert!(std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
        assert_eq!(resolve(Path::new("-")).unwrap(), Target::Stdout);
        let dir = tempfile::tempdir().unwrap();
        let mut f = AtomicFile::create(&dir.path().join("out")).unwrap();
        f.write_all(b"half").unwrap();
        drop(f);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert!(write_atomic(dir.path(), b"x")
            .unwrap_err()
            .to_string()
            .ends_with("is a folder, not a file"));
    }

    #[test]
    fn a_folder_that_refuses_new_files_gives_the_operating_system_s_message() {
        // /proc exists but takes no new files: the message is the system's, not "entity not
        // found", and names the output, not the temporary file.
        let e = write_atomic(Path::new("/proc/dynsim-x.json"), b"x")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("/proc/dynsim-x.json: cannot write: ") && e.contains("(os error "),
            "{e}"
        );
        assert!(!e.contains(".dynsim-"), "{e}");
    }

    #[test]
    fn missing_directory_is_an_error_naming_the_file() {
        let err = write_atomic(Path::new("/nonexistent-dir/x.json"), b"x").unwrap_err();
        assert!(err
            .to_string()
            .starts_with("/nonexistent-dir/x.json: cannot write"));
    }
}
