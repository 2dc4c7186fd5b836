//! Channel names in a checkpoint's control state: a state field, or one of the trigger
//! channels the engine keeps (`branch:to:<node>`, `join:<a>+<b>:<node>`).
//!
//! ```
//! use stategraph_checkpoints::ChannelName;
//! assert_eq!(ChannelName::parse("count"), ChannelName::Field("count"));
//! assert_eq!(ChannelName::parse("branch:to:write"), ChannelName::Branch("write"));
//! assert!(!ChannelName::parse("join:a+b:c").is_field());
//! ```

/// The prefix of a node's trigger channel: `branch:to:<node>`.
pub const BRANCH_PREFIX: &str = "branch:to:";

/// The prefix of a fan-in barrier's channel: `join:<a>+<b>:<node>`.
pub const JOIN_PREFIX: &str = "join:";

/// What a key of [`Control::versions`](crate::Control::versions) names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelName<'a> {
    /// A state field, by its name.
    Field(&'a str),
    /// The trigger channel of a node (`branch:to:<node>`): the node's name.
    Branch(&'a str),
    /// The channel of a fan-in barrier (`join:<a>+<b>:<node>`): what follows `join:`.
    Join(&'a str),
}

impl<'a> ChannelName<'a> {
    /// Classify a channel name by its prefix; a name with neither trigger prefix is a field.
    pub fn parse(name: &'a str) -> Self {
        if let Some(node) = name.strip_prefix(BRANCH_PREFIX) {
            ChannelName::Branch(node)
        } else if let Some(rest) = name.strip_prefix(JOIN_PREFIX) {
            ChannelName::Join(rest)
        } else {
            ChannelName::Field(name)
        }
    }

    /// Whether the name is a state field's (not a trigger channel's).
    pub fn is_field(self) -> bool {
        matches!(self, ChannelName::Field(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_classified_by_their_trigger_prefix() {
        assert_eq!(ChannelName::parse("log"), ChannelName::Field("log"));
        assert_eq!(ChannelName::parse("branch:to:a"), ChannelName::Branch("a"));
        assert_eq!(ChannelName::parse("join:a+b:c"), ChannelName::Join("a+b:c"));
        assert!(ChannelName::parse("log").is_field());
        assert!(!ChannelName::parse("branch:to:a").is_field());
        assert!(!ChannelName::parse("join:a+b:c").is_field());
        // Only the full prefix makes a trigger channel.
        assert!(ChannelName::parse("branch:a").is_field());
    }
}
