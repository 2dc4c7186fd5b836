//! Output helpers: one JSON object per line with keys in insertion order, rounding as
//! Python's `round`, peak RSS from `/proc/self/status`.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

/// One output record; keys keep the order they were pushed in (as `langgraph_bench.py`
/// prints them).
#[derive(Default)]
pub(crate) struct Record(Vec<(String, Value)>);

impl Record {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Append `key: value`.
    pub(crate) fn kv(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.0.push((key.to_owned(), value.into()));
        self
    }

    /// Print the record as one line of JSON on stdout.
    pub(crate) fn emit(self) {
        match serde_json::to_string(&self) {
            Ok(line) => println!("{line}"),
            Err(e) => eprintln!("# cannot serialize a record: {e}"),
        }
    }
}

impl Serialize for Record {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// `x` rounded to `digits` decimals.
pub(crate) fn round(x: f64, digits: i32) -> f64 {
    let p = 10f64.powi(digits);
    (x * p).round() / p
}

/// The median, as Python's `statistics.median` computes it.
pub(crate) fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The minimum (NaN for an empty slice).
pub(crate) fn min(xs: &[f64]) -> f64 {
    xs.iter().copied().fold(f64::NAN, f64::min)
}

/// A `kB` line of `/proc/self/status`, in MB.
fn status_mb(key: &str) -> f64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<f64>()
                .ok()
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Peak resident set size of this process so far (VmHWM), MB, one decimal.
pub(crate) fn peak_rss_mb() -> f64 {
    round(status_mb("VmHWM:"), 1)
}

/// Current resident set size (VmRSS), MB, one decimal.
pub(crate) fn rss_mb() -> f64 {
    round(status_mb("VmRSS:"), 1)
}
