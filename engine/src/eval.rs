//! Evaluation of a compiled pack over one document, and rendering of tables.
//!
//! CEL sees `object` (the document, as mutated so far), `params` (caller data), `variables`
//! (pack variables, then rule variables) and `fragments` (the pack's rendered fragments). Rules
//! run in file order; a mutation is visible to every later rule.
//!
//! Fail closed: a rule whose expression fails to evaluate yields an error finding, never a pass.
//! A variable or fragment that fails is not bound to a stand-in value: every expression that
//! reads it fails with a message naming it (see [`Scope`]), so each rule that reads it reports
//! an error finding while the rules that do not read it run normally.

use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use cel::Value as Cel;
use serde_json::{Map, Value};

use crate::error::Error;
use crate::expr::{EvalError, Expr, FieldReads, Fragments, Listed, Scope, Template, VarBindings};
use crate::finding::{Finding, Severity};
use crate::pack::{CompiledPack, FieldPathSpec, Message, Mutation, Rule, Table};
use crate::patch::{self, ListPolicy};
use crate::path::FieldPath;
use crate::source::SpanIndex;

/// Where the evaluated document came from, for findings.
#[derive(Debug, Clone, Copy)]
pub struct Origin<'a> {
    /// File name (or `<stdin>`, or a rendered-output name).
    pub file: &'a str,
    /// 0-based document index.
    pub document: usize,
    /// Spans of the document, when it was read from text.
    pub spans: Option<&'a SpanIndex>,
}

/// The result of running one pack on one document.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// False when the pack's `match` did not select the document (nothing ran).
    pub matched: bool,
    /// The document after every mutation.
    pub value: Value,
    /// Findings in rule order.
    pub findings: Vec<Finding>,
    /// Where the pack's rules wrote.
    pub written: Written,
}

/// Where the rules of a run wrote into the document: the path of every merge and insert that
/// applied, in order, or anywhere once a JSON Patch applied (its operations name their own
/// places, and `move` takes from one). A caller that keeps parts of a document in a typed form
/// reads it to know whether those parts can have changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    places: Vec<FieldPath>,
    anywhere: bool,
}

impl Written {
    /// True when no write applied.
    pub fn is_nothing(&self) -> bool {
        !self.anywhere && self.places.is_empty()
    }

    /// The paths written (a merge or insert target; a write there may have created the
    /// mappings on its way, and an insert its list), or `None` when a write may have changed
    /// anything. A path written again right after itself (a `forEach` writing one place per
    /// item) is listed once.
    pub fn places(&self) -> Option<&[FieldPath]> {
        (!self.anywhere).then_some(self.places.as_slice())
    }

    /// True when every write landed strictly below the field `keys` (from the root): the
    /// document outside that field is as it was, unless the field itself was missing or not a
    /// mapping (a write below creates it, or replaces a null with a mapping).
    pub fn only_below(&self, keys: &[&str]) -> bool {
        self.places().is_some_and(|places| {
            places.iter().all(|p| {
                let segments = p.segments();
                segments.len() > keys.len()
                    && keys
                        .iter()
                        .zip(segments)
                        .all(|(k, s)| matches!(s, crate::path::Segment::Key(name) if name == k))
            })
        })
    }

    /// Adds the writes of a later run.
    pub fn extend(&mut self, later: Written) {
        self.anywhere |= later.anywhere;
        if !self.anywhere {
            self.places.extend(later.places);
        } else {
            self.places.clear();
        }
    }

    fn record(&mut self, mutation: &Mutation) {
        match mutation {
            Mutation::Merge { path, .. } | Mutation::Insert { path, .. } if !self.anywhere => {
                if self.places.last() != Some(path) {
                    self.places.push(path.clone());
                }
            }
            Mutation::Merge { .. } | Mutation::Insert { .. } => {}
            Mutation::JsonPatch(_) => {
                self.anywhere = true;
                self.places.clear();
            }
        }
    }
}

impl Outcome {
    /// True when any finding has `Severity::Error`.
    pub fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Error)
    }
}

/// The name rules read the documents of the same input by (see [`Objects`]).
pub const OBJECTS: &str = "objects";

/// The name rules read the documents of the same input by kind: a map from each `kind` to
/// the documents of that kind, in input order (documents without a string `kind` are in no
/// list). Available exactly when [`OBJECTS`] is (a pack binds each of the two it reads). A rule
/// that looks for documents of one kind reads `objectsByKind[?'ComputeDomain'].orValue([])` and
/// visits only those, where `objects.filter(o, o.kind == …)` visits every document of the input
/// for every document checked.
pub const OBJECTS_BY_KIND: &str = "objectsByKind";

/// The documents of the input a document came from, as packs of a stage declared with
/// [`Contract::stage_with_objects`](crate::Contract::stage_with_objects) see them: the CEL
/// variable [`OBJECTS`], a list of the documents (the evaluated one included) in input order.
///
/// The list is shared by every document of the input (clones share it) and read in place by
/// the rules, never converted. When the caller could not gather the input (it is larger than it keeps), the view
/// is [`Objects::unavailable`]: every expression that reads `objects` fails with the reason,
/// so the rules that need it report an error finding rather than a missing referent.
#[derive(Debug, Clone)]
pub struct Objects(Arc<ObjectsView>);

#[derive(Debug)]
enum ObjectsView {
    Documents(Gathered),
    Unavailable(Arc<str>),
}

/// The documents of an input and their two views, [`OBJECTS`] and [`OBJECTS_BY_KIND`], each
/// built when an expression first reads it (once per input, shared by its documents): a pack
/// whose rules never reach `objects` on a document (the other branch of a conditional) makes
/// neither, nor, when the documents are [`Objects::deferred`], the documents. The first view
/// built takes the documents; the other, if read too, is copied from it. The shipped packs read
/// only the map by kind, so the documents are held once.
struct Gathered {
    /// How many documents, once known.
    len: OnceLock<usize>,
    /// The documents, until a view takes them.
    documents: std::sync::Mutex<Option<Documents>>,
    /// The views, or why the documents could not be made.
    list: OnceLock<Result<Arc<Value>, Arc<str>>>,
    by_kind: OnceLock<Result<ByKind, Arc<str>>>,
}

impl std::fmt::Debug for Gathered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gathered")
            .field("len", &self.len.get())
            .finish()
    }
}

/// The documents of a [`Gathered`], or what makes them.
enum Documents {
    Made(Vec<Value>),
    Deferred(Box<dyn FnOnce() -> Result<Vec<Value>, String> + Send>),
}

/// The view by kind, and where each document went (to copy the list back in input order).
#[derive(Debug)]
struct ByKind {
    map: Arc<Value>,
    /// In input order: the place of each document in its kind's list (kind's index in the
    /// map, index in the list), or (`None`, index in `rest`) for a document without a string
    /// `kind`.
    order: Vec<(Option<usize>, usize)>,
    rest: Vec<Value>,
}

impl Gathered {
    /// The documents, when no view has taken them yet (made now if deferred; an error when
    /// they could not be made).
    fn take(&self) -> Option<Result<Vec<Value>, Arc<str>>> {
        let documents = self
            .documents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()?;
        let made = match documents {
            Documents::Made(values) => Ok(values),
            Documents::Deferred(make) => make().map_err(Arc::from),
        };
        if let Ok(values) = &made {
            let _ = self.len.set(values.len());
        }
        Some(made)
    }

    fn list(&self) -> Result<Arc<Value>, Arc<str>> {
        self.list
            .get_or_init(|| {
                let documents = match self.take() {
                    Some(made) => made?,
                    None => {
                        // The map took them (or is taking them: this waits for it).
                        let by_kind = self.by_kind()?;
                        let lists: Vec<&Vec<Value>> = by_kind
                            .map
                            .as_object()
                            .into_iter()
                            .flat_map(|m| m.values())
                            .filter_map(Value::as_array)
                            .collect();
                        by_kind
                            .order
                            .iter()
                            .filter_map(|&(kind, at)| match kind {
                                Some(k) => lists.get(k).and_then(|l| l.get(at)),
                                None => by_kind.rest.get(at),
                            })
                            .cloned()
                            .collect()
                    }
                };
                Ok(Arc::new(Value::Array(documents)))
            })
            .clone()
    }

    fn by_kind(&self) -> Result<&ByKind, Arc<str>> {
        self.by_kind
            .get_or_init(|| {
                // The documents, or (the list took them) a copy from the list.
                let documents = match self.take() {
                    Some(made) => made?,
                    None => self.list()?.as_array().cloned().unwrap_or_default(),
                };
                // Kinds in the order first seen, as the map keeps them.
                let mut kinds: HashMap<String, usize> = HashMap::new();
                let mut lists: Vec<(String, Vec<Value>)> = Vec::new();
                let mut order = Vec::with_capacity(documents.len());
                let mut rest = Vec::new();
                for doc in documents {
                    match doc.get("kind").and_then(Value::as_str) {
                        Some(kind) => {
                            let k = match kinds.get(kind) {
                                Some(&k) => k,
                                None => {
                                    kinds.insert(kind.to_string(), lists.len());
                                    lists.push((kind.to_string(), Vec::new()));
                                    lists.len() - 1
                                }
                            };
                            order.push((Some(k), lists[k].1.len()));
                            lists[k].1.push(doc);
                        }
                        None => {
                            order.push((None, rest.len()));
                            rest.push(doc);
                        }
                    }
                }
                let map: serde_json::Map<String, Value> = lists
                    .into_iter()
                    .map(|(kind, list)| (kind, Value::Array(list)))
                    .collect();
                Ok(ByKind {
                    map: Arc::new(Value::Object(map)),
                    order,
                    rest,
                })
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl Objects {
    /// The documents `values`, in input order.
    pub fn new(values: Vec<Value>) -> Objects {
        let len = OnceLock::new();
        let _ = len.set(values.len());
        Objects::gathered(len, Documents::Made(values))
    }

    /// The documents `make` returns, in input order, made when a rule first reads `objects`
    /// or `objectsByKind` (on no document, never). `make` failing (the documents could not be
    /// read) fails every expression that reads them, with its message.
    pub fn deferred(make: impl FnOnce() -> Result<Vec<Value>, String> + Send + 'static) -> Objects {
        Objects::gathered(OnceLock::new(), Documents::Deferred(Box::new(make)))
    }

    fn gathered(len: OnceLock<usize>, documents: Documents) -> Objects {
        Objects(Arc::new(ObjectsView::Documents(Gathered {
            len,
            documents: std::sync::Mutex::new(Some(documents)),
            list: OnceLock::new(),
            by_kind: OnceLock::new(),
        })))
    }

    /// No view: reading `objects` fails with `reason`.
    pub fn unavailable(reason: &str) -> Objects {
        Objects(Arc::new(ObjectsView::Unavailable(Arc::from(reason))))
    }

    /// How many documents the view holds (`None` when unavailable, or deferred documents
    /// that could not be made). Makes deferred documents.
    pub fn len(&self) -> Option<usize> {
        match &*self.0 {
            ObjectsView::Documents(g) => match g.len.get() {
                Some(&n) => Some(n),
                None => g.by_kind().ok().and_then(|_| g.len.get().copied()),
            },
            ObjectsView::Unavailable(_) => None,
        }
    }

    /// True when the view holds no document (or is unavailable).
    pub fn is_empty(&self) -> bool {
        self.len().unwrap_or(0) == 0
    }

    /// Binds the views a pack reads into `scope`: [`OBJECTS`] when `list`, [`OBJECTS_BY_KIND`]
    /// when `by_kind` (a pack that reads neither binds neither), each made when an expression
    /// first reads it; unavailable, each fails the expressions that reach it.
    fn bind(&self, scope: &mut Scope, (list, by_kind): (bool, bool)) {
        match &*self.0 {
            ObjectsView::Documents(_) => {
                if list {
                    let o = self.clone();
                    scope.bind_deferred(OBJECTS, move || o.documents()?.list());
                }
                if by_kind {
                    let o = self.clone();
                    scope.bind_deferred(OBJECTS_BY_KIND, move || {
                        Ok(o.documents()?.by_kind()?.map.clone())
                    });
                }
            }
            // Only an expression that reaches them fails, with the reason: one that names them
            // in a branch it does not take runs (a Pod with no claims, in a file too large
            // for `objects`).
            ObjectsView::Unavailable(reason) => {
                for (name, bind) in [(OBJECTS, list), (OBJECTS_BY_KIND, by_kind)] {
                    if bind {
                        let reason = reason.clone();
                        scope.bind_deferred(name, move || Err(reason.clone()));
                    }
                }
            }
        }
    }

    fn documents(&self) -> Result<&Gathered, Arc<str>> {
        match &*self.0 {
            ObjectsView::Documents(g) => Ok(g),
            ObjectsView::Unavailable(reason) => Err(reason.clone()),
        }
    }
}

struct Run<'a, 'd> {
    pack: &'a CompiledPack,
    origin: Origin<'a>,
    params: &'a Value,
    objects: Option<&'a Objects>,
    /// The document, borrowed until a rule mutates it.
    doc: &'a mut Doc<'d>,
    findings: Vec<Finding>,
    /// `object`, `params` and `objects` bound for `doc` (see [`Run::base_scope`]).
    base: Option<Scope>,
    /// True once a rule of this run mutated `doc`.
    mutated: bool,
    /// Where this run's writes landed.
    written: Written,
}

/// The document a run of packs reads and mutates: the caller's value until a rule writes,
/// then one shared copy that the scopes bind in place.
enum Doc<'d> {
    /// Not written: the caller's value and, once a scope needed it, its one shared copy.
    Borrowed(&'d Value, Option<Arc<Value>>),
    /// Written by a rule, or handed over owned: the scopes bind this very value; a write
    /// copies it only while a scope still holds it.
    Owned(Arc<Value>),
}

impl<'d> Doc<'d> {
    fn new(doc: Cow<'d, Value>) -> Doc<'d> {
        match doc {
            Cow::Borrowed(v) => Doc::Borrowed(v, None),
            Cow::Owned(v) => Doc::Owned(Arc::new(v)),
        }
    }

    fn value(&self) -> &Value {
        match self {
            Doc::Borrowed(v, _) => v,
            Doc::Owned(v) => v,
        }
    }

    /// The document as the scopes bind it (shared, never copied twice).
    fn shared(&mut self) -> Arc<Value> {
        match self {
            Doc::Borrowed(v, shared) => {
                shared.get_or_insert_with(|| Arc::new((*v).clone())).clone()
            }
            Doc::Owned(v) => v.clone(),
        }
    }

    /// The document to write into.
    fn to_mut(&mut self) -> &mut Value {
        if let Doc::Borrowed(v, shared) = self {
            let owned = match shared.take() {
                Some(a) => a,
                None => Arc::new((*v).clone()),
            };
            *self = Doc::Owned(owned);
        }
        match self {
            Doc::Owned(v) => Arc::make_mut(v),
            Doc::Borrowed(..) => unreachable!("made owned above"),
        }
    }

    fn into_cow(self) -> Cow<'d, Value> {
        match self {
            Doc::Borrowed(v, _) => Cow::Borrowed(v),
            Doc::Owned(v) => Cow::Owned(Arc::try_unwrap(v).unwrap_or_else(|v| (*v).clone())),
        }
    }
}

/// A write of a rule's `mutate`, rendered: the value to apply, or why it could not be rendered.
enum Write<'r> {
    Apply(&'r Mutation, Value),
    Failed(EvalError),
}

/// The writes of a rule without `forEach`, rendered and not yet applied, and the failures
/// already reported for the rule.
struct Pending<'r> {
    writes: Vec<Write<'r>>,
    reported: BTreeSet<Arc<str>>,
}

/// Binds `fragments` in `scope` to `rendered` (the fragments rendered so far) when fragment
/// `t`'s CEL reads `fragments`: a later fragment may read the earlier ones, and the copy is
/// made only for one that does, since copying them for each fragment grew with the square of
/// their number.
fn bind_fragments_read(scope: &mut Scope, t: &Template, rendered: &Fragments) {
    let mut reads = false;
    t.for_each_expr(&mut |e: &Expr| {
        reads |= !matches!(e.fragment_reads(), FieldReads::Fields(f) if f.is_empty());
    });
    if reads {
        scope.bind_shared(
            "fragments",
            Arc::new(Value::Object(rendered.clone().into_iter().collect())),
        );
    }
}

/// The pack-level scope rules run in: `object`, `params`, pack `variables`, `fragments`.
/// A `forEach` item: a CEL value, or the place of a JSON list's element (a shared document and
/// the path to the element).
enum Item {
    Cel(Cel),
    At(Arc<Value>, Arc<[String]>),
}

struct PackScope {
    scope: Scope,
    /// The fragments that rendered, for `{$fragment: name}` in mutations.
    fragments: Fragments,
}

impl CompiledPack {
    /// Runs the pack on `doc`.
    ///
    /// # Errors
    /// [`Error::Patch`] when a mutation cannot be applied (the engine could not do its job).
    pub fn evaluate(
        &self,
        doc: &Value,
        origin: Origin<'_>,
        params: &Value,
    ) -> Result<Outcome, Error> {
        self.evaluate_in(doc, origin, params, None)
    }

    /// Runs the pack on `doc`, with `objects` (when given) bound as [`OBJECTS`]: the documents
    /// of the input `doc` came from. Without it, an expression that reads `objects` fails (an
    /// error finding); the contract refuses such reads in stages that do not bind it.
    ///
    /// # Errors
    /// [`Error::Patch`] when a mutation cannot be applied (the engine could not do its job).
    pub fn evaluate_in(
        &self,
        doc: &Value,
        origin: Origin<'_>,
        params: &Value,
        objects: Option<&Objects>,
    ) -> Result<Outcome, Error> {
        let mut doc = Doc::new(Cow::Borrowed(doc));
        let out = self.evaluate_shared(&mut doc, origin, params, objects, &mut None)?;
        Ok(Outcome {
            value: doc.into_cow().into_owned(),
            ..out
        })
    }

    /// Runs the pack on `doc` for its findings alone: the document is read in place, where the
    /// caller shares it (no copy), and a rule's write goes to a copy that is dropped. Findings
    /// are those of [`CompiledPack::evaluate_in`].
    ///
    /// # Errors
    /// As [`CompiledPack::evaluate_in`].
    pub fn findings_in(
        &self,
        doc: &Arc<Value>,
        origin: Origin<'_>,
        params: &Value,
        objects: Option<&Objects>,
    ) -> Result<Vec<Finding>, Error> {
        let mut doc = Doc::Borrowed(doc, Some(doc.clone()));
        Ok(self
            .evaluate_shared(&mut doc, origin, params, objects, &mut None)?
            .findings)
    }

    /// Runs the pack on `doc` (taken and handed back in the [`Outcome`]), reusing the CEL
    /// bindings of `object`, `params` and `objects` that an earlier pack left in `base`. A pack
    /// that mutates the document clears `base`, so the next one binds the new document.
    /// The [`Outcome`]'s `value` is left `Null`: the document is the returned [`Cow`].
    fn evaluate_shared(
        &self,
        doc: &mut Doc<'_>,
        origin: Origin<'_>,
        params: &Value,
        objects: Option<&Objects>,
        base: &mut Option<Scope>,
    ) -> Result<Outcome, Error> {
        if !self.matcher.matches_resource(doc.value()) {
            return Ok(Outcome {
                matched: false,
                value: Value::Null,
                findings: Vec::new(),
                written: Written::default(),
            });
        }
        if let Some(broken) = &self.broken {
            let (file, pos, rule, message) = &**broken;
            return Err(Error::Pack {
                file: file.clone(),
                pos: *pos,
                rule: rule.clone(),
                message: message.clone(),
            });
        }
        let mut run = Run {
            pack: self,
            origin,
            params,
            objects,
            doc,
            findings: Vec::new(),
            base: base.take(),
            mutated: false,
            written: Written::default(),
        };
        let outcome = run.evaluate();
        if !run.mutated {
            *base = run.base.take();
        }
        let (matched, findings) = outcome?;
        Ok(Outcome {
            matched,
            value: Value::Null,
            findings,
            written: run.written,
        })
    }
}

/// Runs `packs` in order over `doc`, each seeing the document as the earlier ones mutated it,
/// and returns the final document (still borrowed when no rule mutated it: it is copied only
/// when a rule writes) with every finding in pack order.
///
/// The document is bound once (one copy, read in place) and the binding is shared by the packs
/// until one of them mutates it.
///
/// # Errors
/// [`Error::Patch`] when a mutation cannot be applied.
pub fn run_packs<'p, 'd>(
    packs: impl IntoIterator<Item = &'p CompiledPack>,
    doc: Cow<'d, Value>,
    origin: Origin<'_>,
    params: &Value,
    objects: Option<&Objects>,
) -> Result<(Cow<'d, Value>, Vec<Finding>), Error> {
    let (value, findings, _) = run_packs_written(packs, doc, origin, params, objects)?;
    Ok((value, findings))
}

/// Runs `packs` as [`run_packs`] does, and also says where their rules wrote.
///
/// # Errors
/// As [`run_packs`].
pub fn run_packs_written<'p, 'd>(
    packs: impl IntoIterator<Item = &'p CompiledPack>,
    doc: Cow<'d, Value>,
    origin: Origin<'_>,
    params: &Value,
    objects: Option<&Objects>,
) -> Result<(Cow<'d, Value>, Vec<Finding>, Written), Error> {
    run_packs_on(packs, Doc::new(doc), origin, params, objects)
}

/// Runs `packs` as [`run_packs`] does, over the document the caller shares, for the findings
/// alone: the document is bound where it is (no copy); a rule's write goes to a copy, which the
/// later packs see and which is then dropped.
///
/// # Errors
/// As [`run_packs`].
pub fn run_packs_findings<'p>(
    packs: impl IntoIterator<Item = &'p CompiledPack>,
    doc: &Arc<Value>,
    origin: Origin<'_>,
    params: &Value,
    objects: Option<&Objects>,
) -> Result<Vec<Finding>, Error> {
    let shared = Doc::Borrowed(doc, Some(doc.clone()));
    Ok(run_packs_on(packs, shared, origin, params, objects)?.1)
}

fn run_packs_on<'p, 'd>(
    packs: impl IntoIterator<Item = &'p CompiledPack>,
    mut doc: Doc<'d>,
    origin: Origin<'_>,
    params: &Value,
    objects: Option<&Objects>,
) -> Result<(Cow<'d, Value>, Vec<Finding>, Written), Error> {
    let mut base = None;
    let mut findings = Vec::new();
    let mut written = Written::default();
    for pack in packs {
        let out = pack.evaluate_shared(&mut doc, origin, params, objects, &mut base)?;
        findings.extend(out.findings);
        written.extend(out.written);
    }
    // The shared scope holds the document: let go of it first, so that a written document is
    // handed back without a copy.
    drop(base);
    Ok((doc.into_cow(), findings, written))
}

impl Run<'_, '_> {
    /// The pack's `match` conditions, then its rules; returns whether the pack matched and the
    /// findings.
    fn evaluate(&mut self) -> Result<(bool, Vec<Finding>), Error> {
        // Pack variables are evaluated before the conditions only when a condition reads them.
        let pack = self
            .pack
            .matcher
            .conditions
            .iter()
            .any(|(_, c)| c.reads_variables_or_fragments())
            .then(|| self.pack_scope());
        let base = match &pack {
            Some(p) => p.scope.clone(),
            None => self.base_scope(),
        };
        let matcher = &self.pack.matcher;
        for (i, (name, cond)) in matcher.conditions.iter().enumerate() {
            match cond.eval_bool_checked(&base) {
                Ok(true) => {}
                Ok(false) => return Ok((false, Vec::new())),
                // Whether the pack applies is unknown: fail closed, as a rule error (the rule
                // file is at fault, not the document), at the condition's line.
                Err(e) => {
                    let id = format!("{}/matchConditions/{name}", self.pack.name);
                    let mut finding = self.finding(
                        &id,
                        Severity::Error,
                        matcher.condition_lines.get(i).copied().unwrap_or(0),
                        format!(
                            "match condition {name:?} could not be evaluated on document {}: {e} (expression: {}) (a rule error, not a policy violation)",
                            self.origin.document + 1,
                            cond.text()
                        ),
                        None,
                    );
                    finding.rule_error = true;
                    self.findings.push(finding);
                    return Ok((true, std::mem::take(&mut self.findings)));
                }
            }
        }
        drop(base);
        let mut pack = match pack {
            Some(p) => p,
            None => self.pack_scope(),
        };
        for rule in &self.pack.rules {
            let (mut mutated, pending) = self.rule(rule, &pack)?;
            let mut rebound = false;
            if let Some(Pending {
                writes,
                mut reported,
            }) = pending
            {
                let doc = self.doc.value();
                let surely_applies = |w: &Write<'_>| match w {
                    Write::Apply(Mutation::Merge { path, .. }, _) => {
                        patch::merge_applies(doc, path)
                    }
                    Write::Apply(..) => false,
                    Write::Failed(_) => true,
                };
                if writes.iter().any(|w| matches!(w, Write::Apply(..)))
                    && writes.iter().all(surely_applies)
                {
                    // Let go of every scope that binds the document, so the write goes into
                    // it instead of a copy; the scope is bound again for the next rule, as
                    // after any write. Only when every write is sure to apply: a rule whose
                    // writes all fail leaves the scope (and the variables it evaluated) as
                    // it was.
                    drop(pack);
                    self.base = None;
                    mutated |= self.apply(rule, writes, &mut reported);
                    self.mutated |= mutated;
                    pack = self.pack_scope();
                    rebound = true;
                } else {
                    mutated |= self.apply(rule, writes, &mut reported);
                }
            }
            if mutated && !rebound {
                self.mutated = true;
                pack = self.pack_scope();
            }
        }
        Ok((true, std::mem::take(&mut self.findings)))
    }

    /// `object`, `params` and `objects`, bound once per document: the first call binds them
    /// (and keeps the scope), later calls clone it, until a rule mutates the document.
    fn base_scope(&mut self) -> Scope {
        if !self.mutated
            && let Some(b) = &self.base
        {
            return b.clone();
        }
        let s = self.bind_base();
        if !self.mutated {
            self.base = Some(s.clone());
        }
        s
    }

    /// The current `doc`, shared.
    fn shared_doc(&mut self) -> Arc<Value> {
        self.doc.shared()
    }

    fn bind_base(&mut self) -> Scope {
        let mut s = Scope::new();
        s.bind_shared("object", self.shared_doc());
        // No params is an empty map, so `params.?x.orValue(d)` works everywhere.
        if self.params.is_null() {
            s.bind("params", &Value::Object(Map::new()));
        } else {
            s.bind("params", self.params);
        }
        if let Some(o) = self.objects {
            o.bind(&mut s, self.pack.objects_read());
        }
        s
    }

    /// `object`, `params`, pack `variables` (each sees the earlier ones) and `fragments`.
    /// A variable or fragment that fails is recorded as failed in the scope (see [`eval_vars`]).
    fn pack_scope(&mut self) -> PackScope {
        let mut s = self.base_scope();
        let pack = self.pack;
        s.bind_variables(
            pack.var_bindings
                .get_or_init(|| VarBindings::new(&pack.variables, [])),
        );
        let mut frags = Fragments::new();
        // In dependency order (see the pack's compile): a fragment inserts or reads only
        // fragments rendered before it.
        for (name, t) in &self.pack.fragments {
            bind_fragments_read(&mut s, t, &frags);
            match t.render_checked(&s, &frags) {
                Ok(v) => {
                    frags.insert(name.clone(), v);
                }
                Err(e) => {
                    s.fail_fragment(name, Arc::from(format!("fragment {name:?} failed: {e}")))
                }
            }
        }
        s.bind_shared(
            "fragments",
            Arc::new(Value::Object(frags.clone().into_iter().collect())),
        );
        PackScope {
            scope: s,
            fragments: frags,
        }
    }

    /// Runs one rule; returns whether it mutated the document, and, for a rule without
    /// `forEach`, the writes it rendered and has not applied ([`Run::apply`]: the caller lets
    /// go of the scopes that hold the document first, so that the write does not copy it).
    ///
    /// A `forEach` item is bound as its place in a shared JSON list when the list is one JSON
    /// holds (read in place, like `object`), else as a CEL value.
    fn rule<'r>(
        &mut self,
        rule: &'r Rule,
        pack: &PackScope,
    ) -> Result<(bool, Option<Pending<'r>>), Error> {
        // Failures of a variable or fragment, reported once per rule however many items read it.
        let mut reported = BTreeSet::new();
        let index = |i: usize| Some(Cel::Int(i64::try_from(i).unwrap_or(i64::MAX)));
        // A `when` that reads neither the item, its index nor the rule's own variables (it may
        // read the pack's) is the same for every item until one writes (an item writes only
        // when it held). When the
        // items are computed (not only selected, which costs less than `when` and often finds
        // none), it is evaluated first: false, the rule is skipped before its `forEach.in`,
        // which may cost far more than the rule (or read what it needs only on the documents
        // the rule is for); true, it is not evaluated again until an item writes. Failing, it
        // is evaluated for each item, as before, which reports the failure.
        let item_free_when = match (&rule.for_each, &rule.when) {
            (Some((items, var, idx_var)), Some(when))
                if !items.only_selects()
                    && !when.reads_name("variables")
                    && rule.variables.iter().all(|(name, _)| {
                        !when.reads_name(&format!("{}{name}", crate::expr::VARIABLE_PREFIX))
                    })
                    && !when.reads_name(var)
                    && idx_var.as_deref().is_none_or(|i| !when.reads_name(i)) =>
            {
                when.eval_bool_checked(&pack.scope).ok()
            }
            _ => None,
        };
        if item_free_when == Some(false) {
            return Ok((false, None));
        }
        let items: Vec<(Option<Item>, Option<Cel>)> = match &rule.for_each {
            None => vec![(None, None)],
            Some((expr, _, _)) => match expr.eval_list(&pack.scope) {
                // Each item is bound as its place in the list: nothing is copied.
                Ok(Listed::At { root, path, len }) => (0..len)
                    .map(|i| {
                        let mut at = path.to_vec();
                        at.push(i.to_string());
                        (Some(Item::At(root.clone(), Arc::from(at))), index(i))
                    })
                    .collect(),
                Ok(Listed::Cel(Cel::List(l))) => l
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (Some(Item::Cel(v.clone())), index(i)))
                    .collect(),
                // Maps iterate over their keys, sorted, so findings come in a stable order; the
                // index is the key's position in that order.
                Ok(Listed::Keys(keys)) => keys
                    .into_iter()
                    .enumerate()
                    .map(|(i, k)| (Some(Item::Cel(k)), index(i)))
                    .collect(),
                Ok(Listed::Cel(Cel::Map(m))) => {
                    crate::expr::sorted_keys(m.map.keys().map(|k| Cel::from(k.clone())))
                        .into_iter()
                        .enumerate()
                        .map(|(i, k)| (Some(Item::Cel(k)), index(i)))
                        .collect()
                }
                Ok(Listed::Cel(Cel::Null)) => Vec::new(),
                Ok(Listed::Cel(other)) => {
                    let e = EvalError::Own(format!(
                        "it must give a list or map, got {}",
                        a_type(&other)
                    ));
                    self.eval_error(rule, "forEach.in", &e, &mut reported);
                    return Ok((false, None));
                }
                Err(e) => {
                    self.eval_error(rule, "forEach.in", &e, &mut reported);
                    return Ok((false, None));
                }
            },
        };
        let mut mutated = false;
        let scope = pack.scope.clone();
        for (item, index) in items {
            let mut s = scope.clone();
            if mutated {
                // Later items see the document as the earlier ones wrote it. Only the item's
                // scope binds that one, and lets go of it before the item's writes: after the
                // first write (which copies the document the pack's scopes share), each item
                // writes into it in place, not into a copy per item.
                s.bind_shared("object", self.shared_doc());
            }
            if let (Some((_, var, idx_var)), Some(item)) = (&rule.for_each, item) {
                match item {
                    Item::Cel(v) => s.bind_local(var, v),
                    Item::At(root, path) => s.bind_at(var, root, path),
                }
                if let (Some(iv), Some(index)) = (idx_var, index) {
                    s.bind_local(iv, index);
                }
            }
            if !rule.variables.is_empty() {
                // A rule's `variables` map holds its pack's variables and its own.
                let variables = &self.pack.variables;
                s.bind_variables(rule.var_bindings.get_or_init(|| {
                    VarBindings::new(&rule.variables, variables.iter().map(|(n, _)| n))
                }));
            }
            if let Some(when) = &rule.when
                && (item_free_when != Some(true) || mutated)
            {
                match when.eval_bool_checked(&s) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => {
                        self.eval_error(rule, "when", &e, &mut reported);
                        continue;
                    }
                }
            }
            if let Some(v) = &rule.validate {
                match v.expression.eval_bool_checked(&s) {
                    Ok(true) => {}
                    Ok(false) => {
                        // A message or field path that cannot be computed fails closed: a rule
                        // error (exit 2), never a finding of the rule's own severity.
                        let message = match &v.message {
                            Message::Static(m) => Ok(m.clone()),
                            Message::Expr(e) => match e.eval_checked(&s) {
                                Ok(Cel::String(m)) => Ok(m.to_string()),
                                Ok(other) => Err(EvalError::Own(format!(
                                    "it gave {}, not a string",
                                    a_type(&other)
                                ))),
                                Err(err) => Err(err),
                            },
                        };
                        let path = field_path(v.field_path.as_ref(), &s);
                        let at_key = at_key(v.at.as_ref(), &s);
                        match (message, path, at_key) {
                            (Ok(message), Ok(path), Ok(at_key)) => {
                                let finding = self.finding_at(
                                    &rule.id,
                                    rule.severity,
                                    rule.pos.line,
                                    message,
                                    path,
                                    at_key,
                                );
                                self.findings.push(finding);
                            }
                            (Err(e), _, _) => {
                                self.eval_error(rule, "messageExpression", &e, &mut reported)
                            }
                            (_, Err(e), _) => {
                                self.eval_error(rule, "fieldPathExpression", &e, &mut reported)
                            }
                            (_, _, Err(e)) => {
                                self.eval_error(rule, "atExpression", &e, &mut reported)
                            }
                        }
                    }
                    Err(e) => self.eval_error(rule, "", &e, &mut reported),
                }
            }
            // Every write is rendered in the item's scope (which binds the document as it was
            // before the item's first write), then applied in order.
            let writes: Vec<Write<'r>> = rule
                .mutate
                .iter()
                .map(|m| {
                    let frags = &pack.fragments;
                    let rendered = match m {
                        Mutation::Merge { value, .. } => value.render_checked(&s, frags),
                        Mutation::Insert { values, .. } => values.render_checked(&s, frags),
                        Mutation::JsonPatch(ops) => ops.render_checked(&s, frags),
                    };
                    match rendered {
                        Ok(v) => Write::Apply(m, v),
                        Err(e) => Write::Failed(e),
                    }
                })
                .collect();
            if rule.for_each.is_none() {
                return Ok((mutated, Some(Pending { writes, reported })));
            }
            drop(s);
            mutated |= self.apply(rule, writes, &mut reported);
        }
        Ok((mutated, None))
    }

    /// Applies `writes` in order; returns whether one changed the document. A write that does
    /// not apply (a JSON Patch path that is not there, a merge into a value of another type) is
    /// the rule's error, located and named like one: the document is refused, never left
    /// half-mutated.
    fn apply(
        &mut self,
        rule: &Rule,
        writes: Vec<Write<'_>>,
        reported: &mut BTreeSet<Arc<str>>,
    ) -> bool {
        let mut mutated = false;
        for w in writes {
            let (m, v) = match w {
                Write::Apply(m, v) => (m, v),
                Write::Failed(e) => {
                    self.eval_error(rule, "", &e, reported);
                    continue;
                }
            };
            let applied = match (m, v) {
                (Mutation::Merge { path, .. }, v) => {
                    patch::merge_at_path(self.doc.to_mut(), path, &v, &ListPolicy::by_name())
                }
                (Mutation::Insert { path, end, .. }, Value::Array(items)) => {
                    patch::insert_list(self.doc.to_mut(), path, items, *end)
                }
                (Mutation::Insert { path, end, .. }, other) => {
                    patch::insert_list(self.doc.to_mut(), path, vec![other], *end)
                }
                (Mutation::JsonPatch(_), v) => patch::json_patch(self.doc.to_mut(), &v),
            };
            match applied {
                Ok(()) => {
                    mutated = true;
                    self.written.record(m);
                }
                Err(e) => {
                    let message = match e {
                        crate::Error::Patch(m) => m,
                        other => other.to_string(),
                    };
                    self.eval_error(rule, "mutate", &EvalError::Own(message), reported);
                }
            }
        }
        mutated
    }

    /// Records that `rule` could not be evaluated: `rule R could not be evaluated at PATH|on
    /// document N: [part: ]err[ (expression: E)] (a rule error, not a policy violation)`, at the
    /// rule's fixed `fieldPath` when it has one, flagged [`Finding::rule_error`]. The failure of a variable or fragment
    /// is named without `part` (it reads the same wherever the rule reads it) and reported
    /// once per rule.
    fn eval_error(
        &mut self,
        rule: &Rule,
        part: &str,
        err: &EvalError,
        reported: &mut BTreeSet<Arc<str>>,
    ) {
        let detail = match err {
            EvalError::Upstream(m) | EvalError::Unavailable(m) => {
                if !reported.insert(m.clone()) {
                    return;
                }
                m.to_string()
            }
            EvalError::Own(m) if part.is_empty() => m.clone(),
            EvalError::Own(m) => format!("{part}: {m}"),
        };
        // The expression itself failed (not a variable or fragment it reads, which the detail
        // names with its own expression).
        let text = match part {
            "forEach.in" => rule.for_each.as_ref().map(|(e, _, _)| e.text()),
            "when" => rule.when.as_ref().map(Expr::text),
            _ => None,
        }
        .or_else(|| {
            rule.validate.as_ref().and_then(|v| match part {
                "" => Some(v.expression.text()),
                "messageExpression" => match &v.message {
                    Message::Expr(e) => Some(e.text()),
                    Message::Static(_) => None,
                },
                "fieldPathExpression" => match &v.field_path {
                    Some(FieldPathSpec::Expr(e)) => Some(e.text()),
                    _ => None,
                },
                "atExpression" => match &v.at {
                    Some(crate::pack::AtSpec::Expr(e)) => Some(e.text()),
                    _ => None,
                },
                _ => None,
            })
        });
        let expression = match (err, text) {
            (EvalError::Own(_), Some(t)) => format!(" (expression: {})", crate::expr::shown(t)),
            _ => String::new(),
        };
        let path = match rule.validate.as_ref().and_then(|v| v.field_path.as_ref()) {
            Some(FieldPathSpec::Static(p)) => Some(p.clone()),
            _ => None,
        };
        let at = path
            .as_ref()
            .map(|p| format!(" at {p}"))
            .unwrap_or_else(|| format!(" on document {}", self.origin.document + 1));
        let message = format!(
            "rule {} could not be evaluated{at}: {detail}{expression} (a rule error, not a policy violation)",
            rule.id
        );
        let mut finding = self.finding(&rule.id, Severity::Error, rule.pos.line, message, path);
        finding.rule_error = true;
        self.findings.push(finding);
    }

    fn finding(
        &self,
        rule_id: &str,
        severity: Severity,
        rule_line: usize,
        message: String,
        path: Option<FieldPath>,
    ) -> Finding {
        self.finding_at(rule_id, severity, rule_line, message, path, false)
    }

    /// A finding at `path`: at the key of its last mapping entry when `at_key` (and the
    /// document has one there), else at its value.
    fn finding_at(
        &self,
        rule_id: &str,
        severity: Severity,
        rule_line: usize,
        message: String,
        path: Option<FieldPath>,
        at_key: bool,
    ) -> Finding {
        let pos = path.as_ref().and_then(|p| {
            let spans = self.origin.spans?;
            at_key
                .then(|| spans.lookup_key(p))
                .flatten()
                .or_else(|| spans.lookup(p))
        });
        Finding {
            rule_id: rule_id.to_string(),
            pack: self.pack.name.clone(),
            severity,
            message,
            file: self.origin.file.to_string(),
            document: self.origin.document,
            object: None,
            field_path: path.map(|p| p.to_string()),
            line: pos.map(|p| p.line),
            column: pos.map(|p| p.column),
            rule_file: self.pack.source.name.clone(),
            rule_line,
            stage: self.pack.stage.clone(),
            rule_error: false,
            at_key,
        }
    }
}

/// Whether a failed validation points at the key of its field path's last entry (`at`).
///
/// # Errors
/// An `atExpression` that fails or gives anything but `key` or `value`.
fn at_key(spec: Option<&crate::pack::AtSpec>, scope: &Scope) -> Result<bool, EvalError> {
    match spec {
        None => Ok(false),
        Some(crate::pack::AtSpec::Key) => Ok(true),
        Some(crate::pack::AtSpec::Expr(e)) => match e.eval_checked(scope)? {
            Cel::String(s) if s.as_str() == "key" => Ok(true),
            Cel::String(s) if s.as_str() == "value" => Ok(false),
            Cel::String(s) => Err(EvalError::Own(format!(
                "it gave {}, not \"key\" or \"value\"",
                crate::quote::go_quote(&s)
            ))),
            other => Err(EvalError::Own(format!(
                "it gave {}, not \"key\" or \"value\"",
                a_type(&other)
            ))),
        },
    }
}

/// The field path of a failed validation: `None` when the rule names none.
///
/// # Errors
/// A `fieldPathExpression` that fails, gives no string or gives text that is not a field path.
fn field_path(spec: Option<&FieldPathSpec>, scope: &Scope) -> Result<Option<FieldPath>, EvalError> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    match spec {
        FieldPathSpec::Static(p) => Ok(Some(p.clone())),
        FieldPathSpec::Expr(e) => match e.eval_checked(scope)? {
            Cel::String(text) => FieldPath::parse(&text).map(Some).map_err(|err| {
                EvalError::Own(format!(
                    "it gave {}, which is not a field path: {err}",
                    crate::quote::go_quote(&text)
                ))
            }),
            other => Err(EvalError::Own(format!(
                "it gave {}, not a string",
                a_type(&other)
            ))),
        },
    }
}

/// `value`'s CEL type with its article: `an int`, `a list`.
fn a_type(value: &Cel) -> String {
    let name = crate::expr::type_name(value);
    let article = if name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {name}")
}

/// A table's rendered fragments: by name, and as the JSON map `fragments` reads in place.
type RenderedFragments = (Fragments, Arc<Value>);

/// Renders of a [`Table`] already computed, shared by every thread that renders the table.
///
/// A table is pure data: the same `include` mode and the same values of the params its
/// expressions read always render the same rows. The cache keeps each **entry** apart, keyed on
/// the params that entry reads (its `include`, its body, and what the table's fragments read),
/// so a parameter only some entries read (a run name) re-renders only those entries; a
/// parameter no expression reads never defeats the cache.
///
/// Each cached result keeps the CEL cost its computation charged; a hit charges the document
/// that cost again ([`cost::charge_document`]), and is not used when the document has no room
/// for it (the result is then computed, and spends the budget where the computation does), so
/// a document's budget does not depend on what the documents before it left in the cache.
#[derive(Debug, Default)]
pub(crate) struct TableCache {
    /// The params each part reads, found on first use.
    reads: OnceLock<TableReads>,
    /// `(entry index, include honoured, key)` → the rendered body, `None` when `include` left
    /// the entry out. Bounded: params that differ per render (a run name some entries read)
    /// must not grow it without limit. Shared, so that neither a hit nor keeping a fresh body
    /// copies it.
    entries: Mutex<FastMap<EntryKey, Body>>,
    /// Key of the params the fragments read → the rendered fragments, and as CEL.
    fragments: Mutex<FastMap<String, Costed<Arc<RenderedFragments>>>>,
    /// What callers built from the table's rows ([`Table::derived`]), by key and type.
    derived: Derived,
    /// Rows decoded by [`Table::render_decoded`]: `(type, entry key)` → `Option<Arc<T>>`.
    typed: Mutex<FastMap<(TypeId, EntryKey), Costed<DerivedValue>>>,
    /// Whole renders of [`Table::render_decoded`]: type → [`render_key`] → `Vec<Kept<T>>`,
    /// each entry's row as the typed cache keeps it. Bounded like the others.
    renders: Mutex<FastMap<TypeId, FastMap<String, Costed<DerivedValue>>>>,
}

/// A cached result and the CEL cost its computation charged.
type Costed<T> = (T, u64);

/// An entry's rendered body (`None` when its `include` left it out) and its cost.
type Body = Costed<Option<Arc<Value>>>;

/// Each entry's row of a decoded render, and the rows decoded for it alone by entry index
/// ([`Table::decoded_rows`]).
type DecodedRows<T> = (Vec<Kept<T>>, Vec<Option<Arc<T>>>);

/// An entry's decoded row in one render: left out by its `include`, kept as rendered, kept
/// with placeholders to fill in, or decoded for this render alone (not kept).
#[derive(Clone)]
enum Kept<T> {
    Out,
    Row(Arc<T>),
    Marked(Arc<T>),
    Filled,
}

/// The key of a whole render with `params`: their JSON text, each substituted param (`subs`
/// not empty: the string params of `substituted`) written as its placeholder, as
/// [`Table::prepare`] renders with them.
fn render_key(params: &Value, subs: &[(String, &str)], substituted: &BTreeSet<String>) -> String {
    let map = match params.as_object() {
        Some(map) if !subs.is_empty() => map,
        _ => return params.to_string(),
    };
    object_text(map.iter().map(|(name, v)| {
        if substituted.contains(name) && v.is_string() {
            (name, Cow::Owned(Value::String(placeholder(name))))
        } else {
            (name, Cow::Borrowed(v))
        }
    }))
}

/// `fields` as the text of a JSON object, written directly, without building the object.
fn object_text<'a>(fields: impl Iterator<Item = (&'a String, Cow<'a, Value>)>) -> String {
    let mut out = Vec::with_capacity(128);
    out.push(b'{');
    for (name, v) in fields {
        if out.len() > 1 {
            out.push(b',');
        }
        // Writing JSON into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut out, name);
        out.push(b':');
        let _ = serde_json::to_writer(&mut out, &*v);
    }
    out.push(b'}');
    String::from_utf8(out).unwrap_or_default()
}

/// A map the table caches keep: looked up for every entry of every render, with keys no input
/// chooses freely (the params a render reads, as JSON), so a fast hasher is enough.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// `(entry index, include honoured, key of the params the entry reads)`; entries that read the
/// same params share the key's text.
type EntryKey = (usize, bool, Arc<str>);

/// A render's substitutions, params and entry keys ([`Table::prepare`]).
struct Prepared<'p> {
    /// (placeholder, value) of each substituted param.
    subs: Vec<(String, &'p str)>,
    /// The params, with placeholders in place of the substituted ones.
    params: Cow<'p, Value>,
    /// Each entry's key.
    keys: Vec<EntryKey>,
}

/// The values of [`Table::derived`]: one per `(key, type)`, built once per loaded table.
#[derive(Default)]
struct Derived(Mutex<HashMap<(&'static str, TypeId), DerivedValue>>);

/// One value of [`Derived`], of the type its key names.
type DerivedValue = Arc<dyn Any + Send + Sync>;

impl std::fmt::Debug for Derived {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map(|m| m.len()).unwrap_or(0);
        write!(f, "Derived({n} values)")
    }
}

/// What the parts of a table read of `params`.
#[derive(Debug)]
struct TableReads {
    /// The fragments.
    fragments: FieldReads,
    /// Each entry's `include` and body, with the fragments' reads added.
    entries: Vec<FieldReads>,
    /// For each entry, the first entry that reads the same params (its key is computed once
    /// per render for all of them).
    same_reads: Vec<usize>,
    /// The params whose strings the table only carries into its output unchanged (see
    /// [`Table::render`]); empty when the table's text holds [`PARAM_MARK`].
    substituted: BTreeSet<String>,
}

/// Opens the placeholder of a substituted param in a cached render (a Unicode noncharacter:
/// no rule file or param that holds one has its params substituted).
const PARAM_MARK: char = '\u{FDD0}';
/// Closes the placeholder.
const PARAM_MARK_END: char = '\u{FDD1}';

/// Adds the uses `u` to `all`.
fn merge_uses(all: &mut crate::expr::ParamUses, u: crate::expr::ParamUses) {
    all.bare.extend(u.bare);
    all.other.merge(&u.other);
    all.fragments_cel.merge(&u.fragments_cel);
    all.fragments_embedded.extend(u.fragments_embedded);
}

/// True when `s` holds a substituted param's placeholder: a string of a row that
/// [`Table::render_decoded_part`]'s `part` sees before the param is filled in.
pub fn holds_placeholder(s: &str) -> bool {
    s.contains(PARAM_MARK)
}

/// The placeholder rendered in place of the substituted param `name`.
fn placeholder(name: &str) -> String {
    format!("{PARAM_MARK}{name}{PARAM_MARK_END}")
}

/// True when a string of `v` holds [`PARAM_MARK`].
fn holds_mark(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains(PARAM_MARK),
        Value::Array(a) => a.iter().any(holds_mark),
        Value::Object(m) => m
            .iter()
            .any(|(k, v)| k.contains(PARAM_MARK) || holds_mark(v)),
        _ => false,
    }
}

/// Replaces every placeholder of `subs` (placeholder, value) in the strings of `v`.
fn substitute(v: &mut Value, subs: &[(String, &str)]) {
    each_string(v, &mut |s| substitute_str(s, subs));
}

/// Replaces every placeholder of `subs` (placeholder, value) in `s`.
fn substitute_str(s: &mut String, subs: &[(String, &str)]) {
    // Nearly every string is ASCII: one scan for the mark's first UTF-8 byte rules it out.
    let mut lead = [0u8; 4];
    let lead = PARAM_MARK.encode_utf8(&mut lead).as_bytes()[0];
    if s.as_bytes().contains(&lead) && s.contains(PARAM_MARK) {
        for (from, to) in subs {
            if s.contains(from.as_str()) {
                *s = s.replace(from.as_str(), to);
            }
        }
    }
}

/// Calls `f` with every string value of `v` (not the keys of its mappings): what a
/// [`Table::render_decoded`] caller's `strings` does for the JSON its rows keep.
pub fn each_string(v: &mut Value, f: &mut dyn FnMut(&mut String)) {
    match v {
        Value::String(s) => f(s),
        Value::Array(a) => a.iter_mut().for_each(|x| each_string(x, f)),
        Value::Object(m) => m.values_mut().for_each(|x| each_string(x, f)),
        _ => {}
    }
}

/// A decoded row that holds the placeholders of substituted params (see
/// [`Table::render_decoded`]): kept once, filled in for each render.
struct Marked<T>(Arc<T>);

/// The params of `names` that can be substituted: the string ones, when no string of
/// `params` holds [`PARAM_MARK`].
fn substitutions<'a>(names: &BTreeSet<String>, params: &'a Value) -> Vec<(String, &'a str)> {
    let Some(map) = params.as_object().filter(|_| !names.is_empty()) else {
        return Vec::new();
    };
    if holds_mark(params) {
        return Vec::new();
    }
    names
        .iter()
        .filter_map(|n| Some((placeholder(n), map.get(n)?.as_str()?)))
        .collect()
}

/// How many entry renders a [`TableCache`] keeps before it starts over.
const TABLE_CACHE_ENTRIES: usize = 4096;

/// The cache key of `params` for a part that reads `reads`: only those params, as JSON text
/// (written directly, without building the object they form).
fn params_key(reads: &FieldReads, params: &Value) -> String {
    match (reads, params.as_object()) {
        // Absent and null stay apart: `params.?x` tells them apart.
        (FieldReads::Fields(names), Some(map)) => object_text(
            names
                .iter()
                .filter_map(|n| Some((n, Cow::Borrowed(map.get(n)?)))),
        ),
        _ => params.to_string(),
    }
}

impl Table {
    /// Renders every entry whose `include` holds, with `params` bound as `params` and the
    /// table's fragments (rendered first) as `fragments` and `{$fragment: name}`.
    ///
    /// Returns `(entry id, rendered body)` in table order.
    ///
    /// # Errors
    /// [`Error::Pack`] naming the table file, the entry id and the failing expression.
    pub fn render(&self, params: &Value) -> Result<Vec<(String, Value)>, Error> {
        self.render_entries(params, true)
    }

    /// Renders every entry, ignoring `include` (to list a table's rows).
    ///
    /// # Errors
    /// As [`Table::render`].
    pub fn render_all(&self, params: &Value) -> Result<Vec<(String, Value)>, Error> {
        self.render_entries(params, false)
    }

    /// A value built from the table's rows once per loaded table and shared afterwards: rows
    /// decoded into a caller's types, their regexes compiled. `build` runs on the first call for
    /// a `(key, T)` pair; later calls (from any thread) return the same value. An error is not
    /// kept: the next call builds again. A reloaded rule set has new tables, so a value never
    /// outlives the rows it was built from.
    ///
    /// `build` must depend on nothing but the table (render it with fixed params), since the
    /// value is reused for every caller.
    ///
    /// # Errors
    /// What `build` returns.
    pub fn derived<T, E>(
        &self,
        key: &'static str,
        build: impl FnOnce(&Table) -> Result<T, E>,
    ) -> Result<Arc<T>, E>
    where
        T: Any + Send + Sync,
    {
        let id = (key, TypeId::of::<T>());
        let found = self
            .cache
            .derived
            .0
            .lock()
            .ok()
            .and_then(|m| m.get(&id).cloned());
        if let Some(v) = found.and_then(|v| v.downcast::<T>().ok()) {
            return Ok(v);
        }
        // Built outside the lock: two threads may both build on a first use; either result
        // is the same value.
        let v = Arc::new(build(self)?);
        if let Ok(mut m) = self.cache.derived.0.lock() {
            m.insert(id, v.clone());
        }
        Ok(v)
    }

    /// The params each part of the table reads.
    fn reads(&self) -> &TableReads {
        self.cache.reads.get_or_init(|| {
            // What a template reads of params, and which fragments it uses (inserted or read
            // by CEL; `None`: all of them).
            let uses = |t: &Template, r: &mut FieldReads| {
                let mut inserted = Vec::new();
                t.fragment_refs(&mut inserted);
                let mut cel = FieldReads::Fields(BTreeSet::new());
                t.for_each_expr(&mut |e: &Expr| {
                    r.merge(e.param_reads());
                    cel.merge(e.fragment_reads());
                });
                match cel {
                    FieldReads::All => None,
                    FieldReads::Fields(mut names) => {
                        names.extend(inserted);
                        Some(names)
                    }
                }
            };
            // Each fragment's reads, with those of the fragments it uses (only earlier ones).
            let mut by_fragment: Vec<(&str, FieldReads)> = Vec::new();
            let mut fragments = FieldReads::Fields(BTreeSet::new());
            let with_used = |r: &mut FieldReads,
                             used: Option<BTreeSet<String>>,
                             known: &[(&str, FieldReads)]| {
                for (name, reads) in known {
                    if used.as_ref().is_none_or(|u| u.contains(*name)) {
                        r.merge(reads);
                    }
                }
            };
            for (name, t) in &self.fragments {
                let mut r = FieldReads::Fields(BTreeSet::new());
                let used = uses(t, &mut r);
                with_used(&mut r, used, &by_fragment);
                fragments.merge(&r);
                by_fragment.push((name, r));
            }
            // An entry keys on its own reads and those of the fragments it uses. (Every render
            // still renders the fragments, cached on what they read, so a fragment that fails
            // for these params fails the render even where no entry uses it.)
            let entries = self
                .entries
                .iter()
                .map(|e| {
                    let mut r = FieldReads::Fields(BTreeSet::new());
                    let mut used = uses(&e.body, &mut r);
                    if let Some(inc) = &e.include {
                        r.merge(inc.param_reads());
                        match (inc.fragment_reads(), &mut used) {
                            (FieldReads::All, _) => used = None,
                            (FieldReads::Fields(f), Some(u)) => u.extend(f.iter().cloned()),
                            (FieldReads::Fields(_), None) => {}
                        }
                    }
                    with_used(&mut r, used, &by_fragment);
                    r
                })
                .collect::<Vec<_>>();
            let same_reads = (0..entries.len())
                .map(|i| (0..i).find(|&j| entries[j] == entries[i]).unwrap_or(i))
                .collect();
            TableReads {
                fragments,
                entries,
                same_reads,
                substituted: self.substituted_params(),
            }
        })
    }

    /// The params the table only reads as exactly `${{ params.x }}`, as a whole value or as a
    /// part of text, and in no fragment that a CEL expression reads: a string param so read
    /// reaches the output unchanged, so a render with a placeholder in its place, the
    /// placeholder then replaced, is the render with the value. Their renders are cached with
    /// the placeholders (a run name does not defeat the cache).
    fn substituted_params(&self) -> BTreeSet<String> {
        use crate::expr::ParamUses;
        if self.source.text.contains(PARAM_MARK) {
            return BTreeSet::new();
        }
        let mut all = ParamUses::default();
        // The params each fragment's value may carry, its own and those of the fragments it
        // reads or inserts (a fragment reads only earlier ones).
        let mut carried: Vec<(String, BTreeSet<String>, bool)> = Vec::new();
        for (name, t) in &self.fragments {
            let mut u = ParamUses::default();
            t.param_uses(true, &mut u);
            let mut params = u.bare.clone();
            let mut whole = matches!(u.other, FieldReads::All);
            if let FieldReads::Fields(f) = &u.other {
                params.extend(f.iter().cloned());
            }
            for (earlier, p, w) in &carried {
                let read = u.fragments_embedded.contains(earlier)
                    || match &u.fragments_cel {
                        FieldReads::All => true,
                        FieldReads::Fields(f) => f.contains(earlier),
                    };
                if read {
                    params.extend(p.iter().cloned());
                    whole |= *w;
                }
            }
            carried.push((name.clone(), params, whole));
            merge_uses(&mut all, u);
        }
        for e in &self.entries {
            let mut u = ParamUses::default();
            if let Some(inc) = &e.include {
                u.other.merge(inc.param_reads());
                u.fragments_cel.merge(inc.fragment_reads());
            }
            e.body.param_uses(true, &mut u);
            merge_uses(&mut all, u);
        }
        // A fragment that CEL reads hands its placeholders to an expression.
        for (name, params, whole) in &carried {
            let read = match &all.fragments_cel {
                FieldReads::All => true,
                FieldReads::Fields(f) => f.contains(name),
            };
            if read {
                all.other.merge(&if *whole {
                    FieldReads::All
                } else {
                    FieldReads::Fields(params.clone())
                });
            }
        }
        match all.other {
            FieldReads::All => BTreeSet::new(),
            FieldReads::Fields(other) => all.bare.difference(&other).cloned().collect(),
        }
    }

    fn render_entries(
        &self,
        params: &Value,
        honor_include: bool,
    ) -> Result<Vec<(String, Value)>, Error> {
        let prepared = self.prepare(params, honor_include);
        let wanted = vec![true; self.entries.len()];
        let bodies = self.raw_bodies(&prepared, honor_include, &wanted)?;
        Ok(self
            .entries
            .iter()
            .zip(bodies)
            .filter_map(|(e, body)| {
                body.and_then(|(b, _)| b).map(|b| {
                    let mut b = Arc::unwrap_or_clone(b);
                    if !prepared.subs.is_empty() {
                        substitute(&mut b, &prepared.subs);
                    }
                    (e.id.clone(), b)
                })
            })
            .collect())
    }

    /// Renders like [`Table::render`] and decodes every row with `decode` (given the entry id
    /// and the rendered body), keeping the decoded rows: a later render whose entry renders the
    /// same (same params read) returns the same `Arc` without decoding again. A row that
    /// carries a substituted param (the run's name, say) is decoded once with the param's
    /// placeholder and filled in for each render: `strings` must call its function with every
    /// string of a row that `decode` took as is from a string value of the body (so that
    /// filling in the decoded row gives what decoding the filled-in body gives). Such a row
    /// that does not decode with its placeholders is filled in first and decoded on every call
    /// (the error then names the real value).
    ///
    /// # Errors
    /// As [`Table::render`] (converted into `E`), or the first error of `decode`.
    pub fn render_decoded<T, E>(
        &self,
        params: &Value,
        decode: impl Fn(&str, &Value) -> Result<T, E>,
        strings: impl Fn(&mut T, &mut dyn FnMut(&mut String)),
    ) -> Result<Vec<(String, Arc<T>)>, E>
    where
        T: Any + Send + Sync + Clone,
        E: From<Error>,
    {
        self.render_decoded_as(params, decode, strings, None)
    }

    /// As [`Table::render_decoded`], for a caller that reads only part of each row: a row
    /// that holds substituted params is filled in on `part(row)` (a copy of just that part)
    /// instead of on a copy of the whole row. A row that holds none is handed out whole, shared
    /// with the cache, as before. Every entry is rendered and decoded as by
    /// [`Table::render_decoded`], so the errors are the same.
    ///
    /// # Errors
    /// As [`Table::render_decoded`].
    pub fn render_decoded_part<T, E>(
        &self,
        params: &Value,
        decode: impl Fn(&str, &Value) -> Result<T, E>,
        strings: impl Fn(&mut T, &mut dyn FnMut(&mut String)),
        part: impl Fn(&T) -> T,
    ) -> Result<Vec<(String, Arc<T>)>, E>
    where
        T: Any + Send + Sync + Clone,
        E: From<Error>,
    {
        self.render_decoded_as(params, decode, strings, Some(&part))
    }

    fn render_decoded_as<T, E>(
        &self,
        params: &Value,
        decode: impl Fn(&str, &Value) -> Result<T, E>,
        strings: impl Fn(&mut T, &mut dyn FnMut(&mut String)),
        part: Option<&dyn Fn(&T) -> T>,
    ) -> Result<Vec<(String, Arc<T>)>, E>
    where
        T: Any + Send + Sync + Clone,
        E: From<Error>,
    {
        let reads = self.reads();
        let subs = substitutions(&reads.substituted, params);
        let fill = |row: &T| {
            let mut row = match part {
                Some(part) => part(row),
                None => row.clone(),
            };
            strings(&mut row, &mut |s| substitute_str(s, &subs));
            Arc::new(row)
        };
        let out = |kept: &[Kept<T>], extra: &mut dyn FnMut(usize) -> Option<Arc<T>>| {
            self.entries
                .iter()
                .zip(kept)
                .enumerate()
                .filter_map(|(i, (e, k))| {
                    let row = match k {
                        Kept::Out => None,
                        Kept::Row(row) => Some(row.clone()),
                        Kept::Marked(row) => Some(fill(row)),
                        Kept::Filled => extra(i),
                    };
                    row.map(|r| (e.id.clone(), r))
                })
                .collect()
        };
        // Every row of a render with the same params (the substituted ones as placeholders)
        // decoded before: nothing to key, look up or render, fragments included (they rendered
        // for these params then).
        let whole = render_key(params, &subs, &reads.substituted);
        let found = self.cache.renders.lock().ok().and_then(|c| {
            c.get(&TypeId::of::<T>())
                .and_then(|m| m.get(&whole))
                .cloned()
        });
        if let Some((v, cost)) = found
            && let Ok(kept) = v.downcast::<Vec<Kept<T>>>()
            && crate::cost::charge_document(cost)
        {
            return Ok(out(&kept, &mut |_| None));
        }
        let (kept, cost) = crate::cost::counted(|| self.decoded_rows(params, &decode));
        let (kept, filled) = kept?;
        let rows = out(&kept, &mut |i| filled.get(i).cloned().flatten());
        if filled.is_empty()
            && let Ok(mut c) = self.cache.renders.lock()
        {
            let m = c.entry(TypeId::of::<T>()).or_default();
            if m.len() >= TABLE_CACHE_ENTRIES {
                m.clear();
            }
            m.insert(whole, (Arc::new(kept), cost));
        }
        Ok(rows)
    }

    /// Each entry's decoded row for `params` ([`Table::render_decoded_as`]), from the typed
    /// cache or rendered, and the rows that decode only once filled in (by entry index; empty
    /// when there are none).
    fn decoded_rows<T, E>(
        &self,
        params: &Value,
        decode: &impl Fn(&str, &Value) -> Result<T, E>,
    ) -> Result<DecodedRows<T>, E>
    where
        T: Any + Send + Sync + Clone,
        E: From<Error>,
    {
        let prepared = self.prepare(params, true);
        let typed_key = |i: usize| (TypeId::of::<T>(), prepared.keys[i].clone());
        let mut kept: Vec<Option<Kept<T>>> = match self.cache.typed.lock() {
            Ok(c) => (0..self.entries.len())
                .map(|i| {
                    let (v, cost) = c.get(&typed_key(i))?;
                    if !crate::cost::charge_document(*cost) {
                        return None;
                    }
                    match v.downcast_ref::<Option<Arc<T>>>() {
                        Some(Some(row)) => Some(Kept::Row(row.clone())),
                        Some(None) => Some(Kept::Out),
                        None => v
                            .downcast_ref::<Marked<T>>()
                            .map(|Marked(row)| Kept::Marked(row.clone())),
                    }
                })
                .collect(),
            Err(_) => vec![None; self.entries.len()],
        };
        // Rows that decode only once filled in, decoded for this render alone.
        let mut filled: Vec<Option<Arc<T>>> = Vec::new();
        let wanted: Vec<bool> = kept.iter().map(Option::is_none).collect();
        if !wanted.iter().any(|w| *w) {
            // Every row decoded already; the fragments still render (see `reads`).
            self.render_fragments(&prepared.params)?;
        } else {
            let bodies = self.raw_bodies(&prepared, true, &wanted)?;
            let mut fresh: Vec<(usize, (DerivedValue, u64))> = Vec::new();
            for (i, body) in bodies.into_iter().enumerate() {
                let Some((body, cost)) = body else { continue };
                let k = match body {
                    None => {
                        fresh.push((i, (Arc::new(None::<Arc<T>>), cost)));
                        Kept::Out
                    }
                    Some(b) if prepared.subs.is_empty() || !holds_mark(&b) => {
                        let row = Arc::new(decode(&self.entries[i].id, &b)?);
                        fresh.push((i, (Arc::new(Some(row.clone())), cost)));
                        Kept::Row(row)
                    }
                    Some(b) => match decode(&self.entries[i].id, &b) {
                        Ok(row) => {
                            let row = Arc::new(row);
                            fresh.push((i, (Arc::new(Marked(row.clone())), cost)));
                            Kept::Marked(row)
                        }
                        Err(_) => {
                            let mut b = Arc::unwrap_or_clone(b);
                            substitute(&mut b, &prepared.subs);
                            let row = Arc::new(decode(&self.entries[i].id, &b)?);
                            filled.resize(self.entries.len(), None);
                            filled[i] = Some(row);
                            Kept::Filled
                        }
                    },
                };
                kept[i] = Some(k);
            }
            if let Ok(mut c) = self.cache.typed.lock() {
                if c.len() + fresh.len() > TABLE_CACHE_ENTRIES {
                    c.clear();
                }
                for (i, v) in fresh {
                    c.insert(typed_key(i), v);
                }
            }
        }
        let kept: Vec<Kept<T>> = kept.into_iter().map(|k| k.unwrap_or(Kept::Out)).collect();
        Ok((kept, filled))
    }

    /// The substitutions for `params`, the params rendered with (placeholders in place of the
    /// substituted ones) and each entry's cache key.
    fn prepare<'p>(&self, params: &'p Value, honor_include: bool) -> Prepared<'p> {
        let reads = self.reads();
        let subs = substitutions(&reads.substituted, params);
        let params = if subs.is_empty() {
            Cow::Borrowed(params)
        } else {
            let mut p = params.clone();
            if let Some(map) = p.as_object_mut() {
                for (name, v) in map.iter_mut() {
                    // Exactly the params of `subs`: substituted, and strings.
                    if reads.substituted.contains(name) && v.is_string() {
                        *v = Value::String(placeholder(name));
                    }
                }
            }
            Cow::Owned(p)
        };
        let mut texts: Vec<Option<Arc<str>>> = vec![None; reads.entries.len()];
        let keys = (0..reads.entries.len())
            .map(|i| {
                let first = reads.same_reads[i];
                let text = match &texts[first] {
                    Some(t) => t.clone(),
                    None => {
                        let t: Arc<str> = Arc::from(params_key(&reads.entries[first], &params));
                        texts[first] = Some(t.clone());
                        t
                    }
                };
                (i, honor_include, text)
            })
            .collect();
        Prepared { subs, params, keys }
    }

    /// The bodies of the `wanted` entries as rendered with `prepared.params` (placeholders
    /// not replaced): `Some(None)` for an entry its `include` leaves out, `None` for an entry
    /// not wanted.
    fn raw_bodies(
        &self,
        prepared: &Prepared<'_>,
        honor_include: bool,
        wanted: &[bool],
    ) -> Result<Vec<Option<Body>>, Error> {
        let keys = &prepared.keys;
        // Always: a fragment that fails for these params fails the render (see `reads`).
        let (scope, frags) = self.render_fragments(&prepared.params)?;
        let mut rendered: Vec<Option<Body>> = match self.cache.entries.lock() {
            Ok(c) => keys
                .iter()
                .zip(wanted)
                .map(|(k, w)| {
                    let (body, cost) = c.get(k).filter(|_| *w)?;
                    crate::cost::charge_document(*cost).then(|| (body.clone(), *cost))
                })
                .collect(),
            Err(_) => vec![None; keys.len()],
        };
        let missing = |r: &[Option<Body>], i: usize| wanted[i] && r[i].is_none();
        if (0..keys.len()).any(|i| missing(&rendered, i)) {
            let mut fresh = Vec::new();
            for i in 0..keys.len() {
                if missing(&rendered, i) {
                    let (body, cost) = crate::cost::counted(|| {
                        self.render_entry(&self.entries[i], &scope, &frags.0, honor_include)
                    });
                    let body = body?.map(Arc::new);
                    fresh.push((i, (body.clone(), cost)));
                    rendered[i] = Some((body, cost));
                }
            }
            if let Ok(mut c) = self.cache.entries.lock() {
                if c.len() + fresh.len() > TABLE_CACHE_ENTRIES {
                    c.clear();
                }
                for (i, body) in fresh {
                    c.insert(keys[i].clone(), body);
                }
            }
        }
        Ok(rendered)
    }

    /// The scope entries render in (`params` and `fragments`, both read in place) and the
    /// rendered fragments, which are cached like the entries.
    fn render_fragments(&self, params: &Value) -> Result<(Scope, Arc<RenderedFragments>), Error> {
        let key = params_key(&self.reads().fragments, params);
        let cached = self
            .cache
            .fragments
            .lock()
            .ok()
            .and_then(|c| c.get(&key).cloned())
            .filter(|(_, cost)| crate::cost::charge_document(*cost));
        let mut scope = Scope::new();
        scope.bind("params", params);
        let rendered = match cached {
            Some((r, _)) => r,
            None => {
                let (frags, cost) = crate::cost::counted(|| self.fragments_rendered(&mut scope));
                let r = Arc::new(frags?);
                if let Ok(mut c) = self.cache.fragments.lock() {
                    if c.len() >= TABLE_CACHE_ENTRIES {
                        c.clear();
                    }
                    c.insert(key, (r.clone(), cost));
                }
                r
            }
        };
        scope.bind_shared("fragments", rendered.1.clone());
        Ok((scope, rendered))
    }

    /// The table's fragments rendered in `scope` (which binds `params`), in order.
    fn fragments_rendered(&self, scope: &mut Scope) -> Result<RenderedFragments, Error> {
        let mut frags = Fragments::new();
        for (name, t) in &self.fragments {
            bind_fragments_read(scope, t, &frags);
            let v = t.render(scope, &frags).map_err(|message| Error::Pack {
                file: self.source.name.clone(),
                pos: None,
                rule: None,
                message: format!("fragment {name}: {message}"),
            })?;
            frags.insert(name.clone(), v);
        }
        let shared = Arc::new(Value::Object(frags.clone().into_iter().collect()));
        Ok((frags, shared))
    }

    /// One entry's body, or `None` when its `include` (honoured) is false.
    fn render_entry(
        &self,
        e: &crate::pack::TableEntry,
        scope: &Scope,
        frags: &Fragments,
        honor_include: bool,
    ) -> Result<Option<Value>, Error> {
        let err = |message: String| Error::Pack {
            file: self.source.name.clone(),
            pos: Some(e.pos),
            rule: Some(crate::error::Inside::Entry(e.id.clone())),
            message,
        };
        if let Some(inc) = e.include.as_ref().filter(|_| honor_include)
            && !inc
                .eval_bool(scope)
                .map_err(|m| err(format!("include: {m}")))?
        {
            return Ok(None);
        }
        let value = e.body.render(scope, frags).map_err(|e| err(e.message))?;
        // A row whose values are rendered is checked against the row schema as rendered (a
        // literal row was checked when the set loaded): `gpusPerNode: "${{ 0 }}"` is refused
        // as `gpusPerNode: 0` is.
        let schema = match self.schema.as_ref().filter(|_| !e.body.is_literal()) {
            Some(s) => Some(s.get()?),
            None => None,
        };
        if let Some(schema) = schema
            && let Some(bad) = schema.iter_errors(&value).next()
        {
            let tokens: Vec<String> = bad
                .instance_path()
                .as_str()
                .split('/')
                .skip(1)
                .map(|t| crate::source::unescape_pointer(t).into_owned())
                .collect();
            // At the value written in the row, when the path reads back there.
            let mut path = FieldPath::root().key("entries").index(e.index);
            let mut rel = FieldPath::root();
            for t in &tokens {
                match t.parse::<usize>() {
                    Ok(i) => {
                        path = path.index(i);
                        rel = rel.index(i);
                    }
                    Err(_) => {
                        path = path.key(t.clone());
                        rel = rel.key(t.clone());
                    }
                }
            }
            let at = if tokens.is_empty() {
                String::new()
            } else {
                format!(" at {rel}")
            };
            return Err(Error::Pack {
                file: self.source.name.clone(),
                pos: self.spans.lookup(&path).or(Some(e.pos)),
                rule: Some(crate::error::Inside::Entry(e.id.clone())),
                message: format!(
                    "the row as rendered does not match the schema of table {:?}{at}: {bad}",
                    self.name
                ),
            });
        }
        Ok(Some(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::RuleSet;
    use crate::source::{Source, parse_documents};
    use serde_json::json;

    /// A document with no spans, as the tests without source text give it.
    const IN: Origin<'static> = Origin {
        file: "in.yaml",
        document: 0,
        spans: None,
    };

    const HEAD: &str =
        "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: RulePack\nmetadata:\n  name: p\n";

    /// Runs the pack `body` on the YAML document `doc`: the findings as
    /// `severity rule-id [fieldPath@line:col] message`, and the document after mutations.
    fn run(body: &str, doc: &str) -> (Vec<String>, Value) {
        let out = run_findings(body, doc);
        let findings = out
            .findings
            .iter()
            .map(|f| {
                let at = match (&f.field_path, f.line, f.column) {
                    (Some(p), Some(l), Some(c)) => format!(" [{p}@{l}:{c}]"),
                    (Some(p), _, _) => format!(" [{p}]"),
                    _ => String::new(),
                };
                format!("{} {}{at} {}", f.severity, f.rule_id, f.message)
            })
            .collect();
        (findings, out.value)
    }

    /// Runs the pack `body` on the first YAML document of `docs`, with `objects` when given:
    /// the whole outcome.
    fn run_findings_in(body: &str, docs: &str, objects: Option<&Objects>) -> Outcome {
        let set = RuleSet::from_sources(&[Source::new("rules/p.yaml", format!("{HEAD}{body}"))])
            .expect("pack loads");
        let input = Source::new("in.yaml", docs);
        let docs = parse_documents(&input).expect("documents parse");
        let origin = Origin {
            file: "in.yaml",
            document: 0,
            spans: Some(&docs[0].spans),
        };
        set.packs()[0]
            .evaluate_in(&docs[0].value, origin, &Value::Null, objects)
            .expect("evaluates")
    }

    /// [`run_findings_in`] without `objects`.
    fn run_findings(body: &str, doc: &str) -> Outcome {
        run_findings_in(body, doc, None)
    }

    const NO_LABELS: &str = "kind: Job\nmetadata:\n  name: j\nspec:\n  image: x\n";

    /// Runs `body` on the first document of `docs` with `objects`: the findings as
    /// `rule-id [fieldPath@line:col] message`.
    fn run_in(body: &str, docs: &str, objects: Option<&Objects>) -> Vec<String> {
        run_findings_in(body, docs, objects)
            .findings
            .iter()
            .map(|f| {
                let at = match (&f.field_path, f.line, f.column) {
                    (Some(p), Some(l), Some(c)) => format!(" [{p}@{l}:{c}]"),
                    _ => String::new(),
                };
                format!("{}{at} {}", f.rule_id, f.message)
            })
            .collect()
    }

    const REFERS: &str = "rules:\n- id: referent\n  variables:\n  - {name: ref, expression: object.spec.ref}\n  validate:\n    expression: objects.exists(o, o.kind == 'Target' && o.metadata.name == variables.ref)\n    messageExpression: \"'no Target ' + goQuote(variables.ref) + ' among ' + string(size(objects)) + ' objects'\"\n    fieldPath: spec.ref\n- id: plain\n  validate: {expression: object.kind == 'Job', message: not a job}\n";
    /// Names `objects` in the branch of `||` it does not take on a Job.
    const GUARDED: &str = "rules:\n- id: guarded\n  validate:\n    expression: \"object.kind == 'Job' || size(objects) > 0\"\n    message: unreachable\n";
    const TWO: &str =
        "kind: Job\nmetadata: {name: j}\nspec: {ref: t}\n---\nkind: Target\nmetadata: {name: t}\n";

    #[test]
    fn objects_lists_the_documents_of_the_input_and_a_missing_referent_is_a_finding() {
        let input = Source::new("in.yaml", TWO);
        let docs = parse_documents(&input).expect("parses");
        let values: Vec<Value> = docs.iter().map(|d| d.value.clone()).collect();
        let all = Objects::new(values.clone());
        assert_eq!(all.len(), Some(2));
        assert_eq!(run_in(REFERS, TWO, Some(&all)), Vec::<String>::new());
        let alone = Objects::new(values[..1].to_vec());
        assert_eq!(
            run_in(REFERS, TWO, Some(&alone)),
            ["referent [spec.ref@3:13] no Target \"t\" among 1 objects"]
        );
    }

    #[test]
    fn unavailable_or_unbound_objects_fail_only_the_rules_that_read_them() {
        let none = Objects::unavailable("objects: in.yaml is too large");
        assert_eq!(none.len(), None);
        assert_eq!(
            run_in(REFERS, TWO, Some(&none)),
            [
                "referent [spec.ref@3:13] rule referent could not be evaluated at spec.ref: objects: in.yaml is too large (a rule error, not a policy violation)"
            ]
        );
        // A rule that names them in a branch it does not take runs.
        assert_eq!(run_in(GUARDED, TWO, Some(&none)), Vec::<String>::new());
        let unbound = run_in(REFERS, TWO, None);
        assert_eq!(
            unbound,
            [
                "referent [spec.ref@3:13] rule referent could not be evaluated at spec.ref: Undeclared reference to 'objects' (expression: objects.exists(o, o.kind == 'Target' && o.metadata.name == variables.ref)) (a rule error, not a policy violation)"
            ]
        );
    }

    /// Deferred documents are made when a rule first reads them, once for every document of
    /// the input; a rule that does not reach them (the other branch of a conditional) leaves
    /// them unmade; documents that cannot be made fail the rules that read them, closed.
    #[test]
    fn deferred_objects_are_made_on_the_first_read_only() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let input = Source::new("in.yaml", TWO);
        let values: Vec<Value> = parse_documents(&input)
            .expect("parses")
            .iter()
            .map(|d| d.value.clone())
            .collect();
        let made = Arc::new(AtomicUsize::new(0));
        let deferred = |values: Result<Vec<Value>, String>| {
            let made = made.clone();
            Objects::deferred(move || {
                made.fetch_add(1, Ordering::SeqCst);
                values
            })
        };
        // Not reached: `object.kind == 'Job'` holds, so `objects` is never read.
        let o = deferred(Ok(values.clone()));
        assert_eq!(run_in(GUARDED, TWO, Some(&o)), Vec::<String>::new());
        assert_eq!(made.load(Ordering::SeqCst), 0);
        // Read by two documents' checks: made once.
        assert_eq!(run_in(REFERS, TWO, Some(&o)), Vec::<String>::new());
        assert_eq!(run_in(REFERS, TWO, Some(&o)), Vec::<String>::new());
        assert_eq!(made.load(Ordering::SeqCst), 1);
        assert_eq!(o.len(), Some(2));
        // Not made: the rule that reads them fails; the other passes.
        let lost = deferred(Err(
            "objects: a document of in.yaml could not be read again".into(),
        ));
        assert_eq!(
            run_in(REFERS, TWO, Some(&lost)),
            [
                "referent [spec.ref@3:13] rule referent could not be evaluated at spec.ref: objects: a document of in.yaml could not be read again (a rule error, not a policy violation)"
            ]
        );
        assert_eq!(lost.len(), None);
    }

    /// A `when` that does not read the item is evaluated before a computed `forEach.in`:
    /// false, the rule is skipped without its items (whose expression would fail here); true,
    /// it runs as ever. Items that are only selected come first, as before.
    #[test]
    fn a_when_that_does_not_read_the_item_is_evaluated_before_the_items() {
        let rule = |when: &str| {
            format!(
                "rules:\n- id: r\n  when: \"{when}\"\n  forEach: {{in: 'object.spec.missing.map(m, m)', as: x}}\n  validate: {{expression: 'true', message: m}}\n"
            )
        };
        assert_eq!(
            run(&rule("object.kind == 'Pod'"), NO_LABELS).0,
            Vec::<String>::new()
        );
        assert_eq!(
            run(&rule("object.kind == 'Job'"), NO_LABELS).0,
            [
                "error r rule r could not be evaluated on document 1: forEach.in: No such key: missing (expression: object.spec.missing.map(m, m)) (a rule error, not a policy violation)"
            ]
        );
        let selected = rule("object.kind == 'Pod'")
            .replace("'object.spec.missing.map(m, m)'", "object.spec.missing");
        assert_eq!(
            run(&selected, NO_LABELS).0,
            [
                "error r rule r could not be evaluated on document 1: forEach.in: No such key: missing (expression: object.spec.missing) (a rule error, not a policy violation)"
            ]
        );
        // The rule's own variables do not stop it, unless `when` reads one (they are bound
        // per item).
        let with_variables = |when: &str| {
            rule(when).replace(
                "  validate:",
                "  variables: [{name: v, expression: 'x'}]\n  validate:",
            )
        };
        assert_eq!(
            run(&with_variables("object.kind == 'Pod'"), NO_LABELS).0,
            Vec::<String>::new()
        );
        assert_eq!(
            run(
                &with_variables("variables.v == 1 && object.kind == 'Pod'"),
                NO_LABELS
            )
            .0,
            [
                "error r rule r could not be evaluated on document 1: forEach.in: No such key: missing (expression: object.spec.missing.map(m, m)) (a rule error, not a policy violation)"
            ]
        );
        // A `when` that reads the item is evaluated per item, after the items.
        assert_eq!(
            run(&rule("x == 1 && object.kind == 'Pod'"), NO_LABELS).0,
            [
                "error r rule r could not be evaluated on document 1: forEach.in: No such key: missing (expression: object.spec.missing.map(m, m)) (a rule error, not a policy violation)"
            ]
        );
    }

    #[test]
    fn unavailable_objects_read_through_variables_report_the_reason_alone() {
        const CHAIN: &str = "variables:\n- {name: targets, expression: \"objects.filter(o, o.kind == 'Target')\"}\n- {name: names, expression: 'variables.targets.map(t, t.metadata.name)'}\nrules:\n- id: chained\n  validate:\n    expression: variables.names.exists(n, n == object.spec.ref)\n    message: missing\n";
        let none = Objects::unavailable("objects: in.yaml is too large");
        assert_eq!(
            run_in(CHAIN, TWO, Some(&none)),
            [
                "chained rule chained could not be evaluated on document 1: objects: in.yaml is too large (a rule error, not a policy violation)"
            ]
        );
    }

    /// Whichever view a pack binds first takes the documents and the other is copied from it:
    /// both read the same, in input order, documents without a kind included in the list.
    #[test]
    fn objects_and_objects_by_kind_read_alike_whichever_is_built_first() {
        const LIST: &str = "rules:\n- id: list\n  validate:\n    expression: 'false'\n    messageExpression: \"objects.map(o, o.?metadata.?name.orValue('-')).join(',')\"\n";
        const BY_KIND: &str = "rules:\n- id: by-kind\n  validate:\n    expression: 'false'\n    messageExpression: \"objectsByKind.map(k, k + '=' + objectsByKind[k].map(o, o.metadata.name).join(',')).join(' ')\"\n";
        const BOTH: &str = "rules:\n- id: both\n  validate:\n    expression: 'false'\n    messageExpression: \"string(size(objects)) + ' ' + string(size(objectsByKind))\"\n";
        let docs = "kind: Job\nmetadata: {name: j}\n---\nkind: Target\nmetadata: {name: t1}\n---\nmetadata: {name: no-kind}\n---\nkind: Target\nmetadata: {name: t2}\n";
        let values = || -> Vec<Value> {
            parse_documents(&Source::new("in.yaml", docs))
                .expect("parses")
                .into_iter()
                .map(|d| d.value)
                .collect()
        };
        let list = ["list j,t1,no-kind,t2"];
        let by_kind = ["by-kind Job=j Target=t1,t2"];
        // The map first (it takes the documents), then the list copied back from it.
        let o = Objects::new(values());
        assert_eq!(run_in(BY_KIND, docs, Some(&o)), by_kind);
        assert_eq!(run_in(LIST, docs, Some(&o)), list);
        assert_eq!(run_in(BY_KIND, docs, Some(&o)), by_kind);
        // The list first, then the map copied from it.
        let o = Objects::new(values());
        assert_eq!(run_in(LIST, docs, Some(&o)), list);
        assert_eq!(run_in(BY_KIND, docs, Some(&o)), by_kind);
        // Both in one pack; and on every core at once.
        let o = Objects::new(values());
        assert_eq!(run_in(BOTH, docs, Some(&o)), ["both 4 2"]);
        let o = Objects::new(values());
        std::thread::scope(|t| {
            for body in [LIST, BY_KIND, LIST, BY_KIND] {
                let o = &o;
                t.spawn(move || {
                    let want: &[&str] = if body == LIST { &list } else { &by_kind };
                    assert_eq!(run_in(body, docs, Some(o)), want);
                });
            }
        });
        assert_eq!(o.len(), Some(4));
    }

    #[test]
    fn objects_by_kind_holds_the_documents_of_each_kind_in_input_order() {
        const BY_KIND: &str = "rules:\n- id: by-kind\n  validate:\n    expression: 'false'\n    messageExpression: \"objectsByKind.map(k, k + '=' + objectsByKind[k].map(o, o.?metadata.?name.orValue('-')).join(',')).join(' ') + ' ' + string(size(objectsByKind[?'Pod'].orValue([])))\"\n";
        let docs = "kind: Job\nmetadata: {name: j}\n---\nkind: Target\nmetadata: {name: t1}\n---\nmetadata: {name: no-kind}\n---\nkind: 3\n---\nkind: Target\nmetadata: {name: t2}\n";
        let input = Source::new("in.yaml", docs);
        let values: Vec<Value> = parse_documents(&input)
            .expect("parses")
            .into_iter()
            .map(|d| d.value)
            .collect();
        let all = Objects::new(values);
        assert_eq!(
            run_in(BY_KIND, docs, Some(&all)),
            ["by-kind Job=j Target=t1,t2 0"]
        );
        let none = Objects::unavailable("objects: in.yaml is too large");
        assert_eq!(
            run_in(BY_KIND, docs, Some(&none)),
            [
                "by-kind rule by-kind could not be evaluated on document 1: objects: in.yaml is too large (a rule error, not a policy violation)"
            ]
        );
    }

    #[test]
    fn a_failing_pack_variable_fails_every_rule_that_reads_it() {
        let (findings, _) = run(
            "variables:\n- {name: owner, expression: \"object.metadata.labels['team']\"}\nrules:\n- id: not-root\n  validate:\n    expression: variables.owner != 'root'\n    fieldPath: metadata.name\n- id: also-reads\n  when: variables.owner == 'x'\n  validate: {expression: 'false', message: never}\n- id: image\n  validate: {expression: object.spec.image == 'y', message: wrong image}\n",
            NO_LABELS,
        );
        assert_eq!(
            findings,
            [
                "error not-root [metadata.name@3:9] rule not-root could not be evaluated at metadata.name: variable \"owner\" (object.metadata.labels['team']) failed: No such key: labels (a rule error, not a policy violation)",
                "error also-reads rule also-reads could not be evaluated on document 1: variable \"owner\" (object.metadata.labels['team']) failed: No such key: labels (a rule error, not a policy violation)",
                "error image wrong image",
            ]
        );
    }

    #[test]
    fn a_failing_rule_variable_fails_its_rule() {
        let (findings, _) = run(
            "rules:\n- id: not-root\n  variables:\n  - {name: team, expression: \"object.metadata.labels['team']\"}\n  validate: {expression: variables.team != 'root'}\n- id: named\n  validate: {expression: object.metadata.name == 'j'}\n",
            NO_LABELS,
        );
        assert_eq!(
            findings,
            [
                "error not-root rule not-root could not be evaluated on document 1: variable \"team\" (object.metadata.labels['team']) failed: No such key: labels (a rule error, not a policy violation)"
            ]
        );
    }

    #[test]
    fn a_failing_fragment_fails_the_rules_that_read_or_insert_it() {
        let (findings, out) = run(
            "fragments:\n  ownerEnv: [{name: OWNER, value: \"${{ object.metadata.labels['team'] }}\"}]\n  imageEnv: [{name: IMAGE, value: \"${{ object.spec.image }}\"}]\nrules:\n- id: reads\n  validate: {expression: size(fragments.ownerEnv) == 1}\n- id: inserts\n  mutate:\n  - append: {path: spec.env, values: [{$fragment: ownerEnv}]}\n- id: fine\n  validate: {expression: \"fragments['imageEnv'][0].value == 'x'\"}\n  mutate:\n  - append: {path: spec.env, values: [{$fragment: imageEnv}]}\n",
            NO_LABELS,
        );
        let why = "fragment \"ownerEnv\" failed: evaluating ${{ object.metadata.labels['team'] }}: No such key: labels";
        assert_eq!(
            findings,
            [
                format!(
                    "error reads rule reads could not be evaluated on document 1: {why} (a rule error, not a policy violation)"
                ),
                format!(
                    "error inserts rule inserts could not be evaluated on document 1: {why} (a rule error, not a policy violation)"
                ),
            ]
        );
        assert_eq!(out["spec"]["env"], json!([{"name": "IMAGE", "value": "x"}]));
    }

    #[test]
    fn a_pack_fragment_inserts_another_and_an_unknown_one_is_refused_where_written() {
        let (findings, out) = run(
            "fragments:\n  both: [{$fragment: one}, {name: B, value: b}]\n  one: [{name: A, value: \"${{ object.spec.image }}\"}]\nrules:\n- id: adds\n  mutate:\n  - append: {path: spec.env, values: [{$fragment: both}]}\n",
            NO_LABELS,
        );
        assert!(findings.is_empty(), "{findings:?}");
        assert_eq!(
            out["spec"]["env"],
            json!([{"name": "A", "value": "x"}, {"name": "B", "value": "b"}])
        );
        let text = format!(
            "{HEAD}stage: s\nfragments:\n  one: [{{$fragment: tow}}]\nrules:\n- id: adds\n  mutate:\n  - append: {{path: spec.env, values: [{{$fragment: onee}}]}}\n"
        );
        let err = RuleSet::from_sources(&[Source::new("rules/p.yaml", text)]).expect_err("refused");
        assert_eq!(
            err.errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            [
                "rule pack error: rules/p.yaml:7:21: {$fragment: tow} names no fragment of this file",
                "rule pack error: rules/p.yaml:11:51: rule adds: {$fragment: onee} names no fragment of this file",
            ]
        );
    }

    /// The CEL cost units evaluating `body` on `doc` used, and its findings.
    fn units(body: &str, doc: &str) -> (Option<u64>, Vec<String>) {
        let _open = crate::cost::DocumentBudget::open();
        let (findings, _) = run(body, doc);
        (crate::cost::DocumentBudget::used(), findings)
    }

    /// A rule whose write does not apply leaves the pack's scope as it was: the variables it
    /// evaluated are not evaluated (and charged) again. A write that applies binds the new
    /// document, so they are.
    #[test]
    fn a_write_that_does_not_apply_keeps_the_evaluated_variables() {
        let doc = "kind: Job\nmetadata: {name: j}\nspec:\n  l: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n";
        let vars = "variables:\n- {name: all, expression: 'object.spec.l.all(x, x > 0)'}\n";
        let read = |id: &str| {
            format!("- id: {id}\n  validate: {{expression: variables.all, message: m}}\n")
        };
        let failing = format!(
            "{vars}rules:\n{}- id: w\n  mutate:\n  - jsonPatch: [{{op: remove, path: /spec/nope}}]\n{}",
            read("a"),
            read("b")
        );
        let (used, findings) = units(&failing, doc);
        assert_eq!(used, Some(10));
        assert_eq!(findings.len(), 1, "{findings:?}");
        let applying = format!(
            "{vars}rules:\n{}- id: w\n  mutate:\n  - merge: {{path: metadata.labels, value: {{a: b}}}}\n{}",
            read("a"),
            read("b")
        );
        assert_eq!(units(&applying, doc), (Some(20), vec![]));
    }

    #[test]
    fn a_variable_is_evaluated_once_when_first_read_and_never_when_unread() {
        let doc = "kind: Job\nmetadata: {name: j}\nspec:\n  l: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n";
        // Each costs 10 units, one per element.
        let vars = "variables:\n- {name: all, expression: 'object.spec.l.all(x, x > 0)'}\n- {name: unread, expression: 'object.spec.l.map(x, x * 2)'}\n";
        let two_readers = format!(
            "{vars}rules:\n- id: a\n  validate: {{expression: variables.all, message: m}}\n- id: b\n  when: variables.all\n  validate: {{expression: \"object.kind == 'Job'\", message: m}}\n"
        );
        assert_eq!(units(&two_readers, doc), (Some(10), vec![]));
        let no_reader = format!(
            "{vars}rules:\n- id: a\n  validate: {{expression: \"object.kind == 'Job'\", message: m}}\n"
        );
        assert_eq!(units(&no_reader, doc), (Some(0), vec![]));
        // Read whole, `variables` evaluates every variable.
        let whole = format!(
            "{vars}rules:\n- id: a\n  validate: {{expression: \"size(variables) == 2\", message: m}}\n"
        );
        assert_eq!(units(&whole, doc), (Some(20), vec![]));
    }

    #[test]
    fn a_variable_read_by_a_rule_of_a_for_each_is_evaluated_per_item_in_its_scope() {
        let (findings, _) = run(
            "rules:\n- id: each\n  forEach: {in: object.spec.l, as: x}\n  variables:\n  - {name: twice, expression: x * 2}\n  - {name: big, expression: variables.twice > 10}\n  validate: {expression: '!variables.big', messageExpression: \"'item ' + string(x) + ' doubled is ' + string(variables.twice)\"}\n",
            "kind: Job\nmetadata: {name: j}\nspec:\n  l: [4, 6, 5, 9]\n",
        );
        assert_eq!(
            findings,
            [
                "error each item 6 doubled is 12",
                "error each item 9 doubled is 18"
            ]
        );
    }

    #[test]
    fn a_long_chain_of_variables_neither_recurses_nor_drops_recursively() {
        const N: usize = 20_000;
        let mut body = String::from("variables:\n- {name: v0, expression: object.spec.n}\n");
        for k in 1..N {
            body.push_str(&format!(
                "- {{name: v{k}, expression: variables.v{} + 1}}\n",
                k - 1
            ));
        }
        body.push_str(&format!(
            "rules:\n- id: last\n  validate: {{expression: variables.v{} == 0, messageExpression: string(variables.v{})}}\n",
            N - 1,
            N - 1
        ));
        let set = RuleSet::from_sources(&[Source::new("rules/p.yaml", format!("{HEAD}{body}"))])
            .expect("pack loads");
        let input = Source::new("in.yaml", "kind: Job\nmetadata: {name: j}\nspec: {n: 1}\n");
        let docs = parse_documents(&input).expect("document parses");
        let value = docs[0].value.clone();
        // Evaluated on a thread with a small stack: forcing or dropping 20,000 nested
        // bindings recursively would overflow it.
        let findings = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                let origin = IN;
                let out = set.packs()[0]
                    .evaluate(&value, origin, &Value::Null)
                    .expect("evaluates");
                let messages: Vec<String> = out
                    .findings
                    .iter()
                    .map(|f| format!("{} {}", f.rule_id, f.message))
                    .collect();
                drop(set);
                messages
            })
            .expect("spawns")
            .join()
            .expect("does not overflow");
        assert_eq!(findings, [format!("last {N}")]);
    }

    #[test]
    fn a_variable_that_reads_a_failed_variable_fails_too() {
        let (findings, _) = run(
            "variables:\n- {name: owner, expression: \"object.metadata.labels['team']\"}\n- {name: shout, expression: variables.owner.upperAscii()}\n- {name: image, expression: object.spec.image}\nrules:\n- id: shout\n  validate: {expression: variables.shout != 'ROOT'}\n- id: image\n  validate: {expression: variables.image == 'x'}\n",
            NO_LABELS,
        );
        assert_eq!(
            findings,
            [
                "error shout rule shout could not be evaluated on document 1: variable \"shout\" (variables.owner.upperAscii()) failed: variable \"owner\" (object.metadata.labels['team']) failed: No such key: labels (a rule error, not a policy violation)"
            ]
        );
    }

    #[test]
    fn an_absent_optional_is_not_an_error() {
        let (findings, _) = run(
            "variables:\n- {name: owner, expression: \"object.?metadata.?labels[?'team'].orValue(null)\"}\n- {name: team, expression: \"object.?metadata.?labels.?team.orValue('none')\"}\n- {name: maybe, expression: \"object.?metadata.?labels[?'team']\"}\nrules:\n- id: maybe\n  validate: {expression: \"!variables.maybe.hasValue()\"}\n- id: not-root\n  validate: {expression: variables.owner != 'root'}\n- id: team\n  validate: {expression: variables.team == 'none'}\n",
            NO_LABELS,
        );
        assert_eq!(findings, Vec::<String>::new());
    }

    #[test]
    fn a_guard_that_does_not_read_the_failed_variable_still_skips_the_rule() {
        // Each expression fails when it reads a failed variable, so a `when` that does not
        // read it decides first.
        let (findings, _) = run(
            "variables:\n- {name: owner, expression: \"object.metadata.labels['team']\"}\nrules:\n- id: guarded\n  when: has(object.metadata.labels)\n  validate: {expression: variables.owner != 'root'}\n",
            NO_LABELS,
        );
        assert_eq!(findings, Vec::<String>::new());
    }

    /// An index named as the item, and a rule without an id, are refused at load.
    #[test]
    fn an_index_named_as_the_item_and_an_empty_id_are_refused() {
        for (body, want) in [
            (
                "rules:\n- id: same\n  forEach: {in: \"[1]\", as: x, index: x}\n  validate: {expression: 'true'}\n",
                "rule pack error: rules/p.yaml:7:38: rule same: \"x\" is the item's name too (forEach.as): the index would hide the item; choose another name",
            ),
            (
                "rules:\n- id: ''\n  validate: {expression: 'true'}\n",
                "rule pack error: rules/p.yaml:6:7: a rule needs a non-empty id: findings, rules explain and test suites name it",
            ),
        ] {
            let err =
                RuleSet::from_sources(&[Source::new("rules/p.yaml", format!("{HEAD}{body}"))])
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
            assert_eq!(err, want);
        }
    }

    /// Over a map, `index` is the key's position in sorted order (it was never bound, so every
    /// evaluation that read it was a rule error).
    #[test]
    fn a_foreach_over_a_map_binds_the_index_of_each_sorted_key() {
        let (findings, _) = run(
            "rules:\n- id: keys\n  forEach: {in: object.labels, as: k, index: i}\n  validate: {expression: 'false', messageExpression: \"k + ' ' + string(i)\"}\n",
            "kind: A\nlabels: {zeta: z, alpha: a}\n",
        );
        assert_eq!(findings, ["error keys alpha 0", "error keys zeta 1"]);
    }

    /// A `forEach` item named so that no expression could read it as the item (`__variables__x`
    /// is how `variables.x` is read) is refused when the pack loads, at the name.
    #[test]
    fn a_foreach_name_no_expression_can_read_is_refused_at_load() {
        for (field, name, why) in [
            (
                "as",
                "__variables__x",
                "starts with __, which is reserved for the engine's own names",
            ),
            ("as", "variables", "names the rule's variables"),
            (
                "as",
                "object",
                "names what the rule's expressions read (object, params, fragments, objects, objectsByKind), which the item would hide",
            ),
            (
                "index",
                "1x",
                "is not a CEL identifier (a letter or _, then letters, digits or _)",
            ),
        ] {
            let body = format!(
                "variables: [{{name: x, expression: object}}]\nrules:\n- id: clash\n  forEach: {{in: \"[1]\", as: item, {field}: '{name}'}}\n  validate: {{expression: 'true'}}\n"
            )
            .replacen("as: item, as:", "as:", 1);
            let err =
                RuleSet::from_sources(&[Source::new("rules/p.yaml", format!("{HEAD}{body}"))])
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
            assert!(
                err.contains(&format!(
                    "rule clash: \"{name}\" {why}: choose another name for the item"
                )),
                "{name}: {err}"
            );
        }
        // Names that are identifiers load, and bind the item and its index.
        let (findings, _) = run(
            "rules:\n- id: fine\n  forEach: {in: \"[7]\", as: _item, index: i2}\n  validate: {expression: 'false', messageExpression: \"'item ' + string(_item) + ' at ' + string(i2)\"}\n",
            "kind: A\n",
        );
        assert_eq!(findings, ["error fine item 7 at 0"]);
    }

    #[test]
    fn a_finding_points_at_the_key_when_the_rule_says_so() {
        // `at: key` and `atExpression` point at the key of the path's last entry (a bad label
        // key), `value` or nothing at the value; anything else is a rule error.
        let doc = "kind: A\nmetadata:\n  labels:\n    \"bad key\": x\n";
        let rule = |at: &str| {
            format!(
                "rules:\n- id: r\n  validate: {{expression: 'false', message: m, fieldPath: 'metadata.labels[\"bad key\"]'{at}}}\n"
            )
        };
        let at = |extra: &str| run(&rule(extra), doc).0;
        let path = "metadata.labels[\"bad key\"]";
        assert_eq!(at(""), [format!("error r [{path}@4:16] m")]);
        assert_eq!(at(", at: value"), [format!("error r [{path}@4:16] m")]);
        assert_eq!(at(", at: key"), [format!("error r [{path}@4:5] m")]);
        assert_eq!(
            at(
                ", atExpression: \"object.metadata.labels.all(k, k.contains(' ')) ? 'key' : 'value'\""
            ),
            [format!("error r [{path}@4:5] m")]
        );
        assert_eq!(
            at(", atExpression: \"'there'\""),
            [format!(
                "error r [{path}@4:16] rule r could not be evaluated at {path}: atExpression: it gave \"there\", not \"key\" or \"value\" (expression: 'there') (a rule error, not a policy violation)"
            )]
        );
        let err = RuleSet::from_sources(&[Source::new(
            "rules/p.yaml",
            format!("{HEAD}{}", rule(", at: name")),
        )])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(
            err.contains("rule r: at must be key or value, got \"name\""),
            "{err}"
        );
    }

    #[test]
    fn a_failed_variable_is_reported_once_per_rule_not_once_per_item() {
        let (findings, _) = run(
            "variables:\n- {name: owner, expression: \"object.metadata.labels['team']\"}\nrules:\n- id: each\n  forEach: {in: \"['a', 'b', 'c']\", as: x}\n  validate: {expression: x != variables.owner}\n",
            NO_LABELS,
        );
        assert_eq!(
            findings,
            [
                "error each rule each could not be evaluated on document 1: variable \"owner\" (object.metadata.labels['team']) failed: No such key: labels (a rule error, not a policy violation)"
            ]
        );
    }

    #[test]
    fn a_message_or_field_path_that_cannot_be_computed_is_a_rule_error() {
        let rule = |validate: &str| {
            run(
                &format!(
                    "variables:\n- {{name: owner, expression: \"object.metadata.labels['team']\"}}\nrules:\n- id: r\n  severity: warning\n  validate: {{expression: 'false', {validate}}}\n"
                ),
                NO_LABELS,
            )
            .0
        };
        assert_eq!(
            rule("messageExpression: \"'owner ' + variables.owner\""),
            [
                "error r rule r could not be evaluated on document 1: variable \"owner\" (object.metadata.labels['team']) failed: No such key: labels (a rule error, not a policy violation)"
            ]
        );
        assert_eq!(
            rule("messageExpression: '1 + 1'"),
            [
                "error r rule r could not be evaluated on document 1: messageExpression: it gave an int, not a string (expression: 1 + 1) (a rule error, not a policy violation)"
            ]
        );
        assert_eq!(
            rule("message: m, fieldPathExpression: \"'metadata.labels.' + variables.owner\""),
            [
                "error r rule r could not be evaluated on document 1: variable \"owner\" (object.metadata.labels['team']) failed: No such key: labels (a rule error, not a policy violation)"
            ]
        );
        assert_eq!(
            rule("message: m, fieldPathExpression: \"object.spec.nope\""),
            [
                "error r rule r could not be evaluated on document 1: fieldPathExpression: No such key: nope (expression: object.spec.nope) (a rule error, not a policy violation)"
            ]
        );
        assert_eq!(
            rule("message: m, fieldPathExpression: \"'a[['\""),
            [
                "error r rule r could not be evaluated on document 1: fieldPathExpression: it gave \"a[[\", which is not a field path: bad index at 2 in \"a[[\" (expression: 'a[[') (a rule error, not a policy violation)"
            ]
        );
        assert_eq!(
            rule("message: m, fieldPath: metadata.name"),
            ["warning r [metadata.name@3:9] m"]
        );
    }

    #[test]
    fn a_mutation_that_does_not_apply_is_a_rule_error_and_the_document_is_unchanged() {
        let (findings, value) = run(
            "rules:\n- id: drop\n  mutate:\n  - jsonPatch: [{op: remove, path: /spec/nope}]\n",
            NO_LABELS,
        );
        assert_eq!(
            findings,
            [
                "error drop rule drop could not be evaluated on document 1: mutate: operation '/0' failed at path '/spec/nope': path is invalid (a rule error, not a policy violation)"
            ]
        );
        assert_eq!(value["spec"], json!({"image": "x"}));
    }

    /// Each item of a `forEach` that writes sees the document as the earlier items wrote it,
    /// and so do the later rules; the items write into one document (not a copy per item).
    #[test]
    fn for_each_writes_see_the_earlier_items_writes() {
        let body = concat!(
            "rules:\n",
            "- id: each\n  forEach: {in: object.spec.l, as: x}\n",
            "  variables: [{name: n, expression: \"size(object.metadata.?labels.orValue({}))\"}]\n",
            "  mutate:\n",
            "  - merge: {path: metadata.labels, value: {\"k${{ string(x) }}\": \"${{ string(variables.n) }}\"}}\n",
            "- id: after\n  validate:\n",
            "    expression: size(object.metadata.labels) == 0\n",
            "    messageExpression: \"string(size(object.metadata.labels)) + ' labels'\"\n",
        );
        let (findings, value) = run(body, "metadata: {name: a}\nspec: {l: [1, 2, 3]}\n");
        assert_eq!(
            value["metadata"]["labels"],
            json!({"k1": "0", "k2": "1", "k3": "2"})
        );
        assert_eq!(findings, vec!["error after 3 labels".to_string()]);
    }

    /// A run says where its writes landed: each merge and insert that applied, in order, across
    /// the packs (a `forEach` writing one place for every item: listed once); anywhere once a
    /// JSON Patch applied; a write that failed, or a rule whose `when` is false, adds nothing.
    #[test]
    fn a_run_says_where_its_writes_landed() {
        let places = |body: &str, doc: Value| {
            let set = RuleSet::from_sources(&[
                Source::new("rules/p.yaml", format!("{HEAD}{body}")),
                Source::new(
                    "rules/q.yaml",
                    format!(
                        "{HEAD}rules:\n- id: q\n  mutate:\n  - append: {{path: spec.q, values: [1]}}\n"
                    )
                    .replace("name: p", "name: q"),
                ),
            ])
            .expect("packs load");
            let origin = IN;
            let (_, _, written) = run_packs_written(
                set.packs().iter().map(|p| &**p),
                Cow::Owned(doc),
                origin,
                &Value::Null,
                None,
            )
            .expect("runs");
            written
        };
        let paths = |w: &Written| {
            w.places()
                .map(|p| p.iter().map(ToString::to_string).collect::<Vec<_>>())
        };
        let doc = json!({"metadata": {"name": "a"}, "spec": {"l": [1, 2], "s": "x"}});
        let merges = concat!(
            "rules:\n",
            "- id: each\n  forEach: {in: object.spec.l, as: x}\n  mutate:\n",
            "  - merge: {path: spec.t.m, value: {a: 1}}\n",
            "- id: never\n  when: \"false\"\n  mutate:\n  - merge: {path: metadata, value: {b: 1}}\n",
            "- id: fails\n  mutate:\n  - merge: {path: spec.s.x, value: {c: 1}}\n",
            "- id: front\n  mutate:\n  - prepend: {path: spec.l, values: [0]}\n",
        );
        let written = places(merges, doc.clone());
        assert_eq!(
            paths(&written),
            Some(vec![
                "spec.t.m".to_string(),
                "spec.l".to_string(),
                "spec.q".to_string(),
            ])
        );
        assert!(!written.is_nothing());
        assert!(written.only_below(&["spec"]));
        assert!(!written.only_below(&["spec", "t"]));
        assert!(!written.only_below(&["spec", "t", "m"]), "strictly below");
        assert!(!written.only_below(&["metadata"]));
        let patch = concat!(
            "rules:\n",
            "- id: patch\n  mutate:\n",
            "  - jsonPatch: [{op: move, from: /metadata/name, path: /spec/t}]\n",
        );
        let written = places(patch, doc.clone());
        assert_eq!(paths(&written), None);
        assert!(!written.only_below(&["spec"]));
        assert!(!written.is_nothing());
        let nothing = "rules:\n- id: never\n  when: \"false\"\n  mutate:\n  - merge: {path: metadata, value: {b: 1}}\n";
        let set = RuleSet::from_sources(&[Source::new("rules/p.yaml", format!("{HEAD}{nothing}"))])
            .expect("pack loads");
        let out = set.packs()[0]
            .evaluate(&doc, IN, &Value::Null)
            .expect("evaluates");
        assert!(out.written.is_nothing());
        assert_eq!(out.written.places(), Some(&[][..]));
    }

    /// Findings over a shared document are those of the copying runs, a write goes to a copy
    /// (the later rules and packs see it, the caller's document does not change), and the
    /// scopes let go of the document when they are done.
    #[test]
    fn findings_over_a_shared_document_leave_it_as_it_was() {
        let sees = concat!(
            "- id: sees\n  validate:\n",
            "    expression: object.metadata.labels.team == 'x'\n",
            "    messageExpression: \"'team ' + object.metadata.labels.team\"\n",
        );
        let writes = concat!(
            "rules:\n",
            "- id: label\n  mutate:\n",
            "  - merge: {path: metadata.labels, value: {team: \"${{ object.spec.team }}\"}}\n",
        );
        // `q` only reads: its finding can only come from `p`'s write.
        let set = RuleSet::from_sources(&[
            Source::new("rules/p.yaml", format!("{HEAD}{writes}{sees}")),
            Source::new(
                "rules/q.yaml",
                format!("{HEAD}rules:\n{sees}")
                    .replace("name: p", "name: q")
                    .replace("id: ", "id: q-"),
            ),
        ])
        .expect("packs load");
        let doc = json!({"metadata": {"name": "a"}, "spec": {"team": "ml"}});
        let origin = IN;
        let messages = |f: Vec<Finding>| f.into_iter().map(|f| f.message).collect::<Vec<_>>();
        let shared = Arc::new(doc.clone());
        let (_, copied) = run_packs(
            set.packs().iter().map(|p| &**p),
            Cow::Borrowed(&doc),
            origin,
            &Value::Null,
            None,
        )
        .expect("runs");
        let found = run_packs_findings(
            set.packs().iter().map(|p| &**p),
            &shared,
            origin,
            &Value::Null,
            None,
        )
        .expect("runs");
        assert_eq!(messages(copied), vec!["team ml", "team ml"]);
        assert_eq!(messages(found), vec!["team ml", "team ml"]);
        assert_eq!(
            messages(run_packs_findings([], &shared, origin, &Value::Null, None).expect("runs")),
            Vec::<String>::new()
        );
        // Each pack alone: `p` sees its own write, `q` a document without the label.
        for (pack, want) in set.packs().iter().zip(["team ml", "No such key: labels"]) {
            let alone = pack
                .findings_in(&shared, origin, &Value::Null, None)
                .expect("runs");
            let copied = pack
                .evaluate_in(&doc, origin, &Value::Null, None)
                .expect("runs");
            let alone = messages(alone);
            assert_eq!(alone, messages(copied.findings));
            assert!(alone[0].contains(want), "{alone:?}");
        }
        assert_eq!(*shared, doc);
        assert_eq!(Arc::strong_count(&shared), 1);
    }

    /// A rule without `forEach` whose writes are all sure to apply (merges along paths of
    /// mappings) writes into a document handed over, not a copy of it: its writes are rendered
    /// first, then the scopes that bind the document are let go of. The next rule sees the
    /// write; a write that fails to render and one that fails to apply are reported in the
    /// order of the writes.
    #[test]
    fn a_write_goes_into_the_document_handed_over_not_a_copy() {
        let rules = |patch: &str| {
            concat!(
                "rules:\n",
                "- id: label\n  variables: [{name: team, expression: object.spec.team}]\n",
                "  mutate:\n",
                "  - merge: {path: metadata.labels, value: {team: \"${{ variables.team }}\"}}\n",
                "  - merge: {path: metadata.labels, value: {bad: \"${{ 1 / 0 }}\"}}\n",
            )
            .to_string()
                + patch
                + concat!(
                    "- id: sees\n  validate:\n",
                    "    expression: object.metadata.labels.team == 'ml'\n    message: not seen\n",
                )
        };
        let run_owned = |body: &str| {
            let set =
                RuleSet::from_sources(&[Source::new("rules/p.yaml", format!("{HEAD}{body}"))])
                    .expect("pack loads");
            let doc =
                json!({"metadata": {"name": "a"}, "spec": {"team": "ml", "items": [1, 2, 3]}});
            let items = doc["spec"]["items"].as_array().map(|a| a.as_ptr());
            let origin = IN;
            let (value, findings) = run_packs(
                set.packs().iter().map(|p| &**p),
                Cow::Owned(doc),
                origin,
                &Value::Null,
                None,
            )
            .expect("runs");
            let value = value.into_owned();
            assert_eq!(value["metadata"]["labels"], json!({"team": "ml"}));
            let messages: Vec<String> = findings.into_iter().map(|f| f.message).collect();
            let same = value["spec"]["items"].as_array().map(|a| a.as_ptr()) == items;
            (same, messages)
        };
        let (in_place, messages) = run_owned(&rules(""));
        assert!(in_place, "the document was copied");
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert!(messages[0].contains("division by zero"), "{messages:?}");
        // A JSON Patch may fail: then the writes apply with the scope kept, in order.
        let (_, messages) = run_owned(&rules("  - jsonPatch: [{op: remove, path: /spec/nope}]\n"));
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(messages[0].contains("division by zero"), "{messages:?}");
        assert!(
            messages[1].contains("mutate: operation '/0' failed"),
            "{messages:?}"
        );
    }

    #[test]
    fn a_failing_when_or_for_each_names_its_own_expression() {
        assert_eq!(
            run(
                "rules:\n- id: each\n  forEach: {in: '1', as: x}\n  validate: {expression: 'true'}\n- id: guard\n  when: object.spec.nope\n  validate: {expression: 'true'}\n",
                NO_LABELS,
            )
            .0,
            [
                "error each rule each could not be evaluated on document 1: forEach.in: it must give a list or map, got an int (expression: 1) (a rule error, not a policy violation)",
                "error guard rule guard could not be evaluated on document 1: when: No such key: nope (expression: object.spec.nope) (a rule error, not a policy violation)",
            ]
        );
    }

    #[test]
    fn a_match_condition_that_reads_a_failed_variable_is_a_match_condition_error() {
        let (findings, _) = run(
            "match:\n  matchConditions:\n  - {name: owned, expression: \"variables.owner != ''\"}\nvariables:\n- {name: owner, expression: \"object.metadata.labels['team']\"}\nrules:\n- id: r\n  validate: {expression: 'true'}\n",
            NO_LABELS,
        );
        assert_eq!(
            findings,
            [
                "error p/matchConditions/owned match condition \"owned\" could not be evaluated on document 1: variable \"owner\" (object.metadata.labels['team']) failed: No such key: labels (expression: variables.owner != '') (a rule error, not a policy violation)"
            ]
        );
        // A rule error (check exits 2), at the condition's line in the rule file.
        let body = "match:\n  matchConditions:\n  - {name: boom, expression: \"object.spec.nothing == 1\"}\nrules:\n- id: r\n  validate: {expression: 'true'}\n";
        let out = run_findings(body, NO_LABELS);
        let f = &out.findings[0];
        assert_eq!(
            (f.rule_error, f.rule_line, f.message.as_str()),
            (
                true,
                HEAD.lines().count() + 3,
                "match condition \"boom\" could not be evaluated on document 1: No such key: nothing (expression: object.spec.nothing == 1) (a rule error, not a policy violation)"
            )
        );
        let labelled = "kind: Job\nmetadata:\n  name: j\n  labels: {team: t}\n";
        assert_eq!(
            run(
                "match:\n  matchConditions:\n  - {name: owned, expression: \"variables.owner == 'u'\"}\nvariables:\n- {name: owner, expression: \"object.metadata.labels['team']\"}\nrules:\n- id: r\n  validate: {expression: 'false'}\n",
                labelled,
            )
            .0,
            Vec::<String>::new()
        );
    }

    fn table(text: &str) -> Arc<Table> {
        let head =
            "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: Table\nmetadata: {name: t}\n";
        let set = RuleSet::from_sources(&[Source::new("rules/t.yaml", format!("{head}{text}"))])
            .expect("table loads");
        set.tables[0].clone()
    }

    fn cached(t: &Table) -> usize {
        t.cache
            .entries
            .lock()
            .map(|c| c.len())
            .unwrap_or(usize::MAX)
    }

    #[test]
    fn the_table_cache_keys_on_the_params_the_table_reads() {
        let t = table(
            "entries:\n- id: a\n  include: params.?platform.orValue('') == 'aws'\n  name: \"${{ params['entry'] + '-x' }}\"\n",
        );
        let aws = |entry: &str, other: &str| {
            t.render(&json!({"platform": "aws", "entry": entry, "unread": other}))
                .expect("renders")
        };
        assert_eq!(aws("e", "1"), [("a".to_string(), json!({"name": "e-x"}))]);
        assert_eq!(aws("e", "2"), [("a".to_string(), json!({"name": "e-x"}))]);
        assert_eq!(cached(&t), 1);
        assert_eq!(aws("f", "2"), [("a".to_string(), json!({"name": "f-x"}))]);
        assert_eq!(cached(&t), 2);
        // Absent and null are different keys.
        assert_eq!(t.render(&json!({"entry": "e"})).expect("renders"), []);
        assert_eq!(
            t.render(&json!({"entry": "e", "platform": null}))
                .expect("renders"),
            []
        );
        assert_eq!(cached(&t), 4);
    }

    #[test]
    fn an_entry_that_does_not_read_a_param_is_rendered_once_for_all_its_values() {
        let t = table(
            "entries:\n- id: named\n  name: \"${{ params.entry }}-runtime\"\n- id: fixed\n  gpus: \"${{ params.gpus * 2 }}\"\n",
        );
        let rows = |entry: &str| {
            t.render(&json!({"entry": entry, "gpus": 4}))
                .expect("renders")
        };
        assert_eq!(
            rows("a"),
            [
                ("named".to_string(), json!({"name": "a-runtime"})),
                ("fixed".to_string(), json!({"gpus": 8}))
            ]
        );
        assert_eq!(
            rows("b"),
            [
                ("named".to_string(), json!({"name": "b-runtime"})),
                ("fixed".to_string(), json!({"gpus": 8}))
            ]
        );
        // Once each: `named` carries the entry name unchanged, so its render is cached with
        // a placeholder for it.
        assert_eq!(cached(&t), 2);
    }

    /// Renders `t` with each entry name and the other params fixed: the `name` field of
    /// every row.
    fn names(t: &Table, entries: &[&str]) -> Vec<Vec<Value>> {
        entries
            .iter()
            .map(|e| {
                t.render(&json!({"entryName": e, "n": 2}))
                    .expect("renders")
                    .into_iter()
                    .map(|(_, v)| v["name"].clone())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_param_carried_unchanged_is_substituted_into_one_cached_render() {
        let t = table(concat!(
            "fragments:
  claim: {name: \"${{ params.entryName }}-channel\"}
",
            "entries:
",
            "- id: text
  name: \"${{ params.entryName }}-runtime-${{ params.n * 2 }}\"
",
            "- id: whole
  name: \"${{ params['entryName'] }}\"
",
            "- id: inserted
  name: {$fragment: claim}
",
            "- id: branch
  name: {$if: 'params.n > 1', $then: \"${{ params.entryName }}\", $else: none}
",
        ));
        // Values that would break a textual substitution: template syntax, quotes, unicode.
        let odd = "a${{ params.n }}\"'\\$1 ü";
        assert_eq!(
            names(&t, &["a", odd]),
            [
                vec![
                    json!("a-runtime-4"),
                    json!("a"),
                    json!({"name": "a-channel"}),
                    json!("a")
                ],
                vec![
                    json!(format!("{odd}-runtime-4")),
                    json!(odd),
                    json!({"name": format!("{odd}-channel")}),
                    json!(odd)
                ],
            ]
        );
        assert_eq!(cached(&t), 4);
        // A name holding the placeholder mark is rendered as it is, and cached apart.
        let marked = "x\u{FDD0}entryName\u{FDD1}y";
        assert_eq!(
            names(&t, &[marked])[0],
            [
                json!(format!("{marked}-runtime-4")),
                json!(marked),
                json!({"name": format!("{marked}-channel")}),
                json!(marked)
            ]
        );
        assert_eq!(cached(&t), 8);
        // Not a string: rendered with the value, cached apart.
        assert_eq!(
            t.render(&json!({"entryName": 7, "n": 2})).expect("renders")[1],
            ("whole".to_string(), json!({"name": 7}))
        );
    }

    #[test]
    fn an_entry_keys_only_on_the_fragments_it_uses() {
        let t = table(concat!(
            "fragments:\n  f: \"${{ params.n * 2 }}\"\n  g: {$fragment: f}\n  bad: \"${{ string(1 / params.d) }}\"\n",
            "entries:\n",
            "- id: inserts\n  v: {$fragment: g}\n",
            "- id: reads\n  v: \"${{ fragments.f + 1 }}\"\n",
            "- id: neither\n  v: fixed\n",
        ));
        let rows = |n: i64, d: i64| t.render(&json!({"n": n, "d": d}));
        let values = |n: i64| -> Vec<Value> {
            rows(n, 1)
                .expect("renders")
                .into_iter()
                .map(|(_, v)| v["v"].clone())
                .collect()
        };
        assert_eq!(values(1), [json!(2), json!(3), json!("fixed")]);
        assert_eq!(values(2), [json!(4), json!(5), json!("fixed")]);
        // `inserts` (through g) and `reads` key on n; `neither` was rendered once.
        assert_eq!(cached(&t), 5);
        // Every entry is cached for n = 2, but the fragments render for the new d, and the
        // one that fails fails the render.
        let err = rows(2, 0).expect_err("a fragment fails");
        assert!(err.to_string().contains("fragment bad"), "{err}");
    }

    #[test]
    fn a_fragment_reads_the_fragments_before_it_in_cel() {
        // `fragments` is bound only for a fragment whose CEL reads it: by field, by index, and
        // whole; a fragment that reads none (b) does not hide the earlier ones from a later one.
        let t = table(concat!(
            "fragments:\n",
            "  a: \"${{ params.n * 2 }}\"\n",
            "  b: [x, y]\n",
            "  c: \"${{ fragments.a + 1 }}\"\n",
            "  d: \"${{ fragments['c'] + size(fragments.b) }}\"\n",
            "  e: \"${{ size(fragments) }}\"\n",
            "  f: \"${{ fragments.?e.orValue(0) + 0 }}\"\n",
            "entries:\n",
            "- id: all\n  v: [{$fragment: a}, {$fragment: c}, {$fragment: d}, {$fragment: e}, {$fragment: f}]\n",
        ));
        for (n, want) in [(1, json!([2, 3, 5, 4, 4])), (5, json!([10, 11, 13, 4, 4]))] {
            let rows = t.render(&json!({"n": n})).expect("renders");
            assert_eq!(rows, [("all".to_string(), json!({"v": want}))]);
        }
    }

    #[test]
    fn a_fragment_may_insert_or_read_a_fragment_after_it_by_name() {
        let t = table(concat!(
            "fragments:\n",
            "  a: [{$fragment: z}, x]\n",
            "  b: \"${{ fragments.y + 1 }}\"\n",
            "  y: \"${{ params.n }}\"\n",
            "  z: [w, {$fragment: y}]\n",
            "entries:\n",
            "- id: all\n  v: [{$fragment: a}, {$fragment: b}]\n",
        ));
        let rows = t.render(&json!({"n": 4})).expect("renders");
        assert_eq!(rows, [("all".to_string(), json!({"v": ["w", 4, "x", 5]}))]);
    }

    #[test]
    fn fragments_in_a_cycle_are_refused_where_they_are_written() {
        let text = "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: Table\nmetadata: {name: t}\nfragments:\n  a: {$fragment: a}\n  b: [{$fragment: c}]\n  c: \"${{ fragments.b }}\"\n  d: {$fragment: b}\nentries:\n- id: e\n  v: {$fragment: d}\n";
        let err = RuleSet::from_sources(&[Source::new("rules/t.yaml", text)]).expect_err("cycle");
        assert_eq!(
            err.errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            [
                "rule pack error: rules/t.yaml:5:3: fragment a inserts or reads itself: a fragment cannot contain itself",
                "rule pack error: rules/t.yaml:6:3: fragment b uses c, which use it in turn (a cycle): a fragment cannot contain itself, directly or through others",
                "rule pack error: rules/t.yaml:7:6: fragment c uses b, which use it in turn (a cycle): a fragment cannot contain itself, directly or through others",
                "rule pack error: rules/t.yaml:8:3: fragment d uses b, in a cycle of fragments that contain themselves",
            ]
        );
    }

    #[test]
    fn decoded_rows_are_kept_and_a_substituted_param_is_filled_in() {
        let t = table(concat!(
            "entries:\n",
            "- id: fixed\n  v: \"${{ params.n }}\"\n",
            "- id: named\n  v: \"${{ params.entryName }}-runtime\"\n",
            "- id: typed\n  v: \"${{ params.entryName }}\"\n",
        ));
        let decodes = std::sync::atomic::AtomicUsize::new(0);
        // `typed` reads its name as a number: with the placeholder it does not decode, so it
        // is filled in and decoded on every call, and its error names the real value.
        let decode = |id: &str, v: &Value| -> Result<String, Error> {
            decodes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            match (id, &v["v"]) {
                ("typed", Value::String(s)) => s
                    .parse::<i64>()
                    .map(|n| n.to_string())
                    .map_err(|_| Error::Patch(format!("not a number: {s}"))),
                (_, v) => Ok(v.as_str().map_or_else(|| v.to_string(), str::to_string)),
            }
        };
        let strings = |row: &mut String, f: &mut dyn FnMut(&mut String)| f(row);
        let render =
            |name: &str| t.render_decoded(&json!({"entryName": name, "n": 1}), decode, strings);
        let (a, b) = (render("7").expect("renders"), render("8").expect("renders"));
        let texts = |rows: &[(String, Arc<String>)]| -> Vec<String> {
            rows.iter().map(|(id, v)| format!("{id}={v}")).collect()
        };
        assert_eq!(texts(&a), ["fixed=1", "named=7-runtime", "typed=7"]);
        assert_eq!(texts(&b), ["fixed=1", "named=8-runtime", "typed=8"]);
        // The row without the name is the same decoded value; the named one was decoded once
        // (with the placeholder) and filled in; `typed` is decoded twice on every call (with
        // the placeholder, then filled in).
        assert!(Arc::ptr_eq(&a[0].1, &b[0].1));
        assert!(!Arc::ptr_eq(&a[1].1, &b[1].1));
        assert_eq!(
            decodes.load(std::sync::atomic::Ordering::Relaxed),
            1 + 1 + 2 + 2
        );
        assert_eq!(
            render("x").expect_err("not a number").to_string(),
            Error::Patch("not a number: x".into()).to_string()
        );
        // A decode error is the caller's.
        let failed = t.render_decoded(
            &json!({"entryName": "c", "n": 2}),
            |id, _| Err::<(), _>(Error::Patch(format!("no {id}"))),
            |_, _| {},
        );
        assert_eq!(
            failed.expect_err("decode fails").to_string(),
            Error::Patch("no fixed".into()).to_string()
        );
    }

    #[test]
    fn a_render_with_the_same_params_reuses_the_whole_render() {
        let t = table(concat!(
            "entries:\n",
            "- id: fixed\n  v: \"${{ params.n }}\"\n",
            "- id: named\n  v: \"${{ params.entryName }}-runtime\"\n",
            "- id: gated\n  include: params.n > 1\n  v: big\n",
        ));
        let decodes = std::sync::atomic::AtomicUsize::new(0);
        let decode = |_: &str, v: &Value| -> Result<String, Error> {
            decodes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let v = &v["v"];
            Ok(v.as_str().map_or_else(|| v.to_string(), str::to_string))
        };
        let strings = |row: &mut String, f: &mut dyn FnMut(&mut String)| f(row);
        let render = |name: &str, n: i64| -> Vec<String> {
            t.render_decoded(&json!({"entryName": name, "n": n}), decode, strings)
                .expect("renders")
                .iter()
                .map(|(id, v)| format!("{id}={v}"))
                .collect()
        };
        assert_eq!(render("a", 1), ["fixed=1", "named=a-runtime"]);
        let renders = |t: &Table| {
            t.cache
                .renders
                .lock()
                .map(|c| c.values().map(FastMap::len).sum::<usize>())
                .unwrap_or(usize::MAX)
        };
        assert_eq!(renders(&t), 1);
        // Another name, the same params otherwise: the whole render is reused and the name
        // filled in; nothing is decoded or rendered again.
        let entries = cached(&t);
        assert_eq!(render("b", 1), ["fixed=1", "named=b-runtime"]);
        assert_eq!(decodes.load(std::sync::atomic::Ordering::Relaxed), 2);
        assert_eq!((renders(&t), cached(&t)), (1, entries));
        // Other params: a render of its own, reusing the rows that read the same params.
        assert_eq!(render("c", 2), ["fixed=2", "named=c-runtime", "gated=big"]);
        assert_eq!(decodes.load(std::sync::atomic::Ordering::Relaxed), 4);
        assert_eq!(renders(&t), 2);
        assert_eq!(render("d", 1), ["fixed=1", "named=d-runtime"]);
        assert_eq!(decodes.load(std::sync::atomic::Ordering::Relaxed), 4);
    }

    #[test]
    fn a_document_is_charged_a_table_render_alike_from_the_cache_or_not() {
        use crate::cost::{DocumentBudget, with_test_limits};
        use crate::limits::Limits;
        let t = table(concat!(
            "fragments:\n  f: \"${{ [1, 2, 3].filter(x, x > params.n) }}\"\n",
            "entries:\n",
            "- id: costly\n  include: \"[1, 2, 3, 4, 5, 6, 7, 8].all(x, x > 0)\"\n  v: \"${{ params.n }}\"\n",
            "- id: named\n  v: \"${{ params.entryName }}\"\n",
        ));
        let decode = |_: &str, v: &Value| -> Result<String, Error> { Ok(v["v"].to_string()) };
        let strings = |row: &mut String, f: &mut dyn FnMut(&mut String)| f(row);
        // Each render is a document of its own: what it used, or its error.
        let document = |name: &str, limit: u64| {
            let limits = Limits {
                cel_document_cost: limit,
                ..Limits::default()
            };
            with_test_limits(limits, || {
                let _budget = DocumentBudget::open();
                let rendered =
                    t.render_decoded(&json!({"entryName": name, "n": 1}), decode, strings);
                rendered
                    .map(|_| DocumentBudget::used().unwrap_or(0))
                    .map_err(|e| e.to_string())
            })
        };
        let cold = document("a", u64::MAX).expect("renders");
        assert!(cold > 8, "{cold}");
        // From the whole render, the typed rows and the bodies kept: charged the same.
        assert_eq!(document("b", u64::MAX), Ok(cold));
        t.cache.renders.lock().expect("lock").clear();
        assert_eq!(document("c", u64::MAX), Ok(cold));
        t.cache.typed.lock().expect("lock").clear();
        assert_eq!(document("d", u64::MAX), Ok(cold));
        // A budget the render does not fit in is spent by it, cached or not.
        let refused = document("e", cold - 1).expect_err("over the budget");
        assert!(refused.contains("per-document limit"), "{refused}");
        t.cache.renders.lock().expect("lock").clear();
        t.cache.typed.lock().expect("lock").clear();
        t.cache.entries.lock().expect("lock").clear();
        t.cache.fragments.lock().expect("lock").clear();
        assert_eq!(document("f", cold - 1), Err(refused));
        assert_eq!(document("g", cold), Ok(cold));
    }

    #[test]
    fn a_param_an_expression_computes_with_is_not_substituted() {
        // Read by an expression (`size`) in one entry: every entry keys on its value.
        let t = table(concat!(
            "entries:
",
            "- id: a
  name: \"${{ params.entryName }}\"
",
            "- id: b
  name: \"${{ string(size(params.entryName)) }}\"
",
        ));
        assert_eq!(
            names(&t, &["ab", "abc"]),
            [
                vec![json!("ab"), json!("2")],
                vec![json!("abc"), json!("3")]
            ]
        );
        assert_eq!(cached(&t), 4);
        // Carried by a fragment that an expression reads: the expression must see the value.
        let t = table(concat!(
            "fragments:
  names: [\"${{ params.entryName }}\"]
",
            "entries:
",
            "- id: a
  name: \"${{ fragments.names[0].size() }}\"
",
        ));
        assert_eq!(names(&t, &["ab", "abc"]), [vec![json!(2)], vec![json!(3)]]);
        assert_eq!(cached(&t), 2);
        // In a map key or an include: keyed on its value.
        let t = table(concat!(
            "entries:
",
            "- id: a
  include: params.entryName != 'skip'
  name: \"${{ params.entryName }}\"
",
        ));
        assert_eq!(
            names(&t, &["ab", "cd"]),
            [vec![json!("ab")], vec![json!("cd")]]
        );
        assert_eq!(cached(&t), 2);
    }

    #[test]
    fn a_table_that_uses_params_whole_keys_on_all_of_them() {
        let t = table("entries:\n- id: a\n  n: \"${{ size(params) }}\"\n");
        assert_eq!(
            t.render(&json!({"x": 1})).expect("renders"),
            [("a".to_string(), json!({"n": 1}))]
        );
        assert_eq!(
            t.render(&json!({"y": 1})).expect("renders"),
            [("a".to_string(), json!({"n": 1}))]
        );
        assert_eq!(cached(&t), 2);
    }

    fn assert_send_sync<T: Send + Sync + 'static>() {}

    #[test]
    fn compiled_rules_are_send_and_sync() {
        assert_send_sync::<RuleSet>();
        assert_send_sync::<CompiledPack>();
        assert_send_sync::<Table>();
        assert_send_sync::<Expr>();
    }
}
