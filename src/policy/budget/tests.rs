use super::*;
use crate::adapter::Usage;

fn host() -> Controls {
    Controls {
        ceiling: "usd=5,tokens=1000000,toolCalls=100,seconds=3600"
            .parse()
            .unwrap(),
        context_ceiling: "usd=20".parse().unwrap(),
        default_budget: "seconds=600".parse().unwrap(),
        ..Controls::default()
    }
}

#[test]
fn limits_read_and_write_their_text_form() {
    let l: Limits = "usd=2.5, toolCalls=5,seconds=60".parse().unwrap();
    assert_eq!(l.usd, Some(2.5));
    assert_eq!(l.tool_calls, Some(5));
    assert_eq!(l.to_string(), "usd=2.5,toolCalls=5,seconds=60");
    assert_eq!("".parse::<Limits>().unwrap(), Limits::default());
    assert!("dollars=3".parse::<Limits>().is_err());
    assert!("tokens=1.5".parse::<Limits>().is_err());
    assert!("usd=-1".parse::<Limits>().is_err());
}

#[test]
fn a_request_budget_is_checked_against_the_ceilings_and_takes_the_defaults() {
    let h = host();
    let b = parse(&json!({"toolCalls": 5, "context": {"usd": 10}}), &h).unwrap();
    assert_eq!(b.task.tool_calls, Some(5));
    assert_eq!(b.task.seconds, Some(600));
    assert_eq!(b.context.usd, Some(10.0));
    assert!(b.context_named);
    assert_eq!(b.on_budget, OnBudget::Ask);
    let fail = parse(&json!({"usd": 1, "onBudget": "fail"}), &h).unwrap();
    assert_eq!(fail.on_budget, OnBudget::Fail);
    for (v, field, why) in [
        (json!({"usd": 6}), "metadata.budget.usd", "from 0 to 5"),
        (json!({"usd": -1}), "metadata.budget.usd", "from 0 to 5"),
        (
            json!({"tokens": "many"}),
            "metadata.budget.tokens",
            "whole number",
        ),
        (
            json!({"toolCalls": 2.5}),
            "metadata.budget.toolCalls",
            "whole number",
        ),
        (
            json!({"context": {"usd": 21}}),
            "metadata.budget.context.usd",
            "from 0 to 20",
        ),
        (
            json!({"dollars": 1}),
            "metadata.budget.dollars",
            "unknown key",
        ),
        (
            json!({"onBudget": "maybe"}),
            "metadata.budget.onBudget",
            "ask, fail",
        ),
        (json!(5), "metadata.budget", "must be an object"),
        // The JSON form takes numbers, not their text.
        (
            json!({"toolCalls": "5"}),
            "metadata.budget.toolCalls",
            "whole number",
        ),
        (
            json!({"toolCalls": "1e1"}),
            "metadata.budget.toolCalls",
            "whole number",
        ),
        (json!({"usd": "2"}), "metadata.budget.usd", "a number"),
        (
            json!({"context": {"usd": "2"}}),
            "metadata.budget.context.usd",
            "a number",
        ),
    ] {
        let e = parse(&v, &h).unwrap_err();
        assert_eq!(e.field, field, "{v}");
        assert!(e.why.contains(why), "{v}: {}", e.why);
    }
}

fn meter(task: &str, context: &str) -> Meter {
    let b = Budget {
        task: task.parse().unwrap(),
        context: context.parse().unwrap(),
        context_named: false,
        on_budget: OnBudget::Ask,
    };
    Meter::new(b, Spent::default(), Spent::default(), Limits::default())
}

#[test]
fn the_tool_call_beyond_the_budget_reaches_it_and_is_not_counted() {
    let mut m = meter("toolCalls=2", "");
    assert_eq!(m.on_tool_use(0), None);
    assert_eq!(m.on_tool_use(0), None);
    let r = m.on_tool_use(0).unwrap();
    assert_eq!(r.scope, Scope::Task);
    assert_eq!(r.kinds, ["toolCalls"]);
    assert_eq!(m.task_spent(0).tool_calls, 2);
    let q = m.question(&r, 0, "b-1", (&Limits::default(), &Limits::default()));
    assert_eq!(q["kind"], "budget");
    assert_eq!(q["spent"]["toolCalls"], 2);
    assert_eq!(q["allowed"]["toolCalls"], 2);
    assert_eq!(q["options"][0]["id"], "continue");
    assert!(q["options"][0]["label"]
        .as_str()
        .unwrap()
        .contains("2 tool calls"));
    assert_eq!(q["options"][1]["id"], "stop");
}

#[test]
fn cost_and_tokens_come_from_the_usage_reports_and_time_from_the_clock() {
    let mut m = meter("usd=1,tokens=1000,seconds=60", "");
    let u = |cost, tokens| Usage {
        cost_usd: Some(cost),
        input_tokens: Some(tokens),
        ..Usage::default()
    };
    assert_eq!(m.on_usage(&u(0.4, 100), 1), None);
    // A later report replaces the earlier one (the run's total so far).
    assert_eq!(m.on_usage(&u(0.6, 200), 2), None);
    assert!((m.task_spent(2).usd - 0.6).abs() < 1e-9);
    assert_eq!(m.on_usage(&u(1.2, 300), 3).unwrap().kinds, ["usd"]);
    let m = meter("usd=1,tokens=1000,seconds=60", "");
    assert_eq!(m.seconds_left(), Some(60));
    assert_eq!(m.on_clock(59), None);
    assert_eq!(m.on_clock(60).unwrap().kinds, ["seconds"]);
}

#[test]
fn a_context_budget_counts_the_other_tasks() {
    let b = Budget {
        task: Limits::default(),
        context: "toolCalls=5".parse().unwrap(),
        context_named: true,
        on_budget: OnBudget::Ask,
    };
    let earlier = Spent {
        tool_calls: 4,
        ..Spent::default()
    };
    let mut m = Meter::new(b, Spent::default(), earlier, Limits::default());
    assert_eq!(m.on_tool_use(0), None);
    let r = m.on_tool_use(0).unwrap();
    assert_eq!(r.scope, Scope::Context);
    assert_eq!(m.metadata(0)["context"]["spent"]["toolCalls"], 5);
}

#[test]
fn continue_raises_within_the_ceiling() {
    let allowed: Limits = "toolCalls=5".parse().unwrap();
    let ceiling: Limits = "toolCalls=8".parse().unwrap();
    let more = raise_by(&allowed, &allowed, &["toolCalls"], &ceiling, None).unwrap();
    assert_eq!(more.tool_calls, Some(3));
    assert_eq!(raised(&allowed, &more).tool_calls, Some(8));
    let at: Limits = "toolCalls=8".parse().unwrap();
    assert_eq!(
        raise_by(&at, &allowed, &["toolCalls"], &ceiling, None),
        None
    );
    let asked: Limits = "toolCalls=2".parse().unwrap();
    let more = raise_by(
        &allowed,
        &allowed,
        &["toolCalls"],
        &Limits::default(),
        Some(&asked),
    );
    assert_eq!(more.unwrap().tool_calls, Some(2));
}

/// A whole number beyond what a count holds is refused, not clamped (no ceiling here).
#[test]
fn a_whole_number_beyond_a_count_is_refused() {
    let h = Controls::default();
    for v in [json!({"tokens": 1e30}), json!({"seconds": 2f64.powi(64)})] {
        let e = parse(&v, &h).unwrap_err();
        assert!(e.why.contains("whole number"), "{v}: {}", e.why);
    }
    let max = parse(&json!({"tokens": u64::MAX}), &h).unwrap();
    assert_eq!(max.task.tokens, Some(u64::MAX));
    let e = answer_of(
        Some(&json!({"option": "continue", "add": {"toolCalls": "3"}})),
        "",
    );
    assert!(e.is_err(), "{e:?}");
}

#[test]
fn answers_to_the_budget_question() {
    let c = |add, each| BudgetAnswer::Continue { add, each };
    assert_eq!(answer_of(None, "continue").unwrap(), c(None, None));
    assert_eq!(
        answer_of(None, "Continue with 5").unwrap(),
        c(None, Some(5.0))
    );
    assert_eq!(answer_of(None, "yes").unwrap(), c(None, None));
    assert_eq!(answer_of(None, "stop").unwrap(), BudgetAnswer::Stop);
    assert_eq!(answer_of(None, "no.").unwrap(), BudgetAnswer::Stop);
    assert!(answer_of(None, "maybe").is_err());
    assert!(answer_of(None, "continue with lots").is_err());
    let d = json!({"option": "continue", "add": {"toolCalls": 3}});
    match answer_of(Some(&d), "").unwrap() {
        BudgetAnswer::Continue { add: Some(l), .. } => assert_eq!(l.tool_calls, Some(3)),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        answer_of(Some(&json!({"decision": "deny"})), "").unwrap(),
        BudgetAnswer::Stop
    );
}

#[test]
fn the_card_lists_the_rule_sets_and_the_ceilings() {
    let d = host().describe();
    assert_eq!(d["defaultRuleSet"], "ask-all");
    assert!(d["ruleSets"]["read-only"].as_array().unwrap().len() > 3);
    assert_eq!(d["ruleSets"]["ask-all"], json!([]));
    assert_eq!(d["budgetCeiling"]["usd"], 5.0);
    assert_eq!(d["contextBudgetCeiling"]["usd"], 20.0);
    assert_eq!(d["defaultBudget"]["seconds"], 600);
    assert_eq!(d["onBudget"], "ask");
}

#[test]
fn the_ceiling_bounds_the_kinds_a_request_and_the_default_leave_out() {
    let h = host();
    // Set by the request: its own; left out: the default (seconds), else the ceiling.
    let b = parse(&json!({"toolCalls": 5}), &h).unwrap();
    assert_eq!(b.task.tool_calls, Some(5));
    assert_eq!(b.task.seconds, Some(600));
    assert_eq!(b.task.usd, Some(5.0));
    assert_eq!(b.task.tokens, Some(1_000_000));
    assert_eq!(b.context.usd, Some(20.0));
    assert!(!b.context_named);
    // A request that sends no budget at all does not escape the ceiling either.
    let none = h.for_request(None, None).unwrap().budget;
    assert_eq!(none.task.tool_calls, Some(100));
    assert_eq!(none.task.seconds, Some(600));
    assert_eq!(none.context.usd, Some(20.0));
    // With no ceiling and no default, no limit.
    let open = Controls::default().for_request(None, None).unwrap().budget;
    assert!(open.is_empty());
}

/// A time budget no clock holds (near 2^63 seconds) overflowed the turn's deadline and
/// panicked it: refused, in a request, a context's budget, the host's settings and an
/// answer's `add`, naming the limit; a raise stops at it.
#[test]
fn a_time_budget_beyond_ten_years_is_refused() {
    let huge = json!(9_223_372_036_854_775_807_u64);
    let none = Controls::default();
    for (v, field) in [
        (json!({"seconds": huge}), "metadata.budget.seconds"),
        (
            json!({"context": {"seconds": huge}}),
            "metadata.budget.context.seconds",
        ),
    ] {
        let e = parse(&v, &none).unwrap_err();
        assert_eq!(e.field, field, "{v}");
        assert!(
            e.why.contains("from 0 to 315360000 (ten years)"),
            "{}",
            e.why
        );
    }
    let b = parse(&json!({"seconds": MAX_SECONDS}), &none).unwrap();
    assert_eq!(b.task.seconds, Some(MAX_SECONDS));
    assert!("seconds=9223372036854775807".parse::<Limits>().is_err());
    assert!(format!("seconds={}", MAX_SECONDS + 1)
        .parse::<Limits>()
        .is_err());
    let add = json!({"option": "continue", "add": {"seconds": huge}});
    assert!(answer_of(Some(&add), "").is_err());
    // A raise from the top adds nothing more.
    let at_max: Limits = format!("seconds={MAX_SECONDS}").parse().unwrap();
    let kinds = ["seconds"];
    assert_eq!(
        raise_by(&at_max, &at_max, &kinds, &Limits::default(), None),
        None
    );
}

/// `null` is no amount and no word; `-0` is a negative zero: refused like any bad amount.
#[test]
fn null_amounts_and_a_negative_zero_are_refused() {
    let h = Controls::default();
    for (v, field) in [
        (json!({"usd": null}), "metadata.budget.usd"),
        (json!({"toolCalls": null}), "metadata.budget.toolCalls"),
        (json!({"onBudget": null}), "metadata.budget.onBudget"),
        (json!({"usd": -0.0}), "metadata.budget.usd"),
        (
            json!({"context": {"usd": null}}),
            "metadata.budget.context.usd",
        ),
    ] {
        let e = parse(&v, &h).unwrap_err();
        assert_eq!(e.field, field, "{v}");
    }
    assert_eq!(parse(&json!({"usd": 0}), &h).unwrap().task.usd, Some(0.0));
}

/// A CLI's usage figures that do not add up are guarded: tokens saturate, a negative or
/// non-finite cost (or one beyond any real one) is ignored, sums stay finite numbers.
#[test]
fn usage_figures_that_do_not_add_up_are_guarded() {
    let mut m = meter("tokens=100,usd=5", "");
    let r = m.on_usage(
        &Usage {
            input_tokens: Some(u64::MAX),
            output_tokens: Some(10),
            cost_usd: Some(1.0),
            ..Usage::default()
        },
        0,
    );
    assert_eq!(m.task_spent(0).tokens, u64::MAX);
    assert!(r.is_some_and(|r| r.kinds.contains(&"tokens")));
    for bad in [-3.0, f64::NAN, f64::INFINITY, 1e308] {
        m.on_usage(
            &Usage {
                cost_usd: Some(bad),
                ..Usage::default()
            },
            0,
        );
        assert!((m.task_spent(0).usd - 1.0).abs() < 1e-9, "{bad}");
    }
    let huge = Spent {
        usd: 1e308,
        tokens: u64::MAX,
        ..Spent::default()
    };
    let sum = huge.plus(huge);
    assert_eq!(sum.tokens, u64::MAX);
    assert!(sum.to_json()["usd"].is_number(), "{}", sum.to_json());
    assert!(huge.to_json()["usd"].is_number(), "{}", huge.to_json());
}

#[test]
fn a_sum_under_a_cent_is_shown_with_its_figures() {
    assert_eq!(amount_text("usd", 0.0012), "$0.0012");
    assert_eq!(amount_text("usd", 0.0), "$0.00");
    assert_eq!(amount_text("usd", 2.5), "$2.50");
}
