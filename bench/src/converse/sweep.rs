//! `converse --sweep`: the bench at several numbers of calls, each on a fresh server (and, with
//! `--compare`, again on another build), and the chart of the server's added latency against
//! live calls.

use std::fmt::Write;

use serde_json::{Value, json};

use super::args::ConverseArgs;

/// The targets the chart marks: added latency p99 and barge-in stop p99, in milliseconds.
const ADDED_P99_TARGET: f64 = 50.0;
const BARGE_P99_TARGET: f64 = 40.0;

/// Runs every point with `one` (the bench's single run) and returns the sweep's report (each
/// run's report without its samples).
pub async fn run<F, R>(args: ConverseArgs, one: F) -> anyhow::Result<Value>
where
    F: Fn(ConverseArgs) -> R,
    R: std::future::Future<Output = anyhow::Result<Value>>,
{
    if let Some(from) = &args.chart_from {
        let report: Value = serde_json::from_slice(&std::fs::read(from)?)?;
        let points = report["points"].as_array().cloned().unwrap_or_default();
        anyhow::ensure!(
            !points.is_empty(),
            "{} holds no sweep's points",
            from.display()
        );
        if let Some(path) = &args.chart {
            std::fs::write(path, chart(&points))?;
        }
        return Ok(report);
    }
    anyhow::ensure!(
        args.chart.is_none() || !args.sweep.is_empty(),
        "--chart draws a sweep: give --sweep or --chart-from"
    );
    let mut points = Vec::new();
    let mut runs = Vec::new();
    for &calls in &args.sweep {
        let builds = std::iter::once(("this", args.spawn.clone()))
            .chain(args.compare.clone().map(|b| ("compared", Some(b))));
        for (build, spawn) in builds {
            let point_args = ConverseArgs {
                calls,
                spawn,
                sweep: Vec::new(),
                ..args.clone()
            };
            eprintln!("converse: {calls} calls on the {build} build");
            let mut report = one(point_args).await?;
            points.push(point(build, calls, &report));
            if let Some(r) = report.as_object_mut() {
                r.remove("samples");
                r.insert("build".into(), json!(build));
            }
            runs.push(report);
        }
    }
    if let Some(path) = &args.chart {
        std::fs::write(path, chart(&points))?;
    }
    Ok(json!({
        "benchmark": "converse-sweep",
        "compared": args.compare.as_ref().map(|p| p.display().to_string()),
        "points": points,
        "runs": runs,
    }))
}

/// One run's figures for the chart and the table.
fn point(build: &str, calls: usize, r: &Value) -> Value {
    json!({
        "build": build,
        "calls": calls,
        "calls_failed": r["calls_failed"],
        "turns": r["turns"],
        "turns_answered": r["turns_answered"],
        "added_p50_ms": r["added_latency_ms"]["p50"],
        "added_p99_ms": r["added_latency_ms"]["p99"],
        "barge_in_p99_ms": r["barge_in_stop_ms"]["p99"],
        "false_barge_ins": r["false_barge_ins"],
        "barge_ins_audio_resumed": r["barge_ins_audio_resumed"],
        "server_cpu_core_secs_per_sec_per_call": r["server_cpu_core_secs_per_sec_per_call"],
        "server_rss_kib_per_call": r["server_rss_kib_per_call"],
        "machine_idle_percent": r["machine_idle_percent_all_calls_live"],
        "bench_cpu_percent": r["bench_cpu_percent"],
    })
}

/// The chart's frame: its size and margins, and the scales of its axes.
struct Frame {
    w: f64,
    h: f64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    max_calls: f64,
    top_ms: f64,
}

impl Frame {
    fn x(&self, calls: f64) -> f64 {
        self.left + calls / self.max_calls * (self.w - self.left - self.right)
    }

    fn y(&self, ms: f64) -> f64 {
        self.top + (1.0 - ms.min(self.top_ms) / self.top_ms) * (self.h - self.top - self.bottom)
    }
}

/// The latency axis ends here at most; a point above it is drawn at the top with its value.
const AXIS_CAP_MS: f64 = 200.0;

/// The series drawn, by their key in a point.
const SERIES: [(&str, &str, &str); 3] = [
    ("added_p50_ms", "added p50", "#1f77b4"),
    ("added_p99_ms", "added p99", "#d62728"),
    ("barge_in_p99_ms", "barge-in stop p99", "#2ca02c"),
];

/// The chart: added latency p50 and p99 and barge-in stop p99 against live calls, per build,
/// with the targets dashed.
fn chart(points: &[Value]) -> String {
    let highest = points
        .iter()
        .flat_map(|p| SERIES.iter().filter_map(|(k, _, _)| p[*k].as_f64()))
        .fold(ADDED_P99_TARGET * 1.2, f64::max);
    let f = Frame {
        w: 780.0,
        h: 420.0,
        left: 60.0,
        right: 210.0,
        top: 30.0,
        bottom: 50.0,
        max_calls: points
            .iter()
            .filter_map(|p| p["calls"].as_f64())
            .fold(1.0, f64::max),
        top_ms: ((highest.min(AXIS_CAP_MS)) / 20.0).ceil() * 20.0,
    };
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\" role=\"img\">\n\
         <title>Latency the server adds to a turn, against live conversing calls</title>\n\
         <rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>\n",
        w = f.w,
        h = f.h
    );
    axes(&mut svg, &f, points);
    let mut legend = 0;
    for build in ["this", "compared"] {
        let pts: Vec<&Value> = points.iter().filter(|p| p["build"] == build).collect();
        if pts.is_empty() {
            continue;
        }
        for series in SERIES {
            line(&mut svg, &f, &pts, series, build == "compared", legend);
            legend += 1;
        }
    }
    svg.push_str("</svg>\n");
    svg
}

/// The grid, the ticks of both axes, their names and the targets.
fn axes(svg: &mut String, f: &Frame, points: &[Value]) {
    for i in 0..=5 {
        let ms = f.top_ms * f64::from(i) / 5.0;
        let _ = writeln!(
            svg,
            "<line x1=\"{}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{ms:.0}</text>",
            f.left,
            f.w - f.right,
            f.left - 6.0,
            f.y(ms) + 4.0,
            y = f.y(ms)
        );
    }
    for p in points.iter().filter(|p| p["build"] == "this") {
        let calls = p["calls"].as_f64().unwrap_or(0.0);
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{calls:.0}</text>",
            f.x(calls),
            f.h - f.bottom + 18.0
        );
    }
    let mid = (f.top + f.h - f.bottom) / 2.0;
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">live conversing calls</text>\
         <text x=\"14\" y=\"{mid:.1}\" transform=\"rotate(-90 14 {mid:.1})\" \
         text-anchor=\"middle\">ms</text>",
        (f.left + f.w - f.right) / 2.0,
        f.h - 10.0,
    );
    // The added target's label above its line, the barge-in's below: they are close.
    for (ms, label, dy) in [
        (ADDED_P99_TARGET, "added p99 target", -4.0),
        (BARGE_P99_TARGET, "barge-in p99 target", 13.0),
    ] {
        let _ = writeln!(
            svg,
            "<line x1=\"{}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#999\" \
             stroke-dasharray=\"4 4\"/><text x=\"{}\" y=\"{:.1}\" fill=\"#555\">{label} {ms:.0} ms</text>",
            f.left,
            f.w - f.right,
            f.left + 6.0,
            f.y(ms) + dy,
            y = f.y(ms)
        );
    }
}

/// One series of one build: its line, its points (a point past the axis at the top, with its
/// value), and its entry in the legend.
fn line(
    svg: &mut String,
    f: &Frame,
    pts: &[&Value],
    (key, name, colour): (&str, &str, &str),
    before: bool,
    legend: i32,
) {
    let dash = if before {
        " stroke-dasharray=\"2 3\" opacity=\"0.7\""
    } else {
        ""
    };
    let xy: Vec<(f64, f64, f64)> = pts
        .iter()
        .filter_map(|p| {
            let (c, ms) = (p["calls"].as_f64()?, p[key].as_f64()?);
            Some((f.x(c), f.y(ms), ms))
        })
        .collect();
    let joined: Vec<String> = xy
        .iter()
        .map(|(x, y, _)| format!("{x:.1},{y:.1}"))
        .collect();
    let _ = writeln!(
        svg,
        "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{dash} points=\"{}\"/>",
        joined.join(" ")
    );
    for (x, y, ms) in &xy {
        let _ = write!(
            svg,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{colour}\"{dash}/>"
        );
        if *ms > f.top_ms {
            let _ = write!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{colour}\" text-anchor=\"end\">{ms:.0}</text>",
                x - 5.0,
                y + 4.0 + if before { 12.0 } else { 0.0 }
            );
        }
    }
    svg.push('\n');
    let (lx, ly) = (f.w - f.right + 10.0, f.top + 18.0 * f64::from(legend));
    let _ = writeln!(
        svg,
        "<line x1=\"{lx}\" x2=\"{}\" y1=\"{ly:.1}\" y2=\"{ly:.1}\" stroke=\"{colour}\" \
         stroke-width=\"2\"{dash}/><text x=\"{}\" y=\"{:.1}\">{name}{}</text>",
        lx + 18.0,
        lx + 22.0,
        ly + 4.0,
        if before { ", before" } else { "" }
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chart_draws_each_series_and_the_targets() {
        let points: Vec<Value> = [(100, 10.0, 20.0, 15.0), (1000, 12.0, 40.0, 25.0)]
            .iter()
            .map(|(c, p50, p99, b)| {
                json!({"build": "this", "calls": c, "added_p50_ms": p50,
                    "added_p99_ms": p99, "barge_in_p99_ms": b})
            })
            .collect();
        let svg = chart(&points);
        assert_eq!(svg.matches("<polyline").count(), 3);
        assert!(svg.contains("added p99 target 50 ms"), "{svg}");
        assert!(svg.contains(">1000</text>"), "{svg}");
        assert!(svg.ends_with("</svg>\n"));
        // A point past the axis's cap is drawn at the top with its value.
        let high = vec![json!({"build": "this", "calls": 1000, "added_p50_ms": 10.0,
            "added_p99_ms": 20.0, "barge_in_p99_ms": 564.0})];
        assert!(chart(&high).contains(">564</text>"), "{}", chart(&high));
    }
}
