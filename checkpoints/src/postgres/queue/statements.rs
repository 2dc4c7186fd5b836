//! The run queue's statements (tables `sg_run_queue` and `sg_run_writes`, see
//! docs/design.md). Times of leases are the server's (`now()`), so workers on machines whose
//! clocks disagree still agree on when a lease ends.

/// Lease the oldest runnable run: a pending run that is the oldest open run of a thread
/// with no running run, or a running run whose lease has ended (its worker stopped
/// heart-beating). Rows other workers are leasing are skipped, not waited for. The unique
/// index `sg_run_queue_one_running` refuses a second running run of a thread, whatever
/// two workers race to lease. `$1` worker, `$2` lease seconds, `$3` now (ms).
pub(super) const LEASE: &str = "SELECT * FROM {s}.sg_lease_v3($1, $2, $3)";

/// The function [`LEASE`] calls, created with the tables: a function so that the server
/// plans its statement once per connection instead of on every lease (0.3–0.5 ms of parsing
/// and planning each, in the server log of the `workers` bench; decision 0059). Its last
/// column is the run's command as JSON: the `command` column, or a bare resume from the
/// `resume` column, where a command that only resumes is kept (so workers of the build that
/// added `resume`, which lease with `sg_lease_v2`, still run it).
pub(crate) const LEASE_FUNCTION: &str = r#"
CREATE OR REPLACE FUNCTION {s}.sg_lease_v3(p_worker text, p_secs float8, p_now int8)
RETURNS TABLE(o_run text, o_thread text, o_epoch int8, o_input text, o_attempts int4,
    o_stop text, o_created int8, o_resumed bool, o_command text)
LANGUAGE plpgsql AS $fn$
BEGIN
    RETURN QUERY
    WITH candidate AS (
        SELECT q.run_id FROM {s}.sg_run_queue q
        WHERE q.status IN ('pending', 'running')
          AND CASE WHEN q.status = 'running' THEN q.lease_until < now()
              ELSE NOT EXISTS (
                  SELECT 1 FROM {s}.sg_run_queue o
                  WHERE o.thread = q.thread AND o.status IN ('pending', 'running')
                    AND (o.status = 'running' OR o.seq < q.seq))
              END
        ORDER BY q.seq
        LIMIT 1
        FOR UPDATE OF q SKIP LOCKED
    )
    UPDATE {s}.sg_run_queue q
    SET status = 'running', epoch = q.epoch + 1, worker = p_worker,
        lease_until = now() + make_interval(secs => p_secs), attempts = q.attempts + 1,
        updated_at = p_now
    FROM candidate
    WHERE q.run_id = candidate.run_id
    RETURNING q.run_id, q.thread, q.epoch, q.input, q.attempts, q.stop, q.created_at,
        EXISTS (SELECT 1 FROM {s}.sg_run_writes w
                WHERE w.run_id = q.run_id AND w.kind = 'checkpoints'),
        COALESCE(q.command, '{"resume":' || q.resume || '}');
END
$fn$;
"#;

/// Extend a lease, if it is still the run's current one; the stop asked of the run, if any.
/// `$1` run, `$2` epoch, `$3` lease seconds.
pub(super) const HEARTBEAT: &str = "
UPDATE {s}.sg_run_queue
SET lease_until = now() + make_interval(secs => $3)
WHERE run_id = $1 AND epoch = $2 AND status = 'running'
RETURNING stop";

/// The fence of a write under a lease, in the write's transaction: the run's row is locked
/// shared (a takeover, which updates it, waits for the write to commit, and a write after a
/// takeover sees the new epoch and fails), and the write is logged with its epoch. No row
/// back: the lease is not current. `$1` run, `$2` epoch, `$3` kind, `$4` checkpoint ids.
pub(super) const FENCE: &str = "
WITH lease AS (
    SELECT run_id, epoch, thread, worker FROM {s}.sg_run_queue
    WHERE run_id = $1 AND epoch = $2 AND status = 'running'
    FOR SHARE
)
INSERT INTO {s}.sg_run_writes (run_id, epoch, thread, worker, kind, checkpoints, at)
SELECT run_id, epoch, thread, worker, $3, $4, clock_timestamp() FROM lease
RETURNING 1";

/// End a run under its current lease (locking its row, so no fenced write of it is open),
/// and log the end as a fenced write; the run's reason, no row when the lease is not current.
/// `$1` run, `$2` epoch, `$3` status, `$4` reason, `$5` now (ms), `$6` whether the reason is
/// the stop's.
pub(super) const FINISH: &str = "SELECT * FROM {s}.sg_finish_v1($1, $2, $3, $4, $5, $6)";

/// The function [`FINISH`] calls, created with the tables (planned once per connection, as
/// [`LEASE_FUNCTION`]).
pub(crate) const FINISH_FUNCTION: &str = r#"
CREATE OR REPLACE FUNCTION {s}.sg_finish_v1(p_run text, p_epoch int8, p_status text,
    p_reason text, p_now int8, p_stopped bool)
RETURNS TABLE(o_reason text)
LANGUAGE plpgsql AS $fn$
BEGIN
    RETURN QUERY
    WITH ended AS (
        UPDATE {s}.sg_run_queue q
        SET status = p_status, reason = CASE WHEN p_stopped THEN q.stop_reason ELSE p_reason END,
            lease_until = NULL, updated_at = p_now
        WHERE q.run_id = p_run AND q.epoch = p_epoch AND q.status = 'running'
        RETURNING q.run_id, q.epoch, q.thread, q.worker, q.reason
    ), logged AS (
        INSERT INTO {s}.sg_run_writes (run_id, epoch, thread, worker, kind, checkpoints, at)
        SELECT e.run_id, e.epoch, e.thread, e.worker, 'end', '{}', clock_timestamp()
        FROM ended e
    )
    SELECT e.reason FROM ended e;
END
$fn$;
"#;

/// Delete the checkpoints a run wrote (as its fenced writes logged them) and their pending
/// writes, and point the thread's heads back at the newest checkpoint left. `$1` run,
/// `$2` thread.
pub(super) const ROLL_BACK: &str = "
WITH ids AS (
    SELECT DISTINCT unnest(checkpoints) AS id FROM {s}.sg_run_writes
    WHERE run_id = $1 AND kind = 'checkpoints'
), gone_writes AS (
    DELETE FROM {s}.sg_writes w USING ids WHERE w.thread = $2 AND w.checkpoint = ids.id
)
DELETE FROM {s}.sg_checkpoints c USING ids WHERE c.thread = $2 AND c.id = ids.id";

/// After [`ROLL_BACK`]: each head of the thread at its namespace's greatest id, and heads of
/// namespaces left empty removed. `$1` thread.
pub(super) const RESET_HEADS: &str = "
WITH newest AS (
    SELECT DISTINCT ON (ns) ns, id FROM {s}.sg_checkpoints WHERE thread = $1
    ORDER BY ns, id DESC
), moved AS (
    UPDATE {s}.sg_heads h SET head = newest.id FROM newest
    WHERE h.thread = $1 AND h.ns = newest.ns AND h.head <> newest.id
)
DELETE FROM {s}.sg_heads h
WHERE h.thread = $1 AND NOT EXISTS (SELECT 1 FROM newest WHERE newest.ns = h.ns)";

/// A thread's unfinished runs, oldest first, locked. `$1` thread.
pub(super) const OPEN_RUNS: &str = "
SELECT run_id, status FROM {s}.sg_run_queue
WHERE thread = $1 AND status IN ('pending', 'running')
ORDER BY seq
FOR UPDATE";

/// Ask a running run to stop. `$1` run, `$2` stop, `$3` reason, `$4` now (ms).
pub(super) const ASK_STOP: &str = "
UPDATE {s}.sg_run_queue SET stop = $2, stop_reason = $3, updated_at = $4
WHERE run_id = $1 AND status = 'running' AND stop IS NULL";

/// End a leased run whose id or thread does not read (so it cannot be run, nor mirrored in
/// `sg_runs`). `$1` run, `$2` reason, `$3` now (ms).
pub(super) const END_UNREADABLE: &str = "
UPDATE {s}.sg_run_queue
SET status = 'error', reason = $2, lease_until = NULL, updated_at = $3
WHERE run_id = $1";

/// End a run that has not started. `$1` run, `$2` status, `$3` reason, `$4` now (ms).
pub(super) const END_PENDING: &str = "
UPDATE {s}.sg_run_queue SET status = $2, reason = $3, updated_at = $4
WHERE run_id = $1 AND status = 'pending'";

/// Queue a run. `$1` run, `$2` thread, `$3` input, `$4` now (ms); `$5` the resume (JSON) of
/// a run whose command only answers interrupts, `$6` any other command (JSON), each else
/// `NULL`.
pub(super) const INSERT: &str = "
INSERT INTO {s}.sg_run_queue
    (run_id, thread, input, status, created_at, updated_at, resume, command)
VALUES ($1, $2, $3, 'pending', $4, $4, $5, $6)";

/// The columns a [`QueuedRun`](super::QueuedRun) is read from; the last says whether a
/// running run's lease has ended by the server's clock.
pub(super) const RUN_COLUMNS: &str = "run_id, thread, status, reason, epoch, worker, attempts, \
     stop, stop_reason, created_at, updated_at, \
     (status = 'running' AND lease_until < now()) AS lease_expired, input, usage";

/// A thread's fenced writes, in the order they were made.
pub(super) const WRITE_LOG: &str = "
SELECT seq, run_id, epoch, worker, kind, checkpoints FROM {s}.sg_run_writes
WHERE thread = $1 ORDER BY seq";

/// Delete the write log of runs that ended (neither pending nor running) with their last
/// change older than `$1` (ms); the number of rows deleted.
pub(super) const TRIM_WRITE_LOG: &str = "
WITH gone AS (
    DELETE FROM {s}.sg_run_writes w USING {s}.sg_run_queue q
    WHERE w.run_id = q.run_id AND q.status NOT IN ('pending', 'running')
      AND q.updated_at < $1
    RETURNING 1
)
SELECT count(*) FROM gone";
