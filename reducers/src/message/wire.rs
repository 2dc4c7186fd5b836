//! Reading a [`MessagesUpdate`] from JSON: a list of operations or one alone; each a tagged
//! operation (`{"upsert": m}`, `{"remove": id}`, `"remove_all"`), LangChain's removal
//! (`{"type": "remove", "id"}`) or a bare message. A message that does not read is an error
//! carrying the message type's own error, with the message's place in the list.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::{MessageOp, MessagesUpdate};

impl<'de, M: Deserialize<'de>> Deserialize<'de> for MessageOp<M> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        op(Value::deserialize(d)?).map_err(D::Error::custom)
    }
}

impl<'de, M: Deserialize<'de>> Deserialize<'de> for MessagesUpdate<M> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let ops = match Value::deserialize(d)? {
            Value::Array(items) => items
                .into_iter()
                .enumerate()
                .map(|(i, item)| {
                    op(item).map_err(|e| D::Error::custom(format!("message {i}: {e}")))
                })
                .collect::<Result<_, _>>()?,
            one => vec![op(one).map_err(D::Error::custom)?],
        };
        Ok(MessagesUpdate { ops })
    }
}

/// One operation as JSON carries it.
fn op<'de, M: Deserialize<'de>>(value: Value) -> Result<MessageOp<M>, serde_json::Error> {
    match &value {
        Value::String(tag) if tag == "remove_all" => return Ok(MessageOp::RemoveAll),
        Value::Object(map) if map.len() == 1 => {
            if let Some(message) = map.get("upsert") {
                return M::deserialize(message.clone()).map(MessageOp::Upsert);
            }
            if let Some(Value::String(id)) = map.get("remove") {
                return Ok(MessageOp::Remove(id.clone()));
            }
            if map.get("remove_all").is_some_and(Value::is_null) {
                return Ok(MessageOp::RemoveAll);
            }
        }
        Value::Object(map) if map.get("type").and_then(Value::as_str) == Some("remove") => {
            if let Some(Value::String(id)) = map.get("id") {
                return Ok(MessageOp::Remove(id.clone()));
            }
        }
        _ => {}
    }
    M::deserialize(value).map(MessageOp::Upsert)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, PartialEq, Deserialize)]
    struct Msg {
        id: Option<String>,
        text: String,
    }

    fn error_of(value: Value) -> String {
        serde_json::from_value::<MessagesUpdate<Msg>>(value)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn a_message_that_does_not_read_is_named_through_the_update() {
        let error = error_of(json!([{"id": "a", "text": "ok"}, {"id": "b", "text": 7}]));
        assert!(error.contains("message 1"), "{error}");
        assert!(error.contains("expected a string"), "{error}");
        let error = error_of(json!({"id": "b", "text": 7}));
        assert!(error.contains("expected a string"), "{error}");
    }

    #[test]
    fn every_operation_form_reads() -> Result<(), serde_json::Error> {
        let update: MessagesUpdate<Msg> = serde_json::from_value(json!([
            {"upsert": {"id": "a", "text": "x"}},
            {"remove": "b"},
            "remove_all",
            {"remove_all": null},
            {"type": "remove", "id": "c"},
            {"id": null, "text": "bare"}
        ]))?;
        let msg = |id: Option<&str>, text: &str| Msg {
            id: id.map(str::to_owned),
            text: text.to_owned(),
        };
        assert_eq!(
            update.ops(),
            [
                MessageOp::Upsert(msg(Some("a"), "x")),
                MessageOp::Remove("b".into()),
                MessageOp::RemoveAll,
                MessageOp::RemoveAll,
                MessageOp::Remove("c".into()),
                MessageOp::Upsert(msg(None, "bare")),
            ]
        );
        Ok(())
    }
}
