//! The findings a check keeps for its reports ([`Findings`]): encoded one after another, in
//! memory up to [`IN_MEMORY`] bytes and past that in an anonymous temporary file, so the
//! memory of a check stays bounded however many findings its inputs have (a stream of 66,000
//! documents with 270,000 findings is about 110 MB of them). Every report format reads them
//! back in input order, as often as there are reports.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};

use nvcre_engine::{Finding, Severity};
use serde::{Deserialize, Serialize};

use crate::report::Window;

/// Bytes of encoded findings kept in memory; past this they go to a temporary file (in the
/// directory `TMPDIR` names), which is removed when the check ends. When no temporary file can
/// be created or written, the findings stay in memory.
pub const IN_MEMORY: usize = 2 * 1024 * 1024;

/// One finding as kept: every field of [`Finding`] and the lines around its line.
#[derive(Serialize, Deserialize)]
struct Record<'a> {
    #[serde(borrow)]
    rule_id: Cow<'a, str>,
    #[serde(borrow)]
    pack: Cow<'a, str>,
    severity: Severity,
    #[serde(borrow)]
    message: Cow<'a, str>,
    #[serde(borrow)]
    file: Cow<'a, str>,
    document: usize,
    #[serde(borrow)]
    object: Option<Cow<'a, str>>,
    #[serde(borrow)]
    field_path: Option<Cow<'a, str>>,
    line: Option<usize>,
    column: Option<usize>,
    #[serde(borrow)]
    rule_file: Cow<'a, str>,
    rule_line: usize,
    #[serde(borrow)]
    stage: Option<Cow<'a, str>>,
    rule_error: bool,
    /// The window's first line and text.
    #[serde(borrow)]
    window: Option<(usize, Cow<'a, str>)>,
}

/// A finding encoded to be kept ([`Findings::push`]); encoding is done where the finding is
/// made (on every core), keeping it on the thread that gathers the results.
#[derive(Debug, Clone)]
pub struct Encoded {
    /// One JSON line (a string never holds a raw line break, so records are split at `\n`).
    bytes: Vec<u8>,
    severity: Severity,
    rule_error: bool,
}

impl Encoded {
    /// `finding`, with the lines around its line when known (the text report shows them).
    pub fn new(finding: &Finding, window: Option<&Window>) -> Encoded {
        fn s(v: &str) -> Cow<'_, str> {
            Cow::Borrowed(v)
        }
        let record = Record {
            rule_id: s(&finding.rule_id),
            pack: s(&finding.pack),
            severity: finding.severity,
            message: s(&finding.message),
            file: s(&finding.file),
            document: finding.document,
            object: finding.object.as_deref().map(s),
            field_path: finding.field_path.as_deref().map(s),
            line: finding.line,
            column: finding.column,
            rule_file: s(&finding.rule_file),
            rule_line: finding.rule_line,
            stage: finding.stage.as_deref().map(s),
            rule_error: finding.rule_error,
            window: window.map(|w| (w.first_line, s(&w.text))),
        };
        // Serializing strings and integers into a Vec cannot fail.
        let mut bytes = serde_json::to_vec(&record).unwrap_or_default();
        bytes.push(b'\n');
        // Grown by doubling, the buffer may be twice the record; the findings of held documents
        // wait in memory (up to 2,048 documents' worth), so they keep only their bytes.
        bytes.shrink_to_fit();
        Encoded {
            bytes,
            severity: finding.severity,
            rule_error: finding.rule_error,
        }
    }
}

/// A finding read back, with the lines around its line when they were kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// Which input it was found in: its place among the inputs checked (a file given twice is
    /// two inputs of one name).
    pub input: usize,
    /// The finding, every field as it was pushed.
    pub finding: Finding,
    /// The lines around `finding.line`, when known.
    pub window: Option<Window>,
}

impl Stored {
    fn decode(input: usize, line: &[u8]) -> std::io::Result<Stored> {
        let r: Record<'_> = serde_json::from_slice(line).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("reading back a kept finding: {e}"),
            )
        })?;
        let o = Cow::into_owned;
        Ok(Stored {
            input,
            finding: Finding {
                rule_id: o(r.rule_id),
                pack: o(r.pack),
                severity: r.severity,
                message: o(r.message),
                file: o(r.file),
                document: r.document,
                object: r.object.map(o),
                field_path: r.field_path.map(o),
                line: r.line,
                column: r.column,
                rule_file: o(r.rule_file),
                rule_line: r.rule_line,
                stage: r.stage.map(o),
                rule_error: r.rule_error,
                at_key: false,
            },
            window: r.window.map(|(first_line, text)| Window {
                first_line,
                text: o(text),
            }),
        })
    }
}

/// The findings of a check, in the order pushed, with their counts. Reading them back
/// ([`Findings::iter`]) can fail only when the temporary file they went to cannot be read.
#[derive(Debug)]
pub struct Findings {
    /// Encoded findings not in the file: all of them until the first spill.
    memory: Vec<u8>,
    /// The temporary file and how many bytes of it were written whole.
    file: Option<(File, u64)>,
    /// No temporary file could be created or written: the rest stays in memory.
    memory_only: bool,
    /// Bytes kept in memory before they go to the file.
    limit: usize,
    len: usize,
    /// Findings by severity: info, warning, error.
    counts: [usize; 3],
    rule_errors: usize,
    /// The input of each run of findings and the run's length, in the order pushed: one entry
    /// per input with findings, however many findings it has.
    inputs: Vec<(usize, usize)>,
}

impl Default for Findings {
    fn default() -> Findings {
        Findings::with_limit(IN_MEMORY)
    }
}

fn severity_index(s: Severity) -> usize {
    match s {
        Severity::Info => 0,
        Severity::Warning => 1,
        Severity::Error => 2,
    }
}

impl Findings {
    /// No findings, keeping up to `limit` bytes of them in memory (see [`IN_MEMORY`]).
    pub fn with_limit(limit: usize) -> Findings {
        Findings {
            memory: Vec::new(),
            file: None,
            memory_only: false,
            limit,
            len: 0,
            counts: [0; 3],
            rule_errors: 0,
            inputs: Vec::new(),
        }
    }

    /// Keeps `finding` of input `input` (with the lines around its line when known) after the
    /// others.
    pub fn push_finding(&mut self, input: usize, finding: &Finding, window: Option<&Window>) {
        self.push(input, Encoded::new(finding, window));
    }

    /// Keeps an encoded finding of input `input` (its place among the inputs checked) after
    /// the others.
    pub fn push(&mut self, input: usize, e: Encoded) {
        match self.inputs.last_mut() {
            Some((last, n)) if *last == input => *n += 1,
            _ => self.inputs.push((input, 1)),
        }
        self.len += 1;
        self.counts[severity_index(e.severity)] += 1;
        self.rule_errors += usize::from(e.rule_error);
        // Spilled before the buffer would outgrow the limit, so it never grows past it (a
        // buffer doubled past the limit would hold twice it for the rest of the run).
        if self.memory.len() + e.bytes.len() > self.limit && !self.memory_only {
            self.spill();
        }
        self.memory.extend_from_slice(&e.bytes);
    }

    /// Moves the findings in memory to the temporary file (created on first use). When that
    /// fails they stay in memory, and so do the later ones: what the file holds was written
    /// whole and is read back up to there.
    fn spill(&mut self) {
        if self.file.is_none() {
            match tempfile::tempfile() {
                Ok(f) => self.file = Some((f, 0)),
                Err(_) => {
                    self.memory_only = true;
                    return;
                }
            }
        }
        if let Some((file, written)) = &mut self.file {
            let wrote = file
                .seek(SeekFrom::Start(*written))
                .and_then(|_| file.write_all(&self.memory));
            match wrote {
                Ok(()) => {
                    *written += self.memory.len() as u64;
                    self.memory.clear();
                }
                Err(_) => self.memory_only = true,
            }
        }
    }

    /// How many findings were pushed.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No finding was pushed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many findings have severity `s`.
    pub fn count(&self, s: Severity) -> usize {
        self.counts[severity_index(s)]
    }

    /// How many findings have severity `s` or a higher one.
    pub fn at_or_above(&self, s: Severity) -> usize {
        self.counts[severity_index(s)..].iter().sum()
    }

    /// How many findings are rule errors (a rule that could not be evaluated).
    pub fn rule_errors(&self) -> usize {
        self.rule_errors
    }

    /// Whether some of the findings went to a temporary file.
    pub fn spilled(&self) -> bool {
        self.file.as_ref().is_some_and(|(_, n)| *n > 0)
    }

    /// The findings in the order pushed. Each iterator reads on its own; several may be used
    /// one after another or interleaved on one thread.
    pub fn iter(&self) -> Iter<'_> {
        let file =
            self.file.as_ref().filter(|(_, n)| *n > 0).map(|(file, n)| {
                BufReader::with_capacity(1 << 16, At { file, offset: 0 }.take(*n))
            });
        Iter {
            file,
            memory: &self.memory,
            line: Vec::new(),
            inputs: &self.inputs,
            left: 0,
            input: 0,
            offset: 0,
        }
    }

    /// A reader of single findings at the offsets [`Iter::offset`] gives, for a report that
    /// takes them in another order than pushed (JUnit, by document).
    pub fn reader(&self) -> Reader<'_> {
        let file = self.file.as_ref().filter(|(_, n)| *n > 0);
        Reader {
            file: file.map(|(file, _)| {
                // Small reads: the findings of one document are a few records, mostly near
                // each other.
                BufReader::with_capacity(1 << 13, At { file, offset: 0 })
            }),
            in_file: file.map_or(0, |(_, n)| *n),
            at: None,
            memory: &self.memory,
            line: Vec::new(),
        }
    }
}

/// A reader of the temporary file from its own offset (seeking before every read), so
/// iterators do not share a position.
struct At<'a> {
    file: &'a File,
    offset: u64,
}

impl Read for At<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut file = self.file;
        file.seek(SeekFrom::Start(self.offset))?;
        let n = file.read(buf)?;
        self.offset += n as u64;
        Ok(n)
    }
}

impl Seek for At<'_> {
    /// Moves only this reader's offset (the file is sought before each read).
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let to = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::Current(d) => self.offset.checked_add_signed(d),
            SeekFrom::End(_) => None,
        };
        self.offset = to.ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "seeking the kept findings out of range",
            )
        })?;
        Ok(self.offset)
    }
}

/// The iterator of [`Findings::iter`]: the findings in the file, then those in memory. After
/// an error it ends.
pub struct Iter<'a> {
    file: Option<BufReader<std::io::Take<At<'a>>>>,
    memory: &'a [u8],
    line: Vec<u8>,
    /// The runs of inputs not yet entered, and how many findings are left of the current one.
    inputs: &'a [(usize, usize)],
    left: usize,
    input: usize,
    /// Where the next finding is kept.
    offset: u64,
}

impl Iter<'_> {
    /// The input of the next finding read.
    fn next_input(&mut self) -> usize {
        while self.left == 0 {
            let Some(((input, n), rest)) = self.inputs.split_first() else {
                break;
            };
            (self.input, self.left, self.inputs) = (*input, *n, rest);
        }
        self.left = self.left.saturating_sub(1);
        self.input
    }

    /// Where the next finding is kept, for [`Reader::read`].
    pub fn offset(&self) -> u64 {
        self.offset
    }
}

impl Iterator for Iter<'_> {
    type Item = std::io::Result<Stored>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(reader) = &mut self.file {
            self.line.clear();
            match reader.read_until(b'\n', &mut self.line) {
                Ok(0) => self.file = None,
                Ok(n) => {
                    self.offset += n as u64;
                    let input = self.next_input();
                    return Some(Stored::decode(input, &self.line));
                }
                Err(e) => {
                    self.file = None;
                    self.memory = &[];
                    return Some(Err(e));
                }
            }
        }
        if self.memory.is_empty() {
            return None;
        }
        let end = self
            .memory
            .iter()
            .position(|&b| b == b'\n')
            .map_or(self.memory.len(), |i| i + 1);
        let (line, rest) = self.memory.split_at(end);
        self.memory = rest;
        self.offset += end as u64;
        let input = self.next_input();
        Some(Stored::decode(input, line))
    }
}

/// The reader of [`Findings::reader`]: one finding at a time, at any offset an [`Iter`] gave.
/// Reads in order are read through its buffer.
pub struct Reader<'a> {
    file: Option<BufReader<At<'a>>>,
    /// Bytes of findings in the file; offsets past them are in memory.
    in_file: u64,
    /// Where the file's buffered reader is, once it has read.
    at: Option<u64>,
    memory: &'a [u8],
    line: Vec<u8>,
}

impl Reader<'_> {
    /// The finding kept at `offset` (as [`Iter::offset`] gave it before reading it), of input
    /// `input`.
    ///
    /// # Errors
    /// Reading the temporary file, or an offset where no finding starts.
    pub fn read(&mut self, offset: u64, input: usize) -> std::io::Result<Stored> {
        match &mut self.file {
            Some(reader) if offset < self.in_file => {
                match self.at {
                    Some(at) if at == offset => {}
                    // Within the buffer this only moves in it.
                    Some(at) => reader.seek_relative(offset as i64 - at as i64)?,
                    None => {
                        reader.seek(SeekFrom::Start(offset))?;
                    }
                }
                self.at = None;
                self.line.clear();
                let n = reader.read_until(b'\n', &mut self.line)?;
                self.at = Some(offset + n as u64);
                Stored::decode(input, &self.line)
            }
            _ => {
                let start = usize::try_from(offset.saturating_sub(self.in_file))
                    .unwrap_or(usize::MAX)
                    .min(self.memory.len());
                let rest = &self.memory[start..];
                let end = rest
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(rest.len(), |i| i + 1);
                Stored::decode(input, &rest[..end])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(i: usize, severity: Severity) -> Finding {
        Finding {
            rule_id: format!("rule-{}", i % 3),
            pack: "pack".into(),
            severity,
            message: format!("message {i}: \"quoted\"\nsecond line, é"),
            file: "in.yaml".into(),
            document: i,
            object: i.is_multiple_of(2).then(|| format!("group-{i} TrainJob j")),
            field_path: Some(format!("spec.x[{i}]")),
            line: (!i.is_multiple_of(5)).then_some(i + 1),
            column: (!i.is_multiple_of(5)).then_some(3),
            rule_file: "rules/x.yaml".into(),
            rule_line: 7,
            stage: i.is_multiple_of(3).then(|| "admission".to_string()),
            rule_error: i.is_multiple_of(7),
            at_key: false,
        }
    }

    fn window(i: usize) -> Option<Window> {
        (!i.is_multiple_of(4)).then(|| Window {
            first_line: i,
            text: format!("a: {i}\n  b: \"x\"\r\nc: é\n"),
        })
    }

    fn kept(limit: usize, n: usize) -> (Findings, Vec<Stored>) {
        let mut store = Findings::with_limit(limit);
        let mut want = Vec::new();
        for i in 0..n {
            let severity = [Severity::Info, Severity::Warning, Severity::Error][i % 3];
            let f = finding(i, severity);
            // Runs of inputs of several lengths, one input coming back after another.
            let input = [0, 0, 0, 1, 2, 2, 1][i % 7] + 3 * (i / 7);
            store.push_finding(input, &f, window(i).as_ref());
            want.push(Stored {
                input,
                finding: f,
                window: window(i),
            });
        }
        (store, want)
    }

    fn read(store: &Findings) -> Vec<Stored> {
        store
            .iter()
            .collect::<std::io::Result<Vec<_>>>()
            .expect("reads back")
    }

    #[test]
    fn findings_read_back_as_pushed_in_memory() {
        let (store, want) = kept(IN_MEMORY, 50);
        assert!(!store.spilled());
        assert_eq!(read(&store), want);
        assert_eq!(store.len(), 50);
        // One entry per run of an input's findings: four runs in each seven findings, and one.
        assert_eq!(store.inputs.len(), 29);
        assert_eq!(
            [Severity::Info, Severity::Warning, Severity::Error].map(|s| store.count(s)),
            [17, 17, 16]
        );
        assert_eq!(store.at_or_above(Severity::Warning), 33);
        assert_eq!(store.rule_errors(), 8);
    }

    #[test]
    fn findings_past_the_limit_go_to_a_file_and_read_back_in_order() {
        // A limit of a few records: most go to the file, the last stay in memory.
        let (store, want) = kept(1_000, 500);
        assert!(store.spilled());
        assert_eq!(read(&store), want);
        // Read again, and with two iterators interleaved.
        assert_eq!(read(&store), want);
        let (mut a, mut b) = (store.iter(), store.iter());
        for w in &want {
            assert_eq!(a.next().and_then(Result::ok).as_ref(), Some(w));
            assert_eq!(b.next().and_then(Result::ok).as_ref(), Some(w));
        }
        assert!(a.next().is_none() && b.next().is_none());
    }

    /// Each finding reads back at the offset the iterator gave for it, in any order, whether
    /// it went to the file or stayed in memory.
    #[test]
    fn findings_read_back_one_at_a_time_at_their_offsets() {
        for limit in [IN_MEMORY, 1_000, 100_000] {
            let (store, want) = kept(limit, 500);
            let mut iter = store.iter();
            let mut offsets = Vec::new();
            loop {
                let at = iter.offset();
                if iter.next().is_none() {
                    break;
                }
                offsets.push(at);
            }
            assert_eq!(offsets.len(), 500);
            let mut reader = store.reader();
            // In order, backwards, then striding across the file and memory.
            let order: Vec<usize> = (0..500)
                .chain((0..500).rev())
                .chain((0..500).map(|i| i * 137 % 500))
                .collect();
            for i in order {
                let got = reader.read(offsets[i], want[i].input).expect("reads back");
                assert_eq!(got, want[i], "finding {i}, limit {limit}");
            }
        }
    }

    #[test]
    fn an_encoded_finding_keeps_only_its_bytes() {
        for i in [0, 7, 300] {
            let e = Encoded::new(&finding(i, Severity::Warning), window(i).as_ref());
            assert_eq!(e.bytes.capacity(), e.bytes.len());
            assert_eq!(e.bytes.last(), Some(&b'\n'));
        }
    }

    #[test]
    fn no_findings_read_back_as_none() {
        let store = Findings::default();
        assert!(store.is_empty());
        assert_eq!(store.iter().count(), 0);
    }
}
