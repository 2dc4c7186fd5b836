//! [`RunBook`]: the runs and delivery receipts of a store, kept in memory (the
//! [`MemorySaver`](crate::MemorySaver)'s), with the rules every saver follows.

use std::collections::HashMap;

use crate::run::newest_first;
use crate::{CheckpointError, DeliveryReceipt, RunId, RunRecord, ThreadId};

/// Runs by id, and the one receipt of each run that has one.
#[derive(Debug, Default)]
pub(crate) struct RunBook {
    runs: HashMap<RunId, RunRecord>,
    receipts: HashMap<RunId, DeliveryReceipt>,
}

impl RunBook {
    /// Store `run`, or update the stored one under the transition rule.
    pub(crate) fn put(&mut self, run: RunRecord) -> Result<(), CheckpointError> {
        let run = match self.runs.get(&run.run_id) {
            Some(stored) => stored.updated_by(run)?,
            None => run,
        };
        self.runs.insert(run.run_id.clone(), run);
        Ok(())
    }

    /// A stored run, only if it runs on `thread` when one is given.
    pub(crate) fn get(&self, thread: Option<&ThreadId>, run: &RunId) -> Option<RunRecord> {
        self.runs
            .get(run)
            .filter(|r| thread.is_none_or(|t| *t == r.thread))
            .cloned()
    }

    /// The runs of `thread`, newest first.
    pub(crate) fn list(&self, thread: &ThreadId) -> Vec<RunRecord> {
        let mut out: Vec<RunRecord> = self
            .runs
            .values()
            .filter(|r| r.thread == *thread)
            .cloned()
            .collect();
        out.sort_by(newest_first);
        out
    }

    /// Store `receipt` for a stored run unless it has one; whether this call stored it.
    pub(crate) fn put_receipt(
        &mut self,
        run: &RunId,
        receipt: DeliveryReceipt,
    ) -> Result<bool, CheckpointError> {
        if !self.runs.contains_key(run) {
            return Err(CheckpointError::RunNotFound { run: run.clone() });
        }
        if self.receipts.contains_key(run) {
            return Ok(false);
        }
        self.receipts.insert(run.clone(), receipt);
        Ok(true)
    }

    /// A run's receipt.
    pub(crate) fn receipt(&self, run: &RunId) -> Option<DeliveryReceipt> {
        self.receipts.get(run).cloned()
    }

    /// Forget the runs of `thread` and their receipts.
    pub(crate) fn delete_thread(&mut self, thread: &ThreadId) {
        let receipts = &mut self.receipts;
        self.runs.retain(|id, r| {
            let keep = r.thread != *thread;
            if !keep {
                receipts.remove(id);
            }
            keep
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RunStatus;

    fn run(
        id: &str,
        thread: &str,
        status: RunStatus,
        at: u64,
    ) -> Result<RunRecord, CheckpointError> {
        Ok(RunRecord::new(
            RunId::new(id)?,
            ThreadId::new(thread)?,
            status,
            at,
        ))
    }

    #[test]
    fn one_receipt_per_stored_run_and_deleting_a_thread_forgets_both() -> Result<(), CheckpointError>
    {
        let mut book = RunBook::default();
        let r1 = RunId::new("r1")?;
        let receipt = DeliveryReceipt::new(serde_json::json!({"presented": 0}));
        assert!(matches!(
            book.put_receipt(&r1, receipt.clone()),
            Err(CheckpointError::RunNotFound { .. })
        ));
        book.put(run("r1", "t", RunStatus::Running, 1)?)?;
        book.put(run("r2", "t", RunStatus::Pending, 2)?)?;
        book.put(run("r3", "u", RunStatus::Pending, 3)?)?;
        assert!(book.put_receipt(&r1, receipt.clone())?);
        assert!(!book.put_receipt(&r1, DeliveryReceipt::new(serde_json::json!(1)))?);
        assert_eq!(book.receipt(&r1), Some(receipt));
        let t = ThreadId::new("t")?;
        let ids: Vec<String> = book
            .list(&t)
            .into_iter()
            .map(|r| r.run_id.to_string())
            .collect();
        assert_eq!(ids, ["r2", "r1"]);
        assert!(book.get(Some(&ThreadId::new("u")?), &r1).is_none());
        book.delete_thread(&t);
        assert!(book.get(None, &r1).is_none() && book.receipt(&r1).is_none());
        assert!(book.get(None, &RunId::new("r3")?).is_some());
        Ok(())
    }
}
