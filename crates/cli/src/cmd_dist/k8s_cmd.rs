//! `redline k8s` (render the Job, Secret and ConfigMap) and the hidden
//! `k8s-pod` entry point its pods run; the bundle of files and secrets.

use super::*;

/// Run arguments `k8s` refuses: the agent sets them itself, or they read
/// or write this machine, not the pods.
pub(super) const K8S_REFUSED: &[(&str, &str)] = &[
    ("output", "the agents set the output themselves"),
    ("quiet", "the agents set the output themselves"),
    (
        "html",
        "the coordinator prints the merged record; make the report from it",
    ),
    ("live_json", "the agents set it themselves"),
    ("live_seconds", "the agents set it themselves"),
    ("segment", "each agent runs its own segment"),
    ("segment_sequence", "each agent runs its own segment"),
    ("start_at", "the coordinator starts the agents together"),
    ("db", "the pods do not keep a history"),
    (
        "watch",
        "--watch watches processes of this machine, not the server's",
    ),
    (
        "watch_interval",
        "--watch watches processes of this machine, not the server's",
    ),
    ("server_status", "watch the server from a local run"),
    ("server_config", "watch the server from a local run"),
];

/// What `k8s` puts in the cluster besides the arguments.
#[derive(Default, Debug)]
pub(super) struct Bundle {
    /// ConfigMap files (key → contents).
    pub(super) files: std::collections::BTreeMap<String, Vec<u8>>,
    /// Secret env vars (name → value).
    pub(super) secret_env: std::collections::BTreeMap<String, Vec<u8>>,
    /// Secret files (key → contents).
    pub(super) secret_files: std::collections::BTreeMap<String, Vec<u8>>,
}

impl Bundle {
    fn secret(&mut self, value: &str) -> String {
        let n = self
            .secret_env
            .keys()
            .filter(|k| k.starts_with(k8s::SECRET_ENV_PREFIX))
            .count();
        self.secret_env.insert(
            format!("{}{n}", k8s::SECRET_ENV_PREFIX),
            value.as_bytes().to_vec(),
        );
        k8s::secret_ref(n)
    }

    /// Adds a file under a key made from its name; returns its path in the pods.
    fn file(&mut self, key: String, contents: Vec<u8>, secret: bool) -> Result<String, String> {
        if key == k8s::ARGS_KEY
            || self.files.contains_key(&key)
            || self.secret_files.contains_key(&key)
        {
            return Err(format!(
                "two files of the run would both be {key:?} in the pods; rename one"
            ));
        }
        let path = format!("{}/{key}", k8s::MOUNT);
        if secret {
            self.secret_files.insert(key, contents);
        } else {
            self.files.insert(key, contents);
        }
        Ok(path)
    }
}

/// A file's name as a ConfigMap key (`[-._a-zA-Z0-9]`, other characters `_`).
pub(super) fn file_key(prefix: &str, path: &str) -> String {
    let base = std::path::Path::new(path)
        .file_name()
        .map(|b| b.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let clean: String = base
        .chars()
        .take(100)
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-._".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{prefix}{clean}")
}

/// The largest file `k8s` bundles.
pub(super) const MAX_K8S_FILE: u64 = k8s::MAX_BUNDLE as u64;

/// Rewrites parsed run arguments for the cluster: credentials become
/// `$(REDLINE_SECRET_N)` references to the Secret (basic auth, every body,
/// every header value, URLs with credentials), files are bundled (CA and
/// client certificates into the ConfigMap; keys, body files, URL lists and
/// scenarios into the Secret) and named by their path in the pods. Err: a clear refusal.
pub(super) fn bundle_run(items: &mut [RunArg], b: &mut Bundle) -> Result<(), String> {
    for a in items.iter() {
        if let Some((_, why)) = K8S_REFUSED.iter().find(|(id, _)| *id == a.id) {
            let flag = a.long.as_deref().unwrap_or(&a.id);
            return Err(format!(
                "k8s: leave --{flag} out of the run arguments: {why}"
            ));
        }
    }
    let mut n = 0usize;
    for a in items.iter_mut() {
        let mut vals = std::mem::take(&mut a.values);
        for v in vals.iter_mut() {
            n += 1;
            *v = match a.id.as_str() {
                // Every request body and every custom header value may be a
                // credential (`{"password": …}`, an API key under any
                // name): all of them go to the Secret, never the ConfigMap.
                "basic_auth" | "body" => b.secret(v),
                "headers" => {
                    let (name, value) = v.split_once(':').unwrap_or((v.as_str(), ""));
                    format!("{}: {}", name.trim(), b.secret(value.trim()))
                }
                "url" if secret_url(v) => b.secret(v),
                "body_file" | "urls" => {
                    let what = format!("--{}", a.long.as_deref().unwrap_or(&a.id));
                    let data = read_bounded(std::path::Path::new(v), MAX_K8S_FILE, &what)?;
                    b.file(file_key(&format!("f{n}-"), v), data, true)?
                }
                "cacert" | "cert" => {
                    let what = format!("--{}", a.long.as_deref().unwrap_or(&a.id));
                    let data = read_bounded(std::path::Path::new(v), MAX_K8S_FILE, &what)?;
                    b.file(file_key(&format!("f{n}-"), v), data, false)?
                }
                "key" => {
                    let data = read_bounded(std::path::Path::new(v), MAX_K8S_FILE, "--key")?;
                    b.file(file_key(&format!("k{n}-"), v), data, true)?
                }
                "scenario" => bundle_scenario(v, b)?,
                _ => std::mem::take(v),
            };
        }
        a.values = vals;
    }
    Ok(())
}

/// Bundles a scenario and the files it names (which must sit next to it:
/// the pods see one flat folder). Scenarios hold headers, bodies, forms and
/// data files (users and their passwords), so every scenario goes into the
/// Secret, with its files.
pub(super) fn bundle_scenario(path: &str, b: &mut Bundle) -> Result<String, String> {
    let p = std::path::Path::new(path);
    let data = read_bounded(p, MAX_K8S_FILE, "--scenario")?;
    let text = String::from_utf8(data.clone())
        .map_err(|_| format!("--scenario {path}: not UTF-8 text"))?;
    let sc = redline_engine::scenario::file::parse(&text, path)?;
    let mut named: Vec<String> = sc
        .request
        .iter()
        .filter_map(|r| r.body_file.clone())
        .collect();
    named.extend(sc.data.as_ref().map(|d| d.file.clone()));
    let secret = true;
    let dir = p.parent().unwrap_or(std::path::Path::new("."));
    for f in named {
        let ok_name = !f.is_empty()
            && f.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
            && f != k8s::ARGS_KEY
            && !f.starts_with('.');
        if !ok_name {
            return Err(format!(
                "--scenario {path} names the file {f:?}: k8s bundles only files next to the scenario, named with letters, digits, '-', '.' and '_'; move it there"
            ));
        }
        if b.files.contains_key(&f) || b.secret_files.contains_key(&f) {
            continue; // named twice in the scenario
        }
        let bytes = read_bounded(&dir.join(&f), MAX_K8S_FILE, "a file of the scenario")?;
        b.file(f, bytes, secret)?;
    }
    b.file(file_key("scenario-", path), data, secret)
}

pub(super) fn cmd_k8s(a: K8sArgs) -> Exit {
    let mut run = a.run.clone();
    if run.first().map(String::as_str) != Some("run") {
        return fail(
            Exit::Usage,
            "k8s: give the run after `--`: redline k8s --parallel 4 -- run URL -d 60s",
        );
    }
    run.remove(0);
    if a.linger > MAX_LINGER {
        return fail(Exit::Usage, "--linger: at most 24h");
    }
    if a.parallel == 0 || u64::from(a.parallel) > MAX_AGENTS {
        return fail(
            Exit::Usage,
            format!("--parallel must be between 1 and {MAX_AGENTS}"),
        );
    }
    // The real parser: every spelling of a flag (-auser:pass, -a=…, -qa…) is seen.
    let mut items = match parse_run(&run) {
        Ok(i) => i,
        Err(e) => return fail(Exit::Usage, format!("k8s: {e}")),
    };
    let mut bundle = Bundle::default();
    if let Err(e) = bundle_run(&mut items, &mut bundle) {
        return fail(Exit::Usage, e);
    }
    match redline_dist::protocol::nonce() {
        Ok(t) => bundle
            .secret_env
            .insert(k8s::TOKEN_ENV.to_string(), t.into_bytes()),
        Err(e) => return fail(Exit::Failure, format!("k8s: cannot make a token: {e}")),
    };
    let run = render_run(&items);
    // The arguments must make a valid share for every agent.
    let seq = match segment::Sequence::equal(u64::from(a.parallel)) {
        Ok(s) => s,
        Err(e) => return fail(Exit::Usage, e),
    };
    let mut duration = None;
    for i in 0..seq.len() {
        match agent::scale_run_args(&run, &seq.segment(i).expect("i < len")) {
            Ok(s) => duration = s.duration,
            Err(e) => return fail(Exit::Usage, e),
        }
    }
    let deadline = match a.deadline {
        Some(d) => d,
        None => match duration.as_deref().map(dur).transpose() {
            Ok(Some(d)) => d + Duration::from_secs(600) + a.linger,
            Ok(None) => Duration::from_secs(3600) + a.linger,
            Err(e) => return fail(Exit::Usage, format!("-d: {e}")),
        },
    };
    let opts = k8s::Options {
        name: a.name,
        namespace: a.namespace,
        parallel: a.parallel,
        image: a.image,
        run_args: run,
        cpu: a.cpu,
        memory: a.memory,
        anti_affinity: a.anti_affinity,
        deadline_s: deadline.as_secs().max(1) as i64,
        linger_s: a.linger.as_secs(),
        files: bundle.files,
        secret_env: bundle.secret_env,
        secret_files: bundle.secret_files,
    };
    let docs = match k8s::manifests(&opts) {
        Ok(d) => d,
        Err(e) => return fail(Exit::Usage, e),
    };
    let problems = k8s::check(&docs, opts.parallel);
    if !problems.is_empty() {
        return fail(
            Exit::Failure,
            format!("generated manifests break: {}", problems.join("; ")),
        );
    }
    match a.output {
        ManifestFormat::Yaml => print_out(&redline_dist::yaml::to_yaml_stream(&docs)),
        ManifestFormat::Json => {
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": docs});
            print_out(&format!(
                "{}\n",
                serde_json::to_string_pretty(&list).unwrap_or_default()
            ))
        }
    }
}

/// The `--threshold` bounds in run arguments: the coordinator evaluates them
/// once on the merged record.
pub(super) fn run_thresholds(
    run: &[String],
) -> Result<Vec<redline_report::thresholds::Threshold>, String> {
    let mut v = Vec::new();
    for (i, a) in run.iter().enumerate() {
        let expr = if a == "--threshold" {
            run.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix("--threshold=")
        };
        if let Some(e) = expr {
            v.push(threshold(e)?);
        }
    }
    Ok(v)
}

pub(super) fn cmd_k8s_pod(a: K8sPodArgs) -> Exit {
    let index: u64 = match std::env::var("JOB_COMPLETION_INDEX")
        .ok()
        .and_then(|v| v.trim().parse().ok())
    {
        Some(i) => i,
        None => return fail(
            Exit::Usage,
            "k8s-pod runs inside the Job `redline k8s` prints (JOB_COMPLETION_INDEX is not set)",
        ),
    };
    let text = match read_bounded(&a.args_file, 1 << 20, "--args-file")
        .and_then(|b| String::from_utf8(b).map_err(|_| "--args-file: not UTF-8".into()))
    {
        Ok(t) => t,
        Err(e) => return fail(Exit::Usage, e),
    };
    let run: Vec<String> = match serde_json::from_str::<Vec<String>>(&text) {
        Ok(r) => r,
        Err(e) => {
            return fail(
                Exit::Usage,
                format!(
                    "{}: not a JSON array of strings: {e}",
                    a.args_file.display()
                ),
            )
        }
    };
    // Credentials come from the Secret, as environment variables.
    let run: Vec<String> = match run
        .iter()
        .map(|x| k8s::expand(x, |n| std::env::var(n).ok()))
        .collect::<Result<_, _>>()
    {
        Ok(r) => r,
        Err(e) => return fail(Exit::Usage, e),
    };
    if index == 0 {
        let port = a.coordinator.rsplit(':').next().unwrap_or("7070");
        return cmd_coordinate(CoordinateArgs {
            agents: a.agents,
            listen: format!("0.0.0.0:{port}"),
            ready_timeout: Duration::from_secs(300),
            start_delay: Duration::from_secs(2),
            silence_timeout: Duration::from_secs(15),
            run_timeout: Duration::from_secs(24 * 3600),
            thresholds: match run_thresholds(&run) {
                Ok(t) => t,
                Err(e) => return fail(Exit::Usage, e),
            },
            abort_on_fail: run.iter().any(|x| x == "--abort-on-fail"),
            output: RecordFormat::Json,
            record: None,
            quiet: true,
            no_tui: true,
            // REDLINE_TOKEN, from the Secret `redline k8s` wrote.
            token: None,
            token_file: None,
            serve_record: Some(a.serve_record),
            linger: a.linger,
            tls_cert: None,
            tls_key: None,
        });
    }
    cmd_agent(AgentArgs {
        index: index - 1,
        total: a.agents,
        coordinator: a.coordinator,
        segment_sequence: None,
        connect_timeout: Duration::from_secs(300),
        start_timeout: Duration::from_secs(600),
        token: None,
        token_file: None,
        cacert: None,
        run,
    })
}
