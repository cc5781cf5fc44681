#!/usr/bin/env python3
"""Issue 26's convolution layers, weft beside jax.jit and MLX's CPU backend,
in one run and one table: build/release/bench_conv for weft and
bench/peers/conv.py for each peer (in the bench venv), on the same number
of threads, GFLOP/s of the forward and of the backward (both cotangents;
the forward timed apart and subtracted), with the ratios weft / peer.
weft's input and weight cotangents and its GEMM on the product of the same
size are shown too.

    python3 bench/conv_compare.py [--threads 1] [--repeats 5] [--mlx-repeats 2]
        [--rounds 1] [--clock cpu|wall] [--build build/release]
        [--python build/bench-venv/bin/python]

--rounds N runs weft and JAX N times in turn (MLX once) and keeps each
rate's best round: on a machine whose speed drifts over minutes, both get
their share of the good minutes.

With one thread every program runs pinned to one core (taskset) and is
timed by default by its process's CPU time, so a machine shared with other
work still gives one core's rates; with more threads the default is the
wall clock (meaningful on a quiet machine only; --clock cpu then gives
GFLOP per CPU-second of all threads). uptime's load is printed before and
after. Runs with the system Python alone.
"""
import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME_WIDTH = 32


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run(argv, env, timeout):
    """stdout of argv, or None (the reason printed) when it failed."""
    full = dict(os.environ)
    full.update(env)
    try:
        proc = subprocess.run(argv, cwd=ROOT, env=full, capture_output=True, text=True,
                              timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"# {argv[0]}: {e}", file=sys.stderr)
        return None
    if proc.returncode != 0:
        print(f"# {' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[-400:]}",
              file=sys.stderr)
        return None
    return proc.stdout


def parse(text, columns):
    """{layer: [floats]} from lines of a 32-wide name and numbers."""
    rows = {}
    for line in (text or "").splitlines():
        if line.startswith("#") or len(line) <= NAME_WIDTH:
            continue
        name, rest = line[:NAME_WIDTH].strip(), line[NAME_WIDTH:].split()
        try:
            values = [float(v) for v in rest]
        except ValueError:
            continue  # a header, or "wrong result: ..."
        if len(values) >= columns:
            rows[name] = values
    return rows


def best_rates(runs, rate_columns):
    """{layer: values} with each rate column the best over the runs."""
    best = {}
    for rows in runs:
        for name, values in rows.items():
            if name not in best:
                best[name] = list(values)
                continue
            for c in rate_columns:
                best[name][c] = max(best[name][c], values[c])
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--mlx-repeats", type=int, default=2,
                    help="MLX's CPU convolutions are slow: fewer repeats")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--clock", choices=("cpu", "wall"), default=None,
                    help="process CPU time or wall clock (default: cpu for one thread)")
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--python", default="build/bench-venv/bin/python")
    args = ap.parse_args()

    one = args.threads == 1
    clock_name = args.clock or ("cpu" if one else "wall")
    cpu_time = ["--cpu-time"] if clock_name == "cpu" else []
    pin = ["taskset", "-c", "0"]
    threads = str(args.threads)
    peer_env = {"OMP_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads,
                "MKL_NUM_THREADS": threads}
    if one:  # XLA's CPU client otherwise uses every core
        peer_env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    else:
        pin = ["taskset", "-c", f"0-{min(args.threads, os.cpu_count() or 1) - 1}"]
    clock = "process CPU time" if cpu_time else "wall clock"
    print(f"# conv_compare: float32, {threads} thread(s), {clock}; GFLOP/s (2 x multiply-adds)")
    print(f"# load before: {load()}")

    script = os.path.join("bench", "peers", "conv.py")
    weft_runs, jax_runs = [], []
    for _ in range(max(1, args.rounds)):
        weft_runs.append(parse(run(pin + [os.path.join(args.build, "bench_conv")] + cpu_time +
                                   [str(args.repeats)], {"WEFT_NUM_THREADS": threads}, 900), 8))
        jax_runs.append(parse(run(pin + [args.python, script, "jax", str(args.repeats)] +
                                  cpu_time, peer_env, 1800), 4))
    weft = best_rates(weft_runs, (1, 3, 4, 5, 6))
    peers = {"jax": best_rates(jax_runs, (1, 3)),
             "mlx": parse(run(pin + [args.python, script, "mlx", str(args.mlx_repeats)] +
                              cpu_time, peer_env, 1800), 4)}
    if args.rounds > 1:
        print(f"# best of {args.rounds} rounds of weft and JAX (MLX: one)")
    print(f"# load after:  {load()}")

    def cell(v):
        return f"{v:7.1f}" if v is not None else "      -"

    def ratio(a, b):
        return f"{a / b:6.2f}" if a is not None and b else "     -"

    print(f"{'layer':{NAME_WIDTH}s} | {'weft':>7s} {'jax':>7s} {'mlx':>7s} {'/jax':>6s} "
          f"{'/mlx':>6s} | {'weft':>7s} {'jax':>7s} {'mlx':>7s} {'/jax':>6s} {'/mlx':>6s} | "
          f"{'dx':>7s} {'dw':>7s} {'gemm':>7s} {'bwd/gemm':>8s}")
    print(f"{'':{NAME_WIDTH}s} | {'forward GFLOP/s':^38s} | {'backward GFLOP/s':^38s} |")
    for name in weft or {}:
        w = weft[name]
        wf, wb, wdx, wdw, wg = w[1], w[3], w[4], w[5], w[6]
        j, m = peers["jax"].get(name), peers["mlx"].get(name)
        jf, jb = (j[1], j[3]) if j else (None, None)
        mf, mb = (m[1], m[3]) if m else (None, None)
        print(f"{name:{NAME_WIDTH}s} | {cell(wf)} {cell(jf)} {cell(mf)} {ratio(wf, jf)} "
              f"{ratio(wf, mf)} | {cell(wb)} {cell(jb)} {cell(mb)} {ratio(wb, jb)} "
              f"{ratio(wb, mb)} | {cell(wdx)} {cell(wdw)} {cell(wg)} {ratio(wb, wg):>8s}")
    return 0 if weft else 1


if __name__ == "__main__":
    sys.exit(main())
