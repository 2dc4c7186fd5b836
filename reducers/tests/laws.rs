//! Property tests for the laws of the built-in reducers.

use proptest::prelude::*;
use stategraph_reducers::{
    AddMessages, Append, Artifacts, MessageOp, MessagesUpdate, Promoted, PromotedReducer,
    ReduceCtx, ReduceError, Reducer, Stored, StoredRef,
};

mod common;
use common::Msg;

type Messages = AddMessages<Vec<Msg>>;

const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];
const HASHES: [&str; 4] = ["", "h1", "h2", "h3"];

fn name() -> impl Strategy<Value = String> {
    prop::sample::select(NAMES.to_vec()).prop_map(String::from)
}

fn names(max: usize) -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(name(), 0..max)
}

fn msg() -> impl Strategy<Value = Msg> {
    (prop::option::of(name()), any::<u8>()).prop_map(|(id, text)| Msg { id, text })
}

fn upserts() -> impl Strategy<Value = MessagesUpdate<Msg>> {
    prop::collection::vec(msg(), 0..5).prop_map(MessagesUpdate::from)
}

fn message_ops() -> impl Strategy<Value = MessagesUpdate<Msg>> {
    let op = prop_oneof![
        6 => msg().prop_map(MessageOp::Upsert),
        2 => name().prop_map(MessageOp::Remove),
        1 => Just(MessageOp::RemoveAll),
    ];
    prop::collection::vec(op, 0..5).prop_map(MessagesUpdate::from)
}

fn promoted() -> impl Strategy<Value = Promoted> {
    (prop::sample::select(HASHES.to_vec()), names(4)).prop_map(|(hash, names)| Promoted {
        catalog_hash: hash.to_owned(),
        names,
    })
}

/// A stored promoted value, as the reducer leaves it (names deduplicated).
fn stored_promoted() -> impl Strategy<Value = Option<Promoted>> {
    prop::option::of(promoted()).prop_map(|first| {
        let mut value = None;
        // Never fails; an error would leave `None`, which is a valid stored value too.
        let _ = PromotedReducer::reduce(
            &mut value,
            first.into_iter().collect(),
            &mut ReduceCtx::new(0),
        );
        value
    })
}

/// Reduce all `writes` in one step.
fn batched<R: Reducer>(init: &R::Value, writes: &[R::Update]) -> Result<R::Value, ReduceError> {
    let mut value = init.clone();
    R::reduce(&mut value, writes.to_vec(), &mut ReduceCtx::new(7))?;
    Ok(value)
}

/// Reduce `writes` one step each, sharing one id counter so minted ids match [`batched`].
fn one_by_one<R: Reducer>(init: &R::Value, writes: &[R::Update]) -> Result<R::Value, ReduceError> {
    let mut value = init.clone();
    let mut ctx = ReduceCtx::new(7);
    for write in writes {
        R::reduce(&mut value, vec![write.clone()], &mut ctx)?;
    }
    Ok(value)
}

/// Run `steps` from `init`, storing each step's part the way a saver does (a whole part resets
/// the stored parts, a tail part is added; an unchanged field stores nothing). A failing step is
/// discarded, as the engine does. Returns the final value and the value decoded from the parts.
fn stored_round_trip<R: Reducer>(
    init: &R::Value,
    steps: &[Vec<R::Update>],
) -> Result<(R::Value, R::Value), TestCaseError> {
    let mut value = init.clone();
    let mut parts = vec![Stored::Whole(
        serde_json::to_vec(&value).map_err(|e| TestCaseError::fail(e.to_string()))?,
    )];
    for (step, writes) in steps.iter().enumerate() {
        let mut next = value.clone();
        let Ok(change) = R::reduce(&mut next, writes.clone(), &mut ReduceCtx::new(step as i64))
        else {
            continue;
        };
        value = next;
        if !change.is_changed() {
            continue;
        }
        match R::encode(&value, change).map_err(|e| TestCaseError::fail(e.to_string()))? {
            whole @ Stored::Whole(_) => parts = vec![whole],
            tail @ Stored::Tail(_) => parts.push(tail),
        }
    }
    let refs: Vec<StoredRef<'_>> = parts.iter().map(Stored::as_ref).collect();
    let decoded = R::decode(&refs).map_err(|e| TestCaseError::fail(e.to_string()))?;
    Ok((value, decoded))
}

fn dedup(names: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in names {
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

fn initial_messages(init: MessagesUpdate<Msg>) -> Result<Vec<Msg>, ReduceError> {
    let mut value = Vec::new();
    Messages::reduce(&mut value, vec![init], &mut ReduceCtx::new(0))?;
    Ok(value)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn append_batching_equals_one_step_at_a_time(
        init in prop::collection::vec(any::<u8>(), 0..5),
        writes in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..4), 1..5),
    ) {
        prop_assert_eq!(
            batched::<Append<Vec<u8>>>(&init, &writes)?,
            one_by_one::<Append<Vec<u8>>>(&init, &writes)?
        );
    }

    #[test]
    fn artifacts_batching_equals_one_step_at_a_time(init in names(6), writes in prop::collection::vec(names(5), 1..5)) {
        prop_assert_eq!(batched::<Artifacts>(&init, &writes)?, one_by_one::<Artifacts>(&init, &writes)?);
    }

    #[test]
    fn promoted_batching_equals_one_step_at_a_time(
        init in prop::option::of(promoted()),
        writes in prop::collection::vec(promoted(), 1..6),
    ) {
        prop_assert_eq!(
            batched::<PromotedReducer>(&init, &writes)?,
            one_by_one::<PromotedReducer>(&init, &writes)?
        );
    }

    #[test]
    fn messages_without_removals_batching_equals_one_step_at_a_time(
        init in upserts(),
        writes in prop::collection::vec(upserts(), 1..5),
    ) {
        let init = initial_messages(init)?;
        prop_assert_eq!(batched::<Messages>(&init, &writes)?, one_by_one::<Messages>(&init, &writes)?);
    }

    #[test]
    fn messages_with_removals_batching_equals_one_step_at_a_time(
        init in upserts(),
        writes in prop::collection::vec(message_ops(), 1..5),
    ) {
        let init = initial_messages(init)?;
        let batch = batched::<Messages>(&init, &writes);
        let steps = one_by_one::<Messages>(&init, &writes);
        match (batch, steps) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Err(ReduceError::UnknownMessageId { id: a }), Err(ReduceError::UnknownMessageId { id: b })) => {
                prop_assert_eq!(a, b);
            }
            (a, b) => prop_assert!(false, "batched {:?} vs one by one {:?}", a, b),
        }
    }

    #[test]
    fn messages_ids_are_unique_after_upserts(init in upserts(), writes in prop::collection::vec(upserts(), 1..5)) {
        let init = initial_messages(init)?;
        let value = batched::<Messages>(&init, &writes)?;
        let ids: Vec<_> = value.iter().map(|m| m.id.clone()).collect();
        prop_assert!(ids.iter().all(Option::is_some));
        prop_assert_eq!(dedup(ids.iter().flatten().cloned()).len(), ids.len());
    }

    #[test]
    fn artifacts_union_is_duplicate_free_complete_and_ordered(
        init in names(6),
        writes in prop::collection::vec(names(5), 1..5),
    ) {
        let value = batched::<Artifacts>(&init, &writes)?;
        let all: Vec<String> = init.iter().chain(writes.iter().flatten()).cloned().collect();
        // Duplicate-free, every name present, first-occurrence order: exactly dedup(all).
        prop_assert_eq!(dedup(value.clone()), value.clone());
        prop_assert!(all.iter().all(|n| value.contains(n)));
        prop_assert_eq!(&value, &dedup(all));
    }

    #[test]
    fn artifacts_readding_known_names_is_idempotent(
        init in names(6),
        writes in prop::collection::vec(names(5), 1..5),
        pick in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let value = batched::<Artifacts>(&init, &writes)?;
        prop_assume!(!value.is_empty());
        let again: Vec<String> = pick.iter().map(|i| value[i.index(value.len())].clone()).collect();
        let mut after = value.clone();
        let change = Artifacts::reduce(&mut after, vec![again], &mut ReduceCtx::new(9))?;
        prop_assert_eq!(after, value);
        prop_assert!(!change.is_changed());
    }

    #[test]
    fn append_stored_parts_decode_to_the_value(
        init in prop::collection::vec(any::<u8>(), 0..5),
        steps in prop::collection::vec(prop::collection::vec(prop::collection::vec(any::<u8>(), 0..3), 1..3), 0..6),
    ) {
        let (value, decoded) = stored_round_trip::<Append<Vec<u8>>>(&init, &steps)?;
        prop_assert_eq!(value, decoded);
    }

    #[test]
    fn artifacts_stored_parts_decode_to_the_value(
        init in names(4),
        steps in prop::collection::vec(prop::collection::vec(names(4), 1..3), 0..6),
    ) {
        let (value, decoded) = stored_round_trip::<Artifacts>(&init, &steps)?;
        prop_assert_eq!(value, decoded);
    }

    #[test]
    fn messages_stored_parts_decode_to_the_value(
        init in upserts(),
        steps in prop::collection::vec(prop::collection::vec(message_ops(), 1..3), 0..6),
    ) {
        let init = initial_messages(init)?;
        let (value, decoded) = stored_round_trip::<Messages>(&init, &steps)?;
        prop_assert_eq!(value, decoded);
    }

    #[test]
    fn promoted_names_come_only_from_writes_under_the_current_hash(
        init in stored_promoted(),
        writes in prop::collection::vec(promoted(), 1..8),
    ) {
        let value = batched::<PromotedReducer>(&init, &writes)?;
        let Some(value) = value else {
            // Still absent: only empty updates were written and nothing was stored.
            prop_assert!(init.is_none() && writes.iter().all(Promoted::is_empty));
            return Ok(());
        };
        let hash = &value.catalog_hash;
        // What counts for `hash` starts after the last non-empty write under another hash
        // (`start`), and includes the stored value only if there is none. An empty stored hash
        // never matches, so under it only the last non-empty write counts.
        let (start, from_init) = if hash.is_empty() {
            match writes.iter().rposition(|w| !w.is_empty()) {
                Some(i) => (i, false),
                None => (0, true),
            }
        } else {
            match writes.iter().rposition(|w| !w.is_empty() && w.catalog_hash != *hash) {
                Some(i) => (i + 1, false),
                None => (0, true),
            }
        };
        let stored = init
            .iter()
            .filter(|p| from_init && p.catalog_hash == *hash)
            .flat_map(|p| p.names.iter());
        let written = writes[start..]
            .iter()
            .filter(|w| w.catalog_hash == *hash)
            .flat_map(|w| w.names.iter());
        let allowed: Vec<String> = stored.chain(written).cloned().collect();
        for name in &value.names {
            prop_assert!(
                allowed.contains(name),
                "{:?} visible under {:?} but not written under it since the last other hash",
                name,
                hash
            );
        }
        // Precisely: the names written under `hash` since then, deduplicated, in order.
        prop_assert_eq!(&value.names, &dedup(allowed));
        prop_assert_eq!(dedup(value.names.clone()), value.names.clone());
    }
}
