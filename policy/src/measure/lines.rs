//! Reading a log line by line in bounded memory, and the kubelet timestamp prefix.

use std::io::BufRead;

use jiff::Timestamp;

/// The longest line kept, in bytes (1 MiB, as the controller's log reader scans): the rest of a
/// longer line is skipped, so one runaway line cannot grow memory.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;

/// Calls `f` with each line of `reader` (without its `\n` or `\r\n`), holding at most
/// [`MAX_LINE_BYTES`] of one line at a time; bytes past that limit are dropped. Bytes need not
/// be UTF-8.
///
/// # Errors
/// The first read error.
pub fn for_each_line(mut reader: impl BufRead, mut f: impl FnMut(&[u8])) -> std::io::Result<()> {
    let mut line: Vec<u8> = Vec::with_capacity(4096);
    loop {
        let buf = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            if !line.is_empty() {
                emit(&mut line, &mut f);
            }
            return Ok(());
        }
        let (chunk, used, end) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..i], i + 1, true),
            None => (buf, buf.len(), false),
        };
        let room = MAX_LINE_BYTES.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        reader.consume(used);
        if end {
            emit(&mut line, &mut f);
        }
    }
}

fn emit(line: &mut Vec<u8>, f: &mut impl FnMut(&[u8])) {
    let text = line.strip_suffix(b"\r").unwrap_or(line);
    f(text);
    line.clear();
}

/// Splits a kubelet-timestamped line (`2026-08-06T14:10:20.811144667-07:00 <output>`, what pod
/// logs read with `timestamps=true` look like) into its RFC 3339 timestamp and the output
/// after the one separating whitespace character. `None` for a line without that prefix (plain
/// program output).
pub fn kubelet_prefix(line: &[u8]) -> Option<(Timestamp, &[u8])> {
    // Shape first (cheap): YYYY-MM-DDTHH:MM:SS, then an optional fraction and a zone.
    let digit = |i: usize| line.get(i).is_some_and(u8::is_ascii_digit);
    let is = |i: usize, c: u8| line.get(i) == Some(&c);
    let shape = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18]
        .iter()
        .all(|i| digit(*i))
        && is(4, b'-')
        && is(7, b'-')
        && is(10, b'T')
        && is(13, b':')
        && is(16, b':');
    if !shape {
        return None;
    }
    let mut i = 19;
    if is(i, b'.') {
        i += 1;
        let start = i;
        while digit(i) {
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    if is(i, b'Z') {
        i += 1;
    } else if (is(i, b'+') || is(i, b'-'))
        && digit(i + 1)
        && digit(i + 2)
        && is(i + 3, b':')
        && digit(i + 4)
        && digit(i + 5)
    {
        i += 6;
    } else {
        return None;
    }
    if !line.get(i).is_some_and(u8::is_ascii_whitespace) {
        return None;
    }
    let stamp = std::str::from_utf8(&line[..i]).ok()?;
    let ts: Timestamp = stamp.parse().ok()?;
    Some((ts, &line[i + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_and_bounded() {
        let mut text = b"a\r\nb\n".to_vec();
        text.extend(std::iter::repeat_n(b'x', MAX_LINE_BYTES + 10));
        text.extend(b"\nlast");
        let mut got = Vec::new();
        for_each_line(std::io::BufReader::with_capacity(7, &text[..]), |l| {
            got.push(l.len())
        })
        .expect("reads");
        assert_eq!(got, vec![1, 1, MAX_LINE_BYTES, 4]);
    }

    #[test]
    fn kubelet_prefixes_with_offsets_and_without_fraction() {
        let (ts, rest) =
            kubelet_prefix(b"2026-08-06T09:30:29.569516911-07:00    536870912  x").expect("prefix");
        assert_eq!(ts.to_string(), "2026-08-06T16:30:29.569516911Z");
        assert_eq!(rest, b"   536870912  x");
        let (ts, rest) = kubelet_prefix(b"2026-09-30T10:01:00.1Z host:1:1").expect("prefix");
        assert_eq!(ts.to_string(), "2026-09-30T10:01:00.1Z");
        assert_eq!(rest, b"host:1:1");
        assert_eq!(
            kubelet_prefix(b"2026-08-06T16:30:31.128034512+05:30 x").map(|p| p.0.to_string()),
            Some("2026-08-06T11:00:31.128034512Z".to_string())
        );
        assert!(kubelet_prefix(b"           8             2     float").is_none());
        assert!(kubelet_prefix(b"2026-08-06T09:30:29").is_none());
        assert!(kubelet_prefix(b"Defaulted container \"node\" out of: node").is_none());
    }
}
