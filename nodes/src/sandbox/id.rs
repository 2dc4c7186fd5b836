//! Which user and thread ids may name a sandbox directory: one plain path segment that cannot
//! leave the sandbox root.

use std::fmt;

/// The longest id accepted, in bytes.
pub const MAX_ID_LEN: usize = 128;

/// What an id names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdRole {
    /// A user id.
    User,
    /// A thread id.
    Thread,
}

impl fmt::Display for IdRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IdRole::User => "user",
            IdRole::Thread => "thread",
        })
    }
}

/// The rule an id broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdRule {
    /// The id is empty.
    Empty,
    /// The id is longer than [`MAX_ID_LEN`] bytes.
    TooLong,
    /// The id is `.` or `..`.
    DotSegment,
    /// The id holds a character outside ASCII letters, digits and `-_.@+` (a separator, NUL,
    /// `:`, whitespace, any non-ASCII character).
    Character(char),
}

impl fmt::Display for IdRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdRule::Empty => f.write_str("it is empty"),
            IdRule::TooLong => write!(f, "it is longer than {MAX_ID_LEN} bytes"),
            IdRule::DotSegment => f.write_str("it is a dot segment"),
            IdRule::Character(c) => write!(f, "it contains {c:?}"),
        }
    }
}

/// A user or thread id that cannot name a sandbox directory.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{role} id {id:?} cannot name a sandbox: {rule}")]
pub struct IdError {
    /// What the id names.
    pub role: IdRole,
    /// The id.
    pub id: String,
    /// The rule it broke.
    pub rule: IdRule,
}

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@' | '+')
}

impl IdRole {
    /// Checks that `id` is one plain path segment.
    ///
    /// # Errors
    /// An [`IdError`] naming the id and the rule it broke.
    pub fn check(self, id: &str) -> Result<(), IdError> {
        let rule = if id.is_empty() {
            Some(IdRule::Empty)
        } else if id.len() > MAX_ID_LEN {
            Some(IdRule::TooLong)
        } else if id == "." || id == ".." {
            Some(IdRule::DotSegment)
        } else {
            id.chars().find(|c| !allowed(*c)).map(IdRule::Character)
        };
        match rule {
            None => Ok(()),
            Some(rule) => Err(IdError {
                role: self,
                id: id.to_owned(),
                rule,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_ids_pass() -> Result<(), IdError> {
        for id in ["t1", "ana", "ana@example.com", "0b3e-uuid_like.v2", "a+b"] {
            IdRole::Thread.check(id)?;
        }
        Ok(())
    }

    #[test]
    fn ids_that_could_escape_name_their_rule() {
        let long = "x".repeat(MAX_ID_LEN + 1);
        let cases: [(&str, IdRule); 9] = [
            ("", IdRule::Empty),
            (&long, IdRule::TooLong),
            (".", IdRule::DotSegment),
            ("..", IdRule::DotSegment),
            ("a/b", IdRule::Character('/')),
            ("a\\b", IdRule::Character('\\')),
            ("a\0b", IdRule::Character('\0')),
            ("a:b", IdRule::Character(':')),
            ("a\u{2024}b", IdRule::Character('\u{2024}')),
        ];
        for (id, rule) in cases {
            let err = IdRole::User.check(id).err();
            assert_eq!(err.as_ref().map(|e| e.rule), Some(rule), "{id:?}");
            assert!(err.is_some_and(|e| e.to_string().starts_with("user id ")));
        }
    }
}
