use stategraph::State;

#[derive(State, Clone, Default)]
struct Chat {
    #[reduce(apend)]
    messages: Vec<String>,
}

fn main() {}
