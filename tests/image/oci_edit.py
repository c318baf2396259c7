#!/usr/bin/env python3
"""Edits an OCI image layout the way the registry tests need; umoci and
skopeo cannot produce these images.

usage:
  oci_edit.py LAYOUT index NEWTAG TAG:os/arch[/variant] ... [--attestation-for TAG]
      writes an image index listing the tagged manifests with those
      platforms (plus, with --attestation-for, an unknown/unknown attestation
      manifest with an in-toto layer, as BuildKit adds), tagged NEWTAG
  oci_edit.py LAYOUT bad-diffid TAG NEWTAG
      copies TAG to NEWTAG with the first diff_id of its config replaced
"""
import hashlib
import json
import os
import sys

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"


def put_blob(layout, data):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    path = os.path.join(layout, "blobs", "sha256", digest[7:])
    with open(path, "wb") as f:
        f.write(data)
    return digest


def get_blob(layout, digest):
    with open(os.path.join(layout, "blobs", "sha256", digest[7:]), "rb") as f:
        return f.read()


def load_index(layout):
    with open(os.path.join(layout, "index.json")) as f:
        return json.load(f)


def save_index(layout, index):
    with open(os.path.join(layout, "index.json"), "w") as f:
        json.dump(index, f)


def find_tag(index, tag):
    for m in index["manifests"]:
        if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag:
            return m
    raise SystemExit(f"tag {tag} not in layout")


def set_tag(index, tag, desc):
    index["manifests"] = [
        m for m in index["manifests"]
        if m.get("annotations", {}).get("org.opencontainers.image.ref.name") != tag
    ]
    desc = dict(desc)
    desc["annotations"] = {"org.opencontainers.image.ref.name": tag}
    index["manifests"].append(desc)


def make_index(layout, newtag, entries, attestation_for):
    index = load_index(layout)
    manifests = []
    for entry in entries:
        tag, platform = entry.split(":", 1)
        parts = platform.split("/")
        desc = dict(find_tag(index, tag))
        desc.pop("annotations", None)
        desc["platform"] = {"os": parts[0], "architecture": parts[1]}
        if len(parts) > 2:
            desc["platform"]["variant"] = parts[2]
        manifests.append(desc)
    if attestation_for:
        subject = find_tag(index, attestation_for)
        statement = json.dumps({"_type": "https://in-toto.io/Statement/v0.1"}).encode()
        layer = put_blob(layout, statement)
        config = json.dumps({"architecture": "unknown", "os": "unknown",
                             "rootfs": {"type": "layers", "diff_ids": [layer]}}).encode()
        config_digest = put_blob(layout, config)
        manifest = json.dumps({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config)},
            "layers": [{"mediaType": "application/vnd.in-toto+json", "digest": layer,
                        "size": len(statement),
                        "annotations": {"in-toto.io/predicate-type": "https://spdx.dev/Document"}}],
        }).encode()
        manifests.append({
            "mediaType": OCI_MANIFEST, "digest": put_blob(layout, manifest), "size": len(manifest),
            "platform": {"os": "unknown", "architecture": "unknown"},
            "annotations": {"vnd.docker.reference.type": "attestation-manifest",
                            "vnd.docker.reference.digest": subject["digest"]},
        })
    body = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}).encode()
    set_tag(index, newtag, {"mediaType": OCI_INDEX, "digest": put_blob(layout, body),
                            "size": len(body)})
    save_index(layout, index)


def bad_diffid(layout, tag, newtag):
    index = load_index(layout)
    mdesc = find_tag(index, tag)
    manifest = json.loads(get_blob(layout, mdesc["digest"]))
    config = json.loads(get_blob(layout, manifest["config"]["digest"]))
    config["rootfs"]["diff_ids"][0] = "sha256:" + "0" * 64
    data = json.dumps(config).encode()
    manifest["config"]["digest"] = put_blob(layout, data)
    manifest["config"]["size"] = len(data)
    body = json.dumps(manifest).encode()
    set_tag(index, newtag, {"mediaType": OCI_MANIFEST, "digest": put_blob(layout, body),
                            "size": len(body)})
    save_index(layout, index)


def main():
    layout, command = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    if command == "index":
        attestation = None
        if "--attestation-for" in args:
            i = args.index("--attestation-for")
            attestation = args[i + 1]
            del args[i:i + 2]
        make_index(layout, args[0], args[1:], attestation)
    elif command == "bad-diffid":
        bad_diffid(layout, args[0], args[1])
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main()
