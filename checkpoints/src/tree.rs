//! A thread's history as a tree of branches: which checkpoint follows which, where a fork
//! or an edit started a branch, and the path a branch took from the thread's first
//! checkpoint to its end.
//!
//! A saver lists a thread's checkpoints newest first by id, so the checkpoints of two
//! branches interleave by time. [`BranchTree`] puts them back in their shape: each
//! checkpoint under its parent, a branch numbered for every checkpoint that is not its
//! parent's first child, and each branch's end ([`BranchTree::heads`]).
//!
//! ```
//! use stategraph_checkpoints::tree::BranchTree;
//! use stategraph_checkpoints::{Checkpoint, CheckpointId, Control, Source};
//!
//! fn cp(id: u128, parent: Option<u128>, step: i64, source: Source) -> Checkpoint {
//!     Checkpoint {
//!         id: CheckpointId::from_u128(id),
//!         parent: parent.map(CheckpointId::from_u128),
//!         step,
//!         source,
//!         created_at_ms: 0,
//!         control: Control::default(),
//!         metadata: Default::default(),
//!     }
//! }
//! // 1 → 2 → 3, and a fork of 2 (4) that ran on (5): listed newest first.
//! let tree = BranchTree::new(vec![
//!     cp(5, Some(4), 2, Source::Loop),
//!     cp(4, Some(2), 1, Source::Fork),
//!     cp(3, Some(2), 2, Source::Loop),
//!     cp(2, Some(1), 1, Source::Loop),
//!     cp(1, None, 0, Source::Input),
//! ]);
//! let id = CheckpointId::from_u128;
//! assert_eq!(tree.heads(), vec![id(3), id(5)]);
//! assert_eq!(tree.path(id(5)), Some(vec![id(1), id(2), id(4), id(5)]));
//! assert_eq!(tree.node(id(5)).map(|n| n.branch), Some(1));
//! let drawn: Vec<String> = tree.rows().iter().map(|r| format!("{}{}", r.prefix, r.id)).collect();
//! assert_eq!(drawn[2], format!("├─{}", id(3)));
//! assert_eq!(drawn[3], format!("└─{}", id(4)));
//! assert_eq!(drawn[4], format!("  {}", id(5)));
//! ```

use std::collections::{BTreeMap, HashMap};

use crate::{Checkpoint, CheckpointId};

/// Where one checkpoint stands in its thread's tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeNode {
    /// Its parent, if the thread holds it (a pruned parent makes a root).
    pub parent: Option<CheckpointId>,
    /// Its children, oldest first.
    pub children: Vec<CheckpointId>,
    /// Its branch: 0 for the thread's first branch; a checkpoint that is not its parent's
    /// first child (a fork, an edit of an older checkpoint, a second root) starts the next
    /// number, in the order the tree is drawn; every other checkpoint is on its parent's.
    pub branch: usize,
}

/// One line of a drawn tree: the checkpoint and the drawing before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeRow {
    /// The checkpoint.
    pub id: CheckpointId,
    /// Box-drawing text that places it under its parent (`""` on the trunk, `├─`/`└─`
    /// where a branch starts, `│ ` and spaces on the lines of an open branch).
    pub prefix: String,
    /// Its branch (see [`TreeNode::branch`]).
    pub branch: usize,
    /// Whether a branch ends here.
    pub head: bool,
}

/// A thread's checkpoints arranged as the tree their parent links make.
#[derive(Debug, Clone, Default)]
pub struct BranchTree {
    headers: BTreeMap<CheckpointId, Checkpoint>,
    nodes: HashMap<CheckpointId, TreeNode>,
    roots: Vec<CheckpointId>,
    rows: Vec<TreeRow>,
}

impl BranchTree {
    /// The tree of `checkpoints` (one namespace of one thread, in any order).
    pub fn new(checkpoints: Vec<Checkpoint>) -> Self {
        let headers: BTreeMap<CheckpointId, Checkpoint> =
            checkpoints.into_iter().map(|c| (c.id, c)).collect();
        let mut nodes: HashMap<CheckpointId, TreeNode> = HashMap::new();
        let mut roots = Vec::new();
        // Ids are time-ordered: walking them in order lists every child list oldest first.
        for (id, c) in &headers {
            let parent = c.parent.filter(|p| headers.contains_key(p));
            nodes.entry(*id).or_insert_with(|| TreeNode {
                parent,
                children: Vec::new(),
                branch: 0,
            });
            match parent {
                Some(p) => nodes
                    .entry(p)
                    .or_insert_with(|| TreeNode {
                        parent: None,
                        children: Vec::new(),
                        branch: 0,
                    })
                    .children
                    .push(*id),
                None => roots.push(*id),
            }
        }
        let mut tree = BranchTree {
            headers,
            nodes,
            roots,
            rows: Vec::new(),
        };
        tree.lay_out();
        tree
    }

    /// Number the branches and draw the rows, depth first, oldest child first.
    fn lay_out(&mut self) {
        let mut next_branch = 0usize;
        // (checkpoint, prefix of its own line, prefix of the lines under it, branch)
        let mut stack: Vec<(CheckpointId, String, String, usize)> = Vec::new();
        for (i, root) in self.roots.iter().enumerate().rev() {
            let (own, under) = match (self.roots.len(), i) {
                (1, _) => (String::new(), String::new()),
                (n, i) if i + 1 == n => ("└─".to_owned(), "  ".to_owned()),
                _ => ("├─".to_owned(), "│ ".to_owned()),
            };
            stack.push((*root, own, under, usize::MAX));
        }
        while let Some((id, own, under, branch)) = stack.pop() {
            let branch = if branch == usize::MAX {
                next_branch += 1;
                next_branch - 1
            } else {
                branch
            };
            let children = match self.nodes.get_mut(&id) {
                Some(node) => {
                    node.branch = branch;
                    node.children.clone()
                }
                None => Vec::new(),
            };
            self.rows.push(TreeRow {
                id,
                prefix: own,
                branch,
                head: children.is_empty(),
            });
            if let [only] = children.as_slice() {
                stack.push((*only, under.clone(), under, branch));
                continue;
            }
            for (i, child) in children.iter().enumerate().rev() {
                let last = i + 1 == children.len();
                let own = format!("{under}{}", if last { "└─" } else { "├─" });
                let below = format!("{under}{}", if last { "  " } else { "│ " });
                // The oldest child continues its parent's branch; the others start one.
                let b = if i == 0 { branch } else { usize::MAX };
                stack.push((*child, own, below, b));
            }
        }
    }

    /// The checkpoints in drawing order: each under its parent, a parent's children oldest
    /// first, a branch drawn whole before the next one starts.
    pub fn rows(&self) -> &[TreeRow] {
        &self.rows
    }

    /// Where `id` stands, if the tree has it.
    pub fn node(&self, id: CheckpointId) -> Option<&TreeNode> {
        self.nodes
            .get(&id)
            .filter(|_| self.headers.contains_key(&id))
    }

    /// The header of `id`, if the tree has it.
    pub fn checkpoint(&self, id: CheckpointId) -> Option<&Checkpoint> {
        self.headers.get(&id)
    }

    /// The ends of the branches (checkpoints without children), oldest first; the last is
    /// the thread's newest branch end.
    pub fn heads(&self) -> Vec<CheckpointId> {
        self.headers
            .keys()
            .filter(|id| self.nodes.get(id).is_some_and(|n| n.children.is_empty()))
            .copied()
            .collect()
    }

    /// The checkpoints from the root of `id`'s branch to `id`, oldest first; `None` if the
    /// tree does not have `id`.
    pub fn path(&self, id: CheckpointId) -> Option<Vec<CheckpointId>> {
        self.headers.get(&id)?;
        let mut out = vec![id];
        let mut cur = self.nodes.get(&id).and_then(|n| n.parent);
        while let Some(p) = cur {
            out.push(p);
            cur = self.nodes.get(&p).and_then(|n| n.parent);
        }
        out.reverse();
        Some(out)
    }

    /// How many checkpoints the tree holds.
    pub fn len(&self) -> usize {
        self.headers.len()
    }

    /// Whether the tree is empty.
    pub fn is_empty(&self) -> bool {
        self.headers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Control, Source};

    fn cp(id: u128, parent: Option<u128>) -> Checkpoint {
        Checkpoint {
            id: CheckpointId::from_u128(id),
            parent: parent.map(CheckpointId::from_u128),
            step: 0,
            source: Source::Loop,
            created_at_ms: 0,
            control: Control::default(),
            metadata: BTreeMap::new(),
        }
    }

    fn drawn(tree: &BranchTree) -> Vec<String> {
        tree.rows()
            .iter()
            .map(|r| format!("{}{} b{}", r.prefix, r.id.as_u128(), r.branch))
            .collect()
    }

    #[test]
    fn a_linear_thread_is_one_undrawn_branch() {
        let tree = BranchTree::new(vec![cp(3, Some(2)), cp(1, None), cp(2, Some(1))]);
        assert_eq!(drawn(&tree), ["1 b0", "2 b0", "3 b0"]);
        assert_eq!(tree.heads(), [CheckpointId::from_u128(3)]);
    }

    #[test]
    fn branches_nest_and_number_in_drawing_order() {
        // 1 → 2 → 3 → 4; 2 → 5 → 6; 3 → 7; 5 → 8
        let tree = BranchTree::new(vec![
            cp(1, None),
            cp(2, Some(1)),
            cp(3, Some(2)),
            cp(4, Some(3)),
            cp(5, Some(2)),
            cp(6, Some(5)),
            cp(7, Some(3)),
            cp(8, Some(5)),
        ]);
        assert_eq!(
            drawn(&tree),
            [
                "1 b0",
                "2 b0",
                "├─3 b0",
                "│ ├─4 b0",
                "│ └─7 b1",
                "└─5 b2",
                "  ├─6 b2",
                "  └─8 b3",
            ]
        );
        let heads: Vec<u128> = tree.heads().iter().map(|i| i.as_u128()).collect();
        assert_eq!(heads, [4, 6, 7, 8]);
        let path: Vec<u128> = tree
            .path(CheckpointId::from_u128(8))
            .unwrap_or_default()
            .iter()
            .map(|i| i.as_u128())
            .collect();
        assert_eq!(path, [1, 2, 5, 8]);
    }

    #[test]
    fn a_pruned_parent_makes_a_second_root() {
        let tree = BranchTree::new(vec![cp(1, None), cp(2, Some(1)), cp(4, Some(3))]);
        assert_eq!(drawn(&tree), ["├─1 b0", "│ 2 b0", "└─4 b1"]);
        assert_eq!(
            tree.node(CheckpointId::from_u128(4)).map(|n| n.parent),
            Some(None)
        );
        assert!(tree.path(CheckpointId::from_u128(9)).is_none());
    }
}
