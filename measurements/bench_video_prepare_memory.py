"""Peak memory of preparing a video benchmark's derived data (decode, sample, JPEG-encode, write), 1x vs 10x clips.

    python measurements/bench_video_prepare_memory.py                  # kinetics400 fixture at 1x and 10x
    python measurements/bench_video_prepare_memory.py --scales 1 10 20 --key ucf101

For each scale it writes the benchmark's test fixture (tests/benchmark_fixtures/video.py, ``scale`` times the
clips) and prepares it in a **fresh process** with the config's defaults (8 frames of 224 px for the clip
classifiers, 10 for iWildCam) into an empty cache, then prints that process's peak resident memory
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``) and the clips prepared. Preparing is streamed (one clip's frames and
one batch of rows in memory), so the peak must not grow with the clips; before the streaming rewrite it grew by
~1.2 MB a clip (8 decoded 224 px frames held for the whole split). Not a timed test: run it by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PREPARE = """
import json, resource, sys, time, warnings, yaml
warnings.simplefilter("ignore")
key, copy, cache = sys.argv[1:4]
from gate.data.loaders import video as loaders
source = yaml.safe_load(open(f"{sys.argv[4]}/conf/dataset/{key}.yaml"))["source"]
start = time.perf_counter()
ds = getattr(loaders, key)(copy, source, cache_dir=cache, frame_size=224, **({} if key == "iwildcam" else {"frames": 8}))
print(json.dumps({"clips": sum(len(s) for s in ds.values()), "seconds": round(time.perf_counter() - start, 1),
                  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
"""


def measure(key: str, scale: int, work: Path, code: Path) -> dict:
    sys.path.insert(0, str(ROOT / "tests"))
    from benchmark_fixtures import video

    copy, cache = work / f"{key}-x{scale}", work / f"cache-x{scale}"
    video.FIXTURES[key](copy, scale=scale)
    out = subprocess.run([sys.executable, "-c", PREPARE, key, str(copy), str(cache), str(ROOT)], check=True,
                         capture_output=True, text=True, cwd=code,
                         env={**os.environ, "PYTHONPATH": str(code), "HF_HUB_OFFLINE": "1"})
    return {"scale": scale, **json.loads(out.stdout.strip().splitlines()[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--key", default="kinetics400", choices=["kinetics400", "ucf101", "hmdb51", "iwildcam"])
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--code", type=Path, default=ROOT, help="the source tree whose gate prepares (default: this one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        for scale in args.scales:
            print(json.dumps({"key": args.key, **measure(args.key, scale, Path(work), args.code.resolve())}))


if __name__ == "__main__":
    main()
