//! CEL cost budgets: enforced while expressions evaluate, and estimated when rules load.
//!
//! # Units
//!
//! One unit per comprehension iteration (each element `all`, `exists`, `exists_one`, `map` or
//! `filter` visits), plus, for a comprehension the interpreter runs by copying its accumulator,
//! one per element accumulated when the iteration starts, and one per started 64 bytes of text a
//! regex function (`matches`, `find`, `findAll`) scans. `cel` 0.15 appends a `map`'s or
//! `filter`'s list in place when the comprehension keeps the shape its macro gives it (a
//! literal loop condition, a step `@result + [x]` or `g ? @result + [x] : @result`); any other
//! shape copies the accumulator on every iteration, n²/2 element copies over n elements (a `map`
//! over 3,000 env entries took minutes before this was charged). Inside a comprehension's
//! loop, an operation that walks a whole list the expression did not build in the loop (`x in
//! l`, `l.join(…)`, `l.flatten()`, `l.sort()`, `l.reverse()`, `l.distinct()`) is charged one
//! unit per element each time (a `x in l` over a 40,000-entry list inside a loop over the same
//! list ran 37 s uncharged); `in` on a map is a lookup and costs nothing. Likewise, inside a
//! loop, a string function that walks its whole receiver (`s.contains(…)`, `s.split(…)`,
//! `s.replace(…)`, `s.indexOf(…)`, `s.lastIndexOf(…)`, `s.lowerAscii()`, `s.upperAscii()`,
//! `s.trim()`, `s.substring(…)`, `s.charAt(…)`, `size(s)`) is charged one unit per started 64
//! bytes of that string each time it runs. `fieldTypeErrors` is charged one unit per value it
//! visits. Other functions are not charged: their work is linear in their arguments, once per
//! evaluation.
//!
//! # Enforcement
//!
//! `cel` has no cost hooks. `instrument` rewrites every comprehension when an expression
//! compiles: the loop condition of most reads `@cost(@result) ? <condition> : false`; in a
//! `map` or `filter` of the in-place shape, whose loop condition must stay a literal, the guard
//! `g` or the appended element `x` reads `@cost() ? g : false` instead, evaluated once per
//! element too. `COST_FUNCTION` charges to the evaluating thread's meter and fails once a budget
//! is spent. The
//! error of a ternary's condition always propagates (unlike `||` and `&&`, which drop an error
//! when the other side decides), so the comprehension stops there, and every later charge of
//! the same evaluation fails too, so every enclosing comprehension stops at its next element.
//! An enclosing `||`/`&&` of the rule may still drop that error, so `measure` decides from
//! the meter, not from the result: an evaluation that spent a budget fails, whatever value it
//! produced. No rule can call `@cost` itself (`@` starts no CEL identifier).
//!
//! Two budgets, both in [`Limits`]:
//!
//! - per expression evaluation (`--cel-cost-limit`): reset whenever an expression starts;
//! - per document (`--cel-document-cost-limit`): the sum over every expression evaluated while
//!   a [`DocumentBudget`] is open on the thread (the caller opens one per document; nested
//!   opens share the outer one). Without one, only the per-expression budget applies.
//!
//! The meter is thread-local: a document is evaluated on one thread from start to end, so
//! documents checked in parallel never share a budget.
//!
//! # Estimation
//!
//! `estimate` bounds the units one evaluation of an expression can use, for `rules lint`:
//! a list read from the input has at most `--max-yaml-nodes` elements (each element is a
//! YAML node of the document), a list literal its written length. A comprehension over the
//! elements of an element that the enclosing comprehension visits (`jobs.all(j,
//! j.containers.all(c, …))`) visits at most the node budget over all of them together, since
//! the visited elements are disjoint parts of one document; any other nesting multiplies. A
//! `fieldTypeErrors(holder, …)` call is estimated as a comprehension over `holder`'s parts.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use cel::IdedExpr;
use cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr as Ast, IdedEntryExpr, LiteralValue, operators,
};
use cel::common::types::CelBool;

use crate::limits::{Limits, limits};

/// The function every comprehension's loop condition calls first (see the module docs).
pub(crate) const COST_FUNCTION: &str = "@cost";

/// The function an operation that walks a whole list inside a comprehension calls first with
/// that list (see the module docs): charges one unit per element.
pub(crate) const SCAN_FUNCTION: &str = "@scan";

/// The function a string function that walks its whole receiver inside a comprehension calls
/// first with that string (see the module docs): charges one unit per started 64 bytes.
pub(crate) const TEXT_SCAN_FUNCTION: &str = "@text";

/// Methods that walk every element of the list they are called on.
const SCANNING_METHODS: [&str; 5] = ["join", "flatten", "sort", "reverse", "distinct"];

/// String methods that walk their whole receiver (`size` is also a function: `size(s)`).
const TEXT_METHODS: [&str; 11] = [
    "contains",
    "split",
    "replace",
    "indexOf",
    "lastIndexOf",
    "lowerAscii",
    "upperAscii",
    "trim",
    "substring",
    "charAt",
    "size",
];

/// Bytes of scanned text per unit.
const TEXT_BYTES_PER_UNIT: usize = 64;

/// What the units count, for messages.
const UNITS: &str = "comprehension iterations, the elements they accumulate, 64-byte blocks of the text regex and string functions scan, and the values fieldTypeErrors visits";

/// Which budget an evaluation spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// The per-expression budget (`--cel-cost-limit`).
    Expression,
    /// The per-document budget (`--cel-document-cost-limit`).
    Document,
}

impl Budget {
    /// The message of an evaluation that spent this budget: the limit, its value, the flag.
    pub fn message(self) -> String {
        let limits = current_limits();
        match self {
            Budget::Expression => format!(
                "CEL cost limit exceeded: the expression used more than {} units ({UNITS}), the per-expression limit; raise it with --cel-cost-limit or simplify the rule",
                limits.cel_cost
            ),
            Budget::Document => format!(
                "CEL cost limit exceeded: the expressions evaluated on this document used more than {} units ({UNITS}), the per-document limit; raise it with --cel-document-cost-limit or simplify the rules",
                limits.cel_document_cost
            ),
        }
    }
}

/// The evaluating thread's meter.
#[derive(Debug, Clone, Copy)]
struct Meter {
    /// Units the current expression evaluation used.
    expression: u64,
    /// Units the current document used, while a [`DocumentBudget`] is open.
    document: Option<u64>,
    /// The budget the current evaluation spent, if it spent one.
    exceeded: Option<Budget>,
    /// Units charged on this thread, ever (for [`counted`]).
    total: u64,
}

thread_local! {
    static METER: Cell<Meter> = const {
        Cell::new(Meter {
            expression: 0,
            document: None,
            exceeded: None,
            total: 0,
        })
    };
}

#[cfg(test)]
thread_local! {
    /// Limits of this thread's tests, in place of the process's.
    static TEST_LIMITS: Cell<Option<Limits>> = const { Cell::new(None) };
}

/// The limits in force: the process's ([`limits`]); in unit tests, a test's own if it set one.
fn current_limits() -> Limits {
    #[cfg(test)]
    if let Some(l) = TEST_LIMITS.with(Cell::get) {
        return l;
    }
    limits()
}

/// Runs `f` with `limits` in force on this thread (unit tests only).
#[cfg(test)]
pub(crate) fn with_test_limits<R>(limits: Limits, f: impl FnOnce() -> R) -> R {
    let saved = TEST_LIMITS.with(|t| t.replace(Some(limits)));
    let out = f();
    TEST_LIMITS.with(|t| t.set(saved));
    out
}

/// The most units one expression evaluation used in this process.
static PEAK_EXPRESSION: AtomicU64 = AtomicU64::new(0);
/// The most units one document used in this process (over closed [`DocumentBudget`]s).
static PEAK_DOCUMENT: AtomicU64 = AtomicU64::new(0);

fn with_meter<R>(f: impl FnOnce(&mut Meter) -> R) -> Option<R> {
    METER
        .try_with(|cell| {
            let mut m = cell.get();
            let out = f(&mut m);
            cell.set(m);
            out
        })
        .ok()
}

/// Charges `units` to the current evaluation and document.
///
/// # Errors
/// The budget spent (by this charge or an earlier one of the same evaluation).
pub(crate) fn charge(units: u64) -> Result<(), Budget> {
    with_meter(|m| {
        if let Some(spent) = m.exceeded {
            return Err(spent);
        }
        let limits = current_limits();
        m.total = m.total.saturating_add(units);
        m.expression = m.expression.saturating_add(units);
        if m.expression > limits.cel_cost {
            m.exceeded = Some(Budget::Expression);
        } else if let Some(d) = m.document.as_mut() {
            *d = d.saturating_add(units);
            if *d > limits.cel_document_cost {
                m.exceeded = Some(Budget::Document);
            }
        }
        m.exceeded.map_or(Ok(()), Err)
    })
    .unwrap_or(Ok(()))
}

/// Runs `f` and returns what it charged (to its expressions, and to the open document if one
/// is), also through [`charge_document`]: the cost a cache keeps beside what `f` computed.
pub(crate) fn counted<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = with_meter(|m| m.total).unwrap_or(0);
    let out = f();
    let after = with_meter(|m| m.total).unwrap_or(0);
    (out, after.saturating_sub(before))
}

/// Charges the open document `units` that a cached result cost when it was computed, so that
/// a document is charged the same whether the result was computed or taken from a cache.
/// Returns false, charging nothing, when the document has no room for them: the caller then
/// computes the result again, and the budget is spent where that computation spends it.
pub(crate) fn charge_document(units: u64) -> bool {
    with_meter(|m| {
        let Some(d) = m.document else {
            m.total = m.total.saturating_add(units);
            return true;
        };
        let now = d.saturating_add(units);
        if now > current_limits().cel_document_cost {
            return false;
        }
        m.document = Some(now);
        m.total = m.total.saturating_add(units);
        true
    })
    .unwrap_or(true)
}

/// Charges a regex scan of `bytes` bytes: one unit per started 64 bytes, at least one.
pub(crate) fn charge_regex(bytes: usize) -> Result<(), Budget> {
    charge(regex_units(bytes))
}

/// Charges a string function's walk of `bytes` bytes inside a loop: one unit per started 64
/// bytes (nothing for an empty string).
pub(crate) fn charge_text(bytes: usize) -> Result<(), Budget> {
    charge(text_units(bytes))
}

/// Runs one expression evaluation `f` with a fresh per-expression budget (its units also count
/// towards the open document's); returns its result and the budget it spent, if any. A spent
/// budget decides even when `f` returned a value (see the module docs).
pub(crate) fn measure<T>(f: impl FnOnce() -> T) -> (T, Option<Budget>) {
    let saved = with_meter(|m| {
        let saved = (m.expression, m.exceeded);
        m.expression = 0;
        m.exceeded = None;
        saved
    });
    let out = f();
    let (used, spent) = with_meter(|m| {
        let now = (m.expression, m.exceeded);
        if let Some((expression, exceeded)) = saved {
            m.expression = expression;
            m.exceeded = exceeded;
        }
        now
    })
    .unwrap_or((0, None));
    if used > PEAK_EXPRESSION.load(Ordering::Relaxed) {
        PEAK_EXPRESSION.fetch_max(used, Ordering::Relaxed);
    }
    (out, spent)
}

/// The per-document budget of the thread, open while the guard lives: every expression
/// evaluated on the thread meanwhile counts towards `--cel-document-cost-limit`.
///
/// Opening one while another is open on the thread shares the open one (a document's parts
/// checked one after the other are still one document). Dropping the guard that opened the
/// budget closes it, also when a panic unwinds through it.
#[derive(Debug)]
#[must_use = "the document budget is open only while the guard lives"]
pub struct DocumentBudget {
    opened: bool,
}

impl DocumentBudget {
    /// Opens the thread's document budget, unless one is open already.
    pub fn open() -> DocumentBudget {
        let opened = with_meter(|m| {
            if m.document.is_some() {
                return false;
            }
            m.document = Some(0);
            true
        })
        .unwrap_or(false);
        DocumentBudget { opened }
    }

    /// The units the thread's open document has used so far (`None` when none is open).
    pub fn used() -> Option<u64> {
        with_meter(|m| m.document).flatten()
    }
}

impl Drop for DocumentBudget {
    fn drop(&mut self) {
        if !self.opened {
            return;
        }
        if let Some(Some(used)) = with_meter(|m| m.document.take()) {
            PEAK_DOCUMENT.fetch_max(used, Ordering::Relaxed);
        }
    }
}

/// The most units one expression evaluation and one document have used in this process so
/// far, for measurements: `(per expression, per document)`.
pub fn peak_costs() -> (u64, u64) {
    (
        PEAK_EXPRESSION.load(Ordering::Relaxed),
        PEAK_DOCUMENT.load(Ordering::Relaxed),
    )
}

/// Rewrites every comprehension's loop condition `c` of `e` into `@cost() ? c : false` (or
/// charges its guard or appended element, see the module docs), and, inside a loop, every
/// whole-list walk `w` of a list `l` into `@scan(l) ? w : false` and every whole-string walk
/// `w` of a string `s` into `@text(s) ? w : false`.
pub(crate) fn instrument(e: &mut IdedExpr) {
    let mut next_id = max_id(e).saturating_add(1);
    instrument_at(e, false, &mut next_id);
}

fn fresh(next_id: &mut u64) -> u64 {
    let id = *next_id;
    *next_id = next_id.saturating_add(1);
    id
}

/// `looped`: `e` is evaluated once per iteration of an enclosing comprehension.
fn instrument_at(e: &mut IdedExpr, looped: bool, next_id: &mut u64) {
    match &mut e.expr {
        Ast::Comprehension(c) => {
            for x in [&mut c.iter_range, &mut c.accu_init, &mut c.result] {
                instrument_at(x, looped, next_id);
            }
            for x in [&mut c.loop_cond, &mut c.loop_step] {
                instrument_at(x, true, next_id);
            }
            if let Some(x) = append_charge_site(c) {
                // Run in place by the interpreter: the loop condition stays a literal, and the
                // guard or appended element charges one unit per iteration instead.
                let charged = std::mem::take(x);
                *x = charge_then(charged, COST_FUNCTION, vec![], next_id);
                return;
            }
            let cond = std::mem::take(&mut c.loop_cond);
            // The accumulator is passed so that its size is charged too (see the module docs).
            let accu = IdedExpr {
                id: fresh(next_id),
                expr: Ast::Ident(c.accu_var.clone()),
            };
            let charge = IdedExpr {
                id: fresh(next_id),
                expr: Ast::Call(CallExpr {
                    func_name: COST_FUNCTION.to_string(),
                    target: None,
                    args: vec![accu],
                }),
            };
            let stop = IdedExpr {
                id: fresh(next_id),
                expr: Ast::Literal(LiteralValue::Boolean(CelBool::from(false))),
            };
            c.loop_cond = IdedExpr {
                id: fresh(next_id),
                expr: Ast::Call(CallExpr {
                    func_name: operators::CONDITIONAL.to_string(),
                    target: None,
                    args: vec![charge, cond, stop],
                }),
            };
        }
        Ast::Call(c) => {
            if let Some(t) = c.target.as_deref_mut() {
                instrument_at(t, looped, next_id);
            }
            for a in &mut c.args {
                instrument_at(a, looped, next_id);
            }
            if !looped {
                return;
            }
            let (function, mut walked_operand) = match (scanned_list(c), scanned_text(c)) {
                (Some(list), _) => (SCAN_FUNCTION, list.clone()),
                (None, Some(text)) => (TEXT_SCAN_FUNCTION, text.clone()),
                (None, None) => return,
            };
            // The operand is evaluated twice: once charged, once walked. Only
            // comprehension-free operands are charged here (a list a comprehension builds was
            // charged as it was built), so the second evaluation is a few selects.
            renumber(&mut walked_operand, next_id);
            let walked = std::mem::take(e);
            *e = charge_then(walked, function, vec![walked_operand], next_id);
        }
        Ast::Select(s) => instrument_at(&mut s.operand, looped, next_id),
        Ast::List(l) => {
            for x in &mut l.elements {
                instrument_at(x, looped, next_id);
            }
        }
        Ast::Map(m) => instrument_entries(&mut m.entries, looped, next_id),
        Ast::Struct(s) => instrument_entries(&mut s.entries, looped, next_id),
        Ast::Ident(_) | Ast::Literal(_) | Ast::Unspecified => {}
    }
}

/// The list operand of a call that walks all of it, when the operand builds nothing itself
/// (no comprehension): `x in l` (which is a hash lookup when `l` is a map, charged nothing),
/// `l.join(…)`, `l.flatten()`, `l.sort()`, `l.reverse()`, `l.distinct()`.
fn scanned_list(c: &CallExpr) -> Option<&IdedExpr> {
    let list = match (c.func_name.as_str(), c.target.as_deref(), c.args.as_slice()) {
        (operators::IN | crate::expr::MEMBER_FUNCTION, None, [_, l]) => l,
        (name, Some(l), _) if SCANNING_METHODS.contains(&name) => l,
        _ => return None,
    };
    scans_list(list).then_some(list)
}

/// The string operand of a call that walks all of it ([`TEXT_METHODS`], `size(s)`), when the
/// operand is not a literal and builds nothing itself (no comprehension).
fn scanned_text(c: &CallExpr) -> Option<&IdedExpr> {
    let text = match (c.func_name.as_str(), c.target.as_deref(), c.args.as_slice()) {
        ("size", None, [t]) => t,
        (name, Some(t), _) if TEXT_METHODS.contains(&name) => t,
        _ => return None,
    };
    scans_text(text).then_some(text)
}

/// Whether a list operand of `in`, `join`, `flatten`, … inside a loop is charged per element:
/// it is neither a literal nor builds anything itself (see [`scanned_list`]).
pub(crate) fn scans_list(operand: &IdedExpr) -> bool {
    !matches!(&operand.expr, Ast::List(_) | Ast::Map(_)) && !has_comprehension(operand)
}

/// Whether a string operand of `size`, `contains`, `split`, … inside a loop is charged per 64
/// bytes: it is neither a literal nor builds anything itself (see [`scanned_text`]).
pub(crate) fn scans_text(operand: &IdedExpr) -> bool {
    !matches!(&operand.expr, Ast::Literal(_) | Ast::List(_) | Ast::Map(_))
        && !has_comprehension(operand)
}

/// Units one expression evaluation may use (`--cel-cost-limit`).
pub(crate) fn expression_limit() -> u64 {
    current_limits().cel_cost
}

/// Units of a regex scan of `bytes` bytes ([`charge_regex`]).
pub(crate) fn regex_units(bytes: usize) -> u64 {
    u64::try_from(bytes.div_ceil(TEXT_BYTES_PER_UNIT).max(1)).unwrap_or(u64::MAX)
}

/// Units of a string function's walk of `bytes` bytes inside a loop ([`charge_text`]).
pub(crate) fn text_units(bytes: usize) -> u64 {
    u64::try_from(bytes.div_ceil(TEXT_BYTES_PER_UNIT)).unwrap_or(u64::MAX)
}

fn has_comprehension(e: &IdedExpr) -> bool {
    if matches!(e.expr, Ast::Comprehension(_)) {
        return true;
    }
    let mut found = false;
    children(e, &mut |c| found = found || has_comprehension(c));
    found
}

/// Gives every node of `e` a fresh id (a copy of a subexpression must not share its ids).
fn renumber(e: &mut IdedExpr, next_id: &mut u64) {
    e.id = fresh(next_id);
    children_mut(e, &mut |c| renumber(c, next_id));
}

/// `function(args…) ? e : false`: `e` once the charge is made.
fn charge_then(e: IdedExpr, function: &str, args: Vec<IdedExpr>, next_id: &mut u64) -> IdedExpr {
    let charge = IdedExpr {
        id: fresh(next_id),
        expr: Ast::Call(CallExpr {
            func_name: function.to_string(),
            target: None,
            args,
        }),
    };
    let stop = IdedExpr {
        id: fresh(next_id),
        expr: Ast::Literal(LiteralValue::Boolean(CelBool::from(false))),
    };
    IdedExpr {
        id: fresh(next_id),
        expr: Ast::Call(CallExpr {
            func_name: operators::CONDITIONAL.to_string(),
            target: None,
            args: vec![charge, e, stop],
        }),
    }
}

/// In a `map` or `filter` (a comprehension whose result is its accumulator, whose loop
/// condition is a literal and whose step is `@result + [x]`, or `g ? @result + [x] : @result`),
/// the node evaluated once per iteration that can carry the charge: `g`, else `x`. The
/// interpreter appends to such an accumulator in place, without copying it, as long as the
/// shape is kept.
fn append_charge_site(c: &mut ComprehensionExpr) -> Option<&mut IdedExpr> {
    let accu = c.accu_var.as_str();
    let is_accu = |e: &IdedExpr| matches!(&e.expr, Ast::Ident(n) if n == accu);
    if !is_accu(&c.result) || !matches!(c.loop_cond.expr, Ast::Literal(_)) {
        return None;
    }
    let appended = |e: &IdedExpr| match &e.expr {
        Ast::Call(call) if call.func_name == operators::ADD && call.target.is_none() => {
            matches!(call.args.as_slice(), [l, r] if is_accu(l)
                && matches!(&r.expr, Ast::List(list) if list.elements.len() == 1))
        }
        _ => false,
    };
    let guarded = match &c.loop_step.expr {
        Ast::Call(call) if call.func_name == operators::CONDITIONAL && call.target.is_none() => {
            match call.args.as_slice() {
                [_, step, otherwise] if is_accu(otherwise) && appended(step) => true,
                _ => return None,
            }
        }
        _ if appended(&c.loop_step) => false,
        _ => return None,
    };
    let Ast::Call(call) = &mut c.loop_step.expr else {
        return None;
    };
    if guarded {
        return call.args.first_mut();
    }
    match call.args.get_mut(1).map(|r| &mut r.expr) {
        Some(Ast::List(list)) => list.elements.first_mut(),
        _ => None,
    }
}

fn instrument_entries(entries: &mut [IdedEntryExpr], looped: bool, next_id: &mut u64) {
    for entry in entries {
        match &mut entry.expr {
            EntryExpr::StructField(f) => instrument_at(&mut f.value, looped, next_id),
            EntryExpr::MapEntry(m) => {
                instrument_at(&mut m.key, looped, next_id);
                instrument_at(&mut m.value, looped, next_id);
            }
        }
    }
}

/// The largest node id of `e`.
fn max_id(e: &IdedExpr) -> u64 {
    let mut max = e.id;
    children(e, &mut |c| max = max.max(max_id(c)));
    max
}

/// Calls `f` with every direct child expression of `e`.
pub(crate) fn children<'a>(e: &'a IdedExpr, f: &mut impl FnMut(&'a IdedExpr)) {
    match &e.expr {
        Ast::Comprehension(c) => {
            for x in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                f(x);
            }
        }
        Ast::Call(c) => {
            if let Some(t) = c.target.as_deref() {
                f(t);
            }
            c.args.iter().for_each(f);
        }
        Ast::Select(s) => f(&s.operand),
        Ast::List(l) => l.elements.iter().for_each(f),
        Ast::Map(m) => entry_children(&m.entries, f),
        Ast::Struct(s) => entry_children(&s.entries, f),
        Ast::Ident(_) | Ast::Literal(_) | Ast::Unspecified => {}
    }
}

/// Calls `f` with every direct child expression of `e`, mutably (the rewrites of an expression
/// when it compiles walk with it).
pub(crate) fn children_mut(e: &mut IdedExpr, f: &mut impl FnMut(&mut IdedExpr)) {
    match &mut e.expr {
        Ast::Comprehension(c) => {
            for x in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                f(x);
            }
        }
        Ast::Call(c) => {
            if let Some(t) = c.target.as_deref_mut() {
                f(t);
            }
            c.args.iter_mut().for_each(&mut *f);
        }
        Ast::Select(s) => f(&mut s.operand),
        Ast::List(l) => l.elements.iter_mut().for_each(&mut *f),
        Ast::Map(m) => entry_children_mut(&mut m.entries, f),
        Ast::Struct(s) => entry_children_mut(&mut s.entries, f),
        Ast::Ident(_) | Ast::Literal(_) | Ast::Unspecified => {}
    }
}

fn entry_children_mut(entries: &mut [IdedEntryExpr], f: &mut impl FnMut(&mut IdedExpr)) {
    for entry in entries {
        match &mut entry.expr {
            EntryExpr::StructField(s) => f(&mut s.value),
            EntryExpr::MapEntry(m) => {
                f(&mut m.key);
                f(&mut m.value);
            }
        }
    }
}

fn entry_children<'a>(entries: &'a [IdedEntryExpr], f: &mut impl FnMut(&'a IdedExpr)) {
    for entry in entries {
        match &entry.expr {
            EntryExpr::StructField(s) => f(&s.value),
            EntryExpr::MapEntry(m) => {
                f(&m.key);
                f(&m.value);
            }
        }
    }
}

/// The identifiers whose lists are parts of the input documents: a comprehension over one of
/// them (or over a part of one) visits disjoint parts of a document.
const INPUT_ROOTS: [&str; 5] = ["object", "oldObject", "objects", "objectsByKind", "params"];

/// A comprehension being walked by [`estimate`].
struct Frame<'a> {
    /// The names it binds to each element.
    vars: [Option<&'a str>; 2],
    /// Its elements are disjoint parts of the input (it iterates over a part of the input).
    input: bool,
    /// How many times, at most, a comprehension whose elements are disjoint parts of the input
    /// and that encloses this one (this one included) is evaluated: the elements visited below
    /// it, over all those evaluations, number at most this many times the list bound.
    disjoint_evaluations: u128,
}

/// What [`estimate`] knows about a binding (a variable, a `forEach` item).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Binding {
    /// Its lists are parts of the input (see [`Binding::of`]).
    pub(crate) input: bool,
    /// It is a list or map of this many elements (a literal).
    pub(crate) len: Option<u64>,
}

impl Binding {
    /// What binding the value of `e` tells: a list that is a part of the input, or a filtered
    /// part (a path into `object`, `objects`, `params` or a binding `known` says is one; either
    /// side of a conditional, an empty literal on the other); a list or map literal's length.
    pub(crate) fn of(e: &IdedExpr, known: &dyn Fn(&str) -> Option<Binding>) -> Binding {
        let len = match &e.expr {
            Ast::List(l) => u64::try_from(l.elements.len()).ok(),
            Ast::Map(m) => u64::try_from(m.entries.len()).ok(),
            Ast::Ident(n) => known(n).and_then(|b| b.len),
            _ => None,
        };
        Binding {
            input: is_input_list(e, known),
            len,
        }
    }
}

/// What `known` says of `name`, the input roots being parts of the input.
fn lookup(name: &str, known: &dyn Fn(&str) -> Option<Binding>) -> Binding {
    if INPUT_ROOTS.contains(&name) {
        return Binding {
            input: true,
            len: None,
        };
    }
    known(name).unwrap_or_default()
}

fn is_input_list(e: &IdedExpr, known: &dyn Fn(&str) -> Option<Binding>) -> bool {
    if let Ast::Call(c) = &e.expr
        && c.func_name == operators::CONDITIONAL
        && let [_, a, b] = c.args.as_slice()
    {
        let side = |x: &IdedExpr| is_empty_literal(x) || is_input_list(x, known);
        return side(a) && side(b);
    }
    range_of(e).is_some_and(|r| r.parts && lookup(r.root, known).input)
}

/// The worst-case units of one evaluation of `e` (see the module docs): every list read from
/// the input or computed has at most `list_bound` elements, a list or map literal its length;
/// a regex call is counted as one unit (its input's length is not known). `known` tells what
/// is known of the identifiers besides `object`, `objects`, `params` (the bindings of
/// variables, a `forEach` item).
pub(crate) fn estimate(
    e: &IdedExpr,
    list_bound: u64,
    known: &dyn Fn(&str) -> Option<Binding>,
) -> u128 {
    let walk = Walk {
        bound: u128::from(list_bound),
        known,
    };
    walk.at(e, 1, &mut Vec::new())
}

struct Walk<'i> {
    bound: u128,
    known: &'i dyn Fn(&str) -> Option<Binding>,
}

impl Walk<'_> {
    fn at<'a>(&self, e: &'a IdedExpr, evaluations: u128, frames: &mut Vec<Frame<'a>>) -> u128 {
        let mut cost = 0u128;
        let Ast::Comprehension(c) = &e.expr else {
            if let Ast::Call(call) = &e.expr
                && call.target.is_some()
                && matches!(call.func_name.as_str(), "matches" | "find" | "findAll")
            {
                cost = cost.saturating_add(evaluations);
            }
            // `fieldTypeErrors(holder, …)` visits the values below `holder`, as a
            // comprehension over its parts would.
            if let Ast::Call(call) = &e.expr
                && call.target.is_none()
                && call.func_name == crate::expr::FIELD_TYPE_ERRORS
                && let Some(holder) = call.args.first()
            {
                cost = cost.saturating_add(self.iterations(holder, evaluations, frames).0);
            }
            children(e, &mut |c| {
                cost = cost.saturating_add(self.at(c, evaluations, frames));
            });
            return cost;
        };
        cost = cost
            .saturating_add(self.at(&c.iter_range, evaluations, frames))
            .saturating_add(self.at(&c.accu_init, evaluations, frames));
        let (iterations, input, disjoint) = self.iterations(&c.iter_range, evaluations, frames);
        cost = cost.saturating_add(iterations);
        frames.push(Frame {
            vars: [Some(c.iter_var.as_str()), c.iter_var2.as_deref()],
            input,
            disjoint_evaluations: disjoint,
        });
        cost = cost
            .saturating_add(self.at(&c.loop_cond, iterations, frames))
            .saturating_add(self.at(&c.loop_step, iterations, frames));
        frames.pop();
        // The accumulator is not an element: it shadows any binding of its name.
        frames.push(Frame {
            vars: [Some(c.accu_var.as_str()), None],
            input: false,
            disjoint_evaluations: evaluations,
        });
        cost = cost.saturating_add(self.at(&c.result, evaluations, frames));
        frames.pop();
        cost
    }

    /// How many elements a comprehension over `range`, evaluated `evaluations` times inside
    /// `frames`, visits in all; whether they are disjoint parts of the input; and how many
    /// evaluations of an enclosing comprehension over such parts that is.
    fn iterations<'a>(
        &self,
        range: &'a IdedExpr,
        evaluations: u128,
        frames: &[Frame<'a>],
    ) -> (u128, bool, u128) {
        let literal = match &range.expr {
            Ast::List(l) => Some(l.elements.len()),
            Ast::Map(m) => Some(m.entries.len()),
            _ => None,
        };
        let range = range_of(range);
        // The innermost comprehension binding the range's root, if any.
        let binder = range.as_ref().and_then(|r| {
            frames
                .iter()
                .enumerate()
                .rev()
                .find(|(_, f)| f.vars.contains(&Some(r.root)))
        });
        let innermost = frames.len().checked_sub(1);
        let all = evaluations.saturating_mul(self.bound);
        match (literal, &range, binder) {
            (Some(n), _, _) => (
                evaluations.saturating_mul(u128::try_from(n).unwrap_or(u128::MAX)),
                false,
                evaluations,
            ),
            // Parts of the elements the enclosing comprehension visits: disjoint, so at most
            // the bound over all its evaluations.
            (None, Some(r), Some((i, f))) if f.input && Some(i) == innermost => (
                f.disjoint_evaluations.saturating_mul(self.bound).min(all),
                r.parts,
                f.disjoint_evaluations,
            ),
            (None, Some(r), Some((_, f))) => (all, f.input && r.parts, evaluations),
            (None, Some(r), None) => {
                let b = lookup(r.root, self.known);
                let iterations = match b.len.filter(|_| r.bare) {
                    Some(n) => evaluations.saturating_mul(u128::from(n)),
                    None => all,
                };
                (iterations, r.parts && b.input, evaluations)
            }
            (None, None, _) => (all, false, evaluations),
        }
    }
}

/// What a comprehension's range is read from.
struct Range<'a> {
    /// The identifier the list is selected from.
    root: &'a str,
    /// Its elements are elements of that list (not indexes into it).
    parts: bool,
    /// It has at most as many elements as the identifier's value (nothing is selected from it).
    bare: bool,
}

impl Range<'_> {
    /// The range of a part selected from this one.
    fn selected(self) -> Self {
        Range {
            bare: false,
            ..self
        }
    }
}

/// The identifier a list is selected from, when `e` is a path into it (`x`, `x.a`, `x[k]`,
/// `x[?k]`, `x.?a.orValue([])`, `x.?m.orValue({})`), a `filter` of one, or the indexes `lists.range(size(p))` of
/// one.
fn range_of(e: &IdedExpr) -> Option<Range<'_>> {
    match &e.expr {
        Ast::Ident(n) => Some(Range {
            root: n,
            parts: true,
            bare: true,
        }),
        Ast::Select(s) if !s.test => range_of(&s.operand).map(Range::selected),
        Ast::Comprehension(c) if is_filter(c) => range_of(&c.iter_range),
        Ast::Call(c) => match (c.func_name.as_str(), c.target.as_deref(), c.args.as_slice()) {
            (operators::INDEX | operators::OPT_INDEX | operators::OPT_SELECT, None, [o, _]) => {
                range_of(o).map(Range::selected)
            }
            ("orValue", Some(t), [d]) if is_empty_literal(d) => range_of(t),
            ("range", Some(lists), [n]) if matches!(&lists.expr, Ast::Ident(l) if l == "lists") => {
                let sized = match &n.expr {
                    Ast::Call(s) if s.func_name == "size" => {
                        match (s.target.as_deref(), s.args.as_slice()) {
                            (None, [x]) | (Some(x), []) => Some(x),
                            _ => None,
                        }
                    }
                    _ => None,
                };
                sized
                    .and_then(range_of)
                    .map(|r| Range { parts: false, ..r })
            }
            _ => None,
        },
        _ => None,
    }
}

/// `[]` or `{}`.
fn is_empty_literal(e: &IdedExpr) -> bool {
    match &e.expr {
        Ast::List(l) => l.elements.is_empty(),
        Ast::Map(m) => m.entries.is_empty(),
        _ => false,
    }
}

/// True for the comprehension `l.filter(x, p)` expands to: its step appends the element
/// itself, `p ? accu + [x] : accu`.
fn is_filter(c: &cel::common::ast::ComprehensionExpr) -> bool {
    let is = |e: &IdedExpr, name: &str| matches!(&e.expr, Ast::Ident(n) if n == name);
    let Ast::Call(step) = &c.loop_step.expr else {
        return false;
    };
    let [_, append, keep] = step.args.as_slice() else {
        return false;
    };
    if step.func_name != operators::CONDITIONAL || !is(keep, &c.accu_var) {
        return false;
    }
    let Ast::Call(add) = &append.expr else {
        return false;
    };
    matches!(add.args.as_slice(), [accu, one] if add.func_name == operators::ADD
        && is(accu, &c.accu_var)
        && matches!(&one.expr, Ast::List(l) if matches!(l.elements.as_slice(), [x] if is(x, &c.iter_var))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::{Expr, Scope};
    use serde_json::json;

    /// Default limits but `expression` and `document` units.
    fn small(expression: u64, document: u64) -> Limits {
        Limits {
            cel_cost: expression,
            cel_document_cost: document,
            ..Limits::default()
        }
    }

    /// `params.l`: the list 0, 1, …, n-1.
    fn list(n: usize) -> Scope {
        let mut s = Scope::new();
        s.bind(
            "params",
            &json!({"l": (0..n).collect::<Vec<_>>(), "s": "x".repeat(200)}),
        );
        s
    }

    fn eval(text: &str, scope: &Scope) -> Result<serde_json::Value, String> {
        Expr::compile(text)
            .expect("compiles")
            .eval_json(scope)
            .map_err(|e| e.to_string())
    }

    const OVER_EXPRESSION: &str = "CEL cost limit exceeded: the expression used more than 100 units (comprehension iterations, the elements they accumulate, 64-byte blocks of the text regex and string functions scan, and the values fieldTypeErrors visits), the per-expression limit; raise it with --cel-cost-limit or simplify the rule";
    const OVER_DOCUMENT: &str = "CEL cost limit exceeded: the expressions evaluated on this document used more than 150 units (comprehension iterations, the elements they accumulate, 64-byte blocks of the text regex and string functions scan, and the values fieldTypeErrors visits), the per-document limit; raise it with --cel-document-cost-limit or simplify the rules";

    #[test]
    fn a_spent_budget_stops_the_evaluation_and_no_operator_absorbs_it() {
        // 1000³ iterations unchecked: hours; stopped after 101.
        let s = list(1000);
        with_test_limits(small(100, u64::MAX), || {
            let nested = "params.l.all(a, params.l.all(b, params.l.all(c, a != b || c >= 0)))";
            assert_eq!(eval(nested, &s), Err(OVER_EXPRESSION.to_string()));
            for absorbing in [
                format!("{nested} || true"),
                format!("true && {nested} || true"),
                format!("false || !{nested}"),
                "params.l.all(a, params.l.all(b, b >= 0) || true)".to_string(),
                "params.l.exists(a, params.l.exists(b, b < 0) && false)".to_string(),
                "params.l.map(a, params.l.filter(b, b > a).size()).size() >= 0".to_string(),
                "params.l.exists_one(a, a == 1)".to_string(),
            ] {
                assert_eq!(
                    eval(&absorbing, &s),
                    Err(OVER_EXPRESSION.to_string()),
                    "{absorbing}"
                );
            }
            // Short-circuits that never iterate cost nothing.
            assert_eq!(eval(&format!("true || {nested}"), &s), Ok(json!(true)));
            // Within the budget: 100 iterations.
            assert_eq!(
                eval("params.l.all(x, x < 100)", &list(100)),
                Ok(json!(true))
            );
            // A map or filter appends in place: one unit per element, whatever it has kept.
            assert_eq!(
                eval("params.l.filter(x, x >= 0).size() == 100", &list(100)),
                Ok(json!(true))
            );
            assert_eq!(
                eval("params.l.map(x, x).size() == 101", &list(101)),
                Err(OVER_EXPRESSION.to_string())
            );
            // The next expression starts afresh (a loop that stops early is charged for the
            // element it stops at too: 100 units).
            assert_eq!(eval("params.l.exists(x, x == 98)", &s), Ok(json!(true)));
            assert_eq!(
                eval("params.l.exists(x, x == 99)", &s),
                Err(OVER_EXPRESSION.to_string())
            );
        });
    }

    #[test]
    fn a_whole_list_walked_inside_a_comprehension_is_charged_per_element() {
        // 1000 × (1 + 1000) units: stopped, where it used to run uncharged.
        let s = list(1000);
        with_test_limits(small(100_000, u64::MAX), || {
            for walked in [
                "params.l.all(x, x in params.l)",
                "params.l.all(x, params.l.join(',') != '')",
                "params.l.all(x, size(params.l.sort()) > 0)",
            ] {
                assert_eq!(
                    eval(walked, &s).map_err(|e| e.replace(" 100000 ", " 100 ")),
                    Err(OVER_EXPRESSION.to_string()),
                    "{walked}"
                );
            }
            // 10 × (1 + 10) units; outside a loop, and a literal or a map, cost nothing more.
            assert_eq!(
                eval("params.l.all(x, x in params.l)", &list(10)),
                Ok(json!(true))
            );
            assert_eq!(eval("999 in params.l", &s), Ok(json!(true)));
            assert_eq!(
                eval(
                    "params.l.all(x, x in [1, 2] || x in {'a': 1} || x >= 0)",
                    &s
                ),
                Ok(json!(true))
            );
        });
    }

    #[test]
    fn a_whole_string_walked_inside_a_comprehension_is_charged_per_64_bytes() {
        // `params.s` is 200 bytes: 4 units per walk. 30 × (1 + 4) = 150 units: stopped.
        let mut s = list(30);
        s.bind(
            "params",
            &json!({"l": (0..30).collect::<Vec<_>>(), "s": "x".repeat(200)}),
        );
        with_test_limits(small(100, u64::MAX), || {
            for walked in [
                "params.l.all(x, !params.s.contains('y'))",
                "params.l.all(x, size(params.s.split('y')) == 1)",
                "params.l.all(x, params.s.replace('y', 'z') != '')",
                "params.l.all(x, params.s.indexOf('y') == -1)",
                "params.l.all(x, params.s.lastIndexOf('y') == -1)",
                "params.l.all(x, params.s.upperAscii() != '')",
                "params.l.all(x, params.s.lowerAscii() != '')",
                "params.l.all(x, params.s.trim() != '')",
                "params.l.all(x, params.s.substring(1) != '')",
                "params.l.all(x, params.s.charAt(199) == 'x')",
                "params.l.all(x, size(params.s) == 200)",
                "params.l.all(x, params.s.size() == 200)",
            ] {
                assert_eq!(
                    eval(walked, &s),
                    Err(OVER_EXPRESSION.to_string()),
                    "{walked}"
                );
            }
            // Outside a loop a walk is linear once: not charged. 30 iterations of size(list),
            // a literal receiver, or a short string: nothing more.
            assert_eq!(eval("!params.s.contains('y')", &s), Ok(json!(true)));
            assert_eq!(
                eval(
                    "params.l.all(x, size(params.l) == 30 && 'abc'.contains('b') && string(x).contains('y') == false)",
                    &s
                ),
                Ok(json!(true))
            );
        });
        // 10 × (1 + 4) = 50 units: within the budget.
        with_test_limits(small(100, u64::MAX), || {
            assert_eq!(
                eval("params.l.all(x, !params.s.contains('y'))", &list(10)),
                Ok(json!(true))
            );
        });
    }

    #[test]
    fn regex_input_is_charged_in_blocks_of_64_bytes() {
        let s = list(0);
        with_test_limits(small(4, u64::MAX), || {
            // 200 bytes: 4 units.
            assert_eq!(eval("params.s.matches('^x+$')", &s), Ok(json!(true)));
            assert_eq!(
                eval("params.s.matches('^x+$') && [1].all(x, true)", &s)
                    .map_err(|e| e.replace(" 4 ", " N ")),
                Err(OVER_EXPRESSION.replace(" 100 ", " N "))
            );
            assert_eq!(eval("params.s.find('x+') != ''", &s), Ok(json!(true)));
            assert_eq!(
                eval("size(params.s.findAll('x')) == 200", &s),
                Ok(json!(true))
            );
        });
    }

    #[test]
    fn the_document_budget_sums_the_expressions_of_one_document() {
        let s = list(80);
        let eighty = "params.l.all(x, x >= 0)";
        with_test_limits(small(100, 150), || {
            // No document open: only the per-expression budget.
            assert_eq!(eval(eighty, &s), Ok(json!(true)));
            assert_eq!(eval(eighty, &s), Ok(json!(true)));
            assert_eq!(DocumentBudget::used(), None);
            for _document in 0..2 {
                let _open = DocumentBudget::open();
                assert_eq!(eval(eighty, &s), Ok(json!(true)));
                {
                    // A nested open shares the document's budget.
                    let _nested = DocumentBudget::open();
                    assert_eq!(DocumentBudget::used(), Some(80));
                    assert_eq!(eval(eighty, &s), Err(OVER_DOCUMENT.to_string()));
                }
                assert_eq!(DocumentBudget::used(), Some(151));
                // Spent: every later comprehension fails at its first element; the rest runs.
                assert_eq!(eval("[1].all(x, true)", &s), Err(OVER_DOCUMENT.to_string()));
                assert_eq!(eval("size(params.l) == 80", &s), Ok(json!(true)));
            }
            assert_eq!(DocumentBudget::used(), None);
        });
    }

    #[test]
    fn a_field_type_walk_is_charged_per_value() {
        let table = "{'l': {'types': ['list'], 'shape': 'a list', 'items': {'types': ['int'], 'shape': 'an int'}}}";
        with_test_limits(small(100, 1000), || {
            assert_eq!(
                eval(&format!("fieldTypeErrors(params, {table}, '')"), &list(80)),
                Ok(json!([]))
            );
            assert_eq!(
                eval(&format!("fieldTypeErrors(params, {table}, '')"), &list(100)),
                Err(OVER_EXPRESSION.to_string())
            );
        });
    }

    #[test]
    fn each_thread_meters_its_own_documents() {
        let s = list(80);
        with_test_limits(small(100, 150), || {
            let _open = DocumentBudget::open();
            assert_eq!(eval("params.l.all(x, x >= 0)", &s), Ok(json!(true)));
            let other = std::thread::spawn(DocumentBudget::used)
                .join()
                .expect("joins");
            assert_eq!((other, DocumentBudget::used()), (None, Some(80)));
        });
    }

    fn ast(text: &str) -> IdedExpr {
        cel::parser::Parser::new()
            .enable_optional_syntax(true)
            .parse(text)
            .expect("parses")
    }

    /// `rt` is a part of the input, `keys` a literal of three.
    fn known(name: &str) -> Option<Binding> {
        match name {
            "rt" => Some(Binding {
                input: true,
                len: None,
            }),
            "keys" => Binding::of(&ast("['a', 'b', 'c']"), &|_| None).into(),
            _ => None,
        }
    }

    fn est(text: &str) -> u128 {
        estimate(&ast(text), 1000, &known)
    }

    #[test]
    fn the_estimate_multiplies_nested_comprehensions_unless_they_visit_parts() {
        assert_eq!(est("object.spec.numNodes > 0"), 0);
        assert_eq!(est("object.spec.env.all(e, e.name != '')"), 1000);
        assert_eq!(est("[1, 2, 3].exists(x, x == 2)"), 3);
        assert_eq!(
            est("object.spec.env.all(a, object.spec.env.all(b, a.name != b.name))"),
            1000 + 1000 * 1000
        );
        assert_eq!(
            est(
                "object.spec.env.all(a, object.spec.env.all(b, object.spec.env.all(c, a.name != b.name || c.name != '')))"
            ),
            1_000 + 1_000_000 + 1_000_000_000
        );
        // Containers of jobs, env of containers: disjoint parts, the bound over all of them.
        assert_eq!(
            est(
                "object.spec.jobs.all(j, j.containers.all(c, c.?env.orValue([]).all(e, e.name != '')))"
            ),
            3000
        );
        // The same list again inside: not parts of the element, so it multiplies.
        assert_eq!(
            est("object.spec.jobs.all(j, object.spec.jobs.exists(k, k.name == j.name))"),
            1000 + 1000 * 1000
        );
        // A list computed in the loop body is not a part of the element.
        assert_eq!(
            est("object.spec.jobs.all(j, j.containers.map(c, c.name).all(n, n != ''))"),
            1000 + 1000 + 1000 * 1000
        );
        // Filters of parts are parts; indexes of parts count as the parts; bound variables.
        assert_eq!(
            est(
                "rt.jobs.filter(j, j.n > 0).all(j, lists.range(size(j.containers)).all(i, j.containers[i].name != ''))"
            ),
            3000
        );
        assert_eq!(
            est("other.jobs.all(j, j.containers.all(c, true))"),
            1000 + 1000 * 1000
        );
        assert_eq!(
            Binding::of(&ast("x ? [] : rt.?a.orValue([]).filter(y, y > 1)"), &known),
            Binding {
                input: true,
                len: None
            }
        );
        assert_eq!(
            Binding::of(&ast("rt.map(y, y)"), &known),
            Binding::default()
        );
        assert_eq!(
            Binding::of(&ast("keys"), &known),
            Binding {
                input: false,
                len: Some(3)
            }
        );
        // A literal's length, also through a filter; not what is selected from it.
        assert_eq!(
            est("object.spec.env.all(e, keys.filter(k, k != e.name).size() > 0)"),
            4000
        );
        assert_eq!(
            est("keys.all(k, object.spec.env.all(e, e.name != k))"),
            3003
        );
        assert_eq!(
            est("object.spec.env.all(e, keys.x.all(k, true))"),
            1000 + 1000 * 1000
        );
        // A field-type walk visits the parts of its holder, as a comprehension over them would.
        assert_eq!(est("fieldTypeErrors(object.spec, keys, 'spec')"), 1000);
        assert_eq!(
            est("object.spec.jobs.all(j, size(fieldTypeErrors(j, keys, '')) == 0)"),
            2000
        );
        // Regex calls count one unit per evaluation.
        assert_eq!(
            est("object.spec.env.all(e, e.name.matches('^[A-Z]+$'))"),
            2000
        );
    }

    #[test]
    fn instrumenting_wraps_every_loop_condition_with_fresh_ids() {
        let mut e = ast("[1].all(x, [2].exists(y, x < y))");
        let before = max_id(&e);
        instrument(&mut e);
        let mut conds = Vec::new();
        fn walk<'a>(e: &'a IdedExpr, out: &mut Vec<&'a IdedExpr>) {
            if let Ast::Comprehension(c) = &e.expr {
                out.push(&c.loop_cond);
            }
            children(e, &mut |c| walk(c, out));
        }
        walk(&e, &mut conds);
        assert_eq!(conds.len(), 2);
        for cond in conds {
            let Ast::Call(c) = &cond.expr else {
                panic!("not a call: {cond:?}");
            };
            assert_eq!(c.func_name, operators::CONDITIONAL);
            assert!(
                matches!(&c.args[0].expr, Ast::Call(f) if f.func_name == COST_FUNCTION
                    && matches!(f.args.as_slice(), [a] if matches!(&a.expr, Ast::Ident(_))))
            );
            assert!(cond.id > before);
        }
    }
}
