//! The binary search over a line of commits, as `git bisect` does it: the known-good end before
//! the line, the known-bad end its last entry, a commit that cannot be judged (it does not build,
//! or fails another way) skipped, the next candidate the untested commit nearest the middle of
//! what is left. Pure: it never builds or runs anything, so every rule is unit-tested here.

/// What one tested commit said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Good,
    Bad,
    /// Cannot be judged: a build failure, another failure class, a hang when `--bad` does not.
    Skip,
}

/// Where the search stands over `len` commits (index 0 the oldest after `--good`, `len - 1`
/// the `--bad` commit).
#[derive(Debug, Clone)]
pub struct Search {
    verdicts: Vec<Option<Verdict>>,
}

/// How a search ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The first bad commit, by index.
    Found(usize),
    /// Only skipped commits are left between the last good and the first bad: the first bad
    /// commit is one of these indices (the last is bad).
    Ambiguous(Vec<usize>),
}

impl Search {
    /// A search over `len` commits whose last is known bad.
    pub fn new(len: usize) -> Search {
        assert!(len > 0, "a search needs the bad commit at least");
        let mut verdicts = vec![None; len];
        verdicts[len - 1] = Some(Verdict::Bad);
        Search { verdicts }
    }

    pub fn record(&mut self, index: usize, verdict: Verdict) {
        self.verdicts[index] = Some(verdict);
    }

    pub fn verdict(&self, index: usize) -> Option<Verdict> {
        self.verdicts[index]
    }

    /// The open range: (last good index or None for `--good`, first bad index).
    fn bounds(&self) -> (Option<usize>, usize) {
        let bad = self
            .verdicts
            .iter()
            .position(|v| *v == Some(Verdict::Bad))
            .expect("the last commit is bad");
        let good = self.verdicts[..bad]
            .iter()
            .rposition(|v| *v == Some(Verdict::Good));
        (good, bad)
    }

    /// The next commit to test within (good, bad), or None when the search is over.
    pub fn next(&self) -> Option<usize> {
        let (good, bad) = self.bounds();
        next_in(&self.verdicts, good.map_or(0, |g| g + 1), bad)
    }

    /// The search's answer once `next` is None.
    pub fn answer(&self) -> Answer {
        let (good, bad) = self.bounds();
        let start = good.map_or(0, |g| g + 1);
        if start == bad {
            Answer::Found(bad)
        } else {
            Answer::Ambiguous((start..=bad).collect())
        }
    }

    /// How many more tests the search needs at most, skips aside: log2 of what is left, rounded up.
    pub fn steps_left(&self) -> u32 {
        let (good, bad) = self.bounds();
        let untested = (good.map_or(0, |g| g + 1)..bad)
            .filter(|&i| self.verdicts[i].is_none())
            .count();
        usize::BITS - untested.leading_zeros()
    }

    /// The commits the search may test next, in the order it would need them: this step's
    /// candidate, then the candidates of both outcomes of it, level by level (breadth first),
    /// at most `count`. What `--jobs` builds ahead of the runs.
    pub fn upcoming(&self, count: usize) -> Vec<usize> {
        let (good, bad) = self.bounds();
        let mut ranges = std::collections::VecDeque::from([(good.map_or(0, |g| g + 1), bad)]);
        let mut out = Vec::new();
        while let Some((start, end)) = ranges.pop_front() {
            if out.len() >= count {
                break;
            }
            let Some(m) = next_in(&self.verdicts, start, end) else {
                continue;
            };
            if !out.contains(&m) {
                out.push(m);
            }
            ranges.push_back((start, m)); // m bad
            ranges.push_back((m + 1, end)); // m good
        }
        out
    }
}

/// The untested commit in [start, end) nearest the middle (the lower one on a tie); None if all
/// there are tested (skipped).
fn next_in(verdicts: &[Option<Verdict>], start: usize, end: usize) -> Option<usize> {
    if start >= end {
        return None;
    }
    let middle = start + (end - start - 1) / 2;
    (0..end - start)
        .flat_map(|d| [middle.checked_sub(d), Some(middle + d)])
        .flatten()
        .filter(|&i| i >= start && i < end)
        .find(|&i| verdicts[i].is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a search where commits at `first_bad` and later are bad and `skipped` cannot be
    /// judged; returns its answer and the commits it tested.
    fn run(len: usize, first_bad: usize, skipped: &[usize]) -> (Answer, Vec<usize>) {
        let mut search = Search::new(len);
        let mut tested = Vec::new();
        while let Some(i) = search.next() {
            assert!(!tested.contains(&i), "{i} tested twice");
            tested.push(i);
            let verdict = if skipped.contains(&i) {
                Verdict::Skip
            } else if i >= first_bad {
                Verdict::Bad
            } else {
                Verdict::Good
            };
            search.record(i, verdict);
        }
        (search.answer(), tested)
    }

    #[test]
    fn finds_the_first_bad_commit_at_every_position_in_log2_steps() {
        for len in 1..40 {
            for first_bad in 0..len {
                let (answer, tested) = run(len, first_bad, &[]);
                assert_eq!(answer, Answer::Found(first_bad), "len {len}");
                let bound = usize::BITS - len.leading_zeros();
                assert!(tested.len() as u32 <= bound, "len {len}: {tested:?}");
            }
        }
    }

    #[test]
    fn a_skipped_commit_is_stepped_around() {
        // 10 commits, the defect at 7, the middle ones do not build: the search steps aside.
        let (answer, tested) = run(10, 7, &[4, 5]);
        assert_eq!(answer, Answer::Found(7));
        assert_eq!(tested[..2], [4, 3]);
        // The defect right after skipped commits: which of them is not decidable.
        let (answer, _) = run(10, 6, &[4, 5]);
        assert_eq!(answer, Answer::Ambiguous(vec![4, 5, 6]));
        let (answer, _) = run(10, 6, &[5]);
        assert_eq!(answer, Answer::Ambiguous(vec![5, 6]));
        let (answer, _) = run(10, 5, &[4]);
        assert_eq!(answer, Answer::Ambiguous(vec![4, 5]));
        // Everything before the bad commit skipped.
        let (answer, _) = run(4, 3, &[0, 1, 2]);
        assert_eq!(answer, Answer::Ambiguous(vec![0, 1, 2, 3]));
    }

    #[test]
    fn upcoming_lists_this_step_then_both_outcomes() {
        let search = Search::new(16);
        assert_eq!(search.next(), Some(7));
        assert_eq!(search.upcoming(1), vec![7]);
        assert_eq!(search.upcoming(3), vec![7, 3, 11]);
        assert_eq!(search.upcoming(7), vec![7, 3, 11, 1, 5, 9, 13]);
        // The speculation matches what the search then asks for.
        let mut after = search.clone();
        after.record(7, Verdict::Good);
        assert_eq!(after.next(), Some(11));
        after.record(11, Verdict::Bad);
        assert_eq!(after.next(), Some(9));
        assert_eq!(after.steps_left(), 2);
    }

    #[test]
    fn one_commit_is_its_own_answer() {
        let search = Search::new(1);
        assert_eq!(search.next(), None);
        assert_eq!(search.answer(), Answer::Found(0));
        assert_eq!(search.steps_left(), 0);
    }
}
