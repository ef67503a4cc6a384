//! Kubernetes manifests for a distributed run (`redline k8s`), built from the
//! typed API structs of the `k8s-openapi` crate: an Indexed Job whose pod 0
//! coordinates and pods 1..=N are the agents, a headless Service so the
//! agents reach the coordinator as `JOB-0.SERVICE`, and the run's arguments
//! as a ConfigMap. [`check`] verifies the rules a JSON schema cannot express.

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Affinity, ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EnvVar, PodAffinityTerm,
    PodAntiAffinity, PodSpec, PodTemplateSpec, ResourceRequirements, Service, ServicePort,
    ServiceSpec, Volume, VolumeMount, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde_json::Value;
use std::collections::BTreeMap;

/// The coordinator's port inside the pods.
pub const PORT: i32 = 7070;
/// Where the ConfigMap is mounted.
pub const MOUNT: &str = "/etc/redline";
/// The ConfigMap key holding the run arguments (a JSON array of strings).
pub const ARGS_KEY: &str = "args.json";

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
    let args_json = serde_json::to_string(&o.run_args).map_err(|e| e.to_string())?;
    let cm = ConfigMap {
        metadata: meta(o, config_name.clone(), &labels),
        data: Some([(ARGS_KEY.to_string(), args_json)].into()),
        ..Default::default()
    };
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
        ]),
        env: Some(vec![EnvVar {
            name: "REDLINE_DB".into(),
            value: Some("/tmp/redline-history.db".into()),
            ..Default::default()
        }]),
        ports: Some(vec![ContainerPort {
            name: Some("coordinator".into()),
            container_port: PORT,
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
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
                    volumes: Some(vec![Volume {
                        name: "scenario".into(),
                        config_map: Some(ConfigMapVolumeSource {
                            name: config_name,
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
    let (Some(job), Some(svc), Some(cm)) = (find("Job"), find("Service"), find("ConfigMap")) else {
        return vec!["a Job, a Service and a ConfigMap are needed".into()];
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
    expect(
        ps["volumes"]
            .as_array()
            .is_some_and(|v| v.iter().any(|v| v["configMap"]["name"] == cm_name)),
        "the pods mount the ConfigMap",
    );
    let data = cm["data"][ARGS_KEY].as_str().unwrap_or("");
    expect(
        serde_json::from_str::<Vec<String>>(data).is_ok(),
        "the ConfigMap holds the run arguments as a JSON array of strings",
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
        }
    }

    #[test]
    fn manifests_pass_the_checks() {
        let docs = manifests(&opts()).unwrap();
        assert_eq!(docs.len(), 3);
        assert_eq!(check(&docs, 4), Vec::<String>::new());
        assert_eq!(docs[2]["kind"], "Job");
        assert_eq!(
            docs[2]["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
                ["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"],
            100
        );
        // The checks catch what they are for.
        let mut broken = docs.clone();
        broken[2]["spec"]["backoffLimitPerIndex"] = 3.into();
        broken[1]["spec"]["selector"]["app.kubernetes.io/instance"] = "other".into();
        let errs = check(&broken, 4);
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(check(&docs, 5).iter().any(|e| e.contains("completions")));
        assert!(manifests(&Options {
            name: "Bad_Name".into(),
            ..opts()
        })
        .is_err());
        assert!(check_name(&"a".repeat(62), 4).is_err());
    }
}
