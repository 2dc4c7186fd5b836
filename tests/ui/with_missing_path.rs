use stategraph::State;

#[derive(State, Clone, Default)]
struct Chat {
    #[reduce(with)]
    messages: Vec<String>,
    #[reduce(with = )]
    tags: Vec<String>,
}

fn main() {}
