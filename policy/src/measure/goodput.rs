//! Training goodput: steps, checkpoints and the application start parsed line by line with a
//! LogProfile's goodput patterns; running sums only, so memory does not grow with the log.
//!
//! The log is one measured window: `t_w` runs from its first timestamp to its last (its lines'
//! kubelet times, or its events' own times in a log without them), `t_rm` is
//! the startup (application start to the first step), `t_save` the checkpoint saves; no
//! interruption is visible in a log alone, so `t_ch` and `t_re` are 0.
//!
//! An event on a line with a kubelet timestamp has that time; one on a line without has its
//! `timestamp` capture's. Spans are only measured between times of one of these two clocks
//! ([`GoodputParser::warnings`] names those that were not).

use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::api::GoodputMeasurementStatus;
use super::bandwidth::strip_prefix;
use super::golayout::Undated;
use super::profile::{
    CompiledPattern, CompiledProfile, GoLine, LineCaptures, PatternName, capture,
};

/// Which events [`GoodputParser::feed_part`] reads from a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogPart {
    /// Every event.
    All,
    /// Application start, checkpoints and restores (not training steps).
    Lifecycle,
    /// Training steps only.
    Steps,
}

/// Which clock an event's time was read from. A span is only measured between two times of one
/// clock: the program's own time is often the pod's local time without a zone (read as UTC),
/// or has no year (read as year 0), so beside a kubelet time it is off by the UTC offset or by
/// two thousand years.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Clock {
    /// The kubelet timestamp of the event's line (dated, zoned).
    Kubelet,
    /// The event's `timestamp` capture, on a line without a kubelet timestamp.
    Own,
}

/// An event's time and its clock.
type At = (Timestamp, Clock);

/// The seconds from `from` to `to` when both are of one clock.
fn span(from: At, to: At) -> Option<f64> {
    (from.1 == to.1).then(|| secs(to.0.duration_since(from.0)))
}

/// Streaming goodput parser: [`GoodputParser::feed`] each line, then
/// [`GoodputParser::status`].
#[derive(Debug)]
pub struct GoodputParser<'p> {
    profile: &'p CompiledProfile,
    log_interval: i64,
    warmup_steps: i64,
    first: Option<Timestamp>,
    /// A line with a kubelet time was read: only those times set the window.
    kubelet_times: bool,
    last: Option<Timestamp>,
    app_start: Option<At>,
    need_base: bool,
    warmup_base: Option<i64>,
    steps: u64,
    first_step_ts: Option<At>,
    current_step: i64,
    highest_step: i64,
    timing_sum: f64,
    timing_n: u64,
    gap_sum: f64,
    gap_n: u64,
    prev_non_warmup: Option<(i64, Option<At>)>,
    tflops_sum: f64,
    tflops_n: u64,
    last_step_ts: Option<At>,
    last_non_warmup_step: Option<i64>,
    non_warmup_time: f64,
    warmup_time: f64,
    warmup_seen: bool,
    pending_save: Option<PendingSave>,
    last_checkpoint: Option<Checkpoint>,
    counted_step: Option<i64>,
    save_time: f64,
    /// Spans not measured because their two times were of different clocks.
    mixed_spans: std::collections::BTreeSet<&'static str>,
    /// Checkpoint saves whose save or done line had no time (neither a kubelet timestamp nor a
    /// `timestamp` capture), so their save time could not be measured.
    untimed_saves: u64,
    /// A later step's time was not kept as the last step's: it was of another clock.
    stale_last_step: bool,
    unparsed_times: u64,
    first_unparsed_time: Option<String>,
    /// Own times of a layout without a year (or date): the whole years (days) they wrapped
    /// around, and the last one read.
    wraps: i64,
    last_own: Option<Timestamp>,
}

#[derive(Debug, Clone)]
struct PendingSave {
    ts: Option<At>,
    step: Option<i64>,
    path: Option<String>,
}

#[derive(Debug, Clone)]
struct Checkpoint {
    step: Option<i64>,
    path: Option<String>,
    ts: Option<At>,
    /// Completed by its save line (a captured `saveDuration`); a done line only adds the path.
    from_save: bool,
}

fn int(caps: &LineCaptures<'_>, name: &str) -> Option<i64> {
    capture(caps, name).map(|s| s.parse().unwrap_or(0))
}

fn float(caps: &LineCaptures<'_>, name: &str) -> f64 {
    capture(caps, name)
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|v| v.is_finite())
        .unwrap_or(0.0)
}

fn secs(d: jiff::SignedDuration) -> f64 {
    d.as_secs_f64()
}

fn fmt6(v: f64) -> String {
    format!("{v:.6}")
}

impl<'p> GoodputParser<'p> {
    /// A parser for `profile`.
    ///
    /// # Errors
    /// `LogProfile <name> has no trainingStep pattern`.
    pub fn new(profile: &'p CompiledProfile) -> Result<GoodputParser<'p>, String> {
        if profile.pattern(PatternName::TrainingStep).is_none() {
            return Err(format!(
                "LogProfile {} has no trainingStep pattern",
                profile.name
            ));
        }
        Ok(GoodputParser {
            profile,
            log_interval: profile.spec.log_interval.unwrap_or(0),
            warmup_steps: profile.spec.warmup_steps.unwrap_or(0),
            first: None,
            kubelet_times: false,
            last: None,
            app_start: None,
            need_base: true,
            warmup_base: None,
            steps: 0,
            first_step_ts: None,
            current_step: 0,
            highest_step: 0,
            timing_sum: 0.0,
            timing_n: 0,
            gap_sum: 0.0,
            gap_n: 0,
            prev_non_warmup: None,
            tflops_sum: 0.0,
            tflops_n: 0,
            last_step_ts: None,
            last_non_warmup_step: None,
            non_warmup_time: 0.0,
            warmup_time: 0.0,
            warmup_seen: false,
            pending_save: None,
            last_checkpoint: None,
            counted_step: None,
            save_time: 0.0,
            mixed_spans: std::collections::BTreeSet::new(),
            untimed_saves: 0,
            stale_last_step: false,
            unparsed_times: 0,
            first_unparsed_time: None,
            wraps: 0,
            last_own: None,
        })
    }

    fn pattern(&self, which: PatternName) -> Option<&'p CompiledPattern> {
        self.profile.pattern(which)
    }

    fn seen(&mut self, ts: Option<Timestamp>) {
        if let Some(ts) = ts {
            self.first = Some(self.first.map_or(ts, |f| f.min(ts)));
            self.last = Some(self.last.map_or(ts, |l| l.max(ts)));
        }
    }

    /// The event's time: the kubelet time of its line when it has one (every event on such a
    /// line is on the kubelet's clock), else its `timestamp` capture parsed with the layout.
    fn event_ts(&mut self, caps: &LineCaptures<'_>, line_ts: Option<Timestamp>) -> Option<At> {
        if let Some(ts) = line_ts {
            return Some((ts, Clock::Kubelet));
        }
        let text = capture(caps, "timestamp").filter(|s| !s.is_empty());
        let ts = text.as_ref().and_then(|s| self.profile.layout.parse(s));
        if let Some(text) = text
            && ts.is_none()
        {
            self.unparsed_times += 1;
            if self.first_unparsed_time.is_none() {
                self.first_unparsed_time = Some(nvcre_engine::printable(&text, &[]).into_owned());
            }
        }
        let ts = ts.and_then(|t| self.unwrap_undated(t));
        // The window is the log's own: its lines' kubelet times when they have them; an own
        // time beside them would stretch it by the pod's UTC offset.
        if !self.kubelet_times {
            self.seen(ts);
        }
        ts.map(|t| (t, Clock::Own))
    }

    /// The clock of the window (`t_w`): the kubelet's once a line had a kubelet time.
    fn window_clock(&self) -> Clock {
        if self.kubelet_times {
            Clock::Kubelet
        } else {
            Clock::Own
        }
    }

    /// The last non-warmup step's time, when it is of the window's clock.
    fn last_step(&self) -> Option<At> {
        self.last_step_ts.filter(|t| t.1 == self.window_clock())
    }

    /// An own time of a layout without a year (date) put after the previous one: a time more
    /// than half a year (day) before it is in the next year (day), as a log is written in
    /// order. Without this a log crossing New Year (midnight) read as a year-long window.
    /// `None` only when the shifted time is out of range.
    fn unwrap_undated(&mut self, t: Timestamp) -> Option<Timestamp> {
        let Some(undated) = self.profile.layout.undated() else {
            return Some(t);
        };
        let shift = |t: Timestamp, n: i64| {
            let span = match undated {
                Undated::Year => jiff::Span::new().try_years(n),
                Undated::Day => jiff::Span::new().try_days(n),
            };
            t.to_zoned(TimeZone::UTC)
                .checked_add(span.ok()?)
                .ok()
                .map(|z| z.timestamp())
        };
        let half = match undated {
            Undated::Year => 183.0 * 86_400.0,
            Undated::Day => 43_200.0,
        };
        let mut shifted = shift(t, self.wraps)?;
        if let Some(last) = self.last_own
            && secs(last.duration_since(shifted)) > half
        {
            self.wraps += 1;
            shifted = shift(t, self.wraps)?;
        }
        self.last_own = Some(shifted);
        Some(shifted)
    }

    /// The seconds from `from` to `to`; `None` (and the span named in the warnings) when their
    /// clocks differ.
    fn span(&mut self, what: &'static str, from: At, to: At) -> Option<f64> {
        let s = span(from, to);
        if s.is_none() {
            self.mixed_spans.insert(what);
        }
        s
    }

    /// Parses one log line (plain or kubelet-timestamped).
    pub fn feed(&mut self, line: &[u8]) {
        self.feed_part(line, LogPart::All);
    }

    /// Parses one log line for the events of `part` only: under the `Multi` worker strategy
    /// lifecycle events (application start, checkpoints, restores) come from the first
    /// worker's log and training steps from the last worker's, fed merged by timestamp.
    pub fn feed_part(&mut self, line: &[u8], part: LogPart) {
        let (line_ts, text) = strip_prefix(line);
        // Read as Go reads it once, for every pattern below.
        let text = &GoLine::new(text);
        if line_ts.is_some() && !self.kubelet_times {
            // From here on only the lines' kubelet times set the window; an event's own time
            // seen before this line does not stay in it.
            self.kubelet_times = true;
            self.first = None;
            self.last = None;
        }
        self.seen(line_ts);
        let lifecycle = part != LogPart::Steps;
        if lifecycle
            && let Some(p) = self.pattern(PatternName::ApplicationStart)
            && let Some(caps) = p.captures_in(text)
        {
            let ts = self.event_ts(&caps, line_ts);
            // The first start with a time counts (every rank may print the line); it starts
            // the warmup window.
            if self.app_start.is_none() && ts.is_some() {
                self.app_start = ts;
                self.need_base = true;
            }
        }
        if part != LogPart::Lifecycle
            && let Some(p) = self.pattern(PatternName::TrainingStep)
            && let Some(caps) = p.captures_in(text)
        {
            let ts = self.event_ts(&caps, line_ts);
            self.step(p, &caps, text, ts);
            return;
        }
        if !lifecycle {
            return;
        }
        if let Some(p) = self.pattern(PatternName::CheckpointDone)
            && let Some(caps) = p.captures_in(text)
        {
            let ts = self.event_ts(&caps, line_ts);
            self.checkpoint_done(p, &caps, ts);
            return;
        }
        if let Some(p) = self.pattern(PatternName::CheckpointSave)
            && let Some(caps) = p.captures_in(text)
        {
            let ts = self.event_ts(&caps, line_ts);
            let step = int(&caps, "step");
            let path = capture(&caps, "path").map(|s| s.into_owned());
            if caps.name("saveDuration").is_some() {
                let d = p.seconds("saveDuration", float(&caps, "saveDuration"));
                self.complete(step, path, ts, d, true);
            } else {
                self.pending_save = Some(PendingSave { ts, step, path });
            }
            return;
        }
        if let Some(p) = self.pattern(PatternName::CheckpointRestore)
            && let Some(caps) = p.captures_in(text)
        {
            self.event_ts(&caps, line_ts);
            // A restore starts a new run: warmup counts from its first step again.
            self.need_base = true;
            return;
        }
        // A loaded checkpoint only names the step and path of a restore already seen; alone
        // it starts nothing, so it does not re-arm warmup.
        if let Some(p) = self.pattern(PatternName::CheckpointLoaded)
            && let Some(caps) = p.captures_in(text)
        {
            self.event_ts(&caps, line_ts);
        }
    }

    fn step(
        &mut self,
        p: &CompiledPattern,
        caps: &LineCaptures<'_>,
        text: &GoLine<'_>,
        ts: Option<At>,
    ) {
        let mut global = int(caps, "globalStep").unwrap_or(0);
        let iteration = int(caps, "iteration").unwrap_or(0);
        if global == 0 && iteration > 0 {
            global = iteration;
        }
        let mut timing = p.seconds("stepTiming", float(caps, "stepTiming"));
        let elapsed = p.seconds("elapsedTime", float(caps, "elapsedTime"));
        if timing == 0.0 && elapsed > 0.0 {
            timing = elapsed;
        }
        let tflops = float(caps, "tflops");
        // Lines off the log interval (the first line after a boundary, inflated by startup).
        if self.log_interval > 1 && global % self.log_interval != 0 {
            return;
        }
        let mut warmup = self
            .pattern(PatternName::WarmupStep)
            .is_some_and(|w| w.is_match_in(text));
        if self.warmup_steps > 0 {
            if self.need_base {
                self.warmup_base = Some(global);
                self.need_base = false;
            }
            if let Some(base) = self.warmup_base
                && global - base < self.warmup_steps
            {
                warmup = true;
            }
        }
        self.steps += 1;
        self.current_step = global;
        self.highest_step = self.highest_step.max(global);
        if self.first_step_ts.is_none() {
            self.first_step_ts = ts;
        }
        if tflops > 0.0 {
            self.tflops_sum += tflops;
            self.tflops_n += 1;
        }
        if warmup {
            self.warmup_seen = true;
            self.warmup_time += timing;
            return;
        }
        if timing > 0.0 {
            self.timing_sum += timing;
            self.timing_n += 1;
        }
        if let (Some((prev_step, Some(prev_ts))), Some(ts)) = (self.prev_non_warmup, ts)
            && let Some(gap) = self.span("avgStepTimeSec", prev_ts, ts)
            && gap > 0.0
        {
            self.gap_sum += gap / (global - prev_step).max(1) as f64;
            self.gap_n += 1;
        }
        match self.last_non_warmup_step {
            None => {
                self.non_warmup_time += timing * self.log_interval.max(1) as f64;
                self.last_non_warmup_step = Some(global);
            }
            Some(mark) if global > mark => {
                self.non_warmup_time += timing * (global - mark) as f64;
                self.last_non_warmup_step = Some(global);
            }
            Some(_) => {}
        }
        // The last step is compared with the window's end (stall detection): a time of another
        // clock does not replace one of the window's.
        if let Some(t) = ts {
            if t.1 == self.window_clock() || self.last_step().is_none() {
                self.last_step_ts = Some(t);
            } else {
                self.stale_last_step = true;
            }
        }
        self.prev_non_warmup = Some((global, ts));
    }

    fn checkpoint_done(&mut self, p: &CompiledPattern, caps: &LineCaptures<'_>, ts: Option<At>) {
        let step = int(caps, "step");
        let path = capture(caps, "path").map(|s| s.into_owned());
        if self.pending_save.is_none()
            && let Some(last) = &mut self.last_checkpoint
            && last.from_save
            && step.is_none_or(|s| last.step == Some(s))
        {
            if last.path.is_none() {
                last.path = path;
            }
            return;
        }
        let pending = self.pending_save.take();
        let duration = if caps.name("saveDuration").is_some() {
            p.seconds("saveDuration", float(caps, "saveDuration"))
        } else {
            match (ts, pending.as_ref().map(|s| s.ts)) {
                (Some(done), Some(Some(start))) => self
                    .span("checkpointSaveTimeSec", start, done)
                    .map_or(0.0, |d| d.max(0.0)),
                // A save line was read, but one of the two has no time to measure from.
                (_, Some(_)) => {
                    self.untimed_saves += 1;
                    0.0
                }
                _ => 0.0,
            }
        };
        let step = step.or(pending.as_ref().and_then(|s| s.step));
        let path = path.or(pending.and_then(|s| s.path));
        self.complete(step, path, ts, duration, false);
    }

    fn complete(
        &mut self,
        step: Option<i64>,
        path: Option<String>,
        ts: Option<At>,
        duration: f64,
        from_save: bool,
    ) {
        // Each checkpoint step counts once.
        let new = match (step, self.counted_step) {
            (Some(s), Some(c)) => s > c,
            _ => true,
        };
        if new {
            self.save_time += duration;
            if step.is_some() {
                self.counted_step = step;
            }
        }
        let previous = self.last_checkpoint.take();
        let same_step = previous.as_ref().is_some_and(|c| c.step == step);
        self.last_checkpoint = Some(Checkpoint {
            step: step.or(previous.as_ref().and_then(|c| c.step)),
            // The same checkpoint reported again keeps the path it was saved to.
            path: path.or_else(|| previous.filter(|_| same_step).and_then(|c| c.path)),
            ts,
            from_save,
        });
    }

    /// Warnings about what was read but not measured: spans between an event time of a line with
    /// a kubelet timestamp and one of a line without (different clocks), e.g.
    /// `resumeTimeSec not measured: …`, and checkpoint saves whose lines have no time at all
    /// (`checkpointSaveTimeSec not measured for 1 checkpoint save(s): …`). Empty for a log whose
    /// lines all have a kubelet timestamp.
    pub fn warnings(&self) -> Vec<String> {
        let mut spans = self.mixed_spans.clone();
        if let (Some(a), Some(s)) = (self.app_start, self.first_step_ts)
            && span(a, s).is_none()
        {
            spans.insert("resumeTimeSec");
        }
        if self.last_step_ts.is_some() && self.last_step().is_none() {
            spans.insert("lastStepTimestamp");
        }
        if self.timing_n > 0 {
            // The mean step time is of the step timings; the time gaps were not needed.
            spans.remove("avgStepTimeSec");
        }
        const WHY: &str = "lines with a kubelet timestamp and lines without (the program's own time, often local and zoneless, or without a year); read the log with every line timestamped (kubectl logs --timestamps) or none";
        let mut out: Vec<String> = spans
            .iter()
            .map(|what| format!("{what} not measured: its times are from {WHY}"))
            .collect();
        if self.untimed_saves > 0 {
            out.push(format!(
                "checkpointSaveTimeSec not measured for {} checkpoint save(s): a save or done line has no time (no kubelet timestamp, no timestamp capture of the LogProfile); read the log with kubectl logs --timestamps",
                self.untimed_saves
            ));
        }
        if self.stale_last_step && self.last_step().is_some() {
            out.push(format!(
                "lastStepTimestamp is not the last step's time: the log mixes {WHY}"
            ));
        }
        out
    }

    /// `timestamp` captures (on lines without a kubelet timestamp) that did not parse with the
    /// layout: their events have no time.
    pub fn unparsed_times(&self) -> u64 {
        self.unparsed_times
    }

    /// The first of the [`GoodputParser::unparsed_times`], control characters escaped.
    pub fn first_unparsed_time(&self) -> Option<&str> {
        self.first_unparsed_time.as_deref()
    }

    /// Training steps counted (after the log-interval filter).
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The status of everything fed (see the module docs for the window); `result` is absent
    /// when no training step was parsed.
    pub fn status(&self) -> GoodputMeasurementStatus {
        let t_w = match (self.first, self.last) {
            (Some(f), Some(l)) => secs(l.duration_since(f)).max(0.0),
            _ => 0.0,
        };
        let t_rm = match (self.app_start, self.first_step_ts) {
            (Some(a), Some(s)) => span(a, s).map_or(0.0, |d| d.max(0.0)),
            _ => 0.0,
        };
        let (t_ch, t_re, t_save) = (0.0, 0.0, self.save_time);
        let denominator = t_w - t_re;
        let numerator = t_w - (t_rm + t_ch) - t_re - t_save;
        let ratio = if denominator <= 0.0 || numerator < 0.0 {
            0.0
        } else {
            numerator / denominator
        };
        let avg_step = if self.timing_n > 0 {
            self.timing_sum / self.timing_n as f64
        } else if self.gap_n > 0 {
            self.gap_sum / self.gap_n as f64
        } else {
            0.0
        };
        let ts = |t: Option<Timestamp>| t.map(|t| t.to_string());
        let at = |t: Option<At>| t.map(|(t, _)| t.to_string());
        let measured = self.steps > 0;
        GoodputMeasurementStatus {
            result: measured.then(|| fmt6(ratio)),
            current_step: self.current_step,
            highest_step: self.highest_step,
            training_time_sec: Some(fmt6(t_w)),
            lost_work_time_sec: Some(fmt6(t_ch)),
            reschedule_time_sec: Some(fmt6(t_re)),
            resume_time_sec: Some(fmt6(t_rm)),
            checkpoint_save_time_sec: Some(fmt6(t_save)),
            interruption_count: 0,
            last_checkpoint_step: self
                .last_checkpoint
                .as_ref()
                .and_then(|c| c.step)
                .unwrap_or(0),
            last_checkpoint_time: at(self.last_checkpoint.as_ref().and_then(|c| c.ts)),
            start_time: ts(self.first),
            completion_time: ts(self.last),
            last_step_timestamp: at(self.last_step()),
            avg_step_time_sec: (avg_step > 0.0).then(|| fmt6(avg_step)),
            log_interval: self.profile.spec.log_interval,
            warmup_base_step: self.warmup_base,
            warmup_time_sec: (self.warmup_steps > 0 || self.warmup_seen)
                .then(|| fmt6(self.warmup_time)),
            non_warmup_time_sec: measured.then(|| fmt6(self.non_warmup_time)),
            prior_warmup_time_sec: None,
            prior_non_warmup_time_sec: None,
            last_non_warmup_step: self.last_non_warmup_step.unwrap_or(0),
            avg_tflops_per_gpu: (self.tflops_n > 0)
                .then(|| fmt6(self.tflops_sum / self.tflops_n as f64)),
            application_start_time: at(self.app_start),
            application_stop_time: ts(self.last),
            pending_interruption: None,
            conditions: Vec::new(),
        }
    }

    /// The last checkpoint's path, when one was seen.
    pub fn last_checkpoint_path(&self) -> Option<&str> {
        self.last_checkpoint
            .as_ref()
            .and_then(|c| c.path.as_deref())
    }
}

/// The threshold values of a goodput status: `(goodputRatio, avgTFLOPsPerGPU,
/// avgStepTimeSec)`, each only when positive (0 means unmeasured); a malformed string reads 0.
pub fn goodput_values(s: &GoodputMeasurementStatus) -> (Option<f64>, Option<f64>, Option<f64>) {
    let v = |x: &Option<String>| {
        x.as_deref()
            .and_then(|t| t.trim().parse::<f64>().ok())
            .filter(|v| *v > 0.0)
    };
    (
        v(&s.result),
        v(&s.avg_tflops_per_gpu),
        v(&s.avg_step_time_sec),
    )
}
