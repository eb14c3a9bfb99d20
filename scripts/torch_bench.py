"""PyTorch on the same GPU, for the comparisons of crates/oxiflow-cuda/examples/gpu_bench.rs:
the 10k-op scalar sin/cos chain (eager, one kernel per op) and one gradient-descent step
of an MLP 784-512-512-10, Float32, batch 256, loss = sum((y - t)^2). Medians, after
warm-up; the chain's result and the loss are read back to the host, as Oxiflow's runs
fetch them."""
import statistics
import time

import torch


def median_time(f, reps, warm=3):
    for _ in range(warm):
        f()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main():
    if not torch.cuda.is_available():
        print("torch_bench: no GPU; nothing measured")
        return
    dev = torch.device("cuda:0")
    print("torch", torch.__version__, "on", torch.cuda.get_device_name(0))
    x = torch.tensor(0.5, device=dev)

    def chain():
        t = x
        for i in range(10_000):
            t = torch.sin(t) if i % 2 == 0 else torch.cos(t)
        return t.item()

    print(f"chain of 10k scalar sin/cos (eager): {median_time(chain, 10) * 1e6 / 10_000:.2f} us/op")

    torch.manual_seed(0)
    dims = [784, 512, 512, 10]
    ws = [(torch.randn(dims[i], dims[i + 1], device=dev) * 0.05).requires_grad_() for i in range(3)]
    xb = torch.full((256, 784), 0.1, device=dev)
    yb = torch.full((256, 10), 1.0, device=dev)

    def step():
        h = xb
        for i, w in enumerate(ws):
            h = h @ w
            if i < 2:
                h = torch.relu(h)
        loss = ((h - yb) ** 2).sum()
        gs = torch.autograd.grad(loss, ws)
        with torch.no_grad():
            for w, g in zip(ws, gs):
                w -= 1e-4 * g
        return loss.item()

    print(f"MLP 784-512-512-10 f32 batch 256, one GD step: {median_time(step, 20) * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
