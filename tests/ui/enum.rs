use stategraph::State;

#[derive(State, Clone, Default)]
enum Mode {
    #[default]
    Fast,
    Slow,
}

fn main() {}
