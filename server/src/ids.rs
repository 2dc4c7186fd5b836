//! The ids and times the API hands out: UUID-shaped thread, run and assistant ids, and
//! RFC 3339 timestamps, as LangGraph's clients expect them.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn random16() -> [u8; 16] {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // No system randomness: fall back to a hash of the clock and a counter, still unique
        // within the process.
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let seed = [
            now_ms().to_le_bytes(),
            COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes(),
        ]
        .concat();
        bytes.copy_from_slice(&blake3::hash(&seed).as_bytes()[..16]);
    }
    bytes
}

fn format_uuid(b: [u8; 16]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// A random UUID (version 4): a new thread's id.
pub(crate) fn uuid4() -> String {
    let mut b = random16();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    format_uuid(b)
}

/// A time-ordered UUID (version 7): a new run's id, so newer runs sort later.
pub(crate) fn uuid7() -> String {
    let mut b = random16();
    let ms = now_ms().to_be_bytes();
    b[..6].copy_from_slice(&ms[2..8]);
    b[6] = (b[6] & 0x0f) | 0x70;
    b[8] = (b[8] & 0x3f) | 0x80;
    format_uuid(b)
}

/// The assistant id of a registered graph: a UUID derived from its name, the same in every
/// process (LangGraph derives its default assistants' ids from the graph name too).
pub(crate) fn assistant_id(graph: &str) -> String {
    let hash = blake3::hash(format!("stategraph assistant {graph}").as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&hash.as_bytes()[..16]);
    b[6] = (b[6] & 0x0f) | 0x50;
    b[8] = (b[8] & 0x3f) | 0x80;
    format_uuid(b)
}

/// `ms` since the epoch as RFC 3339 in UTC with microseconds, as LangGraph's server writes
/// times (`2026-12-06T22:10:24.123000+00:00`).
pub(crate) fn rfc3339(ms: i64) -> String {
    let utc = stategraph::checkpoints::inspect::format_utc_ms(u64::try_from(ms).unwrap_or(0));
    format!("{}000+00:00", utc.trim_end_matches('Z'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_in_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000000+00:00");
        assert_eq!(
            rfc3339(1_796_595_024_123),
            "2026-12-06T22:10:24.123000+00:00"
        );
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000000+00:00");
    }

    #[test]
    fn run_ids_are_time_ordered_uuids() {
        let a = uuid7();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = uuid7();
        assert!(a < b, "{a} then {b}");
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "7");
        assert_eq!(&uuid4()[14..15], "4");
    }

    #[test]
    fn an_assistant_id_depends_only_on_the_graph_name() {
        assert_eq!(assistant_id("chain"), assistant_id("chain"));
        assert_ne!(assistant_id("chain"), assistant_id("agent"));
    }
}
