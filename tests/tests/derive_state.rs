//! Behaviour of the code `#[derive(State)]` generates: the update type and its builder, the
//! field-id enum, and the `State` impl (apply, written, encode/decode).

use serde::{Deserialize, Serialize};
use stategraph::reducers::{
    Change, Message, MessagesUpdate, Promoted, ReduceCtx, ReduceError, Reducer, SandboxState,
    Stored,
};
use stategraph::state::{written_fields, Field, State};

/// A chat message without an id (for `append`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Msg {
    /// Who wrote it.
    pub from: String,
    /// What it says.
    pub text: String,
}

fn msg(from: &str, text: &str) -> Msg {
    Msg {
        from: from.into(),
        text: text.into(),
    }
}

/// Folds each write in: keeps the union of tags, in first-seen order.
fn union_tags(current: &mut Vec<String>, update: Vec<String>) {
    for tag in update {
        if !current.contains(&tag) {
            current.push(tag);
        }
    }
}

mod my_reducers {
    use stategraph::reducers::{Change, ReduceCtx, ReduceError, Reducer};

    /// Sums `i32` deltas into an `i64` total: its write type differs from its value type.
    #[derive(Debug)]
    pub struct Sum;

    impl Reducer for Sum {
        type Value = i64;
        type Update = i32;

        fn reduce(
            value: &mut i64,
            writes: Vec<i32>,
            _ctx: &mut ReduceCtx,
        ) -> Result<Change, ReduceError> {
            let before = *value;
            *value += writes.into_iter().map(i64::from).sum::<i64>();
            Ok(if *value == before {
                Change::Unchanged
            } else {
                Change::Replaced
            })
        }
    }
}

/// A public state using every way to pick a reducer (the generated public items are
/// documented, so `missing_docs` stays quiet about them).
#[derive(stategraph::State, Clone, Default, Debug, PartialEq)]
pub struct Chat {
    /// Appended.
    #[reduce(append)]
    pub messages: Vec<Msg>,
    /// Last value, by default.
    pub counter: i64,
    /// Folded with a function.
    #[reduce(with = union_tags)]
    pub tags: Vec<String>,
    /// A reducer type by path.
    #[reduce(my_reducers::Sum)]
    pub total: i64,
    /// Last value, explicitly, on a raw identifier.
    #[reduce(last_value)]
    pub r#type: String,
}

fn ctx() -> ReduceCtx {
    ReduceCtx::new(1)
}

#[test]
fn update_builder_sets_only_the_named_fields() {
    let update = Chat::update().counter(3).r#type("greeting".into());
    assert_eq!(update.counter, Some(3));
    assert_eq!(update.r#type.as_deref(), Some("greeting"));
    assert!(update.messages.is_none());
    assert!(update.tags.is_none());
    assert!(update.total.is_none());

    let empty: ChatUpdate = Chat::update();
    assert!(written_fields::<Chat>(&empty).is_empty());
}

#[test]
fn update_setter_takes_anything_convertible_into_the_write_type() {
    // `total` is reduced by `Sum`, whose write type is `i32`: an `i16` converts.
    let update = Chat::update().total(7).r#type("t".into());
    assert_eq!(update.total, Some(7i32));
    assert_eq!(update.r#type, Some(String::from("t")));
}

#[test]
fn field_enum_lists_fields_in_declaration_order_with_names_and_indices() {
    assert_eq!(
        ChatField::ALL,
        &[
            ChatField::Messages,
            ChatField::Counter,
            ChatField::Tags,
            ChatField::Total,
            ChatField::Type,
        ]
    );
    let names: Vec<_> = ChatField::ALL.iter().map(|f| f.name()).collect();
    assert_eq!(names, ["messages", "counter", "tags", "total", "type"]);
    for (i, f) in ChatField::ALL.iter().enumerate() {
        assert_eq!(f.index(), i);
        assert_eq!(ChatField::from_name(f.name()), Some(*f));
    }
    assert_eq!(ChatField::from_name("r#type"), None);
    assert_eq!(ChatField::from_name("nope"), None);
    assert!(ChatField::Messages < ChatField::Type);
}

#[test]
fn apply_appends_the_writes_of_an_append_field_in_task_order() {
    let mut chat = Chat {
        messages: vec![msg("user", "hi")],
        ..Chat::default()
    };
    let writes = vec![
        Chat::update().messages(vec![msg("a", "1"), msg("a", "2")]),
        Chat::update().counter(5),
        Chat::update().messages(vec![msg("b", "3")]),
    ];
    let changes = chat.apply(writes, &mut ctx()).unwrap();

    let texts: Vec<_> = chat.messages.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts, ["hi", "1", "2", "3"]);
    assert_eq!(chat.counter, 5);
    assert_eq!(
        changes,
        vec![
            (ChatField::Messages, Change::Appended { from: 1 }),
            (ChatField::Counter, Change::Replaced),
        ]
    );
}

#[test]
fn apply_leaves_out_fields_whose_reducer_reports_unchanged() {
    let mut chat = Chat::default();
    let changes = chat
        .apply(
            vec![Chat::update().messages(vec![]).total(0).counter(1)],
            &mut ctx(),
        )
        .unwrap();
    assert_eq!(changes, vec![(ChatField::Counter, Change::Replaced)]);
}

#[test]
fn apply_two_writes_to_a_last_value_field_is_a_concurrent_update_of_that_field() {
    let mut chat = Chat::default();
    let writes = vec![
        Chat::update().messages(vec![msg("a", "1")]),
        Chat::update().counter(1),
        Chat::update().counter(2),
    ];
    let (field, err) = chat.apply(writes, &mut ctx()).unwrap_err();
    assert_eq!(field, ChatField::Counter);
    assert_eq!(field.name(), "counter");
    assert!(matches!(err, ReduceError::ConcurrentUpdate { writes: 2 }));
}

#[test]
fn apply_reports_the_raw_identifier_field_by_its_plain_name() {
    let mut chat = Chat::default();
    let writes = vec![
        Chat::update().r#type("a".into()),
        Chat::update().r#type("b".into()),
    ];
    let (field, _) = chat.apply(writes, &mut ctx()).unwrap_err();
    assert_eq!((field, field.name()), (ChatField::Type, "type"));

    let changes = chat
        .apply(vec![Chat::update().r#type("c".into())], &mut ctx())
        .unwrap();
    assert_eq!(chat.r#type, "c");
    assert_eq!(changes, vec![(ChatField::Type, Change::Replaced)]);
}

#[test]
fn with_function_folds_each_write_in_task_order() {
    let mut chat = Chat {
        tags: vec!["x".into()],
        ..Chat::default()
    };
    let writes = vec![
        Chat::update().tags(vec!["b".to_owned(), "x".to_owned()]),
        Chat::update().tags(vec!["a".to_owned(), "b".to_owned()]),
    ];
    let changes = chat.apply(writes, &mut ctx()).unwrap();
    assert_eq!(chat.tags, ["x", "b", "a"]);
    assert_eq!(changes, vec![(ChatField::Tags, Change::Replaced)]);
}

#[test]
fn custom_reducer_type_path_reduces_its_field() {
    let mut chat = Chat {
        total: 10,
        ..Chat::default()
    };
    let writes = vec![
        Chat::update().total(5),
        Chat::update().counter(1),
        Chat::update().total(-2),
    ];
    let changes = chat.apply(writes, &mut ctx()).unwrap();
    assert_eq!(chat.total, 13);
    assert_eq!(
        changes,
        vec![
            (ChatField::Counter, Change::Replaced),
            (ChatField::Total, Change::Replaced),
        ]
    );
}

#[test]
fn written_reports_exactly_the_written_fields_in_declaration_order() {
    let update = Chat::update()
        .r#type("t".into())
        .tags(vec![])
        .messages(vec![msg("a", "b")]);
    assert_eq!(
        written_fields::<Chat>(&update),
        [ChatField::Messages, ChatField::Tags, ChatField::Type]
    );

    let mut seen = Vec::new();
    Chat::written(&Chat::update().total(1), &mut |f| seen.push(f));
    assert_eq!(seen, [ChatField::Total]);
}

fn sample_chat() -> Chat {
    Chat {
        messages: vec![msg("user", "hi"), msg("bot", "hello")],
        counter: -4,
        tags: vec!["a".into(), "b".into()],
        total: 99,
        r#type: "kind".into(),
    }
}

#[test]
fn encode_field_then_decode_field_round_trips_a_state() {
    let chat = sample_chat();
    let mut back = Chat::default();
    for &field in ChatField::ALL {
        let stored = chat.encode_field(field, Change::Replaced).unwrap();
        back.decode_field(field, &[stored.as_ref()]).unwrap();
    }
    assert_eq!(back, chat);
}

#[test]
fn encode_field_of_an_appended_field_stores_only_the_tail_and_decodes_to_the_whole_list() {
    let mut chat = sample_chat();
    let whole = chat
        .encode_field(ChatField::Messages, Change::Replaced)
        .unwrap();
    let changes = chat
        .apply(
            vec![Chat::update().messages(vec![msg("user", "more")])],
            &mut ctx(),
        )
        .unwrap();
    assert_eq!(
        changes,
        vec![(ChatField::Messages, Change::Appended { from: 2 })]
    );
    let tail = chat
        .encode_field(ChatField::Messages, changes[0].1)
        .unwrap();
    assert!(matches!(tail, Stored::Tail(_)));

    let mut back = Chat::default();
    back.decode_field(ChatField::Messages, &[whole.as_ref(), tail.as_ref()])
        .unwrap();
    assert_eq!(back.messages, chat.messages);
}

#[test]
fn decode_field_rejects_bytes_of_the_wrong_type() {
    let mut chat = Chat::default();
    let stored = Stored::Whole(br#""not a number""#.to_vec());
    assert!(chat
        .decode_field(ChatField::Counter, &[stored.as_ref()])
        .is_err());
    assert_eq!(chat.counter, 0);
}

#[test]
fn update_serializes_only_the_fields_it_writes() {
    let json = serde_json::to_string(&Chat::update().counter(3)).unwrap();
    assert_eq!(json, r#"{"counter":3}"#);

    let json = serde_json::to_value(Chat::update().r#type("x".into()).total(2)).unwrap();
    assert_eq!(json, serde_json::json!({"total": 2, "type": "x"}));
}

#[test]
fn update_deserializes_missing_fields_as_not_written() {
    let update: ChatUpdate =
        serde_json::from_str(r#"{"messages":[{"from":"a","text":"b"}],"type":"t"}"#).unwrap();
    assert_eq!(
        written_fields::<Chat>(&update),
        [ChatField::Messages, ChatField::Type]
    );
    assert_eq!(update.messages, Some(vec![msg("a", "b")]));

    let round: ChatUpdate = serde_json::from_str(&serde_json::to_string(&update).unwrap()).unwrap();
    assert_eq!(round.r#type.as_deref(), Some("t"));
    assert!(round.counter.is_none());
}

#[test]
fn an_overwrite_round_trips_through_json_in_the_overwrite_form() {
    let update = Chat::update()
        .overwrite_messages(vec![msg("a", "b")])
        .counter(1)
        .overwrite_type("t".into());
    let json = serde_json::to_value(&update).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "messages": {"__overwrite__": [{"from": "a", "text": "b"}]},
            "counter": 1,
            "type": {"__overwrite__": "t"},
        })
    );
    let back: ChatUpdate = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(serde_json::to_value(&back).unwrap(), json);
    assert_eq!(
        written_fields::<Chat>(&back),
        [ChatField::Messages, ChatField::Counter, ChatField::Type]
    );
    assert!(back.messages.is_none(), "an overwrite is not a plain write");
}

#[test]
fn update_json_keeps_its_rules_null_is_no_write_and_a_repeated_field_is_an_error() {
    let update: ChatUpdate = serde_json::from_str(r#"{"counter":null,"unknown":1}"#).unwrap();
    assert!(written_fields::<Chat>(&update).is_empty());
    let err = serde_json::from_str::<ChatUpdate>(r#"{"counter":1,"counter":2}"#).unwrap_err();
    assert!(
        err.to_string().contains("duplicate field `counter`"),
        "{err}"
    );
    let err =
        serde_json::from_str::<ChatUpdate>(r#"{"counter":{"__overwrite__":"x"}}"#).unwrap_err();
    assert!(err.to_string().contains("invalid type"), "{err}");
}

#[test]
fn the_last_setter_of_a_field_wins_between_a_write_and_an_overwrite() {
    let update = Chat::update().counter(1).overwrite_counter(2);
    assert_eq!(update.counter, None);
    assert_eq!(
        serde_json::to_string(&update).unwrap(),
        r#"{"counter":{"__overwrite__":2}}"#
    );
    let update = update.counter(3);
    assert_eq!(serde_json::to_string(&update).unwrap(), r#"{"counter":3}"#);
    assert_eq!(
        format!("{:?}", Chat::update().overwrite_counter(4)),
        "ChatUpdate { messages: None, counter: None, tags: None, total: None, type: None, \
         overwrite: Overwrite { counter: 4 } }"
    );
}

#[test]
fn an_overwrite_of_a_with_field_skips_its_function() {
    let mut chat = Chat {
        tags: vec!["a".into()],
        ..Chat::default()
    };
    let writes = vec![
        Chat::update().overwrite_tags(vec!["z".into()]),
        Chat::update().tags(vec!["b".into()]),
    ];
    let changes = chat.apply(writes, &mut ctx()).unwrap();
    assert_eq!(chat.tags, ["z"]);
    assert_eq!(changes, [(ChatField::Tags, Change::Replaced)]);
}

// A private state, a `with = Self::…` path, and a field named like a method of the update
// type all work; the private generated items raise no unused warnings.
#[derive(stategraph::State, Clone, Default, Debug)]
struct Scores {
    #[reduce(with = Self::keep_max)]
    best: u32,
    default: u32,
    update: u32,
}

impl Scores {
    fn keep_max(current: &mut u32, update: u32) {
        *current = (*current).max(update);
    }
}

#[test]
fn with_path_may_name_an_associated_function_of_the_state_through_self() {
    let mut scores = Scores::default();
    let writes = vec![
        Scores::update().best(3u32),
        Scores::update().best(9u32),
        Scores::update().best(4u32),
    ];
    scores.apply(writes, &mut ctx()).unwrap();
    assert_eq!(scores.best, 9);
}

#[test]
fn fields_named_default_and_update_do_not_shadow_the_generated_api() {
    let mut scores = Scores::default();
    let update = Scores::update().default(1u32).update(2u32);
    scores.apply(vec![update], &mut ctx()).unwrap();
    assert_eq!((scores.default, scores.update), (1, 2));
    assert_eq!(ScoresField::Update.name(), "update");
}

/// A state with no fields.
#[derive(stategraph::State, Clone, Default, Debug)]
pub struct Empty {}

#[test]
fn a_struct_without_fields_is_a_state_with_no_field_ids() {
    assert!(EmptyField::ALL.is_empty());
    let mut empty = Empty::default();
    let changes = empty
        .apply(vec![Empty::update(), EmptyUpdate::default()], &mut ctx())
        .unwrap();
    assert!(changes.is_empty());
    assert_eq!(serde_json::to_string(&Empty::update()).unwrap(), "{}");
}

#[test]
fn generated_types_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<Chat>();
    assert_send_sync::<ChatUpdate>();
    assert_send_sync::<ChatField>();
}

#[test]
fn reducer_of_a_default_field_is_last_value() {
    // The same conflict through the reducer directly: the derive picks `LastValue<i64>`.
    let mut v = 0i64;
    let err = stategraph::reducers::LastValue::<i64>::reduce(&mut v, vec![1, 2], &mut ctx());
    assert!(matches!(
        err,
        Err(ReduceError::ConcurrentUpdate { writes: 2 })
    ));
}

/// A message with an id (for `add_messages`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct IdMsg {
    id: Option<String>,
    text: String,
}

impl Message for IdMsg {
    fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    fn set_id(&mut self, id: String) {
        self.id = Some(id);
    }
}

fn id_msg(id: Option<&str>, text: &str) -> IdMsg {
    IdMsg {
        id: id.map(String::from),
        text: text.into(),
    }
}

#[derive(stategraph::State, Clone, Default, Debug, PartialEq)]
struct Agent {
    #[reduce(add_messages)]
    messages: Vec<IdMsg>,
    #[reduce(artifacts)]
    artifacts: Vec<String>,
    #[reduce(sandbox)]
    sandbox: Option<SandboxState>,
    #[reduce(promoted)]
    promoted: Option<Promoted>,
}

#[test]
fn add_messages_field_upserts_by_id_through_its_update_type() {
    let mut agent = Agent {
        messages: vec![id_msg(Some("a"), "hi")],
        ..Agent::default()
    };
    let writes = vec![
        Agent::update().messages(id_msg(None, "hello").into()),
        Agent::update().messages(vec![id_msg(Some("a"), "hi!")].into()),
    ];
    let changes = agent.apply(writes, &mut ReduceCtx::new(3)).unwrap();
    assert_eq!(
        agent.messages,
        [id_msg(Some("a"), "hi!"), id_msg(Some("s3-0"), "hello")]
    );
    assert_eq!(changes, vec![(AgentField::Messages, Change::Replaced)]);

    let (field, err) = agent
        .apply(
            vec![Agent::update().messages(MessagesUpdate::remove("nope"))],
            &mut ctx(),
        )
        .unwrap_err();
    assert_eq!(field, AgentField::Messages);
    assert!(matches!(err, ReduceError::UnknownMessageId { .. }));
}

#[test]
fn artifacts_sandbox_and_promoted_fields_use_their_builtin_reducers() {
    let mut agent = Agent {
        artifacts: vec!["a".into()],
        ..Agent::default()
    };
    let writes = vec![
        Agent::update()
            .artifacts(vec!["b".to_owned(), "a".to_owned()])
            .sandbox(SandboxState::with_id("sb-1")),
        Agent::update()
            .artifacts(vec!["c".to_owned()])
            .promoted(Promoted::new("h1", ["search"])),
    ];
    let changes = agent.apply(writes, &mut ctx()).unwrap();
    assert_eq!(agent.artifacts, ["a", "b", "c"]);
    assert_eq!(agent.sandbox, Some(SandboxState::with_id("sb-1")));
    assert_eq!(agent.promoted, Some(Promoted::new("h1", ["search"])));
    assert_eq!(
        changes,
        vec![
            (AgentField::Artifacts, Change::Appended { from: 1 }),
            (AgentField::Sandbox, Change::Replaced),
            (AgentField::Promoted, Change::Replaced),
        ]
    );

    let (field, err) = agent
        .apply(
            vec![Agent::update().sandbox(SandboxState::with_id("sb-2"))],
            &mut ctx(),
        )
        .unwrap_err();
    assert_eq!(field, AgentField::Sandbox);
    assert!(matches!(err, ReduceError::SandboxConflict { .. }));
}

#[test]
fn builtin_reducer_fields_round_trip_through_encode_and_decode() {
    let agent = Agent {
        messages: vec![id_msg(Some("m"), "x")],
        artifacts: vec!["f.txt".into()],
        sandbox: Some(SandboxState::with_id("sb")),
        promoted: Some(Promoted::new("h", ["t"])),
    };
    let mut back = Agent::default();
    for &field in AgentField::ALL {
        let stored = agent.encode_field(field, Change::Replaced).unwrap();
        back.decode_field(field, &[stored.as_ref()]).unwrap();
    }
    assert_eq!(back, agent);
}
