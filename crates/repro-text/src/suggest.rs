//! Did-you-mean: the closest of the names a file may use to one it misspelled, for the help line
//! of an error. Owns only the closeness rule; imports nothing of repro.

/// The closest candidate to `word`, if one is close enough to be a plausible typo.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}
