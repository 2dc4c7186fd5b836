//! LangGraph's recorded behaviour: the JSON files the probe scripts in `fixtures/langgraph/`
//! wrote from a run of LangGraph (Python), for tests that compare our behaviour to it.

use serde_json::Value;

/// The recorded file `fixtures/langgraph/<name>.json`.
///
/// # Errors
/// The file is missing or is not JSON.
pub fn recorded(name: &str) -> Result<Value, String> {
    let path = format!(
        "{}/fixtures/langgraph/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))
}

/// The strings of the JSON array at `pointer` in `v` (`/final_log`), in order.
///
/// # Errors
/// Nothing at `pointer`, or not an array of strings.
pub fn strings(v: &Value, pointer: &str) -> Result<Vec<String>, String> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("no array at {pointer}"))?
        .iter()
        .map(|s| {
            s.as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("a non-string in {pointer}: {s}"))
        })
        .collect()
}

/// The node each event of a recorded `stream_mode="updates"` list is keyed by, in order
/// (`__interrupt__` for an interrupt event).
///
/// # Errors
/// Nothing at `pointer`, or an event that is not an object with one key.
pub fn update_nodes(v: &Value, pointer: &str) -> Result<Vec<String>, String> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("no array at {pointer}"))?
        .iter()
        .map(|ev| match ev.as_object() {
            Some(o) if o.len() == 1 => Ok(o.keys().cloned().collect()),
            _ => Err(format!("an updates event with not one key: {ev}")),
        })
        .collect()
}
