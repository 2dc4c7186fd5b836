use stategraph::State;

#[derive(State, Clone, Default)]
struct Chat {
    #[reduce(append)]
    #[reduce(last_value)]
    messages: Vec<String>,
}

fn main() {}
