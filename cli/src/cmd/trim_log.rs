//! `stategraph trim-log URL --older-than 30d`: delete the fenced-write log of queued runs that
//! ended longer ago than that (PostgreSQL only: a file keeps no run queue).

use std::path::Path;
use std::time::{Duration, SystemTime};

use serde_json::json;
use stategraph_checkpoints::inspect::{format_utc_ms, unix_ms};

use crate::failure::{Failure, Outcome};
use crate::file::{file_error, is_url, open_database};
use crate::output::{emit, json_text, Output};

/// Trim the write log of the runs in `file`'s queue that ended more than `older_than` ago.
pub(super) async fn run(out: Output, file: &Path, older_than: Duration) -> Outcome {
    if !is_url(file) {
        return Err(Failure::usage(format!(
            "trim-log works on a postgres:// URL: {} is a file, whose runs keep no write log",
            file.display()
        )));
    }
    let cutoff = SystemTime::now()
        .checked_sub(older_than)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let saver = open_database(file).await?;
    let deleted = saver
        .queue()
        .trim_write_log(cutoff)
        .await
        .map_err(|e| file_error(file, e))?;
    let before = format_utc_ms(unix_ms(cutoff));
    if out.json {
        let doc = json!({ "deleted": deleted, "ended_before": before });
        return Ok(emit(&json_text(&doc))?);
    }
    Ok(emit(&format!(
        "deleted {deleted} write-log row(s) of runs that ended before {before}\n"
    ))?)
}

/// A duration as `--older-than` takes it: a whole number and a unit, `s`, `m`, `h` or `d`.
pub(crate) fn parse_age(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let seconds_per = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(format!("{text:?} needs a unit: s, m, h or d (e.g. 30d)")),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} does not start with a whole number (e.g. 30d)"))?;
    n.checked_mul(seconds_per)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{text:?} is too long a time"))
}

#[cfg(test)]
mod tests {
    use super::parse_age;
    use std::time::Duration;

    #[test]
    fn ages_take_a_whole_number_and_a_unit() {
        assert_eq!(parse_age("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_age("0m"), Ok(Duration::ZERO));
        assert_eq!(parse_age("12h"), Ok(Duration::from_secs(12 * 3_600)));
        assert_eq!(parse_age("30d"), Ok(Duration::from_secs(30 * 86_400)));
        for bad in ["", "30", "d", "1.5d", "-1d", "3w", "99999999999999999999d"] {
            assert!(parse_age(bad).is_err(), "{bad:?}");
        }
    }
}
