#!/usr/bin/env python3
"""`make bench`: runs the issue-14 suite and writes bench/results.md and
bench/results.json.

Every benchmark is its own program: weft's side in C (build/release/suite_*,
public API only), each peer's in Python (bench/peers/*.py, one process per
framework, in the venv scripts/bench-setup.sh made). Each prints one JSON
object per line per measurement (bench/suite.h documents the fields), with
its output already checked against a reference; this script compares the
checksums across implementations, computes the figures and ratios, and
says what could not run and why. It runs with the system Python alone.

    python3 bench/run_all.py [--build build/release] [--venv build/bench-venv]
                             [--quick] [--only SECTION ...]
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = ("numpy", "jax", "mlx")
# What the peers cannot be given in the time budget, said in the tables.
MLX_NOTE = ("MLX: at most 3 repetitions (2 training steps), matmul sizes capped at 1024: its "
            "Linux CPU wheel multiplies through a reference BLAS (a few GFLOP/s)")
TORCH_NOTE = ("PyTorch: left out. Its PyPI wheel pulls in the CUDA libraries and triton "
              "(gigabytes) even for CPU use; the suite installs only from PyPI.")
SIMD_FLAGS = re.compile(r"^(sse\d?_?\d?|ssse3|avx\w*|fma|f16c|amx\w*|bmi\d|vnni\w*|sha_ni|"
                        r"vaes|vpclmulqdq|gfni)$")


# ------------------------------------------------------------------ jobs

class Job:
    """One program run: its command, extra environment, and what it printed."""

    def __init__(self, section, name, argv, env=None, timeout=300, tag=""):
        self.section, self.name, self.argv = section, name, argv
        self.env, self.timeout, self.tag = env or {}, timeout, tag
        self.records, self.values, self.infos = [], [], {}
        self.error = None  # why the program did not finish cleanly
        self.seconds = 0.0

    def run(self, removed_env=()):
        env = dict(os.environ)
        for key in removed_env:
            env.pop(key, None)
        env.update(self.env)
        start = time.monotonic()
        try:
            proc = subprocess.run(self.argv, cwd=ROOT, env=env, capture_output=True,
                                  text=True, timeout=self.timeout)
            out, err, code = proc.stdout, proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            err, code = f"timed out after {self.timeout} s", None
        except OSError as e:
            out, err, code = "", str(e), None
        self.seconds = time.monotonic() - start
        for line in out.splitlines():
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if "info" in d:
                self.infos[d["info"]] = d["value"]
            elif "value_of" in d:
                self.values.append(d)
            elif "case" in d:
                d["tag"] = self.tag
                self.records.append(d)
        if code != 0:
            tail = " ".join(err.strip().splitlines()[-3:])[-400:]
            self.error = (f"exit {code}: {tail}" if code is not None else tail) or f"exit {code}"


def weft_job(section, build, program, args=(), env=None, timeout=300, tag=""):
    return Job(section, program, [os.path.join(build, program), *map(str, args)], env, timeout,
               tag)


def peer_job(section, venv, script, fw, args=(), env=None, timeout=300, tag=""):
    py = os.path.join(venv, "bin", "python")
    return Job(section, f"{script} {fw}",
               [py, os.path.join(ROOT, "bench", "peers", script + ".py"), fw, *map(str, args)],
               env, timeout, tag)


# ------------------------------------------------------------------ header

def cpu_header():
    model, flags = "unknown", []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, val = line.partition(":")
                key = key.strip()
                if key == "model name" and model == "unknown":
                    model = val.strip()
                elif key == "flags" and not flags:
                    flags = [x for x in val.split() if SIMD_FLAGS.match(x)]
    except OSError:
        pass
    return model, flags


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def openblas_env():
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith("OPENBLAS")}


def peer_status(venv):
    """{peer: None if importable, else the reason (with pip's error)}."""
    status = {}
    py = os.path.join(venv, "bin", "python")
    errors = os.path.join(venv, "install-errors")
    for fw, module in (("numpy", "numpy"), ("jax", "jax"), ("mlx", "mlx.core")):
        if not os.path.exists(py):
            status[fw] = f"no venv at {venv} (run scripts/bench-setup.sh)"
            continue
        proc = subprocess.run([py, "-c", f"import {module}"], capture_output=True, text=True)
        if proc.returncode == 0:
            status[fw] = None
            continue
        reason = proc.stderr.strip().splitlines()[-1:] or ["import failed"]
        path = os.path.join(errors, f"{fw}.txt")
        if os.path.exists(path):
            with open(path) as f:
                reason = ["pip: " + " | ".join(f.read().strip().splitlines()[-4:])]
        status[fw] = reason[0][:500]
    return status


# ------------------------------------------------------------------ figures

def median_of(rec):
    return rec.get("median_s")


def fma_peak(jobs, tag):
    """suite_machine's float32 FMA peak of a tag's run: {threads: GFLOP/s of
    all of them, "impl": the loop}, or {} when it did not run."""
    peak = {}
    for j in jobs:
        if j.name != "suite_machine" or j.tag != tag:
            continue
        for v in j.values:
            if v["case"] == "machine/fma_peak":
                peak[1 if v["value_of"] == "gflops_1t" else 2] = v["value"]
                peak["impl"] = v["impl"]
    return peak


def speed(rec):
    """Work per second of a record (bytes, flops or items), or None."""
    t = median_of(rec)
    if not t:
        return None
    for key in ("bytes", "flops", "items"):
        if rec.get(key):
            return rec[key] / t
    return 1.0 / t


def fmt(x, digits=3):
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.{digits}g}"


def fmt_time(s):
    if s is None:
        return "—"
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


class Results:
    def __init__(self, jobs):
        self.jobs = jobs
        self.records = [r for j in jobs for r in j.records]
        self.values = [v for j in jobs for v in j.values]
        self.infos = {}
        for j in jobs:
            self.infos.update(j.infos)

    def find(self, case, impl, threads=None, tag=None):
        for r in self.records:
            if r["case"] == case and r["impl"] == impl and \
                    (threads is None or r["threads"] == threads) and \
                    (tag is None or r.get("tag") == tag):
                return r
        return None

    def value(self, case, impl, key):
        for v in self.values:
            if v["case"] == case and v["impl"] == impl and v["value_of"] == key:
                return v["value"]
        return None

    def cases(self, prefix, tag=None):
        seen = []
        for r in self.records:
            if r["case"].startswith(prefix) and (tag is None or r.get("tag") == tag) and \
                    r["case"] not in seen:
                seen.append(r["case"])
        return seen

    def rows(self, case, tag=None):
        return [r for r in self.records if r["case"] == case and
                (tag is None or r.get("tag") == tag)]


def checksum_note(rows, reference, tolerance):
    """Per row: whether its checksum agrees with the reference row's."""
    notes = {}
    ref = reference.get("checksum") if reference else None
    for r in rows:
        c = r.get("checksum")
        if r["check"] != "ok" or not c or not ref or r is reference:
            notes[id(r)] = ""
            continue
        rel = abs(c - ref) / max(abs(ref), 1e-30)
        notes[id(r)] = "agrees" if rel <= tolerance else f"DIFFERS from weft (rel {rel:.1e})"
    return notes


def check_text(r):
    return "ok" if r["check"] == "ok" else r["check"]


# ------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--venv", default=os.path.join(ROOT, "build", "bench-venv"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench"))
    ap.add_argument("--quick", action="store_true",
                    help="small sizes and 2 repetitions: checks the suite runs, not speed")
    ap.add_argument("--only", nargs="*", default=None,
                    help="sections to run (machine always runs): elementwise matmul reduce "
                         "call_overhead threads first_call train")
    args = ap.parse_args()
    wall_start = time.monotonic()

    model, simd = cpu_header()
    header = {
        "cpu_model": model, "simd": " ".join(simd), "cores": os.cpu_count(),
        "load_before": loadavg(), "openblas_env": openblas_env(),
        "weft_num_threads": os.environ.get("WEFT_NUM_THREADS", "(unset: all cores)"),
        "python": platform.python_version(), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
    peers = peer_status(args.venv)
    built, skipped = programs(args.build)

    quick = {"SUITE_REPS": "2"} if args.quick else {}
    mlx_env = {"SUITE_REPS": "2" if args.quick else "3"}
    found_coretype = os.environ.get("OPENBLAS_CORETYPE")
    coretype = found_coretype or ("SkylakeX" if "avx512f" in simd else "Haswell")
    header["coretype_used"] = coretype
    header["coretype_found"] = found_coretype

    sections = ["elementwise", "matmul", "reduce", "call_overhead", "threads", "first_call",
                "train"]
    wanted = set(args.only) if args.only else set(sections)
    small = args.quick
    jobs_plan = [("machine", weft_job("machine", args.build, "suite_machine",
                                      [64 if small else 256], quick, tag="before"))]

    def plan(section, weft_programs, peer_script, peer_args=(), weft_args=(), peer_env=None,
             timeout=300):
        if section not in wanted:
            return
        for program in weft_programs:
            jobs_plan.append((section, weft_job(section, args.build, program, weft_args,
                                                dict(quick), timeout)))
        for fw in PEERS:
            env = dict(quick)
            if fw == "mlx":
                env.update(mlx_env)
            env.update((peer_env or {}).get(fw, {}))
            jobs_plan.append((section, peer_job(section, args.venv, peer_script, fw, peer_args,
                                                env, timeout)))

    n_elem = 1 << 20 if small else 1 << 24
    plan("elementwise", ["suite_elementwise", "suite_elementwise_compiled"], "elementwise",
         [n_elem], [n_elem])
    if "matmul" in wanted:
        largest = 1024 if small else 4096
        for tag, env in (("coretype", {"OPENBLAS_CORETYPE": coretype}), ("no_coretype", {})):
            e = dict(quick)
            e.update(env)
            jobs_plan.append(("matmul", weft_job("matmul", args.build, "suite_matmul", [largest],
                                                 e, 600, tag)))
            jobs_plan.append(("matmul", peer_job("matmul", args.venv, "matmul", "numpy",
                                                 [largest], e, 600, tag)))
        for fw in ("jax", "mlx"):
            e = dict(quick)
            if fw == "mlx":
                e.update(mlx_env)
            jobs_plan.append(("matmul", peer_job("matmul", args.venv, "matmul", fw,
                                                 [largest, 512 if small else 1024], e, 600,
                                                 "coretype")))
    plan("reduce", ["suite_reduce"], "reduce", [1024 if small else 4096],
         [1024 if small else 4096])
    plan("call_overhead", ["suite_call_overhead"], "call_overhead", [500 if small else 2000],
         [500 if small else 2000])
    plan("threads", ["suite_threads"], "threads", [0.03 if small else 0.1],
         [0.03 if small else 0.1], timeout=600)
    plan("first_call", ["suite_first_call"], "first_call")
    plan("train", ["suite_train"], "train", peer_env={"mlx": {"SUITE_REPS": "2"}}, timeout=600)
    jobs_plan.append(("machine", weft_job("machine", args.build, "suite_machine",
                                          [64 if small else 256], quick, tag="after")))

    jobs = []
    for section, job in jobs_plan:
        program = os.path.basename(job.argv[0])
        if job.argv[0].endswith("python"):
            fw = job.argv[2]
            if peers.get(fw):
                job.error = f"not installed: {peers[fw]}"
                jobs.append(job)
                continue
        elif program not in built:
            job.error = skipped.get(program, f"{program} was not built")
            jobs.append(job)
            continue
        removed = ("OPENBLAS_CORETYPE",) if job.tag == "no_coretype" else ()
        print(f"== {section}: {job.name} {job.tag}".rstrip(), flush=True)
        job.run(removed)
        print(f"   {len(job.records)} records in {job.seconds:.1f} s"
              + (f"; {job.error}" if job.error else ""), flush=True)
        jobs.append(job)

    header["load_after"] = loadavg()
    header["suite_seconds"] = round(time.monotonic() - wall_start, 1)
    res = Results(jobs)
    flat, missing = figures(res, header, jobs, skipped)
    md = report(res, header, peers, jobs, flat, missing, small, coretype, found_coretype)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(md)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(flat, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote bench/results.md and bench/results.json in {header['suite_seconds']} s")
    bad = [r for r in res.records if r["check"] != "ok" and not r["check"].startswith("not run")]
    return 1 if bad else 0


def programs(build):
    """(names in benches.list, {name: why skipped} from benches.skipped)."""
    def read(name):
        try:
            with open(os.path.join(build, name)) as f:
                return [line.strip() for line in f if line.strip()]
        except OSError:
            return []
    skipped = {}
    for line in read("benches.skipped"):
        name, _, why = line.partition(": ")
        skipped[name] = f"not built: {why}"
    return set(read("benches.list")), skipped


# ------------------------------------------------------------------ the flat figures

def figures(res, header, jobs, skipped):
    """The flat results.json object and {key: why it is null}."""
    flat, missing = {}, {}

    def put(key, val, why):
        flat[key] = val
        if val is None:
            missing[key] = why

    def why_missing(case, impl):
        rec = res.find(case, impl)
        if rec is not None and rec["check"] != "ok":
            return f"{impl} {case}: {rec['check']}"
        section = case.split("/")[0]
        for j in jobs:
            weft_side = impl.startswith("weft") and j.name.startswith("suite_")
            peer_side = j.name.endswith(" " + impl.split("-")[0])
            if j.error and j.section == section and (weft_side or peer_side):
                return f"{j.name}: {j.error}"
        return f"{impl} {case}: no result"

    def speed_of(case, impl, tag=None, threads=None):
        rec = res.find(case, impl, threads, tag)
        return speed(rec) if rec and rec["check"] == "ok" else None

    def ratio(num, den):
        return num / den if num and den else None

    copy2 = speed_of("machine/copy", "memcpy", "before", 2)
    put("copy_gbps_2t", copy2 and copy2 / 1e9, why_missing("machine/copy", "memcpy"))
    for t in (1, 2):
        for kind, impl in (("copy", "memcpy"), ("read", "read-8-accumulators")):
            s = speed_of(f"machine/{kind}", impl, "before", t)
            flat[f"{kind}_gbps_{t}t"] = s and s / 1e9
    calib = [v["value"] for j in jobs if j.name == "suite_machine" and j.tag == "before"
             for v in j.values if v["value_of"] == "scaling"]
    put("calibration_scaling_2t", calib[0] if calib else None, "suite_machine did not run")
    calib_after = [v["value"] for j in jobs if j.name == "suite_machine" and j.tag == "after"
                   for v in j.values if v["value_of"] == "scaling"]
    flat["calibration_scaling_2t_after"] = calib_after[0] if calib_after else None
    peak = fma_peak(jobs, "before")
    for t in (1, 2):
        flat[f"fma_peak_gflops_{t}t"] = peak.get(t)

    g = speed_of("elementwise/gelu_erf", "weft-compiled")
    put("gelu_compiled_gbps_2t", g and g / 1e9, why_missing("elementwise/gelu_erf", "weft-compiled"))
    put("gelu_compiled_pct_copy_2t", g and copy2 and 100 * g / copy2,
        why_missing("elementwise/gelu_erf", "weft-compiled"))
    for key, case, peer in (("gelu_compiled_speedup_vs_jax", "elementwise/gelu_erf", "jax-jit"),
                            ("gelu_compiled_speedup_vs_mlx", "elementwise/gelu_erf",
                             "mlx-compiled"),
                            ("chain8_compiled_speedup_vs_jax", "elementwise/chain8", "jax-jit")):
        w, p = speed_of(case, "weft-compiled"), speed_of(case, peer)
        put(key, ratio(w, p), why_missing(case, "weft-compiled" if not w else peer))

    def pct_best_blas(size, tag):
        case = f"matmul/f32_{size}"
        w = speed_of(case, "weft", tag)
        blas = [s for s in (speed_of(case, "openblas-debian", tag),
                            speed_of(case, "numpy-openblas", tag)) if s]
        return (100 * w / max(blas) if w and blas else None,
                why_missing(case, "weft" if not w else "numpy-openblas"))
    put("matmul_1024_pct_best_blas", *pct_best_blas(1024, "coretype"))
    put("matmul_1024_pct_best_blas_no_coretype", *pct_best_blas(1024, "no_coretype"))
    put("matmul_4096_pct_best_blas", *pct_best_blas(4096, "coretype"))
    put("matmul_4096_pct_best_blas_no_coretype", *pct_best_blas(4096, "no_coretype"))
    rec = res.find("matmul/f32_4096", "weft", None, "coretype")
    w4096 = speed_of("matmul/f32_4096", "weft", "coretype")
    put("matmul_4096_pct_fma_peak",
        w4096 and rec and peak.get(rec["threads"]) and 100 * w4096 / 1e9 / peak[rec["threads"]],
        why_missing("matmul/f32_4096", "weft") if not w4096 else "suite_machine's FMA peak missing")
    put("bf16_matmul_speedup_vs_f32",
        ratio(speed_of("matmul/bf16_1024", "weft", "coretype"),
              speed_of("matmul/f32_1024", "weft", "coretype")),
        why_missing("matmul/bf16_1024", "weft"))

    rec = res.find("call_overhead/call10_16", "weft-compiled")
    put("call_overhead_us",
        rec and rec["check"] == "ok" and rec["median_s"] and 1e6 * rec["median_s"] / rec["items"]
        or None, why_missing("call_overhead/call10_16", "weft-compiled"))

    def calls_per_s(case, impl, threads):
        return speed_of(case, impl, None, threads)
    base = "threads/call10_1024"
    put("thread_scaling_2t", ratio(calls_per_s(f"{base}_default_stream", "weft", 2),
                                   calls_per_s(f"{base}_default_stream", "weft", 1)),
        why_missing(f"{base}_default_stream", "weft"))
    put("thread_scaling_2t_own_stream", ratio(calls_per_s(f"{base}_own_stream", "weft", 2),
                                              calls_per_s(f"{base}_own_stream", "weft", 1)),
        why_missing(f"{base}_own_stream", "weft"))
    put("speedup_vs_serialized_2t", ratio(calls_per_s(f"{base}_default_stream", "weft", 2),
                                          calls_per_s(f"{base}_serialized", "weft", 2)),
        why_missing(f"{base}_default_stream", "weft"))
    serve = "threads/serve_mlp_b1_default_stream"
    put("serve_b1_default_stream_scaling_2t",
        ratio(calls_per_s(serve, "weft", 2), calls_per_s(serve, "weft", 1)),
        why_missing(serve, "weft"))
    calib_t = res.value("calibration/compute_2t", "spin-loop", "scaling")
    flat["threads_calibration_scaling_2t"] = calib_t

    traces = res.value("first_call/mlp_b32_8t", "weft", "traces")
    put("first_call_traces_8t", traces, why_missing("first_call/mlp_b32_8t", "weft"))
    for fw, impl in (("jax", "jax-jit"), ("mlx", "mlx-compiled")):
        flat[f"first_call_traces_8t_{fw}"] = res.value("first_call/mlp_b32_8t", impl, "traces")

    for key, case, peer in (("mlp_step_speedup_vs_jax", "train/mlp_adamw", "jax-jit"),
                            ("mlp_step_speedup_vs_mlx", "train/mlp_adamw", "mlx-compiled"),
                            ("transformer_step_speedup_vs_jax", "train/transformer_fwd_bwd",
                             "jax-jit"),
                            ("transformer_step_speedup_vs_mlx", "train/transformer_fwd_bwd",
                             "mlx-compiled")):
        w, p = speed_of(case, "weft"), speed_of(case, peer)
        put(key, ratio(w, p), why_missing(case, "weft" if not w else peer))

    for key in ("cpu_model", "simd", "cores", "load_before", "load_after", "suite_seconds",
                "coretype_used", "coretype_found", "weft_num_threads"):
        flat[key] = header.get(key)
    flat["openblas_env"] = " ".join(f"{k}={v}" for k, v in header["openblas_env"].items()) or None
    for key in ("openblas_debian_corename", "openblas_numpy_corename"):
        flat[key] = res.infos.get(key)
    return flat, missing


# ------------------------------------------------------------------ the report

def report(res, header, peers, jobs, flat, missing, small, coretype, found_coretype):
    out = []
    w = out.append
    w("# weft benchmarks, side by side (`make bench`)\n")
    w("Written by `bench/run_all.py`; every figure below comes from one run on one machine. "
      "Each program checks its output against a reference before timing (a wrong answer is "
      "never timed); the *output* column also compares each peer's checksum (sum of |output|) "
      "with weft's. Times are the median of the repetitions, with min–max. Ratios are weft's "
      "speed over the other's: above 1 weft is faster.\n")
    if small:
        w("**Quick run (`--quick`): small sizes, 2 repetitions. These figures only show the "
          "suite runs; they are not comparable with the issue's targets.**\n")
    w("## Machine\n")
    w(f"- CPU: {header['cpu_model']}; {header['cores']} cores")
    amx = [f for f in header["simd"].split() if f.startswith("amx")]
    w(f"- SIMD: {header['simd']}; AMX: {'yes (' + ' '.join(amx) + ')' if amx else 'no'}")
    w(f"- Load average before: {header['load_before']}; after: {header['load_after']}")
    env = header["openblas_env"]
    w(f"- OPENBLAS_* variables as found: "
      f"{', '.join(f'{k}={v}' for k, v in env.items()) if env else 'none set'}")
    w(f"- OpenBLAS core chosen: Debian's {res.infos.get('openblas_debian_corename', '?')} "
      f"({res.infos.get('openblas_debian_config', '?')}); NumPy's "
      f"{res.infos.get('openblas_numpy_corename', '?')} "
      f"({res.infos.get('openblas_numpy_config', '?')})")
    w(f"- OPENBLAS_CORETYPE for the \"with\" runs: {coretype} "
      f"({'as found' if found_coretype else 'chosen by the suite: none was set'}); the "
      "\"without\" runs unset it")
    w(f"- WEFT_NUM_THREADS: {header['weft_num_threads']}; peers use their defaults "
      "(all cores)")
    for tag in ("before", "after"):
        parts = []
        for kind, impl in (("copy", "memcpy"), ("read", "read-8-accumulators")):
            for t in (1, 2):
                r = res.find(f"machine/{kind}", impl, t, tag)
                s = speed(r) if r else None
                parts.append(f"{kind} {t}T {fmt(s and s / 1e9)} GB/s" +
                             (f" ({fmt(r['min_s'] and r['bytes'] / r['max_s'] / 1e9)}–"
                              f"{fmt(r['bytes'] / r['min_s'] / 1e9)})" if r and r['min_s'] else ""))
        peak = fma_peak(jobs, tag)
        if peak:
            parts.append(f"float32 FMA peak ({peak['impl']}) " + ", ".join(
                f"{t}T {fmt(peak.get(t))} GFLOP/s" for t in (1, 2)))
        cal = [v["value"] for j in jobs if j.name == "suite_machine" and j.tag == tag
               for v in j.values if v["value_of"] == "scaling"]
        calrec = res.find("calibration/compute_2t", "spin-loop", 2, tag)
        parts.append(f"raw 2-thread calibration (compute loop 1→2 threads) "
                     f"{fmt(cal[0] if cal else None)}x"
                     + (f" [{calrec['note']}]" if calrec else ""))
        w(f"- Measured {tag} the benchmarks: " + "; ".join(parts))
    w(f"- Peers: " + "; ".join(f"{fw} " + ("installed" if peers.get(fw) is None
                                           else f"NOT INSTALLED: {peers[fw]}")
                               for fw in PEERS) +
      f"; versions: {', '.join(v for k, v in res.infos.items() if k.endswith('_version'))}")
    w(f"- {TORCH_NOTE}")
    w(f"- {MLX_NOTE}")
    w(f"- Whole suite: {header['suite_seconds']} s. The machine may be shared with other "
      "work: read every figure against the load average and the calibration above.\n")

    w("## Headline figures (bench/results.json)\n")
    w("| key | value |")
    w("| --- | --- |")
    for key in KEYS:
        w(f"| `{key}` | {fmt(flat.get(key), 4)} |")
    if missing:
        w("\nMissing figures (null in results.json) and why:\n")
        for key, why in missing.items():
            w(f"- `{key}`: {why}")
    w("")

    elements = "1M" if small else "16M"
    square = "1024 x 1024" if small else "4096 x 4096"
    simple_section(res, out, f"1. Fused element-wise, {elements} float32 (GB/s: read + write "
                   "bytes; 2 threads)",
                   "elementwise/", "GB/s", 1e9, lambda rows: pick(rows, "weft-compiled",
                                                                  "weft-ops"),
                   pct_copy=flat.get("copy_gbps_2t"))
    for tag, title in (("coretype", f"with OPENBLAS_CORETYPE={coretype}"),
                       ("no_coretype", "without OPENBLAS_CORETYPE")):
        simple_section(res, out, f"2. Matmul (GFLOP/s), {title}", "matmul/", "GFLOP/s", 1e9,
                       lambda rows: pick(rows, "weft"), tag=tag, blas_pct=True,
                       tolerance=lambda case: 1e-2 if "bf16" in case else 1e-4)
    simple_section(res, out, f"3. Reductions of {square} float32 (GB/s read)", "reduce/",
                   "GB/s", 1e9, lambda rows: pick(rows, "weft"))
    simple_section(res, out, "4. Compiled-call overhead: the 10-op function on 16 floats",
                   "call_overhead/", "µs/call", None, lambda rows: pick(rows, "weft-compiled"),
                   per_item=True)
    thread_section(res, out)
    first_call_section(res, out)
    simple_section(res, out, "7. Training steps (steps per second; checksum: the first loss)",
                   "train/", "steps/s", 1.0, lambda rows: pick(rows, "weft"),
                   tolerance=lambda case: 5e-4)

    w("## Programs\n")
    w("| program | section | seconds | result |")
    w("| --- | --- | --- | --- |")
    for j in jobs:
        w(f"| `{j.name}`{' (' + j.tag + ')' if j.tag else ''} | {j.section} | "
          f"{j.seconds:.1f} | {j.error or f'{len(j.records)} records'} |")
    w("")
    return "\n".join(out)


KEYS = ["copy_gbps_2t", "calibration_scaling_2t", "gelu_compiled_gbps_2t",
        "gelu_compiled_pct_copy_2t", "gelu_compiled_speedup_vs_jax",
        "gelu_compiled_speedup_vs_mlx", "chain8_compiled_speedup_vs_jax",
        "matmul_1024_pct_best_blas", "matmul_1024_pct_best_blas_no_coretype",
        "matmul_4096_pct_best_blas", "matmul_4096_pct_fma_peak", "bf16_matmul_speedup_vs_f32",
        "call_overhead_us",
        "thread_scaling_2t", "speedup_vs_serialized_2t", "serve_b1_default_stream_scaling_2t",
        "first_call_traces_8t", "mlp_step_speedup_vs_jax", "mlp_step_speedup_vs_mlx",
        "transformer_step_speedup_vs_jax"]


def pick(rows, *impls):
    """The first row of `impls` (in that order) that passed its check."""
    for impl in impls:
        for r in rows:
            if r["impl"] == impl and r["check"] == "ok" and r["median_s"]:
                return r
    return None


def simple_section(res, out, title, prefix, unit, scale, reference, tag=None, blas_pct=False,
                   per_item=False, pct_copy=None, tolerance=lambda case: 1e-4):
    w = out.append
    cases = res.cases(prefix, tag)
    w(f"## {title}\n")
    if not cases:
        w("Nothing ran (see Programs below).\n")
        return
    extra = " % of copy |" if pct_copy else " % of best BLAS |" if blas_pct else ""
    w(f"| case | implementation | reps | median | min–max | {unit} |{extra} weft ÷ this | output |")
    w("| --- | --- | --- | --- | --- | --- |" + (" --- |" if extra else "") + " --- | --- |")
    for case in cases:
        rows = res.rows(case, tag)
        ref = reference(rows)
        agree = checksum_note(rows, ref, tolerance(case))
        best_blas = None
        if blas_pct:
            blas = [speed(r) for r in rows if r["impl"] in ("openblas-debian", "numpy-openblas")
                    and r["check"] == "ok" and speed(r)]
            best_blas = max(blas) if blas else None
        for r in rows:
            s = speed(r) if r["check"] == "ok" else None
            if per_item:
                figure = fmt(r["median_s"] and 1e6 * r["median_s"] / r["items"])
            elif unit == "steps/s":
                figure = fmt(r["median_s"] and 1.0 / r["median_s"])
            else:
                figure = fmt(s and s / scale)
            per = r["items"] if per_item and r["items"] else 1  # times per call
            cells = [f"`{case.split('/', 1)[1]}`", r["impl"], str(r["reps"]),
                     fmt_time(r["median_s"] and r["median_s"] / per),
                     f"{fmt_time(r['min_s'] / per)}–{fmt_time(r['max_s'] / per)}"
                     if r["min_s"] else "—", figure]
            if pct_copy:
                cells.append(fmt(s and 100 * s / 1e9 / pct_copy))
            elif blas_pct:
                cells.append(fmt(s and best_blas and 100 * s / best_blas))
            rs = speed(ref) if ref else None
            cells.append("—" if r is ref or not s or not rs else fmt(rs / s))
            note = check_text(r)
            if agree.get(id(r)):
                note += f"; {agree[id(r)]}"
            if r.get("note"):
                note += f"; {r['note']}"
            cells.append(note.replace("|", "/"))
            out.append("| " + " | ".join(cells) + " |")
    out.append("")


def thread_section(res, out):
    w = out.append
    w("## 5. Thread scaling: the same compiled function from 1, 2, 4, 8 threads\n")
    w("Throughput in calls per second, all threads together (median of the repetitions); "
      "in brackets the scaling over 1 thread of the same row. Private inputs per thread. "
      "weft: `default_stream` (every thread on the shared default stream), `own_stream` "
      "(a stream per thread), `serialized` (every call behind one mutex in the benchmark, as "
      "bindings protect MLX today). Peers: free-running Python threads "
      "(`default_stream` rows) and one threading.Lock (`serialized`).\n")
    cal = res.value("calibration/compute_2t", "spin-loop", "scaling")
    w(f"Raw 2-thread calibration measured by suite_threads just before: {fmt(cal)}x.\n")
    cases = res.cases("threads/")
    if not cases:
        w("Nothing ran (see Programs below).\n")
        return
    w("| case | implementation | 1 thread | 2 threads | 4 threads | 8 threads | output |")
    w("| --- | --- | --- | --- | --- | --- | --- |")
    for case in cases:
        impls = []
        for r in res.rows(case):
            if r["impl"] not in impls:
                impls.append(r["impl"])
        for impl in impls:
            base = res.find(case, impl, 1)
            b = speed(base) if base and base["check"] == "ok" else None
            cells, checks, notes = [], set(), []
            for t in (1, 2, 4, 8):
                r = res.find(case, impl, t)
                if not r:
                    cells.append("—")
                    continue
                checks.add(check_text(r))
                if r.get("note") and t == 8:
                    notes.append(r["note"])
                s = speed(r) if r["check"] == "ok" else None
                cells.append(f"{fmt(s)} ({fmt(s / b if s and b else None)}x)" if s else "—")
            note = "; ".join(sorted(checks) + notes).replace("|", "/")
            w(f"| `{case.split('/', 1)[1]}` | {impl} | " + " | ".join(cells) + f" | {note} |")
    w("")


def first_call_section(res, out):
    w = out.append
    w("## 6. First call of a freshly compiled function (served MLP, batch 32)\n")
    cases = res.cases("first_call/")
    if not cases:
        w("Nothing ran (see Programs below).\n")
        return
    w("| case | implementation | reps | median wall | min–max | traces (most per function) "
      "| output |")
    w("| --- | --- | --- | --- | --- | --- | --- |")
    for case in cases:
        for r in res.rows(case):
            traces = res.value(case, r["impl"], "traces")
            cells = [f"`{case.split('/', 1)[1]}`", r["impl"], str(r["reps"]),
                     fmt_time(r["median_s"]),
                     f"{fmt_time(r['min_s'])}–{fmt_time(r['max_s'])}" if r["min_s"] else "—",
                     fmt(traces), (check_text(r) + (f"; {r['note']}" if r.get("note") else
                                                    "")).replace("|", "/")]
            w("| " + " | ".join(cells) + " |")
    w("")


if __name__ == "__main__":
    sys.exit(main())
