//! The report's Bandwidth, Transport and Goodput blocks, as `workloadrun report` prints them.

use super::api::{BandwidthMeasurementStatus, GoodputMeasurementStatus};
use super::goodput::goodput_values;

/// A message size in binary units with integer division: `16 GB`, `4 MB`, `8 KB`, `8 B`.
pub fn format_size(bytes: i64) -> String {
    const KB: i64 = 1 << 10;
    const MB: i64 = 1 << 20;
    const GB: i64 = 1 << 30;
    if bytes >= GB {
        format!("{} GB", bytes / GB)
    } else if bytes >= MB {
        format!("{} MB", bytes / MB)
    } else if bytes >= KB {
        format!("{} KB", bytes / KB)
    } else {
        format!("{bytes} B")
    }
}

fn row(size: &str, alg: &str, bus: &str, samples: &str) -> String {
    format!("    {size:<10} {alg:<12} {bus:<12} {samples}")
}

/// Control characters of a transport name, escaped (a log line is untrusted text; see
/// [`nvcre_engine::printable`]).
fn escape(s: &str) -> String {
    nvcre_engine::printable(s, &[]).into_owned()
}

/// `Bandwidth:`, the column header and one row per message size (status order), then
/// `Transport: IB, Socket` when transports were seen. `Bandwidth: no data` without results.
pub fn bandwidth_block(status: &BandwidthMeasurementStatus) -> String {
    let mut out = String::new();
    if status.results.is_empty() {
        out.push_str("Bandwidth: no data\n");
    } else {
        out.push_str("Bandwidth:\n");
        out.push_str(row("Size", "AlgBW", "BusBW", "Samples").trim_end());
        out.push('\n');
        for r in &status.results {
            out.push_str(&row(
                &format_size(r.size_bytes),
                &format!("{} GB/s", r.alg_bw),
                &format!("{} GB/s", r.bus_bw),
                &r.samples.to_string(),
            ));
            out.push('\n');
        }
    }
    if !status.transport.is_empty() {
        let names: Vec<String> = status.transport.iter().map(|t| escape(t)).collect();
        out.push_str(&format!("Transport: {}\n", names.join(", ")));
    }
    out
}

/// `Goodput:` then `Avg Runtime Goodput:  0.89 (89%)`, `Avg TFLOPs/GPU:  138.5` and
/// `Avg Step Time:  132.56s`, each only when measured (positive). `Goodput: no data` when
/// none is.
pub fn goodput_block(status: &GoodputMeasurementStatus) -> String {
    let (ratio, tflops, step) = goodput_values(status);
    let mut lines = Vec::new();
    if let Some(r) = ratio {
        lines.push(format!(
            "    Avg Runtime Goodput:  {r:.2} ({:.0}%)",
            r * 100.0
        ));
    }
    if let Some(t) = tflops {
        lines.push(format!("    Avg TFLOPs/GPU:  {t:.1}"));
    }
    if let Some(s) = step {
        lines.push(format!("    Avg Step Time:  {s:.2}s"));
    }
    if lines.is_empty() {
        return "Goodput: no data\n".to_string();
    }
    format!("Goodput:\n{}\n", lines.join("\n"))
}
