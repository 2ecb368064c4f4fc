//! The shipped LogProfiles on the sample logs under `rules/tests/log-profiles/data/`: exact
//! per-size results, transports and goodput values; bad profiles refused at load with their
//! file, line and column; thresholds with their exact messages.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nvcre_domain::measure::{
    BandwidthMeasurementStatus, BandwidthParser, BandwidthResult, GoodputMeasurementStatus,
    GoodputParser, LogProfiles, Measured, Source, Thresholds, bandwidth_block, for_each_line,
    goodput_block, measured_value,
};
use nvcre_domain::{contract, default_rules};
use nvcre_engine::RuleSet;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../rules/tests/log-profiles/data")
        .join(name)
}

fn profiles() -> LogProfiles {
    LogProfiles::from_rules(&default_rules().expect("rules")).expect("profiles")
}

fn bandwidth(profile: &str, log: &str) -> BandwidthMeasurementStatus {
    let profiles = profiles();
    let mut p = BandwidthParser::new(profiles.get(profile).expect("profile")).expect("parser");
    let file = std::fs::File::open(data(log)).expect("fixture");
    for_each_line(std::io::BufReader::new(file), |l| p.feed(l)).expect("reads");
    p.status()
}

fn goodput(profile: &str, log: &str) -> GoodputMeasurementStatus {
    let profiles = profiles();
    let mut p = GoodputParser::new(profiles.get(profile).expect("profile")).expect("parser");
    let file = std::fs::File::open(data(log)).expect("fixture");
    for_each_line(std::io::BufReader::new(file), |l| p.feed(l)).expect("reads");
    p.status()
}

fn rows(s: &BandwidthMeasurementStatus) -> Vec<(i64, &str, &str, i64)> {
    s.results
        .iter()
        .map(|r: &BandwidthResult| {
            (
                r.size_bytes,
                r.alg_bw.as_str(),
                r.bus_bw.as_str(),
                r.samples,
            )
        })
        .collect()
}

#[test]
fn nccl_allreduce_with_offset_kubelet_timestamps() {
    let s = bandwidth("nccl-bandwidth", "nccl-allreduce-2node-pdt.log");
    assert_eq!(
        rows(&s),
        vec![
            (8, "0.00", "0.00", 1),
            (4096, "0.01", "0.01", 1),
            (4194304, "0.02", "0.02", 1),
            (67108864, "0.03", "0.03", 1),
        ]
    );
    assert_eq!(s.transport, ["Socket"]);
    assert_eq!(
        s.start_time.as_deref(),
        Some("2026-08-06T21:10:20.811144667Z")
    );
    assert_eq!(
        s.completion_time.as_deref(),
        Some("2026-08-06T21:11:43.218561534Z")
    );
}

#[test]
fn nccl_loopback_rows_and_utc_rows() {
    let s = bandwidth("nccl-bandwidth", "nccl-loopback-pdt.log");
    assert_eq!(
        rows(&s),
        vec![
            (536870912, "659.07", "0.00", 1),
            (1073741824, "688.95", "0.00", 1),
            (65536, "1.13", "2.18", 1),
        ]
    );
    let s = bandwidth("nccl-bandwidth", "nccl-utc.log");
    assert_eq!(
        rows(&s),
        vec![(8, "0.00", "0.00", 1), (65536, "1.13", "2.18", 1)]
    );
}

#[test]
fn nccl_h100_peak_values_and_report_block() {
    let s = bandwidth("nccl-bandwidth", "nccl-h100-16rank.log");
    assert_eq!(
        rows(&s),
        vec![
            (8, "0.00", "0.00", 1),
            (1048576, "5.16", "9.68", 1),
            (134217728, "81.24", "152.32", 1),
            (1073741824, "158.86", "297.86", 1),
            (2147483648, "169.81", "318.40", 1),
            (8589934592, "180.71", "338.82", 1),
        ]
    );
    let m = Measured::Bandwidth(s.clone());
    assert_eq!(measured_value(&m, "busBandwidthGBps"), Some(338.82));
    assert_eq!(measured_value(&m, "algBandwidthGBps"), Some(180.71));
    assert_eq!(measured_value(&m, "goodputRatio"), None);
    assert_eq!(
        bandwidth_block(&s),
        "Bandwidth:\n    Size       AlgBW        BusBW        Samples\n    8 B        0.00 GB/s    0.00 GB/s    1\n    1 MB       5.16 GB/s    9.68 GB/s    1\n    128 MB     81.24 GB/s   152.32 GB/s  1\n    1 GB       158.86 GB/s  297.86 GB/s  1\n    2 GB       169.81 GB/s  318.40 GB/s  1\n    8 GB       180.71 GB/s  338.82 GB/s  1\n"
    );
}

#[test]
fn rows_of_one_size_are_averaged_once() {
    let profiles = profiles();
    let mut p =
        BandwidthParser::new(profiles.get("nccl-bandwidth").expect("profile")).expect("parser");
    for bw in ["1.005", "1.005", "2.001"] {
        p.feed(format!("  1024  256 float sum -1 10.0 {bw} {bw} 0").as_bytes());
    }
    assert_eq!(rows(&p.status()), vec![(1024, "1.34", "1.34", 3)]);
}

#[test]
fn nccl_transports() {
    let s = bandwidth("nccl-bandwidth", "nccl-transports.log");
    assert_eq!(s.transport, ["AWS Libfabric", "IB", "Socket"]);
    assert!(s.results.is_empty());
    assert_eq!(
        bandwidth_block(&s),
        "Bandwidth: no data\nTransport: AWS Libfabric, IB, Socket\n"
    );
}

#[test]
fn megatron_steps_without_microseconds() {
    let s = goodput("megatron-training", "megatron-n5-training-steps.log");
    assert_eq!((s.current_step, s.highest_step), (30, 30));
    assert_eq!(s.avg_step_time_sec.as_deref(), Some("2.750900"));
    assert_eq!(s.avg_tflops_per_gpu.as_deref(), Some("442.633333"));
    assert_eq!(
        s.last_step_timestamp.as_deref(),
        Some("2026-03-25T07:30:30Z")
    );
    assert_eq!(s.start_time.as_deref(), Some("2026-03-25T07:30:05Z"));
    assert_eq!(s.training_time_sec.as_deref(), Some("25.000000"));
    assert_eq!(s.resume_time_sec.as_deref(), Some("0.000000"));
    assert_eq!(s.result.as_deref(), Some("1.000000"));
    assert_eq!(
        goodput_block(&s),
        "Goodput:\n    Avg Runtime Goodput:  1.00 (100%)\n    Avg TFLOPs/GPU:  442.6\n    Avg Step Time:  2.75s\n"
    );
}

#[test]
fn megatron_full_sequence_startup_and_checkpoint() {
    let s = goodput("megatron-training", "megatron-n6-full-sequence.log");
    assert_eq!(
        s.application_start_time.as_deref(),
        Some("2026-02-05T16:01:40.326255Z")
    );
    assert_eq!(s.current_step, 1);
    assert_eq!(s.avg_step_time_sec.as_deref(), Some("132.563100"));
    assert_eq!(s.avg_tflops_per_gpu.as_deref(), Some("138.500000"));
    assert_eq!(s.last_checkpoint_step, 100);
    assert_eq!(
        s.last_checkpoint_time.as_deref(),
        Some("2026-02-05T17:13:37.825367Z")
    );
    assert_eq!(s.checkpoint_save_time_sec.as_deref(), Some("361.446020"));
    assert_eq!(s.resume_time_sec.as_deref(), Some("132.563344"));
    assert_eq!(s.training_time_sec.as_deref(), Some("4317.499112"));
    assert_eq!(s.result.as_deref(), Some("0.885580"));
}

#[test]
fn megatron_public_lines_without_kubelet_prefix() {
    let s = goodput("megatron-training", "megatron-issue-756.log");
    assert_eq!((s.current_step, s.highest_step), (44, 44));
    assert_eq!(s.avg_step_time_sec.as_deref(), Some("5.489350"));
    assert_eq!(s.avg_tflops_per_gpu.as_deref(), Some("237.900000"));
    assert_eq!(s.training_time_sec.as_deref(), Some("5.000000"));
}

#[test]
fn nemo_steps_with_scientific_tflops() {
    let s = goodput("nemo-training", "nemo-n4-training-steps.log");
    assert_eq!((s.current_step, s.highest_step), (101, 101));
    assert_eq!(s.avg_step_time_sec.as_deref(), Some("1.167000"));
    assert_eq!(s.avg_tflops_per_gpu.as_deref(), Some("590.635000"));
    assert_eq!(
        s.last_step_timestamp.as_deref(),
        Some("2026-01-22T18:00:06.5Z")
    );
    assert_eq!(s.training_time_sec.as_deref(), Some("1.376543"));
    let m = Measured::Goodput(Box::new(s));
    assert_eq!(measured_value(&m, "goodputRatio"), Some(1.0));
    assert_eq!(measured_value(&m, "avgTFLOPsPerGPU"), Some(590.635));
}

fn load(files: &[(&str, &str)]) -> Result<(), Vec<String>> {
    let sources: Vec<_> = files
        .iter()
        .map(|(n, t)| nvcre_engine::Source::new(*n, *t))
        .collect();
    RuleSet::load(&sources, Some(&contract().expect("contract")))
        .map(|_| ())
        .map_err(|e| e.errors.iter().map(ToString::to_string).collect())
}

const HEAD: &str = "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: LogProfile\nmetadata: {name: bad}\nspec:\n  timestamp: {layout: '2006-01-02 15:04:05'}\n  patterns:\n";

#[test]
fn a_bad_profile_refuses_the_set_with_file_line_and_column() {
    let text = format!(
        "{HEAD}    trainingStep:\n      regex: '(?P<bad[regex'\n    applicationStart:\n      regex: 'started'\n      example: 'this line does not match'\n    bandwidthResult:\n      regex: '(?P<size>\\d+) (?P<algBW>[\\d.]+)'\n    networkTransport:\n      regex: 'Using network (.+)'\n"
    );
    assert_eq!(
        load(&[("rules/measure/bad.yaml", &text)]),
        Err(vec![
            "rule pack error: rules/measure/bad.yaml:8:14: LogProfile \"bad\": pattern trainingStep: invalid regex: error parsing regexp: invalid named capture: `(?P<bad[regex`".to_string(),
            "rule pack error: rules/measure/bad.yaml:11:16: LogProfile \"bad\": pattern applicationStart: example does not match regex\n  regex:   started\n  example: this line does not match".to_string(),
            "rule pack error: rules/measure/bad.yaml:13:14: LogProfile \"bad\": bandwidthResult regex must have named groups: size, algBW, busBW".to_string(),
            "rule pack error: rules/measure/bad.yaml:15:14: LogProfile \"bad\": networkTransport regex must have named group: transport".to_string(),
        ])
    );
}

#[test]
fn the_example_is_checked_before_the_groups_and_group_names_in_go_words() {
    let text = format!(
        "{HEAD}    trainingStep:\n      regex: '^WILL_NOT_MATCH$'\n      example: 'this line does not match'\n    applicationStart:\n      regex: 'start (?P<bad-name>x)'\n    checkpointSave:\n      regex: 'save (?P<>x)'\n"
    );
    assert_eq!(
        load(&[("p.yaml", &text)]),
        Err(vec![
            "rule pack error: p.yaml:9:16: LogProfile \"bad\": pattern trainingStep: example does not match regex\n  regex:   ^WILL_NOT_MATCH$\n  example: this line does not match".to_string(),
            "rule pack error: p.yaml:11:14: LogProfile \"bad\": pattern applicationStart: invalid regex: error parsing regexp: invalid named capture: `(?P<bad-name>`".to_string(),
            "rule pack error: p.yaml:13:14: LogProfile \"bad\": pattern checkpointSave: invalid regex: error parsing regexp: invalid named capture: `(?P<>`".to_string(),
        ])
    );
}

#[test]
fn units_groups_layouts_and_unknown_keys_are_checked() {
    let text = "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: LogProfile\nmetadata: {name: bad}\nspec:\n  timestamp: {layout: 'Jan 2 15:04:05 MST 2006'}\n  patterns:\n    trainingStep:\n      regex: 'step (?P<iteration>\\d+) took (?P<stepTimming>[\\d.]+)'\n    checkpointSave:\n      regex: 'save (?P<step>\\d+)'\n      units: {saveDuration: sec}\n";
    assert_eq!(
        load(&[("p.yaml", text)]),
        Err(vec![
            "rule pack error: p.yaml:5:23: LogProfile \"bad\": timestamp layout \"Jan 2 15:04:05 MST 2006\": the MST element (a zone abbreviation) is not supported; use an offset such as -07:00".to_string(),
            "rule pack error: p.yaml:8:14: LogProfile \"bad\": pattern trainingStep: unknown named group \"stepTimming\"; known groups: timestamp, globalStep, iteration, epoch, stepTiming, loss, tflops, elapsedTime".to_string(),
            "rule pack error: p.yaml:11:29: LogProfile \"bad\": pattern checkpointSave: units.saveDuration: unknown unit \"sec\"; known units: s, ms, us".to_string(),
        ])
    );
    let text = format!("{HEAD}    warmupStep: {{regex: warm, exmple: warm}}\n");
    assert_eq!(
        load(&[("p.yaml", &text)]),
        Err(vec![
            "rule pack error: p.yaml:7:39: LogProfile \"bad\": spec.patterns.warmupStep.exmple: unknown field `exmple`, expected one of `regex`, `example`, `units`".to_string(),
        ])
    );
    // A duplicate profile name, and a LogProfile without the contract's kinds.
    let ok = format!("{HEAD}    warmupStep: {{regex: warm}}\n");
    assert_eq!(
        load(&[("a.yaml", &ok), ("b.yaml", &ok)]),
        Err(vec![
            "rule pack error: b.yaml:3:18: duplicate LogProfile name \"bad\" (first defined at a.yaml:3:18)".to_string()
        ])
    );
    assert_eq!(
        RuleSet::load(&[nvcre_engine::Source::new("a.yaml", ok)], None)
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Err(
            "rule pack error: a.yaml:2:7: kind must be RulePack or Table, got \"LogProfile\""
                .to_string()
        )
    );
}

#[test]
fn go_regex_classes_are_ascii() {
    let re = nvcre_domain::measure::go_regex(r"^\d+\s\w+$").expect("compiles");
    assert!(re.is_match(b"42 abc"));
    // Arabic-Indic digits are \d in Rust's Unicode mode, not in Go.
    assert!(!re.is_match("٤٢ abc".as_bytes()));
    assert!(!re.is_match("42\u{2003}abc".as_bytes()));
}

#[test]
fn log_profile_regexes_are_read_as_go_reads_them() {
    let go = |r: &str| nvcre_domain::measure::go_regex(r).map(|_| ());
    // Go-valid regexes the regex crate's dialect refused.
    for r in [
        r"step \Q(x)\E (?P<iteration>\d+)",
        r"ste{,3}p",
        r"\pL",
        r"\p{Greek}",
        r"\PL",
        r"[\p{L}]",
        r"(?<iteration>\d+)",
    ] {
        assert_eq!(go(r), Ok(()), "{r}");
    }
    // Go-invalid regexes it accepted, refused in Go's words.
    for (r, why) in [
        (r"\d{1001}", "invalid repeat count: `{1001}`"),
        (r"a++", "invalid nested repetition operator: `++`"),
        (r"a**", "invalid nested repetition operator: `**`"),
        (r"a*+", "invalid nested repetition operator: `*+`"),
        (r"x{2}{3}", "invalid nested repetition operator: `{2}{3}`"),
        (r"\u0041", "invalid escape sequence: `\\u`"),
        (r"\U00000041", "invalid escape sequence: `\\U`"),
        (r"(?P<a>x", "missing closing ): `(?P<a>x`"),
    ] {
        assert_eq!(go(r), Err(format!("error parsing regexp: {why}")), "{r}");
    }
    let re =
        nvcre_domain::measure::go_regex(r"^step \Q(x)\E (?P<n>\d+) ste{,3}p \pL$").expect("go");
    assert!(re.is_match("step (x) 12 ste{,3}p é".as_bytes()));
    // At load, in the profile's message shape.
    let text = format!(
        "{HEAD}    trainingStep:\n      regex: 'step (?P<iteration>\\d{{1001}})'\n    bandwidthResult:\n      regex: '(?P<size>\\d+)++'\n"
    );
    assert_eq!(
        load(&[("p.yaml", &text)]),
        Err(vec![
            "rule pack error: p.yaml:8:14: LogProfile \"bad\": pattern trainingStep: invalid regex: error parsing regexp: invalid repeat count: `{1001}`".to_string(),
            "rule pack error: p.yaml:10:14: LogProfile \"bad\": compiling bandwidthResult regex: error parsing regexp: invalid nested repetition operator: `++`".to_string(),
        ])
    );
}

#[test]
fn a_line_that_is_not_utf8_is_read_as_go_reads_it() {
    let profile = "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: LogProfile\nmetadata: {name: p}\nspec:\n  timestamp: {layout: '2006-01-02T15:04:05Z'}\n  patterns:\n    trainingStep:\n      regex: '^\\[(?P<timestamp>[^\\]]+)\\] .*step (?P<globalStep>\\d+) (?P<iteration>.) took (?P<stepTiming>[\\d.]+)s'\n";
    let rules = RuleSet::load(
        &[nvcre_engine::Source::new("p.yaml", profile)],
        Some(&contract().expect("contract")),
    )
    .expect("loads");
    let profiles = LogProfiles::from_rules(&rules).expect("compiles");
    let pattern = profiles
        .get("p")
        .expect("profile")
        .pattern(nvcre_domain::measure::PatternName::TrainingStep)
        .expect("pattern");
    // A stray byte before the step, and one where `.` reads a character: Go reads each as
    // U+FFFD, so the line matches and the byte is one character.
    let line = b"[2026-01-01T00:00:01Z] \xff\xfe progress step 7 \x80 took 1.5s";
    let caps = pattern.captures(line).expect("matches");
    let read = nvcre_domain::measure::GoLine::new(line);
    assert!(pattern.is_match_in(&read) && pattern.captures_in(&read).is_some());
    let text = |n| nvcre_domain::measure::capture(&caps, n).map(|s| s.into_owned());
    assert_eq!(text("globalStep").as_deref(), Some("7"));
    assert_eq!(text("iteration").as_deref(), Some("\u{FFFD}"));
    assert_eq!(text("stepTiming").as_deref(), Some("1.5"));
    // `.` is one character, as in Go, not one byte.
    assert!(pattern.is_match("[t] step 7 \u{e9} took 1s".as_bytes()));
    assert!(!pattern.is_match("[t] step 7 \u{e9}\u{e9} took 1s".as_bytes()));
}

fn thresholds(pairs: &[(&str, &str)]) -> Result<Thresholds, Vec<String>> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Thresholds::compile(&map)
}

#[test]
fn threshold_messages() {
    let t = thresholds(&[
        ("busBandwidthGBps", "value >= 400"),
        ("algBandwidthGBps", "value > 100.5"),
    ])
    .expect("compiles");
    let results = t.evaluate(Source::Bandwidth, |k| match k {
        "busBandwidthGBps" => Some(350.0),
        _ => Some(180.71),
    });
    let messages: Vec<_> = results
        .iter()
        .map(|r| (r.key.as_str(), r.passed, r.message.clone()))
        .collect();
    assert_eq!(
        messages,
        vec![
            ("algBandwidthGBps", true, None),
            (
                "busBandwidthGBps",
                false,
                Some("Threshold \"busBandwidthGBps\" violated: measured 350.0000, expression: value >= 400".to_string())
            ),
        ]
    );
    assert!(t.evaluate(Source::Goodput, |_| None).is_empty());
    let unmeasured = t.evaluate(Source::Bandwidth, |_| None);
    assert_eq!(
        unmeasured[0].message.as_deref(),
        Some(
            "Threshold \"algBandwidthGBps\": no measured value (Algorithm bandwidth (from BandwidthMeasurement))"
        )
    );
    assert_eq!(
        thresholds(&[("busBandwidthGBps", "value + 1.0"), ("avgTFLOPSPerGPU", "value > 1"), ("zeta", "true"), ("goodputRatio", "ratio > 1"), ("avgStepTimeSec", "value <")]).map(|_| ()),
        Err(vec![
            "unknown threshold key(s) [avgTFLOPSPerGPU, zeta]; valid keys: [busBandwidthGBps, algBandwidthGBps, goodputRatio, avgTFLOPsPerGPU, avgStepTimeSec]".to_string(),
            "Threshold \"avgStepTimeSec\": compile threshold expression \"value <\": Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER} (expression column 8)".to_string(),
            "Threshold \"busBandwidthGBps\": compile threshold expression \"value + 1.0\": expression must return bool, got double".to_string(),
            "Threshold \"goodputRatio\": compile threshold expression \"ratio > 1\": undeclared reference to \"ratio\" (only `value` is bound)".to_string(),
        ])
    );
    // Type errors are compile errors: tried with a few values of `value`, before measuring.
    let refused = |expr: &str| thresholds(&[("busBandwidthGBps", expr)]).map(|_| ());
    // Standard CEL: a macro's own variable and a type name are not names to bind.
    assert_eq!(refused("[300.0, 350.0].exists(t, value >= t)"), Ok(()));
    assert_eq!(refused("type(value) == double && value > 0.0"), Ok(()));
    let compile = |expr: &str, why: &str| {
        Err(vec![format!(
            "Threshold \"busBandwidthGBps\": compile threshold expression \"{expr}\": {why}"
        )])
    };
    assert_eq!(
        refused("value >= '330'"),
        compile(
            "value >= '330'",
            "operator '>=' does not take double and string"
        )
    );
    // `||` short-circuits at 1e12, not at 0.
    assert_eq!(
        refused("value > 1 || 'x'"),
        compile(
            "value > 1 || 'x'",
            "operator '||' does not take bool and string"
        )
    );
    assert_eq!(
        refused("value + 1"),
        compile(
            "value + 1",
            "operator '+' does not take 0.0 (double) and 1 (int)"
        )
    );
    // A bool at 0 and a double at 1.
    assert_eq!(
        refused("value > 0.5 ? value : false"),
        compile(
            "value > 0.5 ? value : false",
            "expression must return bool, got double"
        )
    );
    // An error that depends on the value is left to the evaluation.
    assert_eq!(refused("1 / 0 == 1"), Ok(()));
    // Runtime failures are violations (fail closed).
    let t = thresholds(&[("goodputRatio", "value > 2e12 ? value : false")])
        .expect("a bool at every trial value");
    let r = t.evaluate(Source::Goodput, |_| Some(3e12));
    assert_eq!(
        r[0].message.as_deref(),
        Some(
            "Threshold \"goodputRatio\": threshold expression \"value > 2e12 ? value : false\" returned double, expected bool"
        )
    );
}

#[test]
fn warmup_steps_log_interval_and_checkpoint_durations() {
    let profile = "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: LogProfile\nmetadata: {name: steps}\nspec:\n  timestamp: {layout: '2006-01-02T15:04:05Z'}\n  warmupSteps: 20\n  logInterval: 10\n  patterns:\n    trainingStep:\n      regex: 'step (?P<globalStep>\\d+) took (?P<stepTiming>[\\d.]+)ms(?: tflops (?P<tflops>[\\d.]+))?'\n      units: {stepTiming: ms}\n    applicationStart: {regex: 'started'}\n    checkpointSave: {regex: 'saved (?P<step>\\d+) in (?P<saveDuration>[\\d.]+)s'}\n    checkpointDone: {regex: 'checkpoint (?P<step>\\d+) at (?P<path>\\S+)'}\n    checkpointRestore: {regex: 'restoring'}\n";
    let rules = RuleSet::load(
        &[nvcre_engine::Source::new("p.yaml", profile)],
        Some(&contract().expect("contract")),
    )
    .expect("loads");
    let profiles = LogProfiles::from_rules(&rules).expect("compiles");
    let mut p = GoodputParser::new(profiles.get("steps").expect("profile")).expect("parser");
    let log = "\
2026-01-01T00:00:00Z started
2026-01-01T00:00:00Z started
2026-01-01T00:00:10Z step 10 took 3000ms tflops 50
2026-01-01T00:00:11Z step 15 took 1000ms
2026-01-01T00:00:20Z step 20 took 1000ms tflops 100
2026-01-01T00:00:30Z step 30 took 1000ms tflops 150
2026-01-01T00:00:40Z step 40 took 2000ms
2026-01-01T00:00:45Z saved 40 in 4.5s
2026-01-01T00:00:46Z checkpoint 40 at /ckpt/40
2026-01-01T00:00:47Z saved 40 in 4.5s
2026-01-01T00:00:50Z restoring
2026-01-01T00:00:55Z step 40 took 1000ms
2026-01-01T00:00:60Z bad time
2026-01-01T00:01:00Z step 50 took 1000ms
2026-01-01T00:01:40Z step 60 took 1000ms
";
    for line in log.lines() {
        p.feed(line.as_bytes());
    }
    assert_eq!(p.last_checkpoint_path(), Some("/ckpt/40"));
    let s = p.status();
    // Warmup: 10 and 20 (base 10), then 40 and 50 after the restore (base 40); 15 is off
    // the log interval.
    assert_eq!(s.warmup_base_step, Some(40));
    assert_eq!(s.warmup_time_sec.as_deref(), Some("6.000000"));
    assert_eq!(s.avg_step_time_sec.as_deref(), Some("1.333333"));
    assert_eq!(s.non_warmup_time_sec.as_deref(), Some("50.000000"));
    assert_eq!(s.last_non_warmup_step, 60);
    assert_eq!(s.avg_tflops_per_gpu.as_deref(), Some("100.000000"));
    assert_eq!(s.checkpoint_save_time_sec.as_deref(), Some("4.500000"));
    assert_eq!(s.last_checkpoint_step, 40);
    assert_eq!(s.resume_time_sec.as_deref(), Some("10.000000"));
    assert_eq!(s.training_time_sec.as_deref(), Some("100.000000"));
    assert_eq!(s.result.as_deref(), Some("0.855000"));
    assert_eq!((s.current_step, s.highest_step), (60, 60));
    assert_eq!(
        s.last_step_timestamp.as_deref(),
        Some("2026-01-01T00:01:40Z")
    );
}

#[test]
fn a_loaded_checkpoint_alone_does_not_re_arm_warmup() {
    let profile = "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: LogProfile\nmetadata: {name: p}\nspec:\n  timestamp: {layout: '2006-01-02T15:04:05Z'}\n  warmupSteps: 2\n  logInterval: 10\n  patterns:\n    trainingStep:\n      regex: 'step (?P<globalStep>\\d+) took (?P<stepTiming>[\\d.]+)s'\n    checkpointRestore: {regex: 'restoring from'}\n    checkpointLoaded: {regex: 'loaded checkpoint (?P<path>\\S+) at step (?P<step>\\d+)'}\n";
    let log = "\
2026-01-01T00:00:10Z step 10 took 1s
2026-01-01T00:00:20Z step 20 took 1s
2026-01-01T00:00:30Z step 30 took 1s
2026-01-01T00:00:31Z loaded checkpoint /ck2 at step 20
2026-01-01T00:00:40Z step 40 took 1s
2026-01-01T00:00:50Z step 50 took 1s
";
    // Warmup: 10 and 11 would be warmup from base 10 (only 10 is on the interval); the loaded
    // line starts no new run, so 40 is not a new base.
    let (s, _) = goodput_with(profile, log);
    assert_eq!(s.warmup_base_step, Some(10));
    assert_eq!(s.warmup_time_sec.as_deref(), Some("1.000000"));
    // A restore does start one: 40 becomes the base.
    let restored = log.replace("loaded checkpoint /ck2 at step 20", "restoring from /ck2");
    let (s, _) = goodput_with(profile, &restored);
    assert_eq!(s.warmup_base_step, Some(40));
    assert_eq!(s.warmup_time_sec.as_deref(), Some("2.000000"));
}

/// The goodput status and warnings of `log` read with the one LogProfile `profile` (YAML).
fn goodput_with(profile: &str, log: &str) -> (GoodputMeasurementStatus, Vec<String>) {
    let rules = RuleSet::load(
        &[nvcre_engine::Source::new("p.yaml", profile)],
        Some(&contract().expect("contract")),
    )
    .expect("loads");
    let profiles = LogProfiles::from_rules(&rules).expect("compiles");
    let mut p = GoodputParser::new(profiles.get("p").expect("profile")).expect("parser");
    for line in log.lines() {
        p.feed(line.as_bytes());
    }
    (p.status(), p.warnings())
}

/// Megatron lines as `kubectl logs --timestamps` prints them from a pod whose local time is
/// `local` hours:minutes ahead of UTC (the bracketed time is the pod's, without a zone).
fn megatron_in_zone(local: &str) -> String {
    let step = |kubelet: &str, own: &str, it: u32| {
        format!(
            "2026-03-25T07:30:{kubelet}.000000000Z  [2026-03-25 {local}:{own}] iteration       {it}/     100 | consumed samples:          360 | elapsed time per iteration (ms): 1000.0 | throughput per GPU (TFLOP/s/GPU): 100.0 | learning rate: 6.000000E-04 | global batch size:    36 | lm loss: 9.751967E+00 |\n"
        )
    };
    format!(
        "2026-03-25T07:30:00.000000000Z using world size: 16, data-parallel size: 8, context-parallel size: 1, hierarchical context-parallel sizes: None, tensor-model-parallel size: 2, pipeline-model-parallel size: 1\n{}{}{}",
        step("07", "07", 10),
        step("17", "17", 20),
        step("27", "27", 30)
    )
}

#[test]
fn a_line_with_a_kubelet_time_puts_every_event_on_the_kubelet_clock() {
    // UTC, +05:30 and -07:00 pods: the same log, the same goodput.
    for local in ["07:30", "13:00", "00:30"] {
        let profiles = profiles();
        let mut p = GoodputParser::new(profiles.get("megatron-training").expect("profile"))
            .expect("parser");
        for line in megatron_in_zone(local).lines() {
            p.feed(line.as_bytes());
        }
        let s = p.status();
        assert_eq!(s.result.as_deref(), Some("0.740741"), "{local}");
        assert_eq!(s.resume_time_sec.as_deref(), Some("7.000000"), "{local}");
        assert_eq!(s.training_time_sec.as_deref(), Some("27.000000"), "{local}");
        assert_eq!(
            s.last_step_timestamp.as_deref(),
            Some("2026-03-25T07:30:27Z"),
            "{local}"
        );
        assert_eq!(s.completion_time.as_deref(), Some("2026-03-25T07:30:27Z"));
        assert_eq!(p.warnings(), Vec::<String>::new());
    }
}

const CLOCKS: &str = "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: LogProfile\nmetadata: {name: p}\nspec:\n  timestamp: {layout: '2006-01-02 15:04:05'}\n  patterns:\n    trainingStep: {regex: '\\[(?P<timestamp>[^\\]]+)\\] step (?P<globalStep>\\d+)'}\n    applicationStart: {regex: '\\[(?P<timestamp>[^\\]]+)\\] start'}\n    checkpointSave: {regex: '\\[(?P<timestamp>[^\\]]+)\\] saving (?P<step>\\d+)'}\n    checkpointDone: {regex: '\\[(?P<timestamp>[^\\]]+)\\] saved (?P<step>\\d+)'}\n";

#[test]
fn spans_between_the_two_clocks_are_not_measured_and_warned_about() {
    // Start and save on lines without a kubelet time (the pod's +05:30 local time), steps and
    // the done line with one: neither resume time nor save time subtracts across clocks.
    let log = "\
[2026-03-25 13:00:00] start
2026-03-25T07:30:07Z [2026-03-25 13:00:07] step 10
[2026-03-25 13:00:10] saving 10
2026-03-25T07:30:12Z [2026-03-25 13:00:12] saved 10
2026-03-25T07:30:17Z [2026-03-25 13:00:17] step 20
";
    let (s, warnings) = goodput_with(CLOCKS, log);
    assert_eq!(s.resume_time_sec.as_deref(), Some("0.000000"));
    assert_eq!(s.checkpoint_save_time_sec.as_deref(), Some("0.000000"));
    assert_eq!(s.training_time_sec.as_deref(), Some("10.000000"));
    assert_eq!(s.start_time.as_deref(), Some("2026-03-25T07:30:07Z"));
    assert_eq!(s.result.as_deref(), Some("1.000000"));
    assert_eq!(
        warnings,
        [
            "checkpointSaveTimeSec not measured: its times are from lines with a kubelet timestamp and lines without (the program's own time, often local and zoneless, or without a year); read the log with every line timestamped (kubectl logs --timestamps) or none",
            "resumeTimeSec not measured: its times are from lines with a kubelet timestamp and lines without (the program's own time, often local and zoneless, or without a year); read the log with every line timestamped (kubectl logs --timestamps) or none",
        ]
    );
    // All on the program's clock: measured, no warning.
    let plain: String = log
        .lines()
        .map(|l| l.trim_start_matches(|c: char| c != '[').to_string() + "\n")
        .collect();
    let (s, warnings) = goodput_with(CLOCKS, &plain);
    assert_eq!(s.resume_time_sec.as_deref(), Some("7.000000"));
    assert_eq!(s.checkpoint_save_time_sec.as_deref(), Some("2.000000"));
    assert_eq!(s.training_time_sec.as_deref(), Some("17.000000"));
    assert_eq!(s.result.as_deref(), Some("0.470588"));
    assert_eq!(warnings, Vec::<String>::new());
}

#[test]
fn python_logging_comma_fractions_are_read_by_layouts_with_and_without_a_fraction() {
    let log = "\
2026-03-25 07:30:00,000 - INFO - Starting training
2026-03-25 07:30:05,500 - INFO - step 1 | loss 2.5 | step_time 1.25s
2026-03-25 07:30:06,750 - INFO - step 2 | loss 2.4 | step_time 1.25s
2026-03-25 07:30:08,000 - INFO - step 3 | loss 2.3 | step_time 1.25s
";
    for layout in ["2006-01-02 15:04:05,000", "2006-01-02 15:04:05"] {
        let profile = format!(
            "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: LogProfile\nmetadata: {{name: p}}\nspec:\n  timestamp: {{layout: '{layout}'}}\n  patterns:\n    trainingStep: {{regex: '^(?P<timestamp>[^ ]+ [^ ]+) - INFO - step (?P<globalStep>\\d+) \\| loss (?P<loss>[\\d.]+) \\| step_time (?P<stepTiming>[\\d.]+)s'}}\n    applicationStart: {{regex: '^(?P<timestamp>[^ ]+ [^ ]+) - INFO - Starting training'}}\n"
        );
        let (s, warnings) = goodput_with(&profile, log);
        assert_eq!(s.result.as_deref(), Some("0.312500"), "{layout}");
        assert_eq!(s.training_time_sec.as_deref(), Some("8.000000"), "{layout}");
        assert_eq!(s.resume_time_sec.as_deref(), Some("5.500000"), "{layout}");
        assert_eq!(
            s.application_start_time.as_deref(),
            Some("2026-03-25T07:30:00Z")
        );
        assert_eq!(warnings, Vec::<String>::new());
    }
}

#[test]
fn absl_times_without_a_year_read_year_zero() {
    let profile = "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: LogProfile\nmetadata: {name: p}\nspec:\n  timestamp: {layout: '0102 15:04:05.000000'}\n  patterns:\n    trainingStep: {regex: '^I(?P<timestamp>\\d{4} \\d{2}:\\d{2}:\\d{2}\\.\\d{6}) +\\d+ train\\.py:\\d+\\] completed step: (?P<globalStep>\\d+), seconds: (?P<stepTiming>[\\d.]+)'}\n";
    let log = "\
I0304 07:30:05.000000 140123 train.py:1012] completed step: 1, seconds: 5.000, loss: 2.500
I0304 07:30:10.000000 140123 train.py:1012] completed step: 2, seconds: 5.000, loss: 2.400
I0304 07:30:15.500000 140123 train.py:1012] completed step: 3, seconds: 5.000, loss: 2.300
";
    let (s, warnings) = goodput_with(profile, log);
    assert_eq!(s.result.as_deref(), Some("1.000000"));
    assert_eq!(s.training_time_sec.as_deref(), Some("10.500000"));
    assert_eq!(s.start_time.as_deref(), Some("0000-03-04T07:30:05Z"));
    assert_eq!(
        s.last_step_timestamp.as_deref(),
        Some("0000-03-04T07:30:15.5Z")
    );
    assert_eq!(warnings, Vec::<String>::new());
    // With kubelet timestamps, the kubelet's (dated) times are used.
    let prefixed: String = log
        .lines()
        .zip(["05", "10", "15.5"])
        .map(|(l, s)| format!("2026-03-04T07:30:{s}Z {l}\n"))
        .collect();
    let (s, _) = goodput_with(profile, &prefixed);
    assert_eq!(s.training_time_sec.as_deref(), Some("10.500000"));
    assert_eq!(
        s.last_step_timestamp.as_deref(),
        Some("2026-03-04T07:30:15.5Z")
    );
}

#[test]
fn times_without_a_year_or_date_roll_over_new_year_and_midnight() {
    let profile = |layout: &str| {
        format!(
            "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: LogProfile\nmetadata: {{name: p}}\nspec:\n  timestamp: {{layout: '{layout}'}}\n  patterns:\n    trainingStep: {{regex: '^\\[(?P<timestamp>[^\\]]+)\\] step (?P<globalStep>\\d+)'}}\n"
        )
    };
    let log = "[Dec 31 23:59:50] step 1\n[Jan  1 00:00:10] step 2\n[Jan  1 00:00:20] step 3\n";
    let (s, _) = goodput_with(&profile("Jan _2 15:04:05"), log);
    assert_eq!(s.training_time_sec.as_deref(), Some("30.000000"));
    assert_eq!(s.start_time.as_deref(), Some("0000-12-31T23:59:50Z"));
    assert_eq!(s.completion_time.as_deref(), Some("0001-01-01T00:00:20Z"));
    assert_eq!(s.avg_step_time_sec.as_deref(), Some("15.000000"));
    let log = "[23:59:55.5] step 1\n[00:00:05] step 2\n[00:00:04] step 3\n";
    let (s, _) = goodput_with(&profile("15:04:05"), log);
    assert_eq!(s.training_time_sec.as_deref(), Some("9.500000"));
    assert_eq!(
        s.last_step_timestamp.as_deref(),
        Some("0000-01-02T00:00:04Z")
    );
}

#[test]
fn rows_that_match_but_do_not_parse_say_why() {
    let profiles = profiles();
    let p = BandwidthParser::new(profiles.get("nccl-bandwidth").expect("profile")).expect("parser");
    let row = |size: &str, bus: &str| {
        format!(
            "  {size}        262144     float     sum      -1    203.2    5.16    {bus}      0    207.2    5.06    9.49      0"
        )
    };
    assert_eq!(
        p.row(row("99999999999999999999", "9.68").as_bytes()),
        Some(Err(
            "size \"99999999999999999999\" is not a whole number of bytes up to 2^63-1".to_string()
        ))
    );
    assert_eq!(
        p.row(row("1048576", &format!("{}.5", "9".repeat(400))).as_bytes()),
        Some(Err(
            "busBW \"999999999999999999999999…\" is not a finite number".to_string()
        ))
    );
    assert_eq!(p.row(b"# header"), None);
    let mut p = p;
    p.feed(row("99999999999999999999", "9.68").as_bytes());
    p.feed(row("1048576", "9.68").as_bytes());
    assert_eq!((p.rows(), p.unread_rows()), (1, 1));
    assert_eq!(
        p.first_unread(),
        Some("size \"99999999999999999999\" is not a whole number of bytes up to 2^63-1")
    );
}

/// The goodput status and warnings of `log` read with the shipped LogProfile `name`.
fn shipped_goodput(name: &str, log: &str) -> (GoodputMeasurementStatus, Vec<String>) {
    let profiles = profiles();
    let mut p = GoodputParser::new(profiles.get(name).expect("profile")).expect("parser");
    for line in log.lines() {
        p.feed(line.as_bytes());
    }
    (p.status(), p.warnings())
}

#[test]
fn stock_megatron_checkpoint_lines_without_a_time_of_their_own_take_the_kubelet_time() {
    // Megatron-LM prints its checkpoint lines with print_rank_0, without a bracketed time.
    let log = "\
2026-05-01T10:00:00Z [before the start of training step] datetime: 2026-05-01 10:00:00
2026-05-01T10:00:10Z  [2026-05-01 10:00:10] iteration       10/    1000 | consumed samples:         1280 | elapsed time per iteration (ms): 1000.0 | throughput per GPU (TFLOP/s/GPU): 50.0 | learning rate: 1.000000E-05 | global batch size:   128 | lm loss: 5.0 | loss scale: 1.0 |
2026-05-01T10:00:10.5Z saving checkpoint at iteration      10 to /ckpt in torch_dist format
2026-05-01T10:00:40Z   successfully saved checkpoint from iteration      10 to /ckpt [ t 1/8, p 1/1 ]
2026-05-01T10:00:50Z  [2026-05-01 10:00:50] iteration       20/    1000 | consumed samples:         1280 | elapsed time per iteration (ms): 1000.0 | throughput per GPU (TFLOP/s/GPU): 50.0 | learning rate: 1.000000E-05 | global batch size:   128 | lm loss: 5.0 | loss scale: 1.0 |
";
    let (s, warnings) = shipped_goodput("megatron-training", log);
    assert_eq!(s.checkpoint_save_time_sec.as_deref(), Some("29.500000"));
    assert_eq!(s.last_checkpoint_step, 10);
    assert_eq!(
        s.last_checkpoint_time.as_deref(),
        Some("2026-05-01T10:00:40Z")
    );
    assert_eq!(s.result.as_deref(), Some("0.210000"));
    assert_eq!(warnings, Vec::<String>::new());

    // Read without --timestamps, the save has no time to measure from: 0, and said so.
    let plain: String = log
        .lines()
        .map(|l| l.split_once(' ').map_or(l, |(_, rest)| rest).to_string() + "\n")
        .collect();
    let (s, warnings) = shipped_goodput("megatron-training", &plain);
    assert_eq!(s.checkpoint_save_time_sec.as_deref(), Some("0.000000"));
    assert_eq!(s.last_checkpoint_step, 10);
    assert_eq!(
        warnings,
        [
            "checkpointSaveTimeSec not measured for 1 checkpoint save(s): a save or done line has no time (no kubelet timestamp, no timestamp capture of the LogProfile); read the log with kubectl logs --timestamps"
        ]
    );
}

#[test]
fn megatron_world_size_lines_of_other_releases_start_the_application() {
    for line in [
        // No separator before tensor-model-parallel (the concatenated format string).
        "using world size: 16, data-parallel size: 8, context-parallel size: 1, hierarchical context-parallel sizes: Nonetensor-model-parallel size: 2, encoder-tensor-model-parallel size: 0, pipeline-model-parallel size: 1, encoder-pipeline-model-parallel size: 0",
        // Older releases: data-parallel-size, no context parallelism.
        "using world size: 16, data-parallel-size: 8, tensor-model-parallel size: 2, pipeline-model-parallel size: 1 ",
    ] {
        let log = format!(
            "2026-05-01T10:00:00Z {line}\n2026-05-01T10:01:00Z  [2026-05-01 10:01:00] iteration        1/    1000 | consumed samples:         1280 | elapsed time per iteration (ms): 1000.0 | throughput per GPU (TFLOP/s/GPU): 50.0 | learning rate: 1.000000E-05 | global batch size:   128 | lm loss: 5.0 | loss scale: 1.0 |\n"
        );
        let (s, _) = shipped_goodput("megatron-training", &log);
        assert_eq!(
            s.application_start_time.as_deref(),
            Some("2026-05-01T10:00:00Z"),
            "{line}"
        );
        assert_eq!(s.resume_time_sec.as_deref(), Some("60.000000"), "{line}");
    }
}

#[test]
fn nemo_2_checkpoint_save_lines_with_a_start_time_give_their_duration() {
    let log = "\
2026-02-17T17:58:00Z [NeMo I 2026-02-17 17:58:00 nemo_logging:393] Application initialized
2026-02-17T17:58:10Z Training epoch 0, iteration 23/100 | lr: 1e-05 | global_batch_size: 64 | global_step: 23 | reduced_train_loss: 2.1 | train_step_timing in s: 1.0 | TFLOPS_per_GPU: 400.0
2026-02-17T17:58:40Z [NeMo I 2026-02-17 17:58:40 nemo_logging:393] Global Checkpoint Save : Rank: 0 : Iteration: 24 : Start time: 1771351120.135s : Save duration: 25.537s
2026-02-17T17:58:41Z [NeMo I 2026-02-17 17:58:41 nemo_logging:393] Successfully saved checkpoint from iteration      24 to /ckpt/step=24.ckpt
2026-02-17T17:59:00Z Training epoch 0, iteration 24/100 | lr: 1e-05 | global_batch_size: 64 | global_step: 24 | reduced_train_loss: 2.1 | train_step_timing in s: 1.0 | TFLOPS_per_GPU: 400.0
";
    let (s, warnings) = shipped_goodput("nemo-training", log);
    assert_eq!(s.checkpoint_save_time_sec.as_deref(), Some("25.537000"));
    assert_eq!(s.last_checkpoint_step, 24);
    assert_eq!(s.result.as_deref(), Some("0.407717"));
    assert_eq!(warnings, Vec::<String>::new());
}

/// The problems of the one LogProfile `yaml` as a rule set's load and `check` report them.
fn profile_problems(yaml: &str) -> Vec<(String, String)> {
    let source = std::sync::Arc::new(nvcre_engine::Source::new("p.yaml", yaml));
    let docs = nvcre_engine::parse_documents(&source).expect("YAML");
    match nvcre_domain::measure::profile_from_value(&docs[0].value) {
        Ok(_) => Vec::new(),
        Err(ps) => ps.into_iter().map(|p| (p.path, p.message)).collect(),
    }
}

#[test]
fn a_log_profile_is_held_to_its_schema_values() {
    let head = "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: LogProfile\nmetadata: {name: bad}\nspec:\n  timestamp: {layout: '2006-01-02T15:04:05Z'}\n";
    let yaml = format!(
        "{head}  workerStrategy: {{type: Many, lifecyclePod: middle, trainingStepPod: nope}}\n  warmupSteps: -1\n  logInterval: 0\n  patterns:\n    trainingStep: {{regex: 'step (?P<globalStep>\\d+)'}}\n    warmupStep: {{regex: ''}}\n"
    );
    let problem = |path: &str, what: &str| {
        (
            path.to_string(),
            format!("LogProfile \"bad\": {path}: {what}"),
        )
    };
    assert_eq!(
        profile_problems(&yaml),
        vec![
            problem(
                "spec.patterns.warmupStep.regex",
                "Invalid value: \"\": spec.patterns.warmupStep.regex in body should be at least 1 chars long"
            ),
            problem(
                "spec.workerStrategy.type",
                "Unsupported value: \"Many\": supported values: \"Single\", \"Multi\""
            ),
            problem(
                "spec.workerStrategy.lifecyclePod",
                "Unsupported value: \"middle\": supported values: \"first\", \"last\""
            ),
            problem(
                "spec.workerStrategy.trainingStepPod",
                "Unsupported value: \"nope\": supported values: \"first\", \"last\""
            ),
            problem(
                "spec.warmupSteps",
                "Invalid value: -1: spec.warmupSteps in body should be greater than or equal to 0"
            ),
            problem(
                "spec.logInterval",
                "Invalid value: 0: spec.logInterval in body should be greater than or equal to 1"
            ),
        ]
    );
    // A type error names its field, in the author's words.
    let yaml = format!("{head}  warmupSteps: two\n  patterns: {{}}\n");
    assert_eq!(
        profile_problems(&yaml),
        vec![problem(
            "spec.warmupSteps",
            "invalid type: string \"two\", expected an integer"
        )]
    );
    // The older API group is read as ours.
    let legacy = format!("{head}  patterns: {{}}\n").replace("nvcre.nvidia.com", "cre.nvidia.com");
    assert_eq!(profile_problems(&legacy), vec![]);
}
