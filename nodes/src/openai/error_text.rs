//! Error texts: a readable message from a server's error body or a transport error.

use serde_json::Value;

/// How many characters of an error body or unreadable answer an error message keeps.
pub(super) const SNIPPET_CHARS: usize = 500;

/// The message of an `{"error": ...}` object, if `value` is one.
pub(super) fn error_object(value: &Value) -> Option<String> {
    let error = value.get("error")?;
    let message = match error {
        Value::String(s) => s.clone(),
        Value::Object(fields) => {
            let mut message = fields
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| error.to_string());
            let detail: Vec<String> = ["type", "code"]
                .iter()
                .filter_map(|k| match fields.get(*k)? {
                    Value::String(s) if !s.is_empty() => Some(format!("{k}: {s}")),
                    Value::Number(n) => Some(format!("{k}: {n}")),
                    _ => None,
                })
                .collect();
            if !detail.is_empty() {
                message = format!("{message} ({})", detail.join(", "));
            }
            message
        }
        Value::Null => return None,
        other => other.to_string(),
    };
    Some(snippet(&message))
}

/// A readable message from an error body: the JSON error's message when there is one, else
/// the body itself, cut to a readable length.
pub(super) fn error_message(body: &str) -> String {
    if let Ok(value) = serde_json::from_str::<Value>(body) {
        if let Some(message) = error_object(&value) {
            return message;
        }
        for key in ["message", "detail"] {
            if let Some(message) = value.get(key).and_then(Value::as_str) {
                return snippet(message);
            }
        }
    }
    snippet(body)
}

/// `text`, trimmed, with its whitespace runs folded, cut to [`SNIPPET_CHARS`] characters.
pub(super) fn snippet(text: &str) -> String {
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match folded.char_indices().nth(SNIPPET_CHARS) {
        Some((cut, _)) => format!("{}… ({} more bytes)", &folded[..cut], folded.len() - cut),
        None => folded,
    }
}

/// An error and its sources, joined (reqwest's own message is terse).
pub(super) fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_are_cut_on_char_boundaries() {
        let long = "é".repeat(SNIPPET_CHARS + 10);
        let cut = snippet(&long);
        assert!(cut.starts_with(&"é".repeat(SNIPPET_CHARS)));
        assert!(cut.ends_with("(20 more bytes)"));
        assert_eq!(snippet("  a \n b  "), "a b");
    }

    #[test]
    fn error_messages_come_from_the_usual_shapes() {
        assert_eq!(
            error_message(r#"{"error":{"message":"bad key","type":"auth","code":null}}"#),
            "bad key (type: auth)"
        );
        assert_eq!(error_message(r#"{"error":"overloaded"}"#), "overloaded");
        assert_eq!(error_message(r#"{"detail":"Not Found"}"#), "Not Found");
        assert_eq!(error_message("<html>oops</html>"), "<html>oops</html>");
    }
}
