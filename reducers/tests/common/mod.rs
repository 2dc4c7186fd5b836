//! The message type the reducer property tests share.
#![allow(unreachable_pub, missing_docs)]

use serde::{Deserialize, Serialize};
use stategraph_reducers::Message;

/// A message with an optional id and a one-byte text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Msg {
    pub id: Option<String>,
    pub text: u8,
}

impl Message for Msg {
    fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }
    fn set_id(&mut self, id: String) {
        self.id = Some(id);
    }
}
