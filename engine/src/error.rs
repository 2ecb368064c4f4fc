//! The engine's error types: the engine could not do its job (as opposed to a rule not holding,
//! which is a [`Finding`](crate::Finding)).
//!
//! Every error implements [`miette::Diagnostic`] with a stable code (`nvcre::rules::…`,
//! `nvcre::input::…`, `nvcre::files::…`) and, where there is something to suggest, help text.

use std::fmt;

use crate::source::Pos;

/// What a problem of a rule file is inside: a rule of a `RulePack` (`rule ID`) or an entry of a
/// `Table` (`entry ID`). `Display` gives those words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inside {
    /// A rule, by its id.
    Rule(String),
    /// A table entry, by its id.
    Entry(String),
}

impl Inside {
    /// The owner of id `id` in rule file document `doc`: an entry in a `Table`, a rule
    /// anywhere else.
    pub(crate) fn in_doc(doc: &crate::source::Document, id: &str) -> Inside {
        match doc.value.get("kind").and_then(serde_json::Value::as_str) {
            Some("Table") => Inside::Entry(id.to_string()),
            _ => Inside::Rule(id.to_string()),
        }
    }
}

impl fmt::Display for Inside {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Inside::Rule(id) => write!(f, "rule {id}"),
            Inside::Entry(id) => write!(f, "entry {id}"),
        }
    }
}

/// What a [`Error::Contract`] is about; [`ContractViolation::code`] names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ContractViolation {
    /// A pack's `stage` is not a stage of the contract.
    UnknownStage,
    /// A pack has no `stage` although a contract is given.
    MissingStage,
    /// A `Table` whose name the contract does not declare.
    UnknownTable,
    /// A table row that does not validate against the table's row schema.
    RowSchema,
    /// A `params.<name>` read that the stage (or table) does not pass.
    UndeclaredParam,
    /// A CEL field of a table row (such as an override's `when.expression`) that does not
    /// compile, or reads a name the table does not declare for it.
    RowExpression,
    /// A table the contract declares that no rule file of the set defines.
    MissingTable,
    /// A pack reads `objects` although its stage does not bind it.
    UnboundObjects,
    /// A stage the contract declares that no pack of a whole set runs in.
    EmptyStage,
    /// A file of a whole set that holds no document (emptied or truncated).
    EmptyFile,
}

impl ContractViolation {
    /// The diagnostic code, e.g. `nvcre::rules::unknown_stage`.
    pub fn code(self) -> &'static str {
        match self {
            ContractViolation::UnknownStage => "nvcre::rules::unknown_stage",
            ContractViolation::MissingStage => "nvcre::rules::missing_stage",
            ContractViolation::UnknownTable => "nvcre::rules::unknown_table",
            ContractViolation::RowSchema => "nvcre::rules::row_schema",
            ContractViolation::UndeclaredParam => "nvcre::rules::undeclared_param",
            ContractViolation::RowExpression => "nvcre::rules::row_expression",
            ContractViolation::MissingTable => "nvcre::rules::missing_table",
            ContractViolation::UnboundObjects => "nvcre::rules::unbound_objects",
            ContractViolation::EmptyStage => "nvcre::rules::empty_stage",
            ContractViolation::EmptyFile => "nvcre::rules::empty_file",
        }
    }
}

/// Errors from loading rule packs, reading files, parsing input or applying a patch.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input is not valid YAML/JSON.
    #[error("{}: {message}", located(source_name, pos))]
    Yaml {
        /// File name as given.
        source_name: String,
        /// Where the parser stopped, when known.
        pos: Option<Pos>,
        /// What the parser said.
        message: String,
    },
    /// The input exceeds the size limit.
    #[error("{source_name}: input is {bytes} bytes, above the limit of {limit}")]
    TooLarge {
        /// File name as given.
        source_name: String,
        /// Size of the input.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// A rule file does not load: a wrong shape, an unknown field, a duplicate id or a CEL
    /// expression that does not compile.
    #[error("rule pack error: {}: {}{message}", located(file, pos), rule.as_ref().map(|r| format!("{r}: ")).unwrap_or_default())]
    Pack {
        /// The rule file.
        file: String,
        /// Line and column of the offending node.
        pos: Option<Pos>,
        /// The rule or table entry, when the problem is inside one.
        rule: Option<Inside>,
        /// What is wrong.
        message: String,
    },
    /// A rule file breaks the caller's [`Contract`](crate::Contract): an unknown stage or
    /// table, a table row that does not fit its schema, a param the stage does not pass.
    #[error("rule pack error: {}: {}{message}", located(file, pos), rule.as_ref().map(|r| format!("{r}: ")).unwrap_or_default())]
    Contract {
        /// Which check failed.
        violation: ContractViolation,
        /// The rule file.
        file: String,
        /// Line and column of the offending node.
        pos: Option<Pos>,
        /// The rule or table entry, when the problem is inside one.
        rule: Option<Inside>,
        /// What is wrong; a list of what would be accepted follows `; ` (the help text).
        message: String,
    },
    /// A mutation could not be applied (a JSON Patch `test` failed, a path is missing, …).
    #[error("patch error: {0}")]
    Patch(String),
    /// Reading a file or directory failed.
    #[error("reading {path}: {}", crate::limits::io_error_text(source))]
    Io {
        /// The path.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A directory walk met a symbolic link that leads back to one of its own ancestors.
    #[error("reading {path}: symlink loop: it leads back to {ancestor}")]
    SymlinkLoop {
        /// The link, as reached from the walked directory.
        path: String,
        /// The ancestor directory it points back to.
        ancestor: String,
    },
    /// A value could not be written as YAML.
    #[error("writing YAML: {0}")]
    Serialize(String),
    /// A [`Contract`](crate::Contract) cannot be built (a row schema that is not a JSON Schema).
    #[error("invalid contract: {0}")]
    InvalidContract(String),
}

fn located(name: &str, pos: &Option<Pos>) -> String {
    match pos {
        Some(p) => format!("{name}:{p}"),
        None => name.to_string(),
    }
}

impl Error {
    /// The file name and position this error points at, if any.
    pub fn location(&self) -> Option<(&str, Option<Pos>)> {
        match self {
            Error::Yaml {
                source_name, pos, ..
            } => Some((source_name, *pos)),
            Error::Pack { file, pos, .. } | Error::Contract { file, pos, .. } => Some((file, *pos)),
            Error::TooLarge { source_name, .. } => Some((source_name, None)),
            Error::Io { path, .. } | Error::SymlinkLoop { path, .. } => Some((path, None)),
            Error::Patch(_) | Error::Serialize(_) | Error::InvalidContract(_) => None,
        }
    }

    /// The diagnostic code, e.g. `nvcre::rules::invalid` or `nvcre::rules::unknown_stage`.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Yaml { .. } => "nvcre::input::yaml",
            Error::TooLarge { .. } => "nvcre::input::too_large",
            Error::Pack { .. } => "nvcre::rules::invalid",
            Error::Contract { violation, .. } => violation.code(),
            Error::Patch(_) => "nvcre::patch",
            Error::Io { .. } => "nvcre::files::io",
            Error::SymlinkLoop { .. } => "nvcre::files::symlink_loop",
            Error::Serialize(_) => "nvcre::output::yaml",
            Error::InvalidContract(_) => "nvcre::contract::invalid",
        }
    }
}

impl miette::Diagnostic for Error {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(Error::code(self)))
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        match self {
            Error::Contract { message, .. } => message
                .split_once("; ")
                .map(|(_, h)| Box::new(h) as Box<dyn fmt::Display>),
            Error::SymlinkLoop { .. } => Some(Box::new(
                "a directory link pointing at its own ancestor would be read forever; remove \
                 the link or point it elsewhere",
            )),
            Error::TooLarge { limit, .. } => Some(Box::new(format!(
                "split the input into files of at most {limit} bytes"
            ))),
            _ => None,
        }
    }
}

/// A CEL expression or a template that does not compile ([`Expr::compile`](crate::Expr::compile),
/// [`Template::compile`](crate::Template::compile)). `Display` is the message alone: the
/// parser's, with the position inside the expression, or the template's problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("{message}")]
#[diagnostic(code(nvcre::cel::compile))]
pub struct CompileError {
    /// What is wrong.
    pub message: String,
    /// Where in the expression the parser stopped: 1-based line and column, when it says.
    pub at: Option<(usize, usize)>,
}

/// A CEL expression or a template that failed when evaluated or rendered
/// ([`Expr::eval`](crate::Expr::eval) and its variants, [`Template::render`](crate::Template::render)).
/// `Display` is the message alone (no such key, wrong type, a failed variable it reads, …).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("{message}")]
#[diagnostic(code(nvcre::cel::evaluate))]
pub struct EvaluationError {
    /// What failed.
    pub message: String,
}

/// A CEL value JSON cannot hold ([`cel_to_json`](crate::cel_to_json)): a non-finite number, bytes,
/// a function, … `Display` is the message alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("{message}")]
#[diagnostic(code(nvcre::cel::to_json))]
pub struct ConversionError {
    /// What cannot be converted.
    pub message: String,
}

/// A field path that does not parse ([`FieldPath::parse`](crate::FieldPath::parse)). `Display`
/// is the message alone, naming the offending text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("{message}")]
#[diagnostic(code(nvcre::path::parse))]
pub struct PathError {
    /// What is wrong.
    pub message: String,
}

impl From<ConversionError> for EvaluationError {
    fn from(e: ConversionError) -> EvaluationError {
        EvaluationError { message: e.message }
    }
}

/// Every error of a rule set that did not load. Loading is all or nothing: a caller that
/// reloads rules (a controller watching a ConfigMap) keeps its last good set on this error.
///
/// `Display` prints one error per line, in file order; [`miette::Diagnostic::related`] yields
/// each of them.
#[derive(Debug)]
pub struct LoadErrors {
    /// The errors, in file, then line and column order. Never empty.
    pub errors: Vec<Error>,
}

impl LoadErrors {
    /// Wraps errors (at least one).
    pub fn new(errors: Vec<Error>) -> LoadErrors {
        LoadErrors { errors }
    }

    /// The first error.
    pub fn first(&self) -> Option<&Error> {
        self.errors.first()
    }
}

impl fmt::Display for LoadErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for LoadErrors {}

impl From<Error> for LoadErrors {
    fn from(e: Error) -> LoadErrors {
        LoadErrors { errors: vec![e] }
    }
}

impl miette::Diagnostic for LoadErrors {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new("nvcre::rules::load"))
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(format!(
            "{} problem(s); the rule set is refused whole, fix every one",
            self.errors.len()
        )))
    }

    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn miette::Diagnostic> + 'a>> {
        Some(Box::new(
            self.errors.iter().map(|e| e as &dyn miette::Diagnostic),
        ))
    }
}
