//! The serde form of messages: LangChain's message dicts (fixtures recorded from
//! langchain-core), the role form clients send, the form stored before, the round-trip law,
//! errors that name what was wrong, and the stored size of a plain conversation.

mod errors;
mod langchain;
mod old_form;
mod role_form;
mod round_trip;
mod samples;
mod stored_size;

type R = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// A committed fixture file under `tests/fixtures/`, parsed.
fn fixture(path: &str) -> Result<serde_json::Value, Box<dyn std::error::Error + Send + Sync>> {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(path);
    let text = std::fs::read_to_string(&full).map_err(|e| format!("{}: {e}", full.display()))?;
    Ok(serde_json::from_str(&text)?)
}
