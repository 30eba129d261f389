"""Corpus for lockstep's shipped models: Python source found on the machine.

Pure Python (no torch), so it can be tested anywhere:
    python3 tools/train/corpus.py --cap-mb 20     # prints the stats as JSON

Sources: the standard library (sysconfig 'stdlib') and the interpreter's
site-packages (sysconfig 'purelib'/'platlib'), *.py files only.
Filters: UTF-8, 256 B .. 256 KB, longest line <= 400 chars, not mostly
non-ASCII. Duplicates (same content, sha256) are dropped. Held-out split by
file: a file is held out when int(sha256[:8], 16) % 1000 < heldout_permille.
Size cap: the stdlib first (all of it, up to the cap), then site-packages files
in a seeded shuffled order, at most per_package_frac of the cap from one
top-level package, until the cap is reached.
"""

import argparse
import email.parser
import hashlib
import json
import os
import random
import sys
import sysconfig


def _licence_of(meta):
    expr = meta.get("License-Expression")
    if expr:
        return expr.strip()
    classifiers = [c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    lic = (meta.get("License") or "").strip()
    if lic and "\n" not in lic and len(lic) <= 60 and lic.upper() != "UNKNOWN":
        return lic
    if classifiers:
        return "; ".join(sorted(set(classifiers)))
    if lic:
        return lic.splitlines()[0][:60] + " (see package)"
    return "unknown"


def package_licences(site_dirs):
    """top-level name -> {dist, version, licence} from *.dist-info METADATA."""
    out = {}
    for sd in site_dirs:
        if not os.path.isdir(sd):
            continue
        for name in sorted(os.listdir(sd)):
            if not name.endswith(".dist-info"):
                continue
            d = os.path.join(sd, name)
            try:
                with open(os.path.join(d, "METADATA"), encoding="utf-8", errors="replace") as f:
                    meta = email.parser.Parser().parse(f, headersonly=True)
            except OSError:
                continue
            info = {"dist": meta.get("Name", name), "version": meta.get("Version", ""), "licence": _licence_of(meta)}
            tops = set()
            tl = os.path.join(d, "top_level.txt")
            if os.path.exists(tl):
                tops |= {t.strip() for t in open(tl, encoding="utf-8", errors="replace") if t.strip()}
            rec = os.path.join(d, "RECORD")
            if os.path.exists(rec):
                for line in open(rec, encoding="utf-8", errors="replace"):
                    p = line.split(",", 1)[0]
                    if p.endswith(".py"):
                        first = p.split("/", 1)[0]
                        tops.add(first[:-3] if first.endswith(".py") else first)
            norm = info["dist"].lower().replace("-", "_")
            for t in tops:
                if t and not t.endswith(".dist-info") and t != "..":
                    if t not in out or t.lower() == norm:  # a same-named distribution wins
                        out[t] = info
    return out


def _acceptable(text):
    n = len(text)
    if n < 256 or n > 256 * 1024:
        return False
    if max((len(l) for l in text.split("\n")), default=0) > 400:
        return False
    non_ascii = sum(1 for c in text if ord(c) > 127)
    return non_ascii <= 0.02 * n


def _py_files(root, skip_dirs=()):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if os.path.join(dirpath, d) not in skip_dirs
                             and d not in ("__pycache__", "site-packages", "dist-packages"))
        for fn in sorted(filenames):
            if fn.endswith(".py"):
                yield os.path.join(dirpath, fn)


def collect(cap_mb=150.0, heldout_permille=20, per_package_frac=0.10, seed=1234):
    """Returns (train_docs, heldout_docs, stats); docs are (relpath, text)."""
    paths = sysconfig.get_paths()
    stdlib = os.path.realpath(paths["stdlib"])
    sites = sorted({os.path.realpath(paths[k]) for k in ("purelib", "platlib") if os.path.isdir(paths[k])})
    cap = int(cap_mb * 1e6)
    seen = set()
    stats = {"stdlib_dir": stdlib, "site_dirs": sites, "cap_bytes": cap, "heldout_permille": heldout_permille,
             "per_package_frac": per_package_frac, "seed": seed, "rejected_filter": 0, "duplicates": 0,
             "over_package_cap": 0, "packages": {}}
    chosen = []  # (source, package, relpath, text, sha)
    total = 0

    def take(source, package, path, rel):
        nonlocal total
        try:
            with open(path, "rb") as f:
                raw = f.read()
            text = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            stats["rejected_filter"] += 1
            return
        text = text.replace("\r\n", "\n")
        if not _acceptable(text):
            stats["rejected_filter"] += 1
            return
        sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if sha in seen:
            stats["duplicates"] += 1
            return
        p = stats["packages"].setdefault(package, {"files": 0, "bytes": 0, "source": source})
        if source == "site-packages" and p["bytes"] + len(text) > per_package_frac * cap:
            stats["over_package_cap"] += 1
            return
        seen.add(sha)
        p["files"] += 1
        p["bytes"] += len(text.encode("utf-8"))
        total += len(text.encode("utf-8"))
        chosen.append((source, package, rel, text, sha))

    for path in _py_files(stdlib, skip_dirs=set(sites)):
        if total >= cap:
            break
        rel = os.path.relpath(path, stdlib)
        take("stdlib", "stdlib:" + rel.split(os.sep, 1)[0].removesuffix(".py") if os.sep in rel else "stdlib",
             path, "stdlib/" + rel)
    site_files = []
    for sd in sites:
        for path in _py_files(sd):
            rel = os.path.relpath(path, sd)
            top = rel.split(os.sep, 1)[0]
            site_files.append((sd, path, rel, top[:-3] if top.endswith(".py") else top))
    random.Random(seed).shuffle(site_files)
    for sd, path, rel, top in site_files:
        if total >= cap:
            break
        take("site-packages", top, path, "site-packages/" + rel)

    # Fold the per-directory stdlib entries into one row.
    std = {"files": 0, "bytes": 0, "source": "stdlib"}
    for k in [k for k in stats["packages"] if k.startswith("stdlib")]:
        v = stats["packages"].pop(k)
        std["files"] += v["files"]
        std["bytes"] += v["bytes"]
    stats["packages"]["stdlib"] = std
    stats["packages"] = {k: v for k, v in stats["packages"].items() if v["files"]}
    lic = package_licences(sites)
    for k, v in stats["packages"].items():
        if k == "stdlib":
            v.update(dist="CPython standard library", version=sys.version.split()[0], licence="PSF-2.0")
        else:
            v.update(lic.get(k, {"dist": k, "version": "", "licence": "unknown"}))

    train, held = [], []
    for source, package, rel, text, sha in chosen:
        (held if int(sha[:8], 16) % 1000 < heldout_permille else train).append((rel, text))
    stats.update(files=len(chosen), bytes=total, train_files=len(train), heldout_files=len(held),
                 train_bytes=sum(len(t.encode()) for _, t in train),
                 heldout_bytes=sum(len(t.encode()) for _, t in held))
    return train, held, stats


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--cap-mb", type=float, default=20.0)
    a = ap.parse_args(argv)
    train, held, stats = collect(cap_mb=a.cap_mb)
    top = sorted(stats["packages"].items(), key=lambda kv: -kv[1]["bytes"])[:15]
    stats["packages"] = dict(top)
    print(json.dumps(stats, indent=1))


if __name__ == "__main__":
    main()
