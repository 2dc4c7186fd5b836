//! The saver conformance suite: one set of behaviour tests, generic over [`Saver`], that
//! every saver must pass. Each clause is instantiated for every saver by `conformance!`.
#![allow(
    missing_docs,
    unreachable_pub,
    clippy::expect_used,
    clippy::unwrap_used
)]

mod clauses;
mod namespace_list;
mod old_files;
#[path = "../pg_support/mod.rs"]
mod pg_support;
mod postgres_extend;
mod postgres_get;
mod postgres_only;
mod receipt_crash;
mod runs;
mod sqlite_only;

use std::sync::Arc;

use stategraph_checkpoints::{MemorySaver, Saver, SqliteSaver};

pub type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// A saver under test, with whatever must live as long as it (a temporary directory).
pub struct Subject {
    pub saver: Arc<dyn Saver>,
    _dir: Option<tempfile::TempDir>,
    _schema: Option<pg_support::SchemaGuard>,
}

impl std::fmt::Debug for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subject").finish_non_exhaustive()
    }
}

pub async fn memory() -> Option<Subject> {
    Some(Subject {
        saver: Arc::new(MemorySaver::new()),
        _dir: None,
        _schema: None,
    })
}

pub async fn sqlite() -> Option<Subject> {
    let dir = tempfile::tempdir().expect("temp dir");
    let saver = SqliteSaver::open(dir.path().join("conformance.db")).expect("open sqlite");
    Some(Subject {
        saver: Arc::new(saver),
        _dir: Some(dir),
        _schema: None,
    })
}

/// A [`stategraph_checkpoints::PostgresSaver`] on a schema of its own, dropped after the
/// test; `None` (the test skips) without a server outside CI.
pub async fn postgres() -> Option<Subject> {
    postgres_with("conf", false).await
}

/// [`postgres`] with `prepared_statements`: the hot calls as named statements each pooled
/// connection prepares once.
pub async fn postgres_prepared() -> Option<Subject> {
    postgres_with("conf_prep", true).await
}

async fn postgres_with(prefix: &str, prepared_statements: bool) -> Option<Subject> {
    let url = pg_support::url()?;
    let options = stategraph_checkpoints::PostgresOptions {
        pool_size: 4,
        prepared_statements,
        ..stategraph_checkpoints::PostgresOptions::default()
    };
    let (saver, guard) = pg_support::fresh_with(&url, prefix, options)
        .await
        .expect("open postgres");
    Some(Subject {
        saver: Arc::new(saver),
        _dir: None,
        _schema: Some(guard),
    })
}

macro_rules! conformance {
    ($saver:ident: $($clause:ident),* $(,)?; runs: $($run_clause:ident),* $(,)?) => {
        mod $saver {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $clause() -> crate::TestResult {
                    match crate::$saver().await {
                        Some(s) => crate::clauses::$clause(s).await,
                        None => Ok(()),
                    }
                }
            )*
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $run_clause() -> crate::TestResult {
                    match crate::$saver().await {
                        Some(s) => crate::runs::$run_clause(s).await,
                        None => Ok(()),
                    }
                }
            )*
        }
    };
}

macro_rules! all_clauses {
    ($saver:ident) => {
        conformance!($saver:
            an_empty_thread_has_no_checkpoint,
            an_unknown_checkpoint_id_is_not_found,
            a_put_checkpoint_loads_back_with_its_fields_control_and_metadata,
            appended_parts_load_back_in_order,
            a_whole_value_resets_an_appended_list,
            list_is_newest_first_with_limit_and_before,
            list_filters_on_metadata_source_and_step,
            an_invalid_filter_key_is_rejected,
            a_second_child_of_the_same_head_is_a_stale_parent,
            a_fork_from_an_older_checkpoint_keeps_both_branches,
            appends_on_two_branches_do_not_mix,
            pending_writes_replace_per_task_and_keep_order,
            pending_writes_written_one_by_one_keep_their_order,
            a_steps_checkpoint_drops_the_outputs_recorded_while_it_ran,
            pending_writes_on_an_unknown_checkpoint_are_rejected,
            namespaces_keep_separate_chains,
            a_threads_namespaces_are_listed_with_counts_and_their_first_and_last_ids,
            delete_thread_removes_every_namespace_and_nothing_else,
            list_threads_reports_counts_steps_and_status,
            a_copied_thread_has_the_same_history_and_diverges_independently,
            copy_into_a_thread_that_has_checkpoints_is_refused,
            copying_a_branch_copies_that_branch_only,
            prune_keeps_the_last_n_loadable_and_resumable,
            prune_keeps_checkpoints_newer_than_a_time,
            many_threads_written_concurrently_all_land,
            two_writers_on_one_thread_commit_exactly_one_child,
            changes_report_what_each_step_wrote,
            changes_of_a_long_list_are_each_steps_tail,
            checkpoints_handed_over_with_more_following_land_and_a_stale_one_fails_alone,
            a_failed_put_in_a_batch_keeps_the_puts_before_it;
            runs:
            a_run_loads_back_with_its_reasons_and_metadata,
            runs_are_listed_newest_first_per_thread,
            running_runs_are_listed_newest_first_without_the_others,
            a_settled_run_cannot_run_again,
            exactly_one_receipt_is_stored_under_concurrent_puts,
            a_receipt_for_an_unknown_run_is_refused,
            bad_run_ids_are_typed_errors,
            deleting_a_thread_deletes_its_runs_and_copying_or_pruning_leaves_them,
        );
    };
}

all_clauses!(memory);
all_clauses!(sqlite);
all_clauses!(postgres);
all_clauses!(postgres_prepared);
