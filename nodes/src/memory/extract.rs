//! Fact extraction: the prompt the memory layer sends after a run, the conversation it shows
//! the model, and how the model's JSON answer is read.

use serde_json::Value;

use crate::message::Message;
use crate::model::ModelRequest;

/// The system prompt of an extraction call.
pub const EXTRACTION_PROMPT: &str = "You keep long-term memory about the user. Read the \
conversation and list the lasting facts it states about the user: preferences, personal \
details, goals, decisions. Leave out what only matters to this conversation. Answer with JSON \
only, in this form: {\"facts\": [\"<one fact per string, as a short sentence>\"]}. Answer \
{\"facts\": []} when there is none.";

/// A model answer that is not the facts JSON.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FactsError {
    /// The answer is not JSON.
    #[error("the extraction answer is not JSON ({source}): {answer:?}")]
    NotJson {
        /// The answer, cut to 200 characters.
        answer: String,
        /// The parse error.
        source: serde_json::Error,
    },
    /// The JSON has no list of facts.
    #[error("the extraction answer has no \"facts\" list: {answer:?}")]
    NoFacts {
        /// The answer, cut to 200 characters.
        answer: String,
    },
}

/// The facts in an extraction answer: `{"facts": [...]}` or a bare list, where a fact is a
/// string or an object with a `content` or `text` string; code fences around it are ignored,
/// and so are empty facts.
///
/// ```
/// use stategraph_nodes::memory::parse_facts;
/// let facts = parse_facts("```json\n{\"facts\": [\"likes green tea\", {\"content\": \"lives in Lyon\"}]}\n```")?;
/// assert_eq!(facts, ["likes green tea", "lives in Lyon"]);
/// assert!(parse_facts("no idea").is_err());
/// # Ok::<(), stategraph_nodes::memory::FactsError>(())
/// ```
///
/// # Errors
/// [`FactsError`] naming the answer when it is not JSON or holds no list of facts.
pub fn parse_facts(answer: &str) -> Result<Vec<String>, FactsError> {
    let body = unfenced(answer);
    let cut = || answer.chars().take(200).collect::<String>();
    let value: Value = serde_json::from_str(body).map_err(|source| FactsError::NotJson {
        answer: cut(),
        source,
    })?;
    let list = match &value {
        Value::Array(items) => items,
        Value::Object(map) => match map.get("facts") {
            Some(Value::Array(items)) => items,
            _ => return Err(FactsError::NoFacts { answer: cut() }),
        },
        _ => return Err(FactsError::NoFacts { answer: cut() }),
    };
    Ok(list
        .iter()
        .filter_map(|f| match f {
            Value::String(s) => Some(s.as_str()),
            Value::Object(o) => o
                .get("content")
                .or_else(|| o.get("text"))
                .and_then(Value::as_str),
            _ => None,
        })
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(str::to_owned)
        .collect())
}

/// The text inside a Markdown code fence, or all of it.
fn unfenced(answer: &str) -> &str {
    let t = answer.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let rest = rest.split_once('\n').map_or("", |(_, body)| body);
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

/// The extraction request for a conversation: the user's and the assistant's turns as text
/// (tool traffic and system messages left out).
pub(crate) fn extraction_request<'a>(
    conversation: impl Iterator<Item = &'a Message>,
) -> ModelRequest {
    let lines: Vec<String> = conversation
        .filter_map(|m| match m {
            Message::Human { content, .. } => Some(format!("User: {content}")),
            Message::Ai(ai) if !ai.content.trim().is_empty() => {
                Some(format!("Assistant: {}", ai.content))
            }
            _ => None,
        })
        .collect();
    let mut request = ModelRequest::new(vec![Message::human(lines.join("\n"))]);
    request.system = Some(EXTRACTION_PROMPT.to_owned());
    request
}
