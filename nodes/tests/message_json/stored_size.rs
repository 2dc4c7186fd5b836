//! A plain text conversation hardly grows in storage: a human message as a LangChain dict
//! takes the bytes it took before, an AI message 22 more (its finish reason moves into
//! `response_metadata`, which LangChain's clients read it from).

use crate::samples::plain_conversation;
use crate::R;

/// The stored bytes (compact JSON, as checkpoints store a field) of the 20-message
/// conversation in the form written before LangChain dicts: measured with that code.
const OLD_BYTES: usize = 2551;

/// What wrapping `"finish_reason": ...` in `"response_metadata": {...}` costs.
const AI_GROWTH: usize = r#""response_metadata":{}"#.len();

#[test]
fn a_plain_twenty_message_conversation_grows_only_by_the_ai_messages_response_metadata() -> R {
    let messages = plain_conversation(20);
    let now = serde_json::to_vec(&messages)?.len();
    println!("stored bytes of 20 plain messages: before {OLD_BYTES}, now {now}");
    assert_eq!(AI_GROWTH, 22);
    assert!(
        now <= OLD_BYTES + 10 * AI_GROWTH,
        "{now} bytes now, {OLD_BYTES} before: more than {AI_GROWTH} bytes an AI message"
    );
    Ok(())
}
