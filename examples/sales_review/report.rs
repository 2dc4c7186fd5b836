//! What the offline model reads out of its tool results: the revenue table, the customer notes
//! and the pipeline of the converted PDF, and the benchmark growth in a search result; and
//! the report it writes from them.

/// One row of the PDF's revenue table: a region and its four quarters (thousand EUR).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Region {
    /// The region.
    pub(crate) name: String,
    /// Q1 to Q4, as printed.
    pub(crate) quarters: [String; 4],
    /// Q1 to Q4, as numbers.
    values: [f64; 4],
}

impl Region {
    /// The year's total.
    pub(crate) fn total(&self) -> f64 {
        self.values.iter().sum()
    }

    /// Q4 against Q1, in percent.
    pub(crate) fn change(&self) -> f64 {
        (self.values[3] - self.values[0]) / self.values[0] * 100.0
    }
}

/// The rows `Region | Q1 | Q2 | Q3 | Q4` whose four cells are numbers.
pub(crate) fn regions(text: &str) -> Vec<Region> {
    text.lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let [name, q @ ..] = cells.as_slice() else {
                return None;
            };
            let quarters: [String; 4] =
                std::array::from_fn(|i| q.get(i).map(|s| (*s).to_owned()).unwrap_or_default());
            let mut values = [0.0; 4];
            for (v, s) in values.iter_mut().zip(&quarters) {
                *v = s.parse().ok().filter(|v: &f64| *v > 0.0)?;
            }
            (q.len() == 4).then(|| Region {
                name: (*name).to_owned(),
                quarters,
                values,
            })
        })
        .collect()
}

/// An open deal of the PDF's pipeline (`Deal: account | region | stage | value | close`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Deal {
    /// The cells as printed.
    pub(crate) cells: Vec<String>,
    /// The value in EUR.
    pub(crate) value: f64,
}

/// The pipeline's deals.
pub(crate) fn deals(text: &str) -> Vec<Deal> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("Deal:"))
        .filter_map(|rest| {
            let cells: Vec<String> = rest.split('|').map(|c| c.trim().to_owned()).collect();
            let value = cells.get(3)?.replace(',', "").parse().ok()?;
            (cells.len() == 5).then_some(Deal { cells, value })
        })
        .collect()
}

/// The customer notes (`- ...` lines).
pub(crate) fn notes(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .collect()
}

/// The growth a search result gives for `region` (`Region +N.N%`), as printed.
pub(crate) fn benchmark<'t>(text: &'t str, region: &str) -> Option<&'t str> {
    let at = text
        .find(&format!("{region} +"))
        .or_else(|| text.find(&format!("{region} -")))?;
    let rest = &text[at + region.len() + 1..];
    let end = rest.find('%')?;
    Some(&rest[..=end])
}

/// A number with thousands separators and no decimals.
fn eur(v: f64) -> String {
    let digits = format!("{:.0}", v);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The regions with the largest and the smallest Q4-against-Q1 change.
pub(crate) fn best_and_worst(regions: &[Region]) -> Option<(&Region, &Region)> {
    let by = |a: &&Region, b: &&Region| a.change().total_cmp(&b.change());
    Some((regions.iter().max_by(by)?, regions.iter().min_by(by)?))
}

/// What the report is written from.
#[derive(Debug)]
pub(crate) struct Sources<'a> {
    /// The converted PDF's text.
    pub(crate) pdf: &'a str,
    /// The `web_search` results, in the order they came.
    pub(crate) evidence: Vec<&'a str>,
    /// The subagent's findings.
    pub(crate) findings: &'a str,
    /// Which review of the thread this is (1 for the first).
    pub(crate) review: usize,
}

/// The report: the figures, the notes, the pipeline, the evidence with its sources, the
/// delegated findings and a recommendation.
pub(crate) fn compose(s: &Sources<'_>) -> String {
    let regions = regions(s.pdf);
    let mut out = format!(
        "# Sales review FY2026\n\nReview {} of this thread, written from \
         /mnt/user-data/uploads/sales-notes.md (converted from sales-notes.pdf).\n\n",
        s.review
    );
    out.push_str(&revenue_table(&regions));
    out.push_str("\n## Customer notes\n\n");
    for note in notes(s.pdf) {
        out.push_str(&format!("- {note}\n"));
    }
    out.push_str(&pipeline(&deals(s.pdf)));
    out.push_str("\n## External evidence (web_search)\n\n");
    for result in &s.evidence {
        out.push_str(&format!("```text\n{}\n```\n\n", result.trim()));
    }
    out.push_str(&format!(
        "## Industry benchmark (delegated investigation)\n\n{}\n",
        s.findings.trim()
    ));
    out.push_str(&recommendation(&regions, &deals(s.pdf)));
    out
}

fn revenue_table(regions: &[Region]) -> String {
    let mut out = String::from(
        "## Revenue per region (thousand EUR)\n\n\
         | Region | Q1 | Q2 | Q3 | Q4 | FY | Q4 vs Q1 |\n|---|---|---|---|---|---|---|\n",
    );
    for r in regions {
        let [q1, q2, q3, q4] = &r.quarters;
        out.push_str(&format!(
            "| {} | {q1} | {q2} | {q3} | {q4} | {:.1} | {:+.1}% |\n",
            r.name,
            r.total(),
            r.change()
        ));
    }
    let total: f64 = regions.iter().map(Region::total).sum();
    out.push_str(&format!("| All regions | | | | | {total:.1} | |\n"));
    out
}

fn pipeline(deals: &[Deal]) -> String {
    let mut out = String::from(
        "\n## Open pipeline\n\n| Account | Region | Stage | Value EUR | Close |\n|---|---|---|---|---|\n",
    );
    for d in deals {
        out.push_str(&format!("| {} |\n", d.cells.join(" | ")));
    }
    let total: f64 = deals.iter().map(|d| d.value).sum();
    out.push_str(&format!("\nOpen pipeline in all: {} EUR.\n", eur(total)));
    out
}

fn recommendation(regions: &[Region], deals: &[Deal]) -> String {
    let Some((best, worst)) = best_and_worst(regions) else {
        return "\n## Recommendation\n\nThe upload has no revenue table to recommend from.\n"
            .into();
    };
    let open_in = |region: &str| {
        eur(deals
            .iter()
            .filter(|d| d.cells.get(1).is_some_and(|r| r == region))
            .map(|d| d.value)
            .sum())
    };
    format!(
        "\n## Recommendation\n\n\
         - Grow {b}: revenue rose {bc:+.1}% from Q1 to Q4 and {bp} EUR of pipeline is open \
         there; move pre-sales capacity to close it before the tenders named in the evidence.\n\
         - Defend {w}: revenue changed {wc:+.1}% from Q1 to Q4 with {wp} EUR open; protect \
         renewals with service commitments rather than discounts above the market median.\n",
        b = best.name,
        bc = best.change(),
        bp = open_in(&best.name),
        w = worst.name,
        wc = worst.change(),
        wp = open_in(&worst.name),
    )
}
