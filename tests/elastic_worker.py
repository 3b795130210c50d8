"""A training process for the elastic tests: a small classifier trained with the client
library's scaling hook; every step it appends (rank, iteration, samples trained so far by all
workers, world size, loss, a checksum of the weights) to the file ELASTIC_RECORD names."""

import json
import os

import torch

from roundhouse.agents.client import Job
from roundhouse.agents.elastic import GradientSync
from roundhouse.agents.workloads.common import SGD, DataParallel, synthetic


def blobs(g, n):
    centres = torch.randn(4, 16, generator=g) * 0.5
    labels = torch.randint(0, 4, (n,), generator=g)
    return centres[labels] + torch.randn(n, 16, generator=g), labels


def main() -> None:
    torch.set_num_threads(1)
    job = Job.from_env().setup()
    torch.manual_seed(job.seed)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    optimizer = SGD(model.parameters(), lr=0.002, momentum=0.9)
    sync = GradientSync(model.parameters())
    job.track(model=model, optimizer=optimizer, gradient_noise=sync)
    job.resume()
    if job.world_size > 1 and not job.join_generation:
        DataParallel(model)
    data = job.elastic_data(synthetic(4096, 5, blobs), 8)
    job.on_rescale(lambda change: setattr(optimizer, "lr", optimizer.lr * change.batch_ratio**0.5))
    record = open(os.environ["ELASTIC_RECORD"], "a")
    for x, y in job.loader(data):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        noise = sync.average(data.batch_size)
        optimizer.step()
        job.report(loss=loss.item(), **noise)
        checksum = float(sum(p.detach().double().sum() for p in model.parameters()))
        row = {"rank": job.rank, "iteration": job.iteration, "samples": job.samples, "world": job.world_size, "loss": loss.item()}
        record.write(json.dumps({**row, "batch": data.batch_size, "checksum": checksum, **noise}) + "\n")
        record.flush()
    job.finish()


if __name__ == "__main__":
    main()
