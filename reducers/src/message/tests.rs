//! Unit tests of the add-messages reducer.

use serde::Deserialize;

use super::*;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Msg {
    id: Option<String>,
    text: String,
}

impl Message for Msg {
    fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }
    fn set_id(&mut self, id: String) {
        self.id = Some(id);
    }
}

type R = AddMessages<Vec<Msg>>;

fn msg(id: Option<&str>, text: &str) -> Msg {
    Msg {
        id: id.map(String::from),
        text: text.to_owned(),
    }
}

fn texts(list: &[Msg]) -> Vec<&str> {
    list.iter().map(|m| m.text.as_str()).collect()
}

#[test]
fn messages_without_id_get_minted_ids_and_are_appended() -> Result<(), ReduceError> {
    let mut list = vec![msg(Some("a"), "one")];
    let writes = vec![
        MessagesUpdate::from(vec![msg(None, "two"), msg(None, "three")]),
        MessagesUpdate::from(msg(None, "four")),
    ];
    let change = R::reduce(&mut list, writes, &mut ReduceCtx::new(5))?;
    assert_eq!(change, Change::Appended { from: 1 });
    let ids: Vec<_> = list.iter().map(|m| m.id.as_deref()).collect();
    assert_eq!(ids, [Some("a"), Some("s5-0"), Some("s5-1"), Some("s5-2")]);
    Ok(())
}

#[test]
fn messages_overwrite_replaces_the_list_and_mints_missing_ids() -> Result<(), ReduceError> {
    let mut list = vec![msg(Some("a"), "one"), msg(Some("b"), "two")];
    let new = vec![msg(Some("c"), "three"), msg(None, "four")];
    R::overwrite(&mut list, new, &mut ReduceCtx::new(7))?;
    assert_eq!(list, [msg(Some("c"), "three"), msg(Some("s7-0"), "four")]);
    Ok(())
}

#[test]
fn messages_existing_id_replaces_in_place() -> Result<(), ReduceError> {
    let mut list = vec![msg(Some("a"), "one"), msg(Some("b"), "two")];
    let change = R::reduce(
        &mut list,
        vec![MessagesUpdate::from(msg(Some("a"), "ONE"))],
        &mut ReduceCtx::new(1),
    )?;
    assert_eq!(change, Change::Replaced);
    assert_eq!(texts(&list), ["ONE", "two"]);
    Ok(())
}

#[test]
fn many_upserts_with_ids_in_one_step_end_as_one_at_a_time_would() -> Result<(), ReduceError> {
    // Past the scan limit the ids are looked up in a map: the same replacements, appends
    // and duplicate-id handling as a step per message.
    let start: Vec<Msg> = (0..30)
        .map(|i| msg(Some(&format!("m{}", i % 25)), "old"))
        .collect();
    let ops: Vec<Msg> = (0..40)
        .map(|i| msg(Some(&format!("m{}", (i * 7) % 50)), &format!("new{i}")))
        .chain([msg(None, "minted")])
        .collect();
    let mut together = start.clone();
    let writes = vec![MessagesUpdate {
        ops: ops.iter().cloned().map(MessageOp::Upsert).collect(),
    }];
    AddMessages::<Vec<Msg>>::reduce(&mut together, writes, &mut ReduceCtx::new(1))?;
    let mut apart = start;
    let mut ctx = ReduceCtx::new(1);
    for m in ops {
        AddMessages::<Vec<Msg>>::reduce(&mut apart, vec![MessagesUpdate::from(m)], &mut ctx)?;
    }
    assert_eq!(together, apart);
    Ok(())
}

#[test]
fn messages_new_id_is_appended() -> Result<(), ReduceError> {
    let mut list = vec![msg(Some("a"), "one")];
    let change = R::reduce(
        &mut list,
        vec![MessagesUpdate::from(msg(Some("b"), "two"))],
        &mut ReduceCtx::new(1),
    )?;
    assert_eq!(change, Change::Appended { from: 1 });
    assert_eq!(texts(&list), ["one", "two"]);
    Ok(())
}

#[test]
fn messages_remove_deletes_by_id() -> Result<(), ReduceError> {
    let mut list = vec![
        msg(Some("a"), "one"),
        msg(Some("b"), "two"),
        msg(Some("c"), "three"),
    ];
    let change = R::reduce(
        &mut list,
        vec![MessagesUpdate::remove("b")],
        &mut ReduceCtx::new(1),
    )?;
    assert_eq!(change, Change::Replaced);
    assert_eq!(texts(&list), ["one", "three"]);
    Ok(())
}

#[test]
fn messages_remove_unknown_id_is_an_error() {
    let mut list = vec![msg(Some("a"), "one")];
    let result = R::reduce(
        &mut list,
        vec![MessagesUpdate::remove("zzz")],
        &mut ReduceCtx::new(1),
    );
    assert!(matches!(result, Err(ReduceError::UnknownMessageId { id }) if id == "zzz"));
}

#[test]
fn messages_remove_twice_is_an_error() {
    let mut list = vec![msg(Some("a"), "one")];
    let update = MessagesUpdate::remove("a").with(MessageOp::Remove("a".into()));
    let result = R::reduce(&mut list, vec![update], &mut ReduceCtx::new(1));
    assert!(matches!(result, Err(ReduceError::UnknownMessageId { .. })));
}

#[test]
fn messages_remove_all_keeps_only_the_messages_after_it() -> Result<(), ReduceError> {
    let mut list = vec![msg(Some("a"), "one"), msg(Some("b"), "two")];
    let writes = vec![
        MessagesUpdate::from(msg(None, "dropped")),
        MessagesUpdate::replace_all([msg(Some("b"), "kept"), msg(None, "new")]),
    ];
    let change = R::reduce(&mut list, writes, &mut ReduceCtx::new(1))?;
    assert_eq!(change, Change::Replaced);
    assert_eq!(texts(&list), ["kept", "new"]);
    Ok(())
}

#[test]
fn messages_remove_all_on_empty_list_is_an_append() -> Result<(), ReduceError> {
    let mut list = Vec::new();
    let update = MessagesUpdate::from(msg(None, "x"))
        .with(MessageOp::RemoveAll)
        .with(msg(None, "y"));
    let change = R::reduce(&mut list, vec![update], &mut ReduceCtx::new(1))?;
    assert_eq!(change, Change::Appended { from: 0 });
    assert_eq!(texts(&list), ["y"]);
    Ok(())
}

#[test]
fn messages_removing_a_message_added_this_step_is_still_an_append() -> Result<(), ReduceError> {
    let mut list = vec![msg(Some("a"), "one")];
    let writes = vec![
        MessagesUpdate::from(vec![msg(Some("b"), "two"), msg(Some("c"), "three")]),
        MessagesUpdate::remove("b"),
    ];
    let change = R::reduce(&mut list, writes, &mut ReduceCtx::new(1))?;
    assert_eq!(change, Change::Appended { from: 1 });
    assert_eq!(texts(&list), ["one", "three"]);
    Ok(())
}

#[test]
fn messages_removed_then_readded_goes_to_the_end() -> Result<(), ReduceError> {
    let mut list = vec![msg(Some("a"), "one"), msg(Some("b"), "two")];
    let update = MessagesUpdate::remove("a").with(msg(Some("a"), "again"));
    R::reduce(&mut list, vec![update], &mut ReduceCtx::new(1))?;
    assert_eq!(texts(&list), ["two", "again"]);
    Ok(())
}

#[test]
fn messages_empty_writes_are_unchanged() -> Result<(), ReduceError> {
    let mut list = vec![msg(Some("a"), "one")];
    let change = R::reduce(
        &mut list,
        vec![MessagesUpdate::new()],
        &mut ReduceCtx::new(1),
    )?;
    assert_eq!(change, Change::Unchanged);
    assert_eq!(texts(&list), ["one"]);
    Ok(())
}

#[test]
fn messages_update_serializes_as_a_list_of_ops() -> Result<(), serde_json::Error> {
    let update = MessagesUpdate::remove("a")
        .with("hi".to_owned())
        .with(MessageOp::RemoveAll);
    let json = serde_json::to_string(&update)?;
    assert_eq!(json, r#"[{"remove":"a"},{"upsert":"hi"},"remove_all"]"#);
    let back: MessagesUpdate<String> = serde_json::from_str(&json)?;
    assert_eq!(back, update);
    Ok(())
}

#[test]
fn messages_appended_step_stores_only_new_messages() -> Result<(), Box<dyn std::error::Error>> {
    let mut list = vec![msg(Some("a"), "one")];
    let whole = R::encode(&list, Change::Replaced)?;
    let change = R::reduce(
        &mut list,
        vec![MessagesUpdate::from(msg(None, "two"))],
        &mut ReduceCtx::new(1),
    )?;
    let tail = R::encode(&list, change)?;
    assert!(matches!(tail, Stored::Tail(_)));
    assert_eq!(R::decode(&[whole.as_ref(), tail.as_ref()])?, list);
    Ok(())
}
