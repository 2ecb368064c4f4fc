//! Kubernetes quantities and the per-node GPU need: [`quantity_as_int`] reads `"8"`, `"2Ki"`,
//! `"4000m"` exactly, and [`gpu_need`] finds the largest `nvidia.com/gpu` request a Workflow
//! makes, which the capacity filter of [`super::place`] compares with each node's allocatable.

use serde_json::Value;

use super::GPU_RESOURCE;
use crate::api::Workflow;

/// The per-node GPU need: the largest `nvidia.com/gpu` found under any `requests` or
/// `limits` map anywhere in `spec.jobTemplate` or any dependency (the capacity filter compares it with each node).
///
/// Values may be strings holding a Kubernetes quantity (`"8"`, `"8.0"`, `"1k"`) or numbers;
/// an unparseable value is skipped, a negative one counts as 0. `None` when no such entry
/// exists.
pub fn gpu_need(workflow: &Workflow) -> Option<i64> {
    std::iter::once(&workflow.spec.job_template)
        .chain(workflow.spec.dependencies.iter())
        .filter_map(max_gpu_request)
        .max()
}

/// Largest GPU request in one document.
fn max_gpu_request(doc: &Value) -> Option<i64> {
    match doc {
        Value::Object(map) => {
            let mut found: Option<i64> = None;
            for (key, val) in map {
                if (key == "requests" || key == "limits")
                    && let Some(q) = val.get(GPU_RESOURCE).and_then(gpu_quantity)
                {
                    found = found.max(Some(q));
                }
                found = found.max(max_gpu_request(val));
            }
            found
        }
        Value::Array(items) => items.iter().filter_map(max_gpu_request).max(),
        _ => None,
    }
}

/// A GPU count from a JSON quantity: negative counts as 0, unparseable is `None`.
fn gpu_quantity(v: &Value) -> Option<i64> {
    let n = match v {
        Value::String(s) => quantity_as_int(s)?,
        Value::Number(n) => match n.as_i64() {
            Some(i) => i,
            // Fractional or huge numbers: truncated like the original's int64(float64).
            None => n
                .as_f64()
                .filter(|f| f.is_finite())
                .map(|f| f.trunc() as i64)?,
        },
        _ => return None,
    };
    Some(n.max(0))
}

/// The exact integer value of a Kubernetes quantity (`"8"`, `"+8"`, `"8.0"`, `"2k"`, `"1Ki"`,
/// `"4000m"`, `"1e3"`), or `None` when it does not parse or is not a whole number.
pub fn quantity_as_int(s: &str) -> Option<i64> {
    let s = s.trim();
    let (negative, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let split = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at_checked(split)?;
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
        return None;
    }
    let digits = format!("{int_part}{frac_part}");
    if digits.len() > 30 {
        return None;
    }
    let mantissa: i128 = digits.parse().ok()?;
    let frac_len = i32::try_from(frac_part.len()).ok()?;
    // (base, exponent) of the suffix.
    let (base, exp): (i128, i32) = match suffix {
        "" => (10, 0),
        "m" => (10, -3),
        "k" => (10, 3),
        "M" => (10, 6),
        "G" => (10, 9),
        "T" => (10, 12),
        "P" => (10, 15),
        "E" => (10, 18),
        "Ki" => (2, 10),
        "Mi" => (2, 20),
        "Gi" => (2, 30),
        "Ti" => (2, 40),
        "Pi" => (2, 50),
        "Ei" => (2, 60),
        other => {
            let e = other.strip_prefix(['e', 'E'])?;
            (
                10,
                e.parse::<i32>().ok().filter(|e| (-40..=40).contains(e))?,
            )
        }
    };
    let pow10 = |n: i32| 10_i128.checked_pow(u32::try_from(n).ok()?);
    let value = if base == 10 {
        let total = exp.checked_sub(frac_len)?;
        if total >= 0 {
            mantissa.checked_mul(pow10(total)?)?
        } else {
            let div = pow10(-total)?;
            if mantissa % div != 0 {
                return None;
            }
            mantissa / div
        }
    } else {
        let scaled = mantissa.checked_mul(2_i128.checked_pow(u32::try_from(exp).ok()?)?)?;
        let div = pow10(frac_len)?;
        if scaled % div != 0 {
            return None;
        }
        scaled / div
    };
    i64::try_from(if negative { -value } else { value }).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::fixtures::*;
    use serde_json::json;

    // ---- gpu need and quantities --------------------------------------------------------

    macro_rules! quantity {
        ($($name:ident: $q:expr => $want:expr;)*) => {$(
            #[test]
            fn $name() { assert_eq!(quantity_as_int($q), $want); }
        )*};
    }

    quantity! {
        q_plain: "8" => Some(8);
        q_plus: "+4" => Some(4);
        q_negative: "-2" => Some(-2);
        q_decimal_whole: "8.0" => Some(8);
        q_decimal_fraction: "1.5" => None;
        q_kilo: "2k" => Some(2000);
        q_kibi: "1Ki" => Some(1024);
        q_frac_kibi: "0.5Ki" => Some(512);
        q_milli_whole: "4000m" => Some(4);
        q_milli_fraction: "1500m" => None;
        q_exponent: "1e3" => Some(1000);
        q_garbage: "eight" => None;
        q_empty: "" => None;
        q_bad_suffix: "8x" => None;
        q_spaces: " 8 " => Some(8);
    }

    macro_rules! need {
        ($($name:ident: $jt:expr, $deps:expr => $want:expr;)*) => {$(
            #[test]
            fn $name() { assert_eq!(gpu_need(&wf_with($jt, $deps)), $want); }
        )*};
    }

    need! {
        need_none: json!({"spec": {}}), json!([]) => None;
        need_dep_string: json!({"spec": {}}), json!([{"spec": {"limits": {"nvidia.com/gpu": "4"}}}]) => Some(4);
        need_largest: json!({"spec": {"trainer": {"resourcesPerNode": {"requests": {"nvidia.com/gpu": 8}}}}}),
            json!([{"spec": {"limits": {"nvidia.com/gpu": "4"}}}]) => Some(8);
        need_only_requests_limits: json!({"spec": {"labels": {"nvidia.com/gpu": "16"}, "x": {"nvidia.com/gpu": 32}}}), json!([]) => None;
        need_nested_list: json!({"spec": {"a": [{"b": {"requests": {"nvidia.com/gpu": "2"}}}]}}), json!([]) => Some(2);
        need_zero: json!({"spec": {"limits": {"nvidia.com/gpu": "0"}}}), json!([]) => Some(0);
        need_negative_counts_zero: json!({"spec": {"limits": {"nvidia.com/gpu": -3}}}), json!([]) => Some(0);
        need_unparseable_skipped: json!({"spec": {"limits": {"nvidia.com/gpu": "lots"}}}), json!([]) => None;
    }

    #[test]
    fn example_gpu_need() -> Result<(), Box<dyn std::error::Error>> {
        use crate::{api::Workflow, placement::gpu_need};
        let wf: Workflow = serde_json::from_value(serde_json::json!({
            "apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "Workflow", "metadata": {"name": "wf"},
            "spec": {"jobTemplate": {"spec": {}}, "dependencies": [
                {"kind": "TrainingRuntime", "spec": {"resources": {"limits": {"nvidia.com/gpu": "8"}}}}]}
        }))?;
        assert_eq!(gpu_need(&wf), Some(8));
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
