//! SVG plots of a run (plotters): matrix-product TFLOP/s against size per path and
//! precision, and bandwidth against size (vector add and its copy reference).

use super::{Figure, Run};
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

/// A plotted line: label → (x, y) points.
type Series = BTreeMap<String, Vec<(f64, f64)>>;

/// Both the figures' own values and their references' (each labelled by case, precision
/// and backend), for the figures of `bench`.
fn series(figures: &[Figure], bench: &str) -> Series {
    let mut s = Series::new();
    for f in figures.iter().filter(|f| f.bench == bench) {
        let p = f
            .precision
            .as_ref()
            .map_or(String::new(), |p| format!(" [{p}]"));
        let own = format!("{}{p} ({})", f.ours.case, f.ours.backend);
        s.entry(own).or_default().push((f.x, f.ours.value));
        if let Some(r) = &f.reference {
            let label = format!("{} ({})", r.case, r.backend);
            let points = s.entry(label).or_default();
            if !points.iter().any(|&(x, _)| x == f.x) {
                points.push((f.x, r.value));
            }
        }
    }
    for points in s.values_mut() {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        points.dedup_by(|a, b| a.0 == b.0);
    }
    s.retain(|_, p| p.len() >= 2);
    s
}

fn draw(path: &Path, title: &str, x_label: &str, y_label: &str, s: &Series) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in s.values().flatten() {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d((x0 * 0.9..x1 * 1.1).log_scale(), 0.0..y1 * 1.1)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()
        .map_err(|e| err(&e))?;
    for (i, (label, points)) in s.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|e| err(&e))?
            .label(label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}

/// Writes every plot the run has data for into `dir`; returns the files written.
pub fn write_all(run: &Run, dir: &Path) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut written = Vec::new();
    let plots = [
        (
            "matmul",
            "matmul.svg",
            "Square matrix product",
            "n (n×n · n×n)",
            "TFLOP/s",
        ),
        (
            "vector-add",
            "bandwidth.svg",
            "Vector add and device-to-device copy",
            "f32 elements",
            "GB/s",
        ),
    ];
    for (bench, file, title, x, y) in plots {
        let s = series(&run.figures, bench);
        if s.is_empty() {
            continue;
        }
        let path = dir.join(file);
        draw(&path, title, x, y, &s)?;
        written.push(path.display().to_string());
    }
    Ok(written)
}
