//! Reading manifests: files, directories (recursively: .yaml, .yml, .json, through the engine's
//! walker: hidden entries skipped, symlinked files read, symlinked directories not followed) and
//! standard input.

use std::path::{Path, PathBuf};

use nvcre_engine::limits::read_text_limited;

use nvcre_engine::{ChunkReader, Document, Source, WalkOptions, parse_chunk, walk_files_noting};

/// A file to read: the name findings and errors give it, and the path it is opened at.
///
/// They differ only for a file found in a directory whose path is not valid UTF-8: it is read
/// at its own path and named with U+FFFD in place of each byte sequence that is not UTF-8.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    /// The path as given, `-` for standard input, or a found file's path made UTF-8.
    pub name: String,
    /// Where it is opened.
    pub path: PathBuf,
}

impl InputFile {
    /// A path as given on the command line (or `-`).
    pub fn given(path: &str) -> InputFile {
        InputFile {
            name: path.to_string(),
            path: PathBuf::from(path),
        }
    }

    /// A file found in a directory.
    fn found(path: PathBuf) -> InputFile {
        InputFile {
            name: path.to_string_lossy().into_owned(),
            path,
        }
    }

    /// Whether this is standard input.
    pub fn is_stdin(&self) -> bool {
        self.name == "-"
    }
}

/// Reads one file (or `-`) as a document stream, each document parsed on its own as `check`
/// reads it: the per-document budgets (`--max-document-bytes` among them) apply to each, and a
/// `render` of a file reads the same documents as a `check` of it.
pub fn read_one(file: &InputFile) -> Result<Vec<Document>, String> {
    read_each(file).into_iter().collect()
}

/// [`read_one`] a document at a time: each document of the file, or the error of a piece that
/// does not parse (the next pieces are still read, as `check` reads them); a file that cannot
/// be read, or a stream that cannot be split further, is one error, last.
pub fn read_each(file: &InputFile) -> Vec<Result<Document, String>> {
    let source = match read_source(file) {
        Ok(s) => s,
        Err(e) => return vec![Err(e)],
    };
    let mut out = Vec::new();
    let mut index = 0;
    for piece in ChunkReader::new(source.text.as_bytes()) {
        let piece = match piece {
            Ok(p) => p,
            Err(e) => {
                out.push(Err(format!("{}: {e}", source.name)));
                break;
            }
        };
        match parse_chunk(&source, &piece, index) {
            Ok(docs) => {
                index += docs.len();
                out.extend(docs.into_iter().map(Ok));
            }
            Err(e) => {
                // The piece counts as the document it was meant to be.
                index += 1;
                out.push(Err(e.to_string()));
            }
        }
    }
    out
}

/// Reads the text of a file, or of stdin for `-`, at most `MAX_SOURCE_BYTES` of it (checked
/// while reading).
pub fn read_source(file: &InputFile) -> Result<std::sync::Arc<Source>, String> {
    const WHOLE_FILE: &str = "a file that render reads whole; split it";
    let limit = nvcre_engine::MAX_SOURCE_BYTES;
    if file.is_stdin() {
        let text = read_text_limited(std::io::stdin().lock(), "<stdin>", limit, WHOLE_FILE)?;
        return Ok(Source::new("<stdin>", text));
    }
    let name = &file.name;
    let opened = std::fs::File::open(&file.path).map_err(|e| {
        format!(
            "reading {name}: {}",
            nvcre_engine::limits::io_error_text(&e)
        )
    })?;
    let text = read_text_limited(opened, name, limit, WHOLE_FILE)?;
    Ok(Source::new(name.as_str(), text))
}

/// Expands paths: files as given, directories recursively to their manifest files in path
/// order, `-` kept. Missing paths and unreadable entries are reported as `(path, message)`
/// errors; the other files are still listed. A special file below a directory (a named pipe,
/// socket or device) is skipped with a note on stderr.
pub fn expand(paths: &[String]) -> (Vec<InputFile>, Vec<(String, String)>) {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for item in expand_in_order(paths) {
        match item {
            Ok(f) => files.push(f),
            Err(e) => errors.push(e),
        }
    }
    (files, errors)
}

/// As [`expand`], the files and the errors in the order of `paths` (a missing path between
/// two files stays between them). A file named again (the same path twice, a file inside a
/// directory also given, a symbolic link beside its target) is read once, where it first
/// comes, with a note on stderr: its findings would otherwise be reported, and counted, twice.
pub fn expand_in_order(paths: &[String]) -> Vec<Result<InputFile, (String, String)>> {
    let mut out = Vec::new();
    expand_paths(paths, &mut out);
    let mut seen: std::collections::HashMap<PathBuf, String> = std::collections::HashMap::new();
    let mut failed: std::collections::HashSet<String> = std::collections::HashSet::new();
    out.retain(|item| {
        let f = match item {
            Ok(f) => f,
            // A path that could not be read, named again: the same error, once.
            Err((at, _)) => return failed.insert(at.clone()),
        };
        if f.name == "-" {
            return true;
        }
        let Ok(key) = std::fs::canonicalize(&f.path) else {
            return true;
        };
        match seen.get(&key) {
            Some(first) => {
                if *first == f.name {
                    eprintln!("note: {first} is named twice; it is checked once");
                } else {
                    eprintln!(
                        "note: {} is {first}, already read; it is checked once",
                        f.name
                    );
                }
                false
            }
            None => {
                seen.insert(key, f.name.clone());
                true
            }
        }
    });
    out
}

fn expand_paths(paths: &[String], out: &mut Vec<Result<InputFile, (String, String)>>) {
    for p in paths {
        if p == "-" {
            out.push(Ok(InputFile::given(p)));
            continue;
        }
        let path = Path::new(p);
        if path.is_dir() {
            let (found, errs, notes) = walk_files_noting(path, &WalkOptions::MANIFESTS);
            for note in notes {
                eprintln!("note: {note}");
            }
            // Each entry that could not be read goes among the files in path order (the walk's
            // order: each directory's entries by name, depth first), before the first file
            // after it; the files keep their order.
            let mut errs: Vec<(String, String)> = errs
                .into_iter()
                .map(|e| {
                    let at = e
                        .location()
                        .map_or_else(|| p.clone(), |(f, _)| f.to_string());
                    (at, e.to_string())
                })
                .collect();
            errs.sort_by(|a, b| Path::new(&a.0).cmp(Path::new(&b.0)));
            let mut errs = errs.into_iter().peekable();
            for f in found {
                while let Some(e) = errs.next_if(|(at, _)| Path::new(at) < f.as_path()) {
                    out.push(Err(e));
                }
                out.push(Ok(InputFile::found(f)));
            }
            out.extend(errs.map(Err));
        } else if path.exists() {
            out.push(Ok(InputFile::given(p)));
        } else {
            out.push(Err((
                p.clone(),
                format!("reading {p}: no such file or directory"),
            )));
        }
    }
}

/// The node-context flags `render` and `check` share.
#[derive(Debug, Clone, clap::Args)]
pub struct NodeArgs {
    /// Resolve overrides for this platform and enforce the post-override contract. (The help
    /// lists the accepted values from the platform-detection table; see `platform_help`.)
    #[arg(long)]
    pub platform: Option<String>,
    /// GPU architecture (gb300, NVIDIA-GB300 and "NVIDIA GB300" are the same); default: the
    /// target's nvidia.com/gpu.product node selector.
    #[arg(long = "gpu-arch")]
    pub gpu_arch: Option<String>,
    /// Nodes to detect platform and architecture from, and to place groups on: a v1 NodeList
    /// or Node documents (`kubectl get nodes -o yaml`). Exclusive with --platform/--gpu-arch.
    #[arg(long = "nodes-file", value_name = "FILE")]
    pub nodes_file: Option<String>,
}

impl NodeArgs {
    /// How many times standard input (`-`) is read: once per `-` among `inputs`, once more for
    /// `--nodes-file -`. A second read would find the stream empty.
    pub fn stdin_reads(&self, inputs: &[String]) -> usize {
        inputs.iter().filter(|p| p.as_str() == "-").count()
            + usize::from(self.nodes_file.as_deref() == Some("-"))
    }

    /// Checks the flags (before any file is read, as nvcrectl does), then reads the nodes file.
    /// The returned request carries the node context only; callers set the rest.
    ///
    /// # Errors
    /// [`NodeArgsError::Flags`] for a bad flag value or combination, [`NodeArgsError::NodesFile`]
    /// when the nodes file cannot be read or is not a list of nodes.
    pub fn request(
        &self,
        rules: &nvcre_engine::RuleSet,
    ) -> Result<nvcre_domain::RenderRequest, NodeArgsError> {
        let flags = nvcre_domain::RenderRequest {
            platform: self.platform.clone(),
            gpu_arch: self.gpu_arch.clone(),
            nodes: self
                .nodes_file
                .as_ref()
                .map(|_| std::sync::Arc::new(Vec::new())),
            ..Default::default()
        };
        nvcre_domain::check_flags(rules, &flags).map_err(NodeArgsError::Flags)?;
        let nodes = match &self.nodes_file {
            Some(f) => Some(std::sync::Arc::new(nvcre_domain::read_nodes(f).map_err(
                |e| NodeArgsError::NodesFile {
                    file: f.clone(),
                    message: e.message,
                    pos: e.pos,
                },
            )?)),
            None => None,
        };
        Ok(nvcre_domain::RenderRequest { nodes, ..flags })
    }
}

/// Why the node-context flags cannot be used.
#[derive(Debug)]
pub enum NodeArgsError {
    /// A flag value or combination that is refused (a usage error).
    Flags(nvcre_domain::PolicyError),
    /// The nodes file could not be read or is not nodes: an input error of that file.
    NodesFile {
        /// The path as given.
        file: String,
        /// The message, which names the file.
        message: String,
        /// Where in the file, when known.
        pos: Option<nvcre_engine::Pos>,
    },
}

impl std::fmt::Display for NodeArgsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeArgsError::Flags(e) => e.fmt(f),
            NodeArgsError::NodesFile { message, .. } => f.write_str(message),
        }
    }
}

/// The input budgets (global flags): each YAML/JSON document is parsed within them, and its
/// rules evaluated within the CEL cost budgets. See
/// `nvcre_engine::limits::Limits` for what each bounds and docs/input.md for the defaults.
#[derive(Debug, Clone, clap::Args)]
pub struct LimitArgs {
    /// Largest document, in bytes (default 3 MiB, the API server's request limit).
    #[arg(long, global = true, help_heading = "Input budgets", value_name = "BYTES", default_value_t = nvcre_engine::limits::Limits::default().document_bytes)]
    pub max_document_bytes: usize,
    /// Deepest nesting of mappings and lists in one document (at most 128: deeper documents
    /// would exhaust the stack of the checks that walk them).
    #[arg(long, global = true, help_heading = "Input budgets", value_name = "N", default_value_t = nvcre_engine::limits::Limits::default().depth,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=nvcre_engine::limits::MAX_DEPTH as u64))]
    pub max_depth: usize,
    /// Most aliases (`*name`) in one document.
    #[arg(long, global = true, help_heading = "Input budgets", value_name = "N", default_value_t = nvcre_engine::limits::Limits::default().aliases)]
    pub max_aliases: usize,
    /// Most YAML nodes in one document (a nodes file: per --max-document-bytes of its size).
    #[arg(long, global = true, help_heading = "Input budgets", value_name = "N", default_value_t = nvcre_engine::limits::Limits::default().yaml_nodes)]
    pub max_yaml_nodes: usize,
    /// Largest --nodes-file, in bytes (default 1 GiB).
    #[arg(long, global = true, help_heading = "Input budgets", value_name = "BYTES", default_value_t = nvcre_engine::limits::Limits::default().nodes_file_bytes)]
    pub max_nodes_file_bytes: usize,
    /// Most nodes `render --expand` makes up without --nodes-file (at most 1,000,000: each
    /// made-up node is held in memory).
    #[arg(long, global = true, help_heading = "Input budgets", value_name = "N", default_value_t = nvcre_engine::limits::Limits::default().expand_nodes,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=nvcre_engine::limits::MAX_EXPAND_NODES as u64))]
    pub max_expand_nodes: usize,
    /// Most CEL cost units one expression evaluation may use (comprehension iterations and
    /// 64-byte blocks of the text regex and string functions scan); beyond it the rule is a
    /// rule error.
    #[arg(long, global = true, help_heading = "Input budgets", value_name = "UNITS", default_value_t = nvcre_engine::limits::Limits::default().cel_cost)]
    pub cel_cost_limit: u64,
    /// Most CEL cost units the expressions evaluated on one document may use together.
    #[arg(long, global = true, help_heading = "Input budgets", value_name = "UNITS", default_value_t = nvcre_engine::limits::Limits::default().cel_document_cost)]
    pub cel_document_cost_limit: u64,
}

impl LimitArgs {
    /// Sets the process's limits from the flags.
    pub fn apply(&self) {
        nvcre_engine::limits::set_limits(nvcre_engine::limits::Limits {
            document_bytes: self.max_document_bytes,
            depth: self.max_depth,
            aliases: self.max_aliases,
            yaml_nodes: self.max_yaml_nodes,
            nodes_file_bytes: self.max_nodes_file_bytes,
            expand_nodes: self.max_expand_nodes,
            cel_cost: self.cel_cost_limit,
            cel_document_cost: self.cel_document_cost_limit,
        });
    }
}
