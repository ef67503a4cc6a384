//! The command line as a whole: the top-level help grouped by task, and
//! `redline completions SHELL` and `redline man` (clap_complete, clap_mangen),
//! all generated from the one clap definition `--help` prints.

use crate::exit::{fail, Exit};
use clap::{Args, ValueEnum};
use std::path::PathBuf;

/// The tasks the top-level help groups the subcommands by, in order. A unit
/// test checks each visible subcommand is in exactly one group.
pub(crate) const GROUPS: &[(&str, &[&str])] = &[
    (
        "Load",
        &[
            "run", "find", "replay", "import", "ab", "wrk", "demo", "serve",
        ],
    ),
    ("Server", &["watch", "size", "tune", "trial"]),
    ("Page and audit", &["page", "audit"]),
    (
        "History and reports",
        &[
            "history", "show", "export", "rm", "compare", "report", "merge",
        ],
    ),
    ("Distributed", &["coordinate", "agent", "k8s", "fetch"]),
    ("Shell", &["completions", "man", "help"]),
];

/// Wraps `text` at `width` columns, every line after the first indented by `indent`.
fn wrap(text: &str, indent: usize, width: usize) -> String {
    let mut out = String::new();
    let mut col = indent;
    for (i, w) in text.split_whitespace().enumerate() {
        if i > 0 && col + 1 + w.len() > width {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            col = indent;
        } else if i > 0 {
            out.push(' ');
            col += 1;
        }
        out.push_str(w);
        col += w.len();
    }
    out
}

/// The subcommands under their task headings, as the top-level help shows them.
pub(crate) fn grouped_commands(cmd: &clap::Command) -> String {
    let subs: Vec<&clap::Command> = cmd.get_subcommands().filter(|c| !c.is_hide_set()).collect();
    let width = subs.iter().map(|c| c.get_name().len()).max().unwrap_or(4) + 2;
    let mut out = String::new();
    for (title, names) in GROUPS {
        out.push_str(&format!("{title}:\n"));
        for name in *names {
            let about = if *name == "help" {
                "Print this message or the help of the given subcommand(s)".to_string()
            } else {
                subs.iter()
                    .find(|c| c.get_name() == *name)
                    .and_then(|c| c.get_about())
                    .map(|a| a.to_string())
                    .unwrap_or_default()
            };
            let about = about.trim_end_matches('.');
            out.push_str(&format!(
                "  {name:<width$}{}\n",
                wrap(about, 2 + width, 100)
            ));
        }
        out.push('\n');
    }
    out
}

/// The top-level command with its grouped help.
pub(crate) fn command() -> clap::Command {
    use clap::CommandFactory;
    let cmd = super::Cli::command();
    // Braces would be read as template tags.
    let groups = grouped_commands(&cmd).replace(['{', '}'], "");
    cmd.help_template(format!(
        "{{about-with-newline}}\n{{usage-heading}} {{usage}}\n       redline URL [FLAGS]   (short for redline run URL)\n\n{groups}Options:\n{{options}}{{after-help}}"
    ))
}

/// The shells `redline completions` writes for.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum Shell {
    Bash,
    Zsh,
    Fish,
    Powershell,
    Elvish,
}

/// `redline completions SHELL`.
#[derive(Args, Debug)]
pub(crate) struct CompletionsArgs {
    /// The shell: bash, zsh, fish, powershell or elvish. Bash:
    /// `redline completions bash > ~/.local/share/bash-completion/completions/redline`;
    /// zsh: into a folder of $fpath as `_redline`; fish: `~/.config/fish/completions/redline.fish`.
    #[arg(value_name = "SHELL")]
    shell: Shell,
}

/// `redline man`.
#[derive(Args, Debug)]
pub(crate) struct ManArgs {
    /// A subcommand's page (redline-run(1)) instead of redline(1).
    #[arg(value_name = "COMMAND")]
    command: Option<String>,
    /// Write every page (redline.1, redline-run.1, …) into DIR instead of printing one.
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    dir: Option<PathBuf>,
}

/// Writes the completion script on stdout.
pub(crate) fn completions(a: CompletionsArgs) -> Exit {
    use clap_complete::Shell as S;
    let sh = match a.shell {
        Shell::Bash => S::Bash,
        Shell::Zsh => S::Zsh,
        Shell::Fish => S::Fish,
        Shell::Powershell => S::PowerShell,
        Shell::Elvish => S::Elvish,
    };
    let mut cmd = command();
    // Into a buffer first: clap_complete panics when its writer fails (a
    // reader that stopped early, `| head`).
    let mut out = Vec::new();
    clap_complete::generate(sh, &mut cmd, "redline", &mut out);
    print_out(&out, "the completion script")
}

/// Writes `out` on stdout; a reader that went away early (`| head`) is not
/// an error.
fn print_out(out: &[u8], what: &str) -> Exit {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(out).and_then(|()| stdout.flush()) {
        Ok(()) => Exit::Ok,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Exit::Ok,
        Err(e) => fail(Exit::Failure, format!("cannot write {what}: {e}")),
    }
}

/// Prints a man page (roff) or writes them all into `--dir`.
pub(crate) fn man(a: ManArgs) -> Exit {
    use clap::CommandFactory;
    let mut cmd = super::Cli::command().name("redline");
    cmd.build();
    if let Some(dir) = a.dir {
        if let Err(e) = std::fs::create_dir_all(&dir) {
            return fail(
                Exit::Failure,
                format!("cannot create {}: {e}", dir.display()),
            );
        }
        return match clap_mangen::generate_to(cmd, &dir) {
            Ok(()) => {
                eprintln!("redline: man pages written to {}", dir.display());
                Exit::Ok
            }
            Err(e) => fail(
                Exit::Failure,
                format!("cannot write into {}: {e}", dir.display()),
            ),
        };
    }
    let page = match &a.command {
        None => cmd,
        Some(name) => match cmd.find_subcommand(name) {
            // One page per process: the name lives as long as it.
            Some(sub) => sub
                .clone()
                .name(&*Box::leak(format!("redline-{name}").into_boxed_str())),
            None => {
                return fail(
                    Exit::Usage,
                    format!("no command '{name}' (the commands: redline --help)"),
                )
            }
        },
    };
    let mut out = Vec::new();
    if let Err(e) = clap_mangen::Man::new(page).render(&mut out) {
        return fail(Exit::Failure, format!("cannot render the man page: {e}"));
    }
    print_out(&out, "the man page")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_is_in_one_group() {
        use clap::CommandFactory;
        let cmd = super::super::Cli::command();
        let mut names: Vec<&str> = GROUPS.iter().flat_map(|(_, v)| v.iter().copied()).collect();
        names.sort();
        let n = names.len();
        names.dedup();
        assert_eq!(n, names.len(), "a command in two groups");
        let mut visible: Vec<String> = cmd
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
            .map(|c| c.get_name().to_string())
            .collect();
        visible.push("help".into());
        visible.sort();
        assert_eq!(
            names,
            visible.iter().map(String::as_str).collect::<Vec<_>>()
        );
    }
}
