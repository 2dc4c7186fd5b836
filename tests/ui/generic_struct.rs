use stategraph::State;

#[derive(State, Clone, Default)]
struct Holder<T> {
    value: T,
}

fn main() {}
