//! `measure bandwidth|goodput` on the sample logs: the report blocks, thresholds met (exit 0)
//! and violated (exit 1) with their exact messages, usage errors (exit 2).

use super::util::{bin, path, rules_copy, run};

const DATA: &str = "rules/tests/log-profiles/data";

fn log(name: &str) -> String {
    path(&format!("{DATA}/{name}"))
}

#[test]
fn bandwidth_thresholds_met_print_the_report_block() {
    let (code, out, err) = run(&[
        "measure",
        "bandwidth",
        "--profile",
        "nccl-bandwidth",
        "--test-type",
        "all_reduce",
        "--threshold",
        "busBandwidthGBps=value >= 300",
        &log("nccl-h100-16rank.log"),
    ]);
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(
        out,
        "Test type: all_reduce\nBandwidth:\n    Size       AlgBW        BusBW        Samples\n    8 B        0.00 GB/s    0.00 GB/s    1\n    1 MB       5.16 GB/s    9.68 GB/s    1\n    128 MB     81.24 GB/s   152.32 GB/s  1\n    1 GB       158.86 GB/s  297.86 GB/s  1\n    2 GB       169.81 GB/s  318.40 GB/s  1\n    8 GB       180.71 GB/s  338.82 GB/s  1\nThresholds:\n    ✓  busBandwidthGBps: value >= 300 (measured 338.8200)\n"
    );
}

#[test]
fn a_violated_threshold_exits_1_with_the_exact_message() {
    let (code, out, _) = run(&[
        "measure",
        "bandwidth",
        "--profile",
        "nccl-bandwidth",
        "--threshold",
        "busBandwidthGBps=value >= 400",
        "-o",
        "json",
        &log("nccl-h100-16rank.log"),
    ]);
    assert_eq!(code, 1);
    let doc: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(doc["kind"], "BandwidthMeasurement");
    assert_eq!(
        doc["spec"],
        serde_json::json!({"logProfileRef": "nccl-bandwidth"})
    );
    assert_eq!(
        doc["values"],
        serde_json::json!({"busBandwidthGBps": 338.82, "algBandwidthGBps": 180.71})
    );
    assert_eq!(
        doc["thresholds"],
        serde_json::json!([{
            "key": "busBandwidthGBps",
            "expression": "value >= 400",
            "value": 338.82,
            "passed": false,
            "reason": "ThresholdViolated",
            "message": "Threshold \"busBandwidthGBps\" violated: measured 338.8200, expression: value >= 400"
        }])
    );
    assert_eq!(
        doc["status"]["results"][5],
        serde_json::json!({"sizeBytes": 8589934592_i64, "algBW": "180.71", "busBW": "338.82", "samples": 1})
    );
}

#[test]
fn goodput_from_stdin_with_the_thresholds_of_a_workloadrun() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run_file = dir.path().join("run.yaml");
    std::fs::write(
        &run_file,
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: train}\nspec:\n  thresholds:\n    busBandwidthGBps: value >= 400\n    goodputRatio: value >= 0.9\n    avgTFLOPsPerGPU: value >= 100\n",
    )
    .expect("write");
    let text = std::fs::read_to_string(log("megatron-n6-full-sequence.log")).expect("fixture");
    let out = bin()
        .args([
            "measure",
            "goodput",
            "--profile",
            "megatron-training",
            "--run",
        ])
        .arg(&run_file)
        .arg("-")
        .write_stdin(text)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Goodput:\n    Avg Runtime Goodput:  0.89 (89%)\n    Avg TFLOPs/GPU:  138.5\n    Avg Step Time:  132.56s\nThresholds:\n    ✓  avgTFLOPsPerGPU: value >= 100 (measured 138.5000)\n    ✗  Threshold \"goodputRatio\" violated: measured 0.8856, expression: value >= 0.9\n"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "Warning: threshold busBandwidthGBps is measured by `measure bandwidth`; skipped\n"
    );
}

#[test]
fn usage_errors_exit_2_with_the_exact_message() {
    let nemo = log("nemo-n4-training-steps.log");
    let cases: &[(&[&str], &str)] = &[
        (
            &["measure", "goodput", "--profile", "nope", &nemo],
            "Error: unknown LogProfile \"nope\"; known profiles: megatron-training, nccl-bandwidth, nemo-training\n",
        ),
        (
            &[
                "measure",
                "goodput",
                "--profile",
                "nemo-training",
                "--threshold",
                "avgTFLOPSPerGPU=value > 1",
                &nemo,
            ],
            "Error: --threshold: unknown threshold key(s) [avgTFLOPSPerGPU]; valid keys: [busBandwidthGBps, algBandwidthGBps, goodputRatio, avgTFLOPsPerGPU, avgStepTimeSec]\n",
        ),
        (
            &[
                "measure",
                "goodput",
                "--profile",
                "nemo-training",
                "--threshold",
                "goodputRatio=value + 1.0",
                &nemo,
            ],
            "Error: Threshold \"goodputRatio\": compile threshold expression \"value + 1.0\": expression must return bool, got double\n",
        ),
        (
            &[
                "measure",
                "bandwidth",
                "--profile",
                "nccl-bandwidth",
                "--threshold",
                "goodputRatio=value > 0.5",
                &nemo,
            ],
            "Error: --threshold goodputRatio: Goodput ratio (from GoodputMeasurement) is not measured by `measure bandwidth`\n",
        ),
        (
            &[
                "measure",
                "bandwidth",
                "--profile",
                "megatron-training",
                &nemo,
            ],
            "Error: LogProfile megatron-training has no bandwidthResult pattern\n",
        ),
        (
            &[
                "measure",
                "bandwidth",
                "--profile",
                "nccl-bandwidth",
                "/nonexistent/nccl.log",
            ],
            "Error: reading /nonexistent/nccl.log: no such file or directory\n",
        ),
    ];
    for (args, want) in cases {
        let (code, out, err) = run(args);
        assert_eq!(
            (code, out.as_str(), err.as_str()),
            (2, "", *want),
            "{args:?}"
        );
    }
}

#[test]
fn a_rule_set_with_a_bad_profile_is_refused_whole() {
    let (_dir, rules) = rules_copy();
    super::util::edit(
        &rules.join("measure/nccl-bandwidth.yaml"),
        "(?P<busBW>\\d+\\.\\d+)\\s",
        "(?P<busBW>\\d+\\.\\d+\\s",
    );
    let (code, out, err) = run(&[
        "--rules",
        &rules.display().to_string(),
        "measure",
        "bandwidth",
        "--profile",
        "nccl-bandwidth",
        &log("nccl-h100-16rank.log"),
    ]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert_eq!(
        err,
        format!(
            "Error: rule pack error: {}:30:14: LogProfile \"nccl-bandwidth\": compiling bandwidthResult regex: error parsing regexp: missing closing ): `^\\s*(?P<size>\\d+)\\s+\\d+\\s+[A-Za-z]\\w*\\s+(?:[A-Za-z]\\w*\\s+)?(?:-?\\d+\\s+)?\\d+(?:\\.\\d+)?\\s+(?P<algBW>\\d+(?:\\.\\d+)?|\\d(?:\\.\\d+)?[eE][+-]\\d+)\\s+(?P<busBW>\\d+\\.\\d+\\s+(?:\\d+|N/A|\\d(?:\\.\\d+)?[eE][+-]\\d+)(?:\\s|$)`\n",
            rules.join("measure/nccl-bandwidth.yaml").display()
        )
    );
}

/// The benchmark figure for a multi-GB log: generates ~1 GiB of kubelet-timestamped NCCL
/// output in the temporary directory, measures it under `/usr/bin/time -v` (peak RSS, wall
/// time printed), checks the result and deletes the file. Not a timed test; run by hand:
/// `cargo test -p nvcre-policy --test tests large_log -- --ignored --nocapture`
/// (`NVCRE_LARGE_LOG_MIB` changes the size).
#[test]
#[ignore = "writes ~1 GiB to the temporary directory; a benchmark, run by hand"]
fn large_log_is_measured_in_bounded_memory() {
    use std::io::Write;
    let mib: u64 = std::env::var("NVCRE_LARGE_LOG_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    let file = std::env::temp_dir().join("nvcre-measure-large.log");
    let mut w =
        std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&file).expect("create"));
    let sizes: Vec<u64> = (3..=33).map(|p| 1u64 << p).collect();
    let mut written = 0u64;
    let mut rows = 0u64;
    let mut second = 0u64;
    while written < mib << 20 {
        for (i, size) in sizes.iter().enumerate() {
            let stamp = format!(
                "2026-08-06T14:{:02}:{:02}.{:09}-07:00",
                (second / 60) % 60,
                second % 60,
                i
            );
            let line = if i == 0 {
                format!(
                    "{stamp} host-{second}:530:530 [0] NCCL INFO Using network IB\n{stamp} #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
                )
            } else {
                rows += 1;
                format!(
                    "{stamp} {size:>12} {:>13}     float     sum      -1   1652.2   81.24  152.32      0   1636.7   82.01  153.76      0\n",
                    size / 4
                )
            };
            w.write_all(line.as_bytes()).expect("write");
            written += line.len() as u64;
        }
        second += 1;
    }
    w.flush().expect("flush");
    drop(w);
    let bin = assert_cmd::cargo::cargo_bin("nvcre-policy");
    let out = std::process::Command::new("/usr/bin/time")
        .arg("-v")
        .arg(&bin)
        .args([
            "measure",
            "bandwidth",
            "--profile",
            "nccl-bandwidth",
            "-o",
            "json",
        ])
        .arg(&file)
        .env_remove("NVCRE_RULES")
        .output()
        .expect("/usr/bin/time runs");
    std::fs::remove_file(&file).expect("remove the generated log");
    let stderr = String::from_utf8_lossy(&out.stderr);
    for line in stderr
        .lines()
        .filter(|l| l.contains("Maximum resident set size") || l.contains("Elapsed (wall clock)"))
    {
        println!("{}", line.trim());
    }
    println!("{} MiB, {rows} result rows", written >> 20);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let results = doc["status"]["results"].as_array().expect("results");
    assert_eq!(results.len(), sizes.len() - 1);
    assert_eq!(
        results[0]["samples"].as_u64(),
        Some(rows / (sizes.len() as u64 - 1))
    );
    assert_eq!(doc["status"]["transport"], serde_json::json!(["IB"]));
}

#[test]
fn a_threshold_that_cannot_be_evaluated_exits_2_in_words() {
    let (code, out, _) = run(&[
        "measure",
        "bandwidth",
        "--profile",
        "nccl-bandwidth",
        "--threshold",
        "busBandwidthGBps=1 / int(value - 338.82) > 0",
        "-o",
        "json",
        &log("nccl-h100-16rank.log"),
    ]);
    assert_eq!(code, 2);
    let doc: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        doc["thresholds"],
        serde_json::json!([{
            "key": "busBandwidthGBps",
            "expression": "1 / int(value - 338.82) > 0",
            "value": 338.82,
            "passed": false,
            "reason": "InvalidThresholdExpression",
            "message": "Threshold \"busBandwidthGBps\": evaluate threshold expression \"1 / int(value - 338.82) > 0\" with value=338.820000: division by zero (1 / 0)"
        }])
    );
}

/// An all_reduce_perf result row of `size` bytes whose out-of-place busbw is `bus`.
fn nccl_row(size: u64, bus: &str) -> String {
    format!(
        "        {size}           256     float     sum      -1    10.0    5.00    {bus}      0    10.0    5.00    9.00      0\n"
    )
}

/// `measure KIND --profile PROFILE [--threshold T] -o json` of a log holding `text`:
/// (exit code, the JSON document, stderr).
fn measure_text(
    kind: &str,
    profile: &str,
    threshold: Option<&str>,
    text: &str,
) -> (i32, serde_json::Value, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("run.log");
    std::fs::write(&log, text).expect("write");
    let log = log.display().to_string();
    let mut args = vec!["measure", kind, "--profile", profile, "-o", "json"];
    if let Some(t) = threshold {
        args.extend(["--threshold", t]);
    }
    args.push(&log);
    let (code, out, err) = run(&args);
    let doc = serde_json::from_str(&out).unwrap_or(serde_json::Value::Null);
    (code, doc, err)
}

/// A row whose bandwidth is out of range (a 310-digit number, which the profile's pattern
/// matches) or not a number is skipped: averaged in, it made its size's average `inf` and
/// passed every `value >= N` threshold.
#[test]
fn a_bandwidth_out_of_range_is_skipped_not_averaged_in() {
    let text = nccl_row(1024, "9.00") + &nccl_row(1024, &format!("{}.00", "9".repeat(310)));
    let (code, doc, err) = measure_text(
        "bandwidth",
        "nccl-bandwidth",
        Some("busBandwidthGBps=value >= 400"),
        &text,
    );
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        doc["status"]["results"],
        serde_json::json!([{"sizeBytes": 1024, "algBW": "5.00", "busBW": "9.00", "samples": 1}])
    );
    assert_eq!(doc["thresholds"][0]["passed"], false);
    assert_eq!(doc["thresholds"][0]["value"], 9.0);
}

/// A log whose lines carry kubelet (UTC) times is measured over those times: Megatron's own
/// bracketed times are the pod's local time without a zone, read as UTC, and once stretched
/// the window by the pod's offset (7 hours here: a goodput of 1.0 over 25,225 s).
#[test]
fn the_goodput_window_of_a_kubelet_log_is_its_lines_times() {
    let step = |local: &str, n: u32| {
        format!(
            "[2026-03-25 {local}] iteration       {n}/  139100 | consumed samples:          360 | elapsed time per iteration (ms): 1238.2 | throughput per GPU (TFLOP/s/GPU): 602.6 | lm loss: 8.356363E+00 |\n"
        )
    };
    let text = format!(
        "2026-03-25T14:30:00.000000000Z using world size: 16, data-parallel size: 8, context-parallel size: 1, tensor-model-parallel size: 2, pipeline-model-parallel size: 1\n2026-03-25T14:30:05.000000000Z  {}2026-03-25T14:30:17.000000000Z  {}2026-03-25T14:30:30.000000000Z  {}",
        step("07:30:05", 10),
        step("07:30:17", 20),
        step("07:30:30", 30),
    );
    let (code, doc, err) = measure_text("goodput", "megatron-training", None, &text);
    assert_eq!(code, 0, "{err}");
    let status = &doc["status"];
    assert_eq!(
        (
            &status["trainingTimeSec"],
            &status["startTime"],
            &status["completionTime"]
        ),
        (
            &serde_json::json!("30.000000"),
            &serde_json::json!("2026-03-25T14:30:00Z"),
            &serde_json::json!("2026-03-25T14:30:30Z")
        )
    );
    // A line of the same log without its kubelet time does not stretch the window either.
    let mixed = text + &step("07:30:40", 40);
    let (_, doc, err) = measure_text("goodput", "megatron-training", None, &mixed);
    assert_eq!(doc["status"]["trainingTimeSec"], "30.000000");
    // Nor is its step, on the pod's clock, the last step after the log's end.
    assert_eq!(doc["status"]["lastStepTimestamp"], "2026-03-25T14:30:30Z");
    assert_eq!(
        err,
        "Warning: lastStepTimestamp is not the last step's time: the log mixes lines with a kubelet timestamp and lines without (the program's own time, often local and zoneless, or without a year); read the log with every line timestamped (kubectl logs --timestamps) or none\n"
    );
}

/// Past the kept message sizes, rows are not measured: the thresholds are not judged on the
/// rest (a peak among the ignored rows would have failed `value < 10`), they fail closed.
#[test]
fn thresholds_fail_closed_when_rows_were_not_measured() {
    let mut text: String = (1..=65_536).map(|size| nccl_row(size, "9.00")).collect();
    text.push_str(&nccl_row(70_000, "999.00"));
    let (code, doc, err) = measure_text(
        "bandwidth",
        "nccl-bandwidth",
        Some("busBandwidthGBps=value < 10"),
        &text,
    );
    assert_eq!(
        (code, err.as_str()),
        (
            1,
            "Warning: 1 rows of further message sizes were ignored (at most 65536 sizes are kept)\n"
        )
    );
    assert_eq!(
        doc["thresholds"],
        serde_json::json!([{
            "key": "busBandwidthGBps",
            "expression": "value < 10",
            "value": 9.0,
            "passed": false,
            "reason": "MeasurementNotAvailable",
            "message": "Threshold \"busBandwidthGBps\": not judged: 1 rows of the log were not measured (at most 65536 message sizes are kept), and the peak may be among them"
        }])
    );
}

/// Two finite rows whose sum overflows: the second is skipped as one out of range is (the
/// average was `inf` and passed every threshold).
#[test]
fn a_row_that_would_overflow_its_sizes_sum_is_skipped() {
    let huge = format!("17{}.00", "0".repeat(307));
    let row = nccl_row(2048, &huge);
    let (code, doc, err) = measure_text("bandwidth", "nccl-bandwidth", None, &(row.clone() + &row));
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        doc["status"]["results"],
        serde_json::json!([{"sizeBytes": 2048, "algBW": "5.00", "busBW": format!("{:.2}", 1.7e308_f64), "samples": 1}])
    );
}

#[test]
fn threshold_errors_of_a_file_name_the_file_line_and_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let th = dir.path().join("th.yaml");
    std::fs::write(
        &th,
        "busBandwidthGBps: \"value >= 330\"\nalgBandwidthGBps: \"value >= '1'\"\navgTFLOPSPerGPU: \"value > 1\"\n",
    )
    .expect("write");
    let list = dir.path().join("list.yaml");
    std::fs::write(&list, "- busBandwidthGBps: \"value > 1\"\n").expect("write");
    let run_file = dir.path().join("run.yaml");
    std::fs::write(
        &run_file,
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: ar}\nspec:\n  image: nvcr.io/nvidia/pytorch:26.01-py3\n  framework:\n    mpi:\n      mpirunPath: /usr/local/mpi/bin/mpirun\n      binary: /usr/local/bin/all_reduce_perf_mpi\n  numNodes: 2\n  bandwidthMeasurement: {logProfileRef: nccl-bandwidth}\n  thresholds:\n    busBandwidthGBps: \"value > 1 || 'x'\"\n",
    )
    .expect("write");
    let (th, list, run_file) = (
        th.to_string_lossy().into_owned(),
        list.to_string_lossy().into_owned(),
        run_file.to_string_lossy().into_owned(),
    );
    let nccl = log("nccl-h100-16rank.log");
    let measure = |flag: &str, file: &str| {
        run(&[
            "measure",
            "bandwidth",
            "--profile",
            "nccl-bandwidth",
            flag,
            file,
            &nccl,
        ])
    };
    assert_eq!(
        measure("--thresholds", &th),
        (
            2,
            String::new(),
            format!(
                "Error: {th}:3:1: unknown threshold key(s) [avgTFLOPSPerGPU]; valid keys: [busBandwidthGBps, algBandwidthGBps, goodputRatio, avgTFLOPsPerGPU, avgStepTimeSec]\nError: {th}:2:19: algBandwidthGBps: Threshold \"algBandwidthGBps\": compile threshold expression \"value >= '1'\": operator '>=' does not take double and string\n"
            )
        )
    );
    assert_eq!(
        measure("--thresholds", &list),
        (
            2,
            String::new(),
            format!(
                "Error: {list}:1:1: thresholds must be a mapping of key to CEL expression (valid keys: busBandwidthGBps, algBandwidthGBps, goodputRatio, avgTFLOPsPerGPU, avgStepTimeSec)\n"
            )
        )
    );
    let want = format!(
        "Error: {run_file}:13:23: spec.thresholds.busBandwidthGBps: Threshold \"busBandwidthGBps\": compile threshold expression \"value > 1 || 'x'\": operator '||' does not take bool and string\n"
    );
    assert_eq!(
        measure("--run", &run_file),
        (2, String::new(), want.clone())
    );
    // `check` refuses the same WorkloadRun with the same message.
    let (code, _, err) = run(&["check", &run_file]);
    assert_eq!(code, 2);
    assert!(err.starts_with(&want), "{err}");

    // Unknown keys point at the first of them in the file (not in key order); a value that is
    // not a string, at the value (also a list or mapping, flow or block).
    for (text, want) in [
        (
            "zeta: value > 1\nbusBandwidthGBps: value > 1\nalpha: value > 1\n",
            ":1:1: unknown threshold key(s) [alpha, zeta]; valid keys: [busBandwidthGBps, algBandwidthGBps, goodputRatio, avgTFLOPsPerGPU, avgStepTimeSec]",
        ),
        (
            "busBandwidthGBps: [value > 1]\n",
            ":1:19: threshold busBandwidthGBps: expected a CEL expression string such as \"value >= 400\", got list",
        ),
        (
            "busBandwidthGBps:\n  a: b\n",
            ":2:3: threshold busBandwidthGBps: expected a CEL expression string such as \"value >= 400\", got mapping",
        ),
    ] {
        let f = dir.path().join("more.yaml");
        std::fs::write(&f, text).expect("write");
        let f = f.to_string_lossy().into_owned();
        assert_eq!(
            measure("--thresholds", &f),
            (2, String::new(), format!("Error: {f}{want}\n")),
            "{text}"
        );
    }
}

#[test]
fn a_utf16_log_is_refused_naming_its_encoding() {
    let dir = tempfile::tempdir().expect("tempdir");
    let row = "  8589934592    2147483648     float     sum      -1    47535  180.71  338.82      0    47743  179.92  337.35      0\r\n";
    let mut le = vec![0xFF, 0xFE];
    le.extend(row.encode_utf16().flat_map(u16::to_le_bytes));
    let mut be = vec![0xFE, 0xFF];
    be.extend(row.encode_utf16().flat_map(u16::to_be_bytes));
    for (bytes, encoding) in [(le, "UTF-16LE"), (be, "UTF-16BE")] {
        let file = dir.path().join("launcher.log");
        std::fs::write(&file, bytes).expect("write");
        let name = file.to_string_lossy().into_owned();
        let (code, out, err) = run(&["measure", "bandwidth", "--profile", "nccl-bandwidth", &name]);
        assert_eq!(
            (code, out.as_str(), err),
            (
                2,
                "",
                format!(
                    "Error: reading {name}: the log is {encoding} (it starts with that byte-order mark); convert it to UTF-8 first, e.g. iconv -f UTF-16 -t UTF-8\n"
                )
            )
        );
    }
}

/// Megatron's bracketed step times are the pod's local time without a zone; on lines with a
/// kubelet time every event has the kubelet's time, so the pod's zone changes nothing (a
/// +05:30 pod gave `resumeTimeSec` 19807 in a 27 s log, and a last step after completion).
#[test]
fn goodput_is_the_same_whatever_the_pods_time_zone() {
    let log = |local: &str| {
        let step = |s: &str, n: u32| {
            format!(
                "2026-03-25T07:30:{s}.000000000Z  [2026-03-25 {local}:{s}] iteration       {n}/     100 | consumed samples:          360 | elapsed time per iteration (ms): 1000.0 | throughput per GPU (TFLOP/s/GPU): 100.0 | lm loss: 9.751967E+00 |\n"
            )
        };
        format!(
            "2026-03-25T07:30:00.000000000Z using world size: 16, data-parallel size: 8, context-parallel size: 1, tensor-model-parallel size: 2, pipeline-model-parallel size: 1\n{}{}{}",
            step("07", 10),
            step("17", 20),
            step("27", 30)
        )
    };
    for local in ["13:00", "00:30", "07:30"] {
        let (code, doc, err) = measure_text(
            "goodput",
            "megatron-training",
            Some("goodputRatio=value > 0.7"),
            &log(local),
        );
        assert_eq!((code, err.as_str()), (0, ""), "{local}");
        let s = &doc["status"];
        assert_eq!(
            (
                &s["result"],
                &s["resumeTimeSec"],
                &s["trainingTimeSec"],
                &s["lastStepTimestamp"],
                &s["completionTime"]
            ),
            (
                &serde_json::json!("0.740741"),
                &serde_json::json!("7.000000"),
                &serde_json::json!("27.000000"),
                &serde_json::json!("2026-03-25T07:30:27Z"),
                &serde_json::json!("2026-03-25T07:30:27Z")
            ),
            "{local}"
        );
    }
}

/// `measure goodput --rules DIR --profile p -o json` of `log` with one more LogProfile `p`
/// (`layout`, `patterns` as YAML lines): (exit code, the JSON document, stderr).
fn goodput_with_profile(
    layout: &str,
    patterns: &str,
    log: &str,
) -> (i32, serde_json::Value, String) {
    let (dir, rules) = rules_copy();
    std::fs::write(
        rules.join("measure/p.yaml"),
        format!("apiVersion: nvcre.nvidia.com/v1alpha1\nkind: LogProfile\nmetadata:\n  name: p\nspec:\n  timestamp:\n    layout: \"{layout}\"\n  patterns:\n{patterns}"),
    )
    .expect("write");
    let file = dir.path().join("run.log");
    std::fs::write(&file, log).expect("write");
    let (code, out, err) = run(&[
        "--rules",
        &rules.display().to_string(),
        "measure",
        "goodput",
        "--profile",
        "p",
        "-o",
        "json",
        &file.display().to_string(),
    ]);
    let doc = serde_json::from_str(&out).unwrap_or(serde_json::Value::Null);
    (code, doc, err)
}

const PYTHON_LOG: &str = "\
2026-03-25 07:30:00,000 - INFO - Starting training
2026-03-25 07:30:05,500 - INFO - step 1 | loss 2.5 | step_time 1.25s
2026-03-25 07:30:06,750 - INFO - step 2 | loss 2.4 | step_time 1.25s
2026-03-25 07:30:08,000 - INFO - step 3 | loss 2.3 | step_time 1.25s
";

const PYTHON_PATTERNS: &str = "    trainingStep:\n      regex: '^(?P<timestamp>[^ ]+ [^ ]+) - INFO - step (?P<globalStep>\\d+) \\| loss (?P<loss>[\\d.]+) \\| step_time (?P<stepTiming>[\\d.]+)s'\n    applicationStart:\n      regex: '^(?P<timestamp>[^ ]+ [^ ]+) - INFO - Starting training'\n";

/// Python logging prints `07:30:05,500`: Go reads it with `05,000` and with a layout without
/// a fraction; it was refused, or read no time at all (goodput 0, no warning).
#[test]
fn python_logging_times_with_a_comma_fraction_are_read() {
    for layout in ["2006-01-02 15:04:05,000", "2006-01-02 15:04:05"] {
        let (code, doc, err) = goodput_with_profile(layout, PYTHON_PATTERNS, PYTHON_LOG);
        assert_eq!((code, err.as_str()), (0, ""), "{layout}");
        let s = &doc["status"];
        assert_eq!(
            (&s["result"], &s["trainingTimeSec"], &s["resumeTimeSec"]),
            (
                &serde_json::json!("0.312500"),
                &serde_json::json!("8.000000"),
                &serde_json::json!("5.500000")
            ),
            "{layout}"
        );
    }
    // A capture the layout does not read is said, with where it is.
    let (code, doc, err) = goodput_with_profile("2006/01/02 15:04:05", PYTHON_PATTERNS, PYTHON_LOG);
    assert_eq!(code, 0);
    assert_eq!(doc["status"]["trainingTimeSec"], "0.000000");
    assert!(
        err.starts_with("Warning: 4 timestamp captures did not parse with layout \"2006/01/02 15:04:05\" of LogProfile p and gave no time; the first at /"),
        "{err}"
    );
    assert!(
        err.ends_with("/run.log:1: \"2026-03-25 07:30:00,000\"\n"),
        "{err}"
    );
}

/// absl/glog times (`I0304 07:30:05.000000`, MaxText) have no year: read as year 0, as Go does,
/// and compared only with each other.
#[test]
fn absl_times_without_a_year_are_read() {
    let patterns = "    trainingStep:\n      regex: '^I(?P<timestamp>\\d{4} \\d{2}:\\d{2}:\\d{2}\\.\\d{6}) +\\d+ train\\.py:\\d+\\] completed step: (?P<globalStep>\\d+), seconds: (?P<stepTiming>[\\d.]+)'\n";
    let log = "\
I0304 07:30:05.000000 140123 train.py:1012] completed step: 1, seconds: 5.000, loss: 2.500
I0304 07:30:10.000000 140123 train.py:1012] completed step: 2, seconds: 5.000, loss: 2.400
I0304 07:30:15.500000 140123 train.py:1012] completed step: 3, seconds: 5.000, loss: 2.300
";
    let (code, doc, err) = goodput_with_profile("0102 15:04:05.000000", patterns, log);
    assert_eq!((code, err.as_str()), (0, ""));
    let s = &doc["status"];
    assert_eq!(
        (&s["result"], &s["trainingTimeSec"], &s["startTime"]),
        (
            &serde_json::json!("1.000000"),
            &serde_json::json!("10.500000"),
            &serde_json::json!("0000-03-04T07:30:05Z")
        )
    );
}

/// Rows the pattern matches whose numbers do not parse are said as such, with the first one's
/// file and line: the hint to check `--profile` misled.
#[test]
fn rows_that_match_without_readable_numbers_are_said() {
    let bad = "  99999999999999999999           256     float     sum      -1    10.0    5.00    9.00      0    10.0    5.00    9.00      0\n";
    let (code, doc, err) = measure_text("bandwidth", "nccl-bandwidth", None, &(bad.repeat(2)));
    assert_eq!(
        (code, doc["status"]["results"].clone()),
        (0, serde_json::Value::Null)
    );
    assert!(
        err.starts_with("Warning: 2 rows matched the bandwidthResult pattern of LogProfile nccl-bandwidth without readable numbers; the first at /"),
        "{err}"
    );
    assert!(
        err.ends_with("/run.log:1: size \"99999999999999999999\" is not a whole number of bytes up to 2^63-1\n"),
        "{err}"
    );
}

#[test]
fn a_byte_order_mark_hides_no_row() {
    // The first row of a log saved with a UTF-8 byte-order mark is read, with or without a
    // kubelet timestamp.
    let dir = tempfile::tempdir().expect("tempdir");
    let row = "     1048576        262144     float     sum      -1    203.2    5.16    9.68      0    207.2    5.06    9.49      0\n";
    let second = "     2097152        524288     float     sum      -1    203.2    6.16    10.68      0    207.2    5.06    9.49      0\n";
    let plain = dir.path().join("plain.log");
    std::fs::write(&plain, format!("{row}{second}")).expect("write");
    let bom = dir.path().join("bom.log");
    std::fs::write(&bom, format!("\u{feff}{row}{second}")).expect("write");
    let stamped = dir.path().join("stamped.log");
    std::fs::write(&stamped, format!("\u{feff}2026-08-06T14:10:20Z {row}")).expect("write");
    let measure = |p: &std::path::Path| {
        run(&[
            "measure",
            "bandwidth",
            "--profile",
            "nccl-bandwidth",
            p.to_str().expect("utf8"),
        ])
    };
    let want = measure(&plain);
    assert_eq!(want.0, 0, "{}", want.2);
    assert!(
        want.1
            .contains("    1 MB       5.16 GB/s    9.68 GB/s    1\n"),
        "{}",
        want.1
    );
    assert_eq!(measure(&bom), want);
    let (code, out, err) = measure(&stamped);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("    1 MB       5.16 GB/s    9.68 GB/s    1\n"),
        "{out}"
    );
}

/// Transports past the 256 kept are said, with the first of them, not dropped silently.
#[test]
fn transports_past_the_kept_ones_are_warned_about() {
    let mut text: String = (0..256)
        .map(|i| format!("x NCCL INFO Using network zz{i:03}\n"))
        .collect();
    text.push_str("x NCCL INFO Using network IB\nx NCCL INFO Using network Socket\n");
    text.push_str(&nccl_row(1024, "9.00"));
    let (code, doc, err) = measure_text("bandwidth", "nccl-bandwidth", None, &text);
    assert_eq!(code, 0);
    assert_eq!(
        err,
        "Warning: transports past the first 256 were not listed (2 lines naming them); the first: IB\n"
    );
    let listed = doc["status"]["transport"].as_array().map_or(0, Vec::len);
    assert_eq!(listed, 256);
}

/// `--run` reads the WorkloadRun as `check` does: the older API group with a warning, another
/// group refused at its line.
#[test]
fn a_run_of_the_older_api_group_is_warned_about_and_another_group_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let nccl = log("nccl-h100-16rank.log");
    let manifest = |group: &str| {
        format!(
            "apiVersion: {group}/v1alpha1\nkind: WorkloadRun\nmetadata: {{name: ar}}\nspec:\n  image: i\n  framework: {{exec: {{command: [a]}}}}\n  numNodes: 2\n  thresholds: {{busBandwidthGBps: \"value > 1\"}}\n"
        )
    };
    // `measure --run FILE` of a file holding `text`: (exit code, stderr with FILE as RUN).
    let measure_file = |name: &str, text: &str| {
        let f = dir.path().join(name);
        std::fs::write(&f, text).expect("write");
        let f = f.to_string_lossy().into_owned();
        let (code, _, err) = run(&[
            "measure",
            "bandwidth",
            "--profile",
            "nccl-bandwidth",
            "--run",
            &f,
            &nccl,
        ]);
        (code, err.replace(&f, "RUN"))
    };
    let measure = |group: &str| measure_file(&format!("{group}.yaml"), &manifest(group));
    assert_eq!(
        measure("cre.nvidia.com"),
        (
            0,
            "Warning: RUN:1:13: apiVersion cre.nvidia.com/v1alpha1 is the older API group; treating it as nvcre.nvidia.com/v1alpha1\n".to_string()
        )
    );
    // A List holding the run (`kubectl get workloadruns -o yaml`) is read for it, each line in
    // place.
    let item: String = manifest("nvcre.nvidia.com")
        .replace("value > 1", "value >")
        .lines()
        .map(|l| format!("  {l}\n"))
        .collect();
    let (code, err) = measure_file(
        "list.yaml",
        &format!("apiVersion: v1\nkind: List\nitems:\n-{}", &item[1..]),
    );
    assert_eq!(code, 2);
    assert!(
        err.starts_with(
            "Error: RUN:11:36: spec.thresholds.busBandwidthGBps: Threshold \"busBandwidthGBps\": compile threshold expression \"value >\""
        ),
        "{err}"
    );
    assert_eq!(
        measure("foo.example.com"),
        (
            2,
            "Error: RUN:1:13: expected apiVersion nvcre.nvidia.com/v1alpha1 (or the older cre.nvidia.com/v1alpha1), got \"foo.example.com/v1alpha1\"\n".to_string()
        )
    );
}
