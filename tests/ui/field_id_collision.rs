use stategraph::State;

#[derive(State, Clone, Default)]
#[allow(non_snake_case)]
struct Chat {
    tool_calls: Vec<String>,
    toolCalls: Vec<String>,
}

fn main() {}
