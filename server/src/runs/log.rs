//! A run's event log: the frames its stream sends, numbered, kept (bounded) so a client
//! that lost its connection can ask for what it missed (`Last-Event-ID`) and go on live.

use std::collections::VecDeque;
use std::ops::DerefMut;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

/// Most frames a run's log keeps; older ones are dropped (a reconnect that asks for one of
/// them gets what is left).
pub(crate) const LOG_FRAMES: usize = 10_000;

/// Most bytes of frame data a run's log keeps (a large state's `values` frames reach it
/// long before [`LOG_FRAMES`]); the newest frame is always kept.
pub(crate) const LOG_BYTES: usize = 16 * 1024 * 1024;

/// One server-sent event.
#[derive(Debug, Clone)]
pub(crate) struct Frame {
    /// Its number in the run's log (from 0).
    pub(crate) seq: u64,
    /// The attempt of the run that sent it.
    pub(crate) attempt: u32,
    /// The event name (`values`, `updates|child:…`, …).
    pub(crate) event: Arc<str>,
    /// The JSON data.
    pub(crate) data: Arc<str>,
}

#[derive(Debug, Default)]
struct Frames {
    kept: VecDeque<Frame>,
    /// The data bytes of `kept`.
    bytes: usize,
    next: u64,
    done: bool,
}

/// The log of one run.
#[derive(Debug)]
pub(crate) struct RunLog {
    frames: Mutex<Frames>,
    /// The number of frames so far, and whether the run has ended.
    tick: watch::Sender<(u64, bool)>,
    /// Whether frames carry `id:` (the run was made with `stream_resumable`).
    pub(crate) resumable: bool,
    /// The attempt whose frames this log holds (a run picked up again after a restart
    /// starts a new log): frame ids are `<attempt>-<number>`.
    pub(crate) attempt: u32,
    /// Whether its numbers go on across attempts (a relayed log, whose frames every
    /// attempt numbers on from the last one's): an id of any attempt then reads on from
    /// its number.
    continuous: bool,
    /// What `wait` and `join` answer once the run has ended.
    result: Mutex<Option<serde_json::Value>>,
}

/// What a reader gets next.
#[derive(Debug)]
pub(crate) enum Next {
    Frames(Vec<Frame>),
    End,
}

impl RunLog {
    pub(crate) fn new(resumable: bool, attempt: u32) -> Arc<Self> {
        Arc::new(RunLog {
            frames: Mutex::new(Frames::default()),
            tick: watch::Sender::new((0, false)),
            resumable,
            attempt,
            continuous: false,
            result: Mutex::new(None),
        })
    }

    /// A log relayed from another process: its frames come numbered, attempt by attempt.
    #[cfg(feature = "postgres")]
    pub(crate) fn relayed(resumable: bool) -> Arc<Self> {
        Arc::new(RunLog {
            frames: Mutex::new(Frames::default()),
            tick: watch::Sender::new((0, false)),
            resumable,
            attempt: 0,
            continuous: true,
            result: Mutex::new(None),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Frames> {
        self.frames
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Append a frame.
    pub(crate) fn push(&self, event: impl Into<Arc<str>>, data: &serde_json::Value) {
        let data: Arc<str> = data.to_string().into();
        let mut f = self.lock();
        let frame = Frame {
            seq: f.next,
            attempt: self.attempt,
            event: event.into(),
            data,
        };
        self.append(f.deref_mut(), frame);
    }

    /// Append a frame numbered already (a relayed or stored one); one not past the last is
    /// dropped.
    pub(crate) fn push_frame(&self, frame: Frame) {
        let mut f = self.lock();
        self.append(f.deref_mut(), frame);
    }

    fn append(&self, f: &mut Frames, frame: Frame) {
        if f.done || frame.seq < f.next {
            return;
        }
        f.next = frame.seq + 1;
        f.bytes += frame.data.len();
        f.kept.push_back(frame);
        while f.kept.len() > LOG_FRAMES || (f.bytes > LOG_BYTES && f.kept.len() > 1) {
            if let Some(old) = f.kept.pop_front() {
                f.bytes -= old.data.len();
            }
        }
        self.tick.send_replace((f.next, false));
    }

    /// The run has ended: readers get [`Next::End`] once they have read everything.
    pub(crate) fn finish(&self) {
        let mut f = self.lock();
        f.done = true;
        let tick = (f.next, true);
        drop(f);
        self.tick.send_replace(tick);
    }

    /// The frame number to read from after the frame `last_id` a client saw: `-1` and ids of
    /// another attempt read from the start; `None` for an id that is none of ours.
    pub(crate) fn after(&self, last_id: &str) -> Option<u64> {
        let last_id = last_id.trim();
        if last_id == "-1" {
            return Some(0);
        }
        let (attempt, seq) = last_id.split_once('-')?;
        let (attempt, seq) = (attempt.parse::<u32>().ok()?, seq.parse::<u64>().ok()?);
        Some(if attempt == self.attempt || self.continuous {
            seq.checked_add(1)?
        } else {
            0
        })
    }

    /// A frame's id.
    pub(crate) fn id_of(&self, frame: &Frame) -> String {
        format!("{}-{}", frame.attempt, frame.seq)
    }

    /// Keep what `wait` and `join` answer (before [`RunLog::finish`]).
    pub(crate) fn set_result(&self, value: serde_json::Value) {
        *self
            .result
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(value);
    }

    /// What `wait` and `join` will answer, as kept so far (not waiting for the end).
    pub(crate) fn result_now(&self) -> Option<serde_json::Value> {
        self.result
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Wait for the run's end; what `wait` and `join` answer, if it was kept.
    pub(crate) async fn result(&self) -> Option<serde_json::Value> {
        while !matches!(self.read_from(u64::MAX).await, Next::End) {}
        self.result_now()
    }

    /// The bytes of frame data it keeps.
    pub(crate) fn bytes(&self) -> usize {
        self.lock().bytes
    }

    pub(crate) fn is_done(&self) -> bool {
        self.lock().done
    }

    /// The frames from number `from` on, waiting for some if there are none yet.
    pub(crate) async fn read_from(&self, from: u64) -> Next {
        let mut rx = self.tick.subscribe();
        loop {
            {
                let f = self.lock();
                // Relayed numbers may have gaps (frames an attempt did not get to store).
                let skip = f.kept.partition_point(|x| x.seq < from);
                let fresh: Vec<Frame> = f.kept.iter().skip(skip).cloned().collect();
                if !fresh.is_empty() {
                    return Next::Frames(fresh);
                }
                if f.done {
                    return Next::End;
                }
            }
            if rx.changed().await.is_err() {
                return Next::End;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_reader_gets_what_it_missed_then_waits_for_more_then_the_end() {
        let log = RunLog::new(true, 1);
        log.push("metadata", &serde_json::json!({"run_id": "r"}));
        log.push("values", &serde_json::json!({"n": 1}));
        let Next::Frames(first) = log.read_from(1).await else {
            panic!("frames expected")
        };
        assert_eq!(first.len(), 1);
        assert_eq!(&*first[0].event, "values");
        let reader = {
            let log = log.clone();
            tokio::spawn(async move { log.read_from(2).await })
        };
        tokio::task::yield_now().await;
        log.push("values", &serde_json::json!({"n": 2}));
        let Ok(Next::Frames(later)) = reader.await else {
            panic!("frames expected")
        };
        assert_eq!(later[0].seq, 2);
        log.finish();
        assert!(matches!(log.read_from(3).await, Next::End));
    }

    #[test]
    fn a_last_event_id_of_another_attempt_reads_from_the_start() {
        let log = RunLog::new(true, 2);
        assert_eq!(log.after("2-7"), Some(8));
        assert_eq!(log.after("1-57"), Some(0));
        assert_eq!(log.after("-1"), Some(0));
        assert_eq!(log.after("x"), None);
    }

    #[tokio::test]
    async fn the_log_keeps_only_the_newest_frames() {
        let log = RunLog::new(false, 1);
        for n in 0..LOG_FRAMES + 5 {
            log.push("values", &serde_json::json!(n));
        }
        let Next::Frames(all) = log.read_from(0).await else {
            panic!("frames expected")
        };
        assert_eq!(all.len(), LOG_FRAMES);
        assert_eq!(all[0].seq, 5);
    }

    #[tokio::test]
    async fn the_log_keeps_at_most_its_byte_budget_and_always_the_newest_frame() {
        let log = RunLog::new(false, 1);
        // Four fit (each is its text and two quotes), five do not.
        let big = serde_json::Value::String("x".repeat(LOG_BYTES / 4 - 10));
        for _ in 0..5 {
            log.push("values", &big);
        }
        let Next::Frames(kept) = log.read_from(0).await else {
            panic!("frames expected")
        };
        assert_eq!(kept.iter().map(|f| f.seq).collect::<Vec<_>>(), [1, 2, 3, 4]);
        let huge = serde_json::Value::String("y".repeat(LOG_BYTES * 2));
        log.push("values", &huge);
        let Next::Frames(kept) = log.read_from(0).await else {
            panic!("frames expected")
        };
        assert_eq!(kept.iter().map(|f| f.seq).collect::<Vec<_>>(), [5]);
    }
}
