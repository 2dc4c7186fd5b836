//! `Overwrite`'s law (an overwrite followed by appends equals the value plus the appends, live
//! and as stored), and its stored forms: a field kept as appended tails reads back right from
//! a reopened SQLite file, and an overwrite in a pending write survives a resume.
#![allow(missing_docs)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use stategraph::checkpoints::{ListOptions, SqliteSaver};
use stategraph::prelude::*;
use stategraph::reducers::{Change, Message, MessagesUpdate, ReduceCtx, Stored};
use stategraph::state::{Field, StoredRef};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Msg {
    pub id: Option<String>,
    pub text: String,
}

impl Message for Msg {
    fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    fn set_id(&mut self, id: String) {
        self.id = Some(id);
    }
}

#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct Lists {
    #[reduce(append)]
    pub vec: Vec<u32>,
    #[reduce(append)]
    pub list: List<u32>,
    #[reduce(add_messages)]
    pub messages: Vec<Msg>,
}

/// Every field's stored parts, kept as a saver keeps them: a whole value restarts them, a
/// tail extends them.
#[derive(Default)]
struct StoredParts(Vec<Vec<Stored>>);

impl StoredParts {
    fn record(
        &mut self,
        state: &Lists,
        changes: &[(ListsField, Change)],
    ) -> Result<(), serde_json::Error> {
        self.0.resize(ListsField::ALL.len(), Vec::new());
        for &(field, change) in changes {
            let parts = &mut self.0[field.index()];
            match state.encode_field(field, change)? {
                whole @ Stored::Whole(_) => *parts = vec![whole],
                tail @ Stored::Tail(_) => parts.push(tail),
            }
        }
        Ok(())
    }

    fn decode(&self) -> Result<Lists, serde_json::Error> {
        let mut out = Lists::default();
        for (i, parts) in self.0.iter().enumerate().filter(|(_, p)| !p.is_empty()) {
            let refs: Vec<StoredRef<'_>> = parts.iter().map(Stored::as_ref).collect();
            out.decode_field(ListsField::ALL[i], &refs)?;
        }
        Ok(out)
    }
}

fn messages(texts: &[u32], prefix: &str, with_ids: bool) -> Vec<Msg> {
    (texts.iter().enumerate())
        .map(|(i, t)| Msg {
            id: with_ids.then(|| format!("{prefix}{i}")),
            text: t.to_string(),
        })
        .collect()
}

/// A plain write of `items` to every field (messages with ids `<prefix><i>`, or none).
fn appends(items: &[u32], prefix: &str, with_ids: bool) -> ListsUpdate {
    Lists::update()
        .vec(items.to_vec())
        .list(items.to_vec())
        .messages(MessagesUpdate::from(messages(items, prefix, with_ids)))
}

fn items() -> impl Strategy<Value = Vec<u32>> {
    proptest::collection::vec(0u32..100, 0..4)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Steps: `before`; the overwrite with `value` among the plain writes `beside` (at
    /// `at`); then each of `later` in its own step.
    #[test]
    fn an_overwrite_followed_by_appends_equals_the_value_plus_the_appends(
        before in items(),
        value in items(),
        value_has_ids in any::<bool>(),
        beside in proptest::collection::vec(items(), 0..3),
        at in any::<prop::sample::Index>(),
        later in proptest::collection::vec((items(), any::<bool>()), 0..4),
    ) {
        let mut state = Lists::default();
        let mut stored = StoredParts::default();
        let changes = state.apply(vec![appends(&before, "b", true)], &mut ReduceCtx::new(0))
            .map_err(|(f, e)| TestCaseError::fail(format!("{f:?}: {e}")))?;
        stored.record(&state, &changes)?;

        let mut step: Vec<ListsUpdate> = (beside.iter().enumerate())
            .map(|(i, items)| appends(items, &format!("x{i}-"), true))
            .collect();
        let overwrite = Lists::update()
            .overwrite_vec(value.clone())
            .overwrite_list(List::from(value.clone()))
            .overwrite_messages(messages(&value, "v", value_has_ids));
        step.insert(at.index(step.len() + 1), overwrite);
        let changes = state.apply(step, &mut ReduceCtx::new(1))
            .map_err(|(f, e)| TestCaseError::fail(format!("{f:?}: {e}")))?;
        prop_assert!(changes.iter().all(|(_, c)| *c == Change::Replaced), "{changes:?}");
        stored.record(&state, &changes)?;

        let mut expected = value.clone();
        for (n, (items, ids)) in later.iter().enumerate() {
            let step = i64::try_from(n).unwrap_or(0) + 2;
            let changes = state.apply(vec![appends(items, &format!("l{n}-"), *ids)], &mut ReduceCtx::new(step))
                .map_err(|(f, e)| TestCaseError::fail(format!("{f:?}: {e}")))?;
            stored.record(&state, &changes)?;
            expected.extend(items);
        }

        prop_assert_eq!(&state.vec, &expected);
        prop_assert_eq!(state.list.iter().copied().collect::<Vec<_>>(), expected.clone());
        let texts: Vec<String> = state.messages.iter().map(|m| m.text.clone()).collect();
        let expected_texts: Vec<String> = expected.iter().map(u32::to_string).collect();
        prop_assert_eq!(texts, expected_texts);
        let mut ids: Vec<&str> = state.messages.iter().filter_map(Message::id).collect();
        prop_assert_eq!(ids.len(), state.messages.len(), "every message has an id");
        ids.sort_unstable();
        ids.dedup();
        prop_assert_eq!(ids.len(), state.messages.len(), "ids are unique");
        prop_assert_eq!(stored.decode()?, state, "the stored parts decode to the live state");
    }
}

fn step(
    update: ListsUpdate,
) -> impl Fn(Arc<Lists>, NodeContext) -> futures::future::Ready<Result<ListsUpdate, BoxError>>
       + Send
       + Sync
       + 'static {
    move |_s, _c| futures::future::ready(Ok(update.clone()))
}

/// START -> a (append 1) -> b (append 2) -> o (overwrite 7, 8) -> c (append 3) -> d (append 4, 5).
fn chain(saver: Arc<SqliteSaver>) -> Result<CompiledGraph<Lists>, stategraph::CompileError> {
    let over = Lists::update()
        .overwrite_vec(vec![7, 8])
        .overwrite_list(List::from(vec![7, 8]))
        .overwrite_messages(messages(&[7, 8], "o", true));
    Ok(StateGraph::<Lists>::new()
        .add_node("a", step(appends(&[1], "a", true)))
        .add_node("b", step(appends(&[2], "b", false)))
        .add_node("o", step(over))
        .add_node("c", step(appends(&[3], "c", true)))
        .add_node("d", step(appends(&[4, 5], "d", false)))
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", "o")
        .add_edge("o", "c")
        .add_edge("c", "d")
        .add_edge("d", END)
        .compile()?
        .with_checkpointer(saver))
}

fn values(s: &Lists) -> (Vec<u32>, Vec<u32>, Vec<String>) {
    (
        s.vec.clone(),
        s.list.iter().copied().collect(),
        s.messages.iter().map(|m| m.text.clone()).collect(),
    )
}

fn expect(items: &[u32]) -> (Vec<u32>, Vec<u32>, Vec<String>) {
    (
        items.to_vec(),
        items.to_vec(),
        items.iter().map(u32::to_string).collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overwritten_append_field_reads_back_whole_from_a_reopened_sqlite_file() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("threads.db");
    let cfg = RunConfig::new().thread("t");
    let out = chain(Arc::new(SqliteSaver::open(&path)?))?
        .invoke(appends(&[0], "in", true), &cfg)
        .await?;
    assert_eq!(values(&out.state), expect(&[7, 8, 3, 4, 5]));

    // Reopened: the head, every checkpoint of the history, and a run continuing the thread.
    let g = chain(Arc::new(SqliteSaver::open(&path)?))?;
    let head = g.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(values(&head.values), expect(&[7, 8, 3, 4, 5]));
    let history: Vec<_> = g
        .get_state_history("t", ListOptions::default())
        .await?
        .iter()
        .map(|s| values(&s.values))
        .collect();
    let expected: Vec<_> = [
        &[7, 8, 3, 4, 5][..],
        &[7, 8, 3],
        &[7, 8],
        &[0, 1, 2],
        &[0, 1],
        &[0],
        &[],
    ]
    .iter()
    .map(|items| expect(items))
    .collect();
    assert_eq!(history, expected);
    // A second run appends its input after the stored whole value and its tails, then runs
    // the chain again.
    let again = g.invoke(appends(&[9], "again", true), &cfg).await?;
    assert_eq!(values(&again.state), expect(&[7, 8, 3, 4, 5]));
    let g = chain(Arc::new(SqliteSaver::open(&path)?))?;
    let history: Vec<_> = g
        .get_state_history("t", ListOptions::default())
        .await?
        .iter()
        .map(|s| values(&s.values))
        .collect();
    assert_eq!(history[5], expect(&[7, 8, 3, 4, 5, 9]));
    assert_eq!(history[4], expect(&[7, 8, 3, 4, 5, 9, 1]));
    assert_eq!(history[2], expect(&[7, 8]));
    assert_eq!(history[0], expect(&[7, 8, 3, 4, 5]));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overwrite_in_a_pending_write_survives_a_resume_from_a_reopened_file() -> TestResult {
    #[derive(State, Clone, Default, Debug)]
    struct Log {
        #[reduce(append)]
        log: Vec<String>,
    }
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("threads.db");
    let over_runs = Arc::new(AtomicUsize::new(0));
    let graph = |saver: Arc<SqliteSaver>| {
        let runs = over_runs.clone();
        StateGraph::<Log>::new()
            .add_node("first", |_s: Arc<Log>, _c: NodeContext| async {
                Ok::<_, BoxError>(Log::update().log(vec!["first".into()]))
            })
            .add_node("over", move |_s: Arc<Log>, _c: NodeContext| {
                runs.fetch_add(1, Ordering::SeqCst);
                async { Ok::<_, BoxError>(Log::update().overwrite_log(vec!["over".into()])) }
            })
            .add_node("ask", |_s: Arc<Log>, c: NodeContext| async move {
                let answer: String = c.interrupt("question")?;
                Ok::<_, BoxError>(Log::update().log(vec![format!("ask:{answer}")]))
            })
            .add_edge(START, "first")
            .add_edge("first", "over")
            .add_edge("first", "ask")
            .compile()
            .map(|g| g.with_checkpointer(saver))
    };
    let cfg = RunConfig::new().thread("p");
    let paused = graph(Arc::new(SqliteSaver::open(&path)?))?
        .invoke(Log::update().log(vec!["in".into()]), &cfg)
        .await?;
    assert_eq!(paused.interrupts.len(), 1);
    let done = graph(Arc::new(SqliteSaver::open(&path)?))?
        .invoke(Command::resume(Resume::value("yes")), &cfg)
        .await?;
    assert_eq!(
        over_runs.load(Ordering::SeqCst),
        1,
        "over's stored write was reused"
    );
    // The stored write is still an overwrite: it drops ask's append in the same step.
    assert_eq!(done.state.log, ["over"]);
    Ok(())
}
