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
//!
//! Before any work, every command hands its outputs and the files it reads to
//! [`check_outputs`]: two outputs naming one file, an output naming (or a folder output
//! writing over) one of its inputs, and a folder that cannot be made are refused then.

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

/// The files a command reads, each known by its identity (device and inode), so that an
/// output reaching one by another path (a link, `./`, a hard link) is still found.
#[derive(Debug, Default)]
pub struct Inputs {
    /// Each input as given, what it is ("the scenario"), and its identity.
    files: Vec<(PathBuf, String, FileId)>,
}

/// A regular file's identity: its device and inode (elsewhere, its canonical path).
#[derive(Clone, Debug, PartialEq, Eq)]
struct FileId {
    #[cfg(unix)]
    dev_ino: (u64, u64),
    #[cfg(not(unix))]
    path: PathBuf,
}

impl FileId {
    /// The identity of the regular file `path` leads to (links followed), or `None` when there
    /// is none (missing, a folder, a device: nothing an output could replace).
    fn of(path: &Path) -> Option<FileId> {
        let meta = std::fs::metadata(path)
            .ok()
            .filter(std::fs::Metadata::is_file)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Some(FileId {
                dev_ino: (meta.dev(), meta.ino()),
            })
        }
        #[cfg(not(unix))]
        {
            let _ = meta;
            Some(FileId {
                path: path.canonicalize().ok()?,
            })
        }
    }
}

impl Inputs {
    /// No inputs yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `path`, `what` the command reads it as ("the scenario", "a trace"); a path that is
    /// not an existing regular file (`-`, a device, a missing file: its own error comes when
    /// it is read) is no output's concern and is skipped.
    pub fn add(&mut self, what: &str, path: &Path) {
        if let Some(id) = FileId::of(path) {
            self.files.push((path.to_path_buf(), what.to_string(), id));
        }
    }

    /// The input that `path` (an output) would replace, if any.
    fn replaced_by(&self, path: &Path) -> Option<(&Path, &str)> {
        let id = FileId::of(path)?;
        self.files
            .iter()
            .find(|(_, _, i)| *i == id)
            .map(|(p, what, _)| (p.as_path(), what.as_str()))
    }
}

/// One output of a command, as [`check_outputs`] takes it.
pub enum Output<'a> {
    /// A file (`-` for standard output), by the flag that named it; `None` when not given.
    File(&'a str, Option<&'a Path>),
    /// A folder, by the flag that named it, and which file names the command writes (or
    /// removes) in it.
    Folder(&'a str, &'a Path, &'a dyn Fn(&str) -> bool),
}

/// Checks a command's outputs before any work: that no two files name one regular file
/// ([`distinct_files`]), that every folder can be made ([`check_out_dir`]), and that no output
/// replaces one of `inputs` (a file output that is one, or a file a folder output writes that
/// is one, reached by any path). The output at fault's flag is named.
pub fn check_outputs(outputs: &[Output<'_>], inputs: &Inputs) -> Result<()> {
    let files: Vec<(&str, Option<&Path>)> = outputs
        .iter()
        .filter_map(|o| match *o {
            Output::File(flag, path) => Some((flag, path)),
            Output::Folder(..) => None,
        })
        .collect();
    distinct_files(&files)?;
    // How the output names an input: as given, and the input's own path where it differs.
    let named = |output: &Path, input: &Path, what: &str| {
        let also = if output == input {
            String::new()
        } else {
            format!(" ({})", input.display())
        };
        format!("{}{also}, {what} this command reads", output.display())
    };
    for output in outputs {
        match *output {
            Output::File(flag, Some(path)) if !is_stdout(path) => {
                if let Some((input, what)) = inputs.replaced_by(path) {
                    return Err(Error::arg(
                        flag,
                        format!(
                            "names {}: give the output its own file",
                            named(path, input, what)
                        ),
                    ));
                }
                // A file a folder output also writes.
                for other in outputs {
                    if let Output::Folder(dir_flag, dir, writes) = *other {
                        if written_in(dir, writes, path) {
                            return Err(Error::arg(
                                flag,
                                format!(
                                    "names {}, a file {dir_flag} {} writes: give each output \
                                     its own file",
                                    path.display(),
                                    dir.display()
                                ),
                            ));
                        }
                    }
                }
            }
            Output::File(..) => {}
            Output::Folder(flag, dir, writes) => {
                check_out_dir(flag, dir)?;
                let Ok(entries) = std::fs::read_dir(dir) else {
                    continue; // Not there yet: it holds nothing to replace.
                };
                for entry in entries.flatten() {
                    let name = entry.file_name();
                    if !name.to_str().is_some_and(writes) {
                        continue;
                    }
                    let path = entry.path();
                    if let Some((input, what)) = inputs.replaced_by(&path) {
                        return Err(Error::arg(
                            flag,
                            format!(
                                "would write over {}: give the output its own folder",
                                named(&path, input, what)
                            ),
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Whether the file output `path` is a file the folder output `dir` writes (`writes` its name).
fn written_in(dir: &Path, writes: &dyn Fn(&str) -> bool, path: &Path) -> bool {
    let Some(dest) = regular_destination(path) else {
        return false;
    };
    let (Some(name), Some(parent)) = (dest.file_name().and_then(|n| n.to_str()), dest.parent())
    else {
        return false;
    };
    writes(name)
        && dir
            .canonicalize()
            .is_ok_and(|d| parent.canonicalize().is_ok_and(|p| p == d))
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

/// A new temporary file in `dir` (`.dynsim-*.tmp`), removed when dropped.
fn temp_file_in(dir: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    tempfile::Builder::new()
        .prefix(".dynsim-")
        .suffix(".tmp")
        .tempfile_in(dir)
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
                let tmp = temp_file_in(dir).map_err(|e| {
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

/// Writes rendered files into `dir` (created if missing), each atomically. Every destination
/// is resolved before the first is written, so that one that cannot be (a folder in a file's
/// place) fails the command before it changes anything.
pub fn write_dir(dir: &Path, files: &[(String, Vec<u8>)]) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::file(dir, format!("cannot create folder: {e}")))?;
    for (name, _) in files {
        resolve(&dir.join(name))?;
    }
    for (name, bytes) in files {
        write_atomic(&dir.join(name), bytes)?;
    }
    Ok(())
}

/// Checks, before any work, that `dir` can be an output folder (so a bad `--out` fails in a
/// second, not after a long run): neither it nor a folder above it may be a file, and the
/// nearest of them that exists must take a new file (one is made there and removed at once:
/// a read-only folder, or one like `/proc` that takes no files, is refused now). Leaves
/// nothing behind. `flag` is the option that named it.
pub fn check_out_dir(flag: &str, dir: &Path) -> Result<()> {
    if is_stdout(dir) {
        return Err(Error::arg(
            flag,
            "takes a folder; - (standard output) cannot hold the files it writes",
        ));
    }
    let mut nearest = Path::new(".");
    for at in dir.ancestors().filter(|a| !a.as_os_str().is_empty()) {
        if at.exists() {
            if !at.is_dir() {
                return Err(Error::file(
                    at,
                    format!("is a file, not a folder ({flag} takes a folder)"),
                ));
            }
            nearest = at;
            break;
        }
    }
    let doing = if nearest == dir {
        "cannot write into the folder"
    } else {
        "cannot create the folder"
    };
    temp_file_in(nearest)
        .map(drop)
        .map_err(|e| Error::file(dir, format!("{doing}: {}", without_path(&e))))
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
    fn an_output_reaching_an_input_by_any_path_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.toml");
        std::fs::write(&input, "x").unwrap();
        let link = dir.path().join("link.toml");
        std::os::unix::fs::symlink("in.toml", &link).unwrap();
        let hard = dir.path().join("hard.toml");
        std::fs::hard_link(&input, &hard).unwrap();
        let dotted = dir.path().join(".").join("in.toml");
        let mut inputs = Inputs::new();
        inputs.add("the scenario", &input);
        inputs.add("a missing file", &dir.path().join("missing"));
        inputs.add("a device", Path::new("/dev/null"));
        for out in [&input, &link, &hard, &dotted] {
            let e = check_outputs(&[Output::File("--trace", Some(out))], &inputs)
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("--trace: names ") && e.contains("the scenario this command reads"),
                "{e}"
            );
        }
        let other = dir.path().join("out.jsonl");
        for out in [&other, Path::new("-"), Path::new("/dev/null")] {
            check_outputs(&[Output::File("--trace", Some(out))], &inputs).unwrap();
        }
    }

    #[test]
    fn a_folder_output_is_checked_against_the_files_it_writes() {
        let dir = tempfile::tempdir().unwrap();
        let results = dir.path().join("results.json");
        std::fs::write(&results, "{}").unwrap();
        let beside = dir.path().join("sweep.toml");
        std::fs::write(&beside, "x").unwrap();
        let writes = |name: &str| name == "results.json" || name.ends_with(".svg");
        let mut inputs = Inputs::new();
        inputs.add("a shard's results", &results);
        let e = check_outputs(&[Output::Folder("--out", dir.path(), &writes)], &inputs)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--out: would write over "), "{e}");
        // An input the command does not write is no concern.
        let mut inputs = Inputs::new();
        inputs.add("the sweep file", &beside);
        check_outputs(&[Output::Folder("--out", dir.path(), &writes)], &inputs).unwrap();
        // A file output that the folder output also writes.
        let plot = dir.path().join("a.svg");
        let e = check_outputs(
            &[
                Output::File("--predictions", Some(&plot)),
                Output::Folder("--plots", dir.path(), &writes),
            ],
            &Inputs::new(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("a file --plots"), "{e}");
    }

    #[test]
    fn an_output_folder_is_checked_by_making_a_file_where_it_would_go() {
        let dir = tempfile::tempdir().unwrap();
        // A new folder (two levels) under a writable one: fine, and nothing is left behind.
        check_out_dir("--out", &dir.path().join("a").join("b")).unwrap();
        check_out_dir("--out", dir.path()).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // A folder that takes no files (/proc), and one below a file.
        let e = check_out_dir("--out", Path::new("/proc/dynsim-x"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("/proc/dynsim-x: cannot create the folder: ") && e.contains("(os error"),
            "{e}"
        );
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let e = check_out_dir("--out", &file.join("sub"))
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("is a file, not a folder (--out takes a folder)"),
            "{e}"
        );
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
