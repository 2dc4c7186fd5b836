use stategraph::State;

fn merge(current: &mut Vec<String>, update: Vec<String>) {
    current.extend(update);
}

#[derive(State, Clone, Default)]
struct Chat {
    #[reduce(using = merge)]
    messages: Vec<String>,
}

fn main() {}
