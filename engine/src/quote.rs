//! Go's string quoting, which the original's messages use (`%q`): the rules' `goQuote(s)` CEL
//! function and messages that quote names as the original does. (The preCommand shell wrapper
//! quotes with single quotes instead; see `nvcre_domain::shell_quote`.) And [`printable`]:
//! untrusted text made safe to show on a terminal.

/// Go's `strconv.Quote` (what `%q` prints for a string): double quotes; `"` and `\` escaped;
/// `\a \b \f \n \r \t \v`; other non-printable characters as `\xHH` (below U+0020 and U+007F),
/// `\uHHHH` or `\UHHHHHHHH`.
///
/// ```
/// assert_eq!(nvcre_engine::go_quote("a\u{1}\""), r#""a\x01\"""#);
/// ```
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if go_is_print(c) => out.push(c),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", u32::from(c)));
            }
            c if u32::from(c) < 0x1_0000 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push_str(&format!("\\U{:08x}", u32::from(c))),
        }
    }
    out.push('"');
    out
}

/// Go's `strconv.IsPrint`: letters, marks, numbers, punctuation, symbols and the ASCII space.
/// Exact for Latin-1; above it, control, separator, format (Cf), private-use and noncharacter
/// code points are non-printable. Unassigned code points count as printable (no Unicode tables
/// here), which only matters for text that is not valid Unicode today.
fn go_is_print(c: char) -> bool {
    let u = u32::from(c);
    if u <= 0xFF {
        return (0x20..=0x7E).contains(&u) || ((0xA1..=0xFF).contains(&u) && u != 0xAD);
    }
    let format = matches!(
        u,
        0x0600..=0x0605
            | 0x061C
            | 0x06DD
            | 0x070F
            | 0x0890..=0x0891
            | 0x08E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    );
    let private_use = matches!(u, 0xE000..=0xF8FF | 0xF_0000..=0xF_FFFD | 0x10_0000..=0x10_FFFD);
    let noncharacter = matches!(u, 0xFDD0..=0xFDEF) || (u & 0xFFFE) == 0xFFFE;
    !(c.is_control() || c.is_whitespace() || format || private_use || noncharacter)
}

/// `text` safe to show on a terminal: each control character (but those in `keep`, such as the
/// tab or the line feed of a multi-line message), each bidirectional formatting or mark
/// character and the line and paragraph separators, written as its Rust escape (`\u{1b}`,
/// `\r`, `\u{202e}`). A manifest's value, a log line or a file's name reaches the reports;
/// written raw, it could clear or retitle the terminal of whoever reads them, make a line read
/// as another, or break a box's alignment. Borrowed when nothing needs escaping.
///
/// ```
/// assert_eq!(nvcre_engine::printable("a\u{1b}[2J\tb\n", &['\n']), "a\\u{1b}[2J\\tb\n");
/// ```
pub fn printable<'a>(text: &'a str, keep: &[char]) -> std::borrow::Cow<'a, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && !keep.contains(&c))
            || matches!(
                c,
                '\u{202a}'..='\u{202e}'
                    | '\u{2066}'..='\u{2069}'
                    | '\u{200e}'
                    | '\u{200f}'
                    | '\u{061c}'
                    | '\u{2028}'
                    | '\u{2029}'
            )
    };
    if !text.contains(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::go_quote;

    // ---- one line per case
    macro_rules! quote {
        ($name:ident, $input:expr, $want:expr) => {
            #[test]
            fn $name() {
                assert_eq!(go_quote($input), $want);
            }
        };
    }

    quote!(q_plain, "timeout", r#""timeout""#);

    quote!(q_space, "-o A -o B", r#""-o A -o B""#);

    quote!(q_double_quote, r#"say "hi""#, r#""say \"hi\"""#);

    quote!(q_backslash, r"a\b", r#""a\\b""#);

    quote!(q_newline_tab, "a\nb\tc", r#""a\nb\tc""#);

    quote!(q_bell_vt, "\u{7}\u{b}", r#""\a\v""#);

    quote!(q_escape, "\u{1b}[0m", r#""\x1b[0m""#);

    quote!(q_del, "\u{7f}", r#""\x7f""#);

    quote!(q_nbsp, "a\u{a0}b", r#""a\u00a0b""#);

    quote!(q_soft_hyphen, "\u{ad}", r#""\u00ad""#);

    quote!(q_latin1_printable, "café", r#""café""#);

    quote!(q_cjk, "日本", r#""日本""#);

    quote!(q_zero_width, "\u{200b}", r#""\u200b""#);

    quote!(q_emoji, "🚀", r#""🚀""#);

    quote!(q_tag_char, "\u{e0041}", r#""\U000e0041""#);

    quote!(q_dollar_kept, "$HOME", r#""$HOME""#);
}
