//! The one directory walker every reader of rule directories and manifest trees uses.
//!
//! [`walk_files`] lists the files below a directory, in path order, and knows the layout
//! kubelet gives a mounted ConfigMap: the directory holds `..data -> ..2024_01_01_…/` and one
//! symlink per key, `foo.yaml -> ..data/foo.yaml`. Hidden entries (names starting with `.`) are
//! skipped, so each key is read once, named by its visible path `DIR/foo.yaml`, and symlinked
//! files are followed. A symlinked directory is followed only when asked
//! ([`WalkOptions::follow_dir_links`]); a link that leads back to an ancestor is refused with
//! [`Error::SymlinkLoop`]. An entry that cannot be read is an error naming that entry; the walk
//! goes on with the others.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use walkdir::WalkDir;

use crate::error::Error;
use crate::source::Source;

/// What [`walk_files`] lists.
#[derive(Debug, Clone, Copy)]
pub struct WalkOptions<'a> {
    /// File extensions to keep, without the dot (`["yaml", "yml"]`); empty keeps every file.
    pub extensions: &'a [&'a str],
    /// Directory names not to descend into (`["tests"]` for rule directories).
    pub skip_dirs: &'a [&'a str],
    /// Descend into symlinked directories (with loop detection). Symlinked files are always
    /// read.
    pub follow_dir_links: bool,
}

impl WalkOptions<'static> {
    /// Rule directories: `*.yaml` / `*.yml`, `tests/` skipped, symlinked directories followed.
    pub const RULES: WalkOptions<'static> = WalkOptions {
        extensions: &["yaml", "yml"],
        skip_dirs: &["tests"],
        follow_dir_links: true,
    };
    /// Manifest trees (`check DIR`): `*.yaml` / `*.yml` / `*.json`, symlinked directories not
    /// followed.
    pub const MANIFESTS: WalkOptions<'static> = WalkOptions {
        extensions: &["yaml", "yml", "json"],
        skip_dirs: &[],
        follow_dir_links: false,
    };
}

fn hidden(name: &std::ffi::OsStr) -> bool {
    name.to_string_lossy().starts_with('.')
}

/// The files below `root` that `options` selects, in path order (components compared in
/// order, so `a/b.yaml` comes before `a.yaml`), each named by the path through `root`, and
/// every error met on the way. A `root` that is a file is listed as itself.
///
/// Errors: [`Error::Io`] naming the entry that could not be read (a broken symlink, a
/// directory without permission) and [`Error::SymlinkLoop`]; the other entries are still
/// listed.
pub fn walk_files(root: &Path, options: &WalkOptions<'_>) -> (Vec<PathBuf>, Vec<Error>) {
    let (files, errors, _) = walk_files_noting(root, options);
    (files, errors)
}

/// What a special file (not a regular file, directory or symlink) is, for the note that it is
/// skipped; `None` for other files.
#[cfg(unix)]
fn special_kind(file_type: std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_fifo() {
        Some("a named pipe (FIFO)")
    } else if file_type.is_socket() {
        Some("a socket")
    } else if file_type.is_block_device() || file_type.is_char_device() {
        Some("a device")
    } else {
        None
    }
}

#[cfg(not(unix))]
fn special_kind(_file_type: std::fs::FileType) -> Option<&'static str> {
    None
}

/// [`walk_files`], plus a note for each special file skipped (a named pipe, socket or device
/// below `root`, or a symlink to one): `skipping DIR/x.yaml: a named pipe (FIFO), not a
/// regular file`. Reading one could block forever or never end.
pub fn walk_files_noting(
    root: &Path,
    options: &WalkOptions<'_>,
) -> (Vec<PathBuf>, Vec<Error>, Vec<String>) {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    let mut notes = Vec::new();
    let walker = WalkDir::new(root)
        .follow_links(options.follow_dir_links)
        .follow_root_links(true)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| {
            e.depth() == 0
                || !(hidden(e.file_name())
                    || (e.file_type().is_dir()
                        && options
                            .skip_dirs
                            .iter()
                            .any(|d| e.file_name() == std::ffi::OsStr::new(d))))
        });
    for entry in walker {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                let path = e.path().unwrap_or(root).display().to_string();
                let ancestor = e.loop_ancestor().map(|a| a.display().to_string());
                errors.push(match (ancestor, e.into_io_error()) {
                    (Some(ancestor), _) => Error::SymlinkLoop { path, ancestor },
                    (None, Some(source)) => Error::Io { path, source },
                    (None, None) => Error::Io {
                        path,
                        source: std::io::Error::other("cannot be read"),
                    },
                });
                continue;
            }
        };
        let path = entry.path();
        let is_file = if entry.path_is_symlink() && !entry.file_type().is_dir() {
            // A symlink not followed by the walker: read it when it leads to a file.
            match std::fs::metadata(path) {
                Ok(m) => {
                    if let Some(kind) = special_kind(m.file_type()) {
                        notes.push(format!(
                            "skipping {}: {kind}, not a regular file",
                            path.display()
                        ));
                    }
                    m.is_file()
                }
                Err(source) => {
                    errors.push(Error::Io {
                        path: path.display().to_string(),
                        source,
                    });
                    continue;
                }
            }
        } else {
            if let Some(kind) = special_kind(entry.file_type()) {
                notes.push(format!(
                    "skipping {}: {kind}, not a regular file",
                    path.display()
                ));
            }
            entry.file_type().is_file()
        };
        if !is_file {
            continue;
        }
        let wanted = options.extensions.is_empty()
            || path
                .extension()
                .is_some_and(|x| options.extensions.iter().any(|e| x == *e));
        if wanted || entry.depth() == 0 {
            files.push(path.to_path_buf());
        }
    }
    (files, errors, notes)
}

/// [`walk_files`], then reads every file as a [`Source`] named by its path. A file that cannot
/// be read is an [`Error::Io`] beside the others.
pub fn read_files(root: &Path, options: &WalkOptions<'_>) -> (Vec<Arc<Source>>, Vec<Error>) {
    let (files, mut errors) = walk_files(root, options);
    let mut sources = Vec::with_capacity(files.len());
    for f in files {
        // A file past the size limit is refused before it is read: a rule set mounted from
        // the wrong volume, or a log mistaken for a manifest, costs no memory.
        let limit = crate::source::MAX_SOURCE_BYTES;
        let read = std::fs::File::open(&f).and_then(|file| {
            use std::io::Read as _;
            let mut bytes = Vec::new();
            file.take(limit as u64 + 1).read_to_end(&mut bytes)?;
            Ok(bytes)
        });
        if let Ok(bytes) = &read
            && bytes.len() > limit
        {
            // Its whole size when it is known (only the limit and one byte were read).
            let size = std::fs::metadata(&f)
                .ok()
                .and_then(|m| usize::try_from(m.len()).ok())
                .filter(|&n| n > limit);
            errors.push(Error::TooLarge {
                source_name: f.display().to_string(),
                bytes: size.unwrap_or(bytes.len()),
                limit,
            });
            continue;
        }
        let text = read.and_then(|bytes| {
            String::from_utf8(bytes).map_err(|e| {
                // Named like a manifest's: the byte, its offset and its line.
                let at = e.utf8_error().valid_up_to();
                let bytes = e.as_bytes();
                let line = bytes[..at].iter().filter(|b| **b == b'\n').count() + 1;
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    crate::limits::invalid_utf8(bytes, at, Some(line)),
                )
            })
        });
        match text {
            Ok(text) => sources.push(Source::new(f.display().to_string(), text)),
            Err(source) => errors.push(Error::Io {
                path: f.display().to_string(),
                source,
            }),
        }
    }
    (sources, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_is_not_utf8_names_the_byte_and_its_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("r.yaml"), b"a: 1\n# caf\xe9\n").expect("write");
        let (sources, errors) = read_files(dir.path(), &WalkOptions::MANIFESTS);
        assert!(sources.is_empty());
        let path = dir.path().join("r.yaml").display().to_string();
        assert_eq!(
            errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [format!(
                "reading {path}: not UTF-8 text: invalid byte 0xe9 at byte offset 10 (line 2)"
            )]
        );
    }

    #[test]
    fn a_file_past_the_size_limit_is_refused_with_its_size() {
        let dir = tempfile::tempdir().expect("tempdir");
        let limit = crate::source::MAX_SOURCE_BYTES;
        let file = std::fs::File::create(dir.path().join("big.yaml")).expect("create");
        file.set_len(limit as u64 + 10).expect("sparse file");
        std::fs::write(dir.path().join("ok.yaml"), "a: 1\n").expect("write");
        let (sources, errors) = read_files(dir.path(), &WalkOptions::MANIFESTS);
        assert_eq!(sources.len(), 1);
        let path = dir.path().join("big.yaml").display().to_string();
        assert_eq!(
            errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [format!(
                "{path}: input is {} bytes, above the limit of {limit}",
                limit + 10
            )]
        );
    }

    fn names(root: &Path, files: &[PathBuf]) -> Vec<String> {
        files
            .iter()
            .map(|f| {
                f.strip_prefix(root)
                    .expect("under root")
                    .display()
                    .to_string()
            })
            .collect()
    }

    #[cfg(unix)]
    #[test]
    fn a_configmap_mount_reads_each_key_once_by_its_visible_name() {
        use std::os::unix::fs::symlink;
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("rules");
        let data = dir.join("..2024_01_01_00_00_00.123456789");
        std::fs::create_dir_all(&data).expect("mkdir");
        std::fs::write(data.join("gang.yaml"), "a: 1\n").expect("write");
        std::fs::write(data.join("admission.yaml"), "b: 2\n").expect("write");
        symlink("..2024_01_01_00_00_00.123456789", dir.join("..data")).expect("link");
        symlink("..data/gang.yaml", dir.join("gang.yaml")).expect("link");
        symlink("..data/admission.yaml", dir.join("admission.yaml")).expect("link");
        let (sources, errors) = read_files(&dir, &WalkOptions::RULES);
        assert!(errors.is_empty(), "{errors:?}");
        let got: Vec<(String, String)> = sources
            .iter()
            .map(|s| (s.name.clone(), s.text.to_string()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    format!("{}/admission.yaml", dir.display()),
                    "b: 2\n".to_string()
                ),
                (format!("{}/gang.yaml", dir.display()), "a: 1\n".to_string()),
            ]
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_loop_is_an_error_and_the_other_files_still_load() {
        use std::os::unix::fs::symlink;
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("rules");
        std::fs::create_dir_all(dir.join("sub")).expect("mkdir");
        std::fs::write(dir.join("sub/a.yaml"), "a: 1\n").expect("write");
        symlink("..", dir.join("sub/up")).expect("link");
        let (files, errors) = walk_files(&dir, &WalkOptions::RULES);
        assert_eq!(names(&dir, &files), ["sub/a.yaml"]);
        let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            [format!(
                "reading {}/sub/up: symlink loop: it leads back to {}",
                dir.display(),
                dir.display()
            )]
        );
        assert_eq!(errors[0].code(), "nvcre::files::symlink_loop");
    }

    #[cfg(unix)]
    #[test]
    fn manifest_walks_do_not_follow_directory_links_and_report_broken_ones() {
        use std::os::unix::fs::symlink;
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("in");
        std::fs::create_dir_all(dir.join("real")).expect("mkdir");
        std::fs::write(dir.join("real/x.json"), "{}").expect("write");
        std::fs::write(dir.join("notes.txt"), "").expect("write");
        symlink("real", dir.join("linked")).expect("link");
        symlink("real/x.json", dir.join("y.json")).expect("link");
        symlink("missing.yaml", dir.join("broken.yaml")).expect("link");
        let (files, errors) = walk_files(&dir, &WalkOptions::MANIFESTS);
        assert_eq!(names(&dir, &files), ["real/x.json", "y.json"]);
        let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            [format!(
                "reading {}/broken.yaml: no such file or directory",
                dir.display()
            )]
        );
    }

    #[test]
    fn hidden_entries_and_skipped_directories_are_not_read() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("rules");
        for d in ["a", ".git", "tests/p", "b"] {
            std::fs::create_dir_all(dir.join(d)).expect("mkdir");
        }
        for f in [
            "a/x.yaml",
            "a.yaml",
            ".hidden.yaml",
            ".git/config.yaml",
            "tests/p/case.yaml",
            "b/y.yml",
            "b/z.txt",
        ] {
            std::fs::write(dir.join(f), "").expect("write");
        }
        let (files, errors) = walk_files(&dir, &WalkOptions::RULES);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(names(&dir, &files), ["a/x.yaml", "a.yaml", "b/y.yml"]);
    }
}
