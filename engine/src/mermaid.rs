//! Mermaid export of a compiled graph: deterministic text for docs and snapshot tests.

use std::fmt::Write;

use crate::command::{END, START};
use crate::graph::CompiledGraph;
use crate::State;

/// Something that can draw itself into a Mermaid flowchart.
pub(crate) trait Render: Send + Sync {
    fn render(&self, out: &mut String, prefix: &str, indent: usize);
    /// The graph's shape, as stored with its checkpoints.
    fn shape(&self) -> stategraph_checkpoints::graph_shape::GraphShape;
}

/// A Mermaid id for a node name: letters and digits stay, `_` doubles, anything else becomes
/// `_<hex>_`, so two different names never share an id.
fn ident(prefix: &str, name: &str) -> String {
    let mut out = String::from(prefix);
    for c in name.chars() {
        match c {
            c if c.is_ascii_alphanumeric() => out.push(c),
            '_' => out.push_str("__"),
            c => out.push_str(&format!("_{:x}_", u32::from(c))),
        }
    }
    out
}

fn label(name: &str) -> String {
    name.replace('"', "#quot;")
}

impl<S: State> Render for CompiledGraph<S> {
    fn shape(&self) -> stategraph_checkpoints::graph_shape::GraphShape {
        self.build_shape()
    }

    fn render(&self, out: &mut String, prefix: &str, indent: usize) {
        let g = &self.inner;
        let pad = "    ".repeat(indent);
        let start = ident(prefix, START);
        let end = ident(prefix, END);
        let _ = writeln!(out, "{pad}{start}([\"{START}\"]):::first");
        for n in &g.nodes {
            let id = ident(prefix, &n.name);
            match &n.subgraph {
                Some(child) => {
                    let _ = writeln!(out, "{pad}subgraph {id}[\"{}\"]", label(&n.name));
                    child.render(out, &format!("{id}_2f_"), indent + 1);
                    let _ = writeln!(out, "{pad}end");
                }
                None => {
                    let _ = writeln!(out, "{pad}{id}[\"{}\"]", label(&n.name));
                }
            }
        }
        let _ = writeln!(out, "{pad}{end}([\"{END}\"]):::last");
        for (from, to) in &g.edges {
            let _ = writeln!(
                out,
                "{pad}{} --> {};",
                ident(prefix, from),
                ident(prefix, to)
            );
        }
        for (sources, to) in &g.join_specs {
            let from: Vec<String> = sources.iter().map(|s| ident(prefix, s)).collect();
            let _ = writeln!(out, "{pad}{} --> {};", from.join(" & "), ident(prefix, to));
        }
        for b in &g.branches {
            for t in &b.targets {
                let _ = writeln!(
                    out,
                    "{pad}{} -. \"{}\" .-> {};",
                    ident(prefix, &b.from),
                    label(t),
                    ident(prefix, t)
                );
            }
        }
        for n in &g.nodes {
            if let Some(dests) = &n.destinations {
                for d in dests {
                    let _ = writeln!(
                        out,
                        "{pad}{} -.-> {};",
                        ident(prefix, &n.name),
                        ident(prefix, d)
                    );
                }
            }
        }
    }
}

impl<S: State> CompiledGraph<S> {
    /// The graph as a Mermaid flowchart: static edges solid, fan-in joins as `a & b --> c`,
    /// conditional edges and goto destinations dotted (conditional ones labelled with their
    /// target), subgraphs as blocks. The text is deterministic: nodes, edges and joins in
    /// declaration order, the targets of a conditional edge sorted by name. Node ids escape
    /// the names so that no two names share an id (`_` doubles, other punctuation becomes
    /// `_<hex>_`); labels show the names as they are.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stategraph::{NodeContext, State, StateGraph, END, START};
    ///
    /// #[derive(State, Clone, Default, Debug)]
    /// struct S { n: u32 }
    ///
    /// let g = StateGraph::<S>::new()
    ///     .add_node("a", |_s: Arc<S>, _c: NodeContext| async { Ok::<_, stategraph::BoxError>(S::update()) })
    ///     .add_edge(START, "a")
    ///     .add_edge("a", END)
    ///     .compile()?;
    /// assert!(g.to_mermaid().contains("____start____ --> a;"));
    /// # Ok::<(), stategraph::CompileError>(())
    /// ```
    pub fn to_mermaid(&self) -> String {
        let mut out = String::from("graph TD;\n");
        self.render(&mut out, "", 1);
        out.push_str("    classDef first fill-opacity:0\n    classDef last fill:#bfb6fc\n");
        out
    }
}
