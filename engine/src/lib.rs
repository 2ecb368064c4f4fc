/*!
A generic CEL + YAML rule engine: rule packs that validate and mutate Kubernetes-style manifests,
with findings that point at the source line and column.

The engine knows nothing about WorkloadRun: it loads rule files, compiles their CEL, evaluates
them over JSON documents, applies patches and reports findings. The NVCRE domain lives in the
`nvcre-domain` crate, which drives this engine with the packs under `rules/`.

# Brief overview

- [`Source`] and [`parse_documents`] read YAML/JSON streams into [`Document`]s that keep a
  [`SpanIndex`] (field path → line:column).
- [`RuleSet::load`] loads `RulePack` and `Table` documents and compiles every CEL expression.
  Loading is all or nothing: a complete set, or [`LoadErrors`] with every problem of every file
  (file, line, column and rule id), so a long-lived caller keeps its last good set.
- A [`Contract`] declares the caller's stages (and the params each passes) and tables (with a
  JSON Schema for their rows); loading with one refuses unknown stages and tables, rows that do
  not fit, and `params.x` reads the stage does not pass. It may also declare further document kinds
  (e.g. a caller's `LogProfile`), checked by the caller's function at load and kept in
  [`RuleSet::documents`].
- [`schema`] derives JSON Schemas (draft 2020-12): row schemas from Rust types for a
  [`Contract`], and the schemas of `RulePack` and `Table` files for editors.
- [`cost`] bounds what CEL may cost: comprehension iterations (and regex input) are charged
  while an expression evaluates, against a per-expression and a per-document budget
  ([`limits::Limits`]); an evaluation that spends one fails like any evaluation error (a rule
  error finding). [`lint`] warns about expressions whose estimated worst case exceeds the
  per-expression budget.
- [`go_regex`] reads a regex as Go's RE2 does (CEL's `matches`, `find`, `findAll`, a table's
  `go-regex` fields) and compiles it with the `regex` crate, or fails with Go's error.
- [`walk_files`] / [`read_files`] list a directory the one way every reader does: path order,
  hidden entries skipped (so a mounted ConfigMap's files load once, by their visible names),
  symlinked files followed, symlink loops refused.
- [`CompiledPack::evaluate`] runs a pack on one document and returns an [`Outcome`]: the mutated
  document and its [`Finding`]s. [`Table::render`] renders a data table with parameters.
- [`lint`] reports every problem of a set of rule files as [`LintFinding`]s: what the loader
  refuses (contract breaches included), plus messages that look like CEL, unused variables and
  fragments, and escaped keys on free-form maps.
- Errors implement [`miette::Diagnostic`] with codes such as `nvcre::rules::unknown_stage`;
  compiling and evaluating CEL fail with [`CompileError`] / [`EvaluationError`]
  (`nvcre::cel::…`), a bad field path with [`PathError`].
- [`patch`] holds the merge (lists merged by key or replaced as a [`patch::ListPolicy`] says,
  `$patch` directives honoured), JSON Patch and list insertion used by
  mutations and by callers.

# Example

```
use nvcre_engine::{parse_documents, Origin, RuleSet, Source};

let rules = Source::new("rules/queue.yaml", r#"
apiVersion: policy.nvcre.nvidia.com/v1alpha1
kind: RulePack
metadata: {name: queue}
match:
  resources: [{kind: WorkloadRun}]
rules:
- id: queue-length
  validate:
    expression: size(object.spec.gangScheduler.queue) <= 63
    message: "Too long: may not be more than 63 bytes"
    fieldPath: spec.gangScheduler.queue
"#);
let set = RuleSet::from_sources(&[rules])?;
let input = Source::new("run.yaml", format!(
    "kind: WorkloadRun\nspec:\n  gangScheduler:\n    queue: {}\n", "q".repeat(64)));
let doc = &parse_documents(&input)?[0];
let origin = Origin { file: "run.yaml", document: 0, spans: Some(&doc.spans) };
let outcome = set.packs()[0].evaluate(&doc.value, origin, &serde_json::Value::Null)?;
let f = &outcome.findings[0];
assert_eq!((f.line, f.column), (Some(4), Some(12)));
assert_eq!(f.message, "Too long: may not be more than 63 bytes");
# Ok::<(), Box<dyn std::error::Error>>(())
```
*/
// Input paths must not panic: every lookup is checked, every error typed.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod contract;
pub mod cost;
mod error;
mod eval;
mod expr;
mod files;
mod finding;
mod format;
pub mod go_duration;
pub mod go_regex;
pub mod limits;
mod lint;
mod mapping;
mod pack;
pub mod patch;
mod path;
pub mod quantity;
mod quote;
pub mod schema;
mod sites;
mod source;
mod stream;
mod view;

/// CEL values, as expressions return them.
pub use cel::Value as CelValue;
pub use contract::{
    CelField, Contract, DocumentCheck, DocumentProblem, KindContract, REGEX_FORMAT, StageContract,
    TableContract, regex_problem,
};
pub use error::{
    CompileError, ContractViolation, ConversionError, Error, EvaluationError, Inside, LoadErrors,
    PathError,
};
pub use eval::{
    OBJECTS, OBJECTS_BY_KIND, Objects, Origin, Outcome, Written, each_string, holds_placeholder,
    run_packs, run_packs_findings, run_packs_written,
};
pub use expr::type_name as cel_type_name;
pub use expr::{
    Expr, Scope, Template, cel_to_json, json_to_cel, json_type as json_type_name,
    set_direct_evaluation,
};
pub use files::{WalkOptions, read_files, walk_files, walk_files_noting};
pub use finding::{Finding, Severity};
pub use format::{label_key_problems, label_value_problems};
pub use lint::{Lint, LintFinding, from_error as lint_finding_from_error, lint};
pub use mapping::{MappingValue, plain_type_words, read_mapping, remove_entry_at, type_error};
pub use pack::{
    CompiledPack, Prepared, PreparedSource, RULES_API_VERSION, Rule, RuleSet, Table, TableEntry,
};
pub use path::{FieldPath, Segment};
pub use quote::{go_quote, printable};
pub use source::{
    Document, Located, MAX_SOURCE_BYTES, Pos, PreparedDocument, Source, SpanIndex, parse_documents,
    parse_documents_as, parse_documents_lenient, parse_documents_within, parse_rule_file,
    prepare_rule_file, to_yaml,
};
pub use stream::{Chunk, ChunkReader, parse_chunk};
pub use view::{json_field, json_field_mut};
