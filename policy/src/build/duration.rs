//! Go durations: `execution.timeoutPerJob` is parsed as Go's `time.ParseDuration` does and
//! written back as Go's `Duration.String()` prints it (`90m` → `1h30m0s`), so the rendered
//! Workflow carries what the original would.

/// Why a `timeoutPerJob` was refused: not a Go duration (the engine's parser says why), or
/// below zero.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// Not a Go duration.
    #[error(transparent)]
    Parse(#[from] nvcre_engine::go_duration::DurationError),
    /// Below zero.
    #[error("a timeout cannot be negative")]
    Negative,
}

/// Parses a Go duration string and writes it the way Go's `time.Duration.String()` does
/// (`90m` → `1h30m0s`, `1.5h` → `1h30m0s`, `0.5s` → `500ms`). Negative values are refused.
pub fn canonical_go_duration(value: &str) -> Result<String, DurationError> {
    let nanos = nvcre_engine::go_duration::parse(value)?;
    if nanos < 0 {
        return Err(DurationError::Negative);
    }
    Ok(nvcre_engine::go_duration::format(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvcre_engine::go_duration::DurationError as E;

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

    duration!(dur_bogus, "bogus", err DurationError::Parse(E::Syntax));

    duration!(dur_empty, "", err DurationError::Parse(E::Syntax));

    duration!(dur_dot, ".s", err DurationError::Parse(E::Syntax));

    duration!(dur_no_unit, "90", err DurationError::Parse(E::MissingUnit));

    duration!(dur_unknown_unit, "3d", err DurationError::Parse(E::UnknownUnit { unit: "d".to_string() }));

    duration!(dur_negative, "-5m", err DurationError::Negative);

    duration!(dur_overflow, "2562048h", err DurationError::Parse(E::Overflow));

    #[test]
    fn example_canonical_go_duration() -> Result<(), Box<dyn std::error::Error>> {
        use crate::build::canonical_go_duration;
        assert_eq!(canonical_go_duration("90m")?, "1h30m0s");
        assert!(canonical_go_duration("-1s").is_err());
        Ok(())
    }
}
