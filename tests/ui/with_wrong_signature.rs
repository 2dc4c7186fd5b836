use stategraph::State;

/// Takes one tag per write, but the field's writes are whole lists.
fn add_tag(current: &mut Vec<String>, tag: String) {
    current.push(tag);
}

#[derive(State, Clone, Default)]
struct Chat {
    #[reduce(with = add_tag)]
    tags: Vec<String>,
}

fn main() {}
