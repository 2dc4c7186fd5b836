//! Time stamps as milliseconds since the Unix epoch, and as ISO-8601 UTC text.

use std::time::{SystemTime, UNIX_EPOCH};

/// `t` in milliseconds since the Unix epoch: 0 for a time before it, `u64::MAX` for one too
/// far after it to count.
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Milliseconds since the Unix epoch as ISO-8601 UTC with milliseconds
/// (`2024-05-01T12:00:00.000Z`), computed without a date library.
pub fn format_utc_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let millis = ms % 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (hour, minute, second) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Days to a civil date (proleptic Gregorian), after Howard Hinnant's `civil_from_days`.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{millis:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_count_from_the_epoch_and_clamp_before_it() {
        use std::time::Duration;
        assert_eq!(unix_ms(UNIX_EPOCH + Duration::from_millis(1_700)), 1_700);
        assert_eq!(unix_ms(UNIX_EPOCH - Duration::from_secs(1)), 0);
    }

    #[test]
    fn times_format_as_iso_8601_utc() {
        assert_eq!(format_utc_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_utc_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(format_utc_ms(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(format_utc_ms(4_107_542_399_999), "2100-02-28T23:59:59.999Z");
        assert_eq!(
            format_utc_ms(253_402_300_799_999),
            "9999-12-31T23:59:59.999Z"
        );
    }
}
