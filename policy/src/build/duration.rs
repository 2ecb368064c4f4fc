//! Go durations: `execution.timeoutPerJob` is parsed as Go's `time.ParseDuration` does and
//! written back as Go's `Duration.String()` prints it (`90m` → `1h30m0s`), so the rendered
//! Workflow carries what the original would.

/// Why a Go duration string (`1h30m`, `90s`, `1.5h`, `300ms`) was refused.
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
    /// Below zero.
    #[error("a timeout cannot be negative")]
    Negative,
}

/// Parses a Go duration string and writes it the way Go's `time.Duration.String()` does
/// (`90m` → `1h30m0s`, `1.5h` → `1h30m0s`, `0.5s` → `500ms`). Negative values are refused.
pub fn canonical_go_duration(value: &str) -> Result<String, DurationError> {
    let nanos = parse_go_duration(value)?;
    let nanos = u64::try_from(nanos).map_err(|_| DurationError::Negative)?;
    Ok(format_go_duration(nanos))
}

/// One past the largest magnitude a Go duration holds (`1 << 63`).
pub(super) const DURATION_LIMIT: u64 = 1 << 63;

/// Go's `time.ParseDuration`: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or a bare `0`; nanoseconds.
pub(super) fn parse_go_duration(orig: &str) -> Result<i64, DurationError> {
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
pub(super) fn split_digits(s: &str) -> (&str, &str) {
    let n = s.bytes().take_while(u8::is_ascii_digit).count();
    s.split_at_checked(n).unwrap_or((s, ""))
}

/// Go's `leadingInt` over an all-digit string.
pub(super) fn leading_int(digits: &str) -> Result<u64, DurationError> {
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
pub(super) fn leading_fraction(digits: &str) -> (u64, f64) {
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

/// Go's `time.Duration.String()` for a non-negative duration.
pub(super) fn format_go_duration(nanos: u64) -> String {
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
pub(super) fn split_fraction(value: u64, precision: u32) -> (u64, String) {
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

    // ---- Go duration: one line per case -------------------------------------------------------
    macro_rules! duration {
        ($name:ident, $input:expr, ok $want:expr) => {
            #[test]
            fn $name() {
                assert_eq!(canonical_go_duration($input), Ok($want.to_string()));
            }
        };
        ($name:ident, $input:expr, err $want:expr) => {
            #[test]
            fn $name() {
                assert_eq!(canonical_go_duration($input), Err($want));
            }
        };
    }

    duration!(dur_90m, "90m", ok "1h30m0s");

    duration!(dur_24h, "24h", ok "24h0m0s");

    duration!(dur_1h30m, "1h30m", ok "1h30m0s");

    duration!(dur_90s, "90s", ok "1m30s");

    duration!(dur_frac_hours, "1.5h", ok "1h30m0s");

    duration!(dur_300ms, "300ms", ok "300ms");

    duration!(dur_half_second, "0.5s", ok "500ms");

    duration!(dur_micro, "1500ns", ok "1.5\u{b5}s");

    duration!(dur_micro_alias, "2us", ok "2\u{b5}s");

    duration!(dur_nanos, "7ns", ok "7ns");

    duration!(dur_zero, "0", ok "0s");

    duration!(dur_neg_zero, "-0s", ok "0s");

    duration!(dur_plus, "+1m", ok "1m0s");

    duration!(dur_frac_secs, "1.25s", ok "1.25s");

    duration!(dur_dot_only_frac, ".5m", ok "30s");

    duration!(dur_sum, "1h1h", ok "2h0m0s");

    duration!(dur_max, "2562047h47m16.854775807s", ok "2562047h47m16.854775807s");

    duration!(dur_bogus, "bogus", err DurationError::Syntax);

    duration!(dur_empty, "", err DurationError::Syntax);

    duration!(dur_dot, ".s", err DurationError::Syntax);

    duration!(dur_no_unit, "90", err DurationError::MissingUnit);

    duration!(dur_unknown_unit, "3d", err DurationError::UnknownUnit { unit: "d".to_string() });

    duration!(dur_negative, "-5m", err DurationError::Negative);

    duration!(dur_overflow, "2562048h", err DurationError::Overflow);

    #[test]
    fn example_canonical_go_duration() -> Result<(), Box<dyn std::error::Error>> {
        use crate::build::canonical_go_duration;
        assert_eq!(canonical_go_duration("90m")?, "1h30m0s");
        assert!(canonical_go_duration("-1s").is_err());
        Ok(())
    }
}
