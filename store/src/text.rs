//! Full-text ranking as the memory backend does it: words are runs of letters and digits,
//! lowercased; an item matches when it holds any of the query's words; its score counts the
//! query words it holds, each weighted by how often it appears relative to the text's length.

/// The query's words, lowercased, each once.
pub fn words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let w = w.to_lowercase();
        if !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// `text`'s score for `query_words`; `None` when it holds none of them.
pub fn score(query_words: &[String], text: &str) -> Option<f64> {
    let mut counts = vec![0u32; query_words.len()];
    let mut len = 0u32;
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        len += 1;
        let w = w.to_lowercase();
        if let Some(at) = query_words.iter().position(|q| *q == w) {
            counts[at] += 1;
        }
    }
    let held = counts.iter().filter(|c| **c > 0).count();
    if held == 0 {
        return None;
    }
    let density: f64 = counts
        .iter()
        .map(|c| f64::from(*c) / f64::from(len.max(1)))
        .sum();
    Some(held as f64 + density)
}
