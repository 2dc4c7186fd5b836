use stategraph::State;

#[derive(State, Clone, Default)]
struct Chat {
    #[reduce()]
    messages: Vec<String>,
}

fn main() {}
