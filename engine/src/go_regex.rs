//! Regular expressions as Go reads them. Every regex a user writes (a CEL `matches`, `find` or
//! `findAll` pattern, a LogProfile pattern, a `gpu-products` row) is Go RE2 syntax, since the
//! original product and Kubernetes CEL compile them with Go's `regexp`; the `regex` crate's
//! dialect differs. [`translate`] reads a pattern the way Go's `regexp/syntax` parser does
//! (Perl flags, as `regexp.Compile` uses) and writes a `regex` crate pattern of the same meaning,
//! or fails with Go's own error (`error parsing regexp: invalid nested repetition operator:
//! `**``).
//!
//! What the translation does:
//! - `\Q…\E` becomes escaped literals; a `{` that does not start a repetition Go reads (`{n}`,
//!   `{n,}`, `{n,m}` without leading zeros) is a literal `\{`;
//! - `\d`, `\s`, `\w` (and their negations) are Go's ASCII classes, `\b` and `\B` ASCII word
//!   boundaries (`(?-u:\b)`), while the pattern itself is compiled with Unicode on, so `.` is
//!   one character, `(?i)` folds as Go folds and `\pL`, `\p{Greek}`, `\PL`, `[\p{L}]` work;
//! - `\p{…}` names are looked up as Go 1.25 looks them up (a general category, its long alias
//!   such as `Letter`, a script of Unicode 15, `Any`, `ASCII`, `Assigned`; case, spaces,
//!   underscores and hyphens ignored) and written unambiguously (`\p{gc=Lu}`, `\p{sc=Greek}`:
//!   the crate's bare `\p{Greek}` is the script extension, Go's is the script);
//! - octal (`\101`), hex (`\x41`, `\x{41}`) and C escapes become `\x{…}`; an escaped
//!   punctuation character is itself (`\<` is `<`, not the crate's word start);
//! - a class is rewritten item by item, so `[[a]`, `[a&&b]` and `[a--b]` keep Go's meaning;
//! - flags `(?i)`, `(?m)`, `(?s)`, `(?U)` keep their meaning, also where a flag group stands
//!   between an expression and its repetition (`a(?i)*`);
//! - named groups `(?P<name>…)` and `(?<name>…)` keep their names, except where the crate
//!   cannot: a name starting with a digit, or a name used a second time, becomes a plain group
//!   (Go's `SubexpIndex` also finds the first group of a name); [`Translated::names`] lists the
//!   names as Go reads them.
//!
//! What it refuses, as Go does: nested repetition (`a**`, `a*+`, `x{2}{3}`), a count above
//! 1000 (also as the product of nested counts, `(?:a{100}){11}`), escapes Go lacks (`\u0041`,
//! `\U`, `\h`, `\Z`, `\C`, a backreference `\1`), Perl syntax Go lacks (`(?=…)`, `(?x)`),
//! unknown `\p` names and POSIX classes, reversed ranges, unbalanced parentheses and brackets.
//! The size and nesting limits are the crate's, reported in Go's words.
//!
//! Matching bytes: Go reads each byte that is not part of valid UTF-8 as U+FFFD. A caller that
//! matches bytes runs the compiled regex over [`go_utf8`] of its input, which is the input
//! itself when it is valid UTF-8 (no copy) and otherwise that replacement: a line with a stray
//! invalid byte still matches around it, `.` and `[^…]` match the bad byte, as in Go.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

/// Go's `ErrInvalidCharClass`.
pub const INVALID_CHAR_RANGE: &str = "invalid character class range";
/// Go's `ErrInvalidEscape`.
pub const INVALID_ESCAPE: &str = "invalid escape sequence";
/// Go's `ErrInvalidNamedCapture`.
pub const INVALID_NAMED_CAPTURE: &str = "invalid named capture";
/// Go's `ErrInvalidPerlOp`.
pub const INVALID_PERL_OP: &str = "invalid or unsupported Perl syntax";
/// Go's `ErrInvalidRepeatOp`.
pub const INVALID_REPEAT_OP: &str = "invalid nested repetition operator";
/// Go's `ErrInvalidRepeatSize`.
pub const INVALID_REPEAT_SIZE: &str = "invalid repeat count";
/// Go's `ErrMissingBracket`.
pub const MISSING_BRACKET: &str = "missing closing ]";
/// Go's `ErrMissingParen`.
pub const MISSING_PAREN: &str = "missing closing )";
/// Go's `ErrMissingRepeatArgument`.
pub const MISSING_REPEAT_ARGUMENT: &str = "missing argument to repetition operator";
/// Go's `ErrTrailingBackslash`.
pub const TRAILING_BACKSLASH: &str = "trailing backslash at end of expression";
/// Go's `ErrUnexpectedParen`.
pub const UNEXPECTED_PAREN: &str = "unexpected )";
/// Go's `ErrNestingDepth`.
pub const NESTING_DEPTH: &str = "expression nests too deeply";
/// Go's `ErrLarge`.
pub const TOO_LARGE: &str = "expression too large";

/// Go's largest count in a repetition, and of the product of nested counts.
const MAX_REPEAT: u32 = 1000;

/// Why Go refuses a pattern: its error code and the fragment it quotes. Displays as Go's
/// `*syntax.Error` does: ``error parsing regexp: invalid repeat count: `{1001}` ``.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoRegexError {
    code: Cow<'static, str>,
    expr: String,
}

impl GoRegexError {
    fn new(code: &'static str, expr: &str) -> GoRegexError {
        GoRegexError {
            code: Cow::Borrowed(code),
            expr: expr.to_string(),
        }
    }

    /// What is wrong, in Go's words (`missing closing )`).
    pub fn code(&self) -> &str {
        &self.code
    }

    /// The part of the pattern Go quotes (the whole pattern for a missing or unexpected `)`).
    pub fn expr(&self) -> &str {
        &self.expr
    }
}

impl fmt::Display for GoRegexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error parsing regexp: {}: `{}`", self.code, self.expr)
    }
}

impl std::error::Error for GoRegexError {}

/// A Go pattern in the `regex` crate's syntax.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Translated {
    /// The pattern for the `regex` crate (compiled with Unicode on, its default).
    pub pattern: String,
    /// Each capture group's name as Go reads it, in order (Go's `SubexpNames` without the
    /// whole match): `None` for an unnamed group.
    pub names: Vec<Option<String>>,
}

/// Compiles the Go pattern `go` for matching `&str`.
///
/// # Errors
/// Go's error for a pattern Go refuses; [`TOO_LARGE`] or [`NESTING_DEPTH`] when the translated
/// pattern exceeds the crate's limits.
pub fn compile(go: &str) -> Result<regex::Regex, GoRegexError> {
    translate(go)?.regex(go)
}

/// Compiles the Go pattern `go` for matching bytes; match it against [`go_utf8`] of the input
/// to read invalid UTF-8 as Go does.
///
/// # Errors
/// As [`compile`].
pub fn compile_bytes(go: &str) -> Result<regex::bytes::Regex, GoRegexError> {
    translate(go)?.bytes_regex(go)
}

impl Translated {
    /// Compiles the translation for matching `&str`; `go` is the pattern it was translated
    /// from, which an error quotes.
    ///
    /// # Errors
    /// [`TOO_LARGE`] or [`NESTING_DEPTH`] past the crate's limits.
    pub fn regex(&self, go: &str) -> Result<regex::Regex, GoRegexError> {
        regex::Regex::new(&self.pattern).map_err(|e| build_error(go, &e))
    }

    /// Compiles the translation for matching bytes (see [`go_utf8`]).
    ///
    /// # Errors
    /// As [`Translated::regex`].
    pub fn bytes_regex(&self, go: &str) -> Result<regex::bytes::Regex, GoRegexError> {
        regex::bytes::Regex::new(&self.pattern).map_err(|e| build_error(go, &e))
    }
}

fn build_error(go: &str, e: &regex::Error) -> GoRegexError {
    let code = match e {
        regex::Error::CompiledTooBig(_) => Cow::Borrowed(TOO_LARGE),
        regex::Error::Syntax(text) if text.contains("maximum number of nested") => {
            Cow::Borrowed(NESTING_DEPTH)
        }
        other => {
            // Not expected after a translation; the crate's own words.
            let text = other.to_string();
            let last = text.lines().last().unwrap_or_default().trim();
            Cow::Owned(last.strip_prefix("error: ").unwrap_or(last).to_string())
        }
    };
    GoRegexError {
        code,
        expr: go.to_string(),
    }
}

/// `input` as Go's regexp reads it: unchanged when it is valid UTF-8, else with each byte that
/// is not part of a valid UTF-8 sequence replaced by U+FFFD (Go decodes such a byte as
/// `utf8.RuneError` of width 1).
pub fn go_utf8(input: &[u8]) -> Cow<'_, [u8]> {
    let Err(first) = std::str::from_utf8(input) else {
        return Cow::Borrowed(input);
    };
    let mut out = Vec::with_capacity(input.len() + 8);
    let mut rest = input;
    let mut err = Some(first);
    while let Some(e) = err {
        let valid = e.valid_up_to();
        out.extend_from_slice(&rest[..valid]);
        let bad = e.error_len().unwrap_or(rest.len() - valid);
        for _ in 0..bad {
            out.extend_from_slice("\u{FFFD}".as_bytes());
        }
        rest = &rest[valid + bad..];
        err = std::str::from_utf8(rest).err();
    }
    out.extend_from_slice(rest);
    Cow::Owned(out)
}

/// Reads `go` as Go's `regexp.Compile` does and writes it in the `regex` crate's syntax.
///
/// # Errors
/// Go's error (code and quoted fragment) for a pattern Go refuses.
pub fn translate(go: &str) -> Result<Translated, GoRegexError> {
    let mut t = Translator {
        src: go,
        out: String::with_capacity(go.len() + 16),
        go: Flags::default(),
        rust: Flags::default(),
        frames: Vec::new(),
        group_max: 1,
        operand: None,
        last_repeat: None,
        names: Vec::new(),
        rust_names: HashSet::new(),
    };
    t.run()?;
    Ok(Translated {
        pattern: t.out,
        names: t.names,
    })
}

/// The flags Go's parser tracks that a pattern can set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Flags {
    /// `i`: case-insensitive.
    fold: bool,
    /// `m`: `^` and `$` match at lines.
    multi: bool,
    /// `s`: `.` matches `\n`.
    dot_nl: bool,
    /// `U`: repetitions lazy by default.
    ungreedy: bool,
}

impl Flags {
    fn with(mut self, letter: char, on: bool) -> Flags {
        match letter {
            'i' => self.fold = on,
            'm' => self.multi = on,
            's' => self.dot_nl = on,
            _ => self.ungreedy = on,
        }
        self
    }

    /// The crate's flag text taking `self` to `to` (`i-s`), empty when they agree.
    fn diff(self, to: Flags) -> String {
        let pairs = [
            ('i', self.fold, to.fold),
            ('m', self.multi, to.multi),
            ('s', self.dot_nl, to.dot_nl),
            ('U', self.ungreedy, to.ungreedy),
        ];
        let on: String = pairs
            .iter()
            .filter(|(_, from, to)| !from && *to)
            .map(|p| p.0)
            .collect();
        let off: String = pairs
            .iter()
            .filter(|(_, from, to)| *from && !to)
            .map(|p| p.0)
            .collect();
        if off.is_empty() {
            on
        } else {
            format!("{on}-{off}")
        }
    }
}

/// An open group.
struct Frame {
    /// Go's flags outside the group, restored at its `)`.
    go: Flags,
    /// The crate's flags outside it.
    rust: Flags,
    /// [`Translator::group_max`] of the enclosing group.
    group_max: u32,
}

struct Translator<'a> {
    src: &'a str,
    out: String,
    /// The flags in force for what Go reads next.
    go: Flags,
    /// The flags in force in the output so far; written out (as `(?…)`) before the next
    /// expression when they differ from `go`, so a repetition still follows its operand.
    rust: Flags,
    frames: Vec<Frame>,
    /// The largest product of nested counts over the finished expressions of the current
    /// group (Go's `repeatIsValid` walks these paths); at least 1.
    group_max: u32,
    /// The last expression of the current concatenation, which a repetition applies to: its
    /// product of nested counts. `None` at the start of a group or alternative.
    operand: Option<u32>,
    /// Where the repetition operator just read starts, when the last token was one.
    last_repeat: Option<usize>,
    names: Vec<Option<String>>,
    rust_names: HashSet<String>,
}

/// What a `*`, `+`, `?` or `{…}` asks for.
#[derive(Clone, Copy)]
enum Repeat {
    Op(char),
    Count(u32, Option<u32>),
}

impl Translator<'_> {
    fn run(&mut self) -> Result<(), GoRegexError> {
        let s = self.src;
        let mut i = 0;
        while let Some(c) = s[i..].chars().next() {
            let mut repeat_at = None;
            match c {
                '(' if s[i + 1..].starts_with('?') => i = self.perl_group(i)?,
                '(' => {
                    self.open_group();
                    self.names.push(None);
                    self.out.push('(');
                    i += 1;
                }
                '|' => {
                    self.end_operand();
                    self.operand = None;
                    self.out.push('|');
                    i += 1;
                }
                ')' => {
                    self.close_group()?;
                    i += 1;
                }
                '^' | '$' | '.' => {
                    self.expression(1);
                    self.out.push(c);
                    i += 1;
                }
                '[' => i = self.class(i)?,
                '*' | '+' | '?' => {
                    repeat_at = Some(i);
                    i = self.repeat(i, i + 1, Repeat::Op(c))?;
                }
                '{' => match parse_repeat(&s[i..]) {
                    None => {
                        self.literal(u32::from('{'));
                        i += 1;
                    }
                    Some((min, max, len)) => {
                        let count = |n: Option<u32>| n.filter(|n| *n <= MAX_REPEAT);
                        let (Some(min), Ok(max)) =
                            (count(min), max.map(|m| count(m).ok_or(())).transpose())
                        else {
                            return Err(GoRegexError::new(INVALID_REPEAT_SIZE, &s[i..i + len]));
                        };
                        if max.is_some_and(|m| min > m) {
                            return Err(GoRegexError::new(INVALID_REPEAT_SIZE, &s[i..i + len]));
                        }
                        repeat_at = Some(i);
                        i = self.repeat(i, i + len, Repeat::Count(min, max))?;
                    }
                },
                '\\' => i = self.escape(i)?,
                _ => {
                    self.literal(u32::from(c));
                    i += c.len_utf8();
                }
            }
            self.last_repeat = repeat_at;
        }
        if self.frames.is_empty() {
            Ok(())
        } else {
            Err(GoRegexError::new(MISSING_PAREN, s))
        }
    }

    /// Starts an expression whose product of nested counts is `product`: the previous one is
    /// finished, and flags set since the last expression are written out.
    fn expression(&mut self, product: u32) {
        self.end_operand();
        self.operand = Some(product);
        self.flush_flags();
    }

    fn end_operand(&mut self) {
        self.group_max = self.group_max.max(self.operand.unwrap_or(1));
    }

    fn flush_flags(&mut self) {
        if self.go != self.rust {
            self.out.push_str("(?");
            self.out.push_str(&self.rust.diff(self.go));
            self.out.push(')');
            self.rust = self.go;
        }
    }

    /// Opens a group: the group is the next expression of the enclosing one.
    fn open_group(&mut self) {
        self.end_operand();
        self.operand = None;
        self.flush_flags();
        self.frames.push(Frame {
            go: self.go,
            rust: self.rust,
            group_max: self.group_max,
        });
        self.group_max = 1;
    }

    fn close_group(&mut self) -> Result<(), GoRegexError> {
        let Some(frame) = self.frames.pop() else {
            return Err(GoRegexError::new(UNEXPECTED_PAREN, self.src));
        };
        self.end_operand();
        let product = self.group_max;
        self.go = frame.go;
        self.rust = frame.rust;
        self.group_max = frame.group_max;
        self.operand = Some(product);
        self.out.push(')');
        Ok(())
    }

    /// A repetition operator at `start`, its operator text ending at `end` (before a lazy
    /// `?`). Returns where the next token starts.
    fn repeat(
        &mut self,
        start: usize,
        mut end: usize,
        what: Repeat,
    ) -> Result<usize, GoRegexError> {
        let s = self.src;
        let lazy = s[end..].starts_with('?');
        if lazy {
            end += 1;
        }
        if let Some(last) = self.last_repeat {
            return Err(GoRegexError::new(INVALID_REPEAT_OP, &s[last..end]));
        }
        let Some(product) = self.operand else {
            return Err(GoRegexError::new(MISSING_REPEAT_ARGUMENT, &s[start..end]));
        };
        match what {
            Repeat::Op(c) => self.out.push(c),
            Repeat::Count(min, max) => {
                // Go's repeatIsValid: a count of 0 ends the path; the counts along every path
                // through the repeated expression multiply to at most 1000.
                let m = max.unwrap_or(min);
                if m > 0 {
                    let total = m.saturating_mul(product);
                    if total > MAX_REPEAT {
                        return Err(GoRegexError::new(INVALID_REPEAT_SIZE, &s[start..end]));
                    }
                    self.operand = Some(total);
                } else {
                    self.operand = Some(1);
                }
                match max {
                    Some(max) if max == min => self.out.push_str(&format!("{{{min}}}")),
                    Some(max) => self.out.push_str(&format!("{{{min},{max}}}")),
                    None => self.out.push_str(&format!("{{{min},}}")),
                }
            }
        }
        // Go decides greediness with its flags at the operator; the output's flags may still
        // lag (a flag group between operand and operator is written after the operator).
        if (self.go.ungreedy ^ lazy) != self.rust.ungreedy {
            self.out.push('?');
        }
        Ok(end)
    }

    /// `(?` at `i`: a named group, a flag group or flags.
    fn perl_group(&mut self, i: usize) -> Result<usize, GoRegexError> {
        let s = self.src;
        let t = &s[i..];
        let b = t.as_bytes();
        let with_p = t.len() > 4 && b[2] == b'P' && b[3] == b'<';
        let bare = t.len() > 3 && b[2] == b'<';
        if with_p || bare {
            let name_at = if with_p { 4 } else { 3 };
            let Some(end) = t.find('>') else {
                return Err(GoRegexError::new(INVALID_NAMED_CAPTURE, t));
            };
            let name = &t[name_at..end];
            if name.is_empty() || !name.bytes().all(|c| c == b'_' || c.is_ascii_alphanumeric()) {
                return Err(GoRegexError::new(INVALID_NAMED_CAPTURE, &t[..=end]));
            }
            self.open_group();
            self.names.push(Some(name.to_string()));
            let rust_name = !name.starts_with(|c: char| c.is_ascii_digit())
                && self.rust_names.insert(name.to_string());
            if rust_name {
                self.out.push_str("(?P<");
                self.out.push_str(name);
                self.out.push('>');
            } else {
                self.out.push('(');
            }
            return Ok(i + end + 1);
        }
        let mut flags = self.go;
        let mut on = true;
        let mut saw = false;
        let mut j = i + 2;
        while let Some(c) = s[j..].chars().next() {
            j += c.len_utf8();
            match c {
                'i' | 'm' | 's' | 'U' => {
                    flags = flags.with(c, on);
                    saw = true;
                }
                '-' if on => {
                    on = false;
                    saw = false;
                }
                ':' | ')' if on || saw => {
                    if c == ':' {
                        self.open_group();
                        self.out.push_str("(?");
                        self.out.push_str(&self.rust.diff(flags));
                        self.out.push(':');
                        self.rust = flags;
                    }
                    // Flags alone take effect for what follows, written out before it.
                    self.go = flags;
                    return Ok(j);
                }
                _ => break,
            }
        }
        Err(GoRegexError::new(INVALID_PERL_OP, &s[i..j]))
    }

    /// A backslash at `i` outside a class.
    fn escape(&mut self, i: usize) -> Result<usize, GoRegexError> {
        let s = self.src;
        let t = &s[i..];
        match t.as_bytes().get(1) {
            Some(b'A') => return Ok(self.emit_at(i + 2, r"\A")),
            Some(b'z') => return Ok(self.emit_at(i + 2, r"\z")),
            Some(b'b') => return Ok(self.emit_at(i + 2, r"(?-u:\b)")),
            Some(b'B') => return Ok(self.emit_at(i + 2, r"(?-u:\B)")),
            Some(b'C') => return Err(GoRegexError::new(INVALID_ESCAPE, &t[..2])),
            Some(b'Q') => {
                let body = &t[2..];
                let (lit, len) = match body.find(r"\E") {
                    Some(k) => (&body[..k], 2 + k + 2),
                    None => (body, t.len()),
                };
                for c in lit.chars() {
                    self.literal(u32::from(c));
                }
                return Ok(i + len);
            }
            Some(b'p' | b'P') => {
                let (class, len) = unicode_class(t)?;
                return Ok(self.emit_at(i + len, &class));
            }
            _ => {}
        }
        if let Some(class) = perl_class(t, false) {
            return Ok(self.emit_at(i + 2, class));
        }
        let (c, len) = parse_escape(t)?;
        self.literal(c);
        Ok(i + len)
    }

    fn emit_at(&mut self, next: usize, text: &str) -> usize {
        self.expression(1);
        self.out.push_str(text);
        next
    }

    fn literal(&mut self, c: u32) {
        self.expression(1);
        if is_surrogate(c) {
            // No UTF-8 text holds a surrogate: Go's literal never matches.
            self.out.push_str(NOTHING);
        } else {
            push_char(&mut self.out, c);
        }
    }

    /// A class at `i` (its `[`).
    fn class(&mut self, i: usize) -> Result<usize, GoRegexError> {
        let s = self.src;
        let whole = &s[i..];
        let mut j = i + 1;
        let negated = s[j..].starts_with('^');
        if negated {
            j += 1;
        }
        let mut body = String::new();
        let mut first = true;
        loop {
            let t = &s[j..];
            if t.starts_with(']') && !first {
                break;
            }
            first = false;
            if t.len() > 2
                && t.starts_with("[:")
                && let Some(k) = t[2..].find(":]")
            {
                let name = &t[..k + 4];
                if !is_posix_class(name) {
                    return Err(GoRegexError::new(INVALID_CHAR_RANGE, name));
                }
                body.push_str(name);
                j += name.len();
                continue;
            }
            if t.starts_with(r"\p") || t.starts_with(r"\P") {
                let (class, len) = unicode_class(t)?;
                body.push_str(&class);
                j += len;
                continue;
            }
            if let Some(class) = perl_class(t, true) {
                body.push_str(class);
                j += 2;
                continue;
            }
            let range_at = j;
            let (lo, len) = class_char(t, whole)?;
            j += len;
            let mut hi = lo;
            let t = &s[j..];
            if t.len() >= 2 && t.starts_with('-') && !t[1..].starts_with(']') {
                j += 1;
                let (c, len) = class_char(&s[j..], whole)?;
                j += len;
                hi = c;
                if hi < lo {
                    return Err(GoRegexError::new(INVALID_CHAR_RANGE, &s[range_at..j]));
                }
            }
            push_range(&mut body, lo, hi);
        }
        self.expression(1);
        if body.is_empty() {
            // Only surrogates: nothing, or everything when negated.
            self.out.push_str(if negated {
                r"[\x00-\x{10FFFF}]"
            } else {
                NOTHING
            });
        } else {
            self.out.push('[');
            if negated {
                self.out.push('^');
            }
            self.out.push_str(&body);
            self.out.push(']');
        }
        Ok(j + 1)
    }
}

/// A class that matches nothing.
const NOTHING: &str = r"[^\x00-\x{10FFFF}]";

fn is_surrogate(c: u32) -> bool {
    (0xD800..=0xDFFF).contains(&c)
}

/// Writes code point `c` (not a surrogate) as a literal of the crate's syntax, in or out of a
/// class.
fn push_char(out: &mut String, c: u32) {
    match char::from_u32(c) {
        Some(ch) if ch.is_control() => out.push_str(&format!(r"\x{{{c:X}}}")),
        Some(ch) if r"\.+*?()|[]{}^$#&-~".contains(ch) => {
            out.push('\\');
            out.push(ch);
        }
        Some(ch) => out.push(ch),
        None => out.push_str(&format!(r"\x{{{c:X}}}")),
    }
}

/// Writes the range `lo`–`hi` of a class, without its surrogates.
fn push_range(out: &mut String, mut lo: u32, mut hi: u32) {
    if is_surrogate(lo) {
        lo = 0xE000;
    }
    if is_surrogate(hi) {
        hi = 0xD7FF;
    }
    if lo > hi {
        return;
    }
    push_char(out, lo);
    if hi != lo {
        out.push('-');
        push_char(out, hi);
    }
}

/// Go's `parseRepeat`: `{n}`, `{n,}` or `{n,m}` at the start of `s`, as (min, max, length);
/// a number too large to read is `None` (Go's -1). `None` when `s` does not start with one
/// (then `{` is a literal).
#[allow(clippy::type_complexity)]
fn parse_repeat(s: &str) -> Option<(Option<u32>, Option<Option<u32>>, usize)> {
    let b = s.as_bytes();
    let mut j = 1;
    let (min, len) = parse_int(&b[j..])?;
    j += len;
    let max = match b.get(j)? {
        b',' => {
            j += 1;
            if *b.get(j)? == b'}' {
                None
            } else {
                let (max, len) = parse_int(&b[j..])?;
                j += len;
                Some(max)
            }
        }
        _ => Some(min),
    };
    (*b.get(j)? == b'}').then_some((min, max, j + 1))
}

/// Go's `parseInt`: decimal digits without a leading zero, as (value, length); the value is
/// `None` when too large (Go stops at 10^8).
fn parse_int(b: &[u8]) -> Option<(Option<u32>, usize)> {
    let len = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if len == 0 || (len >= 2 && b[0] == b'0') {
        return None;
    }
    let mut n: Option<u32> = Some(0);
    for d in &b[..len] {
        n = n
            .filter(|n| *n < 100_000_000)
            .map(|n| n * 10 + u32::from(d - b'0'));
    }
    Some((n, len))
}

/// `\d`, `\D`, `\s`, `\S`, `\w`, `\W` at the start of `t` (Go's ASCII classes): a class, or
/// inside one the items of a positive class and a nested class for a negated one.
fn perl_class(t: &str, inside: bool) -> Option<&'static str> {
    let b = t.as_bytes();
    if b.len() < 2 || b[0] != b'\\' {
        return None;
    }
    Some(match (b[1], inside) {
        (b'd', false) => "[0-9]",
        (b'd', true) => "0-9",
        (b'D', _) => "[^0-9]",
        (b's', false) => r"[\t\n\f\r ]",
        (b's', true) => r"\t\n\f\r ",
        (b'S', _) => r"[^\t\n\f\r ]",
        (b'w', false) => "[0-9A-Za-z_]",
        (b'w', true) => "0-9A-Za-z_",
        (b'W', _) => "[^0-9A-Za-z_]",
        _ => return None,
    })
}

/// Go's POSIX classes (`[:alpha:]`, `[:^alpha:]`), which the crate spells alike.
fn is_posix_class(name: &str) -> bool {
    const NAMES: [&str; 14] = [
        "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct",
        "space", "upper", "word", "xdigit",
    ];
    name.strip_prefix("[:")
        .and_then(|n| n.strip_suffix(":]"))
        .map(|n| n.strip_prefix('^').unwrap_or(n))
        .is_some_and(|n| NAMES.contains(&n))
}

/// One character of a class at the start of `t` (escapes as outside one): its code point and
/// length. `whole` is the class to the end of the pattern, which Go quotes when it is not
/// closed.
fn class_char(t: &str, whole: &str) -> Result<(u32, usize), GoRegexError> {
    match t.chars().next() {
        None => Err(GoRegexError::new(MISSING_BRACKET, whole)),
        Some('\\') => parse_escape(t),
        Some(c) => Ok((u32::from(c), c.len_utf8())),
    }
}

/// Go's `parseEscape`: the code point of the escape at the start of `t` and its length.
fn parse_escape(t: &str) -> Result<(u32, usize), GoRegexError> {
    let mut chars = t[1..].chars();
    let Some(c) = chars.next() else {
        return Err(GoRegexError::new(TRAILING_BACKSLASH, ""));
    };
    let mut j = 1 + c.len_utf8();
    let invalid = |j: usize| Err(GoRegexError::new(INVALID_ESCAPE, &t[..j]));
    let octal = |b: Option<&u8>| {
        b.filter(|b| (b'0'..=b'7').contains(b))
            .map(|b| u32::from(b - b'0'))
    };
    match c {
        c if c.is_ascii() && !c.is_ascii_alphanumeric() => Ok((u32::from(c), j)),
        '0'..='7' => {
            // A single non-zero digit would be a backreference, which Go lacks.
            if c != '0' && octal(t.as_bytes().get(j)).is_none() {
                return invalid(j);
            }
            let mut r = u32::from(c) - u32::from('0');
            for _ in 1..3 {
                let Some(d) = octal(t.as_bytes().get(j)) else {
                    break;
                };
                r = r * 8 + d;
                j += 1;
            }
            Ok((r, j))
        }
        'x' => {
            let Some(c) = chars.next() else {
                return invalid(j);
            };
            j += c.len_utf8();
            if c == '{' {
                let mut r: u32 = 0;
                let mut digits = 0;
                loop {
                    let Some(c) = chars.next() else {
                        return invalid(j);
                    };
                    j += c.len_utf8();
                    if c == '}' {
                        break;
                    }
                    let Some(v) = c.to_digit(16) else {
                        return invalid(j);
                    };
                    r = r * 16 + v;
                    if r > 0x10FFFF {
                        return invalid(j);
                    }
                    digits += 1;
                }
                return if digits == 0 { invalid(j) } else { Ok((r, j)) };
            }
            let x = c.to_digit(16);
            let y = chars.next().and_then(|c| {
                j += c.len_utf8();
                c.to_digit(16)
            });
            match (x, y) {
                (Some(x), Some(y)) => Ok((x * 16 + y, j)),
                _ => invalid(j),
            }
        }
        'a' => Ok((0x07, j)),
        'f' => Ok((0x0C, j)),
        'n' => Ok((0x0A, j)),
        'r' => Ok((0x0D, j)),
        't' => Ok((0x09, j)),
        'v' => Ok((0x0B, j)),
        _ => invalid(j),
    }
}

/// Go's `parseUnicodeClass`: `\pL`, `\p{Greek}`, `\P{^Lu}` at the start of `t`, as the crate's
/// class text and the length read.
fn unicode_class(t: &str) -> Result<(String, usize), GoRegexError> {
    let mut negated = t.as_bytes()[1] == b'P';
    let (seq, name) = match t[2..].chars().next() {
        Some('{') => {
            let Some(end) = t.find('}') else {
                return Err(GoRegexError::new(INVALID_CHAR_RANGE, t));
            };
            (&t[..=end], &t[3..end])
        }
        Some(c) => (&t[..2 + c.len_utf8()], &t[2..2 + c.len_utf8()]),
        None => (t, ""),
    };
    let name = match name.strip_prefix('^') {
        Some(n) => {
            negated = !negated;
            n
        }
        None => name,
    };
    let Some(class) = unicode_table(name) else {
        return Err(GoRegexError::new(INVALID_CHAR_RANGE, seq));
    };
    let text = match (class, negated) {
        (UnicodeClass::Property(p), false) => format!(r"\p{{{p}}}"),
        (UnicodeClass::Property(p), true) => format!(r"\P{{{p}}}"),
        (UnicodeClass::Other, false) => r"[\p{gc=Cc}\p{gc=Cf}\p{gc=Co}]".to_string(),
        (UnicodeClass::Other, true) => r"[^\p{gc=Cc}\p{gc=Cf}\p{gc=Co}]".to_string(),
        (UnicodeClass::Surrogate, false) => NOTHING.to_string(),
        (UnicodeClass::Surrogate, true) => r"\p{Any}".to_string(),
    };
    Ok((text, seq.len()))
}

/// What a `\p` name stands for, in the crate's terms.
enum UnicodeClass {
    /// A property the crate reads as Go does: `gc=Lu`, `sc=Greek`, `Any`.
    Property(String),
    /// Go's `C`: Cc, Cf, Co and Cs, not the unassigned code points the crate's `C` adds.
    Other,
    /// `Cs`: no UTF-8 text holds a surrogate.
    Surrogate,
}

/// Go 1.25's `unicodeTable`: the name compared in canonical form (Go's `canonicalName`).
fn unicode_table(name: &str) -> Option<UnicodeClass> {
    let canon = canonical_name(name);
    let property = |p: &str| Some(UnicodeClass::Property(p.to_string()));
    match canon.as_str() {
        "Any" => return property("Any"),
        "Assigned" => return property("Assigned"),
        "Ascii" => return property("ASCII"),
        _ => {}
    }
    let category = CATEGORIES
        .iter()
        .find(|c| canonical_name(c) == canon)
        .copied()
        .or_else(|| {
            CATEGORY_ALIASES
                .iter()
                .find(|(alias, _)| canonical_name(alias) == canon)
                .map(|(_, c)| *c)
        });
    if let Some(c) = category {
        return match c {
            "C" => Some(UnicodeClass::Other),
            "Cs" => Some(UnicodeClass::Surrogate),
            c => property(&format!("gc={c}")),
        };
    }
    SCRIPTS
        .iter()
        .find(|s| canonical_name(s) == canon)
        .and_then(|s| property(&format!("sc={s}")))
}

/// Go's `canonicalName`: spaces, underscores and hyphens dropped, the first letter upper case
/// and the others lower case.
fn canonical_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars().filter(|c| !matches!(c, '_' | '-' | ' ')) {
        if out.is_empty() {
            out.push(c.to_ascii_uppercase());
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// Go's general categories (`unicode.Categories`, with `LC` and `Cn`).
const CATEGORIES: [&str; 38] = [
    "C", "Cc", "Cf", "Cn", "Co", "Cs", "L", "LC", "Ll", "Lm", "Lo", "Lt", "Lu", "M", "Mc", "Me",
    "Mn", "N", "Nd", "Nl", "No", "P", "Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps", "S", "Sc", "Sk",
    "Sm", "So", "Z", "Zl", "Zp", "Zs",
];

/// Go's `unicode.CategoryAliases`: Unicode's long names of the general categories.
const CATEGORY_ALIASES: [(&str, &str); 42] = [
    ("Other", "C"),
    ("Control", "Cc"),
    ("cntrl", "Cc"),
    ("Format", "Cf"),
    ("Unassigned", "Cn"),
    ("Private_Use", "Co"),
    ("Surrogate", "Cs"),
    ("Letter", "L"),
    ("Cased_Letter", "LC"),
    ("Lowercase_Letter", "Ll"),
    ("Modifier_Letter", "Lm"),
    ("Other_Letter", "Lo"),
    ("Titlecase_Letter", "Lt"),
    ("Uppercase_Letter", "Lu"),
    ("Mark", "M"),
    ("Combining_Mark", "M"),
    ("Spacing_Mark", "Mc"),
    ("Enclosing_Mark", "Me"),
    ("Nonspacing_Mark", "Mn"),
    ("Number", "N"),
    ("Decimal_Number", "Nd"),
    ("digit", "Nd"),
    ("Letter_Number", "Nl"),
    ("Other_Number", "No"),
    ("Punctuation", "P"),
    ("punct", "P"),
    ("Connector_Punctuation", "Pc"),
    ("Dash_Punctuation", "Pd"),
    ("Close_Punctuation", "Pe"),
    ("Final_Punctuation", "Pf"),
    ("Initial_Punctuation", "Pi"),
    ("Other_Punctuation", "Po"),
    ("Open_Punctuation", "Ps"),
    ("Symbol", "S"),
    ("Currency_Symbol", "Sc"),
    ("Modifier_Symbol", "Sk"),
    ("Math_Symbol", "Sm"),
    ("Other_Symbol", "So"),
    ("Separator", "Z"),
    ("Line_Separator", "Zl"),
    ("Paragraph_Separator", "Zp"),
    ("Space_Separator", "Zs"),
];

/// Go's scripts (`unicode.Scripts`, Unicode 15.0).
const SCRIPTS: [&str; 163] = [
    "Adlam",
    "Ahom",
    "Anatolian_Hieroglyphs",
    "Arabic",
    "Armenian",
    "Avestan",
    "Balinese",
    "Bamum",
    "Bassa_Vah",
    "Batak",
    "Bengali",
    "Bhaiksuki",
    "Bopomofo",
    "Brahmi",
    "Braille",
    "Buginese",
    "Buhid",
    "Canadian_Aboriginal",
    "Carian",
    "Caucasian_Albanian",
    "Chakma",
    "Cham",
    "Cherokee",
    "Chorasmian",
    "Common",
    "Coptic",
    "Cuneiform",
    "Cypriot",
    "Cypro_Minoan",
    "Cyrillic",
    "Deseret",
    "Devanagari",
    "Dives_Akuru",
    "Dogra",
    "Duployan",
    "Egyptian_Hieroglyphs",
    "Elbasan",
    "Elymaic",
    "Ethiopic",
    "Georgian",
    "Glagolitic",
    "Gothic",
    "Grantha",
    "Greek",
    "Gujarati",
    "Gunjala_Gondi",
    "Gurmukhi",
    "Han",
    "Hangul",
    "Hanifi_Rohingya",
    "Hanunoo",
    "Hatran",
    "Hebrew",
    "Hiragana",
    "Imperial_Aramaic",
    "Inherited",
    "Inscriptional_Pahlavi",
    "Inscriptional_Parthian",
    "Javanese",
    "Kaithi",
    "Kannada",
    "Katakana",
    "Kawi",
    "Kayah_Li",
    "Kharoshthi",
    "Khitan_Small_Script",
    "Khmer",
    "Khojki",
    "Khudawadi",
    "Lao",
    "Latin",
    "Lepcha",
    "Limbu",
    "Linear_A",
    "Linear_B",
    "Lisu",
    "Lycian",
    "Lydian",
    "Mahajani",
    "Makasar",
    "Malayalam",
    "Mandaic",
    "Manichaean",
    "Marchen",
    "Masaram_Gondi",
    "Medefaidrin",
    "Meetei_Mayek",
    "Mende_Kikakui",
    "Meroitic_Cursive",
    "Meroitic_Hieroglyphs",
    "Miao",
    "Modi",
    "Mongolian",
    "Mro",
    "Multani",
    "Myanmar",
    "Nabataean",
    "Nag_Mundari",
    "Nandinagari",
    "New_Tai_Lue",
    "Newa",
    "Nko",
    "Nushu",
    "Nyiakeng_Puachue_Hmong",
    "Ogham",
    "Ol_Chiki",
    "Old_Hungarian",
    "Old_Italic",
    "Old_North_Arabian",
    "Old_Permic",
    "Old_Persian",
    "Old_Sogdian",
    "Old_South_Arabian",
    "Old_Turkic",
    "Old_Uyghur",
    "Oriya",
    "Osage",
    "Osmanya",
    "Pahawh_Hmong",
    "Palmyrene",
    "Pau_Cin_Hau",
    "Phags_Pa",
    "Phoenician",
    "Psalter_Pahlavi",
    "Rejang",
    "Runic",
    "Samaritan",
    "Saurashtra",
    "Sharada",
    "Shavian",
    "Siddham",
    "SignWriting",
    "Sinhala",
    "Sogdian",
    "Sora_Sompeng",
    "Soyombo",
    "Sundanese",
    "Syloti_Nagri",
    "Syriac",
    "Tagalog",
    "Tagbanwa",
    "Tai_Le",
    "Tai_Tham",
    "Tai_Viet",
    "Takri",
    "Tamil",
    "Tangsa",
    "Tangut",
    "Telugu",
    "Thaana",
    "Thai",
    "Tibetan",
    "Tifinagh",
    "Tirhuta",
    "Toto",
    "Ugaritic",
    "Vai",
    "Vithkuqi",
    "Wancho",
    "Warang_Citi",
    "Yezidi",
    "Yi",
    "Zanabazar_Square",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn rust(go: &str) -> String {
        match translate(go) {
            Ok(t) => t.pattern,
            Err(e) => panic!("{go:?}: {e}"),
        }
    }

    fn error(go: &str) -> String {
        match translate(go) {
            Ok(t) => panic!("{go:?} translated to {:?}", t.pattern),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn go_valid_patterns_translate() {
        let cases: &[(&str, &str)] = &[
            // \Q…\E: literal text.
            (
                r"step \Q(x)\E (?P<iteration>\d+)",
                r"step \(x\) (?P<iteration>[0-9]+)",
            ),
            (r"\Q+|*?{[\E", r"\+\|\*\?\{\["),
            (r"\Qab\E+", r"ab+"),
            (r"\Q\\E", r"\\"),
            (r"a\Qb", r"ab"),
            (r"a\Q\E*", r"a*"),
            // A `{` that starts no repetition is literal.
            (r"ste{,3}p", r"ste\{,3\}p"),
            (r"a{,2}", r"a\{,2\}"),
            (r"x{1001", r"x\{1001"),
            (r"x{2,1", r"x\{2,1"),
            (r"c{01}", r"c\{01\}"),
            (r"a*{", r"a*\{"),
            (r"{", r"\{"),
            (r"}", r"\}"),
            (r"a{2}b{2,}c{1,3}d{2,2}?", r"a{2}b{2,}c{1,3}d{2}?"),
            // Unicode classes.
            (r"\pL", r"\p{gc=L}"),
            (r"\p{Greek}", r"\p{sc=Greek}"),
            (r"\PL", r"\P{gc=L}"),
            (r"[\p{L}]", r"[\p{gc=L}]"),
            (r"[^\P{Lu}x]", r"[^\P{gc=Lu}x]"),
            (r"\p{^Greek}", r"\P{sc=Greek}"),
            (r"\P{^Greek}", r"\p{sc=Greek}"),
            (r"\p{Letter}", r"\p{gc=L}"),
            (r"\p{upper case-let ter}", r"\p{gc=Lu}"),
            (r"\p{Canadian_Aboriginal}", r"\p{sc=Canadian_Aboriginal}"),
            (
                r"\p{Any}\p{ascii}\p{Assigned}",
                r"\p{Any}\p{ASCII}\p{Assigned}",
            ),
            (
                r"\pC\PC",
                r"[\p{gc=Cc}\p{gc=Cf}\p{gc=Co}][^\p{gc=Cc}\p{gc=Cf}\p{gc=Co}]",
            ),
            (r"\p{Cs}", r"[^\x00-\x{10FFFF}]"),
            // Go's ASCII Perl classes and word boundaries.
            (
                r"\d\s\w\D\S\W",
                r"[0-9][\t\n\f\r ][0-9A-Za-z_][^0-9][^\t\n\f\r ][^0-9A-Za-z_]",
            ),
            (r"[\d\s\w\D]", r"[0-9\t\n\f\r 0-9A-Za-z_[^0-9]]"),
            (r"\bword\B", r"(?-u:\b)word(?-u:\B)"),
            (r"\Aa\z", r"\Aa\z"),
            (r"[[:alpha:][:^digit:]x]", r"[[:alpha:][:^digit:]x]"),
            // Escapes Go reads.
            (r"\x41\x{42}\103\0\a\f\v\t", r"ABC\x{0}\x{7}\x{C}\x{B}\x{9}"),
            (r"\x{1F600}", "\u{1F600}"),
            (r"\<\>\_\ \#\&\~\-", r"<>_ \#\&\~\-"),
            (r"[\x{41}-\x7a]\x61", r"[A-z]a"),
            (r"[\012-\234]", r"[\x{A}-\x{9C}]"),
            (r"\x{D800}", r"[^\x00-\x{10FFFF}]"),
            (r"[\x{D000}-\x{D900}]", "[\u{d000}-\u{d7ff}]"),
            (r"[^\x{D800}]", r"[\x00-\x{10FFFF}]"),
            // Classes rewritten item by item.
            (r"[]a]", r"[\]a]"),
            (r"[^]a]", r"[^\]a]"),
            (r"[[a]", r"[\[a]"),
            (r"[a&&b]", r"[a\&\&b]"),
            (r"[a~~c]", r"[a\~\~c]"),
            (r"[+--]", r"[\+-\-]"),
            (r"[a-b-c]", r"[a-b\-c]"),
            (r"[-a]", r"[\-a]"),
            (r"[a-]", r"[a\-]"),
            (r"[\d-z]", r"[0-9\-z]"),
            (r"[α-ε☺]", r"[α-ε☺]"),
            (r"[[:a]", r"[\[:a]"),
            // Named groups, both spellings.
            (r"(?P<name>a)(?<n2>b)", r"(?P<name>a)(?P<n2>b)"),
            (r"(?P<a>x)|(?P<a>y)", r"(?P<a>x)|(y)"),
            (r"(?P<1a>x)", r"(x)"),
            // Flags.
            (r"(?i)a(?m)^(?s).(?U)b*", r"(?i)a(?m)^(?s).(?U)b*"),
            (r"(?i:a)b", r"(?i:a)b"),
            (r"(?i)(?i:a)", r"(?i)(?:a)"),
            (r"(?ims-U:a)", r"(?ims:a)"),
            (r"(?i)a(?-i)b", r"(?i)a(?-i)b"),
            (r"(?i-i)a", r"a"),
            (r"(?)a", r"a"),
            (r"(?i)a|b", r"(?i)a|b"),
            (r"(a(?i))b", r"(a)b"),
            // A flag group between an expression and its repetition.
            (r"a(?i)*b", r"a*(?i)b"),
            (r"a(?U)*", r"a*?"),
            (r"(?U)a*?", r"(?U)a*?"),
            (r"(?U)a*", r"(?U)a*"),
            (r"a*(?i)*", r"a**"),
            // Repetition of assertions and empty groups, as Go allows.
            (r"^*\b+(?:)*", r"^*(?-u:\b)+(?:)*"),
            // Valid nested counts (the product at the limit).
            (r"(?:[a-z]{4}){0,250}", r"(?:[a-z]{4}){0,250}"),
            (
                r"((((((((((x{2}){2}){2}){2}){2}){2}){2}){2}){2}))",
                r"((((((((((x{2}){2}){2}){2}){2}){2}){2}){2}){2}))",
            ),
            (r"(?:(?:a{1000}){0}){5}", r"(?:(?:a{1000}){0}){5}"),
            (r"a{1000}b{1000}", r"a{1000}b{1000}"),
            // Everything else is kept.
            (r"|x|", r"|x|"),
            (r"", r""),
            ("tab\there", r"tab\x{9}here"),
            (r"é+", r"é+"),
        ];
        for (go, want) in cases {
            assert_eq!(rust(go), *want, "{go:?}");
            regex::Regex::new(want).unwrap_or_else(|e| panic!("{go:?} -> {want:?}: {e}"));
        }
    }

    #[test]
    fn go_invalid_patterns_fail_in_gos_words() {
        let cases: &[(&str, &str)] = &[
            (r"\d{1001}", "invalid repeat count: `{1001}`"),
            (r"x{2,1}", "invalid repeat count: `{2,1}`"),
            (r"x{9876543210}", "invalid repeat count: `{9876543210}`"),
            (r"x{1,9876543210}", "invalid repeat count: `{1,9876543210}`"),
            (r"a{100000,}", "invalid repeat count: `{100000,}`"),
            (r"a*{1001}", "invalid repeat count: `{1001}`"),
            (r"(?:a{100}){11}", "invalid repeat count: `{11}`"),
            (r"(?:[a-z]{4}){0,251}", "invalid repeat count: `{0,251}`"),
            (r"(?:(?:a{100})*){11}?", "invalid repeat count: `{11}?`"),
            (
                r"((((((((((x{2}){2}){2}){2}){2}){2}){2}){2}){2}){2})",
                "invalid repeat count: `{2}`",
            ),
            (r"a++", "invalid nested repetition operator: `++`"),
            (r"a**", "invalid nested repetition operator: `**`"),
            (r"a*+", "invalid nested repetition operator: `*+`"),
            (r"a?*", "invalid nested repetition operator: `?*`"),
            (r"a*??", "invalid nested repetition operator: `*??`"),
            (r"a+?*", "invalid nested repetition operator: `+?*`"),
            (r"x{2}{3}", "invalid nested repetition operator: `{2}{3}`"),
            (r"a{1}*", "invalid nested repetition operator: `{1}*`"),
            (r"\u0041", "invalid escape sequence: `\\u`"),
            (r"\U00000041", "invalid escape sequence: `\\U`"),
            (r"\x{110000}", "invalid escape sequence: `\\x{110000`"),
            (r"\x{}", "invalid escape sequence: `\\x{}`"),
            (r"\x{41", "invalid escape sequence: `\\x{41`"),
            (r"\xZZ", "invalid escape sequence: `\\xZZ`"),
            (r"\x4", "invalid escape sequence: `\\x4`"),
            (r"\x", "invalid escape sequence: `\\x`"),
            (r"\h", "invalid escape sequence: `\\h`"),
            (r"\Z", "invalid escape sequence: `\\Z`"),
            (r"\C", "invalid escape sequence: `\\C`"),
            (r"\e", "invalid escape sequence: `\\e`"),
            (r"(a)\1", "invalid escape sequence: `\\1`"),
            (r"\8", "invalid escape sequence: `\\8`"),
            (r"\é", "invalid escape sequence: `\\é`"),
            (r"[\b]", "invalid escape sequence: `\\b`"),
            (r"[\Qa\E]", "invalid escape sequence: `\\Q`"),
            (r"[a-\d]", "invalid escape sequence: `\\d`"),
            (r"a\", "trailing backslash at end of expression: ``"),
            (r"[a\", "trailing backslash at end of expression: ``"),
            (r"(?=x)", "invalid or unsupported Perl syntax: `(?=`"),
            (r"(?!x)", "invalid or unsupported Perl syntax: `(?!`"),
            (r"(?x)a", "invalid or unsupported Perl syntax: `(?x`"),
            (r"(?i-)a", "invalid or unsupported Perl syntax: `(?i-)`"),
            (r"(?--i)a", "invalid or unsupported Perl syntax: `(?--`"),
            (r"(?P=n)", "invalid or unsupported Perl syntax: `(?P`"),
            (r"(?i", "invalid or unsupported Perl syntax: `(?i`"),
            (r"(?", "invalid or unsupported Perl syntax: `(?`"),
            (r"(?P<name>a", "missing closing ): `(?P<name>a`"),
            (r"(?P<name", "invalid named capture: `(?P<name`"),
            (r"(?<name", "invalid named capture: `(?<name`"),
            (r"(?P<x y>a)", "invalid named capture: `(?P<x y>`"),
            (r"(?<>a)", "invalid named capture: `(?<>`"),
            (r"(?P<a-b>x)", "invalid named capture: `(?P<a-b>`"),
            (r"(abc", "missing closing ): `(abc`"),
            (r"(a|b|", "missing closing ): `(a|b|`"),
            (r"abc)", "unexpected ): `abc)`"),
            (r"(a))", "unexpected ): `(a))`"),
            (r"[a-z", "missing closing ]: `[a-z`"),
            (r"([a-z)", "missing closing ]: `[a-z)`"),
            (r"[]", "missing closing ]: `[]`"),
            (r"[z-a]", "invalid character class range: `z-a`"),
            (r"[a-Z]", "invalid character class range: `a-Z`"),
            (r"[a--b]", "invalid character class range: `a--`"),
            (r"[[:foo:]]", "invalid character class range: `[:foo:]`"),
            (r"\p{Foo}", "invalid character class range: `\\p{Foo}`"),
            (
                r"\p{IsGreek}",
                "invalid character class range: `\\p{IsGreek}`",
            ),
            (
                r"\p{sc=Greek}",
                "invalid character class range: `\\p{sc=Greek}`",
            ),
            (r"\p{Greek", "invalid character class range: `\\p{Greek`"),
            (r"\pX", "invalid character class range: `\\pX`"),
            (r"\p", "invalid character class range: `\\p`"),
            (r"*a", "missing argument to repetition operator: `*`"),
            (r"(?i)+", "missing argument to repetition operator: `+`"),
            (r"a|*", "missing argument to repetition operator: `*`"),
            (r"(*)", "missing argument to repetition operator: `*`"),
            (r"{2}", "missing argument to repetition operator: `{2}`"),
            (r"??", "missing argument to repetition operator: `??`"),
            (r"\Q\E*", "missing argument to repetition operator: `*`"),
        ];
        for (go, want) in cases {
            assert_eq!(error(go), format!("error parsing regexp: {want}"), "{go:?}");
        }
    }

    #[test]
    fn names_are_gos() {
        let t = translate(r"(a)(?P<x>b)(?<x>c)(?P<1>d)").unwrap();
        assert_eq!(t.pattern, r"(a)(?P<x>b)(c)(d)");
        assert_eq!(
            t.names,
            [None, Some("x".into()), Some("x".into()), Some("1".into())]
        );
    }

    #[test]
    fn matches_as_go_matches() {
        let yes = |go: &str, text: &str| {
            assert!(compile(go).unwrap().is_match(text), "{go:?} on {text:?}");
        };
        let no = |go: &str, text: &str| {
            assert!(!compile(go).unwrap().is_match(text), "{go:?} on {text:?}");
        };
        // ASCII \d, \s, \w, \b.
        no(r"\d", "٣");
        no(r"\s", "\u{a0}");
        no(r"\s", "\u{b}");
        no(r"\w", "é");
        yes(r"\W", "é");
        yes(r"\bcaf\b", "café");
        no(r"\Bé", "café");
        // Unicode classes, `.` and case folding over characters.
        yes(r"^\pL+$", "café");
        yes(r"^\p{Greek}+$", "αβγ");
        no(r"\PL", "é");
        yes(r"^.$", "é");
        yes(r"(?i)k", "\u{212a}");
        yes(r"(?i)\w", "\u{17f}");
        no(r"(?i)\W", "\u{17f}");
        // Escapes and literals.
        yes(r"^\Q(x)\E$", "(x)");
        yes(r"^ste{,3}p$", "ste{,3}p");
        yes(r"^<a>$", "<a>");
        yes(r"^\<a\>$", "<a>");
        yes(r"^[[a]+$", "[a[");
        yes(r"^[a&&b]+$", "&ab");
        // A flag group between an expression and its repetition.
        yes(r"^a(?i)*B$", "aaab");
        assert_eq!(
            compile(r"a(?U)*").unwrap().find("aaa").map(|m| m.as_str()),
            Some("")
        );
    }

    #[test]
    fn bytes_read_invalid_utf8_as_go_does() {
        assert_eq!(go_utf8(b"plain"), Cow::Borrowed(b"plain".as_slice()));
        assert_eq!(
            go_utf8(b"a\xffb\xe2\x82c\xf0"),
            Cow::<[u8]>::Owned("a\u{FFFD}b\u{FFFD}\u{FFFD}c\u{FFFD}".as_bytes().to_vec())
        );
        let re = compile_bytes(r"^step (?P<n>\d+) .+ loss (?P<l>[\d.]+)$").unwrap();
        let line = go_utf8(b"step 12 \xff\xfe progress loss 0.5");
        let caps = re.captures(&line).unwrap();
        assert_eq!(&caps["n"], b"12");
        assert_eq!(&caps["l"], b"0.5");
        assert!(
            compile_bytes(r"^a[^x]b$")
                .unwrap()
                .is_match(&go_utf8(b"a\x80b"))
        );
        assert!(
            compile_bytes(r"^a\x{FFFD}b$")
                .unwrap()
                .is_match(&go_utf8(b"a\x80b"))
        );
        assert!(
            !compile_bytes(r"^a..b$")
                .unwrap()
                .is_match(&go_utf8(b"a\xc3\xa9b"))
        );
    }

    #[test]
    fn limits_of_the_crate_in_gos_words() {
        let e = compile(&format!("{}{}", "(".repeat(300), ")".repeat(300))).unwrap_err();
        assert_eq!(e.code(), NESTING_DEPTH);
        let e = compile(r"(?:\pL{1000}){1}\pL{1000}\pL{1000}\pL{1000}").unwrap_err();
        assert_eq!(e.code(), TOO_LARGE);
    }
}
