//! Thresholds: a CEL expression over `value` (a double) per measured key, evaluated with the
//! rule engine's CEL.

use std::collections::BTreeMap;

use nvcre_engine::{CelValue, Expr, Scope, cel_type_name, go_quote};
use serde::Serialize;

/// A threshold key: what it measures and which measurement produces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThresholdKey {
    /// The key as written in `spec.thresholds`.
    pub key: &'static str,
    /// The unit shown beside values.
    pub unit: &'static str,
    /// What the key is.
    pub description: &'static str,
    /// The measurement that produces it.
    pub source: Source,
}

/// The measurement a threshold key's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Source {
    /// A BandwidthMeasurement (max over message sizes).
    Bandwidth,
    /// A GoodputMeasurement.
    Goodput,
}

/// Every threshold key, in registry order (the order `valid keys` lists them).
pub const THRESHOLD_KEYS: &[ThresholdKey] = &[
    ThresholdKey {
        key: "busBandwidthGBps",
        unit: "GB/s",
        description: "Bus bandwidth (from BandwidthMeasurement)",
        source: Source::Bandwidth,
    },
    ThresholdKey {
        key: "algBandwidthGBps",
        unit: "GB/s",
        description: "Algorithm bandwidth (from BandwidthMeasurement)",
        source: Source::Bandwidth,
    },
    ThresholdKey {
        key: "goodputRatio",
        unit: "ratio (0-1)",
        description: "Goodput ratio (from GoodputMeasurement)",
        source: Source::Goodput,
    },
    ThresholdKey {
        key: "avgTFLOPsPerGPU",
        unit: "TFLOPS",
        description: "Average TFLOPS per GPU (from GoodputMeasurement)",
        source: Source::Goodput,
    },
    ThresholdKey {
        key: "avgStepTimeSec",
        unit: "seconds",
        description: "Average step time (from GoodputMeasurement)",
        source: Source::Goodput,
    },
];

/// The registry entry of `key`.
pub fn threshold_key(key: &str) -> Option<&'static ThresholdKey> {
    THRESHOLD_KEYS.iter().find(|k| k.key == key)
}

/// `unknown threshold key(s) [a, b]; valid keys: [busBandwidthGBps, …]` for the unknown keys of
/// `keys` (sorted), or `None` when every key is known.
pub fn unknown_keys_message<'a>(keys: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut unknown: Vec<&str> = keys
        .into_iter()
        .filter(|k| threshold_key(k).is_none())
        .collect();
    if unknown.is_empty() {
        return None;
    }
    unknown.sort_unstable();
    unknown.dedup();
    let valid: Vec<&str> = THRESHOLD_KEYS.iter().map(|k| k.key).collect();
    Some(format!(
        "unknown threshold key(s) [{}]; valid keys: [{}]",
        unknown.join(", "),
        valid.join(", ")
    ))
}

/// The values of `value` a threshold is tried with when it compiles: zero, ±1, a fraction and
/// ±10¹², so that each side of a comparison a threshold is likely to make is taken.
const TRIAL_VALUES: [f64; 6] = [0.0, 1.0, -1.0, 0.5, 1e12, -1e12];

/// Compiles the threshold `expression` of `key` as [`Thresholds::compile`] does.
///
/// CEL here has no type checker, so the types are checked by trial: the expression is
/// evaluated with `value` = each of 0, 1, −1, 0.5, 10¹², −10¹² (a double, as measured), and a
/// type error at any of them (an operator or function given operands it has no overload
/// for, values that cannot be compared) or a result that is not a bool refuses it. An error that
/// depends on the value (division by zero) is left to the evaluation. A type error on a branch
/// none of these values takes is found only when the threshold is judged.
///
/// # Errors
/// `Threshold "<key>": compile threshold expression "<expr>": <why>` for an expression that
/// does not parse, reads a name other than `value`, has a type error
/// (`operator '>=' does not take double and string`) or returns a non-bool
/// (`expression must return bool, got double`).
pub fn compile_expression(key: &str, expression: &str) -> Result<Expr, String> {
    let fail = |why: String| {
        format!(
            "Threshold {}: compile threshold expression {}: {why}",
            go_quote(key),
            go_quote(expression)
        )
    };
    let expr = Expr::compile(expression).map_err(|e| fail(e.to_string()))?;
    if let Some(other) = expr.free_names().into_iter().find(|r| r != "value") {
        return Err(fail(format!(
            "undeclared reference to {other:?} (only `value` is bound)"
        )));
    }
    for v in TRIAL_VALUES {
        if let Some(r) = expr.trial(&scope(v)).map_err(fail)?
            && !matches!(r, CelValue::Bool(_))
        {
            return Err(fail(format!(
                "expression must return bool, got {}",
                cel_type_name(&r)
            )));
        }
    }
    Ok(expr)
}

/// The exit code of judged thresholds, as `measure` and the rule tests exit: 2 when one could
/// not be evaluated (an error of the thresholds given), 1 when one failed, else 0.
pub fn exit_code(results: &[ThresholdResult]) -> u8 {
    if results
        .iter()
        .any(|r| r.reason == Some(ViolationReason::InvalidThresholdExpression))
    {
        2
    } else if results.iter().all(|r| r.passed) {
        0
    } else {
        1
    }
}

/// Fails every threshold of `results` closed when `unmeasured` rows of the log were not
/// measured (past [`MAX_SIZES`](super::MAX_SIZES) message sizes): judged without them, a
/// threshold could pass on a peak the log does not have. Nothing changes when it is 0.
pub fn fail_unmeasured(results: &mut [ThresholdResult], unmeasured: u64) {
    if unmeasured == 0 {
        return;
    }
    for r in results {
        r.passed = false;
        r.reason = Some(ViolationReason::MeasurementNotAvailable);
        r.message = Some(format!(
            "Threshold {:?}: not judged: {unmeasured} rows of the log were not measured (at most {} message sizes are kept), and the peak may be among them",
            r.key,
            super::MAX_SIZES
        ));
    }
}

/// One compiled threshold.
#[derive(Debug, Clone)]
pub struct Threshold {
    /// The key.
    pub key: &'static ThresholdKey,
    /// The expression as written.
    pub expression: String,
    expr: Expr,
}

/// Thresholds by key (sorted: the order they are evaluated and reported in).
#[derive(Debug, Clone, Default)]
pub struct Thresholds {
    thresholds: BTreeMap<&'static str, Threshold>,
}

/// Why a threshold failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ViolationReason {
    /// The expression returned false.
    ThresholdViolated,
    /// The expression failed or returned a non-bool.
    InvalidThresholdExpression,
    /// The measurement produced no value for the key (fail closed).
    MeasurementNotAvailable,
}

/// The outcome of one threshold.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThresholdResult {
    /// The key.
    pub key: String,
    /// The expression.
    pub expression: String,
    /// The measured value, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// True when the expression held.
    pub passed: bool,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<ViolationReason>,
    /// The violation message, e.g.
    /// `Threshold "busBandwidthGBps" violated: measured 350.0000, expression: value >= 400`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Thresholds {
    /// Compiles `map` (key → CEL over `value`).
    ///
    /// # Errors
    /// One message per problem: the unknown keys (one message, see [`unknown_keys_message`]),
    /// then per key the error of [`compile_expression`]
    /// (`Threshold "<key>": compile threshold expression "<expr>": <why>`).
    pub fn compile(map: &BTreeMap<String, String>) -> Result<Thresholds, Vec<String>> {
        let mut errors = Vec::new();
        if let Some(m) = unknown_keys_message(map.keys().map(String::as_str)) {
            errors.push(m);
        }
        let mut thresholds = BTreeMap::new();
        for (key, expression) in map {
            let Some(k) = threshold_key(key) else {
                continue;
            };
            match compile_expression(key, expression) {
                Ok(expr) => {
                    thresholds.insert(
                        k.key,
                        Threshold {
                            key: k,
                            expression: expression.clone(),
                            expr,
                        },
                    );
                }
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() {
            Ok(Thresholds { thresholds })
        } else {
            Err(errors)
        }
    }

    /// True when there is no threshold.
    pub fn is_empty(&self) -> bool {
        self.thresholds.is_empty()
    }

    /// The thresholds, sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = &Threshold> {
        self.thresholds.values()
    }

    /// Evaluates the thresholds whose key `source` produces, in key order, with `measured`
    /// giving each key's value (`None`: not measured, which fails closed with
    /// `Threshold "<key>": no measured value (…)`).
    pub fn evaluate(
        &self,
        source: Source,
        measured: impl Fn(&str) -> Option<f64>,
    ) -> Vec<ThresholdResult> {
        self.iter()
            .filter(|t| t.key.source == source)
            .map(|t| t.evaluate(measured(t.key.key)))
            .collect()
    }
}

fn scope(value: f64) -> Scope {
    let mut s = Scope::new();
    s.bind_cel("value", CelValue::Float(value));
    s
}

impl Threshold {
    /// Evaluates with `value` (`None`: unmeasured).
    pub fn evaluate(&self, value: Option<f64>) -> ThresholdResult {
        let key = self.key.key;
        let expr = &self.expression;
        let failed = |reason, message| ThresholdResult {
            key: key.to_string(),
            expression: expr.clone(),
            value,
            passed: false,
            reason: Some(reason),
            message: Some(message),
        };
        let Some(v) = value else {
            return failed(
                ViolationReason::MeasurementNotAvailable,
                format!(
                    "Threshold {}: no measured value ({})",
                    go_quote(key),
                    self.key.description
                ),
            );
        };
        match self.expr.eval(&scope(v)) {
            Ok(CelValue::Bool(true)) => ThresholdResult {
                key: key.to_string(),
                expression: expr.clone(),
                value,
                passed: true,
                reason: None,
                message: None,
            },
            Ok(CelValue::Bool(false)) => failed(
                ViolationReason::ThresholdViolated,
                format!(
                    "Threshold {} violated: measured {v:.4}, expression: {expr}",
                    go_quote(key)
                ),
            ),
            Ok(other) => failed(
                ViolationReason::InvalidThresholdExpression,
                format!(
                    "Threshold {}: threshold expression {} returned {}, expected bool",
                    go_quote(key),
                    go_quote(expr),
                    cel_type_name(&other)
                ),
            ),
            Err(e) => failed(
                ViolationReason::InvalidThresholdExpression,
                format!(
                    "Threshold {}: evaluate threshold expression {} with value={v:.6}: {e}",
                    go_quote(key),
                    go_quote(expr)
                ),
            ),
        }
    }
}
