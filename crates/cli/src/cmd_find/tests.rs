//! Unit tests of `find`'s rules without sockets: verdicts, the next rate
//! after each step, and the answer's words.

use super::search::{Next, Search, Stopped, Verdict, CLIENT_RETRIES};

/// Runs a search over `steps` (rate, verdict, client also limited) and
/// checks that each step's rate is the one the search asked for.
fn replay(start: f64, steps: &[(Verdict, bool)]) -> (Search, Vec<f64>, Next) {
    let mut s = Search::new(0.05);
    let mut rate = start;
    let mut rates = Vec::new();
    let mut next = Next::Stop(Stopped::MaxSteps);
    for (v, also) in steps {
        rates.push(rate);
        next = s.record(rate, *v, *also);
        match next {
            Next::Rate(r) | Next::Retry(r) => rate = r,
            Next::Stop(_) => break,
        }
    }
    (s, rates, next)
}

#[test]
fn a_broken_slo_fails_whatever_the_client_did() {
    assert_eq!(Verdict::of(false, false, true), Verdict::Fail);
    assert_eq!(Verdict::of(false, false, false), Verdict::Fail);
    assert_eq!(Verdict::of(true, true, true), Verdict::Fail, "server held");
    assert_eq!(Verdict::of(true, false, true), Verdict::ClientLimited);
    assert_eq!(Verdict::of(true, false, false), Verdict::Pass);
}

/// The case: 20 req/s passed, 40 req/s had 36 % errors and the
/// client was limited too. It is a failure: the search bisects, and the
/// answer is a bracket, never "no step failed".
#[test]
fn a_failed_step_with_a_limited_client_is_a_failure_of_the_bisection() {
    use Verdict::*;
    let (s, rates, next) = replay(20.0, &[(Pass, false), (Fail, true), (Pass, false)]);
    assert_eq!(rates, vec![20.0, 40.0, 30.0]);
    assert_eq!(next, Next::Rate(35.0));
    assert_eq!((s.pass, s.failed), (Some(30.0), Some(40.0)));
    let a = s.answer(Stopped::MaxSteps);
    assert_eq!(
        a,
        "max rate meeting SLO: 30.0 req/s (between 30.0 and 40.0 req/s; at 40.0 req/s the \
         client was also limited, so the server may take more)"
    );
    assert!(!s.client_before_any_pass());
}

#[test]
fn a_client_limited_first_step_is_tried_lower_up_to_three_times() {
    use Verdict::*;
    let (s, rates, next) = replay(800.0, &[(ClientLimited, false); 5]);
    assert_eq!(rates, vec![800.0, 400.0, 200.0, 100.0]);
    assert_eq!(CLIENT_RETRIES, 3);
    assert_eq!(next, Next::Stop(Stopped::ClientLimited));
    let a = s.answer(Stopped::ClientLimited);
    assert_eq!(
        a,
        "the first step was client-limited even at 100 req/s: redline could not drive this \
         rate from this machine; give it more threads (-t), cores or machines, or lift the \
         client's limit named above"
    );
    assert!(!a.contains("no answer"));
    assert!(s.client_before_any_pass());
    // --max-steps 2 ends the retries early: still said as client-limited.
    let (s, _, _) = replay(800.0, &[(ClientLimited, false); 2]);
    assert!(s
        .answer(Stopped::MaxSteps)
        .starts_with("the first step was client-limited even at 400 req/s"));
    assert!(s.client_before_any_pass());
    // One step only: "at", not "even at".
    let (s, _, _) = replay(800.0, &[(ClientLimited, false); 1]);
    assert!(s
        .answer(Stopped::MaxSteps)
        .starts_with("the first step was client-limited at 800 req/s: "));
}

/// A retry that passes goes on as a search does; the client-limited step
/// is named in the answer, and "no step failed" is never said.
#[test]
fn a_retry_that_passes_searches_on_and_the_answer_says_what_was_client_limited() {
    use Verdict::*;
    let (s, rates, next) = replay(
        100.0,
        &[(ClientLimited, false), (Pass, false), (Pass, false)],
    );
    assert_eq!(rates, vec![100.0, 50.0, 100.0]);
    assert_eq!(next, Next::Rate(200.0));
    let a = s.answer(Stopped::MaxSteps);
    assert_eq!(
        a,
        "max rate meeting SLO: at least 100 req/s (the search stopped before a step failed; \
         1 client-limited step was not judged)"
    );
    // A client-limited step above the last pass is named.
    let (s, _, _) = replay(
        100.0,
        &[
            (ClientLimited, false),
            (ClientLimited, false),
            (Pass, false),
        ],
    );
    assert_eq!(
        s.answer(Stopped::MaxSteps),
        "max rate meeting SLO: at least 25.0 req/s (no step above it was judged: the step at \
         50.0 req/s was client-limited)"
    );
    assert!(!a.contains("no step failed"), "{a}");
    // The step after a pass is client-limited: the search stops there.
    let (s, rates, next) = replay(20.0, &[(Pass, false), (ClientLimited, false)]);
    assert_eq!(rates, vec![20.0, 40.0]);
    assert_eq!(next, Next::Stop(Stopped::ClientLimited));
    assert_eq!(
        s.answer(Stopped::ClientLimited),
        "max rate meeting SLO: at least 20.0 req/s (the next step, 40.0 req/s, was \
         client-limited: redline could not send it here)"
    );
    assert!(!s.client_before_any_pass());
    // Client-limited in the bisection: the bracket, and the step named.
    let (s, rates, next) = replay(
        20.0,
        &[(Pass, false), (Fail, false), (ClientLimited, false)],
    );
    assert_eq!(rates, vec![20.0, 40.0, 30.0]);
    assert_eq!(next, Next::Stop(Stopped::ClientLimited));
    assert_eq!(
        s.answer(Stopped::ClientLimited),
        "max rate meeting SLO: 20.0 req/s (between 20.0 and 40.0 req/s; the step at 30.0 \
         req/s was client-limited: redline could not send it here)"
    );
}

#[test]
fn plain_endings_keep_their_words() {
    use Verdict::*;
    let (s, _, _) = replay(20.0, &[(Pass, false)]);
    assert_eq!(
        s.answer(Stopped::TimeBudget),
        "max rate meeting SLO: at least 20.0 req/s (no step failed)"
    );
    let (s, rates, next) = replay(20.0, &[(Fail, false), (Fail, false)]);
    assert_eq!(rates, vec![20.0, 10.0]);
    assert_eq!(next, Next::Rate(5.0));
    assert_eq!(
        s.answer(Stopped::MaxSteps),
        "no rate met the SLO (down to 10.0 req/s)"
    );
    assert!(!s.client_before_any_pass());
    let (s, _, next) = replay(0.15, &[(Fail, false)]);
    assert_eq!(next, Next::Stop(Stopped::NoPass));
    assert_eq!(
        s.answer(Stopped::NoPass),
        "no rate met the SLO (down to 0.1 req/s)"
    );
    // Failures, then client-limited below them.
    let (s, _, next) = replay(
        100.0,
        &[
            (Fail, true),
            (ClientLimited, false),
            (ClientLimited, false),
            (ClientLimited, false),
            (ClientLimited, false),
        ],
    );
    assert_eq!(next, Next::Stop(Stopped::ClientLimited));
    assert_eq!(
        s.answer(Stopped::ClientLimited),
        "no rate met the SLO (down to 100 req/s; the client was also limited at 100 req/s; \
         below it the step at 6.2 req/s was client-limited: redline itself was the limit there)"
    );
    assert!(s.client_before_any_pass());
    // Precision ends a bisection.
    let (_, rates, next) = replay(
        100.0,
        &[
            (Pass, false),
            (Fail, false),
            (Pass, false),
            (Pass, false),
            (Pass, false),
            (Pass, false),
            (Pass, false),
        ],
    );
    assert_eq!(rates, vec![100.0, 200.0, 150.0, 175.0, 187.5, 193.75]);
    assert_eq!(next, Next::Stop(Stopped::Precision));
    // Interrupted before any step ended.
    let s = Search::new(0.05);
    assert_eq!(
        s.answer(Stopped::Interrupted),
        "interrupted before a step ended: no answer"
    );
}
