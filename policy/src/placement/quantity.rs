//! Kubernetes quantities and the per-node GPU need: [`parse_quantity`] reads `"8"`, `"2Ki"`,
//! `"4000m"` exactly (or says why it cannot: not a quantity, not a whole number, too large),
//! [`gpu_count`] reads one `nvidia.com/gpu` value, and [`gpu_need`] finds the largest
//! `nvidia.com/gpu` request a Workflow makes, which the capacity filter of [`super::place`]
//! compares with each node's allocatable.

use nvcre_engine::{FieldPath, Segment};
use serde_json::Value;

use super::GPU_RESOURCE;
use super::spec::PlacementError;
use crate::api::Workflow;

/// Why a value is not a count (a whole number of something, such as GPUs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QuantityError {
    /// Not a Kubernetes quantity (`8`, `1.5`, `2k`, `1Ki`, `4000m`, `1e3`).
    #[error("is not a Kubernetes quantity")]
    Syntax,
    /// A quantity, but not a whole number (`1.5`, `1500m`).
    #[error("is not a whole number")]
    Fraction,
    /// Below zero where a count is meant.
    #[error("is negative")]
    Negative,
    /// A whole number beyond what a 64-bit integer holds (above 9223372036854775807).
    #[error("is too large to represent (above 9223372036854775807)")]
    TooLarge,
    /// More than 38 significant digits: more precision than is read.
    #[error("has more than 38 significant digits")]
    TooManyDigits,
}

/// What a GPU count may be, for messages: the accepted values after a [`QuantityError`].
pub const GPU_COUNT_ACCEPTED: &str = "a GPU count is a whole number from 0 to 9223372036854775807, written as a number or a Kubernetes quantity (8, \"8\", \"1k\")";

/// Why `value` is not a GPU count, for a message after its field path: `<value> <reason>:
/// <what is accepted>`, e.g. `9223372036854775807k is too large to represent (above
/// 9223372036854775807): a GPU count is a whole number from 0 to …`.
pub fn gpu_count_problem(value: &Value, e: QuantityError) -> String {
    let written = match value {
        Value::String(s) if s.is_empty() => "\"\"".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    format!("{written} {e}: {GPU_COUNT_ACCEPTED}")
}

/// The per-node GPU need: the largest `nvidia.com/gpu` found under any `requests` or
/// `limits` map anywhere in `spec.jobTemplate` or any dependency (the capacity filter compares it
/// with each node). `None` when no such entry exists.
///
/// Values may be strings holding a Kubernetes quantity (`"8"`, `"8.0"`, `"1k"`) or numbers.
///
/// # Errors
/// [`PlacementError::InvalidDocument`] at the first value that is not a GPU count
/// ([`gpu_count`]): never read as "no GPU need".
pub fn gpu_need(workflow: &Workflow) -> Result<Option<i64>, PlacementError> {
    let spec = FieldPath::root().key("spec");
    let mut found = gpu_quantities(&workflow.spec.job_template, spec.clone().key("jobTemplate"));
    for (i, d) in workflow.spec.dependencies.iter().enumerate() {
        found.extend(gpu_quantities(d, spec.clone().key("dependencies").index(i)));
    }
    let mut need: Option<i64> = None;
    for (path, value) in found {
        let n = gpu_count(value).map_err(|e| PlacementError::InvalidDocument {
            path: path.to_string(),
            reason: gpu_count_problem(value, e),
        })?;
        need = need.max(Some(n));
    }
    Ok(need)
}

/// Every `nvidia.com/gpu` entry of a `requests` or `limits` mapping in `value` (at `at`), in
/// document order, with its field path.
pub fn gpu_quantities(value: &Value, mut at: FieldPath) -> Vec<(FieldPath, &Value)> {
    let mut out = Vec::new();
    collect_gpu(value, &mut at, &mut out);
    out
}

fn collect_gpu<'a>(value: &'a Value, at: &mut FieldPath, out: &mut Vec<(FieldPath, &'a Value)>) {
    match value {
        Value::Object(map) => {
            for (key, val) in map {
                at.push(Segment::Key(key.clone()));
                if (key == "requests" || key == "limits")
                    && let Some(q) = val.get(GPU_RESOURCE)
                {
                    out.push((at.clone().key(GPU_RESOURCE), q));
                }
                collect_gpu(val, at, out);
                at.pop();
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                at.push(Segment::Index(i));
                collect_gpu(item, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

/// A GPU count from a JSON value: a number or a string holding a Kubernetes quantity, whole and
/// from 0 to `i64::MAX`.
///
/// # Errors
/// Why it is not one: [`QuantityError::Syntax`] (also for a value that is neither a number nor
/// a string), [`QuantityError::Fraction`], [`QuantityError::Negative`],
/// [`QuantityError::TooLarge`], [`QuantityError::TooManyDigits`].
pub fn gpu_count(v: &Value) -> Result<i64, QuantityError> {
    let n = match v {
        Value::String(s) => parse_quantity(s)?,
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i,
            (None, Some(_), _) => return Err(QuantityError::TooLarge),
            (None, None, Some(f)) => float_count(f)?,
            (None, None, None) => return Err(QuantityError::Syntax),
        },
        _ => return Err(QuantityError::Syntax),
    };
    if n < 0 {
        return Err(QuantityError::Negative);
    }
    Ok(n)
}

/// A float that is a whole number within `i64`'s range.
fn float_count(f: f64) -> Result<i64, QuantityError> {
    // 2^63 as f64: every finite float below it in magnitude converts exactly when whole.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if !f.is_finite() || f.abs() >= LIMIT {
        return Err(if f < 0.0 {
            QuantityError::Negative
        } else {
            QuantityError::TooLarge
        });
    }
    if f.fract() != 0.0 {
        return Err(QuantityError::Fraction);
    }
    // Whole and below 2^63 in magnitude: the conversion is exact.
    Ok(f as i64)
}

/// The exact integer value of a Kubernetes quantity (`"8"`, `"+8"`, `"8.0"`, `"2k"`, `"1Ki"`,
/// `"4000m"`, `"1e3"`), or `None` when it does not parse, is not a whole number or does not fit
/// in an `i64` ([`parse_quantity`] says which).
pub fn quantity_as_int(s: &str) -> Option<i64> {
    parse_quantity(s).ok()
}

/// The exact integer value of a Kubernetes quantity, read by the engine's one quantity grammar
/// ([`nvcre_engine::quantity::split`]). Surrounding spaces are ignored.
///
/// # Errors
/// [`QuantityError::Syntax`], [`QuantityError::Fraction`] (not a whole number),
/// [`QuantityError::TooLarge`] (outside `i64`), [`QuantityError::TooManyDigits`] (more than 38
/// significant digits that do not already make it too large).
pub fn parse_quantity(s: &str) -> Result<i64, QuantityError> {
    use QuantityError::{Fraction, Syntax, TooLarge, TooManyDigits};
    let nvcre_engine::quantity::Parts {
        negative,
        int_part,
        frac_part,
        exp2,
        exp10,
    } = nvcre_engine::quantity::split(s.trim()).ok_or(Syntax)?;
    // The significant digits D (no leading or trailing zeros) and the value D × 10^e10 × 2^exp2.
    let all = format!("{int_part}{frac_part}");
    let digits = all.trim_start_matches('0');
    let significant = digits.trim_end_matches('0');
    if significant.is_empty() {
        return Ok(0);
    }
    let trailing = i128::try_from(digits.len() - significant.len()).map_err(|_| TooLarge)?;
    let frac_len = i128::try_from(frac_part.len()).map_err(|_| TooLarge)?;
    let e10 = exp10 - frac_len + trailing;
    let width = i128::try_from(significant.len()).map_err(|_| TooLarge)?;
    // D ≥ 10^(width-1): the value is at least 10^(width-1+e10) × 2^exp2.
    if width - 1 + e10 >= 19 {
        return Err(TooLarge);
    }
    if width > 38 {
        return Err(TooManyDigits);
    }
    let d: i128 = significant.parse().map_err(|_| Syntax)?;
    let value: i128 = if e10 >= 0 {
        // width + e10 ≤ 19 here, so D × 10^e10 < 10^19 and × 2^60 fits an i128.
        let scaled = d * 10_i128.pow(u32::try_from(e10).map_err(|_| TooLarge)?);
        scaled.checked_mul(1_i128 << exp2).ok_or(TooLarge)?
    } else {
        // D × 2^exp2 / (2^k × 5^k), k = -e10. D has no trailing zero, so without a binary
        // suffix it is never whole; with one, D must hold 5^k and 2^exp2 the rest of 2^k.
        let k = u32::try_from(-e10).map_err(|_| Fraction)?;
        if exp2 == 0 || k > 54 {
            // 5^55 exceeds every 38-digit D: it cannot divide it.
            return Err(Fraction);
        }
        let five = 5_i128.pow(k);
        if d % five != 0 {
            return Err(Fraction);
        }
        let q = d / five;
        if exp2 >= k {
            q.checked_mul(1_i128 << (exp2 - k)).ok_or(TooLarge)?
        } else {
            let two = 1_i128 << (k - exp2);
            if q % two != 0 {
                return Err(Fraction);
            }
            q / two
        }
    };
    let signed = if negative { -value } else { value };
    i64::try_from(signed).map_err(|_| TooLarge)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::fixtures::*;
    use QuantityError::{Fraction, Negative, Syntax, TooLarge, TooManyDigits};
    use proptest::prelude::*;
    use serde_json::json;

    // ---- quantities ---------------------------------------------------------------------

    macro_rules! quantity {
        ($($name:ident: $q:expr => $want:expr;)*) => {$(
            #[test]
            fn $name() { assert_eq!(parse_quantity($q), $want); }
        )*};
    }

    quantity! {
        q_plain: "8" => Ok(8);
        q_plus: "+4" => Ok(4);
        q_negative: "-2" => Ok(-2);
        q_decimal_whole: "8.0" => Ok(8);
        q_decimal_fraction: "1.5" => Err(Fraction);
        q_leading_dot: ".5k" => Ok(500);
        q_trailing_dot: "5." => Ok(5);
        q_kilo: "2k" => Ok(2000);
        q_kibi: "1Ki" => Ok(1024);
        q_frac_kibi: "0.5Ki" => Ok(512);
        q_frac_kibi_not_whole: "0.001Ki" => Err(Fraction);
        q_milli_whole: "4000m" => Ok(4);
        q_milli_fraction: "1500m" => Err(Fraction);
        q_exponent: "1e3" => Ok(1000);
        q_exponent_upper: "1E3" => Ok(1000);
        q_exponent_signed: "5000e-3" => Ok(5);
        q_exponent_plus: "2e+2" => Ok(200);
        q_exa_suffix: "1E" => Ok(1_000_000_000_000_000_000);
        q_garbage: "eight" => Err(Syntax);
        q_empty: "" => Err(Syntax);
        q_dot_only: "." => Err(Syntax);
        q_two_dots: "1.2.3" => Err(Syntax);
        q_bad_suffix: "8x" => Err(Syntax);
        q_bad_exponent: "1e" => Err(Syntax);
        q_exponent_garbage: "1e3x" => Err(Syntax);
        q_spaces: " 8 " => Ok(8);
        q_zero: "0" => Ok(0);
        q_zero_huge_exponent: "0e99999999999999999999999999999999" => Ok(0);
        q_leading_zeros: "0000000000000000000000000000000000000000008" => Ok(8);
        q_trailing_zeros: "8.000000000000000000000000000000000000000000" => Ok(8);
        // The edges of i64.
        q_max: "9223372036854775807" => Ok(i64::MAX);
        q_max_plus_one: "9223372036854775808" => Err(TooLarge);
        q_min: "-9223372036854775808" => Ok(i64::MIN);
        q_min_minus_one: "-9223372036854775809" => Err(TooLarge);
        q_max_kilo: "9223372036854775807k" => Err(TooLarge);
        q_max_as_kilo: "9223372036854775.807k" => Ok(i64::MAX);
        q_exa_edge: "9.223372036854775807E" => Ok(i64::MAX);
        q_exa_over: "9.223372036854775808E" => Err(TooLarge);
        q_exbi: "7Ei" => Ok(7 * (1 << 60));
        q_exbi_over: "8Ei" => Err(TooLarge);
        q_pebi: "8191Pi" => Ok(8191 * (1 << 50));
        q_pebi_over: "8192Pi" => Err(TooLarge);
        q_pebi_too_precise: "8191.99999999999999911182158029987476766109466552734375Pi" => Err(TooManyDigits);
        q_huge_exponent: "1e99999999999999999999999999999999" => Err(TooLarge);
        q_tiny_exponent: "1e-99999999999999999999999999999999" => Err(Fraction);
        q_exponent_19: "1e19" => Err(TooLarge);
        q_exponent_18: "9e18" => Ok(9_000_000_000_000_000_000);
        q_many_digits_fraction: "1.000000000000000000000000000000000000001" => Err(TooManyDigits);
        q_many_digits_large: "1000000000000000000000000000000000000001" => Err(TooLarge);
    }

    proptest! {
        /// Every i64 written plainly, or as a multiple of a suffix, reads back exactly.
        #[test]
        fn plain_integers_read_back(n in any::<i64>()) {
            prop_assert_eq!(parse_quantity(&n.to_string()), Ok(n));
        }

        #[test]
        fn kilo_and_kibi_multiples_read_back(n in -9_223_372_036_854_775i64..=9_223_372_036_854_775) {
            prop_assert_eq!(parse_quantity(&format!("{n}k")), Ok(n * 1000));
            let kibi = n / 1024;
            prop_assert_eq!(parse_quantity(&format!("{kibi}Ki")), Ok(kibi * 1024));
        }

        /// Milli-units read back only when whole.
        #[test]
        fn milli_units(n in any::<i64>()) {
            let want = if n % 1000 == 0 { Ok(n / 1000) } else { Err(Fraction) };
            prop_assert_eq!(parse_quantity(&format!("{n}m")), want);
        }

        /// Anything above i64::MAX (as a plain integer) is too large, never wrapped.
        #[test]
        fn above_i64_is_too_large(extra in 1u64..=u64::MAX) {
            let n = i128::from(i64::MAX) + i128::from(extra);
            prop_assert_eq!(parse_quantity(&n.to_string()), Err(TooLarge));
        }
    }

    macro_rules! count {
        ($($name:ident: $v:expr => $want:expr;)*) => {$(
            #[test]
            fn $name() { assert_eq!(gpu_count(&$v), $want); }
        )*};
    }

    count! {
        c_number: json!(8) => Ok(8);
        c_string: json!("8") => Ok(8);
        c_float_whole: json!(8.0) => Ok(8);
        c_float_fraction: json!(1.5) => Err(Fraction);
        c_negative: json!(-3) => Err(Negative);
        c_negative_string: json!("-3") => Err(Negative);
        c_u64: json!(9_223_372_036_854_775_808u64) => Err(TooLarge);
        c_float_huge: json!(1e20) => Err(TooLarge);
        c_float_negative_huge: json!(-1e20) => Err(Negative);
        c_bool: json!(true) => Err(Syntax);
        c_list: json!([8]) => Err(Syntax);
        c_max_string: json!("9223372036854775807") => Ok(i64::MAX);
    }

    #[test]
    fn the_message_names_the_value_and_what_is_accepted() {
        assert_eq!(
            gpu_count_problem(&json!("9223372036854775807k"), TooLarge),
            "9223372036854775807k is too large to represent (above 9223372036854775807): a GPU count is a whole number from 0 to 9223372036854775807, written as a number or a Kubernetes quantity (8, \"8\", \"1k\")"
        );
        assert_eq!(
            gpu_count_problem(&json!(1.5), Fraction),
            "1.5 is not a whole number: a GPU count is a whole number from 0 to 9223372036854775807, written as a number or a Kubernetes quantity (8, \"8\", \"1k\")"
        );
    }

    // ---- gpu need -----------------------------------------------------------------------

    macro_rules! need {
        ($($name:ident: $jt:expr, $deps:expr => $want:expr;)*) => {$(
            #[test]
            fn $name() {
                assert_eq!(gpu_need(&wf_with($jt, $deps)).map_err(|e| e.to_string()), $want);
            }
        )*};
    }

    need! {
        need_none: json!({"spec": {}}), json!([]) => Ok(None);
        need_dep_string: json!({"spec": {}}), json!([{"spec": {"limits": {"nvidia.com/gpu": "4"}}}]) => Ok(Some(4));
        need_largest: json!({"spec": {"trainer": {"resourcesPerNode": {"requests": {"nvidia.com/gpu": 8}}}}}),
            json!([{"spec": {"limits": {"nvidia.com/gpu": "4"}}}]) => Ok(Some(8));
        need_only_requests_limits: json!({"spec": {"labels": {"nvidia.com/gpu": "16"}, "x": {"nvidia.com/gpu": 32}}}), json!([]) => Ok(None);
        need_nested_list: json!({"spec": {"a": [{"b": {"requests": {"nvidia.com/gpu": "2"}}}]}}), json!([]) => Ok(Some(2));
        need_zero: json!({"spec": {"limits": {"nvidia.com/gpu": "0"}}}), json!([]) => Ok(Some(0));
        need_negative_is_an_error: json!({"spec": {"limits": {"nvidia.com/gpu": -3}}}), json!([]) => Err(
            "spec.jobTemplate.spec.limits[\"nvidia.com/gpu\"]: -3 is negative: a GPU count is a whole number from 0 to 9223372036854775807, written as a number or a Kubernetes quantity (8, \"8\", \"1k\")".to_string());
        need_unparseable_is_an_error: json!({"spec": {}}), json!([{"spec": {"a": [{"limits": {"nvidia.com/gpu": "lots"}}]}}]) => Err(
            "spec.dependencies[0].spec.a[0].limits[\"nvidia.com/gpu\"]: lots is not a Kubernetes quantity: a GPU count is a whole number from 0 to 9223372036854775807, written as a number or a Kubernetes quantity (8, \"8\", \"1k\")".to_string());
        need_too_large_is_an_error: json!({"spec": {"limits": {"nvidia.com/gpu": "9223372036854775807k"}}}), json!([]) => Err(
            "spec.jobTemplate.spec.limits[\"nvidia.com/gpu\"]: 9223372036854775807k is too large to represent (above 9223372036854775807): a GPU count is a whole number from 0 to 9223372036854775807, written as a number or a Kubernetes quantity (8, \"8\", \"1k\")".to_string());
    }

    #[test]
    fn example_gpu_need() -> Result<(), Box<dyn std::error::Error>> {
        use crate::{api::Workflow, placement::gpu_need};
        let wf: Workflow = serde_json::from_value(serde_json::json!({
            "apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "Workflow", "metadata": {"name": "wf"},
            "spec": {"jobTemplate": {"spec": {}}, "dependencies": [
                {"kind": "TrainingRuntime", "spec": {"resources": {"limits": {"nvidia.com/gpu": "8"}}}}]}
        }))?;
        assert_eq!(gpu_need(&wf)?, Some(8));
        Ok(())
    }

    #[test]
    fn example_quantity_as_int() -> Result<(), Box<dyn std::error::Error>> {
        use crate::placement::quantity_as_int;
        assert_eq!(quantity_as_int("8"), Some(8));
        assert_eq!(quantity_as_int("2Ki"), Some(2048));
        assert_eq!(quantity_as_int("1500m"), None);
        Ok(())
    }
}
