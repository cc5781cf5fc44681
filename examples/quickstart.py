"""The README's first Python program: four threads train with one compiled step."""
import threading
import weft as mx

def loss(w, x, y):
    return mx.mean(mx.square(x @ w - y))

step = mx.compile(mx.value_and_grad(loss))   # traced once, shared by every thread
x = mx.random.normal((64, 8), key=mx.random.key(0))
w_true = mx.arange(8, dtype=mx.float32)
y = x @ w_true

def train(out):
    w = mx.zeros((8,))
    for _ in range(200):
        value, g = step(w, x, y)
        w = w - 0.1 * g
    out.append(mx.abs(w - w_true).max().item())

results = []
threads = [threading.Thread(target=train, args=(results,)) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print(results, mx.compile_stats(step))  # 4 small errors; one trace for all threads
