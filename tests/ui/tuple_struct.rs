use stategraph::State;

#[derive(State, Clone, Default)]
struct Pair(i64, String);

fn main() {}
