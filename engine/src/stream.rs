//! Reading a YAML stream one document at a time, in memory bounded by the largest document.
//!
//! [`ChunkReader`] cuts a stream at its `---` lines (a line that is `---`, or starts with
//! `--- `, after the first line) without parsing it; [`parse_chunk`] parses one piece with the
//! YAML budgets applied to that piece alone, keeping line numbers those of the whole stream.
//! `check` reads every input this way: a stream of any length and any number of documents is
//! read in one pass, linear in its size, and a syntax error loses only its own document.
//!
//! A `---` at the start of a line always ends a document in YAML (even inside a quoted scalar),
//! so cutting there gives the documents the parser would.

use std::io::BufRead;
use std::sync::Arc;

use crate::error::Error;
use crate::source::{Document, Source, parse_text};

/// One piece of a stream: the lines from one `---` line (or the start) up to the next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// 1-based line number of the piece's first line in the stream.
    pub first_line: usize,
    /// The lines, each with its line terminator (the `---` line first, except for the first
    /// piece).
    pub text: String,
    /// The stream's line just before the piece (the previous piece's last), with its
    /// terminator; `None` for the first piece.
    pub line_before: Option<String>,
    /// The stream's line just after the piece (the next `---` line), with its terminator;
    /// `None` for the last piece.
    pub line_after: Option<String>,
    /// Set when the piece grew past the per-document size limit
    /// ([`Limits::document_bytes`](crate::limits::Limits::document_bytes)): the bytes read
    /// when reading stopped. `text` then holds only the first line, and nothing after the piece
    /// is read (where the next document starts cannot be known without reading all of it).
    pub oversized: Option<usize>,
    /// Byte offsets in `text` of each line's start, indexed on the first line lookup.
    starts: LineStarts,
}

/// Where each line of a [`Chunk`] starts, computed once: looking up the lines of every finding
/// or scalar of a long document would otherwise rescan it from its start each time. Not part
/// of a chunk's identity (equal chunks compare equal whether or not one has been indexed).
#[derive(Clone, Default)]
struct LineStarts(std::sync::OnceLock<Box<[usize]>>);

impl PartialEq for LineStarts {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for LineStarts {}

impl std::fmt::Debug for LineStarts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LineStarts")
    }
}

impl Chunk {
    /// The text of 1-based stream line `line`, with its terminator, when it is this piece's or
    /// one of the two lines around it; else `None`.
    pub fn raw_line(&self, line: usize) -> Option<&str> {
        if line + 1 == self.first_line {
            return self.line_before.as_deref();
        }
        let rel = line.checked_sub(self.first_line)?;
        // The stream's byte-order mark is not part of its first line (see `Source::raw_line`).
        let bom = if self.first_line == 1 {
            crate::source::bom_len(&self.text)
        } else {
            0
        };
        let starts = self.starts.0.get_or_init(|| {
            std::iter::once(bom)
                .chain(self.text.match_indices('\n').map(|(i, _)| i + 1))
                .filter(|&i| i < self.text.len())
                .collect::<Vec<_>>()
                .into_boxed_slice()
        });
        match (starts.get(rel), starts.get(rel + 1)) {
            (Some(&a), Some(&b)) => self.text.get(a..b),
            (Some(&a), None) => self.text.get(a..),
            // Only the line right after the last one is known.
            (None, _) if rel == starts.len() => self.line_after.as_deref(),
            (None, _) => None,
        }
    }

    /// [`Chunk::raw_line`] without the line terminator.
    pub fn line(&self, line: usize) -> Option<&str> {
        self.raw_line(line)
            .map(|l| l.trim_end_matches('\n').trim_end_matches('\r'))
    }
}

/// Splits a stream into [`Chunk`]s as it reads, holding one piece (and one line of look-ahead)
/// at a time.
///
/// # Errors
/// Each item is `Err` when the reader fails (an I/O error, text that is not UTF-8); the
/// iterator ends after the first error.
pub struct ChunkReader<R> {
    reader: R,
    /// Lines read so far.
    lines: usize,
    /// Bytes read so far.
    offset: usize,
    /// The `---` line that starts the next piece, already read.
    pending: Option<String>,
    /// The last line of the previous piece.
    last_line: Option<String>,
    /// A directive line (`%YAML`, `%TAG`) was read and the `---` line that starts its document
    /// was not yet: the directive belongs to that document, so the piece is not cut there.
    directive: bool,
    /// The last line with content was a document end marker (`...`), or there was none yet: a
    /// directive may follow, and starts the next piece.
    after_end: bool,
    done: bool,
    /// The line being read (kept to reuse its allocation).
    line: Vec<u8>,
    /// Set while the piece is JSON values one after another (its first content line starts
    /// with `{` or `[`): where each ends, so the next one that starts a line starts a piece.
    json: Option<JsonScan>,
    /// The piece has a line that is not blank, a comment or its `---`.
    content: bool,
}

/// How far a piece of JSON values has been read: bracket depth, inside a string or not.
#[derive(Debug, Default)]
struct JsonScan {
    depth: usize,
    in_string: bool,
    escape: bool,
    /// Values (objects or arrays) closed at depth 0.
    values: usize,
    /// Something other than whitespace and whole objects or arrays at depth 0 (`[a]: b`, a
    /// YAML flow key): the piece is not JSON values only and is never cut.
    mixed: bool,
}

impl JsonScan {
    fn feed(&mut self, line: &str) {
        for b in line.bytes() {
            if self.in_string {
                if self.escape {
                    self.escape = false;
                } else if b == b'\\' {
                    self.escape = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match b {
                b'"' if self.depth > 0 => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' if self.depth > 0 => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        self.values += 1;
                    }
                }
                b' ' | b'\t' | b'\r' | b'\n' => {}
                _ if self.depth == 0 => self.mixed = true,
                _ => {}
            }
        }
    }

    /// True between two values: the next one may start a piece.
    fn between_values(&self) -> bool {
        self.depth == 0 && !self.in_string && self.values > 0 && !self.mixed
    }
}

/// True when `line` starts (after a byte order mark and blanks) a JSON object or array.
fn starts_json_value(line: &str) -> bool {
    line.trim_start_matches(['\u{feff}', ' ', '\t'])
        .starts_with(['{', '['])
}

impl<R: BufRead> ChunkReader<R> {
    /// A reader of `reader`'s pieces, from its start.
    pub fn new(reader: R) -> ChunkReader<R> {
        ChunkReader {
            reader,
            lines: 0,
            offset: 0,
            pending: None,
            last_line: None,
            directive: false,
            after_end: true,
            done: false,
            line: Vec::new(),
            json: None,
            content: false,
        }
    }

    /// Notes a line of the piece being read (not a `---` or directive line): whether the piece
    /// is JSON values, and where they end.
    fn observe(&mut self, line: &str) {
        match &mut self.json {
            Some(scan) => scan.feed(line),
            None if !self.content && starts_json_value(line) => {
                let mut scan = JsonScan::default();
                // A byte order mark before the first value is not content.
                scan.feed(line.trim_start_matches('\u{feff}'));
                self.json = Some(scan);
            }
            None => {}
        }
        if !self.content && !blank_or_comment(line) {
            self.content = true;
        }
    }
}

/// True when `line` holds nothing but blanks and comments. A carriage return alone breaks a
/// line in YAML (`# note\rkey: v` is a comment, then content), so each part it separates is
/// judged on its own.
fn blank_or_comment(line: &str) -> bool {
    if !line.contains('\r') {
        let t = line.trim_start();
        return t.is_empty() || t.starts_with('#');
    }
    line.split('\r').all(|part| {
        let p = part.trim();
        p.is_empty() || p.starts_with('#')
    })
}

/// True when `line` (after the stream's first) starts a new document.
fn is_separator(line: &str) -> bool {
    let t = line.trim_end();
    t == "---" || t.starts_with("--- ")
}

impl<R: BufRead> Iterator for ChunkReader<R> {
    type Item = std::io::Result<Chunk>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let first_line = self.lines + 1 - usize::from(self.pending.is_some());
        let mut text = self.pending.take().unwrap_or_default();
        self.json = None;
        self.content = false;
        if !text.is_empty() && !is_separator(&text) {
            // The line that cut the last piece where a JSON value starts.
            let first = std::mem::take(&mut text);
            self.observe(&first);
            text = first;
        }
        let mut last_start = 0usize;
        let limit = crate::limits::limits().document_bytes;
        loop {
            let start = text.len();
            if start > limit {
                // Past the per-document limit: stop reading this stream here.
                self.done = true;
                let first = text.split_inclusive('\n').next().unwrap_or("").to_string();
                return Some(Ok(Chunk {
                    first_line,
                    text: first,
                    line_before: self.last_line.take(),
                    line_after: None,
                    oversized: Some(start),
                    starts: LineStarts::default(),
                }));
            }
            // One line is read at most up to the limit (plus one byte), so a stream without
            // newlines cannot grow the buffer either.
            // `start <= limit` here; the limit may be as large as `usize::MAX`.
            let room = u64::try_from((limit - start).saturating_add(1)).unwrap_or(u64::MAX);
            // One buffer for every line: a line is copied once, into the piece.
            let line = &mut self.line;
            line.clear();
            match std::io::Read::take(&mut self.reader, room).read_until(b'\n', line) {
                Ok(0) => {
                    self.done = true;
                    break;
                }
                Ok(n) => {
                    match std::str::from_utf8(line) {
                        Ok(l) => text.push_str(l),
                        // A line cut at the limit inside a character: the next round reports
                        // the piece oversized.
                        Err(_) if start + n > limit => {
                            text.push_str(&String::from_utf8_lossy(line));
                        }
                        Err(e) => {
                            self.done = true;
                            let at = e.valid_up_to();
                            let message = if self.offset == 0 {
                                crate::limits::invalid_utf8(line, at, Some(self.lines + 1))
                            } else {
                                let byte = line.get(at).copied().unwrap_or(0);
                                format!(
                                    "not UTF-8 text: invalid byte 0x{byte:02x} at byte offset {} (line {})",
                                    self.offset + at,
                                    self.lines + 1
                                )
                            };
                            return Some(Err(std::io::Error::new(
                                std::io::ErrorKind::InvalidData,
                                message,
                            )));
                        }
                    }
                    self.offset += n;
                    self.lines += 1;
                    let line = &text[start..];
                    if is_separator(line) {
                        // A directive's document starts here: the piece goes on to hold it.
                        let cut = self.lines > 1 && !self.directive;
                        self.directive = false;
                        self.after_end = false;
                        if cut {
                            self.pending = Some(text.split_off(start));
                            break;
                        }
                    } else if line.starts_with('%') && (self.after_end || self.directive) {
                        // Directives follow a document end marker or start the stream: the
                        // first one starts a piece, which its `---` does not cut.
                        let cut = self.after_end && start > 0;
                        self.directive = true;
                        self.after_end = false;
                        if cut {
                            self.pending = Some(text.split_off(start));
                            break;
                        }
                    } else {
                        // JSON values one after another (`jq '.items[]'`): each that starts a
                        // line starts a piece, so the per-document budgets are each value's.
                        if self.json.as_ref().is_some_and(JsonScan::between_values)
                            && starts_json_value(line)
                        {
                            self.pending = Some(text.split_off(start));
                            break;
                        }
                        self.observe(line);
                        let t = line.trim_end();
                        if t == "..." || t.starts_with("... ") {
                            self.after_end = true;
                        } else if !blank_or_comment(t) {
                            self.after_end = false;
                        }
                    }
                    last_start = start;
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        if text.is_empty() && self.done {
            return None;
        }
        let line_before = self.last_line.take();
        self.last_line = Some(text[last_start..].to_string());
        let line_after = self.pending.clone();
        // Grown line by line, the buffer may be up to twice the text; a piece can be held
        // until its input ends (`check`), so it keeps only its text.
        text.shrink_to_fit();
        Some(Ok(Chunk {
            first_line,
            text,
            line_before,
            line_after,
            oversized: None,
            starts: LineStarts::default(),
        }))
    }
}

/// Parses one [`Chunk`] of `source`'s stream: its documents (usually one; none for a piece of
/// comments or an empty document), numbered from `first_index`, with positions in stream lines.
///
/// The YAML budgets (nodes, depth, aliases, scalar bytes) apply to the piece alone, so a
/// stream of any number of documents reads; `source` is only shared by the documents (its text
/// is not read: it may be empty for a stream that is not kept).
///
/// # Errors
/// [`Error::Yaml`] with the stream line and column of a syntax error, a duplicate key or a
/// budget breach in this piece.
pub fn parse_chunk(
    source: &Arc<Source>,
    chunk: &Chunk,
    first_index: usize,
) -> Result<Vec<Document>, Error> {
    let limits = crate::limits::limits();
    if chunk.oversized.is_some() {
        return Err(Error::Yaml {
            source_name: source.name.clone(),
            pos: Some(crate::source::Pos {
                line: chunk.first_line,
                column: 1,
            }),
            message: format!(
                "document {} is larger than the limit of {} bytes (--max-document-bytes); the rest of the input is not read",
                first_index + 1,
                limits.document_bytes
            ),
        });
    }
    parse_text(
        source,
        &chunk.text,
        chunk.first_line - 1,
        first_index,
        1,
        &limits,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(text: &str) -> Vec<Chunk> {
        ChunkReader::new(text.as_bytes())
            .collect::<Result<_, _>>()
            .expect("reads")
    }

    #[test]
    fn a_piece_past_the_document_limit_stops_the_stream() {
        let limit = crate::limits::limits().document_bytes;
        let text = format!("a: 1\n---\n{}---\nb: 2\n", "y\n".repeat(limit));
        let c = chunks(&text);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].oversized, None);
        assert_eq!(c[1].text, "---\n");
        assert_eq!(c[1].oversized, Some(limit + 1));
        let err = parse_chunk(&Source::new("s", ""), &c[1], 1).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "s:2:1: document 2 is larger than the limit of {limit} bytes (--max-document-bytes); the rest of the input is not read"
            )
        );
    }

    #[test]
    fn json_values_that_start_lines_are_pieces() {
        let text =
            "{\"a\": \"}{\\\" [\"}\n{\n  \"b\": [1,\n2]\n}\n[3] [4]\n---\n{\"c\": 1}\n{\"d\": 2}\n";
        let c = chunks(text);
        let pieces: Vec<_> = c.iter().map(|p| (p.first_line, p.text.as_str())).collect();
        assert_eq!(
            pieces,
            [
                (1, "{\"a\": \"}{\\\" [\"}\n"),
                (2, "{\n  \"b\": [1,\n2]\n}\n"),
                (6, "[3] [4]\n"),
                (7, "---\n{\"c\": 1}\n"),
                (9, "{\"d\": 2}\n"),
            ]
        );
        // After a byte order mark too.
        assert_eq!(chunks("\u{feff}{\"a\": 1}\n{\"b\": 2}\n").len(), 2);
        // YAML whose lines start with flow collections (a flow key) is never cut.
        assert_eq!(chunks("[a]: b\n[c]: d\n").len(), 1);
        assert_eq!(chunks("a: 1\n{b: 2}\n").len(), 1);
    }

    #[test]
    fn a_piece_keeps_only_its_text() {
        // 1,000 lines read one by one: the buffer grew by doubling past the text's length.
        let body: String = (0..1000).map(|i| format!("k{i}: {i}\n")).collect();
        let c = chunks(&format!("{body}---\n{body}"));
        assert_eq!(c.len(), 2);
        for piece in &c {
            assert_eq!(piece.text.capacity(), piece.text.len());
        }
        assert_eq!(c[1].text.len(), body.len() + 4);
    }

    #[test]
    fn lines_are_found_by_number_in_the_piece_and_around_it() {
        let c = chunks("a: 1\n---\nb: 2\r\nc: 3\n---\nd: 4");
        assert_eq!(c.len(), 3);
        let looked_up: Vec<_> = (1..=7).map(|l| c[1].raw_line(l)).collect();
        assert_eq!(
            looked_up,
            [
                Some("a: 1\n"),
                Some("---\n"),
                Some("b: 2\r\n"),
                Some("c: 3\n"),
                Some("---\n"),
                None,
                None
            ]
        );
        assert_eq!(c[1].line(3), Some("b: 2"));
        assert_eq!(c[2].line(6), Some("d: 4"));
        assert_eq!(c[2].line(7), None);
        // Indexing the lines changes nothing of the piece's identity.
        assert_eq!(c[1], chunks("a: 1\n---\nb: 2\r\nc: 3\n---\nd: 4")[1]);
    }

    #[test]
    fn a_line_without_end_is_cut_at_the_limit() {
        let limit = crate::limits::limits().document_bytes;
        let text = "x".repeat(limit * 2);
        let c = chunks(&text);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].oversized, Some(limit + 1));
    }

    #[test]
    fn invalid_utf8_names_the_byte_offset_and_line() {
        let err = ChunkReader::new(&b"a: 1\nb: caf\xe9\n"[..])
            .collect::<Result<Vec<_>, _>>()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "not UTF-8 text: invalid byte 0xe9 at byte offset 11 (line 2)"
        );
    }

    #[test]
    fn pieces_start_at_separator_lines_and_know_their_neighbours() {
        let c = chunks("a: 1\n---\nb: 2\n--- # x\nc: 3");
        assert_eq!(
            c.iter()
                .map(|c| (c.first_line, c.text.as_str()))
                .collect::<Vec<_>>(),
            vec![(1, "a: 1\n"), (2, "---\nb: 2\n"), (4, "--- # x\nc: 3")]
        );
        assert_eq!(c[1].line_before.as_deref(), Some("a: 1\n"));
        assert_eq!(c[1].line_after.as_deref(), Some("--- # x\n"));
        assert_eq!(c[1].raw_line(3), Some("b: 2\n"));
        assert_eq!(c[1].line(1), Some("a: 1"));
        assert_eq!(c[1].line(3), Some("b: 2"));
        assert_eq!(c[1].line(4), Some("--- # x"));
        assert_eq!(c[1].line(5), None);
        assert_eq!(c[2].line_after, None);
        // A stream that starts with `---` is one piece there.
        assert_eq!(chunks("---\na: 1\n").len(), 1);
        assert!(chunks("").is_empty());
    }

    /// Content after a lone carriage return in a comment line is content: a `%` line after it
    /// continues the document (as the YAML reader reads it), it does not start a directive.
    #[test]
    fn a_lone_carriage_return_ends_a_comment() {
        let text = "# one\r\r job\n%TAG ! x\n";
        let pieces = chunks(text);
        assert_eq!(pieces.len(), 1, "{pieces:?}");
        assert_eq!(pieces[0].text, text);
        let whole = crate::parse_documents(&crate::Source::new("in.yaml", text)).expect("parses");
        assert_eq!(whole.len(), 1);
        assert_eq!(whole[0].value, serde_json::json!("job %TAG ! x"));
    }

    #[test]
    fn a_directive_stays_with_the_document_it_starts() {
        let c = chunks(
            "%YAML 1.2\n---\na: 1\n---\nb: 2\n...\n%YAML 1.2\n%TAG ! tag:x,1:\n---\nc: 3\n---\nd: 4\n",
        );
        assert_eq!(
            c.iter()
                .map(|c| (c.first_line, c.text.as_str()))
                .collect::<Vec<_>>(),
            vec![
                (1, "%YAML 1.2\n---\na: 1\n"),
                (4, "---\nb: 2\n...\n"),
                (7, "%YAML 1.2\n%TAG ! tag:x,1:\n---\nc: 3\n"),
                (11, "---\nd: 4\n"),
            ]
        );
        let src = Source::new("s.yaml", "");
        let mut values = Vec::new();
        for piece in &c {
            let docs = parse_chunk(&src, piece, values.len()).expect("parses");
            values.extend(docs.into_iter().map(|d| (d.index, d.value)));
        }
        assert_eq!(
            values,
            vec![
                (0, serde_json::json!({"a": 1})),
                (1, serde_json::json!({"b": 2})),
                (2, serde_json::json!({"c": 3})),
                (3, serde_json::json!({"d": 4})),
            ]
        );
    }

    #[test]
    fn documents_keep_stream_lines_and_count_only_documents() {
        let src = Source::new("s.yaml", "");
        let text = "a: 1\n---\n# only a comment\n---\nb:\n  c: [1, 2\n---\nd: 4\n";
        let mut docs = Vec::new();
        let mut errors = Vec::new();
        for c in chunks(text) {
            match parse_chunk(&src, &c, docs.len() + errors.len()) {
                Ok(d) => docs.extend(d),
                Err(e) => errors.push(e),
            }
        }
        assert_eq!(
            docs.iter()
                .map(|d| (d.index, d.value.clone()))
                .collect::<Vec<_>>(),
            vec![
                (0, serde_json::json!({"a": 1})),
                (2, serde_json::json!({"d": 4}))
            ]
        );
        let p = crate::FieldPath::parse("d").expect("path");
        assert_eq!(
            docs[1].spans.lookup(&p),
            Some(crate::Pos { line: 8, column: 4 })
        );
        assert_eq!(errors.len(), 1);
        assert!(
            matches!(&errors[0], Error::Yaml { pos: Some(p), .. } if p.line == 6 && p.column == 6),
            "{errors:?}"
        );
    }
}
