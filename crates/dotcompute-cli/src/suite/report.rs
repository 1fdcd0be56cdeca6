//! The suite's tables: the summary printed at the end of a run, and the Markdown of
//! `docs/benchmarks.md` made from the JSON of runs (`dotcompute bench-report`).

use super::{Figure, Run};
use std::fmt::Write;

/// A figure's ratio in words: how it compares with its reference, and whether that is
/// good (rates above 1 are faster than the reference; times above 1 are slower).
fn ratio_text(f: &Figure) -> String {
    match f.ratio {
        Some(r) if f.unit.higher_is_better() => format!("{r:.3}"),
        Some(r) => format!("{r:.3} (time)"),
        None => "—".into(),
    }
}

fn fmt_value(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

/// One Markdown table of `figures`.
pub fn table(figures: &[Figure]) -> String {
    let mut out = String::from(
        "| bench | backend | size | case | value | reference | ratio | target | median / min / max, reps, clock |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for f in figures {
        let case = match &f.precision {
            Some(p) => format!("{} [{p}]", f.ours.case),
            None => f.ours.case.clone(),
        };
        let unit = serde_json::to_value(f.unit)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let reference = f.reference.as_ref().map_or("—".to_string(), |r| {
            let on = if r.backend != f.ours.backend {
                format!(" ({})", r.backend)
            } else {
                String::new()
            };
            format!("{}{on}: {} {unit}", r.case, fmt_value(r.value))
        });
        let t = &f.ours.time;
        // Microseconds below a millisecond, else milliseconds.
        let (scale, time_unit) = if t.median_s < 1e-3 {
            (1e6, "µs")
        } else {
            (1e3, "ms")
        };
        let ms = |s: f64| format!("{:.3}", s * scale);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {case}{} | {} {unit} | {reference} | {} | {} | {} / {} / {} {time_unit}, {}, {} |",
            f.bench,
            f.ours.backend,
            f.size,
            if f.verified { "" } else { " (unverified)" },
            fmt_value(f.ours.value),
            ratio_text(f),
            f.target.as_deref().unwrap_or(""),
            ms(t.median_s),
            ms(t.min_s),
            ms(t.max_s),
            t.reps,
            t.clock,
        );
    }
    out
}

/// The summary at the end of a run.
pub fn summary_table(run: &Run) -> String {
    let mut out = format!(
        "summary: {} figure(s) on {}; ratio = ours / reference (rates: above 1 beats the reference; \"(time)\": above 1 is slower)\n\n",
        run.figures.len(),
        run.devices.join(", ")
    );
    out += &table(&run.figures);
    if !run.failures.is_empty() {
        out += &format!("\n{} failure(s):\n", run.failures.len());
        for f in &run.failures {
            out += &format!("- {f}\n");
        }
    }
    out
}

/// The generated part of `docs/benchmarks.md`: per run its date, devices and command,
/// the notes, then the table.
pub fn markdown(runs: &[(String, Run)]) -> String {
    let mut out = String::new();
    for (file, run) in runs {
        let _ = writeln!(out, "### {} ({})\n", run.devices.join(", "), run.date);
        let _ = writeln!(
            out,
            "Command: `{}`{}; host threads: {}; JSON: `{file}`.\n",
            run.command,
            if run.quick { " (quick)" } else { "" },
            run.host_threads
        );
        out += &table(&run.figures);
        let notes: Vec<String> = run
            .figures
            .iter()
            .filter_map(|f| {
                f.note
                    .as_ref()
                    .map(|n| format!("- {} / {} on {}: {n}", f.bench, f.ours.case, f.ours.backend))
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        if !notes.is_empty() {
            out += "\nNotes:\n\n";
            out += &notes.join("\n");
            out += "\n";
        }
        if !run.failures.is_empty() {
            out += "\nFailures:\n\n";
            for f in &run.failures {
                let _ = writeln!(out, "- {f}");
            }
        }
        out += "\n";
    }
    out
}
