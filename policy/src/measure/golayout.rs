//! Go time layouts (`2006-01-02 15:04:05.999999`), as LogProfiles write them, translated once
//! into jiff strptime formats and used to parse `timestamp` captures.
//!
//! Go semantics kept: a layout without a zone parses as UTC; `.000` / `.999` / `,000` / `,999`
//! read a fraction of any length, after `.` or `,` in the value whichever the layout wrote; a
//! fraction after the seconds is read even when the layout has none; `Z07:00` reads `Z` or an
//! offset; numbers may omit their leading zero; a layout without a year reads year 0, without
//! a month January, without a day the 1st; a weekday is read but not checked against the date.

use jiff::Timestamp;
use jiff::fmt::strtime;
use jiff::tz::TimeZone;

/// A compiled Go layout: the jiff formats tried in turn (a fraction after `.` or `,`; the
/// layout's zone, or `Z` when it may be one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoLayout {
    layout: String,
    formats: Vec<String>,
    dated: bool,
    has_date: bool,
}

/// What a layout without a year leaves out, and so how far its times may wrap around.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Undated {
    /// No year (`0102 15:04:05`, `Jan _2 15:04:05`): times wrap at New Year.
    Year,
    /// No date at all (`15:04:05`): times wrap at midnight.
    Day,
}

/// Stands for a fraction in a format being built, then becomes `%.f` (optional, after `.`) or
/// `,%f` (after `,`): jiff reads a fraction only after a `.`, Go after either.
const FRACTION: char = '\u{0}';

/// The Go layout elements, longest first where one is a prefix of another; each with its jiff
/// conversion (`None`: refused, as jiff cannot parse it) and, for zones, the `Z` alternative.
const ELEMENTS: &[(&str, Option<&str>)] = &[
    ("January", Some("%B")),
    ("Jan", Some("%b")),
    ("Monday", Some("%A")),
    ("Mon", Some("%a")),
    ("MST", None),
    ("2006", Some("%Y")),
    ("002", Some("%j")),
    ("01", Some("%m")),
    ("02", Some("%d")),
    ("_2", Some("%e")),
    ("03", Some("%I")),
    ("04", Some("%M")),
    ("05", Some("%S")),
    ("06", Some("%y")),
    ("15", Some("%H")),
    ("PM", Some("%p")),
    ("pm", Some("%P")),
    ("Z07:00:00", Some("%::z")),
    ("Z07:00", Some("%:z")),
    ("Z0700", Some("%z")),
    ("Z07", Some("%:::z")),
    ("-07:00:00", Some("%::z")),
    ("-07:00", Some("%:z")),
    ("-0700", Some("%z")),
    ("-07", Some("%:::z")),
    ("1", Some("%m")),
    ("2", Some("%d")),
    ("3", Some("%I")),
    ("4", Some("%M")),
    ("5", Some("%S")),
];

impl GoLayout {
    /// Translates `layout`.
    ///
    /// # Errors
    /// A message naming what is not supported: an empty layout or the `MST` zone-abbreviation
    /// element (jiff parses no abbreviations).
    pub fn compile(layout: &str) -> Result<GoLayout, String> {
        if layout.is_empty() {
            return Err("timestamp layout is empty".to_string());
        }
        let mut base = String::new();
        // Zone elements that accept a literal `Z`: the index in `base` and the length of the
        // conversion, so the `Z` alternative can be made.
        let mut z_zone: Option<(usize, usize)> = None;
        let mut rest = layout;
        let mut seconds_fraction_pending = false;
        let mut dated = false;
        let mut has_date = false;
        while !rest.is_empty() {
            // A fraction: `.` or `,` then a run of 0s or 9s not followed by a digit.
            if rest.starts_with(['.', ',']) {
                let digits: String = rest[1..]
                    .chars()
                    .take_while(|c| *c == '0' || *c == '9')
                    .collect();
                let after = rest[1 + digits.len()..].chars().next();
                if !digits.is_empty()
                    && digits
                        .chars()
                        .all(|c| c == digits.chars().next().unwrap_or('0'))
                    && !after.is_some_and(|c| c.is_ascii_digit())
                {
                    // Go reads either separator in the value, whichever the layout wrote.
                    base.push(FRACTION);
                    seconds_fraction_pending = false;
                    rest = &rest[1 + digits.len()..];
                    continue;
                }
            }
            if seconds_fraction_pending {
                // Go reads a fraction after the seconds even when the layout has none.
                base.push(FRACTION);
                seconds_fraction_pending = false;
            }
            let Some((element, conv)) = ELEMENTS.iter().find(|(e, _)| rest.starts_with(e)) else {
                let c = rest.chars().next().unwrap_or(' ');
                if c == FRACTION {
                    return Err(format!(
                        "timestamp layout {layout:?}: a NUL character is not supported"
                    ));
                }
                if c == '%' {
                    base.push_str("%%");
                } else {
                    base.push(c);
                }
                rest = &rest[c.len_utf8()..];
                continue;
            };
            let Some(conv) = conv else {
                return Err(format!(
                    "timestamp layout {layout:?}: the {element} element (a zone abbreviation) is not supported; use an offset such as -07:00"
                ));
            };
            if element.starts_with('Z') {
                z_zone = Some((base.len(), conv.len()));
            }
            base.push_str(conv);
            if *element == "2006" || *element == "06" {
                dated = true;
            }
            if ["January", "Jan", "002", "01", "02", "_2", "1", "2"].contains(element) {
                has_date = true;
            }
            if *element == "05" || *element == "5" {
                seconds_fraction_pending = true;
            }
            rest = &rest[element.len()..];
        }
        if seconds_fraction_pending {
            base.push(FRACTION);
        }
        let mut zones = vec![base.clone()];
        if let Some((at, len)) = z_zone {
            let mut utc = base.clone();
            utc.replace_range(at..at + len, "Z");
            zones.push(utc);
        }
        let mut formats: Vec<String> = Vec::new();
        for sep in ["%.f", ",%f"] {
            for z in &zones {
                let f = z.replace(FRACTION, sep);
                if !formats.contains(&f) {
                    formats.push(f);
                }
            }
        }
        Ok(GoLayout {
            layout: layout.to_string(),
            dated,
            has_date,
            formats,
        })
    }

    /// The layout as written.
    pub fn layout(&self) -> &str {
        &self.layout
    }

    /// Whether the layout has a year (`2006` or `06`). Times read with a layout without one are
    /// in year 0, as Go reads them: comparable with each other, not with dated times.
    pub fn dated(&self) -> bool {
        self.dated
    }

    /// For a layout without a year, what it leaves out; `None` for a dated layout.
    pub fn undated(&self) -> Option<Undated> {
        match (self.dated, self.has_date) {
            (true, _) => None,
            (false, true) => Some(Undated::Year),
            (false, false) => Some(Undated::Day),
        }
    }

    /// Parses `text` (trimmed) with the layout: an instant, UTC when the layout has no zone (or
    /// the text gives `Z`); year 0, January, the 1st for what the layout does not give. `None`
    /// when it does not parse.
    pub fn parse(&self, text: &str) -> Option<Timestamp> {
        let text = text.trim();
        self.formats.iter().find_map(|f| {
            let mut tm = strtime::parse(f, text).ok()?;
            // Go ignores the weekday and fills in what the layout leaves out.
            tm.set_weekday(None);
            if tm.year().is_none() {
                tm.set_year(Some(0)).ok()?;
            }
            if tm.day_of_year().is_none() {
                if tm.month().is_none() {
                    tm.set_month(Some(1)).ok()?;
                }
                if tm.day().is_none() {
                    tm.set_day(Some(1)).ok()?;
                }
            }
            if tm.offset().is_some() {
                tm.to_timestamp().ok()
            } else {
                let dt = tm.to_datetime().ok()?;
                dt.to_zoned(TimeZone::UTC).ok().map(|z| z.timestamp())
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(layout: &str, text: &str) -> Option<String> {
        GoLayout::compile(layout)
            .expect("compiles")
            .parse(text)
            .map(|t| t.to_string())
    }

    #[test]
    fn the_shipped_layouts_parse_what_the_logs_print() {
        let nemo = "2006-01-02T15:04:05.999999999Z";
        assert_eq!(
            parse(nemo, "2026-01-22T18:00:05.123456789Z").as_deref(),
            Some("2026-01-22T18:00:05.123456789Z")
        );
        assert_eq!(
            parse(nemo, "2026-01-22T18:00:05Z").as_deref(),
            Some("2026-01-22T18:00:05Z")
        );
        let megatron = "2006-01-02 15:04:05.999999";
        assert_eq!(
            parse(megatron, "2026-03-25 07:30:05").as_deref(),
            Some("2026-03-25T07:30:05Z")
        );
        assert_eq!(
            parse(megatron, " 2026-02-05 16:01:40.326255 ").as_deref(),
            Some("2026-02-05T16:01:40.326255Z")
        );
        // Go reads a fraction after the seconds even when the layout has none.
        assert_eq!(
            parse("2006-01-02 15:04:05", "2026-02-05 16:01:40.5").as_deref(),
            Some("2026-02-05T16:01:40.5Z")
        );
        assert_eq!(parse(megatron, "not a time"), None);
    }

    #[test]
    fn zones_and_words() {
        let rfc = "2006-01-02T15:04:05.999999999Z07:00";
        assert_eq!(
            parse(rfc, "2026-08-06T14:10:20.811144667-07:00").as_deref(),
            Some("2026-08-06T21:10:20.811144667Z")
        );
        assert_eq!(
            parse(rfc, "2026-08-06T14:10:20Z").as_deref(),
            Some("2026-08-06T14:10:20Z")
        );
        assert_eq!(
            parse("Jan _2 15:04:05 2006", "Feb  5 16:01:40 2026").as_deref(),
            Some("2026-02-05T16:01:40Z")
        );
        assert_eq!(
            GoLayout::compile("Jan 2 15:04:05 MST 2006").map(|_| ()),
            Err("timestamp layout \"Jan 2 15:04:05 MST 2006\": the MST element (a zone abbreviation) is not supported; use an offset such as -07:00".to_string())
        );
        assert_eq!(
            GoLayout::compile("").map(|_| ()),
            Err("timestamp layout is empty".to_string())
        );
    }

    #[test]
    fn comma_fractions_as_python_logging_prints_them() {
        let comma = "2006-01-02 15:04:05,000";
        assert_eq!(
            parse(comma, "2026-03-04 07:30:05,123").as_deref(),
            Some("2026-03-04T07:30:05.123Z")
        );
        // Go reads either separator, whichever the layout wrote.
        assert_eq!(
            parse(comma, "2026-03-04 07:30:05.25").as_deref(),
            Some("2026-03-04T07:30:05.25Z")
        );
        assert_eq!(
            parse("2006-01-02 15:04:05.999", "2026-03-04 07:30:05,5").as_deref(),
            Some("2026-03-04T07:30:05.5Z")
        );
        // A layout without a fraction reads one after the seconds, after ',' too.
        assert_eq!(
            parse("2006-01-02 15:04:05", "2026-03-25 07:30:05,500").as_deref(),
            Some("2026-03-25T07:30:05.5Z")
        );
        assert_eq!(
            parse("2006-01-02 15:04:05Z07:00", "2026-03-25 07:30:05,5+05:30").as_deref(),
            Some("2026-03-25T02:00:05.5Z")
        );
        assert_eq!(
            parse("2006-01-02 15:04:05", "2026-03-25 07:30:05,").as_deref(),
            None
        );
        assert_eq!(
            GoLayout::compile("15:04:05\u{0}").map(|_| ()),
            Err("timestamp layout \"15:04:05\\0\": a NUL character is not supported".to_string())
        );
    }

    #[test]
    fn layouts_without_a_year_read_year_zero_as_go_does() {
        let absl = "0102 15:04:05.000000";
        assert!(!GoLayout::compile(absl).expect("compiles").dated());
        assert_eq!(
            parse(absl, "0304 07:30:05.250000").as_deref(),
            Some("0000-03-04T07:30:05.25Z")
        );
        assert_eq!(
            parse("Jan _2 15:04:05", "Mar  4 07:30:05").as_deref(),
            Some("0000-03-04T07:30:05Z")
        );
        assert_eq!(
            parse("15:04:05", "07:30:05").as_deref(),
            Some("0000-01-01T07:30:05Z")
        );
        assert!(
            GoLayout::compile("2006-01-02 15:04:05")
                .expect("compiles")
                .dated()
        );
        assert!(GoLayout::compile("06-01-02").expect("compiles").dated());
        let undated = |l: &str| GoLayout::compile(l).expect("compiles").undated();
        assert_eq!(undated(absl), Some(Undated::Year));
        assert_eq!(undated("Jan _2 15:04:05"), Some(Undated::Year));
        assert_eq!(undated("15:04:05.000"), Some(Undated::Day));
        assert_eq!(undated("2006-01-02 15:04:05"), None);
        // Go does not check the weekday against the date.
        assert_eq!(
            parse("Mon Jan _2 15:04:05 2006", "Sun Feb  5 16:01:40 2026").as_deref(),
            Some("2026-02-05T16:01:40Z")
        );
    }
}
