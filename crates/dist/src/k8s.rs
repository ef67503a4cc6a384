//! Kubernetes manifests for a distributed run (`redline k8s`), built from the
//! typed API structs of the `k8s-openapi` crate: an Indexed Job whose pod 0
//! coordinates and pods 1..=N are the agents, a headless Service so the
//! agents reach the coordinator as `JOB-0.SERVICE`, and the run's arguments
//! as a ConfigMap with the files they name (`binaryData`). Credentials never
//! go into the ConfigMap or the Job: they are in a Secret (`NAME-secret`),
//! given to the pods as `secretKeyRef` environment variables
//! (`REDLINE_SECRET_N`, which `k8s-pod` expands where the arguments say
//! `$(REDLINE_SECRET_N)`; `REDLINE_TOKEN`, the coordinator's token) and, for
//! key files, as files of the same projected volume. [`check`] verifies the
//! rules a JSON schema cannot express.
//!
//! The Job ends when the coordinator (index 0) ends: its `successPolicy`
//! (Kubernetes >= 1.31) declares the Job succeeded once index 0 has, and
//! the agents still running are then stopped. Before it exits, the
//! coordinator serves the merged record on [`RECORD_PORT`] for at most the
//! linger time (`coordinate --serve-record`), for `kubectl port-forward` and
//! `redline fetch`.

use k8s_openapi::api::batch::v1::{Job, JobSpec, SuccessPolicy, SuccessPolicyRule};
use k8s_openapi::api::core::v1::{
    Affinity, ConfigMap, ConfigMapProjection, Container, ContainerPort, EnvVar, EnvVarSource,
    KeyToPath, PodAffinityTerm, PodAntiAffinity, PodSpec, PodTemplateSpec, ProjectedVolumeSource,
    ResourceRequirements, Secret, SecretKeySelector, SecretProjection, Service, ServicePort,
    ServiceSpec, Volume, VolumeMount, VolumeProjection, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::ByteString;
use serde_json::Value;
use std::collections::BTreeMap;

/// The coordinator's port inside the pods.
pub const PORT: i32 = 7070;
/// The port on which the coordinator pod serves the merged record after the
/// run (`GET /record.json`, `kubectl port-forward POD 7071`).
pub const RECORD_PORT: i32 = 7071;
/// Where the ConfigMap is mounted.
pub const MOUNT: &str = "/etc/redline";
/// The ConfigMap key holding the run arguments (a JSON array of strings).
pub const ARGS_KEY: &str = "args.json";
/// The environment variable holding the coordinator's token (from the Secret).
pub const TOKEN_ENV: &str = "REDLINE_TOKEN";
/// Prefix of the environment variables holding credentials of the run arguments.
pub const SECRET_ENV_PREFIX: &str = "REDLINE_SECRET_";
/// The most bytes of files in the ConfigMap, and in the Secret (Kubernetes
/// refuses objects above 1 MiB; the rest is for the arguments and metadata).
pub const MAX_BUNDLE: usize = 900 * 1024;

/// `$(REDLINE_SECRET_N)`: where an argument takes the N-th credential.
pub fn secret_ref(n: usize) -> String {
    format!("$({SECRET_ENV_PREFIX}{n})")
}

/// Replaces each `$(REDLINE_SECRET_N)` in `arg` with `lookup(name)` (the
/// pod's environment). Err names a variable that is not set.
pub fn expand(arg: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(arg.len());
    let mut rest = arg;
    let open = format!("$({SECRET_ENV_PREFIX}");
    while let Some(i) = rest.find(&open) {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(end) = after.find(')') else {
            out.push_str(&rest[i..]);
            return Ok(out);
        };
        let name = &after[..end];
        if name.len() > SECRET_ENV_PREFIX.len() + 6
            || !name[SECRET_ENV_PREFIX.len()..]
                .chars()
                .all(|c| c.is_ascii_digit())
        {
            out.push_str("$(");
            rest = after;
            continue;
        }
        let v = lookup(name).ok_or_else(|| {
            format!("{name} is not set (it comes from the Secret `redline k8s` wrote)")
        })?;
        out.push_str(&v);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct Options {
    /// Name of the Job, the Service (same) and the ConfigMap (`NAME-scenario`).
    pub name: String,
    /// Namespace (None: the current one).
    pub namespace: Option<String>,
    /// Number of load-generating agents (the Job has one more pod: the coordinator).
    pub parallel: u32,
    /// The container image.
    pub image: String,
    /// The `redline run` arguments (after `--`).
    pub run_args: Vec<String>,
    /// CPU request per pod (e.g. `1`).
    pub cpu: String,
    /// Memory request per pod (e.g. `256Mi`).
    pub memory: String,
    /// Prefer agents on different nodes.
    pub anti_affinity: bool,
    /// The Job's active deadline, seconds.
    pub deadline_s: i64,
    /// How long the coordinator serves the record after the run, seconds.
    pub linger_s: u64,
    /// Files for the ConfigMap (`binaryData`, key → contents), mounted at `MOUNT/KEY`.
    pub files: BTreeMap<String, Vec<u8>>,
    /// Secret environment variables (name → value): `REDLINE_TOKEN`, `REDLINE_SECRET_N`.
    pub secret_env: BTreeMap<String, Vec<u8>>,
    /// Secret files (client keys, scenarios with credentials), mounted at `MOUNT/KEY`.
    pub secret_files: BTreeMap<String, Vec<u8>>,
}

/// Checks a name as a DNS-1123 label short enough for `NAME-INDEX` pod host names.
pub fn check_name(name: &str, parallel: u32) -> Result<(), String> {
    let longest = format!("{name}-{parallel}");
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && longest.len() <= 63;
    if ok {
        Ok(())
    } else {
        Err(format!(
            "--name {name:?}: use lowercase letters, digits and '-', starting with a letter, at most {} characters",
            63 - 1 - parallel.to_string().len()
        ))
    }
}

fn meta(o: &Options, name: String, labels: &BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: o.namespace.clone(),
        labels: Some(labels.clone()),
        ..Default::default()
    }
}

/// The manifests: ConfigMap, Service, Job (in the order to apply them).
pub fn manifests(o: &Options) -> Result<Vec<Value>, String> {
    check_name(&o.name, o.parallel)?;
    if o.parallel == 0 {
        return Err("--parallel must be at least 1".into());
    }
    let labels: BTreeMap<String, String> = [
        ("app.kubernetes.io/name".to_string(), "redline".to_string()),
        ("app.kubernetes.io/instance".to_string(), o.name.clone()),
    ]
    .into();
    let config_name = format!("{}-scenario", o.name);
    let secret_name = format!("{}-secret", o.name);
    let args_json = serde_json::to_string(&o.run_args).map_err(|e| e.to_string())?;
    let sizes = |m: &BTreeMap<String, Vec<u8>>| m.values().map(Vec::len).sum::<usize>();
    if sizes(&o.files) > MAX_BUNDLE || sizes(&o.secret_files) + sizes(&o.secret_env) > MAX_BUNDLE {
        return Err(format!(
            "the files of the run are larger than {} KiB: a ConfigMap or Secret holds at most 1 MiB",
            MAX_BUNDLE / 1024
        ));
    }
    for k in o.files.keys().chain(o.secret_files.keys()) {
        if k == ARGS_KEY || o.files.contains_key(k) && o.secret_files.contains_key(k) {
            return Err(format!("two bundled files are both named {k:?}"));
        }
    }
    let cm = ConfigMap {
        metadata: meta(o, config_name.clone(), &labels),
        data: Some([(ARGS_KEY.to_string(), args_json)].into()),
        binary_data: (!o.files.is_empty()).then(|| {
            o.files
                .iter()
                .map(|(k, v)| (k.clone(), ByteString(v.clone())))
                .collect()
        }),
        ..Default::default()
    };
    let secret = Secret {
        metadata: meta(o, secret_name.clone(), &labels),
        type_: Some("Opaque".into()),
        data: Some(
            o.secret_env
                .iter()
                .chain(o.secret_files.iter())
                .map(|(k, v)| (k.clone(), ByteString(v.clone())))
                .collect(),
        ),
        ..Default::default()
    };
    let mut env = vec![EnvVar {
        name: "REDLINE_DB".into(),
        value: Some("/tmp/redline-history.db".into()),
        ..Default::default()
    }];
    env.extend(o.secret_env.keys().map(|k| EnvVar {
        name: k.clone(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret_name.clone(),
                key: k.clone(),
                optional: Some(false),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }));
    let svc = Service {
        metadata: meta(o, o.name.clone(), &labels),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            // Agents resolve the coordinator before any readiness probe passes.
            publish_not_ready_addresses: Some(true),
            selector: Some(labels.clone()),
            ports: Some(vec![ServicePort {
                name: Some("coordinator".into()),
                port: PORT,
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let coordinator = format!("{}-0.{}:{PORT}", o.name, o.name);
    let container = Container {
        name: "redline".into(),
        image: Some(o.image.clone()),
        args: Some(vec![
            "k8s-pod".into(),
            "--agents".into(),
            o.parallel.to_string(),
            "--coordinator".into(),
            coordinator,
            "--args-file".into(),
            format!("{MOUNT}/{ARGS_KEY}"),
            "--serve-record".into(),
            format!("0.0.0.0:{RECORD_PORT}"),
            "--linger".into(),
            format!("{}s", o.linger_s),
        ]),
        env: Some(env),
        ports: Some(vec![
            ContainerPort {
                name: Some("coordinator".into()),
                container_port: PORT,
                protocol: Some("TCP".into()),
                ..Default::default()
            },
            ContainerPort {
                name: Some("record".into()),
                container_port: RECORD_PORT,
                protocol: Some("TCP".into()),
                ..Default::default()
            },
        ]),
        resources: Some(ResourceRequirements {
            requests: Some(
                [
                    ("cpu".to_string(), Quantity(o.cpu.clone())),
                    ("memory".to_string(), Quantity(o.memory.clone())),
                ]
                .into(),
            ),
            ..Default::default()
        }),
        volume_mounts: Some(vec![VolumeMount {
            name: "scenario".into(),
            mount_path: MOUNT.into(),
            read_only: Some(true),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let affinity = o.anti_affinity.then(|| Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        label_selector: Some(LabelSelector {
                            match_labels: Some(labels.clone()),
                            ..Default::default()
                        }),
                        topology_key: "kubernetes.io/hostname".into(),
                        ..Default::default()
                    },
                },
            ]),
            ..Default::default()
        }),
        ..Default::default()
    });
    let pods = o.parallel as i32 + 1;
    let job = Job {
        metadata: meta(o, o.name.clone(), &labels),
        spec: Some(JobSpec {
            completion_mode: Some("Indexed".into()),
            completions: Some(pods),
            parallelism: Some(pods),
            backoff_limit_per_index: Some(0),
            pod_replacement_policy: Some("Failed".into()),
            // The run is over when the coordinator is: agents still running
            // then are stopped by the Job controller.
            success_policy: Some(SuccessPolicy {
                rules: vec![SuccessPolicyRule {
                    succeeded_indexes: Some("0".into()),
                    succeeded_count: None,
                }],
            }),
            active_deadline_seconds: Some(o.deadline_s),
            ttl_seconds_after_finished: Some(3600),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels.clone()),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    subdomain: Some(o.name.clone()),
                    restart_policy: Some("Never".into()),
                    containers: vec![container],
                    affinity,
                    // One directory: the arguments and files from the
                    // ConfigMap, the secret files (only those) from the Secret.
                    volumes: Some(vec![Volume {
                        name: "scenario".into(),
                        projected: Some(ProjectedVolumeSource {
                            sources: Some(
                                std::iter::once(VolumeProjection {
                                    config_map: Some(ConfigMapProjection {
                                        name: config_name,
                                        ..Default::default()
                                    }),
                                    ..Default::default()
                                })
                                .chain((!o.secret_files.is_empty()).then(|| {
                                    VolumeProjection {
                                        secret: Some(SecretProjection {
                                            name: secret_name.clone(),
                                            items: Some(
                                                o.secret_files
                                                    .keys()
                                                    .map(|k| KeyToPath {
                                                        key: k.clone(),
                                                        path: k.clone(),
                                                        ..Default::default()
                                                    })
                                                    .collect(),
                                            ),
                                            ..Default::default()
                                        }),
                                        ..Default::default()
                                    }
                                }))
                                .collect(),
                            ),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    };
    let v = |x: serde_json::Result<Value>| x.map_err(|e| e.to_string());
    Ok(vec![
        v(serde_json::to_value(&secret))?,
        v(serde_json::to_value(&cm))?,
        v(serde_json::to_value(&svc))?,
        v(serde_json::to_value(&job))?,
    ])
}

/// The rules a schema cannot express, checked on the emitted manifests
/// (as JSON): the Job is Indexed with one pod per agent plus the
/// coordinator, never retries, has a deadline; its pods are in the Service's
/// subdomain and carry its selector; the coordinator address is pod 0 of the
/// Job in that Service on its port; the mounted ConfigMap is in the set and
/// holds the arguments as a JSON array. Returns the violations.
pub fn check(docs: &[Value], parallel: u32) -> Vec<String> {
    let mut bad = Vec::new();
    let find = |kind: &str| docs.iter().find(|d| d["kind"] == kind);
    let (Some(job), Some(svc), Some(cm), Some(secret)) = (
        find("Job"),
        find("Service"),
        find("ConfigMap"),
        find("Secret"),
    ) else {
        return vec!["a Job, a Service, a ConfigMap and a Secret are needed".into()];
    };
    let mut expect = |ok: bool, what: &str| {
        if !ok {
            bad.push(what.to_string());
        }
    };
    let js = &job["spec"];
    let pods = parallel as u64 + 1;
    expect(job["apiVersion"] == "batch/v1", "Job apiVersion batch/v1");
    expect(js["completionMode"] == "Indexed", "completionMode Indexed");
    expect(
        js["completions"].as_u64() == Some(pods),
        "completions = agents + 1",
    );
    expect(
        js["parallelism"].as_u64() == Some(pods),
        "parallelism = completions (all pods at once)",
    );
    expect(
        js["backoffLimitPerIndex"] == 0,
        "backoffLimitPerIndex 0 (no retries)",
    );
    expect(
        js["podReplacementPolicy"] == "Failed",
        "podReplacementPolicy Failed",
    );
    expect(
        js["activeDeadlineSeconds"].as_i64().is_some_and(|d| d > 0),
        "an active deadline",
    );
    expect(
        js["successPolicy"]["rules"]
            .as_array()
            .is_some_and(|r| r.len() == 1 && r[0]["succeededIndexes"] == "0"),
        "successPolicy: the Job ends when index 0 (the coordinator) succeeds",
    );
    let ps = &js["template"]["spec"];
    expect(
        ps["restartPolicy"] == "Never",
        "restartPolicy Never (required with backoffLimitPerIndex)",
    );
    let svc_name = svc["metadata"]["name"].as_str().unwrap_or("");
    let job_name = job["metadata"]["name"].as_str().unwrap_or("");
    expect(
        ps["subdomain"] == svc_name,
        "pod subdomain = the Service's name",
    );
    expect(
        svc["spec"]["clusterIP"] == "None",
        "headless Service (clusterIP None)",
    );
    let sel = svc["spec"]["selector"].as_object();
    let pod_labels = js["template"]["metadata"]["labels"].as_object();
    expect(
        sel.is_some_and(|s| {
            !s.is_empty()
                && s.iter()
                    .all(|(k, v)| pod_labels.is_some_and(|l| l.get(k) == Some(v)))
        }),
        "the Service selects the Job's pods",
    );
    let port = svc["spec"]["ports"][0]["port"].as_u64();
    let c = &ps["containers"][0];
    expect(
        c["ports"][0]["containerPort"].as_u64() == port,
        "container port = Service port",
    );
    let args: Vec<&str> = c["args"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
        .unwrap_or_default();
    let coord = args
        .iter()
        .position(|a| *a == "--coordinator")
        .and_then(|i| args.get(i + 1));
    expect(
        coord.is_some_and(|c| *c == format!("{job_name}-0.{svc_name}:{}", port.unwrap_or(0))),
        "agents dial JOB-0.SERVICE:PORT",
    );
    let record = args
        .iter()
        .position(|a| *a == "--serve-record")
        .and_then(|i| args.get(i + 1))
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse::<u64>().ok());
    let record_port = c["ports"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "record"))
        .and_then(|p| p["containerPort"].as_u64());
    expect(
        record.is_some() && record == record_port,
        "the coordinator serves the record on the container port named record",
    );
    let n = args
        .iter()
        .position(|a| *a == "--agents")
        .and_then(|i| args.get(i + 1));
    expect(
        n.is_some_and(|n| *n == parallel.to_string()),
        "--agents = parallel",
    );
    expect(
        format!("{job_name}-{parallel}").len() <= 63,
        "pod host names JOB-INDEX fit a DNS label",
    );
    let cm_name = cm["metadata"]["name"].as_str().unwrap_or("");
    let sources = ps["volumes"][0]["projected"]["sources"].as_array();
    expect(
        sources.is_some_and(|v| v.iter().any(|v| v["configMap"]["name"] == cm_name)),
        "the pods mount the ConfigMap",
    );
    let secret_name = secret["metadata"]["name"].as_str().unwrap_or("");
    let secret_keys: Vec<&String> = secret["data"]
        .as_object()
        .map(|d| d.keys().collect())
        .unwrap_or_default();
    let env: Vec<&Value> = c["env"]
        .as_array()
        .map(|e| e.iter().collect())
        .unwrap_or_default();
    let env_names: Vec<&str> = env.iter().filter_map(|e| e["name"].as_str()).collect();
    expect(
        env.iter().all(|e| {
            let r = &e["valueFrom"]["secretKeyRef"];
            r.is_null()
                || (r["name"] == secret_name && secret_keys.iter().any(|k| r["key"] == k.as_str()))
        }),
        "every secretKeyRef names the Secret and one of its keys",
    );
    expect(
        env.iter()
            .any(|e| e["name"] == TOKEN_ENV && e["valueFrom"]["secretKeyRef"].is_object()),
        "the coordinator token comes from the Secret",
    );
    expect(
        env.iter().all(|e| {
            e["value"].is_null()
                || !e["name"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("REDLINE_SECRET")
        }),
        "no credential as a plain env value",
    );
    let data = cm["data"][ARGS_KEY].as_str().unwrap_or("");
    let run = serde_json::from_str::<Vec<String>>(data);
    expect(
        run.is_ok(),
        "the ConfigMap holds the run arguments as a JSON array of strings",
    );
    let undefined = run
        .unwrap_or_default()
        .iter()
        .any(|a| expand(a, |n| env_names.contains(&n).then(String::new)).is_err());
    expect(
        !undefined,
        "every $(REDLINE_SECRET_N) in the arguments has its env var",
    );
    expect(
        c["resources"]["requests"]["cpu"].is_string()
            && c["resources"]["requests"]["memory"].is_string(),
        "resource requests",
    );
    bad
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> Options {
        Options {
            name: "redline-load".into(),
            namespace: None,
            parallel: 4,
            image: "redline:latest".into(),
            run_args: vec!["http://web/".into(), "-d".into(), "30s".into()],
            cpu: "1".into(),
            memory: "256Mi".into(),
            anti_affinity: true,
            deadline_s: 600,
            linger_s: 600,
            files: [("f0-body.json".to_string(), b"{}".to_vec())].into(),
            secret_env: [
                (TOKEN_ENV.to_string(), b"tok".to_vec()),
                ("REDLINE_SECRET_0".to_string(), b"u:p".to_vec()),
            ]
            .into(),
            secret_files: [("k0-client.key".to_string(), b"KEY".to_vec())].into(),
        }
    }

    #[test]
    fn secret_references_expand_from_the_environment() {
        let env = |n: &str| (n == "REDLINE_SECRET_0").then(|| "u:p".to_string());
        assert_eq!(
            expand("--basic-auth=$(REDLINE_SECRET_0)", env).unwrap(),
            "--basic-auth=u:p"
        );
        assert_eq!(expand("$(HOME) $(", env).unwrap(), "$(HOME) $(");
        assert_eq!(
            expand("a$(REDLINE_SECRET_X)b", env).unwrap(),
            "a$(REDLINE_SECRET_X)b"
        );
        assert!(expand("$(REDLINE_SECRET_1)", env)
            .unwrap_err()
            .contains("REDLINE_SECRET_1 is not set"));
        assert_eq!(secret_ref(3), "$(REDLINE_SECRET_3)");
    }

    #[test]
    fn manifests_pass_the_checks() {
        let docs = manifests(&opts()).unwrap();
        assert_eq!(docs.len(), 4);
        assert_eq!(check(&docs, 4), Vec::<String>::new());
        assert_eq!(docs[3]["kind"], "Job");
        // Credentials only in the Secret; files in the ConfigMap's binaryData.
        assert_eq!(docs[0]["kind"], "Secret");
        assert_eq!(docs[1]["binaryData"]["f0-body.json"], "e30=");
        let text = serde_json::to_string(&docs[1..]).unwrap();
        assert!(!text.contains("u:p") && !text.contains("KEY"), "{text}");
        assert_eq!(
            docs[3]["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
                ["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"],
            100
        );
        // The checks catch what they are for.
        let mut broken = docs.clone();
        broken[3]["spec"]["backoffLimitPerIndex"] = 3.into();
        broken[2]["spec"]["selector"]["app.kubernetes.io/instance"] = "other".into();
        broken[3]["spec"]["successPolicy"]["rules"][0]["succeededIndexes"] = "0-4".into();
        let errs = check(&broken, 4);
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert_eq!(
            docs[3]["spec"]["successPolicy"],
            serde_json::json!({"rules": [{"succeededIndexes": "0"}]})
        );
        let mut broken = docs.clone();
        broken[1]["data"][ARGS_KEY] = "[\"$(REDLINE_SECRET_7)\"]".into();
        assert!(check(&broken, 4).iter().any(|e| e.contains("env var")));
        let mut broken = docs.clone();
        broken[3]["spec"]["template"]["spec"]["containers"][0]["ports"][1]["containerPort"] =
            7072.into();
        assert!(check(&broken, 4).iter().any(|e| e.contains("record")));
        assert!(manifests(&Options {
            files: [("big".to_string(), vec![0u8; MAX_BUNDLE + 1])].into(),
            ..opts()
        })
        .unwrap_err()
        .contains("larger than"));
        assert!(check(&docs, 5).iter().any(|e| e.contains("completions")));
        assert!(manifests(&Options {
            name: "Bad_Name".into(),
            ..opts()
        })
        .is_err());
        assert!(check_name(&"a".repeat(62), 4).is_err());
    }
}
