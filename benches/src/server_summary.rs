//! The `server` row's summary: our side against LangGraph's measured in the same run, and
//! the targets.
//!
//! Keys (`G` a graph, `N` a client count, `M` the largest): `G_runs_per_s_x_langgraph_N`
//! (our runs/s over its), `G_wait_p50_x_langgraph_N` (its `wait` p50 over ours),
//! `G_first_event_x_langgraph` (its first-event p50 over ours, at M),
//! `G_p99_below_langgraph_p50_M`, `G_wait_p50_ms_1` and `G_wait_p50_under_5ms_1`,
//! `G_share_of_ceiling_M` (our runs/s over the client's ceiling runs/s at M),
//! `G_client_cpu_share_M` (the client's CPU seconds over the wall seconds of our run at M),
//! `G_server_cores_M` (our server's CPU per run times its runs per second: the cores it kept
//! busy), `G_bound_M` (`client` when the client's one Python thread was busy at least
//! [`BUSY`] of the time while the server kept under [`IDLE`] of a core busy; `server` the
//! other way round; `neither` else — on a shared machine other processes took the rest),
//! `G_throughput_target_met` (≥10× LangGraph at M, or the client's ceiling bound it),
//! `server_overhead_ms` (our chain `wait` p50 at one client minus the in-process `invoke`
//! p50), `server_overhead_under_1ms`, `client_round_trip_p50_ms` (a `GET /ok` through
//! the same client at one client: the part of that overhead any route pays), and
//! `server_overhead_raw_client_ms` with `server_overhead_raw_client_under_1ms` (the same
//! overhead with the `wait` sent by Python's `http.client` on one keep-alive connection:
//! what the server itself adds, its HTTP round trip included).

use serde_json::Value;

use crate::report::{round, Record};
use crate::server::{num, Floor, Measured};
use crate::{Args, ENGINE};

/// A side busy this share of a core or more is the one that bound the throughput...
const BUSY: f64 = 0.8;
/// ...when the other kept under this share of a core busy.
const IDLE: f64 = 0.5;

/// Which side bound the throughput, from the client's and the server's busy shares.
fn bound(client: f64, server: f64) -> &'static str {
    match (client, server) {
        (c, s) if c >= BUSY && s < IDLE => "client",
        (c, s) if s >= BUSY && c < IDLE => "server",
        _ => "neither",
    }
}
/// The targets.
const THROUGHPUT_X: f64 = 10.0;
const WAIT_P50_1_MS: f64 = 5.0;
const OVERHEAD_MS: f64 = 1.0;

fn ratio(a: Option<f64>, b: Option<f64>) -> Value {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Value::from(round(a / b, 2)),
        _ => Value::Null,
    }
}

/// The summary row.
pub(crate) fn summary(
    args: &Args,
    ours: &Measured,
    theirs: Option<&Measured>,
    floor: &Floor,
) -> Record {
    let max = args.server_clients.iter().copied().max().unwrap_or(1);
    let mut r = Record::new()
        .kv("engine", ENGINE)
        .kv("workload", "server_summary")
        .kv("langgraph_run", theirs.is_some())
        .kv("clients_max", max)
        .kv(
            "ceiling_runs_per_s",
            num(ours.ceiling.get(&max), "runs_per_s"),
        );
    if let Some(t) = theirs {
        r = r.kv(
            "langgraph_ceiling_runs_per_s",
            num(t.ceiling.get(&max), "runs_per_s"),
        );
    }
    for graph in ["chain", "agent"] {
        r = graph_keys(r, args, graph, ours, theirs);
    }
    overhead_keys(r, ours, floor)
}

/// The keys of one graph: the ratios against LangGraph, the targets, the bound.
fn graph_keys(
    mut r: Record,
    args: &Args,
    graph: &str,
    ours: &Measured,
    theirs: Option<&Measured>,
) -> Record {
    let max = args.server_clients.iter().copied().max().unwrap_or(1);
    let ours_at = |n: usize| ours.runs.get(&(graph.to_owned(), n));
    let theirs_at = |n: usize| theirs.and_then(|t| t.runs.get(&(graph.to_owned(), n)));
    for &n in &args.server_clients {
        r = r
            .kv(
                &format!("{graph}_runs_per_s_x_langgraph_{n}"),
                ratio(
                    num(ours_at(n), "runs_per_s"),
                    num(theirs_at(n), "runs_per_s"),
                ),
            )
            .kv(
                &format!("{graph}_wait_p50_x_langgraph_{n}"),
                ratio(
                    num(theirs_at(n), "wait_p50_ms"),
                    num(ours_at(n), "wait_p50_ms"),
                ),
            );
    }
    let first = ratio(
        num(theirs_at(max), "first_event_p50_ms"),
        num(ours_at(max), "first_event_p50_ms"),
    );
    let p99 = num(ours_at(max), "wait_p99_ms");
    let their_p50 = num(theirs_at(max), "wait_p50_ms");
    let p50_1 = num(ours_at(1), "wait_p50_ms");
    let share = match (
        num(ours_at(max), "runs_per_s"),
        num(ours.ceiling.get(&max), "runs_per_s"),
    ) {
        (Some(a), Some(c)) if c > 0.0 => Some(a / c),
        _ => None,
    };
    let cpu = num(ours_at(max), "client_cpu_share");
    let cores = num(ours_at(max), "server_cpu_ms_per_run")
        .zip(num(ours_at(max), "runs_per_s"))
        .map(|(ms, rate)| ms * rate / 1e3);
    let bound = cpu.zip(cores).map(|(c, s)| bound(c, s));
    let x = match (
        num(ours_at(max), "runs_per_s"),
        num(theirs_at(max), "runs_per_s"),
    ) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let met = theirs.map(|_| x.is_some_and(|x| x >= THROUGHPUT_X) || bound == Some("client"));
    r = r
        .kv(&format!("{graph}_first_event_x_langgraph"), first)
        .kv(
            &format!("{graph}_p99_below_langgraph_p50_{max}"),
            p99.zip(their_p50).map(|(a, b)| a < b),
        )
        .kv(&format!("{graph}_wait_p50_ms_1"), p50_1)
        .kv(
            &format!("{graph}_wait_p50_under_5ms_1"),
            p50_1.map(|p| p <= WAIT_P50_1_MS),
        )
        .kv(
            &format!("{graph}_share_of_ceiling_{max}"),
            share.map(|s| round(s, 2)),
        )
        .kv(&format!("{graph}_client_cpu_share_{max}"), cpu)
        .kv(
            &format!("{graph}_server_cores_{max}"),
            cores.map(|c| round(c, 2)),
        )
        .kv(&format!("{graph}_bound_{max}"), bound)
        .kv(&format!("{graph}_throughput_target_met"), met);
    r
}

/// What the server adds over an in-process `invoke`, through the SDK and a lean client.
fn overhead_keys(r: Record, ours: &Measured, floor: &Floor) -> Record {
    let overhead = num(ours.runs.get(&("chain".to_owned(), 1)), "wait_p50_ms")
        .map(|w| round(w - floor.p50_ms, 3));
    let round_trip = num(ours.ceiling.get(&1), "wait_p50_ms");
    // Through a lean client: what the server itself adds over `invoke`, its HTTP round trip
    // included.
    let raw = num(ours.raw.as_ref(), "wait_p50_ms").map(|w| round(w - floor.p50_ms, 3));
    r.kv("floor_invoke_p50_ms", floor.p50_ms)
        .kv("server_overhead_ms", overhead)
        .kv("client_round_trip_p50_ms", round_trip)
        .kv(
            "server_overhead_under_1ms",
            overhead.map(|o| o <= OVERHEAD_MS),
        )
        .kv("server_overhead_raw_client_ms", raw)
        .kv(
            "server_overhead_raw_client_under_1ms",
            raw.map(|o| o <= OVERHEAD_MS),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_the_side_busy_while_the_other_is_not() {
        assert_eq!(bound(0.85, 0.3), "client");
        assert_eq!(bound(0.3, 0.95), "server");
        assert_eq!(bound(0.6, 0.6), "neither");
        assert_eq!(bound(0.9, 0.9), "neither");
    }

    #[test]
    fn a_ratio_of_a_missing_or_zero_value_is_null() {
        assert_eq!(ratio(Some(10.0), Some(4.0)), Value::from(2.5));
        assert_eq!(ratio(None, Some(4.0)), Value::Null);
        assert_eq!(ratio(Some(1.0), Some(0.0)), Value::Null);
    }
}
