//! Applying a step: the tasks' writes through the reducers, their routing (edges, joins,
//! `goto`s, conditional edges), and the new channel versions.

use std::collections::BTreeSet;
use std::sync::Arc;

use stategraph_reducers::{Change, ReduceCtx};

use super::control::ScheduledSend;
use super::plan::{PlannedTask, TaskTrigger};
use super::superstep::RunLoop;
use crate::command::{Goto, END};
use crate::graph::{GraphInner, TaskOutput};
use crate::state::Field;
use crate::{RunError, State};

/// What the next step runs, as routing decides it.
pub(super) struct NextSchedule {
    /// Per node, whether it is triggered.
    pub(super) branches: Vec<bool>,
    /// `Send`s.
    pub(super) sends: Vec<ScheduledSend>,
}

impl NextSchedule {
    /// Nothing scheduled, in a graph of `nodes` nodes.
    pub(super) fn new(nodes: usize) -> Self {
        Self::reusing(Vec::new(), nodes)
    }

    /// Nothing scheduled, in a graph of `nodes` nodes, in the room of an earlier step's
    /// `branches` (no allocation per step).
    fn reusing(mut branches: Vec<bool>, nodes: usize) -> Self {
        branches.clear();
        branches.resize(nodes, false);
        NextSchedule {
            branches,
            sends: Vec::new(),
        }
    }
}

/// The writes of a step's outputs, gathered for the reducers.
struct StepWrites<S: State> {
    /// Which task (by position) wrote which field, to name the writers of a conflict; left
    /// empty when one task wrote, as it then wrote any field that fails.
    writers: Vec<(S::Field, usize)>,
    /// The one task that wrote, when only one did.
    only_writer: Option<usize>,
    updates: Vec<S::Update>,
    /// Tasks whose conditional edges run after the writes (by position).
    routed: Vec<usize>,
    /// A join's barrier changed.
    joins_touched: bool,
}

impl<S: State> RunLoop<S> {
    /// Apply the outputs of a step's tasks (by task position).
    pub(super) fn apply(
        &mut self,
        tasks: &[PlannedTask],
        outputs: Vec<(usize, TaskOutput<S>)>,
    ) -> Result<(), RunError> {
        let g = self.g.clone();
        let version = self.control.max_version + 1;
        let mut next =
            NextSchedule::reusing(std::mem::take(&mut self.spare_branches), g.nodes.len());
        self.consume_triggers(&g, tasks);
        let writes = self.gather_writes(&g, tasks, outputs, version, &mut next)?;
        let mut rctx = ReduceCtx::new(self.step);
        let changes = Arc::make_mut(&mut self.state)
            .apply(writes.updates, &mut rctx)
            .map_err(|(field, source)| {
                let mut names: Vec<String> = match writes.only_writer {
                    Some(ti) => vec![self.node_name(&tasks[ti]).to_string()],
                    None => writes
                        .writers
                        .iter()
                        .filter(|(f, _)| *f == field)
                        .map(|(_, ti)| self.node_name(&tasks[*ti]).to_string())
                        .collect(),
                };
                names.dedup();
                RunError::Reduce {
                    field: field.name(),
                    writers: names,
                    step: self.step,
                    source,
                }
            })?;
        // Conditional edges read the state after the step's writes.
        for ti in writes.routed {
            let branch_ids = match tasks[ti].node {
                Some(i) => &g.nodes[i].branches,
                None => &g.entry_branches,
            };
            for &b in branch_ids {
                let branch = &g.branches[b];
                let route = (branch.router)(&self.state, &self.route_context());
                self.route(route.0, &branch.from, Some(&branch.targets), &mut next)?;
            }
        }
        self.record_versions(&g, version, &changes, next, writes.joins_touched);
        Ok(())
    }

    /// What this step's routers see besides the state (three words, no allocation).
    fn route_context(&self) -> crate::RouteContext<'_> {
        crate::RouteContext {
            context: self.shared.context.as_ref(),
            steps: crate::managed::Steps {
                step: self.step,
                stop: self.stop,
            },
        }
    }

    /// Mark the triggers the step's edge tasks consumed.
    fn consume_triggers(&mut self, g: &GraphInner<S>, tasks: &[PlannedTask]) {
        for t in tasks {
            if let (Some(i), TaskTrigger::Edge) = (t.node, t.trigger) {
                self.control.seen_branch[i] = self.control.branch_versions[i];
                self.control.branches[i] = false;
                for (j, join) in g.joins.iter().enumerate() {
                    if join.target == i && self.control.join_ready(j) {
                        self.control.seen_join[j] = self.control.join_versions[j];
                        self.control.barriers[j].iter_mut().for_each(|s| *s = false);
                    }
                }
            }
        }
    }

    /// Gather the outputs' updates (streamed as their tasks finished), follow their edges,
    /// joins and `goto`s (an error handler's output follows only its `goto`s).
    fn gather_writes(
        &mut self,
        g: &GraphInner<S>,
        tasks: &[PlannedTask],
        outputs: Vec<(usize, TaskOutput<S>)>,
        version: u64,
        next: &mut NextSchedule,
    ) -> Result<StepWrites<S>, RunError> {
        let mut writes = StepWrites {
            writers: Vec::new(),
            updates: Vec::new(),
            routed: Vec::with_capacity(outputs.len()),
            joins_touched: false,
            only_writer: match *outputs.as_slice() {
                [(ti, _)] => Some(ti),
                _ => None,
            },
        };
        for (ti, mut out) in outputs {
            let t = &tasks[ti];
            let handled = out.handled.take();
            let name = self.node_name(t);
            if writes.only_writer.is_none() {
                for u in &out.updates {
                    S::written(u, &mut |f| writes.writers.push((f, ti)));
                }
            }
            let (out_edges, allowed) = match t.node {
                Some(i) => (&g.nodes[i].out, g.nodes[i].destinations.as_ref()),
                None => (&g.entry, None),
            };
            if let Some(h) = handled {
                self.handled.push(*h);
                self.route(out.goto, &name, allowed, next)?;
                writes.updates.extend(out.updates);
                continue;
            }
            for &to in out_edges {
                next.branches[to] = true;
            }
            if let Some(i) = t.node {
                for &j in &g.nodes[i].joins {
                    if let Some(pos) = g.joins[j].sources.iter().position(|&s| s == i) {
                        self.control.barriers[j][pos] = true;
                        self.control.join_versions[j] = version;
                        writes.joins_touched = true;
                    }
                }
            }
            self.route(out.goto, &name, allowed, next)?;
            if writes.updates.is_empty() {
                // Most steps have one writer: take its updates as they are (no copy).
                writes.updates = out.updates;
            } else {
                writes.updates.extend(out.updates);
            }
            writes.routed.push(ti);
        }
        Ok(writes)
    }

    /// Give what changed and what is scheduled the step's version.
    fn record_versions(
        &mut self,
        g: &GraphInner<S>,
        version: u64,
        changes: &[(S::Field, Change)],
        next: NextSchedule,
        joins_touched: bool,
    ) {
        let mut changed = joins_touched;
        for &(f, c) in changes {
            self.control.field_versions[f.index()] = version;
            self.persist.note_change(f.index(), c);
            changed = true;
        }
        for (i, &b) in next.branches.iter().enumerate() {
            if b {
                self.control.branches[i] = true;
                self.control.branch_versions[i] = version;
                changed = true;
            } else if !g.nodes[i].options.defer {
                self.control.branches[i] = false;
            }
        }
        changed |= !next.sends.is_empty();
        self.control.sends = next.sends;
        self.spare_branches = next.branches;
        if changed {
            self.control.max_version = version;
        }
    }

    /// Route `gotos` issued by `from` (a node name or "input").
    pub(super) fn route(
        &self,
        gotos: Vec<Goto>,
        from: &str,
        allowed: Option<&BTreeSet<String>>,
        next: &mut NextSchedule,
    ) -> Result<(), RunError> {
        for g in gotos {
            let name = match &g {
                Goto::Node(n) => n.as_str(),
                Goto::Send(s) => s.node.as_str(),
            };
            if let Some(allowed) = allowed {
                if !allowed.contains(name) {
                    return Err(RunError::UnknownRouteTarget {
                        router: from.to_owned(),
                        value: name.to_owned(),
                    });
                }
            }
            if name == END {
                continue;
            }
            let Some(&i) = self.g.index.get(name) else {
                return Err(RunError::UnknownNode {
                    name: name.to_owned(),
                    from: from.to_owned(),
                    step: self.step,
                });
            };
            match g {
                Goto::Node(_) => next.branches[i] = true,
                Goto::Send(s) => match s.arg {
                    Ok(v) => next.sends.push(ScheduledSend {
                        node: i,
                        arg: Arc::new(v),
                    }),
                    Err(detail) => {
                        return Err(RunError::SendArg {
                            node: s.node,
                            detail,
                        })
                    }
                },
            }
        }
        Ok(())
    }
}
