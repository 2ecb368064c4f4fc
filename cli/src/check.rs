//! `nvcre-policy check`: findings for every WorkloadRun and Workflow document of the inputs, in
//! one or more report formats.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use nvcre_domain::{CheckRequest, input_object_values, reads_objects};
use nvcre_engine::{
    Chunk, ChunkReader, Document, Finding, Objects, RuleSet, Severity, Source, parse_chunk,
};

use crate::findings::{Encoded, Findings};
use crate::input::{self, InputFile};
use crate::report::{
    self, CheckedDocument, CheckedFile, Format, InputError, Place, Report, Summary, Window,
};
use crate::ruleset::RulesInfo;

/// Writes the report to `path` atomically: into a temporary file in the same directory, renamed
/// over `path` once complete, so a reader (or a concurrent run) never sees a torn report.
///
/// Only a regular file is ever replaced. A symbolic link is followed: the file it names is
/// replaced (the link stays a link); a link to nothing is written through, creating its
/// target. A device, FIFO or socket (`/dev/null`, `/dev/stdout`, a named pipe) is written to
/// in place, never replaced by a file.
fn write_atomically(
    path: &std::path::Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() && !m.is_dir() => return write_in_place(path, write),
        Ok(_) if is_link => {
            let target = std::fs::canonicalize(path)?;
            return replace_file(&target, write);
        }
        Err(_) if is_link => return write_in_place(path, write),
        _ => {}
    }
    replace_file(path, write)
}

/// Writes the report into the file `path` names as it is (a device, a FIFO, a link's new target).
fn write_in_place(
    path: &std::path::Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    let mut out = std::io::BufWriter::new(file);
    write(&mut out)?;
    out.flush()
}

/// [`write_atomically`] of a regular file or a path where nothing is yet.
fn replace_file(
    path: &std::path::Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    // The report gets the mode a plain create would give it (0666 less the umask), or the
    // mode of the file it replaces, not the temporary file's private 0600.
    let mut builder = tempfile::Builder::new();
    #[cfg(unix)]
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path)
            .map(|m| m.permissions())
            .unwrap_or_else(|_| std::fs::Permissions::from_mode(0o666))
    };
    #[cfg(unix)]
    builder.permissions(mode);
    let mut tmp = builder
        .tempfile_in(dir)
        .map_err(|e| std::io::Error::new(e.kind(), strip_path(&e)))?;
    {
        let mut out = std::io::BufWriter::new(tmp.as_file_mut());
        write(&mut out)?;
        out.flush()?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// The OS message of an error that tempfile decorated with its temporary path (which means
/// nothing to the user): `No such file or directory (os error 2)`.
fn strip_path(e: &std::io::Error) -> String {
    let message = e.to_string();
    match message.split_once(" at path ") {
        Some((os, _)) => os.to_string(),
        None => message,
    }
}

/// One `-o FORMAT[=PATH]`: a format, written to PATH or (without one) to standard output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// The report format.
    pub format: Format,
    /// Where to write it; `None` is standard output.
    pub path: Option<PathBuf>,
}

/// Parses `FORMAT` or `FORMAT=PATH`.
fn parse_output(s: &str) -> Result<Output, String> {
    let (name, path) = match s.split_once('=') {
        Some((_, "")) => {
            return Err(format!(
                "{s:?}: the path after '=' is empty; write -o FORMAT=PATH (e.g. -o json=report.json), or -o FORMAT for standard output"
            ));
        }
        // `-` is standard output, as for the inputs.
        Some((n, "-")) => (n, None),
        Some((n, p)) => (n, Some(PathBuf::from(p))),
        None => (s, None),
    };
    let format = Format::from_str(name, true).map_err(|_| {
        format!("unknown format {name:?}: expected one of text, json, sarif, junit, github")
    })?;
    Ok(Output { format, path })
}

/// The lowest severity that fails a check (exit 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// Only error findings fail.
    Error,
    /// Warning and error findings fail.
    Warning,
}

impl FailOn {
    /// The severity threshold.
    pub fn severity(self) -> Severity {
        match self {
            FailOn::Error => Severity::Error,
            FailOn::Warning => Severity::Warning,
        }
    }
}

/// Arguments of `check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    nodes: input::NodeArgs,
    /// Report format (text, json, sarif, junit, github), to PATH when given (`-`: standard
    /// output), else to standard output. Repeat for several formats; at most one may use
    /// standard output. Default: text.
    #[arg(short = 'o', long = "output", value_name = "FORMAT[=PATH]", value_parser = parse_output)]
    outputs: Vec<Output>,
    /// Exit 1 when a finding at or above this severity exists.
    #[arg(long = "fail-on", value_enum, default_value = "error")]
    fail_on: FailOn,
    /// Same as the global `--color=never` (kept for existing scripts).
    #[arg(long = "no-color", hide = true)]
    no_color: bool,
    /// Files, directories (recursively: .yaml, .yml, .json) or `-` for standard input.
    #[arg(value_name = "PATH", required = true)]
    paths: Vec<String>,
}

/// What checking the inputs produced: what the reports are made of.
#[derive(Debug, Default)]
pub struct Checked {
    /// Every finding, input by input, each document's in source order, each with the lines
    /// around its line (the inputs themselves are not kept).
    pub findings: Findings,
    /// One entry per input read, with its documents.
    pub files: Vec<CheckedFile>,
    /// Inputs (or documents) that could not be read or checked.
    pub errors: Vec<InputError>,
    /// The documents (input, index) whose check failed with an input error, while checking.
    unchecked: std::collections::HashSet<(usize, usize)>,
}

impl Checked {
    /// The report of these results, as `check` renders it in every format.
    pub fn report<'a>(
        &'a self,
        rules: &'a RuleSet,
        rules_info: &'a RulesInfo,
        fail_on: Severity,
    ) -> Report<'a> {
        Report {
            rules,
            findings: &self.findings,
            files: &self.files,
            errors: &self.errors,
            fail_on,
            rules_info,
        }
    }

    /// The exit code of a check with these results (the report written): 2 when an input
    /// could not be checked or a rule could not be evaluated (a rule-file error, not a
    /// violation), 1 when a finding is at or above `fail_on`, else 0.
    pub fn exit_code(&self, fail_on: Severity) -> u8 {
        if !self.errors.is_empty() || self.findings.rule_errors() > 0 {
            2
        } else if self.findings.at_or_above(fail_on) > 0 {
            1
        } else {
            0
        }
    }
}

/// Runs `check`; returns 0 clean, 1 findings at or above `--fail-on`, 2 when an input, a flag
/// or an output file could not be used.
pub fn run(rules: &RuleSet, rules_info: &RulesInfo, args: &CheckArgs) -> ExitCode {
    let started = std::time::Instant::now();
    let Some(outputs) = outputs(args) else {
        return ExitCode::from(2);
    };
    let req = match args.nodes.request(rules) {
        Ok(r) => CheckRequest {
            platform: r.platform,
            gpu_arch: r.gpu_arch,
            nodes: r.nodes,
        },
        // A nodes file that cannot be used is an input error of that file, in every report
        // asked for (a CI job reading `-o json` gets the envelope, not an empty stdout).
        Err(input::NodeArgsError::NodesFile { file, message, pos }) => {
            let mut errors = vec![InputError {
                pos,
                ..InputError::new(file, message)
            }];
            errors.extend(unreadable_paths(&args.paths));
            let checked = Checked {
                errors,
                ..Checked::default()
            };
            return emit(rules, rules_info, args, &outputs, &checked, started);
        }
        // A flag refused by the rule set itself (a table it needs is missing or fails) is an
        // error of the rules, reported as `run_unloaded` reports a set that does not load.
        Err(input::NodeArgsError::Flags(e))
            if !matches!(e.cause(), nvcre_domain::PolicyError::Usage(_)) =>
        {
            let mut errors = vec![InputError {
                place: Place::Other,
                ..InputError::new(
                    rules_info.source.clone(),
                    format!("{}: {e}", rules_info.source),
                )
            }];
            errors.extend(unreadable_paths(&args.paths));
            let checked = Checked {
                errors,
                ..Checked::default()
            };
            return emit(rules, rules_info, args, &outputs, &checked, started);
        }
        Err(e) => {
            report::error_line(&e.to_string());
            return ExitCode::from(2);
        }
    };
    let checked = check_inputs(rules, &args.paths, &req);
    if checked.files.iter().all(|f| f.documents.is_empty()) && checked.errors.is_empty() {
        report::warning_line(
            "no manifest documents found in the given paths; nothing was checked (give files, directories or `-` with .yaml, .yml or .json manifests)",
        );
    }
    emit(rules, rules_info, args, &outputs, &checked, started)
}

/// The given paths that cannot be read (a missing file, a dangling link), as the input errors
/// a check reports for them: when nothing can be checked (the rule set or the nodes file cannot
/// be used) these are still reported, so that one run names every input to fix.
fn unreadable_paths(paths: &[String]) -> Vec<InputError> {
    input::expand_in_order(paths)
        .into_iter()
        .filter_map(Result::err)
        .map(|(file, message)| InputError {
            place: Place::Unread(0),
            ..InputError::new(file, message)
        })
        .collect()
}

/// Runs `check` when the rule set did not load: each load error is an input error of its rule
/// file, written in every report asked for; exit 2. Nothing is checked.
pub fn run_unloaded(
    errors: &nvcre_engine::LoadErrors,
    rules_info: &RulesInfo,
    args: &CheckArgs,
) -> ExitCode {
    let started = std::time::Instant::now();
    let Some(outputs) = outputs(args) else {
        return ExitCode::from(2);
    };
    let empty = match RuleSet::from_sources(&[]) {
        Ok(r) => r,
        Err(_) => {
            for e in &errors.errors {
                report::error_line(&e.to_string());
            }
            return ExitCode::from(2);
        }
    };
    let checked = Checked {
        errors: errors
            .errors
            .iter()
            .map(|e| {
                // An error of the set as a whole (a missing directory) is the directory's.
                let (file, pos) = e.location().unwrap_or((rules_info.source.as_str(), None));
                InputError {
                    file: file.to_string(),
                    message: e.to_string(),
                    pos,
                    place: Place::Other,
                }
            })
            .chain(unreadable_paths(&args.paths))
            .collect(),
        ..Checked::default()
    };
    emit(&empty, rules_info, args, &outputs, &checked, started)
}

/// The reports `args` asks for, or `None` (the usage error printed) when they cannot be
/// written as asked.
fn outputs(args: &CheckArgs) -> Option<Vec<Output>> {
    if args.no_color {
        crate::color::init(crate::color::ColorWhen::Never);
    }
    if args.nodes.stdin_reads(&args.paths) > 1 {
        // The second read of the stream would be empty: one input counted twice.
        report::error_line(
            "standard input (`-`) can be given once; name the other inputs as files",
        );
        return None;
    }
    let outputs = if args.outputs.is_empty() {
        vec![Output {
            format: Format::Text,
            path: None,
        }]
    } else {
        args.outputs.clone()
    };
    if outputs.iter().filter(|o| o.path.is_none()).count() > 1 {
        report::error_line(
            "at most one -o format may write to standard output; give the others a file: -o FORMAT=PATH",
        );
        return None;
    }
    // One report written over another (or over an input) would be lost without a word. The
    // inputs: the paths given (a directory's manifests among them) and the nodes file.
    let inputs: Vec<(&String, PathBuf)> = args
        .paths
        .iter()
        .chain(args.nodes.nodes_file.iter())
        .filter(|p| *p != "-")
        .map(|p| (p, same_file_key(Path::new(p))))
        .collect();
    // The manifests a directory input is read for, by what they name: a symbolic link in the
    // directory reads its target, which may lie outside it. Walked only when a report goes to
    // a file.
    let walked: Vec<(&String, PathBuf)> = if outputs.iter().any(|o| o.path.is_some()) {
        inputs
            .iter()
            .filter(|(_, given)| given.is_dir())
            .flat_map(|(input, given)| {
                nvcre_engine::walk_files(given, &nvcre_engine::WalkOptions::MANIFESTS)
                    .0
                    .into_iter()
                    .map(move |f| (*input, same_file_key(&f)))
            })
            .collect()
    } else {
        Vec::new()
    };
    let to_stdout = outputs.iter().any(|o| o.path.is_none());
    let mut seen: Vec<(PathBuf, &Path)> = Vec::new();
    for path in outputs.iter().filter_map(|o| o.path.as_deref()) {
        if to_stdout && is_standard_output(path) {
            // `-o json=/dev/stdout -o text`: two reports mixed in one stream; and when standard
            // output is a file, the report written to its path would truncate the other.
            report::error_line(&format!(
                "-o: {} is standard output, where another report goes; give this report its own path, or write it as FORMAT=- alone",
                path.display()
            ));
            return None;
        }
        let key = same_file_key(path);
        if let Some((_, first)) = seen.iter().find(|(k, _)| *k == key) {
            report::error_line(&format!(
                "-o: {} and {} are the same file; give each report its own path",
                first.display(),
                path.display()
            ));
            return None;
        }
        let read = inputs
            .iter()
            .filter(|(_, given)| *given == key)
            .map(|(input, _)| (*input, false))
            .chain(
                walked
                    .iter()
                    .filter(|(_, f)| *f == key)
                    .map(|(input, _)| (*input, true)),
            )
            .next();
        if let Some((input, inside)) = read {
            report::error_line(&format!(
                "-o: {} is {}the input {input}; writing the report there would replace it, so give the report another path",
                path.display(),
                if inside { "a manifest of " } else { "" }
            ));
            return None;
        }
        // A report that cannot be written is said before the check runs, not after it.
        let parent = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        // A symbolic link is written through: its target is what must be writable.
        let target = std::fs::symlink_metadata(path)
            .ok()
            .filter(|m| m.file_type().is_symlink())
            .and_then(|_| std::fs::read_link(path).ok())
            .map(|t| parent.join(t));
        let parent = target
            .as_deref()
            .and_then(Path::parent)
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(parent);
        let unwritable = if path.is_dir() {
            Some("it is a directory; name a file in it".to_string())
        } else if parent.exists() && !parent.is_dir() {
            Some(format!("{} is not a directory", parent.display()))
        } else if !parent.is_dir() {
            Some(format!("directory {} does not exist", parent.display()))
        } else {
            None
        };
        if let Some(why) = unwritable {
            report::error_line(&format!(
                "-o: cannot write the report to {}: {why}",
                path.display()
            ));
            return None;
        }
        seen.push((key, path));
    }
    Some(outputs)
}

/// Whether `path` names the file this process's standard output is (`/dev/stdout`,
/// `/dev/fd/1`, the file stdout is redirected to, the terminal it writes to). `/dev/null` is
/// not counted: two reports discarded there lose nothing.
#[cfg(unix)]
fn is_standard_output(path: &Path) -> bool {
    use std::os::fd::AsFd;
    is_stream(std::io::stdout().as_fd(), path)
}

/// Whether `path` names the file this process's standard error is, as
/// [`is_standard_output`] tells it of standard output.
#[cfg(unix)]
fn is_standard_error(path: &Path) -> bool {
    use std::os::fd::AsFd;
    is_stream(std::io::stderr().as_fd(), path)
}

/// Whether `path` names the file `stream` writes to (`/dev/null` aside).
#[cfg(unix)]
fn is_stream(stream: std::os::fd::BorrowedFd<'_>, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let id = |m: std::fs::Metadata| (m.dev(), m.ino());
    let stream = stream
        .try_clone_to_owned()
        .map(std::fs::File::from)
        .and_then(|f| f.metadata());
    match (stream, std::fs::metadata(path)) {
        (Ok(out), Ok(file)) => {
            let null = std::fs::metadata("/dev/null").map(id).ok();
            id(out.clone()) == id(file) && null != Some(id(out))
        }
        _ => false,
    }
}

/// Without file identities, only the names of standard output.
#[cfg(not(unix))]
fn is_standard_output(path: &Path) -> bool {
    path == Path::new("/dev/stdout")
}

/// Without file identities, only the names of standard error.
#[cfg(not(unix))]
fn is_standard_error(path: &Path) -> bool {
    path == Path::new("/dev/stderr")
}

/// What `path` names, for telling whether two paths are one file: its directory resolved
/// (symbolic links, `.` and `..`) and its name; the path made absolute when its directory
/// does not exist (writing there fails later, with its own message).
fn same_file_key(path: &Path) -> PathBuf {
    if let Ok(p) = std::fs::canonicalize(path) {
        return p;
    }
    // A symbolic link to a file not written yet names that file.
    if let Ok(target) = std::fs::read_link(path) {
        let target = match path.parent() {
            Some(dir) if target.is_relative() => dir.join(target),
            _ => target,
        };
        if target != path {
            return same_file_key_of_missing(&target);
        }
    }
    same_file_key_of_missing(path)
}

/// [`same_file_key`] of a path that does not exist (yet).
fn same_file_key_of_missing(path: &Path) -> PathBuf {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match (std::fs::canonicalize(parent), path.file_name()) {
        (Ok(dir), Some(name)) => dir.join(name),
        _ => std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
    }
}

/// Writes `checked` in every output, the input errors and the summary line on stderr; returns
/// the exit code.
fn emit(
    rules: &RuleSet,
    rules_info: &RulesInfo,
    args: &CheckArgs,
    outputs: &[Output],
    checked: &Checked,
    started: std::time::Instant,
) -> ExitCode {
    let fail_on = args.fail_on.severity();
    let report = checked.report(rules, rules_info, fail_on);
    let mut write_failed = false;
    for o in outputs {
        match &o.path {
            None => {
                let mut out = std::io::BufWriter::new(std::io::stdout().lock());
                let written =
                    report::write_report(o.format, &report, crate::color::stdout(), &mut out)
                        .and_then(|()| out.flush());
                match written {
                    // A closed pipe (`| head`) is not an error.
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                    Err(e) => {
                        report::error_line(&format!(
                            "writing the report: {}",
                            nvcre_engine::limits::io_error_text(&e)
                        ));
                        write_failed = true;
                    }
                }
            }
            Some(path) => {
                // A text report in a file is the whole report: the input errors (on stderr
                // besides, as when it goes to stdout) follow its findings.
                let write = |out: &mut dyn Write| {
                    report::write_report(o.format, &report, false, out)?;
                    if o.format == Format::Text {
                        report::write_error_lines(&report, out)?;
                    }
                    Ok(())
                };
                // The file standard error goes to (`-o json=log 2>log`) is written through
                // the stream: replaced, it would lose the messages before the report and the
                // summary after it.
                let written = if is_standard_error(path) {
                    let mut out = std::io::BufWriter::new(std::io::stderr().lock());
                    write(&mut out).and_then(|()| out.flush())
                } else {
                    write_atomically(path, write)
                };
                if let Err(e) = written {
                    report::error_line(&format!(
                        "writing {}: {}",
                        path.display(),
                        nvcre_engine::limits::io_error_text(&e)
                    ));
                    write_failed = true;
                }
            }
        }
    }
    for e in &checked.errors {
        report::error_line(&e.message);
    }
    // Last, on stderr: never inside a report on stdout (`-o json | jq`), and also when clean.
    report::stderr_line(&Summary::of(&report).line(started.elapsed()));
    if write_failed {
        ExitCode::from(2)
    } else {
        ExitCode::from(checked.exit_code(fail_on))
    }
}

/// Documents checked together on every core; a batch also ends after [`BATCH_BYTES`] of input.
const BATCH_DOCUMENTS: usize = 64;
/// Input bytes read before a batch is checked, so memory stays bounded by the batch rather
/// than by the input.
const BATCH_BYTES: usize = 1024 * 1024;

/// The documents of one input (a file, or standard input) that the packs reading `objects` see
/// together: an input is held until it ends, up to this many documents …
const INPUT_DOCUMENTS: usize = 2048;
/// … and this many bytes; past either, its documents are checked as they come and `objects`
/// is unavailable to them (each rule that reads it reports an error finding).
const INPUT_BYTES: usize = 8 * 1024 * 1024;

/// Why `objects` is unavailable to the documents of input `name` past the bounds.
fn unavailable_reason(name: &str) -> String {
    format!(
        "objects: {name} has more than {INPUT_DOCUMENTS} documents or {} MiB; rules that read \
         other documents check inputs up to that size (split the file)",
        INPUT_BYTES >> 20
    )
}

/// A document of the batch: waiting to be checked, with the lines around it and its input's
/// `objects`, or checked already (ahead of its input's end, see [`Held`]).
enum Pending {
    Check(Document, Arc<Chunk>, Objects),
    /// Held as text: parsed again by the core that checks it.
    Text(AsText, Objects),
    Done(DocumentChecked, Arc<Chunk>),
}

impl Pending {
    /// The input bytes it stands for (the batch's bound).
    fn bytes(&self) -> usize {
        match self {
            Pending::Check(_, c, _) | Pending::Done(_, c) => c.text.len(),
            Pending::Text(t, _) => t.chunk.text.len(),
        }
    }
}

/// A document held as its piece of the input: the document at `position` of the piece, `index`
/// in the input.
#[derive(Clone)]
struct AsText {
    chunk: Arc<Chunk>,
    source: Arc<Source>,
    position: usize,
    index: usize,
}

impl AsText {
    /// `doc`, the document at `position` among those of its piece `chunk`, as text.
    fn of(doc: &Document, chunk: Arc<Chunk>, position: usize) -> AsText {
        AsText {
            chunk,
            source: doc.source.clone(),
            position,
            index: doc.index,
        }
    }

    /// The document, parsed again; or (never expected: its piece parsed once, alike) an input
    /// error of its own.
    fn parse(&self) -> Result<Document, DocumentChecked> {
        let first = self.index.saturating_sub(self.position);
        match parse_chunk(&self.source, &self.chunk, first) {
            Ok(mut d) if self.position < d.len() => Ok(d.swap_remove(self.position)),
            _ => Err(DocumentChecked {
                index: self.index,
                findings: Vec::new(),
                errors: vec![InputError::new(
                    self.source.name.clone(),
                    format!(
                        "{}: document {} could not be read again after it was held",
                        self.source.name,
                        self.index + 1
                    ),
                )],
            }),
        }
    }
}

/// Bytes of an input held parsed: the documents that read `objects`, waiting, and the values of
/// the documents checked ahead (for `objects`). Past it they are held as text and parsed again
/// when needed (a parsed document takes 10–20 times its text), so an input of up to this size
/// is parsed once.
const HELD_PARSED_BYTES: usize = 1024 * 1024;

/// A document held until its input ends.
enum HeldDoc {
    /// Its check reads `objects`: it waits for them.
    Waiting(Document, Arc<Chunk>),
    /// Its check reads `objects`, and [`HELD_PARSED_BYTES`] of such wait parsed already: it
    /// waits as its piece of the input.
    Text(AsText),
    /// Its check does not read `objects`: checked with the next [`BATCH_DOCUMENTS`] such. The
    /// document at `.2` among those of its piece.
    Ready(Document, Arc<Chunk>, usize),
    /// Checked ahead (or held as text and not read again: its error): its results, its text,
    /// and its value for `objects` when kept (within [`HELD_PARSED_BYTES`]; else read again).
    Done(DocumentChecked, AsText, Option<serde_json::Value>),
}

/// Why `objects` is not bound for a document checked ahead of its input's end: its rules do
/// not read it (never shown).
const NOT_READ: &str = "objects: not read by the rules that check this document";

/// The documents of the current input, held until it ends (see [`INPUT_DOCUMENTS`]). Only the
/// documents whose check reads `objects` wait: the others are checked as soon as
/// [`BATCH_DOCUMENTS`] of them are held, and only their results, text and (within
/// [`HELD_PARSED_BYTES`]) value are kept; past that budget the waiting ones are held as text
/// too, so a large held input is mostly text. Results still come out in input order.
#[derive(Default)]
struct Held {
    docs: Vec<HeldDoc>,
    bytes: usize,
    /// Input bytes of the documents held parsed ([`HELD_PARSED_BYTES`]).
    parsed: usize,
    /// Documents [`HeldDoc::Ready`].
    ready: usize,
    /// The input outgrew the bounds: documents go straight to the batch.
    over: Option<Objects>,
    /// A held document is checked by a pack that reads `objects` ([`reads_objects`]); without
    /// one the view is not gathered (no copy of the input's documents).
    reads: bool,
}

impl Held {
    /// Holds `doc`, the document at `position` among those of its piece `chunk` (or, past the
    /// bounds, passes it on); returns what may be checked now. `reads`: whether checking `doc`
    /// reads `objects` ([`reads_objects`]).
    fn push(
        &mut self,
        name: &str,
        (doc, chunk, position): (Document, Arc<Chunk>, usize),
        reads: bool,
    ) -> Vec<Pending> {
        if let Some(o) = &self.over {
            return vec![Pending::Check(doc, chunk, o.clone())];
        }
        self.reads |= reads;
        self.bytes += chunk.text.len();
        if reads && self.parsed < HELD_PARSED_BYTES {
            self.parsed += chunk.text.len();
            self.docs.push(HeldDoc::Waiting(doc, chunk));
        } else if reads {
            self.docs
                .push(HeldDoc::Text(AsText::of(&doc, chunk, position)));
        } else {
            self.ready += 1;
            self.docs.push(HeldDoc::Ready(doc, chunk, position));
        }
        if self.docs.len() <= INPUT_DOCUMENTS && self.bytes <= INPUT_BYTES {
            return Vec::new();
        }
        let o = Objects::unavailable(&unavailable_reason(name));
        self.over = Some(o.clone());
        self.ready = 0;
        // Those held as text are parsed again one by one as they are checked.
        pending(std::mem::take(&mut self.docs), &o)
    }

    /// Checks the held documents that do not read `objects` (on every core), once
    /// [`BATCH_DOCUMENTS`] of them are held; their results are held in their place.
    fn check_ready(&mut self, rules: &RuleSet, req: &CheckRequest) {
        if self.ready < BATCH_DOCUMENTS || self.over.is_some() {
            return;
        }
        self.ready = 0;
        let not_read = Objects::unavailable(NOT_READ);
        let mut kept: Vec<Option<HeldDoc>> = Vec::with_capacity(self.docs.len());
        // Each one to check, where it goes back, and whether its value is kept.
        let mut batch = Vec::new();
        for h in std::mem::take(&mut self.docs) {
            match h {
                HeldDoc::Ready(d, c, position) => {
                    let keep = self.parsed + c.text.len() <= HELD_PARSED_BYTES;
                    if keep {
                        self.parsed += c.text.len();
                    }
                    batch.push((kept.len(), d, c, position, keep));
                    kept.push(None);
                }
                other => kept.push(Some(other)),
            }
        }
        let done: Vec<(usize, HeldDoc)> = {
            use rayon::prelude::*;
            batch
                .into_par_iter()
                .map(|(at, d, c, position, keep)| {
                    let checked = check_one(rules, req, &d, &c, &not_read);
                    let text = AsText::of(&d, c, position);
                    (at, HeldDoc::Done(checked, text, keep.then_some(d.value)))
                })
                .collect()
        };
        for (at, h) in done {
            kept[at] = Some(h);
        }
        self.docs = kept.into_iter().flatten().collect();
    }

    /// The input ended: every held document, with the input's documents as `objects` (when a
    /// held document reads them).
    fn finish(self, name: &str) -> Vec<Pending> {
        // `objects` holds them all, made when a rule first reads them: gathered before those
        // held as text are parsed again now to be checked (only a document that reads
        // `objects` is held so, so `reads` is set), so that their values are not copied for an
        // `objects` no rule may read.
        let objects = if self.reads {
            objects_of(&self.docs, name)
        } else {
            Objects::unavailable(&format!(
                "objects: not gathered for {name}, since no rule that reads them checks its documents"
            ))
        };
        pending(parse_again(self.docs), &objects)
    }
}

/// The documents waiting as text, parsed again (on every core): each becomes
/// [`HeldDoc::Waiting`], or [`HeldDoc::Done`] with an input error of its own
/// ([`AsText::parse`]).
fn parse_again(docs: Vec<HeldDoc>) -> Vec<HeldDoc> {
    use rayon::prelude::*;
    docs.into_par_iter()
        .map(|h| match h {
            HeldDoc::Text(t) => match t.parse() {
                Ok(d) => HeldDoc::Waiting(d, t.chunk),
                Err(checked) => HeldDoc::Done(checked, t, None),
            },
            other => other,
        })
        .collect()
}

/// The held documents as the batch takes them, the waiting ones with `objects`.
fn pending(docs: Vec<HeldDoc>, objects: &Objects) -> Vec<Pending> {
    docs.into_iter()
        .map(|h| match h {
            HeldDoc::Waiting(d, c) | HeldDoc::Ready(d, c, _) => {
                Pending::Check(d, c, objects.clone())
            }
            HeldDoc::Text(t) => Pending::Text(t, objects.clone()),
            HeldDoc::Done(checked, t, _) => Pending::Done(checked, t.chunk),
        })
        .collect()
}

/// The `objects` of an input's held documents, in input order, made when a rule first reads
/// them (an input none of whose documents reaches `objects` is not gathered): the values of
/// those that wait parsed and those kept of the ones checked ahead (copied now: the checks take
/// the documents), and the others' read again from their text then (on every core).
fn objects_of(docs: &[HeldDoc], name: &str) -> Objects {
    let held: Vec<Result<serde_json::Value, AsText>> = docs
        .iter()
        .map(|h| match h {
            HeldDoc::Waiting(d, _) | HeldDoc::Ready(d, _, _) => Ok(d.value.clone()),
            HeldDoc::Done(.., Some(value)) => Ok(value.clone()),
            HeldDoc::Done(_, t, None) | HeldDoc::Text(t) => Err(t.clone()),
        })
        .collect();
    let failed = format!("objects: a document of {name} could not be read again");
    Objects::deferred(move || {
        use rayon::prelude::*;
        // Read once, a piece reads again alike; fail closed all the same (every rule that
        // reads `objects` fails).
        let values: Option<Vec<serde_json::Value>> = held
            .into_par_iter()
            .map(|h| match h {
                Ok(value) => Some(value),
                Err(t) => t.parse().ok().map(|d| d.value),
            })
            .collect();
        Ok(input_object_values(&values.ok_or(failed)?))
    })
}

/// Opens a file, or standard input for `-`, as a buffered reader; the name findings use.
fn open(input: &InputFile) -> Result<(String, Box<dyn BufRead>), String> {
    if input.is_stdin() {
        return Ok(("<stdin>".to_string(), Box::new(std::io::stdin().lock())));
    }
    let file = std::fs::File::open(&input.path).map_err(|e| {
        format!(
            "reading {}: {}",
            input.name,
            nvcre_engine::limits::io_error_text(&e)
        )
    })?;
    Ok((
        input.name.clone(),
        Box::new(std::io::BufReader::with_capacity(1 << 16, file)),
    ))
}

/// Checks every document of every input; a bad input does not stop the others.
///
/// Streams: each input is read one document at a time (see [`ChunkReader`]), documents are
/// checked in batches on every core and dropped once checked; only the findings, the lines
/// around them and the per-document rule lists are kept. Output order is input order. The
/// documents of one input are held until it ends so that each sees the others as `objects`
/// (bounded by [`INPUT_DOCUMENTS`] and [`INPUT_BYTES`]).
fn check_inputs(rules: &RuleSet, paths: &[String], req: &CheckRequest) -> Checked {
    let mut checker = Checker::new(rules, req);
    let expanded = input::expand_in_order(paths);
    // The files between two paths that could not be read, checked as before; each such path
    // is an error where it was given.
    for run in expanded.split_inclusive(Result::is_err) {
        let (files, unread) = match run.split_last() {
            Some((Err(e), files)) => (files, Some(e)),
            _ => (run, None),
        };
        let files: Vec<InputFile> = files.iter().filter_map(|f| f.clone().ok()).collect();
        check_files(&mut checker, &files);
        if let Some((file, message)) = unread {
            checker.unread(file.clone(), message.clone());
        }
    }
    checker.finish()
}

/// Checks `files` in order: small files (a directory of manifests) are read and parsed a
/// group at a time on every core, then checked in order; a large file or standard input is
/// streamed.
fn check_files(checker: &mut Checker<'_>, files: &[InputFile]) {
    let mut rest = files;
    while let Some(first) = rest.first() {
        let group = small_files(rest);
        if group == 0 {
            match open(first) {
                Ok((name, reader)) => checker.input(&name, reader),
                Err(message) => checker.unread(first.name.clone(), message),
            }
            rest = &rest[1..];
            continue;
        }
        let read: Vec<Result<ReadInput, String>> = {
            use rayon::prelude::*;
            rest[..group]
                .par_iter()
                .map(|file| open(file).map(|(name, reader)| ReadInput::read(name, reader)))
                .collect()
        };
        for (file, r) in rest[..group].iter().zip(read) {
            match r {
                Ok(r) => checker.input_read(r),
                Err(message) => checker.unread(file.name.clone(), message),
            }
        }
        rest = &rest[group..];
    }
}

/// How many of the first `files` to read together: regular files (not standard input) of at
/// most [`BATCH_BYTES`] together and [`PARSE_PIECES`] in number; `0` when the first is not one
/// (it is then streamed on its own).
fn small_files(files: &[InputFile]) -> usize {
    let mut bytes = 0u64;
    let mut n = 0;
    for file in files.iter().take(PARSE_PIECES) {
        let size = match std::fs::metadata(&file.path) {
            Ok(m) if !file.is_stdin() && m.is_file() => m.len(),
            _ => break,
        };
        if bytes + size > BATCH_BYTES as u64 {
            break;
        }
        bytes += size;
        n += 1;
    }
    n
}

/// One piece of an input, read and parsed: its documents, or why they could not be parsed.
type Parsed = (Arc<Chunk>, Result<Vec<Document>, nvcre_engine::Error>);

/// Pieces (usually one document each) parsed together on every core, and small files read
/// together.
const PARSE_PIECES: usize = 64;

/// Parses `pieces` of `source`'s stream, whose first document is number `first`, on every
/// core. Each piece is parsed as if every piece before it held one document (nearly always
/// so); a piece after one that held none or several is parsed again, in order, with its real
/// first index, so the documents and messages are those of a parse in order.
fn parse_pieces(source: &Arc<Source>, pieces: Vec<Arc<Chunk>>, first: usize) -> Vec<Parsed> {
    use rayon::prelude::*;
    let guessed: Vec<_> = pieces
        .par_iter()
        .enumerate()
        .map(|(i, c)| parse_chunk(source, c, first + i))
        .collect();
    let mut next = first;
    pieces
        .into_iter()
        .zip(guessed)
        .enumerate()
        .map(|(i, (chunk, parsed))| {
            let parsed = if next == first + i {
                parsed
            } else {
                parse_chunk(source, &chunk, next)
            };
            next += parsed.as_ref().map_or(1, Vec::len);
            (chunk, parsed)
        })
        .collect()
}

/// A whole input read and parsed ahead of its check (a small file of a directory).
struct ReadInput {
    name: String,
    pieces: Vec<Parsed>,
    /// The reading error that ended the input early, after `pieces`.
    error: Option<std::io::Error>,
}

impl ReadInput {
    /// Reads every piece of `reader` and parses them ([`parse_pieces`]).
    fn read(name: String, reader: impl BufRead) -> ReadInput {
        let source = Source::new(name.clone(), String::new());
        let mut chunks = Vec::new();
        let mut error = None;
        for chunk in ChunkReader::new(reader) {
            match chunk {
                Ok(c) => chunks.push(Arc::new(c)),
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        ReadInput {
            name,
            pieces: parse_pieces(&source, chunks, 0),
            error,
        }
    }
}

/// The state of the input being checked: its place among the inputs, its documents' rule
/// lists, the documents held for `objects`, and the index of its next document.
struct InputState {
    input: usize,
    name: String,
    checked: CheckedFile,
    held: Held,
    next_index: usize,
}

impl InputState {
    fn new(input: usize, name: &str) -> InputState {
        InputState {
            input,
            name: name.to_string(),
            checked: CheckedFile {
                file: name.to_string(),
                documents: Vec::new(),
            },
            held: Held::default(),
            next_index: 0,
        }
    }
}

/// The `check` pipeline over inputs given one after the other: each is read as a stream of
/// documents, checked in batches on every core, and what the reports need is kept
/// ([`Checked`]). `check` feeds it every file of its paths; [`Checker::input`] takes any
/// reader.
pub struct Checker<'a> {
    rules: &'a RuleSet,
    req: &'a CheckRequest,
    out: Checked,
    /// Errors from checking, reported after every reading error (as when all inputs were read
    /// first).
    check_errors: Vec<InputError>,
    /// The rule ids that apply, by apiVersion and kind, shared by the documents.
    rule_ids: HashMap<(String, String), Arc<Vec<String>>>,
    /// Documents waiting to be checked, across inputs (a directory of one-document files still
    /// fills every core), each with its input's place among the inputs.
    batch: Vec<(usize, Pending)>,
    /// Input bytes in `batch`.
    bytes: usize,
}

impl<'a> Checker<'a> {
    /// A checker of inputs against `rules`, in the node context of `req`.
    pub fn new(rules: &'a RuleSet, req: &'a CheckRequest) -> Checker<'a> {
        Checker {
            rules,
            req,
            out: Checked::default(),
            check_errors: Vec::new(),
            rule_ids: HashMap::new(),
            batch: Vec::new(),
            bytes: 0,
        }
    }

    /// Reads and checks one input, named `name` in findings and errors (`<stdin>` for standard
    /// input). Its documents are held until it ends, so the packs reading `objects` see each
    /// other's; a document that does not parse is an error of its own and does not hide the
    /// others.
    pub fn input(&mut self, name: &str, reader: impl BufRead) {
        // The stream is not kept: documents share a source that names it.
        let source = Source::new(name.to_string(), String::new());
        let mut state = InputState::new(self.out.files.len(), name);
        let mut pieces = Vec::new();
        let mut bytes = 0usize;
        let mut chunks = ChunkReader::new(reader);
        loop {
            // Pieces are read ahead up to a batch and parsed on every core, then taken in order.
            let (end, error) = match chunks.next() {
                Some(Ok(c)) => {
                    bytes += c.text.len();
                    pieces.push(Arc::new(c));
                    (false, None)
                }
                Some(Err(e)) => (true, Some(e)),
                None => (true, None),
            };
            if end || pieces.len() >= PARSE_PIECES || bytes >= BATCH_BYTES {
                let first = state.next_index;
                for piece in parse_pieces(&source, std::mem::take(&mut pieces), first) {
                    self.take_piece(&mut state, piece);
                }
                bytes = 0;
            }
            if let Some(e) = error {
                self.read_error(&state, &e);
            }
            if end {
                break;
            }
        }
        self.end_input(state);
    }

    /// Checks an input read and parsed ahead ([`ReadInput`]), as [`Checker::input`] would.
    fn input_read(&mut self, input: ReadInput) {
        let mut state = InputState::new(self.out.files.len(), &input.name);
        for piece in input.pieces {
            self.take_piece(&mut state, piece);
        }
        if let Some(e) = input.error {
            self.read_error(&state, &e);
        }
        self.end_input(state);
    }

    /// A path that could not be read (or opened): an error where it was given, after the
    /// inputs checked so far.
    fn unread(&mut self, file: String, message: String) {
        self.out.errors.push(InputError {
            place: Place::Unread(self.out.files.len()),
            ..InputError::new(file, message)
        });
    }

    /// The reading error that ended the input of `state`.
    fn read_error(&mut self, state: &InputState, e: &std::io::Error) {
        let name = &state.name;
        self.out.errors.push(InputError {
            place: Place::Input(state.input),
            ..InputError::new(
                name.clone(),
                format!("reading {name}: {}", nvcre_engine::limits::io_error_text(e)),
            )
        });
    }

    /// Takes one parsed piece of the input: its documents join the batch (held for `objects`
    /// until the input ends); a piece that did not parse is an error of its own and does not
    /// hide the others.
    fn take_piece(&mut self, state: &mut InputState, (chunk, parsed): Parsed) {
        match parsed {
            Ok(docs) => {
                state.next_index += docs.len();
                for (position, doc) in docs.into_iter().enumerate() {
                    state.checked.documents.push(CheckedDocument {
                        index: doc.index,
                        rules: applicable_rules(self.rules, &mut self.rule_ids, &doc),
                    });
                    let reads = reads_objects(self.rules, &doc.value);
                    let held = (doc, chunk.clone(), position);
                    for p in state.held.push(&state.name, held, reads) {
                        self.add(state.input, p);
                    }
                    state.held.check_ready(self.rules, self.req);
                }
            }
            Err(e) => {
                state.next_index += 1;
                self.out.errors.push(InputError {
                    file: state.name.clone(),
                    pos: e.location().and_then(|(_, p)| p),
                    message: e.to_string(),
                    place: Place::Input(state.input),
                });
            }
        }
        self.check_if_full();
    }

    /// The input ended: its held documents join the batch.
    fn end_input(&mut self, state: InputState) {
        for p in state.held.finish(&state.name) {
            self.add(state.input, p);
        }
        self.out.files.push(state.checked);
    }

    /// Adds a document to the batch, and checks the batch once it is full: the documents an
    /// input held (up to [`INPUT_DOCUMENTS`]) are checked a batch at a time, so their results
    /// reach the findings store, and their values are dropped, as they go.
    fn add(&mut self, input: usize, p: Pending) {
        self.bytes += p.bytes();
        self.batch.push((input, p));
        self.check_if_full();
    }

    /// Checks the batch when it holds [`BATCH_DOCUMENTS`] documents or [`BATCH_BYTES`] bytes.
    fn check_if_full(&mut self) {
        if self.batch.len() >= BATCH_DOCUMENTS || self.bytes >= BATCH_BYTES {
            self.check_batch();
        }
    }

    /// Checks the documents waiting in the batch.
    fn check_batch(&mut self) {
        check_batch(
            self.rules,
            self.req,
            &mut self.batch,
            &mut self.out,
            &mut self.check_errors,
        );
        self.bytes = 0;
    }

    /// Checks what is left and returns the results of every input.
    pub fn finish(mut self) -> Checked {
        self.check_batch();
        self.out.errors.extend(self.check_errors);
        // A document that could not be checked ran no rule: no report lists its rules as
        // passed (JUnit test cases), only its error.
        let unchecked = std::mem::take(&mut self.out.unchecked);
        for (input, file) in self.out.files.iter_mut().enumerate() {
            for doc in &mut file.documents {
                if unchecked.contains(&(input, doc.index)) {
                    doc.rules = Arc::new(Vec::new());
                }
            }
        }
        self.out
    }
}

/// The ids of the rules whose pack matches `doc`'s apiVersion and kind, computed once per pair:
/// the older API group counted as ours (it is checked as ours), and a `List` (`kind: List`,
/// `WorkloadRunList`, … with `items`) with the rules of each item's kind too, as each item is
/// checked as a document of its own.
fn applicable_rules(
    rules: &RuleSet,
    cache: &mut HashMap<(String, String), Arc<Vec<String>>>,
    doc: &Document,
) -> Arc<Vec<String>> {
    let mut of = |v: &serde_json::Value| {
        let field = |k: &str| {
            v.get(k)
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let mut api = field("apiVersion");
        if api == nvcre_domain::crd::LEGACY_API_VERSION {
            api = nvcre_domain::crd::API_VERSION.to_string();
        }
        let kind = field("kind");
        cache
            .entry((api.clone(), kind.clone()))
            .or_insert_with(|| {
                let matched = serde_json::json!({"apiVersion": api, "kind": kind});
                Arc::new(
                    rules
                        .packs_for(&matched)
                        .flat_map(|p| p.rules.iter().map(|r| r.id.clone()))
                        .collect(),
                )
            })
            .clone()
    };
    let own = of(&doc.value);
    let items = doc
        .value
        .get("items")
        .and_then(serde_json::Value::as_array)
        .filter(|_| {
            doc.value
                .get("kind")
                .and_then(serde_json::Value::as_str)
                .is_some_and(|k| k.ends_with("List"))
        });
    let Some(items) = items else { return own };
    let mut all: Vec<String> = own.as_ref().clone();
    for item in items {
        for id in of(item).iter() {
            if !all.contains(id) {
                all.push(id.clone());
            }
        }
    }
    Arc::new(all)
}

/// Checks the documents of `batch` on every core and empties it: findings (in source order
/// within a document) and the lines around them into `out`, errors into `errors`.
fn check_batch(
    rules: &RuleSet,
    req: &CheckRequest,
    batch: &mut Vec<(usize, Pending)>,
    out: &mut Checked,
    errors: &mut Vec<InputError>,
) {
    let (inputs, docs): (Vec<usize>, Vec<Pending>) = std::mem::take(batch).into_iter().unzip();
    for (input, checked) in inputs.into_iter().zip(check_all(rules, docs, req)) {
        for f in checked.findings {
            out.findings.push(input, f);
        }
        if !checked.errors.is_empty() {
            out.unchecked.insert((input, checked.index));
        }
        for e in checked.errors {
            errors.push(InputError {
                place: Place::Input(input),
                ..e
            });
        }
    }
}

/// What checking one document gave: its findings in source order (those without a line last),
/// each encoded with the lines around it, and the input errors that stopped its check (one, or
/// one per List item that could not be checked).
struct DocumentChecked {
    index: usize,
    findings: Vec<Encoded>,
    errors: Vec<InputError>,
}

/// Checks `docs` on every core (rayon's pool), keeping input order. Everything a document's
/// results need (its YAML quoting notes, the lines around its findings) is taken on the core
/// that checked it, which also drops it: the thread reading the input only gathers results.
/// Each document is independent; a document whose check panicked is an error of that
/// document, not of the run.
fn check_all(rules: &RuleSet, docs: Vec<Pending>, req: &CheckRequest) -> Vec<DocumentChecked> {
    use rayon::prelude::*;
    docs.into_par_iter()
        .map(|p| {
            let (doc, chunk, objects) = match p {
                Pending::Check(doc, chunk, objects) => (doc, chunk, objects),
                Pending::Text(t, objects) => match t.parse() {
                    Ok(doc) => (doc, t.chunk, objects),
                    Err(checked) => return checked,
                },
                Pending::Done(checked, _) => return checked,
            };
            check_one(rules, req, &doc, &chunk, &objects)
        })
        .collect()
}

/// Checks one document (see [`check_all`]); a check that panicked is an error of the document.
fn check_one(
    rules: &RuleSet,
    req: &CheckRequest,
    doc: &Document,
    chunk: &Chunk,
    objects: &Objects,
) -> DocumentChecked {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        nvcre_domain::check_document_as_reported(rules, doc, req, Some(objects), &|l| {
            chunk.line(l).map(str::to_string)
        })
    }))
    .unwrap_or_else(|_| {
        Err(nvcre_domain::PolicyError::Build(
            "internal error: checking this document panicked".into(),
        ))
    });
    document_checked(doc, chunk, result)
}

/// The results of `doc`'s check (see [`DocumentChecked`]).
fn document_checked(
    doc: &Document,
    chunk: &Chunk,
    result: Result<Vec<Finding>, nvcre_domain::PolicyError>,
) -> DocumentChecked {
    let (mut findings, error) = match result {
        Ok(f) => (f, None),
        // The findings made before an input error (admission's warnings) are reported beside
        // it, never dropped.
        Err(e) => {
            let (e, f, _) = e.into_parts();
            (f, Some(e))
        }
    };
    findings.sort_by_key(|x| (x.line.unwrap_or(usize::MAX), x.column.unwrap_or(usize::MAX)));
    // The lines around each line with findings, taken once per line.
    let mut windows: Vec<(usize, Option<Window>)> = Vec::new();
    let mut encoded = Vec::with_capacity(findings.len());
    for f in &findings {
        let at = f.line.map(|line| {
            windows
                .iter()
                .position(|(l, _)| *l == line)
                .unwrap_or_else(|| {
                    windows.push((line, Window::around(chunk, line)));
                    windows.len() - 1
                })
        });
        let window = at.and_then(|i| windows[i].1.as_ref());
        encoded.push(Encoded::new(f, window));
    }
    // A List's items that could not be checked are an error each.
    let errors = match error {
        Some(nvcre_domain::PolicyError::Items(items)) => items,
        e => e.into_iter().collect(),
    };
    DocumentChecked {
        index: doc.index,
        findings: encoded,
        errors: errors
            .into_iter()
            .map(|e| {
                let start = doc.spans.lookup(&nvcre_engine::FieldPath::root());
                let place = nvcre_domain::document_place(doc);
                // An error of the whole document is reported at its start, and names it.
                let own_pos = match &e {
                    nvcre_domain::PolicyError::Input { pos, .. } => Some(*pos),
                    e if !e.names_place() => Some(start),
                    _ => None,
                };
                // An error of a rule file met while checking this document (a table whose
                // render ran out of the document's CEL budget) names the rule file: among
                // several documents, it is led by the document's place too, and is at its start.
                let foreign = e.in_rule_file();
                let message = e.located(&place).to_string();
                InputError {
                    file: doc.source.name.clone(),
                    pos: match own_pos {
                        Some(pos) => pos,
                        None if foreign => start,
                        None => None,
                    },
                    message: if foreign {
                        format!("{place}: {message}")
                    } else {
                        message
                    },
                    // Set by the checker, which knows the input (`check_batch`).
                    place: Place::Other,
                }
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One small document per chunk, as `check` reads a stream.
    fn pieces(n: usize) -> Vec<(Document, Arc<Chunk>, usize)> {
        config_maps(n, 0)
    }

    /// `n` ConfigMaps read as `check` reads a stream, each with its piece and its position in
    /// it, and (`data` > 0) a data value of `data` bytes.
    fn config_maps(n: usize, data: usize) -> Vec<(Document, Arc<Chunk>, usize)> {
        let value = "x".repeat(data);
        let text: String = (0..n)
            .map(|i| {
                let data = if data > 0 {
                    format!("data: {{k: {value}}}\n")
                } else {
                    String::new()
                };
                format!("---\nkind: ConfigMap\nmetadata: {{name: c{i}}}\n{data}")
            })
            .collect();
        let source = Source::new("s.yaml", String::new());
        let mut next = 0;
        ChunkReader::new(std::io::Cursor::new(text))
            .map(|c| Arc::new(c.expect("reads")))
            .flat_map(|c| {
                let docs = parse_chunk(&source, &c, next).expect("parses");
                next += docs.len();
                docs.into_iter()
                    .enumerate()
                    .map(move |(position, d)| (d, c.clone(), position))
            })
            .collect()
    }

    /// Pieces parsed on every core give the documents, indexes and errors of a parse in order,
    /// also after a piece that held no document, one that held two (a lone carriage return
    /// before `---` starts a document the cutter does not cut at) and one that does not parse.
    #[test]
    fn pieces_parsed_together_are_those_parsed_in_order() {
        let text = concat!(
            "kind: A\nmetadata: {name: a}\n",
            "---\n# nothing\n",
            "---\nkind: B\r---\nkind: C\n",
            "---\nkind: [\n",
            "---\nkind: D\n",
            "---\nkind: E\n",
        );
        let source = Source::new("s.yaml", String::new());
        let chunks: Vec<Arc<Chunk>> = ChunkReader::new(std::io::Cursor::new(text))
            .map(|c| Arc::new(c.expect("reads")))
            .collect();
        assert_eq!(chunks.len(), 6);
        let show = |parsed: Vec<Parsed>| {
            parsed
                .into_iter()
                .map(|(_, r)| match r {
                    Ok(docs) => docs
                        .iter()
                        .map(|d| format!("{}:{}", d.index, d.value["kind"]))
                        .collect::<Vec<_>>()
                        .join(" "),
                    Err(e) => e.to_string(),
                })
                .collect::<Vec<_>>()
        };
        let mut next = 0;
        let in_order: Vec<Parsed> = chunks
            .iter()
            .map(|c| {
                let r = parse_chunk(&source, c, next);
                next += r.as_ref().map_or(1, Vec::len);
                (c.clone(), r)
            })
            .collect();
        let want = show(in_order);
        assert_eq!(want[2], "1:\"B\" 2:\"C\"");
        assert_eq!(want[5], "5:\"E\"");
        assert_eq!(show(parse_pieces(&source, chunks.clone(), 0)), want);
        // From a later first index, as a batch in the middle of a stream is.
        let shifted = show(parse_pieces(&source, chunks[1..].to_vec(), 1));
        assert_eq!(shifted, want[1..].to_vec());
    }

    #[test]
    fn an_input_is_held_until_it_ends_and_its_documents_see_each_other() {
        let mut held = Held::default();
        for (i, p) in pieces(3).into_iter().enumerate() {
            assert_eq!(held.push("s.yaml", p, i == 1).len(), 0);
        }
        let out = held.finish("s.yaml");
        let sizes: Vec<Option<usize>> = out.iter().map(objects_len).collect();
        assert_eq!(sizes, [Some(3), Some(3), Some(3)]);
    }

    #[test]
    fn an_input_no_document_of_which_reads_objects_gathers_none() {
        let mut held = Held::default();
        for p in pieces(3) {
            assert_eq!(held.push("s.yaml", p, false).len(), 0);
        }
        let out = held.finish("s.yaml");
        let sizes: Vec<Option<usize>> = out.iter().map(objects_len).collect();
        assert_eq!(sizes, [None, None, None]);
    }

    /// The size of a pending document's `objects` (`None`: unavailable, or checked ahead).
    fn objects_len(p: &Pending) -> Option<usize> {
        match p {
            Pending::Check(_, _, o) | Pending::Text(_, o) => o.len(),
            Pending::Done(..) => None,
        }
    }

    /// The documents that do not read `objects` are checked once a batch of them is held;
    /// `objects` still holds every document of the input, theirs read again from the text, in
    /// input order.
    #[test]
    fn documents_that_do_not_read_objects_are_checked_ahead() {
        let rules = nvcre_domain::default_rules().expect("the rules load");
        let req = CheckRequest::default();
        let mut held = Held::default();
        let docs = pieces(BATCH_DOCUMENTS + 2);
        let n = docs.len();
        for (i, p) in docs.into_iter().enumerate() {
            // The last document reads `objects`.
            assert_eq!(held.push("s.yaml", p, i == n - 1).len(), 0);
            held.check_ready(&rules, &req);
        }
        let kinds: Vec<&str> = held
            .docs
            .iter()
            .map(|h| match h {
                HeldDoc::Waiting(..) => "waiting",
                HeldDoc::Ready(..) => "ready",
                HeldDoc::Done(..) => "done",
                HeldDoc::Text(_) => "text",
            })
            .collect();
        let mut want = vec!["done"; BATCH_DOCUMENTS];
        want.extend(["ready", "waiting"]);
        assert_eq!(kinds, want);
        let out = held.finish("s.yaml");
        let done: Vec<bool> = out.iter().map(|p| matches!(p, Pending::Done(..))).collect();
        let mut want = vec![true; BATCH_DOCUMENTS];
        want.extend([false, false]);
        assert_eq!(done, want);
        assert_eq!(out.last().and_then(objects_len), Some(n));
        // Past 1 MiB the values of those checked ahead are not kept: `objects` reads them
        // again from their text, and still holds every document.
        let mut held = Held::default();
        let docs = config_maps(BATCH_DOCUMENTS + 1, 20 * 1024);
        // Kept while the texts so far fit in the budget.
        let mut sum = 0;
        let want: Vec<bool> = docs[..BATCH_DOCUMENTS]
            .iter()
            .map(|(_, c, _)| {
                sum += c.text.len();
                sum <= HELD_PARSED_BYTES
            })
            .collect();
        for p in docs {
            let reads = p.0.index == BATCH_DOCUMENTS;
            assert_eq!(held.push("s.yaml", p, reads).len(), 0);
            held.check_ready(&rules, &req);
        }
        let kept: Vec<bool> = held
            .docs
            .iter()
            .filter_map(|h| match h {
                HeldDoc::Done(.., value) => Some(value.is_some()),
                _ => None,
            })
            .collect();
        assert_eq!(kept, want);
        assert_eq!(want.iter().filter(|k| **k).count(), 51);
        let out = held.finish("s.yaml");
        assert_eq!(out.last().and_then(objects_len), Some(BATCH_DOCUMENTS + 1));
    }

    /// Past [`HELD_PARSED_BYTES`], the documents that read `objects` wait as text and are
    /// parsed again, to the same documents, when the input ends (or passes the bounds).
    #[test]
    fn documents_that_read_objects_wait_as_text_past_a_bound() {
        let mut held = Held::default();
        let mut originals = Vec::new();
        for p in config_maps(6, 300 * 1024) {
            originals.push((p.0.index, p.0.value.clone(), p.0.spans.clone()));
            assert_eq!(held.push("s.yaml", p, true).len(), 0);
        }
        let text_held = held
            .docs
            .iter()
            .filter(|h| matches!(h, HeldDoc::Text(_)))
            .count();
        assert_eq!(text_held, 2);
        let out = held.finish("s.yaml");
        let again: Vec<_> = out
            .iter()
            .filter_map(|p| match p {
                Pending::Check(d, _, o) => {
                    assert_eq!(o.len(), Some(6));
                    Some((d.index, d.value.clone(), d.spans.clone()))
                }
                Pending::Text(..) | Pending::Done(..) => None,
            })
            .collect();
        assert!(
            again == originals,
            "the documents parsed again are those held"
        );
    }

    /// Past the input's bounds, the documents held as text go to the batch as text, each
    /// parsed again by the core that checks it.
    #[test]
    fn past_the_bound_documents_held_as_text_are_checked_from_their_text() {
        let mut held = Held::default();
        let mut released = Vec::new();
        // 30 documents of 300 KiB pass the 8 MiB bound at the 28th.
        for p in config_maps(30, 300 * 1024) {
            released.extend(held.push("s.yaml", p, true));
        }
        let kinds: Vec<&str> = released
            .iter()
            .map(|p| match p {
                Pending::Check(..) => "parsed",
                Pending::Text(..) => "text",
                Pending::Done(..) => "done",
            })
            .collect();
        // Four held parsed (1 MiB), the rest of the held as text; past the bound, parsed.
        let mut want = vec!["parsed"; 4];
        want.extend(vec!["text"; 24]);
        want.extend(vec!["parsed"; 2]);
        assert_eq!(kinds, want);
        let rules = nvcre_domain::default_rules().expect("the rules load");
        let checked = check_all(&rules, released, &CheckRequest::default());
        let indexes: Vec<usize> = checked.iter().map(|c| c.index).collect();
        assert_eq!(indexes, (0..30).collect::<Vec<_>>());
        assert!(checked.iter().all(|c| c.errors.is_empty()));
    }

    #[test]
    fn past_the_bound_an_input_streams_without_objects() {
        let mut held = Held::default();
        let mut released = Vec::new();
        for p in pieces(INPUT_DOCUMENTS + 2) {
            released.push(held.push("s.yaml", p, true).len());
        }
        // Held until the bound is passed, then all at once, then one by one.
        assert_eq!(released[..INPUT_DOCUMENTS], vec![0; INPUT_DOCUMENTS][..]);
        assert_eq!(released[INPUT_DOCUMENTS..], [INPUT_DOCUMENTS + 1, 1]);
        assert_eq!(held.finish("s.yaml").len(), 0);
    }

    #[test]
    fn outputs_parse_with_and_without_a_path() {
        assert_eq!(
            parse_output("sarif=out/x.sarif"),
            Ok(Output {
                format: Format::Sarif,
                path: Some(PathBuf::from("out/x.sarif"))
            })
        );
        assert_eq!(
            parse_output("JSON"),
            Ok(Output {
                format: Format::Json,
                path: None
            })
        );
        assert_eq!(
            parse_output("xml"),
            Err("unknown format \"xml\": expected one of text, json, sarif, junit, github".into())
        );
        assert_eq!(
            parse_output("junit="),
            Err("\"junit=\": the path after '=' is empty; write -o FORMAT=PATH (e.g. -o json=report.json), or -o FORMAT for standard output".into())
        );
    }
}
