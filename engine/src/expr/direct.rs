//! The direct form of the plainest expressions: most rule conditions select a few fields of
//! the document and compare them with literals (`has(object.spec)`,
//! `variables.spec.?image.orValue('') != ''`, `size(object.metadata.name) <= 63`). For those the
//! interpreter's generic machinery (a context per evaluation, overload lookup, a boxed value per
//! step) costs several times the work itself. [`Direct`] is such an expression compiled to a
//! tree over the document in place.
//!
//! It answers only where its answer is certainly the interpreter's: every value it reads is a
//! JSON scalar, mapping or list, or a variable holding one; a missing key under a plain
//! select, a select into anything but a mapping, a comparison of values of two kinds, a
//! number that is not an int, anything it does not know: it gives up (`None`) and the
//! interpreter evaluates the expression, with its own value or error.
//!
//! It takes the comprehensions the macros write (`all`, `exists`, `exists_one`, `map`,
//! `filter`) over a list's elements or a mapping's keys. The CEL cost meter is charged as the
//! instrumented interpreter charges it (see `crate::cost`), in its order: each iteration, a
//! regex scan, a walk of a list or string inside a loop. It records the charges as it goes
//! ([`Charges`]) and the caller makes them once it has answered; it gives up once they pass
//! the per-expression budget, so it never works past what the budget allows. The one answer it
//! fixes where the interpreter's is not fixed: a comprehension over a mapping the expression
//! writes (`{'b': 1, 'a': 2}.map(k, k)`) visits its keys sorted, as over a variable holding
//! that mapping (stored as JSON, keys sorted); the interpreter visits them in its hash map's
//! order, which CEL leaves unspecified and which changes between runs (and with it what an
//! `exists` is charged). The tests below hold its values and charges to the interpreter's
//! over generated expressions and documents;
//! `tests/tests/properties.rs` holds the shipped rules' findings over generated WorkloadRuns
//! and their Workflows to those of the interpreter alone.

use std::sync::atomic::{AtomicBool, Ordering};

use cel::IdedExpr;
use cel::Value as Cel;
use cel::common::ast::{ComprehensionExpr, Expr as AstExpr, LiteralValue, operators};
use cel::common::types::{CelBool, CelInt, CelNull, CelString};
use cel::common::value::Val;
use serde_json::Value;

use super::{Bound, Scope, Stored, at_path, is_lazy_name, literal_json, select_chain};
use crate::cost::{scans_list, scans_text};

/// Whether [`Direct`] forms are used (tests turn it off to compare with the interpreter).
static ENABLED: AtomicBool = AtomicBool::new(true);

/// Turns the direct evaluation of the plainest expressions on or off for the whole process
/// (on by default). Off, every expression runs in the CEL interpreter: only for comparing the
/// two in tests and benchmarks; results are the same either way.
#[doc(hidden)]
pub fn set_direct_evaluation(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// An expression in direct form (see the module docs).
#[derive(Debug)]
pub(crate) enum Direct {
    /// A literal: null, bool, int, string, or a list or map of those (shared: a variable
    /// that is a literal is stored without a copy).
    Literal(std::sync::Arc<Value>),
    /// An identifier, then selects: plain (`.key`) or optional (`.?key`, `[?'key']`).
    Path {
        root: String,
        steps: Vec<(String, bool)>,
    },
    /// `has(<path>.key)`.
    Has { operand: Box<Direct>, key: String },
    /// `<optional>.orValue(<literal>)`.
    OrValue(Box<Direct>, Value),
    /// `<optional>.hasValue()`.
    HasValue(Box<Direct>),
    /// `!x`.
    Not(Box<Direct>),
    /// `a && b`.
    And(Box<Direct>, Box<Direct>),
    /// `a || b`.
    Or(Box<Direct>, Box<Direct>),
    /// `c ? a : b`.
    Cond(Box<Direct>, Box<Direct>, Box<Direct>),
    /// `a == b` (true) or `a != b` (false).
    Equals(bool, Box<Direct>, Box<Direct>),
    /// `a < b`, `a <= b`, `a > b`, `a >= b` of two ints: the operator's name.
    Compare(&'static str, Box<Direct>, Box<Direct>),
    /// `size(x)` or `x.size()` of a string, list or mapping; charged as a walk of the string
    /// when it is inside a loop (see `crate::cost`).
    Size(Box<Direct>, bool),
    /// `x in [literals]`.
    InList(Box<Direct>, Vec<Value>),
    /// `x in y`: a key of a mapping, an element of a list; charged as a walk of the list when
    /// it is inside a loop.
    In(Box<Direct>, Box<Direct>, bool),
    /// `x[k]`: a mapping's key, a list's index.
    Index(Box<Direct>, Box<Direct>),
    /// `typeName(x)`.
    TypeName(Box<Direct>),
    /// `s.matches(re)`.
    Matches(Box<Direct>, Box<Direct>),
    /// `s.startsWith(t)` (0), `s.endsWith(t)` (1), `s.contains(t)` (2); `contains` is charged
    /// as a walk of `s` when it is inside a loop.
    Text(u8, Box<Direct>, Box<Direct>, bool),
    /// A list literal with elements that are not all literals.
    List(Vec<Direct>),
    /// `a + b`: strings, lists, ints (an overflow is the interpreter's error).
    Add(Box<Direct>, Box<Direct>),
    /// `a - b` of ints.
    Subtract(Box<Direct>, Box<Direct>),
    /// `s.split(sep)` with a separator that is not empty; charged as a walk of `s` inside a
    /// loop.
    Split(Box<Direct>, Box<Direct>, bool),
    /// `list.join()` or `list.join(sep)` of a list of strings; charged as a walk of the list
    /// inside a loop.
    Join(Box<Direct>, Option<Box<Direct>>, bool),
    /// `lists.range(n)`.
    Range(Box<Direct>),
    /// A comprehension the macros write (see [`Macro`]) over the elements of a list or the
    /// keys of a mapping, bound as `var`: `test` is the predicate (of a `map`, its optional
    /// filter), `value` a `map`'s element.
    Comprehension {
        kind: Macro,
        range: Box<Direct>,
        var: String,
        test: Option<Box<Direct>>,
        value: Option<Box<Direct>>,
    },
    /// `goQuote(s)`.
    GoQuote(Box<Direct>),
    /// `string(x)` of a string, an int or a bool.
    ToString(Box<Direct>),
}

/// The comprehension macros the direct form takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Macro {
    /// `all(x, p)`.
    All,
    /// `exists(x, p)`.
    Exists,
    /// `exists_one(x, p)`.
    ExistsOne,
    /// `map(x, f)`, `map(x, p, f)` and `filter(x, p)` (a `map` of `x` filtered by `p`).
    Map,
}

/// The longest `lists.range(n)` built in direct form (a longer one is the interpreter's).
const MAX_RANGE: i64 = 100_000;

/// A charge the interpreter makes to the CEL cost meter (see `crate::cost`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Charge {
    /// A regex scan of this many bytes.
    Regex(usize),
    /// Units: a comprehension's iteration, a walk of a list or a string inside a loop.
    Units(u64),
}

/// The charges an evaluation in direct form made, in the interpreter's order, to be charged
/// once the form answered (charging as it goes would charge twice when it then gives up). The
/// form gives up once they pass the per-expression budget: the interpreter then stops where
/// the budget runs out, and a direct evaluation never does more work than the budget allows.
#[derive(Debug)]
pub(crate) struct Charges {
    list: Vec<Charge>,
    units: u64,
    limit: u64,
}

impl Charges {
    /// No charges yet, under the per-expression budget in force.
    pub(crate) fn new() -> Charges {
        Charges {
            list: Vec::new(),
            units: 0,
            limit: crate::cost::expression_limit(),
        }
    }

    /// The charges, in order.
    pub(crate) fn into_list(self) -> Vec<Charge> {
        self.list
    }

    fn len(&self) -> usize {
        self.list.len()
    }

    /// Records `c`; `None` once the charges pass the per-expression budget.
    fn push(&mut self, c: Charge) -> Option<()> {
        let units = match c {
            Charge::Regex(bytes) => crate::cost::regex_units(bytes),
            Charge::Units(n) => n,
        };
        self.units = self.units.saturating_add(units);
        self.list.push(c);
        (self.units <= self.limit).then_some(())
    }

    /// Records again the charges made in `made`: an operand the interpreter evaluates twice
    /// (once to charge its walk, once to walk it).
    fn repeat(&mut self, made: std::ops::Range<usize>) -> Option<()> {
        for i in made {
            let c = *self.list.get(i)?;
            self.push(c)?;
        }
        Some(())
    }
}

/// A comprehension's variable, bound to the element it visits; inner ones first.
struct Local<'a, 'l> {
    name: &'a str,
    value: Item<'a>,
    next: Locals<'a, 'l>,
}

/// The comprehension variables in scope (innermost first).
type Locals<'a, 'l> = Option<&'l Local<'a, 'l>>;

/// An element a comprehension visits.
enum Item<'a> {
    /// An element of a list JSON holds.
    Json(&'a Value),
    /// A key of a mapping JSON holds.
    Key(&'a str),
    /// An element of a list the expression built.
    Owned(Value),
}

/// The value of comprehension variable `name`, when one is in scope.
fn local<'a>(locals: Locals<'a, '_>, name: &str) -> Option<V<'a>> {
    let mut cur = locals;
    while let Some(l) = cur {
        if l.name == name {
            return Some(match &l.value {
                Item::Json(v) => V::Json(v),
                Item::Key(k) => V::Str(k),
                Item::Owned(v) => V::Owned(v.clone()),
            });
        }
        cur = l.next;
    }
    None
}

/// Units of the interpreter's charge for a walk of the list `v` inside a loop: its length (a
/// mapping's lookups, anything else: none).
fn list_units(v: &V<'_>) -> u64 {
    match v.json() {
        Some(Value::Array(items)) => u64::try_from(items.len()).unwrap_or(u64::MAX),
        _ => 0,
    }
}

/// Units of the interpreter's charge for a walk of the string `v` inside a loop (anything
/// else: none).
fn text_units(v: &V<'_>) -> u64 {
    v.str().map_or(0, |s| crate::cost::text_units(s.len()))
}

/// A value met while evaluating a [`Direct`] form.
enum V<'a> {
    /// A JSON value (of the document, a variable or a literal).
    Json(&'a Value),
    Bool(bool),
    Int(i64),
    Str(&'a str),
    /// An optional: with a value, or none.
    Optional(Option<&'a Value>),
    /// A JSON value the expression built (a list, a joined string) that may hold mappings or
    /// lists of a document.
    Owned(Value),
    /// A JSON value the expression built in which every mapping and list is its own: a string,
    /// a list of scalars, a list of such lists.
    Pure(Value),
}

/// A scalar, for comparing.
#[derive(PartialEq, PartialOrd)]
enum Scalar<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Str(&'a str),
}

impl V<'_> {
    /// The JSON value, for a JSON value read or built.
    fn json(&self) -> Option<&Value> {
        match self {
            V::Json(v) => Some(v),
            V::Owned(v) | V::Pure(v) => Some(v),
            _ => None,
        }
    }

    fn scalar(&self) -> Option<Scalar<'_>> {
        Some(match (self, self.json()) {
            (_, Some(Value::Null)) => Scalar::Null,
            (_, Some(Value::Bool(b))) | (V::Bool(b), _) => Scalar::Bool(*b),
            (_, Some(Value::Number(n))) => Scalar::Int(n.as_i64()?),
            (V::Int(i), _) => Scalar::Int(*i),
            (_, Some(Value::String(s))) => Scalar::Str(s),
            (V::Str(s), _) => Scalar::Str(s),
            _ => return None,
        })
    }

    fn bool(&self) -> Option<bool> {
        match self.scalar()? {
            Scalar::Bool(b) => Some(b),
            _ => None,
        }
    }

    fn str(&self) -> Option<&str> {
        match self.scalar()? {
            Scalar::Str(s) => Some(s),
            _ => None,
        }
    }

    fn int(&self) -> Option<i64> {
        match self.scalar()? {
            Scalar::Int(i) => Some(i),
            _ => None,
        }
    }

    /// Whether the value is null (`None` for an optional, which is no value).
    fn is_null(&self) -> Option<bool> {
        match self {
            V::Optional(_) => None,
            V::Json(v) => Some(v.is_null()),
            V::Owned(v) | V::Pure(v) => Some(v.is_null()),
            V::Bool(_) | V::Int(_) | V::Str(_) => Some(false),
        }
    }

    /// Whether the value, as an element of a list the expression builds, is no mapping or list
    /// of a document (whose place the interpreter would keep).
    fn is_own(&self) -> bool {
        match self {
            V::Pure(_) | V::Bool(_) | V::Int(_) | V::Str(_) => true,
            V::Json(v) => !v.is_object() && !v.is_array(),
            V::Owned(v) => !v.is_object() && !v.is_array(),
            V::Optional(_) => false,
        }
    }

    /// Whether every element of the list this value is, is [`V::is_own`].
    fn holds_own(&self) -> bool {
        match self {
            V::Pure(_) => true,
            V::Json(Value::Array(items)) => items.iter().all(|v| !v.is_object() && !v.is_array()),
            V::Owned(Value::Array(items)) => items.iter().all(|v| !v.is_object() && !v.is_array()),
            _ => false,
        }
    }

    /// The value as JSON to keep in a list the expression builds.
    fn into_json(self) -> Option<Value> {
        Some(match self {
            V::Json(v) => v.clone(),
            V::Owned(v) | V::Pure(v) => v,
            V::Bool(b) => Value::Bool(b),
            V::Int(i) => Value::from(i),
            V::Str(s) => Value::String(s.to_string()),
            V::Optional(_) => return None,
        })
    }
}

impl Direct {
    /// `e` in direct form, when every part of it has one.
    pub(crate) fn of(e: &IdedExpr) -> Option<Direct> {
        Direct::of_at(e, false)
    }

    /// `e` in direct form; `looped`: it is evaluated once per iteration of an enclosing
    /// comprehension, where the interpreter charges walks of lists and strings.
    fn of_at(e: &IdedExpr, looped: bool) -> Option<Direct> {
        let of = |x: &IdedExpr| Direct::of_at(x, looped).map(Box::new);
        Some(match &e.expr {
            AstExpr::Literal(LiteralValue::Double(_) | LiteralValue::UInt(_)) => return None,
            AstExpr::List(l) if !l.elements.is_empty() => {
                if !l.optional_indices.is_empty() {
                    return None;
                }
                Direct::List(
                    l.elements
                        .iter()
                        .map(|x| Direct::of_at(x, looped))
                        .collect::<Option<_>>()?,
                )
            }
            AstExpr::Literal(_) | AstExpr::List(_) | AstExpr::Map(_) => {
                Direct::Literal(std::sync::Arc::new(literal_json(e)?))
            }
            AstExpr::Ident(_) => Direct::path(e)?,
            AstExpr::Select(s) if s.test => Direct::Has {
                operand: Box::new(Direct::path(&s.operand)?),
                key: s.field.clone(),
            },
            AstExpr::Select(_) => Direct::path(e)?,
            AstExpr::Comprehension(c) => Direct::comprehension(c, looped)?,
            AstExpr::Call(c) => {
                let arg = |i: usize| of(c.args.get(i)?);
                match (c.func_name.as_str(), c.target.as_deref(), c.args.len()) {
                    (operators::OPT_SELECT | operators::OPT_INDEX, None, 2) => Direct::path(e)?,
                    ("orValue", Some(t), 1) => {
                        let default = match &c.args[0].expr {
                            AstExpr::Literal(LiteralValue::Double(_) | LiteralValue::UInt(_)) => {
                                return None;
                            }
                            _ => literal_json(&c.args[0])?,
                        };
                        Direct::OrValue(of(t)?, default)
                    }
                    ("hasValue", Some(t), 0) => Direct::HasValue(of(t)?),
                    ("size", Some(t), 0) => Direct::Size(of(t)?, looped && scans_text(t)),
                    ("size", None, 1) => Direct::Size(arg(0)?, looped && scans_text(&c.args[0])),
                    (operators::LOGICAL_NOT, None, 1) => Direct::Not(arg(0)?),
                    (operators::LOGICAL_AND, None, 2) => Direct::And(arg(0)?, arg(1)?),
                    (operators::LOGICAL_OR, None, 2) => Direct::Or(arg(0)?, arg(1)?),
                    (operators::CONDITIONAL, None, 3) => Direct::Cond(arg(0)?, arg(1)?, arg(2)?),
                    (operators::EQUALS, None, 2) => Direct::Equals(true, arg(0)?, arg(1)?),
                    (operators::NOT_EQUALS, None, 2) => Direct::Equals(false, arg(0)?, arg(1)?),
                    (operators::IN, None, 2) => match &c.args[1].expr {
                        AstExpr::List(l) if !l.elements.is_empty() => Direct::InList(
                            arg(0)?,
                            l.elements
                                .iter()
                                .map(|x| match &x.expr {
                                    AstExpr::Literal(
                                        LiteralValue::String(_)
                                        | LiteralValue::Int(_)
                                        | LiteralValue::Boolean(_),
                                    ) => literal_json(x),
                                    _ => None,
                                })
                                .collect::<Option<_>>()?,
                        ),
                        _ => Direct::In(arg(0)?, arg(1)?, looped && scans_list(&c.args[1])),
                    },
                    (operators::INDEX, None, 2) => Direct::Index(arg(0)?, arg(1)?),
                    ("typeName", None, 1) => Direct::TypeName(arg(0)?),
                    ("goQuote", None, 1) => Direct::GoQuote(arg(0)?),
                    ("string", None, 1) => Direct::ToString(arg(0)?),
                    (operators::ADD, None, 2) => Direct::Add(arg(0)?, arg(1)?),
                    (operators::SUBSTRACT, None, 2) => Direct::Subtract(arg(0)?, arg(1)?),
                    ("split", Some(t), 1) => {
                        Direct::Split(of(t)?, arg(0)?, looped && scans_text(t))
                    }
                    ("join", Some(t), 0) => Direct::Join(of(t)?, None, looped && scans_list(t)),
                    ("join", Some(t), 1) => {
                        Direct::Join(of(t)?, Some(arg(0)?), looped && scans_list(t))
                    }
                    ("range", Some(lists), 1) if matches!(&lists.expr, AstExpr::Ident(l) if l == "lists") => {
                        Direct::Range(arg(0)?)
                    }
                    ("matches", Some(t), 1) => Direct::Matches(of(t)?, arg(0)?),
                    ("startsWith", Some(t), 1) => Direct::Text(0, of(t)?, arg(0)?, false),
                    ("endsWith", Some(t), 1) => Direct::Text(1, of(t)?, arg(0)?, false),
                    ("contains", Some(t), 1) => {
                        Direct::Text(2, of(t)?, arg(0)?, looped && scans_text(t))
                    }
                    (
                        op @ (operators::LESS
                        | operators::LESS_EQUALS
                        | operators::GREATER
                        | operators::GREATER_EQUALS),
                        None,
                        2,
                    ) => Direct::Compare(
                        [
                            operators::LESS,
                            operators::LESS_EQUALS,
                            operators::GREATER,
                            operators::GREATER_EQUALS,
                        ]
                        .into_iter()
                        .find(|o| *o == op)?,
                        arg(0)?,
                        arg(1)?,
                    ),
                    _ => return None,
                }
            }
            _ => return None,
        })
    }

    /// A comprehension of one of the [`Macro`]s, in the shape the parser expands it to.
    fn comprehension(c: &ComprehensionExpr, looped: bool) -> Option<Direct> {
        if c.iter_var2.is_some() {
            return None;
        }
        let accu = c.accu_var.as_str();
        let is_accu = |e: &IdedExpr| matches!(&e.expr, AstExpr::Ident(n) if n == accu);
        let call = |e: &'_ IdedExpr, name: &str, n: usize| match &e.expr {
            AstExpr::Call(x) if x.func_name == name && x.target.is_none() && x.args.len() == n => {
                Some(x.args.clone())
            }
            _ => None,
        };
        let is_bool = |e: &IdedExpr, b: bool| matches!(&e.expr, AstExpr::Literal(LiteralValue::Boolean(x)) if *x.inner() == b);
        let is_int = |e: &IdedExpr, i: i64| matches!(&e.expr, AstExpr::Literal(LiteralValue::Int(x)) if *x.inner() == i);
        let body = |e: &IdedExpr| Direct::of_at(e, true).map(Box::new);
        // `@result + [f]`: the element appended.
        let appended = |e: &IdedExpr| match call(e, operators::ADD, 2)?.as_slice() {
            [l, r] if is_accu(l) => match &r.expr {
                AstExpr::List(list)
                    if list.elements.len() == 1 && list.optional_indices.is_empty() =>
                {
                    Some(list.elements[0].clone())
                }
                _ => None,
            },
            _ => None,
        };
        let (kind, test, value) = if is_bool(&c.accu_init, true)
            && is_accu(&c.result)
            && call(&c.loop_cond, operators::NOT_STRICTLY_FALSE, 1).is_some_and(|a| is_accu(&a[0]))
        {
            match call(&c.loop_step, operators::LOGICAL_AND, 2)?.as_slice() {
                [l, p] if is_accu(l) => (Macro::All, Some(body(p)?), None),
                _ => return None,
            }
        } else if is_bool(&c.accu_init, false)
            && is_accu(&c.result)
            && call(&c.loop_cond, operators::NOT_STRICTLY_FALSE, 1)
                .and_then(|a| call(&a[0], operators::LOGICAL_NOT, 1))
                .is_some_and(|a| is_accu(&a[0]))
        {
            match call(&c.loop_step, operators::LOGICAL_OR, 2)?.as_slice() {
                [l, p] if is_accu(l) => (Macro::Exists, Some(body(p)?), None),
                _ => return None,
            }
        } else if is_int(&c.accu_init, 0) && is_bool(&c.loop_cond, true) {
            match (
                call(&c.loop_step, operators::CONDITIONAL, 3)?.as_slice(),
                call(&c.result, operators::EQUALS, 2)?.as_slice(),
            ) {
                ([p, step, otherwise], [r, one])
                    if is_accu(otherwise)
                        && is_accu(r)
                        && is_int(one, 1)
                        && call(step, operators::ADD, 2)
                            .is_some_and(|a| is_accu(&a[0]) && is_int(&a[1], 1)) =>
                {
                    (Macro::ExistsOne, Some(body(p)?), None)
                }
                _ => return None,
            }
        } else if matches!(&c.accu_init.expr, AstExpr::List(l) if l.elements.is_empty())
            && is_bool(&c.loop_cond, true)
            && is_accu(&c.result)
        {
            match appended(&c.loop_step) {
                Some(f) => (Macro::Map, None, Some(body(&f)?)),
                None => match call(&c.loop_step, operators::CONDITIONAL, 3)?.as_slice() {
                    [g, step, otherwise] if is_accu(otherwise) => {
                        (Macro::Map, Some(body(g)?), Some(body(&appended(step)?)?))
                    }
                    _ => return None,
                },
            }
        } else {
            return None;
        };
        Some(Direct::Comprehension {
            kind,
            range: Box::new(Direct::of_at(&c.iter_range, looped)?),
            var: c.iter_var.clone(),
            test,
            value,
        })
    }

    /// `e` as an identifier followed by plain and optional selects.
    fn path(e: &IdedExpr) -> Option<Direct> {
        let (root, steps) = select_chain(e)?;
        Some(Direct::Path { root, steps })
    }

    /// The boolean the expression gives in `scope`, when this form answers it (see the module
    /// docs); `None` leaves it to the interpreter.
    ///
    /// `charges` receives the charges the interpreter makes to the cost meter (regex scans,
    /// comprehension iterations, walks inside loops), in its order: the caller makes them once
    /// this form answered ([`Charges`]).
    pub(crate) fn eval_bool(&self, scope: &Scope, charges: &mut Charges) -> Option<bool> {
        if !ENABLED.load(Ordering::Relaxed) {
            return None;
        }
        self.eval(scope, None, charges)?.bool()
    }

    /// The value the expression gives in `scope` when it is a string, an int, a bool or null
    /// (a message, a field path, a template's value), as the interpreter gives it; `None`
    /// leaves it to the interpreter. `charges` as for [`Direct::eval_bool`].
    pub(crate) fn eval_scalar(&self, scope: &Scope, charges: &mut Charges) -> Option<Cel> {
        if !ENABLED.load(Ordering::Relaxed) {
            return None;
        }
        let v = self.eval(scope, None, charges)?;
        Some(match v.scalar()? {
            Scalar::Null => Cel::Null,
            Scalar::Bool(b) => Cel::Bool(b),
            Scalar::Int(i) => Cel::Int(i),
            Scalar::Str(s) => Cel::String(std::sync::Arc::new(s.to_string())),
        })
    }

    /// The items of the list the expression gives in `scope`, when it builds one
    /// (`[['a', object.x], ['b', object.y]]`, `object.l.filter(x, …)`): the interpreter copies
    /// such a list to JSON as it is; `None` leaves it to the interpreter. `charges` as for
    /// [`Direct::eval_bool`].
    pub(crate) fn eval_built_list(
        &self,
        scope: &Scope,
        charges: &mut Charges,
    ) -> Option<Vec<Value>> {
        if !ENABLED.load(Ordering::Relaxed) {
            return None;
        }
        let items = match self.eval(scope, None, charges)? {
            V::Pure(Value::Array(items)) | V::Owned(Value::Array(items)) => items,
            _ => return None,
        };
        // The interpreter's uint has no JSON form: a list holding one it keeps as its own.
        if items.iter().any(holds_uint) {
            return None;
        }
        Some(items)
    }

    /// The value the expression gives in `scope`, stored as the interpreter's value would be
    /// stored for a variable (see `Lazy::compute`): a mapping or list of a bound document at its
    /// place (`place_of`), any other JSON value as JSON; `None` leaves it to the interpreter.
    /// `charges` as for [`Direct::eval_bool`].
    pub(crate) fn eval_stored(
        &self,
        scope: &Scope,
        charges: &mut Charges,
        place_of: impl Fn(&dyn Val) -> Option<(std::sync::Arc<Value>, std::sync::Arc<[String]>)>,
    ) -> Option<Stored> {
        if !ENABLED.load(Ordering::Relaxed) {
            return None;
        }
        // A literal is the same on every document: stored once, shared.
        if let Direct::Literal(v) = self {
            return Some(Stored::Json {
                root: std::sync::Arc::clone(v),
                path: std::sync::Arc::from(Vec::new()),
            });
        }
        let v = self.eval(scope, None, charges)?;
        if let V::Json(v @ (Value::Object(_) | Value::Array(_))) = v
            && let Some((root, path)) = place_of(crate::view::view(v).as_ref())
        {
            return Some(Stored::Json { root, path });
        }
        // A list the expression built is copied, by the interpreter too, parts of a document
        // and all (a part taken out of it again is left to the interpreter, see `Index`).
        if let V::Owned(Value::Object(_)) = &v {
            return None;
        }
        let v = v.into_json()?;
        // The interpreter's uint has no JSON form: a value holding one it keeps as its own.
        if holds_uint(&v) {
            return None;
        }
        Some(Stored::json(v))
    }

    fn eval<'a>(
        &'a self,
        scope: &'a Scope,
        locals: Locals<'a, '_>,
        charges: &mut Charges,
    ) -> Option<V<'a>> {
        Some(match self {
            Direct::Literal(v) => V::Json(v),
            Direct::Path { root, steps } => {
                // A comprehension's variable shadows every other name, as in the interpreter.
                let mut cur = match local(locals, root) {
                    Some(v) => v,
                    None => match place(scope, root)? {
                        Place::Json(v) => V::Json(v),
                        Place::Bool(b) => V::Bool(b),
                        Place::Int(i) => V::Int(i),
                        Place::Str(s) => V::Str(s),
                    },
                };
                for (key, optional) in steps {
                    cur = match (cur, optional) {
                        (V::Json(Value::Object(m)), false) => {
                            V::Json(crate::view::json_field(m, key)?)
                        }
                        (V::Json(Value::Object(m)), true) => {
                            V::Optional(crate::view::json_field(m, key))
                        }
                        (V::Optional(None), true) => V::Optional(None),
                        (V::Optional(Some(Value::Object(m))), true) => {
                            V::Optional(crate::view::json_field(m, key))
                        }
                        _ => return None,
                    };
                }
                cur
            }
            Direct::Has { operand, key } => match operand.eval(scope, locals, charges)?.json()? {
                Value::Object(m) => V::Bool(crate::view::json_field(m, key).is_some()),
                _ => return None,
            },
            Direct::OrValue(o, default) => match o.eval(scope, locals, charges)? {
                V::Optional(Some(v)) => V::Json(v),
                V::Optional(None) => V::Json(default),
                _ => return None,
            },
            Direct::HasValue(o) => match o.eval(scope, locals, charges)? {
                V::Optional(v) => V::Bool(v.is_some()),
                _ => return None,
            },
            Direct::Not(x) => V::Bool(!x.eval(scope, locals, charges)?.bool()?),
            Direct::And(a, b) => match a.eval(scope, locals, charges)?.bool()? {
                false => V::Bool(false),
                true => V::Bool(b.eval(scope, locals, charges)?.bool()?),
            },
            Direct::Or(a, b) => match a.eval(scope, locals, charges)?.bool()? {
                true => V::Bool(true),
                false => V::Bool(b.eval(scope, locals, charges)?.bool()?),
            },
            Direct::Cond(c, a, b) => match c.eval(scope, locals, charges)?.bool()? {
                true => a.eval(scope, locals, charges)?,
                false => b.eval(scope, locals, charges)?,
            },
            Direct::Equals(equal, a, b) => {
                let (a, b) = (
                    a.eval(scope, locals, charges)?,
                    b.eval(scope, locals, charges)?,
                );
                // Null equals null only (`object.spec == null`, whatever the spec holds).
                let (a_null, b_null) = (a.is_null()?, b.is_null()?);
                if a_null || b_null {
                    return Some(V::Bool((a_null && b_null) == *equal));
                }
                let (a, b) = (a.scalar()?, b.scalar()?);
                if std::mem::discriminant(&a) != std::mem::discriminant(&b) {
                    return None;
                }
                V::Bool((a == b) == *equal)
            }
            Direct::Compare(op, a, b) => {
                let (a, b) = (
                    a.eval(scope, locals, charges)?.int()?,
                    b.eval(scope, locals, charges)?.int()?,
                );
                V::Bool(match *op {
                    operators::LESS => a < b,
                    operators::LESS_EQUALS => a <= b,
                    operators::GREATER => a > b,
                    _ => a >= b,
                })
            }
            Direct::Size(x, charged) => {
                let from = charges.len();
                let x = x.eval(scope, locals, charges)?;
                if *charged {
                    let made = from..charges.len();
                    charges.push(Charge::Units(text_units(&x)))?;
                    charges.repeat(made)?;
                }
                let n = match (x.str(), x.json()) {
                    (Some(s), _) => s.chars().count(),
                    (_, Some(Value::Array(a))) => a.len(),
                    (_, Some(Value::Object(m))) => m.len(),
                    _ => return None,
                };
                V::Int(i64::try_from(n).ok()?)
            }
            Direct::In(x, c, charged) => {
                let (x, c) = if *charged {
                    // The interpreter walks `c` to charge it, then evaluates `x in c`.
                    let from = charges.len();
                    let c = c.eval(scope, locals, charges)?;
                    let made = from..charges.len();
                    charges.push(Charge::Units(list_units(&c)))?;
                    let x = x.eval(scope, locals, charges)?;
                    charges.repeat(made)?;
                    (x, c)
                } else {
                    (
                        x.eval(scope, locals, charges)?,
                        c.eval(scope, locals, charges)?,
                    )
                };
                let x = x.scalar()?;
                match c.json()? {
                    Value::Object(m) => match x {
                        Scalar::Str(k) => V::Bool(crate::view::json_field(m, k).is_some()),
                        _ => return None,
                    },
                    Value::Array(items) => V::Bool(contains(&x, items)?),
                    _ => return None,
                }
            }
            Direct::InList(x, items) => {
                let x = x.eval(scope, locals, charges)?;
                V::Bool(contains(&x.scalar()?, items)?)
            }
            Direct::Index(x, k) => {
                let (x, k) = (
                    x.eval(scope, locals, charges)?,
                    k.eval(scope, locals, charges)?,
                );
                let k = k.scalar()?;
                match (x, k) {
                    (V::Json(Value::Object(m)), Scalar::Str(k)) => {
                        V::Json(crate::view::json_field(m, k)?)
                    }
                    (V::Json(Value::Array(items)), Scalar::Int(i)) => {
                        V::Json(items.get(usize::try_from(i).ok()?)?)
                    }
                    // A mapping or list of a document taken out of a list or mapping the
                    // expression built (`[object.a][0]`) is, in the interpreter, that part
                    // itself, which keeps its place; a copy would not.
                    (V::Owned(Value::Object(mut m)), Scalar::Str(k)) => {
                        V::Owned(scalar_only(m.remove(k)?)?)
                    }
                    (V::Owned(Value::Array(items)), Scalar::Int(i)) => {
                        V::Owned(scalar_only(take_item(items, i)?)?)
                    }
                    (V::Pure(Value::Array(items)), Scalar::Int(i)) => V::Pure(take_item(items, i)?),
                    _ => return None,
                }
            }
            Direct::TypeName(x) => {
                let x = x.eval(scope, locals, charges)?;
                V::Str(match (&x, x.json()) {
                    (_, Some(Value::Null)) => "null",
                    (V::Bool(_), _) | (_, Some(Value::Bool(_))) => "bool",
                    (_, Some(Value::Number(n))) => match (n.as_i64(), n.as_u64()) {
                        (Some(_), _) => "int",
                        (None, Some(_)) => "uint",
                        (None, None) => "double",
                    },
                    (V::Int(_), _) => "int",
                    (V::Str(_), _) | (_, Some(Value::String(_))) => "string",
                    (_, Some(Value::Array(_))) => "list",
                    (_, Some(Value::Object(_))) => "map",
                    _ => return None,
                })
            }
            Direct::Matches(text, pattern) => {
                let (text, pattern) = (
                    text.eval(scope, locals, charges)?,
                    pattern.eval(scope, locals, charges)?,
                );
                let (text, pattern) = (text.str()?, pattern.str()?);
                let re = super::cached_regex(pattern).ok()?;
                charges.push(Charge::Regex(text.len()))?;
                V::Bool(re.is_match(text))
            }
            Direct::Text(how, text, arg, charged) => {
                let text = text_charged(text, *charged, scope, locals, charges)?;
                let arg = arg.eval(scope, locals, charges)?;
                let (text, arg) = (text.str()?, arg.str()?);
                V::Bool(match how {
                    0 => text.starts_with(arg),
                    1 => text.ends_with(arg),
                    _ => text.contains(arg),
                })
            }
            Direct::List(items) => {
                let mut pure = true;
                let mut out = Vec::with_capacity(items.len());
                for x in items {
                    let x = x.eval(scope, locals, charges)?;
                    pure &= x.is_own();
                    out.push(x.into_json()?);
                }
                built(Value::Array(out), pure)
            }
            Direct::Add(a, b) => {
                let (a, b) = (
                    a.eval(scope, locals, charges)?,
                    b.eval(scope, locals, charges)?,
                );
                if let (Some(x), Some(y)) = (a.str(), b.str()) {
                    V::Pure(Value::String(format!("{x}{y}")))
                } else if let (Some(x), Some(y)) = (a.int(), b.int()) {
                    V::Int(x.checked_add(y)?)
                } else if let (Some(Value::Array(_)), Some(Value::Array(_))) = (a.json(), b.json())
                {
                    let pure = a.holds_own() && b.holds_own();
                    let (Some(Value::Array(mut x)), Some(Value::Array(y))) =
                        (a.into_json(), b.into_json())
                    else {
                        return None;
                    };
                    x.extend(y);
                    built(Value::Array(x), pure)
                } else {
                    return None;
                }
            }
            Direct::Subtract(a, b) => {
                let (a, b) = (
                    a.eval(scope, locals, charges)?.int()?,
                    b.eval(scope, locals, charges)?.int()?,
                );
                V::Int(a.checked_sub(b)?)
            }
            Direct::Split(text, sep, charged) => {
                let text = text_charged(text, *charged, scope, locals, charges)?;
                let sep = sep.eval(scope, locals, charges)?;
                let (text, sep) = (text.str()?, sep.str()?);
                if sep.is_empty() {
                    return None;
                }
                V::Pure(Value::Array(
                    text.split(sep)
                        .map(|p| Value::String(p.to_string()))
                        .collect(),
                ))
            }
            Direct::Join(list, sep, charged) => {
                let from = charges.len();
                let list = list.eval(scope, locals, charges)?;
                if *charged {
                    let made = from..charges.len();
                    charges.push(Charge::Units(list_units(&list)))?;
                    charges.repeat(made)?;
                }
                let sep = match sep {
                    Some(sep) => Some(sep.eval(scope, locals, charges)?),
                    None => None,
                };
                let sep = match &sep {
                    Some(sep) => sep.str()?,
                    None => "",
                };
                let Value::Array(items) = list.json()? else {
                    return None;
                };
                let parts = items
                    .iter()
                    .map(Value::as_str)
                    .collect::<Option<Vec<_>>>()?;
                V::Pure(Value::String(parts.join(sep)))
            }
            Direct::Range(n) => {
                let n = n.eval(scope, locals, charges)?.int()?;
                if !(0..=MAX_RANGE).contains(&n) {
                    return None;
                }
                V::Pure(Value::Array((0..n).map(Value::from).collect()))
            }
            Direct::Comprehension {
                kind,
                range,
                var,
                test,
                value,
            } => {
                let range = range.eval(scope, locals, charges)?;
                comprehension(
                    *kind,
                    range,
                    var,
                    test.as_deref(),
                    value.as_deref(),
                    scope,
                    locals,
                    charges,
                )?
            }
            Direct::GoQuote(x) => {
                let x = x.eval(scope, locals, charges)?;
                V::Pure(Value::String(crate::quote::go_quote(x.str()?)))
            }
            Direct::ToString(x) => {
                let x = x.eval(scope, locals, charges)?;
                V::Pure(Value::String(match x.scalar()? {
                    Scalar::Str(s) => s.to_string(),
                    Scalar::Int(i) => i.to_string(),
                    Scalar::Bool(b) => b.to_string(),
                    Scalar::Null => return None,
                }))
            }
        })
    }
}

/// A value the expression built: [`V::Pure`] when `pure`, else [`V::Owned`].
fn built(v: Value, pure: bool) -> V<'static> {
    if pure { V::Pure(v) } else { V::Owned(v) }
}

/// `text` evaluated as the operand of a string function: when the interpreter charges its walk
/// (inside a loop), it evaluates `text` once to charge it and once to call the function.
fn text_charged<'a>(
    text: &'a Direct,
    charged: bool,
    scope: &'a Scope,
    locals: Locals<'a, '_>,
    charges: &mut Charges,
) -> Option<V<'a>> {
    let from = charges.len();
    let v = text.eval(scope, locals, charges)?;
    if charged {
        let made = from..charges.len();
        charges.push(Charge::Units(text_units(&v)))?;
        charges.repeat(made)?;
    }
    Some(v)
}

/// Element `i` of `items`, taken out (`None` when `i` is negative or out of range).
fn take_item(mut items: Vec<Value>, i: i64) -> Option<Value> {
    let i = usize::try_from(i).ok()?;
    (i < items.len()).then(|| items.swap_remove(i))
}

/// `item` when it is no mapping or list (`None`: the interpreter keeps such a part's place).
fn scalar_only(item: Value) -> Option<Value> {
    (!item.is_object() && !item.is_array()).then_some(item)
}

/// A comprehension of `kind` over `range` (the elements of a list, the keys of a mapping), with
/// the interpreter's charges: for `all`, `exists` and `exists_one`, one unit each time the loop
/// condition is evaluated (before each element, until `all` meets a false or `exists` a true);
/// for `map` and `filter`, one unit per element, made by the filter or the element appended.
#[allow(clippy::too_many_arguments)]
fn comprehension<'a>(
    kind: Macro,
    range: V<'a>,
    var: &'a str,
    test: Option<&'a Direct>,
    value: Option<&'a Direct>,
    scope: &'a Scope,
    locals: Locals<'a, '_>,
    charges: &mut Charges,
) -> Option<V<'a>> {
    let items: Vec<Item<'a>> = match range {
        V::Json(Value::Array(items)) => items.iter().map(Item::Json).collect(),
        V::Json(Value::Object(m)) => m.keys().map(|k| Item::Key(k.as_str())).collect(),
        V::Pure(Value::Array(items)) | V::Owned(Value::Array(items)) => {
            items.into_iter().map(Item::Owned).collect()
        }
        _ => return None,
    };
    // `all`: still true; `exists`: still false.
    let mut going = true;
    let mut found = 0u32;
    let mut out = Vec::new();
    let mut pure = true;
    for item in items {
        if kind != Macro::Map {
            charges.push(Charge::Units(1))?;
            if !going {
                break;
            }
        }
        let bound = Local {
            name: var,
            value: item,
            next: locals,
        };
        let inner = Some(&bound);
        match kind {
            Macro::All => going = test?.eval(scope, inner, charges)?.bool()?,
            Macro::Exists => going = !test?.eval(scope, inner, charges)?.bool()?,
            Macro::ExistsOne => {
                if test?.eval(scope, inner, charges)?.bool()? {
                    found = found.saturating_add(1);
                }
            }
            Macro::Map => {
                charges.push(Charge::Units(1))?;
                if let Some(t) = test
                    && !t.eval(scope, inner, charges)?.bool()?
                {
                    continue;
                }
                let v = value?.eval(scope, inner, charges)?;
                pure &= v.is_own();
                out.push(v.into_json()?);
            }
        }
    }
    Some(match kind {
        Macro::All => V::Bool(going),
        Macro::Exists => V::Bool(!going),
        Macro::ExistsOne => V::Bool(found == 1),
        Macro::Map => built(Value::Array(out), pure),
    })
}

/// Whether `x` is among `items`, when every one is a scalar of `x`'s kind (`None` otherwise:
/// the interpreter compares values of two kinds).
fn contains(x: &Scalar<'_>, items: &[Value]) -> Option<bool> {
    let mut found = false;
    for item in items {
        let item = V::Json(item);
        let item = item.scalar()?;
        if std::mem::discriminant(x) != std::mem::discriminant(&item) {
            return None;
        }
        found |= *x == item;
    }
    Some(found)
}

/// Whether `v` holds a number only a uint can hold.
fn holds_uint(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.as_i64().is_none() && n.as_u64().is_some(),
        Value::Array(a) => a.iter().any(holds_uint),
        Value::Object(m) => m.values().any(holds_uint),
        _ => false,
    }
}

/// What a binding holds, as [`Scope`]'s resolver reads it.
enum Place<'a> {
    Json(&'a Value),
    Bool(bool),
    Int(i64),
    Str(&'a str),
}

/// The value of binding `name` in `scope`, looked up as the interpreter's resolver looks it up
/// (a variable first, then a bound name), when it is JSON or a scalar.
fn place<'a>(scope: &'a Scope, name: &str) -> Option<Place<'a>> {
    if is_lazy_name(name)
        && let Some(l) = scope.lazy(name)
    {
        return match l.force().as_ref().ok()? {
            s @ Stored::Json { .. } => Some(Place::Json(s.value()?)),
            Stored::Val(v) => scalar_val(v.as_ref()),
        };
    }
    match scope.bound.get(name)? {
        Bound::Json(v) => Some(Place::Json(v)),
        Bound::At { root, path } => Some(Place::Json(at_path(root, path)?)),
        Bound::Val(v) => scalar_val(v.as_ref()),
        Bound::Deferred(d) => Some(Place::Json(d.get()?)),
    }
}

/// A bool, int or string the interpreter holds (a variable computed from literals).
fn scalar_val(v: &dyn Val) -> Option<Place<'_>> {
    if let Some(b) = v.downcast_ref::<CelBool>() {
        return Some(Place::Bool(*b.inner()));
    }
    if let Some(i) = v.downcast_ref::<CelInt>() {
        return Some(Place::Int(*i.inner()));
    }
    if let Some(s) = v.downcast_ref::<CelString>() {
        return Some(Place::Str(s.inner()));
    }
    if v.downcast_ref::<CelNull>().is_some() {
        return Some(Place::Json(&Value::Null));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::Expr;
    use proptest::prelude::*;

    fn key() -> BoxedStrategy<&'static str> {
        prop_oneof![Just("a"), Just("b"), Just("c")].boxed()
    }

    /// JSON documents over three keys, with every kind of value the interpreter tells apart
    /// (a uint, doubles, text beyond ASCII).
    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-2i64..70).prop_map(Value::from),
            Just(Value::from(u64::MAX)),
            Just(Value::from(2.5)),
            Just(Value::from(3.0)),
            prop_oneof![Just(""), Just("a"), Just("abc"), Just("é/x"), Just("a/b")]
                .prop_map(|s| Value::String(s.into())),
        ];
        let value = leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(key().prop_map(String::from), inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        });
        // A mapping at the top, as a manifest is, so that most selects find something.
        prop::collection::btree_map(key().prop_map(String::from), value, 1..4)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    /// Expressions over `object` and `other`, in the grammar the direct form takes and a little
    /// beyond it (uint and double literals, `+`).
    fn expr() -> impl Strategy<Value = String> {
        let path = (
            prop_oneof![Just("object"), Just("other")],
            prop::collection::vec((key(), any::<bool>()), 0..3),
        )
            .prop_map(|(root, steps)| {
                let mut s = root.to_string();
                for (k, optional) in steps {
                    s.push_str(if optional { ".?" } else { "." });
                    s.push_str(k);
                }
                s
            })
            .boxed();
        let literal = prop_oneof![
            Just("null"),
            Just("true"),
            Just("false"),
            Just("0"),
            Just("1"),
            Just("3"),
            Just("''"),
            Just("'a'"),
            Just("'abc'"),
            Just("'a/'"),
            Just("[]"),
            Just("{}"),
            Just("2.5"),
            Just("1u"),
            Just("'^[a-c]+$'"),
            Just("{'b': 1, 'a': ['x', 2]}"),
            Just("{'a': {'c': null}}"),
        ]
        .prop_map(String::from)
        .boxed();
        let atom = prop_oneof![
            3 => path.clone(),
            2 => path.clone().prop_map(|p| format!("size({p})")),
            2 => literal.clone(),
            2 => (path.clone(), literal.clone()).prop_map(|(p, l)| format!("{p}.orValue({l})")),
            1 => path.clone().prop_map(|p| format!("{p}.hasValue()")),
            2 => (path.clone(), key()).prop_map(|(p, k)| format!("has({p}.{k})")),
        ];
        let compared = (
            atom.clone(),
            prop_oneof![Just("=="), Just("!="), Just("<"), Just(">="), Just("in")],
            literal.clone(),
        )
            .prop_map(|(a, op, l)| format!("{a} {op} {l}"));
        let atom = prop_oneof![2 => atom, 1 => compared];
        atom.prop_recursive(2, 8, 3, |inner| {
            let two = (inner.clone(), inner.clone());
            prop_oneof![
                inner.clone().prop_map(|x| format!("!({x})")),
                inner.clone().prop_map(|x| format!("size({x})")),
                inner.clone().prop_map(|x| format!("typeName({x})")),
                (inner.clone(), inner.clone(), inner.clone())
                    .prop_map(|(c, a, b)| format!("({c}) ? ({a}) : ({b})")),
                (
                    two,
                    prop_oneof![
                        Just("&&"),
                        Just("||"),
                        Just("=="),
                        Just("!="),
                        Just("<"),
                        Just("<="),
                        Just(">"),
                        Just(">="),
                        Just("in"),
                        Just("+"),
                        Just("-"),
                    ]
                )
                    .prop_map(|((a, b), op)| format!("({a}) {op} ({b})")),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a})[{b}]")),
                (
                    inner.clone(),
                    inner.clone(),
                    prop_oneof![
                        Just("matches"),
                        Just("startsWith"),
                        Just("endsWith"),
                        Just("contains")
                    ]
                )
                    .prop_map(|(a, b, f)| format!("({a}).{f}({b})")),
                inner
                    .clone()
                    .prop_map(|x| format!("({x}) in ['a', 1, true]")),
                inner.clone().prop_map(|x| format!("goQuote({x})")),
                inner.clone().prop_map(|x| format!("string({x})")),
                inner.clone().prop_map(|x| format!("({x}) == null")),
                inner.clone().prop_map(|x| format!("({x}).split('/')")),
                (
                    inner.clone(),
                    prop_oneof![Just("()"), Just("(',')"), Just("(1)")]
                )
                    .prop_map(|(x, sep)| format!("({x}).join{sep}")),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("[{a}, {b}]")),
                // Comprehensions over a list or a mapping of the document, or a range; the
                // variable is `x`, and `y` in one nested inside.
                (
                    comprehended(),
                    prop_oneof![
                        Just("all"),
                        Just("exists"),
                        Just("exists_one"),
                        Just("filter"),
                        Just("map")
                    ],
                    body(inner.clone(), "x"),
                )
                    .prop_map(|(range, m, b)| format!("({range}).{m}(x, {b})")),
                (
                    comprehended(),
                    body(inner.clone(), "x"),
                    body(inner.clone(), "x")
                )
                    .prop_map(|(range, p, f)| format!("({range}).map(x, {p}, {f})")),
                (
                    comprehended(),
                    comprehended().prop_map(|r| r.replace("object", "x")),
                    body(inner, "y")
                )
                    .prop_map(|(range, inner_range, b)| {
                        format!("({range}).exists(x, ({inner_range}).all(y, {b}))")
                    }),
            ]
        })
    }

    /// What a comprehension visits: a list or mapping of the document, a range, a list built.
    fn comprehended() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => key().prop_map(|k| format!("object.{k}")),
            1 => (key(), key()).prop_map(|(a, b)| format!("object.?{a}.?{b}.orValue([])")),
            1 => (0i64..4).prop_map(|n| format!("lists.range({n})")),
            1 => Just("lists.range(size(object.a))".to_string()),
            1 => Just("['a', 'b/c', 'a']".to_string()),
        ]
    }

    /// A comprehension's body over its variable `var`: the expression given, or one reading
    /// `var` as the rules do (a select, a size, a walk charged inside a loop).
    fn body(
        inner: impl Strategy<Value = String> + Clone + 'static,
        var: &'static str,
    ) -> impl Strategy<Value = String> {
        prop_oneof![
            1 => inner.clone(),
            1 => key().prop_map(move |k| format!("{var}.?{k}.orValue('') == 'a'")),
            1 => Just(format!("typeName({var}) == 'string' && size({var}) > 1")),
            1 => Just(format!("{var} in object.a")),
            1 => key().prop_map(move |k| format!("{var}.{k}")),
            1 => Just(format!("string({var}).contains('/')")),
            1 => Just(format!("{var}.contains('/') ? {var}.split('/')[0].size() <= 1 : true")),
            1 => Just(format!("{var}.matches('^[a-c]+$')")),
            1 => Just(format!("[{var}, 'x'].join('-')")),
            1 => inner.prop_map(move |x| format!("({x}) || {var} == 1")),
        ]
    }

    fn as_json(v: V<'_>) -> Option<Value> {
        v.into_json()
    }

    /// Wherever the direct form of `text` answers over `object` and `other`, the interpreter
    /// gives the same value (and no error) and makes the same charges: their total, and, under
    /// budgets they overrun, the same failure.
    fn holds_to_the_interpreter(
        text: &str,
        object: &Value,
        other: &Value,
    ) -> Result<(), TestCaseError> {
        let Ok(e) = Expr::compile(text) else {
            return Ok(());
        };
        let mut scope = Scope::new();
        scope.bind("object", object);
        scope.bind("other", other);
        let Some(direct) = e.direct.as_ref() else {
            return Ok(());
        };
        // A string, int, bool or null answered is the interpreter's CEL value.
        if let Some(scalar) = direct.eval_scalar(&scope, &mut Charges::new()) {
            match e.eval_with(&scope, crate::view::to_cel) {
                Ok(v) => prop_assert_eq!(&scalar, &v, "{} on {} / {}", text, object, other),
                Err(err) => prop_assert!(false, "{text}: direct {scalar:?}, interpreter {err}"),
            }
        }
        let mut charges = Charges::new();
        let Some(answer) = direct.eval(&scope, None, &mut charges).and_then(as_json) else {
            return Ok(());
        };
        // The charges it reports are the interpreter's: their total, and, under a budget
        // they overrun, the same failure.
        let interpreted_units = {
            let _document = crate::cost::DocumentBudget::open();
            let _ = e.eval_with(&scope, |v| Ok(crate::view::to_json(v)));
            crate::cost::DocumentBudget::used().unwrap_or(0)
        };
        prop_assert_eq!(
            charges.units,
            interpreted_units,
            "{} on {} / {}",
            text,
            object,
            other
        );
        for limit in [0, 1, 2, 5, charges.units.saturating_sub(1)] {
            let limits = crate::limits::Limits {
                cel_cost: limit,
                ..crate::limits::Limits::default()
            };
            let (direct_outcome, interpreted_outcome) =
                crate::cost::with_test_limits(limits, || {
                    let mut charges = Charges::new();
                    let direct = direct
                        .eval(&scope, None, &mut charges)
                        .map(|_| crate::expr::charge_direct(charges).map_err(|e| e.to_string()));
                    let interpreted = e.eval_with(&scope, |_| Ok(())).map_err(|e| e.to_string());
                    (direct, interpreted)
                });
            // Past the budget the form gives up, and the interpreter's failure stands.
            if let Some(direct_outcome) = direct_outcome {
                prop_assert_eq!(
                    direct_outcome,
                    interpreted_outcome,
                    "{} under {}",
                    text,
                    limit
                );
            }
        }
        let interpreted = e.eval_with(&scope, |v| Ok(crate::view::to_json(v)));
        match interpreted {
            Ok(Some(v)) => prop_assert_eq!(&answer, &v, "{} on {} / {}", text, object, other),
            // A uint has no JSON form on the interpreter's side.
            Ok(None) if holds_uint(&answer) => {}
            other => prop_assert!(
                false,
                "{text} on {object} / {other:?}: direct {answer}, interpreter {interpreted:?}",
                interpreted = other
            ),
        }
        Ok(())
    }

    /// Documents whose fields are lists and mappings, as the comprehensions of the rules visit.
    fn listed() -> impl Strategy<Value = Value> {
        let text = prop_oneof![Just("a"), Just("a/b"), Just("abc"), Just(""), Just("c/")]
            .prop_map(|s| Value::String(s.into()));
        let item = prop_oneof![
            2 => text.clone(),
            1 => (-1i64..3).prop_map(Value::from),
            2 => prop::collection::btree_map(
                key().prop_map(String::from),
                prop_oneof![text.clone(), prop::collection::vec(text.clone(), 0..3).prop_map(Value::Array)],
                0..3,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ];
        (
            prop::collection::vec(item.clone(), 0..5),
            prop::collection::vec(item, 0..4),
            prop::collection::btree_map(key().prop_map(String::from), text, 0..3),
        )
            .prop_map(|(a, b, c)| {
                serde_json::json!({"a": a, "b": b, "c": Value::Object(c.into_iter().collect())})
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 8192,
            failure_persistence: None,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0),
            ..ProptestConfig::default()
        })]

        /// Over generated expressions and documents: see [`holds_to_the_interpreter`].
        #[test]
        fn the_direct_form_answers_as_the_interpreter(
            text in expr(),
            object in json(),
            other in json(),
        ) {
            holds_to_the_interpreter(&text, &object, &other)?;
        }

        /// Over documents of lists and mappings, which the comprehensions visit element by
        /// element.
        #[test]
        fn comprehensions_answer_as_the_interpreter(
            text in expr(),
            object in listed(),
            other in listed(),
        ) {
            holds_to_the_interpreter(&text, &object, &other)?;
        }
    }

    /// A comprehension over a mapping the expression writes visits its keys sorted, as over a
    /// variable holding that mapping (stored as JSON, keys sorted): the same answer and charges
    /// on every run, where the interpreter's own order there is its hash map's (unspecified by
    /// CEL, and different between runs).
    #[test]
    fn a_mapping_the_expression_writes_is_visited_in_sorted_key_order() {
        let scope = Scope::new();
        let e = Expr::compile("{'b': 1, 'a': 2, 'c': 3}.map(k, k)").expect("compiles");
        let direct = e.direct.as_ref().expect("direct");
        assert_eq!(
            direct.eval_built_list(&scope, &mut Charges::new()),
            Some(vec!["a".into(), "b".into(), "c".into()])
        );
        // `exists` meets its true at the first key, `'a'`: the loop condition is charged before
        // it and once more before `'b'`, where it stops.
        let e = Expr::compile("{'b': 1, 'a': 2}.exists(k, k == 'a')").expect("compiles");
        let direct = e.direct.as_ref().expect("direct");
        let mut charges = Charges::new();
        assert!(matches!(
            direct.eval(&scope, None, &mut charges),
            Some(V::Bool(true))
        ));
        assert_eq!(charges.into_list(), [Charge::Units(1), Charge::Units(1)]);
    }

    /// The forms the shipped rules use most are taken; what the interpreter decides with more
    /// than JSON (a double, a uint, an error) is not.
    #[test]
    fn plain_conditions_are_taken_and_the_rest_is_left_to_the_interpreter() {
        // (expression, whether it has a direct form)
        let cases = [
            ("has(object.spec)", true),
            ("object.?spec.?image.orValue('') != ''", true),
            ("size(object.metadata.name) <= 63", true),
            ("object.?spec.?framework.?torch.hasValue()", true),
            (
                "typeName(object.a) != 'int' || object.a <= 2147483647",
                true,
            ),
            (
                "object.k in object.labels && object.labels[object.k] == 'q'",
                true,
            ),
            ("object.metadata.name.matches('^[a-z]+$')", true),
            ("'a' + 'b' == 'ab'", true),
            ("object.parts[size(object.parts) - 1]", true),
            (
                "(size(object.v) > 63 ? ['too long'] : []) + [object.e]",
                true,
            ),
            (
                "object.path + '[' + goQuote(object.k) + ']: ' + object.errors.join('; ')",
                true,
            ),
            ("object.k.split('/')", true),
            ("object.a == 2.5", false),
            ("object.a == 1u", false),
            ("object.list.all(x, x > 1)", true),
            ("object.m.map(k, k.startsWith('a'), k + '/')", true),
            ("object.list.all(x, x * 2 == 4)", false),
            ("object.list.sortBy(x, x.n)", false),
            ("object.a * 2 == 4", false),
            ("[object.a, ?object.?b]", false),
        ];
        for (t, direct) in cases {
            let e = Expr::compile(t).expect("compiles");
            assert_eq!(e.direct.is_some(), direct, "{t}");
        }
        // A number that is not an int, a key missing under a plain select: the interpreter's.
        let doc = serde_json::json!({"a": 3.0, "metadata": {}});
        let mut scope = Scope::new();
        scope.bind("object", &doc);
        for t in ["object.a <= 3", "size(object.metadata.name) <= 63"] {
            let e = Expr::compile(t).expect("compiles");
            let direct = e.direct.as_ref().expect("direct");
            assert!(
                direct.eval(&scope, None, &mut Charges::new()).is_none(),
                "{t}"
            );
        }
        // A list built of scalars (and lists of them) is listed as JSON; one holding a list of
        // the document is left to the interpreter, which keeps that list's place.
        let doc = serde_json::json!({"a": 3, "l": [1], "metadata": {}});
        scope.bind("object", &doc);
        let built = |t: &str| {
            let e = Expr::compile(t).expect("compiles");
            let direct = e.direct.as_ref().expect("direct");
            direct.eval_built_list(&scope, &mut Charges::new())
        };
        assert_eq!(
            built("[['a', object.a], ['b', object.?b.orValue(0)]] + [['c']]"),
            Some(vec![
                serde_json::json!(["a", 3]),
                serde_json::json!(["b", 0]),
                serde_json::json!(["c"])
            ])
        );
        assert_eq!(built("[object.l]"), Some(vec![serde_json::json!([1])]));
        assert_eq!(
            built("[object.a] + object.l"),
            Some(vec![3.into(), 1.into()])
        );
        let e =
            Expr::compile("object.metadata.?name.orValue('x').matches('^x$')").expect("compiles");
        let mut charges = Charges::new();
        assert_eq!(
            e.direct
                .as_ref()
                .expect("direct")
                .eval_bool(&scope, &mut charges),
            Some(true)
        );
        assert_eq!(charges.into_list(), [Charge::Regex(1)]);
    }
}
