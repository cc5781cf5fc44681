"""One run of the embedding server's benchmark beside its peers: weft's
bench_embed_server (float32 and bfloat16) and bench/peers/embed_server.py
(ONNX Runtime and JAX, each with one batching thread and with two, all
packing a pass's sentences end to end as weft's server does, or padding
each to its length bucket if asked), one after the other, then one table
of sentences per second and CPU ms per sentence per client count, with
weft float32's ratios to each peer's better configuration at that client
count (> 1: weft better). CPU ms per sentence says more than throughput
on a shared machine. With ROUNDS > 1 the four runs are repeated
in turn and each cell is the best round (most sentences/s, least CPU ms):
on a machine whose speed drifts, every peer then gets its share of the
good minutes.

    python bench/embed_compare.py BUILD_DIR [seconds per client count = 3] [ROUNDS = 1]
                                  [peers' batching: packed | padded = packed]

Run it with the bench venv's python (scripts/bench-setup.sh), which has the
peers and the model package.
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(label, cmd):
    """Runs one benchmark; returns {clients: (sentences/s, CPU ms/sent)}."""
    out = subprocess.run(cmd, capture_output=True, text=True)
    text = out.stdout + out.stderr
    print("## %s\n%s" % (label, text.strip()))
    rows = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0] in ("1", "4", "16"):
            try:
                rows[int(parts[0])] = (float(parts[1]), float(parts[-1]))
            except ValueError:
                pass
    return rows


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build/release"
    seconds = sys.argv[2] if len(sys.argv) > 2 else "3"
    server = os.path.join(build, "bench_embed_server")
    peer = os.path.join(HERE, "peers", "embed_server.py")
    env_venv = os.path.dirname(os.path.dirname(sys.executable))
    os.environ.setdefault("WEFT_PY_VENV", env_venv)
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    batching = sys.argv[4] if len(sys.argv) > 4 else "packed"
    runs = [
        ("weft f32", "weft float32", [server, seconds]),
        ("weft bf16", "weft bfloat16", [server, seconds, "bfloat16"]),
    ]
    for family, key in (("ORT", "onnxruntime"), ("JAX", "jax")):
        for workers in ("1", "2"):
            runs.append(("%s x%s" % (family, workers),
                         "%s, %s batching thread(s), %s" % (family, workers, batching),
                         [sys.executable, peer, key, seconds, workers, batching]))
    families = [("ONNX Runtime", ("ORT x1", "ORT x2")), ("JAX", ("JAX x1", "JAX x2"))]
    best = {name: {} for name, _, _ in runs}
    for round_index in range(rounds):
        for name, label, cmd in runs:
            rows = run("%s (round %d of %d)" % (label, round_index + 1, rounds), cmd)
            for clients, (rate, cpu) in rows.items():
                old = best[name].get(clients)
                best[name][clients] = (max(rate, old[0]), min(cpu, old[1])) if old else (rate, cpu)
    results = [(name, best[name]) for name, _, _ in runs]
    print("\nsentences/s (CPU ms per sentence), best of %d round(s); load average %.1f after"
          % (rounds, os.getloadavg()[0]))
    print("%-8s" % "clients" + "".join("%16s" % name for name, _ in results) +
          "   weft f32 / the peer's better (sent/s; CPU)")
    for clients in (1, 4, 16):
        cells, ratios = [], []
        for _, rows in results:
            r = rows.get(clients)
            cells.append("%16s" % ("%.1f (%.2f)" % r if r else "-"))
        f32 = best["weft f32"].get(clients)
        for family, names in families:
            got = [best[n][clients] for n in names if clients in best[n]]
            if f32 and got:
                rate, cpu = max(r[0] for r in got), min(r[1] for r in got)
                ratios.append("%s %.2f; %.2f" % (family, f32[0] / rate, cpu / f32[1]))
        print("%-8d" % clients + "".join(cells) + "   " + ", ".join(ratios))


if __name__ == "__main__":
    main()
