#!/usr/bin/env python3
"""Summarizes a gcovr JSON report (scripts/coverage.sh).

Prints line and branch coverage of src/ per folder and in total, then the
public functions (declared in the given headers) whose error returns were
not all reached: lines of the function's own body that set an error
(wf__error / wf_set_error) or return a failure (return NULL / false /
WF_ERR_* / wf_last_error() / an error status) and never ran. Errors raised
in a helper the function calls are counted at the helper, not here.

With --functions FILE (gcov's JSON, one object a line, for the library's
objects: scripts/coverage.sh), it also prints how much of src/ is code for
CPU features this machine lacks (the AVX-512 kernels on an AVX2 machine):
it can never run here, so the figures without it are the ones tests can
move. gcov's JSON names the function of every line, which tells the ISA
variants of one source line apart (reduce_isa.inc is compiled once per ISA).
"""
import json
import os
import re
import sys
from collections import defaultdict

ERROR_LINE = re.compile(
    r"wf__error\s*\(|wf_set_error\s*\(|return\s+(NULL|false|WF_ERR_\w+|wf_last_error\s*\(\s*\)|-1)\s*;"
)


def public_functions(headers):
    names = set()
    for h in headers:
        text = open(h).read()
        for m in re.finditer(r"\b(wf_[a-z0-9_]+)\s*\(", text):
            names.add(m.group(1))
    return names


def function_spans(path, names):
    """(name, first line, last line) of each public function defined in path."""
    spans = []
    lines = open(path).read().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^[A-Za-z_][\w\s*]*?\b(wf_[a-z0-9_]+)\s*\(", lines[i])
        if m and m.group(1) in names and not lines[i].rstrip().endswith(";"):
            start = i
            if "{" in lines[i] and lines[i].rstrip().endswith("}"):  # a one-line body
                spans.append((m.group(1), i + 1, i + 1, lines))
                i += 1
                continue
            while i < len(lines) and not lines[i].startswith("{"):
                if lines[i].rstrip().endswith(";"):
                    break
                i += 1
            if i < len(lines) and lines[i].startswith("{"):
                j = i
                while j < len(lines) and lines[j] != "}":
                    j += 1
                spans.append((m.group(1), start + 1, j + 1, lines))
                i = j
        i += 1
    return spans


# Code that needs a CPU feature: whole files, else functions by name.
FEATURE_FILES = {"gemm_avx512.c": "avx512f", "quantized_avx512.c": "avx512f"}
# Files that mix variants mark their AVX-512 definitions with a target-
# attribute macro: a definition whose first line holds one needs the
# feature, to the `}` that closes it (this catches the always_inline
# helpers, whose lines gcov gives no function, and helpers whose names do
# not say AVX-512). quantized_vnni.c also holds the AVX2 int8 kernel and the
# preparation every machine runs.
FEATURE_MARKERS = ((re.compile(r"\b(ATTR_512|ATTR_AVX512|VM_ATTR_AVX512|WF_FUSED_AVX512)\b"), "avx512f"),
                   (re.compile(r"\b(ATTR_VNNI|INLINE_VNNI)\b"), "avx512_vnni"))
FEATURE_NAME = re.compile(r"avx512|_512(_|$)")
# Files included once per ISA variant whose always_inline helpers have no
# function of their own: gcov merges the inlined copies of a helper's line
# into one line, its branches listed per caller in the reverse of the order
# the callers are defined (checked with GCC 12), so each variant's copies
# are one contiguous part. The features of the parts, in that order
# (reduce_isa.c includes the file for baseline, AVX2, then AVX-512).
INLINED_VARIANTS = {"reduce_isa.inc": ("avx512f", None, None)}


def cpu_flags():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


_marked_lines = {}


def marked_lines(path):
    """{line number: feature} of the definitions in path that FEATURE_MARKERS mark
    (a marked macro instantiation: its own lines only)."""
    if path not in _marked_lines:
        marked, feature, in_body, closed = {}, None, False, False
        for n, text in enumerate(open(path).read().split("\n"), 1):
            top_level = re.match(r"[A-Za-z_]", text) is not None
            ends_header = not text.strip() or text.startswith("#") or (closed and top_level)
            if feature is not None and not in_body and ends_header:
                feature = None  # no body followed: an instantiation's lines
            closed = text.rstrip().endswith(")")
            if feature is None and top_level and not text.rstrip().endswith(";"):
                for marker, needs in FEATURE_MARKERS:
                    if marker.search(text):
                        feature, in_body = needs, False
                        break
            if feature is None:
                continue
            marked[n] = feature
            if text == "}" or (not in_body and "{" in text and text.rstrip().endswith("}")):
                feature = None  # the body's end, or a one-line definition
            elif text == "{" or text.rstrip().endswith("{"):
                in_body = True
        _marked_lines[path] = marked
    return _marked_lines[path]


def needed_feature(path, function, line_number=None):
    base = os.path.basename(path)
    if base in FEATURE_FILES:
        return FEATURE_FILES[base]
    if line_number is not None and line_number in marked_lines(path):
        return marked_lines(path)[line_number]
    return "avx512f" if function and FEATURE_NAME.search(function) else None


def variant_parts(path, line):
    """(feature, branches) parts of a line: one part, or for an inlined helper's
    line of INLINED_VARIANTS, one part per ISA variant."""
    variants = INLINED_VARIANTS.get(os.path.basename(path))
    branches = line["branches"]
    if line.get("function_name") or not variants or len(branches) % len(variants):
        return [(needed_feature(path, line.get("function_name"), line["line_number"]), branches)]
    size = len(branches) // len(variants)
    return [(feature, branches[i * size:(i + 1) * size]) for i, feature in enumerate(variants)]


def merge_branches(into, branches):
    """Merges a function's branches on a line into the line's, by position
    (as gcovr merges the functions one line expands to)."""
    for k, b in enumerate(branches):
        if k == len(into):
            into.append(False)
        into[k] = into[k] or b["count"] > 0


def print_unrunnable(functions_json, root):
    """Lines and branches of src/ in code this CPU cannot run, from gcov's JSON."""
    flags = cpu_flags()
    lines = {}  # (path, line) -> {"all"|"run": [executed, branch hits by position]}
    missing = set()
    for text in open(functions_json):
        text = text.strip()
        if not text:
            continue
        for f in json.loads(text)["files"]:
            path = os.path.relpath(os.path.realpath(f["file"]), root)
            if not path.startswith("src/"):
                continue
            for ln in f["lines"]:
                entry = lines.setdefault((path, ln["line_number"]), {})
                parts = variant_parts(path, ln)
                runnable = [p for p in parts if p[0] is None or p[0] in flags]
                for feature, branches in parts:
                    if (feature, branches) in runnable:
                        continue
                    missing.add(feature)
                    if any(b["count"] > 0 for b in branches):  # ran: the order assumption is wrong
                        print("warning: %s:%d: code for %s ran; counted as runnable" % (
                            path, ln["line_number"], feature))
                        runnable.append((feature, branches))
                for kind, kept in (("all", parts), ("run", runnable)):
                    if not kept:
                        continue
                    e = entry.setdefault(kind, [False, []])
                    e[0] = e[0] or ln["count"] > 0
                    merge_branches(e[1], [b for _, branches in kept for b in branches])
    if not missing:
        return
    print()
    print("code for CPU features this machine lacks (%s) never runs here:" % ", ".join(sorted(missing)))
    for kind, label in (("all", "all of src/"), ("run", "without that code")):
        print_figures(label, [e[kind] for e in lines.values() if kind in e])
    print()
    print("without that code, per folder:")
    for folder in sorted({folder_of(path) for path, _ in lines}):
        print_figures(folder, [e["run"] for (path, _), e in lines.items()
                               if "run" in e and folder_of(path) == folder])


def folder_of(path):
    parts = path.split("/")
    return "/".join(parts[:3]) if len(parts) > 3 and parts[1] == "backend" else "/".join(parts[:2])


def print_figures(label, entries):
    """Line and branch coverage of [executed, branch hits] entries."""
    lh, lt = sum(1 for e in entries if e[0]), len(entries)
    bh, bt = sum(sum(e[1]) for e in entries), sum(len(e[1]) for e in entries)
    print("%-22s %6.1f%% %5d/%-5d %6.1f%% %5d/%-5d" % (
        label, 100.0 * lh / max(lt, 1), lh, lt, 100.0 * bh / max(bt, 1), bh, bt))


def main():
    args = sys.argv[1:]
    functions_json = None
    if "--functions" in args:
        at = args.index("--functions")
        functions_json = args[at + 1]
        del args[at:at + 2]
    report = json.load(open(args[0]))
    names = public_functions(args[1:])
    per_folder = defaultdict(lambda: [0, 0, 0, 0])  # lines hit, lines, branches hit, branches
    unreached = []
    for f in report["files"]:
        path = f["file"]
        if not path.startswith("src/"):
            continue
        folder = folder_of(path)
        counts = {}
        t = per_folder[folder]
        for ln in f["lines"]:
            if ln.get("gcovr/noncode"):
                continue
            counts[ln["line_number"]] = counts.get(ln["line_number"], 0) + ln["count"]
            for b in ln.get("branches", []):
                t[3] += 1
                t[2] += b["count"] > 0
        t[0] += sum(1 for c in counts.values() if c > 0)
        t[1] += len(counts)
        if os.path.exists(path):
            for name, first, last, lines in function_spans(path, names):
                missed = [n for n in range(first, last + 1)
                          if ERROR_LINE.search(lines[n - 1]) and counts.get(n, 1) == 0]
                total = [n for n in range(first, last + 1) if ERROR_LINE.search(lines[n - 1])]
                if missed:
                    unreached.append((name, path, len(missed), len(total), missed))
    tot = [0, 0, 0, 0]
    print("%-22s %16s %18s" % ("src folder", "lines", "branches"))
    for folder in sorted(per_folder):
        t = per_folder[folder]
        for k in range(4):
            tot[k] += t[k]
        print("%-22s %6.1f%% %4d/%-5d %6.1f%% %5d/%-5d" % (
            folder, 100.0 * t[0] / max(t[1], 1), t[0], t[1], 100.0 * t[2] / max(t[3], 1), t[2], t[3]))
    print("%-22s %6.1f%% %4d/%-5d %6.1f%% %5d/%-5d" % (
        "total", 100.0 * tot[0] / max(tot[1], 1), tot[0], tot[1], 100.0 * tot[2] / max(tot[3], 1),
        tot[2], tot[3]))
    print()
    print("public functions with error returns no test reached (%d):" % len(unreached))
    for name, path, missed, total, lines in sorted(unreached):
        print("  %-36s %d of %d  %s:%s" % (name, missed, total, path, ",".join(map(str, lines[:6]))))
    if functions_json:
        print_unrunnable(functions_json, os.getcwd())


if __name__ == "__main__":
    main()
