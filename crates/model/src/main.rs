//! `quorumlock-model`: checks one named configuration (of the fencing model, or of one of the
//! other protocols' models) and prints what the checker found, each counterexample as a
//! numbered list of steps. Exits 0 when the result is what the scenario expects, 1 when it is
//! not, 2 on a usage error.

use std::process::ExitCode;
use std::slice::Iter;
use std::str::FromStr;

use quorumlock_model::check::{CheckReport, check, outcome_words};
use quorumlock_model::protocols::Protocol;
use quorumlock_model::scenario::Scenario;

const USAGE: &str = "usage: quorumlock-model <scenario> [--clients N] [--horizon T] \
[--acquisitions K] [--writes W] [--give-up] [--examples]
       quorumlock-model <protocol scenario>
       quorumlock-model list";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("{message}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &[String]) -> Result<ExitCode, String> {
    let Some((name, options)) = args.split_first() else {
        return Err("no scenario given".to_owned());
    };
    if name == "list" {
        for scenario in Scenario::ALL {
            println!("{:<26} {}", scenario.name(), scenario.summary());
        }
        for protocol in Protocol::ALL {
            println!("{:<26} {}", protocol.name(), protocol.summary());
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(protocol) = Protocol::from_name(name) {
        if let Some(option) = options.first() {
            return Err(format!("{name} takes no options, got {option:?}"));
        }
        let report = protocol.check();
        print!("{report}");
        return Ok(if protocol.as_expected(&report) {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    let scenario = Scenario::from_name(name).ok_or_else(|| format!("unknown scenario {name:?}"))?;
    let mut config = scenario.config();
    let mut print_examples = false;
    let mut options = options.iter();
    while let Some(option) = options.next() {
        match option.as_str() {
            "--clients" => config.clients = value(&mut options, option)?,
            "--horizon" => config.horizon = value(&mut options, option)?,
            "--acquisitions" => config.acquisitions_per_client = value(&mut options, option)?,
            "--writes" => config.writes_per_grant = value(&mut options, option)?,
            "--give-up" => config.give_up = true,
            "--examples" => print_examples = true,
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    let report = check(config).map_err(|error| error.to_string())?;
    print_report(scenario, &report, print_examples);
    Ok(if scenario.as_expected(&report) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The value after `option`, parsed.
fn value<T: FromStr>(options: &mut Iter<'_, String>, option: &str) -> Result<T, String> {
    options
        .next()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| format!("{option} takes a number"))
}

fn print_report(scenario: Scenario, report: &CheckReport, print_examples: bool) {
    println!("scenario {}: {}", scenario.name(), scenario.summary());
    println!("model: {}", report.config);
    let extent = if report.exhaustive {
        "every reachable state"
    } else {
        "until every property had a discovery"
    };
    println!(
        "explored {extent}: {} distinct states ({} generated, longest path {} states) in {:.2} s",
        report.unique_states,
        report.states,
        report.max_depth,
        report.elapsed.as_secs_f64()
    );
    println!();
    for outcome in &report.outcomes {
        let (kind, verdict) = outcome_words(outcome.safety, outcome.discovery.is_some());
        println!("  {kind}  {verdict:<11}  {}", outcome.name);
    }
    let expected = scenario.expected_violations();
    println!();
    println!(
        "as expected for {}: {} (expected violations: {})",
        scenario.name(),
        if scenario.as_expected(report) {
            "yes"
        } else {
            "NO"
        },
        if expected.is_empty() {
            "none".to_owned()
        } else {
            expected.join("; ")
        }
    );
    for outcome in &report.outcomes {
        let Some(trace) = &outcome.discovery else {
            continue;
        };
        if !outcome.safety && !print_examples {
            continue;
        }
        let what = if outcome.safety {
            "counterexample to"
        } else {
            "example of"
        };
        println!();
        println!(
            "{what} \"{}\" (a shortest one, {} steps):",
            outcome.name,
            trace.steps.len()
        );
        print!("{trace}");
    }
}
