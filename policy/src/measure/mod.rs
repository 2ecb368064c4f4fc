//! Measurements from logs: LogProfiles (rule data) compiled into line parsers, the
//! BandwidthMeasurement and GoodputMeasurement statuses they produce, and thresholds (CEL over
//! `value`) evaluated on them. Pure functions over lines, so the same code serves
//! `nvcre-policy measure` on files and a controller sampling pod logs.
//!
//! - [`LogProfiles::from_rules`] compiles the `LogProfile` documents of a rule set (checked at
//!   load by [`check_document`], which [`crate::contract`] runs); [`CompiledProfile`] is one.
//! - [`BandwidthParser`] / [`GoodputParser`]: feed lines (plain or kubelet-timestamped; see
//!   [`for_each_line`] for bounded reading), read the status.
//! - [`Thresholds`]: compile `spec.thresholds`, evaluate against [`measured_value`].
//! - [`bandwidth_block`] / [`goodput_block`]: the report's text.
//!
//! ```
//! use nvcre_domain::measure::{BandwidthParser, LogProfiles};
//!
//! let rules = nvcre_domain::default_rules()?;
//! let profiles = LogProfiles::from_rules(&rules)?;
//! let mut parser = BandwidthParser::new(profiles.get("nccl-bandwidth")?)?;
//! parser.feed(b"  8589934592    2147483648     float     sum      -1    47535  180.71  338.82      0    47743  179.92  337.35      0");
//! parser.feed(b"rank0:530:530 [0] NCCL INFO Using network IB");
//! let status = parser.status();
//! assert_eq!((status.results[0].alg_bw.as_str(), status.results[0].bus_bw.as_str()), ("180.71", "338.82"));
//! assert_eq!(status.transport, ["IB"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod api;
mod bandwidth;
mod golayout;
mod goodput;
mod lines;
mod profile;
mod text;
mod threshold;

pub use api::{
    BandwidthMeasurementResource, BandwidthMeasurementSpec, BandwidthMeasurementStatus,
    BandwidthResult, EventPattern, GoodputMeasurementResource, GoodputMeasurementSpec,
    GoodputMeasurementStatus, LogPatternSet, LogProfileResource, LogProfileSpec,
    PendingInterruption, TimestampSpec, WorkerStrategySpec,
};
pub use bandwidth::{
    BandwidthParser, DataPoint, MAX_SIZES, MAX_TRANSPORTS, merge_results, merge_transports,
    peak_values, strip_prefix,
};
pub use golayout::{GoLayout, Undated};
pub use goodput::{GoodputParser, LogPart, goodput_values};
pub use lines::{MAX_LINE_BYTES, for_each_line, kubelet_prefix};
pub use profile::{
    CompiledPattern, CompiledProfile, GoLine, LOG_PROFILE_KIND, LineCaptures, LogProfiles,
    PatternName, ProfileProblem, capture, check_document, go_regex, profile_from_value,
};
pub use text::{bandwidth_block, format_size, goodput_block};
pub use threshold::{
    Source, THRESHOLD_KEYS, Threshold, ThresholdKey, ThresholdResult, Thresholds, ViolationReason,
    compile_expression, exit_code, fail_unmeasured, threshold_key, unknown_keys_message,
};

/// The value of threshold key `key` in a measurement's status: `busBandwidthGBps` /
/// `algBandwidthGBps` are the maxima over message sizes of a bandwidth status; `goodputRatio`,
/// `avgTFLOPsPerGPU`, `avgStepTimeSec` come from a goodput status when positive. `None` when
/// the status does not carry it.
pub fn measured_value(status: &Measured, key: &str) -> Option<f64> {
    match (status, key) {
        (Measured::Bandwidth(s), "busBandwidthGBps") => peak_values(s).map(|v| v.0),
        (Measured::Bandwidth(s), "algBandwidthGBps") => peak_values(s).map(|v| v.1),
        (Measured::Goodput(s), "goodputRatio") => goodput_values(s).0,
        (Measured::Goodput(s), "avgTFLOPsPerGPU") => goodput_values(s).1,
        (Measured::Goodput(s), "avgStepTimeSec") => goodput_values(s).2,
        _ => None,
    }
}

/// A measurement's status.
#[derive(Debug, Clone, PartialEq)]
pub enum Measured {
    /// A BandwidthMeasurement status.
    Bandwidth(BandwidthMeasurementStatus),
    /// A GoodputMeasurement status (boxed: it is much larger than a bandwidth status).
    Goodput(Box<GoodputMeasurementStatus>),
}

impl Measured {
    /// The threshold source this status answers for.
    pub fn source(&self) -> Source {
        match self {
            Measured::Bandwidth(_) => Source::Bandwidth,
            Measured::Goodput(_) => Source::Goodput,
        }
    }
}
