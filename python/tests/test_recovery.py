"""Recovery in the PyTorch backend: examples/torch/recover.py kills a rank mid-training;
the survivors shrink the default group and go on, then re-form it with a replacement that
receives the model (share_state); all must finish with identical parameters."""
import os
import re
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "torch" / "recover.py"


def test_shrink_then_reform_with_a_replacement():
    r = subprocess.run([sys.executable, str(EXAMPLE), "--ranks", "4", "--steps", "80", "--kill-at", "8",
                        "--timeout", "150"], env=dict(os.environ), capture_output=True, text=True, timeout=240)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "RECOVERED" in out, out
    for w in range(3):
        assert f"worker {w}: lost rank(s) [3]; shrunk to 3 ranks" in out, out
        assert re.search(rf"worker {w}: re-formed with 4 ranks", out), out
    assert re.search(r"worker 4: re-formed with 4 ranks \(rank 3\)", out), out
    digests = set(re.findall(r"done at step 80 with 4 ranks, loss [\d.]+, parameters (\w+)", out))
    assert len(digests) == 1, out
