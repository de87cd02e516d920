"""A dynsim sweep with its points as Ray tasks: the output folder equals `dynsim sweep`'s.

    python examples/ray_sweep.py sweeps/routers.toml --out sweep-out            # a local Ray
    python examples/ray_sweep.py sweeps/routers.toml --out sweep-out --address auto  # a cluster

Each task runs one point (`dynsim.sweep(..., shard=(i, n))` with n the number of points, one
CPU each) and returns that shard's results.json; the driver merges them with `dynsim.merge`,
which renders results.json, results.csv and the plots exactly as an unsharded `dynsim sweep`
does (every point is deterministic). Needs `pip install . ray` (the dynsim package on every
node). On a multi-node cluster the sweep file and the scenarios and traces it names must be
at the same path on every node (a shared filesystem, or the same checkout).
"""

import argparse
import sys

import ray

import dynsim


@ray.remote(num_cpus=1)
def run_point(sweep, index, count, sets):
    """Point `index` of the sweep (shard index/count of count points): its results.json."""
    return dynsim.sweep(sweep, shard=(index, count), jobs=1, set=sets)["results.json"]


def ray_sweep(sweep, out, sets=None):
    """Runs every point of `sweep` as a Ray task, writes the merged folder to `out` and
    returns its files by name."""
    count = dynsim.sweep_points(sweep, set=sets)
    shards = ray.get([run_point.remote(sweep, i, count, sets) for i in range(count)])
    return dynsim.merge(shards, out=out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep", help="the sweep file (TOML)")
    parser.add_argument("--out", required=True, help="the output folder")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="overrides a key of the base scenario, as dynsim sweep --set (repeatable)",
    )
    parser.add_argument("--address", help="a Ray cluster to join (default: start a local one)")
    parser.add_argument(
        "--num-cpus", type=int, default=None, help="CPUs of the local Ray (default: all)"
    )
    args = parser.parse_args(argv)
    if args.address:
        ray.init(address=args.address)
    else:
        ray.init(num_cpus=args.num_cpus, include_dashboard=False)
    try:
        files = ray_sweep(args.sweep, args.out, args.set)
    except dynsim.ScenarioError as e:
        print("dynsim: %s" % e, file=sys.stderr)
        return 2
    finally:
        ray.shutdown()
    count = dynsim.sweep_points(args.sweep, set=args.set)
    print("%d of %d points -> %s: %s" % (count, count, args.out, ", ".join(files)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
