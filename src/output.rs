//! The one output writer: files appear whole or not at all.
//!
//! Every file dynsim writes goes to a temporary file in the destination's directory and is renamed
//! over the destination only once complete, so a failed or interrupted run never leaves a
//! half-written output. `-` means standard output.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Writes `bytes` to `path` atomically (temp file + rename), or to stdout when `path` is `-`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    if path.as_os_str() == "-" {
        return write_stdout(bytes);
    }
    let mut file = AtomicFile::create(path)?;
    file.write_all(bytes)
        .map_err(|e| Error::file(path, format!("cannot write: {e}")))?;
    file.commit()
}

/// Writes `bytes` to standard output; a failed write (a full disk, a closed pipe) is an error,
/// not a panic and not silence. Every command prints through this.
pub fn write_stdout(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|_| out.flush())
        .map_err(|e| Error::file("<stdout>", format!("cannot write: {e}")))
}

/// A file being written: a temporary file beside the destination that [`AtomicFile::commit`]
/// renames over it. Dropped without a commit, it vanishes and the destination is untouched.
pub struct AtomicFile {
    tmp: tempfile::NamedTempFile,
    path: PathBuf,
}

impl AtomicFile {
    /// Starts writing `path`.
    pub fn create(path: &Path) -> Result<Self> {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let tmp = tempfile::NamedTempFile::new_in(dir)
            .map_err(|e| Error::file(path, format!("cannot write: {e}")))?;
        Ok(AtomicFile {
            tmp,
            path: path.to_path_buf(),
        })
    }

    /// Flushes to disk and renames the temporary file over the destination.
    pub fn commit(self) -> Result<()> {
        let fail = |e: std::io::Error| Error::file(&self.path, format!("cannot write: {e}"));
        // Temporary files are created private (0600); an output is an ordinary file.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::Permissions::from_mode(0o644);
            self.tmp.as_file().set_permissions(mode).map_err(fail)?;
        }
        self.tmp.as_file().sync_all().map_err(fail)?;
        let path = self.path.clone();
        self.tmp
            .persist(&path)
            .map_err(|e| Error::file(&path, format!("cannot write: {}", e.error)))?;
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.tmp.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.tmp.flush()
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
/// nothing.
pub fn check_out_dir(dir: &Path) -> Result<()> {
    for at in dir.ancestors().filter(|a| !a.as_os_str().is_empty()) {
        if at.exists() {
            if !at.is_dir() {
                return Err(Error::file(
                    at,
                    "is a file, not a folder (--out takes a folder)",
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
    fn missing_directory_is_an_error_naming_the_file() {
        let err = write_atomic(Path::new("/nonexistent-dir/x.json"), b"x").unwrap_err();
        assert!(err
            .to_string()
            .starts_with("/nonexistent-dir/x.json: cannot write"));
    }
}
