//! [`ThreadState`]: the agent's thread state, with every field and reducer of the runtime.
//!
//! | field | reducer |
//! |---|---|
//! | `messages` | add-messages (upsert by id, remove by id, remove all) |
//! | `sandbox` | set once; a different id is a conflict |
//! | `thread_data`, `title`, `uploaded_files`, `summary_text`, `background_tasks` | last value |
//! | `artifacts` | order-preserving union with dedup |
//! | `todos`, `goal` | [`merge_todos`], [`merge_goal`]: `None` keeps, `Some` replaces |
//! | `viewed_images` | [`merge_viewed_images`]: shallow merge, an empty map clears |
//! | `promoted` | names bound to a catalog hash |
//! | `delegations` | [`merge_delegations`]: upsert by id, terminal never regresses, last 50 |
//! | `skill_context` | [`merge_skill_context`]: normalised, dedup by path, last 8 |

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use stategraph::reducers::{Promoted, SandboxState};
use stategraph::{List, State};

use crate::message::Message;

/// The agent's thread state.
///
/// ```
/// use stategraph_nodes::{Message, ThreadState};
///
/// let update = ThreadState::update()
///     .messages(vec![Message::human("hi")].into())
///     .title(Some("Greeting".to_string()));
/// assert!(update.title.is_some());
/// ```
#[derive(State, Clone, Default, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ThreadState {
    /// The conversation.
    #[reduce(add_messages)]
    pub messages: List<Message>,
    /// The thread's sandbox (absent until one is acquired).
    #[reduce(sandbox)]
    pub sandbox: Option<SandboxState>,
    /// Host paths of the thread's workspace, uploads and outputs.
    pub thread_data: Option<ThreadData>,
    /// The thread's title.
    pub title: Option<String>,
    /// Presented files (virtual paths), deduplicated.
    #[reduce(artifacts)]
    pub artifacts: Vec<String>,
    /// The to-do list (`None` never written; `Some(vec![])` cleared).
    #[reduce(with = merge_todos)]
    pub todos: Option<Vec<Todo>>,
    /// The thread's goal.
    #[reduce(with = merge_goal)]
    pub goal: Option<Goal>,
    /// Files the user uploaded.
    pub uploaded_files: Option<Vec<UploadedFile>>,
    /// Images the model has viewed, by path (metadata only).
    #[reduce(with = merge_viewed_images)]
    pub viewed_images: BTreeMap<String, ViewedImage>,
    /// Deferred tools promoted by tool search, bound to a catalog hash.
    #[reduce(promoted)]
    pub promoted: Option<Promoted>,
    /// The delegation ledger: one entry per `task` call.
    #[reduce(with = merge_delegations)]
    pub delegations: Vec<Delegation>,
    /// Skills the model has read (their policies become active).
    #[reduce(with = merge_skill_context)]
    pub skill_context: Vec<SkillRef>,
    /// A running summary of older messages.
    pub summary_text: Option<String>,
    /// Background tasks of the thread.
    pub background_tasks: Vec<BackgroundTask>,
}

/// Host paths of a thread's directories.
#[derive(Clone, Default, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ThreadData {
    /// The workspace directory.
    pub workspace_path: Option<String>,
    /// The uploads directory.
    pub uploads_path: Option<String>,
    /// The outputs directory.
    pub outputs_path: Option<String>,
}

/// One to-do item.
#[derive(Clone, Default, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Todo {
    /// What to do.
    pub content: String,
    /// `pending`, `in_progress` or `completed`.
    pub status: TodoStatus,
}

/// The status of a to-do item.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    #[default]
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

/// The thread's goal.
#[derive(Clone, Default, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Goal {
    /// What the run should achieve.
    pub objective: String,
    /// How to tell it was achieved.
    pub success_criteria: Vec<String>,
    /// Whether it has been reached.
    pub achieved: bool,
}

/// An uploaded file.
#[derive(Clone, Default, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UploadedFile {
    /// The file name.
    pub filename: String,
    /// Its virtual path (`/mnt/user-data/uploads/...`).
    pub path: String,
    /// Size in bytes.
    pub size: u64,
}

/// Metadata of a viewed image (never its bytes).
#[derive(Clone, Default, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ViewedImage {
    /// The MIME type.
    pub mime_type: String,
    /// Size in bytes.
    pub size: u64,
    /// The resolved host path.
    pub actual_path: String,
}

/// A delegation's status: `in_progress` or one of the terminal statuses.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DelegationStatus {
    /// The subagent is running.
    #[default]
    InProgress,
    /// It finished.
    Completed,
    /// It failed.
    Failed,
    /// It was cancelled.
    Cancelled,
    /// It ran out of time.
    TimedOut,
    /// The lead stopped waiting for it.
    PollingTimedOut,
}

impl DelegationStatus {
    /// Whether the status is final.
    pub fn is_terminal(self) -> bool {
        self != DelegationStatus::InProgress
    }
}

/// One entry of the delegation ledger.
#[derive(Clone, Default, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Delegation {
    /// The `task` call's id.
    pub id: String,
    /// The run that delegated.
    pub run_id: Option<String>,
    /// A short label (at most 200 chars).
    pub description: String,
    /// Which subagent.
    pub subagent_type: String,
    /// Its status.
    pub status: DelegationStatus,
    /// A bounded excerpt of the result.
    pub result_brief: Option<String>,
    /// SHA-256 (hex) of the full result.
    pub result_sha256: Option<String>,
    /// Where the full result is kept.
    pub result_ref: Option<String>,
    /// Which cap stopped it, if any.
    pub stop_reason: Option<String>,
    /// When it was created (ms since the epoch).
    pub created_at: i64,
}

/// A skill the model has read.
#[derive(Clone, Default, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SkillRef {
    /// The skill's name.
    pub name: String,
    /// Its container path (`/mnt/skills/<category>/<name>/SKILL.md`).
    pub path: String,
    /// Its description (whitespace collapsed, at most 500 chars).
    pub description: String,
    /// When it was read.
    pub loaded_at: i64,
}

/// A background task of the thread.
#[derive(Clone, Default, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BackgroundTask {
    /// Its id.
    pub task_id: String,
    /// Its name.
    pub task_name: String,
    /// Its status.
    pub status: String,
    /// Last change (ms since the epoch).
    pub updated_at: i64,
}

/// The most delegation entries kept.
pub const MAX_DELEGATIONS: usize = 50;
/// The most skill-context entries kept.
pub const MAX_SKILL_CONTEXT: usize = 8;
/// The longest skill description kept, in chars.
pub const MAX_SKILL_DESCRIPTION: usize = 500;

/// `todos`: `None` keeps the list; `Some(list)` replaces it (an empty list clears it).
pub fn merge_todos(current: &mut Option<Vec<Todo>>, update: Option<Vec<Todo>>) {
    if update.is_some() {
        *current = update;
    }
}

/// `goal`: `None` keeps the goal; `Some(goal)` replaces it.
pub fn merge_goal(current: &mut Option<Goal>, update: Option<Goal>) {
    if update.is_some() {
        *current = update;
    }
}

/// `viewed_images`: an empty map clears every entry; otherwise new paths are added and
/// existing ones overwritten.
pub fn merge_viewed_images(
    current: &mut BTreeMap<String, ViewedImage>,
    update: BTreeMap<String, ViewedImage>,
) {
    if update.is_empty() {
        current.clear();
    } else {
        current.extend(update);
    }
}

/// `delegations`: upsert by id in first-seen order; the latest version wins, except that a
/// terminal entry is never replaced by a non-terminal one; a replacement keeps the original
/// `created_at`, and its `run_id` when the update has none; the last 50 entries are kept.
pub fn merge_delegations(current: &mut Vec<Delegation>, update: Vec<Delegation>) {
    for entry in update {
        match current.iter_mut().find(|d| d.id == entry.id) {
            None => current.push(entry),
            Some(old) => {
                if old.status.is_terminal() && !entry.status.is_terminal() {
                    continue;
                }
                let created_at = old.created_at;
                let run_id = old.run_id.take();
                *old = Delegation {
                    created_at,
                    run_id: entry.run_id.clone().or(run_id),
                    ..entry
                };
            }
        }
    }
    if current.len() > MAX_DELEGATIONS {
        let excess = current.len() - MAX_DELEGATIONS;
        current.drain(..excess);
    }
}

/// Normalise a skill reference: collapse whitespace in the description and cut it to 500 chars.
pub fn normalize_skill_ref(mut skill: SkillRef) -> SkillRef {
    let collapsed = skill
        .description
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    skill.description = collapsed.chars().take(MAX_SKILL_DESCRIPTION).collect();
    skill
}

/// `skill_context`: every entry normalised; dedup by path, where re-reading a path moves it to
/// the end with the new entry; the 8 most recent entries are kept.
pub fn merge_skill_context(current: &mut Vec<SkillRef>, update: Vec<SkillRef>) {
    for skill in update {
        let skill = normalize_skill_ref(skill);
        current.retain(|s| s.path != skill.path);
        current.push(skill);
    }
    if current.len() > MAX_SKILL_CONTEXT {
        let excess = current.len() - MAX_SKILL_CONTEXT;
        current.drain(..excess);
    }
}

impl ThreadState {
    /// An update that adds one human message: what a user's turn gives the agent.
    ///
    /// ```
    /// use stategraph_nodes::ThreadState;
    ///
    /// let turn = ThreadState::human_input("hello");
    /// assert_eq!(turn.messages.map(|m| m.ops().len()), Some(1));
    /// ```
    pub fn human_input(text: impl Into<String>) -> ThreadStateUpdate {
        ThreadState::update().messages(stategraph::reducers::MessagesUpdate::from(Message::human(
            text,
        )))
    }

    /// The last AI message, if the conversation has one.
    pub fn last_ai(&self) -> Option<&crate::AiMessage> {
        self.messages.iter().rev().find_map(Message::as_ai)
    }

    /// The promoted names that count under `catalog_hash` (none if the stored hash differs).
    pub fn promoted_under(&self, catalog_hash: &str) -> Vec<String> {
        match &self.promoted {
            Some(p) if p.catalog_hash == catalog_hash => p.names.clone(),
            _ => Vec::new(),
        }
    }
}

/// A state with a conversation: a messages field merged by the add-messages reducer (an
/// upsert by id replaces a message in place, a removal by id or of all messages removes), as
/// [`ThreadState::messages`] is. The composable nodes — [`model_node`](crate::toolbox::model_node),
/// [`tool_node`](crate::toolbox::tool_node), [`tools_condition`](crate::toolbox::tools_condition)
/// and [`Agent::as_node`](crate::Agent::as_node)'s mappings — work over any such state.
///
/// Implement it for a `#[derive(State)]` struct with one line,
/// [`impl_messages_state!`](crate::impl_messages_state): the macro only compiles when the
/// field is a `List<Message>` with `#[reduce(add_messages)]`, because the update it writes is
/// a [`MessagesUpdate`](stategraph::reducers::MessagesUpdate) (another reducer's update type
/// does not fit the field's setter).
///
/// ```
/// use stategraph::{List, State};
/// use stategraph_nodes::{impl_messages_state, Message, MessagesState};
///
/// #[derive(State, Clone, Default, Debug)]
/// struct Research {
///     topic: String,
///     #[reduce(add_messages)]
///     chat: List<Message>,
/// }
/// impl_messages_state!(Research, chat);
///
/// let update = Research::append_messages([Message::human("find sources")]);
/// assert!(update.chat.is_some() && update.topic.is_none());
/// ```
pub trait MessagesState: stategraph::State {
    /// The conversation, oldest first (shared: a clone does not copy the messages).
    fn messages(&self) -> &List<Message>;

    /// An update that writes `update` into the messages field (and nothing else).
    fn messages_update(update: stategraph::reducers::MessagesUpdate<Message>) -> Self::Update;

    /// An update appending `messages` (a message with the id of one already there replaces
    /// it in place).
    fn append_messages(messages: impl IntoIterator<Item = Message>) -> Self::Update {
        Self::messages_update(messages.into_iter().collect::<Vec<_>>().into())
    }

    /// The last message, if it is an AI message.
    fn last_ai_message(&self) -> Option<&crate::AiMessage> {
        self.messages().last().and_then(Message::as_ai)
    }
}

/// Implement [`MessagesState`] for a `#[derive(State)]` struct whose field `$field` holds its
/// conversation (`#[reduce(add_messages)]` on a `List<Message>`).
///
/// ```
/// use stategraph::{List, State};
/// use stategraph_nodes::{impl_messages_state, Message, MessagesState};
///
/// #[derive(State, Clone, Default, Debug)]
/// struct Review {
///     #[reduce(add_messages)]
///     messages: List<Message>,
///     approved: bool,
/// }
/// impl_messages_state!(Review, messages);
/// assert!(Review::default().messages().is_empty());
/// ```
#[macro_export]
macro_rules! impl_messages_state {
    ($state:ty, $field:ident) => {
        impl $crate::MessagesState for $state {
            fn messages(&self) -> &$crate::stategraph::List<$crate::Message> {
                &self.$field
            }

            fn messages_update(
                update: $crate::stategraph::reducers::MessagesUpdate<$crate::Message>,
            ) -> <$state as $crate::stategraph::State>::Update {
                <$state>::update().$field(update)
            }
        }
    };
}

impl MessagesState for ThreadState {
    fn messages(&self) -> &List<Message> {
        &self.messages
    }

    fn messages_update(update: stategraph::reducers::MessagesUpdate<Message>) -> ThreadStateUpdate {
        ThreadState::update().messages(update)
    }
}
