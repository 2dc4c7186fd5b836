//! Reading an embeddings answer: its vectors in the texts' order, or its error message.

use serde::Deserialize;
use serde_json::Value;

use crate::EmbedError;

/// The longest answer accepted, in bytes (512 vectors of 3,072 numbers as JSON fit well).
const MAX_BODY: usize = 64 << 20;

/// How many characters of an error body or unreadable answer an error keeps.
const SNIPPET_CHARS: usize = 500;

#[derive(Deserialize)]
struct Answer {
    data: Vec<Datum>,
}

#[derive(Deserialize)]
struct Datum {
    index: usize,
    embedding: Vec<f32>,
}

/// Reads a body up to [`MAX_BODY`] bytes.
pub(super) async fn read_limited(mut response: reqwest::Response) -> Result<Vec<u8>, EmbedError> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| EmbedError::Service(format!("reading the answer failed: {e}")))?
    {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(EmbedError::Decode(format!(
                "the answer is longer than {MAX_BODY} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The vectors of an answer to `asked` texts, in the texts' order (by each datum's `index`),
/// each of `dims` numbers.
pub(super) fn vectors(
    bytes: &[u8],
    asked: usize,
    dims: usize,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let answer: Answer = serde_json::from_slice(bytes).map_err(|e| {
        EmbedError::Decode(format!(
            "not an embeddings list ({e}): {}",
            snippet(&String::from_utf8_lossy(bytes))
        ))
    })?;
    if answer.data.len() != asked {
        return Err(EmbedError::Count {
            asked,
            got: answer.data.len(),
        });
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; asked];
    for datum in answer.data {
        if datum.embedding.len() != dims {
            return Err(EmbedError::Dims {
                dims,
                got: datum.embedding.len(),
            });
        }
        let slot = slots.get_mut(datum.index).ok_or_else(|| {
            EmbedError::Decode(format!(
                "index {} is out of range for {asked} texts",
                datum.index
            ))
        })?;
        if slot.replace(datum.embedding).is_some() {
            return Err(EmbedError::Decode(format!(
                "index {} is answered twice",
                datum.index
            )));
        }
    }
    // Each of the `asked` data filled a distinct slot, so every slot is full.
    Ok(slots.into_iter().flatten().collect())
}

/// A readable message from an error body: the JSON error's message when there is one, else
/// the body itself, else the status's reason.
pub(super) fn error_message(bytes: &[u8], reason: Option<&str>) -> String {
    let text = String::from_utf8_lossy(bytes);
    let message = match serde_json::from_str::<Value>(&text) {
        Ok(value) => json_message(&value).unwrap_or_else(|| text.into_owned()),
        Err(_) => text.into_owned(),
    };
    let message = snippet(&message);
    if message.is_empty() {
        reason.unwrap_or("no body").to_owned()
    } else {
        message
    }
}

fn json_message(value: &Value) -> Option<String> {
    match value.get("error") {
        Some(Value::String(s)) => return Some(s.clone()),
        Some(error @ Value::Object(fields)) => {
            let message = fields.get("message").and_then(Value::as_str);
            return Some(message.map_or_else(|| error.to_string(), str::to_owned));
        }
        _ => {}
    }
    ["message", "detail"]
        .iter()
        .find_map(|k| value.get(*k).and_then(Value::as_str).map(str::to_owned))
}

/// `text`, its whitespace runs folded, cut to [`SNIPPET_CHARS`] characters.
fn snippet(text: &str) -> String {
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match folded.char_indices().nth(SNIPPET_CHARS) {
        Some((cut, _)) => format!("{}… ({} more bytes)", &folded[..cut], folded.len() - cut),
        None => folded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_come_from_the_usual_shapes() {
        let m = |b: &str| error_message(b.as_bytes(), Some("Bad Request"));
        assert_eq!(
            m(r#"{"error":{"message":"bad key","type":"auth"}}"#),
            "bad key"
        );
        assert_eq!(m(r#"{"error":"overloaded"}"#), "overloaded");
        assert_eq!(m(r#"{"detail":"Not Found"}"#), "Not Found");
        assert_eq!(m("<html>oops</html>"), "<html>oops</html>");
        assert_eq!(m(""), "Bad Request");
    }

    #[test]
    fn an_index_answered_twice_is_refused() {
        let body = br#"{"data":[{"index":0,"embedding":[1.0]},{"index":0,"embedding":[2.0]}]}"#;
        let err = vectors(body, 2, 1).map(drop).unwrap_err();
        assert!(
            err.to_string().contains("index 0 is answered twice"),
            "{err}"
        );
    }
}
