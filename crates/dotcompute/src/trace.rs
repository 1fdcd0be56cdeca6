//! Timelines as Chrome / Perfetto trace JSON: one process per device, one thread (track)
//! per stream, one complete event (`"ph": "X"`) per timed launch, copy, fill, transfer or
//! graph. Open the file in <https://ui.perfetto.dev> or `chrome://tracing` to see which
//! work overlapped.
//!
//! ```
//! use dotcompute::{prelude::*, trace};
//! let device = Device::cpu();
//! device.set_profiling(true);
//! let mut x = device.alloc_filled(1000, 1.0f32)?;
//! x.fill(2.0)?;
//! let timings = device.take_timings();
//! let json = trace::chrome_trace_json(&device.label(), &timings);
//! assert!(json.contains("\"traceEvents\""));
//! # Ok::<(), dotcompute::Error>(())
//! ```

use crate::{Device, Result, Timing};

/// JSON string escaping for labels.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// The trace of one device's timings. Timings without a start time (a backend that could
/// not tell) are laid end to end on their stream's track.
pub fn chrome_trace_json(device: &str, timings: &[Timing]) -> String {
    let mut events = Vec::with_capacity(timings.len() + 8);
    events.push(format!(
        r#"{{"name":"process_name","ph":"M","pid":1,"tid":0,"args":{{"name":"{}"}}}}"#,
        escape(device)
    ));
    let mut streams: Vec<u32> = timings.iter().map(|t| t.stream.0).collect();
    streams.sort_unstable();
    streams.dedup();
    for s in &streams {
        let name = if *s == 0 {
            "stream 0 (default)".to_string()
        } else {
            format!("stream {s}")
        };
        events.push(format!(
            r#"{{"name":"thread_name","ph":"M","pid":1,"tid":{s},"args":{{"name":"{name}"}}}}"#
        ));
    }
    let mut cursor = std::collections::HashMap::<u32, f64>::new();
    for t in timings {
        let dur_us = t.duration.as_secs_f64() * 1e6;
        let end = cursor.entry(t.stream.0).or_insert(0.0);
        let ts_us = t.start.map(|d| d.as_secs_f64() * 1e6).unwrap_or(*end);
        *end = ts_us + dur_us;
        events.push(format!(
            r#"{{"name":"{}","cat":"{}","ph":"X","pid":1,"tid":{},"ts":{ts_us:.3},"dur":{dur_us:.3}}}"#,
            escape(&t.label),
            if t.device_time { "device" } else { "host" },
            t.stream.0
        ));
    }
    format!(
        "{{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n{}\n]}}\n",
        events.join(",\n")
    )
}

impl Device {
    /// Takes the timings recorded since profiling was turned on (or since the last take)
    /// and writes them to `path` as a Chrome / Perfetto trace; returns how many events
    /// were written. If the file cannot be written, the timings stay with the device, so
    /// a second call (to a good path) writes them.
    pub fn write_trace(&self, path: impl AsRef<std::path::Path>) -> Result<usize> {
        let timings = self.take_timings();
        let json = chrome_trace_json(&self.label(), &timings);
        if let Err(e) = std::fs::write(path.as_ref(), json) {
            self.keep_unwritten(timings);
            return Err(crate::Error::Range {
                op: "write_trace",
                detail: format!("cannot write {}: {e}", path.as_ref().display()),
            });
        }
        Ok(timings.len())
    }
}
