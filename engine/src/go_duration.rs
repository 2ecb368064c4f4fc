//! Go durations, as Go's `time.ParseDuration` reads them and `time.Duration.String()` prints
//! them: Workflow timeouts (`execution.timeoutPerJob`, `measurementTimeout`), the CLI's
//! `--timeout` and the `format.duration()` CEL format all read them with this one parser, so a
//! string one of them admits is one the others (and the original's Go controller) read alike.

/// Why a string is not a Go duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// Not a sequence of decimal numbers each followed by a unit.
    #[error("expected decimal numbers each followed by a unit, such as \"90s\" or \"1h30m\"")]
    Syntax,
    /// A number without a unit (only a bare `0` may omit it).
    #[error("missing unit; valid units are ns, us, µs, ms, s, m, h")]
    MissingUnit,
    /// A unit Go does not know.
    #[error("unknown unit \"{unit}\"; valid units are ns, us, µs, ms, s, m, h")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
    },
    /// Longer than a Go `time.Duration` holds.
    #[error("out of range; the longest duration is 2562047h47m16.854775807s")]
    Overflow,
}

impl DurationError {
    /// The message Go's `time.ParseDuration` gives for `text`:
    /// `time: invalid duration "forever"`, `time: missing unit in duration "10"`,
    /// `time: unknown unit "d" in duration "5d"`.
    pub fn go_message(&self, text: &str) -> String {
        let quoted = crate::go_quote(text);
        match self {
            DurationError::MissingUnit => format!("time: missing unit in duration {quoted}"),
            DurationError::UnknownUnit { unit } => format!(
                "time: unknown unit {} in duration {quoted}",
                crate::go_quote(unit)
            ),
            DurationError::Syntax | DurationError::Overflow => {
                format!("time: invalid duration {quoted}")
            }
        }
    }
}

/// Go's `time.Duration.String()` of signed nanoseconds: `0s`, `1.5s`, `1h30m0s`, `-1s`,
/// `500ms`, `1.5µs`.
pub fn format(nanos: i64) -> String {
    let text = format_magnitude(nanos.unsigned_abs());
    if nanos < 0 { format!("-{text}") } else { text }
}

/// One past the largest magnitude a Go duration holds (`1 << 63`).
const DURATION_LIMIT: u64 = 1 << 63;

/// Go's `time.ParseDuration`: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or a bare `0`, in signed
/// nanoseconds (`1h30m` → 5,400,000,000,000; `-1.5s` → -1,500,000,000).
///
/// # Errors
///
/// [`DurationError`] as Go refuses the string: not numbers with units, a number without a
/// unit, a unit Go does not know, or beyond ±2562047h47m16.854775807s.
pub fn parse(orig: &str) -> Result<i64, DurationError> {
    let (negative, mut rest) = match orig.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, orig.strip_prefix('+').unwrap_or(orig)),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(DurationError::Syntax);
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        if !rest.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            return Err(DurationError::Syntax);
        }
        let (int_digits, after_int) = split_digits(rest);
        let whole = leading_int(int_digits)?;
        rest = after_int;
        let (mut frac, mut scale, mut has_frac) = (0u64, 1f64, false);
        if let Some(after_dot) = rest.strip_prefix('.') {
            let (frac_digits, after_frac) = split_digits(after_dot);
            (frac, scale) = leading_fraction(frac_digits);
            has_frac = !frac_digits.is_empty();
            rest = after_frac;
        }
        if int_digits.is_empty() && !has_frac {
            return Err(DurationError::Syntax);
        }
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (unit, after_unit) = rest.split_at_checked(unit_len).unwrap_or((rest, ""));
        if unit.is_empty() {
            return Err(DurationError::MissingUnit);
        }
        rest = after_unit;
        let unit_nanos: u64 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => {
                return Err(DurationError::UnknownUnit {
                    unit: unit.to_string(),
                });
            }
        };
        if whole > DURATION_LIMIT / unit_nanos {
            return Err(DurationError::Overflow);
        }
        let mut part = whole * unit_nanos;
        if frac > 0 {
            // Go computes the fractional part in float64 too.
            let extra = (frac as f64 * (unit_nanos as f64 / scale)) as u64;
            part = part.checked_add(extra).ok_or(DurationError::Overflow)?;
            if part > DURATION_LIMIT {
                return Err(DurationError::Overflow);
            }
        }
        total = total.checked_add(part).ok_or(DurationError::Overflow)?;
        if total > DURATION_LIMIT {
            return Err(DurationError::Overflow);
        }
    }
    if negative {
        // total ≤ 1 << 63, so its negation fits.
        return Ok(0i64.wrapping_sub_unsigned(total));
    }
    i64::try_from(total).map_err(|_| DurationError::Overflow)
}

/// Splits off the leading ASCII digits.
fn split_digits(s: &str) -> (&str, &str) {
    let n = s.bytes().take_while(u8::is_ascii_digit).count();
    s.split_at_checked(n).unwrap_or((s, ""))
}

/// Go's `leadingInt` over an all-digit string.
fn leading_int(digits: &str) -> Result<u64, DurationError> {
    let mut x: u64 = 0;
    for d in digits.bytes() {
        if x > DURATION_LIMIT / 10 {
            return Err(DurationError::Overflow);
        }
        x = x * 10 + u64::from(d - b'0');
        if x > DURATION_LIMIT {
            return Err(DurationError::Overflow);
        }
    }
    Ok(x)
}

/// Go's `leadingFraction`: the digits as an integer and the power of ten they were scaled by;
/// digits past what fits are ignored.
fn leading_fraction(digits: &str) -> (u64, f64) {
    let (mut x, mut scale) = (0u64, 1f64);
    for d in digits.bytes() {
        if x > (DURATION_LIMIT - 1) / 10 {
            break;
        }
        let y = x * 10 + u64::from(d - b'0');
        if y > DURATION_LIMIT {
            break;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale)
}

/// Go's `time.Duration.String()` of a magnitude in nanoseconds (no sign).
fn format_magnitude(nanos: u64) -> String {
    if nanos == 0 {
        return "0s".to_string();
    }
    if nanos < 1_000_000_000 {
        let (precision, unit) = match nanos {
            n if n < 1_000 => (0, "ns"),
            n if n < 1_000_000 => (3, "\u{b5}s"),
            _ => (6, "ms"),
        };
        let (whole, frac) = split_fraction(nanos, precision);
        return format!("{whole}{frac}{unit}");
    }
    let (secs, frac) = split_fraction(nanos, 9);
    let (minutes, secs) = (secs / 60, secs % 60);
    if minutes == 0 {
        return format!("{secs}{frac}s");
    }
    let (hours, minutes) = (minutes / 60, minutes % 60);
    if hours == 0 {
        return format!("{minutes}m{secs}{frac}s");
    }
    format!("{hours}h{minutes}m{secs}{frac}s")
}

/// `value / 10^precision` and the remainder as `.ddd` with trailing zeros removed (or empty).
fn split_fraction(value: u64, precision: u32) -> (u64, String) {
    let p = 10u64.pow(precision);
    let (whole, rem) = (value / p, value % p);
    if rem == 0 {
        return (whole, String::new());
    }
    let digits = format!("{rem:0width$}", width = precision as usize);
    (whole, format!(".{}", digits.trim_end_matches('0')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_forms_parse_to_nanoseconds_and_print_as_go_does() {
        for (input, nanos, printed) in [
            ("90m", 5_400_000_000_000, "1h30m0s"),
            ("1.5h", 5_400_000_000_000, "1h30m0s"),
            ("0.5s", 500_000_000, "500ms"),
            ("1500ns", 1_500, "1.5\u{b5}s"),
            ("-1s", -1_000_000_000, "-1s"),
            (
                "-2562047h47m16.854775808s",
                i64::MIN,
                "-2562047h47m16.854775808s",
            ),
            (
                "2562047h47m16.854775807s",
                i64::MAX,
                "2562047h47m16.854775807s",
            ),
        ] {
            assert_eq!(parse(input), Ok(nanos), "{input}");
            assert_eq!(format(nanos), printed, "{input}");
        }
    }

    #[test]
    fn refusals_carry_go_s_messages() {
        for (input, error, message) in [
            (
                "forever",
                DurationError::Syntax,
                "time: invalid duration \"forever\"",
            ),
            (
                "10",
                DurationError::MissingUnit,
                "time: missing unit in duration \"10\"",
            ),
            (
                "5d",
                DurationError::UnknownUnit { unit: "d".into() },
                "time: unknown unit \"d\" in duration \"5d\"",
            ),
            (
                "99999999999999h",
                DurationError::Overflow,
                "time: invalid duration \"99999999999999h\"",
            ),
            (
                "2562047h47m16.854775808s",
                DurationError::Overflow,
                "time: invalid duration \"2562047h47m16.854775808s\"",
            ),
        ] {
            assert_eq!(parse(input), Err(error.clone()), "{input}");
            assert_eq!(error.go_message(input), message);
        }
    }
}
