//! Rule files: load, check the shape, compile every expression, refuse what does not compile.
//!
//! A rule file is a YAML stream of documents of two kinds (`apiVersion:
//! policy.nvcre.nvidia.com/v1alpha1`):
//!
//! - `kind: RulePack`: `match` (resources by apiVersion/kind, `matchConditions` in CEL),
//!   `variables`, `fragments` and `rules[]` with `validate` and/or `mutate`;
//! - `kind: Table`: `fragments` and `entries[]`, each entry a [`Template`] with an optional
//!   `include` CEL guard, rendered with caller-supplied `params` (the platform override table
//!   and the defaults tables are tables).
//!
//! Field names follow ValidatingAdmissionPolicy / MutatingAdmissionPolicy where they mean the
//! same thing. Unknown fields are refused with their line.
//!
//! Loading is all or nothing: [`RuleSet::load`] returns a complete set or every problem of
//! every file ([`LoadErrors`]), never a partial set. With a [`Contract`] it also checks stages,
//! table names, row schemas and params (see [`crate::contract`]). The loader is also where
//! [`crate::lint`] gets its compiled packs and problems from.

use rayon::prelude::*;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::contract::Contract;
use crate::error::{Error, Inside, LoadErrors};
use crate::expr::{Expr, Template, VarBindings};
use crate::files::{WalkOptions, read_files};
use crate::finding::Severity;
use crate::patch::End;
use crate::path::FieldPath;
use crate::sites::{Owner, pack_sites, reads, table_sites};
use crate::source::{Document, Pos, PreparedDocument, Source, SpanIndex};

/// The apiVersion of rule files.
pub const RULES_API_VERSION: &str = "policy.nvcre.nvidia.com/v1alpha1";

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct PackFile {
    api_version: String,
    // Dispatched on before deserializing; kept so deny_unknown_fields accepts it.
    #[serde(rename = "kind")]
    _kind: String,
    metadata: MetadataSpec,
    #[serde(default)]
    stage: Option<String>,
    #[serde(default, rename = "match")]
    matcher: Option<MatchSpec>,
    #[serde(default)]
    variables: Vec<VarSpec>,
    #[serde(default)]
    fragments: BTreeMap<String, Value>,
    // Rules are read one by one (see `compile_pack`), so one bad rule does not hide the others.
    #[serde(default)]
    #[schemars(with = "Vec<RuleSpec>")]
    rules: Vec<Value>,
    #[serde(default)]
    entries: Vec<Value>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct MetadataSpec {
    name: String,
    #[serde(default)]
    description: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct MatchSpec {
    #[serde(default)]
    resources: Vec<ResourceSpec>,
    #[serde(default)]
    match_conditions: Vec<VarSpec>,
}

#[derive(Deserialize, JsonSchema, Debug, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ResourceSpec {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct VarSpec {
    name: String,
    expression: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RuleSpec {
    id: String,
    #[serde(default)]
    severity: Severity,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    when: Option<String>,
    #[serde(default)]
    variables: Vec<VarSpec>,
    #[serde(default)]
    for_each: Option<ForEachSpec>,
    #[serde(default)]
    validate: Option<ValidateSpec>,
    #[serde(default)]
    mutate: Vec<MutationSpec>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ForEachSpec {
    #[serde(rename = "in")]
    items: String,
    #[serde(rename = "as")]
    var: String,
    #[serde(default)]
    index: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ValidateSpec {
    expression: String,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    message_expression: Option<String>,
    #[serde(default)]
    field_path: Option<String>,
    #[serde(default)]
    field_path_expression: Option<String>,
    /// `value` (the default) or `key`: where in the file the finding points, the value at
    /// `fieldPath` or the key of its last mapping entry (a problem with the key itself).
    #[serde(default)]
    at: Option<String>,
    /// CEL giving `value` or `key`, as `at` (exclusive with it).
    #[serde(default)]
    at_expression: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
enum MutationSpec {
    Merge { path: String, value: Value },
    Prepend { path: String, values: Value },
    Append { path: String, values: Value },
    JsonPatch(Value),
}

/// Which documents a pack applies to.
#[derive(Debug, Clone, Default)]
pub struct Matcher {
    resources: Vec<(Option<String>, Option<String>)>,
    pub(crate) conditions: Vec<(String, Expr)>,
    /// Index in the file of each condition (conditions that do not compile are left out).
    pub(crate) condition_at: Vec<usize>,
    /// 1-based line of each condition's expression in the rule file (0 when unknown), for the
    /// rule error of one that cannot be evaluated.
    pub(crate) condition_lines: Vec<usize>,
}

impl Matcher {
    /// True when `doc`'s apiVersion and kind are among the pack's resources (or none are listed).
    pub fn matches_resource(&self, doc: &Value) -> bool {
        if self.resources.is_empty() {
            return true;
        }
        let api = doc.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
        self.resources.iter().any(|(a, k)| {
            a.as_deref().is_none_or(|a| a == "*" || a == api)
                && k.as_deref().is_none_or(|k| k == "*" || k == kind)
        })
    }
}

/// A rule's message: fixed text or a CEL expression.
#[derive(Debug, Clone)]
pub enum Message {
    /// Fixed text.
    Static(String),
    /// `messageExpression`.
    Expr(Expr),
}

/// A rule's field path: fixed or computed.
#[derive(Debug, Clone)]
pub enum FieldPathSpec {
    /// `fieldPath`.
    Static(FieldPath),
    /// `fieldPathExpression` (must yield a string in field-path notation).
    Expr(Expr),
}

/// A compiled `validate` block.
#[derive(Debug, Clone)]
pub struct Validate {
    pub(crate) expression: Expr,
    pub(crate) message: Message,
    pub(crate) field_path: Option<FieldPathSpec>,
    /// `at` / `atExpression`: whether the finding points at the key of the field path's last
    /// entry; `None`: at its value.
    pub(crate) at: Option<AtSpec>,
}

/// Where a finding points within its field path (`validate.at`, `validate.atExpression`).
#[derive(Debug, Clone)]
pub enum AtSpec {
    /// `at: key`.
    Key,
    /// `atExpression` (must give `key` or `value`).
    Expr(Expr),
}

/// A compiled mutation.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Recursive merge at a path (lists merged by name).
    Merge {
        /// Where.
        path: FieldPath,
        /// What, templated.
        value: Template,
    },
    /// Prepend or append list items at a path.
    Insert {
        /// Where.
        path: FieldPath,
        /// The items (a list), templated.
        values: Template,
        /// Front or back.
        end: End,
    },
    /// RFC 6902 operations, templated.
    JsonPatch(Template),
}

/// One compiled rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Unique id.
    pub id: String,
    /// Severity of its findings.
    pub severity: Severity,
    /// Human description.
    pub description: Option<String>,
    /// Line:column of the rule in its file.
    pub pos: Pos,
    /// Index in the pack's `rules` list as written.
    pub(crate) index: usize,
    pub(crate) when: Option<Expr>,
    pub(crate) variables: Vec<(String, Expr)>,
    /// `variables` as a scope binds them, beside its pack's; made when first bound.
    pub(crate) var_bindings: std::sync::OnceLock<VarBindings>,
    pub(crate) for_each: Option<(Expr, String, Option<String>)>,
    pub(crate) validate: Option<Validate>,
    pub(crate) mutate: Vec<Mutation>,
    /// The `mutate` list as written, for display.
    pub(crate) mutate_source: Vec<Value>,
}

impl Rule {
    /// The validation expression text, if the rule validates.
    pub fn expression(&self) -> Option<&str> {
        self.validate.as_ref().map(|v| v.expression.text())
    }

    /// The `when` guard's text, if any.
    pub fn when(&self) -> Option<&str> {
        self.when.as_ref().map(Expr::text)
    }

    /// The `forEach.in` expression's text, if the rule iterates.
    pub fn for_each(&self) -> Option<&str> {
        self.for_each.as_ref().map(|(e, _, _)| e.text())
    }

    /// The fixed `message`, if the rule validates with one.
    pub fn message(&self) -> Option<&str> {
        match &self.validate.as_ref()?.message {
            Message::Static(m) => Some(m),
            Message::Expr(_) => None,
        }
    }

    /// The `messageExpression` text, if the rule computes its message.
    pub fn message_expression(&self) -> Option<&str> {
        match &self.validate.as_ref()?.message {
            Message::Static(_) => None,
            Message::Expr(e) => Some(e.text()),
        }
    }

    /// The `fieldPath` (as a path) or the `fieldPathExpression` (as its CEL text), if any.
    pub fn field_path(&self) -> Option<String> {
        match self.validate.as_ref()?.field_path.as_ref()? {
            FieldPathSpec::Static(p) => Some(p.to_string()),
            FieldPathSpec::Expr(e) => Some(e.text().to_string()),
        }
    }

    /// The `mutate` list as written in the rule file (each item one mutation), empty when the
    /// rule only validates.
    pub fn mutations(&self) -> &[Value] {
        &self.mutate_source
    }
}

/// A loaded, compiled `RulePack`. Immutable; share it with `Arc`.
#[derive(Debug, Clone)]
pub struct CompiledPack {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.description`.
    pub description: Option<String>,
    /// The pipeline stage that runs this pack (free text; the caller decides).
    pub stage: Option<String>,
    /// The file it came from.
    pub source: Arc<Source>,
    pub(crate) matcher: Matcher,
    pub(crate) variables: Vec<(String, Expr)>,
    /// `variables` as a scope binds them; made when first bound (not at start-up).
    pub(crate) var_bindings: std::sync::OnceLock<VarBindings>,
    /// Index in the file of each compiled variable.
    pub(crate) variable_at: Vec<usize>,
    /// The names of every pack variable as written (also those that did not compile).
    pub(crate) declared_vars: Vec<String>,
    pub(crate) fragments: Vec<(String, Template)>,
    /// The rules, in file order (which is evaluation order).
    pub rules: Vec<Rule>,
    /// Field path → line:column of the pack's document.
    pub(crate) spans: Arc<SpanIndex>,
    /// False when a part of the pack did not load (lints about unused names then stay quiet).
    pub(crate) complete: bool,
    /// The answers of [`CompiledPack::may_touch`] so far, by path (the pack never changes).
    pub(crate) touches: Arc<std::sync::Mutex<Vec<Touch>>>,
    /// Whether the pack's expressions read [`OBJECTS`](crate::OBJECTS), and whether they read
    /// [`OBJECTS_BY_KIND`](crate::OBJECTS_BY_KIND), found when first asked (not at start-up).
    pub(crate) reads_objects: std::sync::OnceLock<(bool, bool)>,
    /// Why the pack cannot run (the file, line:column, rule and message of a rule pack
    /// error): a pack of a trusted set that did not compile when first used, which the test
    /// suite rules out for the embedded set. Running it is then that error.
    pub(crate) broken: Option<Box<BrokenPack>>,
}

/// Where and why a pack of a trusted set did not compile ([`Error::Pack`]'s fields).
pub(crate) type BrokenPack = (String, Option<Pos>, Option<crate::error::Inside>, String);

/// A path and whether a pack may touch it (see [`CompiledPack::may_touch`]).
pub(crate) type Touch = (Vec<String>, bool);

/// One entry of a [`Table`].
#[derive(Debug, Clone)]
pub struct TableEntry {
    /// The entry id.
    pub id: String,
    /// Line:column in the file.
    pub pos: Pos,
    /// Index in the table's `entries` list as written.
    pub(crate) index: usize,
    pub(crate) include: Option<Expr>,
    pub(crate) body: Template,
}

/// A loaded `kind: Table`: data rendered with caller params (see [`Table::render`]).
#[derive(Debug, Clone)]
pub struct Table {
    /// `metadata.name`.
    pub name: String,
    /// The file it came from.
    pub source: Arc<Source>,
    pub(crate) fragments: Vec<(String, Template)>,
    /// The entries, in file order.
    pub entries: Vec<TableEntry>,
    /// Field path → line:column of the table's document.
    pub(crate) spans: Arc<SpanIndex>,
    /// False when a part of the table did not load.
    pub(crate) complete: bool,
    /// Renders already computed (a thread-safe cache keyed on the params the table reads).
    pub(crate) cache: Arc<crate::eval::TableCache>,
    /// The contract's row schema, when the set was loaded with one that declares the table: a
    /// row with templated values is checked against it once rendered.
    pub(crate) schema: Option<Arc<crate::contract::RowValidator>>,
}

impl Table {
    /// The id of the entry at index `index` of the table's `entries` as written (`None` for an
    /// entry that did not compile).
    pub(crate) fn entry_id(&self, index: usize) -> Option<&str> {
        self.entries
            .iter()
            .find(|e| e.index == index)
            .map(|e| e.id.as_str())
    }

    /// The id of the entry a site of the table belongs to (`None` for a fragment's).
    pub(crate) fn owner_id(&self, owner: &Owner) -> Option<&str> {
        match owner {
            Owner::Entry(i) => self.entry_id(*i),
            _ => None,
        }
    }
}

/// Every pack and table of a rule directory (or of the embedded default set).
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    /// The rule packs, in load order (files sorted by path, documents in order): see
    /// [`RuleSet::packs`].
    packs: Vec<PackSlot>,
    /// Every pack compiled, in load order, made when first asked for.
    all_packs: std::sync::OnceLock<Vec<Arc<CompiledPack>>>,
    /// The tables.
    pub tables: Vec<Arc<Table>>,
    /// Documents of the kinds the contract declares besides `RulePack` and `Table`
    /// ([`Contract::document_kind`]), as written, in load order; each passed its check.
    pub documents: Vec<Arc<Document>>,
}

/// One pack of a [`RuleSet`]: compiled when the set loaded, or, in a set loaded
/// [trusted](RuleSet::load_prepared_trusted), when a caller first asks for it (most commands
/// run a few stages: a `check` of WorkloadRuns never runs the lint pack, the costliest to
/// compile).
#[derive(Debug, Clone)]
enum PackSlot {
    /// Compiled when the set loaded.
    Compiled(Arc<CompiledPack>),
    /// Compiled when first asked for.
    Deferred {
        stage: Option<String>,
        /// The pack's `match.resources`, read from its document.
        resources: Matcher,
        doc: Arc<Document>,
        compiled: std::sync::OnceLock<Arc<CompiledPack>>,
    },
}

impl PackSlot {
    fn deferred(doc: Document) -> PackSlot {
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let resources = doc
            .value
            .pointer("/match/resources")
            .and_then(Value::as_array)
            .map(|rs| {
                rs.iter()
                    .map(|r| (text(r, "apiVersion"), text(r, "kind")))
                    .collect()
            })
            .unwrap_or_default();
        PackSlot::Deferred {
            stage: text(&doc.value, "stage"),
            resources: Matcher {
                resources,
                ..Matcher::default()
            },
            doc: Arc::new(doc),
            compiled: std::sync::OnceLock::new(),
        }
    }

    fn stage(&self) -> Option<&str> {
        match self {
            PackSlot::Compiled(p) => p.stage.as_deref(),
            PackSlot::Deferred { stage, .. } => stage.as_deref(),
        }
    }

    /// [`CompiledPack::matches_resource`], without compiling the pack.
    fn matches_resource(&self, value: &Value) -> bool {
        match self {
            PackSlot::Compiled(p) => p.matches_resource(value),
            PackSlot::Deferred { resources, .. } => resources.matches_resource(value),
        }
    }

    /// Whether the pack is compiled yet.
    #[cfg(test)]
    fn is_compiled(&self) -> bool {
        match self {
            PackSlot::Compiled(_) => true,
            PackSlot::Deferred { compiled, .. } => compiled.get().is_some(),
        }
    }

    fn get(&self) -> &Arc<CompiledPack> {
        let (resources, doc, compiled) = match self {
            PackSlot::Compiled(p) => return p,
            PackSlot::Deferred {
                resources,
                doc,
                compiled,
                ..
            } => (resources, doc, compiled),
        };
        compiled.get_or_init(|| {
            let mut problems = Vec::new();
            let pack = compile_pack(doc, Checks::CompileOnly, &mut problems);
            // A trusted set loads in full (the test suite checks it), so its packs compile;
            // one that does not fails every run of it, with its first problem.
            match (pack, problems.into_iter().next()) {
                (Some(p), None) => Arc::new(p),
                (_, first) => Arc::new(CompiledPack::broken(
                    doc,
                    first.map(|p| p.error),
                    resources.clone(),
                )),
            }
        })
    }
}

impl CompiledPack {
    /// A pack that fails every run on a document `matcher` (its `match.resources`) takes, with
    /// `why` (its first load problem) as a rule pack error (see [`CompiledPack::broken`]'s
    /// field).
    fn broken(doc: &Document, why: Option<Error>, matcher: Matcher) -> CompiledPack {
        let text = |k: &str| doc.value.get(k).and_then(Value::as_str).map(str::to_string);
        let name = doc
            .value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let broken = match why {
            Some(Error::Pack {
                file,
                pos,
                rule,
                message,
            }) => (file, pos, rule, message),
            other => (
                doc.source.name.clone(),
                None,
                None,
                format!(
                    "rule pack {name:?} did not compile{}",
                    other.map(|e| format!(": {e}")).unwrap_or_default()
                ),
            ),
        };
        CompiledPack {
            stage: text("stage"),
            source: doc.source.clone(),
            broken: Some(Box::new(broken)),
            name,
            description: None,
            matcher,
            variables: Vec::new(),
            var_bindings: std::sync::OnceLock::new(),
            variable_at: Vec::new(),
            declared_vars: Vec::new(),
            fragments: Vec::new(),
            rules: Vec::new(),
            spans: Arc::default(),
            complete: false,
            touches: Arc::default(),
            reads_objects: std::sync::OnceLock::new(),
        }
    }

    /// True when `doc`'s apiVersion and kind are among the pack's `match.resources` (or the
    /// pack lists none). `matchConditions` are not evaluated.
    pub fn matches_resource(&self, doc: &Value) -> bool {
        self.matcher.matches_resource(doc)
    }

    /// True when an expression of the pack (a rule's, a variable's, a fragment's) reads the
    /// other documents of the input ([`OBJECTS`](crate::OBJECTS) or
    /// [`OBJECTS_BY_KIND`](crate::OBJECTS_BY_KIND)): a caller gathers them only for a document
    /// some such pack checks.
    pub fn reads_objects(&self) -> bool {
        let (list, by_kind) = self.objects_read();
        list || by_kind
    }

    /// Whether an expression of the pack reads [`OBJECTS`](crate::OBJECTS), and whether one
    /// reads [`OBJECTS_BY_KIND`](crate::OBJECTS_BY_KIND): the views a run of the pack binds.
    pub(crate) fn objects_read(&self) -> (bool, bool) {
        *self.reads_objects.get_or_init(|| {
            let (mut list, mut by_kind) = (false, false);
            for site in pack_sites(self) {
                for i in crate::sites::free_identifiers(site.expr) {
                    list |= i == crate::OBJECTS;
                    by_kind |= i == crate::OBJECTS_BY_KIND;
                }
            }
            (list, by_kind)
        })
    }
}

/// What kind of problem a rule file has; lets [`crate::lint`] give each one its lint id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProblemKind {
    /// YAML that does not parse, or a file above the size limit.
    Syntax,
    /// A field that is not part of the format.
    UnknownField,
    /// Any other shape problem: a missing or mistyped field, a wrong apiVersion or kind.
    Shape,
    /// A CEL expression, template or field path that does not compile.
    Compile,
    /// A rule id, entry id, pack name or table name used twice.
    Duplicate,
    /// `variables.x` where no variable `x` is visible.
    UndefinedVariable,
    /// A breach of the caller's [`Contract`].
    Contract,
}

/// One problem found while loading rule files: its kind and the error the loader reports.
#[derive(Debug)]
pub(crate) struct Problem {
    pub(crate) kind: ProblemKind,
    pub(crate) error: Error,
}

impl RuleSet {
    /// Loads and compiles rule files from sources, without a contract (any stage, any table).
    ///
    /// # Errors
    /// As [`RuleSet::load`].
    pub fn from_sources(sources: &[Arc<Source>]) -> Result<RuleSet, LoadErrors> {
        RuleSet::load(sources, None)
    }

    /// Loads and compiles rule files from sources, checking them against `contract` when
    /// given. All or nothing: a complete set, or every problem of every file.
    ///
    /// # Errors
    /// [`LoadErrors`] holding, in file order: [`Error::Yaml`] for a file that is not YAML;
    /// [`Error::Pack`] naming the file, line, column and rule id of a wrong shape, an unknown
    /// field, an expression that does not compile, a duplicate rule id or pack name, or a
    /// `variables.x` that no variable binds; [`Error::Contract`] for a breach of `contract`.
    pub fn load(
        sources: &[Arc<Source>],
        contract: Option<&Contract>,
    ) -> Result<RuleSet, LoadErrors> {
        let (set, problems) = RuleSet::load_collecting(sources, contract);
        RuleSet::finish_load(set, problems, sources, contract)
    }

    /// [`RuleSet::load`] of sources some or all of which are already parsed. Each
    /// [`PreparedSource`] is a source with either its documents as
    /// [`prepare_rule_file`](crate::prepare_rule_file) returned them for that source, or their
    /// JSON ([`Prepared`]; its text is then not parsed again), or `None` (its text is parsed, as
    /// [`RuleSet::load`] does). Everything else is [`RuleSet::load`]'s: the same compilation,
    /// contract checks, order and errors. Messages and the set show the prepared documents'
    /// spans and the sources' texts, so a prepared source must be the one its documents were
    /// parsed from.
    ///
    /// # Errors
    /// As [`RuleSet::load`] (a source without prepared documents that is not YAML:
    /// [`Error::Yaml`], in its place in file order).
    pub fn load_prepared(
        sources: Vec<PreparedSource>,
        contract: Option<&Contract>,
    ) -> Result<RuleSet, LoadErrors> {
        RuleSet::load_prepared_as(sources, contract, Checks::All)
    }

    /// [`RuleSet::load_prepared`] of a set whose full load is known to pass: the embedded
    /// set, which the test suite loads with every check. It compiles the same set, without
    /// the checks that can only find problems (undefined variables and identifiers,
    /// `{$fragment: name}` naming no fragment, duplicate names, the contract's stage, param,
    /// table-row and document checks), and each pack only when a caller first asks for it
    /// ([`RuleSet::stage`], [`RuleSet::packs_for`], [`RuleSet::packs`]): a pack that then
    /// does not compile fails every run of it with its load error. A file that does not
    /// parse, or a table that does not compile, is still a load error; any other problem
    /// goes unreported, so this is for checked sets only.
    ///
    /// # Errors
    /// As [`RuleSet::load_prepared`], but for the skipped checks.
    pub fn load_prepared_trusted(
        sources: Vec<PreparedSource>,
        contract: Option<&Contract>,
    ) -> Result<RuleSet, LoadErrors> {
        RuleSet::load_prepared_as(sources, contract, Checks::CompileOnly)
    }

    fn load_prepared_as(
        sources: Vec<PreparedSource>,
        contract: Option<&Contract>,
        checks: Checks,
    ) -> Result<RuleSet, LoadErrors> {
        let names: Vec<Arc<Source>> = sources.iter().map(|(s, _)| s.clone()).collect();
        let inputs = sources
            .into_iter()
            .map(|(source, docs)| match docs {
                Some(docs) => LoadInput::Prepared(source, docs),
                None => LoadInput::Text(source),
            })
            .collect();
        let (set, problems) = RuleSet::load_inputs(inputs, contract, checks);
        RuleSet::finish_load(set, problems, &names, contract)
    }

    /// The end of every load: the contract's missing tables, then every problem in file order
    /// (`sources` gives the order).
    fn finish_load(
        set: RuleSet,
        problems: Vec<Problem>,
        sources: &[Arc<Source>],
        contract: Option<&Contract>,
    ) -> Result<RuleSet, LoadErrors> {
        let mut errors: Vec<Error> = problems.into_iter().map(|p| p.error).collect();
        // A stage without a pack is reported only when nothing else was: a file that does not
        // parse, a pack whose stage is misspelt, also leave a stage without its pack, the same
        // mistake, not another.
        let other_problems = !errors.is_empty();
        // A set is used whole (it replaces the built-in rules), so a declared table that no file
        // defines would fail every render later: refuse the set now, while a caller can still
        // keep its last good one. (Lint, which reads parts of a set, does not ask for this.)
        // Only when the contract asks: fixtures load a single table.
        if let Some(contract) = contract.filter(|c| c.requires_complete(|t| set.table(t).is_some()))
        {
            let place = common_dir(sources);
            // A file emptied (a ConfigMap key cleared, a truncated write) drops its packs and
            // tables; a stage no pack runs in lost its file: the set is not what was meant.
            for source in sources {
                if !crate::lint::has_document(&source.text) {
                    errors.push(Error::Contract {
                        violation: crate::error::ContractViolation::EmptyFile,
                        file: source.name.clone(),
                        pos: None,
                        rule: None,
                        message: "the rule file has no document, so it would load nothing and drop whatever it held; the set is refused: restore the file, or delete it".to_string(),
                    });
                }
            }
            for stage in contract.stages().iter().filter(|_| !other_problems) {
                if !set
                    .packs
                    .iter()
                    .any(|p| p.stage() == Some(stage.name.as_str()))
                {
                    errors.push(Error::Contract {
                        violation: crate::error::ContractViolation::EmptyStage,
                        file: place.clone(),
                        pos: None,
                        rule: None,
                        message: format!(
                            "no rule file defines a pack of stage {:?} ({}); the pipeline runs it, so the set is refused (a deleted or emptied file?)",
                            stage.name, stage.description
                        ),
                    });
                }
            }
            for t in contract.tables() {
                if set.table(&t.name).is_none() {
                    errors.push(Error::Contract {
                        violation: crate::error::ContractViolation::MissingTable,
                        file: place.clone(),
                        pos: None,
                        rule: None,
                        message: format!(
                            "no rule file defines table {:?} ({}); the pipeline renders it, so the set is refused",
                            t.name, t.description
                        ),
                    });
                }
            }
        }
        if errors.is_empty() {
            return Ok(set);
        }
        // File order, then line and column (a stable sort keeps the order of equal positions).
        let order = |e: &Error| {
            let (file, pos) = e.location().unwrap_or(("", None));
            (
                sources
                    .iter()
                    .position(|s| s.name == file)
                    .unwrap_or(usize::MAX),
                pos.map(|p| (p.line, p.column)),
            )
        };
        errors.sort_by_key(order);
        Err(LoadErrors::new(errors))
    }

    /// Loads what it can and returns every problem, in file order: a bad document does not stop
    /// the next one, nor a bad rule the next rule. (Within one rule, the first problem is kept.)
    pub(crate) fn load_collecting(
        sources: &[Arc<Source>],
        contract: Option<&Contract>,
    ) -> (RuleSet, Vec<Problem>) {
        RuleSet::load_inputs(
            sources.iter().cloned().map(LoadInput::Text).collect(),
            contract,
            Checks::All,
        )
    }

    /// [`RuleSet::load_collecting`] of sources to parse or already parsed.
    fn load_inputs(
        inputs: Vec<LoadInput>,
        contract: Option<&Contract>,
        checks: Checks,
    ) -> (RuleSet, Vec<Problem>) {
        let mut set = RuleSet::default();
        let mut problems = Vec::new();
        // rule id → where it was first defined
        let mut rule_ids: HashMap<String, String> = HashMap::new();
        // kind/name → where it was first defined
        let mut names: HashMap<String, String> = HashMap::new();
        let defined_at = |doc: &Document| {
            let at = FieldPath::root().key("metadata").key("name");
            match doc.spans.lookup(&at) {
                Some(pos) => format!("{}:{pos}", doc.source.name),
                None => doc.source.name.clone(),
            }
        };
        // Parsing and compiling is most of the cost of a load: each file on its own thread
        // (rayon's pool), then the results are assembled in file and document order, so the
        // problems read the same as a sequential load.
        let compiled: Vec<Result<Vec<CompiledDocument>, Problem>> = inputs
            .into_par_iter()
            .map(|input| {
                let (source, prepared) = match input {
                    LoadInput::Text(source) => (source, None),
                    LoadInput::Prepared(source, Prepared::Documents(docs)) => (source, Some(docs)),
                    LoadInput::Prepared(source, Prepared::Json(json)) => {
                        let docs = serde_json::from_str::<Vec<PreparedDocument>>(&json).ok();
                        (source, docs)
                    }
                };
                let docs = match prepared {
                    Some(docs) => docs
                        .into_iter()
                        .map(|d| d.into_document(source.clone()))
                        .collect(),
                    None => crate::source::parse_rule_file(&source).map_err(|error| Problem {
                        kind: ProblemKind::Syntax,
                        error,
                    })?,
                };
                Ok(docs
                    .into_iter()
                    .map(|doc| compile_document(doc, contract, checks))
                    .collect())
            })
            .collect();
        for source in compiled {
            let docs = match source {
                Ok(d) => d,
                Err(p) => {
                    problems.push(p);
                    continue;
                }
            };
            for (loaded, doc_problems) in docs {
                problems.extend(doc_problems);
                match loaded {
                    Loaded::Nothing => {}
                    // Trusted: its name and rule ids were checked with the rest.
                    Loaded::Deferred(doc) => set.packs.push(PackSlot::deferred(*doc)),
                    Loaded::Pack(doc, pack) => {
                        if let Some(first) = names.get(&format!("pack/{}", pack.name)).cloned() {
                            problems.push(problem(
                                ProblemKind::Duplicate,
                                &doc,
                                "metadata.name",
                                None,
                                format!(
                                    "duplicate pack name {:?} (first defined at {first})",
                                    pack.name
                                ),
                            ));
                        } else {
                            names.insert(format!("pack/{}", pack.name), defined_at(&doc));
                        }
                        for (i, r) in pack.rules.iter().enumerate() {
                            let here = format!("{}:{}", doc.source.name, r.pos);
                            match rule_ids.get(&r.id) {
                                Some(first) => problems.push(problem(
                                    ProblemKind::Duplicate,
                                    &doc,
                                    &format!("rules[{i}].id"),
                                    Some(&r.id),
                                    format!("duplicate rule id (first defined at {first})"),
                                )),
                                None => {
                                    rule_ids.insert(r.id.clone(), here);
                                }
                            }
                        }
                        set.packs.push(PackSlot::Compiled(Arc::new(*pack)));
                    }
                    Loaded::Table(doc, table) => {
                        if let Some(first) = names.get(&format!("table/{}", table.name)).cloned() {
                            problems.push(problem(
                                ProblemKind::Duplicate,
                                &doc,
                                "metadata.name",
                                None,
                                format!(
                                    "duplicate table name {:?} (first defined at {first})",
                                    table.name
                                ),
                            ));
                        } else {
                            names.insert(format!("table/{}", table.name), defined_at(&doc));
                        }
                        set.tables.push(Arc::new(*table));
                    }
                    Loaded::Document(doc, other, found) => {
                        let name = doc
                            .value
                            .pointer("/metadata/name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string();
                        if let Some(first) = names.get(&format!("{other}/{name}")).cloned() {
                            problems.push(problem(
                                ProblemKind::Duplicate,
                                &doc,
                                "metadata.name",
                                None,
                                format!(
                                    "duplicate {other} name {name:?} (first defined at {first})"
                                ),
                            ));
                        } else {
                            names.insert(format!("{other}/{name}"), defined_at(&doc));
                        }
                        problems.extend(found);
                        set.documents.push(Arc::new(*doc));
                    }
                }
            }
        }
        (set, problems)
    }

    /// Loads every `*.yaml` / `*.yml` file under `dir` as [`RuleSet::read_dir`] finds them,
    /// without a contract.
    ///
    /// # Errors
    /// Every error of [`RuleSet::read_dir`] and of [`RuleSet::load`], together.
    pub fn load_dir(dir: &Path) -> Result<RuleSet, LoadErrors> {
        RuleSet::load_dir_with(dir, None)
    }

    /// [`RuleSet::load_dir`] with a contract.
    ///
    /// # Errors
    /// Every file that cannot be read and every problem of the files that can, together.
    pub fn load_dir_with(dir: &Path, contract: Option<&Contract>) -> Result<RuleSet, LoadErrors> {
        let (sources, mut errors) = RuleSet::read_dir_collecting(dir);
        match RuleSet::load(&sources, contract) {
            Ok(set) if errors.is_empty() => Ok(set),
            Ok(_) => Err(LoadErrors::new(errors)),
            Err(load) => {
                errors.extend(load.errors);
                Err(LoadErrors::new(errors))
            }
        }
    }

    /// Reads the rule files of `dir` (every `*.yaml` / `*.yml` below it, in path order, with
    /// `tests/` directories and hidden entries skipped; a mounted ConfigMap's files once each,
    /// see [`crate::walk_files`]), without loading them (for [`crate::lint`]).
    ///
    /// # Errors
    /// Every entry that cannot be read ([`Error::Io`], [`Error::SymlinkLoop`]); [`Error::Pack`]
    /// when the directory holds no rule file.
    pub fn read_dir(dir: &Path) -> Result<Vec<Arc<Source>>, LoadErrors> {
        let (sources, errors) = RuleSet::read_dir_collecting(dir);
        if errors.is_empty() {
            Ok(sources)
        } else {
            Err(LoadErrors::new(errors))
        }
    }

    /// [`RuleSet::read_dir`] that returns the files it could read beside the errors.
    pub fn read_dir_collecting(dir: &Path) -> (Vec<Arc<Source>>, Vec<Error>) {
        let (sources, mut errors) = read_files(dir, &WalkOptions::RULES);
        if sources.is_empty() && errors.is_empty() {
            errors.push(Error::Pack {
                file: dir.display().to_string(),
                pos: None,
                rule: None,
                message: "no rule files (*.yaml) found".to_string(),
            });
        }
        (sources, errors)
    }

    /// The documents of `kind` (a kind the contract declared), in load order.
    pub fn documents_of<'a>(
        &'a self,
        kind: &'a str,
    ) -> impl Iterator<Item = &'a Arc<Document>> + 'a {
        self.documents
            .iter()
            .filter(move |d| d.value.get("kind").and_then(Value::as_str) == Some(kind))
    }

    /// The packs whose `stage` equals `stage`, in load order (compiled now, if the set was
    /// loaded trusted and they were not yet).
    pub fn stage<'a>(&'a self, stage: &'a str) -> impl Iterator<Item = &'a Arc<CompiledPack>> + 'a {
        self.packs
            .iter()
            .filter(move |p| p.stage() == Some(stage))
            .map(PackSlot::get)
    }

    /// The packs whose `match.resources` take `doc` ([`CompiledPack::matches_resource`]), in
    /// load order; compiles those of them a set loaded trusted has not compiled yet.
    pub fn packs_for<'a>(
        &'a self,
        doc: &'a Value,
    ) -> impl Iterator<Item = &'a Arc<CompiledPack>> + 'a {
        self.packs
            .iter()
            .filter(move |p| p.matches_resource(doc))
            .map(PackSlot::get)
    }

    /// Every rule pack, in load order (files sorted by path, documents in order); compiles
    /// those a set loaded trusted has not compiled yet.
    pub fn packs(&self) -> &[Arc<CompiledPack>] {
        self.all_packs
            .get_or_init(|| self.packs.iter().map(|p| p.get().clone()).collect())
    }

    /// The table named `name`.
    pub fn table(&self, name: &str) -> Option<&Arc<Table>> {
        self.tables.iter().find(|t| t.name == name)
    }

    /// Every rule with its pack, in load order.
    pub fn rules(&self) -> impl Iterator<Item = (&CompiledPack, &Rule)> {
        self.packs()
            .iter()
            .flat_map(|p| p.rules.iter().map(move |r| (p.as_ref(), r)))
    }

    /// The rule with id `id`, with its pack.
    pub fn rule(&self, id: &str) -> Option<(&CompiledPack, &Rule)> {
        self.rules().find(|(_, r)| r.id == id)
    }
}

/// The `variables.x` reads of a pack that no variable binds where they are read.
fn undefined_variables(doc: &Document, pack: &CompiledPack, out: &mut Vec<Problem>) {
    let pack_vars = &pack.declared_vars;
    for site in pack_sites(pack) {
        let rule = |k: usize| pack.rules.iter().find(|r| r.index == k);
        let rule_vars = |k: usize| -> Vec<&String> {
            rule(k)
                .map(|r| r.variables.iter().map(|(n, _)| n).collect())
                .unwrap_or_default()
        };
        let visible: Vec<&String> = match &site.owner {
            Owner::Pack | Owner::Fragment(_) | Owner::RuleForEach(_) | Owner::Entry(_) => {
                pack_vars.iter().collect()
            }
            Owner::PackVar(i) => pack_vars.iter().take(*i).collect(),
            Owner::RuleVar(k, j) => pack_vars
                .iter()
                .chain(rule_vars(*k).into_iter().take(*j))
                .collect(),
            Owner::Rule(k) => pack_vars.iter().chain(rule_vars(*k)).collect(),
        };
        let id = match &site.owner {
            Owner::RuleForEach(k) | Owner::RuleVar(k, _) | Owner::Rule(k) => {
                rule(*k).map(|r| r.id.as_str())
            }
            _ => None,
        };
        for name in reads(site.expr).variables {
            if !visible.iter().any(|v| **v == name) {
                out.push(undefined(doc, &site.path, id, &name));
            }
        }
        // The rule's forEach item and index are bound for its own expressions and variables.
        let item: Vec<&str> = match &site.owner {
            Owner::Rule(k) | Owner::RuleVar(k, _) => rule(*k)
                .and_then(|r| r.for_each.as_ref())
                .map(|(_, item, index)| {
                    std::iter::once(item.as_str())
                        .chain(index.as_deref())
                        .collect()
                })
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        unknown_identifiers(doc, &site, id, PACK_NAMES, &item, out);
        unknown_calls(doc, &site, id, PACK_NAMES, &item, out);
        unknown_fragment_reads(doc, &site, id, &pack.fragments, out);
        function_calls(doc, &site, id, pack, out);
    }
}

/// Calls of our functions of a fixed number of operands with another number, and
/// `fieldTypeErrors` tables written as literals (in the call, or as the pack variable it reads)
/// that are not tables: both would fail on every document that reaches them.
fn function_calls(
    doc: &Document,
    site: &crate::sites::Site<'_>,
    id: Option<&str>,
    pack: &CompiledPack,
    out: &mut Vec<Problem>,
) {
    fn walk(e: &cel::IdedExpr, found: &mut Vec<String>, pack: &CompiledPack) {
        if let cel::common::ast::Expr::Call(c) = &e.expr {
            let n = c.args.len() + usize::from(c.target.is_some());
            if let Some((name, want, operands)) = crate::expr::FIXED_ARITIES
                .iter()
                .find(|(f, _, _)| *f == c.func_name)
            {
                if n != *want {
                    found.push(format!(
                        "{name}{operands} takes {want} operand{}, given {n}",
                        if *want == 1 { "" } else { "s" }
                    ));
                } else if *name == crate::expr::FIELD_TYPE_ERRORS
                    && c.target.is_none()
                    && let Some(table) = c.args.get(1)
                {
                    let (literal, from) = match &table.expr {
                        cel::common::ast::Expr::Ident(v) => match v
                            .strip_prefix(crate::expr::VARIABLE_PREFIX)
                            .and_then(|v| pack.variables.iter().find(|(n, _)| n == v))
                        {
                            Some((n, x)) => (
                                crate::expr::literal_json(x.ast()),
                                format!(" (variables.{n})"),
                            ),
                            None => (None, String::new()),
                        },
                        _ => (crate::expr::literal_json(table), String::new()),
                    };
                    if let Some(Err(e)) = literal.map(|t| crate::expr::check_field_type_table(&t)) {
                        found.push(format!("{name}{from}: {e}"));
                    }
                }
            }
        }
        crate::cost::children(e, &mut |c| walk(c, found, pack));
    }
    let mut found = Vec::new();
    walk(site.expr.ast(), &mut found, pack);
    for message in found {
        out.push(problem_at(
            ProblemKind::Compile,
            doc,
            &site.path,
            id,
            message,
        ));
    }
}

/// Each `fragments.x` read (`has(fragments.x)`, `'x' in fragments` too) of `site` that names
/// no fragment of the file: a typo that would fail every evaluation reaching it, or switch off
/// a `has()` branch for good.
fn unknown_fragment_reads(
    doc: &Document,
    site: &crate::sites::Site<'_>,
    id: Option<&str>,
    fragments: &[(String, Template)],
    out: &mut Vec<Problem>,
) {
    for name in reads(site.expr).fragments {
        if fragments.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let names: Vec<&str> = fragments.iter().map(|(n, _)| n.as_str()).collect();
        out.push(undefined_name(
            doc,
            &site.path,
            id,
            format!(
                "fragments.{name} names no fragment of this file ({})",
                if names.is_empty() {
                    "it has none".to_string()
                } else {
                    format!("its fragments: {}", names.join(", "))
                }
            ),
        ));
    }
}

/// The names a pack's expressions are evaluated with (besides a rule's forEach item and index).
const PACK_NAMES: &[&str] = &[
    "object",
    "variables",
    "params",
    "fragments",
    crate::OBJECTS,
    crate::OBJECTS_BY_KIND,
];

/// The names a table's expressions are evaluated with (a `variables.x` read is reported by
/// itself: a table has none).
const TABLE_NAMES: &[&str] = &["params", "fragments"];

/// Each identifier `site` reads that nothing binds (`objct.metadata`, `nodeSelectr`): a typo
/// that would fail every evaluation that reaches it (and none that does not), reported when
/// the file loads instead.
fn unknown_identifiers(
    doc: &Document,
    site: &crate::sites::Site<'_>,
    id: Option<&str>,
    names: &[&str],
    item: &[&str],
    out: &mut Vec<Problem>,
) {
    for ident in crate::sites::free_value_identifiers(site.expr) {
        // `variables.x` reads are checked against the variables in scope, by name.
        if ident == "variables"
            || names.contains(&ident.as_str())
            || item.contains(&ident.as_str())
            || crate::sites::CEL_TYPES.contains(&ident.as_str())
        {
            continue;
        }
        let can: Vec<&str> = names.iter().copied().chain(item.iter().copied()).collect();
        out.push(undefined_name(
            doc,
            &site.path,
            id,
            format!(
                "{ident} is not defined here: the expression can read {} (and what its own comprehensions bind); a name must be one of them",
                can.join(", ")
            ),
        ));
    }
}

/// Each call of a function or method the interpreter does not know (`sizee(x)`,
/// `q.isBiggerThan(r)`), and each `ns.f(…)` whose `ns` is neither a function namespace nor a
/// name the expression can read (`sets.contains(…)`: the sets library is not available): every
/// evaluation that reached it would fail, even behind a `||` that hides it until then.
fn unknown_calls(
    doc: &Document,
    site: &crate::sites::Site<'_>,
    id: Option<&str>,
    names: &[&str],
    item: &[&str],
    out: &mut Vec<Problem>,
) {
    for call in site.expr.unknown_calls() {
        let message = match &call {
            crate::expr::UnknownCall::Function(_) => format!(
                "{} (the standard library, its strings, lists and optional extensions, and ours: see the rules documentation); the expression would fail wherever it reaches the call",
                call.text()
            ),
            crate::expr::UnknownCall::Qualified { target, .. } => {
                if names.contains(&target.as_str())
                    || item.contains(&target.as_str())
                    || target == "variables"
                {
                    continue;
                }
                format!(
                    "{}, and {target} is not a name the expression can read (the Kubernetes sets, URL, IP and semver libraries are not available)",
                    call.text()
                )
            }
        };
        out.push(problem_at(
            ProblemKind::Compile,
            doc,
            &site.path,
            id,
            message,
        ));
    }
}

/// A table has no variables: every `variables.x` read is undefined.
fn undefined_table_variables(doc: &Document, table: &Table, out: &mut Vec<Problem>) {
    for site in table_sites(table) {
        let id = table.owner_id(&site.owner);
        for name in reads(site.expr).variables {
            out.push(undefined(doc, &site.path, id, &name));
        }
        unknown_identifiers(doc, &site, id, TABLE_NAMES, &[], out);
        unknown_calls(doc, &site, id, TABLE_NAMES, &[], out);
        unknown_fragment_reads(doc, &site, id, &table.fragments, out);
    }
}

fn undefined(doc: &Document, path: &FieldPath, rule: Option<&str>, name: &str) -> Problem {
    undefined_name(
        doc,
        path,
        rule,
        format!(
            "variables.{name} is not defined here: no earlier pack or rule variable is \
             named {name:?}"
        ),
    )
}

/// An `undefined-variable` problem at `path` of `doc`, in `rule` when one is named.
fn undefined_name(
    doc: &Document,
    path: &FieldPath,
    rule: Option<&str>,
    message: String,
) -> Problem {
    problem_at(ProblemKind::UndefinedVariable, doc, path, rule, message)
}

/// The deepest directory holding every source (`.` when they share none), to name a whole set.
pub(crate) fn common_dir(sources: &[Arc<Source>]) -> String {
    let mut common: Option<Vec<&str>> = None;
    for s in sources {
        let parts: Vec<&str> = s.name.split('/').collect();
        let dir = parts.get(..parts.len().saturating_sub(1)).unwrap_or(&[]);
        common = Some(match common {
            None => dir.to_vec(),
            Some(c) => c
                .iter()
                .zip(dir)
                .take_while(|(a, b)| a == b)
                .map(|(a, _)| *a)
                .collect(),
        });
    }
    match common {
        Some(c) if !c.is_empty() => c.join("/"),
        _ => ".".to_string(),
    }
}

fn problem(
    kind: ProblemKind,
    doc: &Document,
    path: &str,
    rule: Option<&str>,
    message: String,
) -> Problem {
    match FieldPath::parse(path) {
        Ok(p) => problem_at(kind, doc, &p, rule, message),
        Err(_) => Problem {
            kind,
            error: Error::Pack {
                file: doc.source.name.clone(),
                pos: None,
                rule: rule.map(|r| Inside::in_doc(doc, r)),
                message,
            },
        },
    }
}

/// [`problem`] at a parsed field path (an expression's site).
fn problem_at(
    kind: ProblemKind,
    doc: &Document,
    path: &FieldPath,
    rule: Option<&str>,
    message: String,
) -> Problem {
    Problem {
        kind,
        error: Error::Pack {
            file: doc.source.name.clone(),
            pos: doc.spans.lookup(path),
            rule: rule.map(|r| Inside::in_doc(doc, r)),
            message,
        },
    }
}

/// Most unknown fields one document or rule reports (beyond, the first ones are reported).
const MAX_UNKNOWN_FIELDS: usize = 100;

/// Deserializes `value`, found at `base` in `doc` (`""` for the document itself), with every
/// problem's field path relative to the document. Each unknown field is a problem, and the read
/// goes on without it, so a file with several is reported whole; the value read without them is
/// returned (the set is refused anyway, but the rest of it is still checked). Any other problem
/// ends the read (`None`).
fn deserialize_at<T: DeserializeOwned>(
    doc: &Document,
    value: &Value,
    base: &str,
    problems: &mut Vec<Problem>,
) -> Option<T> {
    let mut stripped: Option<Value> = None;
    let mut unknown = 0;
    loop {
        let reading = stripped.as_ref().unwrap_or(value);
        let e = match crate::read_mapping(reading) {
            Ok(t) => return Some(t),
            Err(e) => e,
        };
        let message = crate::mapping::plain_type_words(&e.inner().to_string());
        // serde's wording for `deny_unknown_fields` ("unknown field `x`, expected …").
        let is_unknown = message.starts_with("unknown field");
        if unknown > 0 && message.starts_with("missing field") {
            // Most often the unknown field already reported is the missing one misspelt.
            return None;
        }
        let rel = e.path().to_string();
        let path = match (base, rel.as_str()) {
            (b, ".") => b.to_string(),
            ("", r) => r.to_string(),
            (b, r) if r.starts_with('[') => format!("{b}{r}"),
            (b, r) => format!("{b}.{r}"),
        };
        let rule = rule_id_at(doc, &path);
        // Point at the field's name: for an unknown field that is the thing to fix.
        let pos = FieldPath::parse(&path)
            .ok()
            .and_then(|p| doc.spans.lookup_key(&p));
        // A value of the wrong type names its field (within the rule, which the message names).
        let within_rule = match path.strip_prefix("rules[") {
            Some(rest) => rest.split_once(']').map_or("", |(_, r)| r),
            None => path.as_str(),
        };
        let field = within_rule.strip_prefix('.').unwrap_or(within_rule);
        let message = if is_unknown || field.is_empty() {
            message
        } else {
            format!("{field}: {message}")
        };
        problems.push(Problem {
            kind: if is_unknown {
                ProblemKind::UnknownField
            } else {
                ProblemKind::Shape
            },
            error: Error::Pack {
                file: doc.source.name.clone(),
                pos,
                rule: rule.map(Inside::Rule),
                message,
            },
        });
        unknown += 1;
        let removed = is_unknown
            && unknown < MAX_UNKNOWN_FIELDS
            && crate::remove_entry_at(stripped.get_or_insert_with(|| value.clone()), e.path());
        if !removed {
            return None;
        }
    }
}

fn deserialize_file(doc: &Document, problems: &mut Vec<Problem>) -> Option<PackFile> {
    let file: PackFile = deserialize_at(doc, &doc.value, "", problems)?;
    if file.api_version != RULES_API_VERSION {
        problems.push(problem(
            ProblemKind::Shape,
            doc,
            "apiVersion",
            None,
            format!(
                "apiVersion must be {RULES_API_VERSION}, got {:?}",
                file.api_version
            ),
        ));
        return None;
    }
    Some(file)
}

/// For an error path `rules[3].validate…`, the id of rule 3.
fn rule_id_at(doc: &Document, path: &str) -> Option<String> {
    let rest = path.strip_prefix("rules[")?;
    let idx: usize = rest.split(']').next()?.parse().ok()?;
    doc.value
        .get("rules")?
        .get(idx)?
        .get("id")?
        .as_str()
        .map(str::to_string)
}

fn compile_expr(
    doc: &Document,
    path: &str,
    rule: Option<&str>,
    text: &str,
) -> Result<Expr, Problem> {
    Expr::compile(text).map_err(|e| {
        let mut p = problem(
            ProblemKind::Compile,
            doc,
            path,
            rule,
            format!("CEL does not compile: {e}"),
        );
        // At the character the parser stopped at, when the scalar's text can be followed to it
        // (a multi-line expression's error is not on the line its key is).
        if let (Some(at), Error::Pack { pos: Some(pos), .. }) = (e.at, &mut p.error)
            && let Some(exact) = doc.source.pos_in_scalar(*pos, text, at)
        {
            *pos = exact;
        }
        p
    })
}

fn compile_template(
    doc: &Document,
    path: &str,
    rule: Option<&str>,
    v: &Value,
) -> Result<Template, Problem> {
    Template::compile_located(v).map_err(|(segments, message)| {
        // At the node that does not compile, when the path to it reads back.
        let at = FieldPath::parse(path)
            .ok()
            .map(|mut p| {
                for s in segments {
                    p.push(s);
                }
                p.to_string()
            })
            .unwrap_or_else(|| path.to_string());
        problem(
            ProblemKind::Compile,
            doc,
            &at,
            rule,
            format!("template: {message}"),
        )
    })
}

fn compile_field_path(
    doc: &Document,
    path: &str,
    rule: Option<&str>,
    text: &str,
) -> Result<FieldPath, Problem> {
    FieldPath::parse(text).map_err(|e| problem(ProblemKind::Compile, doc, path, rule, e.message))
}

/// Compiles `vars` (at `base` in the file); every variable that does not compile is a problem.
fn compile_vars(
    doc: &Document,
    base: &str,
    rule: Option<&str>,
    vars: &[VarSpec],
    problems: &mut Vec<Problem>,
) -> (Vec<(String, Expr)>, Vec<usize>) {
    let mut out = Vec::with_capacity(vars.len());
    let mut at = Vec::with_capacity(vars.len());
    for (i, v) in vars.iter().enumerate() {
        match compile_expr(doc, &format!("{base}[{i}].expression"), rule, &v.expression) {
            Ok(e) => {
                out.push((v.name.clone(), e));
                at.push(i);
            }
            Err(p) => problems.push(p),
        }
    }
    (out, at)
}

fn compile_fragments(
    doc: &Document,
    frags: &BTreeMap<String, Value>,
    checks: Checks,
    problems: &mut Vec<Problem>,
) -> Vec<(String, Template)> {
    let mut compiled = BTreeMap::new();
    for (name, v) in frags {
        let path = FieldPath::root()
            .key("fragments")
            .key(name.clone())
            .to_string();
        match compile_template(doc, &path, None, v) {
            Ok(t) => {
                compiled.insert(name.clone(), t);
            }
            Err(p) => problems.push(p),
        }
    }
    // Each fragment's `{$fragment: name}` must name a fragment of the file, reported where it
    // is written.
    for (name, raw) in frags.iter().filter(|_| checks == Checks::All) {
        let at = format!("fragments[{}]", crate::quote::go_quote(name));
        unknown_fragment_refs(doc, raw, &at, None, frags, problems);
    }
    order_fragments(doc, compiled, problems)
}

/// Each `{$fragment: name}` written in `raw` (found at field path `path`) that names no
/// fragment of `known`, a problem where it is written.
fn unknown_fragment_refs(
    doc: &Document,
    raw: &Value,
    path: &str,
    rule: Option<&str>,
    known: &BTreeMap<String, Value>,
    problems: &mut Vec<Problem>,
) {
    let mut written = Vec::new();
    fragment_ref_paths(raw, path, &mut written);
    for (name, at) in written.into_iter().filter(|(n, _)| !known.contains_key(n)) {
        problems.push(problem(
            ProblemKind::Shape,
            doc,
            &at,
            rule,
            format!("{{$fragment: {name}}} names no fragment of this file"),
        ));
    }
}

/// The fragments in the order they render: each after those it inserts (`{$fragment: x}`)
/// or reads (`fragments.x` in CEL; one that reads `fragments` whole after those before it by
/// name that do not), otherwise by name. A fragment in a cycle is a problem, and left out.
fn order_fragments(
    doc: &Document,
    compiled: BTreeMap<String, Template>,
    problems: &mut Vec<Problem>,
) -> Vec<(String, Template)> {
    let names: BTreeSet<String> = compiled.keys().cloned().collect();
    let mut whole = BTreeSet::new();
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, t) in &compiled {
        let mut refs = Vec::new();
        t.fragment_refs(&mut refs);
        let mut d: BTreeSet<String> = refs.into_iter().filter(|r| names.contains(r)).collect();
        t.for_each_expr(&mut |e: &Expr| match e.fragment_reads() {
            crate::expr::FieldReads::All => {
                whole.insert(name.clone());
            }
            crate::expr::FieldReads::Fields(f) => {
                d.extend(f.iter().filter(|r| names.contains(*r)).cloned());
            }
        });
        deps.insert(name.clone(), d);
    }
    // One that reads `fragments` whole sees those before it by name (which it cannot name).
    for name in &whole {
        let before = names
            .iter()
            .filter(|n| *n < name && !whole.contains(*n))
            .cloned();
        deps.entry(name.clone()).or_default().extend(before);
    }
    let mut compiled = compiled;
    let mut out = Vec::with_capacity(compiled.len());
    let mut done = BTreeSet::new();
    loop {
        let ready: Vec<String> = deps
            .iter()
            .filter(|(n, d)| !done.contains(*n) && d.iter().all(|x| done.contains(x)))
            .map(|(n, _)| n.clone())
            .collect();
        if ready.is_empty() {
            break;
        }
        for n in ready {
            if let Some(t) = compiled.remove(&n) {
                out.push((n.clone(), t));
            }
            done.insert(n);
        }
    }
    // Left: the fragments in a cycle, and those that use one.
    let waits = |n: &str| -> Vec<&str> {
        deps.get(n)
            .into_iter()
            .flatten()
            .filter(|d| !done.contains(*d))
            .map(String::as_str)
            .collect()
    };
    let in_cycle = |n: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = waits(n);
        while let Some(x) = todo.pop() {
            if x == n {
                return true;
            }
            if seen.insert(x) {
                todo.extend(waits(x));
            }
        }
        false
    };
    for (name, _) in compiled {
        let message = if waits(&name) == [name.as_str()] {
            format!("fragment {name} inserts or reads itself: a fragment cannot contain itself")
        } else if in_cycle(&name) {
            format!(
                "fragment {name} uses {}, which use it in turn (a cycle): a fragment cannot contain itself, directly or through others",
                waits(&name).join(", ")
            )
        } else {
            format!(
                "fragment {name} uses {}, in a cycle of fragments that contain themselves",
                waits(&name).join(", ")
            )
        };
        problems.push(problem(
            ProblemKind::Shape,
            doc,
            &format!("fragments[{}]", crate::quote::go_quote(&name)),
            None,
            message,
        ));
    }
    out
}

/// A rule file and, when already parsed, its documents: the input of
/// [`RuleSet::load_prepared`]. `None` loads the file by parsing its text.
pub type PreparedSource = (Arc<Source>, Option<Prepared>);

/// The documents of one rule file, parsed before the load (by a build script, for instance),
/// as [`prepare_rule_file`](crate::prepare_rule_file) returns them for that file.
#[derive(Debug, Clone)]
pub enum Prepared {
    /// The documents.
    Documents(Vec<PreparedDocument>),
    /// The documents serialized as JSON (a JSON array of [`PreparedDocument`], as
    /// `serde_json::to_string` writes the `Vec`), read back in the load's parallel pass. Text
    /// that does not read as that is ignored: the file's text is parsed instead.
    Json(Cow<'static, str>),
}

/// One rule file to load: its text to parse, or its documents already parsed.
/// Which checks a load runs: all of them, or only what compiling needs
/// ([`RuleSet::load_prepared_trusted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Checks {
    All,
    CompileOnly,
}

enum LoadInput {
    Text(Arc<Source>),
    Prepared(Arc<Source>, Prepared),
}

/// One document of a rule file, compiled (see [`RuleSet::load_collecting`]).
enum Loaded {
    /// Refused (its problems say why).
    Nothing,
    Pack(Box<Document>, Box<CompiledPack>),
    /// A pack of a trusted set, compiled when first used.
    Deferred(Box<Document>),
    Table(Box<Document>, Box<Table>),
    /// A document of a kind the contract declares, with the problems its check found.
    Document(Box<Document>, String, Vec<Problem>),
}

/// Compiles one document of a rule file; the problems are its own (duplicates across documents
/// are found when the set is assembled).
/// One rule-file document compiled, with the problems found in it.
type CompiledDocument = (Loaded, Vec<Problem>);

fn compile_document(
    doc: Document,
    contract: Option<&Contract>,
    checks: Checks,
) -> CompiledDocument {
    let mut problems = Vec::new();
    let kind = doc.value.get("kind").and_then(Value::as_str).unwrap_or("");
    let all = checks == Checks::All;
    let loaded = match kind {
        "RulePack" if !all => Loaded::Deferred(Box::new(doc)),
        "RulePack" => match compile_pack(&doc, checks, &mut problems) {
            None => Loaded::Nothing,
            Some(mut pack) => {
                pack.complete = problems.is_empty();
                if all {
                    undefined_variables(&doc, &pack, &mut problems);
                    if let Some(c) = contract {
                        c.check_pack(&doc, &pack, &mut problems);
                    }
                }
                Loaded::Pack(Box::new(doc), Box::new(pack))
            }
        },
        "Table" => match compile_table(&doc, checks, &mut problems) {
            None => Loaded::Nothing,
            Some(mut table) => {
                table.complete = problems.is_empty();
                if all {
                    undefined_table_variables(&doc, &table, &mut problems);
                }
                if let Some(c) = contract {
                    if all {
                        c.check_table(&doc, &table, &mut problems);
                    }
                    table.schema = c.row_validator(&table.name);
                }
                Loaded::Table(Box::new(doc), Box::new(table))
            }
        },
        other => match contract.and_then(|c| c.check_document(&doc, other, all)) {
            Some(found) => {
                let other = other.to_string();
                Loaded::Document(Box::new(doc), other, found)
            }
            None => {
                let mut kinds = vec!["RulePack".to_string(), "Table".to_string()];
                if let Some(c) = contract {
                    kinds.extend(c.kinds().iter().map(|k| k.kind.clone()));
                }
                let last = kinds.pop().unwrap_or_default();
                problems.push(problem(
                    ProblemKind::Shape,
                    &doc,
                    "kind",
                    None,
                    format!("kind must be {} or {last}, got {other:?}", kinds.join(", ")),
                ));
                Loaded::Nothing
            }
        },
    };
    (loaded, problems)
}

/// Compiles a `RulePack` document. Problems go to `problems`; the pack is returned (with the
/// parts that compiled) whenever its top level could be read.
fn compile_pack(
    doc: &Document,
    checks: Checks,
    problems: &mut Vec<Problem>,
) -> Option<CompiledPack> {
    let file = deserialize_file(doc, problems);
    let raw_rules: &[Value] = match &file {
        Some(f) => &f.rules,
        // The top level is broken; its rules may still be checked.
        None => doc
            .value
            .get("rules")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice),
    };
    let mut matcher = Matcher::default();
    if let Some(f) = &file {
        if !f.entries.is_empty() {
            problems.push(problem(
                ProblemKind::Shape,
                doc,
                "entries",
                None,
                "a RulePack has rules, not entries".into(),
            ));
        }
        if let Some(m) = &f.matcher {
            let (conditions, condition_at) = compile_vars(
                doc,
                "match.matchConditions",
                None,
                &m.match_conditions,
                problems,
            );
            let condition_lines = condition_at
                .iter()
                .map(|&i| {
                    let path = FieldPath::root()
                        .key("match")
                        .key("matchConditions")
                        .index(i)
                        .key("expression");
                    doc.spans.lookup(&path).map_or(0, |p| p.line)
                })
                .collect();
            matcher = Matcher {
                condition_lines,
                resources: m
                    .resources
                    .iter()
                    .map(|r| (r.api_version.clone(), r.kind.clone()))
                    .collect(),
                conditions,
                condition_at,
            };
        }
    }
    let mut rules = Vec::with_capacity(raw_rules.len());
    for (i, raw) in raw_rules.iter().enumerate() {
        let Some(spec) = deserialize_at::<RuleSpec>(doc, raw, &format!("rules[{i}]"), problems)
        else {
            continue;
        };
        match compile_rule(doc, i, &spec, raw) {
            Ok(r) => rules.push(r),
            Err(p) => problems.push(p),
        }
    }
    let file = file?;
    // A mutation's `{$fragment: name}` must name a fragment of the pack.
    for r in rules.iter().filter(|_| checks == Checks::All) {
        for (j, m) in r.mutate_source.iter().enumerate() {
            let at = format!("rules[{}].mutate[{j}]", r.index);
            unknown_fragment_refs(doc, m, &at, Some(&r.id), &file.fragments, problems);
        }
    }
    let (variables, variable_at) = compile_vars(doc, "variables", None, &file.variables, problems);
    Some(CompiledPack {
        name: file.metadata.name,
        description: file.metadata.description,
        stage: file.stage,
        source: doc.source.clone(),
        matcher,
        variables,
        var_bindings: std::sync::OnceLock::new(),
        variable_at,
        declared_vars: file.variables.iter().map(|v| v.name.clone()).collect(),
        fragments: compile_fragments(doc, &file.fragments, checks, problems),
        rules,
        spans: Arc::new(doc.spans.clone()),
        complete: true,
        touches: Arc::default(),
        reads_objects: std::sync::OnceLock::new(),
        broken: None,
    })
}

/// The problem of a `validate` block that sets both `a` and `b`, one of which it may set.
fn exclusive(doc: &Document, base: &str, id: Option<&str>, a: &str, b: &str) -> Problem {
    problem(
        ProblemKind::Shape,
        doc,
        &format!("{base}.validate"),
        id,
        format!("{a} and {b} are mutually exclusive"),
    )
}

fn compile_validate(
    doc: &Document,
    base: &str,
    id: Option<&str>,
    rule_id: &str,
    v: &ValidateSpec,
) -> Result<Validate, Problem> {
    let message = match (&v.message, &v.message_expression) {
        (Some(_), Some(_)) => return Err(exclusive(doc, base, id, "message", "messageExpression")),
        (Some(m), None) => Message::Static(m.clone()),
        (None, Some(e)) => Message::Expr(compile_expr(
            doc,
            &format!("{base}.validate.messageExpression"),
            id,
            e,
        )?),
        (None, None) => Message::Static(format!("failed rule {rule_id}")),
    };
    let field_path = match (&v.field_path, &v.field_path_expression) {
        (Some(_), Some(_)) => {
            return Err(exclusive(doc, base, id, "fieldPath", "fieldPathExpression"));
        }
        (Some(p), None) => Some(FieldPathSpec::Static(compile_field_path(
            doc,
            &format!("{base}.validate.fieldPath"),
            id,
            p,
        )?)),
        (None, Some(e)) => Some(FieldPathSpec::Expr(compile_expr(
            doc,
            &format!("{base}.validate.fieldPathExpression"),
            id,
            e,
        )?)),
        (None, None) => None,
    };
    let at = match (v.at.as_deref(), &v.at_expression) {
        (Some(_), Some(_)) => return Err(exclusive(doc, base, id, "at", "atExpression")),
        (Some("key"), None) => Some(AtSpec::Key),
        (Some("value") | None, None) => None,
        (Some(other), None) => {
            return Err(problem(
                ProblemKind::Shape,
                doc,
                &format!("{base}.validate.at"),
                id,
                format!(
                    "at must be key or value, got {}",
                    crate::quote::go_quote(other)
                ),
            ));
        }
        (None, Some(e)) => Some(AtSpec::Expr(compile_expr(
            doc,
            &format!("{base}.validate.atExpression"),
            id,
            e,
        )?)),
    };
    Ok(Validate {
        expression: compile_expr(
            doc,
            &format!("{base}.validate.expression"),
            id,
            &v.expression,
        )?,
        message,
        field_path,
        at,
    })
}

fn compile_mutation(
    doc: &Document,
    mbase: &str,
    id: Option<&str>,
    m: &MutationSpec,
) -> Result<Mutation, Problem> {
    let path = |p: &str, key: &str| compile_field_path(doc, &format!("{mbase}.{key}.path"), id, p);
    Ok(match m {
        MutationSpec::Merge { path: p, value } => Mutation::Merge {
            path: path(p, "merge")?,
            value: compile_template(doc, &format!("{mbase}.merge.value"), id, value)?,
        },
        MutationSpec::Prepend { path: p, values } => Mutation::Insert {
            path: path(p, "prepend")?,
            values: compile_template(doc, &format!("{mbase}.prepend.values"), id, values)?,
            end: End::Front,
        },
        MutationSpec::Append { path: p, values } => Mutation::Insert {
            path: path(p, "append")?,
            values: compile_template(doc, &format!("{mbase}.append.values"), id, values)?,
            end: End::Back,
        },
        MutationSpec::JsonPatch(ops) => Mutation::JsonPatch(compile_template(
            doc,
            &format!("{mbase}.jsonPatch"),
            id,
            ops,
        )?),
    })
}

/// Compiles rule `i` (`raw` as written); the first problem of the rule is returned.
fn compile_rule(doc: &Document, i: usize, r: &RuleSpec, raw: &Value) -> Result<Rule, Problem> {
    let base = format!("rules[{i}]");
    let id = Some(r.id.as_str());
    let pos = FieldPath::parse(&base)
        .ok()
        .and_then(|p| doc.spans.lookup(&p))
        .unwrap_or(Pos { line: 0, column: 0 });
    // Findings, `rules explain` and suites name the rule by its id.
    if r.id.trim().is_empty() {
        return Err(problem(
            ProblemKind::Shape,
            doc,
            &format!("{base}.id"),
            None,
            "a rule needs a non-empty id: findings, rules explain and test suites name it".into(),
        ));
    }
    if r.validate.is_none() && r.mutate.is_empty() {
        return Err(problem(
            ProblemKind::Shape,
            doc,
            &base,
            id,
            "a rule needs validate or mutate".into(),
        ));
    }
    let validate = r
        .validate
        .as_ref()
        .map(|v| compile_validate(doc, &base, id, &r.id, v))
        .transpose()?;
    let mut mutate = Vec::with_capacity(r.mutate.len());
    for (j, m) in r.mutate.iter().enumerate() {
        mutate.push(compile_mutation(
            doc,
            &format!("{base}.mutate[{j}]"),
            id,
            m,
        )?);
    }
    let mut var_problems = Vec::new();
    let (variables, _) = compile_vars(
        doc,
        &format!("{base}.variables"),
        id,
        &r.variables,
        &mut var_problems,
    );
    if let Some(p) = var_problems.into_iter().next() {
        return Err(p);
    }
    Ok(Rule {
        id: r.id.clone(),
        severity: r.severity,
        description: r.description.clone(),
        pos,
        index: i,
        when: r
            .when
            .as_deref()
            .map(|w| compile_expr(doc, &format!("{base}.when"), id, w))
            .transpose()?,
        variables,
        var_bindings: std::sync::OnceLock::new(),
        for_each: r
            .for_each
            .as_ref()
            .map(|f| {
                binding_name(doc, &format!("{base}.forEach.as"), id, &f.var)?;
                if let Some(index) = &f.index {
                    binding_name(doc, &format!("{base}.forEach.index"), id, index)?;
                    if *index == f.var {
                        return Err(problem(
                            ProblemKind::Shape,
                            doc,
                            &format!("{base}.forEach.index"),
                            id,
                            format!(
                                "{index:?} is the item's name too (forEach.as): the index would hide the item; choose another name"
                            ),
                        ));
                    }
                }
                Ok::<_, Problem>((
                    compile_expr(doc, &format!("{base}.forEach.in"), id, &f.items)?,
                    f.var.clone(),
                    f.index.clone(),
                ))
            })
            .transpose()?,
        validate,
        mutate,
        mutate_source: raw
            .get("mutate")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
    })
}

/// Refuses a `forEach` binding name (`as`, `index`) that an expression could not read as the
/// item: not a CEL identifier, `variables` (the rule's variables), or a name starting with `__`
/// (reserved: `variables.x` is read through one).
fn binding_name(doc: &Document, path: &str, rule: Option<&str>, name: &str) -> Result<(), Problem> {
    let identifier = name.bytes().next().is_some_and(|c| !c.is_ascii_digit())
        && name.bytes().all(crate::expr::is_ident_byte);
    let why = if !identifier {
        "is not a CEL identifier (a letter or _, then letters, digits or _)"
    } else if name == "variables" {
        "names the rule's variables"
    } else if PACK_NAMES.contains(&name) {
        "names what the rule's expressions read (object, params, fragments, objects, objectsByKind), which the item would hide"
    } else if name.starts_with("__") {
        "starts with __, which is reserved for the engine's own names"
    } else {
        return Ok(());
    };
    Err(problem(
        ProblemKind::Shape,
        doc,
        path,
        rule,
        format!("{name:?} {why}: choose another name for the item"),
    ))
}

/// Compiles a `Table` document. Problems go to `problems`; the table is returned (with the
/// entries that compiled) whenever its top level could be read.
fn compile_table(doc: &Document, checks: Checks, problems: &mut Vec<Problem>) -> Option<Table> {
    let file = deserialize_file(doc, problems)?;
    if !file.rules.is_empty() || file.matcher.is_some() || !file.variables.is_empty() {
        problems.push(problem(
            ProblemKind::Shape,
            doc,
            "kind",
            None,
            "a Table has fragments and entries only".into(),
        ));
    }
    let mut entries = Vec::with_capacity(file.entries.len());
    let mut ids = HashSet::new();
    for (i, e) in file.entries.iter().enumerate() {
        match compile_entry(doc, i, e, &mut ids) {
            Ok(entry) => entries.push(entry),
            Err(p) => problems.push(p),
        }
    }
    let fragments = compile_fragments(doc, &file.fragments, checks, problems);
    // `{$fragment: name}` must name a fragment of this table (those in fragments are checked
    // with them); each one that does not is reported where it is written.
    for e in entries.iter().filter(|_| checks == Checks::All) {
        if let Some(raw) = file.entries.get(e.index) {
            let at = format!("entries[{}]", e.index);
            unknown_fragment_refs(doc, raw, &at, Some(&e.id), &file.fragments, problems);
        }
    }
    Some(Table {
        name: file.metadata.name,
        source: doc.source.clone(),
        fragments,
        entries,
        spans: Arc::new(doc.spans.clone()),
        complete: true,
        cache: Default::default(),
        schema: None,
    })
}

/// Every `{$fragment: name}` written in `value` (found at field path `path`), in document
/// order, as (name, the field path of its `$fragment` key's value).
fn fragment_ref_paths(value: &Value, path: &str, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            if map.len() == 1
                && let Some(Value::String(name)) = map.get("$fragment")
            {
                out.push((name.clone(), format!("{path}[\"$fragment\"]")));
                return;
            }
            for (k, v) in map {
                fragment_ref_paths(v, &format!("{path}[{}]", crate::quote::go_quote(k)), out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                fragment_ref_paths(v, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn compile_entry(
    doc: &Document,
    i: usize,
    e: &Value,
    ids: &mut HashSet<String>,
) -> Result<TableEntry, Problem> {
    let base = format!("entries[{i}]");
    let Some(obj) = e.as_object() else {
        return Err(problem(
            ProblemKind::Shape,
            doc,
            &base,
            None,
            "a table entry must be a mapping".into(),
        ));
    };
    let Some(id) = obj.get("id").and_then(Value::as_str) else {
        return Err(problem(
            ProblemKind::Shape,
            doc,
            &base,
            None,
            "a table entry needs a string id".into(),
        ));
    };
    if !ids.insert(id.to_string()) {
        return Err(problem(
            ProblemKind::Duplicate,
            doc,
            &format!("{base}.id"),
            Some(id),
            "duplicate entry id".into(),
        ));
    }
    let include = match obj.get("include") {
        None => None,
        Some(Value::String(s)) => Some(compile_expr(doc, &format!("{base}.include"), Some(id), s)?),
        Some(_) => {
            return Err(problem(
                ProblemKind::Shape,
                doc,
                &format!("{base}.include"),
                Some(id),
                "include must be a CEL string".into(),
            ));
        }
    };
    let mut body = obj.clone();
    body.remove("id");
    body.remove("include");
    let pos = FieldPath::parse(&base)
        .ok()
        .and_then(|p| doc.spans.lookup(&p))
        .unwrap_or(Pos { line: 0, column: 0 });
    Ok(TableEntry {
        id: id.to_string(),
        pos,
        index: i,
        include,
        body: compile_template(doc, &base, Some(id), &Value::Object(body))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<RuleSet, LoadErrors> {
        RuleSet::from_sources(&[Source::new("rules/x.yaml", text)])
    }

    const HEAD: &str =
        "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: RulePack\nmetadata:\n  name: p\n";

    #[test]
    fn a_trusted_set_compiles_a_pack_when_it_is_first_used() {
        let pack = |name: &str, stage: &str, kind: &str, expr: &str| {
            Source::new(
                format!("rules/{name}.yaml"),
                format!(
                    "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: RulePack\nmetadata:\n  name: {name}\nstage: {stage}\nmatch:\n  resources:\n  - kind: {kind}\nrules:\n- id: {name}-rule\n  validate:\n    expression: '{expr}'\n    message: no\n"
                ),
            )
        };
        let sources = vec![
            (pack("a", "one", "A", "true"), None),
            (pack("b", "two", "B", "true"), None),
            // Does not compile: a trusted load does not look, running it does.
            (pack("c", "three", "C", "object.spec.("), None),
        ];
        let set = RuleSet::load_prepared_trusted(sources, None).expect("loads");
        let compiled =
            |set: &RuleSet| -> Vec<bool> { set.packs.iter().map(PackSlot::is_compiled).collect() };
        assert_eq!(compiled(&set), [false, false, false]);
        let names: Vec<&str> = set.stage("one").map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["a"]);
        assert_eq!(compiled(&set), [true, false, false]);
        let doc = serde_json::json!({"kind": "B"});
        let names: Vec<&str> = set.packs_for(&doc).map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["b"]);
        assert_eq!(compiled(&set), [true, true, false]);
        let broken = set.stage("three").next().expect("the pack is there");
        let origin = crate::Origin {
            file: "in.yaml",
            document: 0,
            spans: None,
        };
        // A document the pack does not take is not its concern.
        let other = broken
            .evaluate(&serde_json::json!({"kind": "A"}), origin, &Value::Null)
            .expect("not the pack's document");
        assert!(!other.matched);
        let err = broken
            .evaluate(&serde_json::json!({"kind": "C"}), origin, &Value::Null)
            .expect_err("a pack that did not compile does not run");
        assert!(
            err.to_string().starts_with(
                "rule pack error: rules/c.yaml:12:30: rule c-rule: CEL does not compile: Syntax error:"
            ),
            "{err}"
        );
        // A full load of the same files refuses them.
        assert!(RuleSet::load(&[pack("c", "three", "C", "object.spec.(")], None).is_err());
    }

    #[test]
    fn a_prepared_load_is_a_load_of_the_texts() {
        // One file prepared (through its serialized form), one broken file and one with a
        // compile error left to parse: the same errors, in the same order, as a load of the texts.
        let good = Source::new(
            "rules/a.yaml",
            format!("{HEAD}rules:\n- id: a\n  validate:\n    expression: 'object.spec.('\n"),
        );
        let broken = Source::new("rules/b.yaml", "a: [1, 2\nb: 3\n");
        let other = Source::new(
            "rules/c.yaml",
            format!("{HEAD}rules:\n- id: a\n  validate:\n    expression: 'true'\n"),
        );
        let docs = crate::source::prepare_rule_file(&good).expect("parses");
        let json = serde_json::to_string(&docs).expect("serializes");
        let back: Vec<PreparedDocument> = serde_json::from_str(&json).expect("reads");
        assert_eq!(back, docs);
        let sources = [good.clone(), broken.clone(), other.clone()];
        let errors = |r: Result<RuleSet, LoadErrors>| {
            r.err()
                .map(|e| e.errors.iter().map(ToString::to_string).collect::<Vec<_>>())
                .unwrap_or_default()
        };
        let want = errors(RuleSet::load(&sources, None));
        assert_eq!(want.len(), 3, "{want:?}");
        let got = errors(RuleSet::load_prepared(
            vec![
                (good.clone(), Some(Prepared::Documents(back))),
                (broken.clone(), None),
                (other.clone(), None),
            ],
            None,
        ));
        assert_eq!(got, want);
        // The serialized form, and a serialized form that does not read (the text is parsed).
        let got = errors(RuleSet::load_prepared(
            vec![
                (good, Some(Prepared::Json(json.into()))),
                (broken, Some(Prepared::Json("[{".into()))),
                (other, None),
            ],
            None,
        ));
        assert_eq!(got, want);
    }

    #[test]
    fn cel_syntax_error_names_file_line_and_rule() {
        let text = format!(
            "{HEAD}rules:\n- id: ok\n  validate:\n    expression: 'true'\n- id: broken\n  validate:\n    expression: 'object.spec.('\n"
        );
        let err = load(&text).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with(
                "rule pack error: rules/x.yaml:11:30: rule broken: CEL does not compile:"
            ),
            "{msg}"
        );
    }

    #[test]
    fn every_unknown_field_of_a_file_is_reported_in_one_load() {
        let text = "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: RulePack\nmetadata: {name: p, descripton: x}\nstage: s\nknd: oops\nrules:\n- id: r\n  validate:\n    expresion: 'true'\n- id: q\n  validate:\n    expression: 'object.('\n";
        let errors: Vec<String> = load(text)
            .unwrap_err()
            .errors
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errors,
            [
                "rule pack error: rules/x.yaml:3:21: unknown field `descripton`, expected `name` or `description`",
                "rule pack error: rules/x.yaml:5:1: unknown field `knd`, expected one of `apiVersion`, `kind`, `metadata`, `stage`, `match`, `variables`, `fragments`, `rules`, `entries`",
                "rule pack error: rules/x.yaml:9:5: rule r: unknown field `expresion`, expected one of `expression`, `message`, `messageExpression`, `fieldPath`, `fieldPathExpression`, `at`, `atExpression`",
                "rule pack error: rules/x.yaml:12:25: rule q: CEL does not compile: Syntax error: no viable alternative at input '.(' (expression column 8)",
            ]
        );
    }

    #[test]
    fn unknown_fields_are_refused_with_their_line() {
        let text = format!("{HEAD}rules:\n- id: r\n  validate:\n    expresion: 'true'\n");
        let msg = load(&text).unwrap_err().to_string();
        assert!(
            msg.starts_with("rule pack error: rules/x.yaml:8:5: rule r: unknown field `expresion`"),
            "{msg}"
        );
    }

    #[test]
    fn a_call_of_a_wrong_arity_or_a_literal_table_that_is_not_one_is_refused_at_load() {
        let text = format!(
            "{HEAD}variables:\n- {{name: t, expression: \"{{'c': {{'types': ['list'], 'shape': 'a list', 'item': {{}}}}}}\"}}\nrules:\n- id: r\n  validate:\n    expression: \"size(fieldTypeErrors(object, variables.t, '')) == 0 && goQuote('a', 'b') != '' && size(fieldTypeErrors(object, {{'a': {{'types': [], 'shape': 's'}}}}, '')) == 0\"\n"
        );
        let errors: Vec<String> = match load(&text) {
            Ok(_) => Vec::new(),
            Err(e) => e.errors.iter().map(ToString::to_string).collect(),
        };
        assert_eq!(
            errors,
            [
                "rule pack error: rules/x.yaml:10:17: rule r: fieldTypeErrors (variables.t): the table's entry for \"c\" has the key \"item\", which is none of types, shape, items, values, fields",
                "rule pack error: rules/x.yaml:10:17: rule r: goQuote(s) takes 1 operand, given 2",
                "rule pack error: rules/x.yaml:10:17: rule r: fieldTypeErrors: the table's entry for \"a\" is not a map with 'types' (a list of type names) and 'shape' (a string), and optionally 'items', 'values' or 'fields'",
            ]
        );
    }

    #[test]
    fn an_undefined_variable_is_refused_at_load() {
        let text = format!(
            "{HEAD}variables:\n- {{name: spec, expression: object.spec}}\nrules:\n- id: r\n  validate:\n    expression: variables.spek.image != ''\n"
        );
        let msg = load(&text).unwrap_err().to_string();
        assert_eq!(
            msg,
            "rule pack error: rules/x.yaml:10:17: rule r: variables.spek is not defined here: no earlier pack or rule variable is named \"spek\""
        );
    }

    #[test]
    fn duplicate_rule_ids_are_refused() {
        let text = format!(
            "{HEAD}rules:\n- id: r\n  validate: {{expression: 'true'}}\n- id: r\n  validate: {{expression: 'true'}}\n"
        );
        let msg = load(&text).unwrap_err().to_string();
        assert_eq!(
            msg,
            "rule pack error: rules/x.yaml:8:7: rule r: duplicate rule id (first defined at rules/x.yaml:6:3)"
        );
    }
}
