use stategraph::reducers::{Change, ReduceCtx, ReduceError, Reducer};
use stategraph::State;

/// Sums numbers: its value type is `i64`.
struct Sum;

impl Reducer for Sum {
    type Value = i64;
    type Update = i64;

    fn reduce(
        value: &mut i64,
        writes: Vec<i64>,
        _ctx: &mut ReduceCtx,
    ) -> Result<Change, ReduceError> {
        *value += writes.into_iter().sum::<i64>();
        Ok(Change::Replaced)
    }
}

#[derive(State, Clone, Default)]
struct Chat {
    #[reduce(Sum)]
    title: String,
}

fn main() {}
