//! NCCL bandwidth: result rows and network transports parsed line by line with a LogProfile's
//! `bandwidthResult` / `networkTransport` patterns, averaged per message size.

use std::collections::{BTreeSet, HashMap};

use jiff::Timestamp;

use super::api::{BandwidthMeasurementStatus, BandwidthResult};
use super::lines::kubelet_prefix;
use super::profile::{CompiledPattern, CompiledProfile, GoLine, PatternName, capture};

/// At most this many distinct message sizes are kept (nccl-tests prints a few dozen); rows of
/// further sizes are counted in [`BandwidthParser::dropped_rows`] and otherwise ignored, so a
/// hostile log cannot grow memory.
pub const MAX_SIZES: usize = 65_536;
/// At most this many distinct transport names are kept.
pub const MAX_TRANSPORTS: usize = 256;

/// One parsed result row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DataPoint {
    /// Message size, bytes.
    pub size_bytes: i64,
    /// Algorithm bandwidth, GB/s.
    pub alg_bw: f64,
    /// Bus bandwidth, GB/s.
    pub bus_bw: f64,
}

#[derive(Debug, Clone, Copy)]
struct Sums {
    size_bytes: i64,
    alg: f64,
    bus: f64,
    n: i64,
}

/// Streaming parser: feed it lines ([`BandwidthParser::feed`]), then read the status
/// ([`BandwidthParser::status`]). Memory is bounded by the distinct sizes and transports.
#[derive(Debug)]
pub struct BandwidthParser<'p> {
    result: &'p CompiledPattern,
    transport: Option<&'p CompiledPattern>,
    sums: Vec<Sums>,
    index: HashMap<i64, usize>,
    transports: BTreeSet<String>,
    /// Transport lines naming a transport past [`MAX_TRANSPORTS`], and the first such name.
    dropped_transports: (u64, Option<String>),
    first: Option<Timestamp>,
    last: Option<Timestamp>,
    rows: u64,
    dropped: u64,
    unread: u64,
    first_unread: Option<String>,
}

/// The line without its kubelet timestamp prefix, and that timestamp.
pub fn strip_prefix(line: &[u8]) -> (Option<Timestamp>, &[u8]) {
    match kubelet_prefix(line) {
        Some((ts, rest)) => (Some(ts), rest),
        None => (None, line),
    }
}

impl<'p> BandwidthParser<'p> {
    /// A parser for `profile`.
    ///
    /// # Errors
    /// `LogProfile <name> has no bandwidthResult pattern`.
    pub fn new(profile: &'p CompiledProfile) -> Result<BandwidthParser<'p>, String> {
        let result = profile
            .pattern(PatternName::BandwidthResult)
            .ok_or_else(|| format!("LogProfile {} has no bandwidthResult pattern", profile.name))?;
        Ok(BandwidthParser {
            result,
            transport: profile.pattern(PatternName::NetworkTransport),
            sums: Vec::new(),
            index: HashMap::new(),
            transports: BTreeSet::new(),
            dropped_transports: (0, None),
            first: None,
            last: None,
            rows: 0,
            dropped: 0,
            unread: 0,
            first_unread: None,
        })
    }

    /// The result row on `line` (kubelet prefix already stripped), if any: `size` as a base-10
    /// integer, `algBW` and `busBW` as finite floats; a row whose numbers do not parse is
    /// skipped, and so is one with a bandwidth out of range (`1e400`, a 310-digit number) or
    /// not a number (`inf`, `NaN`): averaged in, it would make every later average of its size
    /// `inf` and pass any `value >= N` threshold.
    pub fn data_point(&self, line: &[u8]) -> Option<DataPoint> {
        self.row(line)?.ok()
    }

    /// The result row on `line` (prefix stripped): `None` when the `bandwidthResult` pattern
    /// does not match it; an error saying which capture did not parse when it matches but a
    /// number is not one [`BandwidthParser::data_point`] reads, e.g. `busBW "inf" is not a
    /// finite number`.
    pub fn row(&self, line: &[u8]) -> Option<Result<DataPoint, String>> {
        self.row_in(&GoLine::new(line))
    }

    fn row_in(&self, line: &GoLine<'_>) -> Option<Result<DataPoint, String>> {
        let caps = self.result.captures_in(line)?;
        let text = |name| capture(&caps, name).unwrap_or_default();
        // Captured text is untrusted: control characters escaped, a long number shortened.
        let shown = |v: &str| {
            let v = nvcre_engine::printable(v, &[]).into_owned();
            match v.char_indices().nth(24) {
                Some((i, _)) => format!("{:?}", format!("{}…", &v[..i])),
                None => format!("{v:?}"),
            }
        };
        let bandwidth = |name| {
            let v = text(name);
            v.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("{name} {} is not a finite number", shown(&v)))
        };
        let size = text("size");
        let size_bytes = size.parse::<i64>().map_err(|_| {
            format!(
                "size {} is not a whole number of bytes up to 2^63-1",
                shown(&size)
            )
        });
        Some(size_bytes.and_then(|size_bytes| {
            Ok(DataPoint {
                size_bytes,
                alg_bw: bandwidth("algBW")?,
                bus_bw: bandwidth("busBW")?,
            })
        }))
    }

    /// The transport named on `line` (prefix stripped), trimmed; `None` for no match or an
    /// empty name.
    pub fn transport(&self, line: &[u8]) -> Option<String> {
        self.transport_in(&GoLine::new(line))
    }

    fn transport_in(&self, line: &GoLine<'_>) -> Option<String> {
        let caps = self.transport?.captures_in(line)?;
        let name = capture(&caps, "transport")?;
        (!name.is_empty()).then(|| name.into_owned())
    }

    /// Parses one log line (plain or kubelet-timestamped).
    pub fn feed(&mut self, line: &[u8]) {
        let (ts, text) = strip_prefix(line);
        if let Some(ts) = ts {
            self.first.get_or_insert(ts);
            self.last = Some(ts);
        }
        // Read as Go reads it once, for both patterns.
        let text = &GoLine::new(text);
        match self.row_in(text) {
            Some(Ok(p)) => self.add(p),
            Some(Err(why)) => self.unread(why),
            None => self.transport_line(text),
        }
    }

    fn unread(&mut self, why: String) {
        self.unread += 1;
        if self.first_unread.is_none() {
            self.first_unread = Some(why);
        }
    }

    fn transport_line(&mut self, text: &GoLine<'_>) {
        if let Some(t) = self.transport_in(text) {
            if self.transports.len() < MAX_TRANSPORTS || self.transports.contains(&t) {
                self.transports.insert(t);
            } else {
                self.dropped_transports.0 += 1;
                self.dropped_transports.1.get_or_insert(t);
            }
        }
    }

    fn add(&mut self, p: DataPoint) {
        let i = match self.index.get(&p.size_bytes) {
            Some(i) => *i,
            None if self.sums.len() >= MAX_SIZES => {
                self.dropped += 1;
                return;
            }
            None => {
                self.sums.push(Sums {
                    size_bytes: p.size_bytes,
                    alg: 0.0,
                    bus: 0.0,
                    n: 0,
                });
                self.index.insert(p.size_bytes, self.sums.len() - 1);
                self.sums.len() - 1
            }
        };
        if let Some(s) = self.sums.get_mut(i) {
            // A row whose bandwidth, finite itself, would make the sum overflow (`1.7e308`
            // twice) is skipped as one out of range is: an `inf` average passes any threshold.
            let (alg, bus) = (s.alg + p.alg_bw, s.bus + p.bus_bw);
            if !(alg.is_finite() && bus.is_finite()) {
                self.unread(format!(
                    "the sum of the bandwidths of size {} is not a finite number",
                    p.size_bytes
                ));
                return;
            }
            s.alg = alg;
            s.bus = bus;
            s.n += 1;
            self.rows += 1;
        }
    }

    /// Rows aggregated.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Rows the `bandwidthResult` pattern matched but not read: a number that does not parse
    /// (`inf`, `nan`, `5.16.3`, a size past `i64`) or a bandwidth sum out of range.
    pub fn unread_rows(&self) -> u64 {
        self.unread
    }

    /// Why the first of the [`BandwidthParser::unread_rows`] was not read.
    pub fn first_unread(&self) -> Option<&str> {
        self.first_unread.as_deref()
    }

    /// Transport lines ignored because [`MAX_TRANSPORTS`] distinct transports were already kept,
    /// with the first transport they named (escaped as the listed ones are).
    pub fn dropped_transports(&self) -> (u64, Option<&str>) {
        (
            self.dropped_transports.0,
            self.dropped_transports.1.as_deref(),
        )
    }

    /// Rows ignored because [`MAX_SIZES`] distinct sizes were already kept.
    pub fn dropped_rows(&self) -> u64 {
        self.dropped
    }

    /// The status of everything fed: per size (first-seen order) the average of every row,
    /// rounded once to 2 decimals; the transports sorted; `startTime` / `completionTime` the
    /// first and last kubelet timestamps (absent for plain logs). No conditions.
    pub fn status(&self) -> BandwidthMeasurementStatus {
        BandwidthMeasurementStatus {
            results: self
                .sums
                .iter()
                .map(|s| BandwidthResult {
                    size_bytes: s.size_bytes,
                    alg_bw: format!("{:.2}", s.alg / s.n as f64),
                    bus_bw: format!("{:.2}", s.bus / s.n as f64),
                    samples: s.n,
                })
                .collect(),
            transport: self.transports.iter().cloned().collect(),
            start_time: self.first.map(|t| t.to_string()),
            completion_time: self.last.map(|t| t.to_string()),
            conditions: Vec::new(),
        }
    }
}

/// Merges a batch of rows into stored results as a sampling controller does between reads:
/// per size, `newAvg = (oldAvg·oldN + Σ) / (oldN + k)` from the stored 2-decimal string
/// (rounding compounds), new sizes appended in first-seen order.
pub fn merge_results(results: &mut Vec<BandwidthResult>, batch: &[DataPoint]) {
    let mut order: Vec<i64> = Vec::new();
    let mut sums: HashMap<i64, (f64, f64, i64)> = HashMap::new();
    for p in batch {
        let e = sums.entry(p.size_bytes).or_insert_with(|| {
            order.push(p.size_bytes);
            (0.0, 0.0, 0)
        });
        // As the parser does: a row that would make the sum overflow is skipped.
        if (e.0 + p.alg_bw).is_finite() && (e.1 + p.bus_bw).is_finite() {
            e.0 += p.alg_bw;
            e.1 += p.bus_bw;
            e.2 += 1;
        }
    }
    for size in order {
        let Some((alg, bus, k)) = sums.get(&size).copied() else {
            continue;
        };
        if k == 0 {
            continue;
        }
        match results.iter_mut().find(|r| r.size_bytes == size) {
            Some(r) => {
                let n = r.samples;
                let old = |s: &str| s.trim().parse::<f64>().unwrap_or(0.0) * n as f64;
                let (alg_sum, bus_sum) = (old(&r.alg_bw) + alg, old(&r.bus_bw) + bus);
                if !(alg_sum.is_finite() && bus_sum.is_finite()) {
                    continue;
                }
                r.alg_bw = format!("{:.2}", alg_sum / (n + k) as f64);
                r.bus_bw = format!("{:.2}", bus_sum / (n + k) as f64);
                r.samples = n + k;
            }
            None => results.push(BandwidthResult {
                size_bytes: size,
                alg_bw: format!("{:.2}", alg / k as f64),
                bus_bw: format!("{:.2}", bus / k as f64),
                samples: k,
            }),
        }
    }
}

/// Unions `found` into `transport`: trimmed, empty names dropped, sorted, distinct.
pub fn merge_transports(transport: &mut Vec<String>, found: impl IntoIterator<Item = String>) {
    let set: BTreeSet<String> = transport
        .drain(..)
        .chain(found)
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect();
    transport.extend(set);
}

/// The threshold values of a bandwidth status: `(busBandwidthGBps, algBandwidthGBps)`, the
/// maxima over message sizes (not the largest size's row); `None` without results.
pub fn peak_values(status: &BandwidthMeasurementStatus) -> Option<(f64, f64)> {
    let parse = |s: &str| s.trim().parse::<f64>().unwrap_or(0.0);
    let mut out: Option<(f64, f64)> = None;
    for r in &status.results {
        let (b, a) = (parse(&r.bus_bw), parse(&r.alg_bw));
        out = Some(match out {
            None => (b, a),
            Some((ob, oa)) => (ob.max(b), oa.max(a)),
        });
    }
    out
}
