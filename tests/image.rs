//! The container image (deploy/container/Containerfile), built by buildah through
//! scripts/image.sh, read back by umoci (an OCI implementation that is not the builder),
//! and run as its own user on this machine's /proc and /sys: one static file, the user
//! and entry point the Containerfile names, and an exporter that scans.

use crate::common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
#[ignore = "needs root"]
fn the_image_builds_and_runs_as_its_user() {
    let out = Command::new(root().join("scripts/image.sh"))
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    succeeded(out, "scripts/image.sh");
    let version = env!("CARGO_PKG_VERSION");
    let layout = root().join("target/image/layout");
    let archive = root().join(format!("target/image/membloat_exporter-{version}.oci.tar"));
    let size = std::fs::metadata(&archive).unwrap().len();
    eprintln!("image archive: {size} bytes");
    assert!(
        size < 8 << 20,
        "a scratch image of one static binary: {size} bytes"
    );

    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let out = tool("umoci")
        .arg("unpack")
        .arg("--image")
        .arg(format!("{}:{version}", layout.display()))
        .arg(&bundle)
        .output()
        .unwrap();
    succeeded(out, "umoci unpack");
    let config: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("config.json")).unwrap()).unwrap();
    let containerfile =
        std::fs::read_to_string(root().join("deploy/container/Containerfile")).unwrap();
    let user = containerfile
        .lines()
        .find_map(|l| l.strip_prefix("USER "))
        .unwrap();
    let (uid, gid) = user.split_once(':').unwrap();
    assert_eq!(config["process"]["user"]["uid"].to_string(), uid);
    assert_eq!(config["process"]["user"]["gid"].to_string(), gid);
    assert_ne!(uid, "0", "the image does not run as root");
    assert_eq!(
        config["process"]["args"],
        serde_json::json!(["/membloat_exporter"])
    );
    let image_config = layout_config(&layout, version);
    assert!(
        image_config["config"]["ExposedPorts"]["10293/tcp"].is_object(),
        "{image_config}"
    );

    // The root file system is the binary and nothing else, statically linked.
    let rootfs = bundle.join("rootfs");
    let files: Vec<String> = std::fs::read_dir(&rootfs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files, ["membloat_exporter"]);
    let ldd = Command::new("ldd")
        .arg(rootfs.join("membloat_exporter"))
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&ldd.stdout).to_string() + &String::from_utf8_lossy(&ldd.stderr);
    assert!(
        said.contains("statically linked") || said.contains("not a dynamic executable"),
        "{said}"
    );

    // Run as the image runs: its entry point, as its user, in its root file system, with
    // this machine's /proc and /sys where the DaemonSet mounts the host's.
    for d in ["host/proc", "host/sys"] {
        std::fs::create_dir_all(rootfs.join(d)).unwrap();
    }
    let run = format!(
        "mount --bind /proc {r}/host/proc && mount --bind /sys {r}/host/sys && \
         exec chroot --userspec={user} {r} /membloat_exporter \
         --path.procfs=/host/proc --path.sysfs=/host/sys --once --once.interval=0s",
        r = rootfs.display()
    );
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &run])
        .output()
        .unwrap();
    let text = succeeded(out, "the image's entry point");
    assert!(value(&text, "membloat_processes_scanned").unwrap() >= 1.0);
    assert!(value(&text, "membloat_memory_total_bytes").unwrap() > 0.0);
}

/// The image configuration (ports, environment) as the OCI layout stores it.
fn layout_config(layout: &Path, version: &str) -> Value {
    let index: Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let manifests = index["manifests"].as_array().unwrap();
    let manifest = manifests
        .iter()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == version)
        .unwrap_or(&manifests[0]);
    let blob = |digest: &str| -> Value {
        let hex = digest.strip_prefix("sha256:").unwrap();
        serde_json::from_slice(&std::fs::read(layout.join("blobs/sha256").join(hex)).unwrap())
            .unwrap()
    };
    let manifest = blob(manifest["digest"].as_str().unwrap());
    blob(manifest["config"]["digest"].as_str().unwrap())
}
