//! Kubernetes resource quantities for CEL (`quantity('8000m')`), compared by value as the API
//! server compares them: `quantity('8000m').isEqualTo(quantity('8'))` is true, which comparing
//! the text is not.
//!
//! A quantity is read exactly in nano-units (10⁻⁹, the smallest SI suffix): a number with an
//! optional sign, fraction and exponent (`1.5`, `1e3`, `.5`), then an SI suffix (`n`, `u`, `m`,
//! `k`, `M`, `G`, `T`, `P`, `E`) or a binary one (`Ki`, `Mi`, `Gi`, `Ti`, `Pi`, `Ei`). Digits below
//! a nano-unit round up, as Kubernetes rounds them.

use std::cmp::Ordering;

/// A quantity's text split into its parts, before any arithmetic: the one grammar of Kubernetes
/// quantities in this workspace (`check`'s GPU counts read their exact integer from it too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts<'a> {
    /// A leading `-`.
    pub negative: bool,
    /// The digits before the `.` (may be empty: `.5`).
    pub int_part: &'a str,
    /// The digits after the `.` (may be empty).
    pub frac_part: &'a str,
    /// The binary suffix's power of two (`Ki`: 10 … `Ei`: 60), else 0.
    pub exp2: u32,
    /// The SI suffix's or the exponent's power of ten (`m`: -3, `e3`: 3); a huge exponent
    /// saturates (its quantity is then too large, or not whole).
    pub exp10: i128,
}

/// Splits a quantity: a sign, digits with at most one `.`, then a suffix: none, a decimal SI one
/// (`n`, `u`, `m`, `k`, `M`, `G`, `T`, `P`, `E`), a binary one (`Ki` … `Ei`) or an exponent (`e3`,
/// `E-2`). `None` when `text` is not a quantity (no spaces are allowed).
pub fn split(text: &str) -> Option<Parts<'_>> {
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let at = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at_checked(at)?;
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
        return None;
    }
    let (exp2, exp10): (u32, i128) = match suffix {
        "" => (0, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        other => (0, exponent(other.strip_prefix(['e', 'E'])?)?),
    };
    Some(Parts {
        negative,
        int_part,
        frac_part,
        exp2,
        exp10,
    })
}

/// The decimal exponent after `e`/`E`: an optional sign and digits; a huge one saturates.
fn exponent(text: &str) -> Option<i128> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let significant = digits.trim_start_matches('0');
    let magnitude: i128 = match significant.len() {
        0 => 0,
        1..=30 => significant.parse().ok()?,
        _ => i128::MAX / 4,
    };
    Some(if negative { -magnitude } else { magnitude })
}

/// A quantity's exact value, in nano-units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Quantity(i128);

/// Nano-units in one.
const ONE: i128 = 1_000_000_000;

impl Quantity {
    /// Reads a Kubernetes quantity ([`split`]).
    ///
    /// # Errors
    /// A message in words: not a quantity (with what is accepted), or too large to hold.
    pub fn parse(text: &str) -> Result<Quantity, String> {
        let invalid = || {
            format!(
                "{} is not a Kubernetes quantity (a number with an optional SI or binary suffix: 8, 1.5, 500m, 2Ki, 1e3)",
                crate::quote::go_quote(text)
            )
        };
        let too_large = || format!("{} is too large a quantity", crate::quote::go_quote(text));
        let parts = split(text).ok_or_else(invalid)?;
        // digits × 10^(exp10 − fraction digits + 9) × 2^exp2 nano-units, rounded up.
        let all = format!("{}{}", parts.int_part, parts.frac_part);
        let digits = all.trim_start_matches('0');
        if digits.len() > 38 {
            return Err(too_large());
        }
        let mantissa: i128 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| too_large())?
        };
        let fraction_len = i128::try_from(parts.frac_part.len()).map_err(|_| invalid())?;
        let scale = parts.exp10 - fraction_len + 9;
        let nanos = if mantissa == 0 {
            0
        } else if scale >= 0 {
            let factor = u32::try_from(scale)
                .ok()
                .and_then(|s| 10i128.checked_pow(s))
                .ok_or_else(too_large)?;
            mantissa.checked_mul(factor).ok_or_else(too_large)?
        } else {
            match u32::try_from(-scale)
                .ok()
                .and_then(|s| 10i128.checked_pow(s))
            {
                Some(d) => mantissa / d + i128::from(mantissa % d != 0),
                // Below 10⁻³⁸ of a nano-unit: rounds up to one.
                None => 1,
            }
        };
        let nanos = nanos
            .checked_mul(1i128 << parts.exp2)
            .ok_or_else(too_large)?;
        Ok(Quantity(if parts.negative { -nanos } else { nanos }))
    }

    /// The value as a whole number, when it is one and fits an `i64`.
    pub fn as_integer(self) -> Option<i64> {
        (self.0 % ONE == 0)
            .then(|| i64::try_from(self.0 / ONE).ok())
            .flatten()
    }

    /// `-1`, `0` or `1` as `self` is less than, equal to or greater than `other`.
    pub fn compare(self, other: Quantity) -> i64 {
        match self.cmp(&other) {
            Ordering::Less => -1,
            Ordering::Equal => 0,
            Ordering::Greater => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_same_amount_written_differently_is_equal() {
        for (a, b) in [
            ("8000m", "8"),
            ("1k", "1000"),
            ("0.008k", "8"),
            ("1e3", "1k"),
            ("1Ki", "1024"),
            ("0.5Ki", "512"),
            ("+8", "8"),
            (".5", "500m"),
            ("1.5G", "1500M"),
        ] {
            assert_eq!(q(a), q(b), "{a} = {b}");
        }
        assert_eq!(q("1500m").as_integer(), None);
        assert_eq!(q("4000m").as_integer(), Some(4));
        assert_eq!(q("-2").as_integer(), Some(-2));
        assert_eq!(q("1n").compare(q("0")), 1);
        assert_eq!(q("0.1n"), q("1n"));
        assert_eq!(q("2Gi").compare(q("2G")), 1);
    }

    #[test]
    fn what_is_not_a_quantity_says_so() {
        for bad in ["", "x", "8 ", "1.2.3", "8Kb", ".", "e3", "1e"] {
            assert_eq!(
                Quantity::parse(bad),
                Err(format!(
                    "{} is not a Kubernetes quantity (a number with an optional SI or binary suffix: 8, 1.5, 500m, 2Ki, 1e3)",
                    crate::quote::go_quote(bad)
                )),
                "{bad:?}"
            );
        }
        assert_eq!(
            Quantity::parse("99999999999999999999999999999999Ei"),
            Err("\"99999999999999999999999999999999Ei\" is too large a quantity".to_string())
        );
    }
}
